//! The store: 16 logical databases, the cached clock, configuration, statistics, and the entry
//! points — [`Db::dispatch`] for a server, [`Db::execute`] and typed methods for embedders.
//!
//! A `Db` is single-threaded: one per shard, one per core. Commands run to completion against
//! it, so each command is atomic by construction.

use crate::clock::Clock;
use crate::commands::{self, flags, Ctx};
use crate::config::Config;
use crate::keyspace::{Keyspace, ReplicaView};
use crate::resp::reply::{parse_reply, Value as Reply};
use crate::resp::{Proto, ReplyWriter};
use crate::telemetry::Outcome;

/// Per-client state that commands read and change (SELECT, HELLO, CLIENT SETNAME ...).
#[derive(Clone, Debug)]
pub struct Session {
    /// Selected database index.
    pub db: usize,
    /// Protocol version spoken (HELLO 2/3).
    pub proto: Proto,
    /// Client id (CLIENT ID).
    pub id: u64,
    /// Name set by CLIENT SETNAME / HELLO SETNAME.
    pub name: Option<Vec<u8>>,
    /// Whether AUTH succeeded (or no password is required).
    pub authenticated: bool,
    /// Set by QUIT: the server closes the connection after sending the reply.
    pub close_after_reply: bool,
    /// CLIENT NO-TOUCH: lookups leave the keys' access data alone (except TOUCH's).
    pub no_touch: bool,
    /// CLIENT NO-EVICT (accepted and shown; there is no client eviction).
    pub no_evict: bool,
    /// CLIENT REPLY OFF: replies are dropped until CLIENT REPLY ON.
    pub reply_off: bool,
    /// CLIENT REPLY SKIP was sent: the next command's reply is to be dropped (Redis's
    /// CLIENT_REPLY_SKIP_NEXT; the host moves it to `reply_skip_now` for that command).
    pub reply_skip: bool,
    /// The reply of the command running now is dropped (Redis's CLIENT_REPLY_SKIP).
    pub reply_skip_now: bool,
    /// CLIENT SETINFO LIB-NAME.
    pub lib_name: Option<Vec<u8>>,
    /// CLIENT SETINFO LIB-VER.
    pub lib_ver: Option<Vec<u8>>,
    /// Whether the client is local (loopback or embedded), for `enable-debug-command local`.
    pub local: bool,
    /// The server runs a part of some other command (a shard's step of a command spanning
    /// shards, a broadcast CONFIG SET): not counted in the command statistics.
    pub internal: bool,
    /// The replication link from this server's master: its writes are never refused, and on a
    /// replica it sees keys past their deadline as live (see [`Db::set_replica`]).
    pub master: bool,
    /// Lap timing, for a host running a batch of commands back to back with nothing awaited
    /// between them: while `lapping` is set, the dispatch leaves the time a command ended in
    /// `lap`, and takes a `lap` it finds as the next command's start, so that a command costs
    /// one clock read instead of two. Its measured time then also covers the parsing of its
    /// own request (a few hundred nanoseconds at most). A run of express commands whose work
    /// is bounded shares one reading (see [`Lap`]). The host ends the lap with
    /// [`Db::end_lap`] wherever it waits between commands.
    pub lap: Option<Lap>,
    /// See `lap`.
    pub lapping: bool,
    /// The session of a Lua script's commands.
    pub in_script: bool,
    /// A script's commands run past `maxmemory` (a function's `allow-oom` flag).
    pub allow_oom: bool,
    /// The ACL user the client is authenticated as (see [`crate::acl`]).
    pub user: crate::acl::ClientUser,
}

/// Where a host's lap stands (see [`Session::lap`]): the [`crate::clock::ticks`] reading
/// the last timed command ended at, and the express commands of one kind run since then
/// whose time is not counted yet.
///
/// Such a run holds only commands whose own work is bounded (a GET of a missing key or of a
/// live string of at most [`LIGHT_BYTES`], a SET of a value that size stored in place or as a
/// new key; see [`Db::express`]), so it is timed as a whole: one clock read when it ends,
/// its time added to the command's total and each of its commands put in the latency
/// histogram at the run's mean. Every other command, and every express command that finds
/// more work (a big value, an expired key to free, an old value to replace), ends the run
/// before its own work and is timed alone. Runs are kept only while the slow log and the
/// latency monitor keep nothing shorter than [`SHARED_CLOCK_FLOOR_NS`]: with a lower
/// threshold each command is timed alone, so each one the threshold catches is logged with
/// its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lap {
    pub(crate) start: u64,
    pub(crate) run: u32,
    pub(crate) kind: crate::express::Express,
}

/// The largest value an express command may read or write and still share its clock
/// reading with the run it is in (see [`Lap`]): copying this much takes well under a
/// microsecond.
pub const LIGHT_BYTES: usize = 4096;

/// The lowest slow-log or latency-monitor threshold, in nanoseconds, at which express
/// commands share clock readings (see [`Lap`]): a run of light commands lasts microseconds,
/// so only a run the machine itself held up this long (the thread preempted) reaches it.
pub const SHARED_CLOCK_FLOOR_NS: u64 = 1_000_000;

/// How long [`Db::refresh_clock`] keeps the system time it read: a refresh sooner after the
/// read than this, by the command timer (a TSC reading, a fraction of the system clock's
/// cost), keeps the time. A busy server then reads the system clock a few thousand times a
/// second rather than once per batch (callgrind: 137 instructions a batch before), and its
/// time runs at most this far behind, beside the truncation to whole milliseconds.
const WALL_CLOCK_KEPT_NS: u64 = 250_000;

impl Lap {
    /// A lap from `start` with no run.
    #[inline(always)]
    pub(crate) fn at(start: u64) -> Lap {
        Lap {
            start,
            run: 0,
            kind: crate::express::Express::Get,
        }
    }

    /// Adds a command of `kind` to the run (in place: the next command reads the lap a field
    /// at a time, and a whole new value would cost it a failed store forwarding).
    #[inline(always)]
    pub(crate) fn join(&mut self, kind: crate::express::Express) {
        self.run += 1;
        self.kind = kind;
    }

    /// Whether a command of `kind` may join the run.
    #[inline(always)]
    pub(crate) fn takes(self, kind: crate::express::Express) -> bool {
        self.run == 0 || self.kind == kind
    }
}

impl Session {
    /// Whether some reply is to be dropped (CLIENT REPLY OFF or SKIP): the host then checks
    /// each command's reply.
    #[inline]
    pub fn reply_quiet(&self) -> bool {
        self.reply_off || self.reply_skip || self.reply_skip_now
    }
}

impl Default for Session {
    fn default() -> Self {
        Session {
            db: 0,
            proto: Proto::Resp2,
            id: 0,
            name: None,
            authenticated: false,
            close_after_reply: false,
            no_touch: false,
            no_evict: false,
            reply_off: false,
            reply_skip: false,
            reply_skip_now: false,
            lib_name: None,
            lib_ver: None,
            local: true,
            internal: false,
            master: false,
            lap: None,
            lapping: false,
            in_script: false,
            allow_oom: false,
            user: crate::acl::ClientUser::default(),
        }
    }
}

/// Redis's refusal of DEBUG under `enable-debug-command no` (or `local` from afar).
const DEBUG_NOT_ALLOWED: &[u8] = b"ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

impl Db {
    /// Whether `enable-debug-command` refuses this call (Redis's protected commands).
    #[inline]
    pub fn protected_refused(&self, session: &Session, spec: &commands::CommandSpec) -> bool {
        spec.name == "debug"
            && match self.config.get("enable-debug-command") {
                Some("yes") => false,
                Some("local") => !session.local,
                _ => true,
            }
    }
}

/// Counters reported by INFO stats.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Commands executed.
    pub commands: u64,
    /// Read lookups that found their key.
    pub keyspace_hits: u64,
    /// Read lookups that did not.
    pub keyspace_misses: u64,
    /// Write commands run since the last save (INFO `rdb_changes_since_last_save`; Redis
    /// counts changed keys, this counts the write commands that did not fail).
    pub dirty: u64,
}

/// Facts about the embedding process that INFO reports (a server fills these in).
#[derive(Clone, Debug, Default)]
pub struct HostInfo {
    /// TCP port (0 when embedded).
    pub tcp_port: u16,
    /// Process start, Unix ms.
    pub started_ms: u64,
    /// Connected clients.
    pub connected_clients: u64,
    /// Connections accepted since start.
    pub total_connections: u64,
    /// Connections the server moved to the shard holding their keys.
    pub moved_connections: u64,
    /// Clients waiting in a blocking command (BZPOPMIN ...).
    pub blocked_clients: u64,
    /// Bytes the allocator has handed out, if the host counts them.
    pub used_memory: Option<u64>,
    /// Resident set size, if known.
    pub rss: Option<u64>,
    /// The most [`HostInfo::used_memory`] seen, if the host tracks it.
    pub peak_memory: Option<u64>,
    /// [`HostInfo::used_memory`] once the server had started, if the host knows it.
    pub startup_memory: Option<u64>,
    /// Number of shards serving the keyspace.
    pub shards: usize,
    /// Server facts and counters only a network server has (INFO shows zeros without them).
    pub server: Option<Box<ServerInfo>>,
}

/// What a network server adds to INFO: its identity, its clients and its network counters.
#[derive(Clone, Debug, Default)]
pub struct ServerInfo {
    /// 40 hex digits, random at start (`run_id`).
    pub run_id: String,
    /// `uname`: system, release, machine.
    pub os: String,
    /// The binary's path.
    pub executable: String,
    /// The configuration file given at start, if any.
    pub config_file: String,
    /// Bound addresses, for the `listener0` line.
    pub bind: Vec<String>,
    /// Clients subscribed to something.
    pub pubsub_clients: u64,
    /// Clients in MULTI with WATCHed keys.
    pub watching_clients: u64,
    /// Keys some client is blocked on.
    pub blocking_keys: u64,
    /// Keys a client waits on that end its wait when they go (a consumer-group read).
    pub blocking_keys_nokey: u64,
    /// Pub/sub channels, patterns and shard channels with subscribers.
    pub pubsub_channels: u64,
    /// Patterns with subscribers.
    pub pubsub_patterns: u64,
    /// Shard channels with subscribers.
    pub pubsubshard_channels: u64,
    /// Bytes read from and written to clients.
    pub net_input_bytes: u64,
    /// See `net_input_bytes`.
    pub net_output_bytes: u64,
    /// Reads and writes on client sockets.
    pub reads_processed: u64,
    /// See `reads_processed`.
    pub writes_processed: u64,
    /// Connections refused (maxclients).
    pub rejected_connections: u64,
    /// Clients closed for their output buffer.
    pub output_limit_disconnections: u64,
    /// Clients closed for their query buffer.
    pub query_limit_disconnections: u64,
    /// Commands per second over the last seconds.
    pub ops_per_sec: u64,
    /// Kilobytes per second read over the last seconds.
    pub input_kbps: f64,
    /// Kilobytes per second written over the last seconds.
    pub output_kbps: f64,
    /// CPU seconds: system, user (process), system, user (children), system, user (this
    /// thread).
    pub cpu: [f64; 6],
    /// The persistence section's text, when the host has persistence.
    pub persistence: Option<String>,
    /// The replication section's text, when the host replicates.
    pub replication: Option<String>,
}

/// A single-threaded Redis-compatible store.
///
/// ```
/// use kvcore::Db;
/// let mut db = Db::new();
/// db.set(b"greeting", b"hello").unwrap();
/// assert_eq!(db.get(b"greeting").unwrap().as_deref(), Some(&b"hello"[..]));
/// assert_eq!(db.incr_by(b"counter", 5).unwrap(), 5);
/// // Any command, by its arguments:
/// let reply = db.execute(&[b"APPEND", b"greeting", b" world"]);
/// assert_eq!(reply, kvcore::Reply::Int(11));
/// ```
pub struct Db {
    pub(crate) dbs: Vec<Keyspace>,
    pub(crate) clock: Clock,
    pub(crate) now: u64,
    /// The command timer's reading when `now` came from the system clock (0: never).
    wall_read_at: u64,
    /// Configuration (CONFIG GET/SET).
    pub config: Config,
    /// Statistics (INFO stats).
    pub stats: Stats,
    /// Host facts for INFO.
    pub host: HostInfo,
    rng: u64,
    embedded: Session,
    scratch: Vec<u8>,
    /// Per database, keys seen holding a hash with field deadlines: the active cycle purges
    /// them (stale names are dropped when found).
    pub(crate) hash_ttl_keys: Vec<std::collections::HashSet<Box<[u8]>>>,
    /// Keyspace events recorded and not drained yet.
    pub(crate) events: Vec<crate::events::KeyEvent>,
    /// What every keyspace logs (see [`crate::events`]); 0 when nobody listens.
    pub(crate) log_mask: u8,
    /// WATCH: watched keys and their clients.
    pub(crate) watch: crate::watch::WatchTable,
    /// The host's view of memory for `maxmemory` (none: no eviction).
    pub(crate) budget: Option<Box<dyn crate::evict::MemoryBudget>>,
    /// Eviction state and counters.
    pub(crate) evictor: crate::evict::Evictor,
    /// The access mode the keyspaces were last given.
    access: crate::evict::AccessMode,
    /// Whether the keyspaces were last told not to record accesses (CLIENT NO-TOUCH).
    pub(crate) no_touch: bool,
    /// Whether the periodic work expires keys (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire: bool,
    /// Elements at least this long take a list node of their own (DEBUG
    /// QUICKLIST-PACKED-THRESHOLD).
    pub quicklist_packed_threshold: usize,
    /// Command statistics, slow log and latency events (see [`crate::telemetry`]).
    pub telemetry: crate::telemetry::Telemetry,
    /// The host's `ip:port` and name of a client by id, for slow log entries.
    pub client_label: Option<ClientLabel>,
    /// The change log (see [`crate::changes`]), while a host wants it.
    pub(crate) changes: Option<Box<crate::changes::ChangeLog>>,
    /// The server's last RDB save failed: with save points and `stop-writes-on-bgsave-error`,
    /// writes (and PING) answer MISCONF until a save succeeds.
    pub rdb_failed: bool,
    /// The server's last write to its AOF failed (the system's error text): writes (and PING)
    /// answer MISCONF until a write succeeds.
    pub aof_error: Option<String>,
    /// This store belongs to a replica (see [`Db::set_replica`]).
    pub(crate) replica: bool,
    /// The server has fewer good replicas than `min-replicas-to-write`: writes answer
    /// NOREPLICAS (the host keeps it current).
    pub too_few_replicas: bool,
    /// This replica's link to its master is down: with `replica-serve-stale-data no`,
    /// commands that may not serve stale data answer MASTERDOWN (the host keeps it current).
    pub master_down: bool,
    /// Bodies of the Lua scripts loaded (EVAL, SCRIPT LOAD); a host with several stores gives
    /// them one shared cache.
    pub scripts: crate::script::ScriptCache,
    /// Whether this store owns a key, for a host that splits the keyspace among stores: a
    /// script's command on a key it does not own is refused.
    pub key_owner: Option<KeyOwner>,
    /// Some client runs MONITOR: every command run is shown to [`Db::monitor_feed`]. The host
    /// keeps it current; while it is false (the common case) a command pays one branch.
    pub monitoring: bool,
    /// Where commands go while [`Db::monitoring`] is set (see [`MonitorFeed`]).
    pub monitor_feed: Option<MonitorFeed>,
    /// The rows of GET and SET, for [`Db::express`].
    pub(crate) express_specs: [&'static commands::CommandSpec; 2],
    /// The users (ACL); a host with several stores gives them one shared set.
    pub acl: crate::acl::Acl,
}

/// A host's MONITOR feed: called with a command's session (its database as the command left
/// it), its table row and arguments, once before it runs (`true`) and once after (`false`);
/// the host picks the moment Redis feeds that command at (EVAL before its script's commands,
/// the others after they ran).
pub type MonitorFeed = Box<dyn Fn(&Session, &'static commands::CommandSpec, &[&[u8]], bool) + Send>;

/// See [`Db::key_owner`].
pub type KeyOwner = Box<dyn Fn(&[u8]) -> bool + Send>;

/// See [`Db::client_label`].
pub type ClientLabel = Box<dyn Fn(u64) -> (Vec<u8>, Vec<u8>) + Send>;

impl Default for Db {
    fn default() -> Self {
        Self::new()
    }
}

impl Db {
    /// A store with default configuration and the system clock.
    pub fn new() -> Self {
        Self::with_config(Config::default())
    }

    /// A store with the given configuration and the system clock.
    pub fn with_config(config: Config) -> Self {
        let n = config.databases;
        let embedded = Session {
            authenticated: true,
            ..Session::default()
        };
        let mut db = Db {
            dbs: (0..n).map(|_| Keyspace::new()).collect(),
            clock: Clock::System,
            now: 0,
            wall_read_at: 0,
            config,
            stats: Stats::default(),
            host: HostInfo {
                shards: 1,
                ..HostInfo::default()
            },
            rng: 0x9e37_79b9_7f4a_7c15,
            embedded,
            scratch: Vec::new(),
            hash_ttl_keys: (0..n).map(|_| std::collections::HashSet::new()).collect(),
            events: Vec::new(),
            log_mask: 0,
            watch: crate::watch::WatchTable::default(),
            budget: None,
            evictor: crate::evict::Evictor::default(),
            access: crate::evict::AccessMode::Lru,
            no_touch: false,
            active_expire: true,
            replica: false,
            too_few_replicas: false,
            master_down: false,
            scripts: crate::script::ScriptCache::default(),
            key_owner: None,
            monitoring: false,
            monitor_feed: None,
            acl: crate::acl::Acl::default(),
            quicklist_packed_threshold: crate::list::PACKED_THRESHOLD,
            telemetry: crate::telemetry::Telemetry::default(),
            client_label: None,
            rdb_failed: false,
            aof_error: None,
            changes: None,
            express_specs: crate::express::specs(),
        };
        if !db.config.requirepass.is_empty() {
            let pass = db.config.requirepass.clone();
            db.acl.set_default_password(&pass);
        }
        db.sync_acl_config();
        db.refresh_clock();
        db.host.started_ms = db.now;
        db
    }

    /// Gives the ACL its configuration (`acl-pubsub-default`, `acllog-max-len`).
    pub fn sync_acl_config(&mut self) {
        let all = self.config.get("acl-pubsub-default") == Some("allchannels");
        let max = (self.config.get("acllog-max-len"))
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(128);
        self.acl.configure(all, max);
    }

    /// Replaces the clock (tests use [`Clock::Manual`]) and refreshes the cached time.
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
        self.wall_read_at = 0;
        self.refresh_clock();
    }

    /// The clock, mutable: advance a manual clock, then [`Db::refresh_clock`].
    pub fn clock_mut(&mut self) -> &mut Clock {
        self.wall_read_at = 0;
        &mut self.clock
    }

    /// Reads the clock once; every command until the next refresh sees this time. With a
    /// `maxmemory`, also checks memory and evicts (see [`crate::evict`]).
    /// A server calls this once per batch of pipelined commands. (The system clock's time is
    /// kept for [`WALL_CLOCK_KEPT_NS`] after it was read.)
    pub fn refresh_clock(&mut self) {
        self.now = match self.clock {
            Clock::System => {
                let t = crate::clock::ticks();
                let at = self.wall_read_at;
                if at != 0 && t > at && crate::clock::nanos_between(at, t) < WALL_CLOCK_KEPT_NS {
                    self.now
                } else {
                    self.wall_read_at = t;
                    self.clock.now_ms()
                }
            }
            Clock::Manual(t) => t,
        };
        self.sync_log_mask();
        self.sync_access();
        if self.config.maxmemory != 0 || self.evictor.oom {
            self.evict();
        }
    }

    pub(crate) fn set_no_touch(&mut self, no_touch: bool) {
        self.no_touch = no_touch;
        for ks in &mut self.dbs {
            ks.no_touch = no_touch;
        }
    }

    /// Gives the keyspaces the access mode the policy needs, when it changed.
    pub(crate) fn sync_access(&mut self) {
        let c = &self.config;
        let mode = crate::evict::AccessMode::of(c.policy, c.lfu_log_factor, c.lfu_decay_time);
        if mode != self.access {
            self.access = mode;
            for ks in &mut self.dbs {
                ks.access = mode;
            }
            self.clear_eviction_pool();
        }
    }

    /// Makes this store a replica's (`on`) or a master's again. A replica deletes no key by
    /// itself: no active expiry; the commands of its clients see a key past its deadline as
    /// absent, and everything else (its master's stream, the steps of commands spanning
    /// shards, which may be the master's) sees it as live, as the master decides when a key
    /// expires and sends the DEL.
    pub fn set_replica(&mut self, on: bool) {
        self.replica = on;
        self.set_view(if on {
            ReplicaView::Master
        } else {
            ReplicaView::Own
        });
    }

    /// Whether this store belongs to a replica.
    pub fn is_replica(&self) -> bool {
        self.replica
    }

    /// Whether a command is refused because this replica's link is down and it may not serve
    /// stale data (`replica-serve-stale-data no`; commands flagged STALE still run).
    #[inline]
    pub fn stale_refused(&self, session: &Session, spec: &commands::CommandSpec) -> bool {
        self.master_down
            && !spec.has(flags::STALE)
            && !session.master
            && !session.internal
            && self.config.get("replica-serve-stale-data") == Some("no")
    }

    /// Whether a client's write is refused: READONLY on a read-only replica, NOREPLICAS on a
    /// master short of good replicas. A step of a command already admitted (`internal`) and the
    /// master's stream are not.
    #[inline]
    pub fn write_refused(&self, session: &Session, spec: &commands::CommandSpec) -> bool {
        (self.replica || self.too_few_replicas)
            && spec.has(flags::WRITE)
            && !session.master
            && !session.internal
            && (!self.replica || self.config.get("replica-read-only") != Some("no"))
    }

    fn set_view(&mut self, view: ReplicaView) {
        // Every database each time: a flushed one starts over with the default view.
        for ks in &mut self.dbs {
            ks.replica_view = view;
        }
    }

    /// The cached current time in Unix ms.
    pub fn now_ms(&self) -> u64 {
        self.now
    }

    /// Number of logical databases.
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// Asks the CPU to start loading what looking up these keys of database `db` will read
    /// (see [`Keyspace::prefetch`]). A hint: nothing changes.
    pub fn prefetch(&self, db: usize, keys: &[&[u8]]) {
        if let Some(ks) = self.dbs.get(db) {
            ks.prefetch(keys);
        }
    }

    /// [`Keyspace::prefetch_members`] in database `db`. A hint: nothing changes.
    pub fn prefetch_members(&self, db: usize, pairs: &[(&[u8], &[u8])]) {
        if let Some(ks) = self.dbs.get(db) {
            ks.prefetch_members(pairs);
        }
    }

    /// One logical database.
    pub fn keyspace(&mut self, index: usize) -> &mut Keyspace {
        &mut self.dbs[index]
    }

    /// A pseudo-random number (xorshift64*), for RANDOMKEY and sampling.
    pub fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Runs one command for a client and appends its reply to `out`.
    /// `args[0]` is the command name; an empty `args` does nothing.
    pub fn dispatch(&mut self, session: &mut Session, args: &[&[u8]], out: &mut Vec<u8>) {
        let Some(&name) = args.first() else { return };
        self.dispatch_spec(session, commands::lookup(name), args, out);
    }

    /// [`Db::dispatch`] for a caller that already looked the command up
    /// (`spec` must be `commands::lookup(args[0])`).
    pub fn dispatch_spec(
        &mut self,
        session: &mut Session,
        spec: Option<&'static commands::CommandSpec>,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        if args.is_empty() {
            return;
        }
        let mut w = ReplyWriter {
            out,
            proto: session.proto,
        };
        let mark = w.out.len();
        let Some(spec) = spec else {
            commands::unknown_command(&mut w, args);
            if !session.internal {
                self.telemetry.error(&out[mark..]);
            }
            return;
        };
        let refused = self.refused(session, spec, args.len(), &mut w);
        if refused {
            if !session.internal {
                self.record(spec, args, 0, Outcome::Rejected, &out[mark..], session.id);
            }
            return;
        }
        if !session.authenticated && !spec.has(flags::NO_AUTH) {
            session.authenticated = true;
        }
        self.run_admitted(session, spec, args, out);
    }

    /// The refusals of [`Db::dispatch_spec`], in Redis's order: whether `session` may not run
    /// `spec` with `argc` arguments, the error reply written to `w` if so. [`Db::admits`] is the
    /// one-branch form of "none of these applies" (given the arity and not DEBUG): a refusal
    /// added here must make it false too ([`Db::run_admitted`] checks that in debug builds).
    pub(crate) fn refused(
        &self,
        session: &Session,
        spec: &commands::CommandSpec,
        argc: usize,
        w: &mut ReplyWriter<'_>,
    ) -> bool {
        if !spec.arity_ok(argc) {
            commands::wrong_arity(w, spec.name);
            true
        } else if !session.authenticated && !spec.has(flags::NO_AUTH) && {
            self.acl.sync_requirepass(&self.config.requirepass);
            !self.acl.default_open()
        } {
            w.error(b"NOAUTH Authentication required.");
            true
        } else if self.protected_refused(session, spec) {
            w.error(DEBUG_NOT_ALLOWED);
            true
        } else if session.master {
            false
        } else if self.stale_refused(session, spec) {
            w.error(
                b"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            );
            true
        } else if self.write_refused(session, spec) {
            w.error(if self.replica {
                b"READONLY You can't write against a read only replica."
            } else {
                b"NOREPLICAS Not enough good replicas to write."
            });
            true
        } else if self.refused_for_memory(spec.flags) && !session.allow_oom {
            w.error(crate::OpError::OutOfMemory.message().as_bytes());
            true
        } else if self.rdb_failed && self.refused_for_disk(spec) {
            w.error(crate::persist::MISCONF_RDB);
            true
        } else if self.aof_error.is_some() && (spec.has(flags::WRITE) || spec.name == "ping") {
            let mut e = b"MISCONF Errors writing to the AOF file: ".to_vec();
            e.extend_from_slice(self.aof_error.as_deref().unwrap_or_default().as_bytes());
            w.error(&e);
            true
        } else {
            false
        }
    }

    /// Whether no refusal of [`Db::dispatch_spec`] can apply to a command of `session`
    /// (given one that is not DEBUG and has the right number of arguments): an authenticated
    /// client whose ACL user may run everything (see [`crate::acl::Acl::is_free`]), of a
    /// master in good health. Then [`Db::run_admitted`] runs the command as
    /// `dispatch_spec` would.
    #[inline(always)]
    pub fn admits(&self, session: &Session) -> bool {
        session.authenticated
            && self.acl.is_free(session)
            && !session.master
            && !session.internal
            && !(self.replica
                || self.too_few_replicas
                || self.master_down
                || self.evictor.oom
                || self.rdb_failed
                || self.aof_error.is_some())
    }

    /// Runs a command [`Db::dispatch_spec`] admitted (or that [`Db::admits`]), and counts
    /// it.
    #[inline]
    pub fn run_admitted(
        &mut self,
        session: &mut Session,
        spec: &'static commands::CommandSpec,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        self.debug_check_admitted(session, spec, args.len());
        let mark = out.len();
        let w = ReplyWriter {
            out,
            proto: session.proto,
        };
        self.stats.commands += 1;
        let no_touch = session.no_touch && spec.name != "touch";
        if no_touch != self.no_touch {
            self.set_no_touch(no_touch);
        }
        let start = (!session.internal).then(|| self.lap_start(session));
        let dbi = session.db;
        // A replica's own client (not a step of another command) does not see expired keys.
        let hide = self.replica && !session.master && !session.internal;
        if hide {
            self.set_view(ReplicaView::Hide);
        }
        let monitored = self.monitoring && !session.internal;
        if monitored {
            self.feed_monitors(session, spec, args, true);
        }
        let mut ctx = Ctx {
            db: self,
            session,
            out: w,
        };
        (spec.handler)(&mut ctx, args);
        if monitored {
            self.feed_monitors(session, spec, args, false);
        }
        if hide {
            self.set_view(ReplicaView::Master);
        }
        if spec.has(flags::WRITE) && out.get(mark) != Some(&b'-') {
            // XREADGROUP counts what it changed itself (a read of a consumer's history
            // changes nothing that is kept, as in Redis).
            if spec.name != "xreadgroup" {
                self.stats.dirty += 1;
            }
            if self.changes.is_some() && !spec.has(flags::BLOCKING) {
                // Keys this command found expired are deleted first.
                self.pull_keyspace_logs();
                self.log_command(dbi, spec, args, &out[mark..]);
            }
        }
        if let Some(start) = start {
            self.count_run(session, spec, args, start, &out[mark..]);
        }
        self.pull_keyspace_logs();
    }

    /// In debug builds, that [`Db::dispatch_spec`] would not refuse `spec` with `argc`
    /// arguments to `session`: what a caller of [`Db::admits`] relies on.
    #[inline(always)]
    pub(crate) fn debug_check_admitted(
        &self,
        session: &Session,
        spec: &commands::CommandSpec,
        argc: usize,
    ) {
        debug_assert!(
            !self.refused(
                session,
                spec,
                argc,
                &mut ReplyWriter::new(&mut Vec::new(), session.proto)
            ),
            "{} ran where dispatch_spec refuses it",
            spec.name
        );
    }

    /// Counts a client's command that ran from `start` ([`crate::clock::ticks`]) to now with
    /// `reply`: its time (which starts the next command's when the host laps, see
    /// [`Session::lap`]), its outcome, its slow-log and latency-monitor entries.
    #[inline(always)]
    pub(crate) fn count_run(
        &mut self,
        session: &mut Session,
        spec: &'static commands::CommandSpec,
        args: &[&[u8]],
        start: u64,
        reply: &[u8],
    ) {
        let end = crate::clock::ticks();
        if session.lapping {
            session.lap = Some(Lap::at(end));
        }
        let nanos = crate::clock::nanos_between(start, end);
        let failed = reply.first() == Some(&b'-');
        self.record(spec, args, nanos, Outcome::Ran(failed), reply, session.id);
    }

    /// The reading a command timed alone starts from: the end of the lap's last command, once
    /// its run (if any) is counted, or now.
    #[inline(always)]
    pub(crate) fn lap_start(&mut self, session: &mut Session) -> u64 {
        match session.lap.take() {
            None => crate::clock::ticks(),
            Some(lap) if lap.run == 0 => lap.start,
            Some(lap) => self.count_lap_run(lap, session.id),
        }
    }

    /// Counts the run of express commands `lap` holds (see [`Lap`]), ending now; the
    /// reading it ended at. (Out of line: once per batch, not per command.)
    #[inline(never)]
    fn count_lap_run(&mut self, lap: Lap, client: u64) -> u64 {
        let end = crate::clock::ticks();
        let nanos = crate::clock::nanos_between(lap.start, end);
        let spec = self.express_specs[lap.kind as usize];
        let set = &self.config.telemetry;
        if self.telemetry.count_run(spec, lap.run, nanos, set) {
            // Only a run the thread was held up in (see `SHARED_CLOCK_FLOOR_NS`): which
            // command waited is not known, so the entry names the command alone.
            self.record_notable(spec, &[spec.name.as_bytes()], nanos, client);
        }
        end
    }

    /// Ends a host's lap where it waits between commands (see [`Session::lap`]): the run of
    /// express commands it holds, if any, is counted now.
    #[inline]
    pub fn end_lap(&mut self, lap: &mut Option<Lap>, client: u64) {
        if let Some(l) = lap.take() {
            if l.run > 0 {
                self.count_lap_run(l, client);
            }
        }
    }

    /// [`Db::end_lap`] that keeps the lap going from now, for a host about to run a command
    /// the dispatch may not time with the lap (one the host times itself).
    #[inline]
    pub fn settle_lap(&mut self, lap: &mut Option<Lap>, client: u64) {
        if let Some(l) = *lap {
            if l.run > 0 {
                *lap = Some(Lap::at(self.count_lap_run(l, client)));
            }
        }
    }

    /// Shows a command to the host's MONITOR feed (see [`MonitorFeed`]); a host calls this for
    /// the commands it runs itself, as it calls [`Db::record`].
    #[cold]
    #[inline(never)]
    pub fn feed_monitors(
        &self,
        session: &Session,
        spec: &'static commands::CommandSpec,
        args: &[&[u8]],
        before: bool,
    ) {
        if let Some(feed) = &self.monitor_feed {
            feed(session, spec, args, before);
        }
    }

    /// Records one command in [`Db::telemetry`] with the configured thresholds. A host calls
    /// this for the commands it runs itself (transactions, commands spanning shards ...).
    #[inline]
    pub fn record(
        &mut self,
        spec: &'static commands::CommandSpec,
        args: &[&[u8]],
        nanos: u64,
        outcome: Outcome,
        reply: &[u8],
        client: u64,
    ) {
        let set = &self.config.telemetry;
        if self.telemetry.count(spec, args, nanos, outcome, reply, set) {
            self.record_notable(spec, args, nanos, client);
        }
    }

    /// A command slow enough for the slow log or the latency monitor: its entry, labelled
    /// with the client's address and name.
    #[cold]
    #[inline(never)]
    fn record_notable(
        &mut self,
        spec: &'static commands::CommandSpec,
        args: &[&[u8]],
        nanos: u64,
        client: u64,
    ) {
        let set = self.config.telemetry;
        let now_s = self.now / 1000;
        let pushed = self.telemetry.slowlog_pushed();
        self.telemetry
            .notable(spec, args, nanos, client, set, now_s);
        if self.telemetry.slowlog_pushed() != pushed {
            if let Some(label) = &self.client_label {
                let (peer, name) = label(client);
                self.telemetry.label_newest(peer, name);
            }
        }
    }

    /// Adds a latency monitor sample of work done outside any command (Redis's
    /// `latencyAddSampleIfNeeded`): kept when `latency-monitor-threshold` is set and `took`
    /// reaches it.
    pub fn latency_sample(&mut self, event: &str, took: std::time::Duration) {
        let limit = self.config.telemetry.monitor_ms;
        let ms = took.as_millis() as u64;
        if limit > 0 && ms >= limit {
            let now_s = self.now / 1000;
            self.telemetry.latency_event(event, ms, now_s);
        }
    }

    /// Runs any command by its arguments and returns the decoded reply (RESP2 session on the
    /// embedded client's selected database). Reads the clock first.
    pub fn execute(&mut self, args: &[&[u8]]) -> Reply {
        self.refresh_clock();
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        let mut session = std::mem::take(&mut self.embedded);
        let refused = !self.acl.is_free(&session)
            && self.acl_refuses_call(&mut session, args, crate::acl::Context::Toplevel, &mut out);
        if !refused {
            self.dispatch(&mut session, args, &mut out);
        }
        self.embedded = session;
        let reply = match parse_reply(&out) {
            Ok(Some((v, _))) => v,
            _ => Reply::Null,
        };
        self.scratch = out;
        reply
    }

    /// Selects the database the typed methods and [`Db::execute`] use.
    pub fn select(&mut self, index: usize) -> Result<(), crate::OpError> {
        if index >= self.dbs.len() {
            return Err(crate::OpError::DbIndexOutOfRange);
        }
        self.embedded.db = index;
        Ok(())
    }

    /// The selected database of the embedded session.
    pub(crate) fn embedded_db(&self) -> usize {
        self.embedded.db
    }

    /// Periodic work between batches: active expiry within `budget`, bounded rehash steps.
    /// Returns the number of keys expired.
    pub fn cron(&mut self, budget: std::time::Duration) -> usize {
        self.refresh_clock();
        let start = std::time::Instant::now();
        let now = self.now;
        let mut expired = 0;
        for ks in &mut self.dbs {
            if !self.active_expire || self.replica {
                ks.housekeeping();
                continue;
            }
            let mut rounds = 0u32;
            expired += ks
                .active_expire(now, || {
                    rounds += 1;
                    // Read the clock every 16 rounds, as Redis does.
                    rounds % 16 != 0 || start.elapsed() < budget
                })
                .expired;
            ks.housekeeping();
            if start.elapsed() >= budget {
                break;
            }
        }
        if self.active_expire && !self.replica {
            self.purge_hash_fields(20);
        }
        if self.config.maxmemory != 0 {
            self.publish_candidates();
        }
        self.pull_keyspace_logs();
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    fn system_ms() -> u64 {
        let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        d.as_secs() * 1000 + u64::from(d.subsec_millis())
    }

    #[test]
    fn refreshes_soon_after_a_read_keep_the_system_time() {
        let mut db = Db::new();
        let mut kept = 0;
        for _ in 0..50 {
            db.refresh_clock();
            let read_at = db.wall_read_at;
            let began = Instant::now();
            for _ in 0..20 {
                db.refresh_clock();
            }
            // (Only where the loop itself ran well inside the window: a preempted thread may
            // rightly read the clock again.)
            if began.elapsed() < Duration::from_nanos(WALL_CLOCK_KEPT_NS / 2) {
                assert_eq!(db.wall_read_at, read_at, "the system clock was read again");
                kept += 1;
            }
        }
        assert!(kept > 0, "never ran 20 refreshes inside the window");
    }

    #[test]
    fn the_kept_time_is_never_far_behind_the_system_clock() {
        let mut db = Db::new();
        let mut last = 0;
        let end = Instant::now() + Duration::from_millis(20);
        let mut rereads = 0;
        while Instant::now() < end {
            let before = system_ms();
            let at = db.wall_read_at;
            db.refresh_clock();
            rereads += usize::from(db.wall_read_at != at);
            let now = db.now_ms();
            // Behind by the time kept at most, and the truncation to milliseconds.
            assert!(
                now + 1 + WALL_CLOCK_KEPT_NS / 1_000_000 >= before,
                "{now} vs {before}"
            );
            assert!(now >= last);
            last = now;
        }
        // 20 ms of refreshes read the system clock again and again, at least every 250 µs.
        assert!(
            rereads >= 20,
            "{rereads} reads of the system clock in 20 ms"
        );
    }

    #[test]
    fn a_manual_clock_is_read_at_every_refresh() {
        let mut db = Db::new();
        db.set_clock(Clock::Manual(1_000));
        assert_eq!(db.now_ms(), 1_000);
        db.clock_mut().advance(5);
        db.refresh_clock();
        assert_eq!(db.now_ms(), 1_005);
        // Back to the system clock: read at once, not a kept manual time.
        db.set_clock(Clock::System);
        assert!(db.now_ms() + 1 >= system_ms());
    }
}
