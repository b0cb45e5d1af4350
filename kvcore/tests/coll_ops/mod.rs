//! Commands of the list, set, hash and SORT families with arguments decoded from arbitrary
//! bytes (well-formed and not: huge and negative counts, wrong types, missing keys), run on a
//! [`kvcore::Db`] with a manual clock. Checks that nothing panics, that every reply is one
//! well-formed RESP value, and after each command that each key's own views agree: LLEN with
//! LRANGE, SCARD with SMEMBERS and SISMEMBER, HLEN with HGETALL, TYPE with the encoding.
//!
//! Shared by the `coll_ops` fuzz target and by `cargo test` (`fuzz_corpus.rs` replays the
//! corpus and random inputs).

#![allow(dead_code)]

use kvcore::resp::reply::{parse_reply, Value};
use kvcore::{Clock, Db, Session};

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn pick<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[usize::from(self.byte()) % items.len()]
    }

    fn key(&mut self) -> Vec<u8> {
        self.pick(&["l", "s", "h", "z", "str", "x"])
            .as_bytes()
            .to_vec()
    }

    fn elem(&mut self) -> Vec<u8> {
        match self.byte() % 6 {
            0 => (i64::from(self.byte() as i8)).to_string().into_bytes(),
            1 => vec![b'e'; usize::from(self.byte()) % 80],
            2 => self
                .pick(&["a", "b", "f1", "f2", "", "007"])
                .as_bytes()
                .to_vec(),
            3 => i64::MAX.to_string().into_bytes(),
            _ => vec![b'a' + self.byte() % 4],
        }
    }

    fn num(&mut self) -> Vec<u8> {
        self.pick(&[
            "0",
            "1",
            "-1",
            "2",
            "5",
            "-3",
            "100",
            "x",
            "9223372036854775807",
            "-9223372036854775808",
            "1.5",
            "",
            "4294967296",
        ])
        .as_bytes()
        .to_vec()
    }
}

fn w(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// One generated command.
fn command(i: &mut Input<'_>) -> Vec<Vec<u8>> {
    let mut c: Vec<Vec<u8>> = match i.byte() % 24 {
        0 => vec![
            w(i.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"])),
            i.key(),
            i.elem(),
            i.elem(),
        ],
        1 => vec![w(i.pick(&["LPOP", "RPOP"])), i.key(), i.num()],
        2 => vec![w("LRANGE"), i.key(), i.num(), i.num()],
        3 => vec![w("LTRIM"), i.key(), i.num(), i.num()],
        4 => vec![w("LSET"), i.key(), i.num(), i.elem()],
        5 => vec![w("LREM"), i.key(), i.num(), i.elem()],
        6 => vec![
            w("LINSERT"),
            i.key(),
            w(i.pick(&["BEFORE", "AFTER"])),
            i.elem(),
            i.elem(),
        ],
        7 => vec![
            w("LPOS"),
            i.key(),
            i.elem(),
            w(i.pick(&["RANK", "COUNT", "MAXLEN"])),
            i.num(),
        ],
        8 => vec![
            w("LMOVE"),
            i.key(),
            i.key(),
            w(i.pick(&["LEFT", "RIGHT"])),
            w(i.pick(&["LEFT", "RIGHT"])),
        ],
        9 => vec![
            w("LMPOP"),
            i.num(),
            i.key(),
            w(i.pick(&["LEFT", "RIGHT"])),
            w("COUNT"),
            i.num(),
        ],
        10 => vec![w("SADD"), i.key(), i.elem(), i.elem(), i.elem()],
        11 => vec![w("SREM"), i.key(), i.elem()],
        12 => vec![w(i.pick(&["SPOP", "SRANDMEMBER"])), i.key(), i.num()],
        13 => vec![w(i.pick(&["SINTER", "SUNION", "SDIFF"])), i.key(), i.key()],
        14 => vec![
            w(i.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"])),
            i.key(),
            i.key(),
            i.key(),
        ],
        15 => vec![w("SMOVE"), i.key(), i.key(), i.elem()],
        16 => vec![w("HSET"), i.key(), i.elem(), i.elem(), i.elem(), i.elem()],
        17 => vec![w("HDEL"), i.key(), i.elem()],
        18 => vec![
            w(i.pick(&["HINCRBY", "HINCRBYFLOAT"])),
            i.key(),
            i.elem(),
            i.num(),
        ],
        19 => vec![w("HRANDFIELD"), i.key(), i.num(), w("WITHVALUES")],
        20 => vec![
            w(i.pick(&["HEXPIRE", "HPEXPIRE", "HPERSIST", "HTTL"])),
            i.key(),
            i.num(),
            w("FIELDS"),
            i.num(),
            i.elem(),
        ],
        21 => vec![
            w("SORT"),
            i.key(),
            w(i.pick(&["BY", "GET", "LIMIT", "ALPHA", "DESC"])),
            w(i.pick(&["*", "#", "h*->f1", "nosort"])),
            i.num(),
            i.num(),
        ],
        22 => vec![
            w(i.pick(&["SSCAN", "HSCAN"])),
            i.key(),
            i.num(),
            w("COUNT"),
            i.num(),
        ],
        _ => vec![
            w(i.pick(&["SET", "ZADD", "DEL", "CONFIG"])),
            i.key(),
            i.num(),
            i.elem(),
        ],
    };
    // Sometimes fewer or more arguments than the command wants.
    match i.byte() % 8 {
        0 => {
            let keep = 1 + usize::from(i.byte()) % c.len();
            c.truncate(keep);
        }
        1 => c.push(i.elem()),
        _ => {}
    }
    c
}

fn call(db: &mut Db, s: &mut Session, args: &[Vec<u8>]) -> Value {
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let mut out = Vec::new();
    db.dispatch(s, &refs, &mut out);
    match parse_reply(&out) {
        Ok(Some((v, used))) if used == out.len() => v,
        other => panic!(
            "{:?}: not one reply: {other:?} {:?}",
            args,
            String::from_utf8_lossy(&out)
        ),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

fn len(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Each collection key's views agree.
fn check(db: &mut Db, s: &mut Session) {
    for key in [&b"l"[..], b"s", b"h", b"x"] {
        let k = key.to_vec();
        match call(db, s, &[w("TYPE"), k.clone()]) {
            Value::Simple(t) if t == b"list" => {
                let n = int(&call(db, s, &[w("LLEN"), k.clone()]));
                assert!(n > 0, "an empty list was kept");
                assert_eq!(
                    len(&call(db, s, &[w("LRANGE"), k, w("0"), w("-1")])),
                    n as usize
                );
            }
            Value::Simple(t) if t == b"set" => {
                let n = int(&call(db, s, &[w("SCARD"), k.clone()]));
                assert!(n > 0, "an empty set was kept");
                let Value::Array(members) = call(db, s, &[w("SMEMBERS"), k.clone()]) else {
                    panic!("SMEMBERS is not an array");
                };
                assert_eq!(members.len(), n as usize);
                for m in members {
                    let Value::Bulk(m) = m else {
                        panic!("member not a bulk")
                    };
                    assert_eq!(int(&call(db, s, &[w("SISMEMBER"), k.clone(), m])), 1);
                }
            }
            Value::Simple(t) if t == b"hash" => {
                let n = int(&call(db, s, &[w("HLEN"), k.clone()]));
                assert!(n > 0, "an empty hash was kept");
                assert_eq!(len(&call(db, s, &[w("HGETALL"), k])), 2 * n as usize);
            }
            _ => {}
        }
    }
}

/// Runs the commands `data` decodes to, checking after each.
pub fn check_ops(data: &[u8]) {
    let mut db = Db::new();
    let mut now = 1_700_000_000_000;
    db.set_clock(Clock::Manual(now));
    let mut s = Session {
        authenticated: true,
        ..Session::default()
    };
    for (k, v) in [
        ("list-max-listpack-size", "3"),
        ("set-max-intset-entries", "4"),
        ("set-max-listpack-entries", "3"),
        ("hash-max-listpack-entries", "3"),
    ] {
        call(&mut db, &mut s, &[w("CONFIG"), w("SET"), w(k), w(v)]);
    }
    let mut input = Input(data);
    while !input.0.is_empty() {
        if input.byte() % 16 == 0 {
            now += u64::from(input.byte()) * 10;
            db.set_clock(Clock::Manual(now));
            db.cron(std::time::Duration::from_millis(1));
            db.set_clock(Clock::Manual(now));
        }
        let c = command(&mut input);
        let r = call(&mut db, &mut s, &c);
        if std::env::var("KV_COLL_TRACE").is_ok() {
            eprintln!(
                "{:?} -> {r:?}",
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
            );
        }
        check(&mut db, &mut s);
    }
}
