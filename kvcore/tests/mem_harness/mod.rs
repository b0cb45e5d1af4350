//! Shared by the memory tests: a counting global allocator (requested bytes, and the same
//! rounded to 16-byte size classes as mimalloc and jemalloc do for small blocks), RSS, and a
//! throwaway redis-server to compare INFO `used_memory` against.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// The counting allocator; forwards to the system allocator.
pub struct Counting;
/// Live requested bytes.
pub static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Live bytes rounded up to 16-byte classes.
pub static LIVE_ROUNDED: AtomicUsize = AtomicUsize::new(0);

/// `n` rounded up to a 16-byte class.
pub fn rounded(n: usize) -> usize {
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

/// Resident bytes of this process.
pub fn rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    s.split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(0)
        * 4096
}

/// A redis-server child and a connection to it; killed on drop.
pub struct Redis(Child, pub TcpStream);
impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a redis-server on a free port without persistence.
pub fn redis() -> Redis {
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
            "--dir",
            std::env::temp_dir().to_str().unwrap(),
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
pub fn pipeline(c: &mut TcpStream, cmds: &[Vec<String>]) -> Vec<u8> {
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

/// INFO `used_memory` of the server.
pub fn used_memory(c: &mut TcpStream) -> usize {
    memory_field(c, "used_memory")
}

/// A numeric field of the server's INFO memory.
pub fn memory_field(c: &mut TcpStream, field: &str) -> usize {
    c.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let mut buf = vec![0u8; 1 << 16];
    let n = c.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}
