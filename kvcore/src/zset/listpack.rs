//! The small sorted-set encoding: one byte buffer of `(member, score)` entries in
//! `(score, member)` order.
//!
//! Layout: a little-endian `u16` entry count, then entries back to back. An entry is the member
//! length as a LEB128 varint, the member bytes, then the score: integral scores of magnitude
//! below 2^53 as a varint of `zigzag(i) << 1` (`-0` included, which reads back as `0`, as in
//! Redis), any other score as the varint `1` followed by the 8 bytes of the `f64`. Scores like `1`, `42` or `-7` thus cost one byte, as
//! in Redis's listpack. Every operation is a linear walk; the set converts to the large encoding
//! before it passes `zset-max-listpack-entries` (at most a few hundred entries), so that is cheap.
//!
//! Decoding never trusts lengths: a malformed buffer (which only a bug could produce) ends the
//! walk instead of panicking.

use std::cmp::Ordering;

/// One decoded entry and where it lies in the buffer.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    /// Member bytes.
    pub member: &'a [u8],
    /// Score.
    pub score: f64,
    /// Byte offset of the entry.
    pub start: usize,
    /// Byte offset just past the entry.
    pub end: usize,
}

/// A listpack-encoded sorted set.
#[derive(Clone, Debug, PartialEq)]
pub struct Listpack {
    buf: Box<[u8]>,
}

impl Default for Listpack {
    fn default() -> Self {
        Self::new()
    }
}

/// `(a_score, a_member)` against `(b_score, b_member)`, Redis's order (`-0 == 0`).
pub fn cmp_entry(a: f64, am: &[u8], b: f64, bm: &[u8]) -> Ordering {
    a.partial_cmp(&b)
        .unwrap_or(Ordering::Equal)
        .then_with(|| am.cmp(bm))
}

const MAX_EXACT: f64 = 9_007_199_254_740_992.0; // 2^53

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift >= 64 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
    }
}

/// Appends one encoded entry.
pub fn encode_entry(out: &mut Vec<u8>, member: &[u8], score: f64) {
    put_varint(out, member.len() as u64);
    out.extend_from_slice(member);
    // `-0` is stored as the integer 0, as Redis's listpack does.
    if score.fract() == 0.0 && score.abs() < MAX_EXACT {
        let i = score as i64;
        let zz = ((i << 1) ^ (i >> 63)) as u64;
        put_varint(out, zz << 1);
    } else {
        put_varint(out, 1);
        out.extend_from_slice(&score.to_le_bytes());
    }
}

fn decode_at(buf: &[u8], start: usize) -> Option<Item<'_>> {
    let mut pos = start;
    let len = usize::try_from(get_varint(buf, &mut pos)?).ok()?;
    let member = buf.get(pos..pos.checked_add(len)?)?;
    pos += len;
    let tag = get_varint(buf, &mut pos)?;
    let score = if tag == 1 {
        let bytes: [u8; 8] = buf.get(pos..pos + 8)?.try_into().ok()?;
        pos += 8;
        f64::from_le_bytes(bytes)
    } else {
        let zz = tag >> 1;
        let i = ((zz >> 1) as i64) ^ -((zz & 1) as i64);
        i as f64
    };
    Some(Item {
        member,
        score,
        start,
        end: pos,
    })
}

/// Forward iterator over a listpack's entries.
pub struct Iter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Item<'a>;
    fn next(&mut self) -> Option<Item<'a>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let it = decode_at(self.buf, self.pos)?;
        self.pos = it.end;
        Some(it)
    }
}

impl Listpack {
    /// An empty listpack.
    pub fn new() -> Self {
        Listpack {
            buf: Box::new([0, 0]),
        }
    }

    /// Builds a listpack from entries already in `(score, member)` order without duplicates.
    pub fn from_sorted<'a>(items: impl IntoIterator<Item = (&'a [u8], f64)>) -> Self {
        let mut out = vec![0, 0];
        let mut n: u16 = 0;
        for (m, s) in items {
            encode_entry(&mut out, m, s);
            n = n.saturating_add(1);
        }
        out[..2].copy_from_slice(&n.to_le_bytes());
        Listpack {
            buf: out.into_boxed_slice(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        usize::from(u16::from_le_bytes([self.buf[0], self.buf[1]]))
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the buffer.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Entries in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: &self.buf,
            pos: 2,
        }
    }

    /// The entry of `member` and its rank.
    pub fn find(&self, member: &[u8]) -> Option<(usize, Item<'_>)> {
        self.iter().enumerate().find(|(_, it)| it.member == member)
    }

    fn set_len(buf: &mut [u8], n: usize) {
        let n = u16::try_from(n).unwrap_or(u16::MAX);
        buf[..2].copy_from_slice(&n.to_le_bytes());
    }

    /// Inserts a member known to be absent at its place in order.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        let at = self
            .iter()
            .find(|it| cmp_entry(it.score, it.member, score, member) == Ordering::Greater)
            .map_or(self.buf.len(), |it| it.start);
        let mut enc = Vec::with_capacity(member.len() + 12);
        encode_entry(&mut enc, member, score);
        let mut v = std::mem::take(&mut self.buf).into_vec();
        v.splice(at..at, enc);
        let n = self.len_of(&v) + 1;
        Self::set_len(&mut v, n);
        self.buf = v.into_boxed_slice();
    }

    fn len_of(&self, v: &[u8]) -> usize {
        usize::from(u16::from_le_bytes([v[0], v[1]]))
    }

    /// Removes the entries in the byte range `start..end` holding `count` entries.
    fn cut(&mut self, start: usize, end: usize, count: usize) {
        let mut v = std::mem::take(&mut self.buf).into_vec();
        v.drain(start..end);
        let n = self.len_of(&v).saturating_sub(count);
        Self::set_len(&mut v, n);
        self.buf = v.into_boxed_slice();
    }

    /// Removes `member`; returns its score if present.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (_, it) = self.find(member)?;
        let (s, e, score) = (it.start, it.end, it.score);
        self.cut(s, e, 1);
        Some(score)
    }

    /// Removes the entries of ranks `start..end`; returns how many.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> usize {
        if start >= end {
            return 0;
        }
        let mut from = None;
        let mut to = self.buf.len();
        for (i, it) in self.iter().enumerate() {
            if i == start {
                from = Some(it.start);
            }
            if i == end {
                to = it.start;
                break;
            }
        }
        match from {
            Some(f) => {
                let n = end.min(self.len()) - start;
                self.cut(f, to, n);
                n
            }
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_roundtrip_and_order() {
        let mut lp = Listpack::new();
        let scores = [
            1.0,
            -0.0,
            0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e300,
            -5e-324,
            0.1,
            -7.0,
            9_007_199_254_740_993.0,
            -9_007_199_254_740_992.0,
        ];
        for (i, s) in scores.iter().enumerate() {
            lp.insert(format!("m{i}").as_bytes(), *s);
        }
        assert_eq!(lp.len(), scores.len());
        let got: Vec<f64> = lp.iter().map(|it| it.score).collect();
        let mut want = scores.to_vec();
        want.sort_by(|a, b| a.partial_cmp(b).unwrap());
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(g.to_bits() == w.to_bits() || (*g == 0.0 && *w == 0.0));
        }
        // Like Redis's listpack, `-0` comes back as `0`.
        let zero = lp.find(b"m1").unwrap().1.score;
        assert!(zero == 0.0 && zero.is_sign_positive());
        assert_eq!(lp.remove(b"m0"), Some(1.0));
        assert_eq!(lp.remove(b"m0"), None);
        assert_eq!(lp.remove_ranks(0, 3), 3);
        assert_eq!(lp.len(), scores.len() - 4);
        assert_eq!(lp.iter().count(), lp.len());
    }
}
