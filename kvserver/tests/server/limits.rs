//! Connection limits and safety: many clients, maxclients, output limits, AUTH, protected mode,
//! hostile lengths.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::{call, closed, cmd, proc_status, read_replies, Server};

#[test]
fn two_hundred_concurrent_connections() {
    let server = Server::start(&["--threads", "3"]);
    let mut conns: Vec<TcpStream> = (0..200).map(|_| server.raw()).collect();
    for (i, s) in conns.iter_mut().enumerate() {
        s.write_all(&cmd(&format!("SET conn:{i} {i}"))).unwrap();
    }
    for s in conns.iter_mut() {
        assert_eq!(read_replies(s, 1)[0], b"+OK\r\n");
    }
    for (i, s) in conns.iter_mut().enumerate() {
        assert_eq!(
            call(s, &format!("GET conn:{i}")),
            format!("${}\r\n{i}\r\n", i.to_string().len())
        );
    }
    let mut c = server.raw();
    assert_eq!(call(&mut c, "DBSIZE"), ":200\r\n");
}

#[test]
fn maxclients_refuses_the_extra_connection() {
    let server = Server::start(&["--threads", "2", "--maxclients", "3"]);
    let mut held: Vec<TcpStream> = (0..3).map(|_| server.raw()).collect();
    for s in held.iter_mut() {
        assert_eq!(call(s, "PING"), "+PONG\r\n");
    }
    let mut extra = server.raw();
    let mut buf = Vec::new();
    extra.read_to_end(&mut buf).unwrap();
    assert_eq!(buf, b"-ERR max number of clients reached\r\n");
    drop(held.pop());
    std::thread::sleep(Duration::from_millis(200));
    let mut again = server.raw();
    assert_eq!(call(&mut again, "PING"), "+PONG\r\n");
}

#[test]
fn slow_reader_is_disconnected_at_the_output_limit() {
    let server = Server::start(&[
        "--threads",
        "2",
        "--client-output-buffer-limit",
        "normal",
        "1mb",
        "256kb",
        "1",
    ]);
    let mut setup = server.raw();
    let big = "x".repeat(200_000);
    assert_eq!(call(&mut setup, &format!("SET big {big}")), "+OK\r\n");
    // Pipeline many GETs of a 200 KB value and never read: the unread replies pass the limit.
    let mut slow = server.raw();
    let one = cmd("GET big");
    let mut sent = 0;
    slow.set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    while sent < 2000 {
        if slow.write_all(&one).is_err() {
            break;
        }
        sent += 1;
    }
    std::thread::sleep(Duration::from_secs(3));
    // Others are served meanwhile.
    let mut other = server.raw();
    assert_eq!(call(&mut other, "PING"), "+PONG\r\n");
    assert!(server.rss_kib() < 200 * 1024, "memory stayed bounded");
    // The slow client was cut off: reading drains what was sent, then EOF.
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(closed(&mut slow), "slow reader was disconnected");
}

#[test]
fn auth_with_requirepass() {
    let server = Server::start(&["--threads", "2", "--requirepass", "s3cret"]);
    let mut s = server.raw();
    assert_eq!(
        call(&mut s, "GET x"),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        call(&mut s, "MSET a 1 b 2 c 3"),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        call(&mut s, "AUTH wrong"),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(call(&mut s, "AUTH s3cret"), "+OK\r\n");
    assert_eq!(call(&mut s, "MSET a 1 b 2 c 3"), "+OK\r\n");
    let mut h = server.raw();
    let hello = call(&mut h, "HELLO 2 AUTH default s3cret");
    assert!(hello.starts_with("*14\r\n"), "{hello}");
    assert_eq!(call(&mut h, "GET a"), "$1\r\n1\r\n");
}

/// Only 127.0.0.1 and ::1 are local for protected mode (as in Redis): a client from 127.0.0.2
/// gets DENIED when no password is set, and is served once one is.
#[test]
fn protected_mode_denies_non_local_clients() {
    let server = Server::start(&["--threads", "2", "--bind", "0.0.0.0"]);
    let from = |ip: [u8; 4]| -> TcpStream {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.bind(&SocketAddr::from((ip, 0)).into()).unwrap();
        sock.connect(&SocketAddr::from(([127, 0, 0, 1], server.port)).into())
            .unwrap();
        let s: TcpStream = sock.into();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    };
    let mut remote = from([127, 0, 0, 2]);
    let mut buf = Vec::new();
    remote.read_to_end(&mut buf).unwrap();
    assert!(
        buf.starts_with(b"-DENIED Redis is running in protected mode"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    let mut local = from([127, 0, 0, 1]);
    assert_eq!(call(&mut local, "CONFIG SET requirepass pw"), "+OK\r\n");
    let mut remote = from([127, 0, 0, 2]);
    assert_eq!(
        call(&mut remote, "PING"),
        "-NOAUTH Authentication required.\r\n"
    );
}

#[test]
fn hostile_lengths_keep_memory_bounded() {
    let mut server = Server::start(&["--threads", "2"]);
    let before = server.rss_kib();
    // A declared 2 GiB bulk, a 1M-element multibulk header and a 10 MB inline line.
    let mut a = server.raw();
    a.write_all(b"*1\r\n$2147483648\r\n").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&read_replies(&mut a, 1)[0]),
        "-ERR Protocol error: invalid bulk length\r\n"
    );
    let mut b = server.raw();
    b.write_all(b"*1048576\r\n$3\r\nSET\r\n").unwrap();
    let mut c = server.raw();
    let line = vec![b'a'; 10 << 20];
    let _ = c.write_all(&line);
    let r = read_replies(&mut c, 1);
    assert_eq!(
        String::from_utf8_lossy(&r[0]),
        "-ERR Protocol error: too big inline request\r\n"
    );
    let mut d = server.raw();
    let _ = d.write_all(&vec![0u8; 1 << 20]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(server.alive());
    assert!(
        server.rss_kib() < before + 64 * 1024,
        "rss grew from {before} to {} KiB",
        server.rss_kib()
    );
    let mut ok = server.raw();
    assert_eq!(call(&mut ok, "PING"), "+PONG\r\n");
}

/// SMEMBERS of a big set to a client whose output limit is small: that client is closed, the
/// set and every other client are untouched.
#[test]
fn a_huge_reply_over_the_output_limit_closes_only_its_client() {
    let server = Server::start(&[
        "--threads",
        "2",
        "--client-output-buffer-limit",
        "normal",
        "1mb",
        "256kb",
        "1",
    ]);
    let mut setup = server.raw();
    // 200,000 members: a reply of about 3 MB.
    for chunk in 0..20 {
        let members: Vec<String> = (0..10_000)
            .map(|i| format!("member:{}", chunk * 10_000 + i))
            .collect();
        let r = call(&mut setup, &format!("SADD big {}", members.join(" ")));
        assert_eq!(r, ":10000\r\n");
    }
    let mut greedy = server.raw();
    greedy.write_all(&cmd("SMEMBERS big")).unwrap();
    let mut got = Vec::new();
    let _ = greedy.read_to_end(&mut got);
    assert!(
        got.len() < 3_000_000,
        "the whole reply arrived ({} bytes)",
        got.len()
    );
    assert_eq!(call(&mut setup, "SCARD big"), ":200000\r\n");
    assert_eq!(call(&mut setup, "PING"), "+PONG\r\n");
}

/// Memory freed by a FLUSHALL goes back to the system once the shard is idle, without any
/// further command: the allocator only gives pages back from inside its own calls, so an idle
/// server would otherwise keep its peak RSS for as long as it stays idle.
#[test]
fn freed_memory_returns_to_the_system_while_idle() {
    let server = Server::start(&["--threads", "1"]);
    let mut c = server.raw();
    let before = server.rss_kib();
    let value = "v".repeat(200);
    for chunk in 0..20 {
        let mut line = String::from("MSET");
        for i in 0..10_000 {
            line.push_str(&format!(" key:{}:{i} {value}", chunk));
        }
        assert_eq!(call(&mut c, &line), "+OK\r\n");
    }
    let full = server.rss_kib();
    assert!(
        full > before + 40 * 1024,
        "200k keys of 200 bytes: {before} -> {full} KiB"
    );
    assert_eq!(call(&mut c, "FLUSHALL"), "+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(8);
    let target = before + (full - before) / 4;
    while server.rss_kib() > target && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        server.rss_kib() <= target,
        "RSS {} KiB eight seconds after FLUSHALL (empty: {before}, full: {full})",
        server.rss_kib()
    );
}

/// `disable-thp yes` (the default, as in Redis) turns transparent huge pages off for the
/// process; `no` leaves them to the system; the setting cannot change at run time.
#[test]
fn transparent_huge_pages_are_off_unless_asked_for() {
    let thp = |s: &Server| proc_status(&s.pid().to_string(), "THP_enabled");
    let default = Server::start(&["--threads", "1"]);
    let mut c = default.raw();
    assert_eq!(
        call(&mut c, "CONFIG GET disable-thp"),
        "*2\r\n$11\r\ndisable-thp\r\n$3\r\nyes\r\n"
    );
    assert_eq!(
        call(&mut c, "CONFIG SET disable-thp no"),
        "-ERR CONFIG SET failed (possibly related to argument 'disable-thp') - can't set immutable config\r\n"
    );
    let Some(off) = thp(&default) else {
        eprintln!("this kernel does not report THP_enabled; only the config was checked");
        return;
    };
    assert_eq!(off, "0");
    let on = Server::start(&["--threads", "1", "--disable-thp", "no"]);
    assert_eq!(thp(&on), proc_status("self", "THP_enabled"));
}
