//! DUMP and RESTORE: values in Redis's RDB encoding (see [`crate::rdb`]), so they move
//! between Redis and this store in both directions.

use super::strings::reply_err;
use super::{args, cmd, flags::*, CommandSpec, Ctx};
use crate::error::OpError;
use crate::events::class;
use crate::keyspace::Ttl;
use crate::rdb;
use crate::value::Value;

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("dump", 2, READONLY, 1, 1, 1, dump),
    cmd!("restore", -4, WRITE | DENYOOM, 1, 1, 1, restore),
];

/// The encoding limits of the store's configuration, for values read.
pub(crate) fn limits(db: &crate::Db) -> rdb::Limits {
    rdb::Limits {
        hash: super::hash::limits(db),
        list: super::list::limits(db),
        set: super::set::limits(db),
        zset: super::zset::limits(db),
    }
}

fn dump(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (now, dbi) = (c.db.now, c.session.db);
    let list_limits = super::list::limits(c.db);
    match c.db.dbs[dbi].get(a[1], now) {
        Some(n) => {
            c.db.stats.keyspace_hits += 1;
            let payload = rdb::dump(n.value(), list_limits);
            c.out.bulk(&payload);
        }
        None => {
            c.db.stats.keyspace_misses += 1;
            c.out.null();
            c.db.key_miss(dbi, a[1]);
        }
    }
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f], checked in Redis's order.
fn restore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < a.len() {
        let more = a.len() - j - 1;
        if args::is(a[j], "REPLACE") {
            replace = true;
        } else if args::is(a[j], "ABSTTL") {
            absttl = true;
        } else if args::is(a[j], "IDLETIME") && more >= 1 && freq.is_none() {
            match args::int(a[j + 1]) {
                Err(e) => return reply_err(&mut c.out, e),
                Ok(v) if v < 0 => {
                    return c.out.error(b"ERR Invalid IDLETIME value, must be >= 0");
                }
                Ok(v) => idle = Some(v),
            }
            j += 1;
        } else if args::is(a[j], "FREQ") && more >= 1 && idle.is_none() {
            match args::int(a[j + 1]) {
                Err(e) => return reply_err(&mut c.out, e),
                Ok(v) if !(0..=255).contains(&v) => {
                    return c
                        .out
                        .error(b"ERR Invalid FREQ value, must be >= 0 and <= 255");
                }
                Ok(v) => freq = Some(v),
            }
            j += 1;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
        j += 1;
    }
    let (now, dbi, key) = (c.db.now, c.session.db, a[1]);
    if !replace && c.db.dbs[dbi].contains(key, now) {
        return c.out.error(b"BUSYKEY Target key name already exists.");
    }
    let ttl = match args::int(a[2]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(t) if t < 0 => return c.out.error(b"ERR Invalid TTL value, must be >= 0"),
        Ok(t) => t,
    };
    let value = match rdb::restore(a[3], limits(c.db), now) {
        Ok(v) => v,
        Err(rdb::RdbError::Footer) => {
            return c
                .out
                .error(b"ERR DUMP payload version or checksum are wrong");
        }
        Err(rdb::RdbError::BadData(_)) => return c.out.error(b"ERR Bad data format"),
    };
    let deleted = replace && c.db.dbs[dbi].remove(key, now).is_some();
    let at = match (ttl, absttl) {
        (0, _) => None,
        (t, true) => Some(t as u64),
        (t, false) => Some(now.saturating_add(t as u64)),
    };
    if at.is_some_and(|at| at <= now) {
        // Already expired: nothing is stored; a replaced key is gone.
        if deleted {
            c.db.modified(class::GENERIC, "del", dbi, key);
        }
        return c.out.ok();
    }
    let field_ttls = matches!(&value, Value::Hash(h) if h.has_ttls());
    c.db.dbs[dbi].set(key, value, at.map_or(Ttl::Clear, Ttl::At), now);
    if field_ttls {
        c.db.hash_ttl_keys[dbi].insert(key.into());
    }
    let access = if c.db.config.policy.is_lfu() {
        freq.map(|f| crate::evict::lfu_access(now, f as u32))
    } else {
        idle.map(|s| crate::evict::lru_access(now, s as u64))
    };
    if let Some(access) = access {
        c.db.dbs[dbi].set_access_of(key, access);
    }
    c.db.modified(class::GENERIC, "restore", dbi, key);
    c.out.ok();
}
