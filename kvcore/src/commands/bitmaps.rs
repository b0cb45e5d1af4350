//! Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO over string
//! values, as Redis 7.4 (BIT|BYTE ranges included). Bit 0 is the most significant bit of the first byte. Offsets
//! are bounded by `proto-max-bulk-len` (512 MB), so no command allocates past it.

use super::strings::reply_err;
use super::{args, cmd, flags::*, CommandSpec, Ctx};
use crate::error::OpError;
use crate::events::class;
use crate::keyspace::Ttl;
use crate::value::Value;

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("setbit", 4, WRITE | DENYOOM, 1, 1, 1, setbit),
    cmd!("getbit", 3, READONLY | FAST, 1, 1, 1, getbit),
    cmd!("bitcount", -2, READONLY, 1, 1, 1, bitcount),
    cmd!("bitpos", -3, READONLY, 1, 1, 1, bitpos),
    cmd!("bitop", -4, WRITE | DENYOOM, 2, -1, 1, bitop),
    cmd!("bitfield", -2, WRITE | DENYOOM, 1, 1, 1, bitfield),
    cmd!("bitfield_ro", -2, READONLY | FAST, 1, 1, 1, bitfield_ro),
];

const BAD_OFFSET: &[u8] = b"ERR bit offset is not an integer or out of range";

/// A bit offset argument: a non-negative integer whose byte lies within
/// `proto-max-bulk-len`.
fn bit_offset(c: &Ctx<'_>, arg: &[u8]) -> Option<u64> {
    let off = crate::num::parse_i64(arg)?;
    (off >= 0 && ((off as u64) >> 3) < c.db.config.proto_max_bulk_len).then_some(off as u64)
}

/// Counts the set bits of `bytes`, a word at a time.
pub fn popcount(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut n: u64 = 0;
    for w in &mut words {
        n += u64::from(u64::from_ne_bytes(w.try_into().unwrap_or_default()).count_ones());
    }
    n + words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>()
}

/// The position of the first bit equal to `bit` in `bytes`. Looking for a 0 in bytes that
/// are all ones gives the position just past them (the string reads as padded with zeros);
/// looking for a 1 where there is none gives -1.
pub fn first_bit(bytes: &[u8], bit: bool) -> i64 {
    let skip: u8 = if bit { 0 } else { 0xff };
    // Whole 128-byte blocks that cannot hold the bit first: one test per block, with no
    // branch inside it, so the loop runs at the speed memory delivers the bytes.
    let mut at = skip_blocks(bytes, bit);
    // Whole words that cannot hold the bit next.
    let skip_word = if bit { 0u64 } else { u64::MAX };
    let mut words = bytes[at..].chunks_exact(8);
    for w in &mut words {
        if u64::from_ne_bytes(w.try_into().unwrap_or_default()) != skip_word {
            break;
        }
        at += 8;
    }
    for (i, &b) in bytes[at..].iter().enumerate() {
        if b != skip {
            let lead = if bit {
                b.leading_zeros()
            } else {
                (!b).leading_zeros()
            };
            return ((at + i) as i64) * 8 + i64::from(lead);
        }
    }
    if bit {
        -1
    } else {
        bytes.len() as i64 * 8
    }
}

/// The length of the leading 128-byte blocks of `bytes` made only of bytes without `bit`
/// (all zeros when looking for a 1, all ones when looking for a 0).
fn skip_blocks(bytes: &[u8], bit: bool) -> usize {
    const BLOCK: usize = 128;
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or_default());
    let mut at = 0;
    for block in bytes.chunks_exact(BLOCK) {
        let words = block.chunks_exact(8).map(word);
        let holds = if bit {
            words.fold(0, |acc, w| acc | w) != 0
        } else {
            words.fold(u64::MAX, |acc, w| acc & w) != u64::MAX
        };
        if holds {
            break;
        }
        at += BLOCK;
    }
    at
}

/// [`first_bit`] over `bytes` whose first and last byte have the bits `first_out` and
/// `last_out` outside the range: those read as the value not sought. Nothing is copied.
fn first_bit_in(bytes: &[u8], bit: bool, first_out: u8, last_out: u8) -> i64 {
    let n = bytes.len();
    let masked = |i: usize| {
        let mut b = bytes[i];
        for out in [
            (i == 0).then_some(first_out),
            (i == n - 1).then_some(last_out),
        ]
        .into_iter()
        .flatten()
        {
            b = if bit { b & !out } else { b | out };
        }
        b
    };
    let in_byte = |b: u8| {
        let lead = if bit {
            b.leading_zeros()
        } else {
            (!b).leading_zeros()
        };
        (lead < 8).then_some(i64::from(lead))
    };
    if let Some(p) = in_byte(masked(0)) {
        return p;
    }
    if n > 2 {
        let middle = &bytes[1..n - 1];
        let p = first_bit(middle, bit);
        if p != -1 && p != middle.len() as i64 * 8 {
            return 8 + p;
        }
    }
    if n > 1 {
        if let Some(p) = in_byte(masked(n - 1)) {
            return (n as i64 - 1) * 8 + p;
        }
    }
    if bit {
        -1
    } else {
        n as i64 * 8
    }
}

fn setbit(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let Some(offset) = bit_offset(c, a[2]) else {
        return c.out.error(BAD_OFFSET);
    };
    let on = match crate::num::parse_i64(a[3]) {
        Some(v @ (0 | 1)) => v == 1,
        _ => return c.out.error(b"ERR bit is not an integer or out of range"),
    };
    let (dbi, now) = (c.session.db, c.db.now);
    let byte = (offset >> 3) as usize;
    let mask = 1u8 << (7 - (offset & 7));
    let ks = &mut c.db.dbs[dbi];
    let (was, changed) = match ks.get_mut(a[1], now) {
        None => {
            let mut v = vec![0u8; byte + 1];
            if on {
                v[byte] |= mask;
            }
            ks.insert_absent(a[1], Value::Raw(Box::new(v)), Ttl::Clear);
            (false, true)
        }
        Some(v) => {
            let Some(raw) = v.make_raw() else {
                return reply_err(&mut c.out, OpError::WrongType);
            };
            let grew = raw.len() <= byte;
            if grew {
                raw.resize(byte + 1, 0);
            }
            let was = raw[byte] & mask != 0;
            if on {
                raw[byte] |= mask;
            } else {
                raw[byte] &= !mask;
            }
            (was, grew || was != on)
        }
    };
    if changed {
        c.db.modified(class::STRING, "setbit", dbi, a[1]);
    }
    c.out.int(i64::from(was));
}

fn getbit(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let Some(offset) = bit_offset(c, a[2]) else {
        return c.out.error(BAD_OFFSET);
    };
    let (dbi, now) = (c.session.db, c.db.now);
    let Some(n) = c.db.dbs[dbi].get(a[1], now) else {
        c.out.int(0);
        return c.db.key_miss(dbi, a[1]);
    };
    let mut buf = itoa::Buffer::new();
    let Some(s) = n.value().as_str(&mut buf) else {
        return reply_err(&mut c.out, OpError::WrongType);
    };
    let byte = (offset >> 3) as usize;
    let set = s
        .get(byte)
        .is_some_and(|b| b & (1 << (7 - (offset & 7))) != 0);
    c.out.int(i64::from(set));
}

/// A BIT|BYTE unit argument: true for BIT.
fn unit(arg: &[u8]) -> Option<bool> {
    if args::is(arg, "BIT") {
        Some(true)
    } else if args::is(arg, "BYTE") {
        Some(false)
    } else {
        None
    }
}

/// A resolved range of whole bytes, with the bits of its first and last byte that fall
/// outside a bit range masked off (`first_out`, `last_out`: bits not in the range).
struct Span {
    start: usize,
    end: usize,
    first_out: u8,
    last_out: u8,
}

/// Resolves `start..=end` (negative from the end, in bits or bytes) over a string of `len`
/// bytes as Redis does; `None` for an empty range.
fn span(len: usize, start: i64, end: i64, bits: bool) -> Option<Span> {
    let total = if bits { (len as i64) << 3 } else { len as i64 };
    let (mut start, mut end) = (start, end);
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    let (mut first_out, mut last_out) = (0u8, 0u8);
    if bits {
        first_out = !((1u16 << (8 - (start & 7))) - 1) as u8;
        last_out = ((1u16 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    Some(Span {
        start: start as usize,
        end: end as usize,
        first_out,
        last_out,
    })
}

fn bitcount(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let range = match a.len() {
        2 => None,
        4 | 5 => {
            let (Ok(start), Ok(end)) = (args::int(a[2]), args::int(a[3])) else {
                return reply_err(&mut c.out, OpError::NotInteger);
            };
            let bits = match a.get(4) {
                None => false,
                Some(u) => match unit(u) {
                    Some(b) => b,
                    None => return reply_err(&mut c.out, OpError::Syntax),
                },
            };
            Some((start, end, bits))
        }
        _ => return reply_err(&mut c.out, OpError::Syntax),
    };
    let (dbi, now) = (c.session.db, c.db.now);
    let Some(n) = c.db.dbs[dbi].get(a[1], now) else {
        c.out.int(0);
        return c.db.key_miss(dbi, a[1]);
    };
    let mut buf = itoa::Buffer::new();
    let Some(s) = n.value().as_str(&mut buf) else {
        return reply_err(&mut c.out, OpError::WrongType);
    };
    let count = match range {
        None => popcount(s),
        // Both ends negative and crossed: Redis answers 0 before clamping.
        Some((start, end, _)) if start < 0 && end < 0 && start > end => 0,
        Some((start, end, bits)) => match span(s.len(), start, end, bits) {
            None => 0,
            Some(sp) => {
                popcount(&s[sp.start..=sp.end])
                    - u64::from((s[sp.start] & sp.first_out).count_ones())
                    - u64::from((s[sp.end] & sp.last_out).count_ones())
            }
        },
    };
    c.out.int(count as i64);
}

fn bitpos(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let bit = match args::int(a[2]) {
        Ok(b @ (0 | 1)) => b == 1,
        Ok(_) => return c.out.error(b"ERR The bit argument must be 1 or 0."),
        Err(e) => return reply_err(&mut c.out, e),
    };
    if a.len() > 6 {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let start = match a.get(3).map(|s| args::int(s)) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => return reply_err(&mut c.out, e),
    };
    let bits = match a.get(5) {
        None => false,
        Some(u) => match unit(u) {
            Some(b) => b,
            None => return reply_err(&mut c.out, OpError::Syntax),
        },
    };
    let end = match a.get(4).map(|e| args::int(e)) {
        None => None,
        Some(Ok(e)) => Some(e),
        Some(Err(e)) => return reply_err(&mut c.out, e),
    };
    let (dbi, now) = (c.session.db, c.db.now);
    let Some(n) = c.db.dbs[dbi].get(a[1], now) else {
        c.out.int(if bit { -1 } else { 0 });
        return c.db.key_miss(dbi, a[1]);
    };
    let mut buf = itoa::Buffer::new();
    let Some(s) = n.value().as_str(&mut buf) else {
        return reply_err(&mut c.out, OpError::WrongType);
    };
    let Some(start) = start else {
        // The whole string; an empty one holds neither bit.
        return c.out.int(if s.is_empty() { -1 } else { first_bit(s, bit) });
    };
    let total = if bits {
        (s.len() as i64) << 3
    } else {
        s.len() as i64
    };
    // Without an end, the range runs to the end of the string (past it, in bits).
    let end = end.unwrap_or(if bits { total + 7 } else { total - 1 });
    let Some(sp) = span(s.len(), start, end, bits) else {
        return c.out.int(-1);
    };
    let pos = first_bit_in(&s[sp.start..=sp.end], bit, sp.first_out, sp.last_out);
    let bytes = sp.end - sp.start + 1;
    // A 0 sought in an explicit range that holds none: not found (no zero padding there).
    let missing = pos == -1 || (a.len() >= 5 && !bit && pos == (bytes as i64) * 8);
    let found = if missing {
        -1
    } else {
        pos + (sp.start as i64) * 8
    };
    c.out.int(found);
}

fn bitop(c: &mut Ctx<'_>, a: &[&[u8]]) {
    #[derive(Clone, Copy, PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = if args::is(a[1], "AND") {
        Op::And
    } else if args::is(a[1], "OR") {
        Op::Or
    } else if args::is(a[1], "XOR") {
        Op::Xor
    } else if args::is(a[1], "NOT") {
        Op::Not
    } else {
        return reply_err(&mut c.out, OpError::Syntax);
    };
    if op == Op::Not && a.len() != 4 {
        return c
            .out
            .error(b"ERR BITOP NOT must be called with a single source key.");
    }
    let (dbi, now) = (c.session.db, c.db.now);
    let mut sources: Vec<Option<Vec<u8>>> = Vec::with_capacity(a.len() - 3);
    for key in &a[3..] {
        match c.db.dbs[dbi].get(key, now) {
            None => {
                sources.push(None);
                c.db.key_miss(dbi, key);
            }
            Some(n) => {
                let mut buf = itoa::Buffer::new();
                let Some(s) = n.value().as_str(&mut buf) else {
                    return reply_err(&mut c.out, OpError::WrongType);
                };
                sources.push(Some(s.to_vec()));
            }
        }
    }
    let max = sources.iter().flatten().map(Vec::len).max().unwrap_or(0);
    let dest = a[2];
    if max == 0 {
        // Redis's dbDelete: a destination past its deadline goes with `del`, not `expired`.
        if c.db.dbs[dbi].delete_stored(dest) {
            c.db.modified(class::GENERIC, "del", dbi, dest);
        }
        return c.out.int(0);
    }
    let byte_of = |s: &Option<Vec<u8>>, i: usize| s.as_ref().and_then(|v| v.get(i)).copied();
    let mut res = vec![0u8; max];
    for (i, r) in res.iter_mut().enumerate() {
        let first = byte_of(&sources[0], i).unwrap_or(0);
        *r = match op {
            Op::Not => !first,
            Op::And => sources[1..]
                .iter()
                .fold(first, |acc, s| acc & byte_of(s, i).unwrap_or(0)),
            Op::Or => sources[1..]
                .iter()
                .fold(first, |acc, s| acc | byte_of(s, i).unwrap_or(0)),
            Op::Xor => sources[1..]
                .iter()
                .fold(first, |acc, s| acc ^ byte_of(s, i).unwrap_or(0)),
        };
    }
    // A new string object, `raw` whatever its length, as Redis makes it.
    c.db.dbs[dbi].set(dest, Value::Raw(Box::new(res)), Ttl::Clear, now);
    c.db.modified(class::STRING, "set", dbi, dest);
    c.out.int(max as i64);
}

/// OVERFLOW behaviour of BITFIELD's SET and INCRBY.
#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation.
struct FieldOp {
    /// 0 GET, 1 SET, 2 INCRBY.
    kind: u8,
    signed: bool,
    bits: u32,
    offset: u64,
    value: i64,
    overflow: Overflow,
}

/// A bitfield type `i1`..`i64` or `u1`..`u63` (read as a C string, as Redis does).
fn field_type(arg: &[u8]) -> Option<(bool, u32)> {
    let arg = arg.split(|&b| b == 0).next().unwrap_or_default();
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return None,
    };
    let bits = crate::num::parse_i64(&arg[1..])?;
    (bits >= 1 && bits <= if signed { 64 } else { 63 }).then_some((signed, bits as u32))
}

/// A BITFIELD offset: a bit offset, or `#N` for N fields of `bits` bits.
fn field_offset(c: &Ctx<'_>, arg: &[u8], bits: u32) -> Option<u64> {
    let (hash, digits) = match arg.first() {
        Some(b'#') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let mut off = crate::num::parse_i64(digits)?;
    if hash {
        off = off.checked_mul(i64::from(bits))?;
    }
    (off >= 0 && ((off as u64) >> 3) < c.db.config.proto_max_bulk_len).then_some(off as u64)
}

/// `bits` bits at bit `offset` of `s`, most significant first; past the end reads zeros.
fn get_field(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for i in 0..u64::from(bits) {
        let at = offset + i;
        let bit = s
            .get((at >> 3) as usize)
            .map_or(0, |b| (b >> (7 - (at & 7))) & 1);
        v = (v << 1) | u64::from(bit);
    }
    v
}

/// Writes the low `bits` bits of `v` at bit `offset` of `s` (long enough).
fn set_field(s: &mut [u8], offset: u64, bits: u32, v: u64) {
    for i in 0..u64::from(bits) {
        let at = offset + i;
        let bit = (v >> (u64::from(bits) - 1 - i)) & 1;
        let mask = 1u8 << (7 - (at & 7));
        let byte = &mut s[(at >> 3) as usize];
        if bit == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// Sign-extends a `bits`-bit field.
fn signed_field(v: u64, bits: u32) -> i64 {
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// `value + incr` for a field of `bits` bits, as Redis's overflow checks decide it: the
/// result, or `None` when it overflows under FAIL.
fn field_add(value: i64, incr: i64, signed: bool, bits: u32, ow: Overflow) -> Option<i64> {
    let wrap = || {
        let c = (value as u64).wrapping_add(incr as u64);
        if signed {
            signed_field(
                if bits < 64 {
                    c & !(u64::MAX << bits)
                } else {
                    c
                },
                bits,
            )
        } else {
            (c & !(u64::MAX << bits)) as i64
        }
    };
    let (hi, lo, max, min) = if signed {
        let max: i128 = (1i128 << (bits - 1)) - 1;
        let min = -max - 1;
        let new = i128::from(value) + i128::from(incr);
        let hi = i128::from(value) > max || new > max;
        (hi, !hi && (i128::from(value) < min || new < min), max, min)
    } else {
        // The value is unsigned: a negative SET value reads as a huge one, as in Redis.
        let v = i128::from(value as u64);
        let max: i128 = (1i128 << bits) - 1;
        let hi = v > max || (incr > 0 && v + i128::from(incr) > max);
        (hi, !hi && incr < 0 && v + i128::from(incr) < 0, max, 0)
    };
    if !hi && !lo {
        return Some(if signed {
            value + incr
        } else {
            ((value as u64).wrapping_add(incr as u64)) as i64
        });
    }
    match ow {
        Overflow::Fail => None,
        Overflow::Wrap => Some(wrap()),
        Overflow::Sat => Some(if hi { max as i64 } else { min as i64 }),
    }
}

fn bitfield(c: &mut Ctx<'_>, a: &[&[u8]]) {
    bitfield_generic(c, a, false);
}

fn bitfield_ro(c: &mut Ctx<'_>, a: &[&[u8]]) {
    bitfield_generic(c, a, true);
}

fn bitfield_generic(c: &mut Ctx<'_>, a: &[&[u8]], ro: bool) {
    const BAD_TYPE: &[u8] = b"ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
    let mut ops: Vec<FieldOp> = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    let mut j = 2;
    while j < a.len() {
        let rem = a.len() - j - 1;
        let kind = if args::is(a[j], "GET") && rem >= 2 {
            0
        } else if args::is(a[j], "SET") && rem >= 3 {
            1
        } else if args::is(a[j], "INCRBY") && rem >= 3 {
            2
        } else if args::is(a[j], "OVERFLOW") && rem >= 1 {
            overflow = if args::is(a[j + 1], "WRAP") {
                Overflow::Wrap
            } else if args::is(a[j + 1], "SAT") {
                Overflow::Sat
            } else if args::is(a[j + 1], "FAIL") {
                Overflow::Fail
            } else {
                return c.out.error(b"ERR Invalid OVERFLOW type specified");
            };
            j += 2;
            continue;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        };
        let Some((signed, bits)) = field_type(a[j + 1]) else {
            return c.out.error(BAD_TYPE);
        };
        let Some(offset) = field_offset(c, a[j + 2], bits) else {
            return c.out.error(BAD_OFFSET);
        };
        let mut value = 0;
        if kind != 0 {
            let end = offset + u64::from(bits) - 1;
            highest = Some(highest.map_or(end, |h| h.max(end)));
            match args::int(a[j + 3]) {
                Ok(v) => value = v,
                Err(e) => return reply_err(&mut c.out, e),
            }
        }
        ops.push(FieldOp {
            kind,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        j += if kind == 0 { 3 } else { 4 };
    }
    let (dbi, now) = (c.session.db, c.db.now);
    let Some(highest) = highest else {
        // Only GETs: a read; a missing key reads as zeros.
        let mut buf = itoa::Buffer::new();
        let s: &[u8] = match c.db.dbs[dbi].get(a[1], now) {
            None => {
                c.db.key_miss(dbi, a[1]);
                &[]
            }
            Some(n) => match n.value().as_str(&mut buf) {
                Some(s) => s,
                None => return reply_err(&mut c.out, OpError::WrongType),
            },
        };
        c.out.array_len(ops.len());
        for op in &ops {
            let v = get_field(s, op.offset, op.bits);
            c.out.int(if op.signed {
                signed_field(v, op.bits)
            } else {
                v as i64
            });
        }
        return;
    };
    if ro {
        return c
            .out
            .error(b"ERR BITFIELD_RO only supports the GET subcommand");
    }
    // Room up to the farthest bit written, made before any operation runs (as Redis does).
    let need = (highest >> 3) as usize + 1;
    let ks = &mut c.db.dbs[dbi];
    let grew = match ks.get_mut(a[1], now) {
        None => {
            ks.insert_absent(a[1], Value::Raw(Box::new(vec![0u8; need])), Ttl::Clear);
            true
        }
        Some(v) => {
            let Some(raw) = v.make_raw() else {
                return reply_err(&mut c.out, OpError::WrongType);
            };
            let grew = raw.len() < need;
            if grew {
                raw.resize(need, 0);
            }
            grew
        }
    };
    let Some(Value::Raw(raw)) = c.db.dbs[dbi].get_mut(a[1], now) else {
        return reply_err(&mut c.out, OpError::WrongType);
    };
    let s: &mut Vec<u8> = raw;
    c.out.array_len(ops.len());
    let mut changes = 0;
    for op in &ops {
        let old_u = get_field(s, op.offset, op.bits);
        let old = if op.signed {
            signed_field(old_u, op.bits)
        } else {
            old_u as i64
        };
        if op.kind == 0 {
            c.out.int(old);
            continue;
        }
        let new = if op.kind == 2 {
            field_add(old, op.value, op.signed, op.bits, op.overflow)
        } else {
            field_add(op.value, 0, op.signed, op.bits, op.overflow)
        };
        let Some(new) = new else {
            c.out.null();
            continue;
        };
        c.out.int(if op.kind == 2 { new } else { old });
        set_field(s, op.offset, op.bits, new as u64);
        if grew || old != new {
            changes += 1;
        }
    }
    if changes > 0 {
        c.db.modified(class::STRING, "setbit", dbi, a[1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bit_agrees_with_a_scan() {
        let cases: &[&[u8]] = &[
            b"",
            b"\x00",
            b"\xff",
            b"\x00\x00\x00\x00\x00\x00\x00\x00\x01",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xfe",
            b"\x00\xff\xf0",
            b"\x10",
        ];
        for bytes in cases {
            for bit in [false, true] {
                let scan = (0..bytes.len() * 8)
                    .find(|&i| (bytes[i / 8] >> (7 - i % 8)) & 1 == u8::from(bit))
                    .map_or(if bit { -1 } else { bytes.len() as i64 * 8 }, |i| i as i64);
                assert_eq!(first_bit(bytes, bit), scan, "{bytes:?} {bit}");
            }
        }
    }

    #[test]
    fn first_bit_in_a_masked_range_agrees_with_a_copy() {
        let bytes = [0x00u8, 0x10, 0xff, 0x00, 0x81, 0xfe];
        for len in 1..=bytes.len() {
            for first_out in [0u8, 0x80, 0xf0, 0xfe] {
                for last_out in [0u8, 0x01, 0x0f, 0x7f] {
                    for bit in [false, true] {
                        let mut copy = bytes[..len].to_vec();
                        let last = len - 1;
                        for (i, out) in [(0, first_out), (last, last_out)] {
                            copy[i] = if bit { copy[i] & !out } else { copy[i] | out };
                        }
                        assert_eq!(
                            first_bit_in(&bytes[..len], bit, first_out, last_out),
                            first_bit(&copy, bit),
                            "{len} {first_out:x} {last_out:x} {bit}"
                        );
                    }
                }
            }
        }
    }

    /// BITFIELD arithmetic against a plain model on every small width.
    #[test]
    fn field_add_wraps_saturates_and_fails_as_a_model_does() {
        for bits in 1..=8u32 {
            for signed in [false, true] {
                let (min, max): (i64, i64) = if signed {
                    (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
                } else {
                    (0, (1 << bits) - 1)
                };
                for value in min..=max {
                    for incr in -300i64..=300 {
                        let exact = value + incr;
                        let span = 1i64 << bits;
                        let wrapped = (exact - min).rem_euclid(span) + min;
                        for (ow, want) in [
                            (Overflow::Wrap, Some(wrapped)),
                            (Overflow::Sat, Some(exact.clamp(min, max))),
                            (
                                Overflow::Fail,
                                (min..=max).contains(&exact).then_some(exact),
                            ),
                        ] {
                            let want = if (min..=max).contains(&exact) {
                                Some(exact)
                            } else {
                                want
                            };
                            assert_eq!(
                                field_add(value, incr, signed, bits, ow),
                                want,
                                "{value} + {incr}, {}{bits}",
                                if signed { 'i' } else { 'u' }
                            );
                        }
                    }
                }
            }
        }
        // SET of a negative value into an unsigned field reads it as a huge one (Redis).
        assert_eq!(field_add(-1, 0, false, 8, Overflow::Sat), Some(255));
        assert_eq!(field_add(-1, 0, false, 8, Overflow::Wrap), Some(255));
        assert_eq!(field_add(-2, 0, false, 8, Overflow::Fail), None);
        // The 64-bit edges.
        assert_eq!(
            field_add(i64::MAX, 1, true, 64, Overflow::Wrap),
            Some(i64::MIN)
        );
        assert_eq!(
            field_add(i64::MAX, 1, true, 64, Overflow::Sat),
            Some(i64::MAX)
        );
        assert_eq!(field_add(i64::MIN, -1, true, 64, Overflow::Fail), None);
    }

    #[test]
    fn fields_read_back_what_was_written() {
        let mut s = vec![0u8; 16];
        set_field(&mut s, 3, 13, 0x1abc);
        assert_eq!(get_field(&s, 3, 13), 0x1abc);
        assert_eq!(signed_field(get_field(&s, 3, 13), 13), 0x1abc - (1 << 13));
        set_field(&mut s, 64, 64, u64::MAX - 5);
        assert_eq!(get_field(&s, 64, 64), u64::MAX - 5);
        // The last byte (0xfa), then 8 bits past the end that read as 0.
        assert_eq!(get_field(&s, 120, 16), 0xfa00);
    }

    #[test]
    fn popcount_counts_every_byte() {
        let v: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        let want: u64 = v.iter().map(|b| u64::from(b.count_ones())).sum();
        assert_eq!(popcount(&v), want);
    }
}
