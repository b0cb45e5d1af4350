//! MONITOR against a real redis-server: the same commands from two clients, over keys of both
//! shards of a 2-thread kvserver, give the same monitor lines (the timestamp masked, each
//! client's address replaced by its name): binary arguments quoted as Redis quotes them, AUTH
//! and HELLO passwords redacted, admin commands and refused ones left out, transactions and
//! scripts (on one shard and across both) in Redis's order. Also what a monitor may still do.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::Redis;
use crate::support::{encode, key_on, read_replies, Server};

/// Client 0, 1 or 2, and the arguments it sends. Client 2 does not wait for its reply: the
/// next step of client 2 (with no arguments) reads it.
type Step = (usize, Vec<Vec<u8>>);

fn steps(k0: &str, k1: &str) -> Vec<Step> {
    let line = |c: usize, l: &str| (c, l.split(' ').map(|a| a.as_bytes().to_vec()).collect());
    let raw = |c: usize, args: &[&[u8]]| (c, args.iter().map(|a| a.to_vec()).collect());
    let set_script = "redis.call('set',KEYS[1],'v'); return redis.call('get',KEYS[1])";
    let both_script = "redis.call('set',KEYS[1],'1'); return redis.call('set',KEYS[2],'2')";
    vec![
        raw(0, &[b"SET", b"a\"b c", b"\x01\n\r\t\\\x07\x08z\xff"]),
        line(0, "AUTH secret"),
        line(1, "AUTH user secret"),
        line(1, "HELLO 2 AUTH user secret SETNAME x"),
        line(0, "SELECT 3"),
        line(0, &format!("SET {k0} 1")),
        line(1, &format!("SET {k1} 2")),
        line(0, "MULTI"),
        line(0, &format!("SET {k0} x")),
        line(0, &format!("INCR {k1}")),
        line(0, "EXEC"),
        raw(1, &[b"EVAL", set_script.as_bytes(), b"1", k1.as_bytes()]),
        raw(1, &[b"EVAL", set_script.as_bytes(), b"1", k0.as_bytes()]),
        raw(
            0,
            &[
                b"EVAL",
                both_script.as_bytes(),
                b"2",
                k0.as_bytes(),
                k1.as_bytes(),
            ],
        ),
        line(0, "CONFIG GET maxmemory"),
        line(1, "CLIENT LIST"),
        line(1, "CLIENT SETNAME foo"),
        line(0, &format!("MSET {k0} 1 {k1} 2")),
        line(1, &format!("DEL {k0} {k1}")),
        line(0, "NOSUCHCOMMAND x"),
        line(0, "GET"),
        line(0, "MULTI"),
        line(0, "GET"),
        line(0, "EXEC"),
        line(1, "PUBLISH ch hi"),
        // A blocking pop is shown when it blocks, before the push that serves it.
        line(2, &format!("BLPOP {k1} 5")),
        line(1, &format!("LPUSH {k1} a")),
        (2, Vec::new()),
        line(1, &format!("BLPOP {k0} 0.01")),
        line(1, &format!("RPUSH {k0} a")),
        line(1, &format!("BLPOP {k0} 1")),
        line(0, "MULTI"),
        line(0, "MONITOR"),
        line(0, "EXEC"),
        line(0, "ECHO done"),
    ]
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads monitor lines until one ends with `last`.
fn lines_until(s: &mut TcpStream, last: &str) -> Vec<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&buf).into_owned();
        let lines: Vec<String> = text.split_inclusive("\r\n").map(str::to_owned).collect();
        if lines.iter().any(|l| l.ends_with(&format!("{last}\r\n"))) {
            return lines;
        }
        assert!(Instant::now() < deadline, "no {last} in {text:?}");
        let n = s.read(&mut chunk).expect("monitor reads");
        assert!(n > 0, "monitor closed: {text:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `+<secs>.<micros> [<db> <ip:port>] args` with the time masked and the address named.
fn mask(line: &str, names: &[(String, &str)]) -> String {
    let (time, rest) = line.split_once(' ').expect("a space after the time");
    let (secs, micros) = time
        .strip_prefix('+')
        .and_then(|t| t.split_once('.'))
        .unwrap_or_else(|| panic!("a time in {line:?}"));
    assert!(
        secs.len() >= 10 && micros.len() == 6,
        "time {time:?} in {line:?}"
    );
    assert!(secs
        .bytes()
        .chain(micros.bytes())
        .all(|b| b.is_ascii_digit()));
    let mut rest = rest.to_owned();
    for (addr, name) in names {
        rest = rest.replace(&format!(" {addr}]"), &format!(" {name}]"));
    }
    format!("+T {rest}")
}

/// The masked lines a server's monitor shows for `steps`.
fn monitor_lines(port: u16, steps: &[Step]) -> Vec<String> {
    let mut monitor = connect(port);
    monitor.write_all(&encode(&[b"MONITOR"])).unwrap();
    assert_eq!(read_replies(&mut monitor, 1), vec![b"+OK\r\n".to_vec()]);
    let mut clients = [connect(port), connect(port), connect(port)];
    let names: Vec<(String, &str)> = clients
        .iter()
        .zip(["A", "B", "C"])
        .map(|(c, n)| (c.local_addr().unwrap().to_string(), n))
        .collect();
    for (c, args) in steps {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        if !args.is_empty() {
            clients[*c].write_all(&encode(&args)).unwrap();
        }
        if *c != 2 || args.is_empty() {
            read_replies(&mut clients[*c], 1);
        } else {
            // Blocked before the next step.
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    lines_until(&mut monitor, "\"done\"")
        .iter()
        .map(|l| mask(l, &names))
        .collect()
}

#[test]
fn monitor_shows_what_redis_shows() {
    let n = 2;
    let (k0, k1) = (key_on("k", 0, n, 0), key_on("k", 1, n, 0));
    let steps = steps(&k0, &k1);
    let redis = Redis::start();
    let expected = monitor_lines(redis.port, &steps);
    let server = Server::start(&["--threads", &n.to_string()]);
    // Several rounds: the clients land on either shard.
    for _ in 0..3 {
        let got = monitor_lines(server.port, &steps);
        assert_eq!(
            got,
            expected,
            "\ngot:\n{}\nredis:\n{}",
            got.concat(),
            expected.concat()
        );
    }
    // Spot checks of the masks and quoting, whatever both servers agree on.
    assert!(expected[0].starts_with(r#"+T [0 A] "SET" "a\"b c" "\x01\n\r\t\\\a\bz\xff""#));
    assert!(expected.contains(&"+T [0 A] \"AUTH\" \"(redacted)\"\r\n".to_string()));
}

#[test]
fn a_monitor_answers_ping_and_leaves_by_reset() {
    for port_of in [0, 1] {
        let redis;
        let server;
        let port = if port_of == 0 {
            redis = Redis::start();
            redis.port
        } else {
            server = Server::start(&["--threads", "2"]);
            server.port
        };
        let mut m = connect(port);
        let send = |m: &mut TcpStream, line: &str| {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            m.write_all(&encode(&args)).unwrap();
            String::from_utf8_lossy(&read_replies(m, 1)[0]).into_owned()
        };
        assert_eq!(send(&mut m, "MULTI"), "+OK\r\n");
        assert_eq!(send(&mut m, "MONITOR"), "+QUEUED\r\n");
        assert_eq!(
            send(&mut m, "EXEC"),
            "*1\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n"
        );
        assert_eq!(send(&mut m, "MONITOR"), "+OK\r\n");
        let mut other = connect(port);
        let list = send(&mut other, "CLIENT LIST");
        assert!(
            list.contains("flags=O ") && list.contains("cmd=monitor "),
            "{list}"
        );
        assert_eq!(
            send(&mut m, "GET a"),
            "-ERR Replica can't interact with the keyspace\r\n"
        );
        // Its own PING is shown, after the reply.
        m.write_all(&encode(&[b"PING"])).unwrap();
        let lines = lines_until(&mut m, "\"PING\"");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0], "+PONG\r\n");
        assert_eq!(send(&mut m, "RESET"), "+RESET\r\n");
        assert_eq!(send(&mut other, "SET a 1"), "+OK\r\n");
        assert_eq!(send(&mut m, "GET a"), "$1\r\n1\r\n");
        let list = send(&mut other, "CLIENT LIST");
        assert!(!list.contains("flags=O "), "{list}");
    }
}
