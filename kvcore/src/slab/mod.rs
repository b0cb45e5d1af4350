//! A slab of small blocks named by 32-bit handles: where the main dict's key nodes are to live.
//!
//! # Why
//!
//! A 16-byte key with a 64-byte string is 80 bytes of data. Under mimalloc its node (a 16-byte
//! head, then the key and the bytes) is one 96-byte block, and the dict's bucket is an 8-byte
//! pointer: about 105 bytes of RSS a key. Neither size can shrink under mimalloc alone. Its
//! size classes above 64 bytes are a quarter of a power of two apart (80, 96, 112, 128 ...),
//! so a 92-byte node still takes 96; and a pointer is 8 bytes because it can point anywhere.
//! This slab gives blocks in steps of [`GRAIN`] bytes, and names each with a [`Handle`] of 32
//! bits that is only meaningful to the slab that made it. With 4-byte chain links and buckets,
//! the same key costs a 92-byte block and a 4-byte bucket.
//!
//! # How
//!
//! - A block's size is rounded up to its *class*: a multiple of [`GRAIN`] up to [`FINE_MAX`],
//!   then one of 16 steps per power of two (at most 1/16 more) up to [`SHARED_MAX`]. A *chunk*
//!   is one allocation from the global allocator, cut into equal slots of one class. Blocks
//!   above [`SHARED_MAX`] get a chunk of their own (one slot).
//! - A handle is the chunk's number (20 bits, never 0) and the slot's (12 bits). Reading it is
//!   an index into a table of `(base, slot size)` pairs and a multiply: [`Slab::ptr`].
//! - Each class keeps a list of its chunks that have a free slot. A slot is taken from the
//!   first of them: a freed slot if it has one (freed slots form a list through their first two
//!   bytes), else the next never-used one. A chunk that fills leaves the list; a chunk whose
//!   last block is freed goes back to the global allocator, unless it is the class's only
//!   chunk with room (one empty chunk stays, so a key set and deleted in a loop does not
//!   allocate a chunk each time).
//! - A class's first chunk holds about [`CHUNK_BYTES`], each next one twice as much up to 256
//!   times that (256 KiB): a table of a few hundred entries holds little room, and the 2^20
//!   chunk numbers address about 256 GiB of small blocks.
//! - Blocks are aligned to 4 bytes; to 8 when their size is a multiple of 8 (chunks start
//!   8-aligned and every slot of such a class is a multiple of 8 from there).
//!
//! Single-threaded, like the dict that owns it. [`Slab::slack`] is the room inside its chunks
//! that no block uses, and [`slack`] that of every slab in the process: the global allocator
//! counts it as allocated, but deleting keys makes it, so a memory limit that evicts keys must
//! not count it (a host subtracts [`slack`] from what its allocator reports).

use std::alloc::{self, Layout};
use std::num::NonZeroU32;
use std::ptr::NonNull;

use crate::tally::Tally;

#[cfg(test)]
mod tests;

/// Step between the block sizes of two classes, and the alignment of every block.
pub const GRAIN: usize = 4;
/// Largest block of a class that is a multiple of [`GRAIN`].
pub const FINE_MAX: usize = 1024;
/// Largest block that shares a chunk with others.
pub const SHARED_MAX: usize = 64 << 10;
/// About the bytes of a class's first chunk.
pub const CHUNK_BYTES: usize = 1 << 10;
/// Doublings of the chunk size as a class grows.
const CHUNK_GROWTH: u32 = 8;
/// Classes per power of two above [`FINE_MAX`].
const STEPS: usize = 16;
/// Bits of a handle that number the slot in its chunk.
const SLOT_BITS: u32 = 12;
/// Most slots in one chunk.
const MAX_SLOTS: usize = 1 << SLOT_BITS;
/// Chunk numbers a handle can hold (0 is never used, so no handle is 0).
const MAX_CHUNKS: usize = 1 << (u32::BITS - SLOT_BITS);
/// Classes: block sizes GRAIN, 2 GRAIN, ... FINE_MAX, then STEPS per doubling to SHARED_MAX.
const CLASSES: usize =
    FINE_MAX / GRAIN + STEPS * (SHARED_MAX.trailing_zeros() - FINE_MAX.trailing_zeros()) as usize;
/// `Chunk::class` of a block with a chunk of its own.
const LARGE: u16 = u16::MAX;
/// Alignment of every chunk.
const CHUNK_ALIGN: usize = 8;

/// Room in every slab's chunks that no block uses (see [`slack`]).
static SLACK: Tally = Tally::new();

/// Adds `delta` to the process's slack.
#[inline]
fn add_slack(delta: isize) {
    SLACK.add(delta);
}

/// Bytes inside the chunks of every slab in the process that no block uses.
pub fn slack() -> usize {
    SLACK.sum().max(0) as usize
}

/// A block of a [`Slab`]: its chunk's number and its slot's. Only meaningful to the slab that
/// made it, and only until that slab frees it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Handle(NonZeroU32);

impl Handle {
    /// The handle as a number (never 0).
    #[inline]
    pub fn get(self) -> u32 {
        self.0.get()
    }

    /// The handle a number from [`Handle::get`] names; `None` for 0.
    #[inline]
    pub fn from_u32(n: u32) -> Option<Handle> {
        NonZeroU32::new(n).map(Handle)
    }

    #[inline]
    fn chunk(self) -> usize {
        (self.0.get() >> SLOT_BITS) as usize
    }

    #[inline]
    fn slot(self) -> usize {
        (self.0.get() & (MAX_SLOTS as u32 - 1)) as usize
    }

    #[inline]
    fn of(chunk: usize, slot: usize) -> Handle {
        debug_assert!(chunk != 0 && chunk < MAX_CHUNKS && slot < MAX_SLOTS);
        match NonZeroU32::new(((chunk as u32) << SLOT_BITS) | slot as u32) {
            Some(n) => Handle(n),
            None => unreachable!("chunk 0 is never used"),
        }
    }
}

/// Where a chunk's slots are: what every dereference reads.
#[derive(Clone, Copy)]
struct Span {
    /// The chunk's first byte; null while the chunk number is vacant.
    base: *mut u8,
    /// Bytes of each slot (of the block, for a chunk of one large block).
    size: usize,
}

/// A chunk's bookkeeping.
#[derive(Clone, Copy, Default)]
struct Chunk {
    /// Its class, or [`LARGE`].
    class: u16,
    /// Slots it has.
    slots: u16,
    /// Slots in use.
    used: u16,
    /// Slots handed out at least once: `bump..slots` have never been used.
    bump: u16,
    /// The first freed slot plus one (0: none).
    free: u16,
    /// Whether it is on its class's list of chunks with room.
    listed: bool,
    /// Neighbours on that list (0: none).
    prev: u32,
    next: u32,
}

/// A slab of blocks (see the module docs).
pub struct Slab {
    /// Per chunk number: its slots (hot).
    spans: Vec<Span>,
    /// Per chunk number: its bookkeeping.
    chunks: Vec<Chunk>,
    /// Per class: the first chunk with room (0: none).
    room: Vec<u32>,
    /// Per class: its chunks (sizes the next one).
    counts: Vec<u32>,
    /// Chunk numbers not in use.
    vacant: Vec<u32>,
    /// Bytes of all chunks.
    chunk_bytes: usize,
    /// Bytes of all blocks in use (their rounded sizes).
    used_bytes: usize,
}

// SAFETY: a slab owns its chunks exclusively and holds no references into anything else;
// moving it to another thread moves that ownership, as a `Vec<Box<[u8]>>` would.
unsafe impl Send for Slab {}

impl Default for Slab {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Slab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slab")
            .field(
                "chunks",
                &self.spans.len().saturating_sub(1 + self.vacant.len()),
            )
            .field("chunk_bytes", &self.chunk_bytes)
            .field("used_bytes", &self.used_bytes)
            .finish()
    }
}

/// The class of a block of `size` bytes (`size <= SHARED_MAX`) and its rounded size.
#[inline]
fn class_of(size: usize) -> (usize, usize) {
    if size <= FINE_MAX {
        let rounded = size.max(1).next_multiple_of(GRAIN);
        return (rounded / GRAIN - 1, rounded);
    }
    // size in (2^k, 2^(k+1)]: STEPS classes of 2^k / STEPS bytes.
    let k = (size - 1).ilog2();
    let step = (1usize << k) / STEPS;
    let rounded = size.next_multiple_of(step);
    let within = (rounded - (1 << k)) / step - 1;
    let doublings = (k - FINE_MAX.trailing_zeros()) as usize;
    let class = FINE_MAX / GRAIN + doublings * STEPS + within;
    debug_assert!(class < CLASSES);
    (class, rounded)
}

/// The allocation of a chunk of `slots` slots of `size` bytes.
fn chunk_layout(size: usize, slots: usize) -> Layout {
    match size
        .checked_mul(slots)
        .map(|n| Layout::from_size_align(n, CHUNK_ALIGN))
    {
        Some(Ok(l)) => l,
        _ => panic!("slab chunk size overflow"),
    }
}

impl Slab {
    /// An empty slab. Allocates nothing until the first block.
    pub const fn new() -> Self {
        Slab {
            spans: Vec::new(),
            chunks: Vec::new(),
            room: Vec::new(),
            counts: Vec::new(),
            vacant: Vec::new(),
            chunk_bytes: 0,
            used_bytes: 0,
        }
    }

    /// Bytes the slab holds from the global allocator.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Bytes of the blocks in use (each counted at its class's size).
    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    /// Bytes held in chunks that no block uses.
    pub fn slack(&self) -> usize {
        self.chunk_bytes - self.used_bytes
    }

    /// The bytes a block of `size` takes: `size` rounded up to its class.
    pub fn block_size(size: usize) -> usize {
        if size > SHARED_MAX {
            size.next_multiple_of(GRAIN)
        } else {
            class_of(size).1
        }
    }

    /// A new block of at least `size` bytes (its contents unspecified), aligned to [`GRAIN`],
    /// and to 8 when `size` is a multiple of 8 or above [`FINE_MAX`]. `None` when every chunk
    /// number is taken (the slab then holds tens of GiB).
    pub fn alloc(&mut self, size: usize) -> Option<(Handle, NonNull<u8>)> {
        if size > SHARED_MAX {
            return self.alloc_large(size);
        }
        let (class, rounded) = class_of(size);
        if class >= self.room.len() {
            // Per-class lists as far as the classes in use (a small table uses a few).
            self.room.resize(class + 1, 0);
            self.counts.resize(class + 1, 0);
        }
        let mut c = self.room[class] as usize;
        if c == 0 {
            c = self.new_chunk(class, rounded)?;
        }
        let chunk = &mut self.chunks[c];
        let slot = if chunk.free != 0 {
            let slot = usize::from(chunk.free - 1);
            // SAFETY: a freed slot of this live chunk holds the next freed slot's number in
            // its first two bytes (written by `free`); the slot is inside the chunk.
            chunk.free = unsafe {
                self.spans[c]
                    .base
                    .add(slot * rounded)
                    .cast::<u16>()
                    .read_unaligned()
            };
            slot
        } else {
            let slot = usize::from(chunk.bump);
            chunk.bump += 1;
            slot
        };
        chunk.used += 1;
        self.used_bytes += rounded;
        add_slack(-(rounded as isize));
        if chunk.used == chunk.slots {
            self.unlist(class, c);
        }
        let h = Handle::of(c, slot);
        // SAFETY: `h` was just handed out: a live block of this slab.
        Some((h, unsafe { self.ptr(h) }))
    }

    /// Frees the block `h`; its contents are not dropped (the caller has done that).
    ///
    /// # Safety
    /// `h` must be a live block of this slab, and nothing may use it afterwards (a second
    /// free would hand the block out twice). A handle of a vacant chunk, or of a slot never
    /// handed out, is caught.
    pub unsafe fn free(&mut self, h: Handle) {
        let c = h.chunk();
        let (span, chunk) = match (self.spans.get(c), self.chunks.get(c)) {
            (Some(s), Some(ch)) => (*s, *ch),
            _ => panic!("free of a handle this slab does not hold"),
        };
        assert!(
            !span.base.is_null() && h.slot() < usize::from(chunk.bump) && chunk.used > 0,
            "free of a handle this slab does not hold"
        );
        self.used_bytes -= span.size;
        add_slack(span.size as isize);
        if chunk.class == LARGE {
            self.release(c);
            return;
        }
        let class = usize::from(chunk.class);
        let slot = h.slot();
        // SAFETY: the slot is inside this live chunk and no longer in use (the caller gives it
        // back); at least 4 bytes long, so its first two bytes can hold the free list's link.
        unsafe {
            span.base
                .add(slot * span.size)
                .cast::<u16>()
                .write_unaligned(chunk.free)
        };
        let chunk = &mut self.chunks[c];
        debug_assert!(chunk.used > 0);
        chunk.free = slot as u16 + 1;
        chunk.used -= 1;
        let (used, listed) = (chunk.used, chunk.listed);
        if !listed {
            self.list(class, c);
        }
        if used == 0 {
            let ch = self.chunks[c];
            // The class's only chunk with room stays, empty.
            if ch.prev != 0 || ch.next != 0 {
                self.unlist(class, c);
                self.counts[class] -= 1;
                self.release(c);
            }
        }
    }

    /// The first byte of block `h`.
    ///
    /// # Safety
    /// `h` must be a live block of this slab (unchecked: this is every node read's path).
    #[inline]
    pub unsafe fn ptr(&self, h: Handle) -> NonNull<u8> {
        debug_assert!(h.chunk() < self.spans.len() && !self.spans[h.chunk()].base.is_null());
        // SAFETY: a live handle's chunk number is in the table (chunk numbers are never
        // removed from it), its chunk is allocated and its slot is inside it (the caller's
        // contract), so the offset stays inside that allocation; a chunk's base is never null.
        unsafe {
            let span = *self.spans.get_unchecked(h.chunk());
            NonNull::new_unchecked(span.base.add(h.slot() * span.size))
        }
    }

    /// Bytes of block `h` (its class's size, or its own for a large block).
    #[inline]
    pub fn size(&self, h: Handle) -> usize {
        self.spans[h.chunk()].size
    }

    /// A chunk number for a new chunk, or `None` when all are taken.
    fn number(&mut self) -> Option<usize> {
        if let Some(c) = self.vacant.pop() {
            return Some(c as usize);
        }
        if self.spans.is_empty() {
            // Chunk number 0 is never used: no handle is 0.
            self.spans.push(Span {
                base: std::ptr::null_mut(),
                size: 0,
            });
            self.chunks.push(Chunk::default());
        }
        let c = self.spans.len();
        if c >= MAX_CHUNKS {
            return None;
        }
        self.spans.push(Span {
            base: std::ptr::null_mut(),
            size: 0,
        });
        self.chunks.push(Chunk::default());
        Some(c)
    }

    /// Allocates `layout` for chunk `c`.
    fn place(&mut self, c: usize, layout: Layout, size: usize, chunk: Chunk) {
        // SAFETY: every chunk layout is at least GRAIN bytes: not zero-sized.
        let base = unsafe { alloc::alloc(layout) };
        if base.is_null() {
            alloc::handle_alloc_error(layout);
        }
        self.spans[c] = Span { base, size };
        self.chunks[c] = chunk;
        self.chunk_bytes += layout.size();
        add_slack(layout.size() as isize);
    }

    /// A new chunk of `class` (blocks of `size`), listed as having room.
    fn new_chunk(&mut self, class: usize, size: usize) -> Option<usize> {
        let c = self.number()?;
        let grow = self.counts[class].min(CHUNK_GROWTH);
        let slots = ((CHUNK_BYTES << grow) / size).clamp(1, MAX_SLOTS);
        let chunk = Chunk {
            class: class as u16,
            slots: slots as u16,
            ..Chunk::default()
        };
        self.place(c, chunk_layout(size, slots), size, chunk);
        self.counts[class] += 1;
        self.list(class, c);
        Some(c)
    }

    /// A block of `size > SHARED_MAX` bytes in a chunk of its own.
    fn alloc_large(&mut self, size: usize) -> Option<(Handle, NonNull<u8>)> {
        // Whole grains, as every block (a reference to a node covers its size rounded so).
        let size = size.next_multiple_of(GRAIN);
        let c = self.number()?;
        let chunk = Chunk {
            class: LARGE,
            slots: 1,
            used: 1,
            bump: 1,
            ..Chunk::default()
        };
        self.place(c, chunk_layout(size, 1), size, chunk);
        self.used_bytes += size;
        add_slack(-(size as isize));
        let h = Handle::of(c, 0);
        // SAFETY: `h` was just handed out: a live block of this slab.
        Some((h, unsafe { self.ptr(h) }))
    }

    /// Gives chunk `c` back to the global allocator and its number to the vacant ones.
    fn release(&mut self, c: usize) {
        let span = self.spans[c];
        let chunk = self.chunks[c];
        let layout = chunk_layout(span.size, usize::from(chunk.slots));
        // SAFETY: the chunk was allocated in `place` with this layout and nothing uses it.
        unsafe { alloc::dealloc(span.base, layout) };
        self.chunk_bytes -= layout.size();
        add_slack(-(layout.size() as isize));
        self.spans[c] = Span {
            base: std::ptr::null_mut(),
            size: 0,
        };
        self.chunks[c] = Chunk::default();
        self.vacant.push(c as u32);
    }

    /// Puts chunk `c` first on its class's list of chunks with room.
    fn list(&mut self, class: usize, c: usize) {
        let head = self.room[class];
        if head != 0 {
            self.chunks[head as usize].prev = c as u32;
        }
        let chunk = &mut self.chunks[c];
        chunk.prev = 0;
        chunk.next = head;
        chunk.listed = true;
        self.room[class] = c as u32;
    }

    /// Takes chunk `c` off its class's list.
    fn unlist(&mut self, class: usize, c: usize) {
        let Chunk { prev, next, .. } = self.chunks[c];
        if prev != 0 {
            self.chunks[prev as usize].next = next;
        } else {
            self.room[class] = next;
        }
        if next != 0 {
            self.chunks[next as usize].prev = prev;
        }
        let chunk = &mut self.chunks[c];
        chunk.prev = 0;
        chunk.next = 0;
        chunk.listed = false;
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        // Blocks still in use go with their chunks: their bytes were never slack.
        add_slack(self.used_bytes as isize);
        for c in 1..self.spans.len() {
            if !self.spans[c].base.is_null() {
                self.release(c);
            }
        }
    }
}

#[cfg(test)]
impl Slab {
    /// Checks the bookkeeping: every live chunk's free slots and used count agree, a class
    /// chunk is listed exactly when it has room, each class keeps at most one empty chunk, and
    /// the byte counts are the sums they claim to be. Returns the live blocks' count.
    pub(crate) fn check(&self) -> usize {
        let mut chunk_bytes = 0;
        let mut used_bytes = 0;
        let mut blocks = 0;
        let mut empty = vec![0; CLASSES];
        assert!(self.room.len() <= CLASSES && self.room.len() == self.counts.len());
        for c in 1..self.spans.len() {
            let (span, chunk) = (self.spans[c], self.chunks[c]);
            if span.base.is_null() {
                assert!(self.vacant.contains(&(c as u32)), "chunk {c} lost");
                continue;
            }
            chunk_bytes += chunk_layout(span.size, usize::from(chunk.slots)).size();
            used_bytes += span.size * usize::from(chunk.used);
            blocks += usize::from(chunk.used);
            if chunk.class == LARGE {
                assert_eq!((chunk.slots, chunk.used, chunk.listed), (1, 1, false));
                continue;
            }
            let mut freed = 0;
            let mut f = chunk.free;
            while f != 0 {
                let slot = usize::from(f - 1);
                assert!(slot < usize::from(chunk.bump), "free slot never handed out");
                freed += 1;
                assert!(freed <= chunk.bump, "free list loops");
                // SAFETY: as in `alloc`: a freed slot holds the next one's number.
                f = unsafe {
                    span.base
                        .add(slot * span.size)
                        .cast::<u16>()
                        .read_unaligned()
                };
            }
            assert_eq!(chunk.bump - freed, chunk.used, "chunk {c}");
            assert_eq!(chunk.listed, chunk.used < chunk.slots, "chunk {c}");
            if chunk.used == 0 {
                empty[usize::from(chunk.class)] += 1;
            }
        }
        for (class, head) in self.room.iter().enumerate() {
            let (mut c, mut prev) = (*head, 0);
            while c != 0 {
                let chunk = self.chunks[c as usize];
                assert!(chunk.listed && usize::from(chunk.class) == class);
                assert_eq!(chunk.prev, prev);
                (prev, c) = (c, chunk.next);
            }
            assert!(
                empty[class] <= 1,
                "class {class} keeps {} empty chunks",
                empty[class]
            );
        }
        assert_eq!(self.chunk_bytes, chunk_bytes);
        assert_eq!(self.used_bytes, used_bytes);
        blocks
    }
}
