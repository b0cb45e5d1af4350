//! Blocked clients: BZPOPMIN, BZPOPMAX, BZMPOP, BLPOP, BRPOP, BLMPOP, BLMOVE and BRPOPLPUSH
//! wait for their keys.
//!
//! A blocking pop looks at its keys in order, each on the shard that owns it, in one step of
//! that shard: pop if the key holds members, else register the client there (so no write can
//! fall between the look and the registration). When every key is empty the client waits.
//! Shards serve waiters themselves, as Redis does: right after a command writes a key, its
//! shard pops for the clients blocked on it, oldest first, and hands each its members (see
//! [`Shard::serve`]). Writes reach that step wherever they run: local commands and remote
//! batches through [`Shard::run_spec`], commands spanning shards through [`wake_after_multi`].
//! A waiter is settled once: by the shard that serves it, or by itself on timeout or
//! hang-up (see [`crate::shard::Waiter`]).
//!
//! Replies of the commands before the blocking one go out before the wait. Bytes the client
//! sends meanwhile are read (so a hang-up is seen) and kept for after the reply, as Redis
//! keeps them in the query buffer; commands pipelined after the pop run once it is answered.
//!
//! A BLMOVE whose destination lives on another shard cannot move in one step of the source's
//! shard. It tries the move under both keys' locks ([`multi::list_move_across`]); when the
//! source is empty it waits to be told the source holds elements (`Op::ListReady`, which takes
//! nothing) and tries again, so the move is atomic and nothing is taken for a client that then
//! finds the destination of the wrong type.
//!
//! One difference from Redis: the first look at keys on several shards is one step per
//! shard, not one step for all, so a pop over two keys may miss a member that arrives in the
//! first key while it looks at the second.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kvcore::commands::blocking::{self as call, write_served, write_timeout, Op, Served};
use kvcore::commands::{flags, stream_api, CommandSpec};
use kvcore::resp::ReplyWriter;
use std::future::Future;
use std::pin::Pin;

use kvcore::{OpError, Session};

use super::{multi, route};
use crate::global::{ClientEntry, UNBLOCK_ERROR};
use crate::shard::{PopTry, Shard, Waiter};

/// How a blocking command ended.
#[derive(PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Its reply is in the output buffer.
    Answered,
    /// The client hung up (or was killed, or overflowed its query buffer) while it waited.
    Gone,
}

/// Runs a blocking command for `session`, waiting as long as its timeout allows, or until
/// `gone` (the connection's watch on its socket while the client waits) resolves.
pub async fn run<G: Future<Output = ()>>(
    shard: &Rc<Shard>,
    session: &Session,
    entry: &ClientEntry,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    gone: Pin<&mut G>,
) -> Outcome {
    if is_stream_read(args) {
        return run_stream(shard, session, entry, args, out, gone).await;
    }
    let mut w = ReplyWriter::new(out, session.proto);
    let call = match call::parse(args) {
        Ok(p) => p,
        Err(message) => {
            w.error(message);
            return Outcome::Answered;
        }
    };
    // What it pops may be logged by another shard: under `appendfsync always` the reply waits
    // for a sync that covers it (the serving shard hands its change over before waking us).
    shard.note_remote_writes();
    let deadline = (call.timeout_ms > 0)
        .then(|| tokio::time::Instant::now() + Duration::from_millis(call.timeout_ms));
    let mut wait = Wait {
        shard,
        session,
        entry,
        gone,
        deadline,
    };
    // A move to a list on another shard cannot be done in one step of the source's shard: wait
    // until the source holds elements, then move under both keys' locks, and wait again if
    // another client took them first.
    if let Op::Move {
        from_left,
        to_left,
        ref dest,
    } = call.op
    {
        let src = call.keys[0];
        if route::shard_of(dest, shard.n) != route::shard_of(src, shard.n) {
            loop {
                match multi::list_move_across(
                    shard, false, session.db, src, dest, from_left, to_left,
                )
                .await
                {
                    Ok(Some(v)) => w.bulk(&v),
                    Ok(None) => match wait.round(&[src], Op::ListReady).await {
                        Round::Served(_, Ok(_)) => continue,
                        Round::Served(_, Err(e)) => w.error(e.message().as_bytes()),
                        Round::TimedOut => write_timeout(&mut w, &call.op),
                        Round::Unblocked => w.error(UNBLOCKED),
                        Round::Gone => return Outcome::Gone,
                    },
                    Err(e) => w.error(e.message().as_bytes()),
                }
                return Outcome::Answered;
            }
        }
    }
    match wait.round(&call.keys, call.op.clone()).await {
        Round::Served(key, Ok(served)) => write_served(&mut w, &call.op, &key, &served),
        Round::Served(_, Err(e)) => w.error(e.message().as_bytes()),
        Round::TimedOut => write_timeout(&mut w, &call.op),
        Round::Unblocked => w.error(UNBLOCKED),
        Round::Gone => return Outcome::Gone,
    }
    Outcome::Answered
}

/// Runs a blocking command without blocking, for a transaction that holds its keys' locks
/// (Redis runs them so inside EXEC): the first key that can serve it does, else the timeout's
/// reply at once.
pub async fn run_held(shard: &Rc<Shard>, session: &Session, args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    if is_stream_read(args) {
        let mut s = session.clone();
        multi::run_locked(shard, true, &mut s, args, &mut out).await;
        return out;
    }
    let mut w = ReplyWriter::new(&mut out, session.proto);
    let call = match call::parse(args) {
        Ok(c) => c,
        Err(message) => {
            w.error(message);
            return out;
        }
    };
    let db = session.db;
    if let Op::Move {
        from_left,
        to_left,
        ref dest,
    } = call.op
    {
        let src = call.keys[0];
        match multi::list_move_across(shard, true, db, src, dest, from_left, to_left).await {
            Ok(Some(v)) => w.bulk(&v),
            Ok(None) => w.null(),
            Err(e) => w.error(e.message().as_bytes()),
        }
        return out;
    }
    for key in &call.keys {
        let owner = route::shard_of(key, shard.n);
        let (k, op) = (key.to_vec(), call.op.clone());
        let tried = shard
            .call(owner, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                d.refresh_clock();
                match d.blocking_ready(db, &k, &op) {
                    Ok(false) => None,
                    Ok(true) => Some(d.blocking_run(db, &k, &op)),
                    Err(e) => Some(Err(e)),
                }
            })
            .await;
        match tried {
            None => continue,
            Some(Ok(served)) => write_served(&mut w, &call.op, key, &served),
            Some(Err(e)) => w.error(e.message().as_bytes()),
        }
        return out;
    }
    write_timeout(&mut w, &call.op);
    out
}

/// XREAD or XREADGROUP.
fn is_stream_read(args: &[&[u8]]) -> bool {
    args[0].eq_ignore_ascii_case(b"xread") || args[0].eq_ignore_ascii_case(b"xreadgroup")
}

/// XREAD or XREADGROUP with BLOCK: answered at once when some stream has entries for it (or on
/// an error), else it waits for the first stream that gets some, and answers with that one.
/// Keys on one shard are read there in one step; keys on several under their locks
/// ([`multi::stream_read_across`]).
async fn run_stream<G: Future<Output = ()>>(
    shard: &Rc<Shard>,
    session: &Session,
    entry: &ClientEntry,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    gone: Pin<&mut G>,
) -> Outcome {
    let proto = session.proto;
    let mut w = ReplyWriter::new(out, proto);
    let call = match stream_api::parse_read(args, shard.db.borrow().now_ms()) {
        Ok(c) => c,
        Err(e) => {
            w.error(&e);
            return Outcome::Answered;
        }
    };
    shard.note_remote_writes();
    let owner = route::shard_of(call.keys[0], shard.n);
    let one = call
        .keys
        .iter()
        .all(|k| route::shard_of(k, shard.n) == owner);
    let db = session.db;
    let wait = if one {
        let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let (reply, wait) = shard
            .call(owner, move |sh: &Shard| {
                let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
                let mut out = Vec::new();
                let wait = {
                    let mut d = sh.db.borrow_mut();
                    d.refresh_clock();
                    let mut w = ReplyWriter::new(&mut out, proto);
                    d.stream_read_or_wait(db, &refs, &mut w)
                };
                sh.flush_changes();
                (out, wait)
            })
            .await;
        w.out.extend_from_slice(&reply);
        wait
    } else {
        match multi::stream_read_across(shard, false, db, proto, args).await {
            Err(e) => {
                w.error(&e);
                None
            }
            Ok((served, _)) if !served.is_empty() => {
                stream_api::write_reads(&mut w, call.keys, &served);
                None
            }
            Ok((_, starts)) => match call.block_ms {
                None => {
                    w.null_array();
                    None
                }
                Some(ms) => Some((ms, stream_api::ReadWait::new(&call, &starts))),
            },
        }
    };
    let Some((ms, read)) = wait else {
        return Outcome::Answered;
    };
    let deadline = (ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(ms));
    let mut wait = Wait {
        shard,
        session,
        entry,
        gone,
        deadline,
    };
    let op = Op::Stream(Box::new(read));
    match wait.round(call.keys, op.clone()).await {
        Round::Served(key, Ok(served)) => write_served(&mut w, &op, &key, &served),
        Round::Served(_, Err(e)) => w.error(e.message().as_bytes()),
        Round::TimedOut => write_timeout(&mut w, &op),
        Round::Unblocked => w.error(UNBLOCKED),
        Round::Gone => return Outcome::Gone,
    }
    Outcome::Answered
}

/// The error of a wait ended by CLIENT UNBLOCK ... ERROR.
const UNBLOCKED: &[u8] = b"UNBLOCKED client unblocked via CLIENT UNBLOCK";

/// How one round of waiting ended.
enum Round {
    /// A key served the op (or the op failed there): the key and the result.
    Served(Vec<u8>, Result<Served, OpError>),
    /// The deadline passed first.
    TimedOut,
    /// The client hung up (or was killed, or overflowed its query buffer).
    Gone,
    /// CLIENT UNBLOCK ... ERROR ended the wait.
    Unblocked,
}

/// A blocked client's side of the wait.
struct Wait<'a, G> {
    shard: &'a Rc<Shard>,
    session: &'a Session,
    entry: &'a ClientEntry,
    gone: Pin<&'a mut G>,
    deadline: Option<tokio::time::Instant>,
}

impl<G: Future<Output = ()>> Wait<'_, G> {
    /// Looks at `keys` in order, each on its own shard, running `op` on the first that can
    /// serve it, else registers on all of them and waits to be served, for the deadline or for
    /// the client to go.
    async fn round(&mut self, keys: &[&[u8]], op: Op) -> Round {
        let shard = self.shard;
        let global = &shard.global;
        // Counted before the first registration, so a write spanning shards that lands right
        // after it still looks for waiters (see `wake_after_multi`).
        global.pops_in_flight.fetch_add(1, Ordering::Relaxed);
        let waiter = Arc::new(Waiter::new(self.session.id, self.session.db, op));
        let mut registered: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut now = None;
        for key in keys {
            let owner = route::shard_of(key, shard.n);
            let (k, wt) = (key.to_vec(), waiter.clone());
            match shard
                .call(owner, move |sh: &Shard| sh.pop_or_wait(&k, &wt))
                .await
            {
                PopTry::Waiting => registered.push((owner, key.to_vec())),
                PopTry::Settled => break,
                PopTry::Popped(served) => {
                    now = Some(Round::Served(key.to_vec(), Ok(served)));
                    break;
                }
                PopTry::Failed(e) => {
                    now = Some(Round::Served(key.to_vec(), Err(e)));
                    break;
                }
            }
        }
        let round = match now {
            Some(round) => round,
            None => {
                global.blocked_clients.fetch_add(1, Ordering::Relaxed);
                // Registered for CLIENT UNBLOCK before it can see the client blocked.
                let unblocked = self.entry.unblock.notified();
                self.entry.unblock_as.store(0, Ordering::Release);
                self.entry.blocked.store(true, Ordering::Release);
                let gave_up = tokio::select! {
                    _ = waiter.done.notified() => None,
                    _ = until(self.deadline) => Some(Round::TimedOut),
                    _ = self.gone.as_mut() => Some(Round::Gone),
                    _ = unblocked => Some(
                        if self.entry.unblock_as.load(Ordering::Acquire) == UNBLOCK_ERROR {
                            Round::Unblocked
                        } else {
                            Round::TimedOut
                        },
                    ),
                };
                self.entry.blocked.store(false, Ordering::Release);
                global.blocked_clients.fetch_sub(1, Ordering::Relaxed);
                match gave_up {
                    None => waiter
                        .take()
                        .map_or(Round::TimedOut, |(k, r)| Round::Served(k, r)),
                    // Timed out or gone, and no shard served it first.
                    Some(round) if waiter.claim() => round,
                    // A shard claimed it just as it gave up: what it took is on its way.
                    Some(round) => {
                        waiter.done.notified().await;
                        match (round, waiter.take()) {
                            (Round::Gone, _) => Round::Gone,
                            (_, Some((k, r))) => Round::Served(k, r),
                            (round, None) => round,
                        }
                    }
                }
            }
        };
        finish(shard, registered, &waiter).await;
        round
    }
}

/// Withdraws the waiter's registrations and ends its round.
async fn finish(shard: &Shard, registered: Vec<(usize, Vec<u8>)>, waiter: &Waiter) {
    withdraw(shard, registered, waiter.id).await;
    shard.global.pops_in_flight.fetch_sub(1, Ordering::Relaxed);
}

/// Removes client `id`'s registrations (those a wake-up has not already removed).
async fn withdraw(shard: &Shard, registered: Vec<(usize, Vec<u8>)>, id: u64) {
    for (owner, key) in registered {
        shard
            .call(owner, move |sh: &Shard| sh.unwait(&key, id))
            .await;
    }
}

async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => crate::timer::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Serves the clients blocked on the keys of a write that spanned shards (a command whose
/// keys live on several shards writes through [`super::multi`], not `run_spec`).
pub async fn wake_after_multi(shard: &Shard, spec: &CommandSpec, args: &[&[u8]]) {
    if shard.global.pops_in_flight.load(Ordering::Relaxed) == 0 || !spec.has(flags::WRITE) {
        return;
    }
    for i in spec.key_positions(args) {
        let key = args[i].to_vec();
        let owner = route::shard_of(&key, shard.n);
        shard.call(owner, move |sh: &Shard| sh.serve(&key)).await;
    }
}
