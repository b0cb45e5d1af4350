//! RDB files: SAVE and a restart keep every key, value and deadline with 1 and 3 shards;
//! Debian's redis-check-rdb accepts our file, redis-server loads it with the same contents and
//! we load redis-server's; a damaged file stops the start with one line naming the offset;
//! SHUTDOWN SAVE|NOSAVE|ABORT and LASTSAVE as Redis.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::Server;

/// A fresh directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("kv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Every type and encoding: strings (int, short, long and compressible), lists small and
/// big, sets of integers, short strings and many, hashes small and big, sorted sets small and
/// big, a HyperLogLog, deadlines, and a second database.
fn fill(c: &mut redis::Connection) {
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
    let _: i64 = q(c, &["EXPIRE", "l:small", "7200"]);
    let _: () = q(c, &["SELECT", "2"]);
    let _: () = q(c, &["SET", "in-db-2", "yes"]);
    let _: () = q(c, &["SELECT", "0"]);
}

/// Each key of databases 0 and 2 with its type, contents (sets and hashes sorted) and
/// whether it has a deadline.
fn contents(c: &mut redis::Connection) -> BTreeMap<(i64, String), String> {
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
                "zset" => format!(
                    "{:?}",
                    q::<Vec<Vec<u8>>>(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"])
                ),
                other => panic!("type {other}"),
            };
            let ttl: i64 = q(c, &["PTTL", &k]);
            all.insert((db, k), format!("{ty} {body} ttl={}", ttl > 0));
        }
    }
    let _: () = q(c, &["SELECT", "0"]);
    all
}

fn redis_server(dir: &str, file: &str) -> (std::process::Child, redis::Connection) {
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
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    for _ in 0..100 {
        if let Ok(mut c) = client.get_connection() {
            // Wait for the load to finish.
            if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                return (child, c);
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
        assert_eq!(before.len(), 15, "{:?}", before.keys().collect::<Vec<_>>());
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
