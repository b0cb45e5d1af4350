//! Resident memory per element of hashes, sets and lists in the real server (mimalloc, one
//! shard) against redis-server, same data, same client: the RSS each process gains while the
//! last nine tenths of the data go in, per element. Measuring from the first tenth on leaves
//! out what a process spends once, whatever it then stores (its first connection's buffers,
//! the allocator's first page of each size class: about 1.3 MB for us, 13 bytes per element
//! of a 100k-element shape); the cold figure (from an empty server) is printed beside it. Run by
//! hand: `cargo test --release -p kvserver --test server collection_rss -- --ignored --nocapture`
//! (`KV_MEM_SHAPE=name` runs one shape). Each server is measured after it has sat idle for
//! `KV_MEM_SETTLE_MS` (default 3000) once loaded, so that memory both allocators have freed
//! but not yet handed back (jemalloc's and mimalloc's purge delays) is not counted.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{encode, rss_kib_of, Server};

fn val16(i: usize) -> String {
    format!("v{i:015}")
}

/// Name, elements, the bar (fraction of Redis's bytes), and what builds the commands.
type Shape = (&'static str, usize, f64, Box<dyn Fn() -> Vec<Vec<String>>>);

fn shapes() -> Vec<Shape> {
    let s = |x: &str| x.to_string();
    vec![
        (
            "100k hashes x 10 fields, 16-byte values",
            1_000_000,
            0.8,
            Box::new(move || {
                (0..100_000)
                    .map(|k| {
                        let mut c = vec![s("HSET"), format!("h:{k}")];
                        for j in 0..10 {
                            c.push(format!("field{j}"));
                            c.push(val16(k * 10 + j));
                        }
                        c
                    })
                    .collect()
            }),
        ),
        (
            "100k sets x 10 small integers",
            1_000_000,
            0.8,
            Box::new(move || {
                (0..100_000)
                    .map(|k| {
                        let mut c = vec![s("SADD"), format!("si:{k}")];
                        c.extend((0..10).map(|j| (j * 7 + k % 100).to_string()));
                        c
                    })
                    .collect()
            }),
        ),
        (
            "100k sets x 10 short strings",
            1_000_000,
            0.8,
            Box::new(move || {
                (0..100_000)
                    .map(|k| {
                        let mut c = vec![s("SADD"), format!("ss:{k}")];
                        c.extend((0..10).map(|j| format!("tag:{j}:{}", k % 50)));
                        c
                    })
                    .collect()
            }),
        ),
        (
            "1 list x 10M 16-byte elements",
            10_000_000,
            0.9,
            Box::new(move || {
                (0..100_000)
                    .map(|b| {
                        let mut c = vec![s("RPUSH"), s("biglist")];
                        c.extend((0..100).map(|j| val16(b * 100 + j)));
                        c
                    })
                    .collect()
            }),
        ),
        (
            "1 hash x 1M fields, 16-byte values",
            1_000_000,
            0.9,
            Box::new(move || {
                (0..10_000)
                    .map(|b| {
                        let mut c = vec![s("HSET"), s("bighash")];
                        for j in 0..100 {
                            c.push(format!("f:{}", b * 100 + j));
                            c.push(val16(b * 100 + j));
                        }
                        c
                    })
                    .collect()
            }),
        ),
    ]
}

/// Sends `cmds` pipelined in chunks, reading every reply (each one line here).
fn load(port: u16, cmds: &[Vec<String>]) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    for chunk in cmds.chunks(100) {
        let mut req = Vec::new();
        for c in chunk {
            let args: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
            req.extend(encode(&args));
        }
        s.write_all(&req).unwrap();
        let mut lines = 0;
        while lines < chunk.len() {
            let n = s.read(&mut buf).unwrap();
            lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
        }
    }
}

fn rss_of(pid: u32) -> u64 {
    rss_kib_of(&pid.to_string()) * 1024
}

/// Loads the first `tenth` commands, then the rest, letting the server settle after each; returns
/// the RSS gained in all and over the rest.
fn measure(
    port: u16,
    cmds: &[Vec<String>],
    tenth: usize,
    settle: Duration,
    rss: impl Fn() -> u64,
) -> (f64, f64) {
    let empty = rss();
    load(port, &cmds[..tenth]);
    std::thread::sleep(settle);
    let first = rss();
    load(port, &cmds[tenth..]);
    std::thread::sleep(settle);
    let full = rss();
    (
        full.saturating_sub(empty) as f64,
        full.saturating_sub(first) as f64,
    )
}

#[test]
#[ignore = "slow; run by hand with --release --ignored --nocapture"]
fn collection_rss_vs_redis() {
    let only = std::env::var("KV_MEM_SHAPE").ok();
    let settle = Duration::from_millis(
        std::env::var("KV_MEM_SETTLE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3000),
    );
    for (name, elements, bar, build) in shapes() {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let cmds = build();
        let tenth = cmds.len() / 10;
        let ours = Server::start(&["--threads", "1"]);
        let ours_rss = || ours.rss_kib() * 1024;
        let ours_growth = measure(ours.port, &cmds, tenth, settle, ours_rss);
        drop(ours);

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut redis = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(std::env::temp_dir())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let redis_id = redis.id();
        let redis_growth = measure(port, &cmds, tenth, settle, || rss_of(redis_id));
        let _ = redis.kill();
        let _ = redis.wait();
        let n = elements as f64;
        let (ours_cold, ours_warm) = (ours_growth.0 / n, ours_growth.1 / (0.9 * n));
        let (redis_cold, redis_warm) = (redis_growth.0 / n, redis_growth.1 / (0.9 * n));
        println!(
            "{name}: RSS per element over the last nine tenths: ours {ours_warm:.1} B, redis \
             {redis_warm:.1} B, {:.2}x (bar {bar}x); from empty: ours {ours_cold:.1} B, redis \
             {redis_cold:.1} B, {:.2}x",
            ours_warm / redis_warm,
            ours_cold / redis_cold
        );
    }
}
