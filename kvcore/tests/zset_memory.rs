//! Memory per sorted-set member, ours against redis-server. Run by hand:
//! `cargo test --release -p kvcore --test zset_memory -- --ignored --nocapture`
//!
//! Two shapes: one set of 1M members, and 100k sets of 16 members. For us it reports the bytes
//! the allocator handed out (a counting global allocator: requested bytes, and the same rounded
//! to 16-byte size classes as mimalloc and jemalloc do for small blocks), the store's own
//! accounting (`Db::estimated_memory`) and the RSS growth; for Redis the growth of INFO
//! `used_memory` (jemalloc's allocated bytes).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use kvcore::Db;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static LIVE_ROUNDED: AtomicUsize = AtomicUsize::new(0);

fn rounded(n: usize) -> usize {
    n.div_ceil(16).max(1) * 16
}

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Relaxed);
        LIVE_ROUNDED.fetch_add(rounded(l.size()), Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        LIVE_ROUNDED.fetch_sub(rounded(l.size()), Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    s.split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(0)
        * 4096
}

struct Redis(Child, TcpStream);
impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis() -> Redis {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..250 {
        if let Ok(c) = TcpStream::connect(("127.0.0.1", port)) {
            return Redis(child, c);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("redis-server did not start");
}

/// Sends commands pipelined and reads back as many replies (each a single line here).
fn pipeline(c: &mut TcpStream, cmds: &[Vec<String>]) -> Vec<u8> {
    let mut req = Vec::new();
    for cmd in cmds {
        req.extend_from_slice(format!("*{}\r\n", cmd.len()).as_bytes());
        for a in cmd {
            req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    c.write_all(&req).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while got.iter().filter(|&&b| b == b'\n').count() < cmds.len() {
        let n = c.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
    }
    got
}

fn used_memory(c: &mut TcpStream) -> usize {
    c.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let mut buf = vec![0u8; 1 << 16];
    let n = c.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

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
