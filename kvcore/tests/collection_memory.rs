//! Memory per element of hashes, sets and lists, ours against redis-server, same data. Run by
//! hand: `cargo test --release -p kvcore --test collection_memory -- --ignored --nocapture`
//! (`KV_MEM_SHAPE=name` runs one shape).
//!
//! For us: the bytes the allocator handed out, rounded to 16-byte size classes as mimalloc and
//! jemalloc do for small blocks (a counting global allocator), and the RSS growth; for Redis:
//! the growth of INFO `used_memory` (jemalloc's allocated bytes). Keys are included: the
//! figure is what one more element costs a user, whatever it is made of.

use std::sync::atomic::Ordering::Relaxed;

use kvcore::Db;
use mem_harness::{pipeline, redis, rss, used_memory, Counting, LIVE_ROUNDED};

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

fn shapes() -> Vec<Shape> {
    let s = |v: &str| v.to_string();
    let hashes: Vec<Vec<String>> = (0..100_000)
        .map(|k| {
            let mut c = vec![s("HSET"), format!("h:{k}")];
            for j in 0..10 {
                c.push(format!("field{j}"));
                c.push(val16(k * 10 + j));
            }
            c
        })
        .collect();
    let int_sets: Vec<Vec<String>> = (0..100_000)
        .map(|k| {
            let mut c = vec![s("SADD"), format!("si:{k}")];
            c.extend((0..10).map(|j| (j * 7 + k % 100).to_string()));
            c
        })
        .collect();
    let str_sets: Vec<Vec<String>> = (0..100_000)
        .map(|k| {
            let mut c = vec![s("SADD"), format!("ss:{k}")];
            c.extend((0..10).map(|j| format!("tag:{j}:{}", k % 50)));
            c
        })
        .collect();
    let list: Vec<Vec<String>> = (0..100_000)
        .map(|b| {
            let mut c = vec![s("RPUSH"), s("biglist")];
            c.extend((0..100).map(|j| val16(b * 100 + j)));
            c
        })
        .collect();
    let big_hash: Vec<Vec<String>> = (0..10_000)
        .map(|b| {
            let mut c = vec![s("HSET"), s("bighash")];
            for j in 0..100 {
                c.push(format!("f:{}", b * 100 + j));
                c.push(val16(b * 100 + j));
            }
            c
        })
        .collect();
    vec![
        Shape {
            name: "100k hashes x 10 fields, 16-byte values",
            commands: hashes,
            elements: 1_000_000,
            bar: 0.8,
        },
        Shape {
            name: "100k sets x 10 small integers",
            commands: int_sets,
            elements: 1_000_000,
            bar: 0.8,
        },
        Shape {
            name: "100k sets x 10 short strings",
            commands: str_sets,
            elements: 1_000_000,
            bar: 0.8,
        },
        Shape {
            name: "1 list x 10M 16-byte elements",
            commands: list,
            elements: 10_000_000,
            bar: 0.9,
        },
        Shape {
            name: "1 hash x 1M fields, 16-byte values",
            commands: big_hash,
            elements: 1_000_000,
            bar: 0.9,
        },
    ]
}

fn measure(shape: &Shape) -> f64 {
    let n = shape.elements as f64;
    let mut r = redis();
    let before = used_memory(&mut r.1);
    for chunk in shape.commands.chunks(100) {
        pipeline(&mut r.1, chunk);
    }
    let redis_bytes = (used_memory(&mut r.1) - before) as f64;
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
        "{}: redis {:.1} B/element, ours {:.1} B/element ({:.2}x, bar {:.1}x), our RSS growth {:.1} B/element",
        shape.name,
        redis_bytes / n,
        round / n,
        ratio,
        shape.bar,
        grown / n
    );
    drop(db);
    ratio
}

#[test]
#[ignore = "slow; run by hand with --release --ignored --nocapture"]
fn bytes_per_element_vs_redis() {
    let only = std::env::var("KV_MEM_SHAPE").ok();
    for shape in shapes() {
        if only.as_deref().is_some_and(|o| !shape.name.contains(o)) {
            continue;
        }
        measure(&shape);
    }
}
