//! Big collections are freed off the shard's thread (`kvcore::lazyfree`): DEL, UNLINK and an
//! overwrite of a collection with many elements cost the shard a hand-off, not the frees.

use std::time::{Duration, Instant};

use crate::support::Server;

/// Commands that fill `key` with `n` elements of one collection type, in pipelined chunks.
type Fill = fn(&mut redis::Connection, &str, usize);

fn fill_zset(c: &mut redis::Connection, key: &str, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(key);
        for &i in chunk {
            cmd.arg(i).arg(format!("member:{i}"));
        }
        let _: i64 = cmd.query(c).unwrap();
    }
}

fn fill_list(c: &mut redis::Connection, key: &str, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut cmd = redis::cmd("RPUSH");
        cmd.arg(key);
        for &i in chunk {
            cmd.arg(format!("element:{i}"));
        }
        let _: i64 = cmd.query(c).unwrap();
    }
}

fn fill_set(c: &mut redis::Connection, key: &str, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut cmd = redis::cmd("SADD");
        cmd.arg(key);
        for &i in chunk {
            cmd.arg(format!("member:{i}"));
        }
        let _: i64 = cmd.query(c).unwrap();
    }
}

fn fill_hash(c: &mut redis::Connection, key: &str, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key);
        for &i in chunk {
            cmd.arg(format!("field:{i}")).arg(i);
        }
        let _: i64 = cmd.query(c).unwrap();
    }
}

/// Every collection type with a large encoding, by name, and how many elements make it
/// worth freeing in the background (a list frees one block per node of about 8 KiB).
const FILLS: &[(&str, Fill, usize)] = &[
    ("zset", fill_zset, 5_000),
    ("list", fill_list, 100_000),
    ("set", fill_set, 5_000),
    ("hash", fill_hash, 5_000),
];

fn stat(c: &mut redis::Connection, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("all").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("INFO has {field}"))
        .trim()
        .parse()
        .unwrap()
}

fn wait_freed(c: &mut redis::Connection, at_least: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(c, "lazyfreed_objects") < at_least {
        assert!(
            Instant::now() < deadline,
            "lazyfreed_objects never reached {at_least}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn del_unlink_and_overwrite_of_big_collections_free_in_the_background() {
    let srv = Server::start(&["--threads", "1"]);
    let mut c = srv.client();
    let mut freed = 0;
    for &(name, fill, big) in FILLS {
        for how in ["DEL", "UNLINK", "SET"] {
            fill(&mut c, "big", big);
            let reply: redis::Value = match how {
                "SET" => redis::cmd("SET").arg("big").arg("x").query(&mut c).unwrap(),
                _ => redis::cmd(how).arg("big").query(&mut c).unwrap(),
            };
            assert_ne!(reply, redis::Value::Int(0), "{name} {how}");
            freed += 1;
            wait_freed(&mut c, freed);
            let _: i64 = redis::cmd("DEL").arg("big").query(&mut c).unwrap();
        }
        // A small collection is freed in place: the counter does not move.
        fill(&mut c, "small", 10);
        let _: i64 = redis::cmd("DEL").arg("small").query(&mut c).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(stat(&mut c, "lazyfreed_objects"), freed, "{name}");
        assert_eq!(stat(&mut c, "lazyfree_pending_objects"), 0);
    }
}

/// The longest PING round trip seen by a second client while the first deletes a collection
/// of `KV_LAZYFREE_N` (default 2,000,000) elements of each type. Prints, asserts nothing about
/// time (machines vary): `cargo test -p kvserver --test server lazyfree_latency -- --ignored --nocapture`.
#[test]
#[ignore]
fn lazyfree_latency() {
    let n: usize = std::env::var("KV_LAZYFREE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let srv = Server::start(&["--threads", "1"]);
    let mut c = srv.client();
    for &(name, fill, _) in FILLS {
        fill(&mut c, "big", n);
        let port = srv.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pinger = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut p = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                let mut worst = Duration::ZERO;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = Instant::now();
                    let _: String = redis::cmd("PING").query(&mut p).unwrap();
                    worst = worst.max(t.elapsed());
                }
                worst
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        let _: i64 = redis::cmd("DEL").arg("big").query(&mut c).unwrap();
        let del = t.elapsed();
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let worst = pinger.join().unwrap();
        println!("{name} of {n}: DEL {del:?}, longest PING meanwhile {worst:?}");
    }
}
