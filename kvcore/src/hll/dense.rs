//! The dense representation: 16384 registers of 6 bits, register `i` starting at bit `6 * i`,
//! bits filled from the least significant bit of each byte up (Redis's
//! `HLL_DENSE_GET_REGISTER` / `HLL_DENSE_SET_REGISTER`). A register may straddle two bytes; the
//! last one ends exactly at the last byte, so no access reaches past the array.

use super::{DENSE_BYTES, DENSE_SIZE, HDR, REGISTERS, REGISTER_MAX};

/// The register bytes of a dense value (empty if `s` is too short, which [`super::check`]
/// rules out).
pub fn registers(s: &[u8]) -> &[u8] {
    s.get(HDR..DENSE_SIZE).unwrap_or_default()
}

/// The register bytes of a dense value, mutable.
pub fn registers_mut(s: &mut [u8]) -> &mut [u8] {
    s.get_mut(HDR..DENSE_SIZE).unwrap_or_default()
}

/// Register `i` of `regs`.
#[inline]
pub fn get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = u16::from(regs.get(byte).copied().unwrap_or(0));
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 | (b1 << 8)) >> fb) & u16::from(REGISTER_MAX)) as u8
}

/// Sets register `i` of `regs` to `val` (0..=63).
#[inline]
pub fn put(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let mask = u16::from(REGISTER_MAX) << fb;
    let v = u16::from(val & REGISTER_MAX) << fb;
    if let Some(b) = regs.get_mut(byte) {
        *b = (*b & !(mask as u8)) | v as u8;
    }
    if fb > 2 {
        if let Some(b) = regs.get_mut(byte + 1) {
            *b = (*b & !((mask >> 8) as u8)) | (v >> 8) as u8;
        }
    }
}

/// Raises register `i` to `count` if it is lower (Redis's `hllDenseSet`); whether it changed.
#[inline]
pub fn set(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > get(regs, i) {
        put(regs, i, count);
        true
    } else {
        false
    }
}

/// Adds the count of each register value to `histo` (Redis's `hllDenseRegHisto`): four
/// registers from every three bytes.
pub fn histogram(regs: &[u8], histo: &mut [u32; 64]) {
    let regs = regs.get(..DENSE_BYTES).unwrap_or_default();
    for t in regs.chunks_exact(3) {
        let w = u32::from(t.first().copied().unwrap_or(0))
            | u32::from(t.get(1).copied().unwrap_or(0)) << 8
            | u32::from(t.get(2).copied().unwrap_or(0)) << 16;
        for shift in [0, 6, 12, 18] {
            if let Some(h) = histo.get_mut(((w >> shift) & 63) as usize) {
                *h += 1;
            }
        }
    }
}

/// Raises each of `max` to the register of the same index.
pub fn merge_into(max: &mut [u8; REGISTERS], regs: &[u8]) {
    let regs = regs.get(..DENSE_BYTES).unwrap_or_default();
    for (four, t) in max.chunks_exact_mut(4).zip(regs.chunks_exact(3)) {
        let w = u32::from(t.first().copied().unwrap_or(0))
            | u32::from(t.get(1).copied().unwrap_or(0)) << 8
            | u32::from(t.get(2).copied().unwrap_or(0)) << 16;
        for (k, m) in four.iter_mut().enumerate() {
            let v = ((w >> (6 * k)) & 63) as u8;
            if v > *m {
                *m = v;
            }
        }
    }
}
