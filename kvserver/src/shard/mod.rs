//! One shard: the executor-local store and its messages to and from the other shards.
//!
//! Every executor owns one `Shard`: a [`Db`] holding the keys whose hash slots it owns, the
//! lock table of its keys, a sender to every other executor's inbox and its own inbox.
//! Work crosses shards in four forms of [`Msg`]:
//! - `Batch`: the single-shard commands of one client's pipeline batch that belong to the
//!   destination, in the client's order — one message per destination per batch;
//! - `Call`: a closure run on the destination's `Db` (the pieces of multi-shard commands);
//! - `Lock` / `Unlock`: key intent locks for commands that span shards (see `locks`);
//! - `Done`: the answer to any of the above, matched to its waiting future by id.
//!
//! Besides the store, a shard holds the tables that its own keys and clients need: key intent
//! locks (`locks`), the clients blocked on its keys (`waiters`), spare connection buffers
//! (`bufs`) and the batches other shards send it (`batch`). The coordination across shards
//! (`crate::coord`), the features (`crate::pubsub`) and the network side (`crate::net`) call
//! into it; it calls none of them.
//!
//! Inboxes are unbounded, so sending never waits and two shards can never block each other;
//! the receive loop never waits either: anything that may (waiting for a lock) runs in its
//! own task. The volume in flight is bounded by the clients' own batches.

mod batch;
mod bufs;
pub mod evict;
pub mod locks;
mod waiters;

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures_channel::oneshot;
use kvcore::commands;
use kvcore::{Db, Session};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;

pub use batch::{BatchReply, RemoteBatch};
pub use bufs::BufPool;
use locks::{LockKey, LockTable, EVERY_KEY};
pub use waiters::{PopTry, Waiter};

use crate::global::{ClientEntry, Global};

/// A value returned by a job on another shard.
pub type Payload = Box<dyn Any + Send>;
/// Work to run on another shard's store.
pub type Job = Box<dyn FnOnce(&Shard) -> Payload + Send>;

/// A message between shards.
pub enum Msg {
    /// Run `job`, answer `Done`.
    Call { from: usize, id: u64, job: Job },
    /// Run `job`; nobody waits for an answer.
    Post(Box<dyn FnOnce(&Shard) + Send>),
    /// Run these commands in order (waiting for key locks as needed), answer `Done(BatchReply)`.
    Batch {
        from: usize,
        id: u64,
        batch: RemoteBatch,
    },
    /// Lock these keys, answer `Done(())` once granted.
    Lock {
        from: usize,
        id: u64,
        keys: Vec<LockKey>,
        exclusive: bool,
    },
    /// Lock these keys, run `job` once granted (in the same step), answer `Done` with its
    /// result.
    LockCall {
        from: usize,
        id: u64,
        keys: Vec<LockKey>,
        exclusive: bool,
        job: Job,
    },
    /// Release keys locked by an earlier `Lock`.
    Unlock { keys: Vec<LockKey>, exclusive: bool },
    /// The answer to request `id`.
    Done { id: u64, payload: Payload },
    /// Serve this client from now on: its keys live here (see [`crate::net`]).
    Adopt(Box<Handoff>),
    /// Run the periodic cron (active expiry).
    Tick,
    /// Stop accepting clients: the server is shutting down.
    Stop,
}

/// A client connection moving to another shard, between two of its batches.
pub struct Handoff {
    /// The socket, deregistered from the sending shard's event loop.
    pub stream: std::net::TcpStream,
    /// The connection's state (database, protocol, name, authentication).
    pub session: Session,
    /// Its entry in the client registry.
    pub entry: Arc<ClientEntry>,
}

/// Traffic of this shard's clients (INFO stats).
#[derive(Default)]
pub struct NetCounters {
    /// Bytes read from clients.
    pub in_bytes: Cell<u64>,
    /// Bytes written to clients.
    pub out_bytes: Cell<u64>,
    /// Socket reads that returned data.
    pub reads: Cell<u64>,
    /// Socket writes.
    pub writes: Cell<u64>,
}

impl NetCounters {
    /// Counts one read of `n` bytes.
    #[inline]
    pub fn read(&self, n: usize) {
        self.in_bytes.set(self.in_bytes.get() + n as u64);
        self.reads.set(self.reads.get() + 1);
    }

    /// Counts one write of `n` bytes.
    #[inline]
    pub fn wrote(&self, n: usize) {
        self.out_bytes.set(self.out_bytes.get() + n as u64);
        self.writes.set(self.writes.get() + 1);
    }
}

/// The executor-local state of one shard.
pub struct Shard {
    /// This shard's index.
    pub id: usize,
    /// Number of shards.
    pub n: usize,
    /// The store of this shard's keys.
    pub db: RefCell<Db>,
    /// Key intent locks.
    pub locks: RefCell<LockTable>,
    /// Process-wide state.
    pub global: Arc<Global>,
    /// The inbox of every shard, by shard index.
    inboxes: Vec<UnboundedSender<Msg>>,
    pending: RefCell<HashMap<u64, oneshot::Sender<Payload>>>,
    next_id: Cell<u64>,
    /// Spare connection buffers (see [`crate::net`]): idle clients hold none.
    pub bufs: RefCell<BufPool>,
    /// Clients blocked on keys of this shard (see [`crate::coord::blocking`]), by key name, oldest
    /// first. A command that writes the key serves them at once, in that order, each from its
    /// own database.
    waiters: RefCell<HashMap<Vec<u8>, VecDeque<Arc<Waiter>>>>,
    /// Keys whose blocked clients wait for a lock on them to go (see `waiters`).
    deferred: RefCell<std::collections::HashSet<Vec<u8>>>,
    /// Set while a transaction runs in one step here: blocked clients are served after it.
    pub holding_wakes: Cell<bool>,
    /// Signalled by [`Msg::Stop`].
    pub stop: Notify,
    /// Clients handed over by other shards ([`Msg::Adopt`]), for the network side to serve.
    pub arrivals: RefCell<VecDeque<Handoff>>,
    /// Signalled when a client arrives.
    pub arrived: Notify,
    /// Publishes the store's keyspace events (set by the pub/sub feature at start-up).
    pub events_hook: Cell<Option<fn(&Shard)>>,
    /// Traffic counters.
    pub net: NetCounters,
    /// Ticks received (see [`Msg::Tick`]).
    pub ticks: Cell<u64>,
    /// The command count at the last once-a-second collect, and whether the allocator has
    /// been purged since (see [`Msg::Tick`]).
    idle_purge: Cell<(u64, bool)>,
    /// The AOF writer, while the AOF is on (see [`crate::persist::aof`]).
    pub aof: RefCell<Option<crate::persist::aof::Link>>,
    /// Change chunks sent to the AOF writer (plus writes coordinated on other shards).
    pub aof_sent: Cell<u64>,
    /// Changes taken from the store, held for the next sync request under `always`.
    pub aof_held: RefCell<Vec<u8>>,
    /// `aof_sent` as of the last sync request sent.
    pub aof_asked: Cell<u64>,
    /// `aof_sent` as of the last sync done.
    pub aof_synced: Cell<u64>,
    /// Woken when `aof_synced` moves.
    pub aof_synced_notify: Notify,
    /// This shard itself, for tasks it starts from a `&Shard`.
    me: std::rc::Weak<Shard>,
}

impl Shard {
    /// A shard with the inboxes of all shards (indexed by shard; its own included).
    pub fn new(
        id: usize,
        n: usize,
        db: Db,
        global: Arc<Global>,
        inboxes: Vec<UnboundedSender<Msg>>,
    ) -> Rc<Shard> {
        Rc::new_cyclic(|me| Shard {
            id,
            n,
            db: RefCell::new(db),
            locks: RefCell::new(LockTable::default()),
            global,
            inboxes,
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            bufs: RefCell::new(BufPool::default()),
            waiters: RefCell::new(HashMap::new()),
            deferred: RefCell::new(std::collections::HashSet::new()),
            holding_wakes: Cell::new(false),
            stop: Notify::new(),
            arrivals: RefCell::new(VecDeque::new()),
            arrived: Notify::new(),
            events_hook: Cell::new(None),
            net: NetCounters::default(),
            ticks: Cell::new(0),
            idle_purge: Cell::new((0, false)),
            aof: RefCell::new(None),
            aof_sent: Cell::new(0),
            aof_held: RefCell::new(Vec::new()),
            aof_asked: Cell::new(0),
            aof_synced: Cell::new(0),
            aof_synced_notify: Notify::new(),
            me: me.clone(),
        })
    }

    /// This shard as an `Rc`, for a task it spawns; `None` only while it is being dropped.
    pub fn rc(&self) -> Option<Rc<Shard>> {
        self.me.upgrade()
    }

    async fn send(&self, to: usize, msg: Msg) {
        // A send fails only when the peer is gone (shutdown); its waiter then sees a
        // cancelled reply.
        let _ = self.inboxes[to].send(msg);
    }

    /// Sends a request and returns the receiver of its answer.
    async fn request(
        &self,
        to: usize,
        make: impl FnOnce(u64) -> Msg,
    ) -> oneshot::Receiver<Payload> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        self.pending.borrow_mut().insert(id, tx);
        self.send(to, make(id)).await;
        rx
    }

    /// Runs `f` on shard `to` and returns its result (inline when `to` is this shard).
    pub async fn call<R, F>(&self, to: usize, f: F) -> R
    where
        R: Send + 'static,
        F: FnOnce(&Shard) -> R + Send + 'static,
    {
        self.run_on(to, None, f).await
    }

    /// Locks `keys` on shard `to` (`exclusive`ly, or shared) and runs `f` there as soon as
    /// they are granted, in the same step: one round trip where [`Shard::lock`] then
    /// [`Shard::call`] take two. Release them with [`Shard::unlock`].
    pub async fn lock_call<R, F>(&self, to: usize, keys: Vec<LockKey>, exclusive: bool, f: F) -> R
    where
        R: Send + 'static,
        F: FnOnce(&Shard) -> R + Send + 'static,
    {
        self.run_on(to, Some((keys, exclusive)), f).await
    }

    /// [`Shard::call`], after locking `keys` there when given ([`Shard::lock_call`]).
    async fn run_on<R, F>(&self, to: usize, keys: Option<(Vec<LockKey>, bool)>, f: F) -> R
    where
        R: Send + 'static,
        F: FnOnce(&Shard) -> R + Send + 'static,
    {
        if to == self.id {
            if let Some((keys, exclusive)) = keys {
                self.lock(to, keys, exclusive).await;
            }
            let r = f(self);
            self.after_writes();
            self.flush_changes();
            return r;
        }
        // The job may write there, for a client of this shard (a transaction run in one step
        // of its keys' shard, pieces of a command spanning shards): under `appendfsync
        // always` that client's reply waits for a sync covering what the other shard logged.
        self.note_remote_writes();
        let from = self.id;
        let job: Job = Box::new(move |s| Box::new(f(s)) as Payload);
        let rx = self
            .request(to, |id| match keys {
                Some((keys, exclusive)) => Msg::LockCall {
                    from,
                    id,
                    keys,
                    exclusive,
                    job,
                },
                None => Msg::Call { from, id, job },
            })
            .await;
        Self::answer(to, rx).await
    }

    /// The result of a job sent to shard `to`.
    async fn answer<R: 'static>(to: usize, rx: oneshot::Receiver<Payload>) -> R {
        match rx.await.map(|p| p.downcast::<R>()) {
            Ok(Ok(r)) => *r,
            // The other shard stopped (shutdown): this task waits until its own runtime stops
            // and drops it, rather than bringing the process down on its way out.
            _ => {
                crate::log!(0, "shard {to} stopped before answering a call");
                std::future::pending().await
            }
        }
    }

    /// Runs `f` on shard `to` without waiting for it (at once when `to` is this shard).
    /// Posts from one shard to another run in the order posted.
    pub fn post(&self, to: usize, f: impl FnOnce(&Shard) + Send + 'static) {
        if to == self.id {
            return f(self);
        }
        let _ = self.inboxes[to].send(Msg::Post(Box::new(f)));
    }

    /// Starts a batch on another shard; await the receiver for its [`BatchReply`].
    pub async fn start_batch(&self, to: usize, batch: RemoteBatch) -> oneshot::Receiver<Payload> {
        let from = self.id;
        self.request(to, |id| Msg::Batch { from, id, batch }).await
    }

    /// Locks `keys` on shard `to`, waiting until granted.
    pub async fn lock(&self, to: usize, keys: Vec<LockKey>, exclusive: bool) {
        if to == self.id {
            let wait = self.locks.borrow_mut().acquire(keys, exclusive);
            if let Some(rx) = wait {
                let _ = rx.await;
            }
            // What ran here before the grant reaches the AOF before what the holder does.
            self.flush_changes();
            return;
        }
        let from = self.id;
        let rx = self
            .request(to, |id| Msg::Lock {
                from,
                id,
                keys,
                exclusive,
            })
            .await;
        let _ = rx.await;
    }

    /// Runs the commands of `batch` in order for the client whose session is `session`,
    /// adding their replies to `reply`, without waiting for any key lock: the caller holds the
    /// locks of their keys. Clients blocked on the keys are served after the last command.
    pub fn run_held(&self, mut session: Session, batch: &RemoteBatch, reply: &mut BatchReply) {
        self.db.borrow_mut().refresh_clock();
        self.holding_wakes.set(true);
        for (args, setup) in batch.commands() {
            setup.apply(&mut session);
            self.execute(
                &mut session,
                commands::lookup(args[0]),
                &args,
                &mut reply.out,
            );
            reply.ends.push(reply.out.len() as u32);
        }
        self.holding_wakes.set(false);
        self.serve_deferred();
    }

    /// Releases keys locked with [`Shard::lock`].
    pub async fn unlock(&self, to: usize, keys: Vec<LockKey>, exclusive: bool) {
        if to == self.id {
            self.locks.borrow_mut().release(&keys, exclusive);
            self.serve_deferred();
        } else {
            self.send(to, Msg::Unlock { keys, exclusive }).await;
        }
    }

    /// Runs one command on this shard's store, waiting first if a multi-shard command holds
    /// one of its keys. `args` must be owned by the caller across the wait.
    pub async fn run_local(&self, session: &mut Session, args: &[&[u8]], out: &mut Vec<u8>) {
        let spec = args.first().and_then(|n| commands::lookup(n));
        self.run_spec(session, spec, args, out).await
    }

    /// Runs a command at once, without an `await`, when no command spanning shards holds
    /// key locks here (the common case); false when it must go through [`Shard::run_spec`].
    pub fn try_run_now(
        &self,
        session: &mut Session,
        spec: Option<&'static commands::CommandSpec>,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) -> bool {
        if !self.locks.borrow().is_idle() {
            return false;
        }
        self.execute(session, spec, args, out);
        true
    }

    /// Runs a command on the store at once (no lock is looked at: the caller holds them or
    /// knows none is needed), then serves the clients blocked on the keys it wrote.
    pub fn execute(
        &self,
        session: &mut Session,
        spec: Option<&'static commands::CommandSpec>,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        self.db.borrow_mut().dispatch_spec(session, spec, args, out);
        match spec {
            Some(spec) => self.after_command(spec, args),
            None => self.after_writes(),
        }
    }

    /// What follows a command run on the store: the clients blocked on the keys it wrote
    /// served, then the keyspace events raised published.
    #[inline(always)]
    pub fn after_command(&self, spec: &'static commands::CommandSpec, args: &[&[u8]]) {
        self.wake_written(spec, args);
        self.after_writes();
    }

    /// Hands the keyspace events the store raised (notify-keyspace-events) to the hook that
    /// publishes them. One check when there are none.
    #[inline(always)]
    pub fn after_writes(&self) {
        if let Some(publish) = self.events_hook.get() {
            if self.db.borrow().has_events() {
                publish(self);
            }
        }
    }

    /// [`Shard::run_local`] for a command already looked up (`spec` = `lookup(args[0])`).
    pub async fn run_spec(
        &self,
        session: &mut Session,
        spec: Option<&'static commands::CommandSpec>,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        let lock = self.lock_needed(session.db, args);
        if let Some((keys, exclusive)) = &lock {
            let wait = self.locks.borrow_mut().acquire(keys.clone(), *exclusive);
            if let Some(rx) = wait {
                let _ = rx.await;
            }
        }
        self.execute(session, spec, args, out);
        if let Some((keys, exclusive)) = lock {
            self.locks.borrow_mut().release(&keys, exclusive);
            self.serve_deferred();
        }
    }
    /// Hands a client over to shard `to`; false (the connection is then gone) only when that
    /// shard has stopped.
    pub fn hand_off(&self, to: usize, h: Handoff) -> bool {
        self.inboxes[to].send(Msg::Adopt(Box::new(h))).is_ok()
    }

    /// The locks a command must take because a multi-shard command is in flight, if any.
    /// Returns `None` at once in the common case of an idle lock table.
    pub fn lock_needed(&self, db: usize, args: &[&[u8]]) -> Option<(Vec<LockKey>, bool)> {
        let locks = self.locks.borrow();
        if locks.is_idle() {
            return None;
        }
        let spec = commands::lookup(args.first()?)?;
        if !spec.arity_ok(args.len()) {
            return None;
        }
        // A change to the function libraries waits for a snapshot's cut like a write of
        // every key (the snapshot takes the libraries there).
        if spec.name == "function"
            && args.get(1).is_some_and(|sub| {
                ["load", "delete", "flush", "restore"]
                    .iter()
                    .any(|w| sub.eq_ignore_ascii_case(w.as_bytes()))
            })
        {
            let every = vec![EVERY_KEY];
            return locks.must_wait(&every, true).then_some((every, true));
        }
        let keys: Vec<LockKey> = spec
            .key_positions(args)
            .into_iter()
            .map(|i| (db, args[i].to_vec()))
            .collect();
        let exclusive = !spec.has(commands::flags::READONLY);
        (!keys.is_empty() && locks.must_wait(&keys, exclusive)).then_some((keys, exclusive))
    }

    async fn reply(&self, to: usize, id: u64, payload: Payload) {
        self.send(to, Msg::Done { id, payload }).await;
    }

    async fn run_batch(self: &Rc<Self>, batch: RemoteBatch) -> BatchReply {
        let mut reply = BatchReply {
            out: Vec::with_capacity(batch.len() * 16),
            ends: Vec::with_capacity(batch.len()),
        };
        let mut session = Session {
            authenticated: true,
            id: batch.client,
            user: batch.user.clone(),
            ..Session::default()
        };
        self.db.borrow_mut().refresh_clock();
        for (args, setup) in batch.commands() {
            setup.apply(&mut session);
            self.run_local(&mut session, &args, &mut reply.out).await;
            reply.ends.push(reply.out.len() as u32);
        }
        // The batch's changes go to the AOF (and, under `always`, to disk) before its replies.
        self.persist_barrier().await;
        reply
    }

    /// Runs a job for shard `from` and sends it the result (request `id`).
    fn answer_job(&self, from: usize, id: u64, job: Job) {
        let payload = job(self);
        self.after_writes();
        self.flush_changes();
        let _ = self.inboxes[from].send(Msg::Done { id, payload });
    }

    fn handle(self: &Rc<Self>, msg: Msg) {
        match msg {
            Msg::Done { id, payload } => {
                if let Some(tx) = self.pending.borrow_mut().remove(&id) {
                    let _ = tx.send(payload);
                }
            }
            Msg::Post(job) => {
                job(self);
                self.after_writes();
                self.flush_changes();
            }
            Msg::Call { from, id, job } => self.answer_job(from, id, job),
            Msg::Lock {
                from,
                id,
                keys,
                exclusive,
            } => {
                let wait = self.locks.borrow_mut().acquire(keys, exclusive);
                let me = self.clone();
                tokio::task::spawn_local(async move {
                    if let Some(rx) = wait {
                        let _ = rx.await;
                    }
                    // What ran here before the grant reaches the AOF before what the holder
                    // does.
                    me.flush_changes();
                    me.reply(from, id, Box::new(())).await;
                });
            }
            Msg::LockCall {
                from,
                id,
                keys,
                exclusive,
                job,
            } => {
                let wait = self.locks.borrow_mut().acquire(keys, exclusive);
                let me = self.clone();
                let run = move |me: &Rc<Shard>| {
                    // What ran here before the grant reaches the AOF before what the job does.
                    me.flush_changes();
                    me.answer_job(from, id, job);
                };
                match wait {
                    None => run(&me),
                    Some(rx) => {
                        tokio::task::spawn_local(async move {
                            let _ = rx.await;
                            run(&me);
                        });
                    }
                }
            }
            Msg::Unlock { keys, exclusive } => {
                self.locks.borrow_mut().release(&keys, exclusive);
                self.serve_deferred();
            }
            Msg::Tick => {
                let commands = self.db.borrow().stats.commands;
                let totals = [commands, self.net.in_bytes.get(), self.net.out_bytes.get()];
                crate::global::lock(&self.global.rates).publish(self.id, totals);
                let began = std::time::Instant::now();
                self.db.borrow_mut().cron(Duration::from_millis(5));
                let took = began.elapsed();
                self.db.borrow_mut().latency_sample("expire-cycle", took);
                self.after_writes();
                self.flush_changes();
                self.ticks.set(self.ticks.get() + 1);
                // A failing AOF refuses writes here until it is written again (MISCONF).
                if self.aof.borrow().is_some() {
                    let e = crate::persist::aof::write_error();
                    if self.db.borrow().aof_error != e {
                        self.db.borrow_mut().aof_error = e;
                    }
                } else if self.db.borrow().aof_error.is_some() {
                    self.db.borrow_mut().aof_error = None;
                }
                if self.ticks.get() % 10 == 0 {
                    // Once a second the allocator may give back pages freed a while ago
                    // (about 8 µs on a 4M-key heap under load, 90 µs at most); once a shard
                    // has run no command for a whole second, everything it freed goes back
                    // (a forced collect: 90 µs on that heap).
                    let (seen, purged) = self.idle_purge.get();
                    let began = std::time::Instant::now();
                    if commands != seen {
                        crate::alloc::collect();
                        self.idle_purge.set((commands, false));
                    } else if !purged {
                        crate::alloc::purge();
                        self.idle_purge.set((commands, true));
                    }
                    let took = began.elapsed();
                    self.db.borrow_mut().latency_sample("allocator-purge", took);
                }
                if self.id == 0 && self.ticks.get() % 10 == 0 {
                    crate::persist::cron(self);
                    crate::repl::cron(self);
                }
                let few = crate::repl::too_few_replicas(self);
                if self.db.borrow().too_few_replicas != few {
                    self.db.borrow_mut().too_few_replicas = few;
                }
            }
            Msg::Stop => self.stop.notify_one(),
            Msg::Adopt(h) => {
                self.arrivals.borrow_mut().push_back(*h);
                self.arrived.notify_one();
            }
            Msg::Batch { from, id, batch } => {
                let me = self.clone();
                tokio::task::spawn_local(async move {
                    let r = me.run_batch(batch).await;
                    me.reply(from, id, Box::new(r)).await;
                });
            }
        }
    }
}

/// Receives messages from every peer for as long as the executor runs.
pub fn serve_inbox(shard: &Rc<Shard>, mut inbox: UnboundedReceiver<Msg>) {
    let shard = shard.clone();
    tokio::task::spawn_local(async move {
        let mut msgs = Vec::with_capacity(64);
        while inbox.recv_many(&mut msgs, 64).await > 0 {
            for msg in msgs.drain(..) {
                shard.handle(msg);
            }
        }
    });
}
