//! LZF compression in liblzf's format, the one RDB files (and DUMP payloads) use for strings
//! over 20 bytes.
//!
//! Why not the `lzf` crate's `compress`: it zeroes a fresh 512 KiB hash table on every call
//! (`lzf-rust` a 256 KiB one on the stack), so compressing a 64-byte value cost about as much
//! as a memset of half a megabyte. A snapshot compresses every string over 20 bytes it writes: under a
//! 100k SET/s growth run that memset took 60% of the shard's time. (Redis compresses strings
//! over 20 bytes, so redis-benchmark's default 3-byte values never showed it.) Here each thread keeps one
//! table, and a call empties it in O(1) by raising the base its entries are stored above, so a
//! call costs O(input).
//!
//! The output is what liblzf's `lzf_compress`, as Redis builds it (HLOG 16, VERY_FAST), gives
//! with a zeroed table: DUMP payloads match Redis's byte for byte. (Redis leaves its table
//! uninitialized; a stale entry can only point into the current input, where it may pick a
//! different but valid match.) Decompression stays with the `lzf` crate.
//!
//! # The format (what `lzf_decompress` reads)
//! A sequence of items, each starting with a control byte `c`:
//! - `c < 32`: a literal run of `c + 1` bytes, which follow.
//! - otherwise a back reference: `len = c >> 5` (when 7, plus the next byte), `off` = the low 5
//!   bits of `c` followed by the next byte (13 bits); it copies `len + 2` bytes starting
//!   `off + 1` bytes back in the output (the copy may overlap what it writes).

/// Longest literal run one control byte describes.
const MAX_LIT: usize = 1 << 5;
/// A reference's offset field (13 bits): distances up to this.
const MAX_OFF: usize = 1 << 13;
/// Longest match one reference copies.
const MAX_REF: usize = (1 << 8) + (1 << 3);
/// Bits of the hash table index (liblzf's `HLOG`).
const HLOG: u32 = 16;
/// Output buffer capacity kept between calls: a thread that once compressed a large string
/// does not hold its size for good.
const KEEP_OUT: usize = 1 << 20;

/// An LZF compressor, one per thread ([`with`]): its table and output buffer serve every call.
#[derive(Debug, Default)]
pub struct Compressor {
    /// Per hash of three bytes, `base` plus the last position seen plus one; an entry not
    /// above `base` is empty (it is from an earlier call).
    table: Vec<u32>,
    /// Where this call's entries start (see [`Compressor::compress`]).
    base: u32,
    /// The last result.
    out: Vec<u8>,
}

thread_local! {
    static COMPRESSOR: std::cell::RefCell<Compressor> = std::cell::RefCell::default();
}

/// Runs `f` with this thread's compressor.
pub fn with<R>(f: impl FnOnce(&mut Compressor) -> R) -> R {
    COMPRESSOR.with_borrow_mut(f)
}

impl Compressor {
    /// Hands `take` `input` compressed as liblzf's `lzf_compress(input, n, out, limit)` with a
    /// zeroed table compresses it (Redis's RDB strings use `limit` = n - 4), and returns what
    /// `take` returns; `None` where liblzf returns 0: the result would not fit in `limit` bytes.
    pub fn compress<R>(
        &mut self,
        input: &[u8],
        limit: usize,
        take: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let n = input.len();
        // Positions go into the table as u32; a longer string is kept as it is.
        if n == 0 || limit == 0 || n >= (u32::MAX / 2) as usize {
            return None;
        }
        if self.table.is_empty() {
            self.table = vec![0; 1 << HLOG];
        }
        // Each call's entries are above `base` and at most `base + n`; moving `base` past them
        // afterwards empties the table in O(1). Only when it would wrap is the table cleared.
        if u64::from(self.base) + n as u64 + 1 > u64::from(u32::MAX) {
            self.table.fill(0);
            self.base = 0;
        }
        let fits = self.encode(input, limit);
        self.base += n as u32 + 1;
        let r = fits.then(|| take(&self.out));
        // The buffer stays for the next string, unless a large one made it large.
        if self.out.capacity() > KEEP_OUT {
            self.out = Vec::new();
        }
        r
    }

    /// liblzf's loop (VERY_FAST, HLOG 16), writing `self.out`; false where it gives up.
    /// `out.len()` plays its output pointer: a pushed 0 is the control byte of a literal run
    /// to come, filled in (or popped, when the run stays empty) as the run ends.
    fn encode(&mut self, input: &[u8], limit: usize) -> bool {
        let (n, base) = (input.len(), self.base);
        let (table, out) = (&mut self.table, &mut self.out);
        let slot = |h: u32| {
            ((h >> (24 - HLOG)).wrapping_sub(h.wrapping_mul(5)) & ((1 << HLOG) - 1)) as usize
        };
        let first = |i: usize| u32::from(input[i]) << 8 | u32::from(input[i + 1]);
        let next = |h: u32, i: usize| h << 8 | u32::from(input[i + 2]);
        let end_run = |out: &mut Vec<u8>, lit: usize| {
            let at = out.len() - lit - 1;
            out[at] = (lit as u8).wrapping_sub(1);
            if lit == 0 {
                out.pop();
            }
        };
        out.clear();
        out.push(0);
        let mut lit = 0;
        let mut ip = 0;
        let mut h = if n >= 2 { first(0) } else { 0 };
        while ip + 2 < n {
            h = next(h, ip);
            let s = slot(h);
            let seen = table[s];
            table[s] = base + ip as u32 + 1;
            // Only this call's entries count; position 0 is never referenced (liblzf: `ref >
            // in_data`).
            let r = (seen > base + 1).then(|| (seen - base - 1) as usize);
            let found = r.filter(|&r| {
                ip - r - 1 < MAX_OFF
                    && input[r + 2] == input[ip + 2]
                    && input[r..r + 2] == input[ip..ip + 2]
            });
            let Some(r) = found else {
                if out.len() >= limit {
                    return false;
                }
                lit += 1;
                out.push(input[ip]);
                ip += 1;
                if lit == MAX_LIT {
                    end_run(out, lit);
                    lit = 0;
                    out.push(0);
                }
                continue;
            };
            let off = ip - r - 1;
            let maxlen = (n - ip - 2).min(MAX_REF);
            if out.len() + 4 >= limit && out.len() - usize::from(lit == 0) + 4 >= limit {
                return false;
            }
            end_run(out, lit);
            // The match's length: liblzf compares 16 bytes unchecked first when more than 16
            // may match (so a match may run up to two bytes past `maxlen` there).
            let mut len = 2;
            let mut open = true;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        open = false;
                        break;
                    }
                }
            }
            if open {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            let l = len - 2;
            ip += 1;
            if l < 7 {
                out.push(((off >> 8) + (l << 5)) as u8);
            } else {
                out.extend_from_slice(&[((off >> 8) + (7 << 5)) as u8, (l - 7) as u8]);
            }
            out.push(off as u8);
            lit = 0;
            out.push(0);
            ip += l + 1;
            if ip + 2 >= n {
                break;
            }
            // The match's last two positions go into the table.
            ip -= 2;
            h = next(first(ip), ip);
            table[slot(h)] = base + ip as u32 + 1;
            ip += 1;
            h = next(h, ip);
            table[slot(h)] = base + ip as u32 + 1;
            ip += 1;
        }
        if out.len() + 3 > limit {
            return false;
        }
        for &b in &input[ip..] {
            lit += 1;
            out.push(b);
            if lit == MAX_LIT {
                end_run(out, lit);
                lit = 0;
                out.push(0);
            }
        }
        end_run(out, lit);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Compresses with room for any input and checks the round trip; the compressed length.
    fn round_trip(c: &mut Compressor, input: &[u8]) -> Option<usize> {
        let packed = c.compress(input, input.len() + input.len() / 32 + 4, <[u8]>::to_vec)?;
        let back = lzf::decompress(&packed, input.len()).expect("our stream decompresses");
        assert_eq!(back, input);
        Some(packed.len())
    }

    #[test]
    fn redis_payloads_byte_for_byte() {
        // DUMP payloads of redis-server 7.0.15 (type byte, then the string; version and CRC
        // trimmed): 0xC3, the compressed and the plain length, the LZF stream.
        let cases: [(Vec<u8>, &[u8]); 2] = [
            // Two literals, a match of 60 at distance 1, two literals.
            (vec![b'x'; 64], b"\x01xx\xe0\x33\x00\x01xx"),
            // A match of the last three bytes (liblzf takes one that ends the input).
            (
                b"abcabcabcabcabcabcabcabcXYZabc".to_vec(),
                b"\x03abca\xe0\x0b\x02\x02XYZ\x20\x17",
            ),
        ];
        let mut c = Compressor::default();
        for (input, want) in &cases {
            let got = c.compress(input, input.len() - 4, <[u8]>::to_vec);
            assert_eq!(got.as_deref(), Some(*want));
        }
    }

    #[test]
    fn repetitive_strings_shrink_and_come_back() {
        let mut c = Compressor::default();
        let n = round_trip(&mut c, &[b'x'; 64]).expect("64 x's compress");
        assert_eq!(n, 9, "64 x's");
        let long: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let n = round_trip(&mut c, &long).expect("a periodic string compresses");
        assert!(n < long.len() / 20, "{n}");
        // Literals, then a match at the farthest distance, longer than one reference copies.
        let mut far: Vec<u8> = (0..MAX_OFF as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let again = far[..600].to_vec();
        far.extend_from_slice(&again);
        round_trip(&mut c, &far).expect("compresses");
    }

    #[test]
    fn over_the_limit_is_none_and_the_next_call_is_unaffected() {
        let mut c = Compressor::default();
        let noise: Vec<u8> = (0..64u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect();
        assert!(c
            .compress(&noise, noise.len() - 4, <[u8]>::to_vec)
            .is_none());
        assert!(c.compress(b"", 10, <[u8]>::to_vec).is_none());
        let x = vec![b'x'; 40];
        let packed = c.compress(&x, 36, <[u8]>::to_vec).expect("compresses");
        assert_eq!(lzf::decompress(&packed, 40).unwrap(), x);
    }

    #[test]
    fn a_large_output_buffer_is_not_kept() {
        let mut c = Compressor::default();
        let big = vec![b'z'; 3 << 20];
        round_trip(&mut c, &big).expect("compresses");
        let noise: Vec<u8> = (0..(2u32 << 20))
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        assert!(c
            .compress(&noise, noise.len() + 100_000, |p| p.len())
            .is_some());
        assert!(c.out.capacity() <= KEEP_OUT, "{}", c.out.capacity());
        round_trip(&mut c, b"abcabcabcabcabcabcabcabcabc").expect("compresses");
    }

    #[test]
    fn the_table_is_cleared_when_its_base_would_wrap() {
        let mut c = Compressor {
            base: u32::MAX - 100,
            ..Compressor::default()
        };
        let input = b"abcdefabcdefabcdefabcdef".repeat(8);
        let first = round_trip(&mut c, &input);
        assert_eq!(c.base, input.len() as u32 + 1, "cleared and restarted");
        assert_eq!(round_trip(&mut Compressor::default(), &input), first);
    }

    proptest! {
        #[test]
        fn any_input_round_trips(
            input in prop::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..3000),
            limit_cut in 0usize..64,
        ) {
            let mut c = Compressor::default();
            // One compressor for several inputs: nothing of one leaks into the next, and a
            // fresh one gives the same bytes.
            for part in [&input[..input.len() / 2], &input[..], &input[..input.len() / 3]] {
                let got = round_trip(&mut c, part);
                prop_assert_eq!(got.is_none(), part.is_empty());
                let again = Compressor::default().compress(part, part.len() + 64, <[u8]>::to_vec);
                let full = c.compress(part, part.len() + 64, <[u8]>::to_vec);
                prop_assert_eq!(&full, &again);
                // Under a tighter limit: the same bytes, or nothing; never more than the limit.
                let limit = part.len().saturating_sub(limit_cut);
                if let Some(tight) = c.compress(part, limit, <[u8]>::to_vec) {
                    prop_assert!(tight.len() <= limit);
                    prop_assert_eq!(Some(tight), full);
                }
            }
        }
    }
}
