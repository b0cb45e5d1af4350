//! Writing an RDB file from a point-in-time snapshot of every shard, without fork.
//!
//! The cut: with a shared lock on every key of every shard (taken in ascending shard order, as
//! every command spanning shards locks), no write is running anywhere and none spanning shards
//! is half done; each shard then starts its snapshot (`kvcore::Db::snapshot_begin`, O(1)) and
//! the locks go. From then on each shard walks its keys in steps of [`STEP_KEYS`] between its
//! batches (a task that yields after each step), and a key about to change is written first
//! with its old value, so the file is the state at the cut whatever the clients do meanwhile.
//!
//! The shards' records go as chunks to one writer thread, which appends them to a temporary
//! file after the header, keeps the running CRC-64, and when every shard has finished writes
//! the trailer, syncs, renames over `dir`/`dbfilename` and syncs the directory. A write error
//! stops the snapshot on every shard and leaves the old file in place. Chunks in flight are
//! bounded ([`MAX_IN_FLIGHT`]): a slow disk slows the walk, not the clients.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use futures_channel::oneshot;
use kvcore::rdb;

use crate::admin::everywhere;
use crate::shard::locks::EVERY_KEY;
use crate::shard::Shard;

/// Keys a shard walks per step between its batches.
const STEP_KEYS: usize = 256;
/// Time the clients get per unit of snapshot work while they have work (see [`give_way`]).
const GIVE_WAY: u32 = 4;
/// A pass over the ready tasks shorter than this means the shard is otherwise idle.
const IDLE_PASS: Duration = Duration::from_micros(20);
/// Bytes sent to the writer and not yet written past which the shards pause their walks.
const MAX_IN_FLIGHT: usize = 8 << 20;

enum Piece {
    /// The file's start: magic, version and aux fields.
    Header(Vec<u8>),
    /// Records of one shard.
    Chunk(Vec<u8>),
    /// One shard has written all its records.
    Done,
}

/// What the shards and the writer share.
#[derive(Default)]
struct Flow {
    /// Bytes of records sent and not yet written (by the writer thread, or by whoever
    /// consumes a [`Target::Socket`]).
    in_flight: Arc<AtomicUsize>,
    /// The writer gave up (a write failed): the shards stop.
    failed: AtomicBool,
}

/// What a finished snapshot reports.
pub struct Written {
    /// Per shard, its change counter at the cut (what the file holds).
    pub dirty_at_cut: Vec<u64>,
    /// Bytes in the file.
    pub bytes: u64,
}

/// How the snapshot's moment is made safe.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Take shared locks on every key of every shard for the cut.
    Lock,
    /// The caller holds exclusive locks on every key of every shard already.
    Held,
    /// The caller took shared locks on every key of every shard: released once the
    /// snapshot has begun everywhere.
    Release,
}

/// Where a snapshot goes.
pub enum Target {
    /// An RDB file (or an AOF base of commands), put in place when complete; synced as it
    /// grows when the flag says so ([`IncrementalSync`], from the setting [`incremental`]
    /// reads).
    File(PathBuf, bool),
    /// The RDB bytes, in order, to a replica's connection: each piece with the bytes to give
    /// back to the flow count (`in_flight`) once it is written.
    Socket(
        tokio::sync::mpsc::UnboundedSender<(Vec<u8>, usize)>,
        Arc<AtomicUsize>,
    ),
}

/// Writes a snapshot of every shard to `path`; `on_cut` runs once the snapshot's moment is
/// taken (BGSAVE answers then). Returns when the file is in place, or why not.
pub async fn write(
    shard: &Shard,
    path: PathBuf,
    aux: Vec<(&'static str, Vec<u8>)>,
    cut: Cut,
    on_cut: impl FnOnce(),
) -> Result<Written, String> {
    let sync = incremental(shard, "rdb-save-incremental-fsync");
    write_as(shard, Target::File(path, sync), aux, cut, false, on_cut).await
}

/// Whether the yes/no setting `name` (`rdb-save-incremental-fsync`, or
/// `aof-rewrite-incremental-fsync` for an AOF base) asks for a file synced as it grows.
pub fn incremental(shard: &Shard, name: &str) -> bool {
    shard.db.borrow().config.get(name) == Some("yes")
}

/// [`write`] of an RDB file, or (`commands`) of the commands that recreate every key (an AOF
/// base without the RDB preamble: no header, no checksum).
///
/// `on_cut` runs at the snapshot's moment, while every shard is still held (so that what it
/// reads of the change stream's position is the snapshot's).
pub async fn write_as(
    shard: &Shard,
    target: Target,
    aux: Vec<(&'static str, Vec<u8>)>,
    cut: Cut,
    commands: bool,
    on_cut: impl FnOnce(),
) -> Result<Written, String> {
    let n = shard.n;
    let (tx, rx) = mpsc::channel::<Piece>();
    let flow = Arc::new(Flow {
        in_flight: match &target {
            Target::Socket(_, counted) => counted.clone(),
            Target::File(..) => Arc::default(),
        },
        failed: AtomicBool::new(false),
    });
    let (done_tx, done_rx) = oneshot::channel();
    let writer_flow = flow.clone();
    std::thread::Builder::new()
        .name("rdb-writer".into())
        .spawn(move || {
            lowest_priority();
            let r = match target {
                Target::File(path, autosync) => {
                    write_file(&path, rx, n, commands, autosync, &writer_flow)
                }
                Target::Socket(out, _) => send_pieces(rx, n, &writer_flow, out),
            };
            writer_flow.failed.store(r.is_err(), Ordering::Relaxed);
            let _ = done_tx.send(r);
        })
        .map_err(|e| format!("can't start the writer thread: {e}"))?;
    if cut == Cut::Lock {
        for s in 0..n {
            shard.lock(s, vec![EVERY_KEY], false).await;
        }
    }
    let (step_tx, step_flow) = (tx.clone(), flow.clone());
    let begun = everywhere(shard, move |sh| {
        let mut db = sh.db.borrow_mut();
        let sizes = db.db_sizes();
        let version = db.snapshot_begin_as(commands);
        let dirty = db.stats.dirty;
        drop(db);
        walk(sh, step_tx.clone(), step_flow.clone());
        (version, dirty, sizes)
    })
    .await;
    // The function libraries at the cut (their changes wait for the cut's locks).
    let functions = shard.db.borrow().scripts.functions().libraries();
    on_cut();
    if cut != Cut::Held {
        for s in 0..n {
            shard.unlock(s, vec![EVERY_KEY], false).await;
        }
    }
    let version = begun.iter().map(|b| b.0).max().unwrap_or(rdb::VERSION_BASE);
    let header = if commands {
        // An AOF base of commands loads the libraries first, as Redis's rewrite does.
        let mut h = Vec::new();
        for lib in &functions {
            kvcore::changes::encode(&mut h, &[b"FUNCTION", b"LOAD", &lib.code]);
        }
        h
    } else {
        let mut h = rdb::file_header(version, &aux);
        for lib in &functions {
            rdb::function_record(&mut h, &lib.code);
        }
        // Each database's counts at the cut, summed over the shards: Redis sizes its tables
        // from them when it loads the file.
        let mut sizes: Vec<(u64, u64)> = Vec::new();
        for b in &begun {
            if sizes.len() < b.2.len() {
                sizes.resize(b.2.len(), (0, 0));
            }
            for (s, d) in sizes.iter_mut().zip(&b.2) {
                s.0 += d.0;
                s.1 += d.1;
            }
        }
        for (db, (keys, expires)) in sizes.into_iter().enumerate() {
            if keys > 0 {
                rdb::resize_hint(&mut h, db, keys, expires);
            }
        }
        h
    };
    let _ = tx.send(Piece::Header(header));
    drop(tx);
    let bytes = done_rx
        .await
        .unwrap_or_else(|_| Err("the writer thread stopped".into()))?;
    Ok(Written {
        dirty_at_cut: begun.into_iter().map(|b| b.1).collect(),
        bytes,
    })
}

/// Starts the task that walks this shard's snapshot in steps and sends its records.
fn walk(sh: &Shard, tx: mpsc::Sender<Piece>, flow: Arc<Flow>) {
    let Some(me) = sh.rc() else {
        return;
    };
    tokio::task::spawn_local(async move {
        loop {
            if flow.failed.load(Ordering::Relaxed) {
                me.db.borrow_mut().snapshot_end();
                return;
            }
            if flow.in_flight.load(Ordering::Relaxed) > MAX_IN_FLIGHT {
                crate::timer::sleep(Duration::from_millis(1)).await;
                continue;
            }
            let mut chunk = Vec::new();
            let started = Instant::now();
            let (done, visited) = me
                .db
                .borrow_mut()
                .snapshot_step_counted(STEP_KEYS, &mut chunk);
            me.global
                .rdb
                .keys_processed
                .fetch_add(visited as u64, Ordering::Relaxed);
            let spent = started.elapsed();
            if !chunk.is_empty() {
                flow.in_flight.fetch_add(chunk.len(), Ordering::Relaxed);
                if tx.send(Piece::Chunk(chunk)).is_err() {
                    me.db.borrow_mut().snapshot_end();
                    return;
                }
            }
            if done {
                let _ = tx.send(Piece::Done);
                return;
            }
            give_way(spent).await;
        }
    });
}

/// Lowers the calling thread's priority to nice 10 (a tenth of a normal thread's weight): on a
/// core it shares with a shard (or with one pinned there) its time slices stay short and few,
/// so they barely show in the clients' tail latency, and it still makes steady progress
/// under full load. (A failure leaves it a normal thread.)
fn lowest_priority() {
    // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
    let r = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10)
    };
    if r != 0 {
        crate::log!(
            1,
            "the RDB writer thread keeps its priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Lets the shard's clients run for [`GIVE_WAY`] times the `spent` of a step before the next
/// one, so that under load a snapshot takes at most a fifth of the shard's time (its clients'
/// latency grows by a quarter, not by the snapshot's whole cost); stops waiting as soon as a pass
/// over the ready tasks comes back at once, meaning nobody else has anything to do.
async fn give_way(spent: Duration) {
    let owed = spent * GIVE_WAY;
    let start = Instant::now();
    loop {
        let before = Instant::now();
        // (Clients of the shard's own loop are served here: tokio does not park meanwhile.)
        crate::net::conn::fast::serve_ready();
        tokio::task::yield_now().await;
        let now = Instant::now();
        if now - start >= owed || now - before < IDLE_PASS {
            return;
        }
    }
}

/// Hands `put` the header, then the records in the order they came (those that came before
/// the header after it); its flag says a piece is records (counted in the flow), not the
/// header. Returns whether every shard finished (false: the snapshot stopped).
fn in_order(
    rx: mpsc::Receiver<Piece>,
    shards: usize,
    mut put: impl FnMut(Vec<u8>, bool) -> std::io::Result<()>,
) -> std::io::Result<bool> {
    let mut early: Vec<Vec<u8>> = Vec::new();
    let (mut started, mut done) = (false, 0);
    for piece in rx {
        match piece {
            Piece::Header(h) => {
                put(h, false)?;
                started = true;
                for c in early.drain(..) {
                    put(c, true)?;
                }
            }
            Piece::Chunk(c) if started => put(c, true)?,
            Piece::Chunk(c) => early.push(c),
            Piece::Done => done += 1,
        }
    }
    Ok(started && done == shards)
}

/// The sending thread of a snapshot for a replica: the file's bytes, in order, to the
/// connection's task (which writes them and gives their count back to the flow). Returns the
/// bytes sent.
fn send_pieces(
    rx: mpsc::Receiver<Piece>,
    shards: usize,
    flow: &Flow,
    out: tokio::sync::mpsc::UnboundedSender<(Vec<u8>, usize)>,
) -> Result<u64, String> {
    let gone = || std::io::Error::other("the replica is gone");
    let mut digest = rdb::file_digest();
    let mut bytes = 0u64;
    let complete = in_order(rx, shards, |b, counted| {
        digest.update(&b);
        bytes += b.len() as u64;
        let n = if counted { b.len() } else { 0 };
        out.send((b, n)).map_err(|_| gone())
    })
    .map_err(|e| e.to_string())?;
    if !complete {
        flow.failed.store(true, Ordering::Relaxed);
        return Err("the snapshot stopped before its end".into());
    }
    let end = rdb::file_end(digest).to_vec();
    bytes += end.len() as u64;
    out.send((end, 0)).map_err(|_| gone().to_string())?;
    Ok(bytes)
}

/// Bytes written between two steps of [`IncrementalSync`] (Redis's `REDIS_AUTOSYNC_BYTES`).
const AUTOSYNC_BYTES: u64 = 4 << 20;

/// `rdb-save-incremental-fsync` / `aof-rewrite-incremental-fsync`, as Redis does them: after
/// every [`AUTOSYNC_BYTES`], start the writeback of what was just written and wait for the
/// writeback of the range before it. The kernel then never holds more than a few megabytes of
/// the file dirty, instead of the whole file, flushed at once by the final sync (or by the
/// kernel's flusher threads, on whatever core they find, the shards' included).
#[derive(Default)]
struct IncrementalSync {
    /// Where the range whose writeback was started last begins, and where it ends.
    started: (u64, u64),
}

impl IncrementalSync {
    /// Called with the bytes written so far (some perhaps still in `f`'s buffer).
    fn wrote(
        &mut self,
        f: &mut std::io::BufWriter<std::fs::File>,
        bytes: u64,
    ) -> std::io::Result<()> {
        let (from, to) = self.started;
        if bytes - to < AUTOSYNC_BYTES {
            return Ok(());
        }
        f.flush()?;
        let file = f.get_ref();
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let range = |start: u64, end: u64, flags: libc::c_uint| {
                // SAFETY: sync_file_range takes a descriptor we own and plain integers.
                let r = unsafe {
                    libc::sync_file_range(
                        file.as_raw_fd(),
                        start as i64,
                        (end - start) as i64,
                        flags,
                    )
                };
                if r == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            range(to, bytes, libc::SYNC_FILE_RANGE_WRITE)?;
            if to > from {
                range(
                    from,
                    to,
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE
                        | libc::SYNC_FILE_RANGE_WRITE
                        | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                )?;
            }
        }
        #[cfg(not(target_os = "linux"))]
        file.sync_data()?;
        self.started = (to, bytes);
        Ok(())
    }
}

/// The writer thread: the pieces into a temporary file (synced as it grows when `autosync`),
/// then the file into place. Returns the file's size.
fn write_file(
    path: &Path,
    rx: mpsc::Receiver<Piece>,
    shards: usize,
    commands: bool,
    autosync: bool,
    flow: &Flow,
) -> Result<u64, String> {
    let dir = super::dir_of_file(path);
    let tmp = dir.join(format!("temp-{}-bg.rdb", std::process::id()));
    let written = (|| -> std::io::Result<Result<u64, String>> {
        let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        let mut digest = rdb::file_digest();
        let mut bytes = 0u64;
        let mut sync = autosync.then(IncrementalSync::default);
        let complete = in_order(rx, shards, |b, record| {
            digest.update(&b);
            bytes += b.len() as u64;
            f.write_all(&b)?;
            if record {
                flow.in_flight.fetch_sub(b.len(), Ordering::Relaxed);
            }
            if let Some(s) = sync.as_mut() {
                s.wrote(&mut f, bytes)?;
            }
            Ok(())
        })?;
        if !complete {
            return Ok(Err("the snapshot stopped before its end".into()));
        }
        let end = if commands {
            Vec::new()
        } else {
            rdb::file_end(digest).to_vec()
        };
        f.write_all(&end)?;
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        drop(f);
        super::install(&tmp, path)?;
        Ok(Ok(bytes + end.len() as u64))
    })();
    let r = match written {
        Ok(r) => r,
        Err(e) => Err(format!("{}: {e}", path.display())),
    };
    if r.is_err() {
        flow.failed.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_sync_follows_the_file_and_keeps_its_bytes() {
        let dir = std::env::temp_dir().join(format!("kv-autosync-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut f =
            std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
        let mut sync = IncrementalSync::default();
        let piece: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let mut bytes = 0u64;
        let mut steps = Vec::new();
        for _ in 0..50 {
            f.write_all(&piece).unwrap();
            bytes += piece.len() as u64;
            sync.wrote(&mut f, bytes).unwrap();
            if steps.last() != Some(&sync.started) {
                steps.push(sync.started);
            }
        }
        f.flush().unwrap();
        // A step each time AUTOSYNC_BYTES more were written, ranges back to back from 0.
        let want = (bytes / AUTOSYNC_BYTES) as usize;
        assert!(steps.len() == want + 1 || steps.len() == want, "{steps:?}");
        let mut end = 0;
        for &(from, to) in steps.iter().skip(1) {
            assert_eq!(from, end);
            assert!(to - from >= AUTOSYNC_BYTES && to - from < AUTOSYNC_BYTES + piece.len() as u64);
            end = to;
        }
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len() as u64, bytes);
        assert!(back.chunks(piece.len()).all(|c| c == piece.as_slice()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
