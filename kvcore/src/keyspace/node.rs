//! Keyspace entries: one slab block per key holding the chain link, the key, a payload and an
//! optional deadline.
//!
//! # Layout
//!
//! ```text
//! offset 0   meta   usize           access << 40 | snapshot mark << 39 | INT << 38 |
//!                                   XLINK << 37 | lengths << 2 | EMB << 1 | SLOT (access: 24
//!                                   bits of LRU clock or LFU data; the mark: see
//!                                   `crate::snapshot`)
//!        8   next   Option<Thin<T>> the dict's chain link (a 32-bit slab handle)
//!       12   tail   [u8]            usual form:    [key] [padding to T's alignment] [T] [slot]
//!                                   embedded form: [key] [string bytes] [slot]
//!                                   either, then, with XLINK: [padding to 8] [xlink]
//! ```
//!
//! The key always starts at offset 12, so reading it (every chain step of a lookup) is a load
//! of `meta` and no branch on the form. `slot` is the 8-byte deadline, present only when the
//! SLOT bit is set (keys without a TTL carry none). `xlink` is the expiry index's chain link
//! ([`ExpLink`]): main-dict nodes carry it exactly when they have a slot, so the index needs
//! no entry of its own. The lengths field is the key length in the usual form (35 bits), and
//! in the embedded form the key length (15 bits) and the string's (20 bits); the INT bit says
//! that the 8 bytes after the key are an `i64` (native order), a string stored as an integer
//! (the `int` encoding).
//!
//! The *embedded* form holds a string created whole (SET, MSET ...; a big hash's field value)
//! after the key, instead of in a `Value` that points to a second allocation. A 16-byte key
//! with a 64-byte string then costs one 92-byte block, where the usual form costs a 56-byte
//! node plus a 64-byte value; an integer takes 8 bytes instead of a 24-byte `Value`. Commands
//! that change a string in place (APPEND, SETRANGE, SETBIT ...) get the usual form back first
//! ([`crate::keyspace::Keyspace::get_mut`]), as Redis turns an `embstr` into a `raw` string.
//!
//! # Where nodes live
//!
//! Every node is a block of its dict's [`Slab`] (the dict's [`Link::Arena`]), and a [`Thin`] is
//! its 32-bit handle: buckets and chain links take 4 bytes, and a block takes its size rounded
//! to 4 (mimalloc would round a 92-byte node to 96). Blocks are 4-aligned, so [`Packed`] is
//! `packed(4)`: `meta` is read and written by value (an unaligned load or store), the link is
//! 4-aligned as its type needs, and the deadline slot is read as bytes. A node whose form holds
//! a `T` or the link word has a size that is a multiple of 8 (the layout makes it so), and the
//! slab aligns such blocks to 8, so the `T` and the link word are aligned.
//!
//! [`Packed`] is that struct with an unsized tail, so `&Packed<T>` is a fat pointer whose
//! length is the tail's: a reference covers the whole block. A `Thin` owns its block but cannot
//! free it by itself: a node leaves through [`Link::release`] or one of the methods that take it
//! with the slab (`into_parts`, `remade` ...). One dropped otherwise is leaked, not freed twice.
//!
//! Giving a deadline to a key without a slot reallocates its node with the slot (through
//! [`crate::dict::Dict::replace_with`], keeping its chain position); clearing a deadline writes
//! 0 into the slot and keeps it.

use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};

use crate::dict::{Link, WordLink};
use crate::slab::{Handle, Slab};
use crate::value::{Stored, Value};

/// `meta` bit: the tail ends with a deadline slot.
const SLOT_BIT: usize = 1;
/// `meta` bit: the embedded form (a string's bytes after the key, no `T`).
const EMB_BIT: usize = 2;
/// Where the lengths field starts in `meta`.
const LEN_SHIFT: u32 = 2;
/// Where the 24-bit access field starts in `meta` (Redis's `lru` bits of an object).
const ACCESS_SHIFT: u32 = 40;
/// Bits of the lengths field (below it: SLOT and EMB; above: XLINK, INT, the mark, access).
const LEN_BITS: u32 = ACCESS_SHIFT - 3 - LEN_SHIFT;
/// Longest key the usual form describes (35 bits; Redis caps keys at 512 MB).
const KEY_LEN_MASK: usize = (1 << LEN_BITS) - 1;
/// Bits of the key length in the embedded form.
const EMB_KEY_BITS: u32 = 15;
/// Longest key an embedded node holds.
pub const EMB_KEY_MAX: usize = (1 << EMB_KEY_BITS) - 1;
/// Longest string an embedded node holds. Longer strings take a separate allocation, whose
/// cost beside them is small (the bits would allow up to 4 MiB).
pub const EMB_STR_MAX: usize = 4096;
const EMB_STR_MASK: usize = (1 << (LEN_BITS - EMB_KEY_BITS)) - 1;
/// `meta` bit: the tail ends with the expiry index's link word (see [`ExpLink`]), 8-aligned
/// after the deadline slot. Main-dict nodes have it exactly when they have a slot.
const XLINK_BIT: usize = 1 << (ACCESS_SHIFT - 3);
/// `meta` bit, in the embedded form: the bytes are an `i64`.
const INT_BIT: usize = 1 << (ACCESS_SHIFT - 2);
const _: () = assert!(EMB_STR_MAX <= EMB_STR_MASK);
/// `meta` bit: the snapshot mark (whether the running snapshot has this key already).
const MARK_BIT: usize = 1 << (ACCESS_SHIFT - 1);
/// The access field's largest value.
pub const ACCESS_MAX: u32 = (1 << 24) - 1;
/// Bytes before the tail: `meta` and `next`.
const HEAD: usize = 12;
/// Where `next` is in the head.
const NEXT_AT: usize = 8;
/// Bytes of the deadline slot.
const SLOT: usize = 8;

const _: () = assert!(
    usize::BITS == 64,
    "key nodes pack their meta word for 64-bit targets"
);

/// The key length in a `meta` word (either form).
#[inline]
fn key_len(meta: usize) -> usize {
    let mask = if meta & EMB_BIT != 0 {
        EMB_KEY_MAX
    } else {
        KEY_LEN_MASK
    };
    (meta >> LEN_SHIFT) & mask
}

/// The embedded string's length in a `meta` word of the embedded form.
#[inline]
fn emb_len(meta: usize) -> usize {
    (meta >> (LEN_SHIFT + EMB_KEY_BITS)) & EMB_STR_MASK
}

/// Where `T` starts in the tail of a usual-form node whose key is `key_len` bytes: aligned in
/// the block (whose start is 8-aligned in that form).
#[inline]
const fn value_offset<T>(key_len: usize) -> usize {
    (HEAD + key_len).next_multiple_of(align_of::<T>()) - HEAD
}

/// Where the deadline slot starts in the tail (the end of the key and the payload or bytes).
#[inline]
fn slot_offset<T>(meta: usize) -> usize {
    let k = key_len(meta);
    if meta & EMB_BIT != 0 {
        k + emb_len(meta)
    } else {
        value_offset::<T>(k) + size_of::<T>()
    }
}

/// The tail length a `meta` word describes.
#[inline]
fn tail_len<T>(meta: usize) -> usize {
    let end = slot_offset::<T>(meta) + (meta & SLOT_BIT) * SLOT;
    if meta & XLINK_BIT != 0 {
        // The link word, 8-aligned in the block (which is 8-aligned: its size is a multiple
        // of 8).
        (HEAD + end).next_multiple_of(8) - HEAD + 8
    } else {
        end
    }
}

/// Bytes of the block a node whose tail holds `tail` bytes asks its slab for.
#[inline]
fn block_len(tail: usize) -> usize {
    match HEAD.checked_add(tail) {
        Some(n) => n,
        // Unreachable for a key that exists in memory; Vec panics the same way.
        None => panic!("key node size overflow"),
    }
}

/// Whether the raw deadline `at` (0 = none) has passed at `now` (see [`Packed::expired`]).
#[inline]
fn past(at: u64, now: u64) -> bool {
    at != 0 && at < now
}

/// Payload types of nodes that are always in the usual form (everything but `Value`, whose
/// nodes may embed a string): their nodes hand out `&T` directly.
pub trait Plain {}
impl Plain for () {}
#[cfg(test)]
impl Plain for u8 {}
#[cfg(test)]
impl Plain for u16 {}

/// One key's entry: the payload, the deadline and the key. Only reachable behind a reference
/// (it is unsized); see the module docs for the layout.
#[repr(C, packed(4))]
pub struct Packed<T> {
    meta: usize,
    next: Option<Thin<T>>,
    tail: [u8],
}

/// One key's node in the main dict.
pub type KeyNode = Packed<Value>;

/// The sized head of [`Packed`]: the same first fields in the same order and packing.
#[repr(C, packed(4))]
struct Head<T> {
    meta: usize,
    next: Option<Thin<T>>,
}

const _: () = assert!(size_of::<Head<Value>>() == HEAD && size_of::<Head<()>>() == HEAD);
const _: () = assert!(std::mem::offset_of!(Head<Value>, next) == NEXT_AT);

impl<T> Packed<T> {
    /// The key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        self.tail.get(..key_len(self.meta)).unwrap_or_default()
    }

    /// The deadline slot, if the node has one: the 8 bytes after the payload or bytes.
    fn slot(&self) -> Option<&[u8; SLOT]> {
        let meta = self.meta;
        if meta & SLOT_BIT == 0 {
            return None;
        }
        let at = slot_offset::<T>(meta);
        self.tail.get(at..)?.first_chunk::<SLOT>()
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
        past(self.deadline(), now)
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
        let low = (1usize << ACCESS_SHIFT) - 1;
        self.meta = (self.meta & low) | (((access & ACCESS_MAX) as usize) << ACCESS_SHIFT);
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
    /// that needs a slot this node lacks (then rebuild the node).
    pub(crate) fn try_set_deadline(&mut self, at: u64) -> bool {
        let meta = self.meta;
        if meta & SLOT_BIT == 0 {
            return at == 0;
        }
        let off = slot_offset::<T>(meta);
        match self
            .tail
            .get_mut(off..)
            .and_then(|t| t.first_chunk_mut::<SLOT>())
        {
            Some(b) => {
                *b = at.to_ne_bytes();
                true
            }
            None => at == 0,
        }
    }

    /// Whether the node is in the embedded form.
    #[inline]
    fn is_embedded(&self) -> bool {
        self.meta & EMB_BIT != 0
    }

    /// The embedded string's bytes (empty in the usual form).
    #[inline]
    fn embedded(&self) -> &[u8] {
        let meta = self.meta;
        let (k, n) = (key_len(meta), emb_len(meta));
        match meta & EMB_BIT != 0 {
            true => self.tail.get(k..k + n).unwrap_or_default(),
            false => &[],
        }
    }

    /// The embedded string's bytes, to overwrite in place, if the node holds `len` of them
    /// (a string, not an integer).
    #[inline]
    pub(crate) fn embedded_mut(&mut self, len: usize) -> Option<&mut [u8]> {
        let meta = self.meta;
        let (k, n) = (key_len(meta), emb_len(meta));
        if !self.is_embedded() || self.is_int() || n != len {
            return None;
        }
        self.tail.get_mut(k..k + n)
    }

    /// [`Packed::embedded_mut`] of a node without a deadline slot, from one read of `meta`:
    /// the common SET overwrite. `None` also for a node with a slot (whose deadline may be 0:
    /// the longer way decides that).
    #[inline]
    pub(crate) fn plain_bytes_mut(&mut self, len: usize) -> Option<&mut [u8]> {
        let meta = self.meta;
        if meta & (EMB_BIT | INT_BIT | SLOT_BIT) != EMB_BIT || emb_len(meta) != len {
            return None;
        }
        let k = (meta >> LEN_SHIFT) & EMB_KEY_MAX;
        self.tail.get_mut(k..k + len)
    }

    /// Whether the node is in the embedded form holding an integer.
    #[inline]
    fn is_int(&self) -> bool {
        self.meta & (EMB_BIT | INT_BIT) == EMB_BIT | INT_BIT
    }

    /// The payload, if the node is in the usual form.
    #[inline]
    fn payload(&self) -> Option<&T> {
        if self.is_embedded() {
            return None;
        }
        let off = value_offset::<T>(key_len(self.meta));
        // SAFETY: in the usual form the tail holds an initialized `T` at `off`, inside the
        // block the fat reference spans; the block of a usual-form node is 8-aligned (its size
        // is a multiple of 8, see the module docs) and `HEAD + off` a multiple of T's
        // alignment (at most 8, checked where nodes are built), so the pointer is aligned.
        // Shared access follows from `&self`.
        Some(unsafe { &*self.tail.as_ptr().add(off).cast::<T>() })
    }

    /// The payload, mutably, if the node is in the usual form.
    #[inline]
    fn payload_mut(&mut self) -> Option<&mut T> {
        if self.is_embedded() {
            return None;
        }
        let off = value_offset::<T>(key_len(self.meta));
        // SAFETY: as in `payload`; `&mut self` makes the access exclusive.
        Some(unsafe { &mut *self.tail.as_mut_ptr().add(off).cast::<T>() })
    }

    /// Bytes of the node's block (what its slab gives it, before the slab's rounding).
    #[inline]
    pub fn block_bytes(&self) -> usize {
        HEAD + self.tail.len()
    }
}

impl<T: Plain> Packed<T> {
    /// The payload.
    #[inline]
    pub fn value(&self) -> &T {
        match self.payload() {
            Some(v) => v,
            // Only `Value` nodes are ever built in the embedded form.
            None => unreachable!("embedded node of a plain payload"),
        }
    }

    /// The payload, mutably.
    #[inline]
    pub fn value_mut(&mut self) -> &mut T {
        match self.payload_mut() {
            Some(v) => v,
            None => unreachable!("embedded node of a plain payload"),
        }
    }
}

impl KeyNode {
    /// The key's value: a string held in the node, or a [`Value`].
    #[inline]
    pub fn value(&self) -> Stored<'_> {
        match self.payload() {
            Some(v) => Stored::Value(v),
            None if self.is_int() => Stored::Int(self.int()),
            None => Stored::Str(self.embedded()),
        }
    }

    /// The embedded integer (0 unless the node holds one).
    #[inline]
    fn int(&self) -> i64 {
        match self.embedded().first_chunk::<8>() {
            Some(b) if self.is_int() => i64::from_ne_bytes(*b),
            _ => 0,
        }
    }

    /// Stores `i` in place if the node holds an integer itself; whether it did.
    #[inline]
    pub(crate) fn set_int(&mut self, i: i64) -> bool {
        let (k, int) = (key_len(self.meta), self.is_int());
        match self
            .tail
            .get_mut(k..)
            .and_then(|t| t.first_chunk_mut::<8>())
        {
            Some(b) if int => {
                *b = i.to_ne_bytes();
                true
            }
            _ => false,
        }
    }

    /// The value when it is not a string held in the node (every collection, and strings
    /// in the usual form).
    #[inline]
    pub fn obj(&self) -> Option<&Value> {
        self.payload()
    }

    /// [`KeyNode::obj`], mutably.
    #[inline]
    pub(crate) fn obj_mut(&mut self) -> Option<&mut Value> {
        self.payload_mut()
    }

    /// Whether the node holds its string itself (the embedded form: bytes or an integer).
    #[inline]
    pub(crate) fn holds_string(&self) -> bool {
        self.is_embedded()
    }

    /// Bytes this key costs (its node's slab block, the value's heap), for MEMORY USAGE.
    pub fn mem_bytes(&self) -> usize {
        Slab::block_size(self.block_bytes()) + self.value().heap_bytes()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Packed");
        d.field("key", &String::from_utf8_lossy(self.key()));
        match self.payload() {
            Some(v) => d.field("value", v),
            None => d.field("embedded", &self.tail.len()),
        };
        d.field("expire_at", &self.expire_at()).finish()
    }
}

/// Owning handle of a [`Packed`] in its dict's [`Slab`] (what `Box<Packed<T>>` would be, in 32
/// bits). Reading the node needs the slab ([`Thin::get`]); so does freeing it.
pub struct Thin<T>(Handle, PhantomData<T>);

/// The main dict's owning handle.
pub type Node = Thin<Value>;

/// The main dict's arena.
pub type Nodes = Slab;

// SAFETY: a `Thin` is a number naming a block of the slab it belongs to, whose contents are a
// `T`, a link and bytes; sending it (with its slab) sends a `T`.
unsafe impl<T: Send> Send for Thin<T> {}
// SAFETY: shared access only hands out `&Packed<T>`, as `&Box` would; sharing it shares a `T`.
unsafe impl<T: Sync> Sync for Thin<T> {}

/// How a new node is laid out beyond its key and payload.
#[derive(Clone, Copy)]
struct Form {
    /// The string's bytes are held in the node (the embedded form).
    embedded: bool,
    /// The node has a deadline slot.
    slot: bool,
    /// The node has the expiry index's link word (main-dict nodes with a slot).
    xlink: bool,
}

/// The `meta` word of a new node.
fn meta_of(access: u32, lengths: usize, form: Form) -> usize {
    (((access & ACCESS_MAX) as usize) << ACCESS_SHIFT)
        | (lengths << LEN_SHIFT)
        | (usize::from(form.embedded) * EMB_BIT)
        | (usize::from(form.xlink) * XLINK_BIT)
        | usize::from(form.slot)
}

/// The slab has no chunk number left: tens of GiB of nodes in one dict.
#[cold]
fn slab_full() -> ! {
    panic!("key node slab full: no room for another chunk in this database");
}

/// The fat pointer to the node at `base`.
///
/// # Safety
/// `base` must point at a live node's block.
#[inline]
unsafe fn fat<T>(base: *mut u8) -> *mut Packed<T> {
    // SAFETY: the block starts with an initialized `meta` (the caller's contract), read
    // unaligned (blocks are 4-aligned).
    let meta = unsafe { base.cast::<usize>().read_unaligned() };
    // An unsized-to-unsized cast keeps the metadata: the length of `Packed::tail`.
    ptr::slice_from_raw_parts_mut(base, tail_len::<T>(meta)) as *mut Packed<T>
}

impl<T> Thin<T> {
    /// The block's first byte. `s` must be the slab the node lives in (the dict's arena).
    #[inline]
    fn base(&self, s: &Slab) -> *mut u8 {
        // SAFETY: a `Thin` names a live block of its slab, which its callers pass (the
        // invariant of `Thin`: only the dict that holds it, or its caller, lends the slab).
        unsafe { s.ptr(self.0) }.as_ptr()
    }

    /// The node.
    #[inline]
    pub fn get<'a>(&'a self, s: &'a Slab) -> &'a Packed<T> {
        // SAFETY: the handle names a live block of `s` holding an initialized node (the
        // invariant of `Thin`), which the slab never moves; shared access follows from `&self`.
        unsafe { &*fat(self.base(s)) }
    }

    /// The node, mutably.
    #[inline]
    pub fn get_mut<'a>(&'a mut self, s: &'a Slab) -> &'a mut Packed<T> {
        // SAFETY: as in `get`; a `Thin` is the only owner of its block, so `&mut self` makes
        // the access exclusive.
        unsafe { &mut *fat(self.base(s)) }
    }

    /// `meta`, read without building the fat pointer.
    #[inline]
    fn meta(&self, s: &Slab) -> usize {
        // SAFETY: the handle names a live, initialized node of `s`, whose first 8 bytes are
        // `meta` (read unaligned: blocks are 4-aligned).
        unsafe { self.base(s).cast::<usize>().read_unaligned() }
    }

    /// [`Packed::deadline`], read from `meta` and the slot alone.
    #[inline]
    pub(crate) fn deadline(&self, s: &Slab) -> u64 {
        let meta = self.meta(s);
        if meta & SLOT_BIT == 0 {
            return 0;
        }
        // SAFETY: with the SLOT bit the tail holds the 8-byte slot at `slot_offset`, inside
        // the live block; it is read unaligned, as bytes.
        let b = unsafe {
            self.base(s)
                .add(HEAD + slot_offset::<T>(meta))
                .cast::<[u8; SLOT]>()
                .read_unaligned()
        };
        u64::from_ne_bytes(b)
    }

    /// [`Packed::expired`], without building the fat pointer.
    #[inline]
    pub(crate) fn expired(&self, s: &Slab, now: u64) -> bool {
        past(self.deadline(s), now)
    }

    /// Whether the node is in the embedded form ([`KeyNode::holds_string`]).
    #[inline]
    pub(crate) fn holds_string(&self, s: &Slab) -> bool {
        self.meta(s) & EMB_BIT != 0
    }

    /// Allocates a node for `meta` in `s`, writes its head, key and deadline slot, and returns
    /// it with a pointer to its tail; the caller must then write the rest of the tail (the
    /// payload, or the embedded bytes) before the node is used or released.
    fn alloc(s: &mut Slab, meta: usize, key: &[u8], deadline: u64) -> (Thin<T>, *mut u8) {
        const { assert!(align_of::<T>() <= 8) };
        debug_assert_eq!(key_len(meta), key.len());
        let tail = tail_len::<T>(meta);
        let size = block_len(tail);
        // A `T` or the link word needs an 8-aligned block: their forms' sizes are multiples of
        // 8, which the slab aligns to 8.
        debug_assert!(
            size % 8 == 0
                || (meta & XLINK_BIT == 0 && (meta & EMB_BIT != 0 || align_of::<T>() < 8))
        );
        let Some((h, p)) = s.alloc(size) else {
            slab_full()
        };
        let p = p.as_ptr();
        // SAFETY: `p` is a fresh block of at least `HEAD + tail` bytes, aligned to 4 (hence for
        // `Head<T>`, packed to 4): the head write, the key (at the tail's start), the slot (8
        // bytes after the key and the body, written unaligned as bytes) and the link word (the
        // tail's last 8 bytes, 8-aligned in a block that is, see above) are all in bounds.
        unsafe {
            p.cast::<Head<T>>().write(Head { meta, next: None });
            let t = p.add(HEAD);
            ptr::copy_nonoverlapping(key.as_ptr(), t, key.len());
            if meta & SLOT_BIT != 0 {
                t.add(slot_offset::<T>(meta))
                    .cast::<[u8; SLOT]>()
                    .write(deadline.to_ne_bytes());
            }
            if meta & XLINK_BIT != 0 {
                debug_assert_eq!(t.add(tail - 8) as usize % 8, 0);
                t.add(tail - 8).cast::<Option<ExpLink>>().write(None);
            }
            (Thin(h, PhantomData), t)
        }
    }

    /// A node of the embedded form holding the string `s`, if the key and `s` fit it; with the
    /// expiry index's link word when `xlink` and it has a deadline.
    fn embed(
        slab: &mut Slab,
        key: &[u8],
        s: &[u8],
        deadline: u64,
        access: u32,
        xlink: bool,
    ) -> Option<Thin<T>> {
        if key.len() > EMB_KEY_MAX || s.len() > EMB_STR_MAX {
            return None;
        }
        let lengths = (s.len() << EMB_KEY_BITS) | key.len();
        let slot = deadline != 0;
        let form = Form {
            embedded: true,
            slot,
            xlink: xlink && slot,
        };
        let meta = meta_of(access, lengths, form);
        let (n, t) = Self::alloc(slab, meta, key, deadline);
        // SAFETY: the embedded form's tail holds the key, then `s.len()` bytes, then the slot:
        // the copy stays inside it.
        unsafe { ptr::copy_nonoverlapping(s.as_ptr(), t.add(key.len()), s.len()) };
        Some(n)
    }

    /// A usual-form node holding `value`; with the expiry index's link word when `xlink` and
    /// it has a deadline.
    fn build(
        slab: &mut Slab,
        key: &[u8],
        value: T,
        deadline: u64,
        access: u32,
        xlink: bool,
    ) -> Thin<T> {
        assert!(key.len() <= KEY_LEN_MASK, "key too long for a key node");
        let slot = deadline != 0;
        let form = Form {
            embedded: false,
            slot,
            xlink: xlink && slot,
        };
        let meta = meta_of(access, key.len(), form);
        let (n, t) = Self::alloc(slab, meta, key, deadline);
        // SAFETY: the usual form's tail has room for a `T` at `value_offset`, aligned (see
        // `Packed::payload`); the write moves `value` in once.
        unsafe { t.add(value_offset::<T>(key.len())).cast::<T>().write(value) };
        n
    }

    /// Frees the node and returns its payload (in the embedded form, what `embedded` makes of
    /// the node) and raw deadline (0 = none). The node must be unlinked (`next == None`, as
    /// the dict hands out removed entries).
    fn take_payload(self, s: &mut Slab, embedded: impl FnOnce(&Packed<T>) -> T) -> (T, u64) {
        let n = self.get(s);
        debug_assert!(n.next.is_none(), "into_parts of a linked node");
        let deadline = n.deadline();
        let value = match n.payload() {
            // SAFETY: the payload is moved out exactly once: the block is freed right after,
            // without dropping anything in it.
            Some(v) => unsafe { ptr::read(v) },
            None => embedded(n),
        };
        // SAFETY: the block is live in `s`, and `self` (its only handle) is consumed here.
        unsafe { s.free(self.0) };
        (value, deadline)
    }

    /// Frees the node, dropping its payload. The node must be unlinked.
    pub(crate) fn release(mut self, s: &mut Slab) {
        if let Some(v) = self.get_mut(s).payload_mut() {
            // SAFETY: the payload is initialized in the usual form and dropped once: the
            // block is freed next and never read again.
            unsafe { ptr::drop_in_place(v) };
        }
        // SAFETY: as in `take_payload`.
        unsafe { s.free(self.0) };
    }

    /// The same node (key, form, value, access field, snapshot mark) with a deadline slot
    /// holding `at` (and, with `xlink`, the expiry index's link word), in a new block; this
    /// one is freed. For a node without a slot, whose deadline cannot be set in place. The
    /// node must be unlinked.
    pub(crate) fn reslotted(self, s: &mut Slab, at: u64, xlink: bool) -> Thin<T> {
        let old_meta = self.get(s).meta;
        debug_assert!(self.get(s).next.is_none(), "reslotted of a linked node");
        debug_assert!(
            old_meta & (SLOT_BIT | XLINK_BIT) == 0,
            "reslotted of a slotted node"
        );
        let meta = old_meta | SLOT_BIT | (usize::from(xlink) * XLINK_BIT);
        let k = key_len(meta);
        // What lies between the key and the slot: the padding and the payload, or the bytes.
        let body = slot_offset::<T>(old_meta) - k;
        let key: *const [u8] = self.get(s).key();
        // SAFETY: the old block stays live and in place while the new one is allocated (the
        // slab never moves a block), so its key can be read meanwhile.
        let (n, t) = Self::alloc(s, meta, unsafe { &*key }, at);
        let old = self.base(s);
        // SAFETY: both blocks are live (allocating never moves a block); the new tail has the
        // same key length, form and body length as the old one (only the slot is added), so
        // the copy of `body` bytes after the key stays inside both, and places the payload at
        // the same, aligned offset: a bitwise move. The old block is then freed without
        // dropping the payload it moved.
        unsafe { ptr::copy_nonoverlapping(old.add(HEAD + k), t.add(k), body) };
        // SAFETY: as in `take_payload`.
        unsafe { s.free(self.0) };
        n
    }
}

impl<T: Plain> Thin<T> {
    /// A new unlinked node in `s`. `deadline` 0 means none, and then the node gets no slot.
    pub fn new(s: &mut Slab, key: &[u8], value: T, deadline: u64) -> Thin<T> {
        Self::build(s, key, value, deadline, 0, false)
    }

    /// Frees the node and returns its value and raw deadline (0 = none). The node must be
    /// unlinked (`next == None`, as the dict hands out removed entries).
    #[cfg(test)]
    pub fn into_parts(self, s: &mut Slab) -> (T, u64) {
        self.take_payload(s, |_| unreachable!("embedded node of a plain payload"))
    }
}

impl Thin<Value> {
    /// A new unlinked node holding `value`, with the access field set. A string created whole
    /// (`embstr`, or a longer string of at most [`EMB_STR_MAX`] bytes) is embedded.
    pub fn with_access(s: &mut Slab, key: &[u8], value: Value, deadline: u64, access: u32) -> Node {
        let embedded = match &value {
            Value::Int(i) => Self::embed_int(s, key, *i, deadline, access),
            Value::Inline(b) => Self::embed(s, key, b, deadline, access, true),
            Value::Str(b) => Self::embed(s, key, b, deadline, access, true),
            _ => None,
        };
        embedded.unwrap_or_else(|| Self::build(s, key, value, deadline, access, true))
    }

    /// Whether [`Thin::with_access`] embeds `value` under `key`.
    pub(crate) fn embeds(key: &[u8], value: &Value) -> bool {
        key.len() <= EMB_KEY_MAX
            && match value {
                Value::Int(_) | Value::Inline(_) => true,
                Value::Str(s) => s.len() <= EMB_STR_MAX,
                _ => false,
            }
    }

    /// A new unlinked node holding the string `b` (`int` when canonical, as
    /// [`Value::from_bytes`] decides), without building a `Value` for it first.
    pub fn with_bytes(s: &mut Slab, key: &[u8], b: &[u8], deadline: u64, access: u32) -> Node {
        if let Some(i) = crate::num::canonical_int(b) {
            return match Self::embed_int(s, key, i, deadline, access) {
                Some(n) => n,
                None => Self::build(s, key, Value::Int(i), deadline, access, true),
            };
        }
        Self::with_str(s, key, b, deadline, access)
    }

    /// A new unlinked node holding the string `b` as a string (never `int`: an `embstr` that
    /// reads as a number stays one), embedded when it fits.
    fn with_str(s: &mut Slab, key: &[u8], b: &[u8], deadline: u64, access: u32) -> Node {
        match Self::embed(s, key, b, deadline, access, true) {
            Some(n) => n,
            None => Self::build(s, key, Value::string(b), deadline, access, true),
        }
    }

    /// A node of the embedded form holding the integer `i`, if the key fits it.
    fn embed_int(s: &mut Slab, key: &[u8], i: i64, deadline: u64, access: u32) -> Option<Node> {
        let mut n = Self::embed(s, key, &i.to_ne_bytes(), deadline, access, true)?;
        // Setting a flag bit of `meta` that does not change the tail's length (the INT bit is
        // outside the lengths) keeps its layout.
        let node = n.get_mut(s);
        node.meta |= INT_BIT;
        Some(n)
    }

    /// The same key, deadline, access field and snapshot mark with another value (a new
    /// block; this one is freed).
    pub(crate) fn remade(
        self,
        s: &mut Slab,
        key: &[u8],
        value: NewValue<'_>,
        deadline: u64,
    ) -> Node {
        let (access, mark) = (self.get(s).access(), self.get(s).mark());
        self.release(s);
        let mut n = match value {
            NewValue::Bytes(b) => Self::with_bytes(s, key, b, deadline, access),
            NewValue::Value(v) => Self::with_access(s, key, v, deadline, access),
        };
        n.get_mut(s).set_mark(mark);
        n
    }

    /// This node in the usual form (itself when it is), keeping everything else.
    pub(crate) fn unembedded(self, s: &mut Slab) -> Node {
        let n = self.get(s);
        if !n.is_embedded() {
            return self;
        }
        let (access, mark, at) = (n.access(), n.mark(), n.deadline());
        let v = match n.value() {
            Stored::Int(i) => Value::Int(i),
            _ => Value::string(n.embedded()),
        };
        let key: *const [u8] = n.key();
        // SAFETY: as in `reslotted`: the old block is live and in place until freed below.
        let mut u = Self::build(s, unsafe { &*key }, v, at, access, true);
        // SAFETY: as in `take_payload`.
        unsafe { s.free(self.0) };
        u.get_mut(s).set_mark(mark);
        u
    }

    /// Frees the node and returns its value (an embedded string as a [`Value`]) and raw
    /// deadline (0 = none). The node must be unlinked.
    pub fn into_parts(self, s: &mut Slab) -> (Value, u64) {
        self.take_payload(s, |n| n.value().to_value())
    }
}

/// A big hash's field: the field name as the key, and the value's bytes held in the node when
/// they fit (at most [`EMB_STR_MAX`]), else in a box.
impl Packed<Box<[u8]>> {
    /// The value's bytes.
    #[inline]
    pub fn value(&self) -> &[u8] {
        match self.payload() {
            Some(b) => b,
            None => self.embedded(),
        }
    }
}

impl Thin<Box<[u8]>> {
    /// A new unlinked field node holding `value`. `deadline` 0 means none.
    pub fn new_field(s: &mut Slab, field: &[u8], value: &[u8], deadline: u64) -> Self {
        match Self::embed(s, field, value, deadline, 0, false) {
            Some(n) => n,
            None => Self::build(s, field, value.into(), deadline, 0, false),
        }
    }
}

/// A value to store: string bytes (embedded when they fit) or a [`Value`].
pub(crate) enum NewValue<'a> {
    /// String bytes, `int` when canonical.
    Bytes(&'a [u8]),
    /// Any value.
    Value(Value),
}

impl<T> Link for Thin<T> {
    type Arena = Slab;
    type Target = Packed<T>;
    const RELEASES: bool = true;
    #[inline]
    fn key<'a>(&'a self, s: &Slab) -> &'a [u8] {
        let base = self.base(s);
        // SAFETY: the block is live and initialized while `self` is borrowed (the slab never
        // moves or frees a block whose handle lives); the key is the first `key_len(meta)`
        // bytes of the tail, which starts at HEAD inside the block, and nothing mutates it
        // while shared (only `&mut self` could).
        unsafe {
            let len = key_len(base.cast::<usize>().read_unaligned());
            std::slice::from_raw_parts(base.add(HEAD), len)
        }
    }
    #[inline]
    fn prefetch(&self, s: &Slab) {
        crate::dict::prefetch(self.base(s));
    }
    #[inline]
    fn next<'a>(&'a self, s: &Slab) -> Option<&'a Self> {
        // SAFETY: as in `key`; `next` is at NEXT_AT, 4-aligned as its type needs, initialized,
        // and only written through `&mut self`.
        unsafe { (*self.base(s).add(NEXT_AT).cast::<Option<Self>>()).as_ref() }
    }
    #[inline]
    fn next_mut<'a>(&'a mut self, s: &Slab) -> &'a mut Option<Self> {
        // SAFETY: as in `next`; `&mut self` makes the access exclusive.
        unsafe { &mut *self.base(s).add(NEXT_AT).cast::<Option<Self>>() }
    }
    #[inline]
    fn release(self, s: &mut Slab) {
        Thin::release(self, s);
    }
    #[inline]
    fn target<'a>(&'a self, s: &'a Slab) -> &'a Packed<T> {
        self.get(s)
    }
    #[inline]
    fn target_mut<'a>(&'a mut self, s: &'a Slab) -> &'a mut Packed<T> {
        self.get_mut(s)
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Thin<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Thin({:#x})", self.0.get())
    }
}

/// An entry of the expiry index: a main-dict node that has a deadline, chained through the
/// link word at the end of its own tail (see [`XLINK_BIT`]), so the index costs no allocation
/// and no copy of the key. It does not own the node (the main dict does): the keyspace takes
/// an entry out of the index before its node is freed or moved to a new block, and dropping
/// one does nothing.
pub(crate) struct ExpLink(NonNull<u8>);

// SAFETY: an `ExpLink` is only dereferenced by the keyspace that owns both dicts, on the thread
// that has it; sending one (with its keyspace, or a retired bucket array to be freed) sends a
// pointer that the receiver drops without reading.
unsafe impl Send for ExpLink {}

impl ExpLink {
    /// The entry of `node`, a node of `s` that must have the link word (a main-dict node with
    /// a slot). The pointer is the slab's own (not one taken from a reference), so the index may
    /// write the link word through it and read the node after the node's owner wrote it.
    pub(crate) fn of(node: &Node, s: &Slab) -> ExpLink {
        debug_assert!(
            node.meta(s) & XLINK_BIT != 0,
            "expiry index entry of a node without a link"
        );
        // SAFETY: a `Thin` names a live block of its slab (the invariant of `Thin`).
        ExpLink(unsafe { s.ptr(node.0) })
    }

    /// The node's key.
    #[inline]
    pub(crate) fn key(&self) -> &[u8] {
        self.node().key()
    }

    /// The node.
    #[inline]
    pub(crate) fn node(&self) -> &KeyNode {
        // SAFETY: the node is live while its entry is in the index (see the type's docs); the
        // fat pointer is built as `Thin::get` builds it, and only shared access is made.
        unsafe { &*fat::<Value>(self.0.as_ptr()) }
    }
}

// SAFETY: the link word is the last 8 bytes of the node's tail, 8-aligned (see `tail_len`),
// holding an `Option<ExpLink>` written `None` when the node was made; the node is live while
// its entry is in the index (see the type's docs), each node is in the index once, and nothing
// else writes the word.
unsafe impl WordLink for ExpLink {
    #[inline]
    fn word_key(&self) -> &[u8] {
        self.node().key()
    }
    #[inline]
    fn block(&self) -> *const u8 {
        self.0.as_ptr()
    }
    #[inline]
    fn word(&self) -> *mut Option<ExpLink> {
        let base = self.0.as_ptr();
        // SAFETY: the node is live and has the link word (see the impl's comment); only the
        // address is computed here.
        unsafe {
            let meta = base.cast::<usize>().read_unaligned();
            base.add(HEAD + tail_len::<Value>(meta) - 8)
                .cast::<Option<ExpLink>>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tail of a main-dict node whose key and payload take `body` bytes: with a deadline
    /// (`at` not 0), the slot and then the expiry index's link word, 8-aligned in the block.
    fn linked(body: usize, at: u64) -> usize {
        match at {
            0 => body,
            _ => (HEAD + body + 8).next_multiple_of(8) - HEAD + 8,
        }
    }

    /// Bytes of the slab block of a node with a `tail`-byte tail.
    fn block(tail: usize) -> usize {
        Slab::block_size(HEAD + tail)
    }

    fn bytes_of(v: Stored<'_>) -> Vec<u8> {
        v.as_str(&mut itoa::Buffer::new())
            .unwrap_or_default()
            .to_vec()
    }

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Value>(), 24);
        assert_eq!(std::mem::size_of::<Option<Node>>(), 4);
        let form = |slot, xlink| Form {
            embedded: false,
            slot,
            xlink,
        };
        // A 7-byte key without deadline holding an int as a `Value`: 12 + 7, padded to 24,
        // then the value.
        assert_eq!(
            block(tail_len::<Value>(meta_of(0, 7, form(false, false)))),
            48
        );
        assert_eq!(
            block(tail_len::<Value>(meta_of(0, 16, form(true, false)))),
            64
        );
        // With the expiry index's link word: 12 + 16 + 4 padding + 24 + 8, then 8.
        assert_eq!(
            block(tail_len::<Value>(meta_of(0, 16, form(true, true)))),
            72
        );
        assert_eq!(
            block(tail_len::<()>(meta_of(0, 16, form(false, false)))),
            28
        );
        assert_eq!(block(tail_len::<u8>(meta_of(0, 0, form(false, false)))), 16);
        let mut s = Slab::new();
        // The issue's key: 16 bytes, a 64-byte string, embedded: one 92-byte block.
        let n = Node::with_bytes(&mut s, &[b'k'; 16], &[b'v'; 64], 0, 0);
        assert_eq!(n.get(&s).block_bytes(), 92);
        assert_eq!(n.get(&s).mem_bytes(), 92);
        assert_eq!(s.used_bytes(), 92);
        // With a deadline: the slot and the link word, 8-aligned: 112 bytes in all, and no
        // entry of its own in the expiry index.
        let m = Node::with_bytes(&mut s, &[b'k'; 16], &[b'v'; 64], 1, 0);
        assert_eq!(m.get(&s).mem_bytes(), 112);
        // An odd length: the link word is aligned after the slot.
        let o = Node::with_bytes(&mut s, &[b'k'; 13], &[b'v'; 2], 1, 0);
        assert_eq!(o.get(&s).mem_bytes(), 12 + 15 + 5 + 8 + 8);
        assert_eq!(o.get(&s).deadline(), 1);
        for n in [n, m, o] {
            n.release(&mut s);
        }
        assert_eq!(s.used_bytes(), 0);
    }

    #[test]
    fn fields_round_trip() {
        let mut s = Slab::new();
        for len in [0usize, 1, 7, 8, 9, 100, 1000] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for at in [0u64, 1, u64::MAX] {
                let raw = || Value::Raw(Box::new(vec![b'r'; len]));
                let mut h: Node = Thin::with_access(&mut s, &key, raw(), at, 0);
                assert_eq!(Link::key(&h, &s), &key[..]);
                let n = h.get_mut(&s);
                assert_eq!(n.key(), &key[..]);
                assert_eq!(n.deadline(), at);
                assert_eq!(n.obj(), Some(&raw()));
                assert_eq!(
                    n.mem_bytes() - n.value().heap_bytes(),
                    block(linked(value_offset::<Value>(len) + 24, at))
                );
                // Clearing always works in place; setting needs a slot.
                assert!(n.try_set_deadline(0));
                assert_eq!(n.expire_at(), None);
                assert_eq!(n.try_set_deadline(5), at != 0);
                assert_eq!(n.key(), &key[..]);
                if let Some(v) = n.obj_mut() {
                    *v = Value::Raw(Box::new(key.clone()));
                }
                let (v, d) = h.into_parts(&mut s);
                assert_eq!(v, Value::Raw(Box::new(key.clone())));
                assert_eq!(d, if at != 0 { 5 } else { 0 });
            }
        }
        assert_eq!(s.used_bytes(), 0);
    }

    #[test]
    fn embedded_strings_round_trip() {
        let mut s = Slab::new();
        for klen in [0usize, 1, 7, 16, 300, EMB_KEY_MAX, EMB_KEY_MAX + 1] {
            let key: Vec<u8> = (0..klen).map(|i| (i * 3) as u8).collect();
            for slen in [0usize, 1, 22, 23, 64, EMB_STR_MAX, EMB_STR_MAX + 1] {
                let text: Vec<u8> = (0..slen).map(|i| b'a' + (i % 26) as u8).collect();
                for at in [0u64, 42] {
                    let mut h = Node::with_bytes(&mut s, &key, &text, at, 0x12_3456);
                    let embedded = klen <= EMB_KEY_MAX && slen <= EMB_STR_MAX;
                    assert_eq!(Link::key(&h, &s), &key[..]);
                    let n = h.get_mut(&s);
                    assert_eq!(n.holds_string(), embedded, "{klen} {slen}");
                    assert_eq!(n.key(), &key[..]);
                    assert_eq!(bytes_of(n.value()), text);
                    assert_eq!(n.value().str_len(), Some(slen));
                    assert_eq!((n.deadline(), n.access()), (at, 0x12_3456));
                    assert_eq!(n.obj().is_none(), embedded);
                    if embedded {
                        assert_eq!(n.mem_bytes(), block(linked(klen + slen, at)));
                    }
                    // The one-read form agrees where it answers: nodes without a slot.
                    assert_eq!(
                        n.plain_bytes_mut(slen).map(|b| b.to_vec()),
                        n.embedded_mut(slen).filter(|_| at == 0).map(|b| b.to_vec())
                    );
                    assert!(n.plain_bytes_mut(slen + 1).is_none());
                    // Overwrite in place when the length matches.
                    let ok = n.embedded_mut(slen).map(|b| b.fill(b'z')).is_some();
                    assert_eq!(ok, embedded);
                    assert!(n.embedded_mut(slen + 1).is_none());
                    let text = if embedded {
                        vec![b'z'; slen]
                    } else {
                        text.clone()
                    };
                    assert_eq!(n.try_set_deadline(7), at != 0);
                    assert_eq!(bytes_of(n.value()), text);
                    n.set_mark(true);
                    let mut uh = h.unembedded(&mut s);
                    let u = uh.get_mut(&s);
                    assert!(!u.holds_string());
                    assert_eq!((u.key(), u.mark(), u.access()), (&key[..], true, 0x12_3456));
                    assert_eq!(bytes_of(u.value()), text);
                    assert_eq!(u.deadline(), if at != 0 { 7 } else { 0 });
                    if let Some(v) = u.obj_mut().and_then(Value::make_raw) {
                        v.push(b'!');
                    }
                    let (v, _) = uh.into_parts(&mut s);
                    assert_eq!(v.as_str(&mut itoa::Buffer::new()).unwrap().len(), slen + 1);
                    // into_parts of an embedded node gives the string back.
                    let n = Node::with_bytes(&mut s, &key, &text, at, 0);
                    let (v, d) = n.into_parts(&mut s);
                    assert_eq!(
                        (v.as_str(&mut itoa::Buffer::new()).unwrap(), d),
                        (&text[..], at)
                    );
                }
            }
        }
        // Canonical integers keep the int encoding; other strings are embedded.
        for (i, at) in [(12345, 0), (i64::MIN, 9), (-1, 0), (i64::MAX, 1)] {
            let text = i.to_string();
            let mut h = Node::with_bytes(&mut s, &[b'k'; 16], text.as_bytes(), at, 0);
            let n = h.get_mut(&s);
            assert_eq!(
                (n.value(), n.obj(), n.holds_string()),
                (Stored::Int(i), None, true)
            );
            assert_eq!((n.value().encoding(), n.deadline()), ("int", at));
            assert_eq!(
                n.value().as_str(&mut itoa::Buffer::new()),
                Some(text.as_bytes())
            );
            // 12 + 16-byte key + 8 (+ slot and link word): no `Value`.
            let slot = if at != 0 { 20 } else { 0 };
            assert_eq!(n.mem_bytes(), 36 + slot);
            // Stored in place; never through the string bytes.
            assert!(n.embedded_mut(8).is_none());
            assert!(n.plain_bytes_mut(8).is_none() && n.plain_bytes_mut(text.len()).is_none());
            assert!(n.set_int(7));
            assert_eq!(n.value(), Stored::Int(7));
            let u = h.unembedded(&mut s);
            assert_eq!(
                (u.get(&s).obj(), u.get(&s).deadline()),
                (Some(&Value::Int(7)), at)
            );
            u.release(&mut s);
            let n = Node::with_access(&mut s, &[b'k'; 16], Value::Int(i), at, 0);
            assert_eq!(n.into_parts(&mut s), (Value::Int(i), at));
        }
        // A string created as a string stays one, digits or not.
        let mut h = Node::with_str(&mut s, b"k", b"12345", 0, 0);
        let n = h.get_mut(&s);
        assert_eq!(
            (n.value(), n.value().encoding()),
            (Stored::Str(b"12345"), "embstr")
        );
        assert!(!n.set_int(1));
        h.release(&mut s);
        let n = Node::with_bytes(&mut s, b"k", b"012345", 0, 0);
        let e = (n.get(&s).holds_string(), n.get(&s).value().encoding());
        assert_eq!(e, (true, "embstr"));
        n.release(&mut s);
        let n = Node::with_access(&mut s, b"k", Value::string(&[b'x'; 45]), 0, 0);
        let e = (n.get(&s).holds_string(), n.get(&s).value().encoding());
        assert_eq!(e, (true, "raw"));
        n.release(&mut s);
        let n = Node::with_access(&mut s, b"k", Value::Raw(Box::new(b"ab".to_vec())), 0, 0);
        let e = (n.get(&s).holds_string(), n.get(&s).value().encoding());
        assert_eq!(e, (false, "raw"));
        n.release(&mut s);
        assert_eq!(s.used_bytes(), 0);
    }

    #[test]
    fn remade_keeps_key_deadline_access_and_mark() {
        let mut s = Slab::new();
        let mut h = Node::with_bytes(&mut s, b"key", b"first value", 99, 77);
        h.get_mut(&s).set_mark(true);
        let fields = |h: &Node, s: &Slab| {
            let n = h.get(s);
            (n.access(), n.mark(), n.deadline())
        };
        let h = h.remade(&mut s, b"key", NewValue::Bytes(b"x"), 99);
        assert_eq!(fields(&h, &s), (77, true, 99));
        assert_eq!(bytes_of(h.get(&s).value()), b"x");
        let h = h.remade(&mut s, b"key", NewValue::Value(Value::Int(5)), 0);
        assert_eq!(fields(&h, &s), (77, true, 0));
        assert_eq!(h.get(&s).value(), Stored::Int(5));
        let list = NewValue::Value(Value::List(Default::default()));
        let h = h.remade(&mut s, b"key", list, 3);
        assert_eq!(fields(&h, &s), (77, true, 3));
        assert!(matches!(h.get(&s).obj(), Some(Value::List(_))));
        h.release(&mut s);
        assert_eq!(s.used_bytes(), 0);
    }

    #[test]
    fn access_field_keeps_key_and_deadline() {
        let mut s = Slab::new();
        for len in [0usize, 1, 7, 300] {
            let key: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            for at in [0u64, 12345] {
                for emb in [false, true] {
                    let mut h: Node = match emb {
                        true => Thin::with_bytes(&mut s, &key, b"some string", at, ACCESS_MAX),
                        false => {
                            let list = Value::List(Default::default());
                            Thin::with_access(&mut s, &key, list, at, ACCESS_MAX)
                        }
                    };
                    let n = h.get_mut(&s);
                    assert_eq!(
                        (n.access(), n.key(), n.deadline()),
                        (ACCESS_MAX, &key[..], at)
                    );
                    n.set_access(0x12_3456);
                    n.set_mark(true);
                    assert_eq!(
                        (n.access(), n.key(), n.deadline(), n.mark()),
                        (0x12_3456, &key[..], at, true)
                    );
                    n.set_access(u32::MAX);
                    n.set_mark(false);
                    assert_eq!((n.access(), n.mark()), (ACCESS_MAX, false));
                    assert_eq!(n.try_set_deadline(9), at != 0);
                    assert_eq!((n.access(), n.key()), (ACCESS_MAX, &key[..]));
                    assert_eq!(n.holds_string(), emb);
                    assert_eq!(Link::key(&h, &s), &key[..]);
                    h.release(&mut s);
                }
            }
        }
        assert_eq!(s.used_bytes(), 0);
    }

    #[test]
    fn other_payloads() {
        // Odd value offsets and alignments (a u8 or u16 payload, a zero-sized one).
        let mut s = Slab::new();
        for len in [0usize, 1, 7, 8, 33] {
            let key: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            for at in [0u64, 77] {
                let a = Thin::new(&mut s, &key, 0xabu8, at);
                let mut b = Thin::new(&mut s, &key, 0xbeefu16, at);
                let c = Thin::new(&mut s, &key, (), at);
                let mut d = Thin::new_field(&mut s, &key, b"field value", at);
                let big = Thin::new_field(&mut s, &key, &[b'v'; EMB_STR_MAX + 1], at);
                let (ga, gc) = (a.get(&s), c.get(&s));
                assert_eq!((ga.key(), gc.key()), (&key[..], &key[..]));
                assert_eq!(Link::key(&b, &s), &key[..]);
                assert_eq!((ga.deadline(), gc.deadline()), (at, at));
                assert_eq!(*ga.value(), 0xab);
                let gb = b.get_mut(&s);
                assert_eq!(
                    (gb.key(), gb.deadline(), *gb.value()),
                    (&key[..], at, 0xbeef)
                );
                *gb.value_mut() = 7;
                assert_eq!(*gb.value(), 7);
                let gd = d.get_mut(&s);
                assert_eq!(gd.value(), b"field value");
                assert_eq!((gd.deadline(), gd.is_embedded()), (at, true));
                let slot = if at != 0 { 8 } else { 0 };
                assert_eq!(gd.block_bytes(), HEAD + len + 11 + slot);
                if let Some(b) = gd.embedded_mut(11) {
                    b.copy_from_slice(b"other value");
                }
                assert_eq!(gd.value(), b"other value");
                let gbig = big.get(&s);
                assert_eq!(
                    (gbig.value(), gbig.deadline()),
                    (&[b'v'; EMB_STR_MAX + 1][..], at)
                );
                assert!(!gbig.is_embedded());
                assert_eq!(a.into_parts(&mut s), (0xab, at));
                for n in [d, big] {
                    n.release(&mut s);
                }
                b.release(&mut s);
                c.release(&mut s);
            }
        }
        assert_eq!(s.used_bytes(), 0);
    }

    #[test]
    fn reslotted_keeps_everything_and_adds_the_deadline() {
        let mut s = Slab::new();
        for klen in [0usize, 3, 8, 16, 300] {
            let key: Vec<u8> = (0..klen).map(|i| (i * 5) as u8).collect();
            let nodes: [Node; 4] = [
                Node::with_bytes(&mut s, &key, b"a string", 0, 0x1234),
                Node::with_bytes(&mut s, &key, b"-42", 0, 0x1234),
                Node::with_access(
                    &mut s,
                    &key,
                    Value::Raw(Box::new(b"raw".to_vec())),
                    0,
                    0x1234,
                ),
                Node::with_access(&mut s, &key, Value::List(Default::default()), 0, 0x1234),
            ];
            for mut h in nodes {
                let n = h.get_mut(&s);
                n.set_mark(true);
                let (form, encoding) = (n.holds_string(), n.value().encoding());
                let text = n
                    .value()
                    .as_str(&mut itoa::Buffer::new())
                    .map(<[u8]>::to_vec);
                let tail = n.block_bytes() - HEAD;
                let mh = h.reslotted(&mut s, 77, true);
                let m = mh.get(&s);
                assert_eq!(
                    (m.key(), m.deadline(), m.access(), m.mark()),
                    (&key[..], 77, 0x1234, true)
                );
                assert_eq!((m.holds_string(), m.value().encoding()), (form, encoding));
                let mut buf = itoa::Buffer::new();
                assert_eq!(m.value().as_str(&mut buf).map(<[u8]>::to_vec), text);
                // The slot, then the link word 8-aligned in the block.
                assert_eq!(m.block_bytes(), HEAD + linked(tail, 77));
                mh.release(&mut s);
            }
            let f = Thin::new_field(&mut s, &key, b"field value", 0).reslotted(&mut s, 5, false);
            let g = f.get(&s);
            assert_eq!((g.value(), g.deadline()), (&b"field value"[..], 5));
            f.release(&mut s);
            let big = Thin::new_field(&mut s, &key, &[b'v'; EMB_STR_MAX + 1], 0);
            let big = big.reslotted(&mut s, 6, false);
            let g = big.get(&s);
            assert_eq!((g.value(), g.deadline()), (&[b'v'; EMB_STR_MAX + 1][..], 6));
            big.release(&mut s);
        }
        assert_eq!(s.used_bytes(), 0);
    }

    #[test]
    fn chains_link_through_handles() {
        let mut s = Slab::new();
        let mut head: Node = Thin::with_bytes(&mut s, b"a", b"x", 0, 0);
        let b = Thin::with_access(&mut s, b"b", Value::Str((*b"y").into()), 9, 0);
        *head.next_mut(&s) = Some(b);
        let next = head
            .next(&s)
            .map(|n| (Link::key(n, &s), n.get(&s).expire_at()));
        assert_eq!(next, Some((&b"b"[..], Some(9))));
        if let Some(b) = head.next_mut(&s).take() {
            b.release(&mut s);
        }
        head.release(&mut s);
        assert_eq!(s.used_bytes(), 0);
    }
}
