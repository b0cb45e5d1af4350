//! Process-wide state shared by every executor: options, the client registry, counters and
//! the shutdown flag. Touched on connect, disconnect and the rare CLIENT command — never per
//! command on the hot path.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::options::Options;

/// One connected client, as CLIENT LIST shows it.
pub struct ClientEntry {
    /// CLIENT ID.
    pub id: u64,
    /// Peer address.
    pub addr: SocketAddr,
    /// Local address.
    pub laddr: SocketAddr,
    /// Socket descriptor (for CLIENT KILL).
    pub fd: RawFd,
    /// Connection time.
    pub created: Instant,
    /// Name from CLIENT SETNAME / HELLO SETNAME.
    pub name: Mutex<Option<Vec<u8>>>,
    /// Selected database.
    pub db: AtomicUsize,
    /// RESP version.
    pub resp: AtomicUsize,
    /// Last command name (lowercase).
    pub last_cmd: Mutex<&'static str>,
    /// Channels subscribed.
    pub sub: AtomicU32,
    /// Patterns subscribed.
    pub psub: AtomicU32,
    /// Shard channels subscribed.
    pub ssub: AtomicU32,
    /// Commands queued in MULTI, or -1 outside of one.
    pub multi: AtomicI64,
    /// Keys watched.
    pub watch: AtomicU32,
    /// [`NO_EVICT`] and [`NO_TOUCH`] bits (CLIENT NO-EVICT, CLIENT NO-TOUCH).
    pub modes: AtomicU32,
    /// What the client is: [`Class::Normal`] (or pub/sub, told by its subscriptions), a
    /// replica, or this replica's master (as `u8`).
    pub class: std::sync::atomic::AtomicU8,
    /// CLIENT SETINFO LIB-NAME and LIB-VER.
    pub lib: Mutex<LibInfo>,
    /// Whether the client waits in a blocking command (CLIENT UNBLOCK can end the wait).
    pub blocked: std::sync::atomic::AtomicBool,
    /// How CLIENT UNBLOCK ended the wait: [`UNBLOCK_TIMEOUT`] or [`UNBLOCK_ERROR`].
    pub unblock_as: std::sync::atomic::AtomicU8,
    /// Wakes the blocked client for CLIENT UNBLOCK.
    pub unblock: tokio::sync::Notify,
    /// The client ran MONITOR (CLIENT LIST flag `O`).
    pub monitor: AtomicBool,
    /// The ACL user it is authenticated as (CLIENT LIST `user=`, CLIENT KILL USER).
    pub user: Mutex<Vec<u8>>,
}

/// CLIENT UNBLOCK ... TIMEOUT: answered as if its time ran out.
pub const UNBLOCK_TIMEOUT: u8 = 1;
/// CLIENT UNBLOCK ... ERROR: answered with Redis's UNBLOCKED error.
pub const UNBLOCK_ERROR: u8 = 2;

/// A client library's name and version (CLIENT SETINFO), each unset until given.
pub type LibInfo = (Option<Vec<u8>>, Option<Vec<u8>>);

/// [`ClientEntry::modes`] bit: CLIENT NO-EVICT ON.
pub const NO_EVICT: u32 = 1;
/// [`ClientEntry::modes`] bit: CLIENT NO-TOUCH ON.
pub const NO_TOUCH: u32 = 2;

impl ClientEntry {
    /// A new entry with no name, no subscriptions and no transaction.
    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr, fd: RawFd) -> ClientEntry {
        ClientEntry {
            id,
            addr,
            laddr,
            fd,
            created: Instant::now(),
            name: Mutex::new(None),
            db: AtomicUsize::new(0),
            resp: AtomicUsize::new(2),
            last_cmd: Mutex::new("NULL"),
            sub: AtomicU32::new(0),
            psub: AtomicU32::new(0),
            ssub: AtomicU32::new(0),
            multi: AtomicI64::new(-1),
            watch: AtomicU32::new(0),
            modes: AtomicU32::new(0),
            class: std::sync::atomic::AtomicU8::new(Class::Normal as u8),
            lib: Mutex::new((None, None)),
            blocked: std::sync::atomic::AtomicBool::new(false),
            unblock_as: std::sync::atomic::AtomicU8::new(0),
            unblock: tokio::sync::Notify::new(),
            monitor: AtomicBool::new(false),
            user: Mutex::new(b"default".to_vec()),
        }
    }

    /// Whether the client is subscribed to anything (CLIENT LIST flag `P`).
    pub fn is_pubsub(&self) -> bool {
        self.sub.load(Ordering::Relaxed)
            + self.psub.load(Ordering::Relaxed)
            + self.ssub.load(Ordering::Relaxed)
            > 0
    }

    /// The client's class, as CLIENT LIST and CLIENT KILL's TYPE filter name it.
    pub fn class(&self) -> Class {
        match self.class.load(Ordering::Relaxed) {
            1 => Class::Replica,
            2 => Class::Master,
            _ if self.is_pubsub() => Class::PubSub,
            _ => Class::Normal,
        }
    }

    /// CLIENT LIST's flags: `O` a monitor, `S` a replica, `M` the master, `P` subscribed,
    /// `x` in MULTI, `N` none.
    pub fn flags(&self) -> String {
        let mut f = String::new();
        if self.monitor.load(Ordering::Relaxed) {
            f.push('O');
        }
        match self.class() {
            Class::Replica => f.push('S'),
            Class::Master => f.push('M'),
            _ => {}
        }
        if self.is_pubsub() {
            f.push('P');
        }
        if self.multi.load(Ordering::Relaxed) >= 0 {
            f.push('x');
        }
        let modes = self.modes.load(Ordering::Relaxed);
        if modes & NO_EVICT != 0 {
            f.push('e');
        }
        if modes & NO_TOUCH != 0 {
            f.push('T');
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }

    /// The CLIENT LIST / CLIENT INFO line of this client (without the newline).
    pub fn line(&self) -> String {
        let name = lock(&self.name).clone().unwrap_or_default();
        let (lib_name, lib_ver) = lock(&self.lib).clone();
        let text =
            |v: Option<Vec<u8>>| String::from_utf8_lossy(&v.unwrap_or_default()).into_owned();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle=0 flags={} db={} sub={} psub={} ssub={} multi={} watch={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            String::from_utf8_lossy(&name),
            self.created.elapsed().as_secs(),
            self.flags(),
            self.db.load(Ordering::Relaxed),
            self.sub.load(Ordering::Relaxed),
            self.psub.load(Ordering::Relaxed),
            self.ssub.load(Ordering::Relaxed),
            self.multi.load(Ordering::Relaxed),
            self.watch.load(Ordering::Relaxed),
            lock(&self.last_cmd),
            String::from_utf8_lossy(&lock(&self.user)),
            self.resp.load(Ordering::Relaxed),
            text(lib_name),
            text(lib_ver),
        )
    }
}

/// What a client is (CLIENT LIST and CLIENT KILL TYPE).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    /// An ordinary client.
    Normal = 0,
    /// A replica of this server.
    Replica = 1,
    /// This replica's master.
    Master = 2,
    /// A client subscribed to something.
    PubSub = 3,
}

/// Locks a mutex, recovering from poisoning (a panic elsewhere must not wedge CLIENT LIST).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// State shared by all executors.
pub struct Global {
    /// Start-up options.
    pub opts: Options,
    /// The Lua scripts loaded (EVAL, SCRIPT LOAD), one cache for every shard's store.
    pub scripts: kvcore::script::ScriptCache,
    /// The ACL users and log, one set for every shard's store.
    pub acl: kvcore::acl::Acl,
    /// Connected clients by id.
    pub clients: Mutex<BTreeMap<u64, Arc<ClientEntry>>>,
    next_client_id: AtomicU64,
    /// Clients connected now.
    pub connected: AtomicUsize,
    /// Connections accepted since start.
    pub total_connections: AtomicU64,
    /// Clients handed to the shard that holds their keys (INFO `moved_connections`).
    pub moved_connections: AtomicU64,
    /// Clients waiting in a blocking command (INFO `blocked_clients`).
    pub blocked_clients: AtomicU64,
    /// Keys some client waits on, over every shard (INFO `total_blocking_keys`).
    pub blocking_keys: AtomicU64,
    /// Of those, keys a consumer-group read waits on, which ends when the key goes (INFO
    /// `total_blocking_keys_on_nokey`).
    pub blocking_keys_nokey: AtomicU64,
    /// Blocking pops between their first look at their keys and their end (blocked or not):
    /// while there are none, a write spanning shards need not look for waiters.
    pub pops_in_flight: AtomicU64,
    /// Set by SIGINT, SIGTERM or SHUTDOWN.
    pub shutdown: Arc<AtomicBool>,
    /// The port actually bound (differs from the option when it was 0).
    pub port: AtomicU16,
    /// CLIENT PAUSE: when it ends (Unix ms; 0 = no pause).
    pub pause_end: AtomicU64,
    /// CLIENT PAUSE ... ALL (else only commands that may write are held).
    pub pause_all: AtomicBool,
    /// Woken by CLIENT UNPAUSE.
    pub unpaused: tokio::sync::Notify,
    /// Connections refused for `maxclients` (INFO `rejected_connections`).
    pub rejected_connections: AtomicU64,
    /// Clients closed for their output buffer limit.
    pub output_limit_disconnections: AtomicU64,
    /// Clients closed for their query buffer limit.
    pub query_limit_disconnections: AtomicU64,
    /// 40 hex digits drawn at start (INFO `run_id`).
    pub run_id: String,
    /// The shards' counters, published at each tick, and the recent samples of their sums.
    pub rates: Mutex<Rates>,
    /// RDB saving (see [`crate::persist`]).
    pub rdb: crate::persist::RdbState,
    /// The append-only file (see [`crate::persist::aof`]).
    pub aof: crate::persist::aof::AofState,
    /// Keys loaded from the file at start, and keys skipped there as expired.
    pub loaded_keys: AtomicU64,
    /// See `loaded_keys`.
    pub loaded_expired: AtomicU64,
    /// Replication (see [`crate::repl`]).
    pub repl: crate::repl::Repl,
    /// MONITOR clients, counted per shard (see [`crate::monitor`]).
    pub monitors: Mutex<Vec<u32>>,
}

/// Samples of the counters INFO turns into rates (`instantaneous_ops_per_sec` ...): every
/// shard publishes its totals at each tick; the ticker sums them ten times a second.
#[derive(Default)]
pub struct Rates {
    per_shard: Vec<[u64; 3]>,
    samples: std::collections::VecDeque<(Instant, [u64; 3])>,
}

/// Samples kept: 1.6 seconds at ten a second, as Redis's `STATS_METRIC_SAMPLES`.
const RATE_SAMPLES: usize = 16;

impl Rates {
    /// Shard `id`'s totals: commands, bytes read, bytes written.
    pub fn publish(&mut self, id: usize, totals: [u64; 3]) {
        if self.per_shard.len() <= id {
            self.per_shard.resize(id + 1, [0; 3]);
        }
        self.per_shard[id] = totals;
    }

    /// Records the sum of the published totals now.
    pub fn sample(&mut self, now: Instant) {
        let mut sum = [0u64; 3];
        for s in &self.per_shard {
            for (a, b) in sum.iter_mut().zip(s) {
                *a += b;
            }
        }
        if self.samples.len() == RATE_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back((now, sum));
    }

    /// Commands per second, and KiB per second read and written, over the samples kept.
    pub fn per_sec(&self) -> (u64, f64, f64) {
        let (Some(first), Some(last)) = (self.samples.front(), self.samples.back()) else {
            return (0, 0.0, 0.0);
        };
        let secs = last.0.duration_since(first.0).as_secs_f64();
        if secs <= 0.0 {
            return (0, 0.0, 0.0);
        }
        let rate = |i: usize| last.1[i].saturating_sub(first.1[i]) as f64 / secs;
        (rate(0).round() as u64, rate(1) / 1024.0, rate(2) / 1024.0)
    }
}

/// 40 hex digits from the process's randomness (hashed start time, pid, address): the run id,
/// replication ids, the end mark of a diskless sync.
pub fn new_hex_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(40);
    let state = std::collections::hash_map::RandomState::new();
    let mut i = 0u64;
    while out.len() < 40 {
        let mut h = state.build_hasher();
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.write_u32(std::process::id());
        out.push_str(&format!("{:016x}", h.finish()));
        i += 1;
    }
    out.truncate(40);
    out
}

impl Global {
    /// Fresh state for these options.
    pub fn new(opts: Options) -> Global {
        Global {
            opts,
            scripts: kvcore::script::ScriptCache::default(),
            acl: kvcore::acl::Acl::default(),
            clients: Mutex::new(BTreeMap::new()),
            next_client_id: AtomicU64::new(1),
            connected: AtomicUsize::new(0),
            total_connections: AtomicU64::new(0),
            moved_connections: AtomicU64::new(0),
            blocked_clients: AtomicU64::new(0),
            blocking_keys: AtomicU64::new(0),
            blocking_keys_nokey: AtomicU64::new(0),
            pops_in_flight: AtomicU64::new(0),
            shutdown: Arc::new(AtomicBool::new(false)),
            port: AtomicU16::new(0),
            pause_end: AtomicU64::new(0),
            pause_all: AtomicBool::new(false),
            unpaused: tokio::sync::Notify::new(),
            rejected_connections: AtomicU64::new(0),
            output_limit_disconnections: AtomicU64::new(0),
            query_limit_disconnections: AtomicU64::new(0),
            run_id: new_hex_id(),
            rates: Mutex::new(Rates::default()),
            rdb: crate::persist::RdbState::default(),
            aof: crate::persist::aof::AofState::default(),
            loaded_keys: AtomicU64::new(0),
            loaded_expired: AtomicU64::new(0),
            repl: crate::repl::Repl::default(),
            monitors: Mutex::new(Vec::new()),
        }
    }

    /// A new client id.
    pub fn next_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Adds a client to the registry.
    pub fn register(&self, e: Arc<ClientEntry>) {
        lock(&self.clients).insert(e.id, e);
    }

    /// Removes a client from the registry; after this returns, CLIENT KILL can no longer touch
    /// its socket, so the caller may close it.
    pub fn deregister(&self, id: u64) {
        lock(&self.clients).remove(&id);
    }

    /// Shuts down the sockets of the clients `pick` selects; returns how many.
    /// CLIENT PAUSE: holds every command (`all`) or those that may write until `end` (Unix
    /// ms). As Redis, the mode is replaced and the end only moves later.
    pub fn pause(&self, end: u64, all: bool) {
        self.pause_all.store(all, Ordering::Relaxed);
        self.pause_end.fetch_max(end, Ordering::AcqRel);
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        self.pause_end.store(0, Ordering::Release);
        self.pause_all.store(false, Ordering::Relaxed);
        self.unpaused.notify_waiters();
    }

    /// The client with this id.
    pub fn client(&self, id: u64) -> Option<Arc<ClientEntry>> {
        lock(&self.clients).get(&id).cloned()
    }

    pub fn kill(&self, mut pick: impl FnMut(&ClientEntry) -> bool) -> usize {
        let clients = lock(&self.clients);
        let mut n = 0;
        for e in clients.values().filter(|e| pick(e)) {
            // SAFETY: `e.fd` is the open socket of a registered client: a connection removes
            // its entry (under this same mutex, held here) before its socket is closed, so the
            // descriptor cannot have been closed or reused. shutdown(2) only ends the stream;
            // the owner still closes the descriptor.
            unsafe {
                libc::shutdown(e.fd, libc::SHUT_RDWR);
            }
            n += 1;
        }
        n
    }
}
