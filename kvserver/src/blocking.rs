//! Blocked clients: BZPOPMIN, BZPOPMAX and BZMPOP wait for their keys.
//!
//! A blocking pop tries its keys in order, each on the shard that owns it, in one step of that
//! shard: pop if the key holds members, else register the client to be woken when a command
//! writes the key (so no write can slip between the try and the registration). When every key
//! is empty the client waits for a wake-up, its timeout, or its socket closing; woken, it
//! withdraws its other registrations and tries again, so a client beaten to the members just
//! waits on. Writes wake waiters wherever they run: local commands and remote batches through
//! [`Shard::run_spec`], commands spanning shards through [`wake_after_multi`].
//!
//! Replies of the commands before the blocking one go out before the wait; commands pipelined
//! after it run once it is answered, as in Redis.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kvcore::commands::zset_api::{parse_blocking_pop, write_blocking_pop};
use kvcore::commands::{flags, CommandSpec};
use kvcore::resp::ReplyWriter;
use kvcore::{OpError, Session};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::route;
use crate::shard::{PopTry, Shard};

/// How a blocking command ended.
#[derive(PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Its reply is in the output buffer.
    Answered,
    /// The client hung up (or was killed) while it waited.
    Gone,
}

enum Wait {
    Woken,
    TimedOut,
    Gone,
}

/// Runs a blocking pop for `session`, waiting as long as its timeout allows.
pub async fn run(
    shard: &Rc<Shard>,
    session: &Session,
    stream: &TcpStream,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Outcome {
    let mut w = ReplyWriter::new(out, session.proto);
    let now = shard.db.borrow().now_ms();
    let pop = match parse_blocking_pop(args, now) {
        Ok(p) => p,
        Err(message) => {
            w.error(message);
            return Outcome::Answered;
        }
    };
    let deadline = (pop.timeout_ms > 0)
        .then(|| tokio::time::Instant::now() + Duration::from_millis(pop.timeout_ms));
    let (dbi, id) = (session.db, session.id);
    let notify = Arc::new(Notify::new());
    let blocked = &shard.global.blocked_clients;
    let mut first = true;
    loop {
        let mut registered: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut done = None;
        for key in &pop.keys {
            let owner = route::shard_of(key, shard.n);
            let (k, n, max, count) = (key.to_vec(), notify.clone(), pop.max, pop.count);
            let tried = shard
                .call(owner, move |sh: &Shard| {
                    sh.pop_or_wait(dbi, &k, max, count, first, id, &n)
                })
                .await;
            match tried {
                PopTry::Waiting => registered.push((owner, key.to_vec())),
                other => {
                    done = Some((*key, other));
                    break;
                }
            }
        }
        if let Some((key, tried)) = done {
            withdraw(shard, registered, id).await;
            match tried {
                PopTry::Popped(popped) => write_blocking_pop(&mut w, &pop, key, &popped),
                _ => w.error(OpError::WrongType.message().as_bytes()),
            }
            if !first {
                blocked.fetch_sub(1, Ordering::Relaxed);
            }
            return Outcome::Answered;
        }
        if first {
            blocked.fetch_add(1, Ordering::Relaxed);
            first = false;
        }
        let waited = tokio::select! {
            _ = notify.notified() => Wait::Woken,
            _ = until(deadline) => Wait::TimedOut,
            _ = hung_up(stream) => Wait::Gone,
        };
        withdraw(shard, registered, id).await;
        match waited {
            Wait::Woken => continue,
            Wait::TimedOut => w.null_array(),
            Wait::Gone => {}
        }
        blocked.fetch_sub(1, Ordering::Relaxed);
        return match waited {
            Wait::Gone => Outcome::Gone,
            _ => Outcome::Answered,
        };
    }
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

/// Resolves when the client closes its end (or CLIENT KILL shuts the socket down). Bytes it
/// pipelines meanwhile stay in the socket for after the reply; then it is known to be there
/// and this never resolves.
async fn hung_up(stream: &TcpStream) {
    let mut byte = [0u8; 1];
    match stream.peek(&mut byte).await {
        Ok(0) | Err(_) => {}
        Ok(_) => std::future::pending().await,
    }
}

/// Wakes the clients blocked on the keys of a write that spanned shards (a store command
/// whose keys live on several shards writes through [`crate::multi`], not `run_spec`).
pub async fn wake_after_multi(shard: &Shard, spec: &CommandSpec, args: &[&[u8]]) {
    if shard.global.blocked_clients.load(Ordering::Relaxed) == 0 || !spec.has(flags::WRITE) {
        return;
    }
    for i in spec.key_positions(args) {
        let key = args[i].to_vec();
        let owner = route::shard_of(&key, shard.n);
        shard.call(owner, move |sh: &Shard| sh.wake(&key)).await;
    }
}
