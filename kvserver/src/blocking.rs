//! Blocked clients: BZPOPMIN, BZPOPMAX and BZMPOP wait for their keys.
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
//! One difference from Redis: the first look at keys on several shards is one step per
//! shard, not one step for all, so a pop over two keys may miss a member that arrives in the
//! first key while it looks at the second.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kvcore::commands::blocking::{self as call, write_served, write_timeout};
use kvcore::commands::{flags, CommandSpec};
use kvcore::resp::ReplyWriter;
use kvcore::Session;
use tokio::net::TcpStream;

use crate::route;
use crate::shard::{PopTry, Shard, Waiter};

/// How a blocking command ended.
#[derive(PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Its reply is in the output buffer.
    Answered,
    /// The client hung up (or was killed, or overflowed its query buffer) while it waited.
    Gone,
}

/// Runs a blocking pop for `session`, waiting as long as its timeout allows. Bytes the client
/// sends meanwhile go to `input` (at most `input_limit`).
pub async fn run(
    shard: &Rc<Shard>,
    session: &Session,
    stream: &TcpStream,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    input: &mut Vec<u8>,
    input_limit: usize,
) -> Outcome {
    let mut w = ReplyWriter::new(out, session.proto);
    let pop = match call::parse(args) {
        Ok(p) => p,
        Err(message) => {
            w.error(message);
            return Outcome::Answered;
        }
    };
    let global = &shard.global;
    // Counted before the first registration, so a write spanning shards that lands right
    // after it still looks for waiters (see `wake_after_multi`).
    global.pops_in_flight.fetch_add(1, Ordering::Relaxed);
    let waiter = Arc::new(Waiter::new(session.id, session.db, pop.op.clone()));
    let mut registered: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut now = None;
    for key in &pop.keys {
        let owner = route::shard_of(key, shard.n);
        let (k, wt) = (key.to_vec(), waiter.clone());
        match shard
            .call(owner, move |sh: &Shard| sh.pop_or_wait(&k, &wt))
            .await
        {
            PopTry::Waiting => registered.push((owner, key.to_vec())),
            PopTry::Settled => break,
            PopTry::Popped(popped) => {
                now = Some(Ok((key.to_vec(), popped)));
                break;
            }
            PopTry::Failed(e) => {
                now = Some(Err(e));
                break;
            }
        }
    }
    let outcome = match now {
        Some(Ok((key, popped))) => {
            write_served(&mut w, &pop.op, &key, &popped);
            Outcome::Answered
        }
        Some(Err(e)) => {
            w.error(e.message().as_bytes());
            Outcome::Answered
        }
        None => {
            global.blocked_clients.fetch_add(1, Ordering::Relaxed);
            let deadline = (pop.timeout_ms > 0)
                .then(|| tokio::time::Instant::now() + Duration::from_millis(pop.timeout_ms));
            let gave_up = tokio::select! {
                _ = waiter.done.notified() => None,
                _ = until(deadline) => Some(Outcome::Answered),
                _ = read_while_blocked(stream, input, input_limit) => Some(Outcome::Gone),
            };
            global.blocked_clients.fetch_sub(1, Ordering::Relaxed);
            let served = match gave_up {
                None => Outcome::Answered,
                // Timed out or gone, and no shard served it first.
                Some(outcome) if waiter.claim() => {
                    if outcome == Outcome::Answered {
                        write_timeout(&mut w, &pop.op);
                    }
                    return finish(shard, registered, &waiter, outcome).await;
                }
                // A shard claimed it just as it gave up: its members are on their way.
                Some(outcome) => {
                    waiter.done.notified().await;
                    outcome
                }
            };
            match waiter.take() {
                Some((key, Ok(popped))) => write_served(&mut w, &pop.op, &key, &popped),
                Some((_, Err(e))) => w.error(e.message().as_bytes()),
                None => {}
            }
            served
        }
    };
    finish(shard, registered, &waiter, outcome).await
}

/// Withdraws the waiter's registrations and ends its pop.
async fn finish(
    shard: &Shard,
    registered: Vec<(usize, Vec<u8>)>,
    waiter: &Waiter,
    outcome: Outcome,
) -> Outcome {
    withdraw(shard, registered, waiter.id).await;
    shard.global.pops_in_flight.fetch_sub(1, Ordering::Relaxed);
    outcome
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
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Reads what the client sends while it waits into `input`; resolves when it hangs up (or
/// CLIENT KILL shuts its socket down), on a read error, or once `input` passes `limit`.
async fn read_while_blocked(stream: &TcpStream, input: &mut Vec<u8>, limit: usize) {
    let mut chunk = [0u8; 4096];
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        match stream.try_read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                input.extend_from_slice(&chunk[..n]);
                if input.len() > limit {
                    crate::log!(
                        1,
                        "closing blocked client that reached the max query buffer length"
                    );
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// Serves the clients blocked on the keys of a write that spanned shards (a command whose
/// keys live on several shards writes through [`crate::multi`], not `run_spec`).
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
