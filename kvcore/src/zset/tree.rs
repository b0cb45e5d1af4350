//! An order-statistic B+tree over `(score, member)`: the ordered index of large sorted sets.
//!
//! Leaves hold up to [`MAX`] entries in order; inner nodes hold up to [`MAX`] children, the
//! number of entries under each child, and separators: `seps[i]` is a lower bound of every
//! entry of child `i + 1` and greater than every entry of child `i` (the first entry of child
//! `i + 1` when it was set; deletions may leave it stale, which keeps both properties). Every
//! node but the root holds at least [`MIN`] items; a node that drops below is merged with a
//! sibling, or the pair is split evenly again.
//!
//! Costs: insert, delete, rank (entries before a key) and select (the entry at a rank) walk one
//! root-to-leaf path: O(log n) with a binary search per node. An in-order walk from a rank
//! costs O(log n + k). Compared with Redis's skip list the entries sit contiguously in leaves,
//! 16 bytes each, so a search touches a handful of cache lines instead of one node per level.

use super::listpack::cmp_entry;
use super::member::{Member, MemberRef};
use std::cmp::Ordering;

/// Most items in a node.
pub const MAX: usize = 64;
/// Fewest items in a non-root node.
pub const MIN: usize = MAX / 4;

/// One entry of the index: the score (kept here too so that searches compare scores without
/// following the pointer) and the member, which the hash table points into.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Score.
    pub score: f64,
    /// The member (owned here; the set's hash table holds a reference to it).
    pub member: Member,
}

impl Entry {
    fn cmp_key(&self, score: f64, member: &[u8]) -> Ordering {
        cmp_entry(self.score, self.member.bytes(), score, member)
    }
}

#[derive(Clone, Debug)]
struct Inner {
    seps: Vec<Entry>,
    kids: Vec<Node>,
    counts: Vec<usize>,
}

#[derive(Clone, Debug)]
enum Node {
    Leaf(Vec<Entry>),
    Inner(Box<Inner>),
}

impl Node {
    fn items(&self) -> usize {
        match self {
            Node::Leaf(v) => v.len(),
            Node::Inner(n) => n.kids.len(),
        }
    }

    fn total(&self) -> usize {
        match self {
            Node::Leaf(v) => v.len(),
            Node::Inner(n) => n.counts.iter().sum(),
        }
    }

    fn first(&self) -> Option<&Entry> {
        match self {
            Node::Leaf(v) => v.first(),
            Node::Inner(n) => n.kids.first().and_then(Node::first),
        }
    }

    /// Splits an over-full node in two; returns the separator and the right half.
    fn split(&mut self) -> (Entry, Node) {
        match self {
            Node::Leaf(v) => {
                let right: Vec<Entry> = split_vec(v, v.len() / 2);
                let sep = right[0].clone();
                (sep, Node::Leaf(right))
            }
            Node::Inner(n) => {
                let m = n.kids.len() / 2;
                let kids = split_vec(&mut n.kids, m);
                let counts = split_vec(&mut n.counts, m);
                let mut seps = split_vec(&mut n.seps, m - 1);
                let sep = seps.remove(0);
                (sep, Node::Inner(Box::new(Inner { seps, kids, counts })))
            }
        }
    }
}

/// Leaves grow by this many entries at a time, so a leaf wastes at most this many slots.
const LEAF_GROWTH: usize = 8;

fn split_vec<T>(v: &mut Vec<T>, at: usize) -> Vec<T> {
    let mut right = Vec::with_capacity(v.len() - at + LEAF_GROWTH);
    right.extend(v.drain(at..));
    v.shrink_to(v.len() + LEAF_GROWTH);
    right
}

impl Inner {
    /// Entries under the kids left of kid `i`, given `total` under this node: summed from
    /// whichever end is nearer, so a rank near the top (ZRANK of the highest scores) adds few
    /// counts.
    fn before(&self, i: usize, total: usize) -> usize {
        if 2 * i <= self.counts.len() {
            self.counts[..i].iter().sum()
        } else {
            total - self.counts[i..].iter().sum::<usize>()
        }
    }
}

/// Number of leading entries of `v` with a score below `s`.
fn lower_score(v: &[Entry], s: f64) -> usize {
    let (mut lo, mut hi) = (0, v.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if v[mid].score < s {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Index of the child of `n` that holds (or would hold) `(score, member)`.
fn child_for(n: &Inner, score: f64, member: &[u8]) -> usize {
    n.seps
        .partition_point(|s| s.cmp_key(score, member) != Ordering::Greater)
}

/// The B+tree.
#[derive(Clone, Debug)]
pub struct Tree {
    root: Node,
    len: usize,
}

impl Default for Tree {
    fn default() -> Self {
        Self::new()
    }
}

impl Tree {
    /// An empty tree.
    pub fn new() -> Self {
        Tree {
            root: Node::Leaf(Vec::new()),
            len: 0,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tree is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Inserts an entry that is not present.
    pub fn insert(&mut self, e: Entry) {
        self.len += 1;
        if let Some((sep, right)) = insert(&mut self.root, e) {
            let left = std::mem::replace(&mut self.root, Node::Leaf(Vec::new()));
            let counts = vec![left.total(), right.total()];
            let mut kids = Vec::with_capacity(MAX);
            kids.push(left);
            kids.push(right);
            let mut seps = Vec::with_capacity(MAX);
            seps.push(sep);
            let mut cv = Vec::with_capacity(MAX);
            cv.extend(counts);
            self.root = Node::Inner(Box::new(Inner {
                seps,
                kids,
                counts: cv,
            }));
        }
    }

    /// Removes the entry `(score, member)` and returns it.
    pub fn remove(&mut self, score: f64, member: &[u8]) -> Option<Entry> {
        let removed = remove(&mut self.root, score, member);
        if removed.is_some() {
            self.len -= 1;
            if let Node::Inner(n) = &mut self.root {
                if n.kids.len() == 1 {
                    let kid = n.kids.pop().unwrap_or(Node::Leaf(Vec::new()));
                    self.root = kid;
                }
            }
        }
        removed
    }

    /// Number of leading entries `e` for which `pred(e)` holds; `pred` must hold for a prefix
    /// of the order and fail for the rest (e.g. "less than a bound").
    pub fn rank_by(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        self.rank_by_entry(|e| pred(e.score, e.member.bytes()))
    }

    /// [`Tree::rank_by`] with the predicate on whole entries, so it can decide on the score
    /// alone and only touch the member's block (a cache miss) on a tie.
    fn rank_by_entry(&self, pred: impl Fn(&Entry) -> bool) -> usize {
        let mut node = &self.root;
        let mut rank = 0;
        // Entries under `node`, for `Inner::before`.
        let mut total = self.len;
        loop {
            match node {
                Node::Leaf(v) => return rank + v.partition_point(&pred),
                Node::Inner(n) => {
                    let i = n.seps.partition_point(&pred);
                    rank += n.before(i, total);
                    total = n.counts[i];
                    node = &n.kids[i];
                }
            }
        }
    }

    /// The rank of the entry whose member block `r` (member `member`, score `score`) is in
    /// the tree. The descent compares scores alone (no member block read, and half the
    /// branches of a `(score, member)` compare) down to the first entry with `score`; `r` is
    /// then found among the tied entries by pointer. When a tied run crosses a node boundary
    /// it takes the full search instead.
    pub fn rank_of(&self, r: MemberRef, score: f64, member: &[u8]) -> usize {
        let mut node = &self.root;
        let mut rank = 0;
        let mut total = self.len;
        loop {
            match node {
                Node::Leaf(v) => {
                    // The entries tied with `score` follow; `r` is among them unless the run
                    // goes on into the next leaf.
                    let i = lower_score(v, score);
                    return match v[i..]
                        .iter()
                        .take_while(|e| e.score == score)
                        .position(|e| r.is(&e.member))
                    {
                        Some(k) => rank + i + k,
                        None => self.rank(score, member),
                    };
                }
                Node::Inner(n) => {
                    let i = lower_score(&n.seps, score);
                    if n.seps.get(i).is_some_and(|e| e.score == score) {
                        // Tied entries on both sides of a separator (all of them, in a set
                        // ordered by member alone): only the member can tell where `r` is.
                        return self.rank(score, member);
                    }
                    rank += n.before(i, total);
                    total = n.counts[i];
                    node = &n.kids[i];
                }
            }
        }
    }

    /// Number of entries ordered before `(score, member)` (the full search behind
    /// [`Tree::rank_of`]).
    fn rank(&self, score: f64, member: &[u8]) -> usize {
        self.rank_by_entry(|e| match e.score.partial_cmp(&score) {
            Some(Ordering::Less) => true,
            Some(Ordering::Greater) => false,
            _ => e.member.bytes() < member,
        })
    }

    /// The entry at `rank` (0-based).
    pub fn select(&self, mut rank: usize) -> Option<&Entry> {
        if rank >= self.len {
            return None;
        }
        let mut node = &self.root;
        loop {
            match node {
                Node::Leaf(v) => return v.get(rank),
                Node::Inner(n) => {
                    let mut i = 0;
                    while i + 1 < n.counts.len() && rank >= n.counts[i] {
                        rank -= n.counts[i];
                        i += 1;
                    }
                    node = &n.kids[i];
                }
            }
        }
    }

    /// Calls `f` on entries from rank `from` on, ascending (or descending when `rev`), until it
    /// returns false or the entries run out.
    pub fn walk(&self, from: usize, rev: bool, mut f: impl FnMut(&Entry) -> bool) {
        if from >= self.len {
            return;
        }
        walk(&self.root, from, rev, &mut f);
    }

    /// The first entry.
    pub fn first(&self) -> Option<&Entry> {
        self.root.first()
    }

    /// Heap bytes of the nodes (not the member bytes).
    pub fn heap_bytes(&self) -> usize {
        fn node_bytes(n: &Node) -> usize {
            match n {
                Node::Leaf(v) => v.capacity() * std::mem::size_of::<Entry>(),
                Node::Inner(i) => {
                    std::mem::size_of::<Inner>()
                        + i.seps.capacity() * std::mem::size_of::<Entry>()
                        + i.kids.capacity() * std::mem::size_of::<Node>()
                        + i.counts.capacity() * 8
                        + i.kids.iter().map(node_bytes).sum::<usize>()
                }
            }
        }
        node_bytes(&self.root)
    }

    /// Checks the invariants (tests).
    #[cfg(test)]
    pub fn check(&self) {
        fn check(n: &Node, root: bool) -> usize {
            match n {
                Node::Leaf(v) => {
                    assert!(v.len() <= MAX);
                    assert!(root || v.len() >= MIN, "leaf underflow {}", v.len());
                    for w in v.windows(2) {
                        assert_eq!(
                            w[0].cmp_key(w[1].score, w[1].member.bytes()),
                            Ordering::Less
                        );
                    }
                    v.len()
                }
                Node::Inner(i) => {
                    assert!(i.kids.len() <= MAX && i.kids.len() >= 2);
                    assert!(root || i.kids.len() >= MIN);
                    assert_eq!(i.seps.len() + 1, i.kids.len());
                    let mut total = 0;
                    for (k, kid) in i.kids.iter().enumerate() {
                        let c = check(kid, false);
                        assert_eq!(c, i.counts[k]);
                        total += c;
                        if k > 0 {
                            let f = kid.first().unwrap();
                            let s = &i.seps[k - 1];
                            assert_ne!(s.cmp_key(f.score, f.member.bytes()), Ordering::Greater);
                        }
                    }
                    total
                }
            }
        }
        assert_eq!(check(&self.root, true), self.len);
    }
}

fn insert(node: &mut Node, e: Entry) -> Option<(Entry, Node)> {
    match node {
        Node::Leaf(v) => {
            let i = v.partition_point(|x| x.cmp_key(e.score, e.member.bytes()) == Ordering::Less);
            if v.len() == v.capacity() {
                v.reserve_exact(LEAF_GROWTH);
            }
            v.insert(i, e);
        }
        Node::Inner(n) => {
            let i = child_for(n, e.score, e.member.bytes());
            n.counts[i] += 1;
            if let Some((sep, right)) = insert(&mut n.kids[i], e) {
                let rc = right.total();
                n.counts[i] -= rc;
                n.kids.insert(i + 1, right);
                n.counts.insert(i + 1, rc);
                n.seps.insert(i, sep);
            }
        }
    }
    (node.items() > MAX).then(|| node.split())
}

fn remove(node: &mut Node, score: f64, member: &[u8]) -> Option<Entry> {
    match node {
        Node::Leaf(v) => match v.binary_search_by(|x| x.cmp_key(score, member)) {
            Ok(i) => Some(v.remove(i)),
            Err(_) => None,
        },
        Node::Inner(n) => {
            let i = child_for(n, score, member);
            let removed = remove(&mut n.kids[i], score, member)?;
            n.counts[i] -= 1;
            if n.kids[i].items() < MIN && n.kids.len() > 1 {
                let j = if i + 1 < n.kids.len() { i } else { i - 1 };
                rebalance(n, j);
            }
            Some(removed)
        }
    }
}

/// Merges children `j` and `j + 1` of `n`, then splits them evenly again if too full.
fn rebalance(n: &mut Inner, j: usize) {
    let right = n.kids.remove(j + 1);
    let rc = n.counts.remove(j + 1);
    let sep = n.seps.remove(j);
    n.counts[j] += rc;
    match (&mut n.kids[j], right) {
        (Node::Leaf(l), Node::Leaf(r)) => l.extend(r),
        (Node::Inner(l), Node::Inner(r)) => {
            let r = *r;
            l.seps.push(sep);
            l.seps.extend(r.seps);
            l.kids.extend(r.kids);
            l.counts.extend(r.counts);
        }
        _ => unreachable!("siblings are at the same depth"),
    }
    if n.kids[j].items() > MAX {
        let (sep, right) = n.kids[j].split();
        let rc = right.total();
        n.counts[j] -= rc;
        n.kids.insert(j + 1, right);
        n.counts.insert(j + 1, rc);
        n.seps.insert(j, sep);
    }
}

/// In-order walk from `from` (a rank within `node`); returns false once `f` asked to stop.
fn walk(node: &Node, from: usize, rev: bool, f: &mut impl FnMut(&Entry) -> bool) -> bool {
    match node {
        Node::Leaf(v) => {
            if rev {
                v[..=from.min(v.len() - 1)].iter().rev().all(&mut *f)
            } else {
                v[from.min(v.len())..].iter().all(&mut *f)
            }
        }
        Node::Inner(n) => {
            let mut i = 0;
            let mut off = from;
            while i + 1 < n.counts.len() && off >= n.counts[i] {
                off -= n.counts[i];
                i += 1;
            }
            if rev {
                if !walk(&n.kids[i], off, true, f) {
                    return false;
                }
                (0..i)
                    .rev()
                    .all(|k| walk(&n.kids[k], n.counts[k].saturating_sub(1), true, f))
            } else {
                if !walk(&n.kids[i], off, false, f) {
                    return false;
                }
                (i + 1..n.kids.len()).all(|k| walk(&n.kids[k], 0, false, f))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn key(s: i32, m: u16) -> (i64, Vec<u8>) {
        (i64::from(s), m.to_be_bytes().to_vec())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Rank, select, walk and invariants against a BTreeSet under inserts and deletes.
        #[test]
        fn matches_btreeset(ops in prop::collection::vec((any::<bool>(), prop_oneof![-20i32..20, any::<i32>()], 0u16..400), 1..3000)) {
            let mut t = Tree::new();
            let mut model: BTreeSet<(i64, Vec<u8>)> = BTreeSet::new();
            for (ins, s, m) in ops {
                let k = key(s, m);
                if ins {
                    if model.insert(k.clone()) {
                        t.insert(Entry { score: f64::from(s), member: Member::new(&k.1, f64::from(s)) });
                    }
                } else {
                    let was = model.remove(&k);
                    prop_assert_eq!(t.remove(f64::from(s), &k.1).is_some(), was);
                }
            }
            t.check();
            prop_assert_eq!(t.len(), model.len());
            let all: Vec<(i64, Vec<u8>)> = model.iter().cloned().collect();
            // Every entry, so the fast path, ties and members first in a leaf are all covered.
            for (r, (s, m)) in all.iter().enumerate() {
                let e = t.select(r).unwrap();
                prop_assert_eq!(t.rank_of(e.member.as_ref(), *s as f64, m), r);
            }
            for (r, (s, m)) in all.iter().enumerate().step_by(7) {
                prop_assert_eq!(t.rank(*s as f64, m), r);
                let e = t.select(r).unwrap();
                prop_assert_eq!((e.score as i64, e.member.bytes().to_vec()), (*s, m.clone()));
                let mut fwd = Vec::new();
                t.walk(r, false, |e| { fwd.push((e.score as i64, e.member.bytes().to_vec())); fwd.len() < 50 });
                prop_assert_eq!(&fwd[..], &all[r..(r + 50).min(all.len())]);
                let mut back = Vec::new();
                t.walk(r, true, |e| { back.push((e.score as i64, e.member.bytes().to_vec())); back.len() < 50 });
                let want: Vec<_> = all[r.saturating_sub(49)..=r].iter().rev().cloned().collect();
                prop_assert_eq!(back, want);
            }
            prop_assert_eq!(t.rank_by(|s, _| s < 0.0), all.iter().filter(|k| k.0 < 0).count());
        }
    }
}
