//! The keyspace hash map: a chained hash table with progressive rehash (Redis's `dict`).
//!
//! # What it is
//!
//! Entries are owning references ([`Link`]: a pointer, or a 32-bit handle into the dict's own
//! arena, see [`Link::Arena`]) that carry their own chain link, so a key costs one block and
//! the table itself is an array of heads of one word or less. A [`Dict`] holds two
//! such arrays. Normally only `tables[0]` is in use. When the table must grow (or, from a cron,
//! shrink) a second array is allocated and entries migrate to it a few at a time, inside the
//! mutating operations that follow ("progressive rehash"), so no command ever pays an O(n)
//! resize. Why not open addressing (hashbrown): SCAN must return every key present for the whole
//! scan at least once, with a stateless cursor, while the table resizes between calls. That
//! argument (see [`Dict::scan`]) needs each key to sit in the bucket `hash & mask`, which
//! probing breaks.
//!
//! # Invariants
//!
//! - Table sizes are powers of two, at least [`MIN_BUCKETS`] (or 0 before the first insert).
//!   `size0` is the size of `tables[0]`; `size1` is the size of the new table while rehashing,
//!   else 0.
//! - A rehash has two phases. *Fill*: `tables[1]` was reserved with capacity `size1` (an
//!   untouched allocation) and each step appends at most [`REHASH_FILL`] empty heads, so the new
//!   array is never memset in one go. *Migrate*: entries move from the top bucket of `tables[0]`
//!   down, and `tables[0]` is truncated as it goes: its `len()` *is* the migration cursor.
//! - A key's *home* is bucket `i = hash & (size0 - 1)` of `tables[0]` if `i < tables[0].len()`
//!   (not yet migrated), else bucket `hash & (size1 - 1)` of `tables[1]`. Every entry is at its
//!   home, except in the top unmigrated bucket (`i == tables[0].len() - 1`), which may be
//!   half-migrated: its keys are in either place. New entries go to their home, so a lookup
//!   probes one chain, or two for the one bucket being migrated.
//! - A chain holds no two equal keys; entries outside the dict have `next == None`.
//!
//! # Costs and bounds
//!
//! Lookups hash once and walk one chain (expected length ≤ 1: growth starts at load factor 1).
//! Every mutating operation first does one rehash step: either appends at most [`REHASH_FILL`]
//! empty heads to the new array, or makes at most [`REHASH_MOVES`] entry moves and
//! [`REHASH_EMPTY_VISITS`] bucket pops. Entries move one at a time (chain heads are popped), so
//! even a long chain is spread over several operations. Growth doubles the table; a shrink
//! (from [`Dict::maybe_shrink`], when the fill is under 10%) picks the smallest power of two
//! that keeps the fill ≤ 1/2 *and* satisfies the bound below.
//!
//! **The rehash always finishes before the new table fills.** Say a rehash from `B` buckets
//! holding `n` entries to `T` buckets starts, and each insert does its step before it inserts.
//! The fill takes `F = ⌈T / REHASH_FILL⌉` steps. Let the migration take `M` steps; each but
//! the last moved `R = REHASH_MOVES` entries or popped `10R` buckets. The entries to move are
//! at most `n + 1 + F + (M - 1)` (the one that triggered the rehash and every later insert may
//! land in an unmigrated bucket), the buckets to pop `B`, so `R (M - 1) ≤ n + F + M + B/10`,
//! i.e. `M - 1 ≤ (n + 1 + F + B/10) / (R - 1)`. At most `F + M - 1` inserts happen during the
//! rehash, so the entry count never exceeds
//! `need = n + 1 + F + ⌈(n + 1 + F + ⌈B/10⌉) / (R - 1)⌉`, and `target_buckets` never picks a
//! `T` below `need`. For growth (`n = B`, `T = 2B`, `R = 8`) `need ≈ 1.16 B + 3 ≤ 2 B`, so
//! growth exactly doubles (tested for every size); a shrink of a nearly empty huge table is
//! limited to a factor of about 64 per round, because popping its empty buckets takes `B/80`
//! steps. Hence load factor ≤ 1 holds at all times (checked by the tests after every
//! operation), and a new rehash never has to start while one is in progress.
//!
//! Allocation: starting a rehash only reserves the new array (`Vec::with_capacity`: malloc
//! hands out untouched pages, so this is O(1) whatever the size); the fill phase writes it a
//! page or so at a time. The emptied old array has length 0 when dropped, so freeing it is a
//! bare deallocation. [`Dict::table_bytes`] reports both arrays' capacity.
//!
//! Hashing: foldhash keyed with a per-dict seed drawn from per-process randomness, so bucket
//! placement cannot be predicted from outside (hash flooding). [`Dict::with_seed`] gives
//! reproducible placement for tests and benchmarks only.
//!
//! Dropping and [`Dict::clear`] free chains iteratively: a million-entry chain cannot overflow
//! the stack.

use std::hash::{BuildHasher, Hasher};

use foldhash::fast::SeedableRandomState;
use foldhash::SharedSeed;

mod read;
#[cfg(test)]
mod tests;

pub use read::{Iter, Layout};

/// Most entries one mutating operation moves to the new table during a rehash.
pub const REHASH_MOVES: usize = 8;
/// Bucket pops allowed per allowed entry move in one rehash step.
pub const POPS_PER_MOVE: usize = 10;
/// Most buckets one mutating operation pops from the old table.
pub const REHASH_EMPTY_VISITS: usize = POPS_PER_MOVE * REHASH_MOVES;
/// Most empty heads one mutating operation appends to the new array in the fill phase.
pub const REHASH_FILL: usize = FILL_PER_MOVE * REHASH_MOVES;
/// Empty heads appended per allowed entry move in one fill step (a 4 KiB page at 8 moves).
pub const FILL_PER_MOVE: usize = 64;
/// Smallest table size.
pub const MIN_BUCKETS: usize = 4;
/// [`Dict::maybe_shrink`] shrinks when fewer than this percentage of buckets are used.
pub const SHRINK_FILL_PERCENT: usize = 10;

// ---------------------------------------------------------------------------------------------
// The entry trait
// ---------------------------------------------------------------------------------------------

/// An owning reference to one entry that carries its own chain link (intrusive chaining).
///
/// `Option<Self>` should be one word or less (a `Box`, a type wrapping `NonNull`, or a 32-bit
/// handle), so a bucket costs that much. An entry may live in memory the dict's
/// [`Link::Arena`] manages (a handle into a [`crate::slab::Slab`]); then reading it needs the
/// arena, and an entry leaving the dict for good goes back to it through [`Link::release`].
pub trait Link: Sized {
    /// What the entries' memory comes from: `()` for entries that own their memory. The dict
    /// holds one and lends it to every call below.
    type Arena: Default;
    /// Whether dropping an entry does anything ([`Dict::clear`] skips walking the chains of
    /// entries that need no release).
    const RELEASES: bool = std::mem::needs_drop::<Self>();
    /// What an entry reads as, with its arena: what the dict's lookups hand out.
    type Target: ?Sized;
    /// The entry's key. Must not change while the entry is in a dict.
    fn key<'a>(&'a self, arena: &Self::Arena) -> &'a [u8];
    /// Asks the CPU to start loading the entry, without reading it (a hint; default none).
    #[inline]
    fn prefetch(&self, arena: &Self::Arena) {
        let _ = arena;
    }
    /// The next entry in this entry's chain.
    fn next<'a>(&'a self, arena: &Self::Arena) -> Option<&'a Self>;
    /// The link to the next entry in this entry's chain.
    fn next_mut<'a>(&'a mut self, arena: &Self::Arena) -> &'a mut Option<Self>;
    /// Frees an entry that leaves the dict (by default, drops it).
    #[inline]
    fn release(self, arena: &mut Self::Arena) {
        let _ = arena;
    }
    /// The entry as its [`Link::Target`].
    fn target<'a>(&'a self, arena: &'a Self::Arena) -> &'a Self::Target;
    /// [`Link::target`], mutably.
    fn target_mut<'a>(&'a mut self, arena: &'a Self::Arena) -> &'a mut Self::Target;
}

/// A non-owning entry: a pointer to a block that someone else owns and that holds the entry's
/// chain link (the expiry index's key nodes, a sorted set's members). Its [`Link`] reads and
/// writes that word.
///
/// # Safety
/// While the entry is in a dict, [`WordLink::word`] must point to a live, initialized
/// `Option<Self>` in its block that nothing but this entry's `next_mut` writes, and each block
/// must be in one dict at most once.
pub(crate) unsafe trait WordLink: Sized {
    /// The entry's key (see [`Link::key`]).
    fn word_key(&self) -> &[u8];
    /// The block's address, for [`Link::prefetch`].
    fn block(&self) -> *const u8;
    /// The block's link word. Only the address is computed.
    fn word(&self) -> *mut Option<Self>;
}

impl<L: WordLink> Link for L {
    type Arena = ();
    type Target = L;
    #[inline]
    fn target<'a>(&'a self, _: &'a ()) -> &'a L {
        self
    }
    #[inline]
    fn target_mut<'a>(&'a mut self, _: &'a ()) -> &'a mut L {
        self
    }
    #[inline]
    fn key<'a>(&'a self, _: &()) -> &'a [u8] {
        self.word_key()
    }
    #[inline]
    fn prefetch(&self, _: &()) {
        prefetch(self.block());
    }
    #[inline]
    fn next<'a>(&'a self, _: &()) -> Option<&'a Self> {
        // SAFETY: the word is live and initialized (the trait's contract), and only this
        // entry's `next_mut` writes it, which `&self` excludes.
        unsafe { (*self.word()).as_ref() }
    }
    #[inline]
    fn next_mut<'a>(&'a mut self, _: &()) -> &'a mut Option<Self> {
        // SAFETY: as in `next`; `&mut self` makes this entry's access to its word exclusive
        // (its block is in the dict once).
        unsafe { &mut *self.word() }
    }
}

/// Starts loading the cache line at `p` into the CPU's caches (no effect where there is no
/// prefetch instruction). A hint: nothing is read, and any address is allowed.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint that never faults, whatever the address; it reads and
    // writes nothing the program can observe.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

// ---------------------------------------------------------------------------------------------
// The dict
// ---------------------------------------------------------------------------------------------

/// A chained hash table of [`Link`] entries keyed by byte strings, resized progressively.
pub struct Dict<L: Link> {
    /// `tables[0]`: the table; while rehashing, the old table truncated to its unmigrated
    /// prefix. `tables[1]`: empty, or the new table (filled up to `size1`) while rehashing.
    tables: [Vec<Option<L>>; 2],
    /// Size of `tables[0]` (0 before the first insert); constant during a rehash.
    size0: usize,
    /// Size of the new table while rehashing, else 0.
    size1: usize,
    /// Entries in both tables.
    len: usize,
    hasher: SeedableRandomState,
    /// Where an emptied bucket array of at least [`RETIRE_BYTES`] goes (see
    /// [`Dict::set_retire`]); dropped in place when `None`.
    retire: Option<fn(Vec<Option<L>>)>,
    /// Where the entries' memory comes from (see [`Link::Arena`]).
    arena: L::Arena,
}

/// `d`, with its emptied big bucket arrays freed by the lazyfree thread, off the command path
/// (see [`Dict::set_retire`]).
pub(crate) fn retiring<L: Link + Send + 'static>(mut d: Dict<L>) -> Dict<L> {
    d.set_retire(crate::lazyfree::defer);
    d
}

/// Size from which an emptied bucket array is handed to [`Dict::set_retire`]'s function.
pub const RETIRE_BYTES: usize = 1 << 20;

impl<L: Link> Default for Dict<L> {
    fn default() -> Self {
        Self::new()
    }
}

impl<L: Link> std::fmt::Debug for Dict<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dict")
            .field("len", &self.len)
            .field("buckets", &self.size0)
            .field("rehash_to", &self.size1)
            .field("filled", &self.tables[1].len())
            .field("unmigrated", &self.tables[0].len())
            .finish()
    }
}

impl<L: Link> Drop for Dict<L> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<L: Link> Dict<L> {
    /// An empty dict with a random hash seed. Allocates nothing until the first insert.
    pub fn new() -> Self {
        Self::with_hasher(SeedableRandomState::random())
    }

    /// An empty dict with a fixed hash seed: reproducible bucket placement for tests and
    /// benchmarks. Not for keys chosen by clients (hash flooding).
    pub fn with_seed(seed: u64) -> Self {
        Self::with_hasher(SeedableRandomState::with_seed(
            seed,
            SharedSeed::global_fixed(),
        ))
    }

    fn with_hasher(hasher: SeedableRandomState) -> Self {
        Dict {
            tables: [Vec::new(), Vec::new()],
            size0: 0,
            size1: 0,
            len: 0,
            hasher,
            retire: None,
            arena: L::Arena::default(),
        }
    }

    /// Has the bucket arrays a finished rehash empties, from [`RETIRE_BYTES`] up, freed by
    /// `retire` rather than in place (an owner that knows `L` is `Send` passes
    /// `crate::lazyfree::defer`). Giving tens of megabytes back to the kernel is not a bare
    /// deallocation: mimalloc returns the pages at once (`madvise` of each 4 MiB), which took a
    /// SET 2.4 ms on a 32 MiB array while a keyspace grew to 10M keys.
    pub fn set_retire(&mut self, retire: fn(Vec<Option<L>>)) {
        self.retire = Some(retire);
    }

    /// An empty dict that holds `n` entries before it first grows. Allocates and fills its
    /// bucket array now.
    pub fn with_capacity(n: usize) -> Self {
        let mut d = Self::new();
        if n > 0 {
            d.start_resize(n.max(MIN_BUCKETS).next_power_of_two());
        }
        d
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The dict's hash of `key`.
    pub fn hash(&self, key: &[u8]) -> u64 {
        hash_with(&self.hasher, key)
    }

    /// Where the entries' memory comes from: what reading an entry the dict handed out needs
    /// (see [`Link::Arena`]).
    #[inline]
    pub fn arena(&self) -> &L::Arena {
        &self.arena
    }

    /// [`Dict::arena`], mutably: to make entries for the dict and to release the ones it hands
    /// back. Must not be replaced while the dict holds entries.
    #[inline]
    pub(crate) fn arena_mut(&mut self) -> &mut L::Arena {
        &mut self.arena
    }

    /// Frees an entry the dict handed back ([`Dict::remove`], [`Dict::insert`]'s old one).
    #[inline]
    pub fn release(&mut self, entry: L) {
        entry.release(&mut self.arena);
    }

    /// Whether a progressive rehash is in progress.
    pub fn is_rehashing(&self) -> bool {
        self.size1 != 0
    }

    /// Heap bytes of the bucket arrays (not the entries), for memory accounting.
    pub fn table_bytes(&self) -> usize {
        (self.tables[0].capacity() + self.tables[1].capacity()) * std::mem::size_of::<Option<L>>()
    }

    /// Table and bucket index of the home of a key with hash `h` (see the module invariants),
    /// where new entries go.
    /// The index may be out of range only when the dict has no table.
    #[inline]
    fn locate(&self, h: u64) -> (usize, usize) {
        let h = h as usize;
        let i = h & self.size0.wrapping_sub(1);
        if i < self.tables[0].len() {
            (0, i)
        } else {
            (1, h & self.size1.wrapping_sub(1))
        }
    }

    /// Asks the CPU to start loading the bucket where a key with hash `h` lives (a hint).
    #[inline]
    pub fn prefetch_bucket(&self, h: u64) {
        let (t, i) = self.locate(h);
        if let Some(slot) = self.tables[t].get(i) {
            prefetch(slot as *const Option<L> as *const u8);
        }
    }

    /// Hashes `key` and asks the CPU to start loading its bucket; returns the hash, for
    /// [`Dict::prefetch_chain`] once the bucket had time to arrive.
    #[inline]
    pub fn prefetch_key(&self, key: &[u8]) -> u64 {
        let h = self.hash(key);
        self.prefetch_bucket(h);
        h
    }

    /// Asks the CPU to start loading the first entry of the chain of hash `h`: this reads the
    /// bucket, so call it once [`Dict::prefetch_bucket`] had time to bring it in.
    #[inline]
    pub fn prefetch_chain(&self, h: u64) {
        let (t, i) = self.locate(h);
        if let Some(Some(head)) = self.tables[t].get(i) {
            head.prefetch(&self.arena);
        }
    }

    /// The entry with this key. Never moves entries.
    pub fn get(&self, key: &[u8]) -> Option<&L::Target> {
        self.get_link(key).map(|e| e.target(&self.arena))
    }

    /// The entry with this key, as its link.
    #[inline]
    pub(crate) fn get_link(&self, key: &[u8]) -> Option<&L> {
        let h = self.hash(key) as usize;
        let i0 = h & self.size0.wrapping_sub(1);
        let [t0, t1] = &self.tables;
        if let Some(head) = t0.get(i0) {
            let found = find(head.as_ref(), key, &self.arena);
            if found.is_some() || i0 + 1 < t0.len() {
                return found;
            }
        }
        find(
            t1.get(h & self.size1.wrapping_sub(1))?.as_ref(),
            key,
            &self.arena,
        )
    }

    /// The chain slot holding `key` ([`Dict::find_slot`], no rehash step), with the count and
    /// the arena, which callers change beside it.
    #[inline]
    fn slot_mut(&mut self, key: &[u8]) -> (Option<&mut Option<L>>, &mut usize, &mut L::Arena) {
        let h = hash_with(&self.hasher, key);
        let sizes = [self.size0, self.size1];
        let slot = Self::find_slot(&mut self.tables, sizes, h, key, &self.arena);
        (slot, &mut self.len, &mut self.arena)
    }

    /// The chain slot holding `key`, if present, probing as [`Dict::get`] does. Does no
    /// rehash step. Takes the fields, not `self`, so callers may update `len` meanwhile.
    #[inline(always)]
    fn find_slot<'a>(
        tables: &'a mut [Vec<Option<L>>; 2],
        [size0, size1]: [usize; 2],
        h: u64,
        key: &[u8],
        arena: &L::Arena,
    ) -> Option<&'a mut Option<L>> {
        let h = h as usize;
        let i0 = h & size0.wrapping_sub(1);
        let [t0, t1] = tables;
        let len0 = t0.len();
        if let Some(head) = t0.get_mut(i0) {
            let slot = slot_of(head, key, arena);
            if slot.is_some() {
                return Some(slot);
            }
            if i0 + 1 < len0 {
                return None;
            }
        }
        if t1.is_empty() {
            return None;
        }
        Self::find_slot_new(t1, size1, h, key, arena)
    }

    /// [`Dict::find_slot`] in the table a rehash fills (out of line: only a rehash, or a
    /// bucket it has moved, goes there).
    #[inline(never)]
    fn find_slot_new<'a>(
        t1: &'a mut [Option<L>],
        size1: usize,
        h: usize,
        key: &[u8],
        arena: &L::Arena,
    ) -> Option<&'a mut Option<L>> {
        let i1 = h & size1.wrapping_sub(1);
        let slot = slot_of(t1.get_mut(i1)?, key, arena);
        slot.is_some().then_some(slot)
    }

    /// The entry with this key, mutably. Does a bounded rehash step first. The key must not be
    /// changed through the reference.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut L::Target> {
        self.step(REHASH_MOVES);
        let (slot, _, a) = self.slot_mut(key);
        slot?.as_mut().map(|e| e.target_mut(a))
    }

    /// The entry with this key, mutably, unless `evict` says it must go (an expired key): then
    /// it is unlinked and returned as `Err(Some(entry))`; `Err(None)` when absent. One chain
    /// walk, and no rehash step (callers that write do [`Dict::rehash_step`] themselves), so a
    /// read costs what [`Dict::get`] costs. The key must not be changed through the reference.
    pub fn get_or_evict(
        &mut self,
        key: &[u8],
        evict: impl FnOnce(&L::Target) -> bool,
    ) -> Result<&mut L::Target, Option<L>> {
        let evict = |e: &L, a: &L::Arena| evict(e.target(a));
        self.get_or_evict_reformed(key, evict, |_, _| false, |e, _| e, |e, _| e)
    }

    /// [`Dict::get_or_evict`], and an entry kept for which `reform` holds is first replaced
    /// by `f(entry)` in its chain position, as [`Dict::replace_with`] does, in the same walk;
    /// an evicted entry is handed to `gone` (with the arena, to free it), whose result comes
    /// back as `Err(Some(_))`. `evict` and `reform` see the link and the arena, so they can
    /// read what they need without making the whole target.
    pub fn get_or_evict_reformed<R>(
        &mut self,
        key: &[u8],
        evict: impl FnOnce(&L, &L::Arena) -> bool,
        reform: impl FnOnce(&L, &L::Arena) -> bool,
        f: impl FnOnce(L, &mut L::Arena) -> L,
        gone: impl FnOnce(L, &mut L::Arena) -> R,
    ) -> Result<&mut L::Target, Option<R>> {
        let (slot, len, a) = self.slot_mut(key);
        let Some(slot) = slot else {
            return Err(None);
        };
        if slot.as_ref().is_some_and(|e| evict(e, a)) {
            if let Some(mut e) = slot.take() {
                *slot = e.next_mut(a).take();
                *len -= 1;
                return Err(Some(gone(e, a)));
            }
        }
        if slot.as_ref().is_some_and(|e| reform(e, a)) {
            Self::reform_slot(slot, len, key, a, f);
        }
        match slot.as_mut() {
            Some(e) => Ok(e.target_mut(a)),
            None => Err(None),
        }
    }

    /// Inserts `entry`, replacing and returning an entry with an equal key.
    pub fn insert(&mut self, mut entry: L) -> Option<L> {
        let a = &self.arena;
        debug_assert!(entry.next(a).is_none(), "entry is linked elsewhere");
        self.step(REHASH_MOVES);
        let a = &self.arena;
        let h = hash_with(&self.hasher, entry.key(a));
        let sizes = [self.size0, self.size1];
        if let Some(slot) = Self::find_slot(&mut self.tables, sizes, h, entry.key(a), a) {
            if let Some(old) = slot {
                *entry.next_mut(a) = old.next_mut(a).take();
            }
            return slot.replace(entry);
        }
        self.push_new(h, entry);
        None
    }

    /// Inserts `entry`, whose key the caller guarantees is absent (checked in debug builds).
    /// Saves the chain walk of [`Dict::insert`].
    pub fn insert_new(&mut self, entry: L) {
        let a = &self.arena;
        debug_assert!(entry.next(a).is_none(), "entry is linked elsewhere");
        debug_assert!(
            self.get_link(entry.key(a)).is_none(),
            "insert_new of a present key"
        );
        self.step(REHASH_MOVES);
        let h = self.hash(entry.key(&self.arena));
        self.push_new(h, entry);
    }

    /// Grows if needed, then links `entry` at the head of its home chain.
    fn push_new(&mut self, h: u64, mut entry: L) {
        if !self.is_rehashing() && self.len >= self.size0 {
            self.start_resize(target_buckets(self.len, self.size0));
        }
        let (t, i) = self.locate(h);
        // In range: a table exists now, and `locate` only leaves the range when none does.
        let head = &mut self.tables[t][i];
        *entry.next_mut(&self.arena) = head.take();
        *head = Some(entry);
        self.len += 1;
    }

    /// Removes and returns the entry with this key (its `next` is `None`).
    pub fn remove(&mut self, key: &[u8]) -> Option<L> {
        self.step(REHASH_MOVES);
        let (slot, len, a) = self.slot_mut(key);
        let slot = slot?;
        let mut e = slot.take()?;
        *slot = e.next_mut(a).take();
        *len -= 1;
        Some(e)
    }

    /// Replaces the entry with this key by `f(entry)` in the same chain position, for an entry
    /// whose allocation changes (a packed entry reallocated to grow its value). `f` receives
    /// the entry unlinked (`next == None`) and must return an entry with the same key; its
    /// link is then restored. Returns the new entry, or `None` (without calling `f`) when the
    /// key is absent. If `f` panics, the entry is gone and the dict stays consistent.
    pub fn replace_with(
        &mut self,
        key: &[u8],
        f: impl FnOnce(L, &mut L::Arena) -> L,
    ) -> Option<&mut L::Target> {
        self.step(REHASH_MOVES);
        let (slot, len, a) = self.slot_mut(key);
        let slot = slot?;
        Self::reform_slot(slot, len, key, a, f);
        slot.as_mut().map(|e| e.target_mut(a))
    }

    /// Replaces the entry in `slot` (if any) by `f(entry)`, which gets it unlinked and must
    /// return an unlinked entry with the same key; the chain is relinked after it. While `f`
    /// runs the entry is out of the dict (unlinked and not counted in `len`), so a panic in
    /// `f` loses only that entry.
    fn reform_slot(
        slot: &mut Option<L>,
        len: &mut usize,
        key: &[u8],
        a: &mut L::Arena,
        f: impl FnOnce(L, &mut L::Arena) -> L,
    ) {
        let Some(mut old) = slot.take() else {
            return;
        };
        *slot = old.next_mut(a).take();
        *len -= 1;
        let mut new = f(old, a);
        debug_assert!(new.key(a) == key, "reform changed the key");
        debug_assert!(new.next(a).is_none(), "reform returned a linked entry");
        *new.next_mut(a) = slot.take();
        *slot = Some(new);
        *len += 1;
    }

    /// Keeps only the entries for which `f` returns true. Visits every bucket: O(size + len).
    /// Does no rehash step and never resizes.
    pub fn retain(&mut self, mut f: impl FnMut(&mut L::Target) -> bool) {
        let mut removed = 0;
        let a = &mut self.arena;
        for head in self.tables.iter_mut().flatten() {
            let mut slot = head;
            loop {
                let keep = match slot.as_mut() {
                    None => break,
                    Some(e) => f(e.target_mut(a)),
                };
                if keep {
                    if let Some(e) = slot {
                        slot = e.next_mut(a);
                    }
                } else if let Some(mut e) = slot.take() {
                    *slot = e.next_mut(a).take();
                    e.release(a);
                    removed += 1;
                }
            }
        }
        self.len -= removed;
    }

    /// Removes every entry (each through [`Link::release`]) and frees both bucket arrays.
    /// O(size + len), iterative; entries that need no release (links that own nothing) are not
    /// visited.
    pub fn clear(&mut self) {
        let a = &mut self.arena;
        for table in &mut self.tables {
            if !L::RELEASES {
                *table = Vec::new();
                continue;
            }
            for head in table.iter_mut() {
                let mut cur = head.take();
                while let Some(mut e) = cur {
                    cur = e.next_mut(a).take();
                    e.release(a);
                }
            }
            *table = Vec::new();
        }
        self.size0 = 0;
        self.size1 = 0;
        self.len = 0;
    }

    /// Starts a progressive shrink when fewer than [`SHRINK_FILL_PERCENT`]% of the buckets are
    /// used (Redis's rule). The keyspace calls it from a periodic cron, a set's or hash's table
    /// after each delete. Does nothing while rehashing.
    pub fn maybe_shrink(&mut self) {
        if self.is_rehashing()
            || self.size0 <= MIN_BUCKETS
            || self.len * 100 >= self.size0 * SHRINK_FILL_PERCENT
        {
            return;
        }
        let target = target_buckets(self.len, self.size0);
        if target < self.size0 {
            self.start_resize(target);
        }
    }

    /// Starts a rehash to `size` buckets by reserving the new array; the first table (no
    /// entries to keep) is allocated and filled at once instead.
    fn start_resize(&mut self, size: usize) {
        debug_assert!(!self.is_rehashing() && size.is_power_of_two() && size >= MIN_BUCKETS);
        if self.size0 == 0 {
            self.tables[0] = std::iter::repeat_with(|| None).take(size).collect();
            self.size0 = size;
        } else {
            self.tables[1] = Vec::with_capacity(size);
            self.size1 = size;
        }
    }

    /// One rehash step, for idle time: appends at most `FILL_PER_MOVE * max_moves` empty heads
    /// to the new array, or makes at most `max_moves` entry moves and `POPS_PER_MOVE *
    /// max_moves` bucket pops. Returns whether the rehash is still in progress.
    #[inline]
    pub fn rehash_step(&mut self, max_moves: usize) -> bool {
        self.step(max_moves)
    }

    /// [`Dict::rehash_step`]: one check inline when no rehash runs (nearly always).
    #[inline]
    fn step(&mut self, max_moves: usize) -> bool {
        self.is_rehashing() && self.rehash_moves(max_moves)
    }

    fn rehash_moves(&mut self, max_moves: usize) -> bool {
        let [old, new] = &mut self.tables;
        if new.len() < self.size1 {
            // Fill phase. Within the reserved capacity: never reallocates.
            let n = (self.size1 - new.len()).min(max_moves.saturating_mul(FILL_PER_MOVE));
            new.resize_with(new.len() + n, || None);
            #[cfg(test)]
            tests::record_step(0, 0, n);
            return true;
        }
        let max_pops = max_moves.saturating_mul(POPS_PER_MOVE);
        let mask1 = self.size1 - 1;
        let (mut moves, mut pops) = (0, 0);
        while moves < max_moves && pops < max_pops {
            let Some(slot) = old.last_mut() else { break };
            match slot.take() {
                None => {
                    old.pop();
                    pops += 1;
                }
                Some(mut e) => {
                    let a = &self.arena;
                    *slot = e.next_mut(a).take();
                    let i = hash_with(&self.hasher, e.key(a)) as usize & mask1;
                    let head = &mut new[i];
                    *e.next_mut(a) = head.take();
                    *head = Some(e);
                    moves += 1;
                }
            }
        }
        #[cfg(test)]
        tests::record_step(moves, pops, 0);
        if old.is_empty() {
            // The old array has length 0: freeing it only deallocates.
            let filled = std::mem::take(&mut self.tables[1]);
            let done = std::mem::replace(&mut self.tables[0], filled);
            self.size0 = std::mem::take(&mut self.size1);
            match self.retire {
                Some(retire) if done.capacity() * size_of::<Option<L>>() >= RETIRE_BYTES => {
                    retire(done)
                }
                _ => drop(done),
            }
            false
        } else {
            true
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn hash_with(hasher: &SeedableRandomState, key: &[u8]) -> u64 {
    // `write` alone (no length prefix): foldhash already mixes the length in.
    let mut h = hasher.build_hasher();
    h.write(key);
    h.finish()
}

/// The entry with `key` in the chain starting at `cur`.
/// Whether two keys are equal. Keys of 4 to 16 bytes (most keys) compare as two overlapping
/// words each, inline: a chain step then costs no call into the C library's `memcmp`.
#[inline(always)]
pub(crate) fn key_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    fn words<const N: usize>(x: &[u8]) -> Option<([u8; N], [u8; N])> {
        Some((*x.first_chunk::<N>()?, *x.last_chunk::<N>()?))
    }
    match a.len() {
        8..=16 => words::<8>(a) == words::<8>(b),
        4..=7 => words::<4>(a) == words::<4>(b),
        _ => a == b,
    }
}

fn find<'a, L: Link>(mut cur: Option<&'a L>, key: &[u8], a: &L::Arena) -> Option<&'a L> {
    while let Some(e) = cur {
        if key_eq(e.key(a), key) {
            return Some(e);
        }
        cur = e.next(a);
    }
    None
}

/// The slot in the chain starting at `slot` that holds `key`, or the chain's terminal `None`.
/// Always inlined: a call costs its loop's register saves, which a one-node chain does not
/// repay.
#[inline(always)]
fn slot_of<'a, L: Link>(
    mut slot: &'a mut Option<L>,
    key: &[u8],
    a: &L::Arena,
) -> &'a mut Option<L> {
    loop {
        let hit = match slot.as_ref() {
            None => true,
            Some(e) => key_eq(e.key(a), key),
        };
        if hit {
            return slot;
        }
        if let Some(e) = slot {
            slot = e.next_mut(a);
        }
    }
}

/// Size of the table a rehash of `n` entries out of `old` buckets should target: the smallest
/// power of two that is at least [`MIN_BUCKETS`], keeps the fill ≤ 1/2, and is at least the
/// `need` bound of the module docs, so the rehash finishes before the new table fills.
fn target_buckets(n: usize, old: usize) -> usize {
    let need = |size: usize| {
        let fill_steps = size.div_ceil(REHASH_FILL);
        let moves = n + 1 + fill_steps + old.div_ceil(POPS_PER_MOVE);
        n + 1 + fill_steps + moves.div_ceil(REHASH_MOVES - 1)
    };
    let mut size = n.saturating_mul(2).max(MIN_BUCKETS).next_power_of_two();
    while need(size) > size {
        size *= 2;
    }
    size
}
