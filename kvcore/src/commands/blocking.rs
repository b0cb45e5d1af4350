//! Blocking commands, as a server runs them and as the embedded store answers them.
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

use super::strings::reply_err;
use super::zset_api::{parse_blocking_pop, write_blocking_pop, BlockingPop, Popped};
use super::Ctx;
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
}

/// Reads a blocking call (`args[0]` is the command name) with Redis's checks in its order;
/// the error is the message of Redis's error reply.
pub fn parse<'a>(args: &[&'a [u8]]) -> Result<Call<'a>, &'static [u8]> {
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
        }
    }

    /// Runs `op` on `key` (after [`Db::blocking_ready`] said it can, in the same step).
    pub fn blocking_run(&mut self, dbi: usize, key: &[u8], op: &Op) -> OpResult<Served> {
        match *op {
            Op::ZPop { max, count, .. } => self.zpop(dbi, key, max, count).map(Served::Z),
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
    }
}

/// Writes the reply of a call whose time ran out.
pub fn write_timeout(w: &mut ReplyWriter<'_>, op: &Op) {
    match op {
        Op::ZPop { .. } => w.null_array(),
    }
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
    write_timeout(&mut c.out, &call.op);
}
