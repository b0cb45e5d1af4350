//! Clients blocked on keys of this shard (BLPOP, BZPOPMIN ...): their registrations, and the
//! serving of them right after a write (see `coord::blocking` for the client's side).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kvcore::commands;
use kvcore::commands::blocking::{Op, Served};
use kvcore::OpError;
use tokio::sync::Notify;

use super::Shard;
use crate::global::lock;

/// The key that served a waiter and what its op took there (or why it failed).
pub type ServedFrom = (Vec<u8>, Result<Served, OpError>);

/// A client blocked in a pop, registered on the shard of each of its keys.
///
/// Whoever settles the wait first claims it: a shard serving it members, or the client
/// itself when it times out or hangs up. So it is served at most once, and never after it
/// gave up.
pub struct Waiter {
    /// The client's id.
    pub id: u64,
    /// Its selected database.
    pub db: usize,
    /// What it waits to do.
    pub op: Op,
    claimed: AtomicBool,
    served: Mutex<Option<ServedFrom>>,
    /// Signalled once a shard has served it.
    pub done: Notify,
}

impl Waiter {
    /// A waiter for client `id` of database `db`, waiting to do `op`.
    pub fn new(id: u64, db: usize, op: Op) -> Waiter {
        Waiter {
            id,
            db,
            op,
            claimed: AtomicBool::new(false),
            served: Mutex::new(None),
            done: Notify::new(),
        }
    }

    /// Settles the wait; false if someone settled it first.
    pub fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }

    fn claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }

    fn serve(&self, key: &[u8], served: Result<Served, OpError>) {
        *lock(&self.served) = Some((key.to_vec(), served));
        self.done.notify_one();
    }

    /// What a shard served it: the key and what the op took (or why it failed).
    pub fn take(&self) -> Option<ServedFrom> {
        lock(&self.served).take()
    }
}

/// One key's turn in a blocking pop (see [`Shard::pop_or_wait`]).
pub enum PopTry {
    /// The op ran on the key.
    Popped(Served),
    /// The key holds another type (WRONGTYPE); only the first look reports it, as in Redis.
    Failed(OpError),
    /// Nothing to pop: the client is registered to be served when the key is written.
    Waiting,
    /// Another shard served the client meanwhile (through a key registered earlier).
    Settled,
}

impl Shard {
    /// A blocking pop's first turn at `key`: pops for `w` if the key holds members, reports
    /// another type, or registers `w` to be served when the key is written. One step of this
    /// shard, so no write can fall between the look and the registration.
    pub fn pop_or_wait(&self, key: &[u8], w: &Arc<Waiter>) -> PopTry {
        let mut db = self.db.borrow_mut();
        match db.blocking_ready(w.db, key, &w.op) {
            Ok(false) => {
                let mut waiters = self.waiters.borrow_mut();
                let queue = waiters.entry(key.to_vec()).or_default();
                let before = census(queue);
                queue.push_back(w.clone());
                self.recount(before, census(queue));
                PopTry::Waiting
            }
            _ if !w.claim() => PopTry::Settled,
            Ok(true) => match db.blocking_run(w.db, key, &w.op) {
                Ok(served) => PopTry::Popped(served),
                Err(e) => PopTry::Failed(e),
            },
            Err(e) => PopTry::Failed(e),
        }
    }

    /// Removes client `id`'s registration on `key`, if it is still there.
    pub fn unwait(&self, key: &[u8], id: u64) {
        let mut waiters = self.waiters.borrow_mut();
        if let Some(queue) = waiters.get_mut(key) {
            let before = census(queue);
            queue.retain(|w| w.id != id);
            self.recount(before, census(queue));
            if queue.is_empty() {
                waiters.remove(key);
            }
        }
    }

    /// Moves INFO's blocking-key counts from a key's queue `before` a change to `after` it.
    fn recount(&self, before: (bool, bool), after: (bool, bool)) {
        let g = &self.global;
        for (was, is, counter) in [
            (before.0, after.0, &g.blocking_keys),
            (before.1, after.1, &g.blocking_keys_nokey),
        ] {
            if is && !was {
                counter.fetch_add(1, Ordering::Relaxed);
            } else if was && !is {
                counter.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Serves the clients blocked on `key` that its database can now feed, oldest first (as
    /// Redis does right after the command that wrote it). A client whose database holds no
    /// sorted set there keeps its place, and so does every client when the key holds
    /// another type (Redis 7.0 keeps them blocked).
    pub fn serve(&self, key: &[u8]) {
        if !self.waiters.borrow().contains_key(key) {
            return;
        }
        // A command spanning shards (a transaction) holds the key: its waiters are served once
        // it lets go, so none of them sees it half done.
        if self.holding_wakes.get() || self.locks.borrow().holds_name(key) {
            self.deferred.borrow_mut().insert(key.to_vec());
            return;
        }
        // A served BLMOVE pushes onto its destination (on this shard): its waiters come next.
        let mut pushed: Vec<Vec<u8>> = Vec::new();
        {
            let mut waiters = self.waiters.borrow_mut();
            let Some(queue) = waiters.get_mut(key) else {
                return;
            };
            let mut db = self.db.borrow_mut();
            let before = census(queue);
            let mut i = 0;
            while let Some(w) = queue.get(i) {
                if w.claimed() {
                    // Settled elsewhere (another key, its timeout): its withdrawal is on the way.
                    queue.remove(i);
                    continue;
                }
                if matches!(db.blocking_ready(w.db, key, &w.op), Ok(true)) && w.claim() {
                    // Ready (just looked, same step); the op may still fail (a BLMOVE whose
                    // destination holds another type), and the client gets that error.
                    let served = db.blocking_run(w.db, key, &w.op);
                    // The pop is on its way to the AOF before the client hears of it.
                    if let Some(c) = db.take_changes() {
                        self.send_changes(Some(c));
                    }
                    if let (Op::Move { dest, .. }, Ok(_)) = (&w.op, &served) {
                        if dest.as_slice() != key {
                            pushed.push(dest.clone());
                        }
                    }
                    w.serve(key, served);
                    queue.remove(i);
                    continue;
                }
                i += 1;
            }
            self.recount(before, census(queue));
            if queue.is_empty() {
                waiters.remove(key);
            }
        }
        for dest in pushed {
            self.serve(&dest);
        }
    }

    /// Serves the waiters of keys whose serving waited for a lock to go (see [`Shard::serve`]).
    pub fn serve_deferred(&self) {
        if self.deferred.borrow().is_empty() {
            return;
        }
        let keys: Vec<Vec<u8>> = self.deferred.borrow_mut().drain().collect();
        for k in keys {
            self.serve(&k);
        }
    }

    /// Serves the clients blocked on any key of this shard (after SWAPDB, which changes every
    /// key at once).
    pub fn serve_all(&self) {
        let keys: Vec<Vec<u8>> = self.waiters.borrow().keys().cloned().collect();
        for k in keys {
            self.serve(&k);
        }
    }

    /// Whether some client waits on a key of this shard.
    #[inline]
    pub fn has_waiters(&self) -> bool {
        !self.waiters.borrow().is_empty()
    }

    /// Serves the clients blocked on the keys of a write command that just ran here. Costs one
    /// check when no client is blocked on this shard.
    #[inline(always)]
    pub fn wake_written(&self, spec: &commands::CommandSpec, args: &[&[u8]]) {
        if self.has_waiters() {
            self.wake_written_now(spec, args);
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_written_now(&self, spec: &commands::CommandSpec, args: &[&[u8]]) {
        if spec.has(commands::flags::WRITE) {
            self.wake_keys_of(spec, args);
        } else if matches!(spec.name, "eval" | "evalsha" | "fcall") {
            self.wake_every_waited();
        }
    }

    /// After a script, which may have written any key of this shard: every key a client
    /// waits on gets its turn (a key with nothing to pop keeps its waiters).
    #[cold]
    #[inline(never)]
    pub fn wake_every_waited(&self) {
        let keys: Vec<Vec<u8>> = self.waiters.borrow().keys().cloned().collect();
        for k in keys {
            self.serve(&k);
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_keys_of(&self, spec: &commands::CommandSpec, args: &[&[u8]]) {
        for i in spec.key_positions(args) {
            self.serve(args[i]);
        }
    }
}

/// Whether a key's queue of waiters is not empty, and whether a consumer-group read is among
/// them (INFO's blocking-key counts).
fn census(queue: &std::collections::VecDeque<Arc<Waiter>>) -> (bool, bool) {
    let nokey = queue
        .iter()
        .any(|w| matches!(&w.op, Op::Stream(r) if r.group.is_some()));
    (!queue.is_empty(), nokey)
}
