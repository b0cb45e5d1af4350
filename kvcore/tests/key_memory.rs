//! Memory per string key, ours against redis-server. Run by hand:
//! `cargo test --release -p kvcore --test key_memory -- --ignored --nocapture`
//!
//! 1M keys `key:000000123456` (16 bytes, as `redis-benchmark -r` names them) with 64-byte values
//! without and with a TTL, and with 3-byte (`redis-benchmark`'s default) and 20-byte values. For us: bytes requested from the allocator, the same in
//! 16-byte classes, and `Db::estimated_memory`; for Redis the growth of INFO `used_memory`.

use std::sync::atomic::Ordering::Relaxed;

use kvcore::Db;
use mem_harness::{pipeline, redis, used_memory, Counting, LIVE, LIVE_ROUNDED};

mod mem_harness;

#[global_allocator]
static GLOBAL: Counting = Counting;

const KEYS: usize = 1_000_000;

fn command(i: usize, size: usize, ttl: bool) -> Vec<String> {
    let mut c = vec!["SET".into(), format!("key:{i:012}"), "x".repeat(size)];
    if ttl {
        c.extend(["EX".into(), "3600".into()]);
    }
    c
}

fn measure(size: usize, ttl: bool) {
    let n = KEYS as f64;
    let mut r = redis();
    let before = used_memory(&mut r.1);
    for start in (0..KEYS).step_by(1000) {
        let cmds: Vec<Vec<String>> = (start..start + 1000)
            .map(|i| command(i, size, ttl))
            .collect();
        pipeline(&mut r.1, &cmds);
    }
    let redis_bytes = used_memory(&mut r.1) - before;
    drop(r);

    let (live0, round0) = (LIVE.load(Relaxed), LIVE_ROUNDED.load(Relaxed));
    let mut db = Db::new();
    let est0 = db.estimated_memory();
    for i in 0..KEYS {
        let c = command(i, size, ttl);
        let args: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
        db.execute(&args);
    }
    let live = LIVE.load(Relaxed) - live0;
    let round = LIVE_ROUNDED.load(Relaxed) - round0;
    let est = db.estimated_memory() - est0;
    println!(
        "1M SET key:<12 digits> <{size} bytes>{}:",
        if ttl { " EX 3600" } else { "" }
    );
    println!(
        "  redis used_memory delta: {:>6.1} B/key",
        redis_bytes as f64 / n
    );
    println!(
        "  ours allocated:          {:>6.1} B/key requested, {:.1} B/key in 16-byte classes ({:.2}x redis)",
        live as f64 / n,
        round as f64 / n,
        round as f64 / redis_bytes as f64
    );
    println!("  ours Db accounting:      {:>6.1} B/key", est as f64 / n);
    drop(db);
}

#[test]
#[ignore = "slow; run by hand with --release --ignored --nocapture"]
fn bytes_per_key_vs_redis() {
    measure(64, false);
    measure(64, true);
    measure(3, false);
    measure(20, false);
}
