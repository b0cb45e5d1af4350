//! The command table as a server describes it — the tokens of each command's COMMAND DOCS, its
//! arity from COMMAND, the @blocking category — and random commands drawn from it: documented
//! tokens, keys, numbers at the edges of their ranges, patterns and junk. The command fuzzer
//! sends them to kvserver alone; the differential run's docs mode sends them to kvserver and
//! a redis-server and compares the replies.

use std::collections::HashMap;

/// Commands neither random run sends: they stop the server (SHUTDOWN, FAILOVER), leave
/// request-reply (MONITOR, the (un)subscribe family's pushes, QUIT, SYNC, PSYNC, REPLCONF), wait
/// on purpose (WAIT, WAITAOF) or reach for other servers (MIGRATE, REPLICAOF, SLAVEOF). Each run
/// adds its own.
pub const NOT_REQUEST_REPLY: &[&str] = &[
    "shutdown",
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
];
use std::io::{Read, Write};
use std::net::TcpStream;

use kvcore::resp::reply::{parse_reply, Value};

use crate::differential::Rng;
use crate::support::encode;

/// Arguments any command may get.
pub(crate) const COMMON: &[&str] = &[
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
pub(crate) struct Known {
    /// The command's name, or its container's and its own.
    pub words: Vec<String>,
    /// The tokens of its documented arguments.
    pub tokens: Vec<String>,
}

/// The text of a string reply.
pub(crate) fn text(v: &Value) -> Option<String> {
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
pub(crate) fn table(s: &mut TcpStream) -> Vec<Known> {
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
pub(crate) struct Replies {
    /// Bytes read past the last reply.
    pub buf: Vec<u8>,
}

impl Replies {
    /// The next reply, or `Ok(None)` when the server closed the connection; what went wrong
    /// when the reply is malformed or did not come within the timeout.
    pub fn next(&mut self, s: &mut TcpStream) -> Result<Option<Value>, String> {
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
pub(crate) fn read_reply(s: &mut TcpStream, what: &str) -> Option<Value> {
    let mut r = Replies::default();
    let v = r.next(s).unwrap_or_else(|e| panic!("{e}, to {what}"));
    assert!(r.buf.is_empty(), "one reply, nothing after it, for {what}");
    v
}

/// Each command's arity (COMMAND's second field; subcommands as `container|sub`).
pub(crate) fn arities(s: &mut TcpStream) -> HashMap<String, i64> {
    fn walk(entries: &[Value], out: &mut HashMap<String, i64>) {
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
    let mut out = HashMap::new();
    match read_reply(s, "COMMAND") {
        Some(Value::Array(entries)) => walk(&entries, &mut out),
        other => panic!("COMMAND answers an array: {other:?}"),
    }
    out
}

/// The commands of @blocking (they would wait for their random timeout, or forever).
pub(crate) fn blocking(s: &mut TcpStream) -> Vec<String> {
    s.write_all(&encode(&[
        b"COMMAND",
        b"LIST",
        b"FILTERBY",
        b"ACLCAT",
        b"blocking",
    ]))
    .unwrap();
    match read_reply(s, "COMMAND LIST FILTERBY ACLCAT blocking") {
        Some(Value::Array(v)) => v.iter().filter_map(text).collect(),
        other => panic!("COMMAND LIST answers an array: {other:?}"),
    }
}

/// One random command of `known`: its words, then half the time as many arguments as its
/// arity asks (at least that many when the arity is negative), else any number; each
/// argument one of its documented tokens one time in three, else one of [`COMMON`]. Returns
/// the command's table name (`container|sub`, lower case) and its arguments.
pub(crate) fn draw(
    rng: &mut Rng,
    known: &[Known],
    arity: &HashMap<String, i64>,
) -> (String, Vec<Vec<u8>>) {
    let k = &known[rng.below(known.len())];
    let mut args: Vec<Vec<u8>> = k.words.iter().map(|w| w.clone().into_bytes()).collect();
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
    (name, args)
}
