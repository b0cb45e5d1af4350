//! A counter that many threads add to without sharing a cache line: each thread adds to its own
//! padded slot (threads take slots round-robin at their first add), and a reader sums the
//! slots. For counts updated on every allocation (the server's live bytes, the slabs' slack).

use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// Slots of a tally; threads past this many share them (adds stay atomic).
const SLOTS: usize = 64;

#[repr(align(128))]
struct Slot(AtomicIsize);

/// Slots handed out so far, to every tally (a thread has one slot number for all of them).
static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The calling thread's slot number (0 while its thread-locals are being torn down).
#[inline]
fn my_slot() -> usize {
    MY_SLOT
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS);
            }
            s.get()
        })
        .unwrap_or(0)
}

/// A sum of per-thread counts (see the module docs).
pub struct Tally([Slot; SLOTS]);

impl Tally {
    /// A tally at 0, for a `static`.
    pub const fn new() -> Tally {
        Tally([const { Slot(AtomicIsize::new(0)) }; SLOTS])
    }

    /// Adds `delta` to the calling thread's slot.
    #[inline]
    pub fn add(&self, delta: isize) {
        self.0[my_slot()].0.fetch_add(delta, Ordering::Relaxed);
    }

    /// The sum of all slots (each read once; a concurrent add may or may not be in it).
    pub fn sum(&self) -> isize {
        // Only the slots handed out so far can be non-zero (slot 0 also takes late adds).
        let used = NEXT.load(Ordering::Relaxed).clamp(1, SLOTS);
        self.0[..used]
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }
}

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_add_up() {
        static T: Tally = Tally::new();
        let before = T.sum();
        std::thread::scope(|s| {
            for i in 0..100 {
                s.spawn(move || {
                    for _ in 0..1000 {
                        T.add(i);
                        T.add(-i + 1);
                    }
                });
            }
        });
        assert_eq!(T.sum() - before, 100 * 1000);
    }
}
