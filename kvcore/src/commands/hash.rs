//! Hash commands.
//!
//! Handlers check arguments and types in Redis's order. Replies that list fields give them
//! in the encoding's order (a listpack's insertion order, a table's bucket order), as Redis
//! does. A hash emptied by HDEL is deleted.

use super::strings::reply_err;
use super::{args, cmd, flags::*, wrong_arity, CommandSpec, Ctx};
use crate::error::{OpError, OpResult};
use crate::hash::{Hash, Limits};
use crate::keyspace::Ttl;
use crate::resp::long_double::{LongDouble, Operand};
use crate::resp::{Proto, ReplyWriter};
use crate::value::Value;
use crate::Db;

pub(in crate::commands) static COMMANDS: &[CommandSpec] = &[
    cmd!("hset", -4, WRITE | DENYOOM | FAST, 1, 1, 1, hset),
    cmd!("hmset", -4, WRITE | DENYOOM | FAST, 1, 1, 1, hmset),
    cmd!("hsetnx", 4, WRITE | DENYOOM | FAST, 1, 1, 1, hsetnx),
    cmd!("hget", 3, READONLY | FAST, 1, 1, 1, hget),
    cmd!("hmget", -3, READONLY | FAST, 1, 1, 1, hmget),
    cmd!("hdel", -3, WRITE | FAST, 1, 1, 1, hdel),
    cmd!("hlen", 2, READONLY | FAST, 1, 1, 1, hlen),
    cmd!("hstrlen", 3, READONLY | FAST, 1, 1, 1, hstrlen),
    cmd!("hexists", 3, READONLY | FAST, 1, 1, 1, hexists),
    cmd!("hincrby", 4, WRITE | DENYOOM | FAST, 1, 1, 1, hincrby),
    cmd!(
        "hincrbyfloat",
        4,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        hincrbyfloat
    ),
    cmd!("hkeys", 2, READONLY, 1, 1, 1, hkeys),
    cmd!("hvals", 2, READONLY, 1, 1, 1, hvals),
    cmd!("hgetall", 2, READONLY, 1, 1, 1, hgetall),
    cmd!("hrandfield", -2, READONLY, 1, 1, 1, hrandfield),
    cmd!("hscan", -3, READONLY, 1, 1, 1, hscan),
];

/// The encoding limits from the configuration.
pub(crate) fn limits(db: &Db) -> Limits {
    Limits {
        max_entries: db.config.hash_max_listpack_entries,
        max_value: db.config.hash_max_listpack_value,
    }
}

/// The hash at `key`: `Ok(None)` when missing, WRONGTYPE for another type.
pub(crate) fn get_hash<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a Hash>> {
    let now = db.now;
    match db.dbs[dbi].get(key, now) {
        None => Ok(None),
        Some(n) => match &n.value {
            Value::Hash(h) => Ok(Some(h)),
            _ => Err(OpError::WrongType),
        },
    }
}

/// The hash at `key`, created empty when missing (the caller writes to it at once).
fn hash_or_new<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<&'a mut Hash> {
    let now = db.now;
    if db.dbs[dbi].get(key, now).is_none() {
        db.dbs[dbi].set(key, Value::Hash(Hash::default()), Ttl::Clear, now);
    }
    match db.dbs[dbi].get_mut(key, now) {
        Some(Value::Hash(h)) => Ok(h),
        _ => Err(OpError::WrongType),
    }
}

impl Db {
    /// HSET: sets each `(field, value)` of `pairs` in the hash at `key`; returns how many
    /// fields were new.
    pub fn hash_set(&mut self, dbi: usize, key: &[u8], pairs: &[&[u8]]) -> OpResult<usize> {
        let limits = limits(self);
        // The type first: a wrong type creates nothing.
        get_hash(self, dbi, key)?;
        let h = hash_or_new(self, dbi, key)?;
        Ok(h.set_many(limits, pairs))
    }

    /// HDEL: removes `fields`; returns how many were there. An emptied hash is deleted.
    pub fn hash_del(&mut self, dbi: usize, key: &[u8], fields: &[&[u8]]) -> OpResult<usize> {
        let now = self.now;
        let n = match self.dbs[dbi].get_mut(key, now) {
            None => return Ok(0),
            Some(Value::Hash(h)) => fields.iter().filter(|f| h.remove(f)).count(),
            Some(_) => return Err(OpError::WrongType),
        };
        if matches!(self.dbs[dbi].get(key, now), Some(n) if matches!(&n.value, Value::Hash(h) if h.is_empty()))
        {
            self.dbs[dbi].remove(key, now);
        }
        Ok(n)
    }

    /// HGET: the value of `field`.
    pub fn hash_get(&mut self, dbi: usize, key: &[u8], field: &[u8]) -> OpResult<Option<Vec<u8>>> {
        Ok(get_hash(self, dbi, key)?.and_then(|h| h.get(field)))
    }
}

fn hset(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if a.len() % 2 == 1 {
        return wrong_arity(&mut c.out, "hset");
    }
    match c.db.hash_set(c.session.db, a[1], &a[2..]) {
        Ok(n) => c.out.int(n as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hmset(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if a.len() % 2 == 1 {
        return wrong_arity(&mut c.out, "hmset");
    }
    match c.db.hash_set(c.session.db, a[1], &a[2..]) {
        Ok(_) => c.out.ok(),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hsetnx(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let dbi = c.session.db;
    match get_hash(c.db, dbi, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(Some(h)) if h.contains(a[2]) => return c.out.int(0),
        Ok(_) => {}
    }
    match c.db.hash_set(dbi, a[1], &a[2..4]) {
        Ok(n) => c.out.int(n as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hget(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match get_hash(c.db, c.session.db, a[1]) {
        Err(e) => reply_err(&mut c.out, e),
        Ok(h) => {
            let out = &mut c.out;
            if h.and_then(|h| h.with(a[2], |v| out.bulk(v))).is_none() {
                out.null();
            }
        }
    }
}

fn hmget(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let h = match get_hash(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(h) => h,
    };
    c.out.array_len(a.len() - 2);
    for f in &a[2..] {
        let out = &mut c.out;
        if h.and_then(|h| h.with(f, |v| out.bulk(v))).is_none() {
            out.null();
        }
    }
}

fn hdel(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match c.db.hash_del(c.session.db, a[1], &a[2..]) {
        Ok(n) => c.out.int(n as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hlen(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match get_hash(c.db, c.session.db, a[1]) {
        Ok(h) => c.out.int(h.map_or(0, Hash::len) as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hstrlen(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match get_hash(c.db, c.session.db, a[1]) {
        Ok(h) => c
            .out
            .int(h.and_then(|h| h.with(a[2], <[u8]>::len)).unwrap_or(0) as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hexists(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match get_hash(c.db, c.session.db, a[1]) {
        Ok(h) => c.out.int(i64::from(h.is_some_and(|h| h.contains(a[2])))),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hincrby(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let by = match args::int(a[3]) {
        Ok(n) => n,
        Err(e) => return reply_err(&mut c.out, e),
    };
    let dbi = c.session.db;
    let cur = match get_hash(c.db, dbi, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(h) => h.and_then(|h| h.get(a[2])),
    };
    let cur = match cur {
        None => 0,
        Some(v) => match crate::num::parse_i64(&v) {
            Some(n) => n,
            None => return c.out.error(b"ERR hash value is not an integer"),
        },
    };
    let Some(new) = cur.checked_add(by) else {
        return reply_err(&mut c.out, OpError::Overflow);
    };
    let text = itoa::Buffer::new().format(new).as_bytes().to_vec();
    match c.db.hash_set(dbi, a[1], &[a[2], &text]) {
        Ok(_) => c.out.int(new),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hincrbyfloat(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let by = match LongDouble::parse(a[3]) {
        None => return reply_err(&mut c.out, OpError::NotFloat),
        Some(Operand::Infinite) => return c.out.error(b"ERR value is NaN or Infinity"),
        Some(Operand::Finite(b)) => b,
    };
    let dbi = c.session.db;
    let cur = match get_hash(c.db, dbi, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(h) => h.and_then(|h| h.get(a[2])),
    };
    let cur = match cur {
        None => Operand::Finite(LongDouble::ZERO),
        Some(v) => match LongDouble::parse(&v) {
            Some(x) => x,
            None => return c.out.error(b"ERR hash value is not a float"),
        },
    };
    let sum = match cur {
        Operand::Finite(x) => x.checked_add(by),
        Operand::Infinite => None,
    };
    let Some(sum) = sum else {
        return reply_err(&mut c.out, OpError::NanOrInfinity);
    };
    let text = sum.to_human();
    match c.db.hash_set(dbi, a[1], &[a[2], &text]) {
        Ok(_) => c.out.bulk(&text),
        Err(e) => reply_err(&mut c.out, e),
    }
}

/// What HKEYS, HVALS and HGETALL list.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    Fields,
    Values,
    Both,
}

fn list_parts(c: &mut Ctx<'_>, a: &[&[u8]], part: Part) {
    let h = match get_hash(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(h) => h,
    };
    let n = h.map_or(0, Hash::len);
    if part == Part::Both {
        c.out.map_len(n);
    } else {
        c.out.array_len(n);
    }
    if let Some(h) = h {
        let out = &mut c.out;
        h.for_each(|f, v| {
            if part != Part::Values {
                out.bulk(f);
            }
            if part != Part::Fields {
                out.bulk(v);
            }
        });
    }
}

fn hkeys(c: &mut Ctx<'_>, a: &[&[u8]]) {
    list_parts(c, a, Part::Fields);
}

fn hvals(c: &mut Ctx<'_>, a: &[&[u8]]) {
    list_parts(c, a, Part::Values);
}

fn hgetall(c: &mut Ctx<'_>, a: &[&[u8]]) {
    list_parts(c, a, Part::Both);
}

/// Writes one HRANDFIELD pick: the field, and the value WITHVALUES (a pair in RESP3).
fn write_pick(out: &mut ReplyWriter<'_>, f: &[u8], v: &[u8], withvalues: bool) {
    if withvalues && out.proto == Proto::Resp3 {
        out.array_len(2);
    }
    out.bulk(f);
    if withvalues {
        out.bulk(v);
    }
}

fn hrandfield(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let mut count = None;
    let mut withvalues = false;
    if a.len() >= 3 {
        let n = match args::int(a[2]) {
            Ok(i64::MIN) => return c.out.error(
                b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ),
            Ok(n) => n,
            Err(e) => return reply_err(&mut c.out, e),
        };
        if a.len() > 4 || (a.len() == 4 && !args::is(a[3], "WITHVALUES")) {
            return reply_err(&mut c.out, OpError::Syntax);
        }
        withvalues = a.len() == 4;
        if withvalues && n.unsigned_abs() > (i64::MAX as u64) / 2 {
            return reply_err(&mut c.out, OpError::OutOfRange);
        }
        count = Some(n);
    }
    let seed = c.db.random();
    let h = match get_hash(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(h) => h,
    };
    let Some(h) = h else {
        return match count {
            None => c.out.null(),
            Some(_) => c.out.array_len(0),
        };
    };
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let Some(count) = count else {
        let (f, _) = h.random(next()).unwrap_or_default();
        return c.out.bulk(&f);
    };
    if count == 0 {
        return c.out.array_len(0);
    }
    let flat = withvalues && c.out.proto != Proto::Resp3;
    let len = h.len();
    let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    if count < 0 || n == 1 {
        c.out.array_len(if flat { n.saturating_mul(2) } else { n });
        for _ in 0..n {
            let (f, v) = h.random(next()).unwrap_or_default();
            write_pick(&mut c.out, &f, &v, withvalues);
        }
        return;
    }
    let all = h.to_vec();
    let picked: Vec<usize> = if n >= len {
        (0..len).collect()
    } else {
        // Distinct picks: a partial Fisher-Yates shuffle over indexes.
        let mut idx: Vec<usize> = (0..len).collect();
        for i in 0..n {
            let j = i + (next() % (len - i) as u64) as usize;
            idx.swap(i, j);
        }
        idx.truncate(n);
        idx
    };
    c.out
        .array_len(if flat { picked.len() * 2 } else { picked.len() });
    for i in picked {
        write_pick(&mut c.out, &all[i].0, &all[i].1, withvalues);
    }
}

fn hscan(c: &mut Ctx<'_>, a: &[&[u8]]) {
    // As Redis: the cursor first, then the key (a missing key answers an empty scan whatever
    // the options), then the options; NOVALUES (Redis 7.4) may stand among them.
    if let Err(m) = super::keys_api::parse_scan(&a[1..3]) {
        return c.out.error(m);
    }
    let h = match get_hash(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(h) => h,
    };
    let Some(h) = h else {
        c.out.array_len(2);
        c.out.bulk(b"0");
        return c.out.array_len(0);
    };
    let mut opts: Vec<&[u8]> = Vec::with_capacity(a.len());
    let mut novalues = false;
    let mut i = 0;
    while i < a.len() {
        // Option words sit at even offsets from 3 (MATCH p, COUNT n); NOVALUES takes none.
        if i >= 3 && args::is(a[i], "NOVALUES") {
            novalues = true;
        } else {
            opts.push(a[i]);
            if i >= 3 && i + 1 < a.len() {
                opts.push(a[i + 1]);
                i += 1;
            }
        }
        i += 1;
    }
    let s = match super::keys_api::parse_scan(&opts[1..]) {
        Ok(s) => s,
        Err(m) => return c.out.error(m),
    };
    if s.ty.is_some() {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let next = h.scan(s.cursor, s.count, |f, v| {
        if s.pattern.is_none_or(|p| crate::glob::matches(p, f, false)) {
            found.push((f.to_vec(), if novalues { Vec::new() } else { v.to_vec() }));
        }
    });
    c.out.array_len(2);
    c.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    c.out.array_len(if novalues {
        found.len()
    } else {
        found.len() * 2
    });
    for (f, v) in &found {
        c.out.bulk(f);
        if !novalues {
            c.out.bulk(v);
        }
    }
}
