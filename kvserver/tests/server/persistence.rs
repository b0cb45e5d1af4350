//! RDB files: SAVE and a restart keep every key, value and deadline with 1 and 3 shards;
//! Debian's redis-check-rdb accepts our file, redis-server loads it with the same contents and
//! we load redis-server's; a damaged file stops the start with one line naming the offset;
//! SHUTDOWN SAVE|NOSAVE|ABORT and LASTSAVE as Redis.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::Server;

/// A fresh directory under the system's temp dir, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("kv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub(crate) fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Every type and encoding: strings (int, short, long and compressible), lists small and
/// big, sets of integers, short strings and many, hashes small and big, sorted sets small and
/// big, a HyperLogLog, streams with consumer groups, deadlines, and a second database.
pub(crate) fn fill(c: &mut redis::Connection) {
    let _: () = q(c, &["SET", "int", "12345"]);
    let _: () = q(c, &["SET", "short", "hello"]);
    let long = "abc".repeat(100);
    let _: () = q(c, &["SET", "long", &long]);
    let _: () = q(c, &["SET", "ttl", "v", "PX", "3600000"]);
    let _: () = q(c, &["RPUSH", "l:small", "a", "b", "1", "2"]);
    for i in 0..50 {
        let items: Vec<String> = (0..40).map(|j| format!("item-{i}-{j}")).collect();
        let mut args = vec!["RPUSH", "l:big"];
        args.extend(items.iter().map(String::as_str));
        let _: i64 = q(c, &args);
    }
    let _: i64 = q(c, &["SADD", "s:int", "1", "2", "3", "-7"]);
    let _: i64 = q(c, &["SADD", "s:str", "a", "b", "c"]);
    let many: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", "s:big"];
    args.extend(many.iter().map(String::as_str));
    let _: i64 = q(c, &args);
    let _: i64 = q(c, &["HSET", "h:small", "f", "v", "n", "1"]);
    let mut args = vec!["HSET", "h:big"];
    args.extend(many.iter().flat_map(|m| [m.as_str(), "value"]));
    let _: i64 = q(c, &args);
    let _: i64 = q(c, &["ZADD", "z:small", "1", "a", "2.5", "b", "-inf", "c"]);
    let scores: Vec<String> = (0..1000).map(|i| (i as f64 / 3.0).to_string()).collect();
    let mut args = vec!["ZADD", "z:big"];
    for (s, m) in scores.iter().zip(&many) {
        args.push(s);
        args.push(m);
    }
    let _: i64 = q(c, &args);
    let _: i64 = q(c, &["PFADD", "hll", "a", "b", "c"]);
    // A stream of several nodes, with a deleted entry, a group, pending entries, and an empty
    // stream with a group.
    for i in 1..=250 {
        let id = format!("{i}-1");
        let f = if i % 7 == 0 { "other" } else { "f" };
        let _: String = q(c, &["XADD", "x:big", &id, f, &i.to_string(), "g", "v"]);
    }
    let _: i64 = q(c, &["XDEL", "x:big", "5-1"]);
    let _: () = q(c, &["XGROUP", "CREATE", "x:big", "grp", "0"]);
    let _: redis::Value = q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "ann",
            "COUNT",
            "3",
            "STREAMS",
            "x:big",
            ">",
        ],
    );
    let _: i64 = q(c, &["XGROUP", "CREATECONSUMER", "x:big", "grp", "bo"]);
    let _: () = q(c, &["XGROUP", "CREATE", "x:empty", "grp", "$", "MKSTREAM"]);
    let _: i64 = q(c, &["EXPIRE", "l:small", "7200"]);
    let _: () = q(c, &["SELECT", "2"]);
    let _: () = q(c, &["SET", "in-db-2", "yes"]);
    let _: () = q(c, &["SELECT", "0"]);
}

/// Each key of databases 0 and 2 with its type, contents (sets and hashes sorted) and
/// whether it has a deadline.
pub(crate) fn contents(c: &mut redis::Connection) -> BTreeMap<(i64, String), String> {
    let mut all = BTreeMap::new();
    for db in [0i64, 2] {
        let _: () = q(c, &["SELECT", &db.to_string()]);
        let keys: Vec<String> = q(c, &["KEYS", "*"]);
        for k in keys {
            let ty: String = q(c, &["TYPE", &k]);
            let body = match ty.as_str() {
                "string" => format!("{:?}", q::<Vec<u8>>(c, &["GET", &k])),
                "list" => format!("{:?}", q::<Vec<Vec<u8>>>(c, &["LRANGE", &k, "0", "-1"])),
                "set" => {
                    let mut m: Vec<Vec<u8>> = q(c, &["SMEMBERS", &k]);
                    m.sort();
                    format!("{m:?}")
                }
                "hash" => {
                    let mut m: Vec<(Vec<u8>, Vec<u8>)> = q(c, &["HGETALL", &k]);
                    m.sort();
                    format!("{m:?}")
                }
                // Scores by value: Redis 7.0 writes 0.1 as 0.10000000000000001, 7.2 and we as 0.1.
                "zset" => {
                    let items: Vec<Vec<u8>> = q(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"]);
                    let pairs: Vec<(Vec<u8>, f64)> = items
                        .chunks(2)
                        .map(|p| (p[0].clone(), score(&p[1])))
                        .collect();
                    format!("{pairs:?}")
                }
                "stream" => stream_contents(c, &k),
                other => panic!("type {other}"),
            };
            let ttl: i64 = q(c, &["PTTL", &k]);
            all.insert((db, k), format!("{ty} {body} ttl={}", ttl > 0));
        }
    }
    let _: () = q(c, &["SELECT", "0"]);
    all
}

/// A stream as a file or a replica must keep it: entries, counters, groups, consumers and
/// pending entries (with their delivery counts; not times, nor the node layout, which a
/// rewrite from commands rebuilds differently).
fn stream_contents(c: &mut redis::Connection, k: &str) -> String {
    let entries: redis::Value = q(c, &["XRANGE", k, "-", "+"]);
    let info: Vec<redis::Value> = q(c, &["XINFO", "STREAM", k]);
    let keep = [
        "length",
        "last-generated-id",
        "max-deleted-entry-id",
        "entries-added",
        "recorded-first-entry-id",
        "groups",
    ];
    let mut fields = Vec::new();
    for pair in info.chunks(2) {
        if let [redis::Value::BulkString(name), v] = pair {
            let name = String::from_utf8_lossy(name).into_owned();
            if keep.contains(&name.as_str()) {
                fields.push(format!("{name}={v:?}"));
            }
        }
    }
    let groups: Vec<redis::Value> = q(c, &["XINFO", "GROUPS", k]);
    let mut out = format!("{entries:?} {fields:?} groups={groups:?}");
    for g in groups {
        let redis::Value::Array(kv) = g else { continue };
        let name = match kv.get(1) {
            Some(redis::Value::BulkString(n)) => String::from_utf8_lossy(n).into_owned(),
            _ => continue,
        };
        let consumers: Vec<Vec<redis::Value>> = q(c, &["XINFO", "CONSUMERS", k, &name]);
        let names: Vec<String> = consumers
            .iter()
            .map(|c| format!("{:?} {:?}", c.get(1), c.get(3)))
            .collect();
        let pending: Vec<Vec<redis::Value>> = q(c, &["XPENDING", k, &name, "-", "+", "1000"]);
        let rows: Vec<String> = pending
            .iter()
            .map(|p| format!("{:?} {:?} {:?}", p.first(), p.get(1), p.get(3)))
            .collect();
        out.push_str(&format!(" {name}: {names:?} {rows:?}"));
    }
    out
}

/// A score's text as a number.
fn score(text: &[u8]) -> f64 {
    kvcore::resp::parse_double(text).unwrap_or_else(|| panic!("a score: {text:?}"))
}

fn redis_server(dir: &str, file: &str) -> (std::process::Child, redis::Connection) {
    let (child, c, _) = redis_server_with(dir, file, &[]);
    (child, c)
}

/// Debian's redis-server on a free port with `dir`/`file` and `extra` arguments, ready: the
/// process, a client and the port.
pub(crate) fn redis_server_with(
    dir: &str,
    file: &str,
    extra: &[&str],
) -> (std::process::Child, redis::Connection, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no", "--dir", dir, "--dbfilename", file])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    for _ in 0..100 {
        if let Ok(mut c) = client.get_connection() {
            // Wait for the load to finish.
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                return (child, c, port);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("redis-server did not start");
}

#[test]
fn save_restart_and_redis_both_ways() {
    for n in ["1", "3"] {
        let dir = TempDir::new(&format!("rdb{n}"));
        let server = Server::start(&["--threads", n, "--dir", dir.path()]);
        let mut c = server.client();
        fill(&mut c);
        let before = contents(&mut c);
        assert_eq!(before.len(), 17, "{:?}", before.keys().collect::<Vec<_>>());
        let last: i64 = q(&mut c, &["LASTSAVE"]);
        let _: () = q(&mut c, &["SAVE"]);
        assert!(q::<i64>(&mut c, &["LASTSAVE"]) >= last);
        let info: String = q(&mut c, &["INFO", "persistence"]);
        assert!(info.contains("rdb_saves:1\r\n"), "{info}");
        assert!(info.contains("rdb_changes_since_last_save:0\r\n"), "{info}");
        drop(server);
        let file = Path::new(dir.path()).join("dump.rdb");
        // Debian's checker accepts the file.
        let check = Command::new("redis-check-rdb").arg(&file).output().unwrap();
        let text = String::from_utf8_lossy(&check.stdout);
        assert!(
            check.status.success() && text.contains("RDB looks OK!"),
            "{text}"
        );
        // We load it back, on any number of shards.
        for m in ["1", "3"] {
            let server = Server::start(&["--threads", m, "--dir", dir.path()]);
            let mut c = server.client();
            assert_eq!(
                contents(&mut c),
                before,
                "saved with {n} shards, loaded with {m}"
            );
            let info: String = q(&mut c, &["INFO", "persistence"]);
            assert!(info.contains(&format!("rdb_last_load_keys_loaded:{}\r\n", before.len())));
        }
        // redis-server loads it with the same contents.
        let (mut child, mut r) = redis_server(dir.path(), "dump.rdb");
        assert_eq!(contents(&mut r), before, "redis-server loading our file");
        // And we load what redis-server writes (over ours: Redis 7 protects `dbfilename`).
        let ours = std::fs::read(&file).unwrap();
        let _: () = q(&mut r, &["SAVE"]);
        let _ = child.kill();
        let _ = child.wait();
        assert_ne!(
            std::fs::read(&file).unwrap(),
            ours,
            "redis-server wrote its own file"
        );
        let server = Server::start(&["--threads", n, "--dir", dir.path()]);
        let mut c = server.client();
        assert_eq!(contents(&mut c), before, "our load of redis-server's file");
    }
}

#[test]
fn damaged_files_stop_the_start() {
    let dir = TempDir::new("rdb-bad");
    let server = Server::start(&["--threads", "2", "--dir", dir.path()]);
    let mut c = server.client();
    fill(&mut c);
    let _: () = q(&mut c, &["SAVE"]);
    drop(server);
    let file = Path::new(dir.path()).join("dump.rdb");
    let good = std::fs::read(&file).unwrap();
    for (name, bytes) in [
        ("flipped", {
            let mut b = good.clone();
            b[100] ^= 0x40;
            b
        }),
        ("truncated", good[..good.len() / 2].to_vec()),
    ] {
        std::fs::write(&file, &bytes).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_kvserver"))
            .args(["--port", "0", "--dir", dir.path()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| l.contains("kvserver:")).collect();
        assert_eq!(lines.len(), 1, "{name}: {err}");
        assert!(
            lines[0].contains("dump.rdb") && lines[0].contains("at offset"),
            "{name}: {err}"
        );
    }
}

#[test]
fn shutdown_saves_as_asked() {
    let dir = TempDir::new("rdb-shutdown");
    let file = Path::new(dir.path()).join("dump.rdb");
    let server = Server::start(&["--threads", "2", "--dir", dir.path()]);
    let mut s = server.raw();
    use crate::support::call;
    use std::io::Write;
    assert_eq!(call(&mut s, "SET k v"), "+OK\r\n");
    assert_eq!(
        call(&mut s, "SHUTDOWN ABORT"),
        "-ERR No shutdown in progress.\r\n"
    );
    assert_eq!(
        call(&mut s, "SHUTDOWN NOSAVE SAVE"),
        "-ERR syntax error\r\n"
    );
    assert_eq!(call(&mut s, "SHUTDOWN BOGUS"), "-ERR syntax error\r\n");
    assert!(!file.exists());
    // A shutdown that goes ahead answers nothing: the connection closes.
    s.write_all(&crate::support::cmd("SHUTDOWN SAVE")).unwrap();
    let mut server = server;
    assert!(server.exit_status(10).is_some_and(|s| s.success()));
    assert!(file.exists(), "SHUTDOWN SAVE writes the file");
    let server = Server::start(&["--threads", "1", "--dir", dir.path()]);
    let mut s = server.raw();
    assert_eq!(call(&mut s, "GET k"), "$1\r\nv\r\n");
    std::fs::remove_file(&file).unwrap();
    s.write_all(&crate::support::cmd("SHUTDOWN NOSAVE"))
        .unwrap();
    let mut server = server;
    assert!(server.exit_status(10).is_some());
    assert!(!file.exists(), "SHUTDOWN NOSAVE writes nothing");
}

/// Sends `args` and reads one reply, raw.
fn raw_call(s: &mut std::net::TcpStream, args: &[&str]) -> String {
    use std::io::Write;
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    s.write_all(&crate::support::encode(&args)).unwrap();
    String::from_utf8_lossy(&crate::support::read_replies(s, 1)[0]).into_owned()
}

/// Polls INFO persistence until no save runs; returns the section.
fn after_save(s: &mut std::net::TcpStream) -> String {
    for _ in 0..1000 {
        let info = raw_call(s, &["INFO", "persistence"]);
        if info.contains("rdb_bgsave_in_progress:0\r\n") {
            return info;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the save did not end");
}

/// A background save that fails (its file name is a directory's, so the rename fails: the
/// injected write error) refuses writes and PING with Redis's MISCONF while save points are
/// set; reads go on; `save ""` lifts it; a successful SAVE ends it. The same sequence against
/// Debian's redis-server gives the same replies, byte for byte.
#[test]
fn a_failed_background_save_refuses_writes_until_a_save_succeeds() {
    let run = |s: &mut std::net::TcpStream, dir: &Path| -> Vec<String> {
        std::fs::create_dir_all(dir.join("blocked")).unwrap();
        let mut replies = Vec::new();
        let mut step = |s: &mut std::net::TcpStream, args: &[&str]| {
            replies.push(format!("{args:?} -> {}", raw_call(s, args)));
        };
        step(s, &["CONFIG", "SET", "save", "3600 1"]);
        step(s, &["SET", "k", "v"]);
        step(s, &["CONFIG", "SET", "dbfilename", "blocked"]);
        step(s, &["BGSAVE"]);
        let info = after_save(s);
        assert!(info.contains("rdb_last_bgsave_status:err\r\n"), "{info}");
        step(s, &["SET", "k", "v2"]);
        step(s, &["DEL", "k"]);
        step(s, &["GET", "k"]);
        step(s, &["PING"]);
        step(s, &["CONFIG", "SET", "save", ""]);
        step(s, &["SET", "k", "v3"]);
        step(s, &["CONFIG", "SET", "save", "3600 1"]);
        step(s, &["SET", "k", "v4"]);
        step(s, &["CONFIG", "SET", "dbfilename", "dump.rdb"]);
        step(s, &["SAVE"]);
        step(s, &["SET", "k", "v5"]);
        step(s, &["PING"]);
        let info = raw_call(s, &["INFO", "persistence"]);
        assert!(info.contains("rdb_last_bgsave_status:ok\r\n"), "{info}");
        replies
    };
    let dir = TempDir::new("misconf");
    let server = Server::start(&[
        "--threads",
        "3",
        "--dir",
        dir.path(),
        "--enable-protected-configs",
        "yes",
    ]);
    let ours = run(&mut server.raw(), Path::new(dir.path()));
    assert!(ours[4].contains("-MISCONF Redis is configured to save RDB snapshots"));
    assert!(ours[6].ends_with("$2\r\nv3\r\n") || ours[6].contains("$1\r\nv\r\n"));
    let rdir = TempDir::new("misconf-redis");
    let (mut child, _, port) = redis_server_with(
        rdir.path(),
        "dump.rdb",
        &["--enable-protected-configs", "yes"],
    );
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let theirs = run(&mut s, Path::new(rdir.path()));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(ours, theirs);
}

/// Protected parameters: `dir` and `dbfilename` refuse CONFIG SET unless
/// `enable-protected-configs` allows it, with Redis 7's error.
#[test]
fn dir_and_dbfilename_are_protected_by_default() {
    let server = Server::start(&["--threads", "2"]);
    let mut s = server.raw();
    assert_eq!(
        raw_call(&mut s, &["CONFIG", "SET", "dbfilename", "x.rdb"]),
        "-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - can't set protected config\r\n"
    );
    assert_eq!(
        raw_call(&mut s, &["CONFIG", "SET", "maxmemory", "0", "dir", "/"]),
        "-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config\r\n"
    );
    let server = Server::start(&["--threads", "2", "--enable-protected-configs", "local"]);
    let mut s = server.raw();
    assert_eq!(
        raw_call(&mut s, &["CONFIG", "SET", "dbfilename", "x.rdb"]),
        "+OK\r\n"
    );
    assert!(raw_call(&mut s, &["CONFIG", "GET", "dbfilename"]).ends_with("$5\r\nx.rdb\r\n"));
}

/// The `save` policy starts a background save once a point is met; BGSAVE SCHEDULE and a
/// BGSAVE while one runs answer as Redis; DEBUG RELOAD saves and loads back, NOSAVE loads the
/// file as it was.
#[test]
fn save_points_bgsave_schedule_and_debug_reload() {
    let dir = TempDir::new("rdb-policy");
    let file = Path::new(dir.path()).join("dump.rdb");
    let server = Server::start(&[
        "--threads",
        "2",
        "--dir",
        dir.path(),
        "--save",
        "1 3",
        "--enable-debug-command",
        "yes",
    ]);
    let mut s = server.raw();
    assert_eq!(
        raw_call(&mut s, &["CONFIG", "GET", "save"]),
        "*2\r\n$4\r\nsave\r\n$3\r\n1 3\r\n"
    );
    assert_eq!(raw_call(&mut s, &["SET", "a", "1"]), "+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert!(!file.exists(), "one change is below the point's three");
    for k in ["b", "c"] {
        assert_eq!(raw_call(&mut s, &["SET", k, "1"]), "+OK\r\n");
    }
    let mut saved = false;
    for _ in 0..300 {
        let info = raw_call(&mut s, &["INFO", "persistence"]);
        if info.contains("rdb_saves:1\r\n") && info.contains("rdb_changes_since_last_save:0\r\n") {
            saved = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        saved && file.exists(),
        "three changes in over a second: a save"
    );
    assert!(
        server
            .log_lines_with("3 changes in 1 seconds. Saving...")
            .len()
            == 1
    );
    // BGSAVE answers once its moment is taken; a second one while it runs is refused or,
    // with SCHEDULE, runs after it.
    let fill: Vec<String> = (0..20000).map(|i| format!("key:{i}")).collect();
    for chunk in fill.chunks(1000) {
        let mut args = vec!["MSET"];
        for k in chunk {
            args.push(k);
            args.push(k);
        }
        assert_eq!(raw_call(&mut s, &args), "+OK\r\n");
    }
    assert_eq!(
        raw_call(&mut s, &["BGSAVE"]),
        "+Background saving started\r\n"
    );
    let second = raw_call(&mut s, &["BGSAVE", "SCHEDULE"]);
    let info = after_save(&mut s);
    let saves: u64 = info
        .split("rdb_saves:")
        .nth(1)
        .and_then(|t| t.split("\r\n").next())
        .unwrap()
        .parse()
        .unwrap();
    match second.as_str() {
        "+Background saving scheduled\r\n" => {
            // The cron runs the scheduled one within a second or so.
            let mut ran = false;
            for _ in 0..300 {
                std::thread::sleep(std::time::Duration::from_millis(10));
                if after_save(&mut s).contains(&format!("rdb_saves:{}\r\n", saves + 1)) {
                    ran = true;
                    break;
                }
            }
            assert!(ran, "the scheduled save ran");
        }
        "+Background saving started\r\n" => assert_eq!(saves, 3),
        other => panic!("{other}"),
    }
    assert_eq!(
        raw_call(&mut s, &["BGSAVE", "NOW"]),
        "-ERR syntax error\r\n"
    );
    // DEBUG RELOAD: the same keys after a save and a load.
    assert_eq!(raw_call(&mut s, &["SET", "x", "1"]), "+OK\r\n");
    assert_eq!(raw_call(&mut s, &["DEBUG", "RELOAD"]), "+OK\r\n");
    assert_eq!(raw_call(&mut s, &["DBSIZE"]), ":20004\r\n");
    assert_eq!(raw_call(&mut s, &["GET", "x"]), "$1\r\n1\r\n");
    // NOSAVE loads the file as it was: later changes go.
    assert_eq!(raw_call(&mut s, &["SET", "x", "2"]), "+OK\r\n");
    assert_eq!(raw_call(&mut s, &["SET", "y", "2"]), "+OK\r\n");
    assert_eq!(raw_call(&mut s, &["DEBUG", "RELOAD", "NOSAVE"]), "+OK\r\n");
    assert_eq!(raw_call(&mut s, &["GET", "x"]), "$1\r\n1\r\n");
    assert_eq!(raw_call(&mut s, &["EXISTS", "y"]), ":0\r\n");
    assert_eq!(raw_call(&mut s, &["DBSIZE"]), ":20004\r\n");
    assert_eq!(
        raw_call(&mut s, &["DEBUG", "RELOAD", "BOGUS"]),
        "-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.\r\n"
    );
}

/// BGSAVE while clients write over every shard: the file is the state at one moment. Each
/// writer sets its group of keys (on different shards) to its generation number with one
/// MSET, or deletes the group with one DEL; the file must hold every group whole (all keys
/// of one generation, or none), with a generation acknowledged before BGSAVE was sent at the
/// earliest and one sent before its reply came at the latest.
#[test]
fn bgsave_during_writes_is_the_state_at_one_moment() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    const WRITERS: usize = 4;
    const GROUP: usize = 6;
    let dir = TempDir::new("rdb-moment");
    let server = Server::start(&["--threads", "3", "--dir", dir.path(), "--save", ""]);
    let mut s = server.raw();
    for chunk in (0..30000).collect::<Vec<_>>().chunks(1000) {
        let kv: Vec<String> = chunk
            .iter()
            .flat_map(|i| [format!("pre:{i}"), "v".into()])
            .collect();
        let mut args = vec!["MSET"];
        args.extend(kv.iter().map(String::as_str));
        assert_eq!(raw_call(&mut s, &args), "+OK\r\n");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let keys = |t: usize| -> Vec<String> { (0..GROUP).map(|j| format!("w{t}:{j}")).collect() };
    let port = server.port;
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let (stop, acked, sent) = (stop.clone(), acked.clone(), sent.clone());
            let keys = keys(t);
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                let mut g = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    g += 1;
                    sent[t].store(g, Ordering::SeqCst);
                    let gs = g.to_string();
                    let mut args: Vec<&str> = Vec::new();
                    if g % 5 == 0 {
                        args.push("DEL");
                        args.extend(keys.iter().map(String::as_str));
                    } else {
                        args.push("MSET");
                        for k in &keys {
                            args.push(k);
                            args.push(&gs);
                        }
                    }
                    // A pre-existing key changed too: the walk meets keys changed under it.
                    let pre = format!("pre:{}", (g * 7919 + t as u64) % 30000);
                    let reply = raw_call(&mut s, &args);
                    assert!(reply.starts_with('+') || reply.starts_with(':'), "{reply}");
                    assert_eq!(raw_call(&mut s, &["SET", &pre, &gs]), "+OK\r\n");
                    acked[t].store(g, Ordering::SeqCst);
                }
            })
        })
        .collect();
    while acked.iter().any(|a| a.load(Ordering::SeqCst) < 10) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let lo: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
    assert_eq!(
        raw_call(&mut s, &["BGSAVE"]),
        "+Background saving started\r\n"
    );
    let hi: Vec<u64> = sent.iter().map(|a| a.load(Ordering::SeqCst)).collect();
    // Writes go on while the save runs.
    let during = acked[0].load(Ordering::SeqCst);
    let info = after_save(&mut s);
    assert!(info.contains("rdb_last_bgsave_status:ok\r\n"), "{info}");
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(acked[0].load(Ordering::SeqCst) > during);
    drop(server);
    let file = Path::new(dir.path()).join("dump.rdb");
    let check = Command::new("redis-check-rdb").arg(&file).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let server = Server::start(&["--threads", "2", "--dir", dir.path(), "--save", ""]);
    let mut c = server.client();
    for t in 0..WRITERS {
        let ks = keys(t);
        let mut mget = vec!["MGET"];
        mget.extend(ks.iter().map(String::as_str));
        let vals: Vec<Option<u64>> = q(&mut c, &mget);
        assert!(
            vals.iter().all(|v| *v == vals[0]),
            "writer {t}: a group split {vals:?}"
        );
        match vals[0] {
            Some(g) => assert!(
                (lo[t]..=hi[t]).contains(&g),
                "writer {t}: generation {g} outside [{}, {}]",
                lo[t],
                hi[t]
            ),
            None => assert!(
                (lo[t]..=hi[t]).any(|g| g % 5 == 0),
                "writer {t}: deleted, but no DEL in [{}, {}]",
                lo[t],
                hi[t]
            ),
        }
    }
    let size: i64 = q(&mut c, &["DBSIZE"]);
    let groups = (0..WRITERS)
        .filter(|&t| {
            let v: Option<String> = q(&mut c, &["GET", &keys(t)[0]]);
            v.is_some()
        })
        .count();
    assert_eq!(size as usize, 30000 + GROUP * groups);
}

/// Polls INFO persistence until `field` shows `value`; returns the section.
pub(crate) fn wait_info(c: &mut redis::Connection, field: &str, value: &str) -> String {
    for _ in 0..1000 {
        let info: String = q(c, &["INFO", "persistence"]);
        if info.contains(&format!("{field}:{value}\r\n")) {
            return info;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{field} never became {value}");
}

/// With save points, FLUSHALL writes the (empty) file at once, as Redis does: a restart does
/// not bring the flushed keys back. Without save points it writes nothing.
#[test]
fn flushall_with_save_points_writes_the_file() {
    for n in ["1", "2"] {
        let dir = TempDir::new(&format!("flushall{n}"));
        let file = Path::new(dir.path()).join("dump.rdb");
        let args = ["--threads", n, "--dir", dir.path(), "--save", "3600 1"];
        let server = Server::start(&args);
        let mut c = server.client();
        let _: () = q(&mut c, &["SET", "a", "1"]);
        let _: () = q(&mut c, &["SAVE"]);
        let _: () = q(&mut c, &["FLUSHALL"]);
        let info: String = q(&mut c, &["INFO", "persistence"]);
        assert!(info.contains("rdb_saves:2\r\n"), "{info}");
        drop(server);
        let server = Server::start(&args);
        let mut c = server.client();
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0, "{n} shards");
        assert!(file.exists());
        drop(server);
        let server = Server::start(&["--threads", n, "--dir", dir.path(), "--save", ""]);
        let mut c = server.client();
        let _: () = q(&mut c, &["SET", "b", "1"]);
        let _: () = q(&mut c, &["FLUSHALL"]);
        let info: String = q(&mut c, &["INFO", "persistence"]);
        assert!(info.contains("rdb_saves:0\r\n"), "{info}");
    }
}
