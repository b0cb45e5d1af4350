//! Sorted-set commands and the typed sorted-set API of [`Db`].
//!
//! - this file: the table, lookups, ZADD/ZINCRBY, single-member reads, pops, ZRANDMEMBER, ZSCAN;
//! - [`range`]: ZRANGE in all its forms, ZRANGESTORE, ZCOUNT/ZLEXCOUNT, ZREMRANGEBY*;
//! - [`multi`]: ZUNION/ZINTER/ZDIFF (and *STORE), ZINTERCARD.
//!
//! BZPOPMIN, BZPOPMAX and BZMPOP: [`parse_blocking_pop`], [`Db::holds_zset`], [`Db::zpop`] and
//! [`write_blocking_pop`] are their sorted-set pieces; [`super::blocking`] runs them, for a
//! server that blocks clients and for callers that cannot block.

pub(crate) mod multi;
pub(crate) mod range;

use super::strings::reply_err;
use super::{args, cmd, flags::*, wrong_arity, CommandSpec, Ctx};
use crate::error::{OpError, OpResult};
use crate::events::class;
use crate::keyspace::Ttl;
use crate::resp::ReplyWriter;
use crate::value::Value;
use crate::zset::{Limits, ZSet};
use crate::Db;

pub(in crate::commands) static COMMANDS: &[CommandSpec] = &[
    cmd!("zadd", -4, WRITE | DENYOOM | FAST, 1, 1, 1, zadd_handler),
    cmd!("zincrby", 4, WRITE | DENYOOM | FAST, 1, 1, 1, zincrby),
    cmd!("zrem", -3, WRITE | FAST, 1, 1, 1, zrem),
    cmd!("zscore", 3, READONLY | FAST, 1, 1, 1, zscore),
    cmd!("zmscore", -3, READONLY | FAST, 1, 1, 1, zmscore),
    cmd!("zrank", -3, READONLY | FAST, 1, 1, 1, zrank),
    cmd!("zrevrank", -3, READONLY | FAST, 1, 1, 1, zrevrank),
    cmd!("zcard", 2, READONLY | FAST, 1, 1, 1, zcard),
    cmd!("zpopmin", -2, WRITE | FAST, 1, 1, 1, zpopmin),
    cmd!("zpopmax", -2, WRITE | FAST, 1, 1, 1, zpopmax),
    cmd!("zmpop", -4, WRITE | MOVABLE_KEYS, 0, 0, 0, zmpop),
    cmd!("bzpopmin", -3, WRITE | FAST | BLOCKING, 1, -2, 1, bzpopmin),
    cmd!("bzpopmax", -3, WRITE | FAST | BLOCKING, 1, -2, 1, bzpopmax),
    cmd!(
        "bzmpop",
        -5,
        WRITE | BLOCKING | MOVABLE_KEYS,
        0,
        0,
        0,
        bzmpop
    ),
    cmd!("zrandmember", -2, READONLY, 1, 1, 1, zrandmember),
    cmd!("zscan", -3, READONLY, 1, 1, 1, zscan),
    cmd!("zcount", 4, READONLY | FAST, 1, 1, 1, range::zcount),
    cmd!("zlexcount", 4, READONLY | FAST, 1, 1, 1, range::zlexcount),
    cmd!("zrange", -4, READONLY, 1, 1, 1, range::zrange),
    cmd!(
        "zrangestore",
        -5,
        WRITE | DENYOOM,
        1,
        2,
        1,
        range::zrangestore
    ),
    cmd!("zrangebyscore", -4, READONLY, 1, 1, 1, range::zrangebyscore),
    cmd!(
        "zrevrangebyscore",
        -4,
        READONLY,
        1,
        1,
        1,
        range::zrevrangebyscore
    ),
    cmd!("zrangebylex", -4, READONLY, 1, 1, 1, range::zrangebylex),
    cmd!(
        "zrevrangebylex",
        -4,
        READONLY,
        1,
        1,
        1,
        range::zrevrangebylex
    ),
    cmd!("zrevrange", -4, READONLY, 1, 1, 1, range::zrevrange),
    cmd!("zremrangebyrank", 4, WRITE, 1, 1, 1, range::zremrangebyrank),
    cmd!(
        "zremrangebyscore",
        4,
        WRITE,
        1,
        1,
        1,
        range::zremrangebyscore
    ),
    cmd!("zremrangebylex", 4, WRITE, 1, 1, 1, range::zremrangebylex),
    cmd!(
        "zunion",
        -3,
        READONLY | MOVABLE_KEYS,
        0,
        0,
        0,
        multi::zunion
    ),
    cmd!(
        "zinter",
        -3,
        READONLY | MOVABLE_KEYS,
        0,
        0,
        0,
        multi::zinter
    ),
    cmd!("zdiff", -3, READONLY | MOVABLE_KEYS, 0, 0, 0, multi::zdiff),
    cmd!(
        "zintercard",
        -3,
        READONLY | MOVABLE_KEYS,
        0,
        0,
        0,
        multi::zintercard
    ),
    cmd!(
        "zunionstore",
        -4,
        WRITE | DENYOOM | MOVABLE_KEYS,
        1,
        1,
        1,
        multi::zunionstore
    ),
    cmd!(
        "zinterstore",
        -4,
        WRITE | DENYOOM | MOVABLE_KEYS,
        1,
        1,
        1,
        multi::zinterstore
    ),
    cmd!(
        "zdiffstore",
        -4,
        WRITE | DENYOOM | MOVABLE_KEYS,
        1,
        1,
        1,
        multi::zdiffstore
    ),
];

// ---------------------------------------------------------------------------------------------
// Lookups shared by the sorted-set and geo commands
// ---------------------------------------------------------------------------------------------

/// The encoding limits from the configuration.
pub(crate) fn limits(db: &Db) -> Limits {
    Limits {
        max_entries: db.config.zset_max_listpack_entries,
        max_value: db.config.zset_max_listpack_value,
    }
}

/// The sorted set at `key`: `Ok(None)` when missing, WRONGTYPE for another type.
pub(crate) fn get_z<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a ZSet>> {
    let now = db.now;
    match db.dbs[dbi].get(key, now) {
        None => Ok(None),
        Some(n) => match n.obj() {
            Some(Value::ZSet(z)) => Ok(Some(z)),
            _ => Err(OpError::WrongType),
        },
    }
}

/// The sorted set at `key`, mutable.
pub(crate) fn get_z_mut<'a>(
    db: &'a mut Db,
    dbi: usize,
    key: &[u8],
) -> OpResult<Option<&'a mut ZSet>> {
    let now = db.now;
    match db.dbs[dbi].get_mut(key, now) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(OpError::WrongType),
    }
}

/// Deletes `key` if it holds an empty sorted set (after removals); returns whether it did.
pub(crate) fn drop_if_empty(db: &mut Db, dbi: usize, key: &[u8]) -> bool {
    let now = db.now;
    if let Some(n) = db.dbs[dbi].get(key, now) {
        if matches!(n.obj(), Some(Value::ZSet(z)) if z.is_empty()) {
            db.dbs[dbi].remove(key, now);
            return true;
        }
    }
    false
}

/// After members left the sorted set at `key`: the WATCH touch, the command's event, and
/// `del` when the set was emptied and deleted.
pub(crate) fn removed(db: &mut Db, dbi: usize, key: &[u8], event: &'static str) {
    let deleted = drop_if_empty(db, dbi, key);
    db.signal_modified(dbi, key);
    db.notify(class::ZSET, event, dbi, key);
    if deleted {
        db.notify(class::GENERIC, "del", dbi, key);
    }
}

/// Stores `z` at `key` (replacing anything) and raises `event`, or deletes `key` when `z` is
/// empty (`del` if there was one): the *STORE commands' ending.
pub(crate) fn store(db: &mut Db, dbi: usize, key: &[u8], z: ZSet, event: &'static str) {
    let now = db.now;
    if z.is_empty() {
        if db.dbs[dbi].delete_stored(key) {
            db.modified(class::GENERIC, "del", dbi, key);
        }
    } else {
        db.dbs[dbi].set(key, Value::ZSet(z), Ttl::Clear, now);
        db.modified(class::ZSET, event, dbi, key);
    }
}

/// [`get_z`] for a read lookup: a missing key is a `keymiss`.
pub(crate) fn read_z<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a ZSet>> {
    if matches!(get_z(db, dbi, key), Ok(None)) {
        db.key_miss(dbi, key);
        return Ok(None);
    }
    get_z(db, dbi, key)
}

/// Writes one `member score` pair: a two-element array in RESP3, two bulks in RESP2.
pub(crate) fn write_pair(w: &mut ReplyWriter<'_>, m: &[u8], s: f64, nested: bool) {
    if nested {
        w.array_len(2);
    }
    w.bulk(m);
    w.double(s);
}

fn is_resp3(w: &ReplyWriter<'_>) -> bool {
    w.proto == crate::resp::Proto::Resp3
}

// ---------------------------------------------------------------------------------------------
// Typed operations
// ---------------------------------------------------------------------------------------------

/// Options of ZADD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZaddFlags {
    /// Only add new members.
    pub nx: bool,
    /// Only update existing members.
    pub xx: bool,
    /// Only update when the new score is greater.
    pub gt: bool,
    /// Only update when the new score is less.
    pub lt: bool,
    /// Add the score to the current one (one pair only).
    pub incr: bool,
}

/// What ZADD did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ZaddOutcome {
    /// Members added.
    pub added: usize,
    /// Members whose score changed.
    pub updated: usize,
    /// The score of the last processed pair (INCR's reply); `None` when nothing was processed.
    pub score: Option<f64>,
}

impl Db {
    /// ZADD in database `dbi`: `pairs` are `(score, member)`. Errors: WRONGTYPE, and
    /// `OpError::NotFloat`-free NaN results reported as [`OpError::OutOfRange`]-like text by the
    /// handler ([`ZADD_NAN`]).
    pub fn zadd_in(
        &mut self,
        dbi: usize,
        key: &[u8],
        pairs: &[(f64, &[u8])],
        f: ZaddFlags,
    ) -> Result<ZaddOutcome, ZaddError> {
        let lim = limits(self);
        let now = self.now;
        let mut out = ZaddOutcome::default();
        let ks = &mut self.dbs[dbi];
        let z = match ks.get_mut(key, now) {
            Some(Value::ZSet(z)) => z,
            Some(_) => return Err(ZaddError::Op(OpError::WrongType)),
            None => {
                if f.xx || pairs.is_empty() {
                    return Ok(out);
                }
                let z = ZSet::new(lim, pairs[0].1.len());
                ks.insert_absent(key, Value::ZSet(z), Ttl::Clear);
                match ks.get_mut(key, now) {
                    Some(Value::ZSet(z)) => z,
                    _ => return Err(ZaddError::Op(OpError::WrongType)),
                }
            }
        };
        let mut nan = false;
        for &(score, m) in pairs {
            match z.score(m) {
                Some(cur) => {
                    if f.nx {
                        continue;
                    }
                    let new = if f.incr { score + cur } else { score };
                    if new.is_nan() {
                        nan = true;
                        break;
                    }
                    if (f.lt && new >= cur) || (f.gt && new <= cur) {
                        continue;
                    }
                    out.score = Some(new);
                    if new != cur {
                        z.insert(m, new, lim);
                        out.updated += 1;
                    }
                }
                None => {
                    if f.xx {
                        continue;
                    }
                    z.insert(m, score, lim);
                    out.added += 1;
                    out.score = Some(score);
                }
            }
        }
        if z.is_empty() {
            ks.remove(key, now);
        }
        if out.added + out.updated > 0 {
            let event = if f.incr { "zincr" } else { "zadd" };
            self.modified(class::ZSET, event, dbi, key);
        }
        if nan {
            return Err(ZaddError::Nan);
        }
        Ok(out)
    }

    /// ZADD of `(score, member)` pairs in the embedded session's database; returns how many
    /// members were added.
    pub fn zadd(&mut self, key: &[u8], pairs: &[(f64, &[u8])]) -> OpResult<usize> {
        match self.zadd_in(self.embedded_db(), key, pairs, ZaddFlags::default()) {
            Ok(o) => Ok(o.added),
            Err(ZaddError::Op(e)) => Err(e),
            Err(ZaddError::Nan) => Err(OpError::NotFloat),
        }
    }

    /// ZSCORE in the embedded session's database.
    pub fn zscore(&mut self, key: &[u8], member: &[u8]) -> OpResult<Option<f64>> {
        let dbi = self.embedded_db();
        Ok(get_z(self, dbi, key)?.and_then(|z| z.score(member)))
    }

    /// ZRANK in the embedded session's database.
    pub fn zrank(&mut self, key: &[u8], member: &[u8]) -> OpResult<Option<usize>> {
        let dbi = self.embedded_db();
        Ok(get_z(self, dbi, key)?.and_then(|z| z.rank(member).map(|r| r.0)))
    }

    /// ZCARD in the embedded session's database.
    pub fn zcard(&mut self, key: &[u8]) -> OpResult<usize> {
        let dbi = self.embedded_db();
        Ok(get_z(self, dbi, key)?.map_or(0, ZSet::len))
    }

    /// ZREM in the embedded session's database; returns how many members were removed.
    pub fn zrem(&mut self, key: &[u8], members: &[&[u8]]) -> OpResult<usize> {
        let dbi = self.embedded_db();
        zrem_in(self, dbi, key, members)
    }

    /// Members and scores of ranks `start..end` (ascending) in the embedded session's database.
    pub fn zrange_by_rank(
        &mut self,
        key: &[u8],
        start: usize,
        end: usize,
    ) -> OpResult<Vec<(Vec<u8>, f64)>> {
        let dbi = self.embedded_db();
        let mut out = Vec::new();
        if let Some(z) = get_z(self, dbi, key)? {
            z.range(start, end, false, |m, s| out.push((m.to_vec(), s)));
        }
        Ok(out)
    }
}

/// Why ZADD failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZaddError {
    /// An ordinary error.
    Op(OpError),
    /// An increment produced NaN (`-inf + inf`).
    Nan,
}

/// Redis's text for a NaN increment result.
pub const ZADD_NAN: &[u8] = b"ERR resulting score is not a number (NaN)";

fn zrem_in(db: &mut Db, dbi: usize, key: &[u8], members: &[&[u8]]) -> OpResult<usize> {
    let Some(z) = get_z_mut(db, dbi, key)? else {
        return Ok(0);
    };
    let n = members.iter().filter(|m| z.remove(m).is_some()).count();
    if n > 0 {
        removed(db, dbi, key, "zrem");
    }
    Ok(n)
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

/// Parses a score argument (`ERR value is not a valid float`).
pub(crate) fn score_arg(a: &[u8]) -> OpResult<f64> {
    crate::resp::float::parse_double(a).ok_or(OpError::NotFloat)
}

fn zadd_generic(c: &mut Ctx<'_>, a: &[&[u8]], incr_cmd: bool) {
    let mut f = ZaddFlags {
        incr: incr_cmd,
        ..ZaddFlags::default()
    };
    let mut ch = false;
    let mut i = 2;
    if !incr_cmd {
        while i < a.len() {
            let o = a[i];
            if args::is(o, "NX") {
                f.nx = true;
            } else if args::is(o, "XX") {
                f.xx = true;
            } else if args::is(o, "CH") {
                ch = true;
            } else if args::is(o, "INCR") {
                f.incr = true;
            } else if args::is(o, "GT") {
                f.gt = true;
            } else if args::is(o, "LT") {
                f.lt = true;
            } else {
                break;
            }
            i += 1;
        }
    }
    let rest = &a[i..];
    if rest.is_empty() || rest.len() % 2 != 0 {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    if f.nx && f.xx {
        return c
            .out
            .error(b"ERR XX and NX options at the same time are not compatible");
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return reply_err(&mut c.out, OpError::GtLtNxConflict);
    }
    if f.incr && rest.len() > 2 {
        return c
            .out
            .error(b"ERR INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks_exact(2) {
        match score_arg(p[0]) {
            Ok(s) => pairs.push((s, p[1])),
            Err(e) => return reply_err(&mut c.out, e),
        }
    }
    match c.db.zadd_in(c.session.db, a[1], &pairs, f) {
        Err(ZaddError::Op(e)) => reply_err(&mut c.out, e),
        Err(ZaddError::Nan) => c.out.error(ZADD_NAN),
        Ok(o) if f.incr => match o.score {
            Some(s) => c.out.double(s),
            None => c.out.null(),
        },
        Ok(o) => c
            .out
            .int((if ch { o.added + o.updated } else { o.added }) as i64),
    }
}

pub(crate) fn zadd_handler(c: &mut Ctx<'_>, a: &[&[u8]]) {
    zadd_generic(c, a, false);
}

fn zincrby(c: &mut Ctx<'_>, a: &[&[u8]]) {
    zadd_generic(c, a, true);
}

fn zrem(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match zrem_in(c.db, c.session.db, a[1], &a[2..]) {
        Ok(n) => c.out.int(n as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn zscore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match read_z(c.db, c.session.db, a[1]) {
        Err(e) => reply_err(&mut c.out, e),
        Ok(z) => match z.and_then(|z| z.score(a[2])) {
            Some(s) => c.out.double(s),
            None => c.out.null(),
        },
    }
}

fn zmscore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let z = match read_z(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(z) => z,
    };
    c.out.array_len(a.len() - 2);
    for m in &a[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => c.out.double(s),
            None => c.out.null(),
        }
    }
}

fn zrank_generic(c: &mut Ctx<'_>, a: &[&[u8]], rev: bool, name: &str) {
    let withscore = match a.len() {
        3 => false,
        4 if args::is(a[3], "WITHSCORE") => true,
        4 => return reply_err(&mut c.out, OpError::Syntax),
        _ => return wrong_arity(&mut c.out, name),
    };
    let z = match read_z(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(z) => z,
    };
    match z.and_then(|z| z.rank(a[2]).map(|(r, s)| (r, s, z.len()))) {
        Some((r, s, len)) => {
            let r = if rev { len - 1 - r } else { r };
            if withscore {
                c.out.array_len(2);
                c.out.int(r as i64);
                c.out.double(s);
            } else {
                c.out.int(r as i64);
            }
        }
        None if withscore => c.out.null_array(),
        None => c.out.null(),
    }
}

fn zrank(c: &mut Ctx<'_>, a: &[&[u8]]) {
    zrank_generic(c, a, false, "zrank");
}

fn zrevrank(c: &mut Ctx<'_>, a: &[&[u8]]) {
    zrank_generic(c, a, true, "zrevrank");
}

fn zcard(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match read_z(c.db, c.session.db, a[1]) {
        Err(e) => reply_err(&mut c.out, e),
        Ok(z) => c.out.int(z.map_or(0, ZSet::len) as i64),
    }
}

/// Pops up to `count` members from the low (or high, `max`) end of `key`.
pub(crate) fn pop_in(
    db: &mut Db,
    dbi: usize,
    key: &[u8],
    count: usize,
    max: bool,
) -> OpResult<Vec<(Vec<u8>, f64)>> {
    let Some(z) = get_z_mut(db, dbi, key)? else {
        return Ok(Vec::new());
    };
    let len = z.len();
    let n = count.min(len);
    let mut out = Vec::with_capacity(n);
    let (start, end) = if max { (len - n, len) } else { (0, n) };
    z.range(start, end, max, |m, s| out.push((m.to_vec(), s)));
    z.remove_ranks(start, end);
    if !out.is_empty() {
        let deleted = drop_if_empty(db, dbi, key);
        db.notify(
            class::ZSET,
            if max { "zpopmax" } else { "zpopmin" },
            dbi,
            key,
        );
        if deleted {
            db.notify(class::GENERIC, "del", dbi, key);
        }
        db.signal_modified(dbi, key);
    }
    Ok(out)
}

fn zpop_generic(c: &mut Ctx<'_>, a: &[&[u8]], max: bool) {
    if a.len() > 3 {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let count = match a.get(2) {
        None => None,
        Some(n) => match args::int(n) {
            Ok(n) if n >= 0 => Some(n as usize),
            // Redis 7.0 gives this one text for negative and unparsable counts alike.
            _ => return reply_err(&mut c.out, OpError::NotPositive),
        },
    };
    let popped = match pop_in(c.db, c.session.db, a[1], count.unwrap_or(1), max) {
        Ok(p) => p,
        Err(e) => return reply_err(&mut c.out, e),
    };
    let nested = count.is_some() && is_resp3(&c.out);
    c.out.array_len(if nested {
        popped.len()
    } else {
        popped.len() * 2
    });
    for (m, s) in &popped {
        write_pair(&mut c.out, m, *s, nested);
    }
}

fn zpopmin(c: &mut Ctx<'_>, a: &[&[u8]]) {
    zpop_generic(c, a, false);
}

fn zpopmax(c: &mut Ctx<'_>, a: &[&[u8]]) {
    zpop_generic(c, a, true);
}

fn zmpop(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (keys, mut i) = match args::numkeys(a, 1) {
        Ok(k) => k,
        Err(m) => return c.out.error(m),
    };
    let max = match a.get(i) {
        Some(w) if args::is(w, "MIN") => false,
        Some(w) if args::is(w, "MAX") => true,
        _ => return reply_err(&mut c.out, OpError::Syntax),
    };
    i += 1;
    let mut count = 1usize;
    let mut seen_count = false;
    while i < a.len() {
        if args::is(a[i], "COUNT") && i + 1 < a.len() && !seen_count {
            match args::int(a[i + 1]) {
                Ok(n) if n > 0 => count = n as usize,
                _ => return c.out.error(b"ERR count should be greater than 0"),
            }
            seen_count = true;
            i += 2;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
    }
    for k in keys {
        match get_z(c.db, c.session.db, k) {
            Err(e) => return reply_err(&mut c.out, e),
            Ok(None) => continue,
            Ok(Some(_)) => {}
        }
        let popped = match pop_in(c.db, c.session.db, k, count, max) {
            Ok(p) => p,
            Err(e) => return reply_err(&mut c.out, e),
        };
        c.out.array_len(2);
        c.out.bulk(k);
        c.out.array_len(popped.len());
        for (m, s) in &popped {
            write_pair(&mut c.out, m, *s, true);
        }
        return;
    }
    c.out.null_array();
}

/// A parsed BZPOPMIN, BZPOPMAX or BZMPOP.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockingPop<'a> {
    /// The keys, tried in this order.
    pub keys: Vec<&'a [u8]>,
    /// Pop the highest scores (BZPOPMAX, BZMPOP MAX) rather than the lowest.
    pub max: bool,
    /// Members to pop from the first non-empty key: 1, or BZMPOP's COUNT.
    pub count: usize,
    /// BZMPOP's reply (key, then an array of pairs) rather than BZPOP's (key, member, score).
    pub mpop: bool,
    /// How long the client may wait, in milliseconds; 0 waits for ever.
    pub timeout_ms: u64,
}

/// Reads a blocking pop's arguments (`args[0]` is the command name) with Redis 7.0's checks,
/// in its order: BZPOPMIN's and BZPOPMAX's timeout; BZMPOP's numkeys, MIN|MAX and COUNT, then
/// its timeout. The error is the message of Redis's error reply.
pub fn parse_blocking_pop<'a>(args: &[&'a [u8]]) -> Result<BlockingPop<'a>, &'static [u8]> {
    if !args[0].eq_ignore_ascii_case(b"bzmpop") {
        return Ok(BlockingPop {
            timeout_ms: args::timeout_ms(args[args.len() - 1])?,
            keys: args[1..args.len() - 1].to_vec(),
            max: args[0].eq_ignore_ascii_case(b"bzpopmax"),
            count: 1,
            mpop: false,
        });
    }
    let (keys, mut i) = args::numkeys(args, 2)?;
    let max = match args.get(i) {
        Some(w) if args::is(w, "MIN") => false,
        Some(w) if args::is(w, "MAX") => true,
        _ => return Err(OpError::Syntax.message().as_bytes()),
    };
    i += 1;
    let mut count = None;
    while i < args.len() {
        if args::is(args[i], "COUNT") && i + 1 < args.len() && count.is_none() {
            match args::int(args[i + 1]) {
                Ok(n) if n > 0 => count = Some(n as usize),
                _ => return Err(b"ERR count should be greater than 0"),
            }
            i += 2;
        } else {
            return Err(OpError::Syntax.message().as_bytes());
        }
    }
    Ok(BlockingPop {
        timeout_ms: args::timeout_ms(args[1])?,
        keys: keys.to_vec(),
        max,
        count: count.unwrap_or(1),
        mpop: true,
    })
}

/// The members a pop took, with their scores.
pub type Popped = Vec<(Vec<u8>, f64)>;

impl Db {
    /// Whether `key` holds a sorted set (never empty: an emptied set is deleted), for a
    /// blocking pop deciding whether it can be served; [`OpError::WrongType`] for another type.
    pub fn holds_zset(&mut self, dbi: usize, key: &[u8]) -> OpResult<bool> {
        Ok(get_z(self, dbi, key)?.is_some())
    }

    /// Pops up to `count` members from the low end of the sorted set at `key` (the high end
    /// when `max`), as ZPOPMIN / ZPOPMAX do; none if the key is missing, WRONGTYPE if it holds
    /// another type.
    pub fn zpop(&mut self, dbi: usize, key: &[u8], max: bool, count: usize) -> OpResult<Popped> {
        pop_in(self, dbi, key, count, max)
    }
}

/// Writes the reply of a blocking pop that took `popped` from `key`: BZPOPMIN's
/// `key, member, score` or BZMPOP's `key, [[member, score] ...]`.
pub fn write_blocking_pop(
    w: &mut ReplyWriter<'_>,
    pop: &BlockingPop<'_>,
    key: &[u8],
    popped: &[(Vec<u8>, f64)],
) {
    if pop.mpop {
        w.array_len(2);
        w.bulk(key);
        w.array_len(popped.len());
        for (m, s) in popped {
            write_pair(w, m, *s, true);
        }
    } else {
        w.array_len(1 + 2 * popped.len());
        w.bulk(key);
        for (m, s) in popped {
            write_pair(w, m, *s, false);
        }
    }
}

fn bzpopmin(c: &mut Ctx<'_>, a: &[&[u8]]) {
    super::blocking::serve_now(c, a);
}

fn bzpopmax(c: &mut Ctx<'_>, a: &[&[u8]]) {
    super::blocking::serve_now(c, a);
}

fn bzmpop(c: &mut Ctx<'_>, a: &[&[u8]]) {
    super::blocking::serve_now(c, a);
}

fn zrandmember(c: &mut Ctx<'_>, a: &[&[u8]]) {
    // As Redis checks: the count (in -LONG_MAX..=LONG_MAX) before the option after it.
    let count = match a.get(2) {
        None => None,
        Some(n) => match args::int(n) {
            Ok(i64::MIN) => return c.out.error(args::NOT_NEGATABLE),
            Ok(n) => Some(n),
            Err(e) => return reply_err(&mut c.out, e),
        },
    };
    if a.len() > 4 || (a.len() == 4 && !args::is(a[3], "WITHSCORES")) {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let withscores = a.len() == 4;
    if withscores && count.is_some_and(|n| n.unsigned_abs() > (i64::MAX as u64) / 2) {
        return reply_err(&mut c.out, OpError::OutOfRange);
    }
    let seed = c.db.random();
    let z = match read_z(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(z) => z,
    };
    let mut rng = seed | 1;
    let mut next = |bound: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % bound as u64) as usize
    };
    let Some(z) = z else {
        return match count {
            None => c.out.null(),
            Some(_) => c.out.array_len(0),
        };
    };
    let len = z.len();
    let nested = withscores && is_resp3(&c.out);
    let emit = |out: &mut ReplyWriter<'_>, r: usize| {
        if let Some((m, s)) = z.at(r) {
            if withscores {
                write_pair(out, &m, s, nested);
            } else {
                out.bulk(&m);
            }
        }
    };
    match count {
        None => emit(&mut c.out, next(len)),
        Some(n) if n < 0 => {
            let n = n.unsigned_abs() as usize;
            let per = if withscores && !nested { 2 } else { 1 };
            c.out.array_len(n * per);
            for _ in 0..n {
                emit(&mut c.out, next(len));
            }
        }
        Some(n) => {
            let n = (n as usize).min(len);
            // Distinct ranks: a partial Fisher-Yates shuffle when most of the set is wanted,
            // otherwise random ranks with duplicates rejected (memory O(count), not O(size)).
            let chosen: Vec<usize> = if n == len {
                (0..len).collect()
            } else if n * 3 > len {
                let mut ranks: Vec<usize> = (0..len).collect();
                for i in 0..n {
                    let j = i + next(len - i);
                    ranks.swap(i, j);
                }
                ranks.truncate(n);
                ranks
            } else {
                let mut seen = std::collections::HashSet::with_capacity(n);
                let mut out = Vec::with_capacity(n);
                while out.len() < n {
                    let r = next(len);
                    if seen.insert(r) {
                        out.push(r);
                    }
                }
                out
            };
            let per = if withscores && !nested { 2 } else { 1 };
            c.out.array_len(n * per);
            for r in chosen {
                emit(&mut c.out, r);
            }
        }
    }
}

fn zscan(c: &mut Ctx<'_>, a: &[&[u8]]) {
    // As Redis: the cursor first, then the key (a missing key answers an empty scan whatever
    // the options), then the options.
    if let Err(m) = super::keys_api::parse_scan(&a[1..3]) {
        return c.out.error(m);
    }
    let z = match read_z(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(z) => z,
    };
    if z.is_none() {
        c.out.array_len(2);
        c.out.bulk(b"0");
        c.out.array_len(0);
        return;
    }
    let s = match super::keys_api::parse_scan(&a[1..]) {
        Ok(s) => s,
        Err(m) => return c.out.error(m),
    };
    if s.ty.is_some() {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    // The whole set in one reply with cursor 0: every member present for the whole scan is
    // returned, as SCAN promises (Redis does the same for listpack-encoded sets).
    let mut items = Vec::new();
    // Scores are bulk strings, in RESP3 too, in the text Redis has at hand: a listpack holds
    // each score as d2string wrote it; a skip list's double is printed with "%.17Lg".
    let mut listpack = false;
    if let Some(z) = z {
        listpack = z.encoding() == "listpack";
        z.range(0, z.len(), false, |m, sc| {
            if s.pattern.is_none_or(|p| crate::glob::matches(p, m, false)) {
                items.push((m.to_vec(), sc));
            }
        });
    }
    c.out.array_len(2);
    c.out.bulk(b"0");
    c.out.array_len(items.len() * 2);
    let mut text = [0u8; crate::resp::float::DOUBLE_BUF_LEN];
    for (m, sc) in &items {
        c.out.bulk(m);
        c.out.bulk(if listpack {
            crate::resp::format_double(*sc, &mut text)
        } else {
            crate::resp::format_double_17g(*sc, &mut text)
        });
    }
}
