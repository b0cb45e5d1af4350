//! The append-only file, in Redis 7's multi-part layout: `dir`/`appenddirname` holds a
//! manifest (`appendfilename`.manifest) naming one base file (an RDB, as with
//! `aof-use-rdb-preamble yes`) and the increment files, RESP commands appended in order.
//!
//! Every shard logs its changes (`kvcore::changes`) and hands them to one writer thread
//! before it writes any reply ([`Shard::persist_barrier`]), so a reply never leaves before the
//! change it acknowledges is on its way to the file, and the file's order agrees with what
//! clients saw. A command spanning shards is logged once, whole, by the shard that
//! coordinated it, before it releases its keys. The writer appends what it receives and syncs
//! as `appendfsync` says: `always` syncs before a shard may answer (one sync serves every
//! shard and connection waiting: group commit), `everysec` once a second, `no` never.
//!
//! Loading: the base file, then each increment file replayed in one store with the clock
//! stopped (nothing expires halfway, as Redis does not expire keys while loading), then the
//! keys go to their shards. A torn last command of the last file is cut off with a warning
//! when `aof-load-truncated` is yes; anything else wrong stops the start with one line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use futures_channel::oneshot;
use kvcore::rdb::{self, LoadedKey};
use kvcore::resp::reply::{parse_reply, Value as Reply};

use crate::coord::route;
use crate::options::Options;
use crate::shard::Shard;

/// When the writer syncs the file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fsync {
    /// Before any shard answers a write.
    Always,
    /// Once a second.
    EverySec,
    /// When the system decides.
    No,
}

impl Fsync {
    fn parse(s: &str) -> Fsync {
        match s {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// A message to the writer thread.
pub enum Msg {
    /// Changes to append.
    Chunk(Vec<u8>),
    /// Answer once everything received before this is synced.
    Sync(oneshot::Sender<()>),
    /// Write and sync everything, answer, and end.
    Stop(mpsc::Sender<()>),
    /// Sync as this policy says from now on (CONFIG SET appendfsync).
    Policy(Fsync),
    /// Write and sync everything into the current file, then append to this one.
    Rotate(std::fs::File, oneshot::Sender<()>),
}

/// A shard's way to the writer.
#[derive(Clone)]
pub struct Link {
    tx: mpsc::Sender<Msg>,
    /// The sync policy.
    pub fsync: Fsync,
}

/// The append-only file's state (INFO persistence).
#[derive(Default)]
pub struct AofState {
    /// The writer, while the AOF is on.
    pub link: Mutex<Option<Link>>,
    /// Bytes of the base and increment files at start (the writer counts what it adds).
    pub current_size: AtomicU64,
    /// Bytes of the base file.
    pub base_size: AtomicU64,
    /// The files, as the manifest on disk names them.
    pub manifest: Mutex<Option<Manifest>>,
    /// What the writer had written when `current_size` was last set.
    pub written_at: AtomicU64,
    /// Rewrites done (INFO `aof_rewrites`).
    pub rewrites: AtomicU64,
    /// A rewrite runs.
    pub rewriting: AtomicBool,
    /// A rewrite waits for the running save to end.
    pub scheduled: AtomicBool,
    /// Whether the last rewrite failed.
    pub rewrite_failed: AtomicBool,
    /// Seconds the last rewrite took (0 before any: Redis's -1 is printed then).
    pub last_rewrite_secs: AtomicU64,
}

/// Keys loaded, by shard, and the load's counts.
pub type Loaded = (Vec<Vec<LoadedKey>>, rdb::LoadStats);

/// The files of one AOF directory, as its manifest names them.
#[derive(Clone)]
pub struct Manifest {
    base: Option<String>,
    base_seq: u64,
    /// (name, seq) of the increment files, in order.
    incr: Vec<(String, u64)>,
    /// Lines of history files, kept as they are.
    history: Vec<String>,
}

fn dir_of(config: &kvcore::config::Config) -> PathBuf {
    super::dir_of_config(config).join(config.get("appenddirname").unwrap_or("appendonlydir"))
}

fn file_name(config: &kvcore::config::Config) -> String {
    config
        .get("appendfilename")
        .unwrap_or("appendonly.aof")
        .to_string()
}

impl Manifest {
    fn read(path: &Path) -> Result<Option<Manifest>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("can't read {}: {e}", path.display())),
        };
        let mut m = Manifest {
            base: None,
            base_seq: 0,
            incr: Vec::new(),
            history: Vec::new(),
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_ascii_whitespace().collect();
            let bad = || format!("{}: invalid line {}: '{line}'", path.display(), n + 1);
            let mut name = None;
            let (mut seq, mut ty) = (None, None);
            for kv in words.chunks(2) {
                match kv {
                    ["file", v] => name = Some(v.trim_matches('"').to_string()),
                    ["seq", v] => seq = v.parse::<u64>().ok(),
                    ["type", v] => ty = v.chars().next(),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(ty)) = (name, seq, ty) else {
                return Err(bad());
            };
            if name.contains('/') {
                return Err(bad());
            }
            match ty {
                'b' => {
                    m.base = Some(name);
                    m.base_seq = seq;
                }
                'h' => m.history.push(line.to_string()),
                'i' => {
                    if m.incr.last().is_some_and(|l| l.1 >= seq) {
                        return Err(format!(
                            "{}: found a non-monotonic sequence number",
                            path.display()
                        ));
                    }
                    m.incr.push((name, seq));
                }
                _ => return Err(format!("{}: unknown AOF file type '{ty}'", path.display())),
            }
        }
        Ok(Some(m))
    }

    fn text(&self) -> String {
        let mut s = String::new();
        if let Some(b) = &self.base {
            s.push_str(&format!("file {b} seq {} type b\n", self.base_seq));
        }
        for h in &self.history {
            s.push_str(h);
            s.push('\n');
        }
        for (name, seq) in &self.incr {
            s.push_str(&format!("file {name} seq {seq} type i\n"));
        }
        s
    }
}

use super::write_atomically;

/// The temporary file a manifest or an empty base is written to before it is renamed in.
const TEMP: &str = "temp-kvserver.manifest";

/// Where the commands of a replay end.
enum Replayed {
    /// Every command was whole.
    Whole,
    /// The file ends inside a command (or an unfinished MULTI): the whole ones end here.
    Torn(usize),
}

/// Replays RESP commands into `db`; an error for anything but a torn end.
fn replay(db: &mut kvcore::Db, bytes: &[u8], name: &str) -> Result<Replayed, String> {
    let mut session = kvcore::Session {
        authenticated: true,
        internal: true,
        ..kvcore::Session::default()
    };
    let mut out = Vec::new();
    let (mut at, mut before_multi) = (0usize, None::<usize>);
    // A transaction's commands run at its EXEC, all of them, or none when the file ends first.
    let mut queued: Vec<Vec<Vec<u8>>> = Vec::new();
    while at < bytes.len() {
        let (v, n) = match parse_reply(&bytes[at..]) {
            Ok(Some(x)) => x,
            Ok(None) => return Ok(Replayed::Torn(before_multi.unwrap_or(at))),
            Err(_) => {
                return Err(format!(
                    "Bad file format reading the append only file {name} at offset {at}"
                ))
            }
        };
        let Reply::Array(items) = v else {
            return Err(format!(
                "Bad file format reading the append only file {name} at offset {at}"
            ));
        };
        let mut args = Vec::with_capacity(items.len());
        for i in items {
            match i {
                Reply::Bulk(b) => args.push(b),
                _ => {
                    return Err(format!(
                        "Bad file format reading the append only file {name} at offset {at}"
                    ))
                }
            }
        }
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let Some(spec) = refs.first().and_then(|c| kvcore::commands::lookup(c)) else {
            return Err(format!(
                "Unknown command '{}' reading the append only file {name}",
                String::from_utf8_lossy(refs.first().copied().unwrap_or_default())
            ));
        };
        at += n;
        match spec.name {
            "multi" => {
                before_multi = Some(at - n);
                queued.clear();
            }
            "exec" => {
                before_multi = None;
                for cmd in queued.drain(..) {
                    let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
                    out.clear();
                    db.dispatch(&mut session, &refs, &mut out);
                }
            }
            _ if before_multi.is_some() => queued.push(args),
            _ => {
                out.clear();
                db.dispatch_spec(&mut session, Some(spec), &refs, &mut out);
            }
        }
    }
    Ok(match before_multi {
        Some(m) => Replayed::Torn(m),
        None => Replayed::Whole,
    })
}

/// The keys of the AOF at `dir`/`appenddirname`, by shard, with the load's counts; `None`
/// when there is no manifest yet (then [`start`] makes the files).
pub fn load(opts: &Options, shards: usize) -> Result<Option<Loaded>, String> {
    let config = &opts.store;
    let dir = dir_of(config);
    let manifest_path = dir.join(format!("{}.manifest", file_name(config)));
    let Some(m) = Manifest::read(&manifest_path)? else {
        return Ok(None);
    };
    let started = Instant::now();
    let mut db = kvcore::Db::with_config(config.clone());
    // The clock stopped before every deadline: nothing expires while loading.
    db.set_clock(kvcore::Clock::Manual(1));
    if let Some(base) = &m.base {
        let path = dir.join(base);
        let bytes =
            std::fs::read(&path).map_err(|e| format!("can't read {}: {e}", path.display()))?;
        if base.ends_with(".rdb") || bytes.starts_with(b"REDIS") {
            let limits = db.rdb_limits();
            let mut keys = Vec::new();
            let stats = rdb::load_file(&bytes, limits, 0, config.databases, |k| keys.push(k))
                .map_err(|e| format!("can't load {}: {e}", path.display()))?;
            (db.scripts.functions())
                .restore(&stats.functions, kvcore::function::Policy::Append)
                .map_err(|e| {
                    format!(
                        "can't load the functions of {}: {}",
                        path.display(),
                        String::from_utf8_lossy(&e)
                    )
                })?;
            for k in keys {
                db.load_key(k);
            }
        } else if let Replayed::Torn(_) = replay(&mut db, &bytes, base)? {
            return Err(format!("the base file {base} is truncated"));
        }
    }
    let last = m.incr.len();
    for (i, (name, _)) in m.incr.iter().enumerate() {
        let path = dir.join(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && i + 1 == last => Vec::new(),
            Err(e) => return Err(format!("can't read {}: {e}", path.display())),
        };
        if let Replayed::Torn(valid) = replay(&mut db, &bytes, name)? {
            let truncate_ok = config.get("aof-load-truncated") == Some("yes");
            if i + 1 != last {
                return Err(format!("the truncated file {name} is not the last file"));
            }
            if !truncate_ok {
                return Err(format!(
                    "Unexpected end of file reading the append only file {name} at offset {valid}: set aof-load-truncated yes, or cut the file with redis-check-aof --fix"
                ));
            }
            crate::log!(
                3,
                "!!! Warning: short read while loading the AOF file {name}!!!"
            );
            crate::log!(3, "!!! Truncating the AOF {name} at offset {valid} !!!");
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(valid as u64).and_then(|()| f.sync_all()));
            if let Err(e) = f {
                return Err(format!("Error truncating the AOF file {name}: {e}"));
            }
            crate::log!(
                3,
                "AOF {name} loaded anyway because aof-load-truncated is enabled"
            );
        }
    }
    db.set_clock(kvcore::Clock::System);
    db.refresh_clock();
    let mut by_shard: Vec<Vec<LoadedKey>> = (0..shards).map(|_| Vec::new()).collect();
    let (loaded, expired) = db.drain_keys(|k| by_shard[route::shard_of(&k.key, shards)].push(k));
    crate::log!(
        2,
        "DB loaded from append only file: {:.3} seconds ({loaded} keys, {expired} expired)",
        started.elapsed().as_secs_f64()
    );
    Ok(Some((
        by_shard,
        rdb::LoadStats {
            loaded,
            expired,
            // The libraries the base and the commands left.
            functions: (db.scripts.functions().libraries().iter())
                .map(|l| l.code.to_vec())
                .collect(),
            ..Default::default()
        },
    )))
}

fn open_append(path: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("can't open {}: {e}", path.display()))
}

/// Starts the AOF at start-up: makes the directory, an empty base and the first increment
/// file with their manifest when there is none, then the writer thread appending to the last
/// increment file.
pub fn start(global: &crate::global::Global) -> Result<(), String> {
    let config = &global.opts.store;
    let dir = dir_of(config);
    let name = file_name(config);
    let manifest_path = dir.join(format!("{name}.manifest"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("can't create {}: {e}", dir.display()))?;
    let m = match Manifest::read(&manifest_path)? {
        Some(m) if !m.incr.is_empty() => m,
        old => {
            let seq = old
                .as_ref()
                .and_then(|m| m.incr.last().map(|l| l.1))
                .unwrap_or(0)
                + 1;
            let mut m = old.unwrap_or(Manifest {
                base: None,
                base_seq: 0,
                incr: Vec::new(),
                history: Vec::new(),
            });
            if m.base.is_none() {
                let preamble = config.get("aof-use-rdb-preamble") != Some("no");
                let (base, bytes) = if preamble {
                    (
                        format!("{name}.1.base.rdb"),
                        rdb::file(&[], &[("aof-base", b"1".to_vec())]),
                    )
                } else {
                    (format!("{name}.1.base.aof"), Vec::new())
                };
                write_atomically(&dir.join(&base), TEMP, &bytes)
                    .map_err(|e| format!("can't write {base}: {e}"))?;
                crate::log!(2, "Creating AOF base file {base} on server start");
                m.base = Some(base);
                m.base_seq = 1;
            }
            m.incr = vec![(format!("{name}.{seq}.incr.aof"), seq)];
            write_atomically(&manifest_path, TEMP, m.text().as_bytes())
                .map_err(|e| format!("can't write {}: {e}", manifest_path.display()))?;
            m
        }
    };
    let incr = dir.join(m.incr.last().map(|l| l.0.clone()).unwrap_or_default());
    let file = open_append(&incr)?;
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let base_size = m.base.as_ref().map_or(0, |b| size(&dir.join(b)));
    let incr_size: u64 = m.incr.iter().map(|(n, _)| size(&dir.join(n))).sum();
    let state = &global.aof;
    state.base_size.store(base_size, Ordering::Relaxed);
    state
        .current_size
        .store(base_size + incr_size, Ordering::Relaxed);
    *crate::global::lock(&state.manifest) = Some(m);
    let fsync = Fsync::parse(config.get("appendfsync").unwrap_or("everysec"));
    let link = spawn_writer(file, fsync)?;
    *crate::global::lock(&state.link) = Some(link);
    Ok(())
}

/// Starts a writer thread appending to `file`.
fn spawn_writer(file: std::fs::File, fsync: Fsync) -> Result<Link, String> {
    let (tx, rx) = mpsc::channel();
    let shared = crate::global::lock(&SIZES)
        .get_or_insert_with(|| Arc::new(Sizes::default()))
        .clone();
    std::thread::Builder::new()
        .name("aof-writer".into())
        .spawn(move || writer(file, rx, fsync, &shared))
        .map_err(|e| format!("can't start the AOF writer: {e}"))?;
    Ok(Link { tx, fsync })
}

/// BGREWRITEAOF, and turning the AOF on at run time (`start`): a new base from a snapshot of
/// every shard at one moment and a new increment file from that same moment, without fork.
/// Under shared locks on every key of every shard (whose grants hand every change made before
/// to the writer), the writer moves to the new increment file (or, starting, a writer starts
/// on it and every shard begins logging), the manifest names the old files and the new
/// increment, and the shards begin their snapshots; the locks go, the shards write the
/// snapshot as the new base, then the manifest names the new base and increment only and the
/// old files are removed. A failure leaves a manifest that still names everything needed.
pub async fn rewrite(shard: &Shard, start: bool) -> Result<(), String> {
    let g = &shard.global;
    let config = shard.db.borrow().config.clone();
    let dir = dir_of(&config);
    let name = file_name(&config);
    let manifest_path = dir.join(format!("{name}.manifest"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("can't create {}: {e}", dir.display()))?;
    let old = match crate::global::lock(&g.aof.manifest).clone() {
        Some(m) => m,
        None => Manifest::read(&manifest_path)?.unwrap_or(Manifest {
            base: None,
            base_seq: 0,
            incr: Vec::new(),
            history: Vec::new(),
        }),
    };
    let incr_seq = old.incr.last().map_or(0, |l| l.1) + 1;
    let base_seq = old.base_seq + 1;
    let new_incr = format!("{name}.{incr_seq}.incr.aof");
    let preamble = config.get("aof-use-rdb-preamble") != Some("no");
    let new_base = if preamble {
        format!("{name}.{base_seq}.base.rdb")
    } else {
        format!("{name}.{base_seq}.base.aof")
    };
    let next = open_append(&dir.join(&new_incr))?;
    let started = Instant::now();
    for s in 0..shard.n {
        shard
            .lock(s, vec![crate::shard::locks::EVERY_KEY], false)
            .await;
    }
    let aof_on = crate::global::lock(&g.aof.link).is_some();
    let cut = async {
        if !start && !aof_on {
            // The AOF is off: a base only (as Redis rewrites without turning the AOF on).
            return Ok(());
        }
        if start {
            let fsync = Fsync::parse(config.get("appendfsync").unwrap_or("everysec"));
            let link = spawn_writer(next, fsync)?;
            *crate::global::lock(&g.aof.link) = Some(link.clone());
            crate::admin::everywhere(shard, move |sh| {
                sh.db.borrow_mut().set_change_log(true);
                *sh.aof.borrow_mut() = Some(link.clone());
            })
            .await;
        } else {
            let link = crate::global::lock(&g.aof.link).clone();
            let Some(link) = link else {
                return Err("the AOF is off".to_string());
            };
            let (done, rx) = oneshot::channel();
            link.tx
                .send(Msg::Rotate(next, done))
                .map_err(|_| "the AOF writer stopped".to_string())?;
            let _ = rx.await;
        }
        let mut interim = old.clone();
        interim.incr.push((new_incr.clone(), incr_seq));
        write_atomically(&manifest_path, TEMP, interim.text().as_bytes())
            .map_err(|e| format!("can't write {}: {e}", manifest_path.display()))?;
        *crate::global::lock(&g.aof.manifest) = Some(interim);
        Ok(())
    }
    .await;
    if let Err(e) = cut {
        for s in 0..shard.n {
            shard
                .unlock(s, vec![crate::shard::locks::EVERY_KEY], false)
                .await;
        }
        return Err(e);
    }
    let aux = vec![("redis-bits", b"64".to_vec()), ("aof-base", b"1".to_vec())];
    let written = super::snapshot::write_as(
        shard,
        super::snapshot::Target::File(
            dir.join(&new_base),
            super::snapshot::incremental(shard, "aof-rewrite-incremental-fsync"),
        ),
        aux,
        super::Cut::Release,
        !preamble,
        || {},
    )
    .await?;
    let incr = if start || aof_on {
        vec![(new_incr, incr_seq)]
    } else {
        let _ = std::fs::remove_file(dir.join(&new_incr));
        Vec::new()
    };
    let done = Manifest {
        base: Some(new_base.clone()),
        base_seq,
        incr,
        history: Vec::new(),
    };
    write_atomically(&manifest_path, TEMP, done.text().as_bytes())
        .map_err(|e| format!("can't write {}: {e}", manifest_path.display()))?;
    for f in old.base.iter().chain(old.incr.iter().map(|i| &i.0)) {
        let _ = std::fs::remove_file(dir.join(f));
    }
    *crate::global::lock(&g.aof.manifest) = Some(done);
    let (w, _) = writer_report();
    g.aof.written_at.store(w, Ordering::Relaxed);
    g.aof.base_size.store(written.bytes, Ordering::Relaxed);
    g.aof.current_size.store(written.bytes, Ordering::Relaxed);
    g.aof.rewrites.fetch_add(1, Ordering::Relaxed);
    g.aof
        .last_rewrite_secs
        .store(started.elapsed().as_secs(), Ordering::Relaxed);
    crate::log!(2, "Background AOF rewrite finished successfully");
    Ok(())
}

/// How long the writer gathers changes between writes when nobody waits for a sync.
const GATHER: Duration = Duration::from_millis(1);

/// What the writer thread reports (it outlives no `Global` borrow).
#[derive(Default)]
struct Sizes {
    written: AtomicU64,
    failed: AtomicBool,
    /// The system's text of the last write error, while writes fail.
    error: Mutex<Option<String>>,
}

/// The error text of the AOF's last write, while writes to it fail (Redis's `strerror`).
pub fn write_error() -> Option<String> {
    let sizes = crate::global::lock(&SIZES).clone()?;
    if !sizes.failed.load(Ordering::Relaxed) {
        return None;
    }
    let e = crate::global::lock(&sizes.error).clone();
    e
}

/// Appends all of `bytes` to `file`, whose length is `len`; on an error the file is cut back
/// to `len` (no half command is left in it), or, when that fails too, `bytes` loses what did
/// reach the file, so a retry never writes anything twice.
fn append(file: &mut std::fs::File, len: &mut u64, bytes: &mut Vec<u8>) -> std::io::Result<()> {
    let mut done = 0;
    let r = loop {
        if done == bytes.len() {
            break Ok(());
        }
        match file.write(&bytes[done..]) {
            Ok(0) => break Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    match r {
        Ok(()) => {
            *len += done as u64;
            bytes.clear();
            Ok(())
        }
        Err(e) => {
            if done > 0 && file.set_len(*len).is_err() {
                *len += done as u64;
                bytes.drain(..done);
            }
            Err(e)
        }
    }
}

static SIZES: Mutex<Option<Arc<Sizes>>> = Mutex::new(None);

/// Bytes written by the writer since start, and whether its last write failed.
pub fn writer_report() -> (u64, bool) {
    crate::global::lock(&SIZES)
        .as_ref()
        .map_or((0, false), |s| {
            (
                s.written.load(Ordering::Relaxed),
                s.failed.load(Ordering::Relaxed),
            )
        })
}

/// The writer thread: appends what the shards send, syncs as the policy says, answers sync
/// requests after the sync that covers them. A failed write is retried with the next batch.
fn writer(mut file: std::fs::File, rx: mpsc::Receiver<Msg>, mut fsync: Fsync, sizes: &Sizes) {
    let mut pending: Vec<u8> = Vec::new();
    let mut len = file.metadata().map_or(0, |m| m.len());
    let mut unsynced = false;
    let mut last_sync = Instant::now();
    loop {
        let first = match fsync {
            Fsync::EverySec => {
                let wait = Duration::from_secs(1).saturating_sub(last_sync.elapsed());
                match rx.recv_timeout(wait.max(Duration::from_millis(1))) {
                    Ok(m) => Some(m),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            _ => match rx.recv() {
                Ok(m) => Some(m),
                Err(_) => break,
            },
        };
        let mut tickets = Vec::new();
        let mut stop = None;
        let mut next = first;
        while let Some(m) = next {
            match m {
                Msg::Chunk(c) => pending.extend_from_slice(&c),
                Msg::Sync(t) => tickets.push(t),
                Msg::Stop(done) => {
                    stop = Some(done);
                    break;
                }
                Msg::Policy(p) => fsync = p,
                Msg::Rotate(next_file, done) => {
                    // Everything before the rotation goes to the old file, synced.
                    let ok =
                        append(&mut file, &mut len, &mut pending).and_then(|()| file.sync_data());
                    if let Err(e) = ok {
                        crate::log!(3, "Error finishing the AOF increment file: {e}");
                    }
                    pending.clear();
                    unsynced = false;
                    file = next_file;
                    len = file.metadata().map_or(0, |m| m.len());
                    let _ = done.send(());
                }
            }
            if pending.len() > 64 << 20 {
                break;
            }
            next = rx.try_recv().ok();
        }
        if !pending.is_empty() {
            let n = pending.len() as u64;
            match append(&mut file, &mut len, &mut pending) {
                Ok(()) => {
                    sizes.written.fetch_add(n, Ordering::Relaxed);
                    if sizes.failed.swap(false, Ordering::Relaxed) {
                        crate::log!(2, "AOF write error looks solved, the AOF is written again.");
                    }
                    unsynced = true;
                }
                Err(e) => {
                    if fsync == Fsync::Always {
                        // Replies wait for this write: nothing can be answered, as in Redis.
                        crate::log!(
                            3,
                            "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting... ({e})"
                        );
                        std::process::exit(1);
                    }
                    *crate::global::lock(&sizes.error) = Some(super::strerror(&e));
                    if !sizes.failed.swap(true, Ordering::Relaxed) {
                        crate::log!(3, "Error writing to the AOF file: {e}");
                    }
                    // Nothing is answered until it is written.
                    std::thread::sleep(Duration::from_millis(100));
                    for t in tickets {
                        drop(t);
                    }
                    continue;
                }
            }
        }
        let due = match fsync {
            Fsync::Always => !tickets.is_empty(),
            Fsync::EverySec => last_sync.elapsed() >= Duration::from_secs(1),
            Fsync::No => false,
        };
        if unsynced && due {
            if let Err(e) = file.sync_data() {
                crate::log!(3, "Error syncing the AOF file: {e}");
            }
            unsynced = false;
            last_sync = Instant::now();
        } else if due {
            last_sync = Instant::now();
        }
        for t in tickets {
            let _ = t.send(());
        }
        if let Some(done) = stop {
            let _ = file.write_all(&pending);
            let _ = file.sync_data();
            let _ = done.send(());
            return;
        }
        if fsync != Fsync::Always {
            // Gather for a millisecond: one write for all that came meanwhile, and no
            // wake-up for the shards to pay on each send (nobody waits in `recv`).
            std::thread::sleep(GATHER);
        }
    }
    let _ = file.write_all(&pending);
    let _ = file.sync_data();
}

/// CONFIG SET appendfsync: the writer, then every shard, take the new policy (the writer
/// first, so that it answers the sync requests `always` sends from then on).
pub async fn fsync_changed(shard: &Shard) {
    let want = Fsync::parse(
        shard
            .db
            .borrow()
            .config
            .get("appendfsync")
            .unwrap_or("everysec"),
    );
    {
        let mut global = crate::global::lock(&shard.global.aof.link);
        let Some(link) = global.as_mut() else {
            return;
        };
        if link.fsync == want {
            return;
        }
        let _ = link.tx.send(Msg::Policy(want));
        link.fsync = want;
    }
    crate::admin::everywhere(shard, move |sh| {
        sh.flush_changes();
        if let Some(l) = sh.aof.borrow_mut().as_mut() {
            l.fsync = want;
        }
    })
    .await;
}

/// Turns the AOF off at run time (CONFIG SET appendonly no): with every key of every shard
/// locked, the shards stop logging and hand over what they hold; the writer writes, syncs and
/// ends.
pub async fn turn_off(shard: &Shard) {
    for s in 0..shard.n {
        shard
            .lock(s, vec![crate::shard::locks::EVERY_KEY], false)
            .await;
    }
    crate::admin::everywhere(shard, |sh| {
        sh.flush_changes();
        let feeding = sh.global.repl.feeding.load(Ordering::Relaxed);
        sh.db.borrow_mut().set_change_log(feeding);
        *sh.aof.borrow_mut() = None;
    })
    .await;
    stop(&shard.global);
    for s in 0..shard.n {
        shard
            .unlock(s, vec![crate::shard::locks::EVERY_KEY], false)
            .await;
    }
}

/// At shutdown: everything the shards sent is written and synced before the process ends
/// (as Redis syncs its AOF on the way out).
pub fn stop(global: &crate::global::Global) {
    let Some(link) = crate::global::lock(&global.aof.link).take() else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    if link.tx.send(Msg::Stop(tx)).is_ok() {
        let _ = rx.recv_timeout(Duration::from_secs(30));
    }
}

impl Shard {
    /// Sends to the AOF writer the changes held back for the next sync request (see
    /// [`Shard::persist_barrier`]), then `bytes`, changes taken from this shard's store.
    pub fn send_changes(&self, bytes: Option<Vec<u8>>) {
        if let Some(b) = bytes.as_deref() {
            if self.global.repl.feeding.load(Ordering::Relaxed) {
                crate::repl::feed(&self.global, b);
            }
        }
        let link = self.aof.borrow();
        let Some(link) = link.as_ref() else {
            return;
        };
        let held = std::mem::take(&mut *self.aof_held.borrow_mut());
        if !held.is_empty() {
            let _ = link.tx.send(Msg::Chunk(held));
        }
        if let Some(bytes) = bytes {
            let _ = link.tx.send(Msg::Chunk(bytes));
            self.aof_sent.set(self.aof_sent.get() + 1);
        }
    }

    /// Hands this shard's logged changes to the AOF writer now (after any held back, so the
    /// order holds).
    pub fn flush_changes(&self) {
        if self.aof.borrow().is_some() || self.global.repl.feeding.load(Ordering::Relaxed) {
            let bytes = self.db.borrow_mut().take_changes();
            self.send_changes(bytes);
        }
    }

    /// Notes that a write this shard coordinated ran on other shards: the next barrier under
    /// `appendfsync always` waits for a sync even if this shard logged nothing itself.
    pub fn note_remote_writes(&self) {
        if self.aof.borrow().is_some() {
            self.aof_sent.set(self.aof_sent.get() + 1);
        }
    }

    /// Before replies leave: the changes logged so far go to the writer and, under
    /// `appendfsync always`, are on disk. With the AOF off, [`Shard::persist_now`] alone.
    pub async fn persist_barrier(&self) {
        if self.persist_now() {
            return;
        }
        self.persist_wait().await;
    }

    /// [`Shard::persist_barrier`] where nothing may have to be waited for (no AOF): the
    /// changes go to the replicas now, and `true`. `false`: the AOF is on, await the barrier.
    /// (Its own call: a host on the hot path skips the barrier's future, some 20 instructions a
    /// batch.)
    #[inline]
    pub fn persist_now(&self) -> bool {
        if self.aof.borrow().is_some() {
            return false;
        }
        if self.global.repl.feeding.load(Ordering::Relaxed) {
            self.flush_changes();
        }
        true
    }

    /// What [`Shard::persist_now`] and then [`Shard::persist_wait`] do, when that needs no
    /// wait: `false` (nothing done) under `appendfsync always`.
    pub fn persist_fast(&self) -> bool {
        let fsync = self.aof.borrow().as_ref().map(|l| l.fsync);
        match fsync {
            None => self.persist_now(),
            Some(Fsync::Always) => false,
            Some(_) => {
                self.flush_changes();
                true
            }
        }
    }

    /// [`Shard::persist_barrier`] with the AOF on.
    pub async fn persist_wait(&self) {
        let Some(fsync) = self.aof.borrow().as_ref().map(|l| l.fsync) else {
            return;
        };
        if fsync != Fsync::Always {
            self.flush_changes();
            return;
        }
        // Under `always` the changes wait here for the next sync request, which carries them:
        // the writer then wakes once per group of replies, not once per connection.
        if let Some(bytes) = self.db.borrow_mut().take_changes() {
            if self.global.repl.feeding.load(Ordering::Relaxed) {
                crate::repl::feed(&self.global, &bytes);
            }
            self.aof_held.borrow_mut().extend_from_slice(&bytes);
            self.aof_sent.set(self.aof_sent.get() + 1);
        }
        let target = self.aof_sent.get();
        loop {
            let notified = self.aof_synced_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.aof_synced.get() >= target {
                return;
            }
            // One sync request in flight per shard: whoever comes while it runs waits for it,
            // then one request covers them all (group commit, as Redis's one fsync per loop).
            let in_flight = self.aof_asked.get() > self.aof_synced.get();
            if self.aof_asked.get() < target && !in_flight {
                let target = self.aof_sent.get();
                self.aof_asked.set(target);
                let (t, rx) = oneshot::channel();
                self.send_changes(None);
                let sent = self.aof.borrow().as_ref().map(|l| l.tx.send(Msg::Sync(t)));
                let Some(me) = self.rc() else {
                    return;
                };
                if !matches!(sent, Some(Ok(()))) {
                    // The writer is gone (shutting down).
                    self.aof_asked.set(self.aof_synced.get());
                    return;
                }
                // The answer is awaited apart, so that no waiter's end can strand the others.
                tokio::task::spawn_local(async move {
                    if rx.await.is_ok() {
                        me.aof_synced.set(me.aof_synced.get().max(target));
                    } else {
                        me.aof_asked.set(me.aof_synced.get());
                    }
                    me.aof_synced_notify.notify_waiters();
                });
            }
            notified.await;
            if self.aof.borrow().is_none() {
                return;
            }
        }
    }
}
