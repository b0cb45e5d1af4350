//! The sparse representation: the registers as a run-length sequence of opcodes.
//!
//! - ZERO `00xxxxxx`: `x + 1` (1..=64) registers at 0.
//! - XZERO `01xxxxxx yyyyyyyy`: `(x << 8 | y) + 1` (1..=16384) registers at 0.
//! - VAL `1vvvvvxx`: `x + 1` (1..=4) registers at `v + 1` (1..=32).
//!
//! [`set`] edits the sequence in place as Redis's `hllSparseSet` does, byte for byte: the
//! opcode covering the register is split into at most three (XZERO-VAL-XZERO), then adjacent
//! equal VALs are joined within a window of five opcodes from the one before the edit. Such a
//! sequence is not canonical (a different order of adds gives different bytes), so matching
//! Redis's bytes means repeating its exact steps.

use smallvec::SmallVec;

use super::{dense, Corrupt, HDR, REGISTERS};

/// Largest value a VAL opcode holds.
pub const VAL_MAX_VALUE: u8 = 32;
/// Largest run of a VAL opcode.
const VAL_MAX_LEN: usize = 4;
/// Largest run of a ZERO opcode.
const ZERO_MAX_LEN: usize = 64;

/// One decoded opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A run of zero registers (ZERO or XZERO).
    Zero(usize),
    /// A run of registers of one value (1..=32).
    Val(u8, usize),
}

/// The opcode at `body[p]` and its length in bytes (2 for XZERO). The second byte of an XZERO
/// that is the last byte reads as 0, as Redis reads the string's terminator there.
#[inline]
pub fn op_at(body: &[u8], p: usize) -> Option<(Op, usize)> {
    let b = *body.get(p)?;
    Some(if b & 0x80 != 0 {
        (Op::Val(((b >> 2) & 0x1f) + 1, usize::from(b & 3) + 1), 1)
    } else if b & 0x40 != 0 {
        let low = usize::from(body.get(p + 1).copied().unwrap_or(0));
        (Op::Zero(((usize::from(b & 0x3f) << 8) | low) + 1), 2)
    } else {
        (Op::Zero(usize::from(b & 0x3f) + 1), 1)
    })
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

/// An XZERO opcode for a run of `len` (1..=16384) zeros.
pub fn xzero(len: usize) -> [u8; 2] {
    let l = len - 1;
    [((l >> 8) as u8 & 0x3f) | 0x40, l as u8]
}

/// A ZERO opcode for a run of `len` (1..=64) zeros.
fn zero(len: usize) -> u8 {
    (len - 1) as u8 & 0x3f
}

/// A VAL opcode: `len` (1..=4) registers at `val` (1..=32).
fn val(val: u8, len: usize) -> u8 {
    0x80 | ((val - 1) & 0x1f) << 2 | ((len - 1) as u8 & 3)
}

/// A run of zeros as one opcode: ZERO up to 64, else XZERO.
fn zeros(out: &mut SmallVec<[u8; 5]>, len: usize) {
    if len > ZERO_MAX_LEN {
        out.extend_from_slice(&xzero(len));
    } else {
        out.push(zero(len));
    }
}

/// Adds the count of each register value to `histo` (Redis's `hllSparseRegHisto`); `Corrupt`
/// when the runs do not add up to exactly 16384 registers.
pub fn histogram(body: &[u8], histo: &mut [u32; 64]) -> Result<(), Corrupt> {
    walk(body, |v, run, _| {
        if let Some(h) = histo.get_mut(usize::from(v)) {
            *h += run as u32;
        }
    })
}

/// Walks the runs of a sparse `body`, calling `f(value, run, first register)` for each (zero
/// runs too). A run that would pass the last register stops the walk as corrupt, before `f`
/// sees it (Redis since the CVE-2025-32023 fix, in 7.4.5 and Debian's 7.0.15: before it, a VAL
/// past the end was dropped and runs after it ignored); so does a total short of 16384.
fn walk(body: &[u8], mut f: impl FnMut(u8, usize, usize)) -> Result<(), Corrupt> {
    let (mut p, mut idx) = (0usize, 0usize);
    while let Some((op, len)) = op_at(body, p) {
        let (v, run) = match op {
            Op::Zero(run) => (0, run),
            Op::Val(v, run) => (v, run),
        };
        if run + idx > REGISTERS {
            return Err(Corrupt);
        }
        f(v, run, idx);
        idx += run;
        p += len;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// Writes the registers of a sparse `body` into dense register bytes `regs` (which start
/// zeroed): Redis's `hllSparseToDense` loop.
pub fn decode_into(body: &[u8], regs: &mut [u8]) -> Result<(), Corrupt> {
    walk(body, |v, run, first| {
        if v != 0 {
            for i in first..first + run {
                dense::put(regs, i, v);
            }
        }
    })
}

/// Raises each of `max` to the register of the same index in a sparse `body`.
pub fn merge_into(max: &mut [u8; REGISTERS], body: &[u8]) -> Result<(), Corrupt> {
    walk(body, |v, run, first| {
        for m in max.iter_mut().skip(first).take(run) {
            if v > *m {
                *m = v;
            }
        }
    })
}

/// Raises register `index` of the sparse value `s` (header included) to `count` if it is lower:
/// Redis's `hllSparseSet`. Whether it changed; the cache is invalidated when it did. Turns `s`
/// dense when `count` passes 32 or the edit would make `s` longer than `max_bytes`.
pub fn set(s: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    if count > VAL_MAX_VALUE {
        return promote(s, index, count);
    }
    // Step 1: the opcode covering `index`, the one before it, the one after it.
    let end = s.len();
    let (mut p, mut first, mut span) = (HDR, 0usize, 0usize);
    let mut prev: Option<usize> = None;
    let mut found = None;
    while p < end {
        let Some((op, oplen)) = op_at(s, p) else {
            break;
        };
        span = match op {
            Op::Zero(run) | Op::Val(_, run) => run,
        };
        if index < first + span {
            found = Some((op, oplen));
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    let Some((op, oplen)) = found else {
        return Err(Corrupt);
    };
    let next = Some(p + oplen).filter(|&n| n < end);

    // Step 2: the cases that rewrite one byte in place, and the new sequence otherwise.
    let mut seq: SmallVec<[u8; 5]> = SmallVec::new();
    let last = first + span - 1;
    match op {
        Op::Val(old, run) => {
            if old >= count {
                return Ok(false);
            }
            if run == 1 {
                if let Some(b) = s.get_mut(p) {
                    *b = val(count, 1);
                }
                return Ok(updated(s, prev));
            }
            if index != first {
                seq.push(val(old, index - first));
            }
            seq.push(val(count, 1));
            if index != last {
                seq.push(val(old, last - index));
            }
        }
        Op::Zero(run) => {
            if run == 1 && oplen == 1 {
                if let Some(b) = s.get_mut(p) {
                    *b = val(count, 1);
                }
                return Ok(updated(s, prev));
            }
            if index != first {
                zeros(&mut seq, index - first);
            }
            seq.push(val(count, 1));
            if index != last {
                zeros(&mut seq, last - index);
            }
        }
    }

    // Step 3: put the new sequence in place of the old opcode. A lone XZERO byte at the very
    // end counts as two bytes, so the new length cuts the sequence short by one byte, as in
    // Redis (which writes that byte over the string's terminator).
    let delta = seq.len() as isize - oplen as isize;
    if delta > 0 && end + delta as usize > max_bytes {
        return promote(s, index, count);
    }
    let new_len = end.saturating_add_signed(delta);
    let old_end = next.unwrap_or(end).max(p);
    s.splice(p..old_end, seq);
    s.truncate(new_len);
    Ok(updated(s, prev))
}

/// Step 4 of Redis's `hllSparseSet`: joins adjacent VALs of one value whose runs fit one
/// opcode, looking at up to five opcodes from `prev` (or the first); then invalidates the cache.
fn updated(s: &mut Vec<u8>, prev: Option<usize>) -> bool {
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < s.len() && scan > 0 {
        scan -= 1;
        let Some(&b) = s.get(p) else { break };
        if is_xzero(b) {
            p += 2;
            continue;
        }
        if !is_val(b) {
            p += 1;
            continue;
        }
        if let Some(&b2) = s.get(p + 1).filter(|&&b2| is_val(b2)) {
            let (v1, v2) = (((b >> 2) & 0x1f) + 1, ((b2 >> 2) & 0x1f) + 1);
            let len = usize::from(b & 3) + usize::from(b2 & 3) + 2;
            if v1 == v2 && len <= VAL_MAX_LEN {
                if let Some(x) = s.get_mut(p + 1) {
                    *x = val(v1, len);
                }
                s.remove(p);
                continue;
            }
        }
        p += 1;
    }
    super::invalidate(s);
    true
}

/// Turns `s` dense, then sets the register there.
fn promote(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    super::to_dense(s)?;
    Ok(dense::set(dense::registers_mut(s), index, count))
}

/// The opcodes of a sparse `body` as PFDEBUG DECODE prints them: `z:N`, `Z:N`, `v:V,N`.
pub fn describe(body: &[u8]) -> String {
    let mut out = String::new();
    let mut p = 0;
    while let Some((op, len)) = op_at(body, p) {
        if !out.is_empty() {
            out.push(' ');
        }
        match op {
            Op::Zero(run) if len == 2 => out.push_str(&format!("Z:{run}")),
            Op::Zero(run) => out.push_str(&format!("z:{run}")),
            Op::Val(v, run) => out.push_str(&format!("v:{v},{run}")),
        }
        p += len;
    }
    out
}
