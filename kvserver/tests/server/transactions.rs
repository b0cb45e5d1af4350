//! MULTI / EXEC / DISCARD / WATCH / UNWATCH, with 1 and 3 shards: Redis's replies, atomicity
//! under concurrency (no lost increment, no torn read), WATCH aborting exactly where Redis
//! does, and a real client's transactional pipeline.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::support::{call, key_on, Server};

const SHARDS: usize = 3;
const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

fn k(shard: usize, i: usize) -> String {
    key_on("t", shard, SHARDS, i)
}

/// The elements of an array reply, as debug text.
fn array(reply: &str) -> Vec<String> {
    match kvcore::resp::reply::parse_reply(reply.as_bytes()) {
        Ok(Some((kvcore::Reply::Array(items), _))) => {
            items.iter().map(|v| format!("{v:?}")).collect()
        }
        other => panic!("not an array: {reply:?} ({other:?})"),
    }
}

/// Runs `script` on a server with 1 and with 3 shards; both must give the same replies.
fn both(script: &[String]) -> Vec<String> {
    let mut runs = Vec::new();
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let mut c = server.raw();
        runs.push(script.iter().map(|l| call(&mut c, l)).collect::<Vec<_>>());
    }
    assert_eq!(runs[0], runs[1], "1 shard and 3 shards answer differently");
    runs.swap_remove(0)
}

#[test]
fn queueing_errors_and_exec_replies_as_redis() {
    let (a, b, c) = (k(0, 0), k(1, 0), k(2, 0));
    let script: Vec<String> = [
        "MULTI".to_string(),
        format!("SET {a} 1"),
        format!("INCR {a}"),
        format!("SET {b} notanumber"),
        format!("INCR {b}"),
        format!("MGET {a} {b} {c}"),
        format!("LPUSH {c} x"),
        "EXEC".into(),
        // A queue-time error aborts the whole transaction.
        "MULTI".into(),
        format!("SET {a} 5"),
        "NOSUCHCOMMAND x".into(),
        format!("GET {a} extra"),
        "EXEC".into(),
        format!("GET {a}"),
        // Errors outside or inside a transaction.
        "EXEC".into(),
        "DISCARD".into(),
        "MULTI".into(),
        "MULTI".into(),
        format!("WATCH {a}"),
        "DISCARD".into(),
        // DISCARD drops the queue.
        "MULTI".into(),
        format!("SET {a} 99"),
        "DISCARD".into(),
        format!("GET {a}"),
        // Blocking commands inside MULTI do not block.
        "MULTI".into(),
        format!("BLPOP {c} 0"),
        format!("BLPOP nosuch{{{a}}} 0"),
        format!("BLMOVE {b} {c} LEFT RIGHT 0"),
        format!("BZPOPMIN nosuch {a} 0"),
        "EXEC".into(),
        // SELECT inside a transaction moves the rest of it.
        "MULTI".into(),
        "SELECT 3".into(),
        format!("SET {a} in3"),
        "SELECT 0".into(),
        format!("GET {a}"),
        "EXEC".into(),
        "SELECT 3".into(),
        format!("GET {a}"),
        "SELECT 0".into(),
        // Keyless and whole-keyspace commands inside a transaction.
        "MULTI".into(),
        "PING".into(),
        "ECHO hi".into(),
        "DBSIZE".into(),
        format!("DEL {a} {b} {c}"),
        "DBSIZE".into(),
        "EXEC".into(),
        "MULTI".into(),
        "EXEC".into(),
        "EXEC x".into(),
        "MULTI".into(),
        "EXEC x".into(),
        "EXEC".into(),
    ]
    .to_vec();
    let got = both(&script);
    let blpop = format!(
        "*4\r\n*2\r\n${}\r\n{c}\r\n$1\r\nx\r\n*-1\r\n{WRONGTYPE}{WRONGTYPE}",
        c.len()
    );
    let want: Vec<&str> = vec![
        "+OK\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "*6\r\n+OK\r\n:2\r\n+OK\r\n-ERR value is not an integer or out of range\r\n*3\r\n$1\r\n2\r\n$10\r\nnotanumber\r\n$-1\r\n:1\r\n",
        "+OK\r\n",
        "+QUEUED\r\n",
        "-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: 'x' \r\n",
        "-ERR wrong number of arguments for 'get' command\r\n",
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
        "$1\r\n2\r\n",
        "-ERR EXEC without MULTI\r\n",
        "-ERR DISCARD without MULTI\r\n",
        "+OK\r\n",
        "-ERR MULTI calls can not be nested\r\n",
        "-ERR WATCH inside MULTI is not allowed\r\n",
        "+OK\r\n",
        "+OK\r\n",
        "+QUEUED\r\n",
        "+OK\r\n",
        "$1\r\n2\r\n",
        "+OK\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        &blpop,
        "+OK\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "*4\r\n+OK\r\n+OK\r\n+OK\r\n$1\r\n2\r\n",
        "+OK\r\n",
        "$3\r\nin3\r\n",
        "+OK\r\n",
        "+OK\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "+QUEUED\r\n",
        "*5\r\n+PONG\r\n$2\r\nhi\r\n:2\r\n:2\r\n:0\r\n",
        "+OK\r\n",
        "*0\r\n",
        "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n",
        "+OK\r\n",
        "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n",
        "-ERR EXEC without MULTI\r\n",
    ];
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "reply {i} to {:?}", script[i]);
    }
}

#[test]
fn resp3_exec_reply_and_nil_on_touched_watch() {
    let a = k(1, 3);
    let script: Vec<String> = vec![
        "HELLO 3".into(),
        format!("WATCH {a}"),
        format!("SET {a} 1"),
        "MULTI".into(),
        format!("INCR {a}"),
        "EXEC".into(),
        "MULTI".into(),
        format!("INCR {a}"),
        "EXEC".into(),
    ];
    let got = both(&script);
    assert_eq!(
        got[5], "_\r\n",
        "a touched WATCH makes EXEC answer the RESP3 null"
    );
    assert_eq!(got[8], "*1\r\n:2\r\n");
}

/// WATCH aborts EXEC when the watched key was written, expired, deleted by FLUSHDB or
/// FLUSHALL, or moved by SWAPDB; and not when it was only read, or written in another
/// database, or when a SET NX did not set it.
#[test]
fn watch_aborts_exactly_where_redis_does() {
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let mut c = server.raw();
        let mut other = server.raw();
        let (w, x) = (k(0, 7), k(2, 7));
        // (setup on `other` between WATCH and EXEC, whether EXEC must abort)
        let cases: Vec<(Vec<String>, bool)> = vec![
            (vec![format!("SET {w} v")], true),
            (vec![format!("GET {w}")], false),
            (vec![format!("SET {x} v")], false),
            (vec![format!("SET {w} v NX")], false),
            (vec![format!("DEL {w}")], true),
            (vec!["FLUSHDB".into()], true),
            (vec!["FLUSHALL".into()], true),
            (vec!["SWAPDB 0 1".into()], true),
            (vec![format!("EXPIRE {w} 100")], true),
            (vec!["SELECT 5".into(), format!("SET {w} v")], false),
        ];
        for (i, (touch, aborts)) in cases.iter().enumerate() {
            call(&mut other, "SELECT 0");
            call(&mut other, "FLUSHALL");
            call(&mut other, &format!("SET {w} start"));
            call(&mut other, "SELECT 1");
            call(&mut other, &format!("SET {w} in1"));
            call(&mut other, "SELECT 0");
            assert_eq!(call(&mut c, &format!("WATCH {w}")), "+OK\r\n");
            for t in touch {
                call(&mut other, t);
            }
            call(&mut other, "SELECT 0");
            call(&mut c, "MULTI");
            call(&mut c, &format!("GET {x}"));
            let r = call(&mut c, "EXEC");
            assert_eq!(
                r == "*-1\r\n",
                *aborts,
                "case {i} {touch:?} with {threads} shards: EXEC answered {r:?}"
            );
        }
        // An already-expired watched key that is then deleted is no change (Redis 7.0+).
        call(&mut other, &format!("SET {w} v PX 1"));
        std::thread::sleep(std::time::Duration::from_millis(5));
        call(&mut c, &format!("WATCH {w}"));
        call(&mut c, "MULTI");
        call(&mut c, "PING");
        assert_eq!(call(&mut c, "EXEC"), "*1\r\n+PONG\r\n");
        // A key that expires between WATCH and EXEC aborts it.
        call(&mut other, &format!("SET {w} v PX 50"));
        call(&mut c, &format!("WATCH {w}"));
        std::thread::sleep(std::time::Duration::from_millis(80));
        call(&mut c, "MULTI");
        call(&mut c, "PING");
        assert_eq!(call(&mut c, "EXEC"), "*-1\r\n");
        // UNWATCH forgets; DISCARD forgets.
        call(&mut c, &format!("WATCH {w}"));
        call(&mut other, &format!("SET {w} v"));
        call(&mut c, "UNWATCH");
        call(&mut c, "MULTI");
        call(&mut c, "PING");
        assert_eq!(call(&mut c, "EXEC"), "*1\r\n+PONG\r\n");
    }
}

/// Many clients increment two counters on different shards in transactions while readers
/// read both in transactions: no increment is lost and no reader ever sees one counter ahead
/// of the other. Other clients run WATCH-based check-and-set on a third counter: every
/// successful EXEC adds exactly one.
#[test]
fn concurrent_transactions_lose_nothing_and_tear_nothing() {
    let server = Server::start(&["--threads", "3"]);
    let (a, b, cas) = (k(0, 11), k(1, 11), k(2, 11));
    let stop = Arc::new(AtomicBool::new(false));
    const WRITERS: usize = 4;
    const ROUNDS: usize = 300;
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (mut c, stop) = (server.raw(), stop.clone());
        let (a, b) = (a.clone(), b.clone());
        readers.push(std::thread::spawn(move || {
            let mut seen = 0;
            while !stop.load(Ordering::Relaxed) {
                call(&mut c, "MULTI");
                call(&mut c, &format!("GET {a}"));
                call(&mut c, &format!("GET {b}"));
                let r = call(&mut c, "EXEC");
                let vals = array(&r);
                assert_eq!(vals.len(), 2, "{r:?}");
                assert_eq!(vals[0], vals[1], "torn read: {r:?}");
                let m = call(&mut c, &format!("MGET {a} {b}"));
                let vals = array(&m);
                assert_eq!(vals[0], vals[1], "torn MGET: {m:?}");
                seen += 1;
            }
            seen
        }));
    }
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        let mut c = server.raw();
        let (a, b) = (a.clone(), b.clone());
        writers.push(std::thread::spawn(move || {
            for _ in 0..ROUNDS {
                call(&mut c, "MULTI");
                call(&mut c, &format!("INCR {a}"));
                call(&mut c, &format!("INCR {b}"));
                let r = call(&mut c, "EXEC");
                assert!(r.starts_with("*2\r\n:"), "{r:?}");
            }
        }));
    }
    let mut cassers = Vec::new();
    for _ in 0..3 {
        let mut c = server.raw();
        let cas = cas.clone();
        cassers.push(std::thread::spawn(move || {
            let mut done = 0;
            for _ in 0..100 {
                loop {
                    call(&mut c, &format!("WATCH {cas}"));
                    let v = call(&mut c, &format!("GET {cas}"));
                    let n: i64 = v
                        .split("\r\n")
                        .nth(1)
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    call(&mut c, "MULTI");
                    call(&mut c, &format!("SET {cas} {}", n + 1));
                    if call(&mut c, "EXEC") != "*-1\r\n" {
                        done += 1;
                        break;
                    }
                }
            }
            done
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    let cas_done: i64 = cassers.into_iter().map(|t| t.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    let reads: usize = readers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(reads > 0);
    let mut c = server.raw();
    let total = (WRITERS * ROUNDS).to_string();
    assert_eq!(
        call(&mut c, &format!("MGET {a} {b}")),
        format!("*2\r\n${0}\r\n{1}\r\n${0}\r\n{1}\r\n", total.len(), total)
    );
    assert_eq!(cas_done, 300);
    assert_eq!(call(&mut c, &format!("GET {cas}")), "$3\r\n300\r\n");
}

/// The `redis` crate's atomic pipeline (MULTI ... EXEC) across shards.
#[test]
fn redis_crate_atomic_pipeline() {
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let mut con = server.client();
        let (a, b) = (k(0, 20), k(2, 20));
        let (x, y, z): (i64, i64, Vec<Option<i64>>) = redis::pipe()
            .atomic()
            .incr(&a, 5)
            .incr(&b, 7)
            .mget(&[&a, &b, "missing"])
            .query(&mut con)
            .unwrap();
        assert_eq!((x, y, z), (5, 7, vec![Some(5), Some(7), None]));
    }
}

/// A client blocked on a list is served after a transaction that pushes to it, not in the
/// middle: it never pops an element the transaction then misses (LLEN inside the same EXEC
/// sees the pushed element), whichever shards the keys live on.
#[test]
fn blocked_clients_are_served_after_the_transaction() {
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let (q, other) = (k(0, 30), k(2, 30));
        for round in 0..20 {
            let mut waiter = server.raw();
            waiter
                .write_all(&crate::support::cmd(&format!("BLPOP {q} 5")))
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut c = server.raw();
            call(&mut c, "MULTI");
            call(&mut c, &format!("SET {other} x"));
            call(&mut c, &format!("RPUSH {q} v{round}"));
            call(&mut c, &format!("LLEN {q}"));
            call(&mut c, &format!("GET {other}"));
            let r = call(&mut c, "EXEC");
            assert_eq!(
                r, "*4\r\n+OK\r\n:1\r\n:1\r\n$1\r\nx\r\n",
                "{threads} shards"
            );
            let got = crate::support::read_replies(&mut waiter, 1);
            let want = format!(
                "*2\r\n${}\r\n{q}\r\n${}\r\nv{round}\r\n",
                q.len(),
                format!("v{round}").len()
            );
            assert_eq!(String::from_utf8_lossy(&got[0]), want);
        }
    }
}

/// WAIT with no replica: 0 at once when no acknowledgement is asked for or inside EXEC,
/// otherwise 0 once the timeout has passed; argument errors as Redis; the commands pipelined
/// behind it are answered after it.
#[test]
fn wait_without_replicas() {
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let mut c = server.raw();
        assert_eq!(call(&mut c, "WAIT 0 0"), ":0\r\n");
        assert_eq!(call(&mut c, "WAIT -3 0"), ":0\r\n");
        assert_eq!(
            call(&mut c, "WAIT x 0"),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(
            call(&mut c, "WAIT 1 1.5"),
            "-ERR timeout is not an integer or out of range\r\n"
        );
        assert_eq!(call(&mut c, "WAIT 1 -1"), "-ERR timeout is negative\r\n");
        let start = std::time::Instant::now();
        c.write_all(&crate::support::cmd("WAIT 1 150")).unwrap();
        c.write_all(&crate::support::cmd("PING")).unwrap();
        let got = crate::support::read_replies(&mut c, 2);
        assert!(start.elapsed() >= std::time::Duration::from_millis(150));
        assert_eq!(got, vec![b":0\r\n".to_vec(), b"+PONG\r\n".to_vec()]);
        call(&mut c, "MULTI");
        call(&mut c, "WAIT 2 0");
        assert_eq!(call(&mut c, "EXEC"), "*1\r\n:0\r\n");
    }
}
