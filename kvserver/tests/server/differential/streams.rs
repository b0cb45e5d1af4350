//! The streams family of the differential run, and stream cases of their own against
//! redis-server: blocking reads, RESP3, trimming by whole nodes, the change stream.
//!
//! The random run sends IDs that do not depend on the clock (explicit ones, and `ms-*`), and
//! leaves out the replies that carry times (XINFO CONSUMERS, XINFO STREAM FULL, XPENDING's
//! extended form). `+` as an XREAD ID is Redis 7.4's: the run (against 7.0) never sends it;
//! the cases below do, against 7.4 only.

use super::families::{int, key, make, word, Cmd, Gen, Rng};
use super::{Conn, Redis};
use crate::support::Server;

fn id(r: &mut Rng) -> Vec<u8> {
    match r.below(12) {
        0..=5 => format!("{}-{}", 1 + r.below(30), r.below(4)).into_bytes(),
        6 => format!("{}", 1 + r.below(30)).into_bytes(),
        7 => format!("{}-*", 1 + r.below(30)).into_bytes(),
        8 => word(r.pick(&[
            "0-0",
            "0",
            "0-1",
            "18446744073709551615-18446744073709551615",
        ])),
        9 => word(r.pick(&["-", "+", "$", ">", "(5-0", "(-"])),
        10 => word(r.pick(&[
            "abc",
            "1-x",
            "",
            "-1",
            "1--1",
            " 3",
            "+4",
            "1-18446744073709551616",
        ])),
        _ => word("*"),
    }
}

/// An ID for XADD: mostly explicit, increasing in the small space `id` draws from.
fn add_id(r: &mut Rng) -> Vec<u8> {
    if r.chance(85) {
        format!("{}-{}", 1 + r.below(30), r.below(4)).into_bytes()
    } else if r.chance(60) {
        format!("{}-*", 1 + r.below(30)).into_bytes()
    } else {
        // `*` would make an ID of the clock, which the two servers read apart.
        let x = id(r);
        if x == b"*" {
            word("5-*")
        } else {
            x
        }
    }
}

fn range_id(r: &mut Rng) -> Vec<u8> {
    match r.below(6) {
        0 => word("-"),
        1 => word("+"),
        2 => format!("({}-{}", 1 + r.below(30), r.below(4)).into_bytes(),
        _ => id(r),
    }
}

fn field(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["a", "b", "c", "f", "1", "-7", "", "name"]))
}

fn fvalue(r: &mut Rng) -> Vec<u8> {
    match r.below(8) {
        0 => vec![b'v'; 70],
        1 => word(r.pick(&["9223372036854775807", "-1", "3.5", "0"])),
        _ => word(r.pick(&["x", "y", "hello", "12"])),
    }
}

fn group(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["g1", "g1", "g2", "nogroup"]))
}

fn consumer(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["alice", "bob", "carol"]))
}

fn trim_options(r: &mut Rng, c: &mut Cmd) {
    if r.chance(70) {
        c.push(word(r.pick(&["MAXLEN", "MINID", "maxlen"])));
        if r.chance(40) {
            c.push(word(r.pick(&["~", "=", "~"])));
        }
        if c.iter().any(|a| a.eq_ignore_ascii_case(b"MINID")) {
            c.push(id(r));
        } else {
            c.push(word(r.pick(&["0", "1", "3", "10", "-1", "x"])));
        }
        if r.chance(20) {
            c.extend([word("LIMIT"), word(r.pick(&["0", "2", "100", "-1"]))]);
        }
    } else if r.chance(30) {
        c.extend([word("LIMIT"), word("5")]);
    }
}

fn pairs(r: &mut Rng, c: &mut Cmd) {
    for _ in 0..1 + r.below(3) {
        c.push(field(r));
        c.push(fvalue(r));
    }
}

fn ids(r: &mut Rng, c: &mut Cmd) {
    for _ in 0..1 + r.below(3) {
        c.push(id(r));
    }
}

pub static STREAMS: &[Gen] = &[
    |r| {
        let mut c = vec![word("XADD"), key(r)];
        if r.chance(10) {
            c.push(word("NOMKSTREAM"));
        }
        if r.chance(25) {
            trim_options(r, &mut c);
        }
        c.push(add_id(r));
        pairs(r, &mut c);
        c
    },
    |r| {
        // Many entries at once: nodes fill up (100 entries each by default).
        let mut c = Vec::new();
        let k = key(r);
        let base = 100 + r.below(50);
        c.extend([word("XADD"), k, format!("{base}-*").into_bytes()]);
        pairs(r, &mut c);
        c
    },
    |r| {
        let mut c = vec![word("XTRIM"), key(r)];
        trim_options(r, &mut c);
        c
    },
    |r| {
        let mut c = make(
            r.pick(&["XRANGE", "XREVRANGE"]),
            &[key, range_id, range_id],
            r,
        );
        if r.chance(40) {
            c.extend([word("COUNT"), word(r.pick(&["0", "1", "2", "-1", "x"]))]);
        }
        c
    },
    |r| make("XLEN", &[key], r),
    |r| {
        let mut c = vec![word("XDEL"), key(r)];
        ids(r, &mut c);
        c
    },
    |r| {
        let mut c = vec![word("XREAD")];
        if r.chance(30) {
            c.extend([word("COUNT"), word(r.pick(&["1", "2", "0", "-3"]))]);
        }
        c.push(word("STREAMS"));
        let n = 1 + r.below(2);
        for _ in 0..n {
            c.push(key(r));
        }
        for _ in 0..n {
            let x = id(r);
            // `+` is Redis 7.4's (the run compares with 7.0).
            c.push(if x == b"+" { word("$") } else { x });
        }
        c
    },
    |r| {
        let mut c = vec![word("XREADGROUP"), word("GROUP"), group(r), consumer(r)];
        if r.chance(30) {
            c.extend([word("COUNT"), word(r.pick(&["1", "2", "0"]))]);
        }
        if r.chance(20) {
            c.push(word("NOACK"));
        }
        c.push(word("STREAMS"));
        c.push(key(r));
        c.push(if r.chance(70) { word(">") } else { id(r) });
        c
    },
    |r| {
        let mut c = make("XGROUP", &[], r);
        match r.below(6) {
            0 | 1 => {
                c.extend([word("CREATE"), key(r), group(r), id(r)]);
                if r.chance(50) {
                    c.push(word("MKSTREAM"));
                }
                if r.chance(20) {
                    c.extend([word("ENTRIESREAD"), word(r.pick(&["3", "-1", "-2", "x"]))]);
                }
            }
            2 => c.extend([word("SETID"), key(r), group(r), id(r)]),
            3 => c.extend([word("DESTROY"), key(r), group(r)]),
            4 => c.extend([
                word(r.pick(&["CREATECONSUMER", "DELCONSUMER"])),
                key(r),
                group(r),
                consumer(r),
            ]),
            _ => c.push(word(r.pick(&["HELP", "NOPE", "CREATE"]))),
        }
        c
    },
    |r| {
        let mut c = make("XSETID", &[key, id], r);
        if r.chance(30) {
            c.extend([word("ENTRIESADDED"), int(r)]);
        }
        if r.chance(30) {
            c.extend([word("MAXDELETEDID"), id(r)]);
        }
        c
    },
    |r| {
        let mut c = make("XACK", &[key, group], r);
        ids(r, &mut c);
        c
    },
    |r| make("XPENDING", &[key, group], r),
    |r| {
        let mut c = make("XCLAIM", &[key, group, consumer], r);
        c.push(word(r.pick(&["0", "0", "1000000", "x", "-5"])));
        ids(r, &mut c);
        if r.chance(60) {
            c.push(word("JUSTID"));
        }
        if r.chance(30) {
            c.push(word("FORCE"));
        }
        if r.chance(20) {
            c.extend([word("RETRYCOUNT"), word(r.pick(&["3", "x"]))]);
        }
        if r.chance(10) {
            c.extend([word("LASTID"), id(r)]);
        }
        c
    },
    |r| {
        let mut c = make("XAUTOCLAIM", &[key, group, consumer], r);
        c.push(word(r.pick(&["0", "0", "x"])));
        c.push(range_id(r));
        if r.chance(40) {
            c.extend([word("COUNT"), word(r.pick(&["1", "2", "0", "100"]))]);
        }
        if r.chance(40) {
            c.push(word("JUSTID"));
        }
        c
    },
    |r| make("XINFO", &[|_| word("GROUPS"), key], r),
    |r| make("XINFO", &[|_| word("STREAM"), key], r),
    |r| make("XINFO", &[|r| word(r.pick(&["HELP", "NOPE", "STREAM"]))], r),
];

fn cmd(args: &[&str]) -> Cmd {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Replaces the times in a reply (`:` integers of 13 digits, and small idle counters after
/// `idle` / `inactive`) so that two servers' replies compare.
fn mask_times(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    let mut out = Vec::new();
    let mut after_idle = false;
    for line in text.split("\r\n") {
        let masked =
            if line.starts_with(':') && (line.len() == 14 || (after_idle && line.len() <= 6)) {
                ":T".to_string()
            } else {
                line.to_string()
            };
        after_idle = matches!(line, "idle" | "inactive");
        out.push(masked);
    }
    out.join("\r\n")
}

/// XPENDING's extended reply with each entry's idle time masked (`[id, consumer, idle,
/// deliveries]` rows).
fn mask_idle(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    let mut lines: Vec<String> = text.split("\r\n").map(str::to_string).collect();
    let mut i = 1;
    while i + 5 < lines.len() {
        if lines[i] == "*4" {
            lines[i + 5] = ":T".to_string();
            i += 7;
        } else {
            i += 1;
        }
    }
    lines.join("\r\n")
}

/// Runs `cmds` on a fresh server of each kind (ours with `ours_args`); replies compared with
/// times masked, but HELLO's (client ids). Against Redis 7.0, XINFO CONSUMERS and XINFO STREAM
/// FULL are left out: 7.2 added consumers' `inactive` and `active-time`.
fn compare(cmds: &[Cmd], ours_args: &[&str], redis: &Redis) {
    let old = redis.version < (7, 2);
    let cmds: Vec<Cmd> = cmds
        .iter()
        .filter(|c| {
            !(old
                && c.len() >= 3
                && c[0].eq_ignore_ascii_case(b"XINFO")
                && (c[1].eq_ignore_ascii_case(b"CONSUMERS")
                    || c.get(3).is_some_and(|a| a.eq_ignore_ascii_case(b"FULL"))))
        })
        .cloned()
        .collect();
    let cmds = &cmds[..];
    let theirs = Conn::open(redis.port).pipeline(cmds);
    let ours_server = Server::start(ours_args);
    let ours = Conn::open(ours_server.port).pipeline(cmds);
    for ((c, o), t) in cmds.iter().zip(&ours).zip(&theirs) {
        let show: Vec<String> = c
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if c[0].eq_ignore_ascii_case(b"HELLO") {
            continue;
        }
        if c[0].eq_ignore_ascii_case(b"XPENDING") && c.len() > 3 {
            assert_eq!(mask_idle(o), mask_idle(t), "{show:?}");
            continue;
        }
        assert_eq!(mask_times(o), mask_times(t), "{show:?}");
    }
}

/// A stream through its commands: groups, pending entries, claims, trims; every reply
/// compared, on one shard and on two (keys on both).
#[test]
fn stream_commands_match_redis() {
    let mut cmds: Vec<Cmd> = Vec::new();
    for line in [
        "XADD s 1-1 a 1 b 2",
        "XADD s 1-2 a 3 b 4",
        "XADD s 1-* c 5",
        "XADD s 2 a 1",
        "XADD s 0-5 a 1",
        "XADD s 0-0 a 1",
        "XADD s 3-0 a",
        "XADD s MAXLEN",
        "XADD s NOMKSTREAM 4-0 x y",
        "XADD nokey NOMKSTREAM 4-0 x y",
        "XLEN s",
        "XRANGE s - +",
        "XRANGE s - + COUNT 2",
        "XRANGE s - + COUNT 0",
        "XRANGE s (1-1 +",
        "XREVRANGE s + - COUNT 1",
        "XRANGE s (- +",
        "SET str x",
        "XADD str 1-1 a b",
        "XRANGE str - +",
        "XDEL s 1-2 9-9",
        "XINFO STREAM s",
        "XTRIM s MAXLEN 2",
        "XTRIM s LIMIT 10 MAXLEN 1",
        "XTRIM s MAXLEN 1 LIMIT 10",
        "XTRIM s MAXLEN ~ 1 LIMIT 10",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE nokey g 0",
        "XGROUP CREATE {s}new g $ MKSTREAM",
        "XGROUP CREATECONSUMER s g alice",
        "XGROUP CREATECONSUMER s g alice",
        "XADD s 5-0 f v",
        "XADD s 6-0 f v",
        "XREADGROUP GROUP g alice STREAMS s >",
        "XREADGROUP GROUP g bob COUNT 1 STREAMS s 0",
        "XREADGROUP GROUP g alice STREAMS s 0",
        "XREADGROUP GROUP g alice STREAMS s $",
        "XREADGROUP GROUP nog alice STREAMS s >",
        "XREAD STREAMS s 0",
        "XREAD COUNT 1 STREAMS s other 0 0",
        "XREAD STREAMS s >",
        "XREAD STREAMS s",
        "XREAD GROUP g a STREAMS s 0",
        "XREAD BLOCK -1 STREAMS s 0",
        "XREAD BLOCK x STREAMS s 0",
        "XPENDING s g",
        "XPENDING s g - + 10",
        "XPENDING s g IDLE 0 - + 10 alice",
        "XPENDING s g - + 10 nobody",
        "XPENDING s nog",
        "XACK s g 5-0",
        "XINFO GROUPS s",
        "XINFO CONSUMERS s g",
        "XINFO STREAM s FULL",
        "XGROUP SETID s g 0",
        "XGROUP DELCONSUMER s g alice",
        "XGROUP DESTROY s g",
        "XGROUP DESTROY s g",
        // Redis 7.2 checks the deleted IDs first (7.0: the top item first).
        "7.2: XSETID s 1-0",
        "XSETID s 100-0",
        "XSETID s 200-0 ENTRIESADDED 1",
        "XSETID s 200-0 MAXDELETEDID 300-0",
        "XINFO STREAM s",
        // Redis 7.2's HELP says "Print this help" (7.0: "Prints").
        "7.2: XGROUP HELP",
        "7.2: XINFO HELP",
        "XGROUP FOO",
        "XINFO FOO s",
        "XINFO STREAM s FOO",
        "XGROUP CREATE s g2 0 ENTRIESREAD -5",
        "XGROUP CREATE s g2 0 ENTRIESREAD 1",
        "TYPE s",
        "OBJECT ENCODING s",
        "XCLAIM s g2 c1 0 5-0",
        "XCLAIM s g2 c1 0 5-0 FORCE",
        "XCLAIM s g2 c1 0 6-0 FORCE JUSTID",
        "XCLAIM s g2 c1 0 6-0 BOGUS",
        "XAUTOCLAIM s g2 c2 0 0",
        "XAUTOCLAIM s g2 c2 0 0 COUNT 1 JUSTID",
        "XAUTOCLAIM s g2 c2 0 0 COUNT 0",
        "XDEL s 6-0",
        "XAUTOCLAIM s g2 c2 0 0",
        "XPENDING s g2",
        "XINFO CONSUMERS s g2",
        "DEL {s}new",
        "SCAN 0 TYPE stream",
        "DEL s",
        "XINFO STREAM s",
    ] {
        cmds.push(line.split(' ').map(|a| a.as_bytes().to_vec()).collect());
    }
    for threads in ["1", "2"] {
        let redis = Redis::start();
        // Lines marked `7.2:` are Redis 7.2's behaviour: left out against 7.0.
        let cmds: Vec<Cmd> = cmds
            .iter()
            .filter_map(|c| match c[0].strip_prefix(b"7.2:") {
                None => Some(c.clone()),
                Some(_) if redis.version < (7, 2) => None,
                Some(_) => Some(c[1..].to_vec()),
            })
            .collect();
        compare(&cmds, &["--threads", threads], &redis);
    }
}

/// Node boundaries decide what an approximate trim drops and what XINFO reports: thousands of
/// entries of varied shapes, deletions and trims, against Redis (node limits lowered too).
#[test]
fn stream_nodes_and_trims_match_redis() {
    let mut r = Rng(11);
    let mut cmds: Vec<Cmd> = Vec::new();
    let mut ms = 1u64;
    for i in 0..2500 {
        ms += [0, 1, 1, 1000, 1 << 40][r.below(5)];
        let p = r.below(100);
        let k = if i % 2 == 0 { "s1" } else { "s2" };
        let mut c: Cmd = match p {
            0..=79 => {
                let mut c = cmd(&["XADD", k, &format!("{ms}-*")]);
                for _ in 0..1 + r.below(3) {
                    c.push(word(r.pick(&["a", "b", "c", "f1"])));
                    c.push(match r.below(4) {
                        0 => vec![b'v'; r.below(90)],
                        1 => word("4611686018427387904"),
                        _ => word(r.pick(&["1", "-5", "xyz", "3.5"])),
                    });
                }
                c
            }
            80..=84 => cmd(&["XDEL", k, &format!("{}-0", ms - 1), &format!("{ms}-0")]),
            85..=88 => cmd(&[
                "XADD",
                k,
                "MAXLEN",
                "~",
                &(50 + r.below(400)).to_string(),
                &format!("{ms}-*"),
                "x",
                "y",
            ]),
            89..=91 => cmd(&["XTRIM", k, "MAXLEN", &(100 + r.below(500)).to_string()]),
            92..=94 => cmd(&[
                "XTRIM",
                k,
                "MINID",
                "~",
                &ms.saturating_sub(r.next() % (1 << 41)).to_string(),
            ]),
            _ => cmd(&[
                "XADD",
                k,
                "MINID",
                "~",
                &ms.saturating_sub(r.next() % (1 << 41)).to_string(),
                "LIMIT",
                "50",
                &format!("{ms}-*"),
                "x",
                "y",
            ]),
        };
        if i % 500 == 499 {
            c = cmd(&[
                "CONFIG",
                "SET",
                "stream-node-max-entries",
                r.pick(&["7", "100", "33"]),
            ]);
        }
        cmds.push(c);
        if i % 50 == 0 {
            cmds.push(cmd(&["XINFO", "STREAM", k]));
        }
    }
    for k in ["s1", "s2"] {
        cmds.push(cmd(&["XRANGE", k, "-", "+"]));
        cmds.push(cmd(&["XREVRANGE", k, "+", "-", "COUNT", "77"]));
        cmds.push(cmd(&["XINFO", "STREAM", k]));
    }
    let redis = Redis::start();
    compare(&cmds, &["--threads", "2"], &redis);
}

/// RESP3 replies (XREAD is a map of streams) and Redis 7.4's `+` ID for XREAD.
#[test]
fn stream_reads_in_resp3_and_74_ids() {
    let redis = Redis::start();
    let mut cmds: Vec<Cmd> = [
        "HELLO 3",
        "XADD a 1-1 f v",
        "XADD b 2-1 f v",
        "XADD b 3-1 g w",
    ]
    .iter()
    .map(|l| l.split(' ').map(|a| a.as_bytes().to_vec()).collect())
    .collect();
    for l in [
        "XREAD STREAMS a b 0 0",
        "XREAD COUNT 1 STREAMS a b 0 2-1",
        "XREAD STREAMS a b $ $",
        "XGROUP CREATE b g 0",
        "XREADGROUP GROUP g c STREAMS b >",
        "XREADGROUP GROUP g c STREAMS b 0",
        "XDEL b 2-1",
        "XREADGROUP GROUP g c STREAMS b 0",
        "XINFO GROUPS b",
        "XINFO STREAM b",
        "XAUTOCLAIM b g d 0 0",
    ] {
        cmds.push(l.split(' ').map(|a| a.as_bytes().to_vec()).collect());
    }
    compare(&cmds, &["--threads", "2"], &redis);
    // Redis 7.4: XREAD's `+` reads the last entry (7.0 calls it an invalid ID).
    if redis.version >= (7, 4) {
        let plus: Vec<Cmd> = vec![
            cmd(&["XADD", "p", "1-1", "f", "v"]),
            cmd(&["XADD", "p", "2-1", "f", "w"]),
            cmd(&["XREAD", "STREAMS", "p", "+"]),
            cmd(&["XREAD", "STREAMS", "p", "nokey", "+", "+"]),
        ];
        compare(&plus, &["--threads", "1"], &redis);
    }
}

/// A blocked XREAD wakes on an XADD to any of its streams, on this shard or another, and gets
/// only that stream; a blocked XREADGROUP gets new entries and owns them, and ends with an
/// error when its key or group goes; BLOCK times out with the null array. Ours and Redis give the same bytes.
#[test]
fn blocked_stream_reads_match_redis() {
    let redis = Redis::start();
    let ours = Server::start(&["--threads", "2"]);
    // Two keys on different shards of ours.
    let (k1, k2) = (
        crate::support::key_on("x", 0, 2, 0),
        crate::support::key_on("x", 1, 2, 0),
    );
    for port in [redis.port, ours.port] {
        let mut setup = Conn::open(port);
        setup.pipeline(&[
            cmd(&["FLUSHALL"]),
            cmd(&["XGROUP", "CREATE", &k2, "g", "$", "MKSTREAM"]),
        ]);
    }
    let redis_version = redis.version;
    let run = |port: u16| -> Vec<String> {
        let mut out = Vec::new();
        // XREAD on two streams; the write lands on the second.
        let mut reader = Conn::open(port);
        let read = [cmd(&[
            "XREAD", "BLOCK", "5000", "STREAMS", &k1, &k2, "$", "$",
        ])];
        reader.send(&read);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let mut w = Conn::open(port);
        w.pipeline(&[cmd(&["XADD", &k2, "7-1", "f", "v"])]);
        out.push(mask_times(&reader.receive(&read)[0]));
        // XREADGROUP: the next entry; it is then pending for the consumer.
        let read = [cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "BLOCK",
            "5000",
            "STREAMS",
            &k2,
            ">",
        ])];
        reader.send(&read);
        std::thread::sleep(std::time::Duration::from_millis(300));
        w.pipeline(&[cmd(&["XADD", &k2, "8-1", "f", "w"])]);
        out.push(mask_times(&reader.receive(&read)[0]));
        for r in w.pipeline(&[cmd(&["XPENDING", &k2, "g"]), cmd(&["XINFO", "GROUPS", &k2])]) {
            out.push(mask_times(&r));
        }
        // A group read ends when its key or group goes, or the key changes type: Redis 7.2+
        // runs it again (NOGROUP, WRONGTYPE), where 7.0 answered "-UNBLOCKED the stream key
        // no longer exists" and its own NOGROUP text; compared against 7.2+ only.
        let acts = if redis_version >= (7, 2) { 4 } else { 0 };
        for act in [
            vec!["DEL", k2.as_str()],
            vec!["XGROUP", "DESTROY", k2.as_str(), "g"],
            vec!["SET", k2.as_str(), "x"],
            vec!["FLUSHALL"],
        ]
        .into_iter()
        .take(acts)
        {
            w.pipeline(&[
                cmd(&["DEL", &k2]),
                cmd(&["XGROUP", "CREATE", &k2, "g", "$", "MKSTREAM"]),
            ]);
            let read = [cmd(&[
                "XREADGROUP",
                "GROUP",
                "g",
                "bob",
                "BLOCK",
                "5000",
                "STREAMS",
                &k2,
                ">",
            ])];
            reader.send(&read);
            std::thread::sleep(std::time::Duration::from_millis(300));
            w.pipeline(&[cmd(&act)]);
            out.push(mask_times(&reader.receive(&read)[0]));
        }
        // Timed out.
        out.push(mask_times(
            &reader.pipeline(&[cmd(&["XREAD", "BLOCK", "100", "STREAMS", &k1, "$"])])[0],
        ));
        out
    };
    assert_eq!(run(ours.port), run(redis.port));
}
