//! The global allocator: mimalloc, counting live bytes for INFO memory and maxmemory.
//!
//! Counting must not make every allocation contend on one cache line: the count is a
//! [`Tally`] (each thread adds to its own padded slot; a reader sums the slots).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

use kvcore::tally::Tally;
use mimalloc::MiMalloc;

/// Bytes allocated and not freed.
static COUNTS: Tally = Tally::new();

/// Bytes currently allocated through the global allocator, less the room in the stores' node
/// slabs that no key uses ([`kvcore::slab::slack`]: deleting keys makes it, and it is theirs
/// again at the next insert, so it counts as free, as Redis counts a freed key's bytes).
pub fn allocated() -> usize {
    let total = COUNTS.sum().max(0) as usize;
    total.saturating_sub(kvcore::slab::slack())
}

static PEAK: AtomicUsize = AtomicUsize::new(0);
static STARTUP: AtomicUsize = AtomicUsize::new(0);

/// Bytes allocated now, after recording them as the peak if they are the most seen (Redis
/// samples its peak the same way: in its cron and when asked).
pub fn sample_peak() -> usize {
    let now = allocated();
    PEAK.fetch_max(now, Ordering::Relaxed);
    now
}

/// The most bytes [`sample_peak`] has seen.
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Records the bytes allocated once the server has started (MEMORY STATS
/// `startup.allocated`).
pub fn mark_startup() {
    STARTUP.store(sample_peak(), Ordering::Relaxed);
}

/// The bytes [`mark_startup`] recorded.
pub fn startup() -> usize {
    STARTUP.load(Ordering::Relaxed)
}

/// Returns the allocator's free pages to the system, for the calling thread's heap and the
/// abandoned ones (MEMORY PURGE).
pub fn purge() {
    // SAFETY: mi_collect only walks and frees the allocator's own free lists; it may be called
    // from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// The alignment of every block mimalloc hands out: block sizes are multiples of 8 and a
/// page's first block is 16-aligned.
const BLOCK_ALIGN: usize = 8;

/// Lets the calling thread's heap return pages freed long enough ago to the system (a shard's
/// cron calls it once a second). mimalloc delays giving back freed pages and only does it
/// from inside later allocator calls, so a server gone idle after a burst (a load, a pipeline
/// that grew its buffers, a hash table's old array after a rehash) would keep that memory in
/// its RSS for as long as it stays idle. Not forced: pages still within the delay stay, and
/// full pages are not visited, so this costs little however big the heap.
pub fn collect() {
    // SAFETY: as in `purge`.
    unsafe { libmimalloc_sys::mi_collect(false) };
}

/// mimalloc with a live-bytes counter.
///
/// Allocations aligned to at most [`BLOCK_ALIGN`] call `mi_malloc`, not the `mimalloc` crate's
/// `mi_malloc_aligned`: mimalloc v3 serves an aligned request from the size class above
/// whenever the class is not a power of two (48, 80, 96, 112, 160, 192, 224, 320 ... bytes)
/// and its current page has no free block, which in a growing heap is every time. A 48-byte
/// key node then takes 64 bytes. (`realloc` needs no such care: mimalloc's aligned realloc
/// already takes the plain path for these alignments.)
pub struct Counting;

// SAFETY: every method forwards to mimalloc with the caller's arguments unchanged, so
// mimalloc's guarantees hold; the counter updates touch no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        COUNTS.add(layout.size() as isize);
        if layout.align() <= BLOCK_ALIGN {
            // SAFETY: `size` is non-zero (the caller's contract); every mimalloc block is
            // `BLOCK_ALIGN`-aligned, which covers `layout.align()`.
            return unsafe { libmimalloc_sys::mi_malloc(layout.size()) }.cast();
        }
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        COUNTS.add(-(layout.size() as isize));
        // SAFETY: forwarded unchanged; `ptr` came from this allocator with `layout`.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        COUNTS.add(layout.size() as isize);
        if layout.align() <= BLOCK_ALIGN {
            // SAFETY: as in `alloc`.
            return unsafe { libmimalloc_sys::mi_zalloc(layout.size()) }.cast();
        }
        // SAFETY: forwarded unchanged.
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        COUNTS.add(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded unchanged; `ptr` came from this allocator with `layout`.
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks come from the size class of the request (not the one above) and are aligned as
    /// asked, for every small size at the alignments the plain path takes, and above it.
    #[test]
    fn size_classes_and_alignment() {
        let a = Counting;
        let mut held = Vec::new();
        for size in 1..=4096usize {
            for align in [1, 2, 4, 8, 16, 64] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // Enough blocks of one size to need fresh pages, where the aligned path
                // rounded up.
                for _ in 0..if size <= 512 { 40 } else { 2 } {
                    // SAFETY: `layout` has a non-zero size.
                    let p = unsafe { a.alloc(layout) };
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    // SAFETY: `p` is a live block from mimalloc.
                    let usable = unsafe { libmimalloc_sys::mi_usable_size(p.cast()) };
                    // SAFETY: a plain request of the same size, freed at once.
                    let plain = unsafe { libmimalloc_sys::mi_malloc(size) };
                    // SAFETY: `plain` is a live block from mimalloc.
                    let class = unsafe { libmimalloc_sys::mi_usable_size(plain) };
                    // SAFETY: `plain` came from mi_malloc and is freed once.
                    unsafe { libmimalloc_sys::mi_free(plain) };
                    if align <= BLOCK_ALIGN {
                        assert_eq!(usable, class, "size {size} align {align}");
                    }
                    held.push((p, layout));
                }
            }
        }
        for (p, layout) in held {
            // SAFETY: each block came from `a.alloc` with this layout and is freed once.
            unsafe { a.dealloc(p, layout) };
        }
    }
}
