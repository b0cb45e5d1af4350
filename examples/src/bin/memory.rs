//! Bytes per key: 1M string keys (`key:0000001` ...) with 64-byte values through the `Db`
//! API, measured by a counting allocator (bytes requested) and by resident memory.
//!
//! Run: `cargo run --release -p kvexamples --bin memory`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call unchanged to the system allocator; the counter touches no memory
// the allocator hands out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged; `p` came from `System` with `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n.wrapping_sub(l.size()), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn rss_kib() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    const N: usize = 1_000_000;
    let mut db = kvcore::Db::new();
    let value = [b'v'; 64];
    let (live0, rss0) = (LIVE.load(Ordering::Relaxed), rss_kib());
    for i in 0..N {
        db.set(format!("key:{i:07}").as_bytes(), &value)
            .expect("string");
    }
    assert_eq!(db.keyspace(0).len(), N);
    // Let the last rehash finish so both tables are not counted mid-migration.
    for _ in 0..1_000_000 {
        db.keyspace(0).housekeeping();
    }
    let live = LIVE.load(Ordering::Relaxed) - live0;
    let rss = (rss_kib() - rss0) * 1024;
    println!("keys: {N}");
    println!(
        "allocator-requested bytes per key: {:.1}",
        live as f64 / N as f64
    );
    println!(
        "resident bytes per key:            {:.1}",
        rss as f64 / N as f64
    );
}
