//! List commands and the list pieces of the blocking commands.
//!
//! Handlers check arguments and types in Redis's order (which decides which error a bad call
//! gets), then work on [`List`]. A list emptied by a command is deleted, as Redis never keeps an
//! empty list. BLPOP, BRPOP, BLMPOP, BLMOVE and BRPOPLPUSH run through
//! [`super::blocking`]: [`Db::list_pop`] and [`Db::list_move`] are what a served waiter does.

use super::strings::reply_err;
use super::{args, cmd, flags::*, wrong_arity, CommandSpec, Ctx};
use crate::error::{OpError, OpResult};
use crate::events::class;
use crate::keyspace::Ttl;
use crate::list::{Limits, List};
use crate::resp::ReplyWriter;
use crate::value::Value;
use crate::Db;

pub(in crate::commands) static COMMANDS: &[CommandSpec] = &[
    cmd!("lpush", -3, WRITE | DENYOOM | FAST, 1, 1, 1, lpush),
    cmd!("rpush", -3, WRITE | DENYOOM | FAST, 1, 1, 1, rpush),
    cmd!("lpushx", -3, WRITE | DENYOOM | FAST, 1, 1, 1, lpushx),
    cmd!("rpushx", -3, WRITE | DENYOOM | FAST, 1, 1, 1, rpushx),
    cmd!("lpop", -2, WRITE | FAST, 1, 1, 1, lpop),
    cmd!("rpop", -2, WRITE | FAST, 1, 1, 1, rpop),
    cmd!("llen", 2, READONLY | FAST, 1, 1, 1, llen),
    cmd!("lindex", 3, READONLY, 1, 1, 1, lindex),
    cmd!("lset", 4, WRITE | DENYOOM, 1, 1, 1, lset),
    cmd!("lrange", 4, READONLY, 1, 1, 1, lrange),
    cmd!("ltrim", 4, WRITE, 1, 1, 1, ltrim),
    cmd!("lrem", 4, WRITE, 1, 1, 1, lrem),
    cmd!("linsert", 5, WRITE | DENYOOM, 1, 1, 1, linsert),
    cmd!("lpos", -3, READONLY, 1, 1, 1, lpos),
    cmd!("lmove", 5, WRITE | DENYOOM, 1, 2, 1, lmove),
    cmd!("rpoplpush", 3, WRITE | DENYOOM, 1, 2, 1, rpoplpush),
    cmd!("lmpop", -4, WRITE | MOVABLE_KEYS, 0, 0, 0, lmpop),
    cmd!(
        "blpop",
        -3,
        WRITE | BLOCKING,
        1,
        -2,
        1,
        super::blocking::serve_now
    ),
    cmd!(
        "brpop",
        -3,
        WRITE | BLOCKING,
        1,
        -2,
        1,
        super::blocking::serve_now
    ),
    cmd!(
        "blmove",
        6,
        WRITE | DENYOOM | BLOCKING,
        1,
        2,
        1,
        super::blocking::serve_now
    ),
    cmd!(
        "brpoplpush",
        4,
        WRITE | DENYOOM | BLOCKING,
        1,
        2,
        1,
        super::blocking::serve_now
    ),
    cmd!(
        "blmpop",
        -5,
        WRITE | BLOCKING | MOVABLE_KEYS,
        0,
        0,
        0,
        super::blocking::serve_now
    ),
];

// ---------------------------------------------------------------------------------------------
// Lookups
// ---------------------------------------------------------------------------------------------

/// The node limit from the configuration.
pub(crate) fn limits(db: &Db) -> Limits {
    Limits {
        fill: db.config.list_max_listpack_size,
        packed_threshold: db.quicklist_packed_threshold,
    }
}

/// The list at `key`: `Ok(None)` when missing, WRONGTYPE for another type.
pub(crate) fn get_list<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a List>> {
    let now = db.now;
    match db.dbs[dbi].get(key, now) {
        None => Ok(None),
        Some(n) => match n.obj() {
            Some(Value::List(l)) => Ok(Some(l)),
            _ => Err(OpError::WrongType),
        },
    }
}

/// The list at `key`, mutable.
fn get_list_mut<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a mut List>> {
    let now = db.now;
    match db.dbs[dbi].get_mut(key, now) {
        None => Ok(None),
        Some(Value::List(l)) => Ok(Some(l)),
        Some(_) => Err(OpError::WrongType),
    }
}

/// Deletes `key` if it holds an empty list (after removals); returns whether it did.
fn drop_if_empty(db: &mut Db, dbi: usize, key: &[u8]) -> bool {
    let now = db.now;
    if let Some(n) = db.dbs[dbi].get(key, now) {
        if matches!(n.obj(), Some(Value::List(l)) if l.is_empty()) {
            db.dbs[dbi].remove(key, now);
            return true;
        }
    }
    false
}

/// After elements left the list at `key`: the command's event, then `del` when the list was
/// emptied and deleted, then the WATCH touch (Redis's `listElementsRemoved` order).
fn removed(db: &mut Db, dbi: usize, key: &[u8], event: &'static str) {
    db.notify(class::LIST, event, dbi, key);
    if drop_if_empty(db, dbi, key) {
        db.notify(class::GENERIC, "del", dbi, key);
    }
    db.signal_modified(dbi, key);
}

/// [`removed`] for a caller that knows whether the list is now empty (no second lookup of a
/// list that is not).
fn removed_known(db: &mut Db, dbi: usize, key: &[u8], event: &'static str, emptied: bool) {
    if emptied {
        removed(db, dbi, key, event);
    } else {
        db.notify(class::LIST, event, dbi, key);
        db.signal_modified(dbi, key);
    }
}

fn pop_event(left: bool) -> &'static str {
    if left {
        "lpop"
    } else {
        "rpop"
    }
}

fn push_event(left: bool) -> &'static str {
    if left {
        "lpush"
    } else {
        "rpush"
    }
}

/// LEFT or RIGHT (`Some(true)` for LEFT).
fn side(a: &[u8]) -> Option<bool> {
    if args::is(a, "LEFT") {
        Some(true)
    } else if args::is(a, "RIGHT") {
        Some(false)
    } else {
        None
    }
}

/// A count that must be at least `min`, with Redis's `getRangeLongFromObjectOrReply` error
/// `msg` for anything else (non-integers included).
fn count_at_least(a: &[u8], min: i64, msg: &'static [u8]) -> Result<i64, &'static [u8]> {
    match args::int(a) {
        Ok(n) if n >= min => Ok(n),
        _ => Err(msg),
    }
}

/// A non-negative count (`getPositiveLongFromObjectOrReply`): `msg` for anything else, a
/// non-integer included.
fn non_negative(a: &[u8], msg: &'static [u8]) -> Result<i64, &'static [u8]> {
    count_at_least(a, 0, msg)
}

/// `start..=end` of a list of `len` elements from LRANGE-style indexes, or `None` if empty.
fn clamp(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

// ---------------------------------------------------------------------------------------------
// The typed API
// ---------------------------------------------------------------------------------------------

impl Db {
    /// Pushes `items` at the head (`left`) or tail of the list at `key`, creating it unless
    /// `only_existing` (LPUSHX); returns the new length (0 when it did not exist and was not
    /// created).
    pub fn list_push(
        &mut self,
        dbi: usize,
        key: &[u8],
        items: &[&[u8]],
        left: bool,
        only_existing: bool,
    ) -> OpResult<usize> {
        let limits = limits(self);
        let n = if let Some(l) = get_list_mut(self, dbi, key)? {
            l.push(limits, items, left);
            l.len()
        } else if only_existing {
            return Ok(0);
        } else {
            let mut l = List::default();
            l.push(limits, items, left);
            let n = l.len();
            let now = self.now;
            self.dbs[dbi].set(key, Value::List(l), Ttl::Clear, now);
            n
        };
        self.modified(class::LIST, push_event(left), dbi, key);
        Ok(n)
    }

    /// Pops up to `count` elements from the head (`left`) or tail of the list at `key`; none
    /// when it is missing, WRONGTYPE for another type. An emptied list is deleted.
    pub fn list_pop(
        &mut self,
        dbi: usize,
        key: &[u8],
        left: bool,
        count: usize,
    ) -> OpResult<Vec<Vec<u8>>> {
        let limits = limits(self);
        let Some(l) = get_list_mut(self, dbi, key)? else {
            return Ok(Vec::new());
        };
        let out = l.pop(limits, left, count);
        if !out.is_empty() {
            removed(self, dbi, key, pop_event(left));
        }
        Ok(out)
    }

    /// [`Db::list_pop`] showing each element to `f` instead of copying it out (LPOP and RPOP
    /// write it straight into the reply); returns how many were popped.
    pub fn list_pop_each(
        &mut self,
        dbi: usize,
        key: &[u8],
        left: bool,
        count: usize,
        f: impl FnMut(&[u8]),
    ) -> OpResult<usize> {
        let limits = limits(self);
        let Some(l) = get_list_mut(self, dbi, key)? else {
            return Ok(0);
        };
        let n = l.pop_each(limits, left, count, f);
        let emptied = l.is_empty();
        if n > 0 {
            removed_known(self, dbi, key, pop_event(left), emptied);
        }
        Ok(n)
    }

    /// Whether `key` holds a list (never empty: an emptied list is deleted); WRONGTYPE for
    /// another type.
    pub fn holds_list(&mut self, dbi: usize, key: &[u8]) -> OpResult<bool> {
        Ok(get_list(self, dbi, key)?.is_some())
    }

    /// LMOVE: pops from `src`'s head (`from_left`) or tail and pushes onto `dst`'s head
    /// (`to_left`) or tail. `None` when `src` is missing; WRONGTYPE (and nothing moved) when
    /// either key holds another type.
    pub fn list_move(
        &mut self,
        dbi: usize,
        src: &[u8],
        dst: &[u8],
        from_left: bool,
        to_left: bool,
    ) -> OpResult<Option<Vec<u8>>> {
        if get_list(self, dbi, src)?.is_none() {
            return Ok(None);
        }
        get_list(self, dbi, dst)?;
        let limits = limits(self);
        // Redis pushes before it deletes an emptied source (so a list moved onto itself
        // is never deleted): push events first, then the pop's.
        let Some(v) = get_list_mut(self, dbi, src)?.and_then(|l| l.pop(limits, from_left, 1).pop())
        else {
            return Ok(None);
        };
        self.list_push(dbi, dst, &[&v], to_left, false)?;
        removed(self, dbi, src, pop_event(from_left));
        Ok(Some(v))
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

fn push(c: &mut Ctx<'_>, a: &[&[u8]], left: bool, only_existing: bool) {
    match c
        .db
        .list_push(c.session.db, a[1], &a[2..], left, only_existing)
    {
        Ok(n) => c.out.int(n as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn lpush(c: &mut Ctx<'_>, a: &[&[u8]]) {
    push(c, a, true, false);
}

fn rpush(c: &mut Ctx<'_>, a: &[&[u8]]) {
    push(c, a, false, false);
}

fn lpushx(c: &mut Ctx<'_>, a: &[&[u8]]) {
    push(c, a, true, true);
}

fn rpushx(c: &mut Ctx<'_>, a: &[&[u8]]) {
    push(c, a, false, true);
}

fn pop(c: &mut Ctx<'_>, a: &[&[u8]], left: bool) {
    if a.len() > 3 {
        return wrong_arity(&mut c.out, if left { "lpop" } else { "rpop" });
    }
    let count = match a.get(2) {
        None => None,
        Some(n) => match non_negative(n, b"ERR value is out of range, must be positive") {
            Ok(n) => Some(n as usize),
            Err(m) => return c.out.error(m),
        },
    };
    let dbi = c.session.db;
    let limits = limits(c.db);
    // One lookup: the elements are written into the reply as they come off the list, and the
    // key is looked up again only to delete a list the pop emptied.
    let l = match get_list_mut(c.db, dbi, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) if count.is_some() => return c.out.null_array(),
        Ok(None) => return c.out.null(),
        Ok(Some(l)) => l,
    };
    // The list is there (and never empty), so exactly `n` elements come out.
    let n = count.unwrap_or(1).min(l.len());
    if count.is_some() {
        c.out.array_len(n);
    }
    let out = &mut c.out;
    let popped = l.pop_each(limits, left, n, |v| out.bulk(v));
    let emptied = l.is_empty();
    if popped > 0 {
        removed_known(c.db, dbi, a[1], pop_event(left), emptied);
    }
}

fn write_items(w: &mut ReplyWriter<'_>, items: &[Vec<u8>]) {
    w.array_len(items.len());
    for v in items {
        w.bulk(v);
    }
}

fn lpop(c: &mut Ctx<'_>, a: &[&[u8]]) {
    pop(c, a, true);
}

fn rpop(c: &mut Ctx<'_>, a: &[&[u8]]) {
    pop(c, a, false);
}

/// A read lookup that found nothing: Redis's `keymiss`.
fn miss(c: &mut Ctx<'_>, key: &[u8]) {
    c.db.key_miss(c.session.db, key);
}

fn llen(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match get_list(c.db, c.session.db, a[1]) {
        Ok(None) => {
            c.out.int(0);
            miss(c, a[1]);
        }
        Ok(l) => c.out.int(l.map_or(0, List::len) as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn lindex(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let l = match get_list(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => {
            c.out.null();
            return miss(c, a[1]);
        }
        Ok(Some(l)) => l,
    };
    match args::int(a[2]) {
        Err(e) => reply_err(&mut c.out, e),
        Ok(i) => match l.get(i) {
            Some(v) => c.out.bulk(&v),
            None => c.out.null(),
        },
    }
}

fn lset(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let limits = limits(c.db);
    let l = match get_list_mut(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return reply_err(&mut c.out, OpError::NoSuchKey),
        Ok(Some(l)) => l,
    };
    match args::int(a[2]) {
        Err(e) => reply_err(&mut c.out, e),
        Ok(i) if l.set(limits, i, a[3]) => {
            c.out.ok();
            c.db.modified(class::LIST, "lset", c.session.db, a[1]);
        }
        Ok(_) => c.out.error(b"ERR index out of range"),
    }
}

fn lrange(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (start, end) = match (args::int(a[2]), args::int(a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return reply_err(&mut c.out, e),
    };
    let l = match get_list(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => {
            c.out.array_len(0);
            return miss(c, a[1]);
        }
        Ok(Some(l)) => l,
    };
    let Some((s, e)) = clamp(l.len(), start, end) else {
        return c.out.array_len(0);
    };
    c.out.array_len(e - s + 1);
    let mut buf = itoa::Buffer::new();
    l.range(s, e, |x| c.out.bulk(x.bytes(&mut buf)));
}

fn ltrim(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (start, end) = match (args::int(a[2]), args::int(a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return reply_err(&mut c.out, e),
    };
    let (dbi, limits) = (c.session.db, limits(c.db));
    let l = match get_list_mut(c.db, dbi, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return c.out.ok(),
        Ok(Some(l)) => l,
    };
    match clamp(l.len(), start, end) {
        Some((s, e)) => l.trim(limits, s, e),
        None => l.trim(limits, 1, 0),
    }
    removed(c.db, dbi, a[1], "ltrim");
    c.out.ok();
}

fn lrem(c: &mut Ctx<'_>, a: &[&[u8]]) {
    // Redis 7.2+ reads the count in -LONG_MAX..=LONG_MAX (7.0 took -2^63).
    let count = match args::int(a[2]) {
        Ok(i64::MIN) => return c.out.error(args::NOT_NEGATABLE),
        Ok(n) => n,
        Err(e) => return reply_err(&mut c.out, e),
    };
    let (dbi, limits) = (c.session.db, limits(c.db));
    let l = match get_list_mut(c.db, dbi, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return c.out.int(0),
        Ok(Some(l)) => l,
    };
    let n = l.remove(limits, a[3], count);
    if n > 0 {
        removed(c.db, dbi, a[1], "lrem");
    }
    c.out.int(n as i64);
}

fn linsert(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let before = if args::is(a[2], "BEFORE") {
        true
    } else if args::is(a[2], "AFTER") {
        false
    } else {
        return reply_err(&mut c.out, OpError::Syntax);
    };
    let limits = limits(c.db);
    let l = match get_list_mut(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return c.out.int(0),
        Ok(Some(l)) => l,
    };
    if l.insert(limits, a[3], a[4], before) {
        c.out.int(l.len() as i64);
        c.db.modified(class::LIST, "linsert", c.session.db, a[1]);
    } else {
        c.out.int(-1);
    }
}

fn lpos(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<usize>, 0usize);
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        if args::is(a[j], "RANK") && more {
            j += 1;
            rank = match args::int(a[j]) {
                Err(e) => return reply_err(&mut c.out, e),
                // Redis 7.2+ (7.0 negates it and overflows).
                Ok(i64::MIN) => return c.out.error(args::NOT_NEGATABLE),
                Ok(0) => {
                    return c.out.error(
                        b"ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    )
                }
                Ok(r) => r,
            };
        } else if args::is(a[j], "COUNT") && more {
            j += 1;
            match non_negative(a[j], b"ERR COUNT can't be negative") {
                Ok(n) => count = Some(usize::try_from(n).unwrap_or(usize::MAX)),
                Err(m) => return c.out.error(m),
            }
        } else if args::is(a[j], "MAXLEN") && more {
            j += 1;
            match non_negative(a[j], b"ERR MAXLEN can't be negative") {
                Ok(n) => maxlen = usize::try_from(n).unwrap_or(usize::MAX),
                Err(m) => return c.out.error(m),
            }
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
        j += 1;
    }
    let l = match get_list(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => {
            if count.is_some() {
                c.out.array_len(0);
            } else {
                c.out.null();
            }
            return miss(c, a[1]);
        }
        Ok(Some(l)) => l,
    };
    match count {
        Some(n) => {
            let found = l.positions(a[2], rank, n, maxlen);
            c.out.array_len(found.len());
            for i in found {
                c.out.int(i as i64);
            }
        }
        None => match l.positions(a[2], rank, 1, maxlen).first() {
            Some(&i) => c.out.int(i as i64),
            None => c.out.null(),
        },
    }
}

fn move_and_reply(c: &mut Ctx<'_>, a: &[&[u8]], from_left: bool, to_left: bool) {
    match c.db.list_move(c.session.db, a[1], a[2], from_left, to_left) {
        Ok(Some(v)) => c.out.bulk(&v),
        Ok(None) => c.out.null(),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn lmove(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match (side(a[3]), side(a[4])) {
        (Some(f), Some(t)) => move_and_reply(c, a, f, t),
        _ => reply_err(&mut c.out, OpError::Syntax),
    }
}

fn rpoplpush(c: &mut Ctx<'_>, a: &[&[u8]]) {
    move_and_reply(c, a, false, true);
}

/// LMPOP's and BLMPOP's keys, side (`true` for LEFT) and count.
type Mpop<'a, 'b> = (&'a [&'b [u8]], bool, usize);

/// LMPOP's and BLMPOP's `numkeys key... LEFT|RIGHT [COUNT n]` from `a[at]`.
pub(crate) fn parse_mpop<'a, 'b>(
    a: &'a [&'b [u8]],
    at: usize,
) -> Result<Mpop<'a, 'b>, &'static [u8]> {
    let (keys, mut i) = args::numkeys(a, at)?;
    let left = side(a[i]).ok_or(OpError::Syntax.message().as_bytes())?;
    i += 1;
    let mut count = None;
    while i < a.len() {
        if count.is_none() && args::is(a[i], "COUNT") && i + 1 < a.len() {
            let n = count_at_least(a[i + 1], 1, b"ERR count should be greater than 0")?;
            count = Some(usize::try_from(n).unwrap_or(usize::MAX));
            i += 2;
        } else {
            return Err(OpError::Syntax.message().as_bytes());
        }
    }
    Ok((keys, left, count.unwrap_or(1)))
}

/// Writes LMPOP's reply: the key and the popped elements.
pub(crate) fn write_mpop(w: &mut ReplyWriter<'_>, key: &[u8], items: &[Vec<u8>]) {
    w.array_len(2);
    w.bulk(key);
    write_items(w, items);
}

fn lmpop(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (keys, left, count) = match parse_mpop(a, 1) {
        Ok(p) => p,
        Err(m) => return c.out.error(m),
    };
    let dbi = c.session.db;
    for k in keys {
        match c.db.list_pop(dbi, k, left, count) {
            Err(e) => return reply_err(&mut c.out, e),
            Ok(items) if items.is_empty() => {}
            Ok(items) => return write_mpop(&mut c.out, k, &items),
        }
    }
    c.out.null_array();
}

#[cfg(test)]
mod tests {
    use super::clamp;

    #[test]
    fn ranges_clamp_like_redis() {
        assert_eq!(clamp(5, 0, -1), Some((0, 4)));
        assert_eq!(clamp(5, -100, 100), Some((0, 4)));
        assert_eq!(clamp(5, 3, 1), None);
        assert_eq!(clamp(5, 5, 10), None);
        assert_eq!(clamp(5, i64::MIN, i64::MAX), Some((0, 4)));
        assert_eq!(clamp(5, i64::MAX, i64::MIN), None);
        assert_eq!(clamp(0, 0, -1), None);
    }
}
