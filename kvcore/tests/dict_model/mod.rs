//! A sequence of operations on a [`kvcore::dict::Dict`], decoded from arbitrary bytes, checked
//! step by step against `std::collections::HashMap`, the way the dict's own property test does
//! (`kvcore/src/dict/tests.rs`), through the public API only.
//!
//! Shared by the `dict` fuzz target (`fuzz/fuzz_targets/dict.rs` includes this file) and by
//! `cargo test` (`kvcore/tests/fuzz_corpus.rs` replays the corpus and random inputs).
//!
//! Checked after every operation: the same results and length as the model; the load factor
//! stays ≤ 1 (entries never outnumber the buckets of the table being filled); one operation
//! appends at most `REHASH_FILL` heads, pops at most `REHASH_EMPTY_VISITS` buckets and moves at
//! most `REHASH_MOVES` entries (seen through [`Dict::layout`]). SCANs run interleaved with
//! the other operations and must return every key present for the whole scan; a finished
//! `random` draw must be a present key. At the end, iteration equals the model.

use std::collections::{HashMap, HashSet};

use kvcore::dict::{Dict, Layout, Link, REHASH_EMPTY_VISITS, REHASH_FILL, REHASH_MOVES};

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

fn node(key: Vec<u8>, value: u64) -> Node {
    Box::new(TestNode {
        key,
        value,
        next: None,
    })
}

/// Keys `key:0` .. `key:2047`.
const KEYS: u16 = 2048;

fn key_of(i: u16) -> Vec<u8> {
    format!("key:{}", i % KEYS).into_bytes()
}

/// Reads the fuzz input from the front; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u16()) | u64::from(self.u16()) << 16 | u64::from(self.byte()) << 56
    }
}

/// A scan in progress: the keys present since it started, and those seen.
struct ScanState {
    cursor: u64,
    must: HashSet<Vec<u8>>,
    seen: HashSet<Vec<u8>>,
    calls: usize,
}

/// The state before an operation: the layout, and the entries in the top unmigrated buckets,
/// the only ones a rehash step of at most `max_moves` moves can reach.
#[derive(Clone, Copy)]
struct Before {
    layout: Layout,
    from: usize,
    top_entries: usize,
    max_moves: usize,
}

impl Before {
    fn take(d: &Dict<Node>, max_moves: usize) -> Before {
        let layout = d.layout();
        let from = layout
            .unmigrated
            .saturating_sub(max_moves * (REHASH_EMPTY_VISITS / REHASH_MOVES) + 1);
        let top_entries = if layout.rehash_to != 0 && layout.filled == layout.rehash_to {
            d.unmigrated_entries(from)
        } else {
            0
        };
        Before {
            layout,
            from,
            top_entries,
            max_moves,
        }
    }
}

/// Asserts the bounds on the work of the operation that turned `before` into `d`: one rehash
/// step at most, and load factor ≤ 1. `allowance` is 1 when the operation may itself have
/// removed an entry from an unmigrated bucket (`usize::MAX`: it may drop many; skip the check).
fn check_step(d: &Dict<Node>, b: Before, allowance: usize, op: &str) {
    let (before, after) = (b.layout, d.layout());
    let cap = if after.rehash_to != 0 {
        after.rehash_to
    } else {
        after.buckets
    };
    assert!(d.len() <= cap, "{op}: load factor above 1: {after:?}");
    if before.rehash_to == 0 || allowance == usize::MAX {
        return;
    }
    let max_fill = b.max_moves * (REHASH_FILL / REHASH_MOVES);
    let max_pops = b.max_moves * (REHASH_EMPTY_VISITS / REHASH_MOVES);
    if after.rehash_to == before.rehash_to && after.buckets == before.buckets {
        assert!(
            after.filled - before.filled <= max_fill,
            "{op}: filled too much: {before:?} -> {after:?}"
        );
        assert!(
            before.unmigrated - after.unmigrated <= max_pops,
            "{op}: popped too much: {before:?} -> {after:?}"
        );
        if before.filled == before.rehash_to {
            // Entries leave the top buckets by moves, or by a removal (`allowance`).
            let top_after = d.unmigrated_entries(b.from);
            assert!(
                b.top_entries <= top_after + b.max_moves + allowance,
                "{op}: moved too much: {before:?} -> {after:?}, {} -> {top_after} entries",
                b.top_entries
            );
        }
    } else {
        // The rehash finished in this step: whatever was left moved now.
        assert!(
            before.filled == before.rehash_to,
            "{op}: finished during the fill phase: {before:?} -> {after:?}"
        );
        assert!(
            before.unmigrated <= max_pops,
            "{op}: popped too much at the end: {before:?} -> {after:?}"
        );
        assert!(
            b.top_entries <= b.max_moves + allowance,
            "{op}: moved too much at the end: {before:?} -> {after:?}"
        );
        assert_eq!(after.buckets, before.rehash_to, "{op}: {after:?}");
    }
}

/// Runs the operations `data` decodes to against a fresh dict and a `HashMap`, panicking at the
/// first difference. At most 400 operations.
pub fn check_ops(data: &[u8]) {
    let mut input = Input(data);
    let mut d: Dict<Node> = Dict::with_seed(u64::from(input.byte()));
    let mut m: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut scan: Option<ScanState> = None;
    fn forget(scan: &mut Option<ScanState>, key: &[u8]) {
        if let Some(s) = scan {
            s.must.remove(key);
        }
    }
    for _ in 0..400 {
        if input.0.is_empty() {
            break;
        }
        let before = Before::take(&d, REHASH_MOVES);
        match input.byte() % 16 {
            0..=2 => {
                let (i, v) = (input.u16(), u64::from(input.byte()));
                let old = d.insert(node(key_of(i), v)).map(|e| {
                    assert!(e.next.is_none(), "replaced entry still linked");
                    e.value
                });
                assert_eq!(old, m.insert(key_of(i), v), "insert {i}");
                check_step(&d, before, 0, "insert");
            }
            3 => {
                let (i, v) = (input.u16(), u64::from(input.byte()));
                if let std::collections::hash_map::Entry::Vacant(e) = m.entry(key_of(i)) {
                    e.insert(v);
                    d.insert_new(node(key_of(i), v));
                    check_step(&d, before, 0, "insert_new");
                }
            }
            4 => {
                let i = input.u16();
                let got = d.get(&key_of(i)).map(|e| e.value);
                assert_eq!(got, m.get(&key_of(i)).copied(), "get {i}");
                assert_eq!(d.layout(), before.layout, "get changed the dict");
            }
            5 => {
                let (i, v) = (input.u16(), u64::from(input.byte()));
                let got = d.get_mut(&key_of(i)).map(|e| e.value = v);
                let want = m.get_mut(&key_of(i)).map(|e| *e = v);
                assert_eq!(got, want, "get_mut {i}");
                check_step(&d, before, 0, "get_mut");
            }
            6 | 7 => {
                let i = input.u16();
                let got = d.remove(&key_of(i)).map(|e| {
                    assert!(e.next.is_none(), "removed entry still linked");
                    e.value
                });
                assert_eq!(got, m.remove(&key_of(i)), "remove {i}");
                forget(&mut scan, &key_of(i));
                check_step(&d, before, 1, "remove");
            }
            8 => {
                let (i, v) = (input.u16(), u64::from(input.byte()));
                let got = d
                    .replace_with(&key_of(i), |e, _| {
                        assert!(e.next.is_none(), "replace_with got a linked entry");
                        node(e.key.clone(), v)
                    })
                    .map(|e| e.value);
                let want = m.get_mut(&key_of(i)).map(|e| {
                    *e = v;
                    v
                });
                assert_eq!(got, want, "replace_with {i}");
                check_step(&d, before, 1, "replace_with");
            }
            9 => {
                // Many inserts in a row: growth and rehash across later steps.
                let (s, n) = (input.u16() % KEYS, u16::from(input.byte()) * 4);
                for i in s..s + n {
                    let before = Before::take(&d, REHASH_MOVES);
                    assert_eq!(
                        d.insert(node(key_of(i), 1)).map(|e| e.value),
                        m.insert(key_of(i), 1)
                    );
                    check_step(&d, before, 0, "insert range");
                }
            }
            10 => {
                let (s, n) = (input.u16() % KEYS, u16::from(input.byte()) * 4);
                for i in s..s + n {
                    let before = Before::take(&d, REHASH_MOVES);
                    assert_eq!(d.remove(&key_of(i)).map(|e| e.value), m.remove(&key_of(i)));
                    forget(&mut scan, &key_of(i));
                    check_step(&d, before, 1, "remove range");
                }
            }
            11 => {
                // Removes all but 1/16 of the keys: shrinks become due.
                let r = usize::from(input.byte() % 16);
                let mut keys: Vec<Vec<u8>> = m.keys().cloned().collect();
                keys.sort();
                for (n, key) in keys.iter().enumerate() {
                    if n % 16 != r {
                        let before = Before::take(&d, REHASH_MOVES);
                        assert_eq!(d.remove(key).map(|e| e.value), m.remove(key));
                        forget(&mut scan, key);
                        check_step(&d, before, 1, "drain");
                    }
                }
            }
            12 => {
                let r = u64::from(input.byte() % 5) + 2;
                let keep = |key: &[u8]| key.iter().map(|&b| u64::from(b)).sum::<u64>() % r != 0;
                d.retain(|e| keep(&e.key));
                m.retain(|key, _| keep(key));
                if let Some(s) = &mut scan {
                    s.must.retain(|key| keep(key));
                }
                check_step(&d, before, usize::MAX, "retain");
            }
            13 => {
                // A few SCAN calls of the scan in progress (or a new one).
                for _ in 0..1 + input.byte() % 4 {
                    let s = scan.get_or_insert_with(|| ScanState {
                        cursor: 0,
                        must: m.keys().cloned().collect(),
                        seen: HashSet::new(),
                        calls: 0,
                    });
                    s.cursor = d.scan(s.cursor, |e| {
                        s.seen.insert(e.key.clone());
                    });
                    s.calls += 1;
                    assert!(s.calls < 1 << 20, "scan does not terminate");
                    if s.cursor == 0 {
                        let missed: Vec<_> = s.must.difference(&s.seen).collect();
                        assert!(missed.is_empty(), "scan missed {missed:?}");
                        scan = None;
                        break;
                    }
                }
                assert_eq!(d.layout(), before.layout, "scan changed the dict");
            }
            14 => {
                let n = usize::from(input.byte() % 32);
                let before = Before::take(&d, n);
                let more = d.rehash_step(n);
                assert_eq!(more, d.is_rehashing());
                check_step(&d, before, 0, "rehash_step");
            }
            _ => match input.byte() % 3 {
                0 => {
                    d.maybe_shrink();
                    check_step(&d, before, 0, "maybe_shrink");
                }
                1 => {
                    let r = input.u64();
                    match d.random(r) {
                        None => assert!(m.is_empty(), "random found nothing"),
                        Some(e) => assert_eq!(m.get(&e.key), Some(&e.value), "random"),
                    }
                }
                _ => {
                    // Values under `t` play expired keys: found and unlinked in one walk.
                    let (i, t) = (input.u16(), u64::from(input.byte()));
                    let key = key_of(i);
                    match (d.get_or_evict(&key, |e| e.value < t), m.get(&key).copied()) {
                        (Ok(e), Some(v)) if v >= t => {
                            assert_eq!(e.value, v, "get_or_evict {i}");
                            e.value = t;
                            m.insert(key, t);
                        }
                        (Err(Some(e)), Some(v)) if v < t => {
                            assert_eq!(e.value, v, "get_or_evict {i}");
                            assert!(e.next.is_none(), "evicted entry still linked");
                            m.remove(&key);
                            forget(&mut scan, &key);
                        }
                        (Err(None), None) => {}
                        (got, want) => panic!(
                            "get_or_evict {i} (t {t}): got {:?}, model {want:?}",
                            got.map(|e| e.value).map_err(|e| e.map(|e| e.value))
                        ),
                    }
                    check_step(&d, before, 1, "get_or_evict");
                }
            },
        }
        assert_eq!(d.len(), m.len());
        assert_eq!(d.is_empty(), m.is_empty());
    }
    let all: HashMap<Vec<u8>, u64> = d.iter().map(|e| (e.key.clone(), e.value)).collect();
    assert_eq!(d.iter().len(), m.len());
    assert!(all == m, "iteration differs from the model");
    // Finish a scan in progress with no further changes.
    if let Some(mut s) = scan {
        loop {
            s.cursor = d.scan(s.cursor, |e| {
                s.seen.insert(e.key.clone());
            });
            if s.cursor == 0 {
                break;
            }
        }
        assert!(s.must.is_subset(&s.seen), "scan missed keys");
    }
}
