//! Every command the server lists, with arguments drawn at random from its own documentation
//! (the tokens COMMAND DOCS gives it), keys, numbers at the edges of their ranges, patterns
//! and junk: whatever a client sends, the server answers with one well-formed reply, keeps the
//! connection, keeps serving everyone, and never panics.
//!
//! `KV_FUZZ_COMMANDS=N` sends N commands per seed instead of the default (CI's short run);
//! `KV_FUZZ_SEED=S` shifts the seeds by S (other sequences). A seed and a command number in a
//! failure repeat it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kvcore::resp::reply::{parse_reply, Value};

use crate::differential::Rng;
use crate::support::{call, encode, Server};

/// Commands left out, and why: they stop or freeze the server (SHUTDOWN, DEBUG, CLIENT PAUSE,
/// FAILOVER), turn the connection into something that is not request-reply (MONITOR,
/// SUBSCRIBE and friends, SYNC, PSYNC, REPLCONF, CLIENT TRACKING's pushes), wait on purpose
/// (blocking commands with a random timeout, WAIT, WAITAOF), reach for the network (MIGRATE,
/// REPLICAOF), lock the test's connection out (ACL SETUSER, DELUSER, LOAD, SAVE), or
/// change the server under the test (CONFIG SET: port, dir, limits).
const LEFT_OUT: &[&str] = &[
    "shutdown",
    "debug",
    "monitor",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
    "sync",
    "psync",
    "replconf",
    "replicaof",
    "slaveof",
    "failover",
    "migrate",
    "wait",
    "waitaof",
    "quit",
    "client",
    "config|set",
    "acl|setuser",
    "acl|deluser",
    "acl|load",
    "acl|save",
];

/// Arguments any command may get.
const COMMON: &[&str] = &[
    "k1",
    "k2",
    "{t}a",
    "{t}b",
    "f1",
    "m1",
    "",
    "0",
    "1",
    "2",
    "3",
    "-1",
    "-2",
    "10",
    "100",
    "-100",
    "1000000",
    "1.5",
    "-0.5",
    "1e3",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551615",
    "4294967296",
    "99999999999999999999999",
    "0x10",
    "(1",
    "[a",
    "-",
    "+",
    "(",
    "[",
    "*",
    "?",
    "k*",
    "[a-",
    "\\",
    "abc",
    "hello world",
    "\x00\x01\x7f\u{e9}",
    "13.361389",
    "38.115556",
    "180",
    "-85.05112879",
    "u8",
    "i64",
    "#1",
    "return 1",
    "return redis.call('get', KEYS[1])",
    "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
];

/// A command of the server's table: its words (one, or container and subcommand) and the
/// tokens its documentation lists.
struct Known {
    words: Vec<String>,
    tokens: Vec<String>,
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::Bulk(b) | Value::Simple(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::Verbatim { text, .. } => Some(String::from_utf8_lossy(text).into_owned()),
        _ => None,
    }
}

/// The key-value pairs of a RESP2 flat array or a RESP3 map.
fn pairs(v: &Value) -> Vec<(&Value, &Value)> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|p| Some((&p[0], p.get(1)?)))
            .collect(),
        Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        _ => Vec::new(),
    }
}

/// Every `token` under `v` (the arguments of a command's docs, nested).
fn tokens(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Array(items) => {
            for w in items.windows(2) {
                if text(&w[0]).as_deref() == Some("token") {
                    if let Some(t) = text(&w[1]) {
                        out.push(t);
                    }
                }
            }
            for i in items {
                tokens(i, out);
            }
        }
        Value::Map(m) => {
            for (k, v) in m {
                if text(k).as_deref() == Some("token") {
                    if let Some(t) = text(v) {
                        out.push(t);
                    }
                }
                tokens(v, out);
            }
        }
        _ => {}
    }
}

/// The commands (and subcommands) of COMMAND DOCS with their tokens.
fn table(s: &mut TcpStream) -> Vec<Known> {
    s.write_all(&encode(&[b"COMMAND", b"DOCS"])).unwrap();
    let docs = read_reply(s, "COMMAND DOCS").expect("COMMAND DOCS answers");
    let mut out = Vec::new();
    for (name, doc) in pairs(&docs) {
        let Some(name) = text(name) else { continue };
        let subs = pairs(doc)
            .into_iter()
            .find(|(k, _)| text(k).as_deref() == Some("subcommands"));
        if let Some((_, subs)) = subs {
            for (sub, sub_doc) in pairs(subs) {
                let Some(sub) = text(sub) else { continue };
                let mut t = Vec::new();
                tokens(sub_doc, &mut t);
                out.push(Known {
                    words: sub.split('|').map(str::to_string).collect(),
                    tokens: t,
                });
            }
            continue;
        }
        let mut t = Vec::new();
        tokens(doc, &mut t);
        out.push(Known {
            words: vec![name],
            tokens: t,
        });
    }
    out
}

/// Replies in the order they arrive; what was read past one reply is kept for the next.
#[derive(Default)]
struct Replies {
    buf: Vec<u8>,
}

impl Replies {
    /// The next reply, or `Ok(None)` when the server closed the connection; what went wrong
    /// when the reply is malformed or did not come within the timeout.
    fn next(&mut self, s: &mut TcpStream) -> Result<Option<Value>, String> {
        let mut chunk = [0u8; 65536];
        loop {
            match parse_reply(&self.buf) {
                Ok(Some((v, used))) => {
                    self.buf.drain(..used);
                    return Ok(Some(v));
                }
                Ok(None) => {}
                Err(e) => {
                    let had = String::from_utf8_lossy(&self.buf);
                    return Err(format!("malformed reply {e:?}: {had:?}"));
                }
            }
            match s.read(&mut chunk) {
                Ok(0) => return Ok(None),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
                Err(e) => {
                    let had = String::from_utf8_lossy(&self.buf);
                    return Err(format!("no reply ({e}); had {had:?}"));
                }
            }
        }
    }
}

/// The one reply to a command sent alone.
fn read_reply(s: &mut TcpStream, what: &str) -> Option<Value> {
    let mut r = Replies::default();
    let v = r.next(s).unwrap_or_else(|e| panic!("{e}, to {what}"));
    assert!(r.buf.is_empty(), "one reply, nothing after it, for {what}");
    v
}

/// Each command's arity (COMMAND's second field; subcommands as `container|sub`).
fn arities(s: &mut TcpStream) -> std::collections::HashMap<String, i64> {
    fn walk(entries: &[Value], out: &mut std::collections::HashMap<String, i64>) {
        for e in entries {
            let Value::Array(f) = e else { continue };
            if let (Some(name), Some(Value::Int(arity))) = (f.first().and_then(text), f.get(1)) {
                out.insert(name.to_lowercase(), *arity);
            }
            if let Some(Value::Array(subs)) = f.get(9) {
                walk(subs, out);
            }
        }
    }
    s.write_all(&encode(&[b"COMMAND"])).unwrap();
    let mut out = std::collections::HashMap::new();
    match read_reply(s, "COMMAND") {
        Some(Value::Array(entries)) => walk(&entries, &mut out),
        other => panic!("COMMAND answers an array: {other:?}"),
    }
    out
}

/// How many of the last commands a failure lists.
const RECALL: usize = 200;

fn history(recent: &std::collections::VecDeque<String>) -> String {
    recent
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

fn connect(server: &Server) -> TcpStream {
    let s = server.raw();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn fuzz(threads: &str, seeds: std::ops::Range<u64>) {
    let per_seed: usize = std::env::var("KV_FUZZ_COMMANDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2500);
    let mut server = Server::start(&["--threads", threads, "--save", ""]);
    let mut probe = server.raw();
    let mut s = connect(&server);
    let known: Vec<Known> = table(&mut s)
        .into_iter()
        .filter(|k| {
            let full = k.words.join("|").to_lowercase();
            !LEFT_OUT.contains(&full.as_str())
                && !LEFT_OUT.contains(&k.words[0].to_lowercase().as_str())
        })
        .collect();
    assert!(
        known.len() > 150,
        "COMMAND DOCS lists the command table ({} usable)",
        known.len()
    );
    // Blocking commands would wait for their random timeout (or forever).
    let blocking: Vec<String> = {
        s.write_all(&encode(&[
            b"COMMAND",
            b"LIST",
            b"FILTERBY",
            b"ACLCAT",
            b"blocking",
        ]))
        .unwrap();
        match read_reply(&mut s, "COMMAND LIST FILTERBY ACLCAT blocking") {
            Some(Value::Array(v)) => v.iter().filter_map(text).collect(),
            other => panic!("COMMAND LIST answers an array: {other:?}"),
        }
    };
    assert!(
        blocking.iter().any(|b| b == "blpop"),
        "BLPOP is in @blocking: {blocking:?}"
    );
    let known: Vec<Known> = known
        .into_iter()
        .filter(|k| !blocking.contains(&k.words[0].to_lowercase()))
        .collect();
    let arity = arities(&mut s);
    assert_eq!(arity.get("get"), Some(&2), "COMMAND gives arities");
    assert_eq!(
        arity.get("config|get"),
        Some(&-3),
        "COMMAND gives subcommands' arities"
    );
    // Replies that are not errors, by command: most commands must get past their argument
    // checks sometimes, or the test would only exercise those.
    let mut ran = std::collections::BTreeMap::<String, (u32, u32)>::new();
    let shift: u64 = std::env::var("KV_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut recent = std::collections::VecDeque::with_capacity(RECALL);
    for seed in seeds.map(|s| s + shift) {
        recent.clear();
        let mut rng = Rng(seed);
        let mut i = 0;
        while i < per_seed {
            // One command in a write, or (one time in eight) a pipeline of up to 24 in one
            // write, replies read after all of them are sent.
            let batch = if rng.below(8) == 0 {
                2 + rng.below(23)
            } else {
                1
            };
            let mut wire = Vec::new();
            let mut sent = Vec::new();
            for _ in 0..batch {
                let k = &known[rng.below(known.len())];
                let mut args: Vec<Vec<u8>> =
                    k.words.iter().map(|w| w.clone().into_bytes()).collect();
                // Half the time as many arguments as the command takes (at least that many,
                // when its arity is negative), else any number.
                let name = k.words.join("|").to_lowercase();
                let fixed = k.words.len() as i64;
                let n = match (rng.below(2), arity.get(&name)) {
                    (0, Some(&a)) if a > 0 => (a - fixed).max(0) as usize,
                    (0, Some(&a)) => (-a - fixed).max(0) as usize + rng.below(5),
                    _ => match rng.below(10) {
                        0 => 0,
                        1..=6 => 1 + rng.below(4),
                        _ => 4 + rng.below(8),
                    },
                };
                for _ in 0..n {
                    let a = if !k.tokens.is_empty() && rng.below(3) == 0 {
                        k.tokens[rng.below(k.tokens.len())].clone().into_bytes()
                    } else {
                        COMMON[rng.below(COMMON.len())].as_bytes().to_vec()
                    };
                    args.push(a);
                }
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                wire.extend_from_slice(&encode(&refs));
                let what = format!(
                    "seed {seed} #{i}: {:?}",
                    args.iter()
                        .map(|a| String::from_utf8_lossy(a))
                        .collect::<Vec<_>>()
                );
                if recent.len() == RECALL {
                    recent.pop_front();
                }
                recent.push_back(what.clone());
                sent.push((name, what));
                i += 1;
            }
            s.write_all(&wire).unwrap();
            let mut replies = Replies::default();
            for (name, what) in &sent {
                let reply = replies.next(&mut s).unwrap_or_else(|e| {
                    panic!(
                        "{e}, to {what}; the commands before it:\n{}",
                        history(&recent)
                    )
                });
                let Some(reply) = reply else {
                    panic!("the server closed the connection after {what}");
                };
                let tally = ran.entry(name.clone()).or_default();
                tally.0 += 1;
                if !matches!(reply, Value::Error(_)) {
                    tally.1 += 1;
                }
            }
            let what = &sent[sent.len() - 1].1;
            assert!(
                replies.buf.is_empty(),
                "one reply for each command, nothing after them, up to {what}"
            );
            if i % 250 < batch {
                assert!(server.alive(), "the server is running after {what}");
                assert_eq!(
                    call(&mut probe, "PING"),
                    "+PONG\r\n",
                    "another client is served after {what}"
                );
            }
        }
        // The next seed starts from a plain connection state (a transaction, RESP3, a
        // database other than 0 do not carry over).
        s = connect(&server);
        assert_eq!(call(&mut probe, "PING"), "+PONG\r\n");
    }
    let tried = ran.len();
    let succeeded = ran.values().filter(|t| t.1 > 0).count();
    eprintln!(
        "{} commands sent, {tried} different ones, {succeeded} of them answered without an error at least once",
        ran.values().map(|t| t.0).sum::<u32>()
    );
    if std::env::var_os("KV_FUZZ_VERBOSE").is_some() {
        for (name, (n, ok)) in &ran {
            eprintln!("{name:32} {n:6} {ok:6}");
        }
    }
    assert!(
        succeeded * 4 >= tried * 3,
        "three commands in four ran without an error at least once ({succeeded} of {tried})"
    );
    assert!(server.alive());
    assert!(
        server.log_lines_with("panicked").is_empty(),
        "no panic in the log: {:?}",
        server.log_lines_with("panicked")
    );
}

#[test]
fn random_commands_from_the_docs_one_shard() {
    fuzz("1", 0..4);
}

#[test]
fn random_commands_from_the_docs_two_shards() {
    fuzz("2", 100..104);
}
