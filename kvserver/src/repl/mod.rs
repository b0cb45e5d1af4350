//! Replication, as Redis 7 does it on the wire: a master serves replicas ([`master`]), a
//! replica follows a master ([`replica`]), and either side may be Redis.
//!
//! # The stream and its offsets
//! The replication stream is the change stream (see `kvcore::changes`): each shard hands the
//! changes of a batch over before the batch's replies leave (`Shard::flush_changes`), and they
//! are appended here, in the order they come, to one backlog. A byte's offset is its position
//! in the stream since the replication id began (the first byte is offset 1), so
//! `master_repl_offset` is the stream's length; a replica that has applied everything up to
//! offset `o` asks to continue at `o + 1` (PSYNC). A command spanning shards is logged once,
//! whole, by the shard that ran it, while it holds its keys, so the stream's order agrees with
//! what every client saw.
//!
//! A replica does not log what it applies: the bytes it receives from its master go into its
//! own backlog as they are, so its offsets are its master's, its replicas get the same stream,
//! and after a promotion a former peer can continue from it (PSYNC with the old id, which the
//! promoted replica keeps as `master_replid2` up to `second_repl_offset`).
//!
//! # Memory
//! The backlog keeps the last `repl-backlog-size` bytes, and more while a replica still needs
//! them; a replica that falls `client-output-buffer-limit replica` hard bytes behind (or
//! stays past the soft limit for its seconds) is disconnected, as Redis does, so a stalled
//! replica costs at most that much.

pub mod master;
pub mod replica;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::global::{lock, new_hex_id, Global};
use crate::shard::Shard;

/// `REPLCONF GETACK *`, as the master puts it in the stream.
const GETACK: &[u8] = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n";
/// `PING`, as the master puts it in the stream every `repl-ping-replica-period`.
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// Replication state shared by every shard.
pub struct Repl {
    /// Ids, offsets, backlog, replicas and master.
    pub state: Mutex<State>,
    /// The shards log their changes into the backlog: this server is a master with a backlog.
    pub feeding: AtomicBool,
    /// This server follows a master (REPLICAOF host port).
    pub is_replica: AtomicBool,
    /// Woken when a replica acknowledges an offset (WAIT).
    pub acked: tokio::sync::Notify,
    /// Replicas online whose last acknowledgement is within `min-replicas-max-lag` seconds.
    pub good_replicas: AtomicUsize,
    /// Held while the master's stream is applied on a replica, one batch at a time: a snapshot
    /// for a replica of this replica takes it to cut between two batches.
    pub apply_gate: tokio::sync::Mutex<()>,
}

impl Default for Repl {
    fn default() -> Self {
        Repl {
            state: Mutex::new(State {
                replid: new_hex_id(),
                replid2: "0".repeat(40),
                second_offset: -1,
                offset: 0,
                backlog: None,
                followers: Vec::new(),
                next_follower: 1,
                master: None,
                lim: Limits::default(),
                link_db: 0,
                stream_db: None,
            }),
            feeding: AtomicBool::new(false),
            is_replica: AtomicBool::new(false),
            acked: tokio::sync::Notify::new(),
            good_replicas: AtomicUsize::new(0),
            apply_gate: tokio::sync::Mutex::new(()),
        }
    }
}

/// Ids, offsets and the backlog.
pub struct State {
    /// The replication id of the stream this server holds (`master_replid`).
    pub replid: String,
    /// The id before the last promotion (`master_replid2`), valid up to `second_offset`.
    pub replid2: String,
    /// The last offset that `replid2` names, plus one (Redis's `second_repl_offset`); -1 none.
    pub second_offset: i64,
    /// The stream's length (`master_repl_offset`).
    pub offset: u64,
    backlog: Option<Backlog>,
    /// Replicas connected to this server.
    pub followers: Vec<Follower>,
    next_follower: u64,
    /// The master this server follows, while it is a replica.
    pub master: Option<MasterLink>,
    /// `client-output-buffer-limit replica`, as of the last cron.
    lim: Limits,
    /// The database the master's stream has selected at `offset` (where a continued link
    /// goes on).
    pub link_db: usize,
    /// The database this server's own stream has selected at `offset`, when known: a shard's
    /// changes come with a SELECT first, which is left out when the stream has that database
    /// selected already, so that the stream selects as Redis's does (once per change of
    /// database). `None` after a full sync's cut: the next SELECT stays.
    pub stream_db: Option<usize>,
}

/// The last bytes of the stream.
struct Backlog {
    /// Bytes at offsets `offset - buf.len() + 1 ..= offset`.
    buf: VecDeque<u8>,
    /// `repl-backlog-size`.
    size: usize,
    /// When the last replica went (the backlog is freed `repl-backlog-ttl` later).
    orphan_since: Option<Instant>,
}

/// Where a replica is in its synchronization.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// Waiting for the snapshot's moment.
    WaitBgsave,
    /// The snapshot is on its way.
    SendBulk,
    /// Receiving the stream.
    Online,
}

/// One replica of this server.
pub struct Follower {
    /// Its id here.
    pub id: u64,
    /// Its address and the port it listens on (REPLCONF listening-port).
    pub ip: String,
    /// See `ip`.
    pub port: u16,
    /// See [`Phase`].
    pub phase: Phase,
    /// The offset of the last byte handed to its connection (bytes after it are kept).
    pub sent: u64,
    /// The offset it last acknowledged.
    pub ack: u64,
    /// When it last acknowledged.
    pub ack_at: Instant,
    /// Wakes its connection when bytes arrive and it is parked.
    wake: Arc<tokio::sync::Notify>,
    /// Interrupts its connection's write when it is to go.
    killed: Arc<tokio::sync::Notify>,
    parked: bool,
    /// Past its output limit: its connection ends.
    pub kill: bool,
    /// The stream waits for its first acknowledgement (after a snapshot in the diskless
    /// format, whose reader can't tell the end mark from stream bytes in the same read).
    pub wait_ack: bool,
    /// Since when it has been past the soft output limit.
    over_soft: Option<Instant>,
}

impl Follower {
    /// Marks it to go and wakes its connection, whether it waits for bytes or for a write.
    fn end(&mut self) {
        self.kill = true;
        self.wake.notify_one();
        self.killed.notify_one();
    }
}

/// The master this server follows.
pub struct MasterLink {
    /// Its host and port.
    pub host: String,
    /// See `host`.
    pub port: u16,
    /// The link is up: synchronized and receiving the stream.
    pub up: bool,
    /// A full synchronization is being received.
    pub syncing: bool,
    /// When the last bytes came from the master.
    pub last_io: Instant,
    /// When the link went down (for `master_link_down_since_seconds`).
    pub down_since: Instant,
    /// Bytes of the snapshot received so far, and its size when known.
    pub sync_read: u64,
    /// Bumped by every REPLICAOF: a link task whose generation is old ends.
    pub generation: u64,
    /// The client id its stream is served as, while it is (REPLICAOF ends it at once).
    pub client: Option<u64>,
}

/// The output limits of a replica's connection (`client-output-buffer-limit replica`).
#[derive(Clone, Copy)]
struct Limits {
    hard: u64,
    soft: u64,
    soft_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            hard: 256 << 20,
            soft: 64 << 20,
            soft_secs: 60,
        }
    }
}

fn limits(config: &kvcore::config::Config) -> Limits {
    let text = config.get("client-output-buffer-limit").unwrap_or("");
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut l = Limits::default();
    for w in words.chunks(4) {
        if let [class, hard, soft, secs] = w {
            if matches!(*class, "slave" | "replica") {
                let num = |s: &str| kvcore::config::parse_memory(s).unwrap_or(0);
                l = Limits {
                    hard: num(hard),
                    soft: num(soft),
                    soft_secs: secs.parse().unwrap_or(0),
                };
            }
        }
    }
    l
}

impl State {
    /// Offset of the oldest byte the backlog holds (Redis's `repl_backlog_first_byte_offset`).
    fn first_offset(&self) -> u64 {
        match &self.backlog {
            Some(b) => self.offset + 1 - b.buf.len() as u64,
            None => 0,
        }
    }

    /// Appends stream bytes; keeps what the backlog size and the replicas need, and marks the
    /// replicas past their hard limit to go.
    fn append(&mut self, bytes: &[u8]) {
        let lim = self.lim;
        let Some(b) = self.backlog.as_mut() else {
            return;
        };
        b.buf.extend(bytes);
        self.offset += bytes.len() as u64;
        let held_from = self.offset - b.buf.len() as u64;
        let mut keep_after = self.offset.saturating_sub(b.size as u64);
        for f in &mut self.followers {
            if f.kill {
                continue;
            }
            let behind = self.offset - f.sent;
            if lim.hard != 0 && behind > lim.hard {
                f.end();
                continue;
            }
            keep_after = keep_after.min(f.sent);
            if f.parked {
                f.parked = false;
                f.wake.notify_one();
            }
        }
        if keep_after > held_from {
            b.buf.drain(..(keep_after - held_from) as usize);
        }
    }

    /// The next bytes for follower `id`: up to `max` after what it was sent.
    /// Fills `out` (emptied first) with the next bytes for follower `id`, at most `max`.
    fn next_for(&mut self, id: u64, max: usize, out: &mut Vec<u8>) -> Next {
        out.clear();
        let first = self.first_offset();
        let offset = self.offset;
        let Some(b) = self.backlog.as_ref() else {
            return Next::Gone;
        };
        let Some(f) = self.followers.iter_mut().find(|f| f.id == id) else {
            return Next::Gone;
        };
        if f.kill || f.sent + 1 < first {
            return Next::Gone;
        }
        if f.sent >= offset || f.wait_ack {
            f.parked = true;
            return Next::Park(f.wake.clone());
        }
        let from = (f.sent + 1 - first) as usize;
        let to = (from + max).min(b.buf.len());
        let (x, y) = b.buf.as_slices();
        if from < x.len() {
            out.extend_from_slice(&x[from..to.min(x.len())]);
        }
        if to > x.len() {
            out.extend_from_slice(&y[from.max(x.len()) - x.len()..to - x.len()]);
        }
        f.sent += out.len() as u64;
        Next::Bytes
    }
}

/// What a replica's connection sends next.
enum Next {
    /// The bytes put in the caller's buffer.
    Bytes,
    /// Nothing new: wait for this.
    Park(Arc<tokio::sync::Notify>),
    /// It fell out of the backlog, went past its limits, or was removed.
    Gone,
}

/// `repl-timeout`.
pub fn timeout(shard: &Shard) -> std::time::Duration {
    let secs = shard
        .db
        .borrow()
        .config
        .get("repl-timeout")
        .and_then(|v| v.parse().ok());
    std::time::Duration::from_secs(secs.unwrap_or(60))
}

/// Appends changes a shard made to the stream (a master with a backlog); a SELECT they start
/// with is left out when the stream has that database selected already.
pub fn feed(global: &Global, bytes: &[u8]) {
    let mut st = lock(&global.repl.state);
    let body = match (st.stream_db, leading_select(bytes)) {
        (Some(cur), Some((db, len))) if cur == db => &bytes[len..],
        _ => bytes,
    };
    st.stream_db = match last_select(bytes) {
        Walk::Selects(db) => Some(db),
        Walk::NoSelect => st.stream_db,
        Walk::Malformed => None,
    };
    st.append(body);
}

/// What a walk over commands found.
#[derive(Debug, PartialEq)]
enum Walk {
    /// The last SELECT names this database.
    Selects(usize),
    /// No SELECT.
    NoSelect,
    /// Not commands as the change log writes them.
    Malformed,
}

/// The byte ranges of a command's arguments.
type ArgRanges = smallvec::SmallVec<[(usize, usize); 4]>;

/// A command at `at` as the change log writes it (an array of bulk strings): its arguments'
/// ranges and where the next command starts.
fn command_at(b: &[u8], at: usize) -> Option<(ArgRanges, usize)> {
    fn number(b: &[u8], at: usize, lead: u8) -> Option<(usize, usize)> {
        if b.get(at) != Some(&lead) {
            return None;
        }
        let end = at + 1 + memchr::memchr(b'\r', b.get(at + 1..)?)?;
        let n = std::str::from_utf8(&b[at + 1..end]).ok()?.parse().ok()?;
        (b.get(end + 1) == Some(&b'\n')).then_some((n, end + 2))
    }
    let (n, mut p) = number(b, at, b'*')?;
    let mut args = smallvec::SmallVec::new();
    for _ in 0..n {
        let (len, start) = number(b, p, b'$')?;
        let end = start.checked_add(len)?;
        if b.get(end..end + 2) != Some(b"\r\n") {
            return None;
        }
        args.push((start, end));
        p = end + 2;
    }
    Some((args, p))
}

/// The database of a SELECT that `bytes` start with, and the SELECT's length.
fn leading_select(bytes: &[u8]) -> Option<(usize, usize)> {
    let (args, next) = command_at(bytes, 0)?;
    select_db(bytes, &args).map(|db| (db, next))
}

fn select_db(b: &[u8], args: &[(usize, usize)]) -> Option<usize> {
    match args {
        [(s, e), (ds, de)] if b[*s..*e].eq_ignore_ascii_case(b"SELECT") => {
            std::str::from_utf8(&b[*ds..*de]).ok()?.parse().ok()
        }
        _ => None,
    }
}

/// The database selected after `bytes`, by their last SELECT.
fn last_select(bytes: &[u8]) -> Walk {
    let (mut at, mut last) = (0, Walk::NoSelect);
    while at < bytes.len() {
        let Some((args, next)) = command_at(bytes, at) else {
            return Walk::Malformed;
        };
        if let Some(db) = select_db(bytes, &args) {
            last = Walk::Selects(db);
        }
        at = next;
    }
    last
}

/// Appends bytes of this replica's master to its own stream, as they are (see the module
/// docs): its offset moves with its master's; `db` is the database the stream has selected
/// after them.
pub fn feed_from_master(global: &Global, bytes: &[u8], db: usize) {
    let mut st = lock(&global.repl.state);
    st.link_db = db;
    st.stream_db = None;
    if let Some(m) = st.master.as_mut() {
        m.last_io = Instant::now();
    }
    if st.backlog.is_none() {
        st.offset += bytes.len() as u64;
        return;
    }
    st.append(bytes);
}

/// Makes the backlog if there is none. A master also starts logging its changes on every
/// shard for it.
pub async fn ensure_backlog(shard: &Shard) {
    let g = &shard.global;
    {
        let mut st = lock(&g.repl.state);
        if st.backlog.is_some() {
            if let Some(b) = st.backlog.as_mut() {
                b.orphan_since = None;
            }
            return;
        }
        let size = g
            .opts
            .store
            .get("repl-backlog-size")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1 << 20);
        st.backlog = Some(Backlog {
            buf: VecDeque::new(),
            size,
            orphan_since: None,
        });
        st.lim = limits(&shard.db.borrow().config);
        if g.repl.is_replica.load(Ordering::Relaxed) {
            return;
        }
        g.repl.feeding.store(true, Ordering::Relaxed);
    }
    crate::admin::everywhere(shard, |sh| sh.db.borrow_mut().set_change_log(true)).await;
}

/// Registers a replica whose stream starts after offset `sent` (`None`: after the stream's
/// end now); returns its id.
fn add_follower(global: &Global, ip: String, port: u16, phase: Phase, sent: Option<u64>) -> u64 {
    let mut st = lock(&global.repl.state);
    let sent = sent.unwrap_or(st.offset);
    let id = st.next_follower;
    st.next_follower += 1;
    st.followers.push(Follower {
        id,
        ip,
        port,
        phase,
        sent,
        ack: 0,
        ack_at: Instant::now(),
        wake: Arc::new(tokio::sync::Notify::new()),
        killed: Arc::new(tokio::sync::Notify::new()),
        parked: false,
        kill: false,
        wait_ack: false,
        over_soft: None,
    });
    if let Some(b) = st.backlog.as_mut() {
        b.orphan_since = None;
    }
    id
}

/// Removes a replica that went.
fn remove_follower(global: &Global, id: u64) {
    let mut st = lock(&global.repl.state);
    st.followers.retain(|f| f.id != id);
    if st.followers.is_empty() {
        if let Some(b) = st.backlog.as_mut() {
            b.orphan_since = Some(Instant::now());
        }
    }
    drop(st);
    global.repl.acked.notify_waiters();
}

/// Appends a command of the master's own (PING, GETACK) to the stream.
fn feed_own(global: &Global, bytes: &[u8]) {
    if global.repl.feeding.load(Ordering::Relaxed) {
        feed(global, bytes);
    }
}

/// Once a second on shard 0: the master's PING every `repl-ping-replica-period`, the soft
/// output limit, the count of good replicas for `min-replicas-to-write`, the backlog's time to
/// live without replicas.
pub fn cron(shard: &Shard) {
    let g = &shard.global;
    let config = &shard.db.borrow().config;
    let num = |k: &str, d: u64| config.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
    let period = num("repl-ping-replica-period", 10).max(1);
    let max_lag = num("min-replicas-max-lag", 10);
    let ttl = num("repl-backlog-ttl", 3600);
    let timeout = num("repl-timeout", 60);
    let lim = limits(config);
    let secs = shard.ticks.get() / 10;
    let mut st = lock(&g.repl.state);
    if st.followers.is_empty() && st.backlog.is_none() {
        return;
    }
    st.lim = lim;
    let now = Instant::now();
    let mut good = 0;
    let offset = st.offset;
    for f in &mut st.followers {
        let silent = now.duration_since(f.ack_at).as_secs();
        if f.phase == Phase::Online && silent <= max_lag {
            good += 1;
        }
        if f.phase == Phase::Online && silent > timeout && !f.kill {
            crate::log!(
                3,
                "Disconnecting timedout replica (streaming sync): {}:{}",
                f.ip,
                f.port
            );
            f.end();
        }
        if lim.soft != 0 && offset - f.sent > lim.soft {
            let since = *f.over_soft.get_or_insert(now);
            if now.duration_since(since).as_secs() >= lim.soft_secs {
                f.end();
            }
        } else {
            f.over_soft = None;
        }
    }
    g.repl.good_replicas.store(good, Ordering::Relaxed);
    let feeding = g.repl.feeding.load(Ordering::Relaxed);
    let expired = ttl != 0
        && feeding
        && st
            .backlog
            .as_ref()
            .and_then(|b| b.orphan_since)
            .is_some_and(|t| now.duration_since(t).as_secs() >= ttl);
    let ping = feeding && !st.followers.is_empty() && secs % period == 0;
    drop(st);
    if ping {
        feed(g, PING);
    }
    if expired {
        let mut st = lock(&g.repl.state);
        if st.followers.is_empty() {
            st.backlog = None;
            // A new id: nobody can continue the stream whose bytes are gone.
            st.replid = new_hex_id();
            st.replid2 = "0".repeat(40);
            st.second_offset = -1;
            g.repl.feeding.store(false, Ordering::Relaxed);
            crate::log!(
                2,
                "Replication backlog freed after {ttl} seconds without replicas."
            );
        }
    }
}

/// WAIT numreplicas timeout on a master: the replicas that acknowledged everything the stream
/// held when it was called, counted when `numreplicas` have or the timeout (ms, 0 = none) ends.
pub async fn wait(shard: &Shard, numreplicas: u64, timeout_ms: u64) -> u64 {
    let g = &shard.global;
    shard.flush_changes();
    let target = lock(&g.repl.state).offset;
    let count = || {
        lock(&g.repl.state)
            .followers
            .iter()
            .filter(|f| f.phase == Phase::Online && f.ack >= target)
            .count() as u64
    };
    let n = count();
    if n >= numreplicas || lock(&g.repl.state).followers.is_empty() && numreplicas == 0 {
        return n;
    }
    feed_own(g, GETACK);
    let deadline = (timeout_ms > 0)
        .then(|| tokio::time::Instant::now() + std::time::Duration::from_millis(timeout_ms));
    loop {
        let notified = g.repl.acked.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let n = count();
        if n >= numreplicas {
            return n;
        }
        match deadline {
            Some(d) => {
                if crate::timer::timeout_at(d, notified).await.is_err() {
                    return count();
                }
            }
            None => notified.await,
        }
    }
}

/// The replicas that acknowledged everything the stream holds now (WAIT inside a
/// transaction, which does not block).
pub fn acked_now(shard: &Shard) -> u64 {
    shard.flush_changes();
    let st = lock(&shard.global.repl.state);
    st.followers
        .iter()
        .filter(|f| f.phase == Phase::Online && f.ack >= st.offset)
        .count() as u64
}

/// Whether writes are refused for want of good replicas (`min-replicas-to-write`).
pub fn too_few_replicas(shard: &Shard) -> bool {
    let want = shard
        .db
        .borrow()
        .config
        .get("min-replicas-to-write")
        .map_or(0, |v| v.parse::<usize>().unwrap_or(0));
    want > 0
        && !shard.global.repl.is_replica.load(Ordering::Relaxed)
        && shard.global.repl.good_replicas.load(Ordering::Relaxed) < want
}

/// INFO's replication section.
pub fn info_section(shard: &Shard) -> String {
    let g = &shard.global;
    let config = &shard.db.borrow().config;
    let st = lock(&g.repl.state);
    let mut s = String::from("# Replication\r\n");
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        s.push_str(k);
        s.push(':');
        s.push_str(&v.to_string());
        s.push_str("\r\n");
    };
    match &st.master {
        Some(m) => {
            line("role", &"slave");
            line("master_host", &m.host);
            line("master_port", &m.port);
            line("master_link_status", &if m.up { "up" } else { "down" });
            line(
                "master_last_io_seconds_ago",
                &if m.up {
                    m.last_io.elapsed().as_secs() as i64
                } else {
                    -1
                },
            );
            line("master_sync_in_progress", &u8::from(m.syncing));
            line("slave_read_repl_offset", &st.offset);
            line("slave_repl_offset", &st.offset);
            if m.syncing {
                line("master_sync_total_bytes", &-1);
                line("master_sync_read_bytes", &m.sync_read);
                line("master_sync_left_bytes", &-1);
                line("master_sync_perc", &"0.00");
                line(
                    "master_sync_last_io_seconds_ago",
                    &m.last_io.elapsed().as_secs(),
                );
            }
            if !m.up {
                line(
                    "master_link_down_since_seconds",
                    &m.down_since.elapsed().as_secs(),
                );
            }
            line(
                "slave_priority",
                &config.get("replica-priority").unwrap_or("100"),
            );
            line(
                "slave_read_only",
                &u8::from(config.get("replica-read-only") != Some("no")),
            );
            line("replica_announced", &1);
        }
        None => line("role", &"master"),
    }
    line("connected_slaves", &st.followers.len());
    for (i, f) in st.followers.iter().enumerate() {
        let state = match f.phase {
            Phase::WaitBgsave => "wait_bgsave",
            Phase::SendBulk => "send_bulk",
            Phase::Online => "online",
        };
        line(
            &format!("slave{i}"),
            &format_args!(
                "ip={},port={},state={state},offset={},lag={}",
                f.ip,
                f.port,
                f.ack,
                f.ack_at.elapsed().as_secs()
            ),
        );
    }
    line("master_failover_state", &"no-failover");
    line("master_replid", &st.replid);
    line("master_replid2", &st.replid2);
    line("master_repl_offset", &st.offset);
    line("second_repl_offset", &st.second_offset);
    let (active, size, first, hist) = match &st.backlog {
        Some(b) => (1, b.size, st.first_offset(), b.buf.len()),
        None => (
            0,
            config
                .get("repl-backlog-size")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1 << 20),
            0,
            0,
        ),
    };
    line("repl_backlog_active", &active);
    line("repl_backlog_size", &size);
    line("repl_backlog_first_byte_offset", &first);
    line("repl_backlog_histlen", &hist);
    s
}

/// ROLE's reply.
pub fn role(shard: &Shard, out: &mut Vec<u8>) {
    let st = lock(&shard.global.repl.state);
    let mut w = kvcore::resp::ReplyWriter::new(out, kvcore::resp::Proto::Resp2);
    match &st.master {
        Some(m) => {
            w.array_len(5);
            w.bulk(b"slave");
            w.bulk(m.host.as_bytes());
            w.int(i64::from(m.port));
            w.bulk(if m.up {
                b"connected".as_slice()
            } else if m.syncing {
                b"sync"
            } else {
                b"connect"
            });
            w.int(st.offset as i64);
        }
        None => {
            w.array_len(3);
            w.bulk(b"master");
            w.int(st.offset as i64);
            let online: Vec<&Follower> = st
                .followers
                .iter()
                .filter(|f| f.phase == Phase::Online)
                .collect();
            w.array_len(online.len());
            for f in online {
                w.array_len(3);
                w.bulk(f.ip.as_bytes());
                w.bulk(f.port.to_string().as_bytes());
                w.bulk(f.ack.to_string().as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod select_tests {
    use super::*;

    fn enc(cmds: &[&[&str]]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in cmds {
            let refs: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
            kvcore::changes::encode(&mut out, &refs);
        }
        out
    }

    #[test]
    fn selects_are_found_by_walking_commands() {
        let b = enc(&[
            &["SELECT", "3"],
            &["SET", "SELECT", "9"],
            &["SELECT", "12"],
            &["DEL", "k"],
        ]);
        assert_eq!(last_select(&b), Walk::Selects(12));
        let (db, len) = leading_select(&b).unwrap();
        assert_eq!(db, 3);
        assert_eq!(&b[..len], enc(&[&["SELECT", "3"]]).as_slice());
        // A value that looks like a SELECT is not one.
        let b = enc(&[&["SET", "k", "*2\r\n$6\r\nSELECT\r\n$1\r\n5\r\n"]]);
        assert_eq!(last_select(&b), Walk::NoSelect);
        assert_eq!(leading_select(&b), None);
        assert_eq!(last_select(b"*2\r\n$3\r\nab"), Walk::Malformed);
        assert_eq!(last_select(b""), Walk::NoSelect);
    }
}
