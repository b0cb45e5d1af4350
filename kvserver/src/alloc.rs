//! The global allocator: mimalloc, counting live bytes for INFO memory and maxmemory.
//!
//! Counting must not make every allocation contend on one cache line, so each thread adds to
//! its own padded slot (threads pick slots round-robin); a reader sums the slots.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use mimalloc::MiMalloc;

const SLOTS: usize = 64;

#[repr(align(128))]
struct Slot(AtomicIsize);

static COUNTS: [Slot; SLOTS] = [const { Slot(AtomicIsize::new(0)) }; SLOTS];
static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn slot() -> &'static AtomicIsize {
    let i = MY_SLOT
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS);
            }
            s.get()
        })
        .unwrap_or(0);
    &COUNTS[i].0
}

/// Bytes currently allocated through the global allocator.
pub fn allocated() -> usize {
    // Only the slots handed out so far can be non-zero.
    let used = NEXT.load(Ordering::Relaxed).min(SLOTS);
    COUNTS[..used]
        .iter()
        .map(|s| s.0.load(Ordering::Relaxed))
        .sum::<isize>()
        .max(0) as usize
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

/// mimalloc with a live-bytes counter.
pub struct Counting;

// SAFETY: every method forwards to mimalloc with the caller's arguments unchanged, so
// mimalloc's guarantees hold; the counter updates touch no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        slot().fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        slot().fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; `ptr` came from this allocator with `layout`.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        slot().fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        slot().fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded unchanged; `ptr` came from this allocator with `layout`.
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}
