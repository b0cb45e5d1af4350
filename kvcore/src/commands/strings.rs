//! String commands and the typed string API of [`Db`].
//!
//! Handlers parse arguments and write replies; the `Db` methods beside them do the work and
//! are what embedders call. GET writes straight from the stored bytes into the reply buffer.

use super::{args, cmd, flags::*, wrong_arity, CommandSpec, Ctx};
use crate::error::{OpError, OpResult};
use crate::events::class;
use crate::keyspace::{Keyspace, Ttl};
use crate::resp::long_double::{LongDouble, Operand};
use crate::resp::ReplyWriter;
use crate::value::{Stored, Value};
use crate::Db;

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("get", 2, READONLY | FAST, 1, 1, 1, get),
    cmd!("set", -3, WRITE | DENYOOM, 1, 1, 1, set),
    cmd!("setnx", 3, WRITE | DENYOOM | FAST, 1, 1, 1, setnx),
    cmd!("setex", 4, WRITE | DENYOOM, 1, 1, 1, setex),
    cmd!("psetex", 4, WRITE | DENYOOM, 1, 1, 1, psetex),
    cmd!("getset", 3, WRITE | DENYOOM | FAST, 1, 1, 1, getset),
    cmd!("getdel", 2, WRITE | FAST, 1, 1, 1, getdel),
    cmd!("getex", -2, WRITE | FAST, 1, 1, 1, getex),
    cmd!("mget", -2, READONLY | FAST, 1, -1, 1, mget),
    cmd!("mset", -3, WRITE | DENYOOM, 1, -1, 2, mset),
    cmd!("msetnx", -3, WRITE | DENYOOM, 1, -1, 2, msetnx),
    cmd!("append", 3, WRITE | DENYOOM | FAST, 1, 1, 1, append),
    cmd!("strlen", 2, READONLY | FAST, 1, 1, 1, strlen),
    cmd!("getrange", 4, READONLY, 1, 1, 1, getrange),
    cmd!("substr", 4, READONLY, 1, 1, 1, getrange),
    cmd!("setrange", 4, WRITE | DENYOOM, 1, 1, 1, setrange),
    cmd!("incr", 2, WRITE | DENYOOM | FAST, 1, 1, 1, incr),
    cmd!("decr", 2, WRITE | DENYOOM | FAST, 1, 1, 1, decr),
    cmd!("incrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1, incrby),
    cmd!("decrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1, decrby),
    cmd!(
        "incrbyfloat",
        3,
        WRITE | DENYOOM | FAST,
        1,
        1,
        1,
        incrbyfloat
    ),
];

// ---------------------------------------------------------------------------------------------
// Typed operations
// ---------------------------------------------------------------------------------------------

/// When SET writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SetCondition {
    /// Always.
    #[default]
    Always,
    /// Only if the key does not exist (NX).
    IfAbsent,
    /// Only if the key exists (XX).
    IfPresent,
}

/// Options of SET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetOptions {
    /// NX / XX.
    pub condition: SetCondition,
    /// What happens to the deadline.
    pub ttl: Ttl,
    /// Return the old value (GET).
    pub get: bool,
}

impl Default for SetOptions {
    fn default() -> Self {
        SetOptions {
            condition: SetCondition::Always,
            ttl: Ttl::Clear,
            get: false,
        }
    }
}

/// What SET did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetOutcome {
    /// Whether the value was written.
    pub written: bool,
    /// The previous value, when asked for with `get`.
    pub old: Option<Vec<u8>>,
}

fn string_bytes(v: Stored<'_>) -> OpResult<Vec<u8>> {
    let mut b = itoa::Buffer::new();
    v.as_str(&mut b)
        .map(<[u8]>::to_vec)
        .ok_or(OpError::WrongType)
}

impl Db {
    /// SET with options in database `dbi`.
    #[inline(always)]
    pub fn set_in(
        &mut self,
        dbi: usize,
        key: &[u8],
        value: &[u8],
        opt: SetOptions,
    ) -> OpResult<SetOutcome> {
        let now = self.now;
        let ks = &mut self.dbs[dbi];
        // A plain SET needs no look first: storing finds (and expires) the old key itself.
        let plain = opt.condition == SetCondition::Always && !opt.get;
        let (exists, old) = match if plain { None } else { ks.get(key, now) } {
            None if opt.get => {
                // GET's read lookup, then SET's write lookup.
                self.key_miss(dbi, key);
                (false, None)
            }
            None => (false, None),
            Some(n) if opt.get => (true, Some(string_bytes(n.value())?)),
            Some(_) => (true, None),
        };
        let allowed = match opt.condition {
            SetCondition::Always => true,
            SetCondition::IfAbsent => !exists,
            SetCondition::IfPresent => exists,
        };
        if allowed {
            // A deadline already past is stored as it is (the key expires on its next
            // lookup), as Redis does.
            if plain && matches!(opt.ttl, Ttl::Clear) {
                self.dbs[dbi].set_plain(key, value, now);
            } else {
                self.dbs[dbi].set_str(key, value, opt.ttl, now);
            }
            self.signal_modified(dbi, key);
            self.notify(class::STRING, "set", dbi, key);
            if let Ttl::At(_) = opt.ttl {
                self.notify(class::GENERIC, "expire", dbi, key);
            }
        }
        Ok(SetOutcome {
            written: allowed,
            old,
        })
    }

    /// SET key value (no options) in the embedded session's database.
    pub fn set(&mut self, key: &[u8], value: &[u8]) -> OpResult<()> {
        self.set_in(self.embedded_db(), key, value, SetOptions::default())
            .map(|_| ())
    }

    /// SET with options in the embedded session's database.
    pub fn set_with(&mut self, key: &[u8], value: &[u8], opt: SetOptions) -> OpResult<SetOutcome> {
        self.set_in(self.embedded_db(), key, value, opt)
    }

    /// GET in database `dbi`: a copy of the value.
    pub fn get_in(&mut self, dbi: usize, key: &[u8]) -> OpResult<Option<Vec<u8>>> {
        let now = self.now;
        match self.dbs[dbi].get(key, now) {
            None => Ok(None),
            Some(n) => string_bytes(n.value()).map(Some),
        }
    }

    /// GET in the embedded session's database.
    pub fn get(&mut self, key: &[u8]) -> OpResult<Option<Vec<u8>>> {
        self.get_in(self.embedded_db(), key)
    }

    /// INCRBY in database `dbi`; returns the new value.
    pub fn incr_by_in(&mut self, dbi: usize, key: &[u8], by: i64) -> OpResult<i64> {
        let now = self.now;
        let ks = &mut self.dbs[dbi];
        let add = |cur: i64| cur.checked_add(by).ok_or(OpError::Overflow);
        let r = match ks.update_int(key, now, add) {
            Some(Some(r)) => r,
            None => {
                ks.insert_absent(key, Value::Int(by), Ttl::Clear);
                Ok(by)
            }
            Some(None) => Self::incr_general(ks, key, by, now),
        };
        if r.is_ok() {
            self.modified(class::STRING, "incrby", dbi, key);
        }
        r
    }

    /// INCRBY on a key that does not hold an integer in its node (a string, or another type;
    /// or missing, if it expired since).
    fn incr_general(ks: &mut Keyspace, key: &[u8], by: i64, now: u64) -> OpResult<i64> {
        match ks.get_mut(key, now) {
            None => {
                ks.insert_absent(key, Value::Int(by), Ttl::Clear);
                Ok(by)
            }
            Some(v) => {
                let cur = match v {
                    Value::Int(i) => *i,
                    Value::Inline(b) if b.len() <= 20 => {
                        crate::num::parse_i64(b).ok_or(OpError::NotInteger)?
                    }
                    Value::Str(b) if b.len() <= 20 => {
                        crate::num::parse_i64(b).ok_or(OpError::NotInteger)?
                    }
                    Value::Raw(b) if b.len() <= 20 => {
                        crate::num::parse_i64(b).ok_or(OpError::NotInteger)?
                    }
                    Value::Inline(_) | Value::Str(_) | Value::Raw(_) => {
                        return Err(OpError::NotInteger)
                    }
                    _ => return Err(OpError::WrongType),
                };
                let new = cur.checked_add(by).ok_or(OpError::Overflow)?;
                *v = Value::Int(new);
                Ok(new)
            }
        }
    }

    /// INCRBY in the embedded session's database.
    pub fn incr_by(&mut self, key: &[u8], by: i64) -> OpResult<i64> {
        self.incr_by_in(self.embedded_db(), key, by)
    }

    /// INCRBYFLOAT in database `dbi`; returns the new value as Redis formats it. The sum is
    /// taken in `long double`, as Redis does (see [`crate::resp::long_double`]).
    pub fn incr_by_float_in(&mut self, dbi: usize, key: &[u8], by: f64) -> OpResult<Vec<u8>> {
        let by = if by.is_nan() {
            return Err(OpError::NotFloat);
        } else if by.is_infinite() {
            Operand::Infinite
        } else {
            Operand::Finite(LongDouble::from_f64(by))
        };
        self.incr_by_long_double(dbi, key, || Ok(by))
    }

    /// INCRBYFLOAT with the increment as the client sent it, read like `strtold`.
    pub fn incr_by_float_text_in(
        &mut self,
        dbi: usize,
        key: &[u8],
        by: &[u8],
    ) -> OpResult<Vec<u8>> {
        self.incr_by_long_double(dbi, key, || LongDouble::parse(by).ok_or(OpError::NotFloat))
    }

    /// Redis's order: the type, the stored number, then the increment, then the sum.
    fn incr_by_long_double(
        &mut self,
        dbi: usize,
        key: &[u8],
        by: impl FnOnce() -> OpResult<Operand>,
    ) -> OpResult<Vec<u8>> {
        let now = self.now;
        let ks = &mut self.dbs[dbi];
        let cur = match ks.get(key, now) {
            None => Operand::Finite(LongDouble::ZERO),
            Some(n) => {
                let mut b = itoa::Buffer::new();
                let s = n.value().as_str(&mut b).ok_or(OpError::WrongType)?;
                LongDouble::parse(s).ok_or(OpError::NotFloat)?
            }
        };
        let sum = match (cur, by()?) {
            (Operand::Finite(a), Operand::Finite(b)) => {
                a.checked_add(b).ok_or(OpError::NanOrInfinity)?
            }
            _ => return Err(OpError::NanOrInfinity),
        };
        let text = sum.to_human();
        ks.set(key, Value::string(&text), Ttl::Keep, now);
        self.modified(class::STRING, "incrbyfloat", dbi, key);
        Ok(text)
    }

    /// APPEND in database `dbi`; returns the new length.
    pub fn append_in(&mut self, dbi: usize, key: &[u8], tail: &[u8]) -> OpResult<usize> {
        let now = self.now;
        let max = self.config.proto_max_bulk_len;
        let ks = &mut self.dbs[dbi];
        let len = match ks.get_mut(key, now) {
            None => {
                ks.insert_absent(key, Value::from_bytes(tail), Ttl::Clear);
                tail.len()
            }
            Some(v) => {
                let len = v.str_len().ok_or(OpError::WrongType)?;
                if (len + tail.len()) as u64 > max {
                    return Err(OpError::StringTooLong);
                }
                let raw = v.make_raw().ok_or(OpError::WrongType)?;
                raw.extend_from_slice(tail);
                raw.len()
            }
        };
        self.modified(class::STRING, "append", dbi, key);
        Ok(len)
    }

    /// SETRANGE in database `dbi`; returns the new length.
    pub fn setrange_in(
        &mut self,
        dbi: usize,
        key: &[u8],
        offset: i64,
        bytes: &[u8],
    ) -> OpResult<usize> {
        if offset < 0 {
            return Err(OpError::OffsetOutOfRange);
        }
        let offset = offset as u64;
        let now = self.now;
        let max = self.config.proto_max_bulk_len;
        let ks = &mut self.dbs[dbi];
        let cur_len = match ks.get(key, now) {
            None => None,
            Some(n) => Some(n.value().str_len().ok_or(OpError::WrongType)?),
        };
        if bytes.is_empty() {
            return Ok(cur_len.unwrap_or(0));
        }
        if offset + bytes.len() as u64 > max {
            return Err(OpError::StringTooLong);
        }
        let offset = offset as usize;
        let end = offset + bytes.len();
        if cur_len.is_none() {
            let mut v = vec![0u8; end];
            v[offset..].copy_from_slice(bytes);
            ks.insert_absent(key, Value::Raw(Box::new(v)), Ttl::Clear);
            self.modified(class::STRING, "setrange", dbi, key);
            return Ok(end);
        }
        let v = ks
            .get_mut(key, now)
            .and_then(Value::make_raw)
            .ok_or(OpError::WrongType)?;
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset..end].copy_from_slice(bytes);
        let len = v.len();
        self.modified(class::STRING, "setrange", dbi, key);
        Ok(len)
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

pub(crate) fn reply_err(w: &mut ReplyWriter<'_>, e: OpError) {
    w.error(e.message().as_bytes());
}

/// Writes a string value as a bulk reply, or returns WRONGTYPE.
pub(crate) fn write_value(w: &mut ReplyWriter<'_>, v: Stored<'_>) -> OpResult<()> {
    match v {
        Stored::Str(b) => w.bulk(b),
        Stored::Int(i) => w.bulk_int(i),
        Stored::Value(Value::Int(i)) => w.bulk_int(*i),
        Stored::Value(Value::Inline(b)) => w.bulk(b),
        Stored::Value(Value::Str(b)) => w.bulk(b),
        Stored::Value(Value::Raw(b)) => w.bulk(b),
        _ => return Err(OpError::WrongType),
    }
    Ok(())
}

fn get(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let now = c.db.now;
    let dbi = c.session.db;
    match c.db.dbs[dbi].get(a[1], now) {
        None => {
            c.db.stats.keyspace_misses += 1;
            c.out.null();
            c.db.key_miss(dbi, a[1]);
        }
        Some(n) => {
            c.db.stats.keyspace_hits += 1;
            if let Err(e) = write_value(&mut c.out, n.value()) {
                reply_err(&mut c.out, e);
            }
        }
    }
}

fn invalid_expire(w: &mut ReplyWriter<'_>, cmd: &str) {
    let mut m = b"ERR invalid expire time in '".to_vec();
    m.extend_from_slice(cmd.as_bytes());
    m.extend_from_slice(b"' command");
    w.error(&m);
}

/// Unit of an expire argument.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExpireUnit {
    /// EX: relative seconds.
    Seconds,
    /// PX: relative milliseconds.
    Millis,
    /// EXAT: absolute Unix seconds.
    UnixSeconds,
    /// PXAT: absolute Unix milliseconds.
    UnixMillis,
}

/// Turns an expire argument into an absolute deadline as Redis's `getExpireMillisecondsOrReply`.
/// `Err(None)` = invalid expire time; `Err(Some(e))` = another error.
pub(crate) fn deadline(arg: &[u8], unit: ExpireUnit, now: u64) -> Result<u64, Option<OpError>> {
    let v = args::int(arg).map_err(Some)?;
    if v <= 0 {
        return Err(None);
    }
    let ms = match unit {
        ExpireUnit::Seconds | ExpireUnit::UnixSeconds => v.checked_mul(1000).ok_or(None)?,
        _ => v,
    };
    let at = match unit {
        ExpireUnit::Seconds | ExpireUnit::Millis => ms.checked_add(now as i64).ok_or(None)?,
        _ => ms,
    };
    Ok(at as u64)
}

/// Options of SET and GETEX as Redis reads them: an option is refused (syntax error) only
/// when one it conflicts with came earlier; a repeated option is accepted and the last
/// expire value wins (`SET k v EX 1 EX 2` sets 2 seconds).
#[derive(Default)]
struct ExtOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<(ExpireUnit, &'a [u8])>,
}

/// Parses SET's (`for_set`) or GETEX's options from `a[start..]`; `None` is a syntax error.
fn parse_ext_options<'a>(a: &[&'a [u8]], start: usize, for_set: bool) -> Option<ExtOptions<'a>> {
    let mut o = ExtOptions::default();
    let mut i = start;
    while i < a.len() {
        let opt = a[i];
        let next = a.get(i + 1).copied();
        let unit = [
            ("EX", ExpireUnit::Seconds),
            ("PX", ExpireUnit::Millis),
            ("EXAT", ExpireUnit::UnixSeconds),
            ("PXAT", ExpireUnit::UnixMillis),
        ]
        .into_iter()
        .find(|(n, _)| args::is(opt, n))
        .map(|(_, u)| u);
        if let Some(u) = unit {
            let other_unit = o.expire.is_some_and(|(prev, _)| prev != u);
            match next {
                Some(v) if !o.keepttl && !o.persist && !other_unit => {
                    o.expire = Some((u, v));
                    i += 1;
                }
                _ => return None,
            }
        } else if for_set && args::is(opt, "NX") && !o.xx {
            o.nx = true;
        } else if for_set && args::is(opt, "XX") && !o.nx {
            o.xx = true;
        } else if for_set && args::is(opt, "GET") {
            o.get = true;
        } else if for_set && args::is(opt, "KEEPTTL") && o.expire.is_none() {
            o.keepttl = true;
        } else if !for_set && args::is(opt, "PERSIST") && o.expire.is_none() {
            o.persist = true;
        } else {
            return None;
        }
        i += 1;
    }
    Some(o)
}

fn set(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if a.len() == 3 {
        // No options (most SETs): what reading none would give.
        return match c.db.set_in(c.session.db, a[1], a[2], SetOptions::default()) {
            Ok(_) => c.out.ok(),
            Err(e) => reply_err(&mut c.out, e),
        };
    }
    let Some(ext) = parse_ext_options(a, 3, true) else {
        return c.out.error(b"ERR syntax error");
    };
    let mut opt = SetOptions {
        get: ext.get,
        ..SetOptions::default()
    };
    if ext.nx {
        opt.condition = SetCondition::IfAbsent;
    } else if ext.xx {
        opt.condition = SetCondition::IfPresent;
    }
    let (expire, keepttl) = (ext.expire, ext.keepttl);
    let now = c.db.now;
    opt.ttl = match expire {
        Some((u, arg)) => match deadline(arg, u, now) {
            Ok(at) => Ttl::At(at),
            Err(None) => return invalid_expire(&mut c.out, "set"),
            Err(Some(e)) => return reply_err(&mut c.out, e),
        },
        None if keepttl => Ttl::Keep,
        None => Ttl::Clear,
    };
    match c.db.set_in(c.session.db, a[1], a[2], opt) {
        Err(e) => reply_err(&mut c.out, e),
        Ok(SetOutcome { old, .. }) if opt.get => match old {
            Some(v) => c.out.bulk(&v),
            None => c.out.null(),
        },
        Ok(SetOutcome { written: true, .. }) => c.out.ok(),
        Ok(_) => c.out.null(),
    }
}

fn setnx(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let opt = SetOptions {
        condition: SetCondition::IfAbsent,
        ..SetOptions::default()
    };
    match c.db.set_in(c.session.db, a[1], a[2], opt) {
        Ok(o) => c.out.int(i64::from(o.written)),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn setex_common(c: &mut Ctx<'_>, a: &[&[u8]], unit: ExpireUnit, name: &str) {
    let at = match deadline(a[2], unit, c.db.now) {
        Ok(at) => at,
        Err(None) => return invalid_expire(&mut c.out, name),
        Err(Some(e)) => return reply_err(&mut c.out, e),
    };
    let opt = SetOptions {
        ttl: Ttl::At(at),
        ..SetOptions::default()
    };
    match c.db.set_in(c.session.db, a[1], a[3], opt) {
        Ok(_) => c.out.ok(),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn setex(c: &mut Ctx<'_>, a: &[&[u8]]) {
    setex_common(c, a, ExpireUnit::Seconds, "setex");
}

fn psetex(c: &mut Ctx<'_>, a: &[&[u8]]) {
    setex_common(c, a, ExpireUnit::Millis, "psetex");
}

fn getset(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let opt = SetOptions {
        get: true,
        ..SetOptions::default()
    };
    match c.db.set_in(c.session.db, a[1], a[2], opt) {
        Ok(SetOutcome { old: Some(v), .. }) => c.out.bulk(&v),
        Ok(_) => c.out.null(),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn getdel(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let now = c.db.now;
    let dbi = c.session.db;
    let ks = &mut c.db.dbs[dbi];
    match ks.get(a[1], now) {
        None => {
            c.out.null();
            c.db.key_miss(dbi, a[1]);
        }
        Some(n) => {
            if let Err(e) = write_value(&mut c.out, n.value()) {
                return reply_err(&mut c.out, e);
            }
            ks.remove(a[1], now);
            c.db.modified(class::GENERIC, "del", dbi, a[1]);
        }
    }
}

/// GETEX in Redis's order: syntax, then a missing key answers nil (whatever the expire value),
/// then the type, then the expire value.
fn getex(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let now = c.db.now;
    let Some(ext) = parse_ext_options(a, 2, false) else {
        return c.out.error(b"ERR syntax error");
    };
    let dbi = c.session.db;
    let ks = &mut c.db.dbs[dbi];
    let Some(n) = ks.get(a[1], now) else {
        c.out.null();
        return c.db.key_miss(dbi, a[1]);
    };
    if n.value().str_len().is_none() {
        return reply_err(&mut c.out, OpError::WrongType);
    }
    let n_had_ttl = n.expire_at().is_some();
    // None = leave the deadline; Some(None) = PERSIST; Some(Some(t)) = new deadline.
    let change = match ext.expire {
        Some((u, arg)) => match deadline(arg, u, now) {
            Ok(at) => Some(Some(at)),
            Err(None) => return invalid_expire(&mut c.out, "getex"),
            Err(Some(e)) => return reply_err(&mut c.out, e),
        },
        None if ext.persist => Some(None),
        None => None,
    };
    if let Err(e) = write_value(&mut c.out, n.value()) {
        return reply_err(&mut c.out, e);
    }
    match change {
        None => {}
        Some(Some(at)) if at <= now => {
            ks.remove(a[1], now);
            c.db.modified(class::GENERIC, "del", dbi, a[1]);
        }
        Some(Some(at)) => {
            ks.set_expire(a[1], Some(at), now);
            c.db.modified(class::GENERIC, "expire", dbi, a[1]);
        }
        Some(None) if n_had_ttl => {
            ks.set_expire(a[1], None, now);
            c.db.modified(class::GENERIC, "persist", dbi, a[1]);
        }
        Some(None) => {}
    }
}

fn mget(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let now = c.db.now;
    c.out.array_len(a.len() - 1);
    let dbi = c.session.db;
    for key in &a[1..] {
        match c.db.dbs[dbi].get(key, now) {
            Some(n) if write_value(&mut c.out, n.value()).is_ok() => c.db.stats.keyspace_hits += 1,
            Some(_) => c.out.null(),
            None => {
                c.db.stats.keyspace_misses += 1;
                c.out.null();
                c.db.key_miss(dbi, key);
            }
        }
    }
}

fn mset(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if a.len() % 2 == 0 {
        return wrong_arity(&mut c.out, "mset");
    }
    let now = c.db.now;
    let dbi = c.session.db;
    for kv in a[1..].chunks_exact(2) {
        c.db.dbs[dbi].set_str(kv[0], kv[1], Ttl::Clear, now);
        c.db.modified(class::STRING, "set", dbi, kv[0]);
    }
    c.out.ok();
}

fn msetnx(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if a.len() % 2 == 0 {
        return wrong_arity(&mut c.out, "msetnx");
    }
    let now = c.db.now;
    let dbi = c.session.db;
    let ks = &mut c.db.dbs[dbi];
    if a[1..].chunks_exact(2).any(|kv| ks.contains(kv[0], now)) {
        return c.out.int(0);
    }
    for kv in a[1..].chunks_exact(2) {
        c.db.dbs[dbi].set_str(kv[0], kv[1], Ttl::Clear, now);
        c.db.modified(class::STRING, "set", dbi, kv[0]);
    }
    c.out.int(1);
}

fn append(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match c.db.append_in(c.session.db, a[1], a[2]) {
        Ok(n) => c.out.int(n as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn strlen(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let now = c.db.now;
    let dbi = c.session.db;
    match c.db.dbs[dbi].get(a[1], now) {
        None => {
            c.out.int(0);
            c.db.key_miss(dbi, a[1]);
        }
        Some(n) => match n.value().str_len() {
            Some(l) => c.out.int(l as i64),
            None => reply_err(&mut c.out, OpError::WrongType),
        },
    }
}

fn getrange(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (start, end) = match (args::int(a[2]), args::int(a[3])) {
        (Ok(s), Ok(e)) => (s, e),
        _ => return reply_err(&mut c.out, OpError::NotInteger),
    };
    let now = c.db.now;
    let dbi = c.session.db;
    let Some(n) = c.db.dbs[dbi].get(a[1], now) else {
        c.out.bulk(b"");
        return c.db.key_miss(dbi, a[1]);
    };
    let mut buf = itoa::Buffer::new();
    let Some(s) = n.value().as_str(&mut buf) else {
        return reply_err(&mut c.out, OpError::WrongType);
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return c.out.bulk(b"");
    }
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return c.out.bulk(b"");
    }
    c.out.bulk(&s[start as usize..=end as usize]);
}

fn setrange(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let offset = match args::int(a[2]) {
        Ok(o) => o,
        Err(e) => return reply_err(&mut c.out, e),
    };
    match c.db.setrange_in(c.session.db, a[1], offset, a[3]) {
        Ok(n) => c.out.int(n as i64),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn incr_common(c: &mut Ctx<'_>, key: &[u8], by: i64) {
    match c.db.incr_by_in(c.session.db, key, by) {
        Ok(n) => c.out.int(n),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn incr(c: &mut Ctx<'_>, a: &[&[u8]]) {
    incr_common(c, a[1], 1);
}

fn decr(c: &mut Ctx<'_>, a: &[&[u8]]) {
    incr_common(c, a[1], -1);
}

fn incrby(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match args::int(a[2]) {
        Ok(by) => incr_common(c, a[1], by),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn decrby(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match args::int(a[2]) {
        Ok(i64::MIN) => c.out.error(b"ERR decrement would overflow"),
        Ok(by) => incr_common(c, a[1], -by),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn incrbyfloat(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match c.db.incr_by_float_text_in(c.session.db, a[1], a[2]) {
        Ok(v) => c.out.bulk(&v),
        Err(e) => reply_err(&mut c.out, e),
    }
}
