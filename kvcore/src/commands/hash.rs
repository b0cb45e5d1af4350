//! Hash commands.
//!
//! Handlers check arguments and types in Redis's order. Replies that list fields give them
//! in the encoding's order (a listpack's insertion order, a table's bucket order), as Redis
//! does. A hash emptied by HDEL is deleted.

use super::strings::reply_err;
use super::{args, cmd, flags::*, wrong_arity, CommandSpec, Ctx};
use crate::error::{OpError, OpResult};
use crate::events::class;
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
    cmd!("hexpire", -6, WRITE | DENYOOM | FAST, 1, 1, 1, hexpire),
    cmd!("hpexpire", -6, WRITE | DENYOOM | FAST, 1, 1, 1, hpexpire),
    cmd!("hexpireat", -6, WRITE | DENYOOM | FAST, 1, 1, 1, hexpireat),
    cmd!(
        "hpexpireat",
        -6,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        hpexpireat
    ),
    cmd!("httl", -5, READONLY | FAST, 1, 1, 1, httl),
    cmd!("hpttl", -5, READONLY | FAST, 1, 1, 1, hpttl),
    cmd!("hexpiretime", -5, READONLY | FAST, 1, 1, 1, hexpiretime),
    cmd!("hpexpiretime", -5, READONLY | FAST, 1, 1, 1, hpexpiretime),
    cmd!("hpersist", -5, WRITE | FAST, 1, 1, 1, hpersist),
];

/// The encoding limits from the configuration.
pub(crate) fn limits(db: &Db) -> Limits {
    Limits {
        max_entries: db.config.hash_max_listpack_entries,
        max_value: db.config.hash_max_listpack_value,
    }
}

/// Removes the expired fields of the hash at `key` (and the key, when that empties it) before
/// a command uses it, and remembers a hash with deadlines for the active cycle. Costs one
/// atomic load until some field of the process has had a deadline.
fn purge_fields(db: &mut Db, dbi: usize, key: &[u8]) {
    if !crate::hash::field_ttls_used() {
        return;
    }
    let now = db.now;
    let (purged, emptied, has_ttls) = match db.dbs[dbi].get_mut(key, now) {
        Some(Value::Hash(h)) if h.has_ttls() => {
            let before = h.len();
            h.purge(now);
            (before - h.len(), h.is_empty(), h.has_ttls())
        }
        _ => return,
    };
    if purged > 0 {
        // One `hexpired` for the key, `del` when it emptied (Redis's field expiry).
        db.notify(class::HASH, "hexpired", dbi, key);
    }
    if emptied {
        db.dbs[dbi].remove(key, now);
        db.notify(class::GENERIC, "del", dbi, key);
    } else if has_ttls && !db.hash_ttl_keys[dbi].contains(key) {
        db.hash_ttl_keys[dbi].insert(key.into());
    }
    if purged > 0 {
        db.signal_modified(dbi, key);
    }
}

/// [`get_hash`] for a read command: a missing key is a `keymiss`.
fn read_hash<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a Hash>> {
    if matches!(get_hash(db, dbi, key), Ok(None)) {
        db.key_miss(dbi, key);
        return Ok(None);
    }
    get_hash(db, dbi, key)
}

/// The hash at `key`: `Ok(None)` when missing, WRONGTYPE for another type.
pub(crate) fn get_hash<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a Hash>> {
    purge_fields(db, dbi, key);
    let now = db.now;
    match db.dbs[dbi].get(key, now) {
        None => Ok(None),
        Some(n) => match n.obj() {
            Some(Value::Hash(h)) => Ok(Some(h)),
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
        let n = self.hash_set_quiet(dbi, key, pairs)?;
        self.modified(class::HASH, "hset", dbi, key);
        Ok(n)
    }

    /// [`Db::hash_set`] without its event (HINCRBY raises its own).
    fn hash_set_quiet(&mut self, dbi: usize, key: &[u8], pairs: &[&[u8]]) -> OpResult<usize> {
        let limits = limits(self);
        // The type first: a wrong type creates nothing.
        get_hash(self, dbi, key)?;
        let h = hash_or_new(self, dbi, key)?;
        Ok(h.set_many(limits, pairs))
    }

    /// HDEL: removes `fields`; returns how many were there. An emptied hash is deleted.
    pub fn hash_del(&mut self, dbi: usize, key: &[u8], fields: &[&[u8]]) -> OpResult<usize> {
        purge_fields(self, dbi, key);
        let now = self.now;
        let n = match self.dbs[dbi].get_mut(key, now) {
            None => return Ok(0),
            Some(Value::Hash(h)) => fields.iter().filter(|f| h.remove(f)).count(),
            Some(_) => return Err(OpError::WrongType),
        };
        if n == 0 {
            return Ok(0);
        }
        self.notify(class::HASH, "hdel", dbi, key);
        if matches!(self.dbs[dbi].get(key, now), Some(n) if matches!(n.obj(), Some(Value::Hash(h)) if h.is_empty()))
        {
            self.dbs[dbi].remove(key, now);
            self.notify(class::GENERIC, "del", dbi, key);
        }
        self.signal_modified(dbi, key);
        Ok(n)
    }

    /// The active cycle's share for hash fields: purges up to `max` of the hashes known to
    /// hold field deadlines, in each database; forgets names that no longer hold one.
    pub(crate) fn purge_hash_fields(&mut self, max: usize) {
        if !crate::hash::field_ttls_used() {
            return;
        }
        for dbi in 0..self.dbs.len() {
            let keys: Vec<Box<[u8]>> = self.hash_ttl_keys[dbi].iter().take(max).cloned().collect();
            for k in keys {
                purge_fields(self, dbi, &k);
                let now = self.now;
                let keep = matches!(
                    self.dbs[dbi].get(&k, now).and_then(|n| n.obj()),
                    Some(Value::Hash(h)) if h.has_ttls()
                );
                if !keep {
                    self.hash_ttl_keys[dbi].remove(&k);
                }
            }
        }
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
    match read_hash(c.db, c.session.db, a[1]) {
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
    let h = match read_hash(c.db, c.session.db, a[1]) {
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
    match read_hash(c.db, c.session.db, a[1]) {
        Ok(h) => c.out.int(h.map_or(0, Hash::len) as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hstrlen(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match read_hash(c.db, c.session.db, a[1]) {
        Ok(h) => c
            .out
            .int(h.and_then(|h| h.with(a[2], <[u8]>::len)).unwrap_or(0) as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn hexists(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match read_hash(c.db, c.session.db, a[1]) {
        Ok(h) => c.out.int(i64::from(h.is_some_and(|h| h.contains(a[2])))),
        Err(e) => reply_err(&mut c.out, e),
    }
}

/// Sets one field as HINCRBY does: its deadline, if any, stays (HSET would clear it).
fn set_keeping_deadline(
    db: &mut Db,
    dbi: usize,
    key: &[u8],
    field: &[u8],
    value: &[u8],
) -> OpResult<()> {
    let kept = get_hash(db, dbi, key)?
        .and_then(|h| h.field_deadline(field))
        .flatten();
    db.hash_set_quiet(dbi, key, &[field, value])?;
    if let Some(at) = kept {
        let now = db.now;
        if let Some(Value::Hash(h)) = db.dbs[dbi].get_mut(key, now) {
            h.set_field_deadline(field, Some(at));
        }
    }
    Ok(())
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
    match set_keeping_deadline(c.db, dbi, a[1], a[2], &text) {
        Ok(_) => {
            c.out.int(new);
            c.db.modified(class::HASH, "hincrby", dbi, a[1]);
        }
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
    match set_keeping_deadline(c.db, dbi, a[1], a[2], &text) {
        Ok(_) => {
            c.out.bulk(&text);
            c.db.modified(class::HASH, "hincrbyfloat", dbi, a[1]);
        }
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
    let h = match read_hash(c.db, c.session.db, a[1]) {
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
            Ok(i64::MIN) => return c.out.error(args::NOT_NEGATABLE),
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
    let h = match read_hash(c.db, c.session.db, a[1]) {
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
    let h = match read_hash(c.db, c.session.db, a[1]) {
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

// ---------------------------------------------------------------------------------------------
// Field expiry (Redis 7.4): HEXPIRE HPEXPIRE HEXPIREAT HPEXPIREAT, HTTL HPTTL HEXPIRETIME
// HPEXPIRETIME, HPERSIST
// ---------------------------------------------------------------------------------------------

/// The largest deadline a field may get (Redis's `HFE_MAX_ABS_TIME_MSEC`).
const MAX_DEADLINE_MS: i64 = 0x0000_FFFF_FFFF_FFFF >> 2;

/// `FIELDS numfields field...` from `a[at - 1]`: the fields, or Redis's error line.
fn fields_at<'a, 'b>(
    a: &'a [&'b [u8]],
    at: usize,
    count_error: &'static [u8],
) -> Result<&'a [&'b [u8]], &'static [u8]> {
    if !a.get(at - 1).is_some_and(|w| args::is(w, "FIELDS")) {
        return Err(b"ERR Mandatory argument FIELDS is missing or not at the right position");
    }
    let n = match a.get(at).map(|n| args::int(n)) {
        Some(Ok(n)) if n >= 1 => n,
        _ => return Err(count_error),
    };
    if n != (a.len() - at - 1) as i64 {
        return Err(b"ERR The `numfields` parameter must match the number of arguments");
    }
    Ok(&a[at + 1..])
}

/// HEXPIRE and its forms: `relative` adds the clock, `ms` reads milliseconds.
fn hexpire_generic(c: &mut Ctx<'_>, a: &[&[u8]], relative: bool, ms: bool) {
    let dbi = c.session.db;
    if let Err(e) = get_hash(c.db, dbi, a[1]) {
        return reply_err(&mut c.out, e);
    }
    let mut at = match args::int(a[2]) {
        Ok(n) => n,
        Err(e) => return reply_err(&mut c.out, e),
    };
    if at < 0 {
        return c.out.error(b"ERR invalid expire time, must be >= 0");
    }
    let name = a[0].to_ascii_lowercase();
    let bad_time = |c: &mut Ctx<'_>| {
        let mut m = b"ERR invalid expire time in '".to_vec();
        m.extend_from_slice(&name);
        m.extend_from_slice(b"' command");
        c.out.error(&m);
    };
    if !ms {
        if at > MAX_DEADLINE_MS / 1000 {
            return bad_time(c);
        }
        at *= 1000;
    }
    let base = if relative { c.db.now as i64 } else { 0 };
    if at > MAX_DEADLINE_MS - base {
        return bad_time(c);
    }
    at += base;
    // NX | XX | GT | LT, then FIELDS.
    let cond = [b"NX", b"XX", b"GT", b"LT"]
        .into_iter()
        .position(|w| args::is(a[3], std::str::from_utf8(w).unwrap_or_default()));
    let fields_at_idx = if cond.is_some() { 5 } else { 4 };
    let fields = match fields_at(
        a,
        fields_at_idx,
        b"ERR Parameter `numFields` should be greater than 0",
    ) {
        Ok(f) => f,
        Err(m) => return c.out.error(m),
    };
    let now = c.db.now;
    let at = at as u64;
    c.out.array_len(fields.len());
    let Some(Value::Hash(h)) = c.db.dbs[dbi].get_mut(a[1], now) else {
        for _ in fields {
            c.out.int(-2);
        }
        return;
    };
    let (mut deleted, mut updated) = (false, false);
    for f in fields {
        let code = match h.field_deadline(f) {
            None => -2,
            Some(old) => {
                let allowed = match (cond, old) {
                    (Some(0), Some(_)) => false,        // NX: only without a deadline
                    (Some(1) | Some(2), None) => false, // XX, GT: only with one
                    (Some(2), Some(o)) => at > o,       // GT
                    (Some(3), Some(o)) => at < o,       // LT (none counts as infinite)
                    _ => true,
                };
                if !allowed {
                    0
                } else if at <= now {
                    h.remove(f);
                    deleted = true;
                    2
                } else {
                    h.set_field_deadline(f, Some(at));
                    updated = true;
                    1
                }
            }
        };
        c.out.int(code);
    }
    if deleted && h.is_empty() {
        c.db.dbs[dbi].remove(a[1], now);
        c.db.signal_modified(dbi, a[1]);
        c.db.notify(class::HASH, "hdel", dbi, a[1]);
        c.db.notify(class::GENERIC, "del", dbi, a[1]);
    } else {
        if deleted || updated {
            let event = if deleted { "hdel" } else { "hexpire" };
            c.db.modified(class::HASH, event, dbi, a[1]);
        }
        purge_fields(c.db, dbi, a[1]);
    }
}

fn hexpire(c: &mut Ctx<'_>, a: &[&[u8]]) {
    hexpire_generic(c, a, true, false);
}

fn hpexpire(c: &mut Ctx<'_>, a: &[&[u8]]) {
    hexpire_generic(c, a, true, true);
}

fn hexpireat(c: &mut Ctx<'_>, a: &[&[u8]]) {
    hexpire_generic(c, a, false, false);
}

fn hpexpireat(c: &mut Ctx<'_>, a: &[&[u8]]) {
    hexpire_generic(c, a, false, true);
}

/// HTTL and its forms: `relative` subtracts the clock, `ms` answers in milliseconds.
fn httl_generic(c: &mut Ctx<'_>, a: &[&[u8]], relative: bool, ms: bool) {
    let dbi = c.session.db;
    let now = c.db.now as i64;
    let h = match read_hash(c.db, dbi, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(h) => h,
    };
    let fields = match fields_at(a, 3, b"ERR Number of fields must be a positive integer") {
        Ok(f) => f,
        Err(m) => return c.out.error(m),
    };
    c.out.array_len(fields.len());
    for f in fields {
        let code = match h.and_then(|h| h.field_deadline(f)) {
            None => -2,
            Some(None) => -1,
            Some(Some(at)) => {
                let at = at as i64;
                let base = if relative { now } else { 0 };
                if ms {
                    at - base
                } else {
                    (at + 999 - base) / 1000
                }
            }
        };
        c.out.int(code);
    }
}

fn httl(c: &mut Ctx<'_>, a: &[&[u8]]) {
    httl_generic(c, a, true, false);
}

fn hpttl(c: &mut Ctx<'_>, a: &[&[u8]]) {
    httl_generic(c, a, true, true);
}

fn hexpiretime(c: &mut Ctx<'_>, a: &[&[u8]]) {
    httl_generic(c, a, false, false);
}

fn hpexpiretime(c: &mut Ctx<'_>, a: &[&[u8]]) {
    httl_generic(c, a, false, true);
}

fn hpersist(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let dbi = c.session.db;
    if let Err(e) = get_hash(c.db, dbi, a[1]) {
        return reply_err(&mut c.out, e);
    }
    let fields = match fields_at(a, 3, b"ERR Number of fields must be a positive integer") {
        Ok(f) => f,
        Err(m) => return c.out.error(m),
    };
    let now = c.db.now;
    c.out.array_len(fields.len());
    let Some(Value::Hash(h)) = c.db.dbs[dbi].get_mut(a[1], now) else {
        for _ in fields {
            c.out.int(-2);
        }
        return;
    };
    let mut changed = false;
    for f in fields {
        let code = match h.field_deadline(f) {
            None => -2,
            Some(None) => -1,
            Some(Some(_)) => {
                h.set_field_deadline(f, None);
                changed = true;
                1
            }
        };
        c.out.int(code);
    }
    if changed {
        c.db.modified(class::HASH, "hpersist", dbi, a[1]);
    }
}
