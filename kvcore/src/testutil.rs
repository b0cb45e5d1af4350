//! Helpers shared by unit tests.

use std::cell::Cell;

/// A xorshift generator for tests that want many random choices, the same ones every run.
pub(crate) struct Rng(Cell<u64>);

impl Rng {
    /// A generator from a non-zero seed.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(Cell::new(seed | 1))
    }

    /// A number below `n`.
    pub(crate) fn below(&self, n: u64) -> u64 {
        let mut r = self.0.get();
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        self.0.set(r);
        r % n
    }
}
