//! The cardinality estimate from the histogram of register values: Otmar Ertl's improved raw
//! estimator ("New cardinality estimation algorithms for HyperLogLog sketches",
//! arXiv:1702.01284), computed with the same double operations in the same order as Redis 7's
//! `hllCount`, `hllSigma` and `hllTau`, so results agree to the last unit.

use super::{Q, REGISTERS};

/// `0.5 / ln 2`.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// Ertl's sigma: `x + sum_k x^(2^k) 2^(k-1)`, infinite at 1.
pub fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

/// Ertl's tau: `(1 - x - sum_k (1 - x^(2^-k))^2 2^-k) / 3`, 0 at 0 and 1.
pub fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// C's `llroundl` on a double as x86-64 glibc does it: halves away from zero; a value out of
/// the range of a 64-bit integer (infinity, NaN) gives the "integer indefinite" `i64::MIN`.
fn llround(x: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    let r = x.round();
    if r.is_nan() || !(-LIMIT..LIMIT).contains(&r) {
        i64::MIN
    } else {
        r as i64
    }
}

/// The estimate for a histogram of the 16384 register values (`histo[v]` = registers at `v`;
/// values past Q + 1 = 51, possible only in a hand-made dense value, are not counted).
pub fn from_histogram(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let at = |v: usize| f64::from(histo.get(v).copied().unwrap_or(0) as i32);
    let q = Q as usize;
    let mut z = m * tau((m - at(q + 1)) / m);
    for j in (1..=q).rev() {
        z += at(j);
        z *= 0.5;
    }
    z += m * sigma(at(0) / m);
    llround(ALPHA_INF * m * m / z) as u64
}
