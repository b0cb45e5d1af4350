//! Redis's intset: a sorted array of distinct integers, all stored at the width the widest one
//! needs, in Redis's exact byte format (so a snapshot writes it as the blob it is).
//!
//! ```text
//! <encoding u32 LE: 2, 4 or 8> <length u32 LE> <values, little-endian, ascending>
//! ```
//!
//! Membership is a binary search; an insert or removal moves the bytes after it (the set
//! converts to another encoding past `set-max-intset-entries`, 512 by default). Adding a value
//! that needs a wider encoding rewrites every value at the new width ("upgrade"); intsets never
//! narrow.

const HEADER: usize = 8;

/// The width a value needs: 2, 4 or 8 bytes.
fn width_of(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

/// The blob's width (`None` for bytes that are not an intset header).
pub fn width(blob: &[u8]) -> Option<usize> {
    let w = u32::from_le_bytes(blob.get(..4)?.try_into().ok()?);
    matches!(w, 2 | 4 | 8).then_some(w as usize)
}

/// Whether `blob` is an intset (its first word is one of the widths; a listpack's first word
/// is its total size, at least 7 and never 8, so the two never read alike).
pub fn is_intset(blob: &[u8]) -> bool {
    width(blob).is_some()
}

/// Number of values.
pub fn len(blob: &[u8]) -> usize {
    blob.get(4..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, |b| u32::from_le_bytes(b) as usize)
}

/// Value `i` (in range).
pub fn get(blob: &[u8], i: usize) -> i64 {
    let w = width(blob).unwrap_or(8);
    let at = HEADER + i * w;
    let Some(b) = blob.get(at..at + w) else {
        return 0;
    };
    match w {
        2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        4 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => i64::from_le_bytes(b.try_into().unwrap_or_default()),
    }
}

/// `Ok(index)` of `v`, or `Err(index)` where it would go.
pub fn search(blob: &[u8], v: i64) -> Result<usize, usize> {
    let (mut lo, mut hi) = (0, len(blob));
    while lo < hi {
        let mid = (lo + hi) / 2;
        match get(blob, mid).cmp(&v) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// An empty intset.
pub fn new() -> Box<[u8]> {
    let mut b = vec![0u8; HEADER];
    b[..4].copy_from_slice(&2u32.to_le_bytes());
    b.into_boxed_slice()
}

/// An intset of `values` (ascending, distinct).
pub fn from_sorted(values: &[i64]) -> Box<[u8]> {
    let w = values.iter().map(|&v| width_of(v)).max().unwrap_or(2);
    let mut b = Vec::with_capacity(HEADER + values.len() * w);
    b.extend_from_slice(&(w as u32).to_le_bytes());
    b.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for &v in values {
        b.extend_from_slice(&v.to_le_bytes()[..w]);
    }
    b.into_boxed_slice()
}

/// The values, ascending.
pub fn iter(blob: &[u8]) -> impl DoubleEndedIterator<Item = i64> + '_ {
    (0..len(blob)).map(move |i| get(blob, i))
}

/// Adds `v`; false if it was there.
pub fn insert(blob: &mut Box<[u8]>, v: i64) -> bool {
    let w = width(blob).unwrap_or(2);
    if width_of(v) > w {
        let mut all: Vec<i64> = iter(blob).collect();
        // Wider than every value present: it goes first (negative) or last.
        if v < 0 {
            all.insert(0, v);
        } else {
            all.push(v);
        }
        *blob = from_sorted(&all);
        return true;
    }
    let Err(at) = search(blob, v) else {
        return false;
    };
    let n = len(blob);
    let mut b = std::mem::take(blob).into_vec();
    let pos = HEADER + at * w;
    b.splice(pos..pos, v.to_le_bytes()[..w].iter().copied());
    b[4..8].copy_from_slice(&((n + 1) as u32).to_le_bytes());
    *blob = b.into_boxed_slice();
    true
}

/// Removes `v`; false if it was not there.
pub fn remove(blob: &mut Box<[u8]>, v: i64) -> bool {
    let Ok(at) = search(blob, v) else {
        return false;
    };
    let (w, n) = (width(blob).unwrap_or(2), len(blob));
    let mut b = std::mem::take(blob).into_vec();
    let pos = HEADER + at * w;
    b.drain(pos..pos + w);
    b[4..8].copy_from_slice(&((n - 1) as u32).to_le_bytes());
    *blob = b.into_boxed_slice();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn redis_bytes() {
        let mut b = new();
        assert!(insert(&mut b, 5));
        assert!(insert(&mut b, -3));
        assert!(!insert(&mut b, 5));
        assert_eq!(&b[..], &[2, 0, 0, 0, 2, 0, 0, 0, 0xFD, 0xFF, 5, 0][..]);
        assert!(insert(&mut b, 70000));
        assert_eq!(&b[..8], &[4, 0, 0, 0, 3, 0, 0, 0][..]);
        assert_eq!(iter(&b).collect::<Vec<_>>(), vec![-3, 5, 70000]);
        assert!(insert(&mut b, i64::MIN));
        assert_eq!(width(&b), Some(8));
        assert_eq!(iter(&b).collect::<Vec<_>>(), vec![i64::MIN, -3, 5, 70000]);
        assert!(remove(&mut b, 5));
        assert!(!remove(&mut b, 5));
        assert_eq!(len(&b), 3);
        assert!(is_intset(&b));
        assert!(!is_intset(<crate::listpack::Listpack>::new().as_bytes()));
    }

    proptest! {
        #[test]
        fn behaves_like_a_btreeset(ops in proptest::collection::vec((any::<bool>(), prop_oneof![-40i64..40, any::<i16>().prop_map(i64::from), any::<i32>().prop_map(i64::from), any::<i64>()]), 1..120)) {
            let mut b = new();
            let mut m = BTreeSet::new();
            for (add, v) in ops {
                if add {
                    prop_assert_eq!(insert(&mut b, v), m.insert(v));
                } else {
                    prop_assert_eq!(remove(&mut b, v), m.remove(&v));
                }
                prop_assert_eq!(iter(&b).collect::<Vec<_>>(), m.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!(b.len(), 8 + m.len() * width(&b).unwrap());
            }
        }
    }
}
