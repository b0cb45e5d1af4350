//! One client connection: read, parse in place, route, execute, one write per batch.
//!
//! Each read is parsed into as many commands as it holds. A command whose keys live on this
//! shard runs inline against the local store, replying straight into the output buffer. A
//! command whose keys all live on one other shard is appended to that shard's batch; the
//! batches go out as one message per shard when the read is done (or before a command that
//! must see their effects), and the replies are stitched back in the client's order. Commands
//! spanning shards (`multi`) and whole-keyspace commands (`special`) run after the batches
//! ahead of them have resolved. The clock is read once per read batch.

use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kvcore::commands::{self, flags, sort_api, CommandSpec};
use kvcore::resp::parse::{Args, Limits, Parser, Status};
use kvcore::resp::Proto;
use kvcore::Session;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use crate::global::{lock, ClientEntry};
use crate::shard::{BatchReply, BufPool, Handoff, RemoteBatch, Shard};
use crate::{blocking, log, multi, route, special};

const READ_CHUNK: usize = BufPool::CHUNK;
/// Replies are written out once this many bytes are waiting, even mid-batch.
const FLUSH_AT: usize = 256 * 1024;
/// Commands queued for other shards are sent off once this many wait, so that the replies a
/// batch can bring back stay bounded (their sizes are unknown until they run).
const REMOTE_AT: usize = 128;

/// A client whose last this-many keyed commands all went to one other shard moves there.
const MOVE_AFTER: u32 = 64;

/// Where a command runs.
enum Route {
    /// Here; `true` when the command has keys (all of them here).
    Local(Option<&'static CommandSpec>, bool),
    Remote(usize),
    /// Keys on several shards.
    Multi(&'static CommandSpec),
    Special,
    /// BZPOPMIN and the like: may wait for its keys (see [`crate::blocking`]).
    Blocking,
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

/// Whether to go on serving after a batch.
#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

/// How a connection's stay on this shard ended.
enum End {
    /// The client quit, or broke the protocol and got its error.
    Closed,
    /// Its keys live on shard `.0`: serve it from there.
    Move(usize),
}

fn classify(shard: &Shard, session: &Session, args: &[&[u8]]) -> Route {
    let Some(spec) = commands::lookup(args[0]) else {
        return if session.authenticated && args[0].eq_ignore_ascii_case(b"SHUTDOWN") {
            Route::Special
        } else {
            Route::Local(None, false)
        };
    };
    if !spec.arity_ok(args.len()) || (!session.authenticated && !spec.has(flags::NO_AUTH)) {
        return Route::Local(Some(spec), false);
    }
    if special::is_special(spec, args, shard.n) {
        return Route::Special;
    }
    if spec.has(flags::BLOCKING) {
        return Route::Blocking;
    }
    if shard.n == 1 {
        return Route::Local(Some(spec), true);
    }
    // BY and GET patterns name keys that only the sorted elements tell.
    if matches!(spec.name, "sort" | "sort_ro") && sort_api::has_patterns(args) {
        return Route::Multi(spec);
    }
    let keys = spec.key_positions(args);
    let Some(&first) = keys.first() else {
        return Route::Local(Some(spec), false);
    };
    let s = route::shard_of(args[first], shard.n);
    if keys[1..]
        .iter()
        .all(|&i| route::shard_of(args[i], shard.n) == s)
    {
        if s == shard.id {
            Route::Local(Some(spec), true)
        } else {
            Route::Remote(s)
        }
    } else {
        Route::Multi(spec)
    }
}

async fn resolve(shard: &Shard, pend: &mut Pending, out: &mut Vec<u8>) {
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
    let entry = Arc::new(ClientEntry {
        id,
        addr: peer,
        laddr,
        fd: stream.as_raw_fd(),
        created: Instant::now(),
        name: Mutex::new(None),
        db: Default::default(),
        resp: 2.into(),
        last_cmd: Mutex::new("NULL"),
    });
    global.register(entry.clone());
    let _ = stream.set_nodelay(true);
    let authenticated = shard.db.borrow().config.requirepass.is_empty();
    let session = Session {
        id,
        authenticated,
        ..Session::default()
    };
    serve_conn(shard, stream, session, entry).await;
}

/// Serves a client on this shard until it quits, errs, is killed or moves to the shard that
/// holds its keys.
///
/// SO_REUSEPORT puts a connection on a shard by a hash of its address, not by its keys. A
/// client whose keys all live on one other shard would pay a cross-shard hop on every
/// command; after [`MOVE_AFTER`] such commands in a row it moves there, between two batches
/// (nothing read and unanswered, nothing pending). Its socket leaves this shard's event loop
/// and joins the other's; bytes the client sent meanwhile wait in the socket.
pub async fn serve_conn(
    shard: Rc<Shard>,
    mut stream: TcpStream,
    mut session: Session,
    entry: Arc<ClientEntry>,
) {
    let end = run(&shard, &mut stream, &mut session, &entry).await;
    match end {
        Ok(End::Closed) => {}
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

async fn write_out(
    stream: &mut TcpStream,
    out: &mut Vec<u8>,
    shard: &Shard,
) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let limit = shard.global.opts.output_limit;
    if limit.hard > 0 && out.len() as u64 > limit.hard {
        return Err(std::io::Error::other(
            "closing client that reached the output buffer hard limit",
        ));
    }
    if limit.soft > 0 && out.len() as u64 > limit.soft {
        let secs = Duration::from_secs(limit.soft_secs.max(1));
        // Boxed: the timer is large and this path rare.
        Box::pin(tokio::time::timeout(secs, stream.write_all(out)))
            .await
            .map_err(|_| {
                std::io::Error::other(
                    "closing client over the output buffer soft limit for too long",
                )
            })??;
    } else {
        stream.write_all(out).await?;
    }
    out.clear();
    Ok(())
}

async fn run(
    shard: &Rc<Shard>,
    stream: &mut TcpStream,
    session: &mut Session,
    entry: &ClientEntry,
) -> std::io::Result<End> {
    let query_limit = shard
        .db
        .borrow()
        .config
        .get("client-query-buffer-limit")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1 << 30);
    let mut parser = Parser::new(Limits {
        max_bulk_len: shard.db.borrow().config.proto_max_bulk_len as usize,
        ..Limits::default()
    });
    let mut rbuf: Vec<u8> = Vec::new();
    let (mut start, mut end, mut wait_for) = (0usize, 0usize, 0usize);
    let mut out: Vec<u8> = Vec::new();
    let mut pend = Pending {
        batches: (0..shard.n).map(|_| RemoteBatch::default()).collect(),
        segs: Vec::new(),
        local: Vec::new(),
        active: false,
    };
    // The other shard that this client's last keyed commands all went to, and how many.
    let (mut hop_to, mut hops) = (0usize, 0u32);
    loop {
        let n = if end == 0 {
            // Nothing partial is held: give the buffers back while the client is quiet, so
            // an idle connection costs no buffer memory.
            if !rbuf.is_empty() {
                let mut pool = shard.bufs.borrow_mut();
                pool.put_read(std::mem::take(&mut rbuf));
                pool.put_out(std::mem::take(&mut out));
            }
            if hops >= MOVE_AFTER {
                return Ok(End::Move(hop_to));
            }
            let n = read_idle(shard, stream, &mut rbuf).await?;
            out = shard.bufs.borrow_mut().take_out();
            n
        } else {
            if end == rbuf.len() {
                if start > 0 {
                    rbuf.copy_within(start..end, 0);
                    end -= start;
                    start = 0;
                } else if rbuf.len() >= query_limit {
                    return Err(std::io::Error::other(
                        "closing client that reached the max query buffer length",
                    ));
                } else {
                    // One command is larger than the buffer: grow by what was received, never by
                    // a length the client only declared.
                    let new_len = (rbuf.len() * 2).min(query_limit.max(READ_CHUNK));
                    rbuf.resize(new_len, 0);
                }
            }
            read(stream, &mut rbuf[end..]).await?
        };
        if n == 0 {
            return Ok(End::Closed);
        }
        end += n;
        if end - start < wait_for {
            continue;
        }
        wait_for = 0;
        shard.db.borrow_mut().refresh_clock();
        let mut pos = start;
        let mut flow = Flow::Continue;
        loop {
            let mut args = Args::new();
            let consumed = match parser.parse_into(&rbuf[pos..end], &mut args) {
                Ok(Status::Command { consumed }) => consumed,
                Ok(Status::Incomplete { hint }) => {
                    wait_for = hint;
                    break;
                }
                Err(e) => {
                    if pend.active {
                        Box::pin(resolve(shard, &mut pend, &mut out)).await;
                    }
                    out.extend_from_slice(b"-ERR ");
                    out.extend_from_slice(e.to_string().as_bytes());
                    out.extend_from_slice(b"\r\n");
                    write_out(stream, &mut out, shard).await?;
                    log!(1, "protocol error from client {}: {e}", entry.id);
                    return Ok(End::Closed);
                }
            };
            pos += consumed;
            if args.is_empty() {
                continue;
            }
            match classify(shard, session, &args) {
                Route::Local(spec, keyed) => {
                    if keyed {
                        hops = 0;
                    }
                    if pend.active {
                        let a = pend.local.len();
                        if !shard.try_run_now(session, spec, &args, &mut pend.local) {
                            shard.run_spec(session, spec, &args, &mut pend.local).await;
                        }
                        pend.segs.push(Seg::Local(a, pend.local.len()));
                    } else if !shard.try_run_now(session, spec, &args, &mut out) {
                        shard.run_spec(session, spec, &args, &mut out).await;
                    }
                    after_session_change(session, &args, entry);
                    if session.close_after_reply {
                        flow = Flow::Close;
                        break;
                    }
                }
                Route::Remote(s) => {
                    (hop_to, hops) = (s, if s == hop_to { hops + 1 } else { 1 });
                    pend.active = true;
                    pend.batches[s].push(&args, session.db, session.proto);
                    pend.segs.push(Seg::Remote(s, pend.batches[s].len() - 1));
                }
                Route::Multi(spec) => {
                    hops = 0;
                    if pend.active {
                        Box::pin(resolve(shard, &mut pend, &mut out)).await;
                    }
                    // Boxed: rare, and its state would otherwise enlarge every idle connection.
                    Box::pin(multi::run(shard, session, &args, &mut out)).await;
                    Box::pin(blocking::wake_after_multi(shard, spec, &args)).await;
                }
                Route::Blocking => {
                    hops = 0;
                    if pend.active {
                        Box::pin(resolve(shard, &mut pend, &mut out)).await;
                    }
                    // The replies before it go out now: this one may take a while.
                    write_out(stream, &mut out, shard).await?;
                    let mut sent_meanwhile = Vec::new();
                    let limit = query_limit.saturating_sub(end - pos);
                    let ended = Box::pin(blocking::run(
                        shard,
                        session,
                        stream,
                        &args,
                        &mut out,
                        &mut sent_meanwhile,
                        limit,
                    ));
                    if ended.await == blocking::Outcome::Gone {
                        return Ok(End::Closed);
                    }
                    drop(args);
                    // What the client sent while it waited follows what was already read.
                    if !sent_meanwhile.is_empty() {
                        let grown = end + sent_meanwhile.len();
                        if grown > rbuf.len() {
                            rbuf.resize(grown, 0);
                        }
                        rbuf[end..grown].copy_from_slice(&sent_meanwhile);
                        end = grown;
                    }
                }
                Route::Special => {
                    if pend.active {
                        Box::pin(resolve(shard, &mut pend, &mut out)).await;
                    }
                    if Box::pin(special::run(shard, session, entry, &args, &mut out)).await {
                        flow = Flow::Close;
                        break;
                    }
                }
            }
            if out.len() + pend.local.len() >= FLUSH_AT || pend.segs.len() >= REMOTE_AT {
                if pend.active {
                    Box::pin(resolve(shard, &mut pend, &mut out)).await;
                }
                write_out(stream, &mut out, shard).await?;
            }
        }
        if pend.active {
            Box::pin(resolve(shard, &mut pend, &mut out)).await;
        }
        write_out(stream, &mut out, shard).await?;
        if flow == Flow::Close {
            return Ok(End::Closed);
        }
        start = if pos == end {
            end = 0;
            0
        } else {
            pos
        };
    }
}

/// Reads what the socket holds into `buf`, waiting for readiness when it holds nothing.
async fn read(stream: &TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        stream.readable().await?;
        if let Some(n) = try_read(stream, buf)? {
            return Ok(n);
        }
    }
}

/// Like [`read`] for a client holding no buffer: one is taken from the shard's pool only once
/// there is something to read into it, and goes back if the readiness was stale.
async fn read_idle(
    shard: &Shard,
    stream: &TcpStream,
    rbuf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    loop {
        stream.readable().await?;
        *rbuf = shard.bufs.borrow_mut().take_read();
        match try_read(stream, rbuf) {
            Ok(Some(n)) => return Ok(n),
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

/// Mirrors session changes that CLIENT LIST shows into the registry (rare commands only).
fn after_session_change(session: &Session, args: &[&[u8]], entry: &ClientEntry) {
    let name = args[0];
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    if is("select") || is("reset") || is("hello") || is("client") || is("move") {
        entry.db.store(session.db, Ordering::Relaxed);
        entry.resp.store(
            if session.proto == Proto::Resp3 { 3 } else { 2 },
            Ordering::Relaxed,
        );
        *lock(&entry.name) = session.name.clone();
    }
}
