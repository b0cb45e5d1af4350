//! Commands through the server, exact replies, with one and with three shards.

use std::io::Write;
use std::time::Duration;

use crate::support::{call, closed, cmd, read_replies, Server};

/// A script of commands and their exact replies, over all command families of kvcore.
const SCRIPT: &[(&str, &str)] = &[
    ("PING", "+PONG\r\n"),
    ("ECHO hi", "$2\r\nhi\r\n"),
    ("SET k1 v1", "+OK\r\n"),
    ("GET k1", "$2\r\nv1\r\n"),
    ("SET n 10", "+OK\r\n"),
    ("INCRBY n 5", ":15\r\n"),
    ("DECR n", ":14\r\n"),
    ("INCRBYFLOAT n 0.5", "$4\r\n14.5\r\n"),
    ("APPEND k1 x", ":3\r\n"),
    ("STRLEN k1", ":3\r\n"),
    ("GETRANGE k1 0 1", "$2\r\nv1\r\n"),
    ("SETRANGE k1 0 Z", ":3\r\n"),
    ("GETSET k1 new", "$3\r\nZ1x\r\n"),
    ("GETDEL k1", "$3\r\nnew\r\n"),
    ("SETNX k1 a", ":1\r\n"),
    ("SETEX k2 100 b", "+OK\r\n"),
    ("TTL k2", ":100\r\n"),
    ("PERSIST k2", ":1\r\n"),
    ("EXPIRE k2 50 NX", ":1\r\n"),
    ("PEXPIRE k2 1000 LT", ":1\r\n"),
    ("GETEX k2 PERSIST", "$1\r\nb\r\n"),
    ("TYPE k2", "+string\r\n"),
    ("OBJECT ENCODING n", "$6\r\nembstr\r\n"),
    ("MSET a 1 b 2 c 3 d 4 e 5 f 6", "+OK\r\n"),
    (
        "MGET a b c d e f nokey",
        "*7\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n$1\r\n6\r\n$-1\r\n",
    ),
    ("MSETNX a 1 zz 2", ":0\r\n"),
    ("EXISTS a b c nokey", ":3\r\n"),
    ("TOUCH a b", ":2\r\n"),
    ("DEL a b nokey", ":2\r\n"),
    ("RENAME c c2", "+OK\r\n"),
    ("RENAMENX d c2", ":0\r\n"),
    ("COPY c2 c3", ":1\r\n"),
    ("GET c3", "$1\r\n3\r\n"),
    ("MOVE c3 1", ":1\r\n"),
    ("SELECT 1", "+OK\r\n"),
    ("GET c3", "$1\r\n3\r\n"),
    ("DBSIZE", ":1\r\n"),
    ("FLUSHDB", "+OK\r\n"),
    ("SELECT 0", "+OK\r\n"),
    ("GET nokey", "$-1\r\n"),
    (
        "INCR k1",
        "-ERR value is not an integer or out of range\r\n",
    ),
    (
        "GET",
        "-ERR wrong number of arguments for 'get' command\r\n",
    ),
    (
        "NOSUCH x",
        "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n",
    ),
    ("CONFIG SET maxmemory 0", "+OK\r\n"),
    (
        "CONFIG GET maxmemory",
        "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
    ),
    ("KEYS zz*", "*0\r\n"),
    ("FLUSHALL", "+OK\r\n"),
    ("DBSIZE", ":0\r\n"),
    ("RANDOMKEY", "$-1\r\n"),
];

fn run_script(shards: &str) {
    let server = Server::start(&["--threads", shards]);
    let mut s = server.raw();
    for (c, want) in SCRIPT {
        assert_eq!(call(&mut s, c), *want, "{c} with {shards} shards");
    }
}

#[test]
fn every_family_one_shard() {
    run_script("1");
}

#[test]
fn every_family_three_shards() {
    run_script("3");
}

#[test]
fn redis_crate_client() {
    let server = Server::start(&["--threads", "3"]);
    let mut c = server.client();
    let _: () = redis::cmd("SET")
        .arg("user:1")
        .arg("ada")
        .query(&mut c)
        .unwrap();
    let v: String = redis::cmd("GET").arg("user:1").query(&mut c).unwrap();
    assert_eq!(v, "ada");
    let n: i64 = redis::cmd("INCRBY")
        .arg("counter")
        .arg(41)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 41);
    let keys: Vec<String> = redis::cmd("MGET")
        .arg("user:1")
        .arg("counter")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, vec!["ada".to_string(), "41".to_string()]);
}

#[test]
fn input_split_byte_by_byte() {
    let server = Server::start(&["--threads", "3"]);
    let mut s = server.raw();
    s.set_nodelay(true).unwrap();
    let mut bytes = cmd("SET split value");
    bytes.extend(cmd("MSET x 1 y 2 z 3"));
    bytes.extend(cmd("MGET x y z split"));
    bytes.extend_from_slice(b"PING\r\n");
    for b in &bytes {
        s.write_all(std::slice::from_ref(b)).unwrap();
    }
    let r = read_replies(&mut s, 4);
    assert_eq!(r[0], b"+OK\r\n");
    assert_eq!(r[1], b"+OK\r\n");
    assert_eq!(
        r[2],
        b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$5\r\nvalue\r\n"
    );
    assert_eq!(r[3], b"+PONG\r\n");
}

/// One write holding more commands than the server parses ahead at once, a command with more
/// arguments than that look ahead keeps inline, an inline command among them, and a malformed
/// one at the end: every command before the error runs, in order, then the error, then EOF.
#[test]
fn parse_ahead_windows_big_commands_and_a_trailing_error() {
    let server = Server::start(&["--threads", "1"]);
    let mut s = server.raw();
    let mut batch = Vec::new();
    for i in 0..20 {
        batch.extend_from_slice(&cmd(&format!("SET w{i} {i}")));
    }
    let pairs: Vec<String> = (0..60).map(|i| format!("m{i} {i}")).collect();
    batch.extend_from_slice(&cmd(&format!("MSET {}", pairs.join(" "))));
    batch.extend_from_slice(b"INCR w3\r\n");
    for i in 0..20 {
        batch.extend_from_slice(&cmd(&format!("GET w{i}")));
    }
    batch.extend_from_slice(&cmd("GET m59"));
    batch.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$x\r\n");
    s.write_all(&batch).unwrap();
    let r = read_replies(&mut s, 44);
    for reply in &r[..21] {
        assert_eq!(reply, b"+OK\r\n");
    }
    assert_eq!(r[21], b":4\r\n");
    for (i, reply) in r[22..42].iter().enumerate() {
        let v = if i == 3 {
            "4".to_string()
        } else {
            i.to_string()
        };
        assert_eq!(
            reply,
            format!("${}\r\n{v}\r\n", v.len()).as_bytes(),
            "GET w{i}"
        );
    }
    assert_eq!(r[42], b"$2\r\n59\r\n");
    assert_eq!(
        String::from_utf8_lossy(&r[43]),
        "-ERR Protocol error: invalid bulk length\r\n"
    );
    assert!(closed(&mut s), "connection closed after the error");
}

#[test]
fn malformed_input_errors_and_closes_only_that_client() {
    let mut server = Server::start(&["--threads", "2"]);
    for (input, err) in [
        (
            &b"*abc\r\n"[..],
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\nfoo\r\n",
            "-ERR Protocol error: expected '$', got 'f'\r\n",
        ),
        (
            b"SET \"a b\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ] {
        let mut s = server.raw();
        s.write_all(b"PING\r\n").unwrap();
        s.write_all(input).unwrap();
        let r = read_replies(&mut s, 2);
        assert_eq!(r[0], b"+PONG\r\n");
        assert_eq!(String::from_utf8_lossy(&r[1]), err);
        assert!(closed(&mut s), "connection closed after {err}");
    }
    assert!(server.alive());
    let mut s = server.raw();
    assert_eq!(call(&mut s, "PING"), "+PONG\r\n");
}

#[test]
fn quit_and_shutdown() {
    let mut server = Server::start(&["--threads", "2"]);
    let mut s = server.raw();
    assert_eq!(call(&mut s, "QUIT"), "+OK\r\n");
    assert!(closed(&mut s));
    let mut s = server.raw();
    s.write_all(b"SHUTDOWN\r\n").unwrap();
    assert!(closed(&mut s));
    for _ in 0..50 {
        if !server.alive() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("server still running after SHUTDOWN");
}

#[test]
fn redis_cli_and_redis_benchmark() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port.to_string();
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &port, "SET", "cli", "works"])
        .output()
        .expect("redis-cli is installed");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    // Interactive redis-cli asks COMMAND DOCS first; our reply must be one it accepts.
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &port, "COMMAND", "DOCS", "get"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("string"));
    let out = std::process::Command::new("redis-benchmark")
        .args([
            "-p",
            &port,
            "-n",
            "20000",
            "-c",
            "20",
            "-P",
            "8",
            "-t",
            "set,get,incr,mset",
            "-r",
            "1000",
            "-q",
        ])
        .output()
        .expect("redis-benchmark is installed");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for t in ["SET:", "GET:", "INCR:", "MSET (10 keys):"] {
        assert!(text.contains(t), "{t} missing in {text}");
    }
    assert_eq!(text.matches("requests per second").count(), 4, "{text}");
    assert!(!text.to_lowercase().contains("error"), "{text}");
}

/// Start-up problems print one clear line and exit 1; a port another server holds is one of
/// them (SO_REUSEPORT must not let a second server share it).
#[test]
fn start_up_errors_are_one_line_and_exit_1() {
    let server = Server::start(&["--threads", "2"]);
    let port = server.port.to_string();
    let cases: [(&[&str], &str); 3] = [
        (&["--port", &port], "can't listen on 127.0.0.1:"),
        (&["--bogus", "1"], "unknown option 'bogus'"),
        (&["/nonexistent/kv.conf"], "can't read config file"),
    ];
    for (args, want) in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvserver"))
            .args(args)
            .output()
            .expect("kvserver runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let mut s = server.raw();
    assert_eq!(call(&mut s, "PING"), "+PONG\r\n");
}

/// A pipeline mixing multibulk and inline commands in one read (the server looks ahead over a
/// batch's keys to prefetch them): every reply in order, with 1 and 3 shards.
#[test]
fn mixed_multibulk_and_inline_pipeline() {
    for shards in ["1", "3"] {
        let server = Server::start(&["--threads", shards]);
        let mut s = server.raw();
        let mut batch = Vec::new();
        for i in 0..40 {
            if i % 3 == 0 {
                batch.extend_from_slice(format!("SET k{i} v{i}\r\n").as_bytes());
            } else {
                batch.extend_from_slice(&cmd(&format!("SET k{i} v{i}")));
            }
        }
        for i in 0..40 {
            if i % 4 == 1 {
                batch.extend_from_slice(format!("GET k{i}\r\n").as_bytes());
            } else {
                batch.extend_from_slice(&cmd(&format!("GET k{i}")));
            }
        }
        batch.extend_from_slice(b"PING\r\n");
        s.write_all(&batch).unwrap();
        let replies = read_replies(&mut s, 81);
        for r in &replies[..40] {
            assert_eq!(r, b"+OK\r\n");
        }
        for (i, r) in replies[40..80].iter().enumerate() {
            let v = format!("v{i}");
            assert_eq!(r, format!("${}\r\n{v}\r\n", v.len()).as_bytes(), "GET k{i}");
        }
        assert_eq!(replies[80], b"+PONG\r\n");
    }
}
