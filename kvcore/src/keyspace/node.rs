//! The keyspace's entry: one allocation per key holding the chain link, the value, an optional
//! deadline and the key bytes.
//!
//! # Layout
//!
//! ```text
//! offset 0   meta   usize          key length << 1 | 1 if the allocation has a deadline slot
//!        8   next   Option<Node>   the dict's chain link (one word)
//!       16   value  Value          24 bytes
//!       40   tail   [u8]           [deadline: u64, only with the slot] [key bytes]
//! ```
//!
//! [`KeyNode`] is that `repr(C)` struct with an unsized tail, so `&KeyNode` is a fat pointer
//! whose length is the tail's: a reference covers the whole allocation, and `n.value` is a plain
//! field. The dict stores [`Node`], a thin owning pointer (one word, so a bucket stays one word
//! and `Option<Node>` too), which rebuilds the fat pointer from `meta`. A key of 7 bytes without
//! a deadline thus costs one 48-byte block, where a boxed node plus a boxed key cost 64 + 16.
//!
//! Keys without a TTL carry no deadline slot. Giving a deadline to such a key reallocates its
//! node with the slot (through [`crate::dict::Dict::replace_with`], keeping its chain
//! position); clearing a deadline writes 0 into the slot and keeps it.

use std::alloc::{self, Layout};
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

use crate::dict::Link;
use crate::value::Value;

/// `meta` bit: the tail starts with a deadline slot.
const SLOT_BIT: usize = 1;
/// Bytes of the deadline slot.
const SLOT: usize = 8;

/// One key's entry in the main dict: the value, the deadline and the key. Only reachable
/// behind a reference (it is unsized); see the module docs for the layout.
#[repr(C)]
pub struct KeyNode {
    meta: usize,
    next: Option<Node>,
    /// The value.
    pub value: Value,
    tail: [u8],
}

/// The sized prefix of [`KeyNode`]: the same fields in the same order under `repr(C)`, hence the
/// same offsets; the tail starts at `size_of::<Head>()`.
#[repr(C)]
struct Head {
    meta: usize,
    next: Option<Node>,
    value: Value,
}

impl KeyNode {
    fn slot_len(&self) -> usize {
        if self.meta & SLOT_BIT != 0 {
            SLOT
        } else {
            0
        }
    }

    /// The key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        self.tail.get(self.slot_len()..).unwrap_or_default()
    }

    /// The raw deadline: Unix ms, 0 for none.
    #[inline]
    pub(crate) fn deadline(&self) -> u64 {
        if self.meta & SLOT_BIT == 0 {
            return 0;
        }
        self.tail
            .first_chunk::<SLOT>()
            .map_or(0, |b| u64::from_ne_bytes(*b))
    }

    /// The deadline in Unix ms, if any.
    pub fn expire_at(&self) -> Option<u64> {
        let at = self.deadline();
        (at != 0).then_some(at)
    }

    /// Expired once the clock has passed the deadline (Redis's `now > when`): at the deadline
    /// itself the key still lives, with a PTTL of 0. Setting a deadline at or before now
    /// deletes the key instead (the commands check that).
    #[inline]
    pub(crate) fn expired(&self, now: u64) -> bool {
        let at = self.deadline();
        at != 0 && at < now
    }

    /// Stores the raw deadline `at` (0 = none) in place. Returns false, changing nothing, when
    /// that needs a slot this node lacks (then rebuild it with [`Node::new`]).
    pub(crate) fn try_set_deadline(&mut self, at: u64) -> bool {
        match self.tail.first_chunk_mut::<SLOT>() {
            Some(b) if self.meta & SLOT_BIT != 0 => {
                *b = at.to_ne_bytes();
                true
            }
            _ => at == 0,
        }
    }

    /// Bytes this key costs (its node block, the value's heap), for MEMORY USAGE.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of_val(self) + self.value.heap_bytes()
    }
}

impl std::fmt::Debug for KeyNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyNode")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", &self.value)
            .field("expire_at", &self.expire_at())
            .finish()
    }
}

/// Layout of a node whose tail holds `tail` bytes; equals `Layout::for_value` of the node.
fn layout(tail: usize) -> Layout {
    match Layout::array::<u8>(tail).and_then(|t| Layout::new::<Head>().extend(t)) {
        Ok((l, _)) => l.pad_to_align(),
        // Unreachable for a key that exists in memory; Vec panics the same way.
        Err(_) => panic!("key node size overflow"),
    }
}

/// Thin owning pointer to a [`KeyNode`] (what `Box<KeyNode>` would be, in one word).
pub struct Node(NonNull<Head>);

// SAFETY: a `Node` owns its allocation exclusively, as a `Box` does, and its contents (a
// `Value`, an `Option<Node>`, bytes) are themselves `Send`.
unsafe impl Send for Node {}
// SAFETY: shared access only reads through `&KeyNode`, as with a `Box`; `Value` is `Sync`.
unsafe impl Sync for Node {}

impl Node {
    /// A new unlinked node. `deadline` 0 means none, and then the node gets no slot.
    pub fn new(key: &[u8], value: Value, deadline: u64) -> Node {
        let slot = if deadline != 0 { SLOT } else { 0 };
        let layout = layout(slot + key.len());
        // SAFETY: `layout` is at least `Head`'s size, so not zero-sized.
        let raw = unsafe { alloc::alloc(layout) }.cast::<Head>();
        let Some(p) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        let head = Head {
            meta: key.len() << 1 | usize::from(slot != 0),
            next: None,
            value,
        };
        // SAFETY: `p` is a fresh block of `layout`: a `Head` (aligned, as the block is aligned
        // for `Head`) followed by `slot + key.len()` bytes, so every write below is in bounds;
        // the deadline lands at offset `size_of::<Head>()`, a multiple of 8.
        unsafe {
            p.as_ptr().write(head);
            let tail = p.as_ptr().cast::<u8>().add(std::mem::size_of::<Head>());
            if slot != 0 {
                tail.cast::<[u8; SLOT]>().write(deadline.to_ne_bytes());
            }
            ptr::copy_nonoverlapping(key.as_ptr(), tail.add(slot), key.len());
        }
        let node = Node(p);
        debug_assert_eq!(Layout::for_value::<KeyNode>(&node), layout);
        node
    }

    /// The fat pointer to the node.
    #[inline]
    fn raw(&self) -> *mut KeyNode {
        // SAFETY: `self.0` points at an initialized `Head` (the invariant of `Node`); this reads
        // one field through the raw pointer, creating no reference.
        let meta = unsafe { (*self.0.as_ptr()).meta };
        let tail = (meta >> 1) + if meta & SLOT_BIT != 0 { SLOT } else { 0 };
        // An unsized-to-unsized cast keeps the metadata: `tail` is the length of `KeyNode::tail`.
        ptr::slice_from_raw_parts_mut(self.0.as_ptr().cast::<u8>(), tail) as *mut KeyNode
    }

    /// Frees the node and returns its value and raw deadline (0 = none). The node must be
    /// unlinked (`next == None`, as the dict hands out removed entries).
    pub fn into_parts(self) -> (Value, u64) {
        debug_assert!(self.next.is_none(), "into_parts of a linked node");
        let deadline = self.deadline();
        let this = ManuallyDrop::new(self);
        let fat = this.raw();
        // SAFETY: `fat` covers the whole live block (see `raw`). The value is moved out exactly
        // once and the remaining fields are dropped in place (`meta` and the tail need no drop);
        // then the block is freed with the layout it was allocated with, and `this` is never
        // used again (ManuallyDrop: no second drop).
        unsafe {
            let layout = Layout::for_value(&*fat);
            let value = ptr::read(ptr::addr_of!((*fat).value));
            ptr::drop_in_place(ptr::addr_of_mut!((*fat).next));
            alloc::dealloc(fat.cast::<u8>(), layout);
            (value, deadline)
        }
    }
}

impl Deref for Node {
    type Target = KeyNode;
    #[inline]
    fn deref(&self) -> &KeyNode {
        // SAFETY: the block is live and initialized for as long as `self` is, and `raw` gives a
        // pointer spanning it; shared access follows from `&self`.
        unsafe { &*self.raw() }
    }
}

impl DerefMut for Node {
    #[inline]
    fn deref_mut(&mut self) -> &mut KeyNode {
        // SAFETY: as in `deref`; `&mut self` makes the access exclusive (a `Node` is the only
        // owner of its block).
        unsafe { &mut *self.raw() }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let fat = self.raw();
        // SAFETY: the block is live and initialized; its fields are dropped once (the dict
        // unlinks chains before dropping, so `next` is dropped iteratively there) and the block
        // is freed with its allocation layout. `self` is not used afterwards.
        unsafe {
            let layout = Layout::for_value(&*fat);
            ptr::drop_in_place(fat);
            alloc::dealloc(fat.cast::<u8>(), layout);
        }
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl Link for Node {
    #[inline]
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    #[inline]
    fn next(&self) -> Option<&Self> {
        self.next.as_ref()
    }
    #[inline]
    fn next_mut(&mut self) -> &mut Option<Self> {
        &mut self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Value>(), 24);
        assert_eq!(std::mem::size_of::<Option<Node>>(), 8);
        assert_eq!(std::mem::size_of::<Head>(), 40);
        // A 7-byte key without deadline: one 48-byte block.
        assert_eq!(layout(7).size(), 48);
        assert_eq!(layout(8 + 16).size(), 64);
    }

    #[test]
    fn fields_round_trip() {
        for len in [0usize, 1, 7, 8, 9, 100, 1000] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for at in [0u64, 1, u64::MAX] {
                let mut n = Node::new(&key, Value::Int(len as i64), at);
                assert_eq!(n.key(), &key[..]);
                assert_eq!(n.deadline(), at);
                assert_eq!(n.value, Value::Int(len as i64));
                assert_eq!(
                    std::mem::size_of_val::<KeyNode>(&n),
                    layout(len + if at != 0 { 8 } else { 0 }).size()
                );
                // Clearing always works in place; setting needs a slot.
                assert!(n.try_set_deadline(0));
                assert_eq!(n.expire_at(), None);
                assert_eq!(n.try_set_deadline(5), at != 0);
                assert_eq!(n.key(), &key[..]);
                n.value = Value::Str(key.clone().into());
                let (v, d) = n.into_parts();
                assert_eq!(v, Value::Str(key.clone().into()));
                assert_eq!(d, if at != 0 { 5 } else { 0 });
            }
        }
    }

    #[test]
    fn chains_drop() {
        let mut head = Node::new(b"a", Value::Str((*b"x").into()), 0);
        *head.next_mut() = Some(Node::new(b"b", Value::Str((*b"y").into()), 9));
        assert_eq!(head.next().map(|n| n.key()), Some(&b"b"[..]));
        assert_eq!(head.next().and_then(|n| n.expire_at()), Some(9));
        drop(head);
    }
}
