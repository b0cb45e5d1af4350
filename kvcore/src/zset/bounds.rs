//! Bounds over scores and members, as the range commands give them, and their ranks.
//!
//! A score bound is a float with an optional `(` for "exclusive"; a lex bound is `[m`
//! (inclusive), `(m` (exclusive), `-` (below everything) or `+` (above everything). Each range
//! turns into a half-open rank range `start..end` of the set through two [`ZSet::rank_by`]
//! searches, so every range command (count, list, remove) is rank arithmetic afterwards.

use super::ZSet;
use crate::resp::float::parse_double;

/// `min..max` over scores with exclusive flags.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    /// Lower bound.
    pub min: f64,
    /// Whether `min` itself is excluded.
    pub minex: bool,
    /// Upper bound.
    pub max: f64,
    /// Whether `max` itself is excluded.
    pub maxex: bool,
}

fn parse_score_bound(a: &[u8]) -> Option<(f64, bool)> {
    // strtod reads a C string: a NUL ends the text ("1\0x" is 1, "\0x" is "").
    let a = a.split(|&b| b == 0).next().unwrap_or_default();
    let (ex, body) = match a.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, a),
    };
    // Redis reads bounds with strtod: leading white space is skipped, an empty string reads
    // as 0, and out-of-range decimals become +-inf or 0 instead of errors.
    let start = body
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .unwrap_or(body.len());
    let body = &body[start..];
    if body.is_empty() {
        return Some((0.0, ex));
    }
    let v = parse_double(body).or_else(|| {
        let t = std::str::from_utf8(body).ok()?;
        let v: f64 = t.parse().ok()?;
        (!v.is_nan()).then_some(v)
    })?;
    Some((v, ex))
}

impl ScoreRange {
    /// Parses `min max` (`ERR min or max is not a float` otherwise).
    pub fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        let (min, minex) = parse_score_bound(min)?;
        let (max, maxex) = parse_score_bound(max)?;
        Some(ScoreRange {
            min,
            minex,
            max,
            maxex,
        })
    }

    /// Whether `s` is at or past the lower bound.
    pub fn above_min(&self, s: f64) -> bool {
        if self.minex {
            s > self.min
        } else {
            s >= self.min
        }
    }

    /// Whether `s` is at or before the upper bound.
    pub fn below_max(&self, s: f64) -> bool {
        if self.maxex {
            s < self.max
        } else {
            s <= self.max
        }
    }

    /// Whether no score can be in the range.
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }

    /// The ranks `start..end` of the members in the range.
    pub fn ranks(&self, z: &ZSet) -> (usize, usize) {
        if self.is_empty() {
            return (0, 0);
        }
        let start = z.rank_by(|s, _| !self.above_min(s));
        let end = z.rank_by(|s, _| self.below_max(s));
        (start, end.max(start))
    }
}

/// One end of a lex range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    NegInf,
    /// `+`: above every member.
    PosInf,
    /// `[m`
    Incl(Vec<u8>),
    /// `(m`
    Excl(Vec<u8>),
}

impl LexBound {
    /// Parses a bound (`ERR min or max not valid string range item` otherwise).
    pub fn parse(a: &[u8]) -> Option<LexBound> {
        match a.split_first() {
            Some((b'+', [])) => Some(LexBound::PosInf),
            Some((b'-', [])) => Some(LexBound::NegInf),
            Some((b'[', rest)) => Some(LexBound::Incl(rest.to_vec())),
            Some((b'(', rest)) => Some(LexBound::Excl(rest.to_vec())),
            _ => None,
        }
    }
}

/// `min..max` over members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    /// Lower bound.
    pub min: LexBound,
    /// Upper bound.
    pub max: LexBound,
}

impl LexRange {
    /// Parses `min max`.
    pub fn parse(min: &[u8], max: &[u8]) -> Option<LexRange> {
        Some(LexRange {
            min: LexBound::parse(min)?,
            max: LexBound::parse(max)?,
        })
    }

    /// Whether `m` is at or past the lower bound.
    pub fn above_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Incl(b) => m >= &b[..],
            LexBound::Excl(b) => m > &b[..],
        }
    }

    /// Whether `m` is at or before the upper bound.
    pub fn below_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(b) => m <= &b[..],
            LexBound::Excl(b) => m < &b[..],
        }
    }

    /// Whether no member can be in the range.
    pub fn is_empty(&self) -> bool {
        use LexBound::*;
        match (&self.min, &self.max) {
            (PosInf, _) | (_, NegInf) => true,
            (NegInf, _) | (_, PosInf) => false,
            (Incl(a), Incl(b)) => a > b,
            (Incl(a), Excl(b)) | (Excl(a), Incl(b)) | (Excl(a), Excl(b)) => a >= b,
        }
    }

    /// The ranks `start..end` of the members in the range (members of equal score).
    pub fn ranks(&self, z: &ZSet) -> (usize, usize) {
        if self.is_empty() {
            return (0, 0);
        }
        let start = z.rank_by(|_, m| !self.above_min(m));
        let end = z.rank_by(|_, m| self.below_max(m));
        (start, end.max(start))
    }
}
