//! Blocking commands (BZPOPMIN, BZPOPMAX, BZMPOP, BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH),
//! as a server runs them and as the embedded store answers them.
//!
//! [`parse`] reads a call into its keys, its timeout and the [`Op`] it waits to do. A server
//! then looks at each key in turn on the shard that owns it: [`Db::blocking_ready`] tells
//! whether the op can run there now, [`Db::blocking_run`] runs it, and [`write_served`] writes
//! the reply; when no key can serve the client it waits, and [`write_timeout`] answers when
//! its time runs out. The ready check and the run are separate so that a server can settle a
//! client that waits on several shards (claim it) between the two, in the same step.
//!
//! A caller that cannot block (the embedded store, a transaction) gets [`serve_now`]: the
//! first key that can serve, or the timeout's reply at once, as Redis answers inside MULTI.

use super::list::{parse_mpop, write_mpop};
use super::strings::reply_err;
use super::zset_api::{parse_blocking_pop, write_blocking_pop, BlockingPop, Popped};
use super::{args, Ctx};
use crate::error::OpResult;
use crate::resp::ReplyWriter;
use crate::Db;

/// What a blocked client waits to do once a key can serve it.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// BZPOPMIN, BZPOPMAX, BZMPOP: pop `count` members from one end of a sorted set.
    ZPop {
        /// The high end (BZPOPMAX, BZMPOP MAX).
        max: bool,
        /// Members to pop.
        count: usize,
        /// BZMPOP's reply shape.
        mpop: bool,
    },
    /// BLPOP, BRPOP, BLMPOP: pop `count` elements from one end of a list.
    Pop {
        /// The head (BLPOP, BLMPOP LEFT).
        left: bool,
        /// Elements to pop.
        count: usize,
        /// BLMPOP's reply shape.
        mpop: bool,
    },
    /// BLMOVE, BRPOPLPUSH: move one element from one end of the list to an end of `dest`.
    Move {
        /// Pop from the head.
        from_left: bool,
        /// Push onto the head of `dest`.
        to_left: bool,
        /// The destination key.
        dest: Vec<u8>,
    },
    /// Take nothing: served as soon as the key holds a list. For a server that must run the
    /// real op elsewhere (a BLMOVE whose destination lives on another shard): it waits with
    /// this, then tries the move again under its own locks.
    ListReady,
    /// XREAD, XREADGROUP: read new entries of a stream (boxed: the keys and their starts).
    Stream(Box<super::stream_api::ReadWait>),
}

/// A parsed blocking call.
#[derive(Clone, Debug, PartialEq)]
pub struct Call<'a> {
    /// The keys, tried in this order.
    pub keys: Vec<&'a [u8]>,
    /// How long the client may wait, in milliseconds; 0 waits for ever.
    pub timeout_ms: u64,
    /// What it waits to do.
    pub op: Op,
}

/// What an op took from a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Served {
    /// Sorted-set members with their scores.
    Z(Popped),
    /// List elements popped.
    List(Vec<Vec<u8>>),
    /// The element a move took.
    Moved(Vec<u8>),
    /// A stream read's `[entries]` reply.
    Stream(Vec<u8>),
    /// The error that ended a blocked stream read (its key or group went).
    Error(Vec<u8>),
}

/// Reads a blocking call (`args[0]` is the command name) with Redis's checks in its order;
/// the error is the message of Redis's error reply.
pub fn parse<'a>(a: &[&'a [u8]]) -> Result<Call<'a>, &'static [u8]> {
    let name = a[0];
    let is = |n: &str| args::is(name, n);
    let side = |w: &[u8]| {
        if args::is(w, "LEFT") {
            Ok(true)
        } else if args::is(w, "RIGHT") {
            Ok(false)
        } else {
            Err(crate::error::OpError::Syntax.message().as_bytes())
        }
    };
    if is("BLPOP") || is("BRPOP") {
        return Ok(Call {
            timeout_ms: args::timeout_ms(a[a.len() - 1])?,
            keys: a[1..a.len() - 1].to_vec(),
            op: Op::Pop {
                left: is("BLPOP"),
                count: 1,
                mpop: false,
            },
        });
    }
    if is("BLMPOP") {
        let (keys, left, count) = parse_mpop(a, 2)?;
        return Ok(Call {
            timeout_ms: args::timeout_ms(a[1])?,
            keys: keys.to_vec(),
            op: Op::Pop {
                left,
                count,
                mpop: true,
            },
        });
    }
    if is("BLMOVE") || is("BRPOPLPUSH") {
        let (from_left, to_left, t) = if is("BLMOVE") {
            (side(a[3])?, side(a[4])?, a[5])
        } else {
            (false, true, a[3])
        };
        return Ok(Call {
            timeout_ms: args::timeout_ms(t)?,
            keys: vec![a[1]],
            op: Op::Move {
                from_left,
                to_left,
                dest: a[2].to_vec(),
            },
        });
    }
    let args = a;
    let BlockingPop {
        keys,
        max,
        count,
        mpop,
        timeout_ms,
    } = parse_blocking_pop(args)?;
    Ok(Call {
        keys,
        timeout_ms,
        op: Op::ZPop { max, count, mpop },
    })
}

impl Db {
    /// Whether `op` can run on `key` now; WRONGTYPE when the key holds a type the op does not
    /// take (Redis reports that only on the first look, and keeps waiters blocked after).
    pub fn blocking_ready(&mut self, dbi: usize, key: &[u8], op: &Op) -> OpResult<bool> {
        match op {
            Op::ZPop { .. } => self.holds_zset(dbi, key),
            Op::Pop { .. } | Op::Move { .. } | Op::ListReady => self.holds_list(dbi, key),
            Op::Stream(ref wait) => self.stream_read_ready(dbi, key, wait),
        }
    }

    /// Runs `op` on `key` (after [`Db::blocking_ready`] said it can, in the same step).
    pub fn blocking_run(&mut self, dbi: usize, key: &[u8], op: &Op) -> OpResult<Served> {
        let served = self.blocking_op(dbi, key, op)?;
        if self.logs_changes() {
            self.pull_keyspace_logs();
            self.log_served(dbi, key, op, &served);
        }
        Ok(served)
    }

    fn blocking_op(&mut self, dbi: usize, key: &[u8], op: &Op) -> OpResult<Served> {
        match *op {
            Op::ZPop { max, count, .. } => self.zpop(dbi, key, max, count).map(Served::Z),
            Op::Pop { left, count, .. } => self.list_pop(dbi, key, left, count).map(Served::List),
            Op::Move {
                from_left,
                to_left,
                ref dest,
            } => self
                .list_move(dbi, key, dest, from_left, to_left)
                .map(|v| Served::Moved(v.unwrap_or_default())),
            Op::ListReady => Ok(Served::List(Vec::new())),
            // Logged as it reads (a group's reads as XCLAIMs and XGROUP SETID).
            Op::Stream(ref wait) => Ok(match self.stream_read_serve(dbi, key, wait) {
                Ok(entries) => Served::Stream(entries),
                Err(e) => Served::Error(e),
            }),
        }
    }
}

/// Writes the reply of an op that was served from `key`.
pub fn write_served(w: &mut ReplyWriter<'_>, op: &Op, key: &[u8], served: &Served) {
    match (op, served) {
        (&Op::ZPop { max, count, mpop }, Served::Z(popped)) => {
            let pop = BlockingPop {
                keys: Vec::new(),
                max,
                count,
                mpop,
                timeout_ms: 0,
            };
            write_blocking_pop(w, &pop, key, popped);
        }
        (&Op::Pop { mpop: true, .. }, Served::List(items)) => write_mpop(w, key, items),
        (Op::Pop { .. }, Served::List(items)) => {
            w.array_len(2);
            w.bulk(key);
            if let Some(v) = items.first() {
                w.bulk(v);
            }
        }
        (_, Served::Moved(v)) => w.bulk(v),
        (Op::Stream(_), Served::Stream(entries)) if !entries.is_empty() => {
            super::stream_api::write_read_served(w, key, entries)
        }
        (_, Served::Error(e)) => w.error(e),
        // An op is only ever served what it asks for.
        _ => w.null(),
    }
}

/// Writes the reply of a call whose time ran out: the null array, for every op (BLMOVE too,
/// as Redis's `replyToBlockedClientTimedOut` answers).
pub fn write_timeout(w: &mut ReplyWriter<'_>, _op: &Op) {
    w.null_array();
}

/// Answers a blocking call without blocking: served by the first key that can, else the
/// timeout's reply at once.
pub(crate) fn serve_now(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let call = match parse(a) {
        Ok(call) => call,
        Err(m) => return c.out.error(m),
    };
    let dbi = c.session.db;
    for k in &call.keys {
        match c.db.blocking_ready(dbi, k, &call.op) {
            Err(e) => return reply_err(&mut c.out, e),
            Ok(false) => {}
            Ok(true) => {
                return match c.db.blocking_run(dbi, k, &call.op) {
                    Ok(served) => write_served(&mut c.out, &call.op, k, &served),
                    Err(e) => reply_err(&mut c.out, e),
                }
            }
        }
    }
    // Without blocking, BLMOVE answers the null bulk (Redis's `blmoveGenericCommand` under
    // CLIENT_DENY_BLOCKING), the pops the null array.
    match call.op {
        Op::Move { .. } | Op::ListReady => c.out.null(),
        _ => write_timeout(&mut c.out, &call.op),
    }
}
