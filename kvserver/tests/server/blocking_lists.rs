//! Blocked list clients: BLPOP, BRPOP, BLMPOP, BLMOVE and BRPOPLPUSH wait for their keys on any
//! shard, are served oldest first, move elements atomically to a destination on another shard,
//! time out, and leave no trace when they hang up.

use std::net::TcpStream;
use std::time::Duration;

use crate::blocking::{key_on, reply, send, still_blocked, wait_blocked, SHARDS};
use crate::support::{call, Server};

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

#[test]
fn list_pops_are_woken_by_a_push_to_their_key_on_any_shard() {
    for shards in [1, 3] {
        let server = Server::start(&["--threads", &shards.to_string()]);
        let mut ctl = server.raw();
        for s in 0..SHARDS {
            let k = key_on(s, 0);
            let mut a = server.raw();
            send(&mut a, &format!("BLPOP {k} 0"));
            wait_blocked(&mut ctl, 1);
            still_blocked(&mut a, Duration::from_millis(100));
            assert_eq!(call(&mut ctl, &format!("RPUSH {k} a b")), ":2\r\n");
            assert_eq!(reply(&mut a), format!("*2\r\n{}{}", bulk(&k), bulk("a")));
            assert_eq!(
                call(&mut ctl, &format!("LRANGE {k} 0 -1")),
                format!("*1\r\n{}", bulk("b"))
            );

            send(&mut a, &format!("BRPOP {k}x {k} 0"));
            // `b` is there: served at once from the second key.
            assert_eq!(reply(&mut a), format!("*2\r\n{}{}", bulk(&k), bulk("b")));

            send(&mut a, &format!("BLMPOP 0 1 {k} RIGHT COUNT 2"));
            wait_blocked(&mut ctl, 1);
            assert_eq!(call(&mut ctl, &format!("LPUSH {k} 1 2 3")), ":3\r\n");
            assert_eq!(
                reply(&mut a),
                format!("*2\r\n{}*2\r\n{}{}", bulk(&k), bulk("1"), bulk("2")),
                "{shards} shards, key on shard {s}"
            );
            assert_eq!(call(&mut ctl, &format!("LPOP {k}")), bulk("3"));
            assert_eq!(call(&mut ctl, &format!("EXISTS {k}")), ":0\r\n");
            wait_blocked(&mut ctl, 0);
        }
    }
}

#[test]
fn waiters_on_one_list_are_served_oldest_first() {
    let server = Server::start(&["--threads", "3"]);
    let mut ctl = server.raw();
    let k = key_on(1, 3);
    let mut clients: Vec<TcpStream> = (0..3).map(|_| server.raw()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        send(c, &format!("BRPOP {k} 0"));
        wait_blocked(&mut ctl, i as u64 + 1);
    }
    assert_eq!(call(&mut ctl, &format!("RPUSH {k} x y")), ":2\r\n");
    // RPUSH x y: the oldest waiter pops the tail (y), the next one x, the third waits on.
    assert_eq!(
        reply(&mut clients[0]),
        format!("*2\r\n{}{}", bulk(&k), bulk("y"))
    );
    assert_eq!(
        reply(&mut clients[1]),
        format!("*2\r\n{}{}", bulk(&k), bulk("x"))
    );
    still_blocked(&mut clients[2], Duration::from_millis(100));
    wait_blocked(&mut ctl, 1);
}

#[test]
fn blmove_and_brpoplpush_move_to_a_destination_on_another_shard() {
    for shards in [1, 3] {
        let server = Server::start(&["--threads", &shards.to_string()]);
        let mut ctl = server.raw();
        let (src, dst) = (key_on(0, 5), key_on(2, 5));
        let mut a = server.raw();
        send(&mut a, &format!("BLMOVE {src} {dst} LEFT RIGHT 0"));
        wait_blocked(&mut ctl, 1);
        assert_eq!(call(&mut ctl, &format!("RPUSH {src} e1 e2")), ":2\r\n");
        assert_eq!(reply(&mut a), bulk("e1"));
        assert_eq!(
            call(&mut ctl, &format!("LRANGE {dst} 0 -1")),
            format!("*1\r\n{}", bulk("e1"))
        );
        assert_eq!(
            call(&mut ctl, &format!("LRANGE {src} 0 -1")),
            format!("*1\r\n{}", bulk("e2"))
        );
        // Served at once when the source holds elements.
        send(&mut a, &format!("BRPOPLPUSH {src} {dst} 0"));
        assert_eq!(reply(&mut a), bulk("e2"));
        assert_eq!(
            call(&mut ctl, &format!("LRANGE {dst} 0 -1")),
            format!("*2\r\n{}{}", bulk("e2"), bulk("e1")),
            "{shards} shards"
        );
        assert_eq!(call(&mut ctl, &format!("EXISTS {src}")), ":0\r\n");
        wait_blocked(&mut ctl, 0);
    }
}

#[test]
fn list_pops_time_out_with_the_null_of_their_shape() {
    let server = Server::start(&["--threads", "3"]);
    let mut a = server.raw();
    let k = key_on(2, 9);
    assert_eq!(call(&mut a, &format!("BLPOP {k} 0.05")), "*-1\r\n");
    assert_eq!(call(&mut a, &format!("BLMPOP 0.05 1 {k} LEFT")), "*-1\r\n");
    // The null array for BLMOVE too, as Redis answers a timed-out list wait.
    assert_eq!(
        call(&mut a, &format!("BLMOVE {k} d LEFT LEFT 0.05")),
        "*-1\r\n"
    );
    assert_eq!(call(&mut a, &format!("BRPOPLPUSH {k} d 0.05")), "*-1\r\n");
    call(&mut a, "HELLO 3");
    assert_eq!(call(&mut a, &format!("BRPOP {k} 0.05")), "_\r\n");
    assert_eq!(
        call(&mut a, &format!("BLMOVE {k} d LEFT LEFT 0.05")),
        "_\r\n"
    );
    assert_eq!(
        call(&mut a, &format!("BLPOP {k} -1")),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(
        call(&mut a, &format!("BLPOP {k} abc")),
        "-ERR timeout is not a float or out of range\r\n"
    );
}

#[test]
fn a_list_waiter_that_hangs_up_leaves_no_trace() {
    let server = Server::start(&["--threads", "3"]);
    let mut ctl = server.raw();
    let k = key_on(1, 11);
    {
        let mut a = server.raw();
        send(&mut a, &format!("BLPOP {k} 0"));
        wait_blocked(&mut ctl, 1);
    }
    wait_blocked(&mut ctl, 0);
    assert_eq!(call(&mut ctl, &format!("RPUSH {k} kept")), ":1\r\n");
    assert_eq!(call(&mut ctl, &format!("LLEN {k}")), ":1\r\n");
}

#[test]
fn list_producers_and_blocked_consumers_over_three_shards_lose_and_repeat_nothing() {
    let server = Server::start(&["--threads", "3"]);
    let keys: Vec<String> = (0..SHARDS).map(|s| key_on(s, 13)).collect();
    let sink = key_on(1, 17);
    const PRODUCERS: usize = 4;
    const PER_PRODUCER: usize = 500;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Half the consumers pop, half move each element to a list on another shard.
    let consumers: Vec<_> = (0..8)
        .map(|c| {
            let pop = if c % 2 == 0 {
                format!("BLPOP {} 0.5", keys.join(" "))
            } else {
                format!("BLMOVE {} {sink} RIGHT LEFT 0.5", keys[c % SHARDS])
            };
            let (mut s, done) = (server.raw(), done.clone());
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
                    // BLPOP: *2, $n, key, $n, element; BLMOVE: $n, element.
                    let parts: Vec<&str> = r.split("\r\n").collect();
                    let e = if r.starts_with('*') {
                        parts[4]
                    } else {
                        parts[1]
                    };
                    got.push(e.to_string());
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
                    let r = call(&mut s, &format!("RPUSH {k} p{p}e{i}"));
                    assert!(r.starts_with(':'), "{r}");
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let got: Vec<(bool, Vec<String>)> = consumers
        .into_iter()
        .enumerate()
        .map(|(c, t)| (c % 2 == 1, t.join().unwrap()))
        .collect();
    let mut all: Vec<String> = got.iter().flat_map(|(_, g)| g.clone()).collect();
    let popped = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), popped, "an element was taken twice");
    assert_eq!(popped, PRODUCERS * PER_PRODUCER, "elements lost");
    let mut ctl = server.raw();
    for k in &keys {
        assert_eq!(
            call(&mut ctl, &format!("LLEN {k}")),
            ":0\r\n",
            "left behind in {k}"
        );
    }
    // The sink holds exactly what the BLMOVE consumers reported moving.
    let mut moved: Vec<String> = got
        .iter()
        .filter(|(is_move, _)| *is_move)
        .flat_map(|(_, g)| g.clone())
        .collect();
    moved.sort();
    let listed = call(&mut ctl, &format!("LRANGE {sink} 0 -1"));
    let mut in_sink: Vec<String> = listed
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .map(str::to_string)
        .collect();
    in_sink.sort();
    assert_eq!(in_sink, moved);
    wait_blocked(&mut ctl, 0);
}

/// A served BLMOVE pushes onto its destination, and a client blocked there is served next, as
/// Redis serves chained waiters.
#[test]
fn a_served_blmove_feeds_the_waiters_of_its_destination() {
    for shards in [1, 3] {
        let server = Server::start(&["--threads", &shards.to_string()]);
        let mut ctl = server.raw();
        // Same shard for both keys (hash tag), so the move runs in the source's shard step.
        let (src, dst) = ("{chain}src", "{chain}dst");
        let mut popper = server.raw();
        send(&mut popper, &format!("BLPOP {dst} 0"));
        wait_blocked(&mut ctl, 1);
        let mut mover = server.raw();
        send(&mut mover, &format!("BLMOVE {src} {dst} LEFT RIGHT 0"));
        wait_blocked(&mut ctl, 2);
        assert_eq!(call(&mut ctl, &format!("RPUSH {src} e")), ":1\r\n");
        assert_eq!(reply(&mut mover), bulk("e"));
        assert_eq!(
            reply(&mut popper),
            format!("*2\r\n{}{}", bulk(dst), bulk("e"))
        );
        assert_eq!(
            call(&mut ctl, &format!("EXISTS {src} {dst}")),
            ":0\r\n",
            "{shards} shards"
        );
    }
}
