//! ZRANGE in all its forms (by rank, score or lex, reversed, limited, stored), ZCOUNT,
//! ZLEXCOUNT and ZREMRANGEBY*. Every range becomes a rank range `start..end` of the set first
//! (see [`crate::zset::bounds`]); listing, counting and removing are rank arithmetic after that.

use super::{get_z_mut, is_resp3, limits, store, write_pair};
use crate::commands::strings::reply_err;
use crate::commands::{args, Ctx};
use crate::error::OpError;
use crate::zset::bounds::{LexRange, ScoreRange};
use crate::zset::ZSet;

const NOT_FLOAT: &[u8] = b"ERR min or max is not a float";
const NOT_LEX: &[u8] = b"ERR min or max not valid string range item";

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

enum Range {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// Resolves a rank range with Redis's negative-index rules to `start..end` (ascending ranks).
pub(crate) fn rank_range(start: i64, end: i64, len: usize) -> (usize, usize) {
    let len = len as i64;
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return (0, 0);
    }
    if e >= len {
        e = len - 1;
    }
    (s as usize, e as usize + 1)
}

/// The selected members as `(member, score)`, in reply order.
fn select(z: &ZSet, range: &Range, rev: bool, offset: i64, limit: i64) -> Vec<(Vec<u8>, f64)> {
    let len = z.len();
    let (start, end, limited) = match range {
        Range::Rank(s, e) => {
            // REV counts ranks from the high end.
            let (s, e) = rank_range(*s, *e, len);
            if rev {
                (len - e, len - s, false)
            } else {
                (s, e, false)
            }
        }
        Range::Score(r) => {
            let (s, e) = r.ranks(z);
            (s, e, true)
        }
        Range::Lex(r) => {
            let (s, e) = r.ranks(z);
            (s, e, true)
        }
    };
    let (mut start, mut end) = (start, end);
    if limited {
        if offset < 0 || (offset > 0 && offset as usize >= len) {
            return Vec::new();
        }
        let off = offset as usize;
        let span = end.saturating_sub(start).saturating_sub(off);
        let take = if limit < 0 {
            span
        } else {
            span.min(limit as usize)
        };
        if rev {
            end = end.saturating_sub(off);
            start = end - take;
        } else {
            start += off;
            end = start + take;
        }
    }
    let mut out = Vec::with_capacity(end.saturating_sub(start).min(1024));
    z.range(start, end, rev, |m, s| out.push((m.to_vec(), s)));
    out
}

/// Parses options from `a[from..]` and the range at `a[lo]`, `a[hi]`, replying with the error
/// on failure. `by`/`rev` preset by the legacy commands.
#[allow(clippy::too_many_arguments)]
fn parse(
    c: &mut Ctx<'_>,
    a: &[&[u8]],
    from: usize,
    idx: (usize, usize),
    mut by: Option<By>,
    mut rev: Option<bool>,
    storing: bool,
) -> Option<(Range, bool, bool, i64, i64)> {
    let mut withscores = false;
    let mut limit: Option<(i64, i64)> = None;
    let mut j = from;
    while j < a.len() {
        let left = a.len() - j - 1;
        if !storing && args::is(a[j], "WITHSCORES") {
            withscores = true;
        } else if args::is(a[j], "LIMIT") && left >= 2 {
            let o = args::int(a[j + 1]);
            let l = args::int(a[j + 2]);
            match (o, l) {
                (Ok(o), Ok(l)) => limit = Some((o, l)),
                (Err(e), _) | (_, Err(e)) => {
                    reply_err(&mut c.out, e);
                    return None;
                }
            }
            j += 2;
        } else if rev.is_none() && args::is(a[j], "REV") {
            rev = Some(true);
        } else if by.is_none() && args::is(a[j], "BYLEX") {
            by = Some(By::Lex);
        } else if by.is_none() && args::is(a[j], "BYSCORE") {
            by = Some(By::Score);
        } else {
            reply_err(&mut c.out, OpError::Syntax);
            return None;
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let by = by.unwrap_or(By::Rank);
    // Redis refuses LIMIT on a rank range only when it would limit something: a count of
    // -1 ("no limit") passes, and then the offset is ignored too.
    if by == By::Rank && matches!(limit, Some((_, l)) if l == -1) {
        limit = None;
    }
    if limit.is_some() && by == By::Rank {
        c.out.error(
            b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
        return None;
    }
    if withscores && by == By::Lex {
        c.out
            .error(b"ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return None;
    }
    let (mut lo, mut hi) = idx;
    if rev && by != By::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let range = match by {
        By::Rank => match (args::int(a[lo]), args::int(a[hi])) {
            (Ok(s), Ok(e)) => Range::Rank(s, e),
            (Err(e), _) | (_, Err(e)) => {
                reply_err(&mut c.out, e);
                return None;
            }
        },
        By::Score => match ScoreRange::parse(a[lo], a[hi]) {
            Some(r) => Range::Score(r),
            None => {
                c.out.error(NOT_FLOAT);
                return None;
            }
        },
        By::Lex => match LexRange::parse(a[lo], a[hi]) {
            Some(r) => Range::Lex(r),
            None => {
                c.out.error(NOT_LEX);
                return None;
            }
        },
    };
    let (offset, count) = limit.unwrap_or((0, -1));
    Some((range, rev, withscores, offset, count))
}

fn range_generic(c: &mut Ctx<'_>, a: &[&[u8]], by: Option<By>, rev: Option<bool>) {
    let Some((range, rev, withscores, offset, limit)) = parse(c, a, 4, (2, 3), by, rev, false)
    else {
        return;
    };
    let z = match super::read_z(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return c.out.array_len(0),
        Ok(Some(z)) => z,
    };
    let items = select(z, &range, rev, offset, limit);
    let nested = withscores && is_resp3(&c.out);
    let per = if withscores && !nested { 2 } else { 1 };
    c.out.array_len(items.len() * per);
    for (m, s) in &items {
        if withscores {
            write_pair(&mut c.out, m, *s, nested);
        } else {
            c.out.bulk(m);
        }
    }
}

pub(super) fn zrange(c: &mut Ctx<'_>, a: &[&[u8]]) {
    range_generic(c, a, None, None);
}
pub(super) fn zrevrange(c: &mut Ctx<'_>, a: &[&[u8]]) {
    range_generic(c, a, Some(By::Rank), Some(true));
}
pub(super) fn zrangebyscore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    range_generic(c, a, Some(By::Score), Some(false));
}
pub(super) fn zrevrangebyscore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    range_generic(c, a, Some(By::Score), Some(true));
}
pub(super) fn zrangebylex(c: &mut Ctx<'_>, a: &[&[u8]]) {
    range_generic(c, a, Some(By::Lex), Some(false));
}
pub(super) fn zrevrangebylex(c: &mut Ctx<'_>, a: &[&[u8]]) {
    range_generic(c, a, Some(By::Lex), Some(true));
}

pub(super) fn zrangestore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let Some((range, rev, _, offset, limit)) = parse(c, a, 5, (3, 4), None, None, true) else {
        return;
    };
    let dbi = c.session.db;
    let items = match super::read_z(c.db, dbi, a[2]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => Vec::new(),
        Ok(Some(z)) => select(z, &range, rev, offset, limit),
    };
    // Like Redis: start from a listpack unless a rank range is known to be too long, and add
    // the members in reply order, converting on the way (so `-0` added while the set is still
    // a listpack reads back as `0`).
    let lim = limits(c.db);
    let hint = if matches!(range, Range::Rank(..)) {
        items.len()
    } else {
        0
    };
    let mut z = if hint > lim.max_entries {
        ZSet::new_big()
    } else {
        ZSet::new(lim, 0)
    };
    for (m, s) in &items {
        z.insert(m, *s, lim);
    }
    let n = z.len();
    store(c.db, dbi, a[1], z, "zrangestore");
    c.out.int(n as i64);
}

fn count_generic(c: &mut Ctx<'_>, a: &[&[u8]], lex: bool) {
    let range = if lex {
        match LexRange::parse(a[2], a[3]) {
            Some(r) => Range::Lex(r),
            None => return c.out.error(NOT_LEX),
        }
    } else {
        match ScoreRange::parse(a[2], a[3]) {
            Some(r) => Range::Score(r),
            None => return c.out.error(NOT_FLOAT),
        }
    };
    match super::read_z(c.db, c.session.db, a[1]) {
        Err(e) => reply_err(&mut c.out, e),
        Ok(None) => c.out.int(0),
        Ok(Some(z)) => {
            let (s, e) = match &range {
                Range::Lex(r) => r.ranks(z),
                Range::Score(r) => r.ranks(z),
                Range::Rank(..) => (0, 0),
            };
            c.out.int((e - s) as i64);
        }
    }
}

pub(super) fn zcount(c: &mut Ctx<'_>, a: &[&[u8]]) {
    count_generic(c, a, false);
}
pub(super) fn zlexcount(c: &mut Ctx<'_>, a: &[&[u8]]) {
    count_generic(c, a, true);
}

fn remrange(c: &mut Ctx<'_>, a: &[&[u8]], by: By) {
    let range = match by {
        By::Rank => match (args::int(a[2]), args::int(a[3])) {
            (Ok(s), Ok(e)) => Range::Rank(s, e),
            (Err(e), _) | (_, Err(e)) => return reply_err(&mut c.out, e),
        },
        By::Score => match ScoreRange::parse(a[2], a[3]) {
            Some(r) => Range::Score(r),
            None => return c.out.error(NOT_FLOAT),
        },
        By::Lex => match LexRange::parse(a[2], a[3]) {
            Some(r) => Range::Lex(r),
            None => return c.out.error(NOT_LEX),
        },
    };
    let dbi = c.session.db;
    let z = match get_z_mut(c.db, dbi, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return c.out.int(0),
        Ok(Some(z)) => z,
    };
    let (s, e) = match &range {
        Range::Rank(s, e) => rank_range(*s, *e, z.len()),
        Range::Score(r) => r.ranks(z),
        Range::Lex(r) => r.ranks(z),
    };
    let n = z.remove_ranks(s, e);
    if n > 0 {
        let event = match by {
            By::Rank => "zremrangebyrank",
            By::Score => "zremrangebyscore",
            By::Lex => "zremrangebylex",
        };
        super::removed(c.db, dbi, a[1], event);
    }
    c.out.int(n as i64);
}

pub(super) fn zremrangebyrank(c: &mut Ctx<'_>, a: &[&[u8]]) {
    remrange(c, a, By::Rank);
}
pub(super) fn zremrangebyscore(c: &mut Ctx<'_>, a: &[&[u8]]) {
    remrange(c, a, By::Score);
}
pub(super) fn zremrangebylex(c: &mut Ctx<'_>, a: &[&[u8]]) {
    remrange(c, a, By::Lex);
}
