//! Generic key commands: DEL, EXISTS, TYPE, expiry, RENAME, COPY, MOVE, KEYS, SCAN, OBJECT ...

use super::strings::reply_err;
use super::{args, cmd, flags::*, unknown_subcommand, wrong_arity, CommandSpec, Ctx};
use crate::error::{OpError, OpResult};
use crate::events::class;
use crate::glob;
use crate::keyspace::{KeyNode, Ttl};
use crate::value::ValueType;
use crate::Db;

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("del", -2, WRITE, 1, -1, 1, del),
    cmd!("unlink", -2, WRITE | FAST, 1, -1, 1, del),
    cmd!("exists", -2, READONLY | FAST, 1, -1, 1, exists),
    cmd!("touch", -2, READONLY | FAST, 1, -1, 1, touch),
    cmd!("type", 2, READONLY | FAST, 1, 1, 1, type_),
    cmd!("expire", -3, WRITE | FAST, 1, 1, 1, expire),
    cmd!("pexpire", -3, WRITE | FAST, 1, 1, 1, pexpire),
    cmd!("expireat", -3, WRITE | FAST, 1, 1, 1, expireat),
    cmd!("pexpireat", -3, WRITE | FAST, 1, 1, 1, pexpireat),
    cmd!("ttl", 2, READONLY | FAST, 1, 1, 1, ttl),
    cmd!("pttl", 2, READONLY | FAST, 1, 1, 1, pttl),
    cmd!("expiretime", 2, READONLY | FAST, 1, 1, 1, expiretime),
    cmd!("pexpiretime", 2, READONLY | FAST, 1, 1, 1, pexpiretime),
    cmd!("persist", 2, WRITE | FAST, 1, 1, 1, persist),
    cmd!("rename", 3, WRITE, 1, 2, 1, rename),
    cmd!("renamenx", 3, WRITE | FAST, 1, 2, 1, renamenx),
    cmd!("copy", -3, WRITE | DENYOOM, 1, 2, 1, copy),
    cmd!("move", 3, WRITE | FAST, 1, 1, 1, move_),
    cmd!("keys", 2, READONLY | ALL_KEYS, 0, 0, 0, keys),
    cmd!("scan", -2, READONLY | ALL_KEYS, 0, 0, 0, scan),
    cmd!("randomkey", 1, READONLY | ALL_KEYS, 0, 0, 0, randomkey),
    cmd!("object", -2, MOVABLE_KEYS, 0, 0, 0, object),
];

// ---------------------------------------------------------------------------------------------
// Typed operations
// ---------------------------------------------------------------------------------------------

/// Condition flags of EXPIRE and friends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireFlags {
    /// Only when the key has no deadline.
    pub nx: bool,
    /// Only when the key has a deadline.
    pub xx: bool,
    /// Only when the new deadline is later.
    pub gt: bool,
    /// Only when the new deadline is earlier.
    pub lt: bool,
}

impl Db {
    /// DEL in database `dbi`: the number of keys removed.
    pub fn del_in(&mut self, dbi: usize, keys: &[&[u8]]) -> usize {
        let now = self.now;
        let mut n = 0;
        for k in keys {
            if self.dbs[dbi].remove(k, now).is_some() {
                self.modified(class::GENERIC, "del", dbi, k);
                n += 1;
            }
        }
        n
    }

    /// DEL in the embedded session's database.
    pub fn del(&mut self, keys: &[&[u8]]) -> usize {
        self.del_in(self.embedded_db(), keys)
    }

    /// EXISTS in database `dbi` (a key named twice counts twice). Each miss is a `keymiss`.
    pub fn exists_in(&mut self, dbi: usize, keys: &[&[u8]]) -> usize {
        let now = self.now;
        let mut n = 0;
        for k in keys {
            if self.dbs[dbi].get_untouched(k, now).is_some() {
                n += 1;
            } else {
                self.key_miss(dbi, k);
            }
        }
        n
    }

    /// TOUCH in database `dbi`: how many of `keys` exist, recording an access to each.
    pub fn touch_in(&mut self, dbi: usize, keys: &[&[u8]]) -> usize {
        let now = self.now;
        let mut n = 0;
        for k in keys {
            if self.dbs[dbi].contains(k, now) {
                n += 1;
            } else {
                self.key_miss(dbi, k);
            }
        }
        n
    }

    /// EXISTS in the embedded session's database.
    pub fn exists(&mut self, keys: &[&[u8]]) -> usize {
        self.exists_in(self.embedded_db(), keys)
    }

    /// Sets the deadline of `key` in database `dbi` to `at` (Unix ms) under `flags`; a deadline
    /// in the past deletes the key. Returns whether the deadline was set.
    pub fn expire_at_in(&mut self, dbi: usize, key: &[u8], at: u64, flags: ExpireFlags) -> bool {
        let now = self.now;
        let ks = &mut self.dbs[dbi];
        let Some(cur) = ks.expire_of(key, now) else {
            return false;
        };
        let ok = match cur {
            Some(_) if flags.nx => false,
            None if flags.xx || flags.gt => false,
            Some(c) if flags.gt && at <= c => false,
            Some(c) if flags.lt && at >= c => false,
            _ => true,
        };
        if !ok {
            return false;
        }
        if at <= now {
            ks.remove(key, now);
            self.modified(class::GENERIC, "del", dbi, key);
        } else {
            ks.set_expire(key, Some(at), now);
            self.modified(class::GENERIC, "expire", dbi, key);
        }
        true
    }

    /// EXPIRE key seconds (no flags) in the embedded session's database.
    pub fn expire(&mut self, key: &[u8], seconds: u64) -> bool {
        let at = self.now.saturating_add(seconds.saturating_mul(1000));
        self.expire_at_in(self.embedded_db(), key, at, ExpireFlags::default())
    }

    /// Remaining time to live in ms: `None` if the key is missing, `Some(None)` if it has no
    /// deadline.
    pub fn pttl_in(&mut self, dbi: usize, key: &[u8]) -> Option<Option<u64>> {
        let now = self.now;
        self.dbs[dbi]
            .expire_of(key, now)
            .map(|d| d.map(|at| at.saturating_sub(now)))
    }

    /// PTTL in the embedded session's database.
    pub fn pttl(&mut self, key: &[u8]) -> Option<Option<u64>> {
        self.pttl_in(self.embedded_db(), key)
    }

    /// PERSIST in database `dbi`: whether a deadline was removed.
    pub fn persist_in(&mut self, dbi: usize, key: &[u8]) -> bool {
        let now = self.now;
        let ks = &mut self.dbs[dbi];
        let done = matches!(ks.expire_of(key, now), Some(Some(_))) && ks.set_expire(key, None, now);
        if done {
            self.modified(class::GENERIC, "persist", dbi, key);
        }
        done
    }

    /// RENAME (or RENAMENX with `nx`) in database `dbi`; returns whether it renamed.
    pub fn rename_in(&mut self, dbi: usize, from: &[u8], to: &[u8], nx: bool) -> OpResult<bool> {
        let now = self.now;
        let ks = &mut self.dbs[dbi];
        if !ks.contains(from, now) {
            return Err(OpError::NoSuchKey);
        }
        if from == to {
            return Ok(!nx);
        }
        // The destination is deleted before it is added again (so it is always `new`).
        if ks.contains(to, now) {
            if nx {
                return Ok(false);
            }
            ks.remove(to, now);
        }
        let (value, ttl) = ks.take(from, now).ok_or(OpError::NoSuchKey)?;
        ks.set(to, value, ttl, now);
        self.signal_modified(dbi, from);
        self.signal_modified(dbi, to);
        self.notify(class::GENERIC, "rename_from", dbi, from);
        self.notify(class::GENERIC, "rename_to", dbi, to);
        Ok(true)
    }

    /// COPY from database `dbi` to `dst_db`; returns whether it copied.
    pub fn copy_in(
        &mut self,
        dbi: usize,
        from: &[u8],
        dst_db: usize,
        to: &[u8],
        replace: bool,
    ) -> OpResult<bool> {
        if dst_db >= self.dbs.len() {
            return Err(OpError::DbIndexOutOfRange);
        }
        if dbi == dst_db && from == to {
            return Err(OpError::SameObject);
        }
        let now = self.now;
        let Some(node) = self.dbs[dbi].get(from, now) else {
            self.key_miss(dbi, from);
            return Ok(false);
        };
        let value = node.value().to_value();
        let ttl = node.expire_at().map_or(Ttl::Clear, Ttl::At);
        // Events of the source's database first (the lookups' order).
        self.pull_keyspace_logs();
        let dst = &mut self.dbs[dst_db];
        if dst.contains(to, now) {
            if !replace {
                return Ok(false);
            }
            dst.remove(to, now);
        }
        dst.set(to, value, ttl, now);
        self.modified(class::GENERIC, "copy_to", dst_db, to);
        Ok(true)
    }

    /// MOVE from database `dbi` to `dst_db`; returns whether it moved.
    pub fn move_in(&mut self, dbi: usize, key: &[u8], dst_db: usize) -> OpResult<bool> {
        if dst_db >= self.dbs.len() {
            return Err(OpError::DbIndexOutOfRange);
        }
        if dst_db == dbi {
            return Err(OpError::SameObject);
        }
        let now = self.now;
        if !self.dbs[dbi].contains(key, now) {
            return Ok(false);
        }
        // Events of the source's database first (the lookups' order).
        self.pull_keyspace_logs();
        if self.dbs[dst_db].contains(key, now) {
            return Ok(false);
        }
        let (value, ttl) = self.dbs[dbi].take(key, now).ok_or(OpError::NoSuchKey)?;
        self.dbs[dst_db].set(key, value, ttl, now);
        self.signal_modified(dbi, key);
        self.signal_modified(dst_db, key);
        self.notify(class::GENERIC, "move_from", dbi, key);
        self.notify(class::GENERIC, "move_to", dst_db, key);
        Ok(true)
    }

    /// Removes a live key and returns its value and deadline (to move it to another shard).
    /// Touches the key's watchers; the event (`rename_from`, `move_from` ...) is the caller's.
    pub fn take_in(&mut self, dbi: usize, key: &[u8]) -> Option<(crate::value::Value, Ttl)> {
        let now = self.now;
        let taken = self.dbs[dbi].take(key, now);
        if taken.is_some() {
            self.signal_modified(dbi, key);
        }
        taken
    }

    /// A copy of a live key's value and deadline (to copy it to another shard). Raises no
    /// event: a COPY whose source is missing leaves its `keymiss` to the caller (a command run
    /// by [`Db::dispatch_with_sources`] raises its own for a source provided as missing).
    pub fn dump_in(&mut self, dbi: usize, key: &[u8]) -> Option<(crate::value::Value, Ttl)> {
        let now = self.now;
        let n = self.dbs[dbi].get(key, now)?;
        Some((
            n.value().to_value(),
            n.expire_at().map_or(Ttl::Clear, Ttl::At),
        ))
    }

    /// Stores a value taken from another shard, replacing any value the key had: the old
    /// key is deleted first, so the key is `new` (Redis's dbDelete + dbAdd in RENAME, MOVE,
    /// COPY). Touches the key's watchers; the event (`rename_to`, `copy_to` ...) is the
    /// caller's.
    pub fn restore_in(&mut self, dbi: usize, key: &[u8], value: crate::value::Value, ttl: Ttl) {
        let now = self.now;
        self.dbs[dbi].remove(key, now);
        self.dbs[dbi].set(key, value, ttl, now);
        self.signal_modified(dbi, key);
    }

    /// KEYS: every live key of database `dbi` matching `pattern`.
    pub fn keys_in(&self, dbi: usize, pattern: &[u8]) -> Vec<Vec<u8>> {
        let now = self.now;
        let all = pattern == b"*";
        self.dbs[dbi]
            .iter()
            .filter(|n| n.expire_at().is_none_or(|t| t >= now))
            .filter(|n| all || glob::matches(pattern, n.key(), false))
            .map(|n| n.key().to_vec())
            .collect()
    }

    /// One SCAN call over database `dbi`: returns the next cursor and the keys found.
    pub fn scan_in(
        &mut self,
        dbi: usize,
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
        ty: Option<&[u8]>,
    ) -> (u64, Vec<Vec<u8>>) {
        let now = self.now;
        let mut found = Vec::new();
        let mut cursor = cursor;
        let mut budget = count.saturating_mul(10).max(1);
        let type_filter = ty.map(ValueType::from_name);
        let mut expired: Vec<Box<[u8]>> = Vec::new();
        loop {
            cursor = self.dbs[dbi].scan(cursor, |n| {
                if n.expire_at().is_some_and(|t| t < now) {
                    // Redis deletes the expired keys a scan meets (`expired` events).
                    let by_pattern = pattern.is_none_or(|p| glob::matches(p, n.key(), false));
                    if by_pattern {
                        expired.push(n.key().into());
                    }
                    return;
                }
                if let Some(p) = pattern {
                    if !glob::matches(p, n.key(), false) {
                        return;
                    }
                }
                if let Some(t) = type_filter {
                    if t != Some(n.value().value_type()) {
                        return;
                    }
                }
                found.push(n.key().to_vec());
            });
            budget -= 1;
            if cursor == 0 || budget == 0 || found.len() >= count {
                break;
            }
        }
        for k in expired {
            self.dbs[dbi].contains(&k, now);
        }
        (cursor, found)
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

fn del(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let n = c.db.del_in(c.session.db, &a[1..]);
    c.out.int(n as i64);
}

fn exists(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let n = c.db.exists_in(c.session.db, &a[1..]);
    c.out.int(n as i64);
}

fn touch(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let n = c.db.touch_in(c.session.db, &a[1..]);
    c.out.int(n as i64);
}

fn type_(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let now = c.db.now;
    match c.db.dbs[c.session.db].get_untouched(a[1], now) {
        None => {
            c.out.simple(b"none");
            c.db.key_miss(c.session.db, a[1]);
        }
        Some(n) => c.out.simple(n.value().value_type().name().as_bytes()),
    }
}

fn expire_generic(c: &mut Ctx<'_>, a: &[&[u8]], unit_ms: bool, absolute: bool, name: &str) {
    // Redis checks the options before the time.
    let mut f = ExpireFlags::default();
    for o in &a[3..] {
        if args::is(o, "NX") {
            f.nx = true;
        } else if args::is(o, "XX") {
            f.xx = true;
        } else if args::is(o, "GT") {
            f.gt = true;
        } else if args::is(o, "LT") {
            f.lt = true;
        } else {
            let mut m = b"ERR Unsupported option ".to_vec();
            m.extend_from_slice(super::c_str(o));
            return c.out.error(&super::sanitize(m));
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return reply_err(&mut c.out, OpError::ExpireFlagsConflict);
    }
    if f.gt && f.lt {
        return c
            .out
            .error(b"ERR GT and LT options at the same time are not compatible");
    }
    let when = match args::int(a[2]) {
        Ok(w) => w,
        Err(e) => return reply_err(&mut c.out, e),
    };
    let invalid = |c: &mut Ctx<'_>| {
        let mut m = b"ERR invalid expire time in '".to_vec();
        m.extend_from_slice(name.as_bytes());
        m.extend_from_slice(b"' command");
        c.out.error(&m);
    };
    let ms = if unit_ms {
        Some(when)
    } else {
        when.checked_mul(1000)
    };
    let at = match ms {
        Some(ms) if absolute => Some(ms),
        Some(ms) => ms.checked_add(c.db.now as i64),
        None => None,
    };
    let Some(at) = at else { return invalid(c) };
    // A deadline at or before the epoch deletes the key like any deadline in the past.
    let at = at.max(0) as u64;
    let done = c.db.expire_at_in(c.session.db, a[1], at, f);
    c.out.int(i64::from(done));
}

fn expire(c: &mut Ctx<'_>, a: &[&[u8]]) {
    expire_generic(c, a, false, false, "expire");
}
fn pexpire(c: &mut Ctx<'_>, a: &[&[u8]]) {
    expire_generic(c, a, true, false, "pexpire");
}
fn expireat(c: &mut Ctx<'_>, a: &[&[u8]]) {
    expire_generic(c, a, false, true, "expireat");
}
fn pexpireat(c: &mut Ctx<'_>, a: &[&[u8]]) {
    expire_generic(c, a, true, true, "pexpireat");
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 missing, -1 no deadline.
fn ttl_generic(c: &mut Ctx<'_>, a: &[&[u8]], ms: bool, absolute: bool) {
    let now = c.db.now;
    match c.db.dbs[c.session.db]
        .get_untouched(a[1], now)
        .map(KeyNode::expire_at)
    {
        None => {
            c.out.int(-2);
            c.db.key_miss(c.session.db, a[1]);
        }
        Some(None) => c.out.int(-1),
        Some(Some(at)) => {
            let v = match (absolute, ms) {
                (true, true) => at,
                (true, false) => at / 1000,
                (false, true) => at.saturating_sub(now),
                (false, false) => (at.saturating_sub(now) + 500) / 1000,
            };
            c.out.int(v as i64);
        }
    }
}

fn ttl(c: &mut Ctx<'_>, a: &[&[u8]]) {
    ttl_generic(c, a, false, false);
}
fn pttl(c: &mut Ctx<'_>, a: &[&[u8]]) {
    ttl_generic(c, a, true, false);
}
fn expiretime(c: &mut Ctx<'_>, a: &[&[u8]]) {
    ttl_generic(c, a, false, true);
}
fn pexpiretime(c: &mut Ctx<'_>, a: &[&[u8]]) {
    ttl_generic(c, a, true, true);
}

fn persist(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let done = c.db.persist_in(c.session.db, a[1]);
    c.out.int(i64::from(done));
}

fn rename(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match c.db.rename_in(c.session.db, a[1], a[2], false) {
        Ok(_) => c.out.ok(),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn renamenx(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match c.db.rename_in(c.session.db, a[1], a[2], true) {
        Ok(done) => c.out.int(i64::from(done)),
        Err(e) => reply_err(&mut c.out, e),
    }
}

/// Parses a database index argument as MOVE / COPY DB do: a C `int` first, then an index.
fn db_index(c: &Ctx<'_>, arg: &[u8]) -> OpResult<usize> {
    let i = args::int32(arg)?;
    match usize::try_from(i) {
        Ok(i) if i < c.db.databases() => Ok(i),
        _ => Err(OpError::DbIndexOutOfRange),
    }
}

fn copy(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let mut dst_db = c.session.db;
    let mut replace = false;
    let mut i = 3;
    while i < a.len() {
        if args::is(a[i], "REPLACE") {
            replace = true;
            i += 1;
        } else if args::is(a[i], "DB") && i + 1 < a.len() {
            match db_index(c, a[i + 1]) {
                Ok(d) => dst_db = d,
                Err(e) => return reply_err(&mut c.out, e),
            }
            i += 2;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
    }
    match c.db.copy_in(c.session.db, a[1], dst_db, a[2], replace) {
        Ok(done) => c.out.int(i64::from(done)),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn move_(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let dst = match db_index(c, a[2]) {
        Ok(d) => d,
        Err(e) => return reply_err(&mut c.out, e),
    };
    match c.db.move_in(c.session.db, a[1], dst) {
        Ok(done) => c.out.int(i64::from(done)),
        Err(e) => reply_err(&mut c.out, e),
    }
}

fn keys(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let keys = c.db.keys_in(c.session.db, a[1]);
    c.out.array_len(keys.len());
    for k in &keys {
        c.out.bulk(k);
    }
}

/// Parsed SCAN arguments (after the cursor).
pub struct ScanArgs<'a> {
    /// The cursor.
    pub cursor: u64,
    /// MATCH pattern.
    pub pattern: Option<&'a [u8]>,
    /// COUNT hint.
    pub count: usize,
    /// TYPE filter.
    pub ty: Option<&'a [u8]>,
}

/// Parses `SCAN cursor [MATCH p] [COUNT n] [TYPE t]`; `Err` carries the reply text.
pub fn parse_scan<'a>(a: &[&'a [u8]]) -> Result<ScanArgs<'a>, &'static [u8]> {
    // As Redis 7.2+'s string2ull (7.0 used strtoul: it took "" and wrapped "-1" around).
    let Some(cursor) = crate::num::string2ull(a[1]) else {
        return Err(b"ERR invalid cursor");
    };
    let mut s = ScanArgs {
        cursor,
        pattern: None,
        count: 10,
        ty: None,
    };
    let mut i = 2;
    while i < a.len() {
        if i + 1 >= a.len() {
            return Err(b"ERR syntax error");
        }
        let v = a[i + 1];
        if args::is(a[i], "COUNT") {
            match args::int(v) {
                Ok(n) if n >= 1 => s.count = n as usize,
                Ok(_) => return Err(b"ERR syntax error"),
                Err(_) => return Err(b"ERR value is not an integer or out of range"),
            }
        } else if args::is(a[i], "MATCH") {
            s.pattern = (v != b"*").then_some(v);
        } else if args::is(a[i], "TYPE") {
            s.ty = Some(v);
        } else {
            return Err(b"ERR syntax error");
        }
        i += 2;
    }
    Ok(s)
}

fn scan(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let s = match parse_scan(a) {
        Ok(s) => s,
        Err(msg) => return c.out.error(msg),
    };
    let (next, keys) =
        c.db.scan_in(c.session.db, s.cursor, s.pattern, s.count, s.ty);
    c.out.array_len(2);
    c.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    c.out.array_len(keys.len());
    for k in &keys {
        c.out.bulk(k);
    }
}

fn randomkey(c: &mut Ctx<'_>, _a: &[&[u8]]) {
    let now = c.db.now;
    let dbi = c.session.db;
    let mut seed = c.db.random();
    let key = c.db.dbs[dbi].random_key(
        || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 11 ^ seed
        },
        now,
    );
    match key {
        Some(k) => c.out.bulk(&k),
        None => c.out.null(),
    }
}

const OBJECT_HELP: &[&str] = &[
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
];

fn object(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let sub = a[1];
    let arity_ok = a.len() == 3;
    if args::is(sub, "HELP") {
        if a.len() != 2 {
            return wrong_arity(&mut c.out, "object|help");
        }
        return c.out.help("object", OBJECT_HELP);
    }
    let name = if args::is(sub, "ENCODING") {
        "object|encoding"
    } else if args::is(sub, "REFCOUNT") {
        "object|refcount"
    } else if args::is(sub, "IDLETIME") {
        "object|idletime"
    } else if args::is(sub, "FREQ") {
        "object|freq"
    } else {
        return unknown_subcommand(&mut c.out, "object", sub);
    };
    if !arity_ok {
        return wrong_arity(&mut c.out, name);
    }
    let now = c.db.now;
    let Some(n) = c.db.dbs[c.session.db].get_untouched(a[2], now) else {
        return c.out.null();
    };
    let lfu = c.db.config.policy.is_lfu();
    match name {
        "object|encoding" => c.out.bulk(n.value().encoding().as_bytes()),
        "object|refcount" => {
            // Redis shares the integers 0..10000 (refcount INT_MAX) unless an LRU/LFU policy
            // needs per-key access data.
            let lru_lfu = c
                .db
                .config
                .get("maxmemory-policy")
                .is_some_and(|p| p.contains("lru") || p.contains("lfu"));
            let shared = n.value().shared_int() && !lru_lfu;
            c.out.int(if shared { i64::from(i32::MAX) } else { 1 })
        }
        "object|idletime" if !lfu => {
            c.out.int((crate::evict::idle_ms(n.access(), now) / 1000) as i64)
        }
        "object|idletime" => c.out.error(b"ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
        _ if lfu => c.out.int(i64::from(crate::evict::lfu_counter(
            n.access(),
            now,
            c.db.config.lfu_decay_time,
        ))),
        _ => c.out.error(b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
    }
}
