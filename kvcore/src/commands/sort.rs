//! SORT and SORT_RO.
//!
//! `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
//! [STORE destination]` over a list, set or sorted set, as Redis's `sortCommandGeneric`:
//!
//! - A pattern names other keys by substituting an element for its first `*`; `key->field`
//!   reads a hash field; `#` (GET only) is the element itself; a pattern without `*` names no
//!   key (BY such a pattern means "don't sort", GET answers nil).
//! - Without sorting (`BY nosort`), lists and sorted sets keep their order (DESC walks them
//!   from the end, LIMIT picks the range), a set keeps its iteration order, except with STORE,
//!   where it is sorted ALPHA so the stored result does not depend on the encoding.
//! - Numeric sorting reads each weight as `strtod` does (leading blanks, `inf`, hex; a missing
//!   weight counts 0) and answers `One or more scores can't be converted into double` when one
//!   is not a number; equal weights order by the elements' bytes. ALPHA compares bytes.
//!
//! A server that shards the keyspace must give SORT every key its patterns name:
//! [`referenced_keys`] lists them for a given source value (the server locks and fetches them,
//! then runs the command with [`crate::Db::dispatch_with_sources`]).

use super::strings::reply_err;
use super::{args, cmd, flags::*, CommandSpec, Ctx};
use crate::error::OpError;
use crate::events::class;
use crate::value::{Stored, Value};
use crate::Db;

pub(in crate::commands) static COMMANDS: &[CommandSpec] = &[
    cmd!("sort", -2, WRITE | DENYOOM | MOVABLE_KEYS, 1, 1, 1, sort),
    cmd!("sort_ro", -2, READONLY, 1, 1, 1, sort_ro),
];

/// The parsed options of one SORT call.
struct Options<'a> {
    by: Option<&'a [u8]>,
    dontsort: bool,
    limit: Option<(i64, i64)>,
    gets: Vec<&'a [u8]>,
    desc: bool,
    alpha: bool,
    store: Option<&'a [u8]>,
}

/// Parses the options after the key; `Err` holds the error line.
fn parse<'a>(a: &[&'a [u8]], readonly: bool) -> Result<Options<'a>, &'static [u8]> {
    let mut o = Options {
        by: None,
        dontsort: false,
        limit: None,
        gets: Vec::new(),
        desc: false,
        alpha: false,
        store: None,
    };
    let mut j = 2;
    while j < a.len() {
        let left = a.len() - j - 1;
        let w = a[j];
        if args::is(w, "ASC") {
            o.desc = false;
        } else if args::is(w, "DESC") {
            o.desc = true;
        } else if args::is(w, "ALPHA") {
            o.alpha = true;
        } else if args::is(w, "LIMIT") && left >= 2 {
            let start = args::int(a[j + 1]).map_err(|_| NOT_INT)?;
            let count = args::int(a[j + 2]).map_err(|_| NOT_INT)?;
            o.limit = Some((start, count));
            j += 2;
        } else if args::is(w, "STORE") && left >= 1 && !readonly {
            o.store = Some(a[j + 1]);
            j += 1;
        } else if args::is(w, "BY") && left >= 1 {
            o.by = Some(a[j + 1]);
            if !a[j + 1].contains(&b'*') {
                o.dontsort = true;
            }
            j += 1;
        } else if args::is(w, "GET") && left >= 1 {
            o.gets.push(a[j + 1]);
            j += 1;
        } else {
            return Err(b"ERR syntax error");
        }
        j += 1;
    }
    Ok(o)
}

const NOT_INT: &[u8] = b"ERR value is not an integer or out of range";

/// Where a pattern points for one element: a key, and a hash field when it has `->field`.
/// `None` when the pattern has no `*` (it names nothing).
fn substitute(pattern: &[u8], element: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    // `->` after the star, with a non-empty field name behind it, reads a hash field.
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&i| i + 2 < after.len());
    let (postfix, field) = match arrow {
        Some(i) => (&after[..i], Some(after[i + 2..].to_vec())),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + postfix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(postfix);
    Some((key, field))
}

/// What a pattern reads for `element`: the element itself for `#`, a string key's value, a
/// hash field's value, or `None` (missing key, wrong type, no `*`).
fn lookup(db: &mut Db, dbi: usize, pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(element.to_vec());
    }
    let (key, field) = substitute(pattern, element)?;
    let now = db.now;
    let Some(node) = db.dbs[dbi].get(&key, now) else {
        db.key_miss(dbi, &key);
        return None;
    };
    match (field, node.value()) {
        (None, v) => v.as_str(&mut itoa::Buffer::new()).map(<[u8]>::to_vec),
        (Some(f), Stored::Value(Value::Hash(h))) => h.get(&f),
        (Some(_), _) => None,
    }
}

/// Every key the patterns of a SORT call (`args`, name first) would read, given the value of
/// the key it sorts (`None`: missing). Empty when the call names none or does not parse.
pub fn referenced_keys(args: &[&[u8]], source: Option<&Value>) -> Vec<Vec<u8>> {
    let readonly = args.first().is_some_and(|n| args::is(n, "SORT_RO"));
    let Ok(o) = parse(args, readonly) else {
        return Vec::new();
    };
    let patterns: Vec<&[u8]> =
        o.by.filter(|_| !o.dontsort)
            .into_iter()
            .chain(o.gets.iter().copied().filter(|g| *g != b"#"))
            .collect();
    if patterns.is_empty() {
        return Vec::new();
    }
    let Some(elements) = source.and_then(elements) else {
        return Vec::new();
    };
    let mut keys: Vec<Vec<u8>> = elements
        .iter()
        .flat_map(|e| {
            patterns
                .iter()
                .filter_map(|p| substitute(p, e))
                .map(|(k, _)| k)
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

impl Db {
    /// What SORT does to the key it sorts before reading it: Redis converts a listpack sorted
    /// set to its large encoding ("destructively", as its source says), and OBJECT ENCODING
    /// shows it. A server whose SORT reads the key elsewhere calls this on the key's shard.
    pub fn sort_prepare(&mut self, dbi: usize, key: &[u8]) {
        let now = self.now;
        let limits = super::zset::limits(self);
        if let Some(Value::ZSet(z)) = self.dbs[dbi].get_mut(key, now) {
            if z.encoding() == "listpack" {
                let mut big = crate::zset::ZSet::new_big();
                z.range(0, z.len(), false, |m, s| {
                    big.insert(m, s, limits);
                });
                *z = big;
            }
        }
    }
}

/// Whether a SORT call's options parse (when they do not, it answers an error and changes
/// nothing).
pub fn parses(args: &[&[u8]]) -> bool {
    let readonly = args.first().is_some_and(|n| args::is(n, "SORT_RO"));
    parse(args, readonly).is_ok()
}

/// Whether a SORT call reads keys other than the one it sorts (BY or GET patterns).
pub fn has_patterns(args: &[&[u8]]) -> bool {
    let readonly = args.first().is_some_and(|n| args::is(n, "SORT_RO"));
    parse(args, readonly)
        .is_ok_and(|o| o.by.is_some_and(|_| !o.dontsort) || o.gets.iter().any(|g| *g != b"#"))
}

/// The elements of a list, set or sorted set in their own order; `None` for other types.
fn elements(v: &Value) -> Option<Vec<Vec<u8>>> {
    match v {
        Value::List(l) => Some(l.to_vec()),
        Value::Set(s) => Some(s.to_vec()),
        Value::ZSet(z) => {
            let mut out = Vec::with_capacity(z.len());
            z.range(0, z.len(), false, |m, _| out.push(m.to_vec()));
            Some(out)
        }
        _ => None,
    }
}

/// A weight as C's `strtod` reads it for SORT: leading blanks skipped, the rest (up to a NUL)
/// must be a number; an empty string is 0. `None`: not a number, NaN, or out of range.
fn strtod(b: &[u8]) -> Option<f64> {
    let b = b.split(|&c| c == 0).next().unwrap_or_default();
    if b.is_empty() {
        return Some(0.0);
    }
    let start = b
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    crate::resp::float::parse_double(&b[start..])
}

fn sort(ctx: &mut Ctx<'_>, a: &[&[u8]]) {
    run(ctx, a, false);
}

fn sort_ro(ctx: &mut Ctx<'_>, a: &[&[u8]]) {
    run(ctx, a, true);
}

fn run(ctx: &mut Ctx<'_>, a: &[&[u8]], readonly: bool) {
    let mut o = match parse(a, readonly) {
        Ok(o) => o,
        Err(e) => return ctx.out.error(e),
    };
    let dbi = ctx.session.db;
    let now = ctx.db.now;
    ctx.db.sort_prepare(dbi, a[1]);
    let (mut items, is_set, is_ordered) = match ctx.db.dbs[dbi].get(a[1], now) {
        None => {
            ctx.db.key_miss(dbi, a[1]);
            (Vec::new(), false, true)
        }
        Some(n) => match n.obj().and_then(elements) {
            None => return reply_err(&mut ctx.out, OpError::WrongType),
            Some(items) => {
                let set = matches!(n.obj(), Some(Value::Set(_)));
                (items, set, !set)
            }
        },
    };
    // A set sorted for STORE, or for a script, gets one answer whatever its encoding's order
    // (as Redis makes a script's SORT deterministic).
    if o.dontsort && is_set && (o.store.is_some() || ctx.session.in_script) {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    let len = items.len() as i64;
    let (start, count) = o.limit.unwrap_or((0, -1));
    let mut start = start.clamp(0, len);
    let count = count.clamp(-1, len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    if o.dontsort && is_ordered {
        // Lists and sorted sets: the range in their own order, from the end with DESC.
        if o.desc {
            items.reverse();
        }
        items = if end >= start {
            items.drain(start as usize..=end as usize).collect()
        } else {
            Vec::new()
        };
        end -= start;
        start = 0;
    }
    if !o.dontsort {
        let mut bad = false;
        let mut keyed: Vec<(Vec<u8>, Option<Vec<u8>>, f64)> = Vec::with_capacity(items.len());
        for e in items {
            let by = match o.by {
                Some(p) => lookup(ctx.db, dbi, p, &e),
                None => None,
            };
            let score = if o.alpha {
                0.0
            } else {
                let w = if o.by.is_some() {
                    by.as_deref()
                } else {
                    Some(&e[..])
                };
                match w.map(strtod) {
                    None => 0.0,
                    Some(Some(s)) if !s.is_nan() => s,
                    Some(_) => {
                        bad = true;
                        0.0
                    }
                }
            };
            keyed.push((e, by, score));
        }
        if bad {
            return ctx
                .out
                .error(b"ERR One or more scores can't be converted into double");
        }
        let by_pattern = o.by.is_some();
        // ALPHA compares bytes for STORE; for a reply Redis uses strcoll, which reads C strings
        // (up to a NUL byte); equal ones keep their order (glibc's qsort merges, stably).
        let storing = o.store.is_some();
        fn c_string(b: &[u8], whole: bool) -> &[u8] {
            if whole {
                b
            } else {
                b.split(|&c| c == 0).next().unwrap_or_default()
            }
        }
        keyed.sort_by(|x, y| {
            let c = if !o.alpha {
                x.2.partial_cmp(&y.2)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| x.0.cmp(&y.0))
            } else if by_pattern {
                // A missing weight sorts first.
                match (&x.1, &y.1) {
                    (Some(a), Some(b)) => c_string(a, storing).cmp(c_string(b, storing)),
                    (a, b) => a.is_some().cmp(&b.is_some()),
                }
            } else {
                c_string(&x.0, storing).cmp(c_string(&y.0, storing))
            };
            if o.desc {
                c.reverse()
            } else {
                c
            }
        });
        items = keyed.into_iter().map(|(e, _, _)| e).collect();
    }
    let picked: &[Vec<u8>] = if end >= start {
        &items[start as usize..=end as usize]
    } else {
        &[]
    };
    match o.store {
        None => {
            let per = o.gets.len().max(1);
            ctx.out.array_len(picked.len() * per);
            for e in picked {
                if o.gets.is_empty() {
                    ctx.out.bulk(e);
                }
                for g in &o.gets {
                    match lookup(ctx.db, dbi, g, e) {
                        Some(v) => ctx.out.bulk(&v),
                        None => ctx.out.null(),
                    }
                }
            }
        }
        Some(dest) => {
            let mut result: Vec<Vec<u8>> = Vec::with_capacity(picked.len() * o.gets.len().max(1));
            for e in picked {
                if o.gets.is_empty() {
                    result.push(e.clone());
                }
                for g in &o.gets {
                    result.push(lookup(ctx.db, dbi, g, e).unwrap_or_default());
                }
            }
            let n = result.len();
            if n == 0 {
                if ctx.db.dbs[dbi].delete_stored(dest) {
                    ctx.db.modified(class::GENERIC, "del", dbi, dest);
                }
            } else {
                let list = crate::list::List::from_items(super::list::limits(ctx.db), &result);
                ctx.db.dbs[dbi].set(dest, Value::List(list), crate::keyspace::Ttl::Clear, now);
                ctx.db.modified(class::LIST, "sortstore", dbi, dest);
            }
            ctx.out.int(n as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_substitute_the_first_star() {
        assert_eq!(substitute(b"w_*", b"3"), Some((b"w_3".to_vec(), None)));
        assert_eq!(
            substitute(b"h_*->f", b"3"),
            Some((b"h_3".to_vec(), Some(b"f".to_vec())))
        );
        // `->` with no field name is part of the key.
        assert_eq!(substitute(b"h_*->", b"3"), Some((b"h_3->".to_vec(), None)));
        assert_eq!(substitute(b"a*b*", b"x"), Some((b"axb*".to_vec(), None)));
        assert_eq!(substitute(b"nosort", b"x"), None);
    }

    #[test]
    fn weights_read_like_strtod() {
        assert_eq!(strtod(b""), Some(0.0));
        assert_eq!(strtod(b" 1.5"), Some(1.5));
        assert_eq!(strtod(b"1\0junk"), Some(1.0));
        assert_eq!(strtod(b"1 "), None);
        assert_eq!(strtod(b"   "), None);
        assert_eq!(strtod(b"abc"), None);
        assert_eq!(strtod(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod(b"1e400"), None);
    }
}
