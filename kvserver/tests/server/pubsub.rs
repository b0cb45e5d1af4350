//! Pub/sub with 1 and 3 shards: Redis's reply shapes, subscribed mode, RESP3 pushes, counts
//! over every shard, fan-out in publisher order, and slow subscribers cut off.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::{call, cmd, read_replies, Server};

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

fn message(ch: &str, msg: &str) -> String {
    format!("*3\r\n$7\r\nmessage\r\n{}{}", bulk(ch), bulk(msg))
}

/// Reads one reply (or push) as text.
fn next(s: &mut TcpStream) -> String {
    String::from_utf8_lossy(&read_replies(s, 1)[0]).into_owned()
}

/// Opens connections until one lands on a shard other than `avoid`'s, by CLIENT ID parity is
/// unknowable; instead open several subscribers: with SO_REUSEPORT they spread over shards.
fn subscribers(server: &Server, n: usize, line: &str) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = server.raw();
            s.write_all(&cmd(line)).unwrap();
            let words = line.split(' ').count() - 1;
            read_replies(&mut s, words);
            s
        })
        .collect()
}

#[test]
fn replies_and_subscribed_mode_as_redis() {
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let mut sub = server.raw();
        let mut publisher = server.raw();
        sub.write_all(&cmd("SUBSCRIBE news sport")).unwrap();
        assert_eq!(
            read_replies(&mut sub, 2),
            vec![
                b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n".to_vec(),
                b"*3\r\n$9\r\nsubscribe\r\n$5\r\nsport\r\n:2\r\n".to_vec(),
            ]
        );
        assert_eq!(
            call(&mut sub, "PSUBSCRIBE n*"),
            "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:3\r\n"
        );
        assert_eq!(call(&mut publisher, "PUBLISH news hello"), ":2\r\n");
        let two = read_replies(&mut sub, 2);
        assert_eq!(String::from_utf8_lossy(&two[0]), message("news", "hello"));
        assert_eq!(
            String::from_utf8_lossy(&two[1]),
            format!(
                "*4\r\n$8\r\npmessage\r\n{}{}{}",
                bulk("n*"),
                bulk("news"),
                bulk("hello")
            )
        );
        assert_eq!(call(&mut publisher, "PUBLISH nothing x"), ":1\r\n");
        assert_eq!(
            next(&mut sub),
            format!(
                "*4\r\n$8\r\npmessage\r\n{}{}{}",
                bulk("n*"),
                bulk("nothing"),
                bulk("x")
            )
        );
        assert_eq!(call(&mut publisher, "PUBLISH other x"), ":0\r\n");
        // Only the subscribe family, PING, QUIT and RESET in RESP2 subscribed mode.
        assert_eq!(
            call(&mut sub, "GET x"),
            "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
        );
        assert_eq!(call(&mut sub, "PING"), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
        assert_eq!(
            call(&mut sub, "PING hi"),
            "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"
        );
        // PUBSUB introspection sees every shard.
        assert_eq!(
            call(&mut publisher, "PUBSUB NUMSUB news sport none"),
            format!(
                "*6\r\n{}:1\r\n{}:1\r\n{}:0\r\n",
                bulk("news"),
                bulk("sport"),
                bulk("none")
            )
        );
        assert_eq!(call(&mut publisher, "PUBSUB NUMPAT"), ":1\r\n");
        let chans = call(&mut publisher, "PUBSUB CHANNELS");
        assert!(chans.starts_with("*2\r\n") && chans.contains("news") && chans.contains("sport"));
        assert_eq!(
            call(&mut publisher, "PUBSUB CHANNELS s*"),
            format!("*1\r\n{}", bulk("sport"))
        );
        assert_eq!(
            call(&mut publisher, "PUBSUB NOPE"),
            "-ERR unknown subcommand 'NOPE'. Try PUBSUB HELP.\r\n"
        );
        let list = call(&mut publisher, "CLIENT LIST");
        assert!(list.contains("flags=P db=0 sub=2 psub=1 ssub=0"), "{list}");
        // Unsubscribing.
        assert_eq!(
            call(&mut sub, "UNSUBSCRIBE news"),
            "*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:2\r\n"
        );
        assert_eq!(call(&mut publisher, "PUBLISH news x"), ":1\r\n");
        assert_eq!(
            next(&mut sub),
            format!(
                "*4\r\n$8\r\npmessage\r\n{}{}{}",
                bulk("n*"),
                bulk("news"),
                bulk("x")
            )
        );
        assert_eq!(
            call(&mut sub, "PUNSUBSCRIBE"),
            "*3\r\n$12\r\npunsubscribe\r\n$2\r\nn*\r\n:1\r\n"
        );
        assert_eq!(
            call(&mut sub, "UNSUBSCRIBE"),
            "*3\r\n$11\r\nunsubscribe\r\n$5\r\nsport\r\n:0\r\n"
        );
        // Out of subscribed mode: ordinary commands again.
        assert_eq!(call(&mut sub, "PING"), "+PONG\r\n");
        assert_eq!(
            call(&mut sub, "UNSUBSCRIBE"),
            "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
        );
        assert_eq!(call(&mut publisher, "PUBSUB NUMPAT"), ":0\r\n");
        assert_eq!(call(&mut publisher, "PUBLISH sport x"), ":0\r\n");
        // Shard channels are their own namespace.
        assert_eq!(
            call(&mut sub, "SSUBSCRIBE sc"),
            "*3\r\n$10\r\nssubscribe\r\n$2\r\nsc\r\n:1\r\n"
        );
        assert_eq!(call(&mut publisher, "PUBLISH sc x"), ":0\r\n");
        assert_eq!(call(&mut publisher, "SPUBLISH sc y"), ":1\r\n");
        assert_eq!(
            next(&mut sub),
            format!("*3\r\n$8\r\nsmessage\r\n{}{}", bulk("sc"), bulk("y"))
        );
        assert_eq!(
            call(&mut publisher, "PUBSUB SHARDNUMSUB sc"),
            format!("*2\r\n{}:1\r\n", bulk("sc"))
        );
        // RESET leaves subscribed mode.
        assert_eq!(call(&mut sub, "RESET"), "+RESET\r\n");
        assert_eq!(call(&mut publisher, "SPUBLISH sc y"), ":0\r\n");
        assert_eq!(call(&mut sub, "GET x"), "$-1\r\n");
    }
}

#[test]
fn resp3_pushes_interleave_with_replies() {
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let mut c = server.raw();
        call(&mut c, "HELLO 3");
        assert_eq!(
            call(&mut c, "SUBSCRIBE ch"),
            ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
        );
        // RESP3 clients may run any command while subscribed; their own message comes first.
        assert_eq!(call(&mut c, "SET k v"), "+OK\r\n");
        c.write_all(&cmd("PUBLISH ch hi")).unwrap();
        let got = read_replies(&mut c, 2);
        assert_eq!(got[0], b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
        assert_eq!(got[1], b":1\r\n");
    }
}

/// 100 subscribers spread over the shards, 4 publishers: each subscriber receives every
/// message exactly once, in each publisher's order.
#[test]
fn fan_out_reaches_every_subscriber_in_publisher_order() {
    let server = Server::start(&["--threads", "3"]);
    let mut subs = subscribers(&server, 100, "SUBSCRIBE fan");
    const PUBLISHERS: usize = 4;
    const EACH: usize = 200;
    let mut pubs = Vec::new();
    for p in 0..PUBLISHERS {
        let mut c = server.raw();
        pubs.push(std::thread::spawn(move || {
            // Pipelined in groups of 16.
            for chunk in (0..EACH).collect::<Vec<_>>().chunks(16) {
                let mut batch = Vec::new();
                for i in chunk {
                    batch.extend_from_slice(&cmd(&format!("PUBLISH fan {p}:{i}")));
                }
                c.write_all(&batch).unwrap();
                for r in read_replies(&mut c, chunk.len()) {
                    assert_eq!(r, b":100\r\n");
                }
            }
        }));
    }
    for p in pubs {
        p.join().unwrap();
    }
    for s in subs.iter_mut() {
        let got = read_replies(s, PUBLISHERS * EACH);
        let mut next_of = [0usize; PUBLISHERS];
        for m in got {
            let text = String::from_utf8_lossy(&m).into_owned();
            let body = text.rsplit("\r\n").nth(1).unwrap();
            let (p, i) = body.split_once(':').unwrap();
            let (p, i): (usize, usize) = (p.parse().unwrap(), i.parse().unwrap());
            assert_eq!(i, next_of[p], "publisher {p}'s messages out of order");
            next_of[p] += 1;
        }
        assert_eq!(next_of, [EACH; PUBLISHERS]);
    }
}

/// A subscriber that never reads is cut off at the pubsub output limit, and the server's
/// memory stays bounded with many such subscribers; a reading one keeps up.
#[test]
fn subscribers_that_do_not_read_are_cut_off() {
    let server = Server::start(&[
        "--threads",
        "3",
        "--client-output-buffer-limit",
        "pubsub",
        "256kb",
        "64kb",
        "1",
    ]);
    let mut quiet = subscribers(&server, 50, "SUBSCRIBE flood");
    for s in &quiet {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    }
    let before = server.rss_kib();
    let mut publisher = server.raw();
    let payload = "x".repeat(1000);
    let line = cmd(&format!("PUBLISH flood {payload}"));
    let start = Instant::now();
    let mut last = 50;
    // 50 subscribers x 40 MB offered: far past the limit of each.
    while last > 0 && start.elapsed() < Duration::from_secs(30) {
        let mut batch = Vec::new();
        for _ in 0..100 {
            batch.extend_from_slice(&line);
        }
        publisher.write_all(&batch).unwrap();
        let replies = read_replies(&mut publisher, 100);
        last = String::from_utf8_lossy(replies.last().unwrap())
            .trim_start_matches(':')
            .trim()
            .parse()
            .unwrap();
    }
    assert_eq!(last, 0, "every non-reading subscriber was cut off");
    let grown = server.rss_kib().saturating_sub(before);
    assert!(grown < 100 * 1024, "RSS grew {grown} KiB");
    // Each one finds its connection closed (after what the kernel buffered).
    let mut buf = vec![0u8; 1 << 20];
    for s in quiet.iter_mut() {
        let mut closed = false;
        for _ in 0..1000 {
            match s.read(&mut buf) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(_) => continue,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        assert!(closed);
    }
    assert_eq!(
        call(&mut publisher, "PUBSUB NUMSUB flood"),
        "*2\r\n$5\r\nflood\r\n:0\r\n"
    );
}

#[test]
fn client_kill_type_pubsub() {
    let server = Server::start(&["--threads", "3"]);
    let _subs = subscribers(&server, 3, "SUBSCRIBE a");
    let mut c = server.raw();
    assert_eq!(call(&mut c, "CLIENT KILL TYPE pubsub"), ":3\r\n");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(call(&mut c, "PUBLISH a x"), ":0\r\n");
    assert_eq!(call(&mut c, "CLIENT KILL TYPE normal SKIPME yes"), ":0\r\n");
}

/// A thousand subscribers that never read (small receive buffers, so the kernel holds little
/// for them) while a publisher floods their channel: each is cut off at its limit and the
/// server's RSS stays bounded by the limits, not by what was published. Run with
/// `cargo test --release -p kvserver --test server thousand_quiet -- --ignored --nocapture`.
#[test]
#[ignore = "a thousand connections and 400 MB of messages offered: run by hand"]
fn thousand_quiet_subscribers_stay_bounded() {
    let server = Server::start(&[
        "--threads",
        "2",
        "--client-output-buffer-limit",
        "pubsub",
        "64kb",
        "16kb",
        "1",
    ]);
    let before = server.rss_kib();
    let mut quiet = Vec::new();
    for _ in 0..1000 {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        let addr: std::net::SocketAddr = format!("127.0.0.1:{}", server.port).parse().unwrap();
        sock.connect(&addr.into()).unwrap();
        let mut s: TcpStream = sock.into();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(&cmd("SUBSCRIBE quiet")).unwrap();
        read_replies(&mut s, 1);
        quiet.push(s);
    }
    let mut publisher = server.raw();
    let line = cmd(&format!("PUBLISH quiet {}", "y".repeat(4000)));
    let (mut peak, mut last, mut sent) = (0u64, 1000i64, 0usize);
    let start = Instant::now();
    while last > 0 && start.elapsed() < Duration::from_secs(60) {
        let mut batch = Vec::new();
        for _ in 0..10 {
            batch.extend_from_slice(&line);
        }
        publisher.write_all(&batch).unwrap();
        let replies = read_replies(&mut publisher, 10);
        sent += 10;
        last = String::from_utf8_lossy(replies.last().unwrap())
            .trim_start_matches(':')
            .trim()
            .parse()
            .unwrap();
        peak = peak.max(server.rss_kib());
    }
    let offered_mb = sent * 4000 * 1000 / (1 << 20);
    println!(
        "1000 quiet subscribers: all cut after {sent} messages ({offered_mb} MB offered) in {:?}; RSS before {before} KiB, peak {peak} KiB",
        start.elapsed()
    );
    assert_eq!(last, 0, "every quiet subscriber was cut off");
    assert!(
        peak.saturating_sub(before) < 256 * 1024,
        "RSS grew {} KiB",
        peak - before
    );
}

/// SHUTDOWN with subscribers, watchers and clients in MULTI on every shard, while new clients
/// keep subscribing and publishing: the server exits, with code 0 and no panic in its log.
/// (A shard that stops before another's call reaches it no longer panics the caller; that
/// race is too narrow for this test to hit on demand.)
#[test]
fn shutdown_with_subscribers_and_transactions_exits_cleanly() {
    for _ in 0..3 {
        let mut server = Server::start(&["--threads", "3"]);
        let _subs = subscribers(&server, 12, "SUBSCRIBE a");
        let mut watchers = Vec::new();
        for i in 0..6 {
            let mut w = server.raw();
            call(&mut w, &format!("WATCH k{i} j{i}"));
            call(&mut w, "MULTI");
            watchers.push(w);
        }
        let port = server.port;
        let churn = std::thread::spawn(move || {
            for _ in 0..200 {
                let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
                    return;
                };
                if c.write_all(&cmd("SUBSCRIBE b c")).is_err()
                    || c.write_all(&cmd("PUBLISH a x")).is_err()
                {
                    return;
                }
            }
        });
        let mut admin = server.raw();
        admin.write_all(&cmd("SHUTDOWN")).unwrap();
        let status = server
            .exit_status(10)
            .expect("the server exits after SHUTDOWN");
        let _ = churn.join();
        assert!(status.success(), "exit status {status:?}");
        // (Debug builds unwind: a task's panic would not change the exit status there.)
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(server.log_lines_with("panicked"), Vec::<String>::new());
    }
}
