//! One client connection: read, parse in place, route, execute, one write per batch.
//!
//! Each read is parsed into as many commands as it holds. A command whose keys live on this
//! shard runs inline against the local store, replying straight into the output buffer. A
//! command whose keys all live on one other shard is appended to that shard's batch; the
//! batches go out as one message per shard when the read is done (or before a command that
//! must see their effects), and the replies are stitched back in the client's order. Commands
//! spanning shards (`multi`) and whole-keyspace commands (`special`) run after the batches
//! ahead of them have resolved. The clock is read once per read batch.
//!
//! Between MULTI and EXEC commands are queued, and EXEC runs them through
//! [`crate::coord::tx`]. A client subscribed to channels also waits for its mailbox (see
//! [`crate::pubsub`]): what is delivered there goes out between its replies.

use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arrayvec::ArrayVec;
use kvcore::commands::{self, flags, sort_api, CommandSpec};
use kvcore::express::Express;
use kvcore::resp::parse::{Args, Limits, Parser, Status};
use kvcore::resp::Proto;
use kvcore::telemetry::Outcome;
use kvcore::Session;
use smallvec::SmallVec;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::coord::tx::{self, Multi, Watches};
use crate::coord::{blocking, multi, route};
use crate::global::{self, lock, ClientEntry};
use crate::pubsub::{self, Subscriptions};
use crate::repl::master::Handshake;
use crate::shard::locks::LockKey;
use crate::shard::{BatchReply, BufPool, Handoff, RemoteBatch, Shard};
use crate::{admin, log};

mod acl;
pub mod fast;
mod lane;

use lane::Lanes;

const READ_CHUNK: usize = BufPool::CHUNK;
/// Replies are written out once this many bytes are waiting, even mid-batch.
const FLUSH_AT: usize = 256 * 1024;
/// Commands queued for other shards are sent off once this many wait, so that the replies a
/// batch can bring back stay bounded (their sizes are unknown until they run).
const REMOTE_AT: usize = 128;

/// A client whose last this-many keyed commands all went to one other shard moves there.
const MOVE_AFTER: u32 = 64;

/// A client served by a task goes back to the shard's own loop after more than this many
/// batches in a row that took only the plain lanes: a client that sent HELLO or SELECT first
/// comes back, one that mixes in other commands does not move back and forth (with two shards,
/// a client of random keys one at a time has all of 32 batches here once in 2^32).
const LOOP_AFTER: u32 = 32;

/// Where a command runs.
enum Route {
    /// Here; `true` when the command has keys (all of them here).
    Local(Option<&'static CommandSpec>, bool),
    Remote(usize),
    /// Keys on several shards.
    Multi(&'static CommandSpec),
    Special,
    /// BZPOPMIN and the like: may wait for its keys (see [`crate::coord::blocking`]).
    Blocking,
    /// Transactions and pub/sub: the connection serves them itself.
    Conn(&'static CommandSpec),
}

enum Seg {
    Local(usize, usize),
    Remote(usize, usize),
}

/// Commands queued for other shards during one batch, and the order of all replies.
struct Pending {
    batches: Vec<RemoteBatch>,
    segs: Vec<Seg>,
    local: Vec<u8>,
    active: bool,
}

/// How a connection's stay on this shard ended.
enum End {
    /// The client quit, or broke the protocol and got its error.
    Closed,
    /// Its keys live on shard `.0`: serve it from there.
    Move(usize),
    /// It sent PSYNC or SYNC (these arguments): it is a replica now.
    Replica(Vec<Vec<u8>>, Handshake),
    /// Its last batches took only the plain lanes: the shard's own loop serves it again.
    Loop,
}

/// A command whose effect on the session the connection mirrors into its client entry
/// (see `Conn::after_session_change`).
fn changes_session(name: &str) -> bool {
    matches!(
        name,
        "select" | "reset" | "hello" | "client" | "move" | "auth"
    )
}

/// EXEC outside MULTI and RESET: a command of the store with more to do here than its answer.
fn more_than_store(name: &str) -> bool {
    matches!(name, "exec" | "reset")
}

/// The commands [`Lanes::run_plain`] may run, by [`CommandSpec::id`]: every command but a
/// connection's own (`CONN`), a blocking one, one the server may answer for every shard
/// ([`admin::may_be_special`]), DEBUG (which may be refused), SORT (whose patterns name keys
/// only the elements tell), and the ones [`changes_session`] or [`more_than_store`] names.
static LANE: std::sync::LazyLock<Box<[bool]>> = std::sync::LazyLock::new(|| {
    let all = commands::all();
    let mut lane = vec![false; all.len()];
    for spec in all {
        if let Some(l) = lane.get_mut(usize::from(spec.id)) {
            *l = !spec.has(flags::CONN)
                && !spec.has(flags::BLOCKING)
                && !admin::may_be_special(spec)
                && !matches!(spec.name, "debug" | "sort" | "sort_ro")
                && !changes_session(spec.name)
                && !more_than_store(spec.name)
                && !commands::scripting_api::is_script_command(spec.name);
        }
    }
    lane.into_boxed_slice()
});

/// Where the keys of a command go with `n` shards.
enum KeyHome {
    /// It names no key.
    None,
    /// Every key is this shard's.
    One(usize),
    /// Its keys span shards.
    Many,
}

fn key_home(spec: &CommandSpec, args: &[&[u8]], n: usize) -> KeyHome {
    let keys = spec.key_positions(args);
    let Some(&first) = keys.first() else {
        return KeyHome::None;
    };
    let s = route::shard_of(args[first], n);
    if keys[1..].iter().all(|&i| route::shard_of(args[i], n) == s) {
        KeyHome::One(s)
    } else {
        KeyHome::Many
    }
}

fn classify(shard: &Shard, session: &Session, args: &[&[u8]]) -> Route {
    let Some(spec) = commands::lookup(args[0]) else {
        return Route::Local(None, false);
    };
    if !spec.arity_ok(args.len()) || (!session.authenticated && !spec.has(flags::NO_AUTH)) || {
        let db = shard.db.borrow();
        db.protected_refused(session, spec)
            || db.write_refused(session, spec)
            || db.stale_refused(session, spec)
    } {
        return Route::Local(Some(spec), false);
    }
    if spec.has(flags::CONN) {
        return Route::Conn(spec);
    }
    if admin::is_special(spec, args, shard.n) {
        return Route::Special;
    }
    // XREAD and XREADGROUP block only with BLOCK; without, they are plain reads.
    if spec.has(flags::BLOCKING)
        && (!matches!(spec.name, "xread" | "xreadgroup") || commands::stream_api::read_blocks(args))
    {
        return Route::Blocking;
    }
    if shard.n == 1 {
        return Route::Local(Some(spec), true);
    }
    if crate::coord::script::spans_shards(spec, args, shard.n) {
        return Route::Multi(spec);
    }
    // BY and GET patterns name keys that only the sorted elements tell.
    if matches!(spec.name, "sort" | "sort_ro") && sort_api::has_patterns(args) {
        return Route::Multi(spec);
    }
    match key_home(spec, args, shard.n) {
        KeyHome::None => Route::Local(Some(spec), false),
        KeyHome::One(s) if s == shard.id => Route::Local(Some(spec), true),
        KeyHome::One(s) => Route::Remote(s),
        KeyHome::Many => Route::Multi(spec),
    }
}

/// A subscriber's `mailbox`: messages that arrived while the replies were on their way (its own
/// keyspace events among them, sent ahead of the replies) go out before them.
async fn resolve(
    shard: &Shard,
    pend: &mut Pending,
    out: &mut Vec<u8>,
    mailbox: Option<&pubsub::Mailbox>,
) {
    if !pend.active {
        return;
    }
    let mut waiting = Vec::new();
    for s in 0..pend.batches.len() {
        if !pend.batches[s].is_empty() {
            let batch = std::mem::take(&mut pend.batches[s]);
            waiting.push((s, shard.start_batch(s, batch).await));
        }
    }
    let mut replies: Vec<Option<BatchReply>> = (0..pend.batches.len()).map(|_| None).collect();
    for (s, rx) in waiting {
        replies[s] = rx
            .await
            .ok()
            .and_then(|p| p.downcast::<BatchReply>().ok())
            .map(|b| *b);
    }
    if let Some(m) = mailbox {
        m.drain_into(out);
    }
    for seg in pend.segs.drain(..) {
        match seg {
            Seg::Local(a, b) => out.extend_from_slice(&pend.local[a..b]),
            Seg::Remote(s, i) => match &replies[s] {
                Some(r) => out.extend_from_slice(r.get(i)),
                None => out.extend_from_slice(b"-ERR shard unavailable: shutting down\r\n"),
            },
        }
    }
    pend.local.clear();
    pend.active = false;
}

/// Serves one client until it quits, errs or is killed.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream, peer: SocketAddr) {
    let global = shard.global.clone();
    let id = global.next_id();
    let laddr = stream.local_addr().unwrap_or(peer);
    let entry = Arc::new(ClientEntry::new(id, peer, laddr, stream.as_raw_fd()));
    global.register(entry.clone());
    let _ = stream.set_nodelay(true);
    let authenticated = shard.db.borrow().acl.default_open();
    let session = Session {
        id,
        authenticated,
        local: crate::net::is_local(peer.ip()),
        ..Session::default()
    };
    if fast::active() {
        match to_loop(stream, session, &entry) {
            ToLoop::Taken => {}
            ToLoop::Back(stream, session) => serve_conn(shard, stream, session, entry).await,
            ToLoop::Lost(e) => {
                log!(3, "client {id}: {e}");
                forget(&shard, &entry);
            }
        }
        return;
    }
    serve_conn(shard, stream, session, entry).await;
}

/// What became of a client offered to the shard's own loop.
enum ToLoop {
    Taken,
    /// The loop did not take it: a task serves it.
    Back(TcpStream, Session),
    /// Its socket could not change hands (the caller forgets the client).
    Lost(std::io::Error),
}

/// Offers the client to this thread's own loop ([`fast`]).
fn to_loop(stream: TcpStream, session: Session, entry: &Arc<ClientEntry>) -> ToLoop {
    let stream = match stream.into_std() {
        Ok(s) => s,
        Err(e) => return ToLoop::Lost(e),
    };
    match fast::adopt(stream, session, entry.clone()) {
        Ok(()) => ToLoop::Taken,
        Err(back) => {
            let (stream, session) = *back;
            match TcpStream::from_std(stream) {
                Ok(stream) => ToLoop::Back(stream, session),
                Err(e) => ToLoop::Lost(e),
            }
        }
    }
}

/// Serves a client on this shard until it quits, errs, is killed or moves to the shard that
/// holds its keys.
///
/// SO_REUSEPORT puts a connection on a shard by a hash of its address, not by its keys. A
/// client whose keys all live on one other shard would pay a cross-shard hop on every
/// command; after [`MOVE_AFTER`] such commands in a row it moves there, between two batches
/// (nothing read and unanswered, nothing pending, no transaction, watch or subscription).
/// Its socket leaves this shard's event loop and joins the other's; bytes the client sent
/// meanwhile wait in the socket.
pub async fn serve_conn(
    shard: Rc<Shard>,
    stream: TcpStream,
    session: Session,
    entry: Arc<ClientEntry>,
) {
    serve_carried(shard, stream, session, entry, Vec::new(), Vec::new()).await;
}

/// [`serve_conn`] for a client that comes from the shard's own loop ([`fast`]) with `input`
/// it sent that did not run yet and the replies `out` not yet written.
async fn serve_carried(
    shard: Rc<Shard>,
    mut stream: TcpStream,
    mut session: Session,
    entry: Arc<ClientEntry>,
    mut input: Vec<u8>,
    mut out: Vec<u8>,
) {
    let (end, stream) = loop {
        let mut conn = Conn::new(&shard, &entry, &mut session);
        conn.out = std::mem::take(&mut out);
        let end = conn.serve(&mut stream, std::mem::take(&mut input)).await;
        conn.leave().await;
        drop(conn);
        if !matches!(end, Ok(End::Loop)) {
            break (end, stream);
        }
        // Back to the shard's own loop; where it cannot take the client, the task goes on.
        match to_loop(stream, session, &entry) {
            ToLoop::Taken => return,
            ToLoop::Back(s, sess) => (stream, session) = (s, sess),
            ToLoop::Lost(e) => {
                log!(3, "client {} ({}): {e}", entry.id, entry.addr);
                forget(&shard, &entry);
                return;
            }
        }
    };
    match end {
        Ok(End::Closed) | Ok(End::Loop) => {}
        Ok(End::Replica(args, hs)) => {
            crate::repl::master::serve(shard.clone(), stream, entry.clone(), hs, args).await;
        }
        Ok(End::Move(to)) => match stream.into_std() {
            Ok(stream) => {
                let h = Handoff {
                    stream,
                    session,
                    entry: entry.clone(),
                };
                if shard.hand_off(to, h) {
                    shard
                        .global
                        .moved_connections
                        .fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            Err(e) => log!(0, "client {}: {e}", entry.id),
        },
        Err(e) => log!(0, "client {} ({}): {e}", entry.id, entry.addr),
    }
    forget(&shard, &entry);
}

/// Removes a client that has gone from the registry and the connection count.
pub fn forget(shard: &Shard, entry: &ClientEntry) {
    shard.global.deregister(entry.id);
    shard.global.connected.fetch_sub(1, Ordering::Relaxed);
}

/// What the connection does after one command.
enum Step {
    Go,
    /// Close once the replies so far are written (QUIT, SHUTDOWN).
    Close,
    /// The client sent these bytes while it was blocked: they follow what was already read.
    Input(Vec<u8>),
}

/// What the connection does after a command it ran without an `await` ([`Conn::try_now`]):
/// a [`Step`] with nothing to carry, so that it is returned in registers. Also what it does
/// after a read batch ([`Conn::serve_batch`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ran {
    Go,
    Close,
}

impl From<Ran> for Step {
    fn from(r: Ran) -> Step {
        match r {
            Ran::Go => Step::Go,
            Ran::Close => Step::Close,
        }
    }
}

/// The read side of a connection: its buffer and the parser over it.
struct Input {
    rbuf: Vec<u8>,
    /// Unparsed bytes are `rbuf[start..end]`.
    start: usize,
    end: usize,
    /// Bytes the parser needs before it can make progress.
    wait_for: usize,
    parser: Parser,
}

/// The commands of a read batch parsed ahead of running them: the everyday multibulk commands
/// at the head of the unparsed input, up to [`Window::COMMANDS`] of them or about
/// [`Window::ARGS`] arguments, parsed once, their arguments borrowing the read buffer; or, when
/// the look ahead takes none (an inline, incomplete or malformed command), the one command the
/// general parser reads. The CPU starts loading the window's keys before the first of them runs
/// (see [`Window::prefetch`]).
struct Window<'a> {
    /// The arguments of the window's commands the general parser read, one after another.
    args: SmallVec<[&'a [u8]; Window::ARGS]>,
    /// The commands, in order. (A plain array: the window never holds more, and a
    /// `SmallVec` asks where its items live at every push and read.)
    cmds: ArrayVec<Cmd<'a>, { Window::COMMANDS }>,
    /// The commands' keys (their first argument) as they were read, a run of one key once
    /// (see [`likely_same`]).
    keys: ArrayVec<&'a [u8], { Window::COMMANDS }>,
    /// Whether a command the general parser read has a third argument (a field or member,
    /// for [`Window::prefetch`] to look at).
    third: bool,
}

/// A command of a [`Window`].
#[derive(Clone, Copy)]
struct Cmd<'a> {
    /// Where it ends in the read buffer.
    end: usize,
    /// Its arguments.
    args: CmdArgs<'a>,
}

/// Where the arguments of a [`Cmd`] are.
#[derive(Clone, Copy)]
enum CmdArgs<'a> {
    /// An express command read by [`Parser::scan_express`], with its arguments.
    Express(Express, [&'a [u8]; 3]),
    /// `n` arguments of [`Window::args`] from `first` on.
    Run { first: u32, n: u32 },
}

/// What [`Lanes::run_express`] knows of the express lane within a window: asked at its first
/// express command ([`Lanes::express_lane`]), then known while the window runs express
/// commands. Only a command of another kind, or another task while this one waits, can change
/// the answer, so it is forgotten after either. (A user's rules changed on another thread meet
/// the client's next window: Redis too runs a client's whole read batch before the next
/// client's command.)
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// Not asked since the last such change.
    Unknown,
    /// Express commands take the general path.
    Shut,
    /// Express commands run at once; `waiters`: some client of the shard waits on a key (a
    /// write may wake it); `alone`: the only shard (every key is its own).
    Open { waiters: bool, alone: bool },
}

impl<'a> Window<'a> {
    const COMMANDS: usize = 16;
    const ARGS: usize = 48;

    fn new() -> Self {
        Window {
            args: SmallVec::new(),
            cmds: ArrayVec::new(),
            keys: ArrayVec::new(),
            third: false,
        }
    }

    /// The arguments of `cmd`, and the express command it is if it was read as one.
    #[inline(always)]
    fn args_of<'w>(&'w self, cmd: &'w Cmd<'a>) -> (&'w [&'a [u8]], Option<Express>) {
        match &cmd.args {
            CmdArgs::Express(x, args) => (&args[..x.arity()], Some(*x)),
            CmdArgs::Run { first, n } => (&self.args[*first as usize..][..*n as usize], None),
        }
    }

    /// Parses the commands at `buf[pos..]` that the look ahead takes: where it met one it
    /// does not take (the general parser's to read), or `None` when the window is full.
    fn fill(&mut self, parser: &Parser, buf: &'a [u8], pos: usize) -> Option<usize> {
        let mut at = pos;
        while self.cmds.len() < Self::COMMANDS {
            let (args, key) = if let Some((x, args, consumed)) = parser.scan_express(&buf[at..]) {
                at += consumed;
                (CmdArgs::Express(x, args), Some(args[1]))
            } else {
                if self.args.len() >= Self::ARGS {
                    break;
                }
                let first = self.args.len();
                let Some(consumed) = parser.parse_ahead(&buf[at..], &mut self.args) else {
                    return Some(at);
                };
                at += consumed;
                let n = self.args.len() - first;
                self.third |= n >= 3;
                let key = (n >= 2).then(|| self.args[first + 1]);
                let args = CmdArgs::Run {
                    first: first as u32,
                    n: n as u32,
                };
                (args, key)
            };
            self.cmds.push(Cmd { end: at, args });
            // A run of commands on one key (a queue's pops, a counter) needs it once.
            if let Some(key) = key {
                if !self.keys.last().is_some_and(|&last| likely_same(last, key)) {
                    self.keys.push(key);
                }
            }
        }
        None
    }

    /// Has the CPU start loading the table entries of the window's keys (the first argument
    /// of most commands), so that a pipeline's lookups wait for memory together rather than
    /// one after another; for commands on a field or member of a big hash or set, its bucket
    /// and chain too. Only windows naming two keys or more (a run on one key is one key), or
    /// two members: one lookup has nothing to overlap with.
    fn prefetch(&self, db: &kvcore::Db, dbi: usize) {
        if self.keys.len() >= 2 {
            db.prefetch(dbi, &self.keys);
        }
        if !self.third || self.cmds.len() < 2 {
            return;
        }
        let mut members: ArrayVec<(&[u8], &[u8]), { Window::COMMANDS }> = ArrayVec::new();
        for cmd in &self.cmds {
            if let CmdArgs::Run { first, n } = cmd.args {
                if let &[name, key, member, ..] = &self.args[first as usize..][..n as usize] {
                    if names_member(name) {
                        members.push((key, member));
                    }
                }
            }
        }
        if members.len() >= 2 {
            db.prefetch_members(dbi, &members);
        }
    }
}

/// Whether two keys are probably the same, for a hint: the same length and the same last
/// eight bytes (all of them when shorter), without a call to `memcmp`. Keys that differ only
/// before their tail (`user:1:name`, `user:2:name`) pass for one: a lost hint, nothing more.
#[inline]
fn likely_same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && match (a.last_chunk::<8>(), b.last_chunk::<8>()) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        }
}

/// Where the bytes of a MULTI command (`*1\r\n$5\r\nMULTI\r\n`, any case) first start in
/// `buf` from `from` on.
fn find_multi(buf: &[u8], from: usize) -> Option<usize> {
    memchr::memmem::find_iter(&buf[from..], b"*1\r\n$5\r\n")
        .map(|i| from + i)
        .find(|&i| {
            buf.get(i + 8..i + 15)
                .is_some_and(|w| w[..5].eq_ignore_ascii_case(b"multi") && &w[5..] == b"\r\n")
        })
}

/// How the master's stream splits at the start of the unparsed input (see
/// [`Conn::scan_run`]).
struct Scan {
    /// The run of plain units ends here.
    end: usize,
    /// The run holds a transaction that runs on another shard, in whole or in part (served as
    /// a client's, each takes at least a round trip to that shard).
    remote_tx: bool,
    /// What follows the run: a command to serve as a client's, ending here; `None`: the rest
    /// (incomplete, a transaction that is not plain, bad protocol), all served as a client's.
    unit: Option<usize>,
    /// What follows the run is a plain transaction so far, whose EXEC has not come yet.
    open_tx: bool,
    /// Where each command of the run goes, in order (empty commands left out).
    targets: Vec<Target>,
}

/// Where a plain command of the master's stream runs (see [`Conn::plain_target`]).
#[derive(Clone, Copy)]
enum Target {
    /// SELECT of this database: it only sets the database of the commands after it.
    Select(usize),
    /// In this shard's store.
    Shard(usize),
    /// MULTI or EXEC around a transaction of the run: nothing to run.
    Bracket,
}

/// Why a wait for input ended.
enum Woke {
    /// `n` bytes were read (0: the client hung up).
    Read(usize),
    /// The client's mailbox has messages (or it was cut off).
    Mail,
}

/// One client's state on this shard.
struct Conn<'a> {
    shard: &'a Rc<Shard>,
    /// `Global::pause_end`, read before every command: held here, one load away rather than
    /// a chain of them through the shard and the global state.
    pause_end: &'a std::sync::atomic::AtomicU64,
    entry: &'a ClientEntry,
    session: &'a mut Session,
    out: Vec<u8>,
    pend: Pending,
    /// The other shard that this client's last keyed commands all went to, and how many.
    hop_to: usize,
    hops: u32,
    /// Batches in a row that took only the plain lanes ([`LOOP_AFTER`] of them: the client
    /// goes back to the shard's own loop), and whether this one took the general path.
    lane_run: u32,
    general: bool,
    query_limit: usize,
    /// Between MULTI and EXEC.
    multi: Option<Box<Multi>>,
    /// Keys under WATCH.
    watches: Option<Box<Watches>>,
    /// Channels and patterns subscribed.
    subs: Option<Box<Subscriptions>>,
    /// MONITOR ran: where the lines of the commands run wait (see [`crate::monitor`]).
    monitor: Option<Rc<pubsub::Mailbox>>,
    /// This connection is the link from this replica's master (see [`serve_master`]).
    link: Option<Box<MasterSide>>,
    /// PSYNC or SYNC came: the connection becomes a replica's feed.
    psync: Option<Vec<Vec<u8>>>,
    /// What a replica said of itself with REPLCONF.
    handshake: Handshake,
    /// EXEC was refused by the client's ACL user: its error, for the EXECABORT reply.
    acl_exec: Option<Vec<u8>>,
}

/// The link from this server's master, served as a client (see [`serve_master`]).
struct MasterSide {
    /// Stream bytes that came with the handshake.
    preload: Vec<u8>,
    /// The link's generation (see `repl::replica`).
    generation: u64,
    /// REPLCONF GETACK came: acknowledge after this batch.
    ack_due: bool,
    /// When the last acknowledgement went.
    last_ack: std::time::Instant,
    /// When the master last sent something.
    last_io: std::time::Instant,
    /// `repl-timeout`.
    timeout: Duration,
    /// Fires every second while the master is quiet: acknowledge, look at the link.
    tick: crate::timer::Sleep,
    /// Where in this batch the transaction still open began.
    tx_from: Option<usize>,
    /// The bytes of a transaction begun in an earlier batch and still open: they count (and go
    /// on to this server's own replicas) only with its EXEC.
    pending: Vec<u8>,
}

/// Serves the link from this replica's master: its stream's commands run as a client's, never
/// refused (`Session::master`), their replies dropped; each batch's bytes go into this
/// server's own stream as they came (its offset is the master's); `REPLCONF GETACK` and every
/// second send `REPLCONF ACK <offset>`. Returns when the link breaks, times out or is no longer
/// wanted.
pub async fn serve_master(
    shard: Rc<Shard>,
    mut stream: TcpStream,
    preload: Vec<u8>,
    generation: u64,
) {
    let global = shard.global.clone();
    let id = global.next_id();
    let Ok(peer) = stream.peer_addr() else {
        return;
    };
    let laddr = stream.local_addr().unwrap_or(peer);
    let entry = Arc::new(ClientEntry::new(id, peer, laddr, stream.as_raw_fd()));
    entry
        .class
        .store(global::Class::Master as u8, Ordering::Relaxed);
    global.register(entry.clone());
    {
        let mut st = lock(&global.repl.state);
        match st.master.as_mut().filter(|m| m.generation == generation) {
            Some(m) => m.client = Some(id),
            None => {
                global.deregister(id);
                return;
            }
        }
    }
    let timeout = crate::repl::timeout(&shard);
    // A continued stream goes on in the database it had selected.
    let db = lock(&global.repl.state).link_db;
    let mut session = Session {
        id,
        db,
        authenticated: true,
        master: true,
        ..Session::default()
    };
    let mut conn = Conn::new(&shard, &entry, &mut session);
    conn.link = Some(Box::new(MasterSide {
        preload,
        generation,
        // The first acknowledgement tells a Redis master the snapshot is loaded (it sends
        // the stream only then).
        ack_due: true,
        last_ack: std::time::Instant::now(),
        last_io: std::time::Instant::now(),
        timeout,
        tick: crate::timer::Sleep::new(Duration::from_secs(1)),
        tx_from: None,
        pending: Vec::new(),
    }));
    let end = conn.serve(&mut stream, Vec::new()).await;
    conn.leave().await;
    drop(conn);
    if let Err(e) = end {
        log!(2, "link with master ended: {e}");
    }
    global.deregister(id);
}

impl<'a> Conn<'a> {
    fn new(shard: &'a Rc<Shard>, entry: &'a ClientEntry, session: &'a mut Session) -> Self {
        let query_limit = shard
            .db
            .borrow()
            .config
            .get("client-query-buffer-limit")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(1 << 30);
        Conn {
            shard,
            pause_end: &shard.global.pause_end,
            entry,
            session,
            out: Vec::new(),
            pend: Pending {
                batches: (0..shard.n).map(|_| RemoteBatch::default()).collect(),
                segs: Vec::new(),
                local: Vec::new(),
                active: false,
            },
            hop_to: 0,
            hops: 0,
            lane_run: 0,
            general: false,
            query_limit,
            multi: None,
            watches: None,
            subs: None,
            monitor: None,
            link: None,
            psync: None,
            handshake: Handshake::default(),
            acl_exec: None,
        }
    }

    /// Serves batches until the client goes or moves; `carried`: what it sent that did not
    /// run yet, served first.
    async fn serve(&mut self, stream: &mut TcpStream, carried: Vec<u8>) -> std::io::Result<End> {
        let shard = self.shard;
        let mut input = Input {
            rbuf: Vec::new(),
            start: 0,
            end: 0,
            wait_for: 0,
            parser: Parser::new(Limits {
                max_bulk_len: shard.db.borrow().config.proto_max_bulk_len as usize,
                ..Limits::default()
            }),
        };
        if let Some(pre) = self.link.as_mut().map(|l| std::mem::take(&mut l.preload)) {
            if !pre.is_empty() {
                input.rbuf = pre;
                input.end = input.rbuf.len();
                let len = input.rbuf.len().max(READ_CHUNK);
                input.rbuf.resize(len, 0);
                self.master_batch(stream, &mut input).await?;
            }
            // The first acknowledgement at once: a master that sent the snapshot in the
            // diskless format waits for it before the stream.
            if self.link.as_deref().is_some_and(|l| l.ack_due) {
                self.send_ack(stream).await?;
            }
        }
        // (Replies carried need writing even when no input came with them.)
        let mut ready = !carried.is_empty() || !self.out.is_empty();
        if !carried.is_empty() {
            input.end = carried.len();
            input.rbuf = carried;
            let len = input.end.max(READ_CHUNK);
            input.rbuf.resize(len, 0);
        }
        'serve: loop {
            'read: {
                if std::mem::take(&mut ready) {
                    // What came with the client is served before anything is read.
                    break 'read;
                }
                if self.link.is_some() {
                    match self.master_wait(stream, &mut input).await? {
                        Some(Woke::Read(0)) | None => return Ok(End::Closed),
                        Some(_) => {}
                    }
                    continue 'serve;
                }
                let woke = if input.end == 0 {
                    // Nothing partial is held: give the buffers back while the client is quiet, so
                    // an idle connection costs no buffer memory.
                    if !input.rbuf.is_empty() {
                        let mut pool = shard.bufs.borrow_mut();
                        pool.put_read(std::mem::take(&mut input.rbuf));
                        pool.put_out(std::mem::take(&mut self.out));
                    }
                    if self.hops >= MOVE_AFTER && self.settled() {
                        return Ok(End::Move(self.hop_to));
                    }
                    self.lane_run = if std::mem::take(&mut self.general) {
                        0
                    } else {
                        self.lane_run.saturating_add(1)
                    };
                    if self.lane_run > LOOP_AFTER && self.loop_may_take() {
                        return Ok(End::Loop);
                    }
                    let woke = read_idle(shard, stream, &mut input.rbuf, self.mailbox()).await?;
                    if self.out.capacity() == 0 {
                        self.out = shard.bufs.borrow_mut().take_out();
                    }
                    woke
                } else {
                    if input.end == input.rbuf.len() {
                        if input.start > 0 {
                            input.rbuf.copy_within(input.start..input.end, 0);
                            input.end -= input.start;
                            input.start = 0;
                        } else if input.rbuf.len() >= self.query_limit {
                            shard
                                .global
                                .query_limit_disconnections
                                .fetch_add(1, Ordering::Relaxed);
                            return Err(std::io::Error::other(
                                "closing client that reached the max query buffer length",
                            ));
                        } else {
                            // One command is larger than the buffer: grow by what was received,
                            // never by a length the client only declared.
                            let new_len =
                                (input.rbuf.len() * 2).min(self.query_limit.max(READ_CHUNK));
                            input.rbuf.resize(new_len, 0);
                        }
                    }
                    let end = input.end;
                    read(stream, &mut input.rbuf[end..], self.mailbox()).await?
                };
                let n = match woke {
                    Woke::Mail => {
                        self.deliver_mail(stream).await?;
                        continue 'serve;
                    }
                    Woke::Read(n) => n,
                };
                if n == 0 {
                    return Ok(End::Closed);
                }
                shard.net.read(n);
                input.end += n;
                if input.end - input.start < input.wait_for {
                    continue 'serve;
                }
            }
            input.wait_for = 0;
            let close = self.serve_batch(stream, &mut input).await? == Ran::Close;
            if close {
                if let Some(args) = self.psync.take() {
                    self.write_out(stream).await?;
                    return Ok(End::Replica(args, self.handshake));
                }
            }
            // Replies leave at once, however short the batch. (Holding a short batch's replies
            // for one more turn of the loop, so that everyone's replies leave together, cost
            // ~350 instructions a request and, measured with a client that sends on time, made
            // no latency better: issue 19.)
            self.write_out(stream).await?;
            if close {
                return Ok(End::Closed);
            }
            if input.start == input.end {
                input.start = 0;
                input.end = 0;
            }
        }
    }

    /// Whether the shard's own loop may serve this client from now on: it runs, and the
    /// client is plain and settled with nothing left to write (see [`fast`]).
    fn loop_may_take(&self) -> bool {
        self.settled()
            && self.plain()
            && self.out.is_empty()
            && self.psync.is_none()
            && fast::active()
    }

    /// Whether the client holds nothing that ties it to this shard.
    fn settled(&self) -> bool {
        self.multi.is_none()
            && self.watches.is_none()
            && self.subs.is_none()
            && self.link.is_none()
            && self.monitor.is_none()
    }

    fn mailbox(&self) -> Option<Rc<pubsub::Mailbox>> {
        match &self.monitor {
            Some(m) => Some(m.clone()),
            None => self.subs.as_ref().map(|s| s.mailbox.clone()),
        }
    }

    /// Writes out what was delivered to the client's mailbox; an error when it went past its
    /// output limit.
    async fn deliver_mail(&mut self, stream: &mut TcpStream) -> std::io::Result<()> {
        self.check_subscriptions()?;
        if let Some(s) = &self.subs {
            if s.mailbox.is_cut() {
                return Err(std::io::Error::other(
                    "closing client that reached the pubsub output buffer limit",
                ));
            }
            if self.out.capacity() == 0 {
                self.out = self.shard.bufs.borrow_mut().take_out();
            }
            s.mailbox.drain_into(&mut self.out);
        }
        if let Some(m) = &self.monitor {
            if m.is_cut() {
                return Err(std::io::Error::other(
                    "closing monitor that reached the replica output buffer limit",
                ));
            }
            if self.out.capacity() == 0 {
                self.out = self.shard.bufs.borrow_mut().take_out();
            }
            m.drain_into(&mut self.out);
        }
        self.write_out(stream).await
    }

    /// A subscriber whose user no longer allows all of its subscriptions (see
    /// [`pubsub::Subscriptions::revoked`]) is disconnected: an error. Looked at before each
    /// delivery (so nothing published after the change reaches it), and when a change to the
    /// users wakes the subscriber ([`pubsub::wake_subscribers`]).
    fn check_subscriptions(&mut self) -> std::io::Result<()> {
        let Conn {
            subs: Some(subs),
            shard,
            session,
            ..
        } = self
        else {
            return Ok(());
        };
        let acl = &shard.global.acl;
        if subs.revoked(acl.epoch(), || acl.refresh(session)) {
            return Err(std::io::Error::other(
                "closing subscriber whose channel permissions were revoked",
            ));
        }
        Ok(())
    }

    /// Parses and runs the commands of `input`: [`Ran::Close`] when the connection must close
    /// after the replies are written.
    async fn serve_batch(
        &mut self,
        stream: &mut TcpStream,
        input: &mut Input,
    ) -> std::io::Result<Ran> {
        self.shard.db.borrow_mut().refresh_clock();
        let Input {
            rbuf,
            start,
            end,
            wait_for,
            parser,
        } = input;
        let mut pos = *start;
        let mut close = false;
        // (The session's lap, `Session::lap`, holds when the last command run here ended
        // while nothing was awaited since: it is ended wherever the batch waits or stops.)
        let mut plain = self.plain();
        // Where the last look ahead met a command it does not take (an inline one, the
        // incomplete one at the end of the read): not looked at again there.
        let mut ahead_stopped = None;
        'batch: loop {
            if pos == *end {
                *wait_for = 0;
                break;
            }
            // What the client sent while a command waited: it follows what was read, once the
            // window (which borrows the buffer) is gone.
            let mut sent_more = None;
            {
                let buf = &rbuf[..*end];
                let mut window = Window::new();
                if ahead_stopped != Some(pos) {
                    ahead_stopped = window.fill(parser, buf, pos);
                }
                if window.cmds.is_empty() {
                    let mut args = Args::new();
                    match parser.parse_into(&buf[pos..], &mut args) {
                        Ok(Status::Command { consumed }) => {
                            window.args.extend_from_slice(&args);
                            window.cmds.push(Cmd {
                                end: pos + consumed,
                                args: CmdArgs::Run {
                                    first: 0,
                                    n: args.len() as u32,
                                },
                            });
                        }
                        Ok(Status::Incomplete { hint }) => {
                            *wait_for = hint;
                            break 'batch;
                        }
                        Err(e) => {
                            self.end_lap();
                            self.resolve().await;
                            self.out.extend_from_slice(b"-ERR ");
                            self.out.extend_from_slice(e.to_string().as_bytes());
                            self.out.extend_from_slice(b"\r\n");
                            log!(1, "protocol error from client {}: {e}", self.entry.id);
                            *start = pos;
                            return Ok(Ran::Close);
                        }
                    }
                } else {
                    window.prefetch(&self.shard.db.borrow(), self.session.db);
                }
                let mut lane = Lane::Unknown;
                let mut next = 0;
                while let Some(cmd) = window.cmds.get(next) {
                    next += 1;
                    let (args, express) = window.args_of(cmd);
                    let at = pos;
                    pos = cmd.end;
                    if args.is_empty() {
                        continue;
                    }
                    if plain && express.or_else(|| Express::of(args)).is_some() {
                        // The run of express commands from this one on, in one call.
                        let (ran, end) = self.run_express(&window, next - 1, &mut lane);
                        if ran > 0 {
                            next += ran - 1;
                            pos = end;
                            if self.out.len() >= FLUSH_AT {
                                self.end_lap();
                                self.write_out(stream).await?;
                                lane = Lane::Unknown;
                            }
                            continue;
                        }
                    }
                    if plain {
                        self.session.lapping = true;
                        let ran = self.run_plain(args, &mut lane);
                        self.session.lapping = false;
                        if ran {
                            if self.session.close_after_reply {
                                close = true;
                                break 'batch;
                            }
                            if self.out.len() >= FLUSH_AT {
                                self.end_lap();
                                self.write_out(stream).await?;
                                lane = Lane::Unknown;
                            }
                            continue;
                        }
                    }
                    lane = Lane::Unknown;
                    self.general = true;
                    if self.pause_end.load(Ordering::Relaxed) != 0 {
                        self.end_lap();
                        self.wait_out_pause(stream, args).await?;
                    }
                    // CLIENT REPLY OFF or SKIP: this command's reply may be dropped.
                    let quiet = if self.session.reply_quiet() {
                        // A SKIP before this command applies to it (Redis moves SKIP_NEXT to
                        // SKIP after the SKIP command; nothing runs in between).
                        if std::mem::take(&mut self.session.reply_skip) {
                            self.session.reply_skip_now = true;
                        }
                        self.end_lap();
                        self.resolve().await;
                        Some(self.out.len())
                    } else {
                        None
                    };
                    let in_tx = self.multi.is_some();
                    // (The general path may time a command itself, not with the lap.)
                    self.settle_lap();
                    self.session.lapping = true;
                    let now = self.try_now(args);
                    self.session.lapping = false;
                    // No value of a type with a payload lives across the `await` below (it
                    // would be kept in this future's state: perf showed a store-forwarding
                    // stall there on every command); the outcome is one flag.
                    let close_now = match now {
                        Some(Ran::Go) => false,
                        Some(Ran::Close) => true,
                        None => {
                            self.end_lap();
                            let room = self.query_limit.saturating_sub(*end - pos);
                            match Box::pin(self.command(stream, args, room)).await? {
                                Step::Go => false,
                                Step::Close => true,
                                Step::Input(sent) => {
                                    sent_more = Some(sent);
                                    false
                                }
                            }
                        }
                    };
                    if let Some(l) = self.link.as_deref_mut() {
                        // Where the master's transaction that is open now began (see
                        // `master_batch`).
                        if self.multi.is_some() && !in_tx {
                            l.tx_from = Some(at);
                        }
                    }
                    if let Some(mark) = quiet {
                        self.end_lap();
                        self.resolve().await;
                        // As Redis decides when the reply is added: after the command changed
                        // the flags (CLIENT REPLY ON's own +OK is sent).
                        if self.session.reply_off || self.session.reply_skip_now {
                            self.out.truncate(mark);
                        }
                        self.session.reply_skip_now = false;
                    }
                    if close_now {
                        close = true;
                        break 'batch;
                    }
                    if self.out.len() + self.pend.local.len() >= FLUSH_AT
                        || self.pend.segs.len() >= REMOTE_AT
                    {
                        self.end_lap();
                        self.resolve().await;
                        self.write_out(stream).await?;
                    }
                    plain = self.plain();
                    if sent_more.is_some() {
                        // The rest of the window is parsed again after what was sent.
                        break;
                    }
                }
            }
            if let Some(sent) = sent_more {
                // (What was incomplete may be whole now.)
                ahead_stopped = None;
                let grown = *end + sent.len();
                if grown > rbuf.len() {
                    rbuf.resize(grown, 0);
                }
                rbuf[*end..grown].copy_from_slice(&sent);
                *end = grown;
            }
        }
        self.end_lap();
        self.resolve().await;
        *start = pos;
        Ok(if close { Ran::Close } else { Ran::Go })
    }

    /// The plain lanes over this connection's session and output.
    #[inline(always)]
    fn lanes(&mut self) -> Lanes<'_> {
        Lanes {
            shard: self.shard,
            session: self.session,
            out: &mut self.out,
        }
    }

    /// Ends the batch's lap where it waits or stops (see `Session::lap`): a run of express
    /// commands in it is counted.
    #[inline]
    fn end_lap(&mut self) {
        self.lanes().end_lap();
    }

    /// Counts a run of express commands in the batch's lap, which goes on from now.
    #[inline]
    fn settle_lap(&mut self) {
        self.lanes().lap_with(kvcore::Db::settle_lap);
    }

    /// [`Lanes::run_express`] for this connection.
    #[inline]
    fn run_express(&mut self, window: &Window<'_>, from: usize, lane: &mut Lane) -> (usize, usize) {
        let (ran, end) = self.lanes().run_express(window, from, lane);
        if ran > 0 {
            self.hops = 0;
        }
        (ran, end)
    }

    /// Whether this client's next commands may take [`Lanes::run_plain`]: no transaction,
    /// subscription, master link, reply of another shard on its way, CLIENT REPLY mode or
    /// CLIENT PAUSE. Looked at once per batch and after each command that took the general
    /// path (a command of the plain lane changes none of these).
    fn plain(&self) -> bool {
        self.subs.is_none()
            && self.monitor.is_none()
            && self.multi.is_none()
            && self.link.is_none()
            && !self.pend.active
            && !self.session.reply_quiet()
            && self.pause_end.load(Ordering::Relaxed) == 0
    }

    /// [`Lanes::run_plain`] for this connection.
    #[inline]
    fn run_plain(&mut self, args: &[&[u8]], lane: &mut Lane) -> bool {
        match self.lanes().run_plain(args, lane) {
            Some(keyed) => {
                if keyed {
                    self.hops = 0;
                }
                true
            }
            None => false,
        }
    }

    /// CLIENT PAUSE: holds this command while a pause covers it (every command, or one that
    /// may write), after sending the replies of the commands before it.
    async fn wait_out_pause(
        &mut self,
        stream: &mut TcpStream,
        args: &[&[u8]],
    ) -> std::io::Result<()> {
        let g = &self.shard.global;
        let queued_writes = self.multi.as_ref().is_some_and(|m| m.writes);
        let writes = commands::lookup(args[0]).is_some_and(|s| {
            s.has(flags::WRITE)
                || matches!(s.name, "publish" | "spublish" | "pfcount")
                || (s.name == "exec" && queued_writes)
        });
        loop {
            let end = g.pause_end.load(Ordering::Acquire);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            if end == 0 || now >= end {
                if end != 0 {
                    // Over: whoever sees it first clears it (unless a new pause moved it).
                    let _ =
                        g.pause_end
                            .compare_exchange(end, 0, Ordering::AcqRel, Ordering::Relaxed);
                }
                return Ok(());
            }
            if !g.pause_all.load(Ordering::Relaxed) && !writes {
                return Ok(());
            }
            self.resolve().await;
            self.write_out(stream).await?;
            let unpaused = g.unpaused.notified();
            tokio::select! {
                _ = unpaused => {}
                _ = crate::timer::sleep(std::time::Duration::from_millis(end - now)) => {}
            }
        }
    }

    /// Collects the replies of commands sent to other shards, in the client's order.
    async fn resolve(&mut self) {
        if self.pend.active {
            let mailbox = self.subs.as_ref().map(|s| &*s.mailbox);
            Box::pin(resolve(self.shard, &mut self.pend, &mut self.out, mailbox)).await;
        }
    }

    /// The common case without an `await`: a client with no transaction and no subscription
    /// runs a command of this shard whose keys no command spanning shards holds, or queues
    /// one for another shard. `None`: take [`Conn::command`].
    #[inline]
    fn try_now(&mut self, args: &[&[u8]]) -> Option<Ran> {
        if !self.shard.db.borrow().acl.is_free(self.session) && self.acl_gate(args) {
            return Some(Ran::Go);
        }
        if self.subs.is_some() || self.monitor.is_some() {
            return None;
        }
        if self.multi.is_some() {
            if args[0].eq_ignore_ascii_case(b"exec") {
                return self.try_exec_now(args);
            }
            // Queued (or refused) at once; EXEC's companions take the async path.
            return self.in_multi(args);
        }
        match classify(self.shard, self.session, args) {
            Route::Local(spec, keyed) => {
                // EXEC outside MULTI and RESET have more to do than the store's answer.
                if spec.is_some_and(|s| more_than_store(s.name)) {
                    return None;
                }
                let shard = self.shard;
                let session = &mut *self.session;
                if self.pend.active {
                    let a = self.pend.local.len();
                    if !shard.try_run_now(session, spec, args, &mut self.pend.local) {
                        return None;
                    }
                    self.pend.segs.push(Seg::Local(a, self.pend.local.len()));
                } else if !shard.try_run_now(session, spec, args, &mut self.out) {
                    return None;
                }
                if keyed {
                    self.hops = 0;
                }
                self.after_session_change(spec);
                Some(if self.session.close_after_reply {
                    Ran::Close
                } else {
                    Ran::Go
                })
            }
            Route::Remote(s) => {
                self.queue_remote(s, args);
                Some(Ran::Go)
            }
            // (Only with no reply of an earlier command on its way: in MULTI, replies go
            // straight to the output.)
            Route::Conn(spec) if spec.name == "multi" && !self.pend.active => {
                self.multi = Some(Box::default());
                self.entry.multi.store(0, Ordering::Relaxed);
                self.hops = 0;
                let mark = self.out.len();
                self.out.extend_from_slice(b"+OK\r\n");
                self.count(spec, args, None, mark);
                Some(Ran::Go)
            }
            // PUBLISH from a client that subscribes to nothing: no reply of its own can
            // interleave, so it needs no await (the common publisher).
            Route::Conn(spec) if matches!(spec.name, "publish" | "spublish") => {
                let start = quanta::Instant::now();
                let n = pubsub::publish_command(self.shard, spec.name == "spublish", args);
                let nanos = start.elapsed().as_nanos() as u64;
                let mut d = self.shard.db.borrow_mut();
                d.stats.commands += 1;
                d.record(spec, args, nanos, Outcome::Ran(false), b"", self.session.id);
                if d.monitoring {
                    d.feed_monitors(self.session, spec, args, false);
                }
                drop(d);
                let out = if self.pend.active {
                    let a = self.pend.local.len();
                    kvcore::resp::ReplyWriter::new(&mut self.pend.local, self.session.proto).int(n);
                    self.pend.segs.push(Seg::Local(a, self.pend.local.len()));
                    return Some(Ran::Go);
                } else {
                    &mut self.out
                };
                kvcore::resp::ReplyWriter::new(out, self.session.proto).int(n);
                Some(Ran::Go)
            }
            _ => None,
        }
    }

    /// Counts a command this connection served itself (the store counts the ones it runs):
    /// its reply is what was written to the output from `mark`; `start` is `None` for a
    /// command whose time is waiting, not work.
    fn count(
        &self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        start: Option<quanta::Instant>,
        mark: usize,
    ) {
        self.count_fed(spec, args, start, mark, false);
    }

    /// [`Conn::count`] of a command the monitors were shown already (`fed`), or are shown now.
    fn count_fed(
        &self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        start: Option<quanta::Instant>,
        mark: usize,
        fed: bool,
    ) {
        let nanos = start.map_or(0, |s| s.elapsed().as_nanos() as u64);
        let reply = self.out.get(mark..).unwrap_or_default();
        let failed = reply.first() == Some(&b'-');
        let mut d = self.shard.db.borrow_mut();
        d.stats.commands += 1;
        d.record(
            spec,
            args,
            nanos,
            Outcome::Ran(failed),
            reply,
            self.session.id,
        );
        if d.monitoring && !fed {
            d.feed_monitors(self.session, spec, args, false);
        }
    }

    /// Feeds the monitors what Redis feeds them before a command the connection runs itself
    /// runs (a script's call, ahead of its commands).
    fn feed_before(&self, spec: &'static CommandSpec, args: &[&[u8]]) {
        let d = self.shard.db.borrow();
        if d.monitoring {
            d.feed_monitors(self.session, spec, args, true);
        }
    }

    /// Adds a command for shard `s` to its batch (sent when the read batch is done).
    fn queue_remote(&mut self, s: usize, args: &[&[u8]]) {
        (self.hop_to, self.hops) = (s, if s == self.hop_to { self.hops + 1 } else { 1 });
        self.pend.active = true;
        self.pend.batches[s].push(args, self.session);
        self.pend
            .segs
            .push(Seg::Remote(s, self.pend.batches[s].len() - 1));
    }

    /// EXEC without an `await`: no watched key, no queue-time error, and every key on this
    /// shard (or none) and free. `None`: take [`Conn::exec`].
    fn try_exec_now(&mut self, args: &[&[u8]]) -> Option<Ran> {
        let multi = self.multi.as_deref()?;
        if self.watches.is_some()
            || multi.aborted
            || self.exec_rejected(args).is_some()
            || !self.shard.db.borrow().acl.is_free(self.session)
        {
            return None;
        }
        let plan = tx::plan(
            self.session,
            self.shard.n,
            &multi.queue,
            &Watches::default(),
        );
        if !matches!(plan.one_shard, Some(s) if s.is_none_or(|s| s == self.shard.id)) {
            return None;
        }
        if self.pend.active {
            return None;
        }
        let (start, mark) = (quanta::Instant::now(), self.out.len());
        if !tx::run_here(self.shard, self.session, &multi.queue, &mut self.out) {
            return None;
        }
        if let Some(spec) = commands::lookup(args[0]) {
            self.count(spec, args, Some(start), mark);
        }
        let changes = multi.session_changes;
        self.end_multi();
        if changes {
            self.mirror_session();
        }
        Some(Ran::Go)
    }

    /// Runs one command (or queues it, inside MULTI).
    async fn command(
        &mut self,
        stream: &mut TcpStream,
        args: &[&[u8]],
        input_room: usize,
    ) -> std::io::Result<Step> {
        let shard = self.shard;
        if self.subs.is_some() {
            // A subscriber's messages and replies go out in the order they were made.
            self.resolve().await;
            if let Some(s) = &self.subs {
                s.mailbox.drain_into(&mut self.out);
            }
        }
        if args[0].eq_ignore_ascii_case(b"exec") {
            if let Some(err) = self.acl_exec.take().or_else(|| self.exec_rejected(args)) {
                // EXEC itself rejected (arity, authentication, subscribed mode): Redis discards
                // the transaction, if any, and says why, inside MULTI or not.
                self.resolve().await;
                let reason = err
                    .strip_prefix(b"-ERR ")
                    .or_else(|| err.strip_prefix(b"-"))
                    .unwrap_or(&err);
                self.out
                    .extend_from_slice(b"-EXECABORT Transaction discarded because of: ");
                self.out.extend_from_slice(reason);
                self.end_multi();
                self.unwatch().await;
                return Ok(Step::Go);
            }
        }
        if self.multi.is_some() {
            if let Some(ran) = self.in_multi(args) {
                return Ok(ran.into());
            }
        }
        if args.len() == 1 && args[0].eq_ignore_ascii_case(b"reset") {
            // RESET also ends the transaction, the watches and the subscriptions.
            self.resolve().await;
            self.leave().await;
        }
        let route = classify(shard, self.session, args);
        if self.monitor.is_some()
            && commands::lookup(args[0]).is_some_and(|s| s.arity_ok(args.len()))
            && crate::monitor::refused(args)
        {
            self.resolve().await;
            self.out
                .extend_from_slice(b"-ERR Replica can't interact with the keyspace\r\n");
            return Ok(Step::Go);
        }
        if self.subscribed_resp2() {
            if let Some(step) = self.in_subscribed_mode(args, &route) {
                return Ok(step);
            }
        }
        match route {
            Route::Local(spec, keyed) => {
                if keyed {
                    self.hops = 0;
                }
                let mark = self.out.len();
                let session = &mut *self.session;
                if self.pend.active {
                    let a = self.pend.local.len();
                    if !shard.try_run_now(session, spec, args, &mut self.pend.local) {
                        shard
                            .run_spec(session, spec, args, &mut self.pend.local)
                            .await;
                    }
                    self.pend.segs.push(Seg::Local(a, self.pend.local.len()));
                } else if !shard.try_run_now(session, spec, args, &mut self.out) {
                    shard.run_spec(session, spec, args, &mut self.out).await;
                }
                // A subscriber's own keyspace events go out before the reply, as in Redis.
                if let Some(s) = self.subs.as_ref().filter(|s| !s.mailbox.is_empty()) {
                    if !self.pend.active {
                        let mut mail = Vec::new();
                        s.mailbox.drain_into(&mut mail);
                        self.out.splice(mark..mark, mail);
                    }
                }
                self.after_session_change(spec);
                if self.session.close_after_reply {
                    return Ok(Step::Close);
                }
            }
            Route::Remote(s) => self.queue_remote(s, args),
            Route::Multi(spec) => {
                self.hops = 0;
                self.resolve().await;
                self.feed_before(spec, args);
                let (start, mark) = (quanta::Instant::now(), self.out.len());
                // Boxed: rare, and its state would otherwise enlarge every idle connection.
                Box::pin(multi::run(shard, self.session, args, &mut self.out)).await;
                self.count(spec, args, Some(start), mark);
            }
            Route::Blocking => {
                self.hops = 0;
                self.resolve().await;
                // The replies before it go out now: this one may take a while.
                self.write_out(stream).await?;
                let mark = self.out.len();
                // Redis shows a blocking command when it first runs, before it waits.
                let spec = commands::lookup(args[0]);
                if let Some(spec) = spec.filter(|s| s.arity_ok(args.len())) {
                    let d = self.shard.db.borrow();
                    if d.monitoring {
                        d.feed_monitors(self.session, spec, args, false);
                    }
                }
                let mut sent_meanwhile = Vec::new();
                let ended = {
                    let gone = read_while_blocked(stream, &mut sent_meanwhile, input_room);
                    tokio::pin!(gone);
                    Box::pin(blocking::run(
                        shard,
                        self.session,
                        self.entry,
                        args,
                        &mut self.out,
                        gone.as_mut(),
                    ))
                    .await
                };
                if ended == blocking::Outcome::Gone {
                    return Err(std::io::Error::other("client gone while blocked"));
                }
                // Counted without a duration: the time it waited is no work (as in Redis,
                // where a blocked command is timed only when it runs).
                if let Some(spec) = spec {
                    self.count_fed(spec, args, None, mark, spec.arity_ok(args.len()));
                }
                if !sent_meanwhile.is_empty() {
                    return Ok(Step::Input(sent_meanwhile));
                }
            }
            Route::Special => {
                self.resolve().await;
                let (start, mark) = (quanta::Instant::now(), self.out.len());
                if let Some(spec) = commands::lookup(args[0]) {
                    self.feed_before(spec, args);
                }
                let (session, entry) = (&mut *self.session, self.entry);
                if Box::pin(admin::run(shard, session, entry, args, &mut self.out)).await {
                    return Ok(Step::Close);
                }
                if let Some(spec) = commands::lookup(args[0]) {
                    self.count(spec, args, Some(start), mark);
                }
            }
            Route::Conn(spec) if spec.name == "wait" => {
                self.resolve().await;
                let mark = self.out.len();
                let Some((numreplicas, ms)) = self.wait_for(args) else {
                    self.count(spec, args, None, mark);
                    return Ok(Step::Go);
                };
                // The replies before it go out now: this one may take a while.
                self.write_out(stream).await?;
                let mut sent_meanwhile = Vec::new();
                let acked = {
                    let gone = read_while_blocked(stream, &mut sent_meanwhile, input_room);
                    tokio::pin!(gone);
                    let want = u64::try_from(numreplicas).unwrap_or(0);
                    tokio::select! {
                        n = crate::repl::wait(shard, want, ms) => Some(n),
                        _ = gone.as_mut() => None,
                    }
                };
                let Some(acked) = acked else {
                    return Err(std::io::Error::other("client gone while in WAIT"));
                };
                let mark = self.out.len();
                kvcore::resp::ReplyWriter::new(&mut self.out, self.session.proto).int(acked as i64);
                self.count(spec, args, None, mark);
                if !sent_meanwhile.is_empty() {
                    return Ok(Step::Input(sent_meanwhile));
                }
            }
            Route::Conn(spec) => {
                self.hops = 0;
                self.resolve().await;
                self.feed_before(spec, args);
                let (start, mark) = (quanta::Instant::now(), self.out.len());
                Box::pin(self.served_here(spec, args)).await;
                self.count(spec, args, Some(start), mark);
                if self.psync.is_some() {
                    return Ok(Step::Close);
                }
            }
        }
        Ok(Step::Go)
    }

    /// WAIT numreplicas timeout: its arguments (the timeout in ms, 0 = none), or `None` when
    /// it was answered at once (an argument error, or WAIT on a replica).
    fn wait_for(&mut self, args: &[&[u8]]) -> Option<(i64, u64)> {
        let numreplicas = match kvcore::num::parse_i64(args[1]) {
            Some(n) => n,
            None => {
                self.out
                    .extend_from_slice(b"-ERR value is not an integer or out of range\r\n");
                return None;
            }
        };
        let ms = match kvcore::num::parse_i64(args[2]) {
            None => {
                self.out
                    .extend_from_slice(b"-ERR timeout is not an integer or out of range\r\n");
                return None;
            }
            Some(t) if t < 0 => {
                self.out.extend_from_slice(b"-ERR timeout is negative\r\n");
                return None;
            }
            Some(t) => t as u64,
        };
        if self.shard.global.repl.is_replica.load(Ordering::Relaxed) {
            self.out.extend_from_slice(b"-ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.\r\n");
            return None;
        }
        Some((numreplicas, ms))
    }

    /// Inside MULTI: queues the command, or answers its error (which makes EXEC abort);
    /// `None` for the commands that run at once (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    fn in_multi(&mut self, args: &[&[u8]]) -> Option<Ran> {
        let spec = commands::lookup(args[0]);
        let exempt = spec.is_some_and(|s| {
            matches!(
                s.name,
                "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
            )
        });
        let valid = spec.is_some_and(|s| {
            s.arity_ok(args.len())
                && (self.session.authenticated || s.has(flags::NO_AUTH))
                && !self.shard.db.borrow().protected_refused(self.session, s)
        });
        if let Some(Err(e)) = spec
            .filter(|_| valid)
            .map(|s| commands::check_subcommand(s, args))
        {
            // A container command with an unknown subcommand or its wrong arity.
            if let Some(m) = self.multi.as_mut() {
                m.aborted = true;
            }
            self.out.extend_from_slice(&e);
            return Some(Ran::Go);
        }
        let subscribed = self.subscribed_resp2();
        let multi = self.multi.as_mut()?;
        if exempt && valid {
            return None;
        }
        if !valid {
            // The store answers the error (unknown command, arity, NOAUTH) and runs nothing.
            let mut err = Vec::new();
            self.shard
                .db
                .borrow_mut()
                .dispatch(self.session, args, &mut err);
            multi.aborted = true;
            self.out.extend_from_slice(&err);
            return Some(Ran::Go);
        }
        if exempt {
            return None;
        }
        if spec.is_some_and(|s| s.has(flags::NO_MULTI)) {
            // SAVE, SHUTDOWN, SYNC, PSYNC: Redis refuses them before the queue (right after
            // the authentication check), which aborts the transaction.
            multi.aborted = true;
            self.out
                .extend_from_slice(b"-ERR Command not allowed inside a transaction\r\n");
            return Some(Ran::Go);
        }
        if self.shard.db.borrow().out_of_memory() {
            // Redis refuses every command queued while over maxmemory with nothing to evict.
            multi.aborted = true;
            self.out.extend_from_slice(OOM);
            return Some(Ran::Go);
        }
        if subscribed {
            let name = spec.map_or("", |s| s.name);
            if !pubsub::allowed_when_subscribed(name) {
                multi.aborted = true;
                self.out
                    .extend_from_slice(&not_in_subscribed_mode(name, args));
                return Some(Ran::Go);
            }
        }
        multi.queue.push(args);
        multi.denyoom |= spec.is_some_and(|s| s.has(flags::DENYOOM));
        multi.writes |= spec.is_some_and(|s| s.has(flags::WRITE));
        multi.session_changes |=
            spec.is_some_and(|s| matches!(s.name, "select" | "hello" | "client" | "auth" | "move"));
        self.entry
            .multi
            .store(multi.queue.len() as i64, Ordering::Relaxed);
        self.out.extend_from_slice(b"+QUEUED\r\n");
        Some(Ran::Go)
    }

    /// Why an EXEC fails the checks every command passes (arity, authentication, subscribed
    /// mode): the error reply it would get.
    fn exec_rejected(&self, args: &[&[u8]]) -> Option<Vec<u8>> {
        if let Some(e) = &self.acl_exec {
            return Some(e.clone());
        }
        let spec = commands::lookup(args[0])?;
        if !spec.arity_ok(args.len()) || !(self.session.authenticated || spec.has(flags::NO_AUTH)) {
            let mut err = Vec::new();
            self.shard
                .db
                .borrow_mut()
                .dispatch(&mut self.session.clone(), args, &mut err);
            return Some(err);
        }
        if self.multi.as_ref().is_some_and(|m| m.denyoom) && self.shard.db.borrow().out_of_memory()
        {
            return Some(OOM.to_vec());
        }
        self.subscribed_resp2()
            .then(|| not_in_subscribed_mode(spec.name, args))
    }

    fn subscribed_resp2(&self) -> bool {
        self.session.proto == Proto::Resp2 && self.subs.as_ref().is_some_and(|s| s.total() > 0)
    }

    /// A RESP2 client in subscribed mode may only (un)subscribe, PING, QUIT and RESET; its PING
    /// answers in the message shape.
    fn in_subscribed_mode(&mut self, args: &[&[u8]], route: &Route) -> Option<Step> {
        let spec = commands::lookup(args[0])?;
        if matches!(route, Route::Local(_, false)) && !spec.arity_ok(args.len()) {
            return None;
        }
        // Redis checks the subcommand before the subscribed mode.
        if let Err(e) = commands::check_subcommand(spec, args) {
            self.out.extend_from_slice(&e);
            return Some(Step::Go);
        }
        if !pubsub::allowed_when_subscribed(spec.name) {
            self.out
                .extend_from_slice(&not_in_subscribed_mode(spec.name, args));
            return Some(Step::Go);
        }
        if spec.name == "ping" && args.len() <= 2 {
            let mut w = kvcore::resp::ReplyWriter::new(&mut self.out, Proto::Resp2);
            w.array_len(2);
            w.bulk(b"pong");
            w.bulk(args.get(1).copied().unwrap_or_default());
            return Some(Step::Go);
        }
        None
    }

    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH and the pub/sub commands.
    async fn served_here(&mut self, spec: &'static CommandSpec, args: &[&[u8]]) {
        let shard = self.shard;
        match spec.name {
            "multi" => {
                if self.multi.is_some() {
                    self.out
                        .extend_from_slice(b"-ERR MULTI calls can not be nested\r\n");
                } else {
                    self.multi = Some(Box::default());
                    self.entry.multi.store(0, Ordering::Relaxed);
                    self.out.extend_from_slice(b"+OK\r\n");
                }
            }
            "discard" => {
                if self.multi.is_none() {
                    self.out
                        .extend_from_slice(b"-ERR DISCARD without MULTI\r\n");
                } else {
                    self.end_multi();
                    self.unwatch().await;
                    self.out.extend_from_slice(b"+OK\r\n");
                }
            }
            "exec" => {
                // ACL rules are checked again for each queued command (they may have changed).
                let refused = self.acl_recheck_queue();
                let mark = self.out.len();
                self.exec().await;
                acl::splice_refusals(&mut self.out, mark, &refused);
            }
            // Like Redis, a client already monitoring gets no reply.
            "monitor" if self.monitor.is_none() => {
                let proto = self.session.proto;
                self.monitor = Some(crate::monitor::start(shard, self.entry, proto).await);
                *lock(&self.entry.last_cmd) = "monitor";
                self.out.extend_from_slice(b"+OK\r\n");
            }
            "monitor" => {}
            "watch" => {
                if self.multi.is_some() {
                    self.out
                        .extend_from_slice(b"-ERR WATCH inside MULTI is not allowed\r\n");
                } else {
                    let w = self.watches.get_or_insert_with(Box::default);
                    tx::watch(shard, self.session.id, self.session.db, &args[1..], w).await;
                    self.entry
                        .watch
                        .store(w.keys.len() as u32, Ordering::Relaxed);
                    self.out.extend_from_slice(b"+OK\r\n");
                }
            }
            "unwatch" => {
                self.unwatch().await;
                self.out.extend_from_slice(b"+OK\r\n");
            }
            "replconf" => self.replconf(args),
            "psync" | "sync" => {
                let g = &shard.global;
                let link_up = lock(&g.repl.state).master.as_ref().is_none_or(|m| m.up);
                if self.link.is_some() {
                    self.out
                        .extend_from_slice(b"-ERR Replica can't interact with the keyspace\r\n");
                } else if !link_up {
                    self.out.extend_from_slice(
                        b"-NOMASTERLINK Can't SYNC while not connected with my master\r\n",
                    );
                } else {
                    self.psync = Some(args.iter().map(|a| a.to_vec()).collect());
                }
            }
            "replicaof" | "slaveof" => {
                crate::repl::replica::replicaof(shard, args, &mut self.out).await;
            }
            "role" => crate::repl::role(shard, &mut self.out),
            _ => {
                pubsub::command(
                    shard,
                    self.session,
                    self.entry,
                    &mut self.subs,
                    args,
                    false,
                    &mut self.out,
                )
                .await;
                if self.subs.as_ref().is_some_and(|s| s.total() == 0) {
                    self.subs = None;
                }
            }
        }
    }

    /// REPLCONF option value ...: what a replica says of itself before PSYNC, and on the
    /// master's link GETACK (acknowledged after the batch). ACK and GETACK get no reply.
    fn replconf(&mut self, args: &[&[u8]]) {
        if args.len() % 2 == 0 {
            self.out.extend_from_slice(b"-ERR syntax error\r\n");
            return;
        }
        let is = |a: &[u8], s: &str| a.eq_ignore_ascii_case(s.as_bytes());
        for kv in args[1..].chunks(2) {
            let (k, v) = (kv[0], kv[1]);
            if is(k, "listening-port") {
                match kvcore::num::parse_i64(v).and_then(|p| u16::try_from(p).ok()) {
                    Some(p) => self.handshake.port = p,
                    None => {
                        self.out
                            .extend_from_slice(b"-ERR value is not an integer or out of range\r\n");
                        return;
                    }
                }
            } else if is(k, "capa") {
                self.handshake.eof |= is(v, "eof");
                self.handshake.psync2 |= is(v, "psync2");
            } else if is(k, "ack") || is(k, "fack") {
                return;
            } else if is(k, "getack") {
                if let Some(l) = self.link.as_deref_mut() {
                    l.ack_due = true;
                }
                return;
            } else if !["ip-address", "rdb-only", "rdb-filter-only"]
                .iter()
                .any(|o| is(k, o))
            {
                self.out
                    .extend_from_slice(b"-ERR Unrecognized REPLCONF option: ");
                self.out
                    .extend_from_slice(&kvcore::commands::sanitize(k.to_vec()));
                self.out.extend_from_slice(b"\r\n");
                return;
            }
        }
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// The master link's wait for more of the stream: acknowledges every second, runs the
    /// batch of what came. `None` when the link is no longer wanted or timed out; `Read(0)`
    /// when the master hung up.
    async fn master_wait(
        &mut self,
        stream: &mut TcpStream,
        input: &mut Input,
    ) -> std::io::Result<Option<Woke>> {
        loop {
            let Some(link) = self.link.as_deref_mut() else {
                return Ok(None);
            };
            if !crate::repl::replica::current(self.shard, link.generation) {
                return Ok(None);
            }
            if link.last_io.elapsed() > link.timeout {
                log!(3, "MASTER timeout: no data nor PING received...");
                return Ok(None);
            }
            if input.end == input.rbuf.len() {
                if input.start > 0 {
                    input.rbuf.copy_within(input.start..input.end, 0);
                    input.end -= input.start;
                    input.start = 0;
                } else {
                    let len = (input.rbuf.len() * 2).max(READ_CHUNK);
                    input.rbuf.resize(len, 0);
                }
            }
            let end = input.end;
            let woke = tokio::select! {
                r = read(stream, &mut input.rbuf[end..], None) => Some(r?),
                _ = &mut link.tick => None,
            };
            if woke.is_none() {
                let next = tokio::time::Instant::now() + Duration::from_secs(1);
                link.tick.reset(next);
            }
            match woke {
                Some(Woke::Read(0)) => return Ok(Some(Woke::Read(0))),
                Some(Woke::Read(n)) => {
                    self.shard.net.read(n);
                    input.end += n;
                    if let Some(l) = self.link.as_deref_mut() {
                        l.last_io = std::time::Instant::now();
                    }
                    if input.end - input.start >= input.wait_for {
                        input.wait_for = 0;
                        self.master_batch(stream, input).await?;
                    }
                    return Ok(Some(Woke::Read(n)));
                }
                _ => self.send_ack(stream).await?,
            }
        }
    }

    /// Runs the master's commands that arrived, as one batch between two snapshot cuts (the
    /// apply gate), and appends their bytes to this server's own stream.
    async fn master_batch(
        &mut self,
        stream: &mut TcpStream,
        input: &mut Input,
    ) -> std::io::Result<()> {
        let global = self.shard.global.clone();
        let gate = global.repl.apply_gate.lock().await;
        let before = input.start;
        if let Some(l) = self.link.as_deref_mut() {
            l.tx_from = None;
        }
        // Runs of plain units holding a transaction that runs on another shard are applied as
        // one (see `apply_run`); everything else is served as a client's commands.
        let mut multi_at = None;
        let done = loop {
            // Scanning costs a second parse: only where a MULTI may come (a hint: the bytes
            // could be inside an argument; the scan is what knows).
            if multi_at.is_none_or(|m| m < input.start) {
                multi_at = find_multi(&input.rbuf[..input.end], input.start);
            }
            if multi_at.is_none() {
                break self.serve_batch(stream, input).await?;
            }
            let scan = self.scan_run(input);
            if scan.remote_tx {
                self.apply_run(input, scan.end, scan.targets).await;
            } else if scan.end > input.start
                && self.serve_upto(stream, input, scan.end).await? == Ran::Close
            {
                break Ran::Close;
            }
            match scan.unit {
                Some(end) => {
                    if self.serve_upto(stream, input, end).await? == Ran::Close {
                        break Ran::Close;
                    }
                }
                // A transaction whose EXEC has not come yet waits for it whole, so that the
                // next batch starts with it rather than inside it.
                None if scan.open_tx => break Ran::Go,
                None => break self.serve_batch(stream, input).await?,
            }
        };
        // The offset moves past whole commands, and past a transaction only with its EXEC (as
        // Redis's replica offset does): a link that breaks inside one continues before its
        // MULTI, and this server's own replicas get it whole.
        let open = self.multi.is_some();
        let db = self.session.db;
        if let Some(l) = self.link.as_deref_mut() {
            let batch = &input.rbuf[before..input.start];
            let ready = match (open, l.tx_from) {
                (true, Some(at)) => {
                    let at = at - before;
                    let mut ready = std::mem::take(&mut l.pending);
                    ready.extend_from_slice(&batch[..at]);
                    l.pending = batch[at..].to_vec();
                    Some(ready)
                }
                (true, None) => {
                    l.pending.extend_from_slice(batch);
                    None
                }
                (false, _) if l.pending.is_empty() => {
                    crate::repl::feed_from_master(&global, batch, db);
                    None
                }
                (false, _) => {
                    let mut ready = std::mem::take(&mut l.pending);
                    ready.extend_from_slice(batch);
                    Some(ready)
                }
            };
            if let Some(ready) = ready {
                crate::repl::feed_from_master(&global, &ready, db);
            }
        }
        drop(gate);
        self.write_out(stream).await?;
        if done == Ran::Close {
            return Err(std::io::Error::other(
                "the master's stream broke the protocol",
            ));
        }
        if input.start == input.end {
            input.start = 0;
            input.end = 0;
        }
        let due = self
            .link
            .as_deref()
            .is_some_and(|l| l.ack_due || l.last_ack.elapsed() >= Duration::from_secs(1));
        if due {
            self.send_ack(stream).await?;
        }
        Ok(())
    }

    /// [`Conn::serve_batch`] of the commands in `input` before `end` only.
    async fn serve_upto(
        &mut self,
        stream: &mut TcpStream,
        input: &mut Input,
        end: usize,
    ) -> std::io::Result<Ran> {
        let full = input.end;
        input.end = end;
        let done = self.serve_batch(stream, input).await;
        // (Only a blocked command adds input at `end`; the master's commands never block.)
        debug_assert_eq!(input.end, end);
        input.end = full;
        done
    }

    /// Where the master's stream at `input.start` stops being plain: the run of whole units
    /// (single commands, and transactions from MULTI to EXEC) whose commands each run in one
    /// shard's store by themselves (see [`Conn::plain_target`]), and what follows it.
    fn scan_run(&mut self, input: &mut Input) -> Scan {
        let mut scan = Scan {
            end: input.start,
            remote_tx: false,
            unit: None,
            open_tx: false,
            targets: Vec::new(),
        };
        // (CLIENT PAUSE holds the master's commands too, as Redis does: served one by one.)
        if self.multi.is_some()
            || self.shard.n == 1
            || self.shard.global.pause_end.load(Ordering::Relaxed) != 0
        {
            return scan;
        }
        let mut db = self.session.db;
        let mut pos = input.start;
        loop {
            // One unit: [pos, at); its targets from `mark` on, taken back if it is not plain.
            let (mut at, mut unit_db, mark) = (pos, db, scan.targets.len());
            let (mut in_tx, mut remote) = (false, false);
            let plain = loop {
                let mut args = Args::new();
                let parsed = match input.rbuf[at..input.end].first() {
                    // (No master sends inline commands.)
                    Some(b'*') => input
                        .parser
                        .parse_into(&input.rbuf[at..input.end], &mut args),
                    Some(_) => break false,
                    None => Ok(Status::Incomplete { hint: 0 }),
                };
                let consumed = match parsed {
                    Ok(Status::Command { consumed }) => consumed,
                    Ok(Status::Incomplete { .. }) => {
                        scan.open_tx = in_tx;
                        break false;
                    }
                    Err(_) => break false,
                };
                at += consumed;
                let name = args.first().copied().unwrap_or_default();
                let target = if args.is_empty() {
                    None
                } else if args.len() == 1 && name.eq_ignore_ascii_case(b"multi") && !in_tx {
                    in_tx = true;
                    Some(Target::Bracket)
                } else if args.len() == 1 && name.eq_ignore_ascii_case(b"exec") && in_tx {
                    scan.targets.push(Target::Bracket);
                    break true;
                } else {
                    match self.plain_target(&args) {
                        Some(t) => Some(t),
                        None => {
                            // A single command is served by itself; a transaction, with all
                            // that follows.
                            scan.unit = (!in_tx).then_some(at);
                            break false;
                        }
                    }
                };
                match target {
                    Some(Target::Select(d)) => unit_db = d,
                    Some(Target::Shard(s)) => remote |= s != self.shard.id,
                    _ => {}
                }
                scan.targets.extend(target);
                if !in_tx {
                    break true;
                }
            };
            if !plain {
                scan.targets.truncate(mark);
                return scan;
            }
            scan.remote_tx |= in_tx && remote;
            (pos, db, scan.end) = (at, unit_db, at);
        }
    }

    /// Where a command of the master's stream runs when it is part of a run (see
    /// [`Conn::scan_run`]); `None` for one that must be served as a client's: one that does
    /// not run in a single shard's store by itself, changes the session (but for SELECT),
    /// fails its arity or subcommand checks, or names keys the command table cannot list.
    fn plain_target(&self, args: &[&[u8]]) -> Option<Target> {
        let spec = commands::lookup(args[0])?;
        if spec.name == "select" {
            let d = args.get(1).and_then(|a| kvcore::num::parse_i64(a))?;
            let dbs = self.shard.db.borrow().config.databases as i64;
            return (args.len() == 2 && (0..dbs).contains(&d))
                .then_some(Target::Select(d as usize));
        }
        if !spec.arity_ok(args.len())
            || commands::check_subcommand(spec, args).is_err()
            || self.changes_session(args)
            || tx::needs_server(spec)
            || tx::locks_everything(spec, args, self.shard.n)
        {
            return None;
        }
        match classify(self.shard, self.session, args) {
            Route::Local(Some(_), _) => Some(Target::Shard(self.shard.id)),
            Route::Remote(s) => Some(Target::Shard(s)),
            _ => None,
        }
    }

    /// Applies the master's commands in `input` up to `end`, a run found by
    /// [`Conn::scan_run`], as one atomic whole ([`tx::run_in_lock_steps`]: the keys of the
    /// whole run locked on each shard it touches, each shard's commands run in stream order
    /// in the step that grants its locks): one round trip per shard for the whole run, where
    /// each transaction on another shard served as a client's takes one or two. This replica's
    /// own clients see all of a run or none of it, so never half of a transaction.
    async fn apply_run(&mut self, input: &mut Input, mut end: usize, targets: Vec<Target>) {
        let shard = self.shard;
        let mut pieces = tx::Pieces::new();
        let mut session = self.session.clone();
        let mut pos = input.start;
        let mut targets = targets.into_iter();
        while pos < end {
            // The scan parsed these bytes (nothing was awaited since) and says where each
            // command goes. (Were they to disagree, a bug, the rest from that command on would
            // be left to the client path rather than bring the server down.)
            let mut args = Args::new();
            let Ok(Status::Command { consumed }) =
                input.parser.parse_into(&input.rbuf[pos..end], &mut args)
            else {
                debug_assert!(false, "a scanned run parses again");
                end = pos;
                break;
            };
            pos += consumed;
            let Some(spec) = args.first().and_then(|a| commands::lookup(a)) else {
                continue;
            };
            match targets.next() {
                Some(Target::Shard(s)) => {
                    let (batch, keys) = pieces.entry(s).or_default();
                    batch.push(&args, &session);
                    keys.extend(
                        spec.key_positions(&args)
                            .into_iter()
                            .map(|i| (session.db, args[i].to_vec())),
                    );
                }
                Some(Target::Select(d)) => {
                    session.db = d;
                    self.count(spec, &args, None, self.out.len());
                }
                Some(Target::Bracket) => self.count(spec, &args, None, self.out.len()),
                None => {
                    debug_assert!(false, "a target for each command of a scanned run");
                    end = pos - consumed;
                    break;
                }
            }
        }
        for (_, keys) in pieces.values_mut() {
            keys.sort_unstable();
            keys.dedup();
        }
        for (_, reply) in tx::run_in_lock_steps(shard, self.session, pieces).await {
            self.out.extend_from_slice(&reply.out);
        }
        if session.db != self.session.db {
            self.session.db = session.db;
            self.mirror_session();
        }
        input.start = end;
    }

    /// REPLCONF ACK <offset> to the master.
    async fn send_ack(&mut self, stream: &mut TcpStream) -> std::io::Result<()> {
        let offset = lock(&self.shard.global.repl.state).offset.to_string();
        let mut msg = Vec::new();
        kvcore::changes::encode(&mut msg, &[b"REPLCONF", b"ACK", offset.as_bytes()]);
        if let Some(l) = self.link.as_deref_mut() {
            l.ack_due = false;
            l.last_ack = std::time::Instant::now();
        }
        stream.write_all(&msg).await
    }

    fn end_multi(&mut self) {
        self.multi = None;
        self.entry.multi.store(-1, Ordering::Relaxed);
    }

    async fn unwatch(&mut self) {
        if let Some(mut w) = self.watches.take() {
            tx::unwatch_all(self.shard, self.session.id, &mut w).await;
        }
        self.entry.watch.store(0, Ordering::Relaxed);
    }

    /// EXEC: runs the queued commands as one, or answers why not.
    async fn exec(&mut self) {
        let Some(multi) = self.multi.take() else {
            self.out.extend_from_slice(b"-ERR EXEC without MULTI\r\n");
            return;
        };
        self.end_multi();
        if multi.aborted {
            self.unwatch().await;
            self.out.extend_from_slice(
                b"-EXECABORT Transaction discarded because of previous errors.\r\n",
            );
            return;
        }
        let shard = self.shard;
        let no_watch = Watches::default();
        let watched = self.watches.as_deref().unwrap_or(&no_watch);
        let plan = tx::plan(self.session, shard.n, &multi.queue, watched);
        let mut queue = multi.queue;
        if let Some(s) = plan.one_shard {
            let s = s.unwrap_or(shard.id);
            match tx::run_one_shard(shard, s, self.session, queue, watched).await {
                Ok(step) => {
                    self.out.extend_from_slice(&step.reply);
                    *self.session = step.session;
                    self.unwatch().await;
                    if multi.session_changes {
                        self.mirror_session();
                    }
                    return;
                }
                // A command spanning shards holds one of its keys there: lock them instead.
                Err(back) => queue = back,
            }
        }
        let locks = plan.locks;
        // Where each command runs, when every one runs in one shard's store.
        let targets: Option<Vec<usize>> = match self.watches {
            None => queue.iter().map(|args| self.tx_shard(&args)).collect(),
            Some(_) => None,
        };
        if let Some(targets) = targets {
            self.exec_in_lock_steps(&queue, locks, targets).await;
            self.unwatch().await;
            if multi.session_changes {
                self.mirror_session();
            }
            return;
        }
        tx::lock(shard, &locks).await;
        if tx::watches_broken(shard, self.session.id, watched).await {
            tx::null_array(&mut self.out, self.session.proto);
        } else {
            tx::array_len(&mut self.out, queue.len());
            // When changes are logged (AOF, replicas) and every command runs in one shard's
            // store, each shard hands back what its commands logged, and the whole is logged
            // here once between MULTI and EXEC, under the locks: a replica or a reload applies
            // all of it or none. (Otherwise each shard logs its own part.)
            let mut block = (shard.db.borrow().logs_changes()
                && queue.iter().all(|args| self.tx_shard(&args).is_some()))
            .then(Vec::new);
            // Runs of commands that each live on one shard go out as one batch per shard, in
            // parallel (under the locks they touch disjoint keys); the others run one by one.
            let mut run: Vec<(usize, SmallVec<[&[u8]; 8]>)> = Vec::new();
            for args in queue.iter() {
                match self.tx_shard(&args) {
                    Some(s) => run.push((s, args)),
                    None => {
                        self.run_batches(std::mem::take(&mut run), &mut block).await;
                        Box::pin(self.run_held(&args)).await;
                    }
                }
            }
            self.run_batches(run, &mut block).await;
            if let Some(parts) = block.filter(|b| !b.is_empty()) {
                let mut whole = b"*1\r\n$5\r\nMULTI\r\n".to_vec();
                whole.extend_from_slice(&parts);
                whole.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
                shard.db.borrow_mut().log_raw(&whole);
                shard.flush_changes();
            }
        }
        tx::unlock(shard, locks).await;
        self.unwatch().await;
        if multi.session_changes {
            self.mirror_session();
        }
    }

    /// EXEC of a transaction that watches no key and whose commands each run in one shard's
    /// store (`order`: the shard of each): each shard's commands run in the step that grants
    /// its locks (one round trip per shard, see [`tx::run_in_lock_steps`]), where locking every
    /// shard and then running the pieces takes two; the replies in the commands' order.
    async fn exec_in_lock_steps(
        &mut self,
        queue: &tx::Queue,
        locks: std::collections::BTreeMap<usize, Vec<LockKey>>,
        order: Vec<usize>,
    ) {
        let mut pieces: tx::Pieces = locks
            .into_iter()
            .map(|(s, keys)| (s, (RemoteBatch::default(), keys)))
            .collect();
        for (args, &s) in queue.iter().zip(&order) {
            pieces.entry(s).or_default().0.push(&args, self.session);
        }
        let replies = tx::run_in_lock_steps(self.shard, self.session, pieces).await;
        tx::array_len(&mut self.out, order.len());
        let mut next = vec![0; self.shard.n];
        for s in order {
            if let Some(r) = replies.get(&s) {
                self.out.extend_from_slice(r.get(next[s]));
            }
            next[s] += 1;
        }
    }

    /// Whether a command changes the connection's session (so the commands after it must see
    /// that).
    fn changes_session(&self, args: &[&[u8]]) -> bool {
        let is = |n: &[u8]| args[0].eq_ignore_ascii_case(n);
        is(b"select") || is(b"hello") || is(b"client") || is(b"auth") || is(b"reset")
    }

    /// Runs single-shard commands of a transaction whose locks are held: one job per shard,
    /// all shards at once, replies stitched back in order.
    /// The shard a queued command runs on by itself (in its store), or `None` for one that
    /// runs through the server ([`Conn::run_held`]; a subscriber's PING, which answers in
    /// another shape, and commands that change the session among them).
    fn tx_shard(&self, args: &[&[u8]]) -> Option<usize> {
        if self.changes_session(args) || self.subs.is_some() {
            return None;
        }
        match classify(self.shard, self.session, args) {
            Route::Local(..) => Some(self.shard.id),
            Route::Remote(s) => Some(s),
            _ => None,
        }
    }

    /// Runs a transaction's commands, each on its shard, one batch per shard in parallel;
    /// with `block`, each shard's changes are taken out of its log and added to it, in order.
    async fn run_batches(
        &mut self,
        run: Vec<(usize, SmallVec<[&[u8]; 8]>)>,
        block: &mut Option<Vec<u8>>,
    ) {
        if run.is_empty() {
            return;
        }
        let gather = block.is_some();
        let shard = self.shard;
        let mut by_shard: std::collections::BTreeMap<usize, Vec<Vec<Vec<u8>>>> = Default::default();
        for (s, args) in &run {
            by_shard
                .entry(*s)
                .or_default()
                .push(args.iter().map(|a| a.to_vec()).collect());
        }
        let session = self.session.clone();
        let replies = futures_util::future::join_all(by_shard.into_iter().map(|(s, cmds)| {
            let mut sess = session.clone();
            async move {
                let (r, part) = shard
                    .call(s, move |sh: &Shard| {
                        let mark = {
                            let mut db = sh.db.borrow_mut();
                            db.refresh_clock();
                            if gather {
                                db.log_mark()
                            } else {
                                None
                            }
                        };
                        let replies = cmds
                            .iter()
                            .map(|args| {
                                let refs: SmallVec<[&[u8]; 8]> =
                                    args.iter().map(Vec::as_slice).collect();
                                let mut out = Vec::new();
                                sh.execute(&mut sess, commands::lookup(refs[0]), &refs, &mut out);
                                out
                            })
                            .collect::<Vec<Vec<u8>>>();
                        let part = mark.map(|m| sh.db.borrow_mut().changes_since(m));
                        (replies, part.unwrap_or_default())
                    })
                    .await;
                (s, r.into_iter(), part)
            }
        }))
        .await;
        let replies: Vec<_> = replies
            .into_iter()
            .map(|(s, r, part)| {
                if let Some(b) = block.as_mut() {
                    b.extend_from_slice(&part);
                }
                (s, r)
            })
            .collect();
        let mut replies: std::collections::BTreeMap<usize, std::vec::IntoIter<Vec<u8>>> =
            replies.into_iter().collect();
        for (s, _) in &run {
            if let Some(r) = replies.get_mut(s).and_then(Iterator::next) {
                self.out.extend_from_slice(&r);
            }
        }
    }

    /// Runs one command of a transaction whose locks are held: no lock is taken or waited
    /// for, and nothing blocks.
    async fn run_held(&mut self, args: &[&[u8]]) {
        let shard = self.shard;
        if self.subscribed_resp2() && args[0].eq_ignore_ascii_case(b"ping") && args.len() <= 2 {
            // PING answers in the message shape once a SUBSCRIBE of this EXEC ran.
            let mut w = kvcore::resp::ReplyWriter::new(&mut self.out, Proto::Resp2);
            w.array_len(2);
            w.bulk(b"pong");
            w.bulk(args.get(1).copied().unwrap_or_default());
            return;
        }
        let out = &mut self.out;
        match classify(shard, self.session, args) {
            Route::Local(spec, _) => shard.execute(self.session, spec, args, out),
            Route::Remote(s) => {
                let reply = remote_execute(shard, s, self.session, args).await;
                out.extend_from_slice(&reply);
            }
            Route::Multi(spec) => {
                multi::run_locked(shard, true, self.session, args, out).await;
                blocking::wake_after_multi(shard, spec, args).await;
            }
            Route::Special => {
                let _ = admin::LOCKS_HELD
                    .scope(true, admin::run(shard, self.session, self.entry, args, out))
                    .await;
            }
            Route::Blocking => {
                let reply = blocking::run_held(shard, self.session, args).await;
                out.extend_from_slice(&reply);
            }
            Route::Conn(spec) => match spec.name {
                "unwatch" => out.extend_from_slice(b"+OK\r\n"),
                "wait" => {
                    // Inside EXEC nothing blocks: the acknowledgements so far.
                    if self.wait_for(args).is_some() {
                        let n = crate::repl::acked_now(shard);
                        kvcore::resp::ReplyWriter::new(&mut self.out, self.session.proto)
                            .int(n as i64);
                    }
                }
                "role" => crate::repl::role(shard, out),
                "replconf" | "psync" | "sync" | "replicaof" | "slaveof" => {
                    out.extend_from_slice(b"-ERR Command not allowed inside a transaction\r\n");
                }
                "monitor" => {
                    out.extend_from_slice(
                        b"-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n",
                    );
                }
                _ => {
                    pubsub::command(
                        shard,
                        self.session,
                        self.entry,
                        &mut self.subs,
                        args,
                        true,
                        out,
                    )
                    .await;
                }
            },
        }
    }

    /// Mirrors session changes that CLIENT LIST shows into the registry (rare commands only).
    fn after_session_change(&self, spec: Option<&commands::CommandSpec>) {
        if spec.is_some_and(|s| changes_session(s.name)) {
            self.mirror_session();
        }
    }

    fn mirror_session(&self) {
        let (session, entry) = (&*self.session, self.entry);
        entry.db.store(session.db, Ordering::Relaxed);
        entry.resp.store(
            if session.proto == Proto::Resp3 { 3 } else { 2 },
            Ordering::Relaxed,
        );
        *lock(&entry.name) = session.name.clone();
        if *lock(&entry.user) != session.user.name() {
            *lock(&entry.user) = session.user.name().to_vec();
        }
        *lock(&entry.lib) = (session.lib_name.clone(), session.lib_ver.clone());
        let modes = if session.no_evict {
            global::NO_EVICT
        } else {
            0
        } | if session.no_touch {
            global::NO_TOUCH
        } else {
            0
        };
        entry.modes.store(modes, Ordering::Relaxed);
        if let Some(s) = &self.subs {
            s.set_proto(session.proto);
        }
    }

    async fn write_out(&mut self, stream: &mut TcpStream) -> std::io::Result<()> {
        if !self.shard.persist_now() {
            self.shard.persist_wait().await;
        }
        if self.link.is_some() {
            // The master's link: replies are not sent (REPLCONF ACK goes by itself), but an
            // error means this replica may now differ from its master: say so, as Redis does.
            if memchr::memchr(b'-', &self.out).is_some() {
                log_master_errors(&self.out);
            }
            self.out.clear();
            return Ok(());
        }
        let global = &self.shard.global;
        let limit = if self.subs.is_some() {
            global.opts.pubsub_limit
        } else {
            global.opts.output_limit
        };
        if !self.out.is_empty() {
            self.shard.net.wrote(self.out.len());
        }
        let r = write_out(stream, &mut self.out, limit).await;
        if r.as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::Other)
        {
            global
                .output_limit_disconnections
                .fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    /// Drops what ties the client to the server: its transaction, watches, subscriptions.
    async fn leave(&mut self) {
        self.end_multi();
        if self.shard.global.shutdown.load(Ordering::Relaxed) {
            // The shards are stopping: nothing to tell them, and some may be gone already.
            return;
        }
        self.unwatch().await;
        pubsub::leave(self.shard, &mut self.subs, self.entry).await;
        if self.monitor.take().is_some() {
            crate::monitor::stop(self.shard, self.entry).await;
        }
    }
}

/// Logs the errors among the replies to this replica's master (at most one line a second,
/// with how many more there were).
fn log_master_errors(out: &[u8]) {
    static LAST: std::sync::Mutex<(Option<std::time::Instant>, u64)> =
        std::sync::Mutex::new((None, 0));
    let mut pos = 0;
    while let Ok(Some((used, error))) = kvcore::resp::reply::skip_reply(&out[pos..]) {
        let reply = &out[pos..pos + used];
        pos += used;
        if !error {
            continue;
        }
        let e = reply
            .strip_prefix(b"-")
            .unwrap_or(reply)
            .strip_suffix(b"\r\n")
            .unwrap_or(reply);
        let mut last = lock(&LAST);
        if last.0.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            last.1 += 1;
            continue;
        }
        let more = std::mem::take(&mut last.1);
        last.0 = Some(std::time::Instant::now());
        log!(
            3,
            "== CRITICAL == This replica is sending an error to its master: '{}' ({more} more since the last such line)",
            String::from_utf8_lossy(e)
        );
    }
}

/// Runs one command on shard `s` for a transaction holding its keys' locks.
async fn remote_execute(shard: &Shard, s: usize, session: &Session, args: &[&[u8]]) -> Vec<u8> {
    let mut sess = session.clone();
    let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    shard
        .call(s, move |sh: &Shard| {
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            let spec = commands::lookup(refs[0]);
            let mut out = Vec::new();
            sh.db.borrow_mut().refresh_clock();
            sh.execute(&mut sess, spec, &refs, &mut out);
            out
        })
        .await
}

/// Redis's reply to a command refused for memory.
const OOM: &[u8] = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";

/// Redis's error for a command a RESP2 subscriber may not run.
fn not_in_subscribed_mode(name: &str, args: &[&[u8]]) -> Vec<u8> {
    let mut full = name.to_string();
    let containers = [
        "client", "config", "object", "memory", "command", "pubsub", "latency", "slowlog", "acl",
        "script", "xgroup", "xinfo",
    ];
    if containers.contains(&name) {
        if let Some(sub) = args.get(1) {
            full.push('|');
            full.push_str(&String::from_utf8_lossy(sub).to_ascii_lowercase());
        }
    }
    format!("-ERR Can't execute '{full}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n").into_bytes()
}

async fn write_out(
    stream: &mut TcpStream,
    out: &mut Vec<u8>,
    limit: crate::options::OutputLimit,
) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    if limit.hard > 0 && out.len() as u64 > limit.hard {
        return Err(std::io::Error::other(
            "closing client that reached the output buffer hard limit",
        ));
    }
    // Most replies fit in the socket's send buffer: one `send` and no write future.
    use std::io::ErrorKind as IoKind;
    let sent = match stream.try_write(out) {
        Ok(n) => n,
        Err(e) if matches!(e.kind(), IoKind::WouldBlock | IoKind::Interrupted) => 0,
        Err(e) => return Err(e),
    };
    let rest = &out[sent..];
    if rest.is_empty() {
        out.clear();
        return Ok(());
    }
    // The soft limit is measured on the whole batch's replies, not on what the first send
    // left: Redis checks its buffer as replies are added, before any of them is written, and
    // a client that stops reading must not escape the limit because its socket took a part.
    if limit.soft > 0 && out.len() as u64 > limit.soft {
        let secs = Duration::from_secs(limit.soft_secs.max(1));
        // Boxed: the timer is large and this path rare.
        Box::pin(crate::timer::timeout(secs, stream.write_all(rest)))
            .await
            .map_err(|_| {
                std::io::Error::other(
                    "closing client over the output buffer soft limit for too long",
                )
            })??;
    } else {
        stream.write_all(rest).await?;
    }
    out.clear();
    Ok(())
}

/// Waits until the socket is readable or, for a subscriber, until its mailbox has mail.
async fn ready(stream: &TcpStream, mailbox: &Option<Rc<pubsub::Mailbox>>) -> std::io::Result<bool> {
    match mailbox {
        None => stream.readable().await.map(|()| true),
        Some(m) => {
            if !m.is_empty() || m.is_cut() {
                return Ok(false);
            }
            tokio::select! {
                r = stream.readable() => r.map(|()| true),
                _ = m.wake.notified() => Ok(false),
            }
        }
    }
}

/// Reads what the socket holds into `buf`, waiting for readiness when it holds nothing.
async fn read(
    stream: &TcpStream,
    buf: &mut [u8],
    mailbox: Option<Rc<pubsub::Mailbox>>,
) -> std::io::Result<Woke> {
    loop {
        if !ready(stream, &mailbox).await? {
            return Ok(Woke::Mail);
        }
        if let Some(n) = try_read(stream, buf)? {
            return Ok(Woke::Read(n));
        }
    }
}

/// Like [`read`] for a client holding no buffer: one is taken from the shard's pool only once
/// there is something to read into it, and goes back if the readiness was stale.
async fn read_idle(
    shard: &Shard,
    stream: &TcpStream,
    rbuf: &mut Vec<u8>,
    mailbox: Option<Rc<pubsub::Mailbox>>,
) -> std::io::Result<Woke> {
    loop {
        // (Most clients have no mailbox: their wait is the socket's alone, one future less.)
        if mailbox.is_none() {
            // `poll_read_ready` waits in the socket's one reader slot: no waiter list node to
            // link and unlink, as `readable()` has.
            std::future::poll_fn(|cx| stream.poll_read_ready(cx)).await?;
        } else if !ready(stream, &mailbox).await? {
            return Ok(Woke::Mail);
        }
        *rbuf = shard.bufs.borrow_mut().take_read();
        match try_read(stream, rbuf) {
            Ok(Some(n)) => return Ok(Woke::Read(n)),
            Ok(None) => shard.bufs.borrow_mut().put_read(std::mem::take(rbuf)),
            Err(e) => return Err(e),
        }
    }
}

/// One `recv` into `buf`: `Some(n)` bytes (0 at end of stream), `None` if there was nothing.
///
/// One `recv` per batch, as Redis does: a read that leaves room in `buf` drained the socket's
/// queue, so the readiness it consumed is cleared then and there rather than found out by a
/// second `recv` failing with EAGAIN. (Readiness that arrives meanwhile is not lost: tokio
/// clears only the readiness it observed before the call.)
fn try_read(stream: &TcpStream, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
    let sock = socket2::SockRef::from(stream);
    let mut got = 0usize;
    let r = stream.try_io(Interest::READABLE, || {
        // The socket is non-blocking: an empty queue is `WouldBlock`.
        got = (&*sock).read(buf)?;
        if got > 0 && got < buf.len() {
            // Drained: report "would block" so the readiness is cleared; `got` holds the data.
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(())
    });
    match r {
        Ok(()) => Ok(Some(got)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok((got > 0).then_some(got)),
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(None),
        Err(e) => Err(e),
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

/// Whether the command `name`'s third argument is a field or member of the collection its
/// second names (the commands worth a member prefetch, see `Conn::prefetch_keys`).
fn names_member(name: &[u8]) -> bool {
    const NAMES: [&[u8]; 14] = [
        b"hset",
        b"hsetnx",
        b"hget",
        b"hmget",
        b"hmset",
        b"hdel",
        b"hexists",
        b"hstrlen",
        b"hincrby",
        b"hincrbyfloat",
        b"sadd",
        b"srem",
        b"sismember",
        b"smismember",
    ];
    // The lengths of the names first: most commands (SET, GET, INCR ...) end here.
    matches!(name.len(), 4..=7 | 9 | 10 | 12)
        && matches!(name.first(), Some(b'h' | b'H' | b's' | b'S'))
        && NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::names_member;

    #[test]
    fn member_commands_by_name_any_case() {
        for n in [
            &b"HSET"[..],
            b"hget",
            b"HIncrByFloat",
            b"sadd",
            b"SMISMEMBER",
        ] {
            assert!(names_member(n), "{}", String::from_utf8_lossy(n));
        }
        for n in [
            &b"SET"[..],
            b"GET",
            b"HGETALL",
            b"SPOP",
            b"LPUSH",
            b"",
            b"hsetx",
        ] {
            assert!(!names_member(n), "{}", String::from_utf8_lossy(n));
        }
    }
}
