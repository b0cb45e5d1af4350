//! RDB snapshots: SAVE, BGSAVE (and BGSAVE SCHEDULE), the `save` policy, a save at
//! SHUTDOWN as Redis decides, DEBUG RELOAD, and loading the file at start. The file format is
//! `kvcore::rdb`; a snapshot of every shard at one moment, written while they all keep
//! serving, is [`snapshot`]; this module decides when to save and keeps the counters INFO
//! shows.
//!
//! SAVE and BGSAVE write the same way: without fork, each shard walking its own keys between
//! its batches. SAVE answers when the file is in place; BGSAVE as soon as the snapshot's moment
//! is taken. Neither stops the other clients.

pub mod aof;
pub mod snapshot;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use kvcore::rdb::{self, LoadedKey};
use kvcore::resp::ReplyWriter;

use crate::admin::everywhere;
use crate::coord::route;
use crate::options::Options;
use crate::shard::locks::EVERY_KEY;
use crate::shard::Shard;
pub use snapshot::{write_as as write_snapshot, Cut, Target};

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Seconds after a failed background save before the `save` policy tries again (Redis's
/// CONFIG_BGSAVE_RETRY_DELAY).
const RETRY_DELAY_SECS: u64 = 5;

/// The state of RDB saving (INFO persistence).
pub struct RdbState {
    /// A save is running (one at a time).
    pub in_progress: AtomicBool,
    /// BGSAVE SCHEDULE asked for one after the running save.
    pub scheduled: AtomicBool,
    /// When the running save started (Unix ms).
    pub started_ms: AtomicU64,
    /// Seconds the last save took (-1 before any).
    pub last_secs: AtomicI64,
    /// When the last save was tried (Unix seconds).
    pub last_try: AtomicU64,
    /// Keys at the running save's moment.
    pub keys_total: AtomicU64,
    /// Keys the running save's walk has visited.
    pub keys_processed: AtomicU64,
    /// Unix seconds of the last successful save (start time before any).
    pub last_save: AtomicU64,
    /// Saves done since start (INFO `rdb_saves`).
    pub saves: AtomicU64,
    /// Whether the last save failed (INFO `rdb_last_bgsave_status`).
    pub failed: AtomicBool,
}

impl Default for RdbState {
    fn default() -> Self {
        RdbState {
            in_progress: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
            started_ms: AtomicU64::new(0),
            last_secs: AtomicI64::new(-1),
            last_try: AtomicU64::new(0),
            keys_total: AtomicU64::new(0),
            keys_processed: AtomicU64::new(0),
            last_save: AtomicU64::new(unix_secs()),
            saves: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        }
    }
}

/// `dir` of a configuration.
pub fn dir_of_config(config: &kvcore::config::Config) -> PathBuf {
    PathBuf::from(config.get("dir").unwrap_or("."))
}

/// `dir`/`dbfilename` of a configuration.
fn file_of(config: &kvcore::config::Config) -> PathBuf {
    dir_of_config(config).join(config.get("dbfilename").unwrap_or("dump.rdb"))
}

/// Writes `bytes` to `path` so that a crash leaves the old file or the new one, never a mix:
/// a temporary file beside it (`tmp_name`), synced, then [`install`]ed.
pub fn write_atomically(path: &Path, tmp_name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir_of_file(path).join(tmp_name);
    let r = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        install(&tmp, path)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// An I/O error as C's `strerror` words it (Rust adds " (os error N)"), for texts Redis
/// words that way.
pub fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Where the `aclfile` `name` is: a relative name in `dir`, where Redis, which changes to
/// `dir` at the start, finds it.
pub fn acl_file_path(config: &kvcore::config::Config, name: &str) -> PathBuf {
    dir_of_config(config).join(name)
}

/// The text of the ACL file `path` (ACL LOAD, and the start with an `aclfile`); `Err`: Redis's
/// words for a file it cannot open, naming it `name`, as it was configured.
pub fn read_acl_file(path: &Path, name: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{name}': {}",
            strerror(&e)
        )
    })
}

/// ACL SAVE: the users as they are now, written over the ACL file at `path` (a synced
/// temporary file renamed over it, as Redis does).
pub fn save_acl_file(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let tmp = format!(
        "{}.tmp-{}",
        path.file_name()
            .map_or("acl".into(), |n| n.to_string_lossy()),
        std::process::id()
    );
    write_atomically(path, &tmp, text)
}

/// Renames the synced file `tmp` over `path` and syncs their directory, so the rename itself
/// survives a crash.
pub fn install(tmp: &Path, path: &Path) -> std::io::Result<()> {
    std::fs::rename(tmp, path)?;
    std::fs::File::open(dir_of_file(path))?.sync_all()
}

/// The directory a file is in (`.` for a bare name).
pub fn dir_of_file(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The aux fields of a file written now (or sent to a replica).
pub(crate) fn aux_fields() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("redis-bits", b"64".to_vec()),
        ("ctime", unix_secs().to_string().into_bytes()),
        (
            "used-mem",
            crate::alloc::sample_peak().to_string().into_bytes(),
        ),
        ("aof-base", b"0".to_vec()),
    ]
}

/// Why a save did not happen.
pub enum SaveError {
    /// Another save is running.
    InProgress,
    /// The save failed: what happened.
    Failed(String),
}

/// Claims the one snapshot slot (one snapshot at a time walks the shards: a save, a rewrite or
/// a replica's full sync); false while one runs.
pub(crate) fn claim(shard: &Shard) -> bool {
    !shard.global.rdb.in_progress.swap(true, Ordering::AcqRel)
}

/// Gives back the slot [`claim`] took.
pub(crate) fn release(g: &crate::global::Global) {
    g.rdb.in_progress.store(false, Ordering::Release);
}

/// Runs a save that holds the slot ([`claim`]) to its end, keeps the counters and releases
/// the slot. `on_cut` runs once the snapshot's moment is taken. As in Redis, only a failed
/// background save marks the last save failed (and so refuses writes); any success clears it.
async fn run_save(
    shard: &Shard,
    cut: Cut,
    background: bool,
    on_cut: impl FnOnce(),
) -> Result<(), String> {
    let g = &shard.global;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    g.rdb.started_ms.store(now_ms, Ordering::Relaxed);
    g.rdb.last_try.store(now_ms / 1000, Ordering::Relaxed);
    let keys: usize = everywhere(shard, |sh| sh.db.borrow().key_count())
        .await
        .iter()
        .sum();
    g.rdb.keys_total.store(keys as u64, Ordering::Relaxed);
    g.rdb.keys_processed.store(0, Ordering::Relaxed);
    let path = file_of(&shard.db.borrow().config);
    let started = std::time::Instant::now();
    let r = snapshot::write(shard, path, aux_fields(), cut, on_cut).await;
    g.rdb
        .last_secs
        .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
    let ok = r.is_ok();
    let mark = ok || background;
    if mark {
        g.rdb.failed.store(!ok, Ordering::Relaxed);
    }
    let at_cut = match &r {
        Ok(w) => {
            crate::log!(
                1,
                "RDB: {} bytes written in {:.3} seconds",
                w.bytes,
                started.elapsed().as_secs_f64()
            );
            w.dirty_at_cut.clone()
        }
        Err(_) => Vec::new(),
    };
    everywhere(shard, move |sh| {
        let mut db = sh.db.borrow_mut();
        if mark {
            db.rdb_failed = !ok;
        }
        if let Some(d) = at_cut.get(sh.id) {
            db.stats.dirty = db.stats.dirty.saturating_sub(*d);
        }
    })
    .await;
    if ok {
        g.rdb.last_save.store(unix_secs(), Ordering::Relaxed);
        g.rdb.saves.fetch_add(1, Ordering::Relaxed);
    }
    g.rdb.started_ms.store(0, Ordering::Relaxed);
    release(g);
    r.map(|_| ())
}

/// SAVE: the file written at this moment, answered once it is in place (the other clients
/// are served meanwhile).
pub async fn save(shard: &Shard) -> Result<(), SaveError> {
    if !claim(shard) {
        return Err(SaveError::InProgress);
    }
    match run_save(shard, Cut::Lock, false, || {}).await {
        Ok(()) => {
            crate::log!(2, "DB saved on disk");
            Ok(())
        }
        Err(e) => Err(SaveError::Failed(e)),
    }
}

/// Starts a background save; resolves once its moment is taken (what BGSAVE answers after).
/// False when a save is running.
pub async fn start_bgsave(shard: &Shard) -> bool {
    let Some(me) = shard.rc() else {
        return false;
    };
    if !claim(shard) {
        return false;
    }
    crate::log!(2, "Background saving started");
    let (cut_tx, cut_rx) = futures_channel::oneshot::channel::<()>();
    tokio::task::spawn_local(async move {
        match run_save(&me, Cut::Lock, true, move || {
            let _ = cut_tx.send(());
        })
        .await
        {
            Ok(()) => crate::log!(2, "Background saving terminated with success"),
            Err(e) => crate::log!(3, "Background saving error: {e}"),
        }
    });
    let _ = cut_rx.await;
    true
}

/// FLUSHALL with save points: the file written at once (after a save that runs), as Redis
/// writes it in FLUSHALL; `held`: a transaction holds every lock, so a background save is
/// scheduled instead.
pub async fn save_after_flush(shard: &Shard, held: bool) {
    if held {
        shard.global.rdb.scheduled.store(true, Ordering::Relaxed);
        return;
    }
    claim_when_free(shard).await;
    if let Err(e) = run_save(shard, Cut::Lock, false, || {}).await {
        crate::log!(3, "Failed saving the DB after FLUSHALL: {e}");
    }
}

/// BGSAVE [SCHEDULE]. `in_exec`: run by EXEC, whose locks the save's moment would wait for;
/// as Redis does inside EXEC, the save is scheduled (unless one is running).
pub async fn bgsave(shard: &Shard, args: &[&[u8]], w: &mut ReplyWriter<'_>, in_exec: bool) {
    let schedule = match args.get(1) {
        None => false,
        Some(a) if args.len() == 2 && a.eq_ignore_ascii_case(b"SCHEDULE") => true,
        Some(_) => {
            w.error(b"ERR syntax error");
            return;
        }
    };
    let g = &shard.global;
    if in_exec {
        if g.rdb.in_progress.load(Ordering::Relaxed) && !g.aof.rewriting.load(Ordering::Relaxed) {
            w.error(b"ERR Background save already in progress");
        } else {
            g.rdb.scheduled.store(true, Ordering::Relaxed);
            w.simple(b"Background saving scheduled");
        }
        return;
    }
    if start_bgsave(shard).await {
        w.simple(b"Background saving started");
    } else if schedule {
        shard.global.rdb.scheduled.store(true, Ordering::Relaxed);
        w.simple(b"Background saving scheduled");
    } else {
        w.error(b"ERR Background save already in progress");
    }
}

/// The `save` policy, once a second on shard 0: a background save when a save point is met
/// (at least its changes, and more than its seconds since the last save) or one was scheduled,
/// not sooner than [`RETRY_DELAY_SECS`] after a failed one.
pub fn cron(shard: &Shard) {
    let g = &shard.global;
    if g.rdb.in_progress.load(Ordering::Relaxed) {
        return;
    }
    if aof_cron(shard) {
        return;
    }
    let Some(me) = shard.rc() else {
        return;
    };
    let points = shard.db.borrow().config.save_points();
    if points.is_empty() && !g.rdb.scheduled.load(Ordering::Relaxed) {
        return;
    }
    tokio::task::spawn_local(async move {
        let g = &me.global;
        let now = unix_secs();
        let may_retry = !g.rdb.failed.load(Ordering::Relaxed)
            || now.saturating_sub(g.rdb.last_try.load(Ordering::Relaxed)) > RETRY_DELAY_SECS;
        if !may_retry {
            return;
        }
        if g.rdb.scheduled.swap(false, Ordering::Relaxed) {
            start_bgsave(&me).await;
            return;
        }
        let dirty: u64 = everywhere(&me, |sh| sh.db.borrow().stats.dirty)
            .await
            .iter()
            .sum();
        let since = now.saturating_sub(g.rdb.last_save.load(Ordering::Relaxed));
        if let Some((secs, changes)) = points
            .iter()
            .find(|&&(secs, changes)| dirty >= changes && since > secs)
        {
            crate::log!(2, "{changes} changes in {secs} seconds. Saving...");
            start_bgsave(&me).await;
        }
    });
}

/// BGREWRITEAOF: a rewrite in the background, or scheduled after the running save (or, as
/// Redis does, after the EXEC that runs it: `in_exec`).
pub async fn bgrewriteaof(shard: &Shard, w: &mut ReplyWriter<'_>, in_exec: bool) {
    let a = &shard.global.aof;
    if a.rewriting.load(Ordering::Relaxed) {
        return w.error(b"ERR Background append only file rewriting already in progress");
    }
    if in_exec || !claim(shard) {
        a.scheduled.store(true, Ordering::Relaxed);
        return w.simple(b"Background append only file rewriting scheduled");
    }
    start_rewrite(shard, false);
    w.simple(b"Background append only file rewriting started");
}

/// Starts a rewrite holding the save slot (claimed by the caller); `start`: the AOF is being
/// turned on.
fn start_rewrite(shard: &Shard, start: bool) {
    let Some(me) = shard.rc() else {
        release(&shard.global);
        return;
    };
    me.global.aof.rewriting.store(true, Ordering::Relaxed);
    crate::log!(2, "Background append only file rewriting started");
    tokio::task::spawn_local(async move {
        let r = aof::rewrite(&me, start).await;
        let a = &me.global.aof;
        a.rewrite_failed.store(r.is_err(), Ordering::Relaxed);
        if let Err(e) = r {
            crate::log!(3, "Background AOF rewrite failed: {e}");
        }
        a.rewriting.store(false, Ordering::Relaxed);
        release(&me.global);
    });
}

/// CONFIG SET appendonly: turning it on starts a rewrite that makes the files and starts
/// logging (answered at once, as Redis does); off stops logging and syncs the file.
pub async fn appendonly_changed(shard: &Shard) {
    let want = shard.db.borrow().config.get("appendonly") == Some("yes");
    let on = crate::global::lock(&shard.global.aof.link).is_some();
    if want && !on {
        claim_when_free(shard).await;
        start_rewrite(shard, true);
    } else if !want && on {
        aof::turn_off(shard).await;
    }
}

/// The AOF's part of the cron: a scheduled rewrite, or one for the file's growth
/// (`auto-aof-rewrite-percentage` over the size after the last rewrite, once past
/// `auto-aof-rewrite-min-size`). Whether one started.
fn aof_cron(shard: &Shard) -> bool {
    let g = &shard.global;
    let a = &g.aof;
    let scheduled = a.scheduled.load(Ordering::Relaxed);
    let on = crate::global::lock(&a.link).is_some();
    let grow = on && {
        let config = &shard.db.borrow().config;
        let pct: u64 = config
            .get("auto-aof-rewrite-percentage")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let min: u64 = config
            .get("auto-aof-rewrite-min-size")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let base = a.base_size.load(Ordering::Relaxed).max(1);
        let (written, _) = aof::writer_report();
        let size = a.current_size.load(Ordering::Relaxed)
            + written.saturating_sub(a.written_at.load(Ordering::Relaxed));
        let growth = (size.saturating_sub(base)) * 100 / base;
        let due = pct > 0 && size > min && growth >= pct;
        if due {
            crate::log!(2, "Starting automatic rewriting of AOF on {growth}% growth");
        }
        due
    };
    if !(scheduled || grow) || !claim(shard) {
        return false;
    }
    a.scheduled.store(false, Ordering::Relaxed);
    start_rewrite(shard, false);
    true
}

/// Waits until no save runs, then claims the slot.
async fn claim_when_free(shard: &Shard) {
    while !claim(shard) {
        crate::timer::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: saves first when asked to, or when save
/// points are configured and NOSAVE is not given; a failed save stops the shutdown unless
/// FORCE. Returns true when the server is going down (the connection then closes).
pub async fn shutdown(shard: &Shard, args: &[&[u8]], w: &mut ReplyWriter<'_>) -> bool {
    let (mut nosave, mut save_asked, mut force, mut abort) = (false, false, false, false);
    for a in &args[1..] {
        let a = a.to_ascii_uppercase();
        match a.as_slice() {
            b"NOSAVE" => nosave = true,
            b"SAVE" => save_asked = true,
            b"NOW" => {}
            b"FORCE" => force = true,
            b"ABORT" => abort = true,
            _ => {
                w.error(b"ERR syntax error");
                return false;
            }
        }
    }
    if (nosave && save_asked) || (abort && args.len() > 2) {
        w.error(b"ERR syntax error");
        return false;
    }
    if abort {
        w.error(b"ERR No shutdown in progress.");
        return false;
    }
    crate::log!(3, "User requested shutdown...");
    let points = !shard.db.borrow().config.save_points().is_empty();
    if save_asked || (points && !nosave) {
        crate::log!(2, "Saving the final RDB snapshot before exiting.");
        claim_when_free(shard).await;
        if let Err(e) = run_save(shard, Cut::Lock, false, || {}).await {
            crate::log!(3, "Error trying to save the DB, can't exit: {e}");
            if !force {
                w.error(b"ERR Errors trying to SHUTDOWN. Check logs.");
                return false;
            }
        }
    }
    shard.global.shutdown.store(true, Ordering::SeqCst);
    true
}

/// The keys of the file at `dir`/`dbfilename`, by the shard that holds them; empty when there
/// is no file. An unreadable or damaged file is an error naming the file, the problem and its
/// offset: the server then does not start.
pub fn load(
    opts: &Options,
    shards: usize,
) -> Result<(Vec<Vec<LoadedKey>>, rdb::LoadStats), String> {
    load_path(&file_of(&opts.store), &opts.store, shards)
}

fn load_path(
    path: &Path,
    config: &kvcore::config::Config,
    shards: usize,
) -> Result<(Vec<Vec<LoadedKey>>, rdb::LoadStats), String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let none = (0..shards).map(|_| Vec::new()).collect();
            return Ok((none, rdb::LoadStats::default()));
        }
        Err(e) => return Err(format!("can't read {}: {e}", path.display())),
    };
    // Room for as many keys as the file could hold at ~24 bytes a key: the lists never
    // regrow (untouched capacity costs address space only).
    let guess = bytes.len() / 24 / shards + 16;
    let mut by_shard: Vec<Vec<LoadedKey>> =
        (0..shards).map(|_| Vec::with_capacity(guess)).collect();
    let store = kvcore::Db::with_config(config.clone());
    let started = std::time::Instant::now();
    let stats = rdb::load_file(
        &bytes,
        store.rdb_limits(),
        store.now_ms(),
        config.databases,
        |k| by_shard[route::shard_of(&k.key, shards)].push(k),
    )
    .map_err(|e| format!("can't load {}: {e}", path.display()))?;
    crate::log!(
        2,
        "DB loaded from disk: {:.3} seconds ({} keys, {} expired)",
        started.elapsed().as_secs_f64(),
        stats.loaded,
        stats.expired
    );
    Ok((by_shard, stats))
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves (unless NOSAVE), empties every database
/// (unless NOFLUSH or MERGE) and loads the file back, with every key of every shard locked
/// meanwhile, as Redis does it with the whole server stopped.
pub async fn debug_reload(shard: &Shard, args: &[&[u8]], w: &mut ReplyWriter<'_>) {
    let (mut save, mut flush, mut merge) = (true, true, false);
    for a in &args[2..] {
        let a = a.to_ascii_uppercase();
        match a.as_slice() {
            b"MERGE" => (flush, merge) = (false, true),
            b"NOFLUSH" => flush = false,
            b"NOSAVE" => save = false,
            _ => {
                w.error(b"ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
                return;
            }
        }
    }
    for s in 0..shard.n {
        shard.lock(s, vec![EVERY_KEY], true).await;
    }
    let r = reload_locked(shard, save, flush, merge).await;
    for s in 0..shard.n {
        shard.unlock(s, vec![EVERY_KEY], true).await;
    }
    match r {
        Ok(()) => {
            crate::log!(2, "DB reloaded by DEBUG RELOAD");
            w.ok();
        }
        Err(e) => {
            crate::log!(3, "DEBUG RELOAD: {e}");
            w.error(e.as_bytes());
        }
    }
}

async fn reload_locked(shard: &Shard, save: bool, flush: bool, merge: bool) -> Result<(), String> {
    if save {
        claim_when_free(shard).await;
        run_save(shard, Cut::Held, false, || {})
            .await
            .map_err(|_| "ERR Error trying to save the DB".to_string())?;
    }
    let config = shard.db.borrow().config.clone();
    let (by_shard, stats) = load_path(&file_of(&config), &config, shard.n)
        .map_err(|_| "ERR Error trying to load the RDB dump, check server logs.".to_string())?;
    // The functions as Redis loads them: flushed first, or merged (a library of the same name
    // replaced), or added (one of the same name fails the load).
    let policy = match (flush, merge) {
        (true, _) => kvcore::function::Policy::Flush,
        (false, true) => kvcore::function::Policy::Replace,
        (false, false) => kvcore::function::Policy::Append,
    };
    let functions = shard.db.borrow().scripts.functions().clone();
    functions.restore(&stats.functions, policy).map_err(|e| {
        crate::log!(
            3,
            "Failed loading the functions: {}",
            String::from_utf8_lossy(&e)
        );
        "ERR Error trying to load the RDB dump, check server logs.".to_string()
    })?;
    let g = &shard.global;
    g.loaded_keys.store(stats.loaded, Ordering::Relaxed);
    g.loaded_expired.store(stats.expired, Ordering::Relaxed);
    let loads = by_shard.into_iter().enumerate().map(|(s, keys)| {
        shard.call(s, move |sh| {
            let mut db = sh.db.borrow_mut();
            if flush {
                db.flush(None);
            }
            for k in keys {
                db.load_key(k);
            }
        })
    });
    futures_util::future::join_all(loads).await;
    Ok(())
}

/// INFO's persistence section.
pub fn info_section(shard: &Shard, dirty: u64) -> String {
    use std::fmt::Write as _;
    let g = &shard.global;
    let mut s = String::from("# Persistence\r\n");
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = write!(s, "{k}:{v}\r\n");
    };
    line("loading", &0);
    for k in [
        "async_loading",
        "current_cow_peak",
        "current_cow_size",
        "current_cow_size_age",
    ] {
        line(k, &0);
    }
    line("current_fork_perc", &"0.00");
    let r = &g.rdb;
    let running = r.in_progress.load(Ordering::Relaxed);
    let keys_total = if running {
        r.keys_total.load(Ordering::Relaxed)
    } else {
        0
    };
    let processed = if running {
        r.keys_processed.load(Ordering::Relaxed).min(keys_total)
    } else {
        0
    };
    line("current_save_keys_processed", &processed);
    line("current_save_keys_total", &keys_total);
    line("rdb_changes_since_last_save", &dirty);
    line("rdb_bgsave_in_progress", &u8::from(running));
    line("rdb_last_save_time", &r.last_save.load(Ordering::Relaxed));
    let failed = r.failed.load(Ordering::Relaxed);
    line("rdb_last_bgsave_status", &if failed { "err" } else { "ok" });
    line(
        "rdb_last_bgsave_time_sec",
        &r.last_secs.load(Ordering::Relaxed),
    );
    let started = r.started_ms.load(Ordering::Relaxed);
    let current = if running && started != 0 {
        (unix_secs() * 1000).saturating_sub(started) as i64 / 1000
    } else {
        -1
    };
    line("rdb_current_bgsave_time_sec", &current);
    line("rdb_saves", &r.saves.load(Ordering::Relaxed));
    line("rdb_last_cow_size", &0);
    line(
        "rdb_last_load_keys_expired",
        &g.loaded_expired.load(Ordering::Relaxed),
    );
    line(
        "rdb_last_load_keys_loaded",
        &g.loaded_keys.load(Ordering::Relaxed),
    );
    let aof_on = crate::global::lock(&g.aof.link).is_some();
    let (written, write_failed) = aof::writer_report();
    line("aof_enabled", &u8::from(aof_on));
    let a = &g.aof;
    line(
        "aof_rewrite_in_progress",
        &u8::from(a.rewriting.load(Ordering::Relaxed)),
    );
    line(
        "aof_rewrite_scheduled",
        &u8::from(a.scheduled.load(Ordering::Relaxed)),
    );
    let rewrites = a.rewrites.load(Ordering::Relaxed);
    let last = if rewrites == 0 {
        -1
    } else {
        a.last_rewrite_secs.load(Ordering::Relaxed) as i64
    };
    line("aof_last_rewrite_time_sec", &last);
    line("aof_current_rewrite_time_sec", &-1);
    let failed = a.rewrite_failed.load(Ordering::Relaxed);
    line(
        "aof_last_bgrewrite_status",
        &if failed { "err" } else { "ok" },
    );
    line("aof_rewrites", &rewrites);
    line("aof_rewrites_consecutive_failures", &0);
    line(
        "aof_last_write_status",
        &if write_failed { "err" } else { "ok" },
    );
    line("aof_last_cow_size", &0);
    line("module_fork_in_progress", &0);
    line("module_fork_last_cow_size", &0);
    if aof_on {
        let start = g.aof.current_size.load(Ordering::Relaxed);
        let since = written.saturating_sub(g.aof.written_at.load(Ordering::Relaxed));
        line("aof_current_size", &(start + since));
        line("aof_base_size", &g.aof.base_size.load(Ordering::Relaxed));
        line("aof_pending_rewrite", &0);
        line("aof_buffer_length", &0);
        line("aof_pending_bio_fsync", &0);
        line("aof_delayed_fsync", &0);
    }
    s
}
