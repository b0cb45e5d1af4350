//! Memory per sorted-set member, ours against redis-server. Run by hand:
//! `cargo test --release -p kvcore --test zset_memory -- --ignored --nocapture`
//!
//! Two shapes: one set of 1M members, and 100k sets of 16 members. For us it reports the bytes
//! the allocator handed out (a counting global allocator: requested bytes, and the same rounded
//! to 16-byte size classes as mimalloc and jemalloc do for small blocks), the store's own
//! accounting (`Db::estimated_memory`) and the RSS growth; for Redis the growth of INFO
//! `used_memory` (jemalloc's allocated bytes).

use std::sync::atomic::Ordering::Relaxed;

use kvcore::Db;
use mem_harness::{pipeline, redis, rss, used_memory, Counting, LIVE, LIVE_ROUNDED};

mod mem_harness;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `(key, score, member)` triples of a shape.
fn shape(big: bool) -> Vec<(String, u64, String)> {
    let mut rng = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    if big {
        (0..1_000_000)
            .map(|i| ("bench:z".to_string(), next() % 1_000_000, format!("m:{i}")))
            .collect()
    } else {
        (0..100_000)
            .flat_map(|k| (0..16).map(move |j| (format!("s:{k}"), j, format!("m:{j}"))))
            .collect()
    }
}

fn measure(big: bool) {
    let items = shape(big);
    let n = items.len() as f64;
    let name = if big {
        "1 set x 1M members"
    } else {
        "100k sets x 16 members"
    };

    let mut r = redis();
    let before = used_memory(&mut r.1);
    for chunk in items.chunks(1000) {
        let cmds: Vec<Vec<String>> = chunk
            .iter()
            .map(|(k, s, m)| vec!["ZADD".into(), k.clone(), s.to_string(), m.clone()])
            .collect();
        pipeline(&mut r.1, &cmds);
    }
    let redis_bytes = used_memory(&mut r.1) - before;
    drop(r);

    let (live0, round0, rss0) = (LIVE.load(Relaxed), LIVE_ROUNDED.load(Relaxed), rss());
    let mut db = Db::new();
    let est0 = db.estimated_memory();
    let mut sbuf = itoa::Buffer::new();
    for (k, s, m) in &items {
        let s = sbuf.format(*s).to_string();
        db.execute(&[b"ZADD", k.as_bytes(), s.as_bytes(), m.as_bytes()]);
    }
    let live = LIVE.load(Relaxed) - live0;
    let round = LIVE_ROUNDED.load(Relaxed) - round0;
    let est = db.estimated_memory() - est0;
    let grown = rss().saturating_sub(rss0);
    println!("{name}:");
    println!(
        "  redis used_memory delta: {:>6.1} B/member",
        redis_bytes as f64 / n
    );
    println!(
        "  ours allocated:          {:>6.1} B/member requested, {:.1} B/member in 16-byte classes ({:.2}x redis)",
        live as f64 / n,
        round as f64 / n,
        round as f64 / redis_bytes as f64
    );
    println!(
        "  ours Db accounting:      {:>6.1} B/member; RSS growth {:.1} B/member",
        est as f64 / n,
        grown as f64 / n
    );
    drop(db);
}

#[test]
#[ignore = "slow; run by hand with --release --ignored --nocapture"]
fn bytes_per_member_vs_redis() {
    measure(true);
    measure(false);
}
