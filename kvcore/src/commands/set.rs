//! Set commands.
//!
//! Handlers check arguments and types in Redis's order. Replies that list a set's members
//! give them in the encoding's order, as Redis does (intset ascending, listpack in insertion
//! order); results of SUNION, SDIFF and the *STORE forms are built the way Redis builds them
//! (from an empty intset, member by member), so they come out in the same order and encoding.
//! A set emptied by a command is deleted.

use super::strings::reply_err;
use super::{args, cmd, flags::*, CommandSpec, Ctx};
use crate::error::{OpError, OpResult};
use crate::events::class;
use crate::keyspace::Ttl;
use crate::resp::ReplyWriter;
use crate::set::{Limits, Set};
use crate::value::Value;
use crate::Db;

pub(in crate::commands) static COMMANDS: &[CommandSpec] = &[
    cmd!("sadd", -3, WRITE | DENYOOM | FAST, 1, 1, 1, sadd),
    cmd!("srem", -3, WRITE | FAST, 1, 1, 1, srem),
    cmd!("sismember", 3, READONLY | FAST, 1, 1, 1, sismember),
    cmd!("smismember", -3, READONLY | FAST, 1, 1, 1, smismember),
    cmd!("scard", 2, READONLY | FAST, 1, 1, 1, scard),
    cmd!("smembers", 2, READONLY, 1, 1, 1, smembers),
    cmd!("spop", -2, WRITE | FAST, 1, 1, 1, spop),
    cmd!("srandmember", -2, READONLY, 1, 1, 1, srandmember),
    cmd!("smove", 4, WRITE | FAST, 1, 2, 1, smove),
    cmd!("sinter", -2, READONLY, 1, -1, 1, sinter),
    cmd!(
        "sintercard",
        -3,
        READONLY | MOVABLE_KEYS,
        0,
        0,
        0,
        sintercard
    ),
    cmd!("sunion", -2, READONLY, 1, -1, 1, sunion),
    cmd!("sdiff", -2, READONLY, 1, -1, 1, sdiff),
    cmd!("sinterstore", -3, WRITE | DENYOOM, 1, -1, 1, sinterstore),
    cmd!("sunionstore", -3, WRITE | DENYOOM, 1, -1, 1, sunionstore),
    cmd!("sdiffstore", -3, WRITE | DENYOOM, 1, -1, 1, sdiffstore),
    cmd!("sscan", -3, READONLY, 1, 1, 1, sscan),
];

/// The encoding limits from the configuration.
pub(crate) fn limits(db: &Db) -> Limits {
    Limits {
        max_intset: db.config.set_max_intset_entries,
        max_pack_entries: db.config.set_max_listpack_entries,
        max_pack_value: db.config.set_max_listpack_value,
    }
}

/// The set at `key`: `Ok(None)` when missing, WRONGTYPE for another type.
pub(crate) fn get_set<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a Set>> {
    let now = db.now;
    match db.dbs[dbi].get(key, now) {
        None => Ok(None),
        Some(n) => match n.obj() {
            Some(Value::Set(s)) => Ok(Some(s)),
            _ => Err(OpError::WrongType),
        },
    }
}

fn get_set_mut<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a mut Set>> {
    let now = db.now;
    match db.dbs[dbi].get_mut(key, now) {
        None => Ok(None),
        Some(Value::Set(s)) => Ok(Some(s)),
        Some(_) => Err(OpError::WrongType),
    }
}

/// Deletes `key` if it holds an empty set (after removals); returns whether it did.
fn drop_if_empty(db: &mut Db, dbi: usize, key: &[u8]) -> bool {
    let now = db.now;
    if let Some(n) = db.dbs[dbi].get(key, now) {
        if matches!(n.obj(), Some(Value::Set(s)) if s.is_empty()) {
            db.dbs[dbi].remove(key, now);
            return true;
        }
    }
    false
}

/// After members left the set at `key`: the command's event, `del` if the set was emptied
/// and deleted, and the WATCH touch.
fn removed(db: &mut Db, dbi: usize, key: &[u8], event: &'static str) {
    db.notify(class::SET, event, dbi, key);
    if drop_if_empty(db, dbi, key) {
        db.notify(class::GENERIC, "del", dbi, key);
    }
    db.signal_modified(dbi, key);
}

/// Removes `members` from the set at `key` (no events, no deletion); how many were there.
fn remove_members(db: &mut Db, dbi: usize, key: &[u8], members: &[&[u8]]) -> OpResult<usize> {
    let Some(s) = get_set_mut(db, dbi, key)? else {
        return Ok(0);
    };
    Ok(members.iter().filter(|m| s.remove(m)).count())
}

/// A read lookup that found nothing: Redis's `keymiss`.
fn miss(c: &mut Ctx<'_>, key: &[u8]) {
    c.db.key_miss(c.session.db, key);
}

impl Db {
    /// SADD: adds `members` to the set at `key` (created in the encoding Redis would pick);
    /// returns how many were new.
    pub fn set_add(&mut self, dbi: usize, key: &[u8], members: &[&[u8]]) -> OpResult<usize> {
        let limits = limits(self);
        let n = if let Some(s) = get_set_mut(self, dbi, key)? {
            members.iter().filter(|m| s.add(limits, m)).count()
        } else {
            let Some(first) = members.first() else {
                return Ok(0);
            };
            let mut s = Set::for_members(limits, first, members.len());
            let n = members.iter().filter(|m| s.add(limits, m)).count();
            let now = self.now;
            self.dbs[dbi].set(key, Value::Set(s), Ttl::Clear, now);
            n
        };
        if n > 0 {
            self.modified(class::SET, "sadd", dbi, key);
        }
        Ok(n)
    }

    /// SREM: removes `members` from the set at `key`; returns how many were there.
    pub fn set_remove(&mut self, dbi: usize, key: &[u8], members: &[&[u8]]) -> OpResult<usize> {
        let n = remove_members(self, dbi, key, members)?;
        if n > 0 {
            removed(self, dbi, key, "srem");
        }
        Ok(n)
    }

    /// Whether `m` is in the set at `key`: `None` when the key is missing, WRONGTYPE for
    /// another type.
    pub fn set_contains(&mut self, dbi: usize, key: &[u8], m: &[u8]) -> OpResult<Option<bool>> {
        Ok(get_set(self, dbi, key)?.map(|s| s.contains(m)))
    }

    /// SMOVE within this store: false when `src` is missing or `m` is not in it; WRONGTYPE
    /// (and nothing moved) when either key holds another type.
    pub fn set_move(&mut self, dbi: usize, src: &[u8], dst: &[u8], m: &[u8]) -> OpResult<bool> {
        // Both keys are looked up (and expired) before anything is checked, as Redis does.
        let src_state = get_set(self, dbi, src).map(|s| s.map(|s| s.contains(m)));
        let dst_state = get_set(self, dbi, dst).map(|_| ());
        let Some(is_member) = src_state? else {
            return Ok(false);
        };
        dst_state?;
        if src == dst {
            return Ok(is_member);
        }
        if remove_members(self, dbi, src, &[m])? == 0 {
            return Ok(false);
        }
        // Redis's order: srem (and del) of the source, then sadd of the destination.
        self.notify(class::SET, "srem", dbi, src);
        if drop_if_empty(self, dbi, src) {
            self.notify(class::GENERIC, "del", dbi, src);
        }
        self.signal_modified(dbi, src);
        self.set_add(dbi, dst, &[m])?;
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------
// Single-set commands
// ---------------------------------------------------------------------------------------------

fn sadd(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match c.db.set_add(c.session.db, a[1], &a[2..]) {
        Ok(n) => c.out.int(n as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn srem(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match c.db.set_remove(c.session.db, a[1], &a[2..]) {
        Ok(n) => c.out.int(n as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn sismember(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match get_set(c.db, c.session.db, a[1]) {
        Ok(None) => {
            c.out.int(0);
            miss(c, a[1]);
        }
        Ok(s) => c.out.int(i64::from(s.is_some_and(|s| s.contains(a[2])))),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn smismember(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let s = match get_set(c.db, c.session.db, a[1]) {
        Ok(s) => s,
        Err(e) => return reply_err(&mut c.out, e),
    };
    c.out.array_len(a.len() - 2);
    for m in &a[2..] {
        c.out.int(i64::from(s.is_some_and(|s| s.contains(m))));
    }
    if s.is_none() {
        miss(c, a[1]);
    }
}

fn scard(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match get_set(c.db, c.session.db, a[1]) {
        Ok(None) => {
            c.out.int(0);
            miss(c, a[1]);
        }
        Ok(s) => c.out.int(s.map_or(0, Set::len) as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

/// Writes a set's members as a RESP3 set (an array in RESP2), in the encoding's order.
fn write_members(w: &mut ReplyWriter<'_>, s: &Set) {
    w.set_len(s.len());
    s.for_each(|m| w.bulk(m));
}

fn smembers(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match get_set(c.db, c.session.db, a[1]) {
        Ok(Some(s)) => write_members(&mut c.out, s),
        Ok(None) => {
            c.out.set_len(0);
            miss(c, a[1]);
        }
        Err(e) => reply_err(&mut c.out, e),
    }
}

/// `count` distinct random indexes below `len` (count < len): a partial Fisher-Yates shuffle
/// when most are wanted, otherwise draws with duplicates rejected (memory O(count)).
fn distinct_indexes(len: usize, count: usize, mut next: impl FnMut() -> u64) -> Vec<usize> {
    if count * 3 > len {
        let mut all: Vec<usize> = (0..len).collect();
        for i in 0..count {
            let j = i + (next() % (len - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(count);
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let i = (next() % len as u64) as usize;
            if seen.insert(i) {
                out.push(i);
            }
        }
        out
    }
}

fn spop(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if a.len() > 3 {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let dbi = c.session.db;
    let count = match a.get(2) {
        None => None,
        Some(n) => match args::int(n) {
            Ok(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => return c.out.error(b"ERR value is out of range, must be positive"),
        },
    };
    let seed = c.db.random();
    let limits = limits(c.db);
    let s = match get_set(c.db, dbi, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) if count.is_some() => return c.out.set_len(0),
        Ok(None) => return c.out.null(),
        Ok(Some(s)) => s,
    };
    let Some(count) = count else {
        let m = s.random(seed).unwrap_or_default();
        let _ = remove_members(c.db, dbi, a[1], &[&m]);
        removed(c.db, dbi, a[1], "spop");
        return c.out.bulk(&m);
    };
    if count == 0 {
        return c.out.set_len(0);
    }
    let len = s.len();
    if count >= len {
        // The whole set, as SUNION of it would list it, and the key goes.
        let all = Set::from_members(limits, s.to_vec().iter().map(Vec::as_slice));
        write_members(&mut c.out, &all);
        let now = c.db.now;
        c.db.notify(class::SET, "spop", dbi, a[1]);
        c.db.dbs[dbi].remove(a[1], now);
        c.db.notify(class::GENERIC, "del", dbi, a[1]);
        c.db.signal_modified(dbi, a[1]);
        return;
    }
    let members = s.to_vec();
    let mut rng = seed | 1;
    let picked = distinct_indexes(len, count, || xorshift(&mut rng));
    c.out.set_len(picked.len());
    let mut gone: Vec<&[u8]> = Vec::with_capacity(picked.len());
    for i in picked {
        c.out.bulk(&members[i]);
        gone.push(&members[i]);
    }
    let _ = remove_members(c.db, dbi, a[1], &gone);
    removed(c.db, dbi, a[1], "spop");
}

fn xorshift(r: &mut u64) -> u64 {
    *r ^= *r << 13;
    *r ^= *r >> 7;
    *r ^= *r << 17;
    *r
}

fn srandmember(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if a.len() > 3 {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let count = match a.get(2) {
        None => None,
        Some(n) => match args::int(n) {
            Ok(i64::MIN) => return c.out.error(args::NOT_NEGATABLE),
            Ok(n) => Some(n),
            Err(e) => return reply_err(&mut c.out, e),
        },
    };
    let seed = c.db.random();
    let s = match get_set(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => {
            if count.is_some() {
                c.out.array_len(0);
            } else {
                c.out.null();
            }
            return miss(c, a[1]);
        }
        Ok(Some(s)) => s,
    };
    let mut rng = seed | 1;
    let Some(count) = count else {
        return c.out.bulk(&s.random(seed).unwrap_or_default());
    };
    if count == 0 {
        return c.out.array_len(0);
    }
    let len = s.len();
    if count < 0 || count == 1 {
        // Repeats allowed: |count| independent draws.
        let n = count.unsigned_abs();
        c.out.array_len(usize::try_from(n).unwrap_or(usize::MAX));
        for _ in 0..n {
            c.out
                .bulk(&s.random(xorshift(&mut rng)).unwrap_or_default());
        }
        return;
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count >= len {
        c.out.array_len(len);
        s.for_each(|m| c.out.bulk(m));
        return;
    }
    let members = s.to_vec();
    let picked = distinct_indexes(len, count, || xorshift(&mut rng));
    c.out.array_len(picked.len());
    for i in picked {
        c.out.bulk(&members[i]);
    }
}

fn smove(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match c.db.set_move(c.session.db, a[1], a[2], a[3]) {
        Ok(moved) => c.out.int(i64::from(moved)),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn sscan(c: &mut Ctx<'_>, a: &[&[u8]]) {
    // As Redis: the cursor first, then the key (a missing key answers an empty scan whatever
    // the options), then the options.
    if let Err(m) = super::keys_api::parse_scan(&a[1..3]) {
        return c.out.error(m);
    }
    let s = match get_set(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(s) => s,
    };
    let Some(s) = s else {
        c.out.array_len(2);
        c.out.bulk(b"0");
        c.out.array_len(0);
        return miss(c, a[1]);
    };
    let opts = match super::keys_api::parse_scan(&a[1..]) {
        Ok(o) => o,
        Err(m) => return c.out.error(m),
    };
    if opts.ty.is_some() {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let mut found = Vec::new();
    let next = s.scan(opts.cursor, opts.count, |m| {
        if opts
            .pattern
            .is_none_or(|p| crate::glob::matches(p, m, false))
        {
            found.push(m.to_vec());
        }
    });
    c.out.array_len(2);
    c.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    c.out.array_len(found.len());
    for m in &found {
        c.out.bulk(m);
    }
}

// ---------------------------------------------------------------------------------------------
// Algebra: SINTER, SUNION, SDIFF and their forms
// ---------------------------------------------------------------------------------------------

/// The sets at `keys` (`None` for a missing key); WRONGTYPE if any holds another type (every
/// key is looked at, as Redis does before it answers).
fn sets_of<'a>(db: &'a mut Db, dbi: usize, keys: &[&[u8]]) -> OpResult<Vec<Option<&'a Set>>> {
    let now = db.now;
    // Read lookups in order (expiring, `keymiss` for a missing key) up to the first key of
    // another type, as Redis's; then borrow every set at once.
    for k in keys {
        match db.dbs[dbi].get(k, now) {
            None => db.key_miss(dbi, k),
            Some(n) if !matches!(n.obj(), Some(Value::Set(_))) => return Err(OpError::WrongType),
            Some(_) => {}
        }
    }
    let ks = &db.dbs[dbi];
    keys.iter()
        .map(|k| match ks.peek(k, now) {
            None => Ok(None),
            Some(n) => match n.obj() {
                Some(Value::Set(s)) => Ok(Some(s)),
                _ => Err(OpError::WrongType),
            },
        })
        .collect()
}

/// What an algebra command computes.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of the result in Redis's order, at most `limit` of them (SINTERCARD).
fn compute(sets: &[Option<&Set>], op: Op, limit: usize) -> Vec<Vec<u8>> {
    match op {
        Op::Inter => {
            if sets.iter().any(Option::is_none) {
                return Vec::new();
            }
            let sets: Vec<&Set> = sets.iter().flatten().copied().collect();
            // The smallest set drives; the first of equal sizes, as a stable sort picks it.
            let Some(small) = sets.iter().copied().min_by_key(|s| s.len()) else {
                return Vec::new();
            };
            let mut out = Vec::new();
            small.for_each(|m| {
                if out.len() < limit && sets.iter().all(|s| s.contains(m)) {
                    out.push(m.to_vec());
                }
            });
            out
        }
        Op::Union => {
            let mut out = Vec::new();
            for s in sets.iter().flatten() {
                s.for_each(|m| out.push(m.to_vec()));
            }
            out
        }
        Op::Diff => {
            let Some(Some(first)) = sets.first() else {
                return Vec::new();
            };
            let mut out = Vec::new();
            first.for_each(|m| {
                if !sets[1..].iter().flatten().any(|s| s.contains(m)) {
                    out.push(m.to_vec());
                }
            });
            out
        }
    }
}

fn algebra(c: &mut Ctx<'_>, keys: &[&[u8]], op: Op, dest: Option<&[u8]>) {
    let dbi = c.session.db;
    let limits = limits(c.db);
    let members = match sets_of(c.db, dbi, keys) {
        Ok(sets) => compute(&sets, op, usize::MAX),
        Err(e) => return reply_err(&mut c.out, e),
    };
    // Built as Redis builds it (from an empty intset), except SINTER's plain reply, which
    // Redis writes straight from the smallest set's walk.
    let result = Set::from_members(limits, members.iter().map(Vec::as_slice));
    match dest {
        None if op == Op::Inter => {
            c.out.set_len(members.len());
            for m in &members {
                c.out.bulk(m);
            }
        }
        None => write_members(&mut c.out, &result),
        Some(d) => {
            let n = result.len();
            let now = c.db.now;
            if n == 0 {
                if c.db.dbs[dbi].delete_stored(d) {
                    c.db.modified(class::GENERIC, "del", dbi, d);
                }
            } else {
                c.db.dbs[dbi].set(d, Value::Set(result), Ttl::Clear, now);
                let event = match op {
                    Op::Inter => "sinterstore",
                    Op::Union => "sunionstore",
                    Op::Diff => "sdiffstore",
                };
                c.db.modified(class::SET, event, dbi, d);
            }
            c.out.int(n as i64);
        }
    }
}

fn sinter(c: &mut Ctx<'_>, a: &[&[u8]]) {
    algebra(c, &a[1..], Op::Inter, None);
}

fn sunion(c: &mut Ctx<'_>, a: &[&[u8]]) {
    algebra(c, &a[1..], Op::Union, None);
}

fn sdiff(c: &mut Ctx<'_>, a: &[&[u8]]) {
    algebra(c, &a[1..], Op::Diff, None);
}

fn sinterstore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    algebra(c, &a[2..], Op::Inter, Some(a[1]));
}

fn sunionstore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    algebra(c, &a[2..], Op::Union, Some(a[1]));
}

fn sdiffstore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    algebra(c, &a[2..], Op::Diff, Some(a[1]));
}

fn sintercard(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let n = match args::int(a[1]) {
        Ok(n) if n >= 1 => n,
        _ => return c.out.error(b"ERR numkeys should be greater than 0"),
    };
    if n > (a.len() - 2) as i64 {
        return c
            .out
            .error(b"ERR Number of keys can't be greater than number of args");
    }
    let n = n as usize;
    let mut limit = usize::MAX;
    let mut j = 2 + n;
    while j < a.len() {
        if args::is(a[j], "LIMIT") && j + 1 < a.len() {
            match args::int(a[j + 1]) {
                Ok(0) => limit = usize::MAX,
                Ok(l) if l > 0 => limit = usize::try_from(l).unwrap_or(usize::MAX),
                _ => return c.out.error(b"ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
    }
    match sets_of(c.db, c.session.db, &a[2..2 + n]) {
        Ok(sets) => c.out.int(compute(&sets, Op::Inter, limit).len() as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}
