//! Memory per element of hashes, sets and lists, ours against redis-server, same data. Run by
//! hand: `cargo test --release -p kvcore --test collection_memory -- --ignored --nocapture`
//! (`KV_MEM_SHAPE=name` runs one shape: RSS growth is only meaningful for the first shape a
//! process builds, so run one shape per process for it).
//!
//! For us: the bytes the allocator handed out, rounded to 16-byte size classes as mimalloc and
//! jemalloc do for small blocks (a counting global allocator), and the RSS growth; for Redis:
//! the growth of INFO `used_memory` (jemalloc's allocated bytes). Keys are included: the
//! figure is what one more element costs a user, whatever it is made of.

use std::sync::atomic::Ordering::Relaxed;

use kvcore::Db;
use mem_harness::{memory_field, pipeline, redis, rss, used_memory, Counting, LIVE_ROUNDED};

mod mem_harness;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A 16-byte value that differs per `i` (no integer encoding, no sharing).
fn val16(i: usize) -> String {
    format!("v{i:015}")
}

/// A data shape: its name, the commands that build it, and how many elements they add.
struct Shape {
    name: &'static str,
    commands: Vec<Vec<String>>,
    elements: usize,
    /// The bar: at most this fraction of Redis's bytes per element.
    bar: f64,
}

/// The commands of each shape, built only when that shape runs.
type Build = fn() -> Vec<Vec<String>>;

fn hashes() -> Vec<Vec<String>> {
    (0..100_000)
        .map(|k| {
            let mut c = vec!["HSET".to_string(), format!("h:{k}")];
            for j in 0..10 {
                c.push(format!("field{j}"));
                c.push(val16(k * 10 + j));
            }
            c
        })
        .collect()
}

fn int_sets() -> Vec<Vec<String>> {
    (0..100_000)
        .map(|k| {
            let mut c = vec!["SADD".to_string(), format!("si:{k}")];
            c.extend((0..10).map(|j| (j * 7 + k % 100).to_string()));
            c
        })
        .collect()
}

fn str_sets() -> Vec<Vec<String>> {
    (0..100_000)
        .map(|k| {
            let mut c = vec!["SADD".to_string(), format!("ss:{k}")];
            c.extend((0..10).map(|j| format!("tag:{j}:{}", k % 50)));
            c
        })
        .collect()
}

fn list() -> Vec<Vec<String>> {
    (0..100_000)
        .map(|b| {
            let mut c = vec!["RPUSH".to_string(), "biglist".to_string()];
            c.extend((0..100).map(|j| val16(b * 100 + j)));
            c
        })
        .collect()
}

fn big_hash() -> Vec<Vec<String>> {
    (0..10_000)
        .map(|b| {
            let mut c = vec!["HSET".to_string(), "bighash".to_string()];
            for j in 0..100 {
                c.push(format!("f:{}", b * 100 + j));
                c.push(val16(b * 100 + j));
            }
            c
        })
        .collect()
}

/// Name, elements, bar, builder.
const SHAPES: &[(&str, usize, f64, Build)] = &[
    (
        "100k hashes x 10 fields, 16-byte values",
        1_000_000,
        0.8,
        hashes,
    ),
    ("100k sets x 10 small integers", 1_000_000, 0.8, int_sets),
    ("100k sets x 10 short strings", 1_000_000, 0.8, str_sets),
    ("1 list x 10M 16-byte elements", 10_000_000, 0.9, list),
    (
        "1 hash x 1M fields, 16-byte values",
        1_000_000,
        0.9,
        big_hash,
    ),
];

fn measure(shape: &Shape) -> f64 {
    let n = shape.elements as f64;
    let mut r = redis();
    let before = used_memory(&mut r.1);
    let rss_before = memory_field(&mut r.1, "used_memory_rss");
    for chunk in shape.commands.chunks(100) {
        pipeline(&mut r.1, chunk);
    }
    let redis_bytes = (used_memory(&mut r.1) - before) as f64;
    let redis_rss = memory_field(&mut r.1, "used_memory_rss").saturating_sub(rss_before) as f64;
    drop(r);

    let (round0, rss0) = (LIVE_ROUNDED.load(Relaxed), rss());
    let mut db = Db::new();
    for c in &shape.commands {
        let args: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
        db.execute(&args);
    }
    let round = (LIVE_ROUNDED.load(Relaxed) - round0) as f64;
    let grown = rss().saturating_sub(rss0) as f64;
    let ratio = round / redis_bytes;
    println!(
        "{}: redis {:.1} B/element, ours {:.1} B/element ({:.2}x, bar {:.1}x); RSS growth: redis {:.1}, ours {:.1} B/element ({:.2}x)",
        shape.name,
        redis_bytes / n,
        round / n,
        ratio,
        shape.bar,
        redis_rss / n,
        grown / n,
        grown / redis_rss
    );
    drop(db);
    ratio
}

#[test]
#[ignore = "slow; run by hand with --release --ignored --nocapture"]
fn bytes_per_element_vs_redis() {
    let only = std::env::var("KV_MEM_SHAPE").ok();
    for &(name, elements, bar, build) in SHAPES {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        measure(&Shape {
            name,
            commands: build(),
            elements,
            bar,
        });
    }
}
