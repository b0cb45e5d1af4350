//! Keyspace entries: one allocation per key holding the chain link, the key, a payload and an
//! optional deadline.
//!
//! # Layout
//!
//! ```text
//! offset 0   meta   usize           access << 40 | snapshot mark << 39 | INT << 38 |
//!                                   XLINK << 37 | lengths << 2 | EMB << 1 | SLOT (access: 24
//!                                   bits of LRU clock or LFU data; the mark: see
//!                                   `crate::snapshot`)
//!        8   next   Option<Thin<T>> the dict's chain link (one word)
//!       16   tail   [u8]            usual form:    [key] [padding to T's alignment] [T] [slot]
//!                                   embedded form: [key] [string bytes] [slot]
//!                                   either, then, with XLINK: [padding to 8] [xlink]
//! ```
//!
//! The key always starts at offset 16, so reading it (every chain step of a lookup) is a load
//! of `meta` and no branch on the form. `slot` is the 8-byte deadline, present only when the
//! SLOT bit is set (keys without a TTL carry none). `xlink` is the expiry index's chain link
//! ([`ExpLink`]): main-dict nodes carry it exactly when they have a slot, so the index needs
//! no entry of its own. The lengths field is the key length in the usual form (35 bits), and
//! in the embedded form the key length (15 bits) and the string's (20 bits); the INT bit says
//! that the 8 bytes after the key are an `i64` (native order), a string stored as an integer
//! (the `int` encoding).
//!
//! The *embedded* form exists only in the main dict (`T = Value`): a string value created whole
//! (SET, MSET ...) lives in the key's own block, after the key, instead of in a `Value` that
//! points to a second allocation. A 16-byte key with a 64-byte value then costs one 96-byte
//! block, where the usual form costs a 56-byte node plus a 64-byte value; an integer takes 8
//! bytes instead of a 24-byte `Value`. Commands that change
//! a string in place (APPEND, SETRANGE, SETBIT ...) get the usual form back first
//! ([`crate::keyspace::Keyspace::get_mut`]), as Redis turns an `embstr` into a `raw` string.
//!
//! [`Packed`] is that `repr(C)` struct with an unsized tail, so `&Packed<T>` is a fat pointer
//! whose length is the tail's: a reference covers the whole block. The dicts store [`Thin`], a
//! thin owning pointer (one word, so a bucket stays one word and `Option<Thin<T>>` too), which
//! rebuilds the fat pointer from `meta`.
//!
//! Giving a deadline to a key without a slot reallocates its node with the slot (through
//! [`crate::dict::Dict::replace_with`], keeping its chain position); clearing a deadline writes
//! 0 into the slot and keeps it.

use std::alloc::{self, Layout};
use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop};
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

use crate::dict::{Link, WordLink};
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
const HEAD: usize = 16;
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

/// Where `T` starts in the tail of a usual-form node whose key is `key_len` bytes.
#[inline]
const fn value_offset<T>(key_len: usize) -> usize {
    key_len.next_multiple_of(align_of::<T>())
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
        // The link word, aligned: the tail starts 16 bytes into an 8-aligned block.
        end.next_multiple_of(8) + 8
    } else {
        end
    }
}

/// Whether the raw deadline `at` (0 = none) has passed at `now` (see [`Packed::expired`]).
#[inline]
fn past(at: u64, now: u64) -> bool {
    at != 0 && at < now
}

/// Layout of a node whose tail holds `tail` bytes; equals `Layout::for_value` of the node.
fn layout(tail: usize) -> Layout {
    match HEAD
        .checked_add(tail)
        .map(|size| Layout::from_size_align(size, align_of::<usize>()))
    {
        Some(Ok(l)) => l.pad_to_align(),
        // Unreachable for a key that exists in memory; Vec panics the same way.
        _ => panic!("key node size overflow"),
    }
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
#[repr(C)]
pub struct Packed<T> {
    meta: usize,
    next: Option<Thin<T>>,
    tail: [u8],
}

/// One key's node in the main dict.
pub type KeyNode = Packed<Value>;

/// The sized head of [`Packed`]: the same first fields in the same order under `repr(C)`.
#[repr(C)]
struct Head<T> {
    meta: usize,
    next: Option<Thin<T>>,
}

const _: () = assert!(size_of::<Head<Value>>() == HEAD && size_of::<Head<()>>() == HEAD);

impl<T> Packed<T> {
    /// The key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        self.tail.get(..key_len(self.meta)).unwrap_or_default()
    }

    /// The deadline slot, if the node has one: the 8 bytes after the payload or bytes.
    fn slot(&self) -> Option<&[u8; SLOT]> {
        if self.meta & SLOT_BIT == 0 {
            return None;
        }
        let at = slot_offset::<T>(self.meta);
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
        if self.meta & SLOT_BIT == 0 {
            return at == 0;
        }
        let off = slot_offset::<T>(self.meta);
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
        let (k, n) = (key_len(self.meta), emb_len(self.meta));
        match self.is_embedded() {
            true => self.tail.get(k..k + n).unwrap_or_default(),
            false => &[],
        }
    }

    /// The embedded string's bytes, to overwrite in place, if the node holds `len` of them
    /// (a string, not an integer).
    #[inline]
    pub(crate) fn embedded_mut(&mut self, len: usize) -> Option<&mut [u8]> {
        let (k, n) = (key_len(self.meta), emb_len(self.meta));
        if !self.is_embedded() || self.is_int() || n != len {
            return None;
        }
        self.tail.get_mut(k..k + n)
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
        // block the fat reference spans; `off` is a multiple of T's alignment and the tail
        // starts 16 bytes into a block aligned for `usize` (T's alignment is at most that,
        // checked where nodes are built), so the pointer is aligned. Shared access follows
        // from `&self`.
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

    /// Bytes this key costs (its node block, the value's heap), for MEMORY USAGE.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of_val(self) + self.value().heap_bytes()
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

/// Thin owning pointer to a [`Packed`] (what `Box<Packed<T>>` would be, in one word).
pub struct Thin<T>(NonNull<Head<T>>, PhantomData<T>);

/// The main dict's owning pointer.
pub type Node = Thin<Value>;

// SAFETY: a `Thin` owns its block exclusively, as a `Box` does; its contents are a `T`, an
// `Option<Thin<T>>` and bytes, so sending it sends a `T`.
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

impl<T> Thin<T> {
    /// Allocates a node for `meta`, writes its head, key and deadline slot, and returns it
    /// with a pointer to its tail; the caller must then write the rest of the tail (the
    /// payload, or the embedded bytes) before the node is used or dropped.
    fn alloc(meta: usize, key: &[u8], deadline: u64) -> (NonNull<Head<T>>, *mut u8) {
        const { assert!(align_of::<T>() <= align_of::<usize>()) };
        debug_assert_eq!(key_len(meta), key.len());
        let tail = tail_len::<T>(meta);
        let layout = layout(tail);
        // SAFETY: `layout` is at least HEAD bytes: not zero-sized.
        let raw = unsafe { alloc::alloc(layout) }.cast::<Head<T>>();
        let Some(p) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: `p` is a fresh block of `layout`, aligned for `usize` (hence for `Head<T>`)
        // and `HEAD + tail` bytes long: the head write, the key (at the tail's start), the slot
        // (8 bytes after the key and the body) and the link word (the tail's last 8 bytes,
        // 8-aligned, after the slot) are all in bounds, written with align-1 writes where
        // unaligned.
        unsafe {
            p.as_ptr().write(Head { meta, next: None });
            let t = p.as_ptr().cast::<u8>().add(HEAD);
            ptr::copy_nonoverlapping(key.as_ptr(), t, key.len());
            if meta & SLOT_BIT != 0 {
                t.add(slot_offset::<T>(meta))
                    .cast::<[u8; SLOT]>()
                    .write(deadline.to_ne_bytes());
            }
            if meta & XLINK_BIT != 0 {
                t.add(tail - 8).cast::<Option<ExpLink>>().write(None);
            }
            (p, t)
        }
    }

    /// A node of the embedded form holding the string `s`, if the key and `s` fit it; with the
    /// expiry index's link word when `xlink` and it has a deadline.
    fn embed(key: &[u8], s: &[u8], deadline: u64, access: u32, xlink: bool) -> Option<Thin<T>> {
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
        let (p, t) = Self::alloc(meta, key, deadline);
        // SAFETY: the embedded form's tail holds the key, then `s.len()` bytes, then the slot:
        // the copy stays inside it.
        unsafe { ptr::copy_nonoverlapping(s.as_ptr(), t.add(key.len()), s.len()) };
        Some(Thin(p, PhantomData))
    }

    /// A usual-form node holding `value`; with the expiry index's link word when `xlink` and
    /// it has a deadline.
    fn build(key: &[u8], value: T, deadline: u64, access: u32, xlink: bool) -> Thin<T> {
        assert!(key.len() <= KEY_LEN_MASK, "key too long for a key node");
        let slot = deadline != 0;
        let form = Form {
            embedded: false,
            slot,
            xlink: xlink && slot,
        };
        let meta = meta_of(access, key.len(), form);
        let (p, t) = Self::alloc(meta, key, deadline);
        // SAFETY: the usual form's tail has room for a `T` at `value_offset`, aligned (see
        // `Packed::payload`); the write moves `value` in once.
        unsafe { t.add(value_offset::<T>(key.len())).cast::<T>().write(value) };
        let node = Thin(p, PhantomData);
        debug_assert_eq!(
            Layout::for_value::<Packed<T>>(&node),
            layout(tail_len::<T>(meta))
        );
        node
    }

    /// The fat pointer to the node.
    #[inline]
    fn raw(&self) -> *mut Packed<T> {
        // SAFETY: `self.0` points at an initialized head (the invariant of `Thin`); this reads
        // one field through the raw pointer, creating no reference.
        let meta = unsafe { (*self.0.as_ptr()).meta };
        // An unsized-to-unsized cast keeps the metadata: the length of `Packed::tail`.
        ptr::slice_from_raw_parts_mut(self.0.as_ptr().cast::<u8>(), tail_len::<T>(meta))
            as *mut Packed<T>
    }

    /// Frees the node and returns its payload (in the embedded form, what `embedded` makes of
    /// the node) and raw deadline (0 = none). The node must be unlinked (`next == None`, as
    /// the dict hands out removed entries).
    fn take_payload(self, embedded: impl FnOnce(&Packed<T>) -> T) -> (T, u64) {
        debug_assert!(self.next.is_none(), "into_parts of a linked node");
        let deadline = self.deadline();
        let this = ManuallyDrop::new(self);
        let fat = this.raw();
        // SAFETY: `fat` covers the whole live block (see `raw`). In the usual form the payload
        // is moved out exactly once; `embedded` only reads the node. The link is dropped in place
        // (`meta` and the tail bytes need no drop); then the block is freed with the layout it
        // was allocated with, and `this` is never used again (ManuallyDrop: no second drop).
        unsafe {
            let layout = Layout::for_value(&*fat);
            let value = match (*fat).payload() {
                Some(v) => ptr::read(v),
                None => embedded(&*fat),
            };
            ptr::drop_in_place(ptr::addr_of_mut!((*fat).next));
            alloc::dealloc(fat.cast::<u8>(), layout);
            (value, deadline)
        }
    }
}

impl<T> Thin<T> {
    /// The same node (key, form, value, access field, snapshot mark) with a deadline slot
    /// holding `at` (and, with `xlink`, the expiry index's link word), in a new block; this
    /// one is freed. For a node without a slot, whose deadline cannot be set in place. The
    /// node must be unlinked.
    pub(crate) fn reslotted(self, at: u64, xlink: bool) -> Thin<T> {
        debug_assert!(self.next.is_none(), "reslotted of a linked node");
        debug_assert!(
            self.meta & (SLOT_BIT | XLINK_BIT) == 0,
            "reslotted of a slotted node"
        );
        let old = ManuallyDrop::new(self);
        let meta = old.meta | SLOT_BIT | (usize::from(xlink) * XLINK_BIT);
        let k = key_len(meta);
        // What lies between the key and the slot: the padding and the payload, or the bytes.
        let body = slot_offset::<T>(old.meta) - k;
        let (p, t) = Self::alloc(meta, old.key(), at);
        let fat = old.raw();
        // SAFETY: both blocks are live; the new tail has the same key length, form and body
        // length as the old one (only the slot is added), so the copy of `body` bytes after the
        // key stays inside both, and places the payload at the same, aligned offset: a bitwise
        // move. The old block is then freed without dropping the payload it moved (only its
        // link, `None`, is dropped), with the layout it was allocated with; `old` is not used
        // again (ManuallyDrop: no second drop).
        unsafe {
            ptr::copy_nonoverlapping(old.tail.as_ptr().add(k), t.add(k), body);
            let layout = Layout::for_value(&*fat);
            ptr::drop_in_place(ptr::addr_of_mut!((*fat).next));
            alloc::dealloc(fat.cast::<u8>(), layout);
        }
        Thin(p, PhantomData)
    }
}

impl<T: Plain> Thin<T> {
    /// A new unlinked node. `deadline` 0 means none, and then the node gets no slot.
    pub fn new(key: &[u8], value: T, deadline: u64) -> Thin<T> {
        Self::build(key, value, deadline, 0, false)
    }

    /// Frees the node and returns its value and raw deadline (0 = none). The node must be
    /// unlinked (`next == None`, as the dict hands out removed entries).
    #[cfg(test)]
    pub fn into_parts(self) -> (T, u64) {
        self.take_payload(|_| unreachable!("embedded node of a plain payload"))
    }
}

impl Thin<Value> {
    /// A new unlinked node holding `value`, with the access field set. A string created whole
    /// (`embstr`, or a longer string of at most [`EMB_STR_MAX`] bytes) is embedded.
    pub fn with_access(key: &[u8], value: Value, deadline: u64, access: u32) -> Node {
        let embedded = match &value {
            Value::Int(i) => Self::embed_int(key, *i, deadline, access),
            Value::Inline(s) => Self::embed(key, s, deadline, access, true),
            Value::Str(s) => Self::embed(key, s, deadline, access, true),
            _ => None,
        };
        embedded.unwrap_or_else(|| Self::build(key, value, deadline, access, true))
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

    /// A new unlinked node holding the string `s` (`int` when canonical, as
    /// [`Value::from_bytes`] decides), without building a `Value` for it first.
    pub fn with_bytes(key: &[u8], s: &[u8], deadline: u64, access: u32) -> Node {
        if let Some(i) = crate::num::canonical_int(s) {
            return match Self::embed_int(key, i, deadline, access) {
                Some(n) => n,
                None => Self::build(key, Value::Int(i), deadline, access, true),
            };
        }
        Self::with_str(key, s, deadline, access)
    }

    /// A new unlinked node holding the string `s` as a string (never `int`: an `embstr` that
    /// reads as a number stays one), embedded when it fits.
    fn with_str(key: &[u8], s: &[u8], deadline: u64, access: u32) -> Node {
        match Self::embed(key, s, deadline, access, true) {
            Some(n) => n,
            None => Self::build(key, Value::string(s), deadline, access, true),
        }
    }

    /// A node of the embedded form holding the integer `i`, if the key fits it.
    fn embed_int(key: &[u8], i: i64, deadline: u64, access: u32) -> Option<Node> {
        let n = Self::embed(key, &i.to_ne_bytes(), deadline, access, true)?;
        Some(Self::flagged_int(n))
    }

    /// `n` with the INT bit set (its 8 embedded bytes being an `i64`).
    fn flagged_int(n: Node) -> Node {
        // SAFETY: `n` is a live node owned here; setting a flag bit of `meta` that does not
        // change the tail's length (the INT bit is outside the lengths) keeps its layout.
        unsafe { (*n.0.as_ptr()).meta |= INT_BIT };
        n
    }

    /// The same key, deadline, access field and snapshot mark with another value (a new
    /// block; this one is freed).
    pub(crate) fn remade(self, key: &[u8], value: NewValue<'_>, deadline: u64) -> Node {
        let (access, mark) = (self.access(), self.mark());
        drop(self);
        let mut n = match value {
            NewValue::Bytes(s) => Self::with_bytes(key, s, deadline, access),
            NewValue::Value(v) => Self::with_access(key, v, deadline, access),
        };
        n.set_mark(mark);
        n
    }

    /// This node in the usual form (itself when it is), keeping everything else.
    pub(crate) fn unembedded(self) -> Node {
        if !self.is_embedded() {
            return self;
        }
        let (access, mark, at) = (self.access(), self.mark(), self.deadline());
        let v = match self.value() {
            Stored::Int(i) => Value::Int(i),
            _ => Value::string(self.embedded()),
        };
        let mut n = Self::build(self.key(), v, at, access, true);
        n.set_mark(mark);
        n
    }

    /// Frees the node and returns its value (an embedded string as a [`Value`]) and raw
    /// deadline (0 = none). The node must be unlinked.
    pub fn into_parts(self) -> (Value, u64) {
        self.take_payload(|n| n.value().to_value())
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
    pub fn new_field(field: &[u8], value: &[u8], deadline: u64) -> Self {
        match Self::embed(field, value, deadline, 0, false) {
            Some(n) => n,
            None => Self::build(field, value.into(), deadline, 0, false),
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
        // unlinks chains before dropping, so `next` is `None` there; the payload only in the
        // usual form, where it exists) and the block is freed with its allocation layout.
        // `self` is not used afterwards.
        unsafe {
            let layout = Layout::for_value(&*fat);
            ptr::drop_in_place(ptr::addr_of_mut!((*fat).next));
            if let Some(v) = (*fat).payload_mut() {
                ptr::drop_in_place(v);
            }
            alloc::dealloc(fat.cast::<u8>(), layout);
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Thin<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// The fields of a node that `meta` alone locates, read and written through the thin pointer:
/// no fat pointer is built, so the tail's length is not computed (a lookup, an access update
/// and a deadline check each skip it). [`Packed`] has the same methods for a `&Packed`.
impl<T> Thin<T> {
    /// `meta`.
    #[inline]
    fn meta_word(&self) -> usize {
        // SAFETY: the head is initialized while the node lives (the invariant of `Thin`); one
        // field is read through the raw pointer, creating no reference.
        unsafe { (*self.0.as_ptr()).meta }
    }

    /// Replaces `meta`'s bits in `mask` with `bits`; the caller keeps the tail's layout.
    #[inline]
    fn set_meta_bits(&mut self, mask: usize, bits: usize) {
        // SAFETY: as in `meta_word`; `&mut self` makes the write exclusive.
        unsafe {
            let m = &mut (*self.0.as_ptr()).meta;
            *m = (*m & !mask) | (bits & mask);
        }
    }

    /// The raw deadline: Unix ms, 0 for none.
    #[inline]
    pub(crate) fn deadline(&self) -> u64 {
        let meta = self.meta_word();
        if meta & SLOT_BIT == 0 {
            return 0;
        }
        // SAFETY: with the SLOT bit the tail holds the 8-byte slot at `slot_offset`, inside
        // the live block; it is read unaligned, as bytes.
        let b = unsafe {
            self.0
                .as_ptr()
                .cast::<u8>()
                .add(HEAD + slot_offset::<T>(meta))
                .cast::<[u8; SLOT]>()
                .read_unaligned()
        };
        u64::from_ne_bytes(b)
    }

    /// [`Packed::expired`].
    #[inline]
    pub(crate) fn expired(&self, now: u64) -> bool {
        past(self.deadline(), now)
    }

    /// [`Packed::access`].
    #[inline]
    pub fn access(&self) -> u32 {
        (self.meta_word() >> ACCESS_SHIFT) as u32
    }

    /// Stores the access field (its low 24 bits).
    #[inline]
    pub(crate) fn set_access(&mut self, access: u32) {
        let field = !((1usize << ACCESS_SHIFT) - 1);
        self.set_meta_bits(field, ((access & ACCESS_MAX) as usize) << ACCESS_SHIFT);
    }

    /// [`Packed::mark`].
    #[inline]
    pub(crate) fn mark(&self) -> bool {
        self.meta_word() & MARK_BIT != 0
    }

    /// [`Packed::set_mark`].
    #[inline]
    pub(crate) fn set_mark(&mut self, mark: bool) {
        self.set_meta_bits(MARK_BIT, usize::from(mark) * MARK_BIT);
    }
}

impl<T> Thin<T> {
    /// The key (what [`Packed::key`] reads, without building the fat pointer).
    #[inline]
    pub fn key(&self) -> &[u8] {
        self.key_bytes()
    }

    /// The key, read without building the fat pointer: `meta`, then the tail's first bytes.
    #[inline]
    fn key_bytes(&self) -> &[u8] {
        let base = self.0.as_ptr();
        // SAFETY: the block is live and initialized while `self` is borrowed; the key is the
        // first `key_len(meta)` bytes of the tail, which starts at HEAD inside the block, and
        // nothing mutates it while shared (only `&mut self` could).
        unsafe {
            let len = key_len((*base).meta);
            std::slice::from_raw_parts(base.cast::<u8>().add(HEAD), len)
        }
    }
}

impl<T> Link for Thin<T> {
    type Arena = ();
    #[inline]
    fn key<'a>(&'a self, _: &()) -> &'a [u8] {
        self.key_bytes()
    }
    #[inline]
    fn prefetch(&self, _: &()) {
        crate::dict::prefetch(self.0.as_ptr().cast::<u8>());
    }
    #[inline]
    fn next<'a>(&'a self, _: &()) -> Option<&'a Self> {
        self.next.as_ref()
    }
    #[inline]
    fn next_mut<'a>(&'a mut self, _: &()) -> &'a mut Option<Self> {
        &mut self.next
    }
}

/// An entry of the expiry index: a main-dict node that has a deadline, chained through the
/// link word at the end of its own tail (see [`XLINK_BIT`]), so the index costs no allocation
/// and no copy of the key. It does not own the node (the main dict does): the keyspace takes
/// an entry out of the index before its node is freed or moved to a new block, and dropping
/// one does nothing.
pub(crate) struct ExpLink(NonNull<Head<Value>>);

// SAFETY: an `ExpLink` is only dereferenced by the keyspace that owns both dicts, on the thread
// that has it; sending one (with its keyspace, or a retired bucket array to be freed) sends a
// pointer that the receiver drops without reading.
unsafe impl Send for ExpLink {}

impl ExpLink {
    /// The entry of `node`, which must have the link word (a main-dict node with a slot).
    pub(crate) fn of(node: &Node) -> ExpLink {
        debug_assert!(
            node.meta & XLINK_BIT != 0,
            "expiry index entry of a node without a link"
        );
        ExpLink(node.0)
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
        // fat pointer is built as `Thin::raw` builds it, and only shared access is made.
        unsafe {
            let meta = (*self.0.as_ptr()).meta;
            &*(ptr::slice_from_raw_parts(self.0.as_ptr().cast::<u8>(), tail_len::<Value>(meta))
                as *const KeyNode)
        }
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
        self.0.as_ptr().cast::<u8>()
    }
    #[inline]
    fn word(&self) -> *mut Option<ExpLink> {
        let base = self.0.as_ptr();
        // SAFETY: the node is live and has the link word (see the impl's comment); only the
        // address is computed here.
        unsafe {
            let meta = (*base).meta;
            base.cast::<u8>()
                .add(HEAD + tail_len::<Value>(meta) - 8)
                .cast::<Option<ExpLink>>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tail of a main-dict node whose key and payload take `body` bytes: with a deadline
    /// (`at` not 0), the slot and then the expiry index's link word, 8-aligned.
    fn linked(body: usize, at: u64) -> usize {
        match at {
            0 => body,
            _ => (body + 8).next_multiple_of(8) + 8,
        }
    }

    fn bytes_of(v: Stored<'_>) -> Vec<u8> {
        v.as_str(&mut itoa::Buffer::new())
            .unwrap_or_default()
            .to_vec()
    }

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Value>(), 24);
        assert_eq!(std::mem::size_of::<Option<Node>>(), 8);
        let form = |slot, xlink| Form {
            embedded: false,
            slot,
            xlink,
        };
        // A 7-byte key without deadline holding an int: one 48-byte block.
        assert_eq!(
            layout(tail_len::<Value>(meta_of(0, 7, form(false, false)))).size(),
            48
        );
        assert_eq!(
            layout(tail_len::<Value>(meta_of(0, 16, form(true, false)))).size(),
            64
        );
        // With the expiry index's link word: 16 + 16 + 24 + 8, then 8 aligned.
        assert_eq!(
            layout(tail_len::<Value>(meta_of(0, 16, form(true, true)))).size(),
            72
        );
        assert_eq!(
            layout(tail_len::<()>(meta_of(0, 16, form(false, false)))).size(),
            32
        );
        assert_eq!(
            layout(tail_len::<u8>(meta_of(0, 0, form(false, false)))).size(),
            24
        );
        // The issue's key: 16 bytes, a 64-byte string, embedded: one 96-byte block.
        let n = Node::with_bytes(&[b'k'; 16], &[b'v'; 64], 0, 0);
        assert_eq!(std::mem::size_of_val::<KeyNode>(&n), 96);
        assert_eq!(n.mem_bytes(), 96);
        // With a deadline: the slot and the link word, 112 bytes in all (mimalloc's 112 class,
        // as the slot alone takes), and no entry of its own in the expiry index.
        let n = Node::with_bytes(&[b'k'; 16], &[b'v'; 64], 1, 0);
        assert_eq!(std::mem::size_of_val::<KeyNode>(&n), 112);
        // An odd length: the link word is aligned after the slot.
        let n = Node::with_bytes(&[b'k'; 13], &[b'v'; 2], 1, 0);
        assert_eq!(std::mem::size_of_val::<KeyNode>(&n), 16 + 24 + 8);
        assert_eq!(n.deadline(), 1);
    }

    #[test]
    fn fields_round_trip() {
        for len in [0usize, 1, 7, 8, 9, 100, 1000] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for at in [0u64, 1, u64::MAX] {
                let raw = || Value::Raw(Box::new(vec![b'r'; len]));
                let mut n: Node = Thin::with_access(&key, raw(), at, 0);
                assert_eq!(n.key(), &key[..]);
                assert_eq!(Link::key(&n, &()), &key[..]);
                assert_eq!(n.deadline(), at);
                assert_eq!(n.obj(), Some(&raw()));
                assert_eq!(
                    std::mem::size_of_val::<KeyNode>(&n),
                    layout(linked(value_offset::<Value>(len) + 24, at)).size()
                );
                // Clearing always works in place; setting needs a slot.
                assert!(n.try_set_deadline(0));
                assert_eq!(n.expire_at(), None);
                assert_eq!(n.try_set_deadline(5), at != 0);
                assert_eq!(n.key(), &key[..]);
                if let Some(v) = n.obj_mut() {
                    *v = Value::Raw(Box::new(key.clone()));
                }
                let (v, d) = n.into_parts();
                assert_eq!(v, Value::Raw(Box::new(key.clone())));
                assert_eq!(d, if at != 0 { 5 } else { 0 });
            }
        }
    }

    #[test]
    fn embedded_strings_round_trip() {
        for klen in [0usize, 1, 7, 16, 300, EMB_KEY_MAX, EMB_KEY_MAX + 1] {
            let key: Vec<u8> = (0..klen).map(|i| (i * 3) as u8).collect();
            for slen in [0usize, 1, 22, 23, 64, EMB_STR_MAX, EMB_STR_MAX + 1] {
                let s: Vec<u8> = (0..slen).map(|i| b'a' + (i % 26) as u8).collect();
                for at in [0u64, 42] {
                    let mut n = Node::with_bytes(&key, &s, at, 0x12_3456);
                    let embedded = klen <= EMB_KEY_MAX && slen <= EMB_STR_MAX;
                    assert_eq!(n.holds_string(), embedded, "{klen} {slen}");
                    assert_eq!((n.key(), Link::key(&n, &())), (&key[..], &key[..]));
                    assert_eq!(bytes_of(n.value()), s);
                    assert_eq!(n.value().str_len(), Some(slen));
                    assert_eq!((n.deadline(), n.access()), (at, 0x12_3456));
                    assert_eq!(n.obj().is_none(), embedded);
                    if embedded {
                        assert_eq!(
                            std::mem::size_of_val::<KeyNode>(&n),
                            layout(linked(klen + slen, at)).size()
                        );
                    }
                    // Overwrite in place when the length matches.
                    let ok = n.embedded_mut(slen).map(|b| b.fill(b'z')).is_some();
                    assert_eq!(ok, embedded);
                    assert!(n.embedded_mut(slen + 1).is_none());
                    let s = if embedded {
                        vec![b'z'; slen]
                    } else {
                        s.clone()
                    };
                    assert_eq!(n.try_set_deadline(7), at != 0);
                    assert_eq!(bytes_of(n.value()), s);
                    n.set_mark(true);
                    let mut u = n.unembedded();
                    assert!(!u.holds_string());
                    assert_eq!((u.key(), u.mark(), u.access()), (&key[..], true, 0x12_3456));
                    assert_eq!(bytes_of(u.value()), s);
                    assert_eq!(u.deadline(), if at != 0 { 7 } else { 0 });
                    if let Some(v) = u.obj_mut().and_then(Value::make_raw) {
                        v.push(b'!');
                    }
                    let (v, _) = u.into_parts();
                    assert_eq!(v.as_str(&mut itoa::Buffer::new()).unwrap().len(), slen + 1);
                    // into_parts of an embedded node gives the string back.
                    let n = Node::with_bytes(&key, &s, at, 0);
                    let (v, d) = n.into_parts();
                    assert_eq!(
                        (v.as_str(&mut itoa::Buffer::new()).unwrap(), d),
                        (&s[..], at)
                    );
                }
            }
        }
        // Canonical integers keep the int encoding; other strings are embedded.
        for (i, at) in [(12345, 0), (i64::MIN, 9), (-1, 0), (i64::MAX, 1)] {
            let s = i.to_string();
            let mut n = Node::with_bytes(&[b'k'; 16], s.as_bytes(), at, 0);
            assert_eq!(
                (n.value(), n.obj(), n.holds_string()),
                (Stored::Int(i), None, true)
            );
            assert_eq!((n.value().encoding(), n.deadline()), ("int", at));
            assert_eq!(
                n.value().as_str(&mut itoa::Buffer::new()),
                Some(s.as_bytes())
            );
            // 16 + 16-byte key + 8 (+ slot and link word): no `Value`.
            let slot = if at != 0 { 16 } else { 0 };
            assert_eq!(std::mem::size_of_val::<KeyNode>(&n), 40 + slot);
            // Stored in place; never through the string bytes.
            assert!(n.embedded_mut(8).is_none());
            assert!(n.set_int(7));
            assert_eq!(n.value(), Stored::Int(7));
            let u = n.unembedded();
            assert_eq!((u.obj(), u.deadline()), (Some(&Value::Int(7)), at));
            let n = Node::with_access(&[b'k'; 16], Value::Int(i), at, 0);
            assert_eq!(n.into_parts(), (Value::Int(i), at));
        }
        // A string created as a string stays one, digits or not.
        let mut n = Node::with_str(b"k", b"12345", 0, 0);
        assert_eq!(
            (n.value(), n.value().encoding()),
            (Stored::Str(b"12345"), "embstr")
        );
        assert!(!n.set_int(1));
        let n = Node::with_bytes(b"k", b"012345", 0, 0);
        assert_eq!((n.holds_string(), n.value().encoding()), (true, "embstr"));
        let n = Node::with_access(b"k", Value::string(&[b'x'; 45]), 0, 0);
        assert_eq!((n.holds_string(), n.value().encoding()), (true, "raw"));
        let n = Node::with_access(b"k", Value::Raw(Box::new(b"ab".to_vec())), 0, 0);
        assert_eq!((n.holds_string(), n.value().encoding()), (false, "raw"));
    }

    #[test]
    fn remade_keeps_key_deadline_access_and_mark() {
        let mut n = Node::with_bytes(b"key", b"first value", 99, 77);
        n.set_mark(true);
        let n = n.remade(b"key", NewValue::Bytes(b"x"), 99);
        assert_eq!((n.access(), n.mark(), n.deadline()), (77, true, 99));
        assert_eq!(bytes_of(n.value()), b"x");
        let n = n.remade(b"key", NewValue::Value(Value::Int(5)), 0);
        assert_eq!((n.access(), n.mark(), n.deadline()), (77, true, 0));
        assert_eq!(n.value(), Stored::Int(5));
        let n = n.remade(b"key", NewValue::Value(Value::List(Default::default())), 3);
        assert_eq!((n.access(), n.mark(), n.deadline()), (77, true, 3));
        assert!(matches!(n.obj(), Some(Value::List(_))));
    }

    #[test]
    fn access_field_keeps_key_and_deadline() {
        for len in [0usize, 1, 7, 300] {
            let key: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            for at in [0u64, 12345] {
                for emb in [false, true] {
                    let mut n: Node = match emb {
                        true => Thin::with_bytes(&key, b"some string", at, ACCESS_MAX),
                        false => {
                            Thin::with_access(&key, Value::List(Default::default()), at, ACCESS_MAX)
                        }
                    };
                    assert_eq!(
                        (n.access(), n.key(), n.deadline()),
                        (ACCESS_MAX, &key[..], at)
                    );
                    n.set_access(0x12_3456);
                    n.set_mark(true);
                    assert_eq!(
                        (n.access(), Link::key(&n, &()), n.deadline(), n.mark()),
                        (0x12_3456, &key[..], at, true)
                    );
                    n.set_access(u32::MAX);
                    n.set_mark(false);
                    assert_eq!((n.access(), n.mark()), (ACCESS_MAX, false));
                    assert_eq!(n.try_set_deadline(9), at != 0);
                    assert_eq!((n.access(), n.key()), (ACCESS_MAX, &key[..]));
                    assert_eq!(n.holds_string(), emb);
                }
            }
        }
    }

    #[test]
    fn other_payloads() {
        // Odd value offsets and alignments (a u8 or u16 payload, a zero-sized one).
        for len in [0usize, 1, 7, 8, 33] {
            let key: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            for at in [0u64, 77] {
                let a = Thin::new(&key, 0xabu8, at);
                let mut b = Thin::new(&key, 0xbeefu16, at);
                let c = Thin::new(&key, (), at);
                let mut d = Thin::new_field(&key, b"field value", at);
                let big = Thin::new_field(&key, &[b'v'; EMB_STR_MAX + 1], at);
                assert_eq!((a.key(), b.key(), c.key()), (&key[..], &key[..], &key[..]));
                assert_eq!(Link::key(&b, &()), &key[..]);
                assert_eq!((a.deadline(), b.deadline(), c.deadline()), (at, at, at));
                assert_eq!((*a.value(), *b.value()), (0xab, 0xbeef));
                *b.value_mut() = 7;
                assert_eq!(*b.value(), 7);
                assert_eq!(d.value(), b"field value");
                assert_eq!((d.deadline(), d.is_embedded()), (at, true));
                assert_eq!(
                    std::mem::size_of_val::<Packed<Box<[u8]>>>(&d),
                    layout(len + 11 + if at != 0 { 8 } else { 0 }).size()
                );
                if let Some(b) = d.embedded_mut(11) {
                    b.copy_from_slice(b"other value");
                }
                assert_eq!(d.value(), b"other value");
                assert_eq!(
                    (big.value(), big.deadline()),
                    (&[b'v'; EMB_STR_MAX + 1][..], at)
                );
                assert!(!big.is_embedded());
                assert_eq!(a.into_parts(), (0xab, at));
                drop((b, c, d, big));
            }
        }
    }

    #[test]
    fn reslotted_keeps_everything_and_adds_the_deadline() {
        for klen in [0usize, 3, 8, 16, 300] {
            let key: Vec<u8> = (0..klen).map(|i| (i * 5) as u8).collect();
            let nodes: [Node; 4] = [
                Node::with_bytes(&key, b"a string", 0, 0x1234),
                Node::with_bytes(&key, b"-42", 0, 0x1234),
                Node::with_access(&key, Value::Raw(Box::new(b"raw".to_vec())), 0, 0x1234),
                Node::with_access(&key, Value::List(Default::default()), 0, 0x1234),
            ];
            for mut n in nodes {
                n.set_mark(true);
                let (form, encoding) = (n.holds_string(), n.value().encoding());
                let text = n
                    .value()
                    .as_str(&mut itoa::Buffer::new())
                    .map(<[u8]>::to_vec);
                let size = std::mem::size_of_val::<KeyNode>(&n);
                let m = n.reslotted(77, true);
                assert_eq!(
                    (m.key(), m.deadline(), m.access(), m.mark()),
                    (&key[..], 77, 0x1234, true)
                );
                assert_eq!((m.holds_string(), m.value().encoding()), (form, encoding));
                let mut buf = itoa::Buffer::new();
                assert_eq!(m.value().as_str(&mut buf).map(<[u8]>::to_vec), text);
                // The slot, then the link word 8-aligned: 16 bytes on the padded tail.
                assert_eq!(
                    std::mem::size_of_val::<KeyNode>(&m),
                    layout(size - 16 + 16).size()
                );
            }
            let f = Thin::new_field(&key, b"field value", 0).reslotted(5, false);
            assert_eq!((f.value(), f.deadline()), (&b"field value"[..], 5));
            let big = Thin::new_field(&key, &[b'v'; EMB_STR_MAX + 1], 0).reslotted(6, false);
            assert_eq!(
                (big.value(), big.deadline()),
                (&[b'v'; EMB_STR_MAX + 1][..], 6)
            );
        }
    }

    #[test]
    fn chains_drop() {
        let mut head: Node = Thin::with_bytes(b"a", b"x", 0, 0);
        *head.next_mut(&()) = Some(Thin::with_access(b"b", Value::Str((*b"y").into()), 9, 0));
        assert_eq!(head.next(&()).map(|n| n.key()), Some(&b"b"[..]));
        assert_eq!(head.next(&()).and_then(|n| n.expire_at()), Some(9));
        drop(head);
    }
}
