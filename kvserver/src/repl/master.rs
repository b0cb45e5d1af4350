//! The master's side: a connection that sent PSYNC (or SYNC) becomes a replica's feed.
//!
//! PSYNC with this server's replication id (or the id before its promotion, up to where that
//! stream ended) and an offset the backlog still holds is answered `+CONTINUE` and the stream
//! goes on from there. Anything else gets a full synchronization: `+FULLRESYNC <id> <offset>`,
//! a snapshot of every shard taken at that offset without fork (see `persist::snapshot`), sent
//! on the socket as it is written (`$EOF:<mark>` ... `<mark>`, Redis's diskless format, for a
//! replica that said `capa eof`; else `$<length>` and the whole file, built in memory first),
//! then the stream from the snapshot's offset, which the backlog kept meanwhile. The
//! connection then reads the replica's `REPLCONF ACK <offset>` (WAIT, INFO's lag) while it
//! writes the stream.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use kvcore::resp::parse::{Args, Limits, Parser, Status};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use super::{add_follower, ensure_backlog, remove_follower, Next, Phase};
use crate::global::{lock, ClientEntry, Global};
use crate::log;
use crate::persist::{write_snapshot, Cut, Target};
use crate::shard::Shard;

/// What a replica said of itself before PSYNC (REPLCONF).
#[derive(Clone, Copy, Debug, Default)]
pub struct Handshake {
    /// REPLCONF listening-port.
    pub port: u16,
    /// REPLCONF capa eof: it takes the diskless format.
    pub eof: bool,
    /// REPLCONF capa psync2: it takes `+CONTINUE <new id>`.
    pub psync2: bool,
}

/// Most stream bytes handed to a replica's socket in one write.
const WRITE_MAX: usize = 256 << 10;

/// Serves a replica on this connection until it goes. `args`: its PSYNC or SYNC.
pub async fn serve(
    shard: Rc<Shard>,
    stream: TcpStream,
    entry: Arc<ClientEntry>,
    hs: Handshake,
    args: Vec<Vec<u8>>,
) {
    let g = shard.global.clone();
    entry.class.store(
        crate::global::Class::Replica as u8,
        std::sync::atomic::Ordering::Relaxed,
    );
    let ip = entry.addr.ip().to_string();
    let port = if hs.port != 0 {
        hs.port
    } else {
        entry.addr.port()
    };
    let (rd, mut wr) = stream.into_split();
    let is_psync = args[0].eq_ignore_ascii_case(b"psync");
    let id = match is_psync.then(|| continues(&g, &args)).flatten() {
        Some((from, replid)) => {
            let id = add_follower(&g, ip.clone(), port, Phase::Online, Some(from - 1));
            let line = if hs.psync2 {
                format!("+CONTINUE {replid}\r\n")
            } else {
                "+CONTINUE\r\n".to_string()
            };
            log!(
                2,
                "Partial resynchronization request from {ip}:{port} accepted. Sending {} bytes of backlog starting from offset {from}.",
                lock(&g.repl.state).offset + 1 - from
            );
            if wr.write_all(line.as_bytes()).await.is_err() {
                remove_follower(&g, id);
                return;
            }
            id
        }
        None => {
            if is_psync {
                log!(2, "Full resync requested by replica {ip}:{port}");
            }
            match full_sync(&shard, &mut wr, &ip, port, hs.eof && is_psync, is_psync).await {
                Ok(id) => id,
                Err((id, e)) => {
                    log!(
                        3,
                        "Full synchronization with replica {ip}:{port} failed: {e}"
                    );
                    remove_follower(&g, id);
                    return;
                }
            }
        }
    };
    tokio::select! {
        _ = read_acks(&g, id, rd) => {}
        r = write_stream(&g, id, &mut wr) => {
            if let Err(e) = r {
                log!(2, "Connection with replica {ip}:{port} lost: {e}");
            }
        }
    }
    remove_follower(&g, id);
}

/// Where PSYNC `<replid> <offset>` can continue: the offset and this server's id.
fn continues(g: &Global, args: &[Vec<u8>]) -> Option<(u64, String)> {
    let replid = std::str::from_utf8(args.get(1)?).ok()?;
    let from: u64 = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
    let st = lock(&g.repl.state);
    st.backlog.as_ref()?;
    let known = replid == st.replid
        || (replid == st.replid2 && i64::try_from(from).is_ok_and(|f| f <= st.second_offset));
    (known && from >= st.first_offset() && from <= st.offset + 1).then(|| (from, st.replid.clone()))
}

/// A full synchronization: the snapshot's moment, `+FULLRESYNC`, the file. Returns the
/// replica's id (online, its stream starting at the snapshot's offset).
async fn full_sync(
    shard: &Shard,
    wr: &mut OwnedWriteHalf,
    ip: &str,
    port: u16,
    eof: bool,
    psync: bool,
) -> Result<u64, (u64, String)> {
    let g = &shard.global;
    ensure_backlog(shard).await;
    let id = add_follower(g, ip.to_string(), port, Phase::WaitBgsave, None);
    // While another snapshot runs, a newline each second keeps the replica waiting (as Redis
    // does for replicas in wait_bgsave).
    let mut waited = 0u32;
    while !crate::persist::claim(shard) {
        crate::timer::sleep(std::time::Duration::from_millis(10)).await;
        waited += 1;
        if waited % 100 == 0 && wr.write_all(b"\n").await.is_err() {
            return Err((id, "the replica went while it waited".into()));
        }
    }
    let r = snapshot_to(shard, wr, id, eof, psync).await;
    crate::persist::release(g);
    let (bytes, at, diskless) = r?;
    if let Some(f) = lock(&g.repl.state)
        .followers
        .iter_mut()
        .find(|f| f.id == id)
    {
        f.phase = Phase::Online;
        f.ack_at = Instant::now();
        f.wait_ack = eof && diskless;
    }
    log!(
        2,
        "Synchronization with replica {ip}:{port} succeeded ({bytes} bytes, offset {at})"
    );
    Ok(id)
}

/// The snapshot's moment, `+FULLRESYNC`, the file, for replica `id`; returns the bytes sent,
/// the snapshot's offset and whether it went in the diskless format.
async fn snapshot_to(
    shard: &Shard,
    wr: &mut OwnedWriteHalf,
    id: u64,
    eof: bool,
    psync: bool,
) -> Result<(u64, u64, bool), (u64, String)> {
    let g = &shard.global;
    let fail = |e: String| (id, e);
    // On a replica, the cut falls between two batches of its master's stream.
    let gate = if g.repl.is_replica.load(Ordering::Relaxed) {
        Some(g.repl.apply_gate.lock().await)
    } else {
        None
    };
    let gate = RefCell::new(gate);
    let at = Cell::new(None::<u64>);
    let replid = RefCell::new(String::new());
    let on_cut = || {
        let mut st = lock(&g.repl.state);
        let offset = st.offset;
        // The replica's stream starts here: its first command must select a database.
        st.stream_db = None;
        if let Some(f) = st.followers.iter_mut().find(|f| f.id == id) {
            f.sent = offset;
            f.phase = Phase::SendBulk;
        }
        at.set(Some(offset));
        *replid.borrow_mut() = st.replid.clone();
        drop(st);
        gate.borrow_mut().take();
    };
    let head = || {
        let mut head = String::new();
        if psync {
            head = format!(
                "+FULLRESYNC {} {}\r\n",
                replid.borrow(),
                at.get().unwrap_or(0)
            );
        }
        head
    };
    let diskless = shard.db.borrow().config.get("repl-diskless-sync") != Some("no");
    let bytes = if eof && diskless {
        log!(2, "Starting BGSAVE for SYNC with target: replicas sockets");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Vec<u8>, usize)>();
        let counted = Arc::new(AtomicUsize::new(0));
        let snapshot = write_snapshot(
            shard,
            Target::Socket(tx, counted.clone()),
            crate::persist::aux_fields(),
            Cut::Lock,
            false,
            on_cut,
        );
        let send = async {
            let mark = crate::global::new_hex_id();
            let mut started = false;
            while let Some((bytes, n)) = rx.recv().await {
                if !started {
                    started = true;
                    let h = format!("{}$EOF:{mark}\r\n", head());
                    wr.write_all(h.as_bytes()).await?;
                }
                wr.write_all(&bytes).await?;
                counted.fetch_sub(n, Ordering::Relaxed);
            }
            wr.write_all(mark.as_bytes()).await?;
            Ok::<bool, std::io::Error>(started)
        };
        let (written, sent) = tokio::join!(snapshot, send);
        let written = written.map_err(fail)?;
        match sent {
            Ok(true) => {}
            Ok(false) => return Err(fail("the snapshot sent nothing".into())),
            Err(e) => return Err(fail(e.to_string())),
        }
        written.bytes
    } else {
        // Through a file (`repl-diskless-sync no`, or a replica without `capa eof`): the
        // snapshot goes to a temporary file beside the RDB file, then `$<length>` and the file.
        log!(2, "Starting BGSAVE for SYNC with target: disk");
        let dir = crate::persist::dir_of_config(&shard.db.borrow().config);
        let path = dir.join(format!("temp-repl-{}-{id}.rdb", std::process::id()));
        let snapshot = write_snapshot(
            shard,
            Target::File(
                path.clone(),
                crate::persist::snapshot::incremental(shard, "rdb-save-incremental-fsync"),
            ),
            crate::persist::aux_fields(),
            Cut::Lock,
            false,
            on_cut,
        );
        tokio::pin!(snapshot);
        // The replica hears `+FULLRESYNC` once the moment is taken, then a newline every
        // second while the file is written, so that it does not time out.
        let mut head_sent = false;
        let mut tick = crate::timer::Interval::new(std::time::Duration::from_millis(100));
        let mut ticks = 0u32;
        let written = loop {
            tokio::select! {
                w = &mut snapshot => break w,
                _ = tick.tick() => {
                    ticks += 1;
                    let r = if !head_sent && at.get().is_some() {
                        head_sent = true;
                        wr.write_all(head().as_bytes()).await
                    } else if head_sent && ticks % 10 == 0 {
                        wr.write_all(b"\n").await
                    } else {
                        Ok(())
                    };
                    if let Err(e) = r {
                        let _ = std::fs::remove_file(&path);
                        return Err(fail(e.to_string()));
                    }
                }
            }
        };
        let sent = async {
            let written = written.map_err(std::io::Error::other)?;
            if !head_sent {
                wr.write_all(head().as_bytes()).await?;
            }
            wr.write_all(format!("${}\r\n", written.bytes).as_bytes())
                .await?;
            let mut f = tokio::fs::File::open(&path).await?;
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = f.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                wr.write_all(&buf[..n]).await?;
            }
            Ok::<u64, std::io::Error>(written.bytes)
        }
        .await;
        let _ = std::fs::remove_file(&path);
        sent.map_err(|e| fail(e.to_string()))?
    };
    Ok((bytes, at.get().unwrap_or(0), diskless))
}

/// Writes the stream to the replica as it grows; returns when the replica is dropped or fell
/// out of the backlog (an error then) or the socket fails.
async fn write_stream(g: &Global, id: u64, wr: &mut OwnedWriteHalf) -> std::io::Result<()> {
    let killed = {
        let st = lock(&g.repl.state);
        match st.followers.iter().find(|f| f.id == id) {
            Some(f) => f.killed.clone(),
            None => return Ok(()),
        }
    };
    let gone = || std::io::Error::other("the replica fell behind past its output limit");
    // One buffer for the whole stream: the bytes are copied out of the backlog under its
    // lock, then written without it.
    let mut buf = Vec::with_capacity(WRITE_MAX);
    loop {
        let next = lock(&g.repl.state).next_for(id, WRITE_MAX, &mut buf);
        match next {
            // A write to a replica that stopped reading waits until it is cut off.
            Next::Bytes => tokio::select! {
                r = wr.write_all(&buf) => r?,
                _ = killed.notified() => return Err(gone()),
            },
            Next::Park(wake) => {
                wake.notified().await;
                // Every client ready in this turn of the loop adds its changes first: one
                // write carries them all (Redis writes to replicas once per loop too).
                tokio::task::yield_now().await;
            }
            Next::Gone => {
                return Err(std::io::Error::other(
                    "the replica fell behind past its output limit or out of the backlog",
                ))
            }
        }
    }
}

/// Reads the replica's acknowledgements until it goes.
async fn read_acks(g: &Global, id: u64, mut rd: OwnedReadHalf) {
    let mut parser = Parser::new(Limits::default());
    let mut buf = vec![0u8; 4096];
    let (mut start, mut end) = (0usize, 0usize);
    loop {
        if end == buf.len() {
            if start == 0 {
                // A line longer than the buffer: the replica speaks nonsense.
                return;
            }
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        let n = match rd.read(&mut buf[end..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        end += n;
        loop {
            let mut args = Args::new();
            match parser.parse_into(&buf[start..end], &mut args) {
                Ok(Status::Command { consumed }) => {
                    start += consumed;
                    if args.len() >= 3
                        && args[0].eq_ignore_ascii_case(b"replconf")
                        && args[1].eq_ignore_ascii_case(b"ack")
                    {
                        if let Some(off) = kvcore::num::parse_i64(args[2]) {
                            let mut st = lock(&g.repl.state);
                            if let Some(f) = st.followers.iter_mut().find(|f| f.id == id) {
                                f.ack = f.ack.max(off.max(0) as u64);
                                f.ack_at = Instant::now();
                                if std::mem::take(&mut f.wait_ack) {
                                    f.wake.notify_one();
                                }
                            }
                            drop(st);
                            g.repl.acked.notify_waiters();
                        }
                    }
                }
                Ok(Status::Incomplete { .. }) => break,
                Err(_) => return,
            }
        }
        if start == end {
            start = 0;
            end = 0;
        }
    }
}
