//! A sequence of operations on a [`kvcore::Db`], decoded from arbitrary bytes, checked step by
//! step against a plain model: a `HashMap` per database and a clock moved by hand.
//!
//! Shared by the `db_ops` fuzz target (`fuzz/fuzz_targets/db_ops.rs` includes this file) and
//! by `cargo test` (`kvcore/tests/fuzz_corpus.rs` replays the corpus and random inputs), so a
//! crash the fuzzer finds is a regression test as soon as its input is saved.
//!
//! Commands go through [`Db::dispatch`] and their exact reply bytes are compared with what the
//! model says Redis answers; a few steps use the typed API instead. Expiry uses a manual
//! clock that operations move, sometimes exactly onto a deadline, and an active-expiry step.

use std::collections::HashMap;
use std::time::Duration;

use kvcore::{Clock, Db, Session};

/// Reads the fuzz input from the front; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn below(&mut self, n: u8) -> u8 {
        self.byte() % n
    }

    fn key(&mut self) -> Vec<u8> {
        const KEYS: [&[u8]; 6] = [b"a", b"b", b"c", b"{x}d", b"", b"k\0\r\n"];
        KEYS[usize::from(self.below(6))].to_vec()
    }

    fn value(&mut self) -> Vec<u8> {
        match self.below(4) {
            0 => (i64::from(self.byte() as i8) * 1000)
                .to_string()
                .into_bytes(),
            1 => self.byte().to_string().into_bytes(),
            _ => {
                let n = usize::from(self.below(12));
                let n = n.min(self.0.len());
                let (v, rest) = self.0.split_at(n);
                self.0 = rest;
                v.to_vec()
            }
        }
    }

    fn small(&mut self) -> i64 {
        i64::from(self.byte() as i8)
    }
}

struct Entry {
    value: Vec<u8>,
    /// Deadline in Unix ms.
    at: Option<u64>,
    /// `Some` for a sorted set (then `value` is unused): member -> score.
    zset: Option<HashMap<Vec<u8>, f64>>,
}

/// The model: two databases (of the real sixteen) and the time.
struct Model {
    dbs: [HashMap<Vec<u8>, Entry>; 2],
    db: usize,
    now: u64,
}

impl Model {
    /// The live entry of `key` in database `db`, dropping it once its deadline has passed
    /// (alive at the deadline itself, as in Redis).
    fn live(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let now = self.now;
        if self.dbs[db]
            .get(key)
            .is_some_and(|e| e.at.is_some_and(|t| t < now))
        {
            self.dbs[db].remove(key);
        }
        self.dbs[db].get_mut(key)
    }

    /// Whether `key` holds a live sorted set in the current database.
    fn is_zset(&mut self, key: &[u8]) -> bool {
        let db = self.db;
        self.live(db, key).is_some_and(|e| e.zset.is_some())
    }

    fn exists(&mut self, key: &[u8]) -> bool {
        let db = self.db;
        self.live(db, key).is_some()
    }

    fn take(&mut self, db: usize, key: &[u8]) -> Option<Entry> {
        self.live(db, key)?;
        self.dbs[db].remove(key)
    }

    fn keys(&mut self) -> Vec<Vec<u8>> {
        let now = self.now;
        let mut keys: Vec<Vec<u8>> = self.dbs[self.db]
            .iter()
            .filter(|(_, e)| e.at.is_none_or(|t| t >= now))
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }
}

// Expected replies, RESP2.
fn ok() -> Vec<u8> {
    b"+OK\r\n".to_vec()
}
fn nil() -> Vec<u8> {
    b"$-1\r\n".to_vec()
}
fn int(i: i64) -> Vec<u8> {
    format!(":{i}\r\n").into_bytes()
}
fn bulk(b: &[u8]) -> Vec<u8> {
    let mut v = format!("${}\r\n", b.len()).into_bytes();
    v.extend_from_slice(b);
    v.extend_from_slice(b"\r\n");
    v
}
fn opt_bulk(b: Option<&[u8]>) -> Vec<u8> {
    b.map_or_else(nil, bulk)
}
fn err(msg: &str) -> Vec<u8> {
    format!("-{msg}\r\n").into_bytes()
}
fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", items.len()).into_bytes();
    for i in items {
        v.extend_from_slice(i);
    }
    v
}

/// Redis's strict integer reading (`string2ll`): only the canonical text of an `i64`.
fn strict_int(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let i: i64 = s.parse().ok()?;
    (i.to_string() == s).then_some(i)
}

fn wrongtype() -> Vec<u8> {
    err("WRONGTYPE Operation against a key holding the wrong kind of value")
}

fn w(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// One step: the command to send and the reply the model expects; `None` for steps that are
/// not commands (they act and check by themselves).
fn step(m: &mut Model, db: &mut Db, input: &mut Input<'_>) -> Option<(Vec<Vec<u8>>, Vec<u8>)> {
    let now = m.now;
    let cur = m.db;
    Some(match input.below(30) {
        0 | 1 => {
            let (key, value) = (input.key(), input.value());
            let mut args = vec![w("SET"), key.clone(), value.clone()];
            let cond = input.below(3);
            match cond {
                1 => args.push(w("NX")),
                2 => args.push(w("XX")),
                _ => {}
            }
            let get = input.below(3) == 0;
            if get {
                args.push(w("GET"));
            }
            let ttl = input.below(4);
            let secs = 1 + u64::from(input.below(10));
            match ttl {
                1 => args.extend([w("EX"), secs.to_string().into_bytes()]),
                2 => args.extend([w("PX"), (secs * 97).to_string().into_bytes()]),
                3 => args.push(w("KEEPTTL")),
                _ => {}
            }
            if get && m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let old = m.live(cur, &key).map(|e| (e.value.clone(), e.at));
            let allowed = match cond {
                1 => old.is_none(),
                2 => old.is_some(),
                _ => true,
            };
            if allowed {
                let at = match ttl {
                    1 => Some(now + secs * 1000),
                    2 => Some(now + secs * 97),
                    3 => old.as_ref().and_then(|o| o.1),
                    _ => None,
                };
                m.dbs[cur].insert(
                    key.clone(),
                    Entry {
                        value,
                        at,
                        zset: None,
                    },
                );
            }
            let reply = if get {
                opt_bulk(old.as_ref().map(|o| o.0.as_slice()))
            } else if allowed {
                ok()
            } else {
                nil()
            };
            (args, reply)
        }
        2 => {
            let key = input.key();
            let args = vec![w("GET"), key.clone()];
            if m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let reply = opt_bulk(m.live(cur, &key).map(|e| e.value.as_slice()));
            (args, reply)
        }
        3 | 4 => {
            let name = if input.below(2) == 0 { "DEL" } else { "EXISTS" };
            let keys: Vec<Vec<u8>> = (0..1 + input.below(3)).map(|_| input.key()).collect();
            let mut n = 0;
            for k in &keys {
                if name == "DEL" {
                    n += i64::from(m.take(cur, k).is_some());
                } else {
                    n += i64::from(m.exists(k));
                }
            }
            let mut args = vec![w(name)];
            args.extend(keys);
            (args, int(n))
        }
        5 => {
            let (key, by) = (input.key(), input.small());
            let args = vec![w("INCRBY"), key.clone(), by.to_string().into_bytes()];
            if m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let reply = match m.live(cur, &key) {
                None => {
                    m.dbs[cur].insert(
                        key,
                        Entry {
                            value: by.to_string().into_bytes(),
                            at: None,
                            zset: None,
                        },
                    );
                    int(by)
                }
                Some(e) => match strict_int(&e.value) {
                    None => err("ERR value is not an integer or out of range"),
                    Some(v) => match v.checked_add(by) {
                        None => err("ERR increment or decrement would overflow"),
                        Some(n) => {
                            e.value = n.to_string().into_bytes();
                            int(n)
                        }
                    },
                },
            };
            (args, reply)
        }
        6 => {
            let (key, tail) = (input.key(), input.value());
            let args = vec![w("APPEND"), key.clone(), tail.clone()];
            if m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let len = match m.live(cur, &key) {
                Some(e) => {
                    e.value.extend_from_slice(&tail);
                    e.value.len()
                }
                None => {
                    let len = tail.len();
                    m.dbs[cur].insert(
                        key,
                        Entry {
                            value: tail,
                            at: None,
                            zset: None,
                        },
                    );
                    len
                }
            };
            (args, int(len as i64))
        }
        7 => {
            let key = input.key();
            let args = vec![w("STRLEN"), key.clone()];
            if m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let len = m.live(cur, &key).map_or(0, |e| e.value.len());
            (args, int(len as i64))
        }
        8 => {
            let (key, start, end) = (input.key(), input.small() / 8, input.small() / 8);
            let args = vec![
                w("GETRANGE"),
                key.clone(),
                start.to_string().into_bytes(),
                end.to_string().into_bytes(),
            ];
            if m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let v = m
                .live(cur, &key)
                .map(|e| e.value.clone())
                .unwrap_or_default();
            let len = v.len() as i64;
            let reply = if start < 0 && end < 0 && start > end {
                bulk(b"")
            } else {
                let mut s = if start < 0 { len + start } else { start };
                let mut e = if end < 0 { len + end } else { end };
                s = s.max(0);
                e = e.max(0);
                if e >= len {
                    e = len - 1;
                }
                if s > e || len == 0 {
                    bulk(b"")
                } else {
                    bulk(&v[s as usize..=e as usize])
                }
            };
            (args, reply)
        }
        9 => {
            let (key, offset, bytes) = (input.key(), usize::from(input.below(24)), input.value());
            let args = vec![
                w("SETRANGE"),
                key.clone(),
                offset.to_string().into_bytes(),
                bytes.clone(),
            ];
            if m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let len = match m.live(cur, &key) {
                None if bytes.is_empty() => 0,
                None => {
                    let mut v = vec![0u8; offset];
                    v.extend_from_slice(&bytes);
                    let len = v.len();
                    m.dbs[cur].insert(
                        key,
                        Entry {
                            value: v,
                            at: None,
                            zset: None,
                        },
                    );
                    len
                }
                Some(e) => {
                    if !bytes.is_empty() {
                        let end = offset + bytes.len();
                        if e.value.len() < end {
                            e.value.resize(end, 0);
                        }
                        e.value[offset..end].copy_from_slice(&bytes);
                    }
                    e.value.len()
                }
            };
            (args, int(len as i64))
        }
        10 => {
            let key = input.key();
            let args = vec![w("GETDEL"), key.clone()];
            if m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let reply = opt_bulk(m.take(cur, &key).map(|e| e.value).as_deref());
            (args, reply)
        }
        11 => {
            let (key, value) = (input.key(), input.value());
            let args = vec![w("GETSET"), key.clone(), value.clone()];
            if m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let old = m.take(cur, &key).map(|e| e.value);
            m.dbs[cur].insert(
                key.clone(),
                Entry {
                    value: value.clone(),
                    at: None,
                    zset: None,
                },
            );
            (args, opt_bulk(old.as_deref()))
        }
        12 | 13 => {
            let key = input.key();
            let ms = input.below(2) == 0;
            // Mostly future deadlines; sometimes zero or negative (deletes the key).
            let amount = i64::from(input.byte() as i8);
            let flag = ["", "NX", "XX", "GT", "LT"][usize::from(input.below(5))];
            let mut args = vec![
                w(if ms { "PEXPIRE" } else { "EXPIRE" }),
                key.clone(),
                amount.to_string().into_bytes(),
            ];
            if !flag.is_empty() {
                args.push(w(flag));
            }
            let when = now as i64 + if ms { amount * 37 } else { amount * 1000 };
            if ms {
                args[2] = (amount * 37).to_string().into_bytes();
            }
            let reply = match m.live(cur, &key) {
                None => int(0),
                Some(e) => {
                    let current = e.at.map(|t| t as i64);
                    let refused = match flag {
                        "NX" => current.is_some(),
                        "XX" => current.is_none(),
                        "GT" => current.is_none_or(|c| when <= c),
                        "LT" => current.is_some_and(|c| when >= c),
                        _ => false,
                    };
                    if refused {
                        int(0)
                    } else if when <= now as i64 {
                        m.dbs[cur].remove(&key);
                        int(1)
                    } else {
                        e.at = Some(when as u64);
                        int(1)
                    }
                }
            };
            (args, reply)
        }
        14 => {
            let key = input.key();
            let reply = match m.live(cur, &key) {
                Some(e) if e.at.is_some() => {
                    e.at = None;
                    int(1)
                }
                _ => int(0),
            };
            (vec![w("PERSIST"), key], reply)
        }
        15 => {
            let (key, ms) = (input.key(), input.below(2) == 0);
            let reply = match m.live(cur, &key) {
                None => int(-2),
                Some(Entry { at: None, .. }) => int(-1),
                Some(Entry { at: Some(t), .. }) => {
                    let left = (*t - now) as i64;
                    int(if ms { left } else { (left + 500) / 1000 })
                }
            };
            (vec![w(if ms { "PTTL" } else { "TTL" }), key], reply)
        }
        16 => {
            let (src, dst, nx) = (input.key(), input.key(), input.below(2) == 0);
            let args = vec![
                w(if nx { "RENAMENX" } else { "RENAME" }),
                src.clone(),
                dst.clone(),
            ];
            let reply = if !m.exists(&src) {
                err("ERR no such key")
            } else if src == dst {
                if nx {
                    int(0)
                } else {
                    ok()
                }
            } else if nx && m.exists(&dst) {
                int(0)
            } else {
                let e = m.take(cur, &src).expect("checked live");
                m.dbs[cur].insert(dst, e);
                if nx {
                    int(1)
                } else {
                    ok()
                }
            };
            (args, reply)
        }
        17 => {
            let (src, dst, replace) = (input.key(), input.key(), input.below(2) == 0);
            let mut args = vec![w("COPY"), src.clone(), dst.clone()];
            if replace {
                args.push(w("REPLACE"));
            }
            let reply = if src == dst {
                err("ERR source and destination objects are the same")
            } else if !m.exists(&src) || (!replace && m.exists(&dst)) {
                int(0)
            } else {
                let e = m.live(cur, &src).expect("checked live");
                let copy = Entry {
                    value: e.value.clone(),
                    at: e.at,
                    zset: e.zset.clone(),
                };
                m.dbs[cur].insert(dst, copy);
                int(1)
            };
            (args, reply)
        }
        18 | 19 => {
            // Move the clock: a little, a lot, or exactly onto the nearest deadline.
            let advance = match input.below(4) {
                0 => u64::from(input.byte()) * 20,
                1 => {
                    let next = m.dbs[cur]
                        .values()
                        .filter_map(|e| e.at)
                        .filter(|&t| t >= now);
                    next.min().map_or(0, |t| t - now)
                }
                2 => 1,
                _ => u64::from(input.byte()),
            };
            m.now += advance;
            db.clock_mut().advance(advance);
            db.refresh_clock();
            return None;
        }
        20 => (
            vec![w("KEYS"), w("*")],
            array(&m.keys().iter().map(|k| bulk(k)).collect::<Vec<_>>()),
        ),
        21 => {
            // Active expiry: deletes only keys the model already treats as gone.
            db.cron(Duration::from_millis(5));
            return None;
        }
        22 => {
            m.db = usize::from(input.below(2));
            (vec![w("SELECT"), m.db.to_string().into_bytes()], ok())
        }
        23 => {
            let (key, to) = (input.key(), usize::from(input.below(2)));
            let args = vec![w("MOVE"), key.clone(), to.to_string().into_bytes()];
            let reply = if to == cur {
                err("ERR source and destination objects are the same")
            } else if !m.exists(&key) || m.live(to, &key).is_some() {
                int(0)
            } else {
                let e = m.take(cur, &key).expect("checked live");
                m.dbs[to].insert(key, e);
                int(1)
            };
            (args, reply)
        }
        24 => {
            let mut args = vec![w("MSET")];
            for _ in 0..1 + input.below(3) {
                let (k, v) = (input.key(), input.value());
                args.extend([k.clone(), v.clone()]);
                m.dbs[cur].insert(
                    k,
                    Entry {
                        value: v,
                        at: None,
                        zset: None,
                    },
                );
            }
            (args, ok())
        }
        25 => {
            let keys: Vec<Vec<u8>> = (0..1 + input.below(4)).map(|_| input.key()).collect();
            let items: Vec<Vec<u8>> = keys
                .iter()
                .map(|k| match m.live(cur, k) {
                    Some(e) if e.zset.is_none() => bulk(&e.value),
                    _ => nil(),
                })
                .collect();
            let mut args = vec![w("MGET")];
            args.extend(keys);
            (args, array(&items))
        }
        26 => {
            if input.below(8) != 0 {
                return None; // rare: it empties the model
            }
            m.dbs[cur].clear();
            (vec![w("FLUSHDB")], ok())
        }
        27 => {
            let (key, secs, value) = (input.key(), 1 + u64::from(input.below(5)), input.value());
            m.dbs[cur].insert(
                key.clone(),
                Entry {
                    value: value.clone(),
                    at: Some(now + secs * 1000),
                    zset: None,
                },
            );
            (
                vec![w("SETEX"), key, secs.to_string().into_bytes(), value],
                ok(),
            )
        }
        28 => {
            let (key, how) = (input.key(), input.below(3));
            let mut args = vec![w("GETEX"), key.clone()];
            match how {
                1 => args.push(w("PERSIST")),
                2 => args.extend([w("PX"), w("1500")]),
                _ => {}
            }
            if m.is_zset(&key) {
                return Some((args, wrongtype()));
            }
            let reply = match m.live(cur, &key) {
                None => nil(),
                Some(e) => {
                    match how {
                        1 => e.at = None,
                        2 => e.at = Some(now + 1500),
                        _ => {}
                    }
                    bulk(&e.value)
                }
            };
            (args, reply)
        }
        _ if input.below(4) != 0 => return Some(zset_step(m, input)),
        _ => {
            // The typed API, on database 0 (the embedded session's).
            let (key, value) = (input.key(), input.value());
            if input.below(2) == 0 {
                db.set(&key, &value).expect("strings only");
                m.dbs[0].insert(
                    key,
                    Entry {
                        value,
                        at: None,
                        zset: None,
                    },
                );
            } else {
                let got = db.get(&key);
                match m.live(0, &key) {
                    Some(e) if e.zset.is_some() => assert!(got.is_err(), "typed get of a zset"),
                    e => assert_eq!(
                        got.expect("a string"),
                        e.map(|e| e.value.clone()),
                        "typed get of {key:?}"
                    ),
                }
            }
            return None;
        }
    })
}

/// Scores the sorted-set steps use, with the text Redis replies for each.
const ZSCORES: [(&str, f64); 8] = [
    ("-2", -2.0),
    ("-1", -1.0),
    ("0", 0.0),
    ("1", 1.0),
    ("2", 2.0),
    ("3", 3.0),
    ("1.5", 1.5),
    ("-0.5", -0.5),
];

/// The reply text of a score: the steps only make small multiples of 0.5 (never `-0`), which
/// Redis and Rust's `Display` both write as the shortest decimal.
fn score_text(s: f64) -> Vec<u8> {
    debug_assert!(s.abs() < 1e15 && (s * 2.0).fract() == 0.0 && s.to_bits() != (-0.0f64).to_bits());
    s.to_string().into_bytes()
}

fn zmember(input: &mut Input<'_>) -> Vec<u8> {
    format!("m{}", input.below(5)).into_bytes()
}

/// One sorted-set step (ZADD, ZINCRBY, ZREM, ZSCORE, ZCARD, ZRANGE) or TYPE, on the current database:
/// the command and the reply the model expects. Any of them on a string is WRONGTYPE.
fn zset_step(m: &mut Model, input: &mut Input<'_>) -> (Vec<Vec<u8>>, Vec<u8>) {
    let cur = m.db;
    let key = input.key();
    let kind = m.live(cur, &key).map(|e| e.zset.is_some());
    let holds_string = kind == Some(false);
    match input.below(7) {
        0 => {
            let (text, by) = ZSCORES[usize::from(input.below(8))];
            let member = zmember(input);
            let args = vec![w("ZINCRBY"), key.clone(), w(text), member.clone()];
            if holds_string {
                return (args, wrongtype());
            }
            let e = m.dbs[cur].entry(key).or_insert_with(|| Entry {
                value: Vec::new(),
                at: None,
                zset: Some(HashMap::new()),
            });
            let score = e
                .zset
                .as_mut()
                .expect("a zset")
                .entry(member)
                .or_insert(0.0);
            *score += by;
            (args, bulk(&score_text(*score)))
        }
        1 => {
            let mut args = vec![w("ZADD"), key.clone()];
            let mut pairs = Vec::new();
            for _ in 0..1 + input.below(3) {
                let (text, score) = ZSCORES[usize::from(input.below(8))];
                let member = zmember(input);
                args.extend([w(text), member.clone()]);
                pairs.push((member, score));
            }
            if holds_string {
                return (args, wrongtype());
            }
            let e = m.dbs[cur].entry(key).or_insert_with(|| Entry {
                value: Vec::new(),
                at: None,
                zset: Some(HashMap::new()),
            });
            let z = e.zset.as_mut().expect("a zset");
            let added = pairs
                .into_iter()
                .filter(|(member, score)| z.insert(member.clone(), *score).is_none())
                .count();
            (args, int(added as i64))
        }
        2 => {
            let mut args = vec![w("ZREM"), key.clone()];
            let members: Vec<Vec<u8>> = (0..1 + input.below(3)).map(|_| zmember(input)).collect();
            args.extend(members.iter().cloned());
            if holds_string {
                return (args, wrongtype());
            }
            let Some(z) = m.live(cur, &key).and_then(|e| e.zset.as_mut()) else {
                return (args, int(0));
            };
            let removed = members.iter().filter(|x| z.remove(*x).is_some()).count();
            if z.is_empty() {
                m.dbs[cur].remove(&key);
            }
            (args, int(removed as i64))
        }
        3 => {
            let member = zmember(input);
            let args = vec![w("ZSCORE"), key.clone(), member.clone()];
            if holds_string {
                return (args, wrongtype());
            }
            let score = m
                .live(cur, &key)
                .and_then(|e| e.zset.as_ref()?.get(&member).copied());
            (args, score.map_or_else(nil, |s| bulk(&score_text(s))))
        }
        4 => {
            let args = vec![w("ZCARD"), key.clone()];
            if holds_string {
                return (args, wrongtype());
            }
            let n = m
                .live(cur, &key)
                .and_then(|e| e.zset.as_ref())
                .map_or(0, HashMap::len);
            (args, int(n as i64))
        }
        5 => {
            let (start, stop) = (input.small() % 5, input.small() % 5);
            let scores = input.below(2) == 0;
            let mut args = vec![
                w("ZRANGE"),
                key.clone(),
                start.to_string().into_bytes(),
                stop.to_string().into_bytes(),
            ];
            if scores {
                args.push(w("WITHSCORES"));
            }
            if holds_string {
                return (args, wrongtype());
            }
            let mut all: Vec<(f64, Vec<u8>)> = m
                .live(cur, &key)
                .and_then(|e| e.zset.as_ref())
                .map(|z| z.iter().map(|(k, s)| (*s, k.clone())).collect())
                .unwrap_or_default();
            all.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
            let len = all.len() as i64;
            let mut s = if start < 0 { start + len } else { start };
            let mut e = if stop < 0 { stop + len } else { stop };
            s = s.max(0);
            e = e.min(len - 1);
            let mut items = Vec::new();
            if s <= e && s < len {
                for (score, member) in &all[s as usize..=e as usize] {
                    items.push(bulk(member));
                    if scores {
                        items.push(bulk(&score_text(*score)));
                    }
                }
            }
            (args, array(&items))
        }
        _ => {
            let reply = match kind {
                None => b"+none\r\n".to_vec(),
                Some(false) => b"+string\r\n".to_vec(),
                Some(true) => b"+zset\r\n".to_vec(),
            };
            (vec![w("TYPE"), key], reply)
        }
    }
}

/// Runs the operations `data` decodes to against a fresh `Db` and the model, panicking at
/// the first reply that differs. At most 300 operations.
pub fn check_ops(data: &[u8]) {
    let start = 1_700_000_000_000;
    let mut db = Db::new();
    db.set_clock(Clock::Manual(start));
    let mut session = Session::default();
    let mut m = Model {
        dbs: [HashMap::new(), HashMap::new()],
        db: 0,
        now: start,
    };
    let mut input = Input(data);
    let mut trail: Vec<String> = Vec::new();
    for _ in 0..300 {
        if input.0.is_empty() {
            break;
        }
        let Some((args, want)) = step(&mut m, &mut db, &mut input) else {
            trail.push(format!("(clock {} / cron / typed)", m.now - start));
            continue;
        };
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let mut out = Vec::new();
        db.dispatch(&mut session, &refs, &mut out);
        let show: Vec<String> = args
            .iter()
            .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
            .collect();
        trail.push(show.join(" "));
        if args[0] == b"KEYS" {
            out = sort_array(&out);
        }
        assert!(
            out == want,
            "step {}: {}\n  got  {:?}\n  want {:?}\nsequence:\n  {}",
            trail.len(),
            show.join(" "),
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&want),
            trail.join("\n  ")
        );
    }
}

/// KEYS replies in table order; the model's are sorted.
fn sort_array(reply: &[u8]) -> Vec<u8> {
    use kvcore::Reply;
    match kvcore::resp::parse_reply(reply) {
        Ok(Some((Reply::Array(items), _))) => {
            let mut keys: Vec<Vec<u8>> = items
                .into_iter()
                .map(|i| match i {
                    Reply::Bulk(b) => b,
                    other => panic!("KEYS item {other:?}"),
                })
                .collect();
            keys.sort();
            array(&keys.iter().map(|k| bulk(k)).collect::<Vec<_>>())
        }
        _ => reply.to_vec(),
    }
}
