//! kvserver: a thin thread-per-core Redis-compatible server over kvcore.
//!
//! # Layout
//! - `options`: command line and config file.
//! - `server` (this file's `run`): one glommio executor per shard, pinned to the CPUs the
//!   process may use, all accepting on the same port (SO_REUSEPORT); start-up errors become one
//!   clear line and exit code 1.
//! - `shard`: a shard's store and its messages to the other shards; `locks`: key intent locks.
//! - `conn`: one client: read, parse, route, execute, one write per batch.
//! - `route`: key → hash slot → shard. `multi`: commands spanning shards. `special`: commands
//!   over all shards or the server (KEYS, SCAN, INFO, CLIENT, SHUTDOWN ...).
//! - `global`: client registry and counters; `alloc`: the counting allocator; `log`.

mod alloc;
mod conn;
mod global;
mod locks;
mod log;
mod multi;
mod options;
mod route;
mod shard;
mod special;

use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::AsyncWriteExt;
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::net::TcpListener;
use glommio::{LocalExecutorBuilder, Placement};
use kvcore::Db;

use crate::global::Global;
use crate::options::{Options, Parsed, HELP};
use crate::shard::{Msg, Shard};

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

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
    if let Err(e) = run(opts) {
        eprintln!("kvserver: {e}");
        std::process::exit(1);
    }
}

/// Starts every executor and waits until they stop.
fn run(opts: Options) -> Result<(), String> {
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
    let global = Arc::new(Global::new(opts, n));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, global.shutdown.clone())
            .map_err(|e| format!("can't install signal handlers: {e}"))?;
    }
    let mesh = (n > 1).then(|| MeshBuilder::<Msg, _>::full(n, 1024));
    let (tx, rx) = mpsc::channel::<Result<u16, String>>();
    let spawn = |i: usize, port: u16| {
        let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let (global, mesh, tx) = (global.clone(), mesh.clone(), tx.clone());
        std::thread::Builder::new().name(format!("shard-{i}")).spawn(move || {
            let placement = cpu.map_or(Placement::Unbound, Placement::Fixed);
            match LocalExecutorBuilder::new(placement).io_memory(64 << 10).name(&format!("shard-{i}")).make() {
                Ok(ex) => ex.run(shard_main(i, n, port, global, mesh, tx)),
                Err(e) => {
                    let _ = tx.send(Err(format!(
                        "can't start an io_uring executor: {e}. io_uring needs Linux 5.8+ and enough locked memory: raise `ulimit -l` (now {} KiB)",
                        memlock_kib()
                    )));
                }
            }
        })
    };
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
    for t in threads {
        let _ = t.join();
    }
    log!(3, "kvserver is now ready to exit, bye bye...");
    Ok(())
}

fn memlock_kib() -> String {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max locked memory"))
                .map(|l| l.split_whitespace().nth(3).unwrap_or("?").to_string())
        })
        .unwrap_or_else(|| "?".into())
}

async fn shard_main(
    i: usize,
    n: usize,
    port: u16,
    global: Arc<Global>,
    mesh: Option<MeshBuilder<Msg, glommio::channels::channel_mesh::Full>>,
    tx: mpsc::Sender<Result<u16, String>>,
) {
    let bind = global.opts.bind.clone();
    let listener = match TcpListener::bind((bind.as_str(), port)) {
        Ok(l) => l,
        Err(e) => {
            let _ = tx.send(Err(format!("can't listen on {bind}:{port}: {e}")));
            return;
        }
    };
    let actual = listener.local_addr().map(|a| a.port()).unwrap_or(port);
    let _ = tx.send(Ok(actual));
    let (senders, receivers) = match mesh {
        Some(m) => match m.join().await {
            Ok((s, r)) => (Some(s), Some(r)),
            Err(_) => {
                let _ = tx.send(Err("shards could not connect to each other".into()));
                return;
            }
        },
        None => (None, None),
    };
    // glommio numbers mesh peers by join order; publish ours and learn everyone's.
    if let Some(s) = &senders {
        global.mesh_ids[i].store(s.peer_id(), Ordering::SeqCst);
    }
    let mut peer_of = vec![0; n];
    if senders.is_some() {
        while global
            .mesh_ids
            .iter()
            .any(|m| m.load(Ordering::SeqCst) == usize::MAX)
        {
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
        for (s, m) in global.mesh_ids.iter().enumerate() {
            peer_of[s] = m.load(Ordering::SeqCst);
        }
    }
    let db = Db::with_config(global.opts.store.clone());
    let shard = Rc::new(Shard::new(i, n, db, global.clone(), senders, peer_of));
    if let Some(r) = receivers {
        shard::serve_mesh(&shard, r);
    }
    let cron = shard.clone();
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(Duration::from_millis(100)).await;
            cron.db.borrow_mut().cron(Duration::from_millis(5));
        }
    })
    .detach();
    loop {
        let next = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            while !global.shutdown.load(Ordering::Relaxed) {
                glommio::timer::sleep(Duration::from_millis(50)).await;
            }
            None
        })
        .await;
        let stream = match next {
            None => break,
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                log!(3, "accept: {e}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        global.total_connections.fetch_add(1, Ordering::Relaxed);
        let refuse = if global.connected.fetch_add(1, Ordering::Relaxed) >= global.opts.maxclients {
            Some(&b"-ERR max number of clients reached\r\n"[..])
        } else if !is_local(peer.ip()) && protected(&shard) {
            Some(DENIED)
        } else {
            None
        };
        match refuse {
            Some(msg) => {
                global.connected.fetch_sub(1, Ordering::Relaxed);
                glommio::spawn_local(async move {
                    let mut s = stream;
                    let _ = s.write_all(msg).await;
                    let _ = s.close().await;
                })
                .detach();
            }
            None => {
                glommio::spawn_local(conn::serve(shard.clone(), stream, peer)).detach();
            }
        }
    }
    log!(2, "shard {i} stopping");
}

/// Redis counts only 127.0.0.1 and ::1 as local clients for protected mode.
fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4 == std::net::Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => {
            v6 == std::net::Ipv6Addr::LOCALHOST
                || v6.to_ipv4_mapped() == Some(std::net::Ipv4Addr::LOCALHOST)
        }
    }
}

/// Protected mode is on and no password is set.
fn protected(shard: &Shard) -> bool {
    let db = shard.db.borrow();
    db.config.get("protected-mode") == Some("yes") && db.config.requirepass.is_empty()
}
