//! Keyspace notifications over the server, with 1 and 3 shards: a subscriber on any shard
//! hears the events of keys on every shard, lazy and active expiry included, in each key's
//! order. (Which event each command raises is compared with redis-server in kvcore's
//! `events_diff`.)

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use crate::support::{call, cmd, key_on, read_replies, Server};

/// The (channel, message) of a pmessage push.
fn parse(m: &[u8]) -> (String, String) {
    match kvcore::resp::reply::parse_reply(m) {
        Ok(Some((kvcore::Reply::Array(items), _))) if items.len() == 4 => {
            let text = |v: &kvcore::Reply| match v {
                kvcore::Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            };
            (text(&items[2]), text(&items[3]))
        }
        other => panic!("not a pmessage: {other:?}"),
    }
}

#[test]
fn events_of_every_shard_reach_a_subscriber() {
    for threads in [1usize, 3] {
        let server = Server::start(&["--threads", &threads.to_string()]);
        let mut admin = server.raw();
        assert_eq!(
            call(&mut admin, "CONFIG SET notify-keyspace-events KEA"),
            "+OK\r\n"
        );
        assert_eq!(
            call(&mut admin, "CONFIG GET notify-keyspace-events"),
            "*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n"
        );
        let mut sub = server.raw();
        sub.write_all(&cmd("PSUBSCRIBE __keyspace@0__:*")).unwrap();
        read_replies(&mut sub, 1);
        let (a, b, c) = (
            key_on("a", 0, 3, 0),
            key_on("b", 1, 3, 0),
            key_on("c", 2, 3, 0),
        );
        let script = [
            format!("SET {a} 1"),
            format!("INCR {a}"),
            format!("LPUSH {b} x y"),
            format!("RPOP {b}"),
            format!("SADD {c} m"),
            format!("SREM {c} nope"),
            format!("SREM {c} m"),
            format!("DEL {a}"),
            format!("SET {a} v PX 30"),
            format!("RENAME {b} {c}"),
        ];
        for line in &script {
            call(&mut admin, line);
        }
        // Lazy expiry of `a` after its deadline, or the active cycle's: either way "expired".
        std::thread::sleep(Duration::from_millis(300));
        call(&mut admin, &format!("GET {a}"));
        let want: BTreeMap<&str, Vec<&str>> = BTreeMap::from([
            (
                a.as_str(),
                vec!["set", "incrby", "del", "set", "expire", "expired"],
            ),
            (b.as_str(), vec!["lpush", "rpop", "rename_from"]),
            (c.as_str(), vec!["sadd", "srem", "del", "rename_to"]),
        ]);
        let total: usize = want.values().map(Vec::len).sum();
        let mut got: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for m in read_replies(&mut sub, total) {
            let (channel, event) = parse(&m);
            let key = channel.trim_start_matches("__keyspace@0__:").to_string();
            got.entry(key).or_default().push(event);
        }
        for (k, events) in &want {
            assert_eq!(
                got.get(*k).cloned().unwrap_or_default(),
                *events,
                "events of {k} with {threads} shards"
            );
        }
        // Keyevent channels carry the key.
        let mut ev = server.raw();
        ev.write_all(&cmd("SUBSCRIBE __keyevent@0__:hset")).unwrap();
        read_replies(&mut ev, 1);
        call(&mut admin, &format!("HSET {c}h f v"));
        let m = String::from_utf8_lossy(&read_replies(&mut ev, 1)[0]).into_owned();
        assert!(
            m.ends_with(&format!("${}\r\n{c}h\r\n", c.len() + 1)),
            "{m:?}"
        );
    }
}

#[test]
fn a_resp3_client_hears_its_own_events_before_the_reply() {
    let server = Server::start(&["--threads", "3", "--notify-keyspace-events", "KA"]);
    let mut c = server.raw();
    call(&mut c, "HELLO 3");
    let k = key_on("own", 0, 3, 0);
    c.write_all(&cmd(&format!("SUBSCRIBE __keyspace@0__:{k}")))
        .unwrap();
    read_replies(&mut c, 1);
    c.write_all(&cmd(&format!("SET {k} v"))).unwrap();
    let got = read_replies(&mut c, 2);
    assert!(
        got[0].starts_with(b">3\r\n$7\r\nmessage\r\n"),
        "{:?}",
        String::from_utf8_lossy(&got[0])
    );
    assert_eq!(got[1], b"+OK\r\n");
}

/// The events of a pipeline of SETs and GETs (run together, in the express lane) reach a
/// subscriber, one for each SET, published as the run ends: with one shard, before a message
/// published after the pipeline's replies (not with the next command or the shard's tick).
#[test]
fn a_pipeline_of_sets_raises_each_event() {
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads, "--notify-keyspace-events", "KEA"]);
        let mut admin = server.raw();
        let mut sub = server.raw();
        sub.write_all(&cmd("PSUBSCRIBE __keyevent@0__:*")).unwrap();
        read_replies(&mut sub, 1);
        let mut req = Vec::new();
        for i in 0..40 {
            req.extend(cmd(&format!("SET k{} {i}", i % 4)));
            req.extend(cmd(&format!("GET k{}", i % 4)));
        }
        admin.write_all(&req).unwrap();
        let replies = read_replies(&mut admin, 80);
        for (i, r) in replies.iter().enumerate() {
            let want = if i % 2 == 0 {
                "+OK\r\n".to_string()
            } else {
                let v = (i / 2).to_string();
                format!("${}\r\n{v}\r\n", v.len())
            };
            assert_eq!(String::from_utf8_lossy(r), want, "reply {i}");
        }
        assert_eq!(
            call(&mut admin, "PUBLISH __keyevent@0__:set marker"),
            ":1\r\n"
        );
        let mut per_key: BTreeMap<String, usize> = BTreeMap::new();
        let got = read_replies(&mut sub, 41);
        for (i, m) in got.iter().enumerate() {
            let (channel, key) = parse(m);
            assert_eq!(channel, "__keyevent@0__:set");
            if key == "marker" {
                // (Across shards the marker and the events take different ways.)
                assert!(threads == "3" || i == 40, "the marker came {i}th");
                continue;
            }
            *per_key.entry(key).or_default() += 1;
        }
        let want: BTreeMap<String, usize> = (0..4).map(|k| (format!("k{k}"), 10)).collect();
        assert_eq!(per_key, want, "with {threads} shards");
    }
}
