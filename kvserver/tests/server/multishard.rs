//! Routing across shards: big pipelines, atomic multi-key commands, whole-keyspace commands.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::support::{call, cmd, read_replies, Server};

#[test]
fn pipeline_of_10000_mixed_commands_keeps_order() {
    let server = Server::start(&["--threads", "3"]);
    let mut s = server.raw();
    let mut req = Vec::new();
    let mut want: Vec<Vec<u8>> = Vec::new();
    for i in 0..2500 {
        req.extend(cmd(&format!("SET key:{i} {i}")));
        want.push(b"+OK\r\n".to_vec());
        req.extend(cmd(&format!("GET key:{i}")));
        want.push(format!("${}\r\n{i}\r\n", i.to_string().len()).into_bytes());
        req.extend(cmd(&format!("INCR ctr:{}", i % 7)));
        want.push(format!(":{}\r\n", i / 7 + 1).into_bytes());
        req.extend(cmd(&format!("MGET key:{i} key:{} nokey:{i}", i / 2)));
        let half = (i / 2).to_string();
        want.push(
            format!(
                "*3\r\n${}\r\n{i}\r\n${}\r\n{half}\r\n$-1\r\n",
                i.to_string().len(),
                half.len()
            )
            .into_bytes(),
        );
    }
    s.write_all(&req).unwrap();
    let got = read_replies(&mut s, want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(g),
            String::from_utf8_lossy(w),
            "reply {i}"
        );
    }
    assert_eq!(call(&mut s, "DBSIZE"), ":2507\r\n");
}

#[test]
fn keys_scan_and_dbsize_cover_all_shards() {
    let server = Server::start(&["--threads", "3"]);
    let mut c = server.client();
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 300);
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("k*").query(&mut c).unwrap();
    keys.sort();
    assert_eq!(keys.len(), 300);
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(17)
            .query(&mut c)
            .unwrap();
        seen.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 300);
    let info: String = redis::cmd("INFO").arg("keyspace").query(&mut c).unwrap();
    assert!(info.contains("db0:keys=300,expires=0"), "{info}");
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn rename_and_copy_across_shards() {
    let server = Server::start(&["--threads", "3"]);
    let mut s = server.raw();
    // Find two keys on different shards: with 3 shards, among a few keys some must differ.
    assert_eq!(call(&mut s, "SET src hello"), "+OK\r\n");
    assert_eq!(call(&mut s, "PEXPIRE src 100000"), ":1\r\n");
    for i in 0..8 {
        let dst = format!("dst{i}");
        assert_eq!(call(&mut s, &format!("RENAME src {dst}")), "+OK\r\n");
        assert_eq!(call(&mut s, "EXISTS src"), ":0\r\n");
        assert_eq!(call(&mut s, &format!("GET {dst}")), "$5\r\nhello\r\n");
        let ttl = call(&mut s, &format!("PTTL {dst}"));
        assert!(
            ttl.starts_with(':') && !ttl.starts_with(":-"),
            "ttl kept: {ttl}"
        );
        assert_eq!(call(&mut s, &format!("RENAME {dst} src")), "+OK\r\n");
        assert_eq!(call(&mut s, &format!("COPY src {dst}")), ":1\r\n");
        assert_eq!(call(&mut s, &format!("COPY src {dst}")), ":0\r\n");
        assert_eq!(call(&mut s, &format!("RENAMENX src {dst}")), ":0\r\n");
        assert_eq!(call(&mut s, &format!("DEL {dst}")), ":1\r\n");
    }
    assert_eq!(call(&mut s, "RENAME nokey other"), "-ERR no such key\r\n");
    assert_eq!(
        call(&mut s, "RENAMENX nokey other2"),
        "-ERR no such key\r\n"
    );
}

/// Sets the flag when dropped, so writers stop even if a reader panics.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Writers MSET all keys to one value; readers MGET all keys and fail if they ever see two
/// different values: half of an MSET.
#[test]
fn mset_is_atomic_for_concurrent_mget() {
    let server = Server::start(&["--threads", "3"]);
    let keys: Vec<String> = (0..12).map(|i| format!("atom:{i}")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for w in 0..2 {
        let (keys, stop, port) = (keys.clone(), stop.clone(), server.port);
        handles.push(std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .unwrap()
                .get_connection()
                .unwrap();
            let mut round = 0u64;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
                let mut m = redis::cmd("MSET");
                for k in &keys {
                    m.arg(k).arg(format!("w{w}-{round}"));
                }
                let _: () = m.query(&mut c).unwrap();
                round += 1;
            }
            0usize
        }));
    }
    for _ in 0..2 {
        let (keys, stop, port) = (keys.clone(), stop.clone(), server.port);
        handles.push(std::thread::spawn(move || {
            let _stop = StopOnDrop(stop);
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .unwrap()
                .get_connection()
                .unwrap();
            let mut checks = 0;
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while checks < 1500 && std::time::Instant::now() < until {
                let vals: Vec<Option<String>> =
                    redis::cmd("MGET").arg(&keys).query(&mut c).unwrap();
                if vals[0].is_none() {
                    assert!(
                        vals.iter().all(Option::is_none),
                        "half-visible MSET: {vals:?}"
                    );
                    continue;
                }
                assert!(
                    vals.iter().all(|v| v == &vals[0]),
                    "MGET saw a mix of two MSETs: {vals:?}"
                );
                checks += 1;
            }
            checks
        }));
    }
    let checks: usize = handles
        .into_iter()
        .map(|h| h.join().expect("no thread panicked"))
        .sum();
    assert!(checks >= 100, "readers checked only {checks} full MGETs");
}

#[test]
fn msetnx_never_half_applies() {
    let server = Server::start(&["--threads", "3"]);
    let mut s = server.raw();
    assert_eq!(call(&mut s, "SET p5 taken"), "+OK\r\n");
    assert_eq!(call(&mut s, "MSETNX p1 a p2 b p3 c p4 d p5 e"), ":0\r\n");
    assert_eq!(call(&mut s, "EXISTS p1 p2 p3 p4"), ":0\r\n");
    assert_eq!(call(&mut s, "MSETNX p1 a p2 b p3 c p4 d"), ":1\r\n");
    assert_eq!(call(&mut s, "EXISTS p1 p2 p3 p4"), ":4\r\n");
}

/// Regression: a message for shard N must reach the executor that owns shard N. (glommio's
/// channel mesh numbered peers by join order, not shard order; a key written from one
/// executor's connection landed on a different executor than local writes, so other
/// connections could not see it.)
#[test]
fn every_connection_sees_every_key() {
    let server = Server::start(&["--threads", "3"]);
    let mut conns: Vec<std::net::TcpStream> = (0..24).map(|_| server.raw()).collect();
    for (i, s) in conns.iter_mut().enumerate() {
        for j in 0..10 {
            assert_eq!(call(s, &format!("SET k{i}:{j} v{i}")), "+OK\r\n");
        }
    }
    for s in conns.iter_mut() {
        for i in 0..24 {
            for j in 0..10 {
                let want = format!("${}\r\nv{i}\r\n", format!("v{i}").len());
                assert_eq!(call(s, &format!("GET k{i}:{j}")), want, "k{i}:{j}");
            }
        }
    }
}

/// `moved_connections` from INFO stats.
fn moved(s: &mut std::net::TcpStream) -> u64 {
    let info = call(s, "INFO stats");
    info.lines()
        .find_map(|l| l.strip_prefix("moved_connections:"))
        .expect("INFO stats has moved_connections")
        .trim()
        .parse()
        .unwrap()
}

/// Waits until `moved_connections` reaches `want` (the move is counted a moment after the
/// replies that triggered it are sent), then checks it stays there.
fn expect_moved(s: &mut std::net::TcpStream, want: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while moved(s) < want && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(moved(s), want);
}

/// A client whose keys all live on the other shard moves there, mid-pipeline or between
/// pipelines, with every reply in order and no command lost or run twice; a client whose keys
/// alternate between shards stays put.
#[test]
fn a_client_moves_to_the_shard_of_its_keys() {
    let server = Server::start(&["--threads", "2"]);
    // With 2 shards, "foo" (slot 12182) lives on shard 1 and "bar" (slot 5061) on shard 0.
    let mut watcher = server.raw();
    let mut s = server.raw();
    // The session moves with the socket: its database and name.
    assert_eq!(call(&mut s, "SELECT 2"), "+OK\r\n");
    assert_eq!(call(&mut s, "CLIENT SETNAME mover"), "+OK\r\n");
    let mut counts = std::collections::HashMap::new();
    let mut pipeline = |s: &mut std::net::TcpStream, keys: &[&str]| {
        let mut req = Vec::new();
        let mut want = Vec::new();
        for k in keys {
            req.extend(cmd(&format!("INCR {k}")));
            let n = counts.entry(k.to_string()).or_insert(0u64);
            *n += 1;
            want.push(format!(":{n}\r\n"));
        }
        s.write_all(&req).unwrap();
        let got = read_replies(s, want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(String::from_utf8_lossy(g), *w, "reply {i}");
        }
    };
    pipeline(&mut s, &["foo"; 300]);
    std::thread::sleep(std::time::Duration::from_millis(50));
    // The connection started on either shard; now it is on shard 1.
    let first = moved(&mut watcher);
    assert!(first <= 1, "{first}");
    for (round, key) in ["bar", "foo", "bar"].into_iter().enumerate() {
        pipeline(&mut s, &[key; 300]);
        expect_moved(&mut watcher, first + round as u64 + 1);
    }
    // Now on shard 0: keys on both shards in turn never make 64 hops in a row.
    let mixed: Vec<&str> = (0..400)
        .map(|i| if i % 2 == 0 { "foo" } else { "bar" })
        .collect();
    pipeline(&mut s, &mixed);
    // Single commands, each its own batch, move the client too.
    for _ in 0..70 {
        pipeline(&mut s, &["foo"]);
    }
    expect_moved(&mut watcher, first + 4);
    assert_eq!(
        call(&mut s, "MGET foo bar"),
        "*2\r\n$3\r\n870\r\n$3\r\n800\r\n"
    );
    assert_eq!(call(&mut s, "CLIENT GETNAME"), "$5\r\nmover\r\n");
    assert_eq!(call(&mut watcher, "DBSIZE"), ":0\r\n");
    assert_eq!(call(&mut watcher, "SELECT 2"), "+OK\r\n");
    assert_eq!(call(&mut watcher, "DBSIZE"), ":2\r\n");
    // CLIENT KILL reaches it on its new shard.
    assert_eq!(call(&mut watcher, "CLIENT KILL SKIPME yes"), ":1\r\n");
    assert!(crate::support::closed(&mut s));
}

#[test]
fn swapdb_swaps_every_shard_and_wakes_blocked_clients() {
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let mut c = server.client();
        for i in 0..60 {
            let _: () = redis::cmd("SET")
                .arg(format!("a{i}"))
                .arg(i)
                .query(&mut c)
                .unwrap();
        }
        let _: () = redis::cmd("SELECT").arg(1).query(&mut c).unwrap();
        let _: () = redis::cmd("ZADD")
            .arg("z")
            .arg(1)
            .arg("m")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("SELECT").arg(0).query(&mut c).unwrap();
        // A client blocked on `z` in database 0 is served once database 1's `z` moves there.
        let mut blocked = server.raw();
        blocked
            .write_all(&crate::support::cmd("BZPOPMIN z 5"))
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let ok: String = redis::cmd("SWAPDB").arg(0).arg(1).query(&mut c).unwrap();
        assert_eq!(ok, "OK");
        let got = read_replies(&mut blocked, 1).remove(0);
        assert_eq!(got, b"*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n1\r\n", "{threads}");
        let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(n, 0, "the popped set was the only key of database 1");
        let _: () = redis::cmd("SELECT").arg(1).query(&mut c).unwrap();
        let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(n, 60, "{threads}");
        let v: i64 = redis::cmd("GET").arg("a7").query(&mut c).unwrap();
        assert_eq!(v, 7);
        let mut raw = server.raw();
        assert_eq!(
            call(&mut raw, "SWAPDB 0 16"),
            "-ERR DB index is out of range\r\n"
        );
        assert_eq!(
            call(&mut raw, "SWAPDB x 1"),
            "-ERR invalid first DB index\r\n"
        );
        assert_eq!(
            call(&mut raw, "SWAPDB 1 1.5"),
            "-ERR invalid second DB index\r\n"
        );
        assert_eq!(call(&mut raw, "SWAPDB 3 3"), "+OK\r\n");
    }
}

/// Pipelined GETs and SETs, whose replies pass the output buffer's flush mark partway
/// through a window (100 KiB values, 256 KiB mark) and whose keys alternate between shards,
/// are each answered once, in order: the express run stops at the mark and at a key of
/// another shard, and the window goes on from the next command.
#[test]
fn express_runs_stop_at_the_flush_mark_and_at_other_shards() {
    for threads in [1usize, 3] {
        let server = Server::start(&["--threads", &threads.to_string()]);
        let mut s = server.raw();
        let big: Vec<String> = (0..3)
            .map(|i| {
                char::from(b'a' + i)
                    .to_string()
                    .repeat(100 * 1024 + i as usize)
            })
            .collect();
        let keys: Vec<String> = (0..3)
            .map(|i| crate::support::key_on("big", i, 3, 0))
            .collect();
        let mut req = Vec::new();
        let mut want: Vec<Vec<u8>> = Vec::new();
        for (k, v) in keys.iter().zip(&big) {
            req.extend(crate::support::encode(&[
                b"SET",
                k.as_bytes(),
                v.as_bytes(),
            ]));
            want.push(b"+OK\r\n".to_vec());
        }
        for round in 0..40usize {
            let i = round % 3;
            let k = &keys[if round % 5 == 4 { (i + 1) % 3 } else { i }];
            let v = &big[keys.iter().position(|x| x == k).unwrap()];
            req.extend(cmd(&format!("GET {k}")));
            want.push(format!("${}\r\n{v}\r\n", v.len()).into_bytes());
            req.extend(cmd(&format!("SET small:{round} {round}")));
            want.push(b"+OK\r\n".to_vec());
            if round % 7 == 0 {
                req.extend(cmd(&format!("GET small:{round}")));
                want.push(format!("${}\r\n{round}\r\n", round.to_string().len()).into_bytes());
            }
        }
        s.write_all(&req).unwrap();
        let got = read_replies(&mut s, want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g == w,
                "reply {i} with {threads} shards: {} bytes, want {}",
                g.len(),
                w.len()
            );
        }
        assert_eq!(call(&mut s, "DBSIZE"), ":43\r\n");
        let stats = call(&mut s, "INFO commandstats");
        assert!(stats.contains("cmdstat_get:calls=46,"), "{stats}");
        assert!(stats.contains("cmdstat_set:calls=43,"), "{stats}");
    }
}
