//! RDB snapshots: SAVE writes every shard's keys into one file in Redis's format, SHUTDOWN
//! saves as Redis decides, and the server loads the file at start. The file format is
//! `kvcore::rdb`; this module gathers the shards' records and does the file I/O.
//!
//! A save asks every shard for its records at once; each shard serializes its own keys
//! between two of its batches. (The moments of the shards are not one moment: a command
//! spanning shards that runs while a save is gathering can be in the file on one shard and not
//! on another. The fork-free point-in-time snapshot of DESIGN.md is the next step.)

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use kvcore::rdb::{self, DbPart, LoadedKey};
use kvcore::resp::ReplyWriter;

use crate::admin::everywhere;
use crate::coord::route;
use crate::options::Options;
use crate::shard::Shard;

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `dir`/`dbfilename` of a configuration.
fn file_of(config: &kvcore::config::Config) -> PathBuf {
    let dir = config.get("dir").unwrap_or(".");
    Path::new(dir).join(config.get("dbfilename").unwrap_or("dump.rdb"))
}

/// Writes `bytes` to `path` so that a crash leaves the old file or the new one, never a mix:
/// a temporary file in the same directory, synced, renamed over `path`, the directory synced.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!("temp-{}.rdb", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(&dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// SAVE: every shard's keys, merged database by database, written to `dir`/`dbfilename`.
pub async fn save(shard: &Shard) -> Result<(), String> {
    let parts = everywhere(shard, |sh| sh.db.borrow().rdb_parts()).await;
    let mut merged: Vec<DbPart> = Vec::new();
    for shard_parts in parts {
        if merged.len() < shard_parts.len() {
            merged.resize_with(shard_parts.len(), DbPart::default);
        }
        for (m, p) in merged.iter_mut().zip(shard_parts) {
            m.keys += p.keys;
            m.expires += p.expires;
            m.version = m.version.max(p.version);
            m.records.extend_from_slice(&p.records);
        }
    }
    let aux = [
        ("redis-bits", b"64".to_vec()),
        ("ctime", unix_secs().to_string().into_bytes()),
        (
            "used-mem",
            crate::alloc::sample_peak().to_string().into_bytes(),
        ),
        ("aof-base", b"0".to_vec()),
    ];
    let bytes = rdb::file(&merged, &aux);
    let path = file_of(&shard.db.borrow().config);
    let g = &shard.global;
    match write_atomically(&path, &bytes) {
        Ok(()) => {
            g.last_save.store(unix_secs(), Ordering::Relaxed);
            g.saves.fetch_add(1, Ordering::Relaxed);
            g.save_failed.store(false, Ordering::Relaxed);
            everywhere(shard, |sh| sh.db.borrow_mut().stats.dirty = 0).await;
            crate::log!(2, "DB saved on disk");
            Ok(())
        }
        Err(e) => {
            g.save_failed.store(true, Ordering::Relaxed);
            Err(format!("{}: {e}", path.display()))
        }
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
    let points = shard
        .db
        .borrow()
        .config
        .get("save")
        .is_some_and(|s| !s.trim().is_empty());
    if save_asked || (points && !nosave) {
        crate::log!(2, "Saving the final RDB snapshot before exiting.");
        if let Err(e) = save(shard).await {
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
    let path = file_of(&opts.store);
    let mut by_shard: Vec<Vec<LoadedKey>> = (0..shards).map(|_| Vec::new()).collect();
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((by_shard, rdb::LoadStats::default()))
        }
        Err(e) => return Err(format!("can't read {}: {e}", path.display())),
    };
    let store = kvcore::Db::with_config(opts.store.clone());
    let started = std::time::Instant::now();
    let stats = rdb::load_file(
        &bytes,
        store.rdb_limits(),
        store.now_ms(),
        opts.store.databases,
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
    line("current_save_keys_processed", &0);
    line("current_save_keys_total", &0);
    line("rdb_changes_since_last_save", &dirty);
    line("rdb_bgsave_in_progress", &0);
    line("rdb_last_save_time", &g.last_save.load(Ordering::Relaxed));
    let failed = g.save_failed.load(Ordering::Relaxed);
    line("rdb_last_bgsave_status", &if failed { "err" } else { "ok" });
    line("rdb_last_bgsave_time_sec", &-1);
    line("rdb_current_bgsave_time_sec", &-1);
    line("rdb_saves", &g.saves.load(Ordering::Relaxed));
    line("rdb_last_cow_size", &0);
    line(
        "rdb_last_load_keys_expired",
        &g.loaded_expired.load(Ordering::Relaxed),
    );
    line(
        "rdb_last_load_keys_loaded",
        &g.loaded_keys.load(Ordering::Relaxed),
    );
    line("aof_enabled", &0);
    line("aof_rewrite_in_progress", &0);
    line("aof_rewrite_scheduled", &0);
    line("aof_last_rewrite_time_sec", &-1);
    line("aof_current_rewrite_time_sec", &-1);
    line("aof_last_bgrewrite_status", &"ok");
    line("aof_rewrites", &0);
    line("aof_rewrites_consecutive_failures", &0);
    line("aof_last_write_status", &"ok");
    line("aof_last_cow_size", &0);
    line("module_fork_in_progress", &0);
    line("module_fork_last_cow_size", &0);
    s
}
