//! Keyspace entries: one allocation per key holding the chain link, a payload, an optional
//! deadline and the key bytes.
//!
//! # Layout
//!
//! ```text
//! offset 0   meta   usize           access << 40 | snapshot mark << 39 | key length << 1 |
//!                                   1 if the block has a deadline slot (access: 24 bits of
//!                                   LRU clock or LFU data; the mark: see `crate::snapshot`)
//!        8   next   Option<Thin<T>> the dict's chain link (one word)
//!       16   value  T               the payload: a `Value` (24 bytes) in the main dict,
//!                                   `()` in the expiry index
//!    16 + |T| tail  [u8]            [key bytes] [deadline: 8 bytes, only with the slot]
//! ```
//!
//! [`Packed`] is that `repr(C)` struct with an unsized tail, so `&Packed<T>` is a fat pointer
//! whose length is the tail's: a reference covers the whole block, and `n.value` is a plain
//! field. The dicts store [`Thin`], a thin owning pointer (one word, so a bucket stays one word
//! and `Option<Thin<T>>` too), which rebuilds the fat pointer from `meta`. A 7-byte key without
//! a deadline thus costs one 48-byte block in the main dict, where a boxed node plus a boxed key
//! cost 64 + 16. The key comes first in the tail so that reading it (every chain step of a
//! lookup) is a load of `meta` and no branch.
//!
//! Keys without a TTL carry no deadline slot. Giving a deadline to such a key reallocates its
//! node with the slot (through [`crate::dict::Dict::replace_with`], keeping its chain
//! position); clearing a deadline writes 0 into the slot and keeps it.

use std::alloc::{self, Layout};
use std::mem::{offset_of, size_of, ManuallyDrop};
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

use crate::dict::Link;
use crate::value::Value;

/// `meta` bit: the tail starts with a deadline slot.
const SLOT_BIT: usize = 1;
/// Where the 24-bit access field starts in `meta` (Redis's `lru` bits of an object).
const ACCESS_SHIFT: u32 = 40;
/// Longest key `meta` can describe (38 bits; Redis caps keys at 512 MB).
const KEY_LEN_MASK: usize = (1 << (ACCESS_SHIFT - 2)) - 1;
/// `meta` bit: the snapshot mark (whether the running snapshot has this key already).
const MARK_BIT: usize = 1 << (ACCESS_SHIFT - 1);
/// The access field's largest value.
pub const ACCESS_MAX: u32 = (1 << 24) - 1;

const _: () = assert!(
    usize::BITS == 64,
    "key nodes pack their meta word for 64-bit targets"
);

/// The key length in a `meta` word.
#[inline]
fn key_len(meta: usize) -> usize {
    (meta >> 1) & KEY_LEN_MASK
}
/// Bytes of the deadline slot.
const SLOT: usize = 8;

/// One key's entry: the payload `value`, the deadline and the key. Only reachable behind a
/// reference (it is unsized); see the module docs for the layout.
#[repr(C)]
pub struct Packed<T> {
    meta: usize,
    next: Option<Thin<T>>,
    /// The payload (a key's value in the main dict).
    pub value: T,
    tail: [u8],
}

/// One key's node in the main dict.
pub type KeyNode = Packed<Value>;

/// The sized prefix of [`Packed`]: the same fields in the same order under `repr(C)`, hence the
/// same offsets.
#[repr(C)]
struct Prefix<T> {
    meta: usize,
    next: Option<Thin<T>>,
    value: T,
}

impl<T> Packed<T> {
    /// The key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        self.tail.get(..key_len(self.meta)).unwrap_or_default()
    }

    /// The deadline slot, if the node has one.
    fn slot(&self) -> Option<&[u8; SLOT]> {
        if self.meta & SLOT_BIT == 0 {
            return None;
        }
        self.tail.get(key_len(self.meta)..)?.first_chunk::<SLOT>()
    }

    /// The raw deadline: Unix ms, 0 for none.
    #[inline]
    pub(crate) fn deadline(&self) -> u64 {
        self.slot().map_or(0, |b| u64::from_ne_bytes(*b))
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

    /// The 24-bit access field: an LRU clock reading or LFU's minutes and counter (see
    /// [`crate::evict`]).
    #[inline]
    pub fn access(&self) -> u32 {
        (self.meta >> ACCESS_SHIFT) as u32
    }

    /// Stores the access field (its low 24 bits).
    #[inline]
    pub(crate) fn set_access(&mut self, access: u32) {
        let keep = self.meta & ((1 << ACCESS_SHIFT) - 1);
        self.meta = keep | ((access & ACCESS_MAX) as usize) << ACCESS_SHIFT;
    }

    /// The snapshot mark (see [`crate::snapshot`]).
    #[inline]
    pub(crate) fn mark(&self) -> bool {
        self.meta & MARK_BIT != 0
    }

    /// Sets the snapshot mark.
    #[inline]
    pub(crate) fn set_mark(&mut self, mark: bool) {
        self.meta = (self.meta & !MARK_BIT) | if mark { MARK_BIT } else { 0 };
    }

    /// Stores the raw deadline `at` (0 = none) in place. Returns false, changing nothing, when
    /// that needs a slot this node lacks (then rebuild it with [`Thin::new`]).
    pub(crate) fn try_set_deadline(&mut self, at: u64) -> bool {
        let (len, has_slot) = (key_len(self.meta), self.meta & SLOT_BIT != 0);
        match self
            .tail
            .get_mut(len..)
            .and_then(|t| t.first_chunk_mut::<SLOT>())
        {
            Some(b) if has_slot => {
                *b = at.to_ne_bytes();
                true
            }
            _ => at == 0,
        }
    }
}

impl KeyNode {
    /// Bytes this key costs (its node block, the value's heap), for MEMORY USAGE.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of_val(self) + self.value.heap_bytes()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", &self.value)
            .field("expire_at", &self.expire_at())
            .finish()
    }
}

/// Offset of the tail in a `Packed<T>`: `repr(C)` puts it right after `value` (its alignment
/// is 1).
const fn tail_offset<T>() -> usize {
    offset_of!(Prefix<T>, value) + size_of::<T>()
}

/// Layout of a node whose tail holds `tail` bytes; equals `Layout::for_value` of the node.
fn layout<T>(tail: usize) -> Layout {
    let align = std::mem::align_of::<Prefix<T>>();
    match tail_offset::<T>()
        .checked_add(tail)
        .map(|size| Layout::from_size_align(size, align))
    {
        Some(Ok(l)) => l.pad_to_align(),
        // Unreachable for a key that exists in memory; Vec panics the same way.
        _ => panic!("key node size overflow"),
    }
}

/// Thin owning pointer to a [`Packed`] (what `Box<Packed<T>>` would be, in one word).
pub struct Thin<T>(NonNull<Prefix<T>>);

/// The main dict's owning pointer.
pub type Node = Thin<Value>;

// SAFETY: a `Thin` owns its block exclusively, as a `Box` does; its contents are a `T`, an
// `Option<Thin<T>>` and bytes, so sending it sends a `T`.
unsafe impl<T: Send> Send for Thin<T> {}
// SAFETY: shared access only hands out `&Packed<T>`, as `&Box` would; sharing it shares a `T`.
unsafe impl<T: Sync> Sync for Thin<T> {}

impl<T> Thin<T> {
    /// A new unlinked node. `deadline` 0 means none, and then the node gets no slot.
    pub fn new(key: &[u8], value: T, deadline: u64) -> Thin<T> {
        Self::with_access(key, value, deadline, 0)
    }

    /// [`Thin::new`] with the access field set.
    pub fn with_access(key: &[u8], value: T, deadline: u64, access: u32) -> Thin<T> {
        assert!(key.len() <= KEY_LEN_MASK, "key too long for a key node");
        let slot = if deadline != 0 { SLOT } else { 0 };
        let layout = layout::<T>(slot + key.len());
        // SAFETY: `layout` is at least as large as `Prefix<T>`, which holds a usize: not
        // zero-sized.
        let raw = unsafe { alloc::alloc(layout) }.cast::<Prefix<T>>();
        let Some(p) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        let prefix = Prefix {
            meta: ((access & ACCESS_MAX) as usize) << ACCESS_SHIFT
                | key.len() << 1
                | usize::from(slot != 0),
            next: None,
            value,
        };
        // SAFETY: `p` is a fresh block of `layout`, aligned for `Prefix<T>` and at least
        // `size_of::<Prefix<T>>()` long (the padded tail offset), so the prefix write is in
        // bounds; the tail is `slot + key.len()` bytes from `tail_offset`, inside the block,
        // written after the prefix (whose trailing padding it may overlap) with align-1 writes.
        unsafe {
            p.as_ptr().write(prefix);
            let tail = p.as_ptr().cast::<u8>().add(tail_offset::<T>());
            ptr::copy_nonoverlapping(key.as_ptr(), tail, key.len());
            if slot != 0 {
                let at = tail.add(key.len()).cast::<[u8; SLOT]>();
                at.write(deadline.to_ne_bytes());
            }
        }
        let node = Thin(p);
        debug_assert_eq!(Layout::for_value::<Packed<T>>(&node), layout);
        node
    }

    /// The fat pointer to the node.
    #[inline]
    fn raw(&self) -> *mut Packed<T> {
        // SAFETY: `self.0` points at an initialized prefix (the invariant of `Thin`); this reads
        // one field through the raw pointer, creating no reference.
        let meta = unsafe { (*self.0.as_ptr()).meta };
        let tail = key_len(meta) + (meta & SLOT_BIT) * SLOT;
        // An unsized-to-unsized cast keeps the metadata: `tail` is the length of `Packed::tail`.
        ptr::slice_from_raw_parts_mut(self.0.as_ptr().cast::<u8>(), tail) as *mut Packed<T>
    }

    /// Frees the node and returns its value and raw deadline (0 = none). The node must be
    /// unlinked (`next == None`, as the dict hands out removed entries).
    pub fn into_parts(self) -> (T, u64) {
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

impl<T> Deref for Thin<T> {
    type Target = Packed<T>;
    #[inline]
    fn deref(&self) -> &Packed<T> {
        // SAFETY: the block is live and initialized for as long as `self` is, and `raw` gives a
        // pointer spanning it; shared access follows from `&self`.
        unsafe { &*self.raw() }
    }
}

impl<T> DerefMut for Thin<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Packed<T> {
        // SAFETY: as in `deref`; `&mut self` makes the access exclusive (a `Thin` is the only
        // owner of its block).
        unsafe { &mut *self.raw() }
    }
}

impl<T> Drop for Thin<T> {
    fn drop(&mut self) {
        let fat = self.raw();
        // SAFETY: the block is live and initialized; its fields are dropped once (the dict
        // unlinks chains before dropping, so `next` is `None` there) and the block is freed
        // with its allocation layout. `self` is not used afterwards.
        unsafe {
            let layout = Layout::for_value(&*fat);
            ptr::drop_in_place(fat);
            alloc::dealloc(fat.cast::<u8>(), layout);
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Thin<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T> Thin<T> {
    /// The key, read without building the fat pointer: `meta`, then the bytes after the payload.
    #[inline]
    fn key_bytes(&self) -> &[u8] {
        let base = self.0.as_ptr();
        // SAFETY: the block is live and initialized while `self` is borrowed; the key is the
        // first `meta >> 1` bytes of the tail, which starts at `tail_offset` inside the block,
        // and nothing mutates it while shared (only `&mut self` could).
        unsafe {
            let len = key_len((*base).meta);
            std::slice::from_raw_parts(base.cast::<u8>().add(tail_offset::<T>()), len)
        }
    }
}

impl<T> Link for Thin<T> {
    #[inline]
    fn key(&self) -> &[u8] {
        self.key_bytes()
    }
    #[inline]
    fn prefetch(&self) {
        crate::dict::prefetch(self.0.as_ptr().cast::<u8>());
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
        assert_eq!(std::mem::size_of::<Prefix<Value>>(), 40);
        assert_eq!(tail_offset::<Value>(), 40);
        assert_eq!(tail_offset::<()>(), 16);
        assert_eq!(tail_offset::<u8>(), 17);
        // A 7-byte key without deadline: one 48-byte block.
        assert_eq!(layout::<Value>(7).size(), 48);
        assert_eq!(layout::<Value>(8 + 16).size(), 64);
        assert_eq!(layout::<()>(16).size(), 32);
        assert_eq!(layout::<u8>(0).size(), 24);
    }

    #[test]
    fn fields_round_trip() {
        for len in [0usize, 1, 7, 8, 9, 100, 1000] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for at in [0u64, 1, u64::MAX] {
                let mut n: Node = Thin::new(&key, Value::Int(len as i64), at);
                assert_eq!(n.key(), &key[..]);
                assert_eq!(Link::key(&n), &key[..]);
                assert_eq!(n.deadline(), at);
                assert_eq!(n.value, Value::Int(len as i64));
                assert_eq!(
                    std::mem::size_of_val::<KeyNode>(&n),
                    layout::<Value>(len + if at != 0 { 8 } else { 0 }).size()
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
    fn access_field_keeps_key_and_deadline() {
        for len in [0usize, 1, 7, 300] {
            let key: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            for at in [0u64, 12345] {
                let mut n: Node = Thin::with_access(&key, Value::Int(1), at, ACCESS_MAX);
                assert_eq!(
                    (n.access(), n.key(), n.deadline()),
                    (ACCESS_MAX, &key[..], at)
                );
                n.set_access(0x12_3456);
                assert_eq!(
                    (n.access(), Link::key(&n), n.deadline()),
                    (0x12_3456, &key[..], at)
                );
                n.set_access(u32::MAX);
                assert_eq!(n.access(), ACCESS_MAX);
                assert_eq!(n.try_set_deadline(9), at != 0);
                assert_eq!((n.access(), n.key()), (ACCESS_MAX, &key[..]));
                assert_eq!(
                    std::mem::size_of_val::<KeyNode>(&n),
                    layout::<Value>(len + if at != 0 { 8 } else { 0 }).size()
                );
            }
        }
    }

    #[test]
    fn other_payloads() {
        // Odd tail offsets and alignments (a u8 or u16 payload, a zero-sized one).
        for len in [0usize, 1, 7, 8, 33] {
            let key: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            for at in [0u64, 77] {
                let a = Thin::new(&key, 0xabu8, at);
                let b = Thin::new(&key, 0xbeefu16, at);
                let c = Thin::new(&key, (), at);
                assert_eq!((a.key(), b.key(), c.key()), (&key[..], &key[..], &key[..]));
                assert_eq!(Link::key(&b), &key[..]);
                assert_eq!((a.deadline(), b.deadline(), c.deadline()), (at, at, at));
                assert_eq!((a.value, b.value), (0xab, 0xbeef));
                assert_eq!(a.into_parts(), (0xab, at));
                drop((b, c));
            }
        }
    }

    #[test]
    fn chains_drop() {
        let mut head: Node = Thin::new(b"a", Value::Str((*b"x").into()), 0);
        *head.next_mut() = Some(Thin::new(b"b", Value::Str((*b"y").into()), 9));
        assert_eq!(head.next().map(|n| n.key()), Some(&b"b"[..]));
        assert_eq!(head.next().and_then(|n| n.expire_at()), Some(9));
        drop(head);
    }
}
