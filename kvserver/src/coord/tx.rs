//! Transactions: the keys a MULTI ... EXEC touches, their locks on every shard, and WATCH.
//!
//! EXEC runs its queued commands with no other client in between, whatever shards their keys
//! live on. Before the first command it takes the key intent locks of every key the
//! transaction names (and of the watched keys), on each shard in ascending order as every
//! command spanning shards does; commands whose keys cannot be known up front (KEYS, FLUSHALL,
//! SORT with BY or GET patterns, MOVE and COPY to another database, SWAPDB) lock every key of
//! every shard instead ([`EVERY_KEY`]). With the locks held it checks the watched keys, then
//! runs each command on the shard that owns its keys, then releases the locks.
//!
//! The fast path: when every key (watched ones included) lives on one shard and every command
//! can run in that shard's store, the whole transaction is one job on that shard, one step of
//! it: atomic by construction, no locks taken (unless another command spanning shards holds
//! one of its keys, when it falls back to the locked path).
//!
//! WATCH registers the client's dirty flag with the watched key's store
//! (`Db::watch`); a write to the key, its expiry, FLUSHDB, FLUSHALL or SWAPDB sets the flag
//! there, as Redis's `touchWatchedKey` does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kvcore::commands::{self, flags, sort_api, CommandSpec};
use kvcore::resp::Proto;
use kvcore::Session;
use smallvec::SmallVec;

use super::route;
use crate::shard::locks::{LockKey, EVERY_KEY};
use crate::shard::{BatchReply, RemoteBatch, Shard};

/// Commands queued by MULTI, flattened into one buffer: no allocation per command.
#[derive(Default, Clone)]
pub struct Queue {
    data: Vec<u8>,
    /// End offset in `data` of each argument.
    arg_ends: Vec<u32>,
    /// End index in `arg_ends` of each command.
    cmd_ends: Vec<u32>,
}

impl Queue {
    /// Appends a command.
    pub fn push(&mut self, args: &[&[u8]]) {
        for a in args {
            self.data.extend_from_slice(a);
            self.arg_ends.push(self.data.len() as u32);
        }
        self.cmd_ends.push(self.arg_ends.len() as u32);
    }

    /// Number of commands.
    pub fn len(&self) -> usize {
        self.cmd_ends.len()
    }

    /// The commands, in order, as argument slices.
    pub fn iter(&self) -> impl Iterator<Item = SmallVec<[&[u8]; 8]>> {
        let mut arg = 0usize;
        let mut start = 0usize;
        self.cmd_ends.iter().map(move |&end| {
            let mut args = SmallVec::new();
            while arg < end as usize {
                let e = self.arg_ends[arg] as usize;
                args.push(&self.data[start..e]);
                start = e;
                arg += 1;
            }
            args
        })
    }
}

/// The state of a connection between MULTI and EXEC.
#[derive(Default)]
pub struct Multi {
    /// Commands queued so far.
    pub queue: Queue,
    /// A command failed to queue (unknown, wrong arity ...): EXEC answers EXECABORT.
    pub aborted: bool,
    /// A queued command changes the session (SELECT, HELLO, CLIENT ...).
    pub session_changes: bool,
    /// A queued command may grow memory (refused with the EXEC when out of memory).
    pub denyoom: bool,
    /// A queued command writes (EXEC waits out a CLIENT PAUSE WRITE).
    pub writes: bool,
}

/// The keys a connection watches, and the flag their stores set when one is touched.
pub struct Watches {
    /// Set by a store when a watched key is touched.
    pub dirty: Arc<AtomicBool>,
    /// (shard, database, key) of each watched key.
    pub keys: Vec<(usize, usize, Vec<u8>)>,
}

impl Default for Watches {
    fn default() -> Self {
        Watches {
            dirty: Arc::new(AtomicBool::new(false)),
            keys: Vec::new(),
        }
    }
}

/// WATCH `keys` of database `db` for client `id`, each with its own shard's store.
pub async fn watch(shard: &Shard, id: u64, db: usize, keys: &[&[u8]], w: &mut Watches) {
    for &key in keys {
        let s = route::shard_of(key, shard.n);
        if w.keys.iter().any(|(_, d, k)| *d == db && k == key) {
            continue;
        }
        let (k, dirty) = (key.to_vec(), w.dirty.clone());
        shard
            .call(s, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                d.refresh_clock();
                d.watch(db, &k, id, &dirty);
            })
            .await;
        w.keys.push((s, db, key.to_vec()));
    }
}

/// Forgets every watched key (UNWATCH, EXEC, DISCARD, RESET, disconnect).
pub async fn unwatch_all(shard: &Shard, id: u64, w: &mut Watches) {
    let mut by_shard: BTreeMap<usize, Vec<(usize, Vec<u8>)>> = BTreeMap::new();
    for (s, db, k) in w.keys.drain(..) {
        by_shard.entry(s).or_default().push((db, k));
    }
    for (s, keys) in by_shard {
        shard
            .call(s, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                for (db, k) in &keys {
                    d.unwatch(*db, k, id);
                }
            })
            .await;
    }
    w.dirty.store(false, Ordering::Relaxed);
}

/// Whether EXEC must abort: a watched key was touched, or has expired since WATCH (Redis's
/// `isWatchedKeyExpired`). Call with the watched keys locked.
pub async fn watches_broken(shard: &Shard, id: u64, w: &Watches) -> bool {
    // Each store applies its pending changes before it answers, so the flag is read after.
    for (s, db, k) in &w.keys {
        let (db, k) = (*db, k.clone());
        let expired = shard
            .call(*s, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                d.refresh_clock();
                d.watched_key_expired(db, &k, id)
            })
            .await;
        if expired {
            return true;
        }
    }
    w.dirty.load(Ordering::Acquire)
}

/// Where a transaction runs.
pub struct Plan {
    /// Every command can run in one shard's store in one step: that shard (`None`: no keys,
    /// any shard).
    pub one_shard: Option<Option<usize>>,
    /// Otherwise the locks to take, by shard in ascending order.
    pub locks: BTreeMap<usize, Vec<LockKey>>,
}

/// Commands whose keys a plan cannot list: the transaction locks every key.
pub(crate) fn locks_everything(spec: &CommandSpec, args: &[&[u8]], n: usize) -> bool {
    spec.has(flags::ALL_KEYS)
        || matches!(spec.name, "swapdb" | "move" | "flushall" | "flushdb")
        || (spec.name == "copy" && args.iter().any(|a| a.eq_ignore_ascii_case(b"DB")))
        || (matches!(spec.name, "sort" | "sort_ro") && n > 1 && sort_api::has_patterns(args))
        || super::script::spans_shards(spec, args, n)
}

/// Commands a shard's store alone cannot answer for a transaction's client: the fast path
/// leaves them to the connection.
pub(crate) fn needs_server(spec: &CommandSpec) -> bool {
    // CONN: transactions and pub/sub, which the connection serves. Every command the server
    // may answer itself (BGSAVE, LASTSAVE, SLOWLOG ...: the store alone only says it cannot).
    crate::admin::may_be_special(spec) || spec.has(flags::CONN) || spec.has(flags::BLOCKING)
}

/// Plans a transaction of client session `session` (its database at MULTI time) over `n`
/// shards, the watched keys included.
pub fn plan(session: &Session, n: usize, queued: &Queue, watched: &Watches) -> Plan {
    let mut db = session.db;
    let mut every = false;
    let mut server_side = false;
    let mut locks: BTreeMap<usize, Vec<LockKey>> = BTreeMap::new();
    for args in queued.iter() {
        let Some(spec) = commands::lookup(args[0]) else {
            continue;
        };
        if spec.name == "select" {
            if let Some(d) = args.get(1).and_then(|a| kvcore::num::parse_i64(a)) {
                if (0..16).contains(&d) {
                    db = d as usize;
                }
            }
            continue;
        }
        server_side |= needs_server(spec);
        if locks_everything(spec, &args, n) {
            every = true;
            continue;
        }
        for i in spec.key_positions(&args) {
            let s = route::shard_of(args[i], n);
            locks.entry(s).or_default().push((db, args[i].to_vec()));
        }
    }
    for (s, d, k) in &watched.keys {
        locks.entry(*s).or_default().push((*d, k.clone()));
    }
    if every {
        let locks = (0..n).map(|s| (s, vec![EVERY_KEY])).collect();
        return Plan {
            one_shard: None,
            locks,
        };
    }
    for keys in locks.values_mut() {
        keys.sort_unstable();
        keys.dedup();
    }
    let one_shard = (!server_side && locks.len() <= 1).then(|| locks.keys().next().copied());
    Plan { one_shard, locks }
}

/// Takes the plan's locks, in ascending shard order.
pub async fn lock(shard: &Shard, locks: &BTreeMap<usize, Vec<LockKey>>) {
    for (&s, keys) in locks {
        shard.lock(s, keys.clone(), true).await;
    }
}

/// Releases what [`lock`] took.
pub async fn unlock(shard: &Shard, locks: BTreeMap<usize, Vec<LockKey>>) {
    for (s, keys) in locks {
        shard.unlock(s, keys, true).await;
    }
}

/// What a transaction run in one step of one shard gives back.
pub struct OneStep {
    /// The EXEC reply (array of replies, or the null array when a watch broke).
    pub reply: Vec<u8>,
    /// The session after the commands (SELECT changes its database).
    pub session: Session,
}

/// Whether every key of `queue` is free on this shard (no command spanning shards holds one).
fn keys_free(sh: &Shard, session: &Session, queue: &Queue, watched: &[LockKey]) -> bool {
    if sh.locks.borrow().is_idle() {
        return true;
    }
    let mut db = session.db;
    for args in queue.iter() {
        if sh.lock_needed(db, &args).is_some() {
            return false;
        }
        if args[0].eq_ignore_ascii_case(b"select") {
            if let Some(d) = args.get(1).and_then(|a| kvcore::num::parse_i64(a)) {
                db = d.clamp(0, 15) as usize;
            }
        }
    }
    watched.is_empty() || !sh.locks.borrow().must_wait(watched, false)
}

/// Runs the queued commands on this shard's store, in one step; clients blocked on their keys
/// are served after the last one, as in Redis.
fn run_all(sh: &Shard, session: &mut Session, queue: &Queue, out: &mut Vec<u8>) {
    array_len(out, queue.len());
    sh.holding_wakes.set(true);
    // Logged between MULTI and EXEC (what was logged before goes first, on its own).
    sh.flush_changes();
    let mark = sh.db.borrow_mut().log_tx_begin(session.db);
    for args in queue.iter() {
        let spec = commands::lookup(args[0]);
        sh.execute(session, spec, &args, out);
    }
    sh.db.borrow_mut().log_tx_end(mark);
    sh.holding_wakes.set(false);
    sh.serve_deferred();
}

/// A transaction with no watched keys whose keys all live on this shard, run at once (no
/// `await`); false when a command spanning shards holds one of its keys (take the locked path).
pub fn run_here(sh: &Shard, session: &mut Session, queue: &Queue, out: &mut Vec<u8>) -> bool {
    if !keys_free(sh, session, queue, &[]) {
        return false;
    }
    sh.db.borrow_mut().refresh_clock();
    run_all(sh, session, queue, out);
    true
}

/// Runs a transaction on shard `s` in one step (see [`Plan::one_shard`]); gives the queue
/// back when another command spanning shards holds one of its keys there (take the locked
/// path then).
pub async fn run_one_shard(
    shard: &Shard,
    s: usize,
    session: &Session,
    queue: Queue,
    watched: &Watches,
) -> Result<OneStep, Queue> {
    let mut session = session.clone();
    let id = session.id;
    let dirty = watched.dirty.clone();
    let keys: Vec<LockKey> = watched
        .keys
        .iter()
        .map(|(_, d, k)| (*d, k.clone()))
        .collect();
    shard
        .call(s, move |sh: &Shard| {
            if !keys_free(sh, &session, &queue, &keys) {
                return Err(queue);
            }
            sh.db.borrow_mut().refresh_clock();
            let mut reply = Vec::new();
            // The expiry check applies the store's pending changes first, so the flag is
            // read after it.
            let expired = keys
                .iter()
                .any(|(d, k)| sh.db.borrow_mut().watched_key_expired(*d, k, id));
            if expired || dirty.load(Ordering::Acquire) {
                null_array(&mut reply, session.proto);
            } else {
                run_all(sh, &mut session, &queue, &mut reply);
            }
            Ok(OneStep { reply, session })
        })
        .await
}

/// Each shard's commands and the keys to lock there for them (see [`run_in_lock_steps`]).
pub type Pieces = BTreeMap<usize, (RemoteBatch, Vec<LockKey>)>;

/// Runs commands that each run in one shard's store as one atomic whole: on each shard, in
/// ascending order, its keys are locked and its commands run in the step that grants the
/// locks ([`Shard::lock_call`]: one round trip a shard, where taking every lock and then
/// running every piece takes two); all locks are released after the last piece. Running a
/// piece before a later shard's locks are granted is safe: every lock is held until all pieces
/// have run, and nobody can see a locked key. When changes are logged, what the pieces logged
/// goes to the log once, here, as one MULTI ... EXEC block, before the locks are released.
/// The commands are the client's whose session is `session`; the replies of each shard's
/// commands, by shard.
pub async fn run_in_lock_steps(
    shard: &Shard,
    session: &Session,
    pieces: Pieces,
) -> BTreeMap<usize, BatchReply> {
    let gather = shard.db.borrow().logs_changes();
    let mut block = Vec::new();
    let mut held = Vec::with_capacity(pieces.len());
    let mut replies = BTreeMap::new();
    for (s, (batch, keys)) in pieces {
        if !keys.is_empty() {
            held.push((s, keys.clone()));
        }
        let session = session.clone();
        let (reply, part) = shard
            .lock_call(s, keys, true, move |sh: &Shard| {
                let mark = if gather {
                    sh.db.borrow_mut().log_mark()
                } else {
                    None
                };
                let mut reply = BatchReply::default();
                sh.run_held(session, &batch, &mut reply);
                let part = mark.map(|m| sh.db.borrow_mut().changes_since(m));
                (reply, part.unwrap_or_default())
            })
            .await;
        replies.insert(s, reply);
        block.extend_from_slice(&part);
    }
    if !block.is_empty() {
        let mut whole = b"*1\r\n$5\r\nMULTI\r\n".to_vec();
        whole.extend_from_slice(&block);
        whole.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
        shard.db.borrow_mut().log_raw(&whole);
        shard.flush_changes();
    }
    for (s, keys) in held {
        shard.unlock(s, keys, true).await;
    }
    replies
}

/// The EXEC reply's header for `n` replies (`*n` in both protocols).
pub fn array_len(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The reply of an EXEC whose watched keys were touched.
pub fn null_array(out: &mut Vec<u8>, proto: Proto) {
    out.extend_from_slice(if proto == Proto::Resp3 {
        b"_\r\n"
    } else {
        b"*-1\r\n"
    });
}
