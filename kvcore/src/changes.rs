//! The change stream's source: every change a store makes, as commands that redo it.
//!
//! While a host asks for it ([`Db::set_change_log`]), each write command that did not fail is
//! appended to a buffer, RESP-encoded, in the order the store ran them; the host takes the
//! buffer ([`Db::take_changes`]) to append it to an AOF or send it to replicas. A command is
//! logged as Redis propagates it, so that replaying the log on the state it started from gives
//! the same state whenever and wherever it is replayed:
//! - relative times become absolute (EXPIRE, SETEX, SET EX, GETEX, RESTORE, HEXPIRE ...
//!   become PEXPIREAT, SET PXAT, RESTORE ABSTTL, HPEXPIREAT);
//! - what depends on chance or on floating point formatting is logged by its outcome (SPOP as
//!   SREM of what it took, INCRBYFLOAT as SET KEEPTTL, HINCRBYFLOAT as HSET);
//! - a blocking pop is logged as the pop it did (BLPOP as LPOP, BLMOVE as LMOVE ...), by
//!   [`Db::blocking_run`] whatever path ran it; GETDEL as DEL;
//! - keys deleted on expiry or evicted are logged as DEL, before the command that found them.
//!
//! Each run of commands on one database starts with a SELECT, and so does every buffer handed
//! out, so that buffers of several stores (a server's shards) can be appended to one file in
//! any order.

use crate::commands::CommandSpec;
use crate::resp::reply::{parse_reply, Value as Reply};
use crate::value::{Stored, Value};
use crate::Db;

/// A place in a store's change log (see [`Db::log_mark`]).
#[derive(Clone, Copy, Debug)]
pub struct LogMark(usize, Option<usize>);

/// The change buffer of a store.
#[derive(Default)]
pub struct ChangeLog {
    out: Vec<u8>,
    /// The database the last command in `out` ran in.
    db: Option<usize>,
    /// Commands appended so far (a script's effects are wrapped only when they are several).
    pushes: u64,
}

impl ChangeLog {
    /// Appends one command run in database `db`.
    pub fn push(&mut self, db: usize, args: &[&[u8]]) {
        if self.db != Some(db) {
            let mut b = itoa::Buffer::new();
            encode(&mut self.out, &[b"SELECT", b.format(db).as_bytes()]);
            self.db = Some(db);
        }
        encode(&mut self.out, args);
        self.pushes += 1;
    }
}

/// Where a script's effects start in a store's change log (see [`Db::log_effects_begin`]).
#[derive(Clone, Copy, Debug)]
pub struct EffectsMark {
    tx: (usize, Option<usize>, usize),
    pushes: u64,
}

/// Appends `args` to `out` as a RESP multibulk.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut w = crate::resp::ReplyWriter::new(out, crate::resp::Proto::Resp2);
    w.array_len(args.len());
    for a in args {
        w.bulk(a);
    }
}

impl Db {
    /// Starts or stops logging changes (see [`crate::changes`]). Stopping drops what was not
    /// taken; starting while logging keeps it.
    pub fn set_change_log(&mut self, on: bool) {
        if !on {
            self.changes = None;
        } else if self.changes.is_none() {
            self.changes = Some(Box::default());
        }
        self.sync_log_mask();
    }

    /// Whether changes are logged.
    pub fn logs_changes(&self) -> bool {
        self.changes.is_some()
    }

    /// The changes logged since the last call, or `None` when there are none.
    pub fn take_changes(&mut self) -> Option<Vec<u8>> {
        let log = self.changes.as_deref_mut()?;
        if log.out.is_empty() {
            return None;
        }
        log.db = None;
        // The next buffer starts at this one's size: one allocation per batch, no regrowth.
        let cap = log.out.len().next_power_of_two();
        Some(std::mem::replace(&mut log.out, Vec::with_capacity(cap)))
    }

    /// Opens a transaction in the log: what is logged until [`Db::log_tx_end`] goes between
    /// MULTI and EXEC, so a loader applies all of it or (the file torn inside) none. Returns
    /// the mark to end it with; `None` when nothing is logged. `db`: the database the
    /// transaction starts in (selected before the MULTI, as Redis logs it).
    pub fn log_tx_begin(&mut self, db: usize) -> Option<(usize, Option<usize>, usize)> {
        let log = self.changes.as_deref_mut()?;
        let mark = (log.out.len(), log.db);
        if log.db != Some(db) {
            let mut b = itoa::Buffer::new();
            encode(&mut log.out, &[b"SELECT", b.format(db).as_bytes()]);
            log.db = Some(db);
        }
        encode(&mut log.out, &[b"MULTI"]);
        Some((mark.0, mark.1, log.out.len()))
    }

    /// Closes what [`Db::log_tx_begin`] opened: EXEC, or nothing at all when the
    /// transaction logged nothing.
    pub fn log_tx_end(&mut self, mark: Option<(usize, Option<usize>, usize)>) {
        let (Some((at, db, opened)), Some(log)) = (mark, self.changes.as_deref_mut()) else {
            return;
        };
        if log.out.len() == opened {
            log.out.truncate(at);
            log.db = db;
        } else {
            encode(&mut log.out, &[b"EXEC"]);
        }
    }

    /// Opens a script's effects in the log: [`Db::log_effects_end`] leaves them between MULTI
    /// and EXEC when there are several, as Redis propagates a script's writes (so a loader or
    /// a replica applies all of them or none), bare when there is one.
    pub fn log_effects_begin(&mut self, db: usize) -> Option<EffectsMark> {
        let tx = self.log_tx_begin(db)?;
        let pushes = self.changes.as_deref().map_or(0, |l| l.pushes);
        Some(EffectsMark { tx, pushes })
    }

    /// Closes what [`Db::log_effects_begin`] opened.
    pub fn log_effects_end(&mut self, mark: Option<EffectsMark>) {
        let (Some(mark), Some(log)) = (mark, self.changes.as_deref_mut()) else {
            return;
        };
        let (_, _, opened) = mark.tx;
        if log.pushes == mark.pushes + 1 {
            // One command: no MULTI around it (the MULTI is the last thing before `opened`).
            const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
            if log.out.get(opened - MULTI.len()..opened) == Some(MULTI) {
                log.out.drain(opened - MULTI.len()..opened);
                return;
            }
        }
        self.log_tx_end(Some(mark.tx));
    }

    /// Marks the log's end, for [`Db::changes_since`]: what is logged next starts with its
    /// SELECT. `None` when nothing is logged.
    pub fn log_mark(&mut self) -> Option<LogMark> {
        let log = self.changes.as_deref_mut()?;
        let mark = LogMark(log.out.len(), log.db.take());
        Some(mark)
    }

    /// Takes out what was logged since `mark` (a whole run of commands, beginning with its
    /// SELECT); the log goes on as it was at the mark. A host gathers the parts a transaction
    /// spanning shards logged on each, to log them once between MULTI and EXEC
    /// ([`Db::log_raw`]).
    pub fn changes_since(&mut self, mark: LogMark) -> Vec<u8> {
        let Some(log) = self.changes.as_deref_mut() else {
            return Vec::new();
        };
        let part = log.out.split_off(mark.0.min(log.out.len()));
        log.db = mark.1;
        part
    }

    /// Appends commands already encoded (parts from [`Db::changes_since`], each beginning with
    /// its SELECT); the next command logged selects its database again.
    pub fn log_raw(&mut self, bytes: &[u8]) {
        if let Some(log) = self.changes.as_deref_mut() {
            log.out.extend_from_slice(bytes);
            log.db = None;
        }
    }

    /// Logs a command the host ran itself (a command spanning shards, logged once, whole, by
    /// the shard that coordinated it).
    pub fn log_change(&mut self, db: usize, args: &[&[u8]]) {
        if let Some(log) = self.changes.as_deref_mut() {
            log.push(db, args);
        }
    }

    /// Logs a command that ran in database `db` and answered `reply` (not an error), as
    /// Redis propagates it.
    pub(crate) fn log_command(
        &mut self,
        db: usize,
        spec: &CommandSpec,
        args: &[&[u8]],
        reply: &[u8],
    ) {
        let now = self.now;
        let Some(log) = self.changes.as_deref_mut() else {
            return;
        };
        match redo(spec.name, args, reply, now) {
            Redo::Same => log.push(db, args),
            Redo::As(cmd) => {
                let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
                log.push(db, &refs);
            }
            Redo::Nothing => {}
        }
    }

    /// Logs the DEL of a key deleted on expiry or evicted.
    pub(crate) fn log_deleted(&mut self, db: usize, key: &[u8]) {
        if let Some(log) = self.changes.as_deref_mut() {
            log.push(db, &[b"DEL", key]);
        }
    }
}

/// How a command is logged.
enum Redo {
    /// As it was sent.
    Same,
    /// As this command.
    As(Vec<Vec<u8>>),
    /// Not at all (it changed nothing).
    Nothing,
}

fn is(a: &[u8], word: &str) -> bool {
    a.eq_ignore_ascii_case(word.as_bytes())
}

fn num(a: &[u8]) -> i64 {
    crate::num::parse_i64(a).unwrap_or(0)
}

fn text(n: i64) -> Vec<u8> {
    itoa::Buffer::new().format(n).as_bytes().to_vec()
}

/// The absolute deadline (Unix ms) of a relative or absolute time argument.
fn deadline(unit_ms: i64, absolute: bool, t: &[u8], now: u64) -> Vec<u8> {
    let t = num(t).saturating_mul(unit_ms);
    text(if absolute {
        t
    } else {
        (now as i64).saturating_add(t)
    })
}

fn owned(args: &[&[u8]]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.to_vec()).collect()
}

/// The bulk strings of a reply: a bulk, or the bulks of an array (nested arrays flattened).
fn bulks(reply: &[u8]) -> Vec<Vec<u8>> {
    fn walk(v: Reply, out: &mut Vec<Vec<u8>>) {
        match v {
            Reply::Bulk(b) | Reply::Simple(b) => out.push(b),
            Reply::Array(items) | Reply::Set(items) => items.into_iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(Some((v, _))) = parse_reply(reply) {
        walk(v, &mut out);
    }
    out
}

fn redo(name: &str, args: &[&[u8]], reply: &[u8], now: u64) -> Redo {
    let null = matches!(reply, b"$-1\r\n" | b"*-1\r\n" | b"_\r\n");
    match name {
        "set" => {
            // Plain SET and SET NX/XX/KEEPTTL are logged as sent (no copy: the common case).
            let rewritten =
                |a: &&[u8]| ["EX", "EXAT", "PX", "PXAT", "GET"].iter().any(|o| is(a, o));
            if !args[3..].iter().any(rewritten) {
                return Redo::Same;
            }
            let mut cmd = owned(&args[..3]);
            let mut changed = false;
            let mut i = 3;
            while i < args.len() {
                let a = args[i];
                let unit = if is(a, "EX") || is(a, "EXAT") {
                    1000
                } else if is(a, "PX") || is(a, "PXAT") {
                    1
                } else {
                    if !is(a, "GET") {
                        cmd.push(a.to_vec());
                    }
                    changed |= is(a, "GET");
                    i += 1;
                    continue;
                };
                let Some(t) = args.get(i + 1) else {
                    break;
                };
                cmd.push(b"PXAT".to_vec());
                cmd.push(deadline(unit, is(a, "EXAT") || is(a, "PXAT"), t, now));
                changed = true;
                i += 2;
            }
            if changed {
                Redo::As(cmd)
            } else {
                Redo::Same
            }
        }
        "setex" | "psetex" => {
            let unit = if name == "setex" { 1000 } else { 1 };
            Redo::As(vec![
                b"SET".to_vec(),
                args[1].to_vec(),
                args[3].to_vec(),
                b"PXAT".to_vec(),
                deadline(unit, false, args[2], now),
            ])
        }
        // The key's or (H...) its fields' deadline, always absolute and in milliseconds.
        "expire" | "pexpire" | "expireat" | "hexpire" | "hpexpire" | "hexpireat" => {
            let field = name.starts_with('h');
            let unit = if name.ends_with("pexpire") { 1 } else { 1000 };
            let to: &[u8] = if field { b"HPEXPIREAT" } else { b"PEXPIREAT" };
            let mut cmd = vec![
                to.to_vec(),
                args[1].to_vec(),
                deadline(unit, name.ends_with("at"), args[2], now),
            ];
            cmd.extend(owned(&args[3..]));
            Redo::As(cmd)
        }
        "getex" => {
            let Some(opt) = args.get(2) else {
                return Redo::Nothing;
            };
            if is(opt, "PERSIST") {
                return Redo::As(vec![b"PERSIST".to_vec(), args[1].to_vec()]);
            }
            let (unit, abs) = match () {
                _ if is(opt, "EX") => (1000, false),
                _ if is(opt, "PX") => (1, false),
                _ if is(opt, "EXAT") => (1000, true),
                _ => (1, true),
            };
            match args.get(3) {
                Some(t) if !null => Redo::As(vec![
                    b"PEXPIREAT".to_vec(),
                    args[1].to_vec(),
                    deadline(unit, abs, t, now),
                ]),
                _ => Redo::Nothing,
            }
        }
        "getdel" if null => Redo::Nothing,
        "getdel" => Redo::As(vec![b"DEL".to_vec(), args[1].to_vec()]),
        "restore" => {
            let abs = args.iter().skip(4).any(|a| is(a, "ABSTTL"));
            if abs || num(args[2]) == 0 {
                return Redo::Same;
            }
            let mut cmd = owned(args);
            cmd[2] = deadline(1, false, args[2], now);
            cmd.push(b"ABSTTL".to_vec());
            Redo::As(cmd)
        }
        "spop" => {
            let members = bulks(reply);
            if members.is_empty() {
                return Redo::Nothing;
            }
            let mut cmd = vec![b"SREM".to_vec(), args[1].to_vec()];
            cmd.extend(members);
            Redo::As(cmd)
        }
        "incrbyfloat" => match bulks(reply).pop() {
            Some(v) => Redo::As(vec![
                b"SET".to_vec(),
                args[1].to_vec(),
                v,
                b"KEEPTTL".to_vec(),
            ]),
            None => Redo::Nothing,
        },
        "hincrbyfloat" => match bulks(reply).pop() {
            Some(v) => Redo::As(vec![
                b"HSET".to_vec(),
                args[1].to_vec(),
                args[2].to_vec(),
                v,
            ]),
            None => Redo::Nothing,
        },
        "xgroup" if args.get(1).is_some_and(|s| is(s, "HELP")) => Redo::Nothing,
        // Logged by their handlers, with the IDs and trims they made exact.
        "xadd" | "xtrim" | "xclaim" | "xautoclaim" => Redo::Nothing,
        _ => Redo::Same,
    }
}

/// Items per command when a collection is written as commands (Redis's
/// AOF_REWRITE_ITEMS_PER_CMD).
const ITEMS_PER_COMMAND: usize = 64;

/// Appends the commands that recreate `key` holding `v` with `deadline` (an AOF base without
/// the RDB preamble, as Redis's rewrite writes it): SET, or RPUSH/SADD/HSET/ZADD of up to 64
/// items each, then HPEXPIREAT for each field with a deadline and PEXPIREAT for the key's.
pub fn key_commands(out: &mut Vec<u8>, key: &[u8], v: Stored<'_>, deadline: Option<u64>) {
    fn batched(out: &mut Vec<u8>, cmd: &[u8], key: &[u8], items: Vec<Vec<u8>>, per: usize) {
        for chunk in items.chunks(ITEMS_PER_COMMAND * per) {
            let mut args: Vec<&[u8]> = Vec::with_capacity(chunk.len() + 2);
            args.push(cmd);
            args.push(key);
            args.extend(chunk.iter().map(Vec::as_slice));
            encode(out, &args);
        }
    }
    match v {
        Stored::Value(Value::List(l)) => {
            batched(
                out,
                b"RPUSH",
                key,
                l.iter().map(|e| e.to_vec()).collect(),
                1,
            );
        }
        Stored::Value(Value::Set(s)) => {
            let mut members = Vec::with_capacity(s.len());
            s.for_each(|m| members.push(m.to_vec()));
            batched(out, b"SADD", key, members, 1);
        }
        Stored::Value(Value::ZSet(z)) => {
            let mut items = Vec::with_capacity(2 * z.len());
            z.range(0, z.len(), false, |m, s| {
                // Rust's shortest form reads back as the same double.
                items.push(s.to_string().into_bytes());
                items.push(m.to_vec());
            });
            batched(out, b"ZADD", key, items, 2);
        }
        Stored::Value(Value::Hash(h)) => {
            let mut items = Vec::with_capacity(2 * h.len());
            let mut deadlines = Vec::new();
            h.for_each(|f, v| {
                items.push(f.to_vec());
                items.push(v.to_vec());
                if let Some(Some(at)) = h.field_deadline(f) {
                    deadlines.push((f.to_vec(), at));
                }
            });
            batched(out, b"HSET", key, items, 2);
            for (f, at) in deadlines {
                encode(
                    out,
                    &[b"HPEXPIREAT", key, &text(at as i64), b"FIELDS", b"1", &f],
                );
            }
        }
        Stored::Value(Value::Stream(st)) => stream_commands(out, key, st),
        s => {
            let mut buf = itoa::Buffer::new();
            let bytes = s.as_str(&mut buf).unwrap_or_default().to_vec();
            encode(out, &[b"SET", key, &bytes]);
        }
    }
    if let Some(at) = deadline {
        encode(out, &[b"PEXPIREAT", key, &text(at as i64)]);
    }
}

/// The commands that recreate a stream, as Redis's AOF rewrite writes them: XADD of each entry
/// (an empty stream: an XADD trimmed to nothing), XSETID with its counters, then each group
/// (XGROUP CREATE), its pending entries (XCLAIM ... FORCE) and its consumers without any
/// (XGROUP CREATECONSUMER).
fn stream_commands(out: &mut Vec<u8>, key: &[u8], s: &crate::stream::Stream) {
    use crate::stream::StreamId;
    let mut b1 = itoa::Buffer::new();
    let mut b2 = itoa::Buffer::new();
    if s.is_empty() {
        encode(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    } else {
        s.range(StreamId::MIN, StreamId::MAX, false, false, |it| {
            let mut items: Vec<Vec<u8>> = Vec::with_capacity(2 * it.pairs + 3);
            items.push(b"XADD".to_vec());
            items.push(key.to_vec());
            items.push(it.id.text());
            it.for_each(|f, v| {
                items.push(f.to_vec());
                items.push(v.to_vec());
            });
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            encode(out, &refs);
            true
        });
    }
    encode(
        out,
        &[
            b"XSETID",
            key,
            &s.last_id.text(),
            b"ENTRIESADDED",
            b1.format(s.entries_added).as_bytes(),
            b"MAXDELETEDID",
            &s.max_deleted.text(),
        ],
    );
    for (name, g) in &s.groups {
        encode(
            out,
            &[
                b"XGROUP",
                b"CREATE",
                key,
                name,
                &g.last_id.text(),
                b"ENTRIESREAD",
                b1.format(g.entries_read).as_bytes(),
            ],
        );
        for (id, n) in &g.pel {
            encode(
                out,
                &[
                    b"XCLAIM",
                    key,
                    name,
                    &n.consumer,
                    b"0",
                    &id.text(),
                    b"TIME",
                    b1.format(n.delivery_time).as_bytes(),
                    b"RETRYCOUNT",
                    b2.format(n.delivery_count).as_bytes(),
                    b"JUSTID",
                    b"FORCE",
                ],
            );
        }
        for (cname, c) in &g.consumers {
            if c.pel.is_empty() {
                encode(out, &[b"XGROUP", b"CREATECONSUMER", key, name, cname]);
            }
        }
    }
}

impl Db {
    /// Logs the pop a blocked client was served: `op` on `key` in database `db`.
    pub(crate) fn log_served(
        &mut self,
        db: usize,
        key: &[u8],
        op: &crate::commands::blocking::Op,
        served: &crate::commands::blocking::Served,
    ) {
        use crate::commands::blocking::{Op, Served};
        if self.changes.is_none() {
            return;
        }
        let n = match served {
            Served::Z(p) => p.len(),
            Served::List(items) => items.len(),
            Served::Moved(_) => 1,
            // Logged by the read itself.
            Served::Stream(_) | Served::Error(_) => 0,
        };
        if n == 0 {
            return;
        }
        let count = text(n as i64);
        let side = |left: bool| if left { &b"LEFT"[..] } else { &b"RIGHT"[..] };
        match op {
            Op::ZPop { max, .. } => {
                let pop: &[u8] = if *max { b"ZPOPMAX" } else { b"ZPOPMIN" };
                self.log_change(db, &[pop, key, &count]);
            }
            Op::Pop { left, .. } => {
                let pop: &[u8] = if *left { b"LPOP" } else { b"RPOP" };
                self.log_change(db, &[pop, key, &count]);
            }
            Op::Move {
                from_left,
                to_left,
                dest,
            } => self.log_change(db, &[b"LMOVE", key, dest, side(*from_left), side(*to_left)]),
            Op::ListReady | Op::Stream(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb;

    /// Replays a change log into `db`, command by command.
    fn replay(db: &mut Db, log: &[u8]) {
        let mut at = 0;
        while at < log.len() {
            let (v, n) = parse_reply(&log[at..]).unwrap().unwrap();
            at += n;
            let Reply::Array(items) = v else {
                panic!("not a command")
            };
            let args: Vec<Vec<u8>> = items
                .into_iter()
                .map(|i| match i {
                    Reply::Bulk(b) => b,
                    _ => panic!("not a bulk"),
                })
                .collect();
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let r = db.execute(&refs);
            assert!(!matches!(r, crate::Reply::Error(_)), "{refs:?}: {r:?}");
        }
    }

    /// Every key of every database: (db, key, its value, deadline), sorted. A value is its
    /// DUMP payload, but a hash is its sorted fields with their values and deadlines (the
    /// order of a hash's fields depends on when expired fields were removed) and a set its
    /// sorted members.
    fn state(db: &mut Db) -> Vec<(usize, Vec<u8>, String, Option<u64>)> {
        let mut keys = Vec::new();
        let f = rdb::file(&db.rdb_parts(), &[]);
        rdb::load_file(&f, rdb::Limits::default(), 0, 16, |k| {
            let kind = match k.value {
                crate::value::Value::Hash(_) => 1,
                crate::value::Value::Set(_) => 2,
                _ => 0,
            };
            let dump = rdb::dump(&k.value, crate::list::Limits::default());
            keys.push((k.db, k.key, kind, dump, k.deadline_ms))
        })
        .unwrap();
        let mut out = Vec::new();
        for (dbi, key, kind, dump, deadline) in keys {
            let value = if kind == 2 {
                // A set's order depends on how it was built.
                db.select(dbi).unwrap();
                let crate::Reply::Array(mut members) = db.execute(&[b"SMEMBERS", &key]) else {
                    panic!("a set")
                };
                members.sort_by_key(|m| format!("{m:?}"));
                format!("{members:?}")
            } else if kind == 1 {
                db.select(dbi).unwrap();
                let crate::Reply::Array(flat) = db.execute(&[b"HGETALL", &key]) else {
                    panic!("a hash")
                };
                let mut fields: Vec<String> = flat
                    .chunks(2)
                    .map(|fv| {
                        let crate::Reply::Bulk(f) = &fv[0] else {
                            panic!()
                        };
                        let t = db.execute(&[b"HPEXPIRETIME", &key, b"FIELDS", b"1", f]);
                        format!("{fv:?} {t:?}")
                    })
                    .collect();
                fields.sort();
                fields.join(",")
            } else {
                format!("{dump:?}")
            };
            out.push((dbi, key, value, deadline));
        }
        out.sort();
        out
    }

    #[test]
    fn replaying_the_log_later_gives_the_same_state() {
        let rng = crate::testutil::Rng::new(0x2545_f491_4f6c_dd1d);
        let next = |n: u64| rng.below(n);
        let mut now = 1_000_000u64;
        let mut a = Db::new();
        a.set_clock(crate::Clock::Manual(now));
        a.set_change_log(true);
        let mut log = Vec::new();
        for i in 0..4000 {
            let k = format!("k{}", next(40));
            let v = format!("{}", next(100));
            let t = (1 + next(50)).to_string();
            let cmd: Vec<String> = match next(24) {
                0 => vec!["SET".into(), k, v, "EX".into(), t],
                1 => vec!["SET".into(), k, v, "PX".into(), t, "GET".into()],
                2 => vec!["SETEX".into(), k, t, v],
                3 => vec!["EXPIRE".into(), k, t],
                4 => vec!["PEXPIRE".into(), k, t, "NX".into()],
                5 => vec!["GETEX".into(), k, "PX".into(), t],
                6 => vec!["GETEX".into(), k, "PERSIST".into()],
                7 => vec!["GETDEL".into(), k],
                8 => vec!["SADD".into(), format!("s{k}"), v.clone(), format!("{v}x")],
                9 => vec!["SPOP".into(), format!("s{k}")],
                10 => vec!["SPOP".into(), format!("s{k}"), "2".into()],
                11 => vec!["INCRBYFLOAT".into(), format!("f{k}"), "0.1".into()],
                12 => vec!["HINCRBYFLOAT".into(), format!("h{k}"), v, "1.5".into()],
                13 => vec!["RPUSH".into(), format!("l{k}"), v],
                14 => vec!["BLPOP".into(), format!("l{k}"), "0".into()],
                15 => vec![
                    "BLMOVE".into(),
                    format!("l{k}"),
                    format!("l{v}"),
                    "LEFT".into(),
                    "RIGHT".into(),
                    "0".into(),
                ],
                16 => vec!["ZADD".into(), format!("z{k}"), v.clone(), v],
                17 => vec!["BZPOPMIN".into(), format!("z{k}"), "0".into()],
                18 => vec!["HSET".into(), format!("h{k}"), "f".into(), v],
                19 => vec![
                    "HEXPIRE".into(),
                    format!("h{k}"),
                    t,
                    "FIELDS".into(),
                    "1".into(),
                    "f".into(),
                ],
                20 => vec!["SELECT".into(), next(3).to_string()],
                21 => vec!["GET".into(), k],
                _ => {
                    now += next(30);
                    a.set_clock(crate::Clock::Manual(now));
                    continue;
                }
            };
            // Blocking commands run as they do inside a transaction: without blocking.
            let tx = cmd[0].starts_with('B');
            if tx {
                a.execute(&[b"MULTI"]);
            }
            let refs: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            a.execute(&refs);
            if tx {
                a.execute(&[b"EXEC"]);
            }
            if i % 7 == 0 {
                a.cron(std::time::Duration::from_millis(1));
            }
            if let Some(c) = a.take_changes() {
                log.extend_from_slice(&c);
            }
        }
        // Replayed later (the clock moved on), the log gives the state the store has then.
        now += 20;
        a.set_clock(crate::Clock::Manual(now));
        // Replayed as a server loads an AOF: with the clock stopped before every deadline,
        // so that nothing expires halfway (Redis does not expire keys while loading).
        let mut b = Db::new();
        b.set_clock(crate::Clock::Manual(1));
        replay(&mut b, &log);
        b.set_clock(crate::Clock::Manual(now));
        let (sa, sb) = (state(&mut a), state(&mut b));
        for x in &sa {
            let y = sb.iter().find(|y| y.0 == x.0 && y.1 == x.1);
            assert_eq!(
                y,
                Some(x),
                "key {:?} in db {}",
                String::from_utf8_lossy(&x.1),
                x.0
            );
        }
        assert_eq!(sa.len(), sb.len(), "keys only the replay has");
        assert!(sa.len() > 20, "a state worth comparing");
        let text = String::from_utf8_lossy(&log);
        for logged in [
            "PEXPIREAT",
            "PXAT",
            "SREM",
            "KEEPTTL",
            "HPEXPIREAT",
            "LPOP",
            "LMOVE",
            "ZPOPMIN",
            "DEL",
        ] {
            assert!(text.contains(logged), "{logged} is logged");
        }
        for never in [
            "SETEX",
            "GETEX",
            "GETDEL",
            "SPOP",
            "INCRBYFLOAT",
            "BLPOP",
            "BLMOVE",
            "BZPOPMIN",
            "\r\nEXPIRE\r\n",
            "\r\nGET\r\n",
        ] {
            assert!(!text.contains(never), "{never} is never logged");
        }
    }

    #[test]
    fn a_snapshot_as_commands_recreates_every_key() {
        let mut a = Db::new();
        a.set_clock(crate::Clock::Manual(1_000_000));
        let big: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
        let mut cmds: Vec<Vec<String>> = vec![
            vec!["SET".into(), "int".into(), "42".into()],
            vec![
                "SET".into(),
                "str".into(),
                "hello".into(),
                "PX".into(),
                "5000".into(),
            ],
            vec![
                "RPUSH".into(),
                "list".into(),
                "a".into(),
                "b".into(),
                "c".into(),
            ],
            vec![
                "SADD".into(),
                "ints".into(),
                "1".into(),
                "2".into(),
                "-3".into(),
            ],
            vec![
                "ZADD".into(),
                "z".into(),
                "1.5".into(),
                "x".into(),
                "-inf".into(),
                "y".into(),
                "0.1".into(),
                "w".into(),
            ],
            vec![
                "HSET".into(),
                "h".into(),
                "f".into(),
                "1".into(),
                "g".into(),
                "2".into(),
            ],
            vec![
                "HPEXPIRE".into(),
                "h".into(),
                "9000".into(),
                "FIELDS".into(),
                "1".into(),
                "f".into(),
            ],
            vec!["PFADD".into(), "hll".into(), "a".into(), "b".into()],
            vec!["SELECT".into(), "3".into()],
            vec!["SET".into(), "other".into(), "db".into()],
        ];
        let mut rpush = vec!["RPUSH".to_string(), "biglist".into()];
        rpush.extend(big.iter().cloned());
        let mut sadd = vec!["SADD".to_string(), "bigset".into()];
        sadd.extend(big.iter().cloned());
        let mut zadd = vec!["ZADD".to_string(), "bigz".into()];
        let mut hset = vec!["HSET".to_string(), "bigh".into()];
        for (i, m) in big.iter().enumerate() {
            zadd.push(format!("{}", i as f64 / 7.0));
            zadd.push(m.clone());
            hset.push(m.clone());
            hset.push(i.to_string());
        }
        cmds.extend([rpush, sadd, zadd, hset]);
        for c in &cmds {
            let refs: Vec<&[u8]> = c.iter().map(|s| s.as_bytes()).collect();
            a.execute(&refs);
        }
        a.execute(&[b"SELECT", b"0"]);
        a.snapshot_begin_as(true);
        let mut log = Vec::new();
        while !a.snapshot_step(3, &mut log) {}
        let text = String::from_utf8_lossy(&log);
        assert!(text.contains("HPEXPIREAT") && text.contains("PEXPIREAT"));
        // 300 items go out in commands of at most 64.
        assert_eq!(text.matches("\r\nRPUSH\r\n$7\r\nbiglist").count(), 5);
        let mut b = Db::new();
        b.set_clock(crate::Clock::Manual(1));
        replay(&mut b, &log);
        b.set_clock(crate::Clock::Manual(1_000_000));
        let (sa, sb) = (state(&mut a), state(&mut b));
        for x in &sa {
            let y = sb.iter().find(|y| y.0 == x.0 && y.1 == x.1);
            assert!(
                y == Some(x),
                "key {:?} in db {}",
                String::from_utf8_lossy(&x.1),
                x.0
            );
        }
        assert_eq!(sa.len(), sb.len());
    }
}
