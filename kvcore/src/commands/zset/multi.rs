//! ZUNION, ZINTER, ZDIFF, their *STORE forms, and ZINTERCARD.
//!
//! Sources are read first (a missing key is an empty set), then combined in a hash map and
//! sorted by `(score, member)`. Like Redis, inputs are visited from the smallest to the largest
//! (a stable sort by size, except for ZDIFF whose first set is the base), weights multiply
//! scores with NaN (`0 * inf`) read as 0 (for ZINTER only in the first input: later NaN
//! products reach the aggregate, where MIN/MAX ignore them and SUM resets to 0), and a NaN sum
//! (`inf + -inf`) becomes 0.

use std::collections::HashMap;

use super::{is_resp3, limits, store, write_pair};
use crate::commands::strings::reply_err;
use crate::commands::{args, Ctx};
use crate::error::OpError;
use crate::zset::{listpack::cmp_entry, ZSet};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Agg {
    Sum,
    Min,
    Max,
}

fn aggregate(target: &mut f64, v: f64, agg: Agg) {
    match agg {
        Agg::Sum => {
            *target += v;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Agg::Min => {
            if v < *target {
                *target = v;
            }
        }
        Agg::Max => {
            if v > *target {
                *target = v;
            }
        }
    }
}

type Items = Vec<(Vec<u8>, f64)>;

fn load(z: Option<&ZSet>) -> Items {
    let mut v = Vec::new();
    if let Some(z) = z {
        v.reserve(z.len());
        z.range(0, z.len(), false, |m, s| v.push((m.to_vec(), s)));
    }
    v
}

/// Runs the operation; `dst` for the *STORE forms, `card` for ZINTERCARD.
fn generic(c: &mut Ctx<'_>, a: &[&[u8]], dst: Option<&[u8]>, nk: usize, op: Op, card: bool) {
    let setnum = match args::int(a[nk]) {
        Ok(n) => n,
        Err(e) => return reply_err(&mut c.out, e),
    };
    if setnum < 1 {
        let name = crate::commands::lookup(a[0]).map_or("", |s| s.name);
        return c
            .out
            .error(format!("ERR at least 1 input key is needed for '{name}' command").as_bytes());
    }
    let setnum = setnum as usize;
    if setnum > a.len() - nk - 1 {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let keys = &a[nk + 1..nk + 1 + setnum];
    let dbi = c.session.db;
    let mut srcs: Vec<(Items, f64)> = Vec::with_capacity(setnum);
    for k in keys {
        // A plain set counts as a sorted set whose members all score 1, as in Redis.
        if let Ok(Some(s)) = crate::commands::set_api::get_set(c.db, dbi, k) {
            let mut items = Vec::with_capacity(s.len());
            s.for_each(|m| items.push((m.to_vec(), 1.0)));
            srcs.push((items, 1.0));
            continue;
        }
        match super::read_z(c.db, dbi, k) {
            Err(e) => return reply_err(&mut c.out, e),
            Ok(z) => srcs.push((load(z), 1.0)),
        }
    }
    let mut agg = Agg::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = nk + 1 + setnum;
    while j < a.len() {
        let remaining = a.len() - j;
        if op != Op::Diff && !card && remaining > setnum && args::is(a[j], "WEIGHTS") {
            j += 1;
            for s in srcs.iter_mut() {
                match crate::resp::float::parse_double(a[j]) {
                    Some(w) => s.1 = w,
                    None => return c.out.error(b"ERR weight value is not a float"),
                }
                j += 1;
            }
        } else if op != Op::Diff && !card && remaining >= 2 && args::is(a[j], "AGGREGATE") {
            agg = if args::is(a[j + 1], "SUM") {
                Agg::Sum
            } else if args::is(a[j + 1], "MIN") {
                Agg::Min
            } else if args::is(a[j + 1], "MAX") {
                Agg::Max
            } else {
                return reply_err(&mut c.out, OpError::Syntax);
            };
            j += 2;
        } else if dst.is_none() && !card && args::is(a[j], "WITHSCORES") {
            withscores = true;
            j += 1;
        } else if card && remaining >= 2 && args::is(a[j], "LIMIT") {
            match args::int(a[j + 1]) {
                Ok(n) if n >= 0 => limit = n as usize,
                // Redis reports an unparsable LIMIT as a negative one.
                _ => return c.out.error(b"ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
    }
    if op != Op::Diff {
        srcs.sort_by_key(|s| s.0.len());
    }
    let weighted = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut result: Items = Vec::new();
    match op {
        Op::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for (items, w) in &srcs {
                for (m, s) in items {
                    let v = weighted(*s, *w);
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, v, agg),
                        None => {
                            acc.insert(m.clone(), v);
                        }
                    }
                }
            }
            result = acc.into_iter().collect();
        }
        Op::Inter => {
            if srcs.iter().all(|s| !s.0.is_empty()) {
                let maps: Vec<HashMap<&[u8], f64>> = srcs[1..]
                    .iter()
                    .map(|(items, _)| items.iter().map(|(m, s)| (&m[..], *s)).collect())
                    .collect();
                let (first, w0) = &srcs[0];
                'outer: for (m, s) in first {
                    let mut score = weighted(*s, *w0);
                    for (k, map) in maps.iter().enumerate() {
                        match map.get(&m[..]) {
                            // Like Redis, only the first input's product is cleaned of NaN.
                            Some(v) => aggregate(&mut score, *v * srcs[k + 1].1, agg),
                            None => continue 'outer,
                        }
                    }
                    if card {
                        result.push((Vec::new(), 0.0));
                        if limit != 0 && result.len() >= limit {
                            break;
                        }
                    } else {
                        result.push((m.clone(), score));
                    }
                }
            }
        }
        Op::Diff => {
            let others: Vec<std::collections::HashSet<&[u8]>> = srcs[1..]
                .iter()
                .map(|(items, _)| items.iter().map(|(m, _)| &m[..]).collect())
                .collect();
            result = srcs[0]
                .0
                .iter()
                .filter(|(m, _)| !others.iter().any(|o| o.contains(&m[..])))
                .cloned()
                .collect();
        }
    }
    if card {
        return c.out.int(result.len() as i64);
    }
    result.sort_by(|x, y| cmp_entry(x.1, &x.0, y.1, &y.0));
    match dst {
        Some(d) => {
            let refs: Vec<(&[u8], f64)> = result.iter().map(|(m, s)| (&m[..], *s)).collect();
            let z = ZSet::from_sorted(limits(c.db), &refs);
            let event = match op {
                Op::Union => "zunionstore",
                Op::Inter => "zinterstore",
                Op::Diff => "zdiffstore",
            };
            store(c.db, dbi, d, z, event);
            c.out.int(result.len() as i64);
        }
        None => {
            let nested = withscores && is_resp3(&c.out);
            let per = if withscores && !nested { 2 } else { 1 };
            c.out.array_len(result.len() * per);
            for (m, s) in &result {
                if withscores {
                    write_pair(&mut c.out, m, *s, nested);
                } else {
                    c.out.bulk(m);
                }
            }
        }
    }
}

pub(super) fn zunion(c: &mut Ctx<'_>, a: &[&[u8]]) {
    generic(c, a, None, 1, Op::Union, false);
}
pub(super) fn zinter(c: &mut Ctx<'_>, a: &[&[u8]]) {
    generic(c, a, None, 1, Op::Inter, false);
}
pub(super) fn zdiff(c: &mut Ctx<'_>, a: &[&[u8]]) {
    generic(c, a, None, 1, Op::Diff, false);
}
pub(super) fn zintercard(c: &mut Ctx<'_>, a: &[&[u8]]) {
    generic(c, a, None, 1, Op::Inter, true);
}
pub(super) fn zunionstore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    generic(c, a, Some(a[1]), 2, Op::Union, false);
}
pub(super) fn zinterstore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    generic(c, a, Some(a[1]), 2, Op::Inter, false);
}
pub(super) fn zdiffstore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    generic(c, a, Some(a[1]), 2, Op::Diff, false);
}
