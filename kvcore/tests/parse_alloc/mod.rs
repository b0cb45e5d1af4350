//! The request parser allocates no more than the bytes it has seen plus a constant, whatever
//! lengths and counts the input announces.
//!
//! [`Counting`] is a global allocator that keeps per-thread live and peak byte counts (so
//! tests on other threads do not disturb them); [`check_parse_allocation`] parses an input
//! as one connection would and bounds the peak. Shared by the `resp_parse` fuzz target and
//! `kvcore/tests/fuzz_corpus.rs`; each installs `Counting` as its global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kvcore::resp::{Limits, Parsed, Parser};

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grow(n: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + n;
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn shrink(n: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(n)));
}

/// The system allocator, counting bytes per thread.
pub struct Counting;

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; the counters are plain thread-local cells that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: the caller's `layout` contract is passed on to `System` as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrink(layout.size());
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grow(new_size);
        shrink(layout.size());
        // SAFETY: as for `dealloc`; `new_size` is the caller's, nonzero by contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Parses `input` (all at once, then in two pieces) and panics if the parser's peak live
/// allocation passes `16 * input.len() + 64 KiB` — an argument slice costs 16 bytes and
/// takes at least one input byte — or if counting is not in effect.
pub fn check_parse_allocation(input: &[u8]) {
    let probe = LIVE.with(Cell::get);
    drop(std::hint::black_box(vec![0u8; 100]));
    assert!(
        PEAK.with(Cell::get) >= probe + 100,
        "the Counting allocator is not installed"
    );
    let bound = 16 * input.len() + (64 << 10);
    for cut in [input.len(), input.len() / 2] {
        let base = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(base));
        let mut parser = Parser::new(Limits::default());
        let mut start = 0;
        'feed: for avail in [cut, input.len()] {
            loop {
                match parser.parse(&input[start..avail]) {
                    Ok(Parsed::Command { consumed, .. }) => start += consumed,
                    Ok(Parsed::Incomplete { .. }) => break,
                    Err(_) => break 'feed,
                }
            }
        }
        drop(parser);
        let peak = PEAK.with(Cell::get) - base;
        assert!(
            peak <= bound,
            "parsing {} bytes allocated {peak} bytes at peak",
            input.len()
        );
    }
}
