//! Stream commands: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XREAD, XREADGROUP, XGROUP,
//! XSETID, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO.
//!
//! Handlers check arguments and types in Redis's order (`t_stream.c`), with its error texts.
//! Writes are logged as Redis propagates them, by the handlers themselves: XADD with the ID it
//! made and an approximate trim made exact (`MAXLEN = <length left>`), XREADGROUP, XCLAIM and
//! XAUTOCLAIM as the XCLAIM and XGROUP SETID commands that redo what they changed.
//!
//! XREAD and XREADGROUP with BLOCK wait only under a server (see [`crate::commands::blocking`]);
//! here, as in a transaction, they answer at once.

use super::strings::reply_err;
use super::{args, check_subcommand, cmd, flags::*, lookup, wrong_arity, CommandSpec, Ctx};
use crate::error::{OpError, OpResult};
use crate::events::class;
use crate::keyspace::Ttl;
use crate::listpack::Entry;
use crate::resp::{Proto, ReplyWriter};
use crate::stream::{
    AddError, Consumer, Group, Item, Nack, NodeLimits, Stream, StreamId, TrimBy,
    INVALID_ENTRIES_READ,
};
use crate::value::Value;
use crate::Db;

pub(in crate::commands) static COMMANDS: &[CommandSpec] = &[
    cmd!("xadd", -5, WRITE | DENYOOM | FAST, 1, 1, 1, xadd),
    cmd!("xrange", -4, READONLY, 1, 1, 1, xrange),
    cmd!("xrevrange", -4, READONLY, 1, 1, 1, xrevrange),
    cmd!("xlen", 2, READONLY | FAST, 1, 1, 1, xlen),
    cmd!("xdel", -3, WRITE | FAST, 1, 1, 1, xdel),
    cmd!("xtrim", -4, WRITE, 1, 1, 1, xtrim),
    cmd!(
        "xread",
        -4,
        READONLY | BLOCKING | MOVABLE_KEYS,
        0,
        -1,
        1,
        xread
    ),
    cmd!(
        "xreadgroup",
        -7,
        WRITE | BLOCKING | MOVABLE_KEYS,
        0,
        -1,
        1,
        xread
    ),
    // WRITE: every subcommand but HELP writes (Redis flags the subcommands).
    cmd!("xgroup", -2, WRITE | MOVABLE_KEYS, 0, 0, 0, xgroup),
    cmd!("xsetid", -3, WRITE | DENYOOM | FAST, 1, 1, 1, xsetid),
    cmd!("xack", -4, WRITE | FAST, 1, 1, 1, xack),
    cmd!("xpending", -3, READONLY, 1, 1, 1, xpending),
    cmd!("xclaim", -6, WRITE | FAST, 1, 1, 1, xclaim),
    cmd!("xautoclaim", -6, WRITE | FAST, 1, 1, 1, xautoclaim),
    cmd!("xinfo", -2, MOVABLE_KEYS, 0, 0, 0, xinfo),
];

const INVALID_ID: &[u8] = b"ERR Invalid stream ID specified as stream command argument";

/// The node limits from the configuration.
fn limits(db: &Db) -> NodeLimits {
    NodeLimits {
        max_bytes: db.config.stream_node_max_bytes,
        max_entries: db.config.stream_node_max_entries,
    }
}

/// The stream at `key`: `Ok(None)` when missing, WRONGTYPE for another type.
pub(crate) fn get_stream<'a>(
    db: &'a mut Db,
    dbi: usize,
    key: &[u8],
) -> OpResult<Option<&'a Stream>> {
    let now = db.now;
    match db.dbs[dbi].get(key, now) {
        None => Ok(None),
        Some(n) => match n.obj() {
            Some(Value::Stream(s)) => Ok(Some(s)),
            _ => Err(OpError::WrongType),
        },
    }
}

/// [`get_stream`] for a read command: a missing key is a `keymiss`.
fn read_stream<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a Stream>> {
    if matches!(get_stream(db, dbi, key), Ok(None)) {
        db.key_miss(dbi, key);
        return Ok(None);
    }
    get_stream(db, dbi, key)
}

/// The stream at `key`, mutable: `Ok(None)` when missing, WRONGTYPE for another type.
fn stream_mut<'a>(db: &'a mut Db, dbi: usize, key: &[u8]) -> OpResult<Option<&'a mut Stream>> {
    get_stream(db, dbi, key)?;
    let now = db.now;
    match db.dbs[dbi].get_mut(key, now) {
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(OpError::WrongType),
        None => Ok(None),
    }
}

/// Writes an ID as a bulk string without allocating.
fn write_id(w: &mut ReplyWriter<'_>, id: StreamId) {
    let mut buf = [0u8; 41];
    let mut b = itoa::Buffer::new();
    let ms = b.format(id.ms).as_bytes();
    let mut n = ms.len();
    buf[..n].copy_from_slice(ms);
    buf[n] = b'-';
    let seq = b.format(id.seq).as_bytes();
    buf[n + 1..n + 1 + seq.len()].copy_from_slice(seq);
    n += 1 + seq.len();
    w.bulk(&buf[..n]);
}

fn write_entry(w: &mut ReplyWriter<'_>, e: Entry<'_>) {
    match e {
        Entry::Int(i) => w.bulk_int(i),
        Entry::Str(s) => w.bulk(s),
    }
}

/// `[id, [field, value, ...]]`.
fn write_item(w: &mut ReplyWriter<'_>, it: &Item<'_>) {
    w.array_len(2);
    write_id(w, it.id);
    w.array_len(2 * it.pairs);
    it.for_each(|f, v| {
        write_entry(w, f);
        write_entry(w, v);
    });
}

/// The entries from `start` to `end`, at most `count` (0: all).
fn collect<'a>(
    s: &'a Stream,
    start: StreamId,
    end: StreamId,
    rev: bool,
    count: usize,
) -> Vec<Item<'a>> {
    let mut items = Vec::new();
    s.range(start, end, rev, false, |it| {
        items.push(it);
        count == 0 || items.len() < count
    });
    items
}

fn parse_strict(a: &[u8]) -> Result<StreamId, &'static [u8]> {
    StreamId::parse(a, 0, true, false)
        .map(|x| x.0)
        .ok_or(INVALID_ID)
}

/// A range bound: `(` excludes it (then `-` and `+` are refused); a bare `ms` gets
/// `missing_seq`.
fn parse_interval(a: &[u8], missing_seq: u64) -> Result<(StreamId, bool), &'static [u8]> {
    if a.len() > 1 && a[0] == b'(' {
        let id = StreamId::parse(&a[1..], missing_seq, true, false).ok_or(INVALID_ID)?;
        return Ok((id.0, true));
    }
    let id = StreamId::parse(a, missing_seq, false, false).ok_or(INVALID_ID)?;
    Ok((id.0, false))
}

/// XRANGE/XREVRANGE/XPENDING/XAUTOCLAIM start bound, made inclusive.
fn start_bound(a: &[u8]) -> Result<StreamId, &'static [u8]> {
    let (id, ex) = parse_interval(a, 0)?;
    if ex {
        return id.incr().ok_or(b"ERR invalid start ID for the interval");
    }
    Ok(id)
}

/// The end bound, made inclusive.
fn end_bound(a: &[u8]) -> Result<StreamId, &'static [u8]> {
    let (id, ex) = parse_interval(a, u64::MAX)?;
    if ex {
        return id.decr().ok_or(b"ERR invalid end ID for the interval");
    }
    Ok(id)
}

fn int_arg(a: &[u8]) -> Result<i64, &'static [u8]> {
    args::int(a).map_err(|e| e.message().as_bytes())
}

/// Parsed XADD/XTRIM options.
#[derive(Default)]
struct TrimArgs {
    by: Option<TrimBy>,
    approx: bool,
    limit: u64,
    /// Index of the MAXLEN/MINID value, for the logged rewrite.
    arg_idx: usize,
    /// Index of a LIMIT option, dropped from the logged rewrite.
    limit_idx: Option<usize>,
    nomkstream: bool,
    /// XADD: the ID given (`None` for `*`) with whether its sequence was.
    id: Option<(StreamId, bool)>,
    /// XADD: index of the ID argument.
    id_idx: usize,
}

/// Redis's `streamParseAddOrTrimArgsOrReply`.
fn parse_trim(db: &Db, a: &[&[u8]], xadd: bool, obey: bool) -> Result<TrimArgs, Vec<u8>> {
    let mut t = TrimArgs::default();
    let mut limit_given = false;
    let mut i = 2;
    let err = |m: &[u8]| m.to_vec();
    while i < a.len() {
        let more = a.len() - 1 - i;
        let opt = a[i];
        if xadd && opt == b"*" {
            break;
        } else if (args::is(opt, "MAXLEN") || args::is(opt, "MINID")) && more > 0 {
            if t.by.is_some() {
                return Err(err(b"ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            t.approx = false;
            let next = a[i + 1];
            if more >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if args::is(opt, "MAXLEN") {
                let n = int_arg(a[i + 1]).map_err(err)?;
                if n < 0 {
                    return Err(err(b"ERR The MAXLEN argument must be >= 0."));
                }
                t.by = Some(TrimBy::MaxLen(n as u64));
            } else {
                t.by = Some(TrimBy::MinId(parse_strict(a[i + 1]).map_err(err)?));
            }
            i += 1;
            t.arg_idx = i;
        } else if args::is(opt, "LIMIT") && more > 0 {
            let n = int_arg(a[i + 1]).map_err(err)?;
            if n < 0 {
                return Err(err(b"ERR The LIMIT argument must be >= 0."));
            }
            t.limit = n as u64;
            limit_given = true;
            t.limit_idx = Some(i);
            i += 1;
        } else if xadd && args::is(opt, "NOMKSTREAM") {
            t.nomkstream = true;
        } else if xadd {
            let (id, seq_given) = StreamId::parse(opt, 0, true, true).ok_or(err(INVALID_ID))?;
            t.id = Some((id, seq_given));
            break;
        } else {
            return Err(err(OpError::Syntax.message().as_bytes()));
        }
        i += 1;
    }
    t.id_idx = i;
    if t.limit > 0 && t.by.is_none() {
        return Err(err(
            b"ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.by.is_none() {
        return Err(err(
            b"ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if obey {
        t.limit = 0;
    } else if limit_given {
        if !t.approx {
            return Err(err(
                b"ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        let per = db.config.stream_node_max_entries.saturating_mul(100);
        t.limit = if per <= 0 { 10_000 } else { per.min(1_000_000) } as u64;
    } else {
        t.limit = 0;
    }
    Ok(t)
}

/// The trim command as logged: an approximate trim made exact at what it left (`MAXLEN =
/// <length>` or `MINID = <first ID>`), without LIMIT; the ID made concrete for XADD.
fn log_trimmed(
    db: &mut Db,
    dbi: usize,
    a: &[&[u8]],
    t: &TrimArgs,
    made: Option<StreamId>,
    key: &[u8],
) {
    if !db.logs_changes() {
        return;
    }
    let (len, first) = match get_stream(db, dbi, key) {
        Ok(Some(s)) => (s.len(), s.edge_id(true, true)),
        _ => (0, StreamId::MAX),
    };
    let mut cmd: Vec<Vec<u8>> = a.iter().map(|x| x.to_vec()).collect();
    if let Some(id) = made {
        cmd[t.id_idx] = id.text();
    }
    if t.approx {
        cmd[t.arg_idx - 1] = b"=".to_vec();
        cmd[t.arg_idx] = match t.by {
            Some(TrimBy::MaxLen(_)) => itoa::Buffer::new().format(len).as_bytes().to_vec(),
            _ => first.text(),
        };
        if let Some(l) = t.limit_idx {
            cmd.drain(l..l + 2);
        }
    }
    let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
    db.pull_keyspace_logs();
    db.log_change(dbi, &refs);
}

fn xadd(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let t = match parse_trim(c.db, a, true, c.session.master) {
        Ok(t) => t,
        Err(e) => return c.out.error(&e),
    };
    // Options up to the last argument leave no ID (and no fields): Redis's arity error.
    let fields = a.get(t.id_idx + 1..).unwrap_or_default();
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return wrong_arity(&mut c.out, "xadd");
    }
    if t.id == Some((StreamId::MIN, true)) {
        return c
            .out
            .error(b"ERR The ID specified in XADD must be greater than 0-0");
    }
    let (dbi, key) = (c.session.db, a[1]);
    match get_stream(c.db, dbi, key) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) if t.nomkstream => return c.out.null(),
        Ok(None) => {
            let now = c.db.now;
            c.db.dbs[dbi].set(key, Value::Stream(Box::default()), Ttl::Clear, now);
        }
        Ok(Some(_)) => {}
    }
    let (now, lim) = (c.db.now, limits(c.db));
    let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
        return;
    };
    if s.last_id == StreamId::MAX {
        return c
            .out
            .error(b"ERR The stream has exhausted the last possible ID, unable to add more items");
    }
    let id = match s.append(fields, t.id, now, lim) {
        Ok(id) => id,
        Err(AddError::IdTooSmall) => {
            return c.out.error(
                b"ERR The ID specified in XADD is equal or smaller than the target stream top item",
            )
        }
        Err(AddError::TooLarge) => return c.out.error(b"ERR Elements are too large to be stored"),
    };
    write_id(&mut c.out, id);
    c.db.notify(class::STREAM, "xadd", dbi, key);
    if let Some(by) = t.by {
        let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
            return;
        };
        if s.trim(by, t.approx, t.limit) > 0 {
            c.db.notify(class::STREAM, "xtrim", dbi, key);
        }
    }
    c.db.signal_modified(dbi, key);
    let made = (t.id.is_none_or(|(_, seq)| !seq)).then_some(id);
    log_trimmed(c.db, dbi, a, &t, made, key);
}

fn xtrim(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let t = match parse_trim(c.db, a, false, c.session.master) {
        Ok(t) => t,
        Err(e) => return c.out.error(&e),
    };
    let (dbi, key) = (c.session.db, a[1]);
    let s = match stream_mut(c.db, dbi, key) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return c.out.int(0),
        Ok(Some(s)) => s,
    };
    let Some(by) = t.by else {
        return c.out.int(0);
    };
    let n = s.trim(by, t.approx, t.limit);
    if n > 0 {
        c.db.notify(class::STREAM, "xtrim", dbi, key);
        c.db.signal_modified(dbi, key);
        log_trimmed(c.db, dbi, a, &t, None, key);
    }
    c.out.int(n as i64);
}

fn xrange(c: &mut Ctx<'_>, a: &[&[u8]]) {
    range_generic(c, a, false)
}

fn xrevrange(c: &mut Ctx<'_>, a: &[&[u8]]) {
    range_generic(c, a, true)
}

fn range_generic(c: &mut Ctx<'_>, a: &[&[u8]], rev: bool) {
    let (start_arg, end_arg) = if rev { (a[3], a[2]) } else { (a[2], a[3]) };
    let start = match start_bound(start_arg) {
        Ok(id) => id,
        Err(e) => return c.out.error(e),
    };
    let end = match end_bound(end_arg) {
        Ok(id) => id,
        Err(e) => return c.out.error(e),
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < a.len() {
        if args::is(a[j], "COUNT") && j + 1 < a.len() {
            count = match int_arg(a[j + 1]) {
                Ok(n) => n.max(0),
                Err(e) => return c.out.error(e),
            };
            j += 2;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
    }
    let s = match read_stream(c.db, c.session.db, a[1]) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return c.out.array_len(0),
        Ok(Some(s)) => s,
    };
    if count == 0 {
        return c.out.null_array();
    }
    let items = collect(s, start, end, rev, count.max(0) as usize);
    c.out.array_len(items.len());
    for it in &items {
        write_item(&mut c.out, it);
    }
}

fn xlen(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match read_stream(c.db, c.session.db, a[1]) {
        Err(e) => reply_err(&mut c.out, e),
        Ok(None) => c.out.int(0),
        Ok(Some(s)) => c.out.int(s.len() as i64),
    }
}

fn xdel(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (dbi, key) = (c.session.db, a[1]);
    let s = match stream_mut(c.db, dbi, key) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return c.out.int(0),
        Ok(Some(s)) => s,
    };
    let mut ids = Vec::with_capacity(a.len() - 2);
    for x in &a[2..] {
        match parse_strict(x) {
            Ok(id) => ids.push(id),
            Err(e) => return c.out.error(e),
        }
    }
    let mut deleted = 0;
    let mut first = false;
    for id in ids {
        if s.delete(id) {
            first |= id == s.first_id;
            if id > s.max_deleted {
                s.max_deleted = id;
            }
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.is_empty() {
            s.first_id = StreamId::MIN;
        } else if first {
            s.first_id = s.edge_id(true, false);
        }
        c.db.modified(class::STREAM, "xdel", dbi, key);
    }
    c.out.int(deleted);
}

// ---------------------------------------------------------------------------------------------
// XREAD, XREADGROUP
// ---------------------------------------------------------------------------------------------

/// A parsed XREAD or XREADGROUP call.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadCall<'a> {
    /// BLOCK's milliseconds (0: for ever), if given.
    pub block_ms: Option<u64>,
    /// COUNT (0: no limit).
    pub count: usize,
    /// GROUP's group and consumer.
    pub group: Option<(&'a [u8], &'a [u8])>,
    /// NOACK.
    pub noack: bool,
    /// The stream keys.
    pub keys: &'a [&'a [u8]],
    /// Their IDs, as given.
    pub ids: &'a [&'a [u8]],
}

/// Reads an XREAD/XREADGROUP call with Redis's checks in its order.
pub fn parse_read<'a>(a: &'a [&'a [u8]], now_ms: u64) -> Result<ReadCall<'a>, Vec<u8>> {
    let group_cmd = args::is(a[0], "XREADGROUP");
    let mut call = ReadCall {
        block_ms: None,
        count: 0,
        group: None,
        noack: false,
        keys: &[],
        ids: &[],
    };
    let mut streams = None;
    let mut i = 1;
    while i < a.len() {
        let more = a.len() - i - 1;
        let o = a[i];
        if args::is(o, "BLOCK") && more > 0 {
            i += 1;
            let t = args::int(a[i])
                .map_err(|_| b"ERR timeout is not an integer or out of range".to_vec())?;
            if t < 0 {
                return Err(b"ERR timeout is negative".to_vec());
            }
            if t > 0 && t > i64::MAX - now_ms as i64 {
                return Err(b"ERR timeout is out of range".to_vec());
            }
            call.block_ms = Some(t as u64);
        } else if args::is(o, "COUNT") && more > 0 {
            i += 1;
            call.count = int_arg(a[i]).map_err(<[u8]>::to_vec)?.max(0) as usize;
        } else if args::is(o, "STREAMS") && more > 0 {
            let n = a.len() - i - 1;
            if n % 2 != 0 {
                let (name, sym) = if group_cmd {
                    ("xreadgroup", '>')
                } else {
                    ("xread", '$')
                };
                return Err(format!("ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{sym}' must be specified.").into_bytes());
            }
            streams = Some(i + 1);
            break;
        } else if args::is(o, "GROUP") && more >= 2 {
            if !group_cmd {
                return Err(
                    b"ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
                        .to_vec(),
                );
            }
            call.group = Some((a[i + 1], a[i + 2]));
            i += 2;
        } else if args::is(o, "NOACK") {
            if !group_cmd {
                return Err(
                    b"ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."
                        .to_vec(),
                );
            }
            call.noack = true;
        } else {
            return Err(OpError::Syntax.message().as_bytes().to_vec());
        }
        i += 1;
    }
    let Some(at) = streams else {
        return Err(OpError::Syntax.message().as_bytes().to_vec());
    };
    if group_cmd && call.group.is_none() {
        return Err(b"ERR Missing GROUP option for XREADGROUP".to_vec());
    }
    let n = (a.len() - at) / 2;
    call.keys = &a[at..at + n];
    call.ids = &a[at + n..];
    Ok(call)
}

/// Whether an XREAD/XREADGROUP call asks to block (BLOCK), read as [`parse_read`] does.
pub fn read_blocks(a: &[&[u8]]) -> bool {
    parse_read(a, 0).is_ok_and(|c| c.block_ms.is_some())
}

/// Indices of the keys of an XREAD/XREADGROUP call (after STREAMS, the first half).
pub(crate) fn read_key_positions(a: &[&[u8]]) -> Vec<usize> {
    let Some(s) = a.iter().skip(1).position(|x| args::is(x, "STREAMS")) else {
        return Vec::new();
    };
    let at = s + 2;
    let n = a.len().saturating_sub(at) / 2;
    (at..at + n).collect()
}

/// Each key's index among a read's keys with where its read starts.
pub type Starts = Vec<(usize, ReadFrom)>;

/// Where a read of one stream starts: after this ID, or (`New`) after the group's last
/// delivered ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    /// Entries after this ID (a consumer's own history when reading a group).
    After(StreamId),
    /// XREADGROUP's `>`: entries never delivered to the group.
    New,
}

const NOGROUP_READ: &str =
    "NOGROUP No such key '{key}' or consumer group '{group}' in XREADGROUP with GROUP option";

fn nogroup(template: &str, key: &[u8], group: &[u8]) -> Vec<u8> {
    let key = String::from_utf8_lossy(super::c_str(key));
    let group = String::from_utf8_lossy(super::c_str(group));
    super::sanitize(
        template
            .replace("{key}", &key)
            .replace("{group}", &group)
            .into_bytes(),
    )
}

/// Resolves the start (`$`, `+`, `>`, an ID) of the keys `idx` with Redis's checks: types,
/// groups. An error names the key it is about.
fn resolve(
    db: &mut Db,
    dbi: usize,
    call: &ReadCall<'_>,
    idx: impl Iterator<Item = usize>,
) -> Result<Starts, (usize, Vec<u8>)> {
    let mut from = Vec::with_capacity(call.keys.len());
    for i in idx {
        let f = resolve_one(db, dbi, call, i).map_err(|e| (i, e))?;
        from.push((i, f));
    }
    Ok(from)
}

fn resolve_one(
    db: &mut Db,
    dbi: usize,
    call: &ReadCall<'_>,
    i: usize,
) -> Result<ReadFrom, Vec<u8>> {
    let (key, arg) = (call.keys[i], call.ids[i]);
    {
        let s = read_stream(db, dbi, key).map_err(|e| e.message().as_bytes().to_vec())?;
        if let Some((group, _)) = call.group {
            if s.is_none_or(|s| !s.groups.contains_key(group)) {
                return Err(nogroup(NOGROUP_READ, key, group));
            }
        }
        let meaningless = |sym: char| {
            format!("ERR The {sym} ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The {sym} ID would just return an empty result set.").into_bytes()
        };
        let f = match arg {
            b"$" if call.group.is_some() => return Err(meaningless('$')),
            b"$" => ReadFrom::After(s.map_or(StreamId::MIN, |s| s.last_id)),
            b"+" if call.group.is_some() => return Err(meaningless('+')),
            b"+" => ReadFrom::After(s.map_or(StreamId::MIN, |s| {
                s.last_id.decr().unwrap_or(StreamId::MIN)
            })),
            b">" if call.group.is_none() => {
                return Err(b"ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.".to_vec())
            }
            b">" => ReadFrom::New,
            _ => ReadFrom::After(parse_strict(arg).map_err(<[u8]>::to_vec)?),
        };
        Ok(f)
    }
}

/// Serves the reads of `keys` (key index, start) that can be served now: each served key's
/// index with its `[entries]` reply.
fn serve_reads(
    db: &mut Db,
    dbi: usize,
    proto: Proto,
    call: &ReadCall<'_>,
    keys: &[(usize, ReadFrom)],
) -> Vec<(usize, Vec<u8>)> {
    let mut out = Vec::new();
    for &(i, f) in keys {
        let key = call.keys[i];
        let mut reply = Vec::new();
        let w = ReplyWriter::new(&mut reply, proto);
        let served = match call.group {
            None => read_plain(db, dbi, key, f, call.count, w),
            Some((group, consumer)) => {
                read_group(db, dbi, key, group, consumer, f, call.count, call.noack, w)
            }
        };
        if served {
            out.push((i, reply));
        }
    }
    out
}

/// XREAD of one stream: entries after the ID, if there are.
fn read_plain(
    db: &mut Db,
    dbi: usize,
    key: &[u8],
    from: ReadFrom,
    count: usize,
    mut w: ReplyWriter<'_>,
) -> bool {
    // A second lookup of the key, as Redis's serving loop makes (a second `keymiss`).
    let Ok(Some(s)) = read_stream(db, dbi, key) else {
        return false;
    };
    let ReadFrom::After(after) = from else {
        return false;
    };
    if s.is_empty() || s.last_valid_id() <= after {
        return false;
    }
    let Some(start) = after.incr() else {
        return false;
    };
    let items = collect(s, start, StreamId::MAX, false, count);
    w.array_len(items.len());
    for it in &items {
        write_item(&mut w, it);
    }
    true
}

/// Whether a blocked read of `key` can be served now.
pub(crate) fn read_ready(
    db: &mut Db,
    dbi: usize,
    key: &[u8],
    group: Option<&[u8]>,
    from: ReadFrom,
) -> OpResult<bool> {
    let s = match get_stream(db, dbi, key) {
        Ok(Some(s)) => s,
        // A group read ends when its key goes or changes type (Redis 7.4 unblocks it on a
        // missing key and runs it again: NOGROUP, or WRONGTYPE).
        Ok(None) => return Ok(group.is_some()),
        Err(_) if group.is_some() => return Ok(true),
        Err(e) => return Err(e),
    };
    if group.is_some_and(|g| !s.groups.contains_key(g)) {
        // Its group was destroyed: served the error.
        return Ok(true);
    }
    if s.is_empty() {
        return Ok(false);
    }
    let last = s.last_valid_id();
    Ok(match (group, from) {
        (None, ReadFrom::After(id)) => last > id,
        (Some(g), _) => s.groups.get(g).is_some_and(|g| last > g.last_id),
        (None, ReadFrom::New) => false,
    })
}

/// XREADGROUP of one stream: the consumer's history (an ID), or new entries (`>`), which it
/// then owns (unless NOACK). Logged as XCLAIMs and XGROUP SETID.
#[allow(clippy::too_many_arguments)]
fn read_group(
    db: &mut Db,
    dbi: usize,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    from: ReadFrom,
    count: usize,
    noack: bool,
    mut w: ReplyWriter<'_>,
) -> bool {
    let now = db.now;
    let logging = db.logs_changes();
    let Ok(Some(s)) = stream_mut(db, dbi, key) else {
        return false;
    };
    let Some(g) = s.groups.get(group) else {
        return false;
    };
    let mut start = match from {
        ReadFrom::After(id) => Some(id),
        ReadFrom::New => None,
    };
    if start.is_none() && !s.is_empty() {
        let last = s.last_valid_id();
        if last > g.last_id {
            start = Some(g.last_id);
        }
    }
    let history = matches!(from, ReadFrom::After(_));
    let created = !g.consumers.contains_key(consumer);
    if let Some(g) = s.groups.get_mut(group) {
        let c = g
            .consumers
            .entry(consumer.into())
            .or_insert_with(|| Consumer {
                seen_time: now,
                active_time: -1,
                pel: Default::default(),
            });
        c.seen_time = now;
    }
    if created {
        db.stats.dirty += 1;
        db.notify(class::STREAM, "xgroup-createconsumer", dbi, key);
        if noack {
            db.pull_keyspace_logs();
            db.log_change(dbi, &[b"XGROUP", b"CREATECONSUMER", key, group, consumer]);
        }
    }
    let Some(after) = start else {
        return false;
    };
    let Ok(Some(s)) = stream_mut(db, dbi, key) else {
        return false;
    };
    let begin = after.incr().unwrap_or(StreamId::MAX);
    if history {
        // The consumer's own pending entries from `begin`: each one found is delivered again.
        let ids: Vec<StreamId> = s
            .groups
            .get(group)
            .and_then(|g| g.consumers.get(consumer))
            .map(|c| {
                c.pel
                    .range(begin..)
                    .take(if count == 0 { usize::MAX } else { count })
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        w.array_len(ids.len());
        let mut found = Vec::with_capacity(ids.len());
        for &id in &ids {
            match s.get(id) {
                Some(it) => {
                    write_item(&mut w, &it);
                    found.push(id);
                }
                None => {
                    w.array_len(2);
                    write_id(&mut w, id);
                    w.null_array();
                }
            }
        }
        if let Some(g) = s.groups.get_mut(group) {
            for id in found {
                if let Some(n) = g.pel.get_mut(&id) {
                    n.delivery_time = now;
                    n.delivery_count += 1;
                }
            }
        }
        return true;
    }
    // New entries: write them, then move the group past them and own them.
    let items = collect(s, begin, StreamId::MAX, false, count);
    let ids: Vec<StreamId> = items.iter().map(|it| it.id).collect();
    w.array_len(items.len());
    for it in &items {
        write_item(&mut w, it);
    }
    drop(items);
    let Some(g0) = s.groups.get(group) else {
        return true;
    };
    let (mut last_id, mut entries_read) = (g0.last_id, g0.entries_read);
    let mut steps = Vec::with_capacity(ids.len());
    for &id in &ids {
        if id > last_id {
            if entries_read != INVALID_ENTRIES_READ && !s.range_has_tombstones(id, StreamId::MAX) {
                entries_read += 1;
            } else if s.entries_added > 0 {
                entries_read = s.estimate_distance(id);
            }
            last_id = id;
        }
        steps.push(last_id);
    }
    let moved = last_id != g0.last_id || entries_read != g0.entries_read;
    let Some(g) = s.groups.get_mut(group) else {
        return true;
    };
    g.last_id = last_id;
    g.entries_read = entries_read;
    let mut claims: Vec<(StreamId, StreamId, u64)> = Vec::new();
    if !noack {
        for (&id, &step) in ids.iter().zip(&steps) {
            if let Some(old) = g.pel.get(&id).map(|n| n.consumer.clone()) {
                if let Some(oc) = g.consumers.get_mut(&old) {
                    oc.pel.remove(&id);
                }
            }
            g.pel.insert(
                id,
                Nack {
                    consumer: consumer.into(),
                    delivery_time: now,
                    delivery_count: 1,
                },
            );
            if let Some(c) = g.consumers.get_mut(consumer) {
                c.pel.insert(id);
                c.active_time = now as i64;
            }
            claims.push((id, step, now));
        }
    }
    let any = !ids.is_empty();
    if any {
        db.stats.dirty += 1;
    }
    if logging {
        db.pull_keyspace_logs();
        for (id, step, time) in claims {
            log_xclaim(db, dbi, key, group, consumer, id, time, 1, step);
        }
        if any && moved {
            log_setid(db, dbi, key, group, last_id, entries_read);
        }
    }
    true
}

/// Logs `XCLAIM key group consumer 0 id TIME t RETRYCOUNT n FORCE JUSTID LASTID last`.
#[allow(clippy::too_many_arguments)]
fn log_xclaim(
    db: &mut Db,
    dbi: usize,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    id: StreamId,
    time: u64,
    count: u64,
    last: StreamId,
) {
    let (id, last) = (id.text(), last.text());
    let mut b1 = itoa::Buffer::new();
    let mut b2 = itoa::Buffer::new();
    db.log_change(
        dbi,
        &[
            b"XCLAIM",
            key,
            group,
            consumer,
            b"0",
            &id,
            b"TIME",
            b1.format(time).as_bytes(),
            b"RETRYCOUNT",
            b2.format(count).as_bytes(),
            b"FORCE",
            b"JUSTID",
            b"LASTID",
            &last,
        ],
    );
}

/// Logs what XCLAIM or XAUTOCLAIM did to each pending entry (its state after, or the one it
/// dropped), as the XCLAIMs that redo it, after the deletions of keys found expired.
fn log_claims(
    db: &mut Db,
    dbi: usize,
    key: &[u8],
    group: &[u8],
    claims: Vec<(StreamId, Nack)>,
    last: StreamId,
) {
    db.pull_keyspace_logs();
    for (id, n) in claims {
        log_xclaim(
            db,
            dbi,
            key,
            group,
            &n.consumer,
            id,
            n.delivery_time,
            n.delivery_count,
            last,
        );
    }
}

/// Logs `XGROUP SETID key group last ENTRIESREAD n`.
fn log_setid(db: &mut Db, dbi: usize, key: &[u8], group: &[u8], last: StreamId, read: i64) {
    let last = last.text();
    let mut b = itoa::Buffer::new();
    db.log_change(
        dbi,
        &[
            b"XGROUP",
            b"SETID",
            key,
            group,
            &last,
            b"ENTRIESREAD",
            b.format(read).as_bytes(),
        ],
    );
}

/// Writes the reply of the served reads (key index, `[entries]`): per stream `[key, entries]`
/// (RESP3: a map of key to entries).
pub fn write_reads(w: &mut ReplyWriter<'_>, keys: &[&[u8]], served: &[(usize, Vec<u8>)]) {
    if w.proto == Proto::Resp3 {
        w.map_len(served.len());
    } else {
        w.array_len(served.len());
    }
    for (i, reply) in served {
        if w.proto != Proto::Resp3 {
            w.array_len(2);
        }
        w.bulk(keys[*i]);
        w.out.extend_from_slice(reply);
    }
}

/// What a server needs to block an XREAD/XREADGROUP: each key's resolved start.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadWait {
    /// The keys with where each read starts.
    pub keys: Vec<(Vec<u8>, ReadFrom)>,
    /// COUNT (0: no limit; Redis serves a blocked read at most 1000 entries... all here).
    pub count: usize,
    /// GROUP's group and consumer.
    pub group: Option<(Vec<u8>, Vec<u8>)>,
    /// NOACK.
    pub noack: bool,
}

impl ReadWait {
    /// What `call` waits for, its keys' starts resolved (key index, start).
    pub fn new(call: &ReadCall<'_>, starts: &[(usize, ReadFrom)]) -> ReadWait {
        ReadWait {
            keys: starts
                .iter()
                .map(|&(i, f)| (call.keys[i].to_vec(), f))
                .collect(),
            count: call.count,
            group: call.group.map(|(g, c)| (g.to_vec(), c.to_vec())),
            noack: call.noack,
        }
    }
}

impl Db {
    /// Runs an XREAD/XREADGROUP for a client that may block: answers into `w` and returns
    /// `None` when it could (data, or an error, or no BLOCK); else writes nothing and returns
    /// what to wait for.
    pub fn stream_read_or_wait(
        &mut self,
        dbi: usize,
        a: &[&[u8]],
        w: &mut ReplyWriter<'_>,
    ) -> Option<(u64, ReadWait)> {
        let call = match parse_read(a, self.now) {
            Ok(c) => c,
            Err(e) => {
                w.error(&e);
                return None;
            }
        };
        let from = match resolve(self, dbi, &call, 0..call.keys.len()) {
            Ok(f) => f,
            Err((_, e)) => {
                w.error(&e);
                return None;
            }
        };
        let served = serve_reads(self, dbi, w.proto, &call, &from);
        if !served.is_empty() {
            write_reads(w, call.keys, &served);
            return None;
        }
        let Some(block) = call.block_ms else {
            w.null_array();
            return None;
        };
        Some((block, ReadWait::new(&call, &from)))
    }

    /// For a read whose keys span stores: resolves the starts of the keys `idx` (indices
    /// among the call's keys) held here; an error names its key's index. The call was checked
    /// by [`parse_read`] before.
    pub fn stream_read_resolve(
        &mut self,
        dbi: usize,
        a: &[&[u8]],
        idx: &[usize],
    ) -> Result<Starts, (usize, Vec<u8>)> {
        let call = parse_read(a, self.now).map_err(|e| (0, e))?;
        resolve(self, dbi, &call, idx.iter().copied())
    }

    /// For a read whose keys span stores: serves the keys (index, start) held here that can
    /// be; each served key's index with its `[entries]` reply.
    pub fn stream_read_serve_keys(
        &mut self,
        dbi: usize,
        a: &[&[u8]],
        proto: Proto,
        keys: &[(usize, ReadFrom)],
    ) -> Vec<(usize, Vec<u8>)> {
        let Ok(call) = parse_read(a, self.now) else {
            return Vec::new();
        };
        serve_reads(self, dbi, proto, &call, keys)
    }

    /// Whether a blocked read can be served from `key` now.
    pub fn stream_read_ready(&mut self, dbi: usize, key: &[u8], wait: &ReadWait) -> OpResult<bool> {
        let from = wait
            .keys
            .iter()
            .find(|(k, _)| k == key)
            .map_or(ReadFrom::New, |(_, f)| *f);
        read_ready(
            self,
            dbi,
            key,
            wait.group.as_ref().map(|(g, _)| g.as_slice()),
            from,
        )
    }

    /// Serves a blocked read from `key`: the `[entries]` part of its reply (arrays and bulk
    /// strings only, the same in RESP2 and RESP3), logged as a served XREADGROUP is; or the
    /// error that ends a group read whose key or group went (Redis's NOGROUP, WRONGTYPE).
    pub fn stream_read_serve(
        &mut self,
        dbi: usize,
        key: &[u8],
        wait: &ReadWait,
    ) -> Result<Vec<u8>, Vec<u8>> {
        if let Some((g, _)) = &wait.group {
            match get_stream(self, dbi, key) {
                Err(e) => return Err(e.message().as_bytes().to_vec()),
                Ok(s) if s.is_none_or(|s| !s.groups.contains_key(g.as_slice())) => {
                    return Err(nogroup(NOGROUP_READ, key, g))
                }
                Ok(_) => {}
            }
        }
        let mut reply = Vec::new();
        let w = ReplyWriter::new(&mut reply, Proto::Resp2);
        let from = wait
            .keys
            .iter()
            .find(|(k, _)| k == key)
            .map_or(ReadFrom::New, |(_, f)| *f);
        let served = match &wait.group {
            None => read_plain(self, dbi, key, from, wait.count, w),
            Some((g, c)) => read_group(
                self,
                dbi,
                key,
                g,
                c,
                ReadFrom::New,
                wait.count,
                wait.noack,
                w,
            ),
        };
        Ok(if served { reply } else { Vec::new() })
    }
}

/// Writes a served blocked read: one stream.
pub fn write_read_served(w: &mut ReplyWriter<'_>, key: &[u8], entries: &[u8]) {
    if w.proto == Proto::Resp3 {
        w.map_len(1);
    } else {
        w.array_len(1);
        w.array_len(2);
    }
    w.bulk(key);
    w.out.extend_from_slice(entries);
}

fn xread(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let dbi = c.session.db;
    // Not under a server's blocked-client path: answer at once (a timeout's reply when it
    // would block), as Redis answers a client that may not block.
    if c.db.stream_read_or_wait(dbi, a, &mut c.out).is_some() {
        c.out.null_array();
    }
}

// ---------------------------------------------------------------------------------------------
// Consumer groups
// ---------------------------------------------------------------------------------------------

const XGROUP_HELP: &[&str] = &[
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
];

fn subcommand_checked(c: &mut Ctx<'_>, a: &[&[u8]], name: &str) -> bool {
    if let Some(spec) = lookup(name.as_bytes()) {
        if let Err(e) = check_subcommand(spec, a) {
            c.out.out.extend_from_slice(&e);
            return false;
        }
    }
    true
}

fn subcommand_syntax(c: &mut Ctx<'_>, a: &[&[u8]], container: &str) {
    let sub = String::from_utf8_lossy(super::c_str(a[1])).into_owned();
    let msg = format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        &sub[..sub.len().min(128)],
        container
    );
    c.out.error(&super::sanitize(msg.into_bytes()));
}

fn xgroup(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if !subcommand_checked(c, a, "xgroup") {
        return;
    }
    let sub = a[1];
    let (dbi, now) = (c.session.db, c.db.now);
    let mut mkstream = false;
    let mut entries_read = INVALID_ENTRIES_READ;
    let is_create = args::is(sub, "CREATE");
    let is_setid = args::is(sub, "SETID");
    let mut exists = false;
    let mut has_group = false;
    if a.len() >= 4 {
        let mut i = 5;
        while i < a.len() {
            if is_create && args::is(a[i], "MKSTREAM") {
                mkstream = true;
                i += 1;
            } else if (is_create || is_setid) && args::is(a[i], "ENTRIESREAD") && i + 1 < a.len() {
                entries_read = match int_arg(a[i + 1]) {
                    Ok(n) => n,
                    Err(e) => return c.out.error(e),
                };
                if entries_read < 0 && entries_read != INVALID_ENTRIES_READ {
                    return c
                        .out
                        .error(b"ERR value for ENTRIESREAD must be positive or -1");
                }
                i += 2;
            } else {
                return subcommand_syntax(c, a, "XGROUP");
            }
        }
        match get_stream(c.db, dbi, a[2]) {
            Err(e) => return reply_err(&mut c.out, e),
            Ok(Some(s)) => {
                exists = true;
                has_group = s.groups.contains_key(a[3]);
            }
            Ok(None) => {}
        }
        if !mkstream {
            if !exists {
                return c.out.error(b"ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.");
            }
            if !has_group
                && (is_setid || args::is(sub, "CREATECONSUMER") || args::is(sub, "DELCONSUMER"))
            {
                return c.out.error(&nogroup(
                    "NOGROUP No such consumer group '{group}' for key name '{key}'",
                    a[2],
                    a[3],
                ));
            }
        }
    }
    let key = a.get(2).copied().unwrap_or_default();
    if a.len() == 2 && args::is(sub, "HELP") {
        c.out.help("xgroup", XGROUP_HELP);
    } else if is_create && (5..=8).contains(&a.len()) {
        let id = if a[4] == b"$" {
            match get_stream(c.db, dbi, key) {
                Ok(Some(s)) => s.last_id,
                _ => StreamId::MIN,
            }
        } else {
            match parse_strict(a[4]) {
                Ok(id) => id,
                Err(e) => return c.out.error(e),
            }
        };
        if !exists {
            c.db.dbs[dbi].set(key, Value::Stream(Box::default()), Ttl::Clear, now);
            c.db.signal_modified(dbi, key);
        }
        let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
            return;
        };
        if s.groups.contains_key(a[3]) {
            return c.out.error(b"BUSYGROUP Consumer Group name already exists");
        }
        s.groups.insert(
            a[3].into(),
            Group {
                last_id: id,
                entries_read,
                ..Group::default()
            },
        );
        c.out.ok();
        c.db.notify(class::STREAM, "xgroup-create", dbi, key);
    } else if is_setid && (a.len() == 5 || a.len() == 7) {
        let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
            return;
        };
        let id = if a[4] == b"$" {
            s.last_id
        } else {
            match StreamId::parse(a[4], 0, false, false) {
                Some((id, _)) => id,
                None => return c.out.error(INVALID_ID),
            }
        };
        if let Some(g) = s.groups.get_mut(a[3]) {
            g.last_id = id;
            g.entries_read = entries_read;
        }
        c.out.ok();
        c.db.notify(class::STREAM, "xgroup-setid", dbi, key);
    } else if args::is(sub, "DESTROY") && a.len() == 4 {
        let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
            return;
        };
        if s.groups.remove(a[3]).is_some() {
            c.out.int(1);
            c.db.notify(class::STREAM, "xgroup-destroy", dbi, key);
        } else {
            c.out.int(0);
        }
    } else if args::is(sub, "CREATECONSUMER") && a.len() == 5 {
        let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
            return;
        };
        let Some(g) = s.groups.get_mut(a[3]) else {
            return;
        };
        if g.consumers.contains_key(a[4]) {
            return c.out.int(0);
        }
        g.consumers.insert(
            a[4].into(),
            Consumer {
                seen_time: now,
                active_time: -1,
                pel: Default::default(),
            },
        );
        c.out.int(1);
        c.db.notify(class::STREAM, "xgroup-createconsumer", dbi, key);
    } else if args::is(sub, "DELCONSUMER") && a.len() == 5 {
        let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
            return;
        };
        let Some(g) = s.groups.get_mut(a[3]) else {
            return;
        };
        match g.consumers.remove(a[4]) {
            Some(cons) => {
                for id in &cons.pel {
                    g.pel.remove(id);
                }
                c.out.int(cons.pel.len() as i64);
                c.db.notify(class::STREAM, "xgroup-delconsumer", dbi, key);
            }
            None => c.out.int(0),
        }
    } else {
        subcommand_syntax(c, a, "XGROUP");
    }
}

fn xsetid(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let id = match parse_strict(a[2]) {
        Ok(id) => id,
        Err(e) => return c.out.error(e),
    };
    let mut added: i64 = -1;
    let mut max_del = StreamId::MIN;
    let mut i = 3;
    while i < a.len() {
        let more = a.len() - 1 - i;
        if args::is(a[i], "ENTRIESADDED") && more > 0 {
            added = match int_arg(a[i + 1]) {
                Ok(n) => n,
                Err(e) => return c.out.error(e),
            };
            if added < 0 {
                return c.out.error(b"ERR entries_added must be positive");
            }
            i += 2;
        } else if args::is(a[i], "MAXDELETEDID") && more > 0 {
            max_del = match parse_strict(a[i + 1]) {
                Ok(m) => m,
                Err(e) => return c.out.error(e),
            };
            if id < max_del {
                return c.out.error(b"ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
            }
            i += 2;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
    }
    let (dbi, key) = (c.session.db, a[1]);
    let s = match stream_mut(c.db, dbi, key) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return reply_err(&mut c.out, OpError::NoSuchKey),
        Ok(Some(s)) => s,
    };
    if id < s.max_deleted {
        return c
            .out
            .error(b"ERR The ID specified in XSETID is smaller than current max_deleted_entry_id");
    }
    if !s.is_empty() {
        if id < s.last_valid_id() {
            return c.out.error(
                b"ERR The ID specified in XSETID is smaller than the target stream top item",
            );
        }
        if added != -1 && s.len() > added as u64 {
            return c.out.error(b"ERR The entries_added specified in XSETID is smaller than the target stream length");
        }
    }
    s.last_id = id;
    if added != -1 {
        s.entries_added = added as u64;
    }
    if max_del != StreamId::MIN {
        s.max_deleted = max_del;
    }
    c.out.ok();
    c.db.notify(class::STREAM, "xsetid", dbi, key);
}

fn xack(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (dbi, key) = (c.session.db, a[1]);
    let has = match get_stream(c.db, dbi, key) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(s) => s.is_some_and(|s| s.groups.contains_key(a[2])),
    };
    if !has {
        return c.out.int(0);
    }
    let mut ids = Vec::with_capacity(a.len() - 3);
    for x in &a[3..] {
        match parse_strict(x) {
            Ok(id) => ids.push(id),
            Err(e) => return c.out.error(e),
        }
    }
    let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
        return;
    };
    let Some(g) = s.groups.get_mut(a[2]) else {
        return;
    };
    let mut n = 0;
    for id in ids {
        if let Some(nack) = g.pel.remove(&id) {
            if let Some(cons) = g.consumers.get_mut(&nack.consumer) {
                cons.pel.remove(&id);
            }
            n += 1;
        }
    }
    c.out.int(n);
}

const NOGROUP_KEY: &str = "NOGROUP No such key '{key}' or consumer group '{group}'";

fn xpending(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let justinfo = a.len() == 3;
    if a.len() != 3 && !(6..=9).contains(&a.len()) {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    let (mut start, mut end, mut count, mut minidle) = (StreamId::MIN, StreamId::MAX, 0i64, 0i64);
    let mut consumer = None;
    if a.len() >= 6 {
        let mut si = 3;
        if args::is(a[3], "IDLE") {
            minidle = match int_arg(a[4]) {
                Ok(n) => n,
                Err(e) => return c.out.error(e),
            };
            if a.len() < 8 {
                return reply_err(&mut c.out, OpError::Syntax);
            }
            si += 2;
        }
        count = match int_arg(a[si + 2]) {
            Ok(n) => n.max(0),
            Err(e) => return c.out.error(e),
        };
        start = match start_bound(a[si]) {
            Ok(id) => id,
            Err(e) => return c.out.error(e),
        };
        end = match end_bound(a[si + 1]) {
            Ok(id) => id,
            Err(e) => return c.out.error(e),
        };
        consumer = a.get(si + 3).copied();
    }
    let (dbi, key) = (c.session.db, a[1]);
    let now = c.db.now as i64;
    let s = match read_stream(c.db, dbi, key) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(s) => s,
    };
    let Some(g) = s.and_then(|s| s.groups.get(a[2])) else {
        return c.out.error(&nogroup(NOGROUP_KEY, key, a[2]));
    };
    let w = &mut c.out;
    if justinfo {
        w.array_len(4);
        w.int(g.pel.len() as i64);
        match (g.pel.first_key_value(), g.pel.last_key_value()) {
            (Some((first, _)), Some((last, _))) => {
                write_id(w, *first);
                write_id(w, *last);
                let owners: Vec<_> = g
                    .consumers
                    .iter()
                    .filter(|(_, c)| !c.pel.is_empty())
                    .collect();
                w.array_len(owners.len());
                for (name, cons) in owners {
                    w.array_len(2);
                    w.bulk(name);
                    w.bulk_int(cons.pel.len() as i64);
                }
            }
            _ => {
                w.null();
                w.null();
                w.null_array();
            }
        }
        return;
    }
    let ids: Vec<StreamId> = match consumer {
        Some(name) => match g.consumers.get(name) {
            None => return w.array_len(0),
            Some(cons) => cons.pel.range(start..=end.max(start)).copied().collect(),
        },
        None => g
            .pel
            .range(start..=end.max(start))
            .map(|(k, _)| *k)
            .collect(),
    };
    let mut rows = Vec::new();
    for id in ids {
        if id > end || count == 0 {
            break;
        }
        let Some(n) = g.pel.get(&id) else {
            continue;
        };
        let idle = now - n.delivery_time as i64;
        if minidle > 0 && idle < minidle {
            continue;
        }
        count -= 1;
        rows.push((id, n, idle.max(0)));
    }
    w.array_len(rows.len());
    for (id, n, idle) in rows {
        w.array_len(4);
        write_id(w, id);
        w.bulk(&n.consumer);
        w.int(idle);
        w.int(n.delivery_count as i64);
    }
}

/// The consumer `name` of group `group` of the stream at `key`, created when missing.
fn consumer_seen(db: &mut Db, dbi: usize, key: &[u8], group: &[u8], name: &[u8]) {
    let now = db.now;
    let Ok(Some(s)) = stream_mut(db, dbi, key) else {
        return;
    };
    let Some(g) = s.groups.get_mut(group) else {
        return;
    };
    let created = !g.consumers.contains_key(name);
    let c = g.consumers.entry(name.into()).or_insert_with(|| Consumer {
        seen_time: now,
        active_time: -1,
        pel: Default::default(),
    });
    c.seen_time = now;
    if created {
        db.notify(class::STREAM, "xgroup-createconsumer", dbi, key);
    }
}

/// Gives the pending entry `id` to `consumer` (from whoever had it).
fn reassign(g: &mut Group, id: StreamId, consumer: &[u8]) {
    let Some(n) = g.pel.get_mut(&id) else {
        return;
    };
    if *n.consumer != *consumer {
        if let Some(old) = g.consumers.get_mut(&n.consumer) {
            old.pel.remove(&id);
        }
        n.consumer = consumer.into();
    }
    if let Some(c) = g.consumers.get_mut(consumer) {
        c.pel.insert(id);
    }
}

/// XCLAIM's and XAUTOCLAIM's step for one pending entry: gives it to `consumer`, delivered at
/// `times.0` (the consumer active at `times.1`), its count set to `retry` or (unless JUSTID)
/// raised, and writes its ID or its entry. The entry's state after, for the log.
#[allow(clippy::too_many_arguments)]
fn claim(
    s: &mut Stream,
    group: &[u8],
    id: StreamId,
    consumer: &[u8],
    times: (u64, i64),
    retry: Option<u64>,
    justid: bool,
    w: &mut ReplyWriter<'_>,
) -> Option<Nack> {
    let g = s.groups.get_mut(group)?;
    reassign(g, id, consumer);
    let nk = g.pel.get_mut(&id)?;
    nk.delivery_time = times.0;
    match retry {
        Some(n) => nk.delivery_count = n,
        None if !justid => nk.delivery_count += 1,
        None => {}
    }
    let nk = nk.clone();
    if let Some(cons) = g.consumers.get_mut(consumer) {
        cons.active_time = times.1;
    }
    if justid {
        write_id(w, id);
    } else if let Some(it) = s.get(id) {
        write_item(w, &it);
    }
    Some(nk)
}

/// Drops the pending entry `id`.
fn drop_pending(g: &mut Group, id: StreamId) -> Option<Nack> {
    let n = g.pel.remove(&id)?;
    if let Some(c) = g.consumers.get_mut(&n.consumer) {
        c.pel.remove(&id);
    }
    Some(n)
}

fn xclaim(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (dbi, key, group, consumer) = (c.session.db, a[1], a[2], a[3]);
    let has = match get_stream(c.db, dbi, key) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(s) => s.is_some_and(|s| s.groups.contains_key(group)),
    };
    if !has {
        return c.out.error(&nogroup(NOGROUP_KEY, key, group));
    }
    let minidle = match args::int(a[4]) {
        Ok(n) => n.max(0),
        Err(_) => {
            return c
                .out
                .error(b"ERR Invalid min-idle-time argument for XCLAIM")
        }
    };
    let mut j = 5;
    let mut ids = Vec::new();
    while j < a.len() {
        match parse_strict(a[j]) {
            Ok(id) => ids.push((id, j)),
            Err(_) => break,
        }
        j += 1;
    }
    let now = c.db.now as i64;
    let (mut force, mut justid) = (false, false);
    let mut retrycount: i64 = -1;
    let mut deliverytime: i64 = -1;
    let mut last_id = StreamId::MIN;
    while j < a.len() {
        let more = a.len() - 1 - j;
        let opt = a[j];
        if args::is(opt, "FORCE") {
            force = true;
        } else if args::is(opt, "JUSTID") {
            justid = true;
        } else if args::is(opt, "IDLE") && more > 0 {
            j += 1;
            match args::int(a[j]) {
                Ok(n) => deliverytime = now.wrapping_sub(n),
                Err(_) => return c.out.error(b"ERR Invalid IDLE option argument for XCLAIM"),
            }
        } else if args::is(opt, "TIME") && more > 0 {
            j += 1;
            match args::int(a[j]) {
                Ok(n) => deliverytime = n,
                Err(_) => return c.out.error(b"ERR Invalid TIME option argument for XCLAIM"),
            }
        } else if args::is(opt, "RETRYCOUNT") && more > 0 {
            j += 1;
            match args::int(a[j]) {
                Ok(n) => retrycount = n,
                Err(_) => {
                    return c
                        .out
                        .error(b"ERR Invalid RETRYCOUNT option argument for XCLAIM")
                }
            }
        } else if args::is(opt, "LASTID") && more > 0 {
            j += 1;
            match parse_strict(a[j]) {
                Ok(id) => last_id = id,
                Err(e) => return c.out.error(e),
            }
        } else {
            let o = String::from_utf8_lossy(super::c_str(opt)).into_owned();
            return c.out.error(&super::sanitize(
                format!("ERR Unrecognized XCLAIM option '{o}'").into_bytes(),
            ));
        }
        j += 1;
    }
    let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
        return;
    };
    let Some(g) = s.groups.get_mut(group) else {
        return;
    };
    let mut propagate_last = false;
    if last_id > g.last_id {
        g.last_id = last_id;
        propagate_last = true;
    }
    if deliverytime == -1 || deliverytime < 0 || deliverytime > now {
        deliverytime = now;
    }
    consumer_seen(c.db, dbi, key, group, consumer);
    let logging = c.db.logs_changes();
    let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
        return;
    };
    let mut reply = Vec::new();
    let mut w = ReplyWriter::new(&mut reply, c.out.proto);
    let mut n = 0usize;
    let mut logs: Vec<(StreamId, Nack)> = Vec::new();
    for (id, _) in ids {
        let exists = s.get(id).is_some();
        let Some(g) = s.groups.get_mut(group) else {
            break;
        };
        if !exists {
            if let Some(nack) = drop_pending(g, id) {
                logs.push((id, nack));
                propagate_last = false;
            }
            continue;
        }
        let fresh = force && !g.pel.contains_key(&id);
        if fresh {
            // A new pending entry: delivered once, owned by nobody until just below (so the
            // idle check does not apply to it).
            g.pel.insert(
                id,
                Nack {
                    consumer: consumer.into(),
                    delivery_time: now as u64,
                    delivery_count: 1,
                },
            );
        }
        let Some(nk) = g.pel.get(&id) else {
            continue;
        };
        if !fresh && minidle > 0 && now - (nk.delivery_time as i64) < minidle {
            continue;
        }
        let retry = (retrycount >= 0).then_some(retrycount as u64);
        let Some(nk) = claim(
            s,
            group,
            id,
            consumer,
            (deliverytime as u64, now),
            retry,
            justid,
            &mut w,
        ) else {
            continue;
        };
        n += 1;
        logs.push((id, nk));
        propagate_last = false;
    }
    c.out.array_len(n);
    c.out.out.extend_from_slice(&reply);
    let (glast, gread) = s
        .groups
        .get(group)
        .map_or((StreamId::MIN, INVALID_ENTRIES_READ), |g| {
            (g.last_id, g.entries_read)
        });
    if logging {
        log_claims(c.db, dbi, key, group, logs, glast);
        if propagate_last {
            log_setid(c.db, dbi, key, group, glast, gread);
        }
    }
}

fn xautoclaim(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let (dbi, key, group, consumer) = (c.session.db, a[1], a[2], a[3]);
    let minidle = match args::int(a[4]) {
        Ok(n) => n.max(0),
        Err(_) => {
            return c
                .out
                .error(b"ERR Invalid min-idle-time argument for XAUTOCLAIM")
        }
    };
    let start = match start_bound(a[5]) {
        Ok(id) => id,
        Err(e) => return c.out.error(e),
    };
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < a.len() {
        let more = a.len() - 1 - j;
        if args::is(a[j], "COUNT") && more > 0 {
            let max = i64::MAX / 16;
            match args::int(a[j + 1]) {
                Ok(n) if (1..=max).contains(&n) => count = n,
                _ => return c.out.error(b"ERR COUNT must be > 0"),
            }
            j += 1;
        } else if args::is(a[j], "JUSTID") {
            justid = true;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
        j += 1;
    }
    let has = match get_stream(c.db, dbi, key) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(s) => s.is_some_and(|s| s.groups.contains_key(group)),
    };
    if !has {
        return c.out.error(&nogroup(NOGROUP_KEY, key, group));
    }
    consumer_seen(c.db, dbi, key, group, consumer);
    let now = c.db.now as i64;
    let logging = c.db.logs_changes();
    let Ok(Some(s)) = stream_mut(c.db, dbi, key) else {
        return;
    };
    let mut attempts = count.saturating_mul(10);
    let mut reply = Vec::new();
    let mut w = ReplyWriter::new(&mut reply, c.out.proto);
    let mut claimed = 0usize;
    let mut deleted = Vec::new();
    let mut logs: Vec<(StreamId, Nack)> = Vec::new();
    let mut cursor = start;
    let mut next = StreamId::MIN;
    while let Some((&id, _)) = s
        .groups
        .get(group)
        .and_then(|g| g.pel.range(cursor..).next())
    {
        if attempts == 0 || count == 0 {
            next = id;
            break;
        }
        attempts -= 1;
        cursor = match id.incr() {
            Some(n) => n,
            None => StreamId::MAX,
        };
        let exists = s.get(id).is_some();
        let Some(g) = s.groups.get_mut(group) else {
            break;
        };
        if !exists {
            if let Some(nack) = drop_pending(g, id) {
                logs.push((id, nack));
            }
            deleted.push(id);
            count -= 1;
        } else {
            let idle = g.pel.get(&id).map_or(0, |nk| now - nk.delivery_time as i64);
            if minidle > 0 && idle < minidle {
                if id == StreamId::MAX {
                    break;
                }
                continue;
            }
            if let Some(nk) = claim(
                s,
                group,
                id,
                consumer,
                (now as u64, now),
                None,
                justid,
                &mut w,
            ) {
                claimed += 1;
                count -= 1;
                logs.push((id, nk));
            }
        }
        if id == StreamId::MAX {
            break;
        }
    }
    c.out.array_len(3);
    write_id(&mut c.out, next);
    c.out.array_len(claimed);
    c.out.out.extend_from_slice(&reply);
    c.out.array_len(deleted.len());
    for id in &deleted {
        write_id(&mut c.out, *id);
    }
    let glast = s.groups.get(group).map_or(StreamId::MIN, |g| g.last_id);
    if logging {
        log_claims(c.db, dbi, key, group, logs, glast);
    }
}

// ---------------------------------------------------------------------------------------------
// XINFO
// ---------------------------------------------------------------------------------------------

const XINFO_HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

/// Nodes of Redis's radix tree holding the master IDs `keys` (sorted, distinct, 16 bytes
/// each), in its compressed form: the root, each child of a branching point, and each end of
/// a run of single children (a leaf or the next branching point).
fn rax_nodes(keys: &[[u8; 16]]) -> u64 {
    fn sub(keys: &[[u8; 16]], depth: usize) -> u64 {
        if depth >= 16 || keys.len() <= 1 {
            // A leaf; or one key whose remaining bytes are one compressed node, then its leaf.
            return if depth >= 16 { 1 } else { 2 };
        }
        let (first, last) = (&keys[0], &keys[keys.len() - 1]);
        if first[depth] == last[depth] {
            let lcp = (depth..16).take_while(|&i| first[i] == last[i]).count() + depth;
            return 1 + sub(keys, lcp);
        }
        let mut n = 1;
        let mut i = 0;
        while i < keys.len() {
            let b = keys[i][depth];
            let j = i + keys[i..].iter().take_while(|k| k[depth] == b).count();
            n += sub_child(&keys[i..j], depth + 1);
            i = j;
        }
        n
    }
    /// The subtree under a branching node's child at `depth` (that child included).
    fn sub_child(keys: &[[u8; 16]], depth: usize) -> u64 {
        if depth >= 16 {
            return 1;
        }
        if keys.len() == 1 {
            return 2;
        }
        sub(keys, depth)
    }
    if keys.is_empty() {
        return 1;
    }
    sub(keys, 0)
}

fn xinfo(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if !subcommand_checked(c, a, "xinfo") {
        return;
    }
    if args::is(a[1], "HELP") {
        return c.out.help("xinfo", XINFO_HELP);
    }
    let (dbi, now) = (c.session.db, c.db.now as i64);
    let Some(&key) = a.get(2) else {
        return subcommand_syntax(c, a, "XINFO");
    };
    let s = match read_stream(c.db, dbi, key) {
        Err(e) => return reply_err(&mut c.out, e),
        Ok(None) => return reply_err(&mut c.out, OpError::NoSuchKey),
        Ok(Some(s)) => s,
    };
    let w = &mut c.out;
    if args::is(a[1], "CONSUMERS") && a.len() == 4 {
        let Some(g) = s.groups.get(a[3]) else {
            return w.error(&nogroup(
                "NOGROUP No such consumer group '{group}' for key name '{key}'",
                key,
                a[3],
            ));
        };
        w.array_len(g.consumers.len());
        for (name, cons) in &g.consumers {
            let inactive = if cons.active_time != -1 {
                now - cons.active_time
            } else {
                -1
            };
            w.map_len(4);
            w.bulk(b"name");
            w.bulk(name);
            w.bulk(b"pending");
            w.int(cons.pel.len() as i64);
            w.bulk(b"idle");
            w.int((now - cons.seen_time as i64).max(0));
            w.bulk(b"inactive");
            w.int(inactive);
        }
    } else if args::is(a[1], "GROUPS") && a.len() == 3 {
        w.array_len(s.groups.len());
        for (name, g) in &s.groups {
            w.map_len(6);
            w.bulk(b"name");
            w.bulk(name);
            w.bulk(b"consumers");
            w.int(g.consumers.len() as i64);
            w.bulk(b"pending");
            w.int(g.pel.len() as i64);
            w.bulk(b"last-delivered-id");
            write_id(w, g.last_id);
            w.bulk(b"entries-read");
            write_opt(
                w,
                (g.entries_read != INVALID_ENTRIES_READ).then_some(g.entries_read),
            );
            w.bulk(b"lag");
            write_opt(w, s.group_lag(g));
        }
    } else if args::is(a[1], "STREAM") {
        info_stream(w, s, a[1], &a[3..]);
    } else {
        subcommand_syntax(c, a, "XINFO");
    }
}

fn write_opt(w: &mut ReplyWriter<'_>, v: Option<i64>) {
    match v {
        Some(n) => w.int(n),
        None => w.null(),
    }
}

fn info_stream(w: &mut ReplyWriter<'_>, s: &Stream, sub: &[u8], opts: &[&[u8]]) {
    let syntax = |w: &mut ReplyWriter<'_>| {
        let sub = String::from_utf8_lossy(super::c_str(sub)).into_owned();
        let msg = format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
            &sub[..sub.len().min(128)]
        );
        w.error(&super::sanitize(msg.into_bytes()))
    };
    let mut full = false;
    let mut count: i64 = 10;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !args::is(opts[0], "FULL") {
            return syntax(w);
        }
        full = true;
        if opts.len() == 3 {
            if !args::is(opts[1], "COUNT") {
                return syntax(w);
            }
            count = match int_arg(opts[2]) {
                Ok(n) if n < 0 => 10,
                Ok(n) => n,
                Err(e) => return w.error(e),
            };
        }
    }
    let masters: Vec<[u8; 16]> = s.nodes().map(|(k, _)| k.to_be_bytes()).collect();
    w.map_len(if full { 9 } else { 10 });
    w.bulk(b"length");
    w.int(s.len() as i64);
    w.bulk(b"radix-tree-keys");
    w.int(s.node_count() as i64);
    w.bulk(b"radix-tree-nodes");
    w.int(rax_nodes(&masters) as i64);
    w.bulk(b"last-generated-id");
    write_id(w, s.last_id);
    w.bulk(b"max-deleted-entry-id");
    write_id(w, s.max_deleted);
    w.bulk(b"entries-added");
    w.int(s.entries_added as i64);
    w.bulk(b"recorded-first-entry-id");
    write_id(w, s.first_id);
    if !full {
        w.bulk(b"groups");
        w.int(s.groups.len() as i64);
        for (name, rev) in [(&b"first-entry"[..], false), (b"last-entry", true)] {
            w.bulk(name);
            match collect(s, StreamId::MIN, StreamId::MAX, rev, 1).first() {
                Some(it) => write_item(w, it),
                None => w.null(),
            }
        }
        return;
    }
    let limit = count as usize;
    w.bulk(b"entries");
    let items = collect(s, StreamId::MIN, StreamId::MAX, false, limit);
    w.array_len(items.len());
    for it in &items {
        write_item(w, it);
    }
    w.bulk(b"groups");
    w.array_len(s.groups.len());
    let take = |n: usize| if count == 0 { n } else { n.min(limit) };
    for (name, g) in &s.groups {
        w.map_len(7);
        w.bulk(b"name");
        w.bulk(name);
        w.bulk(b"last-delivered-id");
        write_id(w, g.last_id);
        w.bulk(b"entries-read");
        write_opt(
            w,
            (g.entries_read != INVALID_ENTRIES_READ).then_some(g.entries_read),
        );
        w.bulk(b"lag");
        write_opt(w, s.group_lag(g));
        w.bulk(b"pel-count");
        w.int(g.pel.len() as i64);
        w.bulk(b"pending");
        w.array_len(take(g.pel.len()));
        for (id, n) in g.pel.iter().take(take(g.pel.len())) {
            w.array_len(4);
            write_id(w, *id);
            w.bulk(&n.consumer);
            w.int(n.delivery_time as i64);
            w.int(n.delivery_count as i64);
        }
        w.bulk(b"consumers");
        w.array_len(g.consumers.len());
        for (cname, cons) in &g.consumers {
            w.map_len(5);
            w.bulk(b"name");
            w.bulk(cname);
            w.bulk(b"seen-time");
            w.int(cons.seen_time as i64);
            w.bulk(b"active-time");
            w.int(cons.active_time);
            w.bulk(b"pel-count");
            w.int(cons.pel.len() as i64);
            w.bulk(b"pending");
            w.array_len(take(cons.pel.len()));
            for id in cons.pel.iter().take(take(cons.pel.len())) {
                // Every entry of a consumer's PEL is in its group's (kept so, and checked on
                // load).
                let (time, count) = g
                    .pel
                    .get(id)
                    .map_or((0, 0), |n| (n.delivery_time, n.delivery_count));
                w.array_len(3);
                write_id(w, *id);
                w.int(time as i64);
                w.int(count as i64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::reply::parse_reply;

    /// Random calls of every stream command, each with its key and words drawn from its own
    /// options, IDs and numbers at their limits (keys of other types too): nothing panics,
    /// and every reply is one well-formed RESP value.
    #[test]
    fn random_calls_never_panic() {
        const COMMON: &[&str] = &[
            "s",
            "t",
            "str",
            "g",
            "c",
            "0",
            "1",
            "-1",
            "0-0",
            "1-1",
            "2-*",
            "5",
            "(1-1",
            "(",
            "-",
            "+",
            "$",
            ">",
            "*",
            "x",
            "",
            "4294967296",
            "9223372036854775807",
            "-9223372036854775808",
            "18446744073709551615-18446744073709551615",
        ];
        const CALLS: &[(&str, &[&str])] = &[
            (
                "XADD",
                &["MAXLEN", "MINID", "~", "=", "LIMIT", "NOMKSTREAM", "f", "v"],
            ),
            ("XRANGE", &["COUNT"]),
            ("XREVRANGE", &["COUNT"]),
            ("XLEN", &[]),
            ("XDEL", &[]),
            ("XTRIM", &["MAXLEN", "MINID", "~", "=", "LIMIT"]),
            ("XREAD", &["COUNT", "BLOCK", "STREAMS", "GROUP", "NOACK"]),
            (
                "XREADGROUP",
                &["GROUP", "COUNT", "BLOCK", "STREAMS", "NOACK"],
            ),
            (
                "XGROUP",
                &[
                    "CREATE",
                    "SETID",
                    "DESTROY",
                    "CREATECONSUMER",
                    "DELCONSUMER",
                    "MKSTREAM",
                    "ENTRIESREAD",
                    "HELP",
                ],
            ),
            ("XSETID", &["ENTRIESADDED", "MAXDELETEDID"]),
            ("XACK", &[]),
            ("XPENDING", &["IDLE"]),
            (
                "XCLAIM",
                &["IDLE", "TIME", "RETRYCOUNT", "FORCE", "JUSTID", "LASTID"],
            ),
            ("XAUTOCLAIM", &["COUNT", "JUSTID"]),
            (
                "XINFO",
                &["STREAM", "GROUPS", "CONSUMERS", "FULL", "COUNT", "HELP"],
            ),
        ];
        let mut db = Db::new();
        db.set_change_log(true);
        db.execute(&[b"SET", b"str", b"x"]);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut session = crate::Session {
            authenticated: true,
            ..Default::default()
        };
        for round in 0..100_000 {
            let (name, own) = CALLS[next(CALLS.len())];
            let mut args: Vec<&[u8]> = vec![name.as_bytes()];
            if name == "XGROUP" || name == "XINFO" {
                args.push(own[next(own.len())].as_bytes());
            }
            args.push([&b"s"[..], b"t", b"str"][next(3)]);
            for _ in 0..next(9) {
                let w = if !own.is_empty() && next(2) == 0 {
                    own[next(own.len())]
                } else {
                    COMMON[next(COMMON.len())]
                };
                args.push(w.as_bytes());
            }
            let mut out = Vec::new();
            db.dispatch(&mut session, &args, &mut out);
            match parse_reply(&out) {
                Ok(Some((_, used))) => assert_eq!(used, out.len(), "{args:?}"),
                other => panic!("{args:?}: {other:?} {:?}", String::from_utf8_lossy(&out)),
            }
            if round % 1000 == 0 {
                let _ = db.take_changes();
            }
        }
    }

    fn k(ms: u64, seq: u64) -> [u8; 16] {
        StreamId::new(ms, seq).to_be_bytes()
    }

    #[test]
    fn rax_node_counts() {
        assert_eq!(rax_nodes(&[]), 1);
        assert_eq!(rax_nodes(&[k(1, 0)]), 2);
        // Two keys differing in the last byte: root (compressed) → branch → two leaves.
        assert_eq!(rax_nodes(&[k(1, 0), k(1, 1)]), 4);
    }
}
