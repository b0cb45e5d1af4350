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
//! Inboxes are unbounded, so sending never waits and two shards can never block each other;
//! the receive loop never waits either: anything that may (waiting for a lock) runs in its
//! own task. The volume in flight is bounded by the clients' own batches.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use futures_channel::oneshot;
use kvcore::commands;
use kvcore::resp::Proto;
use kvcore::{Db, Session};
use smallvec::SmallVec;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;

use kvcore::commands::blocking::{Op, Served};
use kvcore::OpError;

use crate::global::{lock, ClientEntry, Global};
use crate::locks::{LockKey, LockTable};

/// A value returned by a job on another shard.
pub type Payload = Box<dyn Any + Send>;
/// Work to run on another shard's store.
pub type Job = Box<dyn FnOnce(&Shard) -> Payload + Send>;

/// A message between shards.
pub enum Msg {
    /// Run `job`, answer `Done`.
    Call { from: usize, id: u64, job: Job },
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
    /// Release keys locked by an earlier `Lock`.
    Unlock { keys: Vec<LockKey>, exclusive: bool },
    /// The answer to request `id`.
    Done { id: u64, payload: Payload },
    /// Serve this client from now on: its keys live here (see [`crate::conn`]).
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

/// Commands for one shard, flattened into one buffer: one allocation per batch, not per command.
#[derive(Default)]
pub struct RemoteBatch {
    data: Vec<u8>,
    arg_lens: Vec<u32>,
    cmds: Vec<(u32, u32, bool)>, // (argc, db, resp3)
}

impl RemoteBatch {
    /// Appends one command.
    pub fn push(&mut self, args: &[&[u8]], db: usize, proto: Proto) {
        for a in args {
            self.data.extend_from_slice(a);
            self.arg_lens.push(a.len() as u32);
        }
        self.cmds
            .push((args.len() as u32, db as u32, proto == Proto::Resp3));
    }

    /// Number of commands.
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    /// Whether there are no commands.
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }
}

/// The replies of a [`RemoteBatch`], concatenated, with each reply's end offset.
#[derive(Default)]
pub struct BatchReply {
    /// All reply bytes.
    pub out: Vec<u8>,
    /// End offset of each reply in `out`.
    pub ends: Vec<u32>,
}

impl BatchReply {
    /// The bytes of reply `i`.
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.out[start..self.ends[i] as usize]
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
    /// Spare connection buffers (see [`crate::conn`]): idle clients hold none.
    pub bufs: RefCell<BufPool>,
    /// Clients blocked on keys of this shard (see [`crate::blocking`]), by key name, oldest
    /// first. A command that writes the key serves them at once, in that order, each from its
    /// own database.
    waiters: RefCell<HashMap<Vec<u8>, VecDeque<Arc<Waiter>>>>,
    /// Signalled by [`Msg::Stop`].
    pub stop: Notify,
}

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

/// Spare read and output buffers of one shard's connections.
///
/// A connection takes a pair when its socket turns readable and gives it back once its
/// batch is answered and nothing partial is left, so 10,000 idle clients hold no buffers
/// while busy ones reuse the same few. Only standard-size buffers come back; one grown for
/// a large command or reply is freed instead.
#[derive(Default)]
pub struct BufPool {
    read: Vec<Vec<u8>>,
    out: Vec<Vec<u8>>,
}

impl BufPool {
    /// Size of a read buffer; output buffers start with this capacity.
    pub const CHUNK: usize = 16 * 1024;
    /// Spares kept of each kind.
    const KEEP: usize = 256;

    /// A read buffer of exactly [`Self::CHUNK`] bytes (contents unspecified).
    pub fn take_read(&mut self) -> Vec<u8> {
        self.read.pop().unwrap_or_else(|| vec![0; Self::CHUNK])
    }

    /// An empty output buffer.
    pub fn take_out(&mut self) -> Vec<u8> {
        self.out
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(Self::CHUNK))
    }

    /// Returns a read buffer (kept only if it still has the standard size).
    pub fn put_read(&mut self, buf: Vec<u8>) {
        if buf.len() == Self::CHUNK && self.read.len() < Self::KEEP {
            self.read.push(buf);
        }
    }

    /// Returns an output buffer (kept only if it did not grow far past the standard size).
    pub fn put_out(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() >= Self::CHUNK
            && buf.capacity() <= 4 * Self::CHUNK
            && self.out.len() < Self::KEEP
        {
            buf.clear();
            self.out.push(buf);
        }
    }
}

impl Shard {
    /// A shard with the inboxes of all shards (indexed by shard; its own included).
    pub fn new(
        id: usize,
        n: usize,
        db: Db,
        global: Arc<Global>,
        inboxes: Vec<UnboundedSender<Msg>>,
    ) -> Shard {
        Shard {
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
            stop: Notify::new(),
        }
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
        if to == self.id {
            return f(self);
        }
        let from = self.id;
        let rx = self
            .request(to, |id| Msg::Call {
                from,
                id,
                job: Box::new(move |s| Box::new(f(s)) as Payload),
            })
            .await;
        match rx.await.map(|p| p.downcast::<R>()) {
            Ok(Ok(r)) => *r,
            _ => panic!("shard {to} dropped a call: the server is shutting down"),
        }
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

    /// Releases keys locked with [`Shard::lock`].
    pub async fn unlock(&self, to: usize, keys: Vec<LockKey>, exclusive: bool) {
        if to == self.id {
            self.locks.borrow_mut().release(&keys, exclusive);
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

    /// Runs a command on the store, then serves the clients blocked on the keys it wrote.
    fn execute(
        &self,
        session: &mut Session,
        spec: Option<&'static commands::CommandSpec>,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        self.db.borrow_mut().dispatch_spec(session, spec, args, out);
        if let Some(spec) = spec {
            self.wake_written(spec, args);
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
        }
    }

    /// A blocking pop's first turn at `key`: pops for `w` if the key holds members, reports
    /// another type, or registers `w` to be served when the key is written. One step of this
    /// shard, so no write can fall between the look and the registration.
    pub fn pop_or_wait(&self, key: &[u8], w: &Arc<Waiter>) -> PopTry {
        let mut db = self.db.borrow_mut();
        match db.blocking_ready(w.db, key, &w.op) {
            Ok(false) => {
                self.waiters
                    .borrow_mut()
                    .entry(key.to_vec())
                    .or_default()
                    .push_back(w.clone());
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
            queue.retain(|w| w.id != id);
            if queue.is_empty() {
                waiters.remove(key);
            }
        }
    }

    /// Serves the clients blocked on `key` that its database can now feed, oldest first (as
    /// Redis does right after the command that wrote it). A client whose database holds no
    /// sorted set there keeps its place, and so does every client when the key holds
    /// another type (Redis 7.0 keeps them blocked).
    pub fn serve(&self, key: &[u8]) {
        // A served BLMOVE pushes onto its destination (on this shard): its waiters come next.
        let mut pushed: Vec<Vec<u8>> = Vec::new();
        {
            let mut waiters = self.waiters.borrow_mut();
            let Some(queue) = waiters.get_mut(key) else {
                return;
            };
            let mut db = self.db.borrow_mut();
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
            if queue.is_empty() {
                waiters.remove(key);
            }
        }
        for dest in pushed {
            self.serve(&dest);
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

    /// Serves the clients blocked on the keys of a write command that just ran here. Costs one
    /// check when no client is blocked on this shard.
    pub fn wake_written(&self, spec: &commands::CommandSpec, args: &[&[u8]]) {
        if self.waiters.borrow().is_empty() || !spec.has(commands::flags::WRITE) {
            return;
        }
        for i in spec.key_positions(args) {
            self.serve(args[i]);
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
            ..Session::default()
        };
        self.db.borrow_mut().refresh_clock();
        let (mut off, mut arg) = (0usize, 0usize);
        for &(argc, db, resp3) in &batch.cmds {
            let mut args: SmallVec<[&[u8]; 16]> = SmallVec::new();
            for _ in 0..argc {
                let len = batch.arg_lens[arg] as usize;
                args.push(&batch.data[off..off + len]);
                off += len;
                arg += 1;
            }
            session.db = db as usize;
            session.proto = if resp3 { Proto::Resp3 } else { Proto::Resp2 };
            self.run_local(&mut session, &args, &mut reply.out).await;
            reply.ends.push(reply.out.len() as u32);
        }
        reply
    }

    fn handle(self: &Rc<Self>, msg: Msg) {
        match msg {
            Msg::Done { id, payload } => {
                if let Some(tx) = self.pending.borrow_mut().remove(&id) {
                    let _ = tx.send(payload);
                }
            }
            Msg::Call { from, id, job } => {
                let payload = job(self);
                let _ = self.inboxes[from].send(Msg::Done { id, payload });
            }
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
                    me.reply(from, id, Box::new(())).await;
                });
            }
            Msg::Unlock { keys, exclusive } => self.locks.borrow_mut().release(&keys, exclusive),
            Msg::Tick => {
                self.db.borrow_mut().cron(Duration::from_millis(5));
            }
            Msg::Stop => self.stop.notify_one(),
            Msg::Adopt(h) => {
                let Handoff {
                    stream,
                    session,
                    entry,
                } = *h;
                match tokio::net::TcpStream::from_std(stream) {
                    Ok(stream) => {
                        tokio::task::spawn_local(crate::conn::serve_conn(
                            self.clone(),
                            stream,
                            session,
                            entry,
                        ));
                    }
                    Err(e) => {
                        crate::log!(3, "client {} lost moving shards: {e}", entry.id);
                        crate::conn::forget(self, &entry);
                    }
                }
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
