//! Commands that concern every shard or the whole server: KEYS, SCAN, DBSIZE, RANDOMKEY,
//! FLUSHDB, FLUSHALL, SWAPDB, CONFIG SET/RESETSTAT, INFO, CLIENT LIST/INFO/KILL, SHUTDOWN.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use futures_util::future::join_all;
use kvcore::commands::{flags, keys_api::parse_scan, CommandSpec};
use kvcore::config::UserLines;
use kvcore::resp::ReplyWriter;
use kvcore::{Session, ShardStats};

use crate::global::{lock, Class, ClientEntry};
use crate::shard::Shard;

/// Bits of a SCAN cursor that carry the shard index.
const SHARD_SHIFT: u32 = 56;

fn is(a: &[u8], name: &str) -> bool {
    a.eq_ignore_ascii_case(name.as_bytes())
}

/// The commands [`is_special`] may answer here, whatever their arguments and the number of
/// shards: any other never is.
pub fn may_be_special(spec: &CommandSpec) -> bool {
    spec.has(flags::ALL_KEYS)
        || matches!(
            spec.name,
            "info"
                | "swapdb"
                | "slowlog"
                | "latency"
                | "save"
                | "bgsave"
                | "bgrewriteaof"
                | "lastsave"
                | "shutdown"
                | "debug"
                | "memory"
                | "flushall"
                | "client"
                | "config"
                | "acl"
        )
}

/// Whether this command is answered here rather than by one shard's store.
pub fn is_special(spec: &CommandSpec, args: &[&[u8]], n: usize) -> bool {
    let special = is_special_name(spec, args, n);
    debug_assert!(!special || may_be_special(spec), "{} missing", spec.name);
    special
}

fn is_special_name(spec: &CommandSpec, args: &[&[u8]], n: usize) -> bool {
    match spec.name {
        "info" | "swapdb" | "slowlog" | "latency" | "save" | "bgsave" | "bgrewriteaof"
        | "lastsave" | "shutdown" => true,
        "debug" => {
            (args.len() >= 2 && is(args[1], "RELOAD"))
                || (n > 1
                    && args.len() == 3
                    && (is(args[1], "SET-ACTIVE-EXPIRE")
                        || is(args[1], "QUICKLIST-PACKED-THRESHOLD")))
        }
        "memory" => args.len() == 2 && ["STATS", "DOCTOR", "PURGE"].iter().any(|s| is(args[1], s)),
        // The ACL file is the server's to read and write.
        "acl" => args.len() == 2 && (is(args[1], "LOAD") || is(args[1], "SAVE")),
        // With save points, FLUSHALL also writes the (empty) file, whatever the shards.
        "flushall" => true,
        "client" => {
            args.len() >= 2
                && ["LIST", "INFO", "KILL", "PAUSE", "UNPAUSE", "UNBLOCK"]
                    .iter()
                    .any(|s| is(args[1], s))
        }
        "config" => {
            (args.len() == 2 && is(args[1], "REWRITE"))
                || (n > 1 && args.len() >= 2 && (is(args[1], "SET") || is(args[1], "RESETSTAT")))
                // Turning the AOF on or off is the server's work, whatever the shards.
                || (args.len() >= 2
                    && is(args[1], "SET")
                    && args[2..]
                        .iter()
                        .step_by(2)
                        .any(|a| is(a, "appendonly") || is(a, "appendfsync")))
        }
        _ => n > 1 && spec.has(flags::ALL_KEYS),
    }
}

/// Runs `f` on every shard in parallel; results in shard order.
pub(crate) async fn everywhere<R, F>(shard: &Shard, f: F) -> Vec<R>
where
    R: Send + 'static,
    F: Fn(&Shard) -> R + Send + Sync + Clone + 'static,
{
    join_all((0..shard.n).map(|s| {
        let f = f.clone();
        shard.call(s, move |sh: &Shard| {
            sh.db.borrow_mut().refresh_clock();
            f(sh)
        })
    }))
    .await
}

tokio::task_local! {
    /// Set while a transaction that holds every lock it needs runs its commands here.
    pub static LOCKS_HELD: bool;
}

fn locks_held() -> bool {
    LOCKS_HELD.try_with(|h| *h).unwrap_or(false)
}

/// Locks every key of every shard, in ascending order (unless a transaction holds them).
async fn lock_everything(shard: &Shard) {
    if locks_held() {
        return;
    }
    for s in 0..shard.n {
        shard
            .lock(s, vec![crate::shard::locks::EVERY_KEY], true)
            .await;
    }
}

/// Releases what [`lock_everything`] took.
async fn unlock_everything(shard: &Shard) {
    if locks_held() {
        return;
    }
    for s in 0..shard.n {
        shard
            .unlock(s, vec![crate::shard::locks::EVERY_KEY], true)
            .await;
    }
}

/// Runs a command of a client on this shard's store without counting it: the connection
/// counts the special commands it hands here.
fn dispatch_uncounted(shard: &Shard, session: &mut Session, args: &[&[u8]], out: &mut Vec<u8>) {
    session.internal = true;
    shard.db.borrow_mut().dispatch(session, args, out);
    session.internal = false;
}

/// Resident set size in bytes, from /proc.
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Runs a special command; returns true when the connection must close (SHUTDOWN).
pub async fn run(
    shard: &Rc<Shard>,
    session: &mut Session,
    me: &ClientEntry,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> bool {
    let mut w = ReplyWriter {
        out,
        proto: session.proto,
    };
    let db = session.db;
    let name = args[0];
    if is(name, "SHUTDOWN") {
        return crate::persist::shutdown(shard, args, &mut w).await;
    }
    if is(name, "SAVE") {
        match crate::persist::save(shard).await {
            Ok(()) => w.ok(),
            Err(crate::persist::SaveError::InProgress) => {
                w.error(b"ERR Background save already in progress")
            }
            Err(crate::persist::SaveError::Failed(e)) => {
                crate::log!(3, "Failed saving the DB: {e}");
                w.error(b"ERR");
            }
        }
        return false;
    }
    if is(name, "BGSAVE") {
        crate::persist::bgsave(shard, args, &mut w, locks_held()).await;
        return false;
    }
    if is(name, "BGREWRITEAOF") {
        crate::persist::bgrewriteaof(shard, &mut w, locks_held()).await;
        return false;
    }
    if is(name, "DEBUG") && args.len() >= 2 && is(args[1], "RELOAD") {
        crate::persist::debug_reload(shard, args, &mut w).await;
        return false;
    }
    if is(name, "ACL") {
        return acl_file(shard, session, me, args[1], &mut w);
    }
    if is(name, "LASTSAVE") {
        w.int(shard.global.rdb.last_save.load(Ordering::Relaxed) as i64);
        return false;
    }
    if is(name, "INFO") {
        let text = info_text(shard, &args[1..]).await;
        w.verbatim(b"txt", text.as_bytes());
        return false;
    }
    if is(name, "CLIENT") {
        client(shard, me, args, &mut w);
        return false;
    }
    if is(name, "SLOWLOG") {
        slowlog(shard, args, &mut w).await;
        return false;
    }
    if is(name, "LATENCY") {
        latency(shard, args, &mut w).await;
        return false;
    }
    if is(name, "MEMORY") {
        if is(args[1], "PURGE") {
            everywhere(shard, |_| crate::alloc::purge()).await;
            w.ok();
            return false;
        }
        let parts = everywhere(shard, |sh| sh.db.borrow().shard_stats()).await;
        let mut agg = ShardStats::default();
        for p in &parts {
            agg.merge(p);
        }
        let mut d = shard.db.borrow_mut();
        d.host.used_memory = Some(crate::alloc::sample_peak() as u64);
        d.host.peak_memory = Some(crate::alloc::peak() as u64);
        d.host.startup_memory = Some(crate::alloc::startup() as u64);
        d.host.rss = rss_bytes();
        if is(args[1], "STATS") {
            d.memory_stats_with(&agg, &mut w);
        } else {
            let report = d.memory_doctor_with(&agg);
            w.verbatim(b"txt", report.as_bytes());
        }
        return false;
    }
    if is(name, "CONFIG") && is(args[1], "REWRITE") {
        match rewrite_config(shard) {
            Ok(()) => w.ok(),
            Err(e) => w.error(e.as_bytes()),
        }
        return false;
    }
    if is(name, "CONFIG") && args.len() >= 4 && is(args[1], "SET") {
        // (The store checks this too, but not for the internal dispatch below.)
        let names: Vec<String> = args[2..]
            .iter()
            .step_by(2)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let refused = shard
            .db
            .borrow()
            .config
            .protected_among(&names, session.local)
            .map(|n| kvcore::config::ConfigError::Protected(n.to_string()).reply_text());
        if let Some(e) = refused {
            w.error(e.as_bytes());
            return false;
        }
    }
    if is(name, "CONFIG") || is(name, "DEBUG") {
        // Check and apply on this shard first: its answer is the reply; then everywhere else.
        let mut local = Vec::new();
        dispatch_uncounted(shard, session, args, &mut local);
        if local.starts_with(b"+") {
            let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
            let me_id = shard.id;
            everywhere(shard, move |sh| {
                if sh.id != me_id {
                    let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
                    let mut s = Session {
                        authenticated: true,
                        internal: true,
                        ..Session::default()
                    };
                    sh.db.borrow_mut().dispatch(&mut s, &refs, &mut Vec::new());
                }
            })
            .await;
            if is(name, "CONFIG") {
                crate::persist::appendonly_changed(shard).await;
                crate::persist::aof::fsync_changed(shard).await;
            }
        }
        w.out.extend_from_slice(&local);
        return false;
    }
    if is(name, "DBSIZE") {
        let sizes = everywhere(shard, move |sh| sh.db.borrow_mut().keyspace(db).len()).await;
        w.int(sizes.iter().sum::<usize>() as i64);
    } else if is(name, "KEYS") {
        let pattern = args[1].to_vec();
        let parts = everywhere(shard, move |sh| sh.db.borrow().keys_in(db, &pattern)).await;
        w.array_len(parts.iter().map(Vec::len).sum());
        for k in parts.iter().flatten() {
            w.bulk(k);
        }
    } else if is(name, "FLUSHDB") || is(name, "FLUSHALL") {
        // Every key of every shard locked meanwhile: the flush is one moment, and logged once
        // (by this shard's store) after what came before it everywhere.
        lock_everything(shard).await;
        // Let one shard validate the arguments; apply everywhere only when they are good.
        let mut local = Vec::new();
        dispatch_uncounted(shard, session, args, &mut local);
        shard.flush_changes();
        if local.starts_with(b"+") {
            let all = is(name, "FLUSHALL");
            let me_id = shard.id;
            everywhere(shard, move |sh| {
                if sh.id != me_id {
                    sh.db.borrow_mut().flush((!all).then_some(db));
                }
            })
            .await;
        }
        unlock_everything(shard).await;
        if local.starts_with(b"+") {
            // Clients blocked on a consumer group of a flushed stream end (NOGROUP), as Redis
            // unblocks readers of a deleted key; other waiters keep waiting.
            everywhere(shard, |sh| sh.serve_all()).await;
        }
        // As Redis: with save points, FLUSHALL writes the file now, so that a restart does not
        // bring back what it removed (inside a transaction, which holds every lock, the next
        // background save does).
        let points = !shard.db.borrow().config.save_points().is_empty();
        if is(name, "FLUSHALL") && local.starts_with(b"+") && points {
            crate::persist::save_after_flush(shard, locks_held()).await;
        }
        w.out.extend_from_slice(&local);
    } else if is(name, "SWAPDB") {
        // Every shard swaps its part (each checks the arguments the same way), then serves the
        // clients blocked on its keys: what they wait for may be in the other database now.
        // Every key locked meanwhile; logged once, by this shard.
        lock_everything(shard).await;
        let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let me_id = shard.id;
        let replies = everywhere(shard, move |sh| {
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            let mut s = Session {
                authenticated: true,
                internal: true,
                ..Session::default()
            };
            let mut out = Vec::new();
            sh.flush_changes();
            sh.db.borrow_mut().dispatch(&mut s, &refs, &mut out);
            if sh.id != me_id {
                let _ = sh.db.borrow_mut().take_changes();
            }
            sh.serve_all();
            out
        })
        .await;
        unlock_everything(shard).await;
        w.out.extend_from_slice(&replies[0]);
    } else if is(name, "RANDOMKEY") {
        let start = shard.db.borrow_mut().random() as usize % shard.n;
        for i in 0..shard.n {
            let s = (start + i) % shard.n;
            let key = shard
                .call(s, move |sh: &Shard| {
                    let mut d = sh.db.borrow_mut();
                    d.refresh_clock();
                    let mut out = Vec::new();
                    let mut sess = Session {
                        db,
                        authenticated: true,
                        internal: true,
                        ..Session::default()
                    };
                    d.dispatch(&mut sess, &[b"RANDOMKEY"], &mut out);
                    out
                })
                .await;
            if !key.starts_with(b"$-1") {
                w.out.extend_from_slice(&key);
                return false;
            }
        }
        w.null();
    } else if is(name, "SCAN") {
        scan(shard, db, args, &mut w).await;
    }
    false
}

/// INFO's text for these section arguments, with every shard's counters.
pub async fn info_text(shard: &Shard, sections: &[&[u8]]) -> String {
    let histograms = kvcore::commands::info_wants_histograms(sections);
    let parts = everywhere(shard, move |sh| {
        let net = &sh.net;
        let traffic = [
            net.in_bytes.get(),
            net.out_bytes.get(),
            net.reads.get(),
            net.writes.get(),
        ];
        (sh.db.borrow().shard_stats_with(histograms), traffic)
    })
    .await;
    let mut agg = ShardStats::default();
    let mut traffic = [0u64; 4];
    for (p, t) in &parts {
        agg.merge(p);
        for (a, b) in traffic.iter_mut().zip(t) {
            *a += b;
        }
    }
    let g = &shard.global;
    let mut server = server_info(shard, traffic);
    server.persistence = Some(crate::persist::info_section(shard, agg.stats.dirty));
    server.replication = Some(crate::repl::info_section(shard));
    let text = {
        let mut d = shard.db.borrow_mut();
        d.host.server = Some(Box::new(server));
        d.host.connected_clients = g.connected.load(Ordering::Relaxed) as u64;
        d.host.total_connections = g.total_connections.load(Ordering::Relaxed);
        d.host.moved_connections = g.moved_connections.load(Ordering::Relaxed);
        d.host.blocked_clients = g.blocked_clients.load(Ordering::Relaxed);
        d.host.tcp_port = g.port.load(Ordering::Relaxed);
        d.host.used_memory = Some(crate::alloc::sample_peak() as u64);
        d.host.peak_memory = Some(crate::alloc::peak() as u64);
        d.host.startup_memory = Some(crate::alloc::startup() as u64);
        d.host.rss = rss_bytes();
        d.host.shards = shard.n;
        d.info_with(sections, &agg)
    };
    text
}

/// ACL LOAD and ACL SAVE (`sub`), with the `aclfile`; `true` when the client must close after
/// its reply (ACL LOAD removed its user, as Redis closes it).
fn acl_file(
    shard: &Shard,
    session: &Session,
    me: &ClientEntry,
    sub: &[u8],
    w: &mut ReplyWriter<'_>,
) -> bool {
    let (name, path) = {
        let db = shard.db.borrow();
        let name = db.config.get("aclfile").unwrap_or_default().to_string();
        let path = crate::persist::acl_file_path(&db.config, &name);
        (name, path)
    };
    if name.is_empty() {
        w.error(kvcore::commands::NO_ACL_FILE);
        return false;
    }
    let acl = &shard.global.acl;
    if is(sub, "SAVE") {
        match crate::persist::save_acl_file(&path, &acl.file_text()) {
            Ok(()) => w.ok(),
            Err(e) => {
                crate::log!(3, "Writing the ACL file for ACL SAVE: {e}");
                w.error(b"ERR There was an error trying to save the ACLs. Please check the server logs for more information");
            }
        }
        return false;
    }
    let loaded = crate::persist::read_acl_file(&path, &name)
        .map_err(String::into_bytes)
        .and_then(|text| acl.load(&text, &name, me.id));
    match loaded {
        Ok(gone) => {
            // (The clients of users the file no longer has are disconnected as deleted
            // users' are; this one after its reply.)
            w.ok();
            gone.iter().any(|n| n[..] == *session.user.name())
        }
        Err(e) => {
            let mut m = b"ERR ".to_vec();
            m.extend_from_slice(&e);
            w.error(&m);
            false
        }
    }
}

/// CONFIG REWRITE: the file the server started with, brought up to date (see
/// `kvcore::config::Config::rewrite`), replaced atomically: a new file beside it, synced,
/// renamed over it, and the directory synced.
fn rewrite_config(shard: &Shard) -> Result<(), String> {
    let Some(path) = shard.global.opts.config_file.clone() else {
        return Err("ERR The server is running without a config file".into());
    };
    let fail = |e: std::io::Error| format!("ERR Rewriting config file: {e}");
    let old = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(fail(e)),
    };
    let users = shard.global.acl.list();
    let new = {
        let db = shard.db.borrow();
        // The users go in the config file unless an ACL file keeps them.
        let lines = if db.config.get("aclfile").unwrap_or_default().is_empty() {
            UserLines::Write(&users)
        } else {
            UserLines::Drop
        };
        db.config.rewrite_with_users(&old, lines)
    };
    let tmp = format!(".kvserver-rewrite-{}.conf", std::process::id());
    crate::persist::write_atomically(&path, &tmp, new.as_bytes()).map_err(fail)?;
    crate::log!(2, "CONFIG REWRITE executed with success.");
    Ok(())
}

/// What INFO shows about the server beside the store's counters.
fn server_info(shard: &Shard, traffic: [u64; 4]) -> kvcore::ServerInfo {
    let g = &shard.global;
    let (mut pubsub_clients, mut watching_clients) = (0, 0);
    for c in lock(&g.clients).values() {
        if c.is_pubsub() {
            pubsub_clients += 1;
        }
        if c.watch.load(Ordering::Relaxed) > 0 {
            watching_clients += 1;
        }
    }
    let (channels, patterns, shard_channels) = crate::pubsub::counts();
    let (ops, input_kbps, output_kbps) = lock(&g.rates).per_sec();
    kvcore::ServerInfo {
        run_id: g.run_id.clone(),
        os: os_line(),
        executable: std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        config_file: g
            .opts
            .config_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        bind: g.opts.bind.split_whitespace().map(str::to_string).collect(),
        pubsub_clients,
        watching_clients,
        blocking_keys: g.blocking_keys.load(Ordering::Relaxed),
        blocking_keys_nokey: g.blocking_keys_nokey.load(Ordering::Relaxed),
        pubsub_channels: channels,
        pubsub_patterns: patterns,
        pubsubshard_channels: shard_channels,
        net_input_bytes: traffic[0],
        net_output_bytes: traffic[1],
        reads_processed: traffic[2],
        writes_processed: traffic[3],
        rejected_connections: g.rejected_connections.load(Ordering::Relaxed),
        output_limit_disconnections: g.output_limit_disconnections.load(Ordering::Relaxed),
        query_limit_disconnections: g.query_limit_disconnections.load(Ordering::Relaxed),
        ops_per_sec: ops,
        input_kbps,
        output_kbps,
        cpu: cpu_seconds(),
        persistence: None,
        replication: None,
    }
}

/// `uname`'s system, release and machine, as Redis's INFO `os` line.
fn os_line() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "{} {} {}",
        read("/proc/sys/kernel/ostype"),
        read("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH
    )
}

/// CPU seconds used: system and user of the process, of its children, and of this thread.
fn cpu_seconds() -> [f64; 6] {
    let usage = |who: libc::c_int| {
        // SAFETY: `getrusage` only writes the struct it is given, which is zeroed and ours.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `who` is one of the constants getrusage accepts.
        if unsafe { libc::getrusage(who, &mut ru) } != 0 {
            return (0.0, 0.0);
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (secs(ru.ru_stime), secs(ru.ru_utime))
    };
    let (s, u) = usage(libc::RUSAGE_SELF);
    let (cs, cu) = usage(libc::RUSAGE_CHILDREN);
    let (ts, tu) = usage(libc::RUSAGE_THREAD);
    [s, u, cs, cu, ts, tu]
}

/// SLOWLOG over every shard: entries merged newest first (ids are global), each with its
/// client's address and name while the client is connected.
async fn slowlog(shard: &Shard, args: &[&[u8]], w: &mut ReplyWriter<'_>) {
    use kvcore::commands::monitoring::{parse_slowlog, write_slowlog, SlowlogOp};
    let Some(op) = parse_slowlog(w, args) else {
        return;
    };
    // Each shard keeps its newest `slowlog-max-len` entries, so the newest that many of the
    // server are all there; the log shows no more than that, as one Redis would.
    let max = shard.db.borrow().config.telemetry.slowlog_max;
    match op {
        SlowlogOp::Reset => {
            everywhere(shard, |sh| sh.db.borrow_mut().telemetry.slowlog_reset()).await;
            w.ok();
        }
        SlowlogOp::Len => {
            let n = everywhere(shard, |sh| sh.db.borrow().telemetry.slowlog_len()).await;
            w.int(n.iter().sum::<usize>().min(max) as i64);
        }
        SlowlogOp::Get(count) => {
            let parts = everywhere(shard, move |sh| sh.db.borrow().telemetry.slowlog(count)).await;
            let mut all: Vec<_> = parts.into_iter().flatten().collect();
            all.sort_by_key(|e| std::cmp::Reverse(e.id));
            all.truncate(count.min(max));
            let clients = lock(&shard.global.clients);
            for e in all.iter_mut().filter(|e| e.peer.is_empty()) {
                if let Some(c) = clients.get(&e.client) {
                    e.peer = c.addr.to_string().into_bytes();
                    e.client_name = lock(&c.name).clone().unwrap_or_default();
                }
            }
            drop(clients);
            write_slowlog(w, &all);
        }
    }
}

/// LATENCY over every shard: event series merged by second, histograms summed.
async fn latency(shard: &Shard, args: &[&[u8]], w: &mut ReplyWriter<'_>) {
    use kvcore::commands::monitoring::{self as m, LatencyOp};
    let Some(op) = m::parse_latency(w, args) else {
        return;
    };
    let events = || async {
        let parts = everywhere(shard, |sh| sh.db.borrow().telemetry.events().clone()).await;
        let mut all: std::collections::BTreeMap<String, kvcore::telemetry::LatencySeries> =
            Default::default();
        for p in parts {
            for (name, s) in p {
                all.entry(name).or_default().merge(&s);
            }
        }
        all
    };
    let (now_s, set) = {
        let d = shard.db.borrow();
        (d.now_ms() / 1000, d.config.telemetry)
    };
    match op {
        LatencyOp::History(e) => m::write_history(w, events().await.get(&e)),
        LatencyOp::Graph(e) => match events().await.get(&e) {
            Some(s) => w.verbatim(b"txt", m::graph(&e, s, now_s).as_bytes()),
            None => w.error(format!("ERR No samples available for event '{e}'").as_bytes()),
        },
        LatencyOp::Latest => m::write_latest(w, &events().await),
        LatencyOp::Doctor => {
            let text = m::doctor(&events().await, set.monitor_ms, set.slower_than, now_s);
            w.verbatim(b"txt", text.as_bytes());
        }
        LatencyOp::Reset(names) => {
            let removed = everywhere(shard, move |sh| {
                let mut d = sh.db.borrow_mut();
                let gone: Vec<String> = (d.telemetry.events().keys())
                    .filter(|e| names.is_empty() || names.iter().any(|n| n == e.as_bytes()))
                    .cloned()
                    .collect();
                let refs: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
                d.telemetry.reset_events(&refs);
                gone
            })
            .await;
            // An event is one event however many shards saw it.
            let distinct: std::collections::BTreeSet<String> =
                removed.into_iter().flatten().collect();
            w.int(distinct.len() as i64);
        }
        LatencyOp::Histogram(names) => {
            let parts = everywhere(shard, |sh| sh.db.borrow().telemetry.snapshot(true)).await;
            let mut snap = kvcore::telemetry::Snapshot::default();
            if set.tracking {
                for p in &parts {
                    snap.merge(p);
                }
            }
            m::write_histogram(w, &snap, &names);
        }
    }
}

async fn scan(shard: &Rc<Shard>, db: usize, args: &[&[u8]], w: &mut ReplyWriter<'_>) {
    let s = match parse_scan(args) {
        Ok(s) => s,
        Err(msg) => return w.error(msg),
    };
    let mut sh = (s.cursor >> SHARD_SHIFT) as usize;
    let inner = s.cursor & ((1u64 << SHARD_SHIFT) - 1);
    if sh >= shard.n {
        // A cursor we never handed out: Redis answers an unknown cursor with an empty last page.
        w.array_len(2);
        w.bulk(b"0");
        return w.array_len(0);
    }
    let (pattern, ty, count) = (
        s.pattern.map(<[u8]>::to_vec),
        s.ty.map(<[u8]>::to_vec),
        s.count,
    );
    // A shard finished before COUNT keys were found moves on to the next one in the same
    // call, so a small keyspace is listed in one page with cursor 0, as Redis does.
    let mut inner = inner;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let cursor = loop {
        let (pattern, ty) = (pattern.clone(), ty.clone());
        let want = count.saturating_sub(keys.len()).max(1);
        let (next, found) = shard
            .call(sh, move |x: &Shard| {
                let mut d = x.db.borrow_mut();
                d.refresh_clock();
                d.scan_in(db, inner, pattern.as_deref(), want, ty.as_deref())
            })
            .await;
        keys.extend(found);
        if next != 0 {
            break ((sh as u64) << SHARD_SHIFT) | next;
        }
        sh += 1;
        inner = 0;
        if sh >= shard.n {
            break 0;
        }
        if keys.len() >= count {
            break (sh as u64) << SHARD_SHIFT;
        }
    };
    w.array_len(2);
    w.bulk(itoa::Buffer::new().format(cursor).as_bytes());
    w.array_len(keys.len());
    for k in &keys {
        w.bulk(k);
    }
}

fn client(shard: &Shard, me: &ClientEntry, args: &[&[u8]], w: &mut ReplyWriter<'_>) {
    let g = &shard.global;
    *lock(&me.last_cmd) = "client";
    let sub = args[1];
    if is(sub, "INFO") {
        if args.len() != 2 {
            return wrong(w, "client|info");
        }
        let line = me.line() + "\n";
        return w.verbatim(b"txt", line.as_bytes());
    }
    if is(sub, "LIST") {
        return client_list(g, args, w);
    }
    if is(sub, "PAUSE") {
        return client_pause(g, args, w);
    }
    if is(sub, "UNPAUSE") {
        if args.len() != 2 {
            return wrong(w, "client|unpause");
        }
        g.unpause();
        return w.ok();
    }
    if is(sub, "UNBLOCK") {
        return client_unblock(g, args, w);
    }
    client_kill(g, me, args, w)
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: ends the wait of a client blocked in a blocking command
/// (answered as on its timeout, or with Redis's UNBLOCKED error); 1 if it was blocked.
fn client_unblock(g: &crate::global::Global, args: &[&[u8]], w: &mut ReplyWriter<'_>) {
    if !(3..=4).contains(&args.len()) {
        return wrong(w, "client|unblock");
    }
    let how = match args.get(3) {
        None => crate::global::UNBLOCK_TIMEOUT,
        Some(a) if is(a, "TIMEOUT") => crate::global::UNBLOCK_TIMEOUT,
        Some(a) if is(a, "ERROR") => crate::global::UNBLOCK_ERROR,
        Some(_) => return w.error(b"ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let Some(id) = kvcore::num::parse_i64(args[2]) else {
        return w.error(b"ERR value is not an integer or out of range");
    };
    let target = lock(&g.clients).get(&(id as u64)).cloned();
    match target {
        Some(t) if t.blocked.load(Ordering::Acquire) => {
            t.unblock_as.store(how, Ordering::Release);
            t.unblock.notify_waiters();
            w.int(1)
        }
        _ => w.int(0),
    }
}

/// The class of client a TYPE filter names; `Err` for an unknown name.
fn client_type(name: &[u8]) -> Result<Class, Vec<u8>> {
    match name.to_ascii_lowercase().as_slice() {
        b"pubsub" => Ok(Class::PubSub),
        b"normal" => Ok(Class::Normal),
        b"master" => Ok(Class::Master),
        b"replica" | b"slave" => Ok(Class::Replica),
        _ => {
            let mut m = b"ERR Unknown client type '".to_vec();
            m.extend_from_slice(name);
            m.push(b'\'');
            Err(m)
        }
    }
}

/// CLIENT LIST [TYPE type | ID id ...].
fn client_list(g: &crate::global::Global, args: &[&[u8]], w: &mut ReplyWriter<'_>) {
    let mut text = String::new();
    if args.len() == 4 && is(args[2], "TYPE") {
        let kind = match client_type(args[3]) {
            Ok(k) => k,
            Err(m) => return w.error(&m),
        };
        for e in lock(&g.clients).values() {
            if e.class() == kind {
                text.push_str(&e.line());
                text.push('\n');
            }
        }
    } else if args.len() > 3 && is(args[2], "ID") {
        let mut ids = Vec::with_capacity(args.len() - 3);
        for a in &args[3..] {
            match std::str::from_utf8(a)
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
            {
                Some(id) => ids.push(id),
                None => return w.error(b"ERR Invalid client ID"),
            }
        }
        for id in ids {
            if let Some(e) = u64::try_from(id).ok().and_then(|id| g.client(id)) {
                text.push_str(&e.line());
                text.push('\n');
            }
        }
    } else if args.len() != 2 {
        return w.error(b"ERR syntax error");
    } else {
        for e in lock(&g.clients).values() {
            text.push_str(&e.line());
            text.push('\n');
        }
    }
    w.verbatim(b"txt", text.as_bytes());
}

/// CLIENT PAUSE timeout [WRITE|ALL].
fn client_pause(g: &crate::global::Global, args: &[&[u8]], w: &mut ReplyWriter<'_>) {
    if !(3..=4).contains(&args.len()) {
        return wrong(w, "client|pause");
    }
    let mut all = true;
    if args.len() == 4 {
        if is(args[3], "WRITE") {
            all = false;
        } else if !is(args[3], "ALL") {
            return w.error(b"ERR CLIENT PAUSE mode must be WRITE or ALL");
        }
    }
    let ms = match std::str::from_utf8(args[2])
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
    {
        Some(ms) if ms < 0 => return w.error(b"ERR timeout is negative"),
        Some(ms) => ms as u64,
        None => return w.error(b"ERR timeout is not an integer or out of range"),
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    g.pause(now.saturating_add(ms).max(1), all);
    w.ok()
}

/// CLIENT KILL addr, or CLIENT KILL with filters (ID, TYPE, USER, ADDR, LADDR, SKIPME, MAXAGE),
/// parsed in order as Redis does.
fn client_kill(
    g: &crate::global::Global,
    me: &ClientEntry,
    args: &[&[u8]],
    w: &mut ReplyWriter<'_>,
) {
    if args.len() == 3 {
        // The old form: one address, and a client may kill itself.
        let target = String::from_utf8_lossy(args[2]).into_owned();
        let n = g.kill(|e| e.addr.to_string() == target);
        return if n > 0 {
            w.ok()
        } else {
            w.error(b"ERR No such client")
        };
    }
    if args.len() < 3 {
        return w.error(b"ERR syntax error");
    }
    let (mut id, mut addr, mut laddr, mut skipme) = (None, None, None, true);
    let mut user: Option<Vec<u8>> = None;
    let mut max_age: Option<u64> = None;
    let mut kind: Option<Class> = None;
    let mut i = 2;
    while i < args.len() {
        let (opt, Some(&value)) = (args[i], args.get(i + 1)) else {
            return w.error(b"ERR syntax error");
        };
        let v = String::from_utf8_lossy(value).into_owned();
        if is(opt, "ID") {
            match v.parse::<i64>() {
                Ok(n) if n >= 1 => id = Some(n as u64),
                _ => return w.error(b"ERR client-id should be greater than 0"),
            }
        } else if is(opt, "MAXAGE") {
            match v.parse::<i64>() {
                Ok(n) if n > 0 => max_age = Some(n as u64),
                Ok(_) => return w.error(b"ERR maxage should be greater than 0"),
                Err(_) => return w.error(b"ERR maxage is not an integer or out of range"),
            }
        } else if is(opt, "TYPE") {
            match client_type(value) {
                Ok(k) => kind = Some(k),
                Err(m) => return w.error(&m),
            }
        } else if is(opt, "ADDR") {
            addr = Some(v);
        } else if is(opt, "LADDR") {
            laddr = Some(v);
        } else if is(opt, "USER") {
            if g.acl.user(value).is_none() {
                let mut m = b"ERR No such user '".to_vec();
                m.extend_from_slice(value);
                m.push(b'\'');
                return w.error(&kvcore::commands::sanitize(m));
            }
            user = Some(value.to_vec());
        } else if is(opt, "SKIPME") {
            skipme = if is(value, "YES") {
                true
            } else if is(value, "NO") {
                false
            } else {
                return w.error(b"ERR syntax error");
            };
        } else {
            return w.error(b"ERR syntax error");
        }
        i += 2;
    }
    let n = g.kill(|e| {
        id.is_none_or(|i| e.id == i)
            && kind.is_none_or(|k| e.class() == k)
            && addr.as_ref().is_none_or(|a| e.addr.to_string() == *a)
            && laddr.as_ref().is_none_or(|a| e.laddr.to_string() == *a)
            && max_age.is_none_or(|m| e.created.elapsed().as_secs() >= m)
            && user.as_ref().is_none_or(|u| *lock(&e.user) == *u)
            && !(skipme && e.id == me.id)
    });
    w.int(n as i64);
}

fn wrong(w: &mut ReplyWriter<'_>, name: &str) {
    let m = format!("ERR wrong number of arguments for '{name}' command");
    w.error(m.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `may_be_special` covers every command `is_special` can pick, with any arguments.
    #[test]
    fn may_be_special_covers_is_special() {
        let words: [&[u8]; 12] = [
            b"x",
            b"RELOAD",
            b"SET-ACTIVE-EXPIRE",
            b"STATS",
            b"PURGE",
            b"LIST",
            b"KILL",
            b"PAUSE",
            b"REWRITE",
            b"SET",
            b"RESETSTAT",
            b"appendonly",
        ];
        let mut specials = 0;
        for spec in kvcore::commands::all() {
            for &a1 in &words {
                for &a2 in &words {
                    for len in 1..=4 {
                        let args: Vec<&[u8]> =
                            [spec.name.as_bytes(), a1, a2, b"yes"][..len].to_vec();
                        for n in [1, 2] {
                            if is_special_name(spec, &args, n) {
                                specials += 1;
                                assert!(may_be_special(spec), "{}", spec.name);
                            }
                        }
                    }
                }
            }
        }
        assert!(specials > 0);
        let get = kvcore::commands::lookup(b"get").unwrap();
        assert!(!may_be_special(get));
    }
}
