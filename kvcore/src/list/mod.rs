//! Lists: one listpack while small, then a quicklist (a deque of listpack nodes).
//!
//! # Encodings (Redis 7.2+)
//!
//! - **listpack**: the whole list in one [`Listpack`], while it stays within the node limit of
//!   `list-max-listpack-size` ([`Limits`]): a positive value caps the entries (and 8 KiB of
//!   bytes as a safety limit), -1..-5 cap the bytes at 4, 8, 16, 32 or 64 KiB (-2, 8 KiB, by
//!   default).
//! - **quicklist** ([`QuickList`]): a `VecDeque` of nodes, each within the same limit, so a
//!   push or pop at either end touches one small node. An element too large for any node (a
//!   "plain" node in Redis) gets a node of its own. A node is a listpack, or (ours, not
//!   Redis's) a run of strings of one width, 16 bytes for a 16-byte element where a listpack
//!   takes 18, with O(1) pushes and pops at both ends (see [`node`]). Snapshots carry
//!   listpacks either way.
//!
//! A push that would take the listpack past the limit converts it first; a list that shrinks
//! to one node of at most half the limit converts back (Redis's `listTypeTryConvertQuicklist`
//! with `shrinking`), so a list at the limit does not flip back and forth.
//!
//! Index and value operations walk the nodes from the nearer end, then one node. Removals in
//! the middle leave their node in place (an emptied node is dropped); an insert into a full
//! node splits it.

use std::borrow::Cow;
use std::collections::VecDeque;

use crate::listpack::{Entry, Listpack};
use node::{Node, View};

mod node;

/// Node byte limits of `list-max-listpack-size` -1..-5.
const NEG_FILL_BYTES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// Byte limit of a node whose limit is an entry count.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// Bytes one more entry is assumed to add beyond its data (an overestimate, as Redis's).
const ENTRY_OVERHEAD: usize = 8;

/// The node limit, from `list-max-listpack-size`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `list-max-listpack-size`.
    pub fill: i64,
    /// Elements at least this long go alone in a node (DEBUG QUICKLIST-PACKED-THRESHOLD);
    /// at [`PACKED_THRESHOLD`], elements longer than a node's limit do.
    pub packed_threshold: usize,
}

/// Redis's default packed threshold (1 GB): elements longer than a node's limit go alone.
pub const PACKED_THRESHOLD: usize = 1 << 30;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fill: -2,
            packed_threshold: PACKED_THRESHOLD,
        }
    }
}

impl Limits {
    /// `(bytes, entries)` a node may hold.
    fn caps(self) -> (usize, usize) {
        if self.fill >= 0 {
            (usize::MAX, (self.fill as usize).max(1))
        } else {
            let i = ((-(self.fill + 1)) as usize).min(NEG_FILL_BYTES.len() - 1);
            (NEG_FILL_BYTES[i], usize::MAX)
        }
    }

    /// Whether a node of `bytes` bytes and `count` entries is over the limit.
    fn exceeds(self, bytes: usize, count: usize) -> bool {
        match self.caps() {
            (usize::MAX, max_count) => bytes > SIZE_SAFETY_LIMIT || count > max_count,
            (max_bytes, _) => bytes > max_bytes,
        }
    }

    /// The bytes a node may grow to (its room included).
    fn node_bytes(self) -> usize {
        match self.caps() {
            (usize::MAX, _) => SIZE_SAFETY_LIMIT,
            (max_bytes, _) => max_bytes,
        }
    }

    /// Whether an element of `len` bytes is too large to share a node.
    fn is_large(self, len: usize) -> bool {
        if self.packed_threshold != PACKED_THRESHOLD {
            return len >= self.packed_threshold;
        }
        match self.caps() {
            (usize::MAX, _) => len > SIZE_SAFETY_LIMIT,
            (max_bytes, _) => len > max_bytes,
        }
    }

    /// Whether `node` may take one more element of `len` bytes.
    fn allows(self, node: &Listpack, len: usize) -> bool {
        !self.is_large(len)
            && !is_plain(self, node)
            && !self.exceeds(node.byte_len() + len + ENTRY_OVERHEAD, node.len() + 1)
    }

    /// Whether one listpack of `bytes` and `count` entries may stay the whole list when
    /// `shrinking` (half the limit) or growing (the limit).
    fn fits_one(self, bytes: usize, count: usize, shrinking: bool) -> bool {
        let half = |x: usize| if shrinking { x / 2 } else { x };
        match self.caps() {
            (usize::MAX, c) => count <= half(c),
            (b, _) => bytes <= half(b),
        }
    }
}

/// Whether `node` is a lone large element (Redis's plain node), which takes no neighbours.
fn is_plain(limits: Limits, node: &Listpack) -> bool {
    node.len() == 1
        && node
            .first()
            .is_some_and(|p| limits.is_large(node.get(p).str_len()))
}

/// A list in either encoding. At most 16 bytes, so a `Value` stays 24.
#[derive(Clone, Debug, PartialEq)]
pub enum List {
    /// Small: one listpack (`OBJECT ENCODING` says `listpack`).
    Pack(Listpack),
    /// Large: a quicklist of listpack nodes.
    Quick(Box<QuickList>),
}

/// A deque of nodes, none empty. The end nodes may keep room for pushes (see
/// [`Listpack::push_in_room`]); equality compares the elements.
#[derive(Clone, Debug, Default)]
pub struct QuickList {
    nodes: VecDeque<Node>,
    len: usize,
}

impl PartialEq for QuickList {
    fn eq(&self, other: &Self) -> bool {
        fn elements(q: &QuickList) -> impl Iterator<Item = Entry<'_>> {
            q.nodes.iter().flat_map(|n| n.view().iter())
        }
        self.len == other.len && elements(self).eq(elements(other))
    }
}

impl Default for List {
    fn default() -> Self {
        List::Pack(Listpack::new())
    }
}

impl Drop for QuickList {
    fn drop(&mut self) {
        // One free per node: only many nodes are worth a hand-off.
        if self.nodes.len() > crate::lazyfree::THRESHOLD {
            crate::lazyfree::defer(std::mem::take(&mut self.nodes));
        }
    }
}

impl List {
    /// A list of `items`, in order, in the encoding their size calls for.
    pub fn from_items(limits: Limits, items: &[Vec<u8>]) -> List {
        let mut l = List::default();
        for it in items {
            l.push(limits, &[it], false);
        }
        l
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            List::Pack(lp) => lp.len(),
            List::Quick(q) => q.len,
        }
    }

    /// Whether the list has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            List::Pack(_) => "listpack",
            List::Quick(_) => "quicklist",
        }
    }

    /// Heap bytes owned by the list.
    pub fn heap_bytes(&self) -> usize {
        match self {
            List::Pack(lp) => lp.heap_bytes(),
            List::Quick(q) => {
                std::mem::size_of::<QuickList>()
                    + q.nodes.capacity() * std::mem::size_of::<Node>()
                    + q.nodes.iter().map(Node::heap_bytes).sum::<usize>()
            }
        }
    }

    /// The listpacks a snapshot writes, head first, each with whether it is a plain node (one
    /// large element).
    pub(crate) fn rdb_nodes(&self, limits: Limits) -> Vec<(bool, Cow<'_, Listpack>)> {
        match self {
            List::Pack(lp) => vec![(false, Cow::Borrowed(lp))],
            List::Quick(q) => q
                .nodes
                .iter()
                .flat_map(|n| {
                    let plain = n.is_plain(limits);
                    n.rdb_packs(limits).into_iter().map(move |p| (plain, p))
                })
                .collect(),
        }
    }

    /// DEBUG OBJECT's quicklist figures: nodes and the bytes of all of them.
    pub fn node_stats(&self) -> (usize, usize) {
        match self {
            List::Pack(lp) => (1, lp.byte_len()),
            List::Quick(q) => (q.nodes.len(), q.nodes.iter().map(Node::byte_len).sum()),
        }
    }

    /// The nodes, head first.
    fn nodes(&self) -> impl DoubleEndedIterator<Item = View<'_>> + '_ {
        let (one, many) = match self {
            List::Pack(lp) => (Some(View::Pack(lp)), None),
            List::Quick(q) => (None, Some(q.nodes.iter().map(Node::view))),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    /// The elements from the head (double-ended).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Entry<'_>> + '_ {
        self.nodes().flat_map(|n| n.iter())
    }

    /// Every element, owned, head first.
    pub fn to_vec(&self) -> Vec<Vec<u8>> {
        self.iter().map(|e| e.to_vec()).collect()
    }

    /// The quicklist, converting a listpack into a one-node quicklist first.
    fn quick(&mut self) -> &mut QuickList {
        if let List::Pack(lp) = self {
            let lp = std::mem::take(lp);
            let len = lp.len();
            let mut nodes = VecDeque::new();
            if len > 0 {
                nodes.push_back(Node::Pack(lp));
            }
            *self = List::Quick(Box::new(QuickList { nodes, len }));
        }
        match self {
            List::Quick(q) => q,
            List::Pack(_) => unreachable!("converted above"),
        }
    }

    /// Converts a quicklist of one small node back to a listpack (`shrinking`: at most half
    /// the limit, after removals; else the limit).
    fn settle(&mut self, limits: Limits, shrinking: bool) {
        if let List::Quick(q) = self {
            if q.nodes.len() > 1 {
                return;
            }
            let fits = q
                .nodes
                .front()
                .is_none_or(|n| limits.fits_one(n.pack_len(), n.len(), shrinking));
            if fits {
                let lp = q.nodes.pop_front().map(Node::into_pack).unwrap_or_default();
                *self = List::Pack(lp);
            }
        }
    }

    /// Pushes `items` one by one at the head (`front`) or the tail, as LPUSH and RPUSH do.
    pub fn push(&mut self, limits: Limits, items: &[&[u8]], front: bool) {
        if let List::Pack(lp) = self {
            let add: usize = items.iter().map(|i| i.len()).sum();
            if !limits.exceeds(lp.byte_len() + add, lp.len() + items.len()) {
                for it in items {
                    if front {
                        lp.push_front(it);
                    } else {
                        lp.push_back(it);
                    }
                }
                return;
            }
        }
        let q = self.quick();
        for it in items {
            q.push(limits, it, front);
        }
    }

    /// Pops up to `count` elements from the head (`front`) or the tail.
    pub fn pop(&mut self, limits: Limits, front: bool, count: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(count.min(self.len()));
        self.pop_each(limits, front, count, |v| out.push(v.to_vec()));
        out
    }

    /// Pops up to `count` elements from the head (`front`) or the tail like [`List::pop`],
    /// showing each to `f` before it goes instead of copying it out; returns how many.
    pub fn pop_each(
        &mut self,
        limits: Limits,
        front: bool,
        count: usize,
        mut f: impl FnMut(&[u8]),
    ) -> usize {
        let n = count.min(self.len());
        let mut buf = itoa::Buffer::new();
        match self {
            List::Pack(lp) => {
                for _ in 0..n {
                    let Some(p) = (if front { lp.first() } else { lp.last() }) else {
                        break;
                    };
                    f(lp.get(p).bytes(&mut buf));
                    lp.delete(p, 1);
                }
            }
            List::Quick(q) => {
                for _ in 0..n {
                    if !q.pop(front, &mut f) {
                        break;
                    }
                }
                self.settle(limits, true);
            }
        }
        n
    }

    /// The element at `index` (negative counts from the tail).
    pub fn get(&self, index: i64) -> Option<Vec<u8>> {
        let len = self.len() as i64;
        let i = if index < 0 {
            len.checked_add(index)?
        } else {
            index
        };
        if !(0..len).contains(&i) {
            return None;
        }
        let (node, at) = self.locate(i as usize)?;
        Some(node.get(at)?.to_vec())
    }

    /// The node holding element `i` (in range) and its index there.
    fn locate(&self, mut i: usize) -> Option<(View<'_>, usize)> {
        let len = self.len();
        if i < len / 2 {
            for n in self.nodes() {
                if i < n.len() {
                    return Some((n, i));
                }
                i -= n.len();
            }
        } else {
            let mut from_end = len - 1 - i;
            for n in self.nodes().rev() {
                if from_end < n.len() {
                    return Some((n, n.len() - 1 - from_end));
                }
                from_end -= n.len();
            }
        }
        None
    }

    /// Replaces the element at `index` (negative counts from the tail); false when out of
    /// range.
    pub fn set(&mut self, limits: Limits, index: i64, value: &[u8]) -> bool {
        let len = self.len() as i64;
        let Some(i) = (if index < 0 {
            len.checked_add(index)
        } else {
            Some(index)
        }) else {
            return false;
        };
        if !(0..len).contains(&i) {
            return false;
        }
        if let List::Pack(lp) = self {
            if limits.exceeds(lp.byte_len() + value.len(), lp.len()) {
                self.quick();
            }
        }
        match self {
            List::Pack(lp) => {
                if let Some(p) = lp.seek(i) {
                    lp.replace(p, value);
                }
            }
            List::Quick(q) => {
                q.set(limits, i as usize, value);
                self.settle(limits, true);
            }
        }
        true
    }

    /// Calls `f` on the elements of indices `start..=end` (within range), head to tail.
    pub fn range(&self, start: usize, end: usize, mut f: impl FnMut(Entry<'_>)) {
        let mut skip = start;
        let mut left = end + 1 - start;
        for n in self.nodes() {
            if left == 0 {
                break;
            }
            if skip >= n.len() {
                skip -= n.len();
                continue;
            }
            let from = std::mem::take(&mut skip);
            for e in n.iter_from(from) {
                if left == 0 {
                    break;
                }
                f(e);
                left -= 1;
            }
        }
    }

    /// Keeps only the elements of indices `start..=end` (already clamped; `start > end`
    /// empties the list).
    pub fn trim(&mut self, limits: Limits, start: usize, end: usize) {
        let len = self.len();
        let (head, tail) = if start > end || start >= len {
            (len, 0)
        } else {
            (start, len - 1 - end.min(len - 1))
        };
        match self {
            List::Pack(lp) => {
                lp.delete_range(0, head);
                let keep = lp.len().saturating_sub(tail);
                lp.delete_range(keep, tail);
            }
            List::Quick(q) => {
                q.delete_front(head);
                q.delete_back(tail);
                self.settle(limits, true);
            }
        }
    }

    /// Removes up to `count` elements equal to `value` (all when 0), from the head when
    /// `count >= 0`, else from the tail (LREM); returns how many.
    pub fn remove(&mut self, limits: Limits, value: &[u8], count: i64) -> usize {
        let max = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs().min(usize::MAX as u64) as usize
        };
        let from_tail = count < 0;
        let removed = match self {
            List::Pack(lp) => remove_in(lp, value, max, from_tail),
            List::Quick(q) => {
                let mut removed = 0;
                let order: Vec<usize> = if from_tail {
                    (0..q.nodes.len()).rev().collect()
                } else {
                    (0..q.nodes.len()).collect()
                };
                for i in order {
                    if removed == max {
                        break;
                    }
                    removed += q.nodes[i].remove(value, max - removed, from_tail);
                }
                q.nodes.retain(|n| !n.is_empty());
                q.fit_nodes();
                q.len -= removed;
                removed
            }
        };
        if removed > 0 {
            self.settle(limits, true);
        }
        removed
    }

    /// Inserts `value` before (or after) the first element equal to `pivot` (LINSERT); false
    /// when there is no such element.
    pub fn insert(&mut self, limits: Limits, pivot: &[u8], value: &[u8], before: bool) -> bool {
        let Some(i) = self.iter().position(|e| e.eq_bytes(pivot)) else {
            return false;
        };
        let at = if before { i } else { i + 1 };
        if let List::Pack(lp) = self {
            if !limits.exceeds(lp.byte_len() + value.len(), lp.len() + 1) {
                let p = lp.seek(at as i64).unwrap_or(lp.end());
                lp.insert_at(p, &[value]);
                return true;
            }
        }
        self.quick().insert(limits, at, value);
        true
    }

    /// Positions of elements equal to `value` (LPOS): skipping the first `rank - 1` matches
    /// (from the tail when `rank < 0`), at most `count` of them (0 = all), looking at no more
    /// than `maxlen` elements (0 = all).
    pub fn positions(&self, value: &[u8], rank: i64, count: usize, maxlen: usize) -> Vec<usize> {
        let len = self.len();
        let limit = if maxlen == 0 { len } else { maxlen.min(len) };
        let mut skip = rank.unsigned_abs().saturating_sub(1);
        let want = if count == 0 { usize::MAX } else { count };
        let mut out = Vec::new();
        let mut visit = |i: usize, e: Entry<'_>| {
            if e.eq_bytes(value) {
                if skip > 0 {
                    skip -= 1;
                } else {
                    out.push(i);
                }
            }
            out.len() < want
        };
        if rank >= 0 {
            for (i, e) in self.iter().enumerate().take(limit) {
                if !visit(i, e) {
                    break;
                }
            }
        } else {
            for (k, e) in self.iter().rev().enumerate().take(limit) {
                if !visit(len - 1 - k, e) {
                    break;
                }
            }
        }
        out
    }
}

/// Removes up to `max` elements equal to `value` from one listpack; returns how many.
fn remove_in(lp: &mut Listpack, value: &[u8], max: usize, from_tail: bool) -> usize {
    let mut removed = 0;
    if from_tail {
        let mut p = lp.last();
        while let Some(at) = p {
            if removed == max {
                break;
            }
            let prev = lp.prev(at);
            if lp.get(at).eq_bytes(value) {
                lp.delete(at, 1);
                removed += 1;
            }
            p = prev;
        }
    } else {
        let mut p = lp.first();
        while let Some(at) = p {
            if removed == max {
                break;
            }
            if lp.get(at).eq_bytes(value) {
                p = lp.delete(at, 1);
                removed += 1;
            } else {
                p = lp.next(at);
            }
        }
    }
    removed
}

impl QuickList {
    fn push(&mut self, limits: Limits, value: &[u8], front: bool) {
        let end = if front {
            self.nodes.front_mut()
        } else {
            self.nodes.back_mut()
        };
        self.len += 1;
        if let Some(n) = end {
            if n.takes(limits, value) {
                return n.push_in_room(value, front, limits.node_bytes());
            }
            // The old end is inside the list from now on: it keeps no room.
            n.trim();
        }
        let n = Node::one(limits, value);
        if front {
            self.nodes.push_front(n);
        } else {
            self.nodes.push_back(n);
        }
    }

    /// Removes the head (`front`) or tail element, shown to `f` first; false when empty.
    fn pop(&mut self, front: bool, f: &mut impl FnMut(&[u8])) -> bool {
        let n = if front {
            self.nodes.front_mut()
        } else {
            self.nodes.back_mut()
        };
        let Some(n) = n else {
            return false;
        };
        if !n.pop_in_room(front, f) {
            return false;
        }
        if n.is_empty() {
            if front {
                self.nodes.pop_front();
            } else {
                self.nodes.pop_back();
            }
            self.fit_nodes();
        }
        self.len -= 1;
        true
    }

    /// Gives back the node array's room once three quarters of it is unused (a list popped
    /// or trimmed down from millions of elements).
    fn fit_nodes(&mut self) {
        let (len, cap) = (self.nodes.len(), self.nodes.capacity());
        if cap > 64 && len * 4 < cap {
            self.nodes.shrink_to(len * 2);
        }
    }

    /// The node index holding element `i` (in range) and its index there.
    fn find(&self, mut i: usize) -> (usize, usize) {
        for (k, n) in self.nodes.iter().enumerate() {
            if i < n.len() {
                return (k, i);
            }
            i -= n.len();
        }
        (self.nodes.len(), 0)
    }

    fn set(&mut self, limits: Limits, i: usize, value: &[u8]) {
        let (k, at) = self.find(i);
        let Some(n) = self.nodes.get_mut(k) else {
            return;
        };
        if !n.replace(limits, at, value) {
            // A full node of one width that cannot become a listpack: the new element goes
            // alone between the two parts.
            self.split(k, at);
            let (k, at) = self.find(i);
            self.split(k, at + 1);
            self.nodes[k] = Node::one(limits, value);
            return;
        }
        // A large replacement may take the node past its limit: split it around the element.
        if n.len() > 1 && limits.exceeds(n.byte_len(), n.len()) {
            self.split(k, at);
            let (k, at) = self.find(i);
            if at + 1 < self.nodes[k].len() {
                self.split(k, at + 1);
            }
        }
    }

    /// Splits node `k` before its element `at` (0 < at < len) into two nodes.
    fn split(&mut self, k: usize, at: usize) {
        let n = &mut self.nodes[k];
        if at == 0 || at >= n.len() {
            return;
        }
        let right = n.split_off(at);
        self.nodes.insert(k + 1, right);
    }

    /// Inserts `value` so that it becomes element `at` (0..=len).
    fn insert(&mut self, limits: Limits, at: usize, value: &[u8]) {
        if at == self.len {
            return self.push(limits, value, false);
        }
        let (k, pos) = self.find(at);
        if self.nodes[k].takes(limits, value) {
            self.nodes[k].insert(pos, value);
        } else if pos == 0 && k > 0 && self.nodes[k - 1].takes(limits, value) {
            let prev = &mut self.nodes[k - 1];
            prev.insert(prev.len(), value);
        } else {
            self.split(k, pos);
            let new_at = if pos == 0 { k } else { k + 1 };
            if new_at == 0 {
                // The head is inside the list from now on: it keeps no room.
                self.nodes[0].trim();
            }
            self.nodes.insert(new_at, Node::one(limits, value));
        }
        self.len += 1;
    }

    /// Deletes the first `n` elements.
    fn delete_front(&mut self, mut n: usize) {
        self.len -= n.min(self.len);
        while n > 0 {
            let Some(node) = self.nodes.front_mut() else {
                break;
            };
            if node.len() <= n {
                n -= node.len();
                self.nodes.pop_front();
            } else {
                node.delete_range(0, n);
                n = 0;
            }
        }
        self.fit_nodes();
    }

    /// Deletes the last `n` elements.
    fn delete_back(&mut self, mut n: usize) {
        self.len -= n.min(self.len);
        while n > 0 {
            let Some(node) = self.nodes.back_mut() else {
                break;
            };
            if node.len() <= n {
                n -= node.len();
                self.nodes.pop_back();
            } else {
                let keep = node.len() - n;
                node.delete_range(keep, n);
                n = 0;
            }
        }
        self.fit_nodes();
    }
}

#[cfg(test)]
mod tests;
