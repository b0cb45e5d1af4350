//! Read-only walks of a [`Dict`]: iteration, SCAN and random sampling.

use super::{Dict, Link};

/// Chains shorter than this are sampled exactly fairly by [`Dict::random`].
const FAIR_CHAIN: usize = 4;
/// Rejection-sampling rounds of [`Dict::random`] before its fallback.
const RANDOM_TRIES: usize = 256;

/// Iterator over a dict's entries, in bucket order. See [`Dict::iter`].
pub struct Iter<'a, L: Link> {
    buckets: std::iter::Chain<std::slice::Iter<'a, Option<L>>, std::slice::Iter<'a, Option<L>>>,
    node: Option<&'a L>,
    remaining: usize,
    arena: &'a L::Arena,
}

impl<'a, L: Link> Iterator for Iter<'a, L> {
    type Item = &'a L::Target;

    fn next(&mut self) -> Option<&'a L::Target> {
        loop {
            if let Some(e) = self.node {
                self.node = e.next(self.arena);
                self.remaining -= 1;
                return Some(e.target(self.arena));
            }
            self.node = self.buckets.next()?.as_ref();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<L: Link> ExactSizeIterator for Iter<'_, L> {}

impl<L: Link> Dict<L> {
    /// Every entry once, in bucket order. O(size + len).
    pub fn iter(&self) -> Iter<'_, L> {
        Iter {
            buckets: self.tables[0].iter().chain(self.tables[1].iter()),
            node: None,
            remaining: self.len,
            arena: &self.arena,
        }
    }

    /// One step of a SCAN (Redis's `dictScan`): calls `f` on the entries of one bucket (while
    /// rehashing: one bucket of the smaller table and all its expansions in the larger) and
    /// returns the next cursor, 0 when the scan is complete. Start with cursor 0.
    ///
    /// Guarantee: an entry present from the first call to the last is passed to `f` at least
    /// once, however the table grows, shrinks or rehashes between calls (entries may repeat).
    /// Why: the cursor counts with its bits reversed, so its low bits, which select the bucket,
    /// advance most slowly. The buckets `b` and `b + k·size` of a larger table are exactly the
    /// ones that split from (or merge into) bucket `b` of a smaller one; after visiting bucket
    /// `b` under mask `m`, the next cursor moves past all of `b`'s expansions under any mask,
    /// and every cursor below it in reversed order has had its bucket and expansions visited. A
    /// shrink can only repeat buckets, never skip them. During a rehash an entry is in its old
    /// bucket or in one of that bucket's expansions in the new table, and both are visited in
    /// the same call.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&L::Target)) -> u64 {
        let [t0, t1] = &self.tables;
        let a = &self.arena;
        let mut v = cursor;
        if !self.is_rehashing() {
            if self.size0 == 0 {
                return 0;
            }
            let m0 = (self.size0 - 1) as u64;
            visit(t0, v & m0, a, &mut f);
            return next_cursor(v, m0);
        }
        let (m0, m1) = ((self.size0 - 1) as u64, (self.size1 - 1) as u64);
        let (small, ms, large, ml) = if m0 <= m1 {
            (t0, m0, t1, m1)
        } else {
            (t1, m1, t0, m0)
        };
        visit(small, v & ms, a, &mut f);
        loop {
            visit(large, v & ml, a, &mut f);
            v = next_cursor(v, ml);
            if v & (ms ^ ml) == 0 {
                return v;
            }
        }
    }

    /// [`Dict::scan`] handing out the entries mutably (the snapshot marks what it wrote). The
    /// keys must not change.
    pub fn scan_mut(&mut self, cursor: u64, mut f: impl FnMut(&mut L::Target)) -> u64 {
        let rehashing = self.is_rehashing();
        let (size0, size1) = (self.size0, self.size1);
        let [t0, t1] = &mut self.tables;
        let a = &self.arena;
        let mut v = cursor;
        if !rehashing {
            if size0 == 0 {
                return 0;
            }
            let m0 = (size0 - 1) as u64;
            prefetch_ahead(t0, v, m0, a);
            visit_mut(t0, v & m0, a, &mut f);
            return next_cursor(v, m0);
        }
        let (m0, m1) = ((size0 - 1) as u64, (size1 - 1) as u64);
        let (small, ms, large, ml) = if m0 <= m1 {
            (t0, m0, t1, m1)
        } else {
            (t1, m1, t0, m0)
        };
        visit_mut(small, v & ms, a, &mut f);
        loop {
            visit_mut(large, v & ml, a, &mut f);
            v = next_cursor(v, ml);
            if v & (ms ^ ml) == 0 {
                return v;
            }
        }
    }

    /// Visits up to `count` entries found by walking consecutive buckets (of both tables while
    /// rehashing) from a random one chosen by `r`, as Redis's `dictGetSomeKeys`: cheap and
    /// biased toward entries after empty runs, which is all eviction sampling needs. Visits
    /// at most `10 · count` buckets; after a run of more than `max(5, count)` empty buckets
    /// it jumps to another random one, so a sparse table still yields entries (an entry may
    /// then be visited twice).
    pub fn sample(&self, r: u64, count: usize, mut f: impl FnMut(&L::Target)) {
        if self.len == 0 || count == 0 {
            return;
        }
        let [t0, t1] = &self.tables;
        let n0 = t0.len();
        let total = n0 + t1.len();
        let mut rng = r;
        let mut b = below(splitmix64(&mut rng), total);
        let (mut seen, mut empty) = (0, 0);
        for _ in 0..count.saturating_mul(10) {
            let head = if b < n0 { t0.get(b) } else { t1.get(b - n0) };
            let head = head.and_then(Option::as_ref);
            if head.is_none() {
                empty += 1;
                if empty >= 5 && empty > count {
                    b = below(splitmix64(&mut rng), total);
                    empty = 0;
                    continue;
                }
            } else {
                empty = 0;
            }
            for e in chain(head, &self.arena) {
                f(e.target(&self.arena));
                seen += 1;
                if seen == count {
                    return;
                }
            }
            b = (b + 1) % total;
        }
    }

    /// A random entry chosen from the caller's randomness `r` (RANDOMKEY, eviction sampling);
    /// `None` when empty. Deterministic in `r`.
    ///
    /// Fair by rejection sampling: pick a bucket uniformly among the live ones of both tables
    /// and a position `j < max(4, chain length)`; accept the entry at `j` if there is one. Each
    /// entry of a chain shorter than 5 is then equally likely (a longer chain's entries a little
    /// less). Costs about `4 / load` bucket probes; after 256 rejections (a very sparse table: at
    /// load 0.1 that happens once in ~600 calls) it falls back to the first non-empty bucket
    /// after a random one, which favours entries that follow long runs of empty buckets. For cheap unfair sampling,
    /// [`Dict::scan`] from a random cursor visits one bucket.
    pub fn random(&self, r: u64) -> Option<&L::Target> {
        self.random_link(r).map(|e| e.target(&self.arena))
    }

    /// [`Dict::random`], as the link.
    fn random_link(&self, r: u64) -> Option<&L> {
        if self.len == 0 {
            return None;
        }
        let [t0, t1] = &self.tables;
        let a = &self.arena;
        let n0 = t0.len();
        let total = n0 + t1.len();
        let bucket =
            |b: usize| if b < n0 { t0.get(b) } else { t1.get(b - n0) }.and_then(Option::as_ref);
        let mut rng = r;
        for _ in 0..RANDOM_TRIES {
            let head = bucket(below(splitmix64(&mut rng), total));
            let c = chain(head, a).count();
            let j = below(splitmix64(&mut rng), c.max(FAIR_CHAIN));
            if j < c {
                return chain(head, a).nth(j);
            }
        }
        let start = below(splitmix64(&mut rng), total);
        let head = (start..total).chain(0..start).find_map(bucket)?;
        let c = chain(Some(head), a).count();
        chain(Some(head), a).nth(below(splitmix64(&mut rng), c))
    }
}

/// Where a dict's tables and rehash stand; see [`Dict::layout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Size of the current table (0 before the first insert).
    pub buckets: usize,
    /// Size of the table a rehash moves to; 0 when not rehashing.
    pub rehash_to: usize,
    /// Buckets of the current table not yet migrated (all of them when not rehashing).
    pub unmigrated: usize,
    /// Heads of the new table written so far (the fill phase ends at `rehash_to`).
    pub filled: usize,
}

impl<L: Link> Dict<L> {
    /// The table sizes and rehash progress, for tests and fuzzing: bounds on the work one
    /// operation does are differences of two layouts. O(1).
    pub fn layout(&self) -> Layout {
        Layout {
            buckets: self.size0,
            rehash_to: self.size1,
            unmigrated: self.tables[0].len(),
            filled: self.tables[1].len(),
        }
    }

    /// Entries in the buckets `from..` of the current table that are not migrated yet (the
    /// next ones a rehash moves), for tests and fuzzing. O(buckets counted + their entries).
    pub fn unmigrated_entries(&self, from: usize) -> usize {
        self.tables[0]
            .get(from..)
            .unwrap_or_default()
            .iter()
            .map(|h| chain(h.as_ref(), &self.arena).count())
            .sum()
    }
}

fn chain<'a, L: Link>(head: Option<&'a L>, a: &'a L::Arena) -> impl Iterator<Item = &'a L> {
    std::iter::successors(head, move |e| e.next(a))
}

fn visit<L: Link>(table: &[Option<L>], idx: u64, a: &L::Arena, f: &mut impl FnMut(&L::Target)) {
    // `get`: a migrated bucket of the old table is past its truncated end, i.e. empty.
    if let Some(head) = table.get(idx as usize) {
        chain(head.as_ref(), a).for_each(|e| f(e.target(a)));
    }
}

fn visit_mut<L: Link>(
    table: &mut [Option<L>],
    idx: u64,
    a: &L::Arena,
    f: &mut impl FnMut(&mut L::Target),
) {
    if let Some(head) = table.get_mut(idx as usize) {
        let mut cur = head.as_mut();
        while let Some(e) = cur {
            f(e.target_mut(a));
            cur = e.next_mut(a).as_mut();
        }
    }
}

/// Cursors ahead of the one being visited whose bucket slot is prefetched.
const SLOT_AHEAD: u64 = 16;
/// Cursors ahead whose first entry is prefetched (its slot was prefetched earlier).
const ENTRY_AHEAD: u64 = 8;

/// Starts loading what a walk in cursor order (a snapshot's, scanning `table` call after call)
/// reads next: the bucket slot [`SLOT_AHEAD`] cursors on and the first entry of the bucket
/// [`ENTRY_AHEAD`] cursors on. Cursor order jumps across the table, so each bucket and each entry
/// is otherwise a cache and TLB miss the walk waits for, one after the other. (Near the last
/// cursor the look-ahead wraps to the first ones: a wasted hint, nothing more.)
fn prefetch_ahead<L: Link>(table: &[Option<L>], v: u64, mask: u64, a: &L::Arena) {
    let at = |k| (cursor_ahead(v, mask, k) & mask) as usize;
    if let Some(slot) = table.get(at(SLOT_AHEAD)) {
        super::prefetch(std::ptr::from_ref(slot).cast());
    }
    if let Some(Some(head)) = table.get(at(ENTRY_AHEAD)) {
        head.prefetch(a);
    }
}

/// The cursor `k` steps of [`next_cursor`] after `v` (cyclically: the walk's end wraps to its
/// start), in its bits selected by `mask` (`2^b - 1`): one addition on the reversed bits.
fn cursor_ahead(v: u64, mask: u64, k: u64) -> u64 {
    let bits = mask.count_ones();
    if bits == 0 {
        return 0;
    }
    ((v & mask).reverse_bits().wrapping_add(k << (64 - bits))).reverse_bits() & mask
}

/// Increments the bits of `v` selected by `mask` as a reversed number, clearing the others.
fn next_cursor(v: u64, mask: u64) -> u64 {
    (v | !mask).reverse_bits().wrapping_add(1).reverse_bits()
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Maps a uniform `x` to `0..n` (Lemire's multiply-shift).
fn below(x: u64, n: usize) -> usize {
    ((u128::from(x) * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_ahead_is_next_cursor_repeated() {
        for bits in [0, 1, 3, 10] {
            let mask = (1u64 << bits) - 1;
            for v in 0..=mask {
                let mut c = v;
                // Past the end of the walk too (next_cursor gives 0, then starts again).
                for k in 0..40 {
                    assert_eq!(
                        cursor_ahead(v, mask, k),
                        c & mask,
                        "bits {bits} v {v} k {k}"
                    );
                    c = next_cursor(c, mask);
                }
            }
        }
    }
}
