//! COMMAND INFO, DOCS, LIST and GETKEYS against redis-server, command by command, and the
//! served subcommands against what the server answers.
//!
//! Our facts are Redis 7.4's; the server at hand is Debian's 7.0.15. Commands whose facts
//! changed between the two are listed with what changed, and compared by hand in the closing
//! note's check (`scripts/gen-command-docs.py --redis-7.0`, rendered against 7.0.15: every
//! command equal). Everything else must be the same bytes.

use kvcore::resp::{parse_reply, Value};

use super::{Conn, Redis};
use crate::support::Server;

/// COMMAND INFO replies Redis 7.2/7.4 changed since 7.0.15 (flags, arity, tips or key specs),
/// or where the container's subcommands are only the ones served here.
const INFO_CHANGED_SINCE_7_0: &[&str] = &[
    "client",      // container: served subcommands only
    "command",     // container
    "config",      // container
    "memory",      // container
    "slowlog",     // container: subcommands in Redis's dict order
    "latency",     // container: subcommands in Redis's dict order
    "object",      // container
    "pubsub",      // container
    "script",      // container: subcommands in Redis's dict order
    "function",    // container: subcommands in Redis's dict order
    "xgroup",      // container: subcommands in Redis's dict order
    "xinfo",       // container: subcommands in Redis's dict order
    "acl",         // container: subcommands in Redis's dict order
    "msetnx",      // 7.4: request_policy/response_policy tips dropped
    "scan",        // 7.2: tips
    "randomkey",   // 7.2: response_policy:special tip
    "zrank",       // 7.2: WITHSCORE, arity -3
    "zrevrank",    // 7.2: WITHSCORE, arity -3
    "bzpopmin",    // 7.2: noscript dropped
    "bzpopmax",    // 7.2: noscript dropped
    "blpop",       // 7.2: noscript dropped
    "brpop",       // 7.2: noscript dropped
    "blmove",      // 7.2: noscript dropped
    "brpoplpush",  // 7.2: noscript dropped
    "wait",        // 7.2: blocking instead of noscript
    "sinterstore", // 7.2: destination key spec OW
    "hexpire",     // new in 7.4
    "hpexpire",
    "hexpireat",
    "hpexpireat",
    "httl",
    "hpttl",
    "hexpiretime",
    "hpexpiretime",
    "hpersist",
];

fn command(c: &mut Conn, args: &[&str]) -> Vec<u8> {
    let cmd: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    c.pipeline(&[cmd]).remove(0)
}

fn value(raw: &[u8]) -> Value {
    parse_reply(raw).unwrap().unwrap().0
}

fn bulks(v: Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    (items.into_iter())
        .map(|i| match i {
            Value::Bulk(b) => String::from_utf8(b).unwrap(),
            other => panic!("not a bulk: {other:?}"),
        })
        .collect()
}

#[test]
fn command_info_and_docs_match_redis() {
    let ours = Server::start(&["--threads", "2"]);
    let redis = Redis::start();
    let (mut a, mut b) = (Conn::open(ours.port), Conn::open(redis.port));
    let names = bulks(value(&command(&mut a, &["COMMAND", "LIST"])));
    let tops: Vec<&String> = names.iter().filter(|n| !n.contains('|')).collect();
    let count = command(&mut a, &["COMMAND", "COUNT"]);
    assert_eq!(count, format!(":{}\r\n", tops.len()).into_bytes());

    let mut info_same = 0;
    let mut info_diff = Vec::new();
    for name in &tops {
        let ours = command(&mut a, &["COMMAND", "INFO", name]);
        let theirs = command(&mut b, &["COMMAND", "INFO", name]);
        if INFO_CHANGED_SINCE_7_0.contains(&name.as_str()) {
            continue;
        }
        if ours == theirs {
            info_same += 1;
        } else {
            info_diff.push(name.to_string());
        }
    }
    assert!(info_diff.is_empty(), "COMMAND INFO differs: {info_diff:?}");
    assert!(info_same >= 150, "only {info_same} commands compared");

    // COMMAND DOCS: Redis 7.2 rewrote every summary and added `display_text`, so 7.0.15's
    // docs differ everywhere; the shape is compared here (every served command, its fields in
    // Redis's order) and GET's whole entry with Redis 7.4's bytes.
    let Value::Array(docs) = value(&command(&mut a, &["COMMAND", "DOCS"])) else {
        panic!("COMMAND DOCS is not an array")
    };
    assert_eq!(docs.len(), 2 * tops.len());
    for pair in docs.chunks(2) {
        let Value::Array(fields) = &pair[1] else {
            panic!("{:?} has no docs map", pair[0])
        };
        let names: Vec<&Value> = fields.iter().step_by(2).collect();
        assert_eq!(
            names[..3],
            [
                &Value::Bulk(b"summary".to_vec()),
                &Value::Bulk(b"since".to_vec()),
                &Value::Bulk(b"group".to_vec())
            ],
            "{:?}",
            pair[0]
        );
    }
    let get = command(&mut a, &["COMMAND", "DOCS", "get"]);
    let want = "*2\r\n$3\r\nget\r\n*10\r\n$7\r\nsummary\r\n$34\r\nReturns the string value of a key.\r\n\
        $5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nstring\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n\
        $9\r\narguments\r\n*1\r\n*8\r\n$4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n\
        $12\r\ndisplay_text\r\n$3\r\nkey\r\n$14\r\nkey_spec_index\r\n:0\r\n";
    assert_eq!(String::from_utf8_lossy(&get), want);

    // Unknown names: INFO answers a null per name, DOCS leaves them out.
    assert_eq!(
        command(&mut a, &["COMMAND", "INFO", "get", "nosuch"]),
        command(&mut b, &["COMMAND", "INFO", "get", "nosuch"])
    );
    assert_eq!(
        command(&mut a, &["COMMAND", "DOCS", "nosuch"]),
        command(&mut b, &["COMMAND", "DOCS", "nosuch"])
    );
    // A subcommand by its full name, any case.
    assert_eq!(
        command(&mut a, &["COMMAND", "INFO", "CONFIG|GET"]),
        command(&mut b, &["COMMAND", "INFO", "config|get"])
    );
}

#[test]
fn command_list_filters_and_getkeys_match_redis() {
    let ours = Server::start(&["--threads", "1"]);
    let redis = Redis::start();
    let (mut a, mut b) = (Conn::open(ours.port), Conn::open(redis.port));
    let mut served = bulks(value(&command(&mut a, &["COMMAND", "LIST"])));
    served.sort();
    for filter in [
        ["FILTERBY", "ACLCAT", "hyperloglog"],
        ["FILTERBY", "ACLCAT", "SortedSet"],
        ["FILTERBY", "PATTERN", "z*store"],
        ["FILTERBY", "PATTERN", "client|*"],
        ["FILTERBY", "MODULE", "nosuch"],
        ["FILTERBY", "ACLCAT", "nosuch"],
    ] {
        let args = [&["COMMAND", "LIST"][..], &filter[..]].concat();
        let mut ours = bulks(value(&command(&mut a, &args)));
        let mut theirs = bulks(value(&command(&mut b, &args)));
        // Redis lists every command it has; compare on the ones served here, leaving out
        // CLIENT NO-TOUCH and SETINFO (new in 7.2, not in 7.0.15).
        theirs.retain(|n| served.binary_search(n).is_ok());
        ours.retain(|n| n != "client|no-touch" && n != "client|setinfo");
        ours.sort();
        theirs.sort();
        assert_eq!(ours, theirs, "COMMAND LIST {filter:?}");
    }
    for bad in [
        &["FILTERBY", "COLOR", "x"][..],
        &["FILTERBY", "ACLCAT"],
        &["x"],
    ] {
        let args = [&["COMMAND", "LIST"][..], bad].concat();
        assert_eq!(command(&mut a, &args), command(&mut b, &args), "{bad:?}");
    }
    for call in [
        &["GET", "k"][..],
        &["MSET", "a", "1", "b", "2"],
        &["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
        &["ZUNIONSTORE", "d", "3", "a", "b"],
        &["SORT", "k", "BY", "w_*", "LIMIT", "0", "1", "STORE", "d"],
        &["SORT_RO", "k", "BY", "w_*"],
        &["SET", "k", "v", "GET"],
        &["SET", "k", "v", "EX", "10"],
        &["BITFIELD", "k", "GET", "u8", "0"],
        &["BITFIELD", "k", "SET", "u8", "0", "1"],
        &["LMOVE", "a", "b", "LEFT", "RIGHT"],
        &["BLMPOP", "0", "2", "a", "b", "LEFT"],
        &["GEORADIUS", "k", "0", "0", "1", "km", "STORE", "d"],
        &["MIGRATE", "h", "1", "", "0", "5", "KEYS", "a", "b"],
        &["OBJECT", "ENCODING", "k"],
        &["MEMORY", "USAGE", "k"],
        &["EXISTS", "a", "b", "c"],
        &["XADD", "s", "MAXLEN", "5", "*", "f", "v"],
        &["XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "0"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", ">"],
        &["XGROUP", "CREATE", "s", "g", "$"],
        &["XINFO", "STREAM", "s"],
        &["CONFIG", "GET", "x"],
        &["nosuch", "x"],
    ] {
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            let args = [&["COMMAND", sub][..], call].concat();
            let theirs = command(&mut b, &args);
            if served.binary_search(&call[0].to_lowercase()).is_err() {
                // Not served here: ours must not claim keys of a command it lacks.
                let ours = command(&mut a, &args);
                assert!(
                    ours.starts_with(b"-ERR Invalid command specified"),
                    "{args:?}"
                );
                continue;
            }
            assert_eq!(
                String::from_utf8_lossy(&command(&mut a, &args)),
                String::from_utf8_lossy(&theirs),
                "{args:?}"
            );
        }
    }
    // Redis 7.2 made GETKEYS take a lone command name (arity -3, was -4).
    for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
        assert_eq!(
            command(&mut a, &["COMMAND", sub, "PING"]),
            b"-ERR The command has no key arguments\r\n"
        );
        assert_eq!(
            command(&mut a, &["COMMAND", sub, "GET"]),
            b"-ERR Invalid number of arguments specified for command\r\n"
        );
    }
    // 7.4's help replies end in "Print this help." (7.0: "Prints this help.").
    let theirs = String::from_utf8_lossy(&command(&mut b, &["COMMAND", "HELP"]))
        .replace("+    Prints this help.\r\n", "+    Print this help.\r\n");
    assert_eq!(
        String::from_utf8_lossy(&command(&mut a, &["COMMAND", "HELP"])),
        theirs
    );
}

/// Every subcommand COMMAND LIST names is served (not an unknown subcommand), and every
/// other subcommand Redis 7.0 has of those containers is answered as unknown.
#[test]
fn listed_subcommands_are_exactly_the_served_ones() {
    let ours = Server::start(&["--threads", "1"]);
    let redis = Redis::start();
    let (mut a, mut b) = (Conn::open(ours.port), Conn::open(redis.port));
    let listed = bulks(value(&command(&mut a, &["COMMAND", "LIST"])));
    let containers: Vec<String> = (listed.iter())
        .filter_map(|n| n.split_once('|').map(|(c, _)| c.to_string()))
        .collect();
    let mut candidates: Vec<String> = listed.iter().filter(|n| n.contains('|')).cloned().collect();
    for c in &containers {
        let pattern = format!("{c}|*");
        candidates.extend(bulks(value(&command(
            &mut b,
            &["COMMAND", "LIST", "FILTERBY", "PATTERN", &pattern],
        ))));
    }
    candidates.sort();
    candidates.dedup();
    let mut checked = 0;
    for full in &candidates {
        let (container, sub) = full.split_once('|').unwrap();
        if sub == "help" || (container == "client" && ["pause", "reply"].contains(&sub)) {
            // HELP is asked below; PAUSE and REPLY with a dummy argument are refused anyway,
            // but keep the connection's state out of it.
            continue;
        }
        // Exactly the arguments Redis's arity asks for, so that the subcommand reaches its
        // handler rather than failing the arity check every known subcommand passes through.
        let arity = match value(&command(&mut b, &["COMMAND", "INFO", full])) {
            Value::Array(mut info) if !info.is_empty() => match info.swap_remove(0) {
                Value::Array(fields) => match fields.get(1) {
                    Some(Value::Int(n)) => n.unsigned_abs() as usize,
                    _ => 2,
                },
                _ => 2,
            },
            _ => 2, // new since 7.0: CLIENT NO-TOUCH and SETINFO take one or two
        };
        let mut call = vec![container, sub];
        call.resize(arity.max(2), "x");
        let reply = command(&mut a, &call);
        // (Not "unknown subcommand or wrong number of arguments", a served one's syntax error.)
        let unknown = reply.starts_with(b"-ERR unknown subcommand '");
        assert_eq!(
            !unknown,
            listed.contains(full),
            "{full}: {}",
            String::from_utf8_lossy(&reply)
        );
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} subcommands checked");
    for c in &containers {
        let reply = command(&mut a, &[c, "HELP"]);
        assert!(
            reply.starts_with(b"*"),
            "{c} HELP: {:?}",
            String::from_utf8_lossy(&reply)
        );
    }
}

#[test]
fn memory_subcommands() {
    let ours = Server::start(&["--threads", "2"]);
    let redis = Redis::start();
    let (mut a, mut b) = (Conn::open(ours.port), Conn::open(redis.port));
    for args in [
        &["MEMORY", "HELP"][..],
        &["MEMORY", "DOCTOR"],
        &["MEMORY", "STATS", "x"],
        &["MEMORY", "nosuch"],
        &["LOLWUT"],
        &["LOLWUT", "VERSION", "x"],
    ] {
        // 7.4's help replies end in "Print this help." (7.0: "Prints this help.").
        let theirs = String::from_utf8_lossy(&command(&mut b, args))
            .replace("+    Prints this help.\r\n", "+    Print this help.\r\n");
        assert_eq!(
            String::from_utf8_lossy(&command(&mut a, args)),
            theirs,
            "{args:?}"
        );
    }
    assert_eq!(command(&mut a, &["MEMORY", "PURGE"]), b"+OK\r\n");
    // MEMORY STATS: Redis 7.4's fields in its order, a db entry per non-empty database.
    for i in 0..1000 {
        command(&mut a, &["SET", &format!("k{i}"), "v"]);
    }
    command(&mut a, &["SELECT", "3"]);
    command(&mut a, &["SET", "x", "1"]);
    let Value::Array(stats) = value(&command(&mut a, &["MEMORY", "STATS"])) else {
        panic!("MEMORY STATS is not an array")
    };
    let names: Vec<String> = (stats.iter().step_by(2))
        .map(|v| match v {
            Value::Bulk(b) => String::from_utf8(b.clone()).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    let expected = "peak.allocated total.allocated startup.allocated replication.backlog \
        clients.slaves clients.normal cluster.links aof.buffer lua.caches functions.caches db.0 \
        db.3 overhead.db.hashtable.lut overhead.db.hashtable.rehashing overhead.total \
        db.dict.rehashing.count keys.count keys.bytes-per-key dataset.bytes dataset.percentage \
        peak.percentage allocator.allocated allocator.active allocator.resident allocator.muzzy \
        allocator-fragmentation.ratio allocator-fragmentation.bytes allocator-rss.ratio \
        allocator-rss.bytes rss-overhead.ratio rss-overhead.bytes fragmentation \
        fragmentation.bytes";
    assert_eq!(names.join(" "), expected);
    let field = |name: &str| &stats[names.iter().position(|n| n == name).unwrap() * 2 + 1];
    assert_eq!(field("keys.count"), &Value::Int(1001));
    let (Value::Int(peak), Value::Int(total), Value::Int(startup)) = (
        field("peak.allocated"),
        field("total.allocated"),
        field("startup.allocated"),
    ) else {
        panic!("memory figures are integers")
    };
    assert!(
        peak >= total && total > startup && *startup > 0,
        "{peak} {total} {startup}"
    );
}

#[test]
fn debug_subcommands() {
    // Refused by default, as Redis 7 does.
    let (closed, closed_redis) = (Server::start(&[]), Redis::start());
    let (mut a, mut b) = (Conn::open(closed.port), Conn::open(closed_redis.port));
    for args in [&["DEBUG", "SLEEP", "0"][..], &["DEBUG", "nosuch"]] {
        assert_eq!(command(&mut a, args), command(&mut b, args), "{args:?}");
    }
    assert_eq!(
        command(&mut a, &["CONFIG", "SET", "enable-debug-command", "yes"]),
        command(&mut b, &["CONFIG", "SET", "enable-debug-command", "yes"])
    );

    let ours = Server::start(&["--threads", "3", "--enable-debug-command", "yes"]);
    let redis = Redis::start_with(&["--enable-debug-command", "yes"]);
    let (mut a, mut b) = (Conn::open(ours.port), Conn::open(redis.port));
    for args in [
        &["DEBUG", "SLEEP", "0"][..],
        &["DEBUG", "SLEEP", "0.01abc"],
        &["DEBUG", "ERROR", "Something\r\nbad"],
        &["DEBUG", "nosuch"],
        &["DEBUG", "SLEEP"],
        &["DEBUG"],
        &["DEBUG", "PROTOCOL", "nosuch"],
        &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
    ]
    .into_iter()
    .chain(
        [
            "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib",
            "push", "verbatim", "true", "false",
        ]
        .iter()
        .map(|t| {
            let v: &[&str] = Box::leak(vec!["DEBUG", "PROTOCOL", *t].into_boxed_slice());
            v
        }),
    ) {
        assert_eq!(
            String::from_utf8_lossy(&command(&mut a, args)),
            String::from_utf8_lossy(&command(&mut b, args)),
            "{args:?}"
        );
    }
    // RESP3 shapes (push and attribute replies are two frames: left to the RESP2 rows).
    command(&mut a, &["HELLO", "3"]);
    command(&mut b, &["HELLO", "3"]);
    for t in [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "verbatim", "true",
        "false",
    ] {
        let args = ["DEBUG", "PROTOCOL", t];
        assert_eq!(
            String::from_utf8_lossy(&command(&mut a, &args)),
            String::from_utf8_lossy(&command(&mut b, &args)),
            "RESP3 {args:?}"
        );
    }
    // DEBUG SLEEP stops the server for that long (here: the shard that runs it).
    let t = std::time::Instant::now();
    assert_eq!(command(&mut a, &["DEBUG", "SLEEP", "0.2"]), b"+OK\r\n");
    assert!(t.elapsed() >= std::time::Duration::from_millis(200));

    // SET-ACTIVE-EXPIRE 0: keys on every shard outlive their TTL until touched.
    let mut c = ours.client();
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg("0")
        .query(&mut c)
        .unwrap();
    for i in 0..30 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(1)
            .arg("PX")
            .arg(50)
            .query(&mut c)
            .unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(600));
    let expired = |c: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("expired_keys:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(expired(&mut c), 0, "nothing expires in the background");
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg("1")
        .query(&mut c)
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while expired(&mut c) < 30 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        expired(&mut c),
        30,
        "the background cycle expires them again"
    );
}

fn info_text(s: &mut std::net::TcpStream, section: &str) -> String {
    crate::support::call(s, &format!("INFO {section}"))
}

/// INFO's sections in Redis's order, and every field redis-server 7.0.15 prints (7.4 adds
/// fields, which we print too).
#[test]
fn info_has_every_field_redis_prints() {
    let redis = Redis::start();
    let mut r = std::net::TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
    let server = crate::support::Server::start(&["--threads", "3"]);
    let mut s = server.raw();
    for c in [&mut r, &mut s] {
        crate::support::call(c, "SET k v");
        crate::support::call(c, "GET k");
    }
    // The reply's `$len` line first, then the text.
    let fields_of = |text: &str| -> (Vec<String>, std::collections::BTreeSet<String>) {
        let text = text.split_once("\r\n").map_or("", |(_, t)| t);
        let titles = text
            .split("\r\n")
            .filter(|l| l.starts_with('#'))
            .map(str::to_string)
            .collect();
        let names = text
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| l.split_once(':').expect("field:value").0.to_string())
            .collect();
        (titles, names)
    };
    let (redis_titles, redis_fields) = fields_of(&info_text(&mut r, "everything"));
    let (our_titles, our_fields) = fields_of(&info_text(&mut s, "everything"));
    assert_eq!(our_titles, redis_titles);
    let missing: Vec<_> = redis_fields.difference(&our_fields).collect();
    assert!(
        missing.is_empty(),
        "fields redis-server prints and we do not: {missing:?}"
    );
    let (default_titles, _) = fields_of(&info_text(&mut s, ""));
    let (redis_default, _) = fields_of(&info_text(&mut r, ""));
    assert_eq!(default_titles, redis_default);
    assert_eq!(
        info_text(&mut s, "nosuchsection").trim_end(),
        info_text(&mut r, "nosuchsection").trim_end()
    );
}
