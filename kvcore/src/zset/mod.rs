//! Sorted sets: members with scores, ordered by `(score, member)`.
//!
//! Two encodings, as in Redis:
//! - **listpack** ([`listpack::Listpack`]): one byte buffer of entries in order, for sets of at
//!   most `zset-max-listpack-entries` members none longer than `zset-max-listpack-value` bytes.
//!   Every operation is a linear walk over a few kilobytes at most.
//! - **skiplist** (the name Redis reports; here [`Big`]): a hash table member → score for O(1)
//!   ZSCORE and membership (our progressive-rehash dict, as Redis's zset dict: no ZADD pays for
//!   a whole-table resize, and the table shrinks after deletes), plus an order-statistic B+tree ([`tree::Tree`]) over
//!   `(score, member)` for O(log n) rank, select and range starts. Each member is allocated
//!   once ([`member::Member`]: score, length and bytes behind a thin pointer), owned by the
//!   tree and referenced by the table.
//!
//! A set converts to the large encoding when an insert would pass either limit and never
//! converts back in place (Redis converts back only when it builds a new set, as the *STORE
//! commands do; [`ZSet::from_sorted`] does the same). Scores are never NaN; `-0` and `0` compare
//! equal and ties order by member bytes.

pub mod bounds;
pub mod listpack;
pub mod member;
pub mod tree;

use crate::dict::Dict;

use listpack::{cmp_entry, Listpack};
use member::{Member, MemberRef};
use tree::{Entry, Tree};

/// The encoding limits, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `zset-max-listpack-entries`.
    pub max_entries: usize,
    /// `zset-max-listpack-value`.
    pub max_value: usize,
}

impl Default for Limits {
    /// Redis's defaults: 128 entries of at most 64 bytes.
    fn default() -> Self {
        Limits {
            max_entries: 128,
            max_value: 64,
        }
    }
}

impl Limits {
    /// Whether a set of `len` members, the longest `max_len` bytes, fits a listpack.
    pub fn fits(&self, len: usize, max_len: usize) -> bool {
        len <= self.max_entries && max_len <= self.max_value && len <= u16::MAX as usize
    }
}

/// The large encoding: member → score table plus the ordered index.
///
/// The tree owns the members; the table holds references to them (see [`member`] for the
/// invariant).
#[derive(Debug)]
pub struct Big {
    map: Dict<MemberRef>,
    tree: Tree,
    block_bytes: usize,
}

impl Default for Big {
    fn default() -> Self {
        Big {
            map: crate::dict::retiring(Dict::new()),
            tree: Tree::default(),
            block_bytes: 0,
        }
    }
}

impl Drop for Big {
    fn drop(&mut self) {
        if self.map.len() > crate::lazyfree::THRESHOLD {
            // The table only refers into the tree's members, so the two go together.
            let parts = (
                std::mem::take(&mut self.map),
                std::mem::take(&mut self.tree),
            );
            crate::lazyfree::defer(parts);
        }
    }
}

impl Clone for Big {
    fn clone(&self) -> Self {
        let mut b = Big::default();
        self.tree.walk(0, false, |e| {
            b.upsert(e.member.bytes(), e.score);
            true
        });
        b
    }
}

impl Big {
    fn find(&self, m: &[u8]) -> Option<MemberRef> {
        self.map.get(m).copied()
    }

    /// The table's reference to `m` and its score.
    fn find_scored(&self, m: &[u8]) -> Option<(MemberRef, f64)> {
        // SAFETY: the reference comes from this set's table (see `ref_bytes`).
        self.find(m).map(|r| (r, unsafe { r.score() }))
    }

    fn score(&self, m: &[u8]) -> Option<f64> {
        self.find_scored(m).map(|(_, s)| s)
    }

    fn upsert(&mut self, m: &[u8], score: f64) -> Option<f64> {
        if let Some(r) = self.find(m) {
            // SAFETY: the reference comes from this set's table (see `ref_bytes`).
            let old = unsafe { r.score() };
            if old.to_bits() != score.to_bits() {
                // The block moves with its entry; the table's reference stays valid.
                if let Some(mut e) = self.tree.remove(old, m) {
                    debug_assert!(r.is(&e.member));
                    e.score = score;
                    e.member.set_score(score);
                    self.tree.insert(e);
                }
            }
            return Some(old);
        }
        let member = Member::new(m, score);
        self.block_bytes += member.block_bytes();
        // The tree owns the member before the table refers to it.
        let r = member.as_ref();
        self.tree.insert(Entry { score, member });
        self.map.insert_new(r);
        None
    }

    fn remove(&mut self, m: &[u8]) -> Option<f64> {
        // The reference leaves the table before the tree drops its member.
        let r = self.map.remove(m)?;
        self.map.maybe_shrink();
        // SAFETY: the member is still owned by the tree.
        let s = unsafe { r.score() };
        let e = self.tree.remove(s, m);
        debug_assert!(e.is_some());
        if let Some(e) = e {
            self.block_bytes -= e.member.block_bytes();
        }
        Some(s)
    }
}

/// A sorted set in either encoding.
#[derive(Clone, Debug)]
pub enum ZSet {
    /// Small: a listpack.
    Listpack(Listpack),
    /// Large: hash table plus B+tree (`OBJECT ENCODING` says `skiplist`).
    Big(Box<Big>),
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && {
            let mut a = Vec::new();
            let mut b = Vec::new();
            self.range(0, self.len(), false, |m, s| {
                a.push((m.to_vec(), s.to_bits()))
            });
            other.range(0, other.len(), false, |m, s| {
                b.push((m.to_vec(), s.to_bits()))
            });
            a == b
        }
    }
}

impl ZSet {
    /// An empty set in the encoding a first member of `first_len` bytes calls for.
    pub fn new(limits: Limits, first_len: usize) -> Self {
        if limits.max_entries == 0 || first_len > limits.max_value {
            ZSet::Big(Box::default())
        } else {
            ZSet::Listpack(Listpack::new())
        }
    }

    /// An empty set in the large encoding.
    pub fn new_big() -> Self {
        ZSet::Big(Box::default())
    }

    /// Builds a set from entries in `(score, member)` order, choosing the encoding by size.
    pub fn from_sorted(limits: Limits, items: &[(&[u8], f64)]) -> Self {
        let max_len = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        if limits.fits(items.len(), max_len) {
            ZSet::Listpack(Listpack::from_sorted(items.iter().copied()))
        } else {
            let mut b = Big::default();
            for (m, s) in items {
                b.upsert(m, *s);
            }
            ZSet::Big(Box::new(b))
        }
    }

    /// `listpack` or `skiplist`, as `OBJECT ENCODING` says.
    pub fn encoding(&self) -> &'static str {
        match self {
            ZSet::Listpack(_) => "listpack",
            ZSet::Big(_) => "skiplist",
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            ZSet::Listpack(l) => l.len(),
            ZSet::Big(b) => b.tree.len(),
        }
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Listpack(l) => l.find(member).map(|(_, it)| it.score),
            ZSet::Big(b) => b.score(member),
        }
    }

    fn to_big(l: &Listpack) -> Box<Big> {
        let mut b = Big::default();
        for it in l.iter() {
            b.upsert(it.member, it.score);
        }
        Box::new(b)
    }

    /// Sets the score of `member`, adding it when absent; returns the old score. Converts to
    /// the large encoding first when the listpack would pass `limits`.
    pub fn insert(&mut self, member: &[u8], score: f64, limits: Limits) -> Option<f64> {
        if let ZSet::Listpack(l) = self {
            match l.find(member) {
                Some((_, it)) => {
                    let old = it.score;
                    if old.to_bits() != score.to_bits() {
                        l.remove(member);
                        l.insert(member, score);
                    }
                    return Some(old);
                }
                None => {
                    if l.len() < limits.max_entries
                        && member.len() <= limits.max_value
                        && l.len() < u16::MAX as usize
                    {
                        l.insert(member, score);
                        return None;
                    }
                    *self = ZSet::Big(Self::to_big(l));
                }
            }
        }
        match self {
            ZSet::Big(b) => b.upsert(member, score),
            ZSet::Listpack(_) => None,
        }
    }

    /// Removes `member`; returns its score if it was present.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Listpack(l) => l.remove(member),
            ZSet::Big(b) => b.remove(member),
        }
    }

    /// The 0-based ascending rank and score of `member`.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match self {
            ZSet::Listpack(l) => l.find(member).map(|(r, it)| (r, it.score)),
            ZSet::Big(b) => {
                let (r, s) = b.find_scored(member)?;
                Some((b.tree.rank_of(r, s, member), s))
            }
        }
    }

    /// Number of leading members for which `pred(score, member)` holds (`pred` must hold for
    /// a prefix of the order).
    pub fn rank_by(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        match self {
            ZSet::Listpack(l) => l.iter().take_while(|it| pred(it.score, it.member)).count(),
            ZSet::Big(b) => b.tree.rank_by(pred),
        }
    }

    /// Calls `f(member, score)` for ranks `start..end`, ascending, or descending from `end - 1`
    /// down to `start` when `rev`. Stops early when `f` returns false.
    pub fn range_while(
        &self,
        start: usize,
        end: usize,
        rev: bool,
        mut f: impl FnMut(&[u8], f64) -> bool,
    ) {
        let end = end.min(self.len());
        if start >= end {
            return;
        }
        match self {
            ZSet::Listpack(l) => {
                if rev {
                    let items: Vec<_> = l.iter().skip(start).take(end - start).collect();
                    for it in items.iter().rev() {
                        if !f(it.member, it.score) {
                            return;
                        }
                    }
                } else {
                    for it in l.iter().skip(start).take(end - start) {
                        if !f(it.member, it.score) {
                            return;
                        }
                    }
                }
            }
            ZSet::Big(b) => {
                let mut left = end - start;
                let from = if rev { end - 1 } else { start };
                b.tree.walk(from, rev, |e| {
                    left -= 1;
                    f(e.member.bytes(), e.score) && left > 0
                });
            }
        }
    }

    /// [`ZSet::range_while`] visiting every rank of `start..end`.
    pub fn range(&self, start: usize, end: usize, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        self.range_while(start, end, rev, |m, s| {
            f(m, s);
            true
        });
    }

    /// The member and score at ascending rank `r`.
    pub fn at(&self, r: usize) -> Option<(Vec<u8>, f64)> {
        let mut out = None;
        self.range_while(r, r + 1, false, |m, s| {
            out = Some((m.to_vec(), s));
            false
        });
        out
    }

    /// Removes the members of ranks `start..end`; returns how many.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(self.len());
        if start >= end {
            return 0;
        }
        match self {
            ZSet::Listpack(l) => l.remove_ranks(start, end),
            ZSet::Big(b) => {
                let mut victims: Vec<Vec<u8>> = Vec::with_capacity(end - start);
                b.tree.walk(start, false, |e| {
                    victims.push(e.member.bytes().to_vec());
                    victims.len() < end - start
                });
                for m in &victims {
                    b.remove(m);
                }
                victims.len()
            }
        }
    }

    /// Heap bytes held (for MEMORY USAGE and maxmemory accounting).
    pub fn heap_bytes(&self) -> usize {
        match self {
            ZSet::Listpack(l) => l.bytes(),
            ZSet::Big(b) => {
                std::mem::size_of::<Big>()
                    + b.map.table_bytes()
                    + b.tree.heap_bytes()
                    + b.block_bytes
            }
        }
    }
}

/// Whether `(a, am)` orders before `(b, bm)`.
pub fn less(a: f64, am: &[u8], b: f64, bm: &[u8]) -> bool {
    cmp_entry(a, am, b, bm) == std::cmp::Ordering::Less
}

#[cfg(test)]
mod tests;
