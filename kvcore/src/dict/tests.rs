//! Unit and property tests of [`Dict`] against `std::collections::HashMap`.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::*;

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

thread_local! {
    /// Largest moves, pops and fills of the rehash steps since the last `take_steps`.
    static STEPS: Cell<Steps> = const { Cell::new(Steps { moves: 0, pops: 0, fills: 0, calls: 0 }) };
}

#[derive(Clone, Copy, Debug)]
struct Steps {
    moves: usize,
    pops: usize,
    fills: usize,
    calls: usize,
}

/// Called by `Dict::step` in test builds.
pub(super) fn record_step(moves: usize, pops: usize, fills: usize) {
    STEPS.with(|c| {
        let s = c.get();
        c.set(Steps {
            moves: s.moves.max(moves),
            pops: s.pops.max(pops),
            fills: s.fills.max(fills),
            calls: s.calls + 1,
        });
    });
}

fn take_steps() -> Steps {
    STEPS.with(|c| {
        c.replace(Steps {
            moves: 0,
            pops: 0,
            fills: 0,
            calls: 0,
        })
    })
}

#[derive(Debug)]
struct TestNode {
    key: Vec<u8>,
    value: u64,
    next: Option<Box<TestNode>>,
}

type Node = Box<TestNode>;

impl Link for Box<TestNode> {
    type Arena = ();
    type Target = Self;
    fn target<'a>(&'a self, _: &'a ()) -> &'a Self {
        self
    }
    fn target_mut<'a>(&'a mut self, _: &'a ()) -> &'a mut Self {
        self
    }
    fn key<'a>(&'a self, _: &()) -> &'a [u8] {
        &self.key
    }
    fn next<'a>(&'a self, _: &()) -> Option<&'a Self> {
        self.next.as_ref()
    }
    fn next_mut<'a>(&'a mut self, _: &()) -> &'a mut Option<Self> {
        &mut self.next
    }
}

fn node(key: impl Into<Vec<u8>>, value: u64) -> Node {
    Box::new(TestNode {
        key: key.into(),
        value,
        next: None,
    })
}

fn k(i: u64) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

impl Dict<Node> {
    /// Asserts every structural invariant; O(size + len).
    fn check(&self) {
        assert!(self.size0 == 0 || (self.size0.is_power_of_two() && self.size0 >= MIN_BUCKETS));
        assert!(self.tables[0].len() <= self.size0);
        if self.is_rehashing() {
            assert!(self.size1.is_power_of_two() && self.tables[1].len() <= self.size1);
            assert!(self.len <= self.size1, "new table over-full: {self:?}");
        } else {
            assert!(self.tables[0].len() == self.size0 && self.tables[1].is_empty());
            assert!(self.len <= self.size0, "table over-full: {self:?}");
        }
        let mut keys = HashSet::new();
        for (t, table) in self.tables.iter().enumerate() {
            for (i, head) in table.iter().enumerate() {
                for e in chain(head.as_ref()) {
                    let h = self.hash(&e.key);
                    let split = (h as usize & (self.size0 - 1)) + 1 == self.tables[0].len();
                    let home = self.locate(h);
                    let alt = (1, h as usize & self.size1.wrapping_sub(1));
                    assert!(
                        home == (t, i) || (split && alt == (t, i)),
                        "entry away from home"
                    );
                    assert!(keys.insert(e.key.clone()), "duplicate key");
                }
            }
        }
        assert_eq!(keys.len(), self.len);
    }

    /// Links `e` at its home without growing: builds long chains.
    fn raw_push(&mut self, mut e: Node) {
        let (t, i) = self.locate(self.hash(&e.key));
        e.next = self.tables[t][i].take();
        self.tables[t][i] = Some(e);
        self.len += 1;
    }
}

fn chain(head: Option<&Node>) -> impl Iterator<Item = &Node> {
    std::iter::successors(head, |e| e.next.as_ref())
}

/// Runs one full scan, calling `between` after every step; returns the keys seen.
fn full_scan(d: &mut Dict<Node>, mut between: impl FnMut(&mut Dict<Node>)) -> HashSet<Vec<u8>> {
    let mut seen = HashSet::new();
    let mut cursor = 0;
    for _ in 0..10_000_000 {
        cursor = d.scan(cursor, |e| {
            seen.insert(e.key.clone());
        });
        if cursor == 0 {
            return seen;
        }
        between(d);
    }
    panic!("scan did not terminate");
}

// ---------------------------------------------------------------------------------------------
// Basics
// ---------------------------------------------------------------------------------------------

#[test]
fn option_link_is_pointer_sized() {
    assert_eq!(
        std::mem::size_of::<Option<Node>>(),
        std::mem::size_of::<usize>()
    );
}

#[test]
fn insert_get_remove() {
    let mut d = Dict::new();
    assert!(d.is_empty() && d.get(b"a").is_none() && d.remove(b"a").is_none());
    assert_eq!(d.table_bytes(), 0);
    for i in 0..1000 {
        assert!(d.insert(node(k(i), i)).is_none());
    }
    assert_eq!(d.len(), 1000);
    d.check();
    for i in 0..1000 {
        assert_eq!(d.get(&k(i)).map(|e| e.value), Some(i));
    }
    assert!(d.get(b"absent").is_none());
    let old = d.insert(node(k(7), 70)).expect("replaced");
    assert!(old.value == 7 && old.next.is_none());
    assert_eq!(d.len(), 1000);
    d.get_mut(&k(7)).expect("present").value = 71;
    assert_eq!(d.get(&k(7)).map(|e| e.value), Some(71));
    for i in (0..1000).step_by(2) {
        let e = d.remove(&k(i)).expect("present");
        assert!(e.key == k(i) && e.next.is_none());
    }
    assert!(d.remove(&k(0)).is_none());
    assert_eq!(d.len(), 500);
    d.check();
    d.clear();
    assert!(d.is_empty() && d.get(&k(1)).is_none() && d.table_bytes() == 0);
    d.insert_new(node(k(1), 1));
    assert_eq!(d.get(&k(1)).map(|e| e.value), Some(1));
}

#[test]
fn with_capacity_holds_n_without_growing() {
    let mut d = Dict::with_capacity(1000);
    let bytes = d.table_bytes();
    assert_eq!(bytes, 1024 * 8);
    for i in 0..1024 {
        d.insert_new(node(k(i), i));
    }
    assert!(!d.is_rehashing() && d.table_bytes() == bytes);
    d.insert_new(node(k(1024), 0));
    assert!(d.is_rehashing() && d.table_bytes() == 3 * bytes);
    d.check();
}

#[test]
fn growth_doubles_and_shrink_shrinks() {
    for shift in 2..48 {
        let b = 1usize << shift;
        assert_eq!(target_buckets(b, b), 2 * b, "grow from {b}");
        let t = target_buckets(b / 10, b);
        if b > MIN_BUCKETS && b / 10 * 100 < b * SHRINK_FILL_PERCENT {
            assert!(t <= (b / 4).max(MIN_BUCKETS), "shrink of {b} to {t}");
        }
    }
    // An emptied huge table shrinks by ~64× per round, bounded by its pop time.
    assert_eq!(target_buckets(0, 1 << 20), 1 << 14);
    assert_eq!(target_buckets(0, 8), MIN_BUCKETS);
}

#[test]
fn replace_with_keeps_position_and_len() {
    // A 4-bucket table with ~10-entry chains and no rehash, so nothing else moves entries.
    let mut d = Dict::with_seed(3);
    d.start_resize(MIN_BUCKETS);
    for i in 0..40 {
        d.raw_push(node(k(i), i));
    }
    let order = |d: &Dict<Node>| d.iter().map(|e| e.key.clone()).collect::<Vec<_>>();
    let before = order(&d);
    for i in 0..40 {
        let new = d
            .replace_with(&k(i), |old, _| {
                assert!(old.next.is_none());
                node(old.key.clone(), old.value + 1000) // a new allocation
            })
            .expect("present");
        assert_eq!(new.value, i + 1000);
    }
    assert!(d.replace_with(b"absent", |_, _| unreachable!()).is_none());
    assert_eq!(order(&d), before);
    assert_eq!(d.len(), 40);
    for i in 0..40 {
        assert_eq!(d.get(&k(i)).map(|e| e.value), Some(i + 1000));
    }
}

#[test]
fn retain_and_iter() {
    let mut d = Dict::new();
    for i in 0..5000 {
        d.insert_new(node(k(i), i));
    }
    assert!(d.is_rehashing() || d.len() == 5000);
    assert_eq!(d.iter().len(), 5000);
    assert_eq!(d.iter().count(), 5000);
    d.retain(|e| {
        e.value += 1;
        e.value % 3 == 0
    });
    let want: HashSet<u64> = (0..5000).map(|i| i + 1).filter(|v| v % 3 == 0).collect();
    let got: HashSet<u64> = d.iter().map(|e| e.value).collect();
    assert_eq!(got, want);
    assert_eq!(d.len(), want.len());
    d.check();
}

#[test]
fn lookups_during_rehash_see_every_key() {
    let mut d = Dict::with_seed(7);
    for i in 0..4096 {
        d.insert_new(node(k(i), i));
    }
    d.insert_new(node(k(4096), 4096)); // starts a grow to 8192
    assert!(d.is_rehashing());
    let mut steps = 0;
    while d.rehash_step(1) {
        steps += 1;
        if steps % 97 == 0 {
            for i in 0..=4096 {
                assert_eq!(d.get(&k(i)).map(|e| e.value), Some(i));
            }
            d.check();
        }
    }
    assert!(steps > 1000);
    d.check();
    assert_eq!(d.table_bytes(), 8192 * 8);
}

#[test]
fn long_chain_migrates_over_several_steps() {
    let mut d = Dict::with_seed(1);
    d.start_resize(MIN_BUCKETS);
    for i in 0..200 {
        d.raw_push(node(k(i), i)); // ~50 per bucket
    }
    d.start_resize(256);
    take_steps();
    let (mut fill_steps, mut move_steps) = (0, 0);
    while d.rehash_step(REHASH_MOVES) {
        let s = take_steps();
        if s.fills > 0 {
            fill_steps += 1;
        } else {
            move_steps += 1;
            assert_eq!(s.moves, REHASH_MOVES);
        }
        for i in 0..200 {
            assert!(d.get(&k(i)).is_some());
        }
    }
    assert_eq!((fill_steps, move_steps), (1, 200 / REHASH_MOVES));
    d.check();
}

// ---------------------------------------------------------------------------------------------
// The rehash bound
// ---------------------------------------------------------------------------------------------

/// Asserts the op did at most one step within the bound, and the load factor ≤ 1 invariant.
fn assert_bounded(d: &Dict<Node>, op: &str) {
    let s = take_steps();
    assert!(s.calls <= 1, "{op}: {s:?}");
    assert!(s.moves <= REHASH_MOVES, "{op}: {s:?}");
    assert!(s.pops <= REHASH_EMPTY_VISITS, "{op}: {s:?}");
    assert!(s.fills <= REHASH_FILL, "{op}: {s:?}");
    let cap = if d.is_rehashing() { d.size1 } else { d.size0 };
    assert!(d.len() <= cap, "{op}: {d:?}");
}

#[test]
fn moves_per_operation_are_bounded() {
    const N: u64 = 200_000;
    let mut d = Dict::new();
    take_steps();
    let mut grows = 0;
    for i in 0..N {
        let was = d.is_rehashing();
        if i % 2 == 0 {
            d.insert_new(node(k(i), i));
        } else {
            d.insert(node(k(i), i));
        }
        grows += usize::from(!was && d.is_rehashing());
        assert_bounded(&d, "insert");
        if i % 3 == 0 {
            d.get_mut(&k(i / 2));
            assert_bounded(&d, "get_mut");
        }
    }
    assert!(grows >= 15, "{grows} grows");
    // Shrink in stages while removing; then refill as fast as possible during a shrink.
    for i in 0..N - 100 {
        d.remove(&k(i));
        assert_bounded(&d, "remove");
        if i % 1000 == 0 {
            d.maybe_shrink();
            assert_bounded(&d, "maybe_shrink");
        }
    }
    for i in N - 100..N {
        d.remove(&k(i));
    }
    d.maybe_shrink();
    assert!(d.is_rehashing());
    for i in 0..N {
        d.insert(node(k(i), i));
        assert_bounded(&d, "insert during shrink");
        d.replace_with(&k(i), |e, _| e);
        assert_bounded(&d, "replace_with");
    }
    d.check();
}

// ---------------------------------------------------------------------------------------------
// SCAN
// ---------------------------------------------------------------------------------------------

#[test]
fn scan_empty_small_and_complete() {
    let mut d: Dict<Node> = Dict::new();
    assert_eq!(d.scan(0, |_| panic!()), 0);
    for i in 0..3 {
        d.insert_new(node(k(i), i));
    }
    let seen = full_scan(&mut d, |_| {});
    assert_eq!(seen.len(), 3);
    for n in [10, 100, 1000, 1025] {
        let mut d = Dict::new();
        for i in 0..n {
            d.insert_new(node(k(i), i));
        }
        assert_eq!(full_scan(&mut d, |_| {}).len(), n as usize);
    }
}

#[test]
fn scan_survives_grow_and_shrink_between_calls() {
    for seed in 0..4 {
        let mut d = Dict::with_seed(seed);
        let stable: Vec<Vec<u8>> = (0..500).map(k).collect();
        for key in &stable {
            d.insert_new(node(key.clone(), 0));
        }
        // Churn keys come and go in waves: grow to ~4k, delete down, shrink, and again.
        let mut next = 1_000_000u64;
        let mut live: Vec<u64> = Vec::new();
        let mut calls = 0u64;
        let (mut grew, mut shrank) = (0, 0);
        let seen = full_scan(&mut d, |d| {
            calls += 1;
            let phase = (calls / 40) % 2;
            let size = d.size0;
            for _ in 0..100 {
                if phase == 0 {
                    d.insert_new(node(k(next), next));
                    live.push(next);
                    next += 1;
                } else if let Some(i) = live.pop() {
                    d.remove(&k(i)).expect("live");
                }
            }
            grew += usize::from(d.size0 > size);
            let was = d.is_rehashing();
            d.maybe_shrink();
            shrank += usize::from(!was && d.is_rehashing());
        });
        for key in &stable {
            assert!(seen.contains(key), "seed {seed}: missed {key:?}");
        }
        assert!(
            grew > 0 && shrank > 0,
            "seed {seed}: grew {grew} shrank {shrank}"
        );
        d.check();
    }
}

// ---------------------------------------------------------------------------------------------
// random()
// ---------------------------------------------------------------------------------------------

fn sample_counts(d: &Dict<Node>, draws: u64) -> HashMap<Vec<u8>, u64> {
    let mut counts = HashMap::new();
    for r in 0..draws {
        let e = d
            .random(r.wrapping_mul(0x2545_F491_4F6C_DD1D))
            .expect("non-empty");
        *counts.entry(e.key.clone()).or_insert(0) += 1;
    }
    counts
}

#[test]
fn random_reaches_every_key_fairly() {
    let mut d: Dict<Node> = Dict::with_seed(11);
    assert!(d.random(1).is_none());
    for i in 0..1000 {
        d.insert_new(node(k(i), i));
    }
    for rehashing in [false, true] {
        if rehashing {
            for i in 1000..1030 {
                d.insert_new(node(k(i), i));
            }
            assert!(d.is_rehashing());
        }
        let n = d.len() as u64;
        let counts = sample_counts(&d, n * 400);
        assert_eq!(counts.len() as u64, n, "every key drawn");
        let (lo, hi) = (
            counts.values().min().unwrap(),
            counts.values().max().unwrap(),
        );
        assert!(
            *lo > 200 && *hi < 600,
            "counts in {lo}..{hi}, expected ~400"
        );
    }
}

#[test]
fn random_on_a_sparse_table_uses_the_fallback() {
    let mut d = Dict::with_seed(5);
    for i in 0..4096 {
        d.insert_new(node(k(i), i));
    }
    for i in 3..4096 {
        d.remove(&k(i));
    }
    let counts = sample_counts(&d, 3000);
    assert_eq!(counts.len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Long chains
// ---------------------------------------------------------------------------------------------

#[test]
fn million_entry_chain_does_not_recurse() {
    let build = || {
        let mut d = Dict::with_seed(0);
        d.start_resize(MIN_BUCKETS);
        let mut head = None;
        for i in 0..1_000_000 {
            let mut e = node(k(i), i);
            e.next = head;
            head = Some(e);
        }
        d.tables[0][0] = head;
        d.len = 1_000_000;
        d
    };
    let mut d = build();
    assert_eq!(d.iter().count(), 1_000_000);
    d.retain(|e| e.value % 2 == 0);
    assert_eq!(d.len(), 500_000);
    d.clear();
    assert!(d.is_empty());
    drop(build());
}

// ---------------------------------------------------------------------------------------------
// Model test
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Insert(u16, u64),
    InsertNew(u16, u64),
    Get(u16),
    GetMut(u16, u64),
    Remove(u16),
    ReplaceWith(u16, u64),
    /// `get_or_evict` evicting entries whose value is even; writes the value to survivors.
    GetOrEvict(u16, u64),
    InsertRange(u16, u16),
    RemoveRange(u16, u16),
    /// Removes about 15/16 of the keys, in key order: shrinks become due.
    Drain(u8),
    Retain(u8),
    Scan,
    RehashStep(u8),
    Shrink,
}

const KEYS: u16 = 4096;

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS;
    prop_oneof![
        6 => (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::InsertNew(k, v)),
        4 => key.clone().prop_map(Op::Get),
        2 => (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::GetMut(k, v)),
        4 => key.clone().prop_map(Op::Remove),
        1 => (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::ReplaceWith(k, v)),
        3 => (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::GetOrEvict(k, v)),
        2 => (key.clone(), 0..KEYS).prop_map(|(s, n)| Op::InsertRange(s, n)),
        2 => (key, 0..KEYS).prop_map(|(s, n)| Op::RemoveRange(s, n)),
        1 => (2..6u8).prop_map(Op::Retain),
        1 => (0..16u8).prop_map(Op::Drain),
        4 => Just(Op::Scan),
        3 => any::<u8>().prop_map(Op::RehashStep),
        3 => Just(Op::Shrink),
    ]
}

fn key_of(i: u16) -> Vec<u8> {
    k(u64::from(i % KEYS))
}

/// A scan in progress: the keys present since it started, and those seen.
struct ScanState {
    cursor: u64,
    must: HashSet<Vec<u8>>,
    seen: HashSet<Vec<u8>>,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn behaves_like_hashmap(ops in prop::collection::vec(op(), 1..200), seed in any::<u64>()) {
        let mut d = Dict::with_seed(seed);
        let mut m: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut scan: Option<ScanState> = None;
        let removed = |scan: &mut Option<ScanState>, key: &[u8]| {
            if let Some(s) = scan { s.must.remove(key); }
        };
        for op in ops {
            match op {
                Op::Insert(i, v) => {
                    let old = d.insert(node(key_of(i), v)).map(|e| e.value);
                    prop_assert_eq!(old, m.insert(key_of(i), v));
                }
                Op::InsertNew(i, v) => {
                    if let std::collections::hash_map::Entry::Vacant(e) = m.entry(key_of(i)) {
                        e.insert(v);
                        d.insert_new(node(key_of(i), v));
                    }
                }
                Op::Get(i) => prop_assert_eq!(d.get(&key_of(i)).map(|e| e.value), m.get(&key_of(i)).copied()),
                Op::GetMut(i, v) => {
                    let got = d.get_mut(&key_of(i)).map(|e| { e.value = v; });
                    let want = m.get_mut(&key_of(i)).map(|e| { *e = v; });
                    prop_assert_eq!(got, want);
                }
                Op::Remove(i) => {
                    prop_assert_eq!(d.remove(&key_of(i)).map(|e| e.value), m.remove(&key_of(i)));
                    removed(&mut scan, &key_of(i));
                }
                Op::ReplaceWith(i, v) => {
                    let got = d.replace_with(&key_of(i), |e, _| node(e.key.clone(), v)).map(|e| e.value);
                    let want = m.get_mut(&key_of(i)).map(|e| { *e = v; v });
                    prop_assert_eq!(got, want);
                }
                Op::GetOrEvict(i, v) => {
                    let got = match d.get_or_evict(&key_of(i), |e| e.value % 2 == 0) {
                        Ok(e) => { e.value = v; Ok(()) }
                        Err(gone) => Err(gone.map(|e| { assert!(e.next.is_none()); e.value })),
                    };
                    let want = match m.get(&key_of(i)).copied() {
                        None => Err(None),
                        Some(old) if old % 2 == 0 => {
                            m.remove(&key_of(i));
                            removed(&mut scan, &key_of(i));
                            Err(Some(old))
                        }
                        Some(_) => { m.insert(key_of(i), v); Ok(()) }
                    };
                    prop_assert_eq!(got, want);
                }
                Op::InsertRange(s, n) => {
                    for i in s..s.saturating_add(n) {
                        prop_assert_eq!(d.insert(node(key_of(i), 1)).map(|e| e.value), m.insert(key_of(i), 1));
                    }
                }
                Op::RemoveRange(s, n) => {
                    for i in s..s.saturating_add(n) {
                        prop_assert_eq!(d.remove(&key_of(i)).map(|e| e.value), m.remove(&key_of(i)));
                        removed(&mut scan, &key_of(i));
                    }
                }
                Op::Drain(r) => {
                    let mut keys: Vec<Vec<u8>> = m.keys().cloned().collect();
                    keys.sort();
                    for (n, key) in keys.iter().enumerate() {
                        if n % 16 != usize::from(r) {
                            prop_assert_eq!(d.remove(key).map(|e| e.value), m.remove(key));
                            removed(&mut scan, key);
                        }
                    }
                }
                Op::Retain(r) => {
                    let keep = |key: &[u8]| key.iter().map(|&b| u64::from(b)).sum::<u64>() % u64::from(r) != 0;
                    d.retain(|e| keep(&e.key));
                    m.retain(|key, _| keep(key));
                    if let Some(s) = &mut scan { s.must.retain(|key| keep(key)); }
                }
                Op::Scan => {
                    let s = scan.get_or_insert_with(|| ScanState {
                        cursor: 0,
                        must: m.keys().cloned().collect(),
                        seen: HashSet::new(),
                    });
                    s.cursor = d.scan(s.cursor, |e| { s.seen.insert(e.key.clone()); });
                    if s.cursor == 0 {
                        prop_assert!(s.must.is_subset(&s.seen), "scan missed keys");
                        scan = None;
                    }
                }
                Op::RehashStep(n) => { d.rehash_step(usize::from(n)); }
                Op::Shrink => d.maybe_shrink(),
            }
            prop_assert_eq!(d.len(), m.len());
        }
        d.check();
        let all: HashMap<Vec<u8>, u64> = d.iter().map(|e| (e.key.clone(), e.value)).collect();
        prop_assert_eq!(all, m);
        // Finish any scan in progress with no further changes.
        if let Some(mut s) = scan {
            while { s.cursor = d.scan(s.cursor, |e| { s.seen.insert(e.key.clone()); }); s.cursor != 0 } {}
            prop_assert!(s.must.is_subset(&s.seen));
        }
    }
}

/// A finished rehash hands an emptied bucket array of at least `RETIRE_BYTES` to the retire
/// function (the keyspace's lazyfree thread) and drops smaller ones in place; no entry is lost.
#[test]
fn big_emptied_tables_go_to_the_retire_function() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static RETIRED: AtomicUsize = AtomicUsize::new(0);
    fn count(t: Vec<Option<Node>>) {
        assert!(t.is_empty());
        assert!(t.capacity() * std::mem::size_of::<Option<Node>>() >= RETIRE_BYTES);
        RETIRED.fetch_add(1, Ordering::Relaxed);
    }
    let mut d: Dict<Node> = Dict::with_seed(7);
    d.set_retire(count);
    let buckets = RETIRE_BYTES / std::mem::size_of::<Option<Node>>();
    let n = 2 * buckets as u64 + 1;
    for i in 0..n {
        d.insert_new(node(k(i), i));
    }
    while d.rehash_step(1000) {}
    // Growth from `buckets` to `2 * buckets` and on to `4 * buckets`: the arrays of `buckets`
    // and `2 * buckets` were retired, every smaller one dropped.
    assert_eq!(RETIRED.load(Ordering::Relaxed), 2);
    assert_eq!(d.len() as u64, n);
    assert!((0..n).all(|i| d.get(&k(i)).is_some()));
}

#[test]
fn key_eq_agrees_with_slice_equality() {
    // Every length around the word paths, equal and differing in each single byte.
    for len in 0..40usize {
        let a: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
        assert!(key_eq(&a, &a.clone()));
        for i in 0..len {
            let mut b = a.clone();
            b[i] ^= 0x20;
            assert!(!key_eq(&a, &b), "len {len} byte {i}");
        }
        let longer = [&a[..], b"x"].concat();
        assert!(!key_eq(&a, &longer) && !key_eq(&longer, &a));
    }
}
