//! Dict insert and lookup at 1M keys, and lookups in the middle of a rehash.
//!
//! Nodes keep the key inline (one allocation, one cache miss per chain hop), as the keyspace's
//! packed entries will. `std_hashmap_*` is a baseline: std's SwissTable with boxed keys.

use std::collections::HashMap;
use std::sync::OnceLock;

use divan::counter::ItemsCount;
use divan::{black_box, Bencher};
use kvcore::dict::{Dict, Link};

fn main() {
    divan::main();
}

const N: usize = 1 << 20;

struct Node {
    next: Option<Box<Node>>,
    value: u64,
    len: u8,
    key: [u8; 23],
}

impl Link for Box<Node> {
    type Arena = ();
    type Target = Self;
    fn target<'a>(&'a self, _: &'a ()) -> &'a Self {
        self
    }
    fn target_mut<'a>(&'a mut self, _: &'a ()) -> &'a mut Self {
        self
    }
    fn key<'a>(&'a self, _: &()) -> &'a [u8] {
        &self.key[..usize::from(self.len)]
    }
    fn next<'a>(&'a self, _: &()) -> Option<&'a Self> {
        self.next.as_ref()
    }
    fn next_mut<'a>(&'a mut self, _: &()) -> &'a mut Option<Self> {
        &mut self.next
    }
}

/// `key:` and `i` in decimal, written into a fixed buffer.
fn key(i: u64, buf: &mut [u8; 23]) -> usize {
    buf[..4].copy_from_slice(b"key:");
    let digits = i.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut n = i;
    for d in (0..digits).rev() {
        buf[4 + d] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    4 + digits
}

fn boxed_key(i: u64) -> Box<[u8]> {
    let mut buf = [0; 23];
    let len = key(i, &mut buf);
    buf[..len].into()
}

fn node(i: u64) -> Box<Node> {
    let mut k = [0; 23];
    let len = key(i, &mut k) as u8;
    Box::new(Node {
        next: None,
        value: i,
        len,
        key: k,
    })
}

fn dict_of(n: usize) -> Dict<Box<Node>> {
    let mut d = Dict::new();
    for i in 0..n as u64 {
        d.insert_new(node(i));
    }
    d
}

/// A 1M-key dict at load 1 (2^20 keys in 2^20 buckets).
fn full() -> &'static Dict<Box<Node>> {
    static D: OnceLock<Dict<Box<Node>>> = OnceLock::new();
    D.get_or_init(|| dict_of(N))
}

/// The same plus one key, which starts a grow to 2^21 buckets, then about half the entries
/// migrated: lookups probe either table.
fn rehashing() -> &'static Dict<Box<Node>> {
    static D: OnceLock<Dict<Box<Node>>> = OnceLock::new();
    D.get_or_init(|| {
        let mut d = dict_of(N + 1);
        for _ in 0..N / 2 / 1024 {
            d.rehash_step(1024);
        }
        assert!(d.is_rehashing());
        d
    })
}

/// Pseudo-random key indices below `n`, so lookups miss the cache as real traffic does.
fn indices(n: usize) -> impl FnMut() -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n as u64
    }
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn insert_1m(bencher: Bencher) {
    bencher
        .counter(ItemsCount::new(N))
        .with_inputs(|| (0..N as u64).map(node).collect::<Vec<_>>())
        .bench_local_values(|nodes| {
            let mut d = Dict::new();
            for n in nodes {
                d.insert(n);
            }
            d
        });
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn insert_new_1m(bencher: Bencher) {
    bencher
        .counter(ItemsCount::new(N))
        .with_inputs(|| (0..N as u64).map(node).collect::<Vec<_>>())
        .bench_local_values(|nodes| {
            let mut d = Dict::new();
            for n in nodes {
                d.insert_new(n);
            }
            d
        });
}

fn lookup(bencher: Bencher, d: &Dict<Box<Node>>, n: usize) {
    let mut next = indices(n);
    let mut buf = [0; 23];
    bencher.bench_local(|| {
        let len = key(next(), &mut buf);
        black_box(d.get(&buf[..len]).map(|e| e.value))
    });
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn get_hit_1m(bencher: Bencher) {
    lookup(bencher, full(), N);
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn get_miss_1m(bencher: Bencher) {
    let d = full();
    let mut next = indices(N);
    let mut buf = [0; 23];
    bencher.bench_local(|| {
        let len = key(next() + N as u64 * 4, &mut buf);
        black_box(d.get(&buf[..len]).is_some())
    });
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn get_hit_1m_rehashing(bencher: Bencher) {
    lookup(bencher, rehashing(), N + 1);
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn std_hashmap_insert_1m(bencher: Bencher) {
    bencher
        .counter(ItemsCount::new(N))
        .with_inputs(|| (0..N as u64).map(|i| (boxed_key(i), i)).collect::<Vec<_>>())
        .bench_local_values(|items| {
            let mut m = HashMap::with_hasher(foldhash::fast::RandomState::default());
            for (k, v) in items {
                m.insert(k, v);
            }
            m
        });
}

#[divan::bench(sample_count = 200, sample_size = 1000)]
fn std_hashmap_get_hit_1m(bencher: Bencher) {
    static M: OnceLock<HashMap<Box<[u8]>, u64, foldhash::fast::RandomState>> = OnceLock::new();
    let m = M.get_or_init(|| (0..N as u64).map(|i| (boxed_key(i), i)).collect());
    let mut next = indices(N);
    let mut buf = [0; 23];
    bencher.bench_local(|| {
        let len = key(next(), &mut buf);
        black_box(m.get(&buf[..len]).copied())
    });
}
