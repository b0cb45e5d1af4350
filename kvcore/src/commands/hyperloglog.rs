//! PFADD, PFCOUNT, PFMERGE and PFDEBUG over HyperLogLog strings ([`crate::hll`]), as Redis 7.4:
//! the same checks in the same order, the same cache writes and invalidations, the same
//! keyspace events (`pfadd`, also for PFMERGE) and WATCH signals (PFCOUNT of one key signals
//! when it stores a recomputed cardinality, without an event).
//!
//! Every command that may change a value first turns it into a `raw` string (Redis's
//! `dbUnshareStringValue`), so OBJECT ENCODING afterwards says `raw` as Redis's does.

use super::strings::reply_err;
use super::{cmd, flags::*, CommandSpec, Ctx};
use crate::error::OpError;
use crate::events::class;
use crate::hll::{self, Encoding};
use crate::keyspace::Ttl;
use crate::value::{Stored, Value};

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("pfadd", -2, WRITE | DENYOOM | FAST, 1, 1, 1, pfadd),
    cmd!("pfcount", -2, READONLY, 1, -1, 1, pfcount),
    cmd!("pfmerge", -2, WRITE | DENYOOM, 1, -1, 1, pfmerge),
    cmd!("pfdebug", 3, WRITE | DENYOOM | ADMIN, 2, 2, 1, pfdebug),
];

/// A stored value as a HyperLogLog: WRONGTYPE for other types, the HLL error for strings
/// that are not one.
fn check(v: Stored<'_>) -> Result<Encoding, OpError> {
    let mut buf = itoa::Buffer::new();
    let s = v.as_str(&mut buf).ok_or(OpError::WrongType)?;
    if matches!(v, Stored::Int(_) | Stored::Value(Value::Int(_))) {
        return Err(OpError::NotHll);
    }
    hll::check(s).ok_or(OpError::NotHll)
}

/// A checked HyperLogLog value turned `raw`, for changing in place.
fn unshare(v: &mut Value) -> Result<&mut Vec<u8>, OpError> {
    check(Stored::Value(v))?;
    v.make_raw().ok_or(OpError::WrongType)
}

fn pfadd(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (dbi, now) = (c.session.db, c.db.now);
    let max = c.db.config.hll_sparse_max_bytes;
    let ks = &mut c.db.dbs[dbi];
    let updated = match ks.get_mut(a[1], now) {
        None => {
            let mut s = hll::new_sparse();
            for e in &a[2..] {
                // A new value is well formed: adding cannot fail.
                let _ = hll::add(&mut s, e, max);
            }
            hll::invalidate(&mut s);
            ks.insert_absent(a[1], Value::Raw(Box::new(s)), Ttl::Clear);
            true
        }
        Some(v) => {
            let s = match unshare(v) {
                Ok(s) => s,
                Err(e) => return reply_err(&mut c.out, e),
            };
            let mut updated = false;
            for e in &a[2..] {
                match hll::add(s, e, max) {
                    Ok(changed) => updated |= changed,
                    Err(hll::Corrupt) => return reply_err(&mut c.out, OpError::CorruptHll),
                }
            }
            if updated {
                hll::invalidate(s);
            }
            updated
        }
    };
    if updated {
        c.db.modified(class::STRING, "pfadd", dbi, a[1]);
    }
    c.out.int(i64::from(updated));
}

/// The union of the registers of `keys` (missing keys read as empty), read without changing
/// anything: PFCOUNT of several keys and the first half of PFMERGE. Also whether any of them
/// is dense.
fn union(c: &mut Ctx<'_>, keys: &[&[u8]]) -> Result<(Box<[u8; hll::REGISTERS]>, bool), OpError> {
    let (dbi, now) = (c.session.db, c.db.now);
    let mut max = Box::new([0u8; hll::REGISTERS]);
    let mut any_dense = false;
    for key in keys {
        let Some(n) = c.db.dbs[dbi].get(key, now) else {
            c.db.key_miss(dbi, key);
            continue;
        };
        let enc = check(n.value())?;
        any_dense |= enc == Encoding::Dense;
        let mut buf = itoa::Buffer::new();
        let s = n.value().as_str(&mut buf).unwrap_or_default();
        hll::merge_into(&mut max, s).map_err(|_| OpError::CorruptHll)?;
    }
    Ok((max, any_dense))
}

fn pfcount(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if a.len() > 2 {
        return match union(c, &a[1..]) {
            Ok((max, _)) => c.out.int(hll::count_registers(&max) as i64),
            Err(e) => reply_err(&mut c.out, e),
        };
    }
    let (dbi, now) = (c.session.db, c.db.now);
    let Some(v) = c.db.dbs[dbi].get_mut(a[1], now) else {
        c.out.int(0);
        return c.db.key_miss(dbi, a[1]);
    };
    let s = match unshare(v) {
        Ok(s) => s,
        Err(e) => return reply_err(&mut c.out, e),
    };
    if let Some(card) = hll::cached(s) {
        return c.out.int(card as i64);
    }
    let Ok(card) = hll::count(s) else {
        return reply_err(&mut c.out, OpError::CorruptHll);
    };
    hll::set_cached(s, card);
    // The cache is part of the string: a change WATCH sees, but no keyspace event.
    c.db.signal_modified(dbi, a[1]);
    c.out.int(card as i64);
}

fn pfmerge(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (max, use_dense) = match union(c, &a[1..]) {
        Ok(u) => u,
        Err(e) => return reply_err(&mut c.out, e),
    };
    let (dbi, now) = (c.session.db, c.db.now);
    let sparse_max = c.db.config.hll_sparse_max_bytes;
    let ks = &mut c.db.dbs[dbi];
    let s = match ks.get_mut(a[1], now) {
        Some(v) => match unshare(v) {
            Ok(s) => s,
            Err(e) => return reply_err(&mut c.out, e),
        },
        None => {
            ks.insert_absent(a[1], Value::Raw(Box::new(hll::new_sparse())), Ttl::Clear);
            match ks.get_mut(a[1], now).and_then(Value::make_raw) {
                Some(s) => s,
                None => return reply_err(&mut c.out, OpError::CorruptHll),
            }
        }
    };
    if use_dense && hll::to_dense(s).is_err() {
        return reply_err(&mut c.out, OpError::CorruptHll);
    }
    for (j, &m) in max.iter().enumerate() {
        if m != 0 {
            // The destination was read whole by `union`: it is well formed.
            let _ = hll::set_register(s, j, m, sparse_max);
        }
    }
    hll::invalidate(s);
    // Redis raises `pfadd` for PFMERGE too: a merge is a mass add.
    c.db.modified(class::STRING, "pfadd", dbi, a[1]);
    c.out.ok();
}

/// PFDEBUG GETREG | DECODE | ENCODING | TODENSE key.
fn pfdebug(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (dbi, now) = (c.session.db, c.db.now);
    let sub = a[1].to_ascii_lowercase();
    let Some(v) = c.db.dbs[dbi].get_mut(a[2], now) else {
        return c.out.error(b"ERR The specified key does not exist");
    };
    let s = match unshare(v) {
        Ok(s) => s,
        Err(e) => return reply_err(&mut c.out, e),
    };
    match &sub[..] {
        b"getreg" => {
            if hll::to_dense(s).is_err() {
                return reply_err(&mut c.out, OpError::CorruptHll);
            }
            let regs = hll::dense::registers(s);
            c.out.array_len(hll::REGISTERS);
            for i in 0..hll::REGISTERS {
                c.out.int(i64::from(hll::dense::get(regs, i)));
            }
        }
        b"decode" => {
            if s.get(4).copied() != Some(hll::SPARSE) {
                return c.out.error(b"ERR HLL encoding is not sparse");
            }
            let text = hll::sparse::describe(s.get(hll::HDR..).unwrap_or_default());
            c.out.bulk(text.as_bytes());
        }
        b"encoding" => {
            let dense = s.get(4).copied() == Some(hll::DENSE);
            c.out.simple(if dense { b"dense" } else { b"sparse" });
        }
        b"todense" => {
            let sparse = s.get(4).copied() == Some(hll::SPARSE);
            if sparse && hll::to_dense(s).is_err() {
                return reply_err(&mut c.out, OpError::CorruptHll);
            }
            c.out.int(i64::from(sparse));
        }
        _ => {
            let mut msg = b"ERR Unknown PFDEBUG subcommand '".to_vec();
            msg.extend_from_slice(super::c_str(a[1]));
            msg.push(b'\'');
            c.out.error(&super::sanitize(msg));
        }
    }
}
