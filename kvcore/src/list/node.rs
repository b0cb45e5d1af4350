//! A quicklist's nodes: a listpack, or a run of strings of one width.
//!
//! Most long lists hold elements of one shape: ids, hashes, UUIDs, fixed-format records. A
//! listpack spends two bytes on each short string beside its data (an encoding byte and a
//! backlen): a 16-byte element takes 18. A [`Fixed`] node stores strings of one width back to
//! back and nothing else, `width` bytes each, in a buffer that may keep room at either end:
//!
//! ```text
//! buf: [ room | e0 e1 e2 ... e(len-1) | room ]
//!              ^ head                 ^ head + len * width
//! ```
//!
//! - Element `i` is at `head + i * width`: reads need no walk.
//! - A push at either end writes into the room; a pop moves `head` or shortens `len`. A
//!   listpack's head pop moves every byte after it, so LPOP on a full node is a memmove of
//!   the node.
//! - A buffer short of room is replaced by one twice the elements' bytes (256 at least), up to
//!   the node's limit in bytes (`list-max-listpack-size`, measured on the elements): five
//!   allocations fill an 8 KiB node, each an allocator size class. Pops at the front leave
//!   room there, which pushes at the back reclaim by moving the elements once it is half of
//!   them. Room after the elements is the vector's spare capacity, never written before use.
//!
//! A node starts fixed when its first element can be one ([`fixed_width`]): a string of 1 to
//! [`MAX_WIDTH`] bytes that a listpack would not store as an integer (an integer entry takes
//! 2 to 10 bytes, often fewer than its digits) and that is not large enough for a node of its
//! own. It stays fixed while every element it takes has that width. Another element turns it
//! into a listpack, when that listpack fits the limit; when it would not (a full fixed node
//! is about 12% over the limit as a listpack), the element goes to a node of its own instead.
//!
//! Snapshots and DUMP payloads carry Redis's format: a fixed node is written as listpacks,
//! each within the limit ([`Node::rdb_packs`]).

use std::borrow::Cow;
use std::slice::ChunksExact;

use super::Limits;
use crate::listpack::{self, Entry, Listpack};

/// The widest string a fixed node holds.
pub(super) const MAX_WIDTH: usize = 1024;
/// The least a fixed node's buffer grows to (see [`Fixed::grown`]).
const MIN_GROWTH: usize = 256;

/// The width of a fixed node `value` may start, if any.
fn fixed_width(limits: Limits, value: &[u8]) -> Option<usize> {
    let w = value.len();
    ((1..=MAX_WIDTH).contains(&w) && !limits.is_large(w) && !listpack::packs_as_int(value))
        .then_some(w)
}

/// A quicklist node (never empty in a list).
#[derive(Clone, Debug)]
pub(super) enum Node {
    /// Any elements, in Redis's listpack.
    Pack(Listpack),
    /// Strings of one width.
    Fixed(Fixed),
}

/// Strings of `width` bytes each, back to back, with room on either side (module docs).
#[derive(Clone, Debug)]
pub(super) struct Fixed {
    /// Room, then the elements, which end the vector; its spare capacity is the room after.
    buf: Vec<u8>,
    /// Offset of the first element.
    head: u32,
    /// Number of elements.
    len: u32,
    width: u32,
}

/// A node, or a small list's listpack, to read.
#[derive(Clone, Copy)]
pub(super) enum View<'a> {
    Pack(&'a Listpack),
    Fixed(&'a Fixed),
}

/// A double-ended walk over a node's elements.
pub(super) enum Iter<'a> {
    Pack(listpack::Iter<'a>),
    Fixed(ChunksExact<'a, u8>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Entry<'a>;

    #[inline]
    fn next(&mut self) -> Option<Entry<'a>> {
        match self {
            Iter::Pack(it) => it.next(),
            Iter::Fixed(it) => it.next().map(Entry::Str),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(it) => it.next_back(),
            Iter::Fixed(it) => it.next_back().map(Entry::Str),
        }
    }
}

impl<'a> View<'a> {
    /// Number of elements.
    #[inline]
    pub(super) fn len(self) -> usize {
        match self {
            View::Pack(lp) => lp.len(),
            View::Fixed(f) => f.len as usize,
        }
    }

    /// The elements, first to last.
    pub(super) fn iter(self) -> Iter<'a> {
        match self {
            View::Pack(lp) => Iter::Pack(lp.iter()),
            View::Fixed(f) => Iter::Fixed(f.data().chunks_exact(f.width())),
        }
    }

    /// The elements from index `i` (in range) on.
    pub(super) fn iter_from(self, i: usize) -> Iter<'a> {
        match self {
            View::Pack(lp) => match lp.seek(i as i64) {
                Some(p) => Iter::Pack(lp.iter_from(p)),
                None => Iter::Fixed([].chunks_exact(1)),
            },
            View::Fixed(f) => Iter::Fixed(f.data()[i * f.width()..].chunks_exact(f.width())),
        }
    }

    /// Element `i`, if in range.
    pub(super) fn get(self, i: usize) -> Option<Entry<'a>> {
        match self {
            View::Pack(lp) => Some(lp.get(lp.seek(i as i64)?)),
            View::Fixed(f) => f.get(i).map(Entry::Str),
        }
    }
}

impl Node {
    /// A node of `value` alone: fixed when it can be.
    pub(super) fn one(limits: Limits, value: &[u8]) -> Node {
        match fixed_width(limits, value) {
            Some(_) => Node::Fixed(Fixed::one(value)),
            None => Node::Pack(Listpack::from_items([value])),
        }
    }

    /// The node to read.
    #[inline]
    pub(super) fn view(&self) -> View<'_> {
        match self {
            Node::Pack(lp) => View::Pack(lp),
            Node::Fixed(f) => View::Fixed(f),
        }
    }

    /// Number of elements.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.view().len()
    }

    /// Whether the node has no elements.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the node's limit is measured on: the listpack's, or the fixed elements'.
    pub(super) fn byte_len(&self) -> usize {
        match self {
            Node::Pack(lp) => lp.byte_len(),
            Node::Fixed(f) => f.used(),
        }
    }

    /// The bytes of the node as a listpack.
    pub(super) fn pack_len(&self) -> usize {
        match self {
            Node::Pack(lp) => lp.byte_len(),
            Node::Fixed(f) => f.pack_len(),
        }
    }

    /// Heap bytes, room included.
    pub(super) fn heap_bytes(&self) -> usize {
        match self {
            Node::Pack(lp) => lp.heap_bytes(),
            Node::Fixed(f) => f.buf.capacity(),
        }
    }

    /// Whether the node is a lone large element (Redis's plain node).
    pub(super) fn is_plain(&self, limits: Limits) -> bool {
        matches!(self, Node::Pack(lp) if super::is_plain(limits, lp))
    }

    /// Whether the node may take `value` as one more element, turning a fixed node into a
    /// listpack first when `value` is not of its width and the listpack would fit.
    pub(super) fn takes(&mut self, limits: Limits, value: &[u8]) -> bool {
        match self {
            Node::Pack(lp) => limits.allows(lp, value.len()),
            Node::Fixed(f) if f.holds(value) => {
                !limits.exceeds(f.used() + value.len(), f.len as usize + 1)
            }
            Node::Fixed(f) => {
                let fits = !limits.is_large(value.len())
                    && !limits.exceeds(
                        f.pack_len() + value.len() + super::ENTRY_OVERHEAD,
                        f.len as usize + 1,
                    );
                if fits {
                    self.unfix();
                }
                fits
            }
        }
    }

    /// Pushes `value` (which [`Node::takes`]) at the front or the back, into the node's room,
    /// grown when short (a listpack's by half again, a fixed node's to twice its elements) but
    /// not past `cap` bytes: for a quicklist's end nodes.
    pub(super) fn push_in_room(&mut self, value: &[u8], front: bool, cap: usize) {
        match self {
            Node::Pack(lp) => lp.push_in_room(value, front, cap),
            Node::Fixed(f) => f.push(value, front, cap),
        }
    }

    /// Removes the first (`front`) or last element, shown to `f` first; the bytes stay as
    /// room. False when empty.
    pub(super) fn pop_in_room(&mut self, front: bool, f: &mut impl FnMut(&[u8])) -> bool {
        match self {
            Node::Pack(lp) => {
                let Some(p) = (if front { lp.first() } else { lp.last() }) else {
                    return false;
                };
                let mut buf = itoa::Buffer::new();
                f(lp.get(p).bytes(&mut buf));
                lp.delete_in_room(p, 1);
                true
            }
            Node::Fixed(x) => x.pop(front, f),
        }
    }

    /// Gives up the room (a node that stopped being an end of its list).
    pub(super) fn trim(&mut self) {
        match self {
            Node::Pack(lp) => lp.trim(),
            Node::Fixed(f) => f.trim(),
        }
    }

    /// Inserts `value` (which [`Node::takes`]) as element `i` (`0..=len`), growing the
    /// buffer by what it needs.
    pub(super) fn insert(&mut self, i: usize, value: &[u8]) {
        match self {
            Node::Pack(lp) => {
                let p = lp.seek(i as i64).unwrap_or(lp.end());
                lp.insert_at(p, &[value]);
            }
            Node::Fixed(f) => f.insert(i, value),
        }
    }

    /// Replaces element `i` (in range) by `value`: in place, or by turning a fixed node into a
    /// listpack when `value` is another width. False, changing nothing, when that listpack
    /// would be over the limit; the caller gives `value` a node of its own.
    pub(super) fn replace(&mut self, limits: Limits, i: usize, value: &[u8]) -> bool {
        match self {
            Node::Pack(lp) => {
                if let Some(p) = lp.seek(i as i64) {
                    lp.replace(p, value);
                }
            }
            Node::Fixed(f) if f.holds(value) => f.slot_mut(i).copy_from_slice(value),
            Node::Fixed(f) => {
                let bytes = f.pack_len() - listpack::entry_len(f.slot(i)) + value.len();
                if f.len > 1 && limits.exceeds(bytes + super::ENTRY_OVERHEAD, f.len as usize) {
                    return false;
                }
                self.unfix();
                return self.replace(limits, i, value);
            }
        }
        true
    }

    /// Deletes the elements of index `start..start + n` (within range).
    pub(super) fn delete_range(&mut self, start: usize, n: usize) {
        match self {
            Node::Pack(lp) => lp.delete_range(start, n),
            Node::Fixed(f) => f.delete_range(start, n),
        }
    }

    /// Removes up to `max` elements equal to `value`, from the last when `from_tail`;
    /// returns how many.
    pub(super) fn remove(&mut self, value: &[u8], max: usize, from_tail: bool) -> usize {
        match self {
            Node::Pack(lp) => super::remove_in(lp, value, max, from_tail),
            Node::Fixed(f) => f.remove(value, max, from_tail),
        }
    }

    /// Splits off the elements from index `at` (`0 < at < len`) into a node of the same kind.
    pub(super) fn split_off(&mut self, at: usize) -> Node {
        match self {
            Node::Pack(lp) => {
                let right: Vec<Vec<u8>> = lp.iter().skip(at).map(|e| e.to_vec()).collect();
                lp.delete_range(at, right.len());
                Node::Pack(Listpack::from_items(right.iter().map(Vec::as_slice)))
            }
            Node::Fixed(f) => Node::Fixed(f.split_off(at)),
        }
    }

    /// The node as a listpack, room given up.
    pub(super) fn into_pack(self) -> Listpack {
        match self {
            Node::Pack(mut lp) => {
                lp.trim();
                lp
            }
            Node::Fixed(f) => f.to_pack(),
        }
    }

    /// Makes a fixed node a listpack of the same elements.
    fn unfix(&mut self) {
        if let Node::Fixed(f) = self {
            *self = Node::Pack(f.to_pack());
        }
    }

    /// The node in Redis's format, as a snapshot writes it: the listpack itself, or a fixed
    /// node's elements in listpacks each within the node limit.
    pub(super) fn rdb_packs(&self, limits: Limits) -> Vec<Cow<'_, Listpack>> {
        match self {
            Node::Pack(lp) => vec![Cow::Borrowed(lp)],
            Node::Fixed(f) => {
                let (w, entry) = (f.width(), listpack::entry_len(f.slot(0)));
                let mut per = 1;
                while per < f.len as usize
                    && !limits.exceeds(listpack::FRAME + (per + 1) * entry, per + 1)
                {
                    per += 1;
                }
                f.data()
                    .chunks(per * w)
                    .map(|c| Cow::Owned(Listpack::from_items(c.chunks_exact(w))))
                    .collect()
            }
        }
    }
}

impl Fixed {
    fn one(value: &[u8]) -> Fixed {
        Fixed {
            buf: value.to_vec(),
            head: 0,
            len: 1,
            width: value.len() as u32,
        }
    }

    #[inline]
    fn width(&self) -> usize {
        self.width as usize
    }

    /// Bytes of the elements.
    #[inline]
    fn used(&self) -> usize {
        self.len as usize * self.width()
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.head as usize..]
    }

    /// Whether `value` can be an element here: its width, and a string a listpack would not
    /// store as an integer (so that every element reads back as [`Entry::Str`]).
    #[inline]
    fn holds(&self, value: &[u8]) -> bool {
        value.len() == self.width() && !listpack::packs_as_int(value)
    }

    /// The bytes of the elements as a listpack.
    fn pack_len(&self) -> usize {
        listpack::FRAME + self.len as usize * listpack::entry_len(self.slot(0))
    }

    fn slot(&self, i: usize) -> &[u8] {
        let at = self.head as usize + i * self.width();
        &self.buf[at..at + self.width()]
    }

    fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        let at = self.head as usize + i * self.width();
        let w = self.width();
        &mut self.buf[at..at + w]
    }

    fn get(&self, i: usize) -> Option<&[u8]> {
        (i < self.len as usize).then(|| self.slot(i))
    }

    /// The size a buffer grows to when `extra` more bytes do not fit: twice the elements'
    /// bytes, at least [`MIN_GROWTH`], at most `cap` (unless the elements need more). Powers of
    /// two from 256 up are allocator size classes, so a full 8 KiB node wastes nothing.
    fn grown(&self, extra: usize, cap: usize) -> usize {
        let used = self.used();
        (used + extra).max((2 * used).max(MIN_GROWTH).min(cap))
    }

    fn push(&mut self, value: &[u8], front: bool, cap: usize) {
        let w = self.width();
        if front {
            if (self.head as usize) < w {
                // A new buffer with its room in front (zeroed: the bytes before `head` are
                // part of the vector).
                let used = self.used();
                let room = self.grown(w, cap) - used;
                let mut buf = Vec::with_capacity(room + used);
                buf.resize(room, 0);
                buf.extend_from_slice(self.data());
                self.buf = buf;
                self.head = room as u32;
            }
            self.head -= w as u32;
            self.slot_mut(0).copy_from_slice(value);
        } else {
            if self.buf.capacity() - self.buf.len() < w {
                let head = self.head as usize;
                if head >= self.used() / 2 && head >= w {
                    // Pops at the front left room there: move the elements to it.
                    self.buf.copy_within(head.., 0);
                    self.buf.truncate(self.used());
                    self.head = 0;
                } else {
                    let want = head + self.grown(w, cap);
                    self.buf.reserve_exact(want - self.buf.len());
                }
            }
            self.buf.extend_from_slice(value);
        }
        self.len += 1;
    }

    fn pop(&mut self, front: bool, f: &mut impl FnMut(&[u8])) -> bool {
        if self.len == 0 {
            return false;
        }
        let i = if front { 0 } else { self.len as usize - 1 };
        f(self.slot(i));
        if front {
            self.head += self.width;
        } else {
            self.buf.truncate(self.buf.len() - self.width());
        }
        self.len -= 1;
        true
    }

    fn trim(&mut self) {
        if self.head > 0 || self.buf.capacity() > self.buf.len() {
            self.buf = self.data().to_vec();
            self.head = 0;
        }
    }

    fn insert(&mut self, i: usize, value: &[u8]) {
        let w = self.width();
        let at = self.head as usize + i * w;
        let end = self.buf.len();
        self.buf.reserve_exact(w);
        self.buf.extend_from_slice(value);
        self.buf.copy_within(at..end, at + w);
        self.buf[at..at + w].copy_from_slice(value);
        self.len += 1;
    }

    fn delete_range(&mut self, start: usize, n: usize) {
        let (w, len) = (self.width(), self.len as usize);
        let n = n.min(len.saturating_sub(start));
        let h = self.head as usize;
        if start == 0 {
            self.head += (n * w) as u32;
        } else {
            self.buf.copy_within(h + (start + n) * w.., h + start * w);
            self.buf.truncate(self.buf.len() - n * w);
        }
        self.len -= n as u32;
    }

    fn remove(&mut self, value: &[u8], max: usize, from_tail: bool) -> usize {
        if !self.holds(value) || max == 0 {
            return 0;
        }
        let w = self.width();
        let hits: Vec<usize> = {
            let matching = self
                .data()
                .chunks_exact(w)
                .enumerate()
                .filter(|(_, e)| *e == value)
                .map(|(i, _)| i);
            if from_tail {
                let mut v: Vec<usize> = matching.collect();
                v.drain(..v.len().saturating_sub(max));
                v
            } else {
                matching.take(max).collect()
            }
        };
        if hits.is_empty() {
            return 0;
        }
        let mut kept = Vec::with_capacity(self.used() - hits.len() * w);
        let mut next = hits.iter().peekable();
        for (i, e) in self.data().chunks_exact(w).enumerate() {
            if next.peek() == Some(&&i) {
                next.next();
            } else {
                kept.extend_from_slice(e);
            }
        }
        self.buf = kept;
        self.head = 0;
        self.len -= hits.len() as u32;
        hits.len()
    }

    fn split_off(&mut self, at: usize) -> Fixed {
        let w = self.width();
        let right = Fixed {
            buf: self.data()[at * w..].to_vec(),
            head: 0,
            len: self.len - at as u32,
            width: self.width,
        };
        self.buf.truncate(self.head as usize + at * w);
        self.len = at as u32;
        self.trim();
        right
    }

    fn to_pack(&self) -> Listpack {
        Listpack::from_items(self.data().chunks_exact(self.width()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Push(bool, Vec<u8>),
        Pop(bool),
        Insert(usize, Vec<u8>),
        Replace(usize, Vec<u8>),
        Delete(usize, usize),
        Remove(Vec<u8>, usize, bool),
        Split(usize),
        Trim,
    }

    /// Mostly 4-byte strings from a few, so that removals find several.
    fn elem() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            8 => (0u8..3).prop_map(|i| vec![b'a' + i; 4]),
            1 => Just(b"xy".to_vec()),
            1 => Just(b"1234".to_vec()),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<bool>(), elem()).prop_map(|(f, v)| Op::Push(f, v)),
            2 => any::<bool>().prop_map(Op::Pop),
            2 => (0usize..40, elem()).prop_map(|(i, v)| Op::Insert(i, v)),
            2 => (0usize..40, elem()).prop_map(|(i, v)| Op::Replace(i, v)),
            1 => (0usize..40, 0usize..6).prop_map(|(i, n)| Op::Delete(i, n)),
            2 => (elem(), 1usize..4, any::<bool>()).prop_map(|(v, n, t)| Op::Remove(v, n, t)),
            1 => (1usize..40).prop_map(Op::Split),
            1 => Just(Op::Trim),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// One node against a Vec, through every node operation, under a limit small enough
        /// (64 bytes) that fixed nodes fill up and refuse other widths.
        #[test]
        fn a_node_behaves_like_a_vec(ops in proptest::collection::vec(op(), 1..60)) {
            let limits = Limits { fill: 16, ..Limits::default() };
            let mut node = Node::one(limits, b"aaaa");
            let mut m: Vec<Vec<u8>> = vec![b"aaaa".to_vec()];
            for op in ops {
                match op {
                    Op::Push(front, v) => {
                        if node.takes(limits, &v) {
                            node.push_in_room(&v, front, 64);
                            if front { m.insert(0, v) } else { m.push(v) }
                        }
                    }
                    Op::Pop(front) => {
                        let mut got = None;
                        let popped = node.pop_in_room(front, &mut |e| got = Some(e.to_vec()));
                        let want = if m.is_empty() { None } else if front { Some(m.remove(0)) } else { m.pop() };
                        prop_assert_eq!(popped, want.is_some());
                        prop_assert_eq!(got, want);
                    }
                    Op::Insert(i, v) => {
                        let i = i.min(m.len());
                        if node.takes(limits, &v) {
                            node.insert(i, &v);
                            m.insert(i, v);
                        }
                    }
                    Op::Replace(i, v) => {
                        if i < m.len() && node.replace(limits, i, &v) {
                            m[i] = v;
                        }
                    }
                    Op::Delete(i, n) => {
                        if i < m.len() {
                            let n = n.min(m.len() - i);
                            node.delete_range(i, n);
                            m.drain(i..i + n);
                        }
                    }
                    Op::Remove(v, max, from_tail) => {
                        let mut want = 0;
                        if from_tail {
                            let mut i = m.len();
                            while i > 0 { i -= 1; if want < max && m[i] == v { m.remove(i); want += 1; } }
                        } else {
                            let mut i = 0;
                            while i < m.len() { if want < max && m[i] == v { m.remove(i); want += 1; } else { i += 1; } }
                        }
                        prop_assert_eq!(node.remove(&v, max, from_tail), want);
                    }
                    Op::Split(at) => {
                        if at < m.len() {
                            let right = node.split_off(at);
                            let r: Vec<Vec<u8>> = right.view().iter().map(|e| e.to_vec()).collect();
                            prop_assert_eq!(&r[..], &m[at..]);
                            m.truncate(at);
                        }
                    }
                    Op::Trim => node.trim(),
                }
                prop_assert_eq!(node.len(), m.len());
                let got: Vec<Vec<u8>> = node.view().iter().map(|e| e.to_vec()).collect();
                prop_assert_eq!(&got, &m);
                let back: Vec<Vec<u8>> = node.view().iter().rev().map(|e| e.to_vec()).collect();
                prop_assert_eq!(back.into_iter().rev().collect::<Vec<_>>(), m.clone());
                for (i, v) in m.iter().enumerate() {
                    prop_assert_eq!(node.view().get(i).map(|e| e.to_vec()), Some(v.clone()));
                    let from: Vec<Vec<u8>> = node.view().iter_from(i).map(|e| e.to_vec()).collect();
                    prop_assert_eq!(&from[..], &m[i..]);
                }
                prop_assert!(!limits.exceeds(node.byte_len(), node.len()) || node.len() <= 1);
                if let Node::Fixed(f) = &node {
                    // Room never grows past about the limit again, whatever the pattern.
                    prop_assert!(f.buf.capacity() <= 2 * 64.max(f.used()) + f.width());
                }
                let packed: Vec<Vec<u8>> = node.clone().into_pack().iter().map(|e| e.to_vec()).collect();
                prop_assert_eq!(&packed, &m);
                if m.is_empty() {
                    node = Node::one(limits, b"aaaa");
                    m.push(b"aaaa".to_vec());
                }
            }
        }
    }

    #[test]
    fn only_strings_a_listpack_keeps_as_strings_start_a_fixed_node() {
        let l = Limits::default();
        assert!(matches!(Node::one(l, b"v000000000000001"), Node::Fixed(_)));
        assert!(matches!(Node::one(l, b"0001"), Node::Fixed(_)));
        for v in [&b"1234"[..], b"-7", b"", &[b'x'; MAX_WIDTH + 1]] {
            assert!(matches!(Node::one(l, v), Node::Pack(_)), "{v:?}");
        }
    }

    #[test]
    fn a_full_node_of_16_byte_strings_takes_16_bytes_an_element() {
        let l = Limits::default();
        let mut n = Node::one(l, b"v000000000000000");
        let mut i = 1;
        loop {
            let v = format!("v{i:015}");
            if !n.takes(l, v.as_bytes()) {
                break;
            }
            n.push_in_room(v.as_bytes(), false, l.node_bytes());
            i += 1;
        }
        assert!(matches!(n, Node::Fixed(_)));
        assert_eq!(n.len(), 512);
        n.trim();
        assert_eq!(n.heap_bytes(), 8192);
        // As a listpack it would be over the limit: a snapshot writes it in two.
        let packs = n.rdb_packs(l);
        assert_eq!(packs.iter().map(|p| p.len()).collect::<Vec<_>>(), [454, 58]);
        assert!(packs.iter().all(|p| p.byte_len() <= 8192));
        // Another width cannot join it, and it stays as it was.
        assert!(!n.takes(l, b"short"));
        assert!(!n.replace(l, 3, b"short"));
        assert!(matches!(n, Node::Fixed(_)));
    }

    #[test]
    fn room_at_both_ends_is_reused_before_growing() {
        let l = Limits::default();
        let mut n = Node::one(l, b"ab");
        for _ in 0..50 {
            n.push_in_room(b"cd", true, 64);
            n.push_in_room(b"ef", false, 64);
            let mut seen = Vec::new();
            n.pop_in_room(true, &mut |e| seen.extend_from_slice(e));
            n.pop_in_room(false, &mut |e| seen.extend_from_slice(e));
            assert_eq!(seen, b"cdef");
        }
        assert_eq!(n.len(), 1);
        assert!(n.heap_bytes() <= 64, "{}", n.heap_bytes());
    }
}
