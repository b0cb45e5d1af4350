//! LCS: the longest common subsequence of two string values, its length (LEN), or the
//! matching ranges (IDX, MINMATCHLEN, WITHMATCHLEN), as Redis 7.4 computes them: the
//! classic O(n·m) table of `u32`, refused past `proto-max-bulk-len` bytes, then one walk back
//! from the end that emits the ranges last to first.

use super::strings::reply_err;
use super::{args, cmd, flags::*, CommandSpec, Ctx};
use crate::error::OpError;

pub(super) static COMMANDS: &[CommandSpec] = &[cmd!("lcs", -3, READONLY, 1, 2, 1, lcs)];

/// A key's string for LCS (empty when missing); `Err` when it holds another type.
fn string_of(c: &mut Ctx<'_>, key: &[u8]) -> Result<Vec<u8>, ()> {
    let (dbi, now) = (c.session.db, c.db.now);
    match c.db.dbs[dbi].get(key, now) {
        None => {
            c.db.key_miss(dbi, key);
            Ok(Vec::new())
        }
        Some(n) => {
            let mut buf = itoa::Buffer::new();
            n.value().as_str(&mut buf).map(<[u8]>::to_vec).ok_or(())
        }
    }
}

fn lcs(c: &mut Ctx<'_>, argv: &[&[u8]]) {
    let (a, b) = match (string_of(c, argv[1]), string_of(c, argv[2])) {
        (Ok(a), Ok(b)) => (a, b),
        _ => {
            return c
                .out
                .error(b"ERR The specified keys must contain string values")
        }
    };
    let (mut get_len, mut get_idx, mut with_len, mut min_len) = (false, false, false, 0i64);
    let mut j = 3;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if args::is(argv[j], "IDX") {
            get_idx = true;
        } else if args::is(argv[j], "LEN") {
            get_len = true;
        } else if args::is(argv[j], "WITHMATCHLEN") {
            with_len = true;
        } else if args::is(argv[j], "MINMATCHLEN") && more > 0 {
            match args::int(argv[j + 1]) {
                Ok(v) => min_len = v.max(0),
                Err(e) => return reply_err(&mut c.out, e),
            }
            j += 1;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
        j += 1;
    }
    if get_len && get_idx {
        return c
            .out
            .error(b"ERR If you want both the length and indexes, please just use IDX.");
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return c.out.error(b"ERR String too long for LCS");
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells.saturating_mul(4) > c.db.config.proto_max_bulk_len {
        return c.out.error(
            b"ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        );
    }
    let width = blen + 1;
    let mut table = vec![0u32; cells as usize];
    for i in 1..=alen {
        for jj in 1..=blen {
            table[i * width + jj] = if a[i - 1] == b[jj - 1] {
                table[(i - 1) * width + jj - 1] + 1
            } else {
                table[(i - 1) * width + jj].max(table[i * width + jj - 1])
            };
        }
    }
    let total = table[alen * width + blen];
    if get_len {
        return c.out.int(i64::from(total));
    }
    // Walk back from the end: the common subsequence, and its runs of contiguous matches.
    let mut result = vec![0u8; total as usize];
    let mut idx = total as usize;
    // (a_start, a_end, b_start, b_end) of the run being built.
    let mut run: Option<(usize, usize, usize, usize)> = None;
    let mut ranges: Vec<(usize, usize, usize, usize)> = Vec::new();
    let (mut i, mut jj) = (alen, blen);
    while i > 0 && jj > 0 {
        let mut emit = false;
        if a[i - 1] == b[jj - 1] {
            result[idx - 1] = a[i - 1];
            match &mut run {
                None => run = Some((i - 1, i - 1, jj - 1, jj - 1)),
                Some(r) if r.0 == i && r.2 == jj => {
                    r.0 -= 1;
                    r.2 -= 1;
                }
                Some(_) => emit = true,
            }
            if run.is_some_and(|r| r.0 == 0 || r.2 == 0) {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            jj -= 1;
        } else {
            if table[(i - 1) * width + jj] > table[i * width + jj - 1] {
                i -= 1;
            } else {
                jj -= 1;
            }
            emit = run.is_some();
        }
        if emit {
            if let Some(r) = run.take() {
                let len = (r.1 - r.0 + 1) as i64;
                if min_len == 0 || len >= min_len {
                    ranges.push(r);
                }
            }
        }
    }
    if !get_idx {
        return c.out.bulk(&result);
    }
    c.out.map_len(2);
    c.out.bulk(b"matches");
    c.out.array_len(ranges.len());
    for (a0, a1, b0, b1) in ranges {
        c.out.array_len(2 + usize::from(with_len));
        c.out.array_len(2);
        c.out.int(a0 as i64);
        c.out.int(a1 as i64);
        c.out.array_len(2);
        c.out.int(b0 as i64);
        c.out.int(b1 as i64);
        if with_len {
            c.out.int((a1 - a0 + 1) as i64);
        }
    }
    c.out.bulk(b"len");
    c.out.int(i64::from(total));
}

#[cfg(test)]
mod tests {
    use crate::{Db, Reply};

    fn ints(v: &[i64]) -> Reply {
        Reply::Array(v.iter().map(|&i| Reply::Int(i)).collect())
    }

    /// The example of Redis's LCS documentation.
    #[test]
    fn redis_documentation_example() {
        let mut db = Db::new();
        db.execute(&[b"MSET", b"key1", b"ohmytext", b"key2", b"mynewtext"]);
        assert_eq!(
            db.execute(&[b"LCS", b"key1", b"key2"]),
            Reply::Bulk(b"mytext".to_vec())
        );
        assert_eq!(
            db.execute(&[b"LCS", b"key1", b"key2", b"LEN"]),
            Reply::Int(6)
        );
        let range = |a: [i64; 2], b: [i64; 2]| Reply::Array(vec![ints(&a), ints(&b)]);
        assert_eq!(
            db.execute(&[b"LCS", b"key1", b"key2", b"IDX"]),
            Reply::Array(vec![
                Reply::Bulk(b"matches".to_vec()),
                Reply::Array(vec![range([4, 7], [5, 8]), range([2, 3], [0, 1])]),
                Reply::Bulk(b"len".to_vec()),
                Reply::Int(6),
            ])
        );
        assert_eq!(
            db.execute(&[
                b"LCS",
                b"key1",
                b"key2",
                b"IDX",
                b"MINMATCHLEN",
                b"4",
                b"WITHMATCHLEN"
            ]),
            Reply::Array(vec![
                Reply::Bulk(b"matches".to_vec()),
                Reply::Array(vec![Reply::Array(vec![
                    ints(&[4, 7]),
                    ints(&[5, 8]),
                    Reply::Int(4)
                ])]),
                Reply::Bulk(b"len".to_vec()),
                Reply::Int(6),
            ])
        );
        db.execute(&[b"LPUSH", b"list", b"x"]);
        assert_eq!(
            db.execute(&[b"LCS", b"key1", b"list"]),
            Reply::Error(b"ERR The specified keys must contain string values".to_vec())
        );
        assert_eq!(
            db.execute(&[b"LCS", b"key1", b"key2", b"LEN", b"IDX"]),
            Reply::Error(
                b"ERR If you want both the length and indexes, please just use IDX.".to_vec()
            )
        );
    }
}
