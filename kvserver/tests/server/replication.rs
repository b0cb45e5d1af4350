//! Replication: kvserver replicating from kvserver with 1 and 3 shards on either side, Debian's
//! redis-server as a replica of kvserver and kvserver as a replica of redis-server, failover
//! without a full synchronization, link faults through a proxy (cut, stall) with PSYNC
//! continuing while the backlog holds the gap and a full synchronization when it does not,
//! a stalled replica cut off at its output limit, WAIT, READONLY and ROLE.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::persistence::{contents, fill, q, redis_server_with, TempDir};
use crate::support::{call, key_on, Server};

/// Waits up to `secs` for `f`; panics with `what` when it never holds.
pub(crate) fn eventually(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("never happened: {what}");
}

/// An INFO replication field.
fn field(c: &mut redis::Connection, name: &str) -> String {
    let info: String = q(c, &["INFO", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or("")
        .to_string()
}

/// Waits until the replica behind `r` is linked and has applied everything `m` has streamed.
fn caught_up(m: &mut redis::Connection, r: &mut redis::Connection) {
    eventually(20, "the replica catches up", || {
        field(r, "master_link_status") == "up"
            && field(r, "slave_repl_offset") == field(m, "master_repl_offset")
    });
}

/// A master and a replica started with these arguments, the replica synchronized: both
/// servers and a client of each.
fn pair(
    master: &[&str],
    replica: &[&str],
) -> (Server, Server, redis::Connection, redis::Connection) {
    let (master, replica) = (Server::start(master), Server::start(replica));
    let (mut m, mut r) = (master.client(), replica.client());
    let ok: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    assert_eq!(ok, "OK");
    caught_up(&mut m, &mut r);
    (master, replica, m, r)
}

/// A synchronized pair (one shard each) holding `key` = `value` past its deadline on both,
/// deleted on neither: the master's active expiry is off, so only a lookup there deletes it.
fn expired_on_both(
    key: &str,
    value: &str,
) -> (Server, Server, redis::Connection, redis::Connection) {
    let (master, replica, mut m, mut r) = pair(
        &[
            "--threads",
            "1",
            "--save",
            "",
            "--enable-debug-command",
            "local",
        ],
        &["--threads", "1", "--save", ""],
    );
    let _: () = q(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let _: () = q(&mut m, &["SET", key, value, "PX", "50"]);
    caught_up(&mut m, &mut r);
    std::thread::sleep(Duration::from_millis(100));
    (master, replica, m, r)
}

/// Every key of databases 0 and 2 (see `persistence::contents`), with the exact TTL dropped.
fn data(c: &mut redis::Connection) -> BTreeMap<(i64, String), String> {
    contents(c)
}

/// Two servers' data are the same; on a difference, says which key first (not all of it).
fn same(
    a: BTreeMap<(i64, String), String>,
    b: BTreeMap<(i64, String), String>,
    what: impl std::fmt::Display,
) {
    if a == b {
        return;
    }
    let first = a
        .iter()
        .zip(b.iter())
        .find(|(x, y)| x != y)
        .map(|(x, y)| format!("{:?} vs {:?}", x.0, y.0));
    let cut = |s: String| s.chars().take(300).collect::<String>();
    panic!(
        "{what}: {} keys vs {}; first difference: {}",
        a.len(),
        b.len(),
        cut(first.unwrap_or_else(|| "one is a prefix of the other".into()))
    );
}

/// A write load over every shard: strings, counters, lists, sets, hashes, sorted sets, multi-key
/// commands spanning shards, transactions, expiry and deletes; `tag` keeps loads apart.
fn load(c: &mut redis::Connection, tag: &str, rounds: usize) {
    for i in 0..rounds {
        let k = format!("{tag}:{}", i % 97);
        let _: () = q(c, &["SET", &k, &i.to_string()]);
        let _: i64 = q(c, &["INCR", &format!("{tag}:ctr:{}", i % 13)]);
        let _: i64 = q(c, &["RPUSH", &format!("{tag}:l:{}", i % 7), &k]);
        let _: i64 = q(c, &["SADD", &format!("{tag}:s:{}", i % 5), &k]);
        let _: i64 = q(c, &["HSET", &format!("{tag}:h:{}", i % 5), &k, "v"]);
        let _: i64 = q(c, &["ZADD", &format!("{tag}:z"), &i.to_string(), &k]);
        if i % 10 == 0 {
            let (a, b, d) = (
                format!("{tag}:ma{i}"),
                format!("{tag}:mb{i}"),
                format!("{tag}:mc{i}"),
            );
            let _: () = q(c, &["MSET", &a, "1", &b, "2", &d, "3"]);
            let _: i64 = q(c, &["DEL", &a, &format!("{tag}:{}", (i + 50) % 97)]);
            let _: () = redis::pipe()
                .atomic()
                .cmd("INCR")
                .arg(format!("{tag}:tx:a"))
                .cmd("INCR")
                .arg(format!("{tag}:tx:b"))
                .query(c)
                .unwrap();
            let _: i64 = q(c, &["EXPIRE", &b, "3600"]);
            let _: Option<String> = q(c, &["LPOP", &format!("{tag}:l:{}", i % 7)]);
        }
        if i % 50 == 0 {
            let _: i64 = q(c, &["PEXPIRE", &d_key(tag, i), "1"]);
        }
    }
}

fn d_key(tag: &str, i: usize) -> String {
    format!("{tag}:mc{}", i - i % 10)
}

#[test]
fn kvserver_replicates_kvserver_with_1_and_3_shards() {
    for (mn, rn) in [("1", "3"), ("3", "1"), ("3", "3")] {
        let master = Server::start(&["--threads", mn, "--save", ""]);
        let replica = Server::start(&["--threads", rn, "--save", ""]);
        let (mut m, mut r) = (master.client(), replica.client());
        fill(&mut m);
        load(&mut m, "before", 200);
        let _: () = q(&mut r, &["SET", "replica-own", "gone after the sync"]);
        let port = master.port.to_string();
        let ok: String = q(&mut r, &["REPLICAOF", "127.0.0.1", &port]);
        assert_eq!(ok, "OK");
        let again: String = q(&mut r, &["REPLICAOF", "127.0.0.1", &port]);
        assert_eq!(again, "OK Already connected to specified master");
        caught_up(&mut m, &mut r);
        same(
            data(&mut r),
            data(&mut m),
            "after the full sync, {mn} -> {rn}",
        );
        // Live writes from several clients at once, on every shard.
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let mut c = master.client();
                std::thread::spawn(move || load(&mut c, &format!("live{t}"), 300))
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        crate::aof::stream_churn(&mut m);
        let acked: i64 = q(&mut m, &["WAIT", "1", "5000"]);
        assert_eq!(acked, 1);
        caught_up(&mut m, &mut r);
        same(
            data(&mut r),
            data(&mut m),
            "after the live load, {mn} -> {rn}",
        );
        let role: Vec<redis::Value> = q(&mut r, &["ROLE"]);
        assert_eq!(role.len(), 5);
        assert_eq!(role[0], redis::Value::BulkString(b"slave".to_vec()));
        // Redis's words, byte for byte; a write spanning shards too.
        let mut raw = replica.raw();
        for w in ["SET x 1", "MSET a 1 b 2 c 3", "FLUSHALL"] {
            assert_eq!(
                call(&mut raw, w),
                "-READONLY You can't write against a read only replica.\r\n"
            );
        }
        let info_m: String = q(&mut m, &["INFO", "replication"]);
        assert!(info_m.contains("connected_slaves:1\r\n"), "{info_m}");
        // CLIENT LIST and KILL know the replica (S) and the master's link (M).
        let list: String = q(&mut m, &["CLIENT", "LIST", "TYPE", "replica"]);
        assert_eq!(list.lines().count(), 1, "{list}");
        assert!(list.contains(" flags=S "), "{list}");
        let list: String = q(&mut r, &["CLIENT", "LIST", "TYPE", "master"]);
        assert!(list.contains(" flags=M "), "{list}");
        let killed: i64 = q(&mut r, &["CLIENT", "KILL", "TYPE", "master"]);
        assert_eq!(killed, 1);
        let _: () = q(&mut m, &["SET", "after-kill", "1"]);
        caught_up(&mut m, &mut r);
        let v: Option<String> = q(&mut r, &["GET", "after-kill"]);
        assert_eq!(v.as_deref(), Some("1"), "the link came back and continued");
        assert!(info_m.contains(&format!(
            "slave0:ip=127.0.0.1,port={},state=online",
            replica.port
        )));
    }
}

/// Readers on the replica never see part of an MSET or of a MULTI/EXEC whose keys live on
/// different shards.
#[test]
fn replica_never_shows_part_of_a_multi_shard_command() {
    let master = Server::start(&["--threads", "3", "--save", ""]);
    let replica = Server::start(&["--threads", "3", "--save", ""]);
    let (mut m, mut r) = (master.client(), replica.client());
    let keys: Vec<String> = (0..3).map(|s| key_on("atom", s, 3, 0)).collect();
    let _: () = q(
        &mut m,
        &["MSET", &keys[0], "0", &keys[1], "0", &keys[2], "0"],
    );
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    caught_up(&mut m, &mut r);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut c = replica.client();
            let (stop, keys) = (stop.clone(), keys.clone());
            std::thread::spawn(move || {
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    let v: Vec<String> = q(&mut c, &["MGET", &keys[0], &keys[1], &keys[2]]);
                    assert!(v[0] == v[1] && v[1] == v[2], "a torn MSET: {v:?}");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for i in 1..2000 {
        let v = i.to_string();
        if i % 2 == 0 {
            let _: () = q(&mut m, &["MSET", &keys[0], &v, &keys[1], &v, &keys[2], &v]);
        } else {
            let _: () = redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(&keys[0])
                .arg(&v)
                .cmd("SET")
                .arg(&keys[1])
                .arg(&v)
                .cmd("SET")
                .arg(&keys[2])
                .arg(&v)
                .query(&mut m)
                .unwrap();
        }
    }
    caught_up(&mut m, &mut r);
    stop.store(true, Ordering::Relaxed);
    for t in readers {
        assert!(t.join().unwrap() > 0);
    }
    let v: Vec<String> = q(&mut r, &["MGET", &keys[0], &keys[1], &keys[2]]);
    assert_eq!(v, vec!["1999"; 3]);
}

#[test]
fn debian_redis_replicates_kvserver_then_is_promoted() {
    let master = Server::start(&["--threads", "3", "--save", ""]);
    let mut m = master.client();
    fill(&mut m);
    load(&mut m, "before", 100);
    let dir = TempDir::new("repl-redis-replica");
    let (mut child, mut r, _) = redis_server_with(dir.path(), "dump.rdb", &[]);
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    caught_up(&mut m, &mut r);
    same(data(&mut r), data(&mut m), "after the full sync");
    // Writes while the first one is loading and after; stream writes as the master logs them
    // (IDs from its clock, exact trims, deliveries as XCLAIM).
    load(&mut m, "live", 300);
    crate::aof::stream_churn(&mut m);
    let acked: i64 = q(&mut m, &["WAIT", "1", "5000"]);
    assert_eq!(acked, 1, "redis-server acknowledges");
    caught_up(&mut m, &mut r);
    same(data(&mut r), data(&mut m), "after the live load");
    // Promotion: the data stays and it takes writes.
    let _: String = q(&mut r, &["REPLICAOF", "NO", "ONE"]);
    let _: () = q(&mut r, &["SET", "after-promotion", "1"]);
    let mut expect = data(&mut m);
    expect.insert(
        (0, "after-promotion".into()),
        "string [49] ttl=false".into(),
    );
    same(data(&mut r), expect, "after the promotion");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn kvserver_replicates_debian_redis_then_is_promoted() {
    let dir = TempDir::new("repl-redis-master");
    let (mut child, mut m, port) =
        redis_server_with(dir.path(), "dump.rdb", &["--repl-diskless-sync-delay", "0"]);
    fill(&mut m);
    load(&mut m, "before", 100);
    for n in ["1", "3"] {
        let replica = Server::start(&["--threads", n, "--save", ""]);
        let mut r = replica.client();
        let _: String = q(&mut r, &["REPLICAOF", "127.0.0.1", &port.to_string()]);
        caught_up(&mut m, &mut r);
        same(
            data(&mut r),
            data(&mut m),
            "after the full sync, {n} shards",
        );
        load(&mut m, &format!("live{n}"), 300);
        let acked: i64 = q(&mut m, &["WAIT", "1", "5000"]);
        assert_eq!(acked, 1, "kvserver acknowledges to redis-server");
        caught_up(&mut m, &mut r);
        same(
            data(&mut r),
            data(&mut m),
            "after the live load, {n} shards",
        );
        let _: String = q(&mut r, &["REPLICAOF", "NO", "ONE"]);
        let _: () = q(&mut r, &["SET", "after-promotion", "1"]);
        let v: String = q(&mut r, &["GET", "after-promotion"]);
        assert_eq!(v, "1");
        let role: Vec<redis::Value> = q(&mut r, &["ROLE"]);
        assert_eq!(role[0], redis::Value::BulkString(b"master".to_vec()));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Promote the replica, point the old master at it: the old master continues with PSYNC (no
/// full sync) and gets what the new master wrote.
#[test]
fn failover_needs_no_full_sync() {
    let a = Server::start(&["--threads", "2", "--save", ""]);
    let b = Server::start(&["--threads", "3", "--save", ""]);
    let (mut ca, mut cb) = (a.client(), b.client());
    load(&mut ca, "one", 200);
    let _: String = q(&mut cb, &["REPLICAOF", "127.0.0.1", &a.port.to_string()]);
    caught_up(&mut ca, &mut cb);
    let _: String = q(&mut cb, &["REPLICAOF", "NO", "ONE"]);
    let _: String = q(&mut ca, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    load(&mut cb, "two", 200);
    caught_up(&mut cb, &mut ca);
    same(data(&mut ca), data(&mut cb), "");
    assert!(
        b.log_lines_with("Full resync requested").is_empty(),
        "{:?}",
        b.log_lines_with("resync")
    );
    assert_eq!(
        a.log_lines_with("Successful partial resynchronization")
            .len(),
        1
    );
    assert_eq!(
        field(&mut ca, "master_replid"),
        field(&mut cb, "master_replid")
    );
}

/// A TCP proxy between a replica and its master that the test can cut or stall.
struct Proxy {
    port: u16,
    /// 0: pass, 1: stall (nothing forwarded), 2: cut (connections closed and refused),
    /// 3: delay (each piece held 20 ms).
    mode: Arc<AtomicU8>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn new(target: u16) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(0));
        let conns = Arc::new(Mutex::new(Vec::new()));
        let (m, cs) = (mode.clone(), conns.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { return };
                if m.load(Ordering::Relaxed) == 2 {
                    continue;
                }
                let Ok(up) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                cs.lock().unwrap().push(c.try_clone().unwrap());
                cs.lock().unwrap().push(up.try_clone().unwrap());
                for (mut from, mut to) in
                    [(c.try_clone().unwrap(), up.try_clone().unwrap()), (up, c)]
                {
                    let m = m.clone();
                    std::thread::spawn(move || {
                        let mut buf = vec![0u8; 16 << 10];
                        loop {
                            while m.load(Ordering::Relaxed) == 1 {
                                std::thread::sleep(Duration::from_millis(5));
                            }
                            match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    // What was read as the stall began waits for its end.
                                    while m.load(Ordering::Relaxed) == 1 {
                                        std::thread::sleep(Duration::from_millis(5));
                                    }
                                    if m.load(Ordering::Relaxed) == 3 {
                                        std::thread::sleep(Duration::from_millis(20));
                                    }
                                    if to.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, mode, conns }
    }

    fn cut(&self) {
        self.mode.store(2, Ordering::Relaxed);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::Relaxed);
    }
}

/// A link cut while the master writes: the replica continues with PSYNC when the gap fits in
/// the backlog, and gets a full sync when it does not; the data is equal each time.
#[test]
fn link_faults_continue_or_resync() {
    let master = Server::start(&[
        "--threads",
        "2",
        "--save",
        "",
        "--repl-backlog-size",
        "200000",
    ]);
    let replica = Server::start(&["--threads", "3", "--save", ""]);
    let (mut m, mut r) = (master.client(), replica.client());
    let proxy = Proxy::new(master.port);
    load(&mut m, "before", 100);
    let _: String = q(&mut r, &["REPLICAOF", "127.0.0.1", &proxy.port.to_string()]);
    caught_up(&mut m, &mut r);
    let fulls = || master.log_lines_with("Full resync requested").len();
    assert_eq!(fulls(), 1);
    // A short cut: the gap fits in the backlog.
    proxy.cut();
    load(&mut m, "gap", 50);
    eventually(10, "the replica sees the link down", || {
        field(&mut r, "master_link_status") == "down"
    });
    proxy.set(0);
    caught_up(&mut m, &mut r);
    same(data(&mut r), data(&mut m), "after a continued sync");
    assert_eq!(fulls(), 1, "no full sync for a gap the backlog holds");
    assert_eq!(
        master
            .log_lines_with("Partial resynchronization request")
            .len(),
        1
    );
    // Stalled and delayed: nothing moves for a while, then everything arrives.
    proxy.set(1);
    load(&mut m, "stall", 50);
    std::thread::sleep(Duration::from_millis(300));
    proxy.set(0);
    caught_up(&mut m, &mut r);
    same(data(&mut r), data(&mut m), "after a stall");
    // Delayed: every piece late, in order.
    proxy.set(3);
    load(&mut m, "delay", 50);
    caught_up(&mut m, &mut r);
    same(data(&mut r), data(&mut m), "after a delay");
    proxy.set(0);
    // A long cut: more than the backlog holds.
    proxy.cut();
    eventually(10, "the replica sees the link down", || {
        field(&mut r, "master_link_status") == "down"
    });
    let big = "x".repeat(1000);
    for i in 0..500 {
        let _: () = q(&mut m, &["SET", &format!("big:{i}"), &big]);
    }
    proxy.set(0);
    caught_up(&mut m, &mut r);
    same(data(&mut r), data(&mut m), "after a full resync");
    assert_eq!(fulls(), 2, "a gap past the backlog needs a full sync");
}

/// A replica that stops reading is cut off at its output limit: the master's memory stays
/// bounded and it keeps serving.
#[test]
fn stalled_replica_is_cut_off_at_its_limit() {
    let master = Server::start(&[
        "--threads",
        "1",
        "--save",
        "",
        "--client-output-buffer-limit",
        "normal 0 0 0 slave 4mb 2mb 60 pubsub 32mb 8mb 60",
    ]);
    let replica = Server::start(&["--threads", "1", "--save", ""]);
    let (mut m, mut r) = (master.client(), replica.client());
    let proxy = Proxy::new(master.port);
    let _: String = q(&mut r, &["REPLICAOF", "127.0.0.1", &proxy.port.to_string()]);
    caught_up(&mut m, &mut r);
    let rss_before = master.rss_kib();
    proxy.set(1);
    let big = "y".repeat(10_000);
    for i in 0..3000 {
        let _: () = q(&mut m, &["SET", &format!("k{}", i % 100), &big]);
    }
    eventually(10, "the master drops the stalled replica", || {
        field(&mut m, "connected_slaves") == "0"
    });
    // 30 MB went through; the master held at most its limit for the replica.
    let grown = master.rss_kib().saturating_sub(rss_before);
    assert!(grown < 20_000, "RSS grew by {grown} KiB");
    proxy.set(0);
    caught_up(&mut m, &mut r);
    same(data(&mut r), data(&mut m), "");
}

#[test]
fn wait_counts_and_times_out() {
    let master = Server::start(&["--threads", "2", "--save", ""]);
    let mut m = master.client();
    let _: () = q(&mut m, &["SET", "a", "1"]);
    let t = Instant::now();
    let n: i64 = q(&mut m, &["WAIT", "1", "200"]);
    assert_eq!(n, 0);
    assert!(t.elapsed() >= Duration::from_millis(190));
    let n: i64 = q(&mut m, &["WAIT", "0", "0"]);
    assert_eq!(n, 0);
    let replica = Server::start(&["--threads", "2", "--save", ""]);
    let mut r = replica.client();
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    caught_up(&mut m, &mut r);
    for i in 0..50 {
        let _: () = q(&mut m, &["SET", &format!("w{i}"), "v"]);
        let n: i64 = q(&mut m, &["WAIT", "1", "0"]);
        assert_eq!(n, 1);
        let v: Option<String> = q(&mut r, &["GET", &format!("w{i}")]);
        assert_eq!(v.as_deref(), Some("v"), "acknowledged means applied");
    }
    let t = Instant::now();
    let n: i64 = q(&mut m, &["WAIT", "2", "300"]);
    assert_eq!(n, 1, "one replica of the two asked for");
    assert!(t.elapsed() >= Duration::from_millis(290));
    let err = redis::cmd("WAIT")
        .arg(1)
        .arg(10)
        .query::<i64>(&mut r)
        .unwrap_err();
    assert!(err
        .to_string()
        .contains("WAIT cannot be used with replica instances"));
    // A writable replica takes writes of its own.
    let _: () = q(&mut r, &["CONFIG", "SET", "replica-read-only", "no"]);
    let _: () = q(&mut r, &["SET", "own", "1"]);
}

/// Keys past their deadline: the replica hides them from its clients but deletes nothing by
/// itself; the master's DEL removes them.
#[test]
fn replica_leaves_expiry_to_the_master() {
    let (_master, _replica, mut m, mut r) = expired_on_both("e", "1");
    let v: Option<String> = q(&mut r, &["GET", "e"]);
    assert_eq!(v, None, "an expired key looks absent on the replica");
    let keys: i64 = q(&mut r, &["DBSIZE"]);
    assert_eq!(keys, 1, "but the replica keeps it until the master says");
    let v: Option<String> = q(&mut m, &["GET", "e"]);
    assert_eq!(v, None);
    caught_up(&mut m, &mut r);
    let keys: i64 = q(&mut r, &["DBSIZE"]);
    assert_eq!(keys, 0, "the master's DEL removed it");
}

/// A replica of a replica: the stream passes on, and the chain's offsets agree.
#[test]
fn a_replica_of_a_replica_gets_the_stream() {
    let a = Server::start(&["--threads", "3", "--save", ""]);
    let b = Server::start(&["--threads", "2", "--save", ""]);
    let c = Server::start(&["--threads", "1", "--save", ""]);
    let (mut ca, mut cb, mut cc) = (a.client(), b.client(), c.client());
    load(&mut ca, "one", 100);
    let _: String = q(&mut cb, &["REPLICAOF", "127.0.0.1", &a.port.to_string()]);
    caught_up(&mut ca, &mut cb);
    let _: String = q(&mut cc, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    caught_up(&mut cb, &mut cc);
    load(&mut ca, "two", 300);
    caught_up(&mut ca, &mut cb);
    caught_up(&mut cb, &mut cc);
    same(data(&mut cc), data(&mut ca), "");
    assert_eq!(
        field(&mut cc, "master_repl_offset"),
        field(&mut ca, "master_repl_offset")
    );
    assert_eq!(
        field(&mut cc, "master_replid"),
        field(&mut ca, "master_replid")
    );
}

/// `repl-diskless-sync no`: the snapshot goes through a file (`$<length>` format), which is
/// removed after.
#[test]
fn full_sync_through_a_file() {
    let dir = TempDir::new("repl-disk");
    let master = Server::start(&[
        "--threads",
        "2",
        "--save",
        "",
        "--repl-diskless-sync",
        "no",
        "--dir",
        dir.path(),
    ]);
    let replica = Server::start(&["--threads", "2", "--save", ""]);
    let (mut m, mut r) = (master.client(), replica.client());
    fill(&mut m);
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    caught_up(&mut m, &mut r);
    load(&mut m, "live", 100);
    caught_up(&mut m, &mut r);
    same(data(&mut r), data(&mut m), "");
    assert_eq!(master.log_lines_with("target: disk").len(), 1);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `replica-serve-stale-data no` answers MASTERDOWN while the link is down; `min-replicas-to-
/// write` refuses writes on a master without enough good replicas.
#[test]
fn stale_data_and_min_replicas() {
    let replica = Server::start(&[
        "--threads",
        "2",
        "--save",
        "",
        "--replica-serve-stale-data",
        "no",
    ]);
    let mut raw = replica.raw();
    // Nobody listens there: the link stays down.
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    assert_eq!(
        call(&mut raw, &format!("REPLICAOF 127.0.0.1 {free}")),
        "+OK\r\n"
    );
    // As redis-server 7.0.15 answers (PING too: it is not flagged `stale`).
    for c in ["GET k", "MGET a b c", "DBSIZE", "PING"] {
        assert_eq!(
            call(&mut raw, c),
            "-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n"
        );
    }
    assert_eq!(call(&mut raw, "ECHO a"), "$1\r\na\r\n");
    assert!(call(&mut raw, "INFO replication").contains("master_link_status:down"));
    assert_eq!(call(&mut raw, "REPLICAOF NO ONE"), "+OK\r\n");
    assert_eq!(call(&mut raw, "GET k"), "$-1\r\n");

    let master = Server::start(&[
        "--threads",
        "2",
        "--save",
        "",
        "--min-replicas-to-write",
        "1",
    ]);
    let mut m = master.raw();
    eventually(5, "the master counts its good replicas", || {
        call(&mut m, "SET k 1") == "-NOREPLICAS Not enough good replicas to write.\r\n"
    });
    assert_eq!(call(&mut m, "GET k"), "$-1\r\n");
    let mut r = replica.client();
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    eventually(10, "a good replica lets writes in", || {
        call(&mut m, "SET k 1") == "+OK\r\n"
    });
}

/// What the master did to a key before it expired, the replica does too, even when the stream
/// arrives after the deadline (here: held back by a stalled link) and the command spans the
/// replica's shards.
#[test]
fn replica_applies_what_the_master_saw_of_expiring_keys() {
    let master = Server::start(&["--threads", "1", "--save", ""]);
    let replica = Server::start(&["--threads", "3", "--save", ""]);
    let (mut m, mut r) = (master.client(), replica.client());
    let proxy = Proxy::new(master.port);
    let _: String = q(&mut r, &["REPLICAOF", "127.0.0.1", &proxy.port.to_string()]);
    caught_up(&mut m, &mut r);
    let (a, b) = (key_on("ra", 0, 3, 0), key_on("rb", 1, 3, 0));
    let (c, d) = (key_on("rc", 2, 3, 0), key_on("rd", 2, 3, 1));
    proxy.set(1);
    let _: () = q(&mut m, &["SET", &a, "v", "PX", "300"]);
    let _: () = q(&mut m, &["RENAME", &a, &b]);
    let _: i64 = q(&mut m, &["PERSIST", &b]);
    let _: () = q(&mut m, &["SET", &c, "w", "PX", "300"]);
    let _: () = q(&mut m, &["RENAME", &c, &d]);
    let _: i64 = q(&mut m, &["PERSIST", &d]);
    std::thread::sleep(Duration::from_millis(500));
    // The replica's own clients read those shards meanwhile (they see nothing yet).
    let none: Vec<Option<String>> = q(&mut r, &["MGET", &a, &b, &c, &d]);
    assert_eq!(none, vec![None; 4]);
    for k in [&a, &c] {
        let v: Option<String> = q(&mut r, &["GET", k]);
        assert_eq!(v, None);
    }
    proxy.set(0);
    caught_up(&mut m, &mut r);
    let v: Vec<Option<String>> = q(&mut r, &["MGET", &a, &b, &c, &d]);
    assert_eq!(v, vec![None, Some("v".into()), None, Some("w".into())]);
}

/// Two replicas syncing at once, and a BGSAVE meanwhile: one snapshot walks the shards at a
/// time, and each one is whole.
#[test]
fn concurrent_syncs_and_a_background_save() {
    let dir = TempDir::new("repl-concurrent");
    let master = Server::start(&["--threads", "2", "--save", "", "--dir", dir.path()]);
    let mut m = master.client();
    fill(&mut m);
    for i in 0..20 {
        let kv: Vec<String> = (0..500)
            .flat_map(|j| [format!("bulk:{i}:{j}"), "x".repeat(100)])
            .collect();
        let mut args = vec!["MSET"];
        args.extend(kv.iter().map(String::as_str));
        let _: () = q(&mut m, &args);
    }
    let replicas: Vec<Server> = (0..2)
        .map(|_| Server::start(&["--threads", "3", "--save", ""]))
        .collect();
    let started: String = q(&mut m, &["BGSAVE"]);
    assert_eq!(started, "Background saving started");
    let mut rs: Vec<redis::Connection> = replicas.iter().map(Server::client).collect();
    for r in &mut rs {
        let _: String = q(r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    }
    load(&mut m, "during", 100);
    for r in &mut rs {
        caught_up(&mut m, r);
        same(data(r), data(&mut m), "");
    }
    eventually(10, "the save ends well", || {
        let info: String = q(&mut m, &["INFO", "persistence"]);
        info.contains("rdb_bgsave_in_progress:0\r\n") && info.contains("rdb_last_bgsave_status:ok")
    });
}

/// The master PINGs its replicas every `repl-ping-replica-period` seconds: the stream (and the
/// offsets) move without writes.
#[test]
fn master_pings_its_replicas() {
    let (_master, _replica, mut m, mut r) = pair(
        &[
            "--threads",
            "1",
            "--save",
            "",
            "--repl-ping-replica-period",
            "1",
        ],
        &["--threads", "1", "--save", ""],
    );
    let before: u64 = field(&mut m, "master_repl_offset").parse().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let after: u64 = field(&mut m, "master_repl_offset").parse().unwrap();
    assert!(after >= before + 14, "{before} -> {after}");
    caught_up(&mut m, &mut r);
}

/// A replica with the AOF on rewrites it after a full sync: restarted on its own, it has the
/// master's data, not what it held before.
#[test]
fn replica_with_aof_restarts_with_the_masters_data() {
    let dir = TempDir::new("repl-aof");
    let master = Server::start(&["--threads", "2", "--save", ""]);
    let mut m = master.client();
    fill(&mut m);
    let args = crate::aof::aof_args("3", dir.path(), "everysec", &[]);
    let replica = Server::start(&args);
    let mut r = replica.client();
    let _: () = q(&mut r, &["SET", "mine", "gone after the sync"]);
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    caught_up(&mut m, &mut r);
    load(&mut m, "after", 100);
    caught_up(&mut m, &mut r);
    eventually(10, "the replica rewrote its AOF", || {
        let info: String = q(&mut r, &["INFO", "persistence"]);
        info.contains("aof_rewrite_in_progress:0\r\n") && !info.contains("aof_rewrites:0\r\n")
    });
    let expect = data(&mut m);
    replica.terminate();
    let replica = Server::start(&args);
    let mut r = replica.client();
    same(data(&mut r), expect, "after a restart");
}

/// A replica with several shards and an AOF, fed a long pipeline of transactions that span
/// its shards (the stream arrives in reads of many transactions, which it applies a run at a
/// time): its readers never see part of a transaction, a transaction that cannot run in one
/// shard's store (an MSET spanning shards) and a PUBLISH between them are applied in their
/// place, and it ends with the master's data, and again after a restart from its AOF.
#[test]
fn replica_applies_pipelined_transactions_whole() {
    let dir = TempDir::new("repl-runs");
    let master = Server::start(&["--threads", "1", "--save", ""]);
    let args = crate::aof::aof_args("3", dir.path(), "everysec", &[]);
    let replica = Server::start(&args);
    let (mut m, mut r) = (master.client(), replica.client());
    let _: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    caught_up(&mut m, &mut r);
    // Two accounts on each of the replica's shards, in databases 0 and 2: every transaction
    // moves an amount between two of them, so each database's sum stays 0.
    let accounts: Vec<String> = (0..6).map(|i| key_on("acct", i % 3, 3, i / 3)).collect();
    let sides: Vec<String> = (0..2).map(|s| key_on("side", s, 3, 0)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = ["0", "2"]
        .into_iter()
        .map(|db| {
            let mut c = replica.client();
            let (stop, accounts) = (stop.clone(), accounts.clone());
            std::thread::spawn(move || {
                let _: () = q(&mut c, &["SELECT", db]);
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    let mut mget = vec!["MGET"];
                    mget.extend(accounts.iter().map(String::as_str));
                    let v: Vec<Option<i64>> = q(&mut c, &mget);
                    let sum: i64 = v.iter().map(|x| x.unwrap_or(0)).sum();
                    assert_eq!(sum, 0, "part of a transaction in db {db}: {v:?}");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut stream = Vec::new();
    let mut cmd = |args: &[&str]| {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        stream.extend(crate::support::encode(&raw));
    };
    // Reply lines: one per reply, plus EXEC's array header.
    let mut want = 0;
    for i in 0..6000usize {
        let (from, to) = (&accounts[i % 6], &accounts[(i * 5 + 1) % 6]);
        let amount = (i % 17 + 1).to_string();
        if i % 500 == 0 {
            cmd(&["PUBLISH", "news", "x"]);
            want += 1;
        }
        cmd(&["MULTI"]);
        cmd(&["SELECT", if i % 3 == 0 { "2" } else { "0" }]);
        cmd(&["DECRBY", from, &amount]);
        cmd(&["INCRBY", to, &amount]);
        if i % 1000 == 7 {
            // Spans shards by itself: the transaction is served as a client's.
            let v = i.to_string();
            cmd(&["MSET", &sides[0], &v, &sides[1], &v]);
            cmd(&["SET", "msets", &v]);
        }
        cmd(&["EXEC"]);
        cmd(&["RPUSH", "log", &i.to_string()]);
        want += if i % 1000 == 7 { 13 } else { 9 };
    }
    let mut s = TcpStream::connect(("127.0.0.1", master.port)).unwrap();
    s.write_all(&stream).unwrap();
    let (mut lines, mut buf) = (0, vec![0u8; 1 << 16]);
    while lines < want {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the master hung up");
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
    }
    caught_up(&mut m, &mut r);
    stop.store(true, Ordering::Relaxed);
    for t in readers {
        assert!(t.join().unwrap() > 0);
    }
    let expect = data(&mut m);
    same(data(&mut r), expect.clone(), "after the pipeline");
    eventually(10, "the AOF is synced", || {
        let info: String = q(&mut r, &["INFO", "persistence"]);
        info.contains("aof_rewrite_in_progress:0\r\n")
    });
    // (everysec: a second for the last writes to reach the file.)
    std::thread::sleep(Duration::from_millis(1500));
    replica.terminate();
    let replica = Server::start(&args);
    let mut r = replica.client();
    same(
        data(&mut r),
        expect,
        "after a restart from the replica's AOF",
    );
}

/// Many link cuts while the master runs transactions in several databases: each continuation
/// starts in the database and outside the transaction the stream was in, and no transaction
/// is applied twice or in part.
#[test]
fn link_cuts_inside_transactions_and_databases() {
    let master = Server::start(&[
        "--threads",
        "1",
        "--save",
        "",
        "--repl-backlog-size",
        "256mb",
    ]);
    let replica = Server::start(&["--threads", "2", "--save", ""]);
    let (mut m, mut r) = (master.client(), replica.client());
    let proxy = Proxy::new(master.port);
    let _: String = q(&mut r, &["REPLICAOF", "127.0.0.1", &proxy.port.to_string()]);
    caught_up(&mut m, &mut r);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let mut c = master.client();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let db = if i % 2 == 0 { "0" } else { "2" };
                    let _: () = redis::pipe()
                        .cmd("SELECT")
                        .arg(db)
                        .ignore()
                        .atomic()
                        .cmd("INCR")
                        .arg(format!("t{t}:a"))
                        .cmd("INCRBY")
                        .arg(format!("t{t}:b"))
                        .arg(2)
                        .cmd("RPUSH")
                        .arg(format!("t{t}:l"))
                        .arg(i)
                        .query(&mut c)
                        .unwrap();
                    let _: i64 = q(&mut c, &["INCR", &format!("t{t}:plain")]);
                }
            })
        })
        .collect();
    // (The replica connects again a second after a cut.)
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(1200));
        proxy.cut();
        std::thread::sleep(Duration::from_millis(20));
        proxy.set(0);
    }
    std::thread::sleep(Duration::from_millis(1200));
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    caught_up(&mut m, &mut r);
    same(data(&mut r), data(&mut m), "after the cuts");
    assert!(
        master
            .log_lines_with("Partial resynchronization request")
            .len()
            >= 2
    );
}

/// A command of the master's stream that fails on the replica is logged there (the replica
/// may differ from its master from then on), as Redis logs it.
#[test]
fn errors_in_the_masters_stream_are_logged() {
    let (master, replica, mut m, mut r) = pair(
        &["--threads", "1", "--save", ""],
        &["--threads", "1", "--save", ""],
    );
    // The master has the key as a list; the replica, made writable, as a string.
    let _: () = q(&mut r, &["CONFIG", "SET", "replica-read-only", "no"]);
    let _: () = q(&mut r, &["SET", "diverged", "x"]);
    let _: i64 = q(&mut m, &["RPUSH", "diverged", "a"]);
    caught_up(&mut m, &mut r);
    eventually(5, "the error is logged", || {
        !replica
            .log_lines_with(
                "== CRITICAL == This replica is sending an error to its master: 'WRONGTYPE",
            )
            .is_empty()
    });
    drop(master);
}

/// On a writable replica, a client's write to a key past its deadline (still stored: the
/// master has not deleted it yet) replaces it: one key, not two.
#[test]
fn writable_replica_replaces_an_expired_key() {
    let (_master, _replica, _m, mut r) = expired_on_both("k", "old");
    let _: () = q(&mut r, &["CONFIG", "SET", "replica-read-only", "no"]);
    let keys: i64 = q(&mut r, &["DBSIZE"]);
    assert_eq!(keys, 1, "stored until the master deletes it");
    let _: () = q(&mut r, &["SET", "k", "new"]);
    let keys: i64 = q(&mut r, &["DBSIZE"]);
    assert_eq!(keys, 1, "the write replaced the expired key");
    let v: Option<String> = q(&mut r, &["GET", "k"]);
    assert_eq!(v.as_deref(), Some("new"));
    let n: i64 = q(&mut r, &["RPUSH", "k2", "x"]);
    assert_eq!(n, 1);
}
