//! Blocked clients: BZPOPMIN, BZPOPMAX and BZMPOP wait for their keys, on one shard and across
//! shards, are woken by every kind of write, time out, and are forgotten when they hang up.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::{call, cmd, read_replies, Server};

pub(super) const SHARDS: usize = 3;

/// The `i`-th key of the form `b<j>` that lives on `shard` of [`SHARDS`].
pub(super) fn key_on(shard: usize, i: usize) -> String {
    crate::support::key_on("b", shard, SHARDS, i)
}

/// Sends a command without waiting for its reply.
pub(super) fn send(s: &mut TcpStream, line: &str) {
    s.write_all(&cmd(line)).unwrap();
}

/// Asserts that nothing arrives on `s` for `wait`.
pub(super) fn still_blocked(s: &mut TcpStream, wait: Duration) {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!(
            "expected no reply yet, got {other:?} {:?}",
            String::from_utf8_lossy(&b)
        ),
    }
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
}

pub(super) fn reply(s: &mut TcpStream) -> String {
    String::from_utf8_lossy(&read_replies(s, 1)[0]).into_owned()
}

/// INFO's `blocked_clients`, once it equals `want` (polled: a client leaves the count only
/// after the server has seen it go).
pub(super) fn wait_blocked(ctl: &mut TcpStream, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info = call(ctl, "INFO clients");
        let n: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .expect("INFO clients has blocked_clients")
            .trim()
            .parse()
            .unwrap();
        if n == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "blocked_clients stayed {n}, want {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_blocked_pop_is_woken_by_a_write_to_its_key_on_any_shard() {
    for shards in [1, 3] {
        let server = Server::start(&["--threads", &shards.to_string()]);
        let mut ctl = server.raw();
        for s in 0..SHARDS {
            let k = key_on(s, 0);
            let mut a = server.raw();
            send(&mut a, &format!("BZPOPMIN {k} 0"));
            wait_blocked(&mut ctl, 1);
            still_blocked(&mut a, Duration::from_millis(100));
            assert_eq!(call(&mut ctl, &format!("ZADD {k} 7 m")), ":1\r\n");
            assert_eq!(
                reply(&mut a),
                format!("*3\r\n${}\r\n{k}\r\n$1\r\nm\r\n$1\r\n7\r\n", k.len()),
                "{shards} shards, key on shard {s}"
            );
            wait_blocked(&mut ctl, 0);
            assert_eq!(call(&mut ctl, &format!("EXISTS {k}")), ":0\r\n");
        }
    }
}

#[test]
fn blocked_clients_get_one_member_each_and_the_rest_wait() {
    let server = Server::start(&["--threads", "3"]);
    let mut ctl = server.raw();
    let k = key_on(2, 1);
    let mut waiting: Vec<TcpStream> = (0..3).map(|_| server.raw()).collect();
    for c in &mut waiting {
        send(c, &format!("BZPOPMAX {k} 0"));
    }
    wait_blocked(&mut ctl, 3);
    // Two members for three clients: two are served, one waits on.
    call(&mut ctl, &format!("ZADD {k} 1 a 2 b"));
    wait_blocked(&mut ctl, 1);
    let mut got = Vec::new();
    let mut left = None;
    for (i, c) in waiting.iter_mut().enumerate() {
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut b = [0u8; 256];
        match c.read(&mut b) {
            Ok(n) => got.push(String::from_utf8_lossy(&b[..n]).into_owned()),
            Err(_) => left = Some(i),
        }
    }
    got.sort();
    let line =
        |m: &str, s: &str| format!("*3\r\n${}\r\n{k}\r\n$1\r\n{m}\r\n$1\r\n{s}\r\n", k.len());
    assert_eq!(got, vec![line("a", "1"), line("b", "2")]);
    let left = left.expect("one client still waits");
    call(&mut ctl, &format!("ZADD {k} 3 c"));
    waiting[left]
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(reply(&mut waiting[left]), line("c", "3"));
    wait_blocked(&mut ctl, 0);
}

#[test]
fn a_write_serves_blocked_clients_oldest_first_before_the_next_command() {
    for shards in ["1", "3"] {
        let server = Server::start(&["--threads", shards]);
        let mut ctl = server.raw();
        let k = key_on(1, 6);
        let (mut a1, mut a2) = (server.raw(), server.raw());
        send(&mut a1, &format!("BZPOPMIN {k} 0"));
        wait_blocked(&mut ctl, 1);
        send(&mut a2, &format!("BZPOPMIN {k} 0"));
        wait_blocked(&mut ctl, 2);
        // As in Redis: the blocked clients take their members right after the ZADD, in the
        // order they blocked, before the writer's next command runs.
        let mut w = server.raw();
        let mut req = cmd(&format!("ZADD {k} 1 x 2 y 3 z"));
        req.extend(cmd(&format!("ZCARD {k}")));
        req.extend(cmd(&format!("ZPOPMIN {k}")));
        w.write_all(&req).unwrap();
        let replies: Vec<String> = read_replies(&mut w, 3)
            .into_iter()
            .map(|r| String::from_utf8_lossy(&r).into_owned())
            .collect();
        assert_eq!(
            replies,
            [":3\r\n", ":1\r\n", "*2\r\n$1\r\nz\r\n$1\r\n3\r\n"]
        );
        let line =
            |m: &str, s: &str| format!("*3\r\n${}\r\n{k}\r\n$1\r\n{m}\r\n$1\r\n{s}\r\n", k.len());
        assert_eq!(reply(&mut a1), line("x", "1"), "{shards} shards");
        assert_eq!(reply(&mut a2), line("y", "2"), "{shards} shards");
        wait_blocked(&mut ctl, 0);
    }
}

#[test]
fn a_blocking_pop_times_out_with_a_null_reply() {
    let server = Server::start(&["--threads", "3"]);
    let mut a = server.raw();
    for (line, want) in [
        ("BZPOPMIN nokey 0.2", "*-1\r\n"),
        ("BZMPOP 0.2 2 nokey other MIN COUNT 3", "*-1\r\n"),
    ] {
        let t = Instant::now();
        assert_eq!(call(&mut a, line), want);
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(190) && took < Duration::from_secs(3),
            "{line} answered after {took:?}"
        );
    }
    // Under a millisecond rounds up to one, as in Redis 7.0 (0 would wait for ever).
    let t = Instant::now();
    assert_eq!(call(&mut a, "BZPOPMIN nokey 0.0001"), "*-1\r\n");
    assert!(t.elapsed() < Duration::from_secs(3));
    // RESP3 spells the null reply `_`.
    send(&mut a, "HELLO 3");
    read_replies(&mut a, 1);
    assert_eq!(call(&mut a, "BZPOPMAX nokey 0.05"), "_\r\n");
    let mut ctl = server.raw();
    wait_blocked(&mut ctl, 0);
}

#[test]
fn a_pop_over_keys_on_several_shards_takes_the_first_key_written() {
    let server = Server::start(&["--threads", "3"]);
    let mut ctl = server.raw();
    let (k0, k1, k2) = (key_on(0, 2), key_on(1, 2), key_on(2, 2));
    let mut a = server.raw();
    send(&mut a, &format!("BZMPOP 0 3 {k0} {k1} {k2} MIN COUNT 5"));
    wait_blocked(&mut ctl, 1);
    call(&mut ctl, &format!("ZADD {k1} 2 y 1 x"));
    assert_eq!(
        reply(&mut a),
        format!(
            "*2\r\n${}\r\n{k1}\r\n*2\r\n*2\r\n$1\r\nx\r\n$1\r\n1\r\n*2\r\n$1\r\ny\r\n$1\r\n2\r\n",
            k1.len()
        )
    );
    wait_blocked(&mut ctl, 0);
    // Its registrations on the other keys are gone: their members stay.
    call(&mut ctl, &format!("ZADD {k0} 1 p"));
    call(&mut ctl, &format!("ZADD {k2} 1 q"));
    assert_eq!(call(&mut ctl, &format!("ZCARD {k0}")), ":1\r\n");
    assert_eq!(call(&mut ctl, &format!("ZCARD {k2}")), ":1\r\n");
}

#[test]
fn writes_spanning_shards_and_type_changes_wake_or_keep_waiting_as_redis_does() {
    let server = Server::start(&["--threads", "3"]);
    let mut ctl = server.raw();
    let (dest, src) = (key_on(0, 3), key_on(1, 3));
    call(&mut ctl, &format!("ZADD {src} 5 s"));
    let mut a = server.raw();
    send(&mut a, &format!("BZPOPMIN {dest} 0"));
    wait_blocked(&mut ctl, 1);
    // A string at the key does not end the wait; a sorted set stored there across shards does.
    call(&mut ctl, &format!("SET {dest} x"));
    still_blocked(&mut a, Duration::from_millis(150));
    call(&mut ctl, &format!("DEL {dest}"));
    assert_eq!(
        call(&mut ctl, &format!("ZUNIONSTORE {dest} 1 {src}")),
        ":1\r\n"
    );
    assert_eq!(
        reply(&mut a),
        format!("*3\r\n${}\r\n{dest}\r\n$1\r\ns\r\n$1\r\n5\r\n", dest.len())
    );
    // RENAME from another shard wakes it too.
    send(&mut a, &format!("BZPOPMIN {dest} 0"));
    wait_blocked(&mut ctl, 1);
    call(&mut ctl, &format!("DEL {src}"));
    call(&mut ctl, &format!("ZADD {src} 6 t"));
    assert_eq!(call(&mut ctl, &format!("RENAME {src} {dest}")), "+OK\r\n");
    assert_eq!(
        reply(&mut a),
        format!("*3\r\n${}\r\n{dest}\r\n$1\r\nt\r\n$1\r\n6\r\n", dest.len())
    );
    wait_blocked(&mut ctl, 0);
}

#[test]
fn commands_pipelined_after_a_blocking_pop_run_after_its_reply() {
    let server = Server::start(&["--threads", "3"]);
    let mut ctl = server.raw();
    let k = key_on(1, 4);
    let mut a = server.raw();
    let mut req = cmd("PING");
    req.extend(cmd(&format!("BZPOPMIN {k} 0")));
    req.extend(cmd("ECHO after"));
    req.extend(cmd(&format!("ZCARD {k}")));
    a.write_all(&req).unwrap();
    // The reply before the blocking pop arrives while it waits.
    assert_eq!(reply(&mut a), "+PONG\r\n");
    wait_blocked(&mut ctl, 1);
    still_blocked(&mut a, Duration::from_millis(100));
    call(&mut ctl, &format!("ZADD {k} 1 a 2 b"));
    let replies: Vec<String> = read_replies(&mut a, 3)
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r).into_owned())
        .collect();
    assert_eq!(
        replies,
        [
            format!("*3\r\n${}\r\n{k}\r\n$1\r\na\r\n$1\r\n1\r\n", k.len()),
            "$5\r\nafter\r\n".to_string(),
            ":1\r\n".to_string()
        ]
    );
}

#[test]
fn a_client_that_hangs_up_or_is_killed_while_blocked_is_forgotten() {
    let server = Server::start(&["--threads", "3"]);
    let mut ctl = server.raw();
    let k = key_on(0, 5);
    let mut a = server.raw();
    send(&mut a, &format!("BZPOPMIN {k} 0"));
    wait_blocked(&mut ctl, 1);
    drop(a);
    wait_blocked(&mut ctl, 0);
    // Nobody takes the member the gone client waited for.
    call(&mut ctl, &format!("ZADD {k} 1 a"));
    assert_eq!(call(&mut ctl, &format!("ZCARD {k}")), ":1\r\n");
    call(&mut ctl, &format!("DEL {k}"));

    // A client that sent more commands while it waited, then hung up, is seen going too.
    let mut p = server.raw();
    send(&mut p, &format!("BZPOPMIN {k} 0"));
    wait_blocked(&mut ctl, 1);
    send(&mut p, "PING");
    std::thread::sleep(Duration::from_millis(50));
    drop(p);
    wait_blocked(&mut ctl, 0);
    call(&mut ctl, &format!("ZADD {k} 1 a"));
    assert_eq!(call(&mut ctl, &format!("ZCARD {k}")), ":1\r\n");
    call(&mut ctl, &format!("DEL {k}"));

    let mut b = server.raw();
    let id = call(&mut b, "CLIENT ID");
    let id = id.trim_start_matches(':').trim();
    send(&mut b, &format!("BZPOPMIN {k} 0"));
    wait_blocked(&mut ctl, 1);
    send(&mut b, "PING");
    assert_eq!(call(&mut ctl, &format!("CLIENT KILL ID {id}")), ":1\r\n");
    wait_blocked(&mut ctl, 0);
    assert!(
        crate::support::closed(&mut b),
        "the killed client is disconnected"
    );
}

#[test]
fn concurrent_producers_and_blocked_consumers_lose_and_repeat_nothing() {
    let server = Server::start(&["--threads", "3"]);
    let keys: Vec<String> = (0..SHARDS).map(|s| key_on(s, 7)).collect();
    let pop = format!("BZPOPMIN {} 0.5", keys.join(" "));
    const PRODUCERS: usize = 4;
    const PER_PRODUCER: usize = 500;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let consumers: Vec<_> = (0..12)
        .map(|_| {
            let (mut s, pop, done) = (server.raw(), pop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    let r = call(&mut s, &pop);
                    if r == "*-1\r\n" {
                        if done.load(std::sync::atomic::Ordering::SeqCst) {
                            return got;
                        }
                        continue;
                    }
                    // *3, $n, key, $n, member, $n, score
                    let member = r.split("\r\n").nth(4).expect("a popped member").to_string();
                    got.push(member);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (mut s, keys) = (server.raw(), keys.clone());
            std::thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    let k = &keys[(i * 7 + p) % keys.len()];
                    assert_eq!(call(&mut s, &format!("ZADD {k} {i} p{p}m{i}")), ":1\r\n");
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut all: Vec<String> = consumers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let popped = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), popped, "a member was popped twice");
    let mut ctl = server.raw();
    let left: usize = keys
        .iter()
        .map(|k| {
            call(&mut ctl, &format!("ZCARD {k}"))
                .trim_start_matches(':')
                .trim()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(popped + left, PRODUCERS * PER_PRODUCER, "members lost");
    assert_eq!(
        left, 0,
        "consumers waiting on these keys left members behind"
    );
    wait_blocked(&mut ctl, 0);
}

/// CLIENT UNBLOCK ends a blocked client's wait, as on its timeout or with Redis's error, for a
/// pop, a pop over keys of several shards and a stream read; a client not blocked gives 0. The
/// same bytes as redis-server.
#[test]
fn client_unblock_ends_a_wait_as_redis() {
    let ours = Server::start(&["--threads", &SHARDS.to_string()]);
    let redis = crate::differential::Redis::start();
    let (k0, k1) = (key_on(0, 0), key_on(1, 0));
    let run = |port: u16| -> Vec<String> {
        let mut out = Vec::new();
        let mut admin = TcpStream::connect(("127.0.0.1", port)).unwrap();
        for (block, how) in [
            (format!("BLPOP {k0} 0"), ""),
            (format!("BLPOP {k0} {k1} 0"), " TIMEOUT"),
            (format!("BZPOPMIN {k1} 0"), " ERROR"),
            (format!("XREAD BLOCK 0 STREAMS {k0} {k1} $ $"), " ERROR"),
            (format!("XREAD BLOCK 0 STREAMS {k0} $"), ""),
        ] {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let id = call(&mut c, "CLIENT ID");
            let id = id.trim_start_matches(':').trim_end().to_string();
            send(&mut c, &block);
            // Wait until it is blocked (the reply of CLIENT UNBLOCK says whether it was).
            let mut unblocked = String::new();
            for _ in 0..100 {
                unblocked = call(&mut admin, &format!("CLIENT UNBLOCK {id}{how}"));
                if unblocked != ":0\r\n" {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            out.push(unblocked);
            out.push(String::from_utf8_lossy(&read_replies(&mut c, 1)[0]).into_owned());
            out.push(call(&mut admin, &format!("CLIENT UNBLOCK {id}")));
        }
        out.push(call(&mut admin, "CLIENT UNBLOCK 1 MAYBE"));
        out.push(call(&mut admin, "CLIENT UNBLOCK x"));
        out
    };
    assert_eq!(run(ours.port), run(redis.port));
}
