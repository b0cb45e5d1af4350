//! HyperLogLog exactly as Redis 7.4 stores and counts it, so that the bytes GET returns after
//! PFADD, PFCOUNT or PFMERGE are Redis's bytes and a value taken from Redis counts the same here.
//!
//! # The value
//! A HyperLogLog is a plain string: a 16-byte header, then the registers.
//!
//! ```text
//! +------+---+-------+--------------------------+
//! | HYLL | E | 0 0 0 | cardinality, 8 bytes LE  |  registers ...
//! +------+---+-------+--------------------------+
//! ```
//! `E` is 0 (dense) or 1 (sparse). The cached cardinality is valid while the most significant
//! bit of its last byte is clear; every change of a register sets that bit, PFCOUNT of one key
//! recomputes and stores it.
//!
//! - Dense ([`dense`]): 16384 registers of 6 bits packed from the least significant bit of each
//!   byte up, 12288 bytes; the string is exactly [`DENSE_SIZE`] bytes.
//! - Sparse ([`sparse`]): run lengths. `00xxxxxx` ZERO (1..64 zero registers), `01xxxxxx
//!   yyyyyyyy` XZERO (1..16384 zero registers), `1vvvvvxx` VAL (1..4 registers of value
//!   1..32). A new HLL is the header and XZERO:16384. A register past 32, or a string that
//!   would pass `hll-sparse-max-bytes`, turns the value dense for good.
//!
//! # Hash and estimate
//! An element hashes with MurmurHash64A (seed `0xadc83b19`): the low [`P`] = 14 bits pick the
//! register, the position of the lowest set bit of the remaining [`Q`] = 50 (plus one) is the
//! register's candidate value, 1..=51. The estimate ([`estimate`]) is Otmar Ertl's improved
//! raw estimator over the histogram of register values, as Redis 7 computes it, operation for
//! operation so the doubles round the same way.
//!
//! # Untrusted bytes
//! Any string can be SET and then handed to PFADD: the header is checked by [`check`], and
//! the sparse decoders bound every run (a run that passes register 16383 makes the value
//! corrupt, never an out-of-range write). Redis reads the byte just past a string (its NUL
//! terminator) when the last opcode is a lone XZERO first byte; we read that byte as 0 too.
//! The one place we cannot follow: when PFADD splits such a lone XZERO, Redis writes the last
//! byte of the new opcodes past the string's end and later reads it back from there; we drop
//! it, so a later read of that (hand-corrupted) value sees 0 where Redis sees the dropped byte.

#![cfg_attr(not(test), deny(clippy::indexing_slicing, clippy::unwrap_used))]

pub mod dense;
pub mod estimate;
pub mod sparse;

#[cfg(test)]
mod tests;

/// Bits of the hash that pick a register.
pub const P: u32 = 14;
/// Bits of the hash whose run of zeros is counted.
pub const Q: u32 = 64 - P;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
/// Header bytes.
pub const HDR: usize = 16;
/// Bytes of the dense register array.
pub const DENSE_BYTES: usize = (REGISTERS * 6).div_ceil(8);
/// Length of a dense HyperLogLog string.
pub const DENSE_SIZE: usize = HDR + DENSE_BYTES;
/// Largest register value (6 bits).
pub const REGISTER_MAX: u8 = 63;
/// The encoding byte of a dense value.
pub const DENSE: u8 = 0;
/// The encoding byte of a sparse value.
pub const SPARSE: u8 = 1;

/// The registers could not be decoded (a sparse value whose runs do not cover exactly the
/// 16384 registers): Redis's `INVALIDOBJ`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

/// The representation of a string that passed [`check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// 16384 packed 6-bit registers.
    Dense,
    /// Run-length opcodes.
    Sparse,
}

/// Redis's `isHLLObjectOrReply` on a string's bytes: at least a header, the magic `HYLL`, a
/// known encoding, and for dense exactly [`DENSE_SIZE`] bytes. A sparse body is only decoded
/// (and possibly found corrupt) when used.
pub fn check(s: &[u8]) -> Option<Encoding> {
    if s.len() < HDR || !s.starts_with(b"HYLL") {
        return None;
    }
    match s.get(4).copied() {
        Some(DENSE) if s.len() == DENSE_SIZE => Some(Encoding::Dense),
        Some(SPARSE) => Some(Encoding::Sparse),
        _ => None,
    }
}

/// A new, empty HyperLogLog: sparse, XZERO:16384, cached cardinality 0 (valid).
pub fn new_sparse() -> Vec<u8> {
    let mut s = Vec::with_capacity(HDR + 2);
    s.extend_from_slice(b"HYLL");
    s.push(SPARSE);
    s.extend_from_slice(&[0; 11]);
    s.extend_from_slice(&sparse::xzero(REGISTERS));
    s
}

/// The cached cardinality, if valid.
pub fn cached(s: &[u8]) -> Option<u64> {
    let card: [u8; 8] = s.get(8..HDR)?.try_into().ok()?;
    (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
}

/// Stores `card` as the cached cardinality (all 8 bytes, as Redis writes them: a value with
/// the top bit set stores itself as invalid).
pub fn set_cached(s: &mut [u8], card: u64) {
    if let Some(c) = s.get_mut(8..HDR) {
        c.copy_from_slice(&card.to_le_bytes());
    }
}

/// Marks the cached cardinality invalid.
pub fn invalidate(s: &mut [u8]) {
    if let Some(b) = s.get_mut(HDR - 1) {
        *b |= 0x80;
    }
}

/// Redis's MurmurHash64A, endian-neutral (words read little-endian).
pub fn murmur64a(key: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    // `len` is a C `int` multiplied as an unsigned 64-bit number.
    let mut h = u64::from(seed) ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut k = u64::from_le_bytes(w.try_into().unwrap_or_default());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element falls in and the value it offers (the length of the `0...01`
/// pattern of its hash past the index bits, 1..=Q+1): Redis's `hllPatLen`.
pub fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Raises register `index` to `count` if it is lower, in whichever encoding `s` has (sparse may
/// turn dense past `sparse_max` bytes or a value of 33 and up). Whether the register changed.
/// `s` must have passed [`check`].
pub fn set_register(
    s: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<bool, Corrupt> {
    match s.get(4).copied() {
        Some(DENSE) => Ok(dense::set(dense::registers_mut(s), index, count)),
        Some(SPARSE) => sparse::set(s, index, count, sparse_max),
        _ => Err(Corrupt),
    }
}

/// Adds one element (Redis's `hllAdd`): whether a register changed. `s` must have passed
/// [`check`].
pub fn add(s: &mut Vec<u8>, ele: &[u8], sparse_max: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(ele);
    set_register(s, index, count, sparse_max)
}

/// Raises each of `max` to the register of the same index in `s` (Redis's `hllMerge`). `s`
/// must have passed [`check`].
pub fn merge_into(max: &mut [u8; REGISTERS], s: &[u8]) -> Result<(), Corrupt> {
    match s.get(4).copied() {
        Some(DENSE) => {
            dense::merge_into(max, dense::registers(s));
            Ok(())
        }
        _ => sparse::merge_into(max, s.get(HDR..).unwrap_or_default()),
    }
}

/// The estimated cardinality of a checked value, ignoring the cache (Redis's `hllCount`);
/// `Corrupt` for a sparse body that does not cover the registers exactly.
pub fn count(s: &[u8]) -> Result<u64, Corrupt> {
    let mut histo = [0u32; 64];
    let body = s.get(HDR..).unwrap_or_default();
    match s.get(4).copied() {
        Some(DENSE) => dense::histogram(body, &mut histo),
        _ => sparse::histogram(body, &mut histo)?,
    }
    Ok(estimate::from_histogram(&histo))
}

/// The estimated cardinality of one register per byte (the union PFCOUNT builds of several
/// keys).
pub fn count_registers(regs: &[u8; REGISTERS]) -> u64 {
    let mut histo = [0u32; 64];
    for &r in regs {
        if let Some(h) = histo.get_mut(usize::from(r & 63)) {
            *h += 1;
        }
    }
    estimate::from_histogram(&histo)
}

/// Converts a sparse value to dense in place (Redis's `hllSparseToDense`); a dense value is left
/// as it is. The header (magic, unused bytes, cache) is kept, the encoding byte becomes 0.
pub fn to_dense(s: &mut Vec<u8>) -> Result<(), Corrupt> {
    if s.get(4).copied() == Some(DENSE) {
        return Ok(());
    }
    let mut d = vec![0u8; DENSE_SIZE];
    if let (Some(to), Some(from)) = (d.get_mut(..HDR), s.get(..HDR)) {
        to.copy_from_slice(from);
    }
    if let Some(e) = d.get_mut(4) {
        *e = DENSE;
    }
    sparse::decode_into(
        s.get(HDR..).unwrap_or_default(),
        dense::registers_mut(&mut d),
    )?;
    *s = d;
    Ok(())
}
