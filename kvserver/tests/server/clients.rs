//! CLIENT subcommands as Redis 7.4 (SETINFO, NO-TOUCH, NO-EVICT and the LIST fields they show
//! are 7.2+, so Debian's 7.0.15 cannot be the reference here: the expected texts are 7.4's,
//! from its source), with 1 and 3 shards: SETINFO, NO-EVICT, NO-TOUCH, REPLY ON|OFF|SKIP,
//! PAUSE and UNPAUSE, LIST and KILL filters.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::support::{call, key_on, read_replies, Server};

const SHARDS: [usize; 2] = [1, 3];

fn info_line(s: &mut std::net::TcpStream) -> String {
    call(s, "CLIENT INFO")
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in {line}"))
}

#[test]
fn setinfo_names_the_library_in_client_list() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut s = server.raw();
        assert_eq!(call(&mut s, "CLIENT SETINFO lib-name redis-py"), "+OK\r\n");
        assert_eq!(call(&mut s, "CLIENT SETINFO LIB-VER 5.0.1"), "+OK\r\n");
        let line = info_line(&mut s);
        assert_eq!(field(&line, "lib-name"), "redis-py", "{line}");
        assert_eq!(field(&line, "lib-ver"), "5.0.1");
        // The order of the last fields, as 7.4 prints them.
        assert!(
            line.contains(" resp=2 lib-name=redis-py lib-ver=5.0.1"),
            "{line}"
        );
        assert!(line.contains(" multi=-1 watch=0 qbuf="), "{line}");
        assert_eq!(
            call(&mut s, "CLIENT SETINFO lib-name a\tb"),
            "-ERR lib-name cannot contain spaces, newlines or special characters.\r\n"
        );
        assert_eq!(
            call(&mut s, "CLIENT SETINFO LIB-X y"),
            "-ERR Unrecognized option 'LIB-X'\r\n"
        );
        assert_eq!(
            call(&mut s, "CLIENT SETINFO lib-name"),
            "-ERR wrong number of arguments for 'client|setinfo' command\r\n"
        );
        // An empty value clears; RESET keeps the library (it still describes the client).
        assert_eq!(call(&mut s, "CLIENT SETINFO lib-ver "), "+OK\r\n");
        assert_eq!(call(&mut s, "RESET"), "+RESET\r\n");
        let line = info_line(&mut s);
        assert!(line.contains(" lib-name=redis-py lib-ver="), "{line}");
        // The list of every client shows it too, from another connection.
        let mut other = server.raw();
        let list = call(&mut other, "CLIENT LIST");
        assert!(list.contains("lib-name=redis-py"), "{list}");
    }
}

#[test]
fn no_evict_and_no_touch_flags() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut s = server.raw();
        assert_eq!(call(&mut s, "CLIENT NO-EVICT on"), "+OK\r\n");
        assert_eq!(field(&info_line(&mut s), "flags"), "e");
        assert_eq!(call(&mut s, "CLIENT NO-TOUCH ON"), "+OK\r\n");
        assert_eq!(field(&info_line(&mut s), "flags"), "eT");
        assert_eq!(
            call(&mut s, "CLIENT NO-TOUCH maybe"),
            "-ERR syntax error\r\n"
        );
        assert_eq!(
            call(&mut s, "CLIENT NO-EVICT"),
            "-ERR wrong number of arguments for 'client|no-evict' command\r\n"
        );
        assert_eq!(call(&mut s, "CLIENT NO-EVICT off"), "+OK\r\n");
        assert_eq!(call(&mut s, "CLIENT NO-TOUCH off"), "+OK\r\n");
        assert_eq!(field(&info_line(&mut s), "flags"), "N");
    }
}

/// Under LFU with `lfu-log-factor 0` every access adds one to the counter: a NO-TOUCH client's
/// reads add nothing, its TOUCH still does; keys on every shard.
#[test]
fn no_touch_leaves_access_data_alone() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut s = server.raw();
        call(&mut s, "CONFIG SET maxmemory-policy allkeys-lfu");
        call(&mut s, "CONFIG SET lfu-log-factor 0");
        let keys: Vec<String> = (0..n).map(|sh| key_on("k", sh, n, 0)).collect();
        for k in &keys {
            call(&mut s, &format!("SET {k} v"));
            assert_eq!(call(&mut s, &format!("OBJECT FREQ {k}")), ":5\r\n");
            call(&mut s, &format!("GET {k}"));
            assert_eq!(call(&mut s, &format!("OBJECT FREQ {k}")), ":6\r\n");
        }
        call(&mut s, "CLIENT NO-TOUCH ON");
        for k in &keys {
            call(&mut s, &format!("GET {k}"));
            call(&mut s, &format!("STRLEN {k}"));
            assert_eq!(call(&mut s, &format!("OBJECT FREQ {k}")), ":6\r\n", "{k}");
            call(&mut s, &format!("TOUCH {k}"));
            assert_eq!(call(&mut s, &format!("OBJECT FREQ {k}")), ":7\r\n", "{k}");
        }
        call(&mut s, "CLIENT NO-TOUCH OFF");
        for k in &keys {
            call(&mut s, &format!("GET {k}"));
            assert_eq!(call(&mut s, &format!("OBJECT FREQ {k}")), ":8\r\n", "{k}");
        }
    }
}

#[test]
fn reply_off_on_and_skip() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut s = server.raw();
        // Keys on every shard, so replies from other shards are dropped too.
        let keys: Vec<String> = (0..n).map(|sh| key_on("r", sh, n, 0)).collect();
        let mut batch = String::from("CLIENT REPLY OFF\r\n");
        for k in &keys {
            batch += &format!("SET {k} 1\r\nGET {k}\r\nGET nosuch\r\n");
        }
        batch += "CLIENT REPLY ON\r\n";
        for k in &keys {
            batch += &format!("CLIENT REPLY SKIP\r\nGET {k}\r\nINCR {k}\r\n");
        }
        // As Redis: ON clears a SKIP in force, so its own +OK is sent; SKIP SKIP skips the
        // command after the second.
        batch += "CLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\nCLIENT REPLY SKIP\r\nCLIENT REPLY SKIP\r\nPING\r\nECHO x\r\n";
        s.write_all(batch.as_bytes()).unwrap();
        let mut expected: Vec<Vec<u8>> = vec![b"+OK\r\n".to_vec()];
        for _ in &keys {
            expected.push(b":2\r\n".to_vec());
        }
        expected.push(b"+OK\r\n".to_vec());
        expected.push(b"$1\r\nx\r\n".to_vec());
        assert_eq!(read_replies(&mut s, expected.len()), expected, "{n} shards");
        // Nothing more was sent.
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut rest = [0u8; 64];
        assert!(std::io::Read::read(&mut s, &mut rest).is_err());
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(call(&mut s, "CLIENT REPLY MAYBE"), "-ERR syntax error\r\n");
    }
}

#[test]
fn pause_write_holds_writes_only_until_unpause() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut admin = server.raw();
        let mut c = server.raw();
        call(&mut c, "SET k v");
        assert_eq!(call(&mut admin, "CLIENT PAUSE 20000 WRITE"), "+OK\r\n");
        // Reads go on.
        let t = Instant::now();
        assert_eq!(call(&mut c, "GET k"), "$1\r\nv\r\n");
        assert!(t.elapsed() < Duration::from_secs(2));
        // A write waits, with the replies before it sent.
        c.write_all(b"GET k\r\nSET k w\r\n").unwrap();
        assert_eq!(read_replies(&mut c, 1), [b"$1\r\nv\r\n".to_vec()]);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            call(&mut admin, "GET k"),
            "$1\r\nv\r\n",
            "the SET ran during the pause"
        );
        assert_eq!(call(&mut admin, "CLIENT UNPAUSE"), "+OK\r\n");
        assert_eq!(read_replies(&mut c, 1), [b"+OK\r\n".to_vec()]);
        assert_eq!(call(&mut admin, "GET k"), "$1\r\nw\r\n");
    }
}

#[test]
fn pause_all_holds_everything_until_it_ends() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut admin = server.raw();
        let mut c = server.raw();
        let t = Instant::now();
        assert_eq!(call(&mut admin, "CLIENT PAUSE 400 ALL"), "+OK\r\n");
        assert_eq!(call(&mut c, "GET k"), "$-1\r\n");
        assert!(
            t.elapsed() >= Duration::from_millis(390),
            "{:?}",
            t.elapsed()
        );
        // After it ended nothing waits.
        let t = Instant::now();
        assert_eq!(call(&mut c, "PING"), "+PONG\r\n");
        assert!(t.elapsed() < Duration::from_millis(300));
        assert_eq!(
            call(&mut admin, "CLIENT PAUSE 10 SOME"),
            "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n"
        );
        assert_eq!(
            call(&mut admin, "CLIENT PAUSE -1"),
            "-ERR timeout is negative\r\n"
        );
        assert_eq!(
            call(&mut admin, "CLIENT PAUSE x"),
            "-ERR timeout is not an integer or out of range\r\n"
        );
    }
}

#[test]
fn list_and_kill_filters() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut a = server.raw();
        let mut b = server.raw();
        let mut sub = server.raw();
        sub.write_all(b"SUBSCRIBE ch\r\n").unwrap();
        read_replies(&mut sub, 1);
        let id_a = call(&mut a, "CLIENT ID")
            .trim_start_matches(':')
            .trim()
            .to_string();
        let id_b = call(&mut b, "CLIENT ID")
            .trim_start_matches(':')
            .trim()
            .to_string();
        let list = call(&mut a, &format!("CLIENT LIST ID {id_b} 999999 {id_a}"));
        let ids: Vec<&str> = list
            .lines()
            .filter_map(|l| l.split(' ').next())
            .filter(|f| f.starts_with("id="))
            .collect();
        assert_eq!(ids, [format!("id={id_b}"), format!("id={id_a}")], "{list}");
        let pubsub = call(&mut a, "CLIENT LIST TYPE pubsub");
        assert_eq!(pubsub.matches("id=").count(), 1, "{pubsub}");
        assert!(pubsub.contains("flags=P"), "{pubsub}");
        assert_eq!(call(&mut a, "CLIENT LIST TYPE master"), "$0\r\n\r\n");
        assert_eq!(
            call(&mut a, "CLIENT LIST TYPE x"),
            "-ERR Unknown client type 'x'\r\n"
        );
        assert_eq!(
            call(&mut a, "CLIENT LIST ID x"),
            "-ERR Invalid client ID\r\n"
        );
        assert_eq!(call(&mut a, "CLIENT LIST FOO"), "-ERR syntax error\r\n");
        // KILL: errors in argument order, as Redis parses.
        assert_eq!(
            call(&mut a, "CLIENT KILL ID 0 TYPE x"),
            "-ERR client-id should be greater than 0\r\n"
        );
        assert_eq!(
            call(&mut a, "CLIENT KILL MAXAGE 0"),
            "-ERR maxage should be greater than 0\r\n"
        );
        assert_eq!(
            call(&mut a, "CLIENT KILL MAXAGE x"),
            "-ERR maxage is not an integer or out of range\r\n"
        );
        assert_eq!(
            call(&mut a, "CLIENT KILL USER bob"),
            "-ERR No such user 'bob'\r\n"
        );
        assert_eq!(
            call(&mut a, "CLIENT KILL ID 5 SKIPME"),
            "-ERR syntax error\r\n"
        );
        // Nobody is an hour old; USER default and TYPE pubsub pick the subscriber only.
        assert_eq!(call(&mut a, "CLIENT KILL MAXAGE 3600"), ":0\r\n");
        assert_eq!(
            call(&mut a, "CLIENT KILL USER default TYPE pubsub"),
            ":1\r\n"
        );
        assert!(crate::support::closed(&mut sub));
        assert_eq!(
            call(&mut a, &format!("CLIENT KILL ID {id_b} SKIPME no")),
            ":1\r\n"
        );
        assert!(crate::support::closed(&mut b));
    }
}
