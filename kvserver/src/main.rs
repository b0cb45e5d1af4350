//! kvserver: a thin thread-per-core Redis-compatible server over kvcore.
//!
//! # Layout
//! Dependencies point one way: `net` → `pubsub`, `monitor`, `admin`, `coord` → `shard` → kvcore.
//! - `main` (this file): start-up, one single-threaded executor per shard (a tokio
//!   current-thread runtime: epoll readiness, like Redis's own event loop) pinned to the CPUs
//!   the process may use, all accepting on the same port (SO_REUSEPORT); the cron ticker;
//!   the lazyfree thread. Start-up errors become one clear line and exit code 1.
//! - `options`, `log`, `alloc` (the counting allocator), `global` (client registry, counters).
//! - `net`: the listener (protected mode, `maxclients`, clients handed over by other shards)
//!   and `net::conn`, one client: read, parse in place, route, run or queue, one write per
//!   batch; MULTI queues, subscribed mode and the mailbox of a subscriber.
//! - `pubsub`: subscribers of each shard, every shard's view of where subscriptions are,
//!   PUBLISH, PUBSUB, keyspace notifications.
//! - `monitor`: MONITOR clients of each shard and the store hook that shows them every
//!   command run.
//! - `admin`: commands over all shards or the server (INFO, KEYS, SCAN, CLIENT, CONFIG ...).
//! - `coord`: `route` (key → slot → shard), `multi` (commands whose keys span shards, under
//!   key intent locks), `blocking` (clients waiting for keys of any shard), `tx` (EXEC's plan,
//!   locks and WATCH).
//! - `shard`: a shard's store, its inbox of messages from the other shards, its key intent
//!   lock table, the clients blocked on its keys, its connection buffers.
//!
//! # Why epoll (tokio) and not io_uring (glommio)
//! The first version ran on glommio. Measured with `side-by-side.sh` (server on CPU 0,
//! redis-benchmark on CPU 1, 50 clients, pipeline 16), it spent 1.12-1.18 µs of CPU per
//! request against Redis's 0.67-0.69: ~90% of it in the kernel, arming a one-shot io_uring
//! poll per batch per connection and running its completion as task work. Readiness that
//! stays registered (epoll, as Redis uses) avoids that; the same server on a tokio
//! current-thread runtime per core spends 0.53-0.55 µs per request against Redis's 0.59-0.65.
//! Everything else — one executor pinned per core, SO_REUSEPORT, shard-owned keyspaces,
//! messages between executors — is unchanged. A ring of our own does not change the verdict:
//! a no-op server on io_uring (multishot accept and recv into a provided-buffer ring, one send
//! per connection per turn, DEFER_TASKRUN; `kvbench null-server --io uring`) costs 1.04-1.07x
//! the CPU per request of the same no-op on epoll at pipeline 16 and 0.97-1.03x at pipeline 1.

mod admin;
mod alloc;
mod coord;
mod global;
mod log;
mod metrics;
mod monitor;
mod net;
mod options;
mod persist;
mod pubsub;
mod repl;
mod shard;
mod timer;

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use kvcore::Db;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::global::Global;
use crate::options::{Options, Parsed, HELP};
use crate::shard::{Msg, Shard};

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

/// Stack reserved for each shard thread.
const SHARD_STACK: usize = 64 << 20;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match options::parse(&args) {
        Ok(Parsed::Help) => {
            print!("{HELP}");
            return;
        }
        Ok(Parsed::Run(o)) => *o,
        Err(e) => {
            eprintln!("kvserver: {e}");
            std::process::exit(1);
        }
    };
    log::set_level(opts.loglevel);
    let pidfile = match detach(&opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("kvserver: {e}");
            std::process::exit(1);
        }
    };
    let end = run(opts);
    if let Some(p) = pidfile {
        let _ = std::fs::remove_file(p);
    }
    if let Err(e) = end {
        if log::to_a_file() {
            log!(3, "{e}");
        }
        eprintln!("kvserver: {e}");
        std::process::exit(1);
    }
}

/// What Redis does with `logfile`, `daemonize` and `pidfile` before it starts serving: logs go
/// to the file when one is named (appended to); `daemonize yes` forks into the background
/// (before any thread exists), leaving the standard streams on /dev/null; the pid file is
/// written when one is named, or, as Redis does, at `/var/run/redis.pid` when daemonized
/// without one. Returns the pid file written, to remove at exit.
fn detach(opts: &Options) -> Result<Option<std::path::PathBuf>, String> {
    let cfg = |n| opts.store.get(n).unwrap_or("").to_string();
    let (logfile, daemonize, pidfile) = (cfg("logfile"), cfg("daemonize") == "yes", cfg("pidfile"));
    if !logfile.is_empty() {
        log::to_file(&logfile).map_err(|e| format!("can't open the log file '{logfile}': {e}"))?;
    }
    if daemonize {
        // SAFETY: called from `main` before any thread is started (the runtimes, the AOF and
        // lazyfree threads all start in `run`), so the child that continues has all of this
        // process's state; `daemon` only forks, calls setsid and reopens the standard streams.
        if unsafe { libc::daemon(1, 0) } != 0 {
            return Err(format!(
                "can't daemonize: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    let pidfile = match (pidfile.is_empty(), daemonize) {
        (false, _) => Some(std::path::PathBuf::from(pidfile)),
        (true, true) => Some(std::path::PathBuf::from("/var/run/redis.pid")),
        (true, false) => None,
    };
    if let Some(p) = &pidfile {
        // As Redis: a pid file that cannot be written is logged, not fatal.
        if let Err(e) = std::fs::write(p, format!("{}\n", std::process::id())) {
            log!(3, "failed to write PID file {}: {e}", p.display());
            return Ok(None);
        }
    }
    Ok(pidfile)
}

/// The socket to tell systemd about start-up and shutdown on (`supervised systemd`, or
/// `auto` when systemd set `NOTIFY_SOCKET`), as Redis does for units of `Type=notify` (Debian's
/// redis-server unit runs `--supervised systemd`). Upstart is not supported: nothing is sent.
fn supervisor(mode: &str) -> Option<String> {
    let socket = std::env::var("NOTIFY_SOCKET")
        .ok()
        .filter(|s| !s.is_empty());
    match mode {
        "systemd" | "auto" => {
            if socket.is_none() && mode == "systemd" {
                log!(
                    3,
                    "systemd supervision requested, but NOTIFY_SOCKET not found"
                );
            }
            socket
        }
        _ => None,
    }
}

/// Sends `state` to systemd's notification socket (a path, or `@` and an abstract name).
fn notify(socket: &str, state: &str) {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let sent = UnixDatagram::unbound().and_then(|d| {
        let addr = match socket.strip_prefix('@') {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(name.as_bytes())?
            }
            None => SocketAddr::from_pathname(socket)?,
        };
        d.send_to_addr(state.as_bytes(), &addr)
    });
    if let Err(e) = sent {
        log!(3, "can't notify systemd on {socket}: {e}");
    }
}

/// Turns transparent huge pages off for this process (`disable-thp yes`, the default, as in
/// Redis). mimalloc asks for huge pages on its arenas; with them RSS grows and shrinks in 2 MiB
/// steps, so a small dataset pays for whole huge pages (about 13 bytes per set of 100k small
/// sets), and a fault on a fresh huge page zeroes 2 MiB while the shard waits. With 5M keys,
/// GET and SET cost the same CPU per request either way (`scripts/side-by-side.sh` with
/// `MIMALLOC_ALLOW_THP=0` against the default, medians of 5 alternated rounds).
fn disable_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE only sets a flag on this process's memory map.
    let r = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if r != 0 {
        log!(
            3,
            "could not turn transparent huge pages off: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Starts every executor and waits until they stop.
fn run(opts: Options) -> Result<(), String> {
    if opts.store.get("disable-thp") == Some("yes") {
        disable_transparent_huge_pages();
    }
    // Pin to the CPUs this process may run on (so `taskset -c 0 kvserver` stays on CPU 0).
    let cpus: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    let n = if opts.threads == 0 {
        cpus.len().max(1)
    } else {
        opts.threads
    };
    if n > 255 {
        return Err(format!(
            "--threads {n} is more than the 255 shards a SCAN cursor can name"
        ));
    }
    let aof_on = opts.store.get("appendonly") == Some("yes");
    let aof_loaded = if aof_on {
        persist::aof::load(&opts, n)?
    } else {
        None
    };
    // With the AOF on, it is what is loaded (an RDB file is not, as in Redis).
    let (loaded, stats) = match aof_loaded {
        Some(l) => l,
        None if aof_on => ((0..n).map(|_| Vec::new()).collect(), Default::default()),
        None => persist::load(&opts, n)?,
    };
    let global = Arc::new(Global::new(opts));
    acl_setup(&global)?;
    (global.scripts.functions())
        .restore(&stats.functions, kvcore::function::Policy::Replace)
        .map_err(|e| format!("can't load the functions: {}", String::from_utf8_lossy(&e)))?;
    if aof_on {
        persist::aof::start(&global)?;
    }
    global.loaded_keys.store(stats.loaded, Ordering::Relaxed);
    global
        .loaded_expired
        .store(stats.expired, Ordering::Relaxed);
    let mut loaded: Vec<Option<Vec<kvcore::rdb::LoadedKey>>> =
        loaded.into_iter().map(Some).collect();
    shard::evict::init(n);
    start_lazyfree().map_err(|e| format!("can't start the lazyfree thread: {e}"))?;
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, global.shutdown.clone())
            .map_err(|e| format!("can't install signal handlers: {e}"))?;
    }
    let (inboxes, receivers): (Vec<UnboundedSender<Msg>>, Vec<_>) =
        (0..n).map(|_| unbounded_channel::<Msg>()).unzip();
    // A change to the users wakes every shard's subscribers to look at their channels again.
    let to_all = inboxes.clone();
    global.acl.set_on_change(Box::new(move || {
        for inbox in &to_all {
            let _ = inbox.send(Msg::Post(Box::new(|_| pubsub::wake_subscribers())));
        }
    }));
    let mut receivers: Vec<Option<UnboundedReceiver<Msg>>> =
        receivers.into_iter().map(Some).collect();
    let (tx, rx) = mpsc::channel::<Result<u16, String>>();
    let mut spawn = |i: usize, port: u16| {
        let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let (global, inboxes, tx) = (global.clone(), inboxes.clone(), tx.clone());
        let inbox = receivers[i].take().expect("each shard starts once");
        let keys = loaded[i].take().unwrap_or_default();
        std::thread::Builder::new()
            .name(format!("shard-{i}"))
            // Room for deep recursion that Redis bounds by its own limits, not by our frame
            // sizes: a script's reply nested thousands deep ("reached lua stack limit"). Only
            // the pages a shard touches are committed.
            .stack_size(SHARD_STACK)
            .spawn(move || {
                if let Some(cpu) = cpu {
                    core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
                }
                let (rt, tokio_fd) = match net::conn::fast::build_runtime() {
                    Ok(built) => built,
                    Err(e) => {
                        let _ = tx.send(Err(format!("can't start an event loop: {e}")));
                        return;
                    }
                };
                let local = Rc::new(tokio::task::LocalSet::new());
                let woken = Arc::new(net::conn::fast::Woken::default());
                let fast = tokio_fd.map(|fd| (local.clone(), fd, woken.clone()));
                let main = shard_main(i, n, port, global, inboxes, inbox, tx, keys, fast);
                rt.block_on(net::conn::fast::watched(local.run_until(main), woken));
                net::conn::fast::uninstall();
            })
    };
    // SO_REUSEPORT would let this process share a port that another server of the same user
    // already serves; a plain bind first tells "port in use" the way redis-server does.
    if global.opts.port != 0 {
        let (bind, port) = (global.opts.bind.as_str(), global.opts.port);
        std::net::TcpListener::bind((bind, port))
            .map_err(|e| format!("can't listen on {bind}:{port}: {e}"))?;
    }
    // Shard 0 binds first, so that `--port 0` gives every shard the same free port.
    let mut threads = vec![spawn(0, global.opts.port).map_err(|e| e.to_string())?];
    let port = rx
        .recv()
        .map_err(|_| "shard 0 failed to start".to_string())??;
    global.port.store(port, Ordering::Relaxed);
    for i in 1..n {
        threads.push(spawn(i, port).map_err(|e| e.to_string())?);
    }
    for _ in 1..n {
        rx.recv()
            .map_err(|_| "a shard failed to start".to_string())??;
    }
    alloc::mark_startup();
    let ticker = {
        let global = global.clone();
        std::thread::Builder::new()
            .name("ticker".into())
            .spawn(move || tick(&global, &inboxes))
            .map_err(|e| e.to_string())?
    };
    log!(
        2,
        "kvserver {} ({} shards), Redis {} compatible",
        env!("CARGO_PKG_VERSION"),
        n,
        kvcore::REDIS_VERSION
    );
    log!(
        2,
        "Ready to accept connections tcp on {}:{port}",
        global.opts.bind
    );
    let supervised = supervisor(global.opts.store.get("supervised").unwrap_or("no"));
    if let Some(sock) = &supervised {
        notify(sock, "STATUS=Ready to accept connections\nREADY=1\n");
    }
    for t in threads {
        let _ = t.join();
    }
    if let Some(sock) = &supervised {
        notify(sock, "STOPPING=1\n");
    }
    let _ = ticker.join();
    persist::aof::stop(&global);
    log!(3, "kvserver is now ready to exit, bye bye...");
    Ok(())
}

/// Sends every shard its cron tick ten times a second (active expiry, as Redis's `hz 10`), and
/// its stop once SIGINT, SIGTERM or SHUTDOWN has set the flag.
///
/// The clock lives on this thread rather than in each shard's event loop: a loop with no timer
/// pending sleeps in `epoll_wait` with no timeout, which saves arming and cancelling a kernel
/// timer and reading the clock on every sleep (about 2% of the CPU per request at pipeline 1).
/// Starts the thread that frees big collections for the shards (see `kvcore::lazyfree`): a
/// DEL of a million-member set costs its shard one channel send, not a million frees.
fn start_lazyfree() -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel::<Box<dyn Send>>();
    std::thread::Builder::new()
        .name("lazyfree".into())
        .spawn(move || {
            yield_to_shards();
            while let Ok(first) = rx.recv() {
                for parts in std::iter::once(first).chain(rx.try_iter()) {
                    drop(parts);
                    kvcore::lazyfree::note_freed();
                }
                // mimalloc gives big freed blocks back to the kernel after a delay, from
                // inside whichever thread calls it next: a shard, in the middle of a command
                // (32 MiB of a keyspace's old bucket array: eight 4 MiB madvise calls, 3 ms of
                // one SET). Done here instead, once the queue is empty.
                alloc::purge();
            }
        })?;
    kvcore::lazyfree::set_sink(Box::new(move |parts| {
        // The receiver lives as long as the process, so a send cannot fail.
        let _ = tx.send(parts);
    }));
    Ok(())
}

/// Puts the calling thread under SCHED_IDLE: it runs only when no shard wants the CPU, and a
/// shard that wakes takes the CPU back at once. With the server pinned to one core, freeing a
/// 64 MiB bucket array on the lazyfree thread at normal priority still held SETs up for
/// 2.5-3.2 ms (the shard waited for its core); the thread is still given a little CPU when
/// every core is busy, so what it holds is freed eventually.
fn yield_to_shards() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler with pid 0 changes only the calling thread's policy; `param`
    // is a valid sched_param that lives across the call.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if r != 0 {
        log!(
            3,
            "could not lower the lazyfree thread's priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn tick(global: &Global, inboxes: &[UnboundedSender<Msg>]) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        alloc::sample_peak();
        global::lock(&global.rates).sample(std::time::Instant::now());
        let stop = global.shutdown.load(Ordering::Relaxed);
        for inbox in inboxes {
            let _ = inbox.send(if stop { Msg::Stop } else { Msg::Tick });
        }
        if stop {
            return;
        }
    }
}

#[allow(clippy::too_many_arguments)] // one shard's whole start-up state, passed once
async fn shard_main(
    i: usize,
    n: usize,
    port: u16,
    global: Arc<Global>,
    inboxes: Vec<UnboundedSender<Msg>>,
    inbox: UnboundedReceiver<Msg>,
    tx: mpsc::Sender<Result<u16, String>>,
    keys: Vec<kvcore::rdb::LoadedKey>,
    fast: Option<(
        Rc<tokio::task::LocalSet>,
        std::os::fd::RawFd,
        Arc<net::conn::fast::Woken>,
    )>,
) {
    let bind = global.opts.bind.clone();
    let backlog = global
        .opts
        .store
        .get("tcp-backlog")
        .and_then(|v| v.parse().ok())
        .unwrap_or(511);
    let listener = match net::listen(&bind, port, backlog) {
        Ok(l) => l,
        Err(e) => {
            let _ = tx.send(Err(format!("can't listen on {bind}:{port}: {e}")));
            return;
        }
    };
    let actual = listener.local_addr().map(|a| a.port()).unwrap_or(port);
    // Shard 0 serves the Prometheus endpoint; a port it cannot bind stops the start.
    let metrics = match global.opts.metrics_port {
        Some(mp) if i == 0 => match metrics::bind(&bind, mp) {
            Ok(l) => Some(l),
            Err(e) => {
                let _ = tx.send(Err(format!("can't listen on {bind}:{mp} for metrics: {e}")));
                return;
            }
        },
        _ => None,
    };
    let _ = tx.send(Ok(actual));
    let mut db = Db::with_config(global.opts.store.clone());
    let mut per_db = vec![0usize; global.opts.store.databases];
    for k in &keys {
        if let Some(c) = per_db.get_mut(k.db) {
            *c += 1;
        }
    }
    for (i, n) in per_db.into_iter().enumerate() {
        db.reserve_keys(i, n);
    }
    for k in keys {
        db.load_key(k);
    }
    db.scripts = global.scripts.clone();
    db.acl = global.acl.clone();
    db.sync_acl_config();
    if n > 1 {
        // A script runs on its connection's shard; its commands may only touch that
        // shard's keys.
        db.key_owner = Some(Box::new(move |k| coord::route::shard_of(k, n) == i));
    }
    let registry = global.clone();
    db.client_label = Some(Box::new(move |id| {
        let clients = global::lock(&registry.clients);
        clients.get(&id).map_or((Vec::new(), Vec::new()), |c| {
            let name = global::lock(&c.name).clone().unwrap_or_default();
            (c.addr.to_string().into_bytes(), name)
        })
    }));
    db.set_memory_budget(Box::new(shard::evict::Budget::new(i, inboxes.clone())));
    db.monitor_feed = Some(monitor::feeder(global.clone(), inboxes.clone()));
    // No replica yet: `min-replicas-to-write` refuses writes from the start.
    db.too_few_replicas = global
        .opts
        .store
        .get("min-replicas-to-write")
        .is_some_and(|v| v != "0");
    let aof = global::lock(&global.aof.link).clone();
    if aof.is_some() {
        db.set_change_log(true);
    }
    let shard = Shard::new(i, n, db, global.clone(), inboxes);
    *shard.aof.borrow_mut() = aof;
    shard.events_hook.set(Some(pubsub::publish_events));
    shard::serve_inbox(&shard, inbox);
    if let Some((local, fd, woken)) = fast {
        // Plain clients are served from the shard's own loop (see `net::conn::fast`).
        if let Err(e) = net::conn::fast::install(&shard, local, fd, woken) {
            log!(1, "the shard's own event loop is off: {e}");
        }
    }
    if i == 0 {
        // `replicaof <host> <port>` in the configuration: follow it from the start.
        let of = global.opts.store.get("replicaof").unwrap_or("").to_string();
        if let [host, port] = of.split_whitespace().collect::<Vec<_>>()[..] {
            if let Ok(port) = port.parse::<u16>() {
                let (me, host) = (shard.clone(), host.to_string());
                tokio::task::spawn_local(async move {
                    repl::replica::follow(&me, host, port).await;
                });
            }
        }
    }
    if let Some(l) = metrics {
        tokio::task::spawn_local(metrics::serve(shard.clone(), l));
    }
    // The accept loop runs as a task of its own. The future this thread's `block_on` runs is
    // polled again every time any task wakes (a `LocalSet` polls it before its tasks); were it
    // the accept loop, every turn would poll the listener and both of its notifications.
    // Waiting on the task's handle costs one state check instead (callgrind, one client
    // pipelining 16 SETs: about 300 instructions per wakeup less).
    if let Err(e) = tokio::task::spawn_local(net::accept(shard, listener)).await {
        if e.is_panic() {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

/// Gives the process-wide ACL its start-up password (`requirepass`), its users (the config
/// file's `user` lines, or the `aclfile`, not both, as Redis's `ACLLoadUsersAtStartup`), and
/// what it needs from the server: CLIENT INFO lines for ACL LOG, and the disconnection of a
/// deleted user's clients (all but the one that deleted it, which is closed after its reply).
fn acl_setup(global: &Arc<Global>) -> Result<(), String> {
    let acl = &global.acl;
    let opts = &global.opts;
    if !opts.store.requirepass.is_empty() {
        acl.set_default_password(&opts.store.requirepass);
    }
    let aclfile = opts.store.get("aclfile").unwrap_or_default();
    if !aclfile.is_empty() && !opts.users.is_empty() {
        return Err("Configuring the server with users defined in the config file and at the same time an ACL file path is invalid: define either an ACL file or users in the config file, but not both".into());
    }
    for line in &opts.users {
        let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
        let Some((&name, rules)) = words.split_first() else {
            return Err("'user' wants a user name and its rules".into());
        };
        if acl.user(name).is_some() && name != b"default" {
            return Err(format!(
                "Error in user declaration '{line}': duplicate user"
            ));
        }
        // A declared user starts over, as Redis creates it (the default user too).
        let rules: Vec<&[u8]> = std::iter::once(&b"reset"[..])
            .chain(rules.iter().copied())
            .collect();
        acl.set_user(name, &rules).map_err(|e| {
            format!(
                "Error in user declaration '{line}': {}",
                String::from_utf8_lossy(&e)
            )
        })?;
    }
    if !aclfile.is_empty() {
        let text = persist::read_acl_file(&persist::acl_file_path(&opts.store, aclfile), aclfile)?;
        acl.load(&text, aclfile, 0).map_err(|e| {
            format!(
                "Aborting startup because of ACL errors: {}",
                String::from_utf8_lossy(&e)
            )
        })?;
    }
    let weak = Arc::downgrade(global);
    acl.set_client_info(Box::new(move |id| {
        (weak.upgrade())
            .and_then(|g| g.client(id))
            .map(|e| e.line().into_bytes())
            .unwrap_or_default()
    }));
    let weak = Arc::downgrade(global);
    acl.set_on_delete(Box::new(move |name, by| {
        if let Some(g) = weak.upgrade() {
            g.kill(|e| e.id != by && *global::lock(&e.user) == name);
        }
    }));
    Ok(())
}
