//! Commands that concern every shard or the whole server: KEYS, SCAN, DBSIZE, RANDOMKEY,
//! FLUSHDB, FLUSHALL, SWAPDB, CONFIG SET/RESETSTAT, INFO, CLIENT LIST/INFO/KILL, SHUTDOWN.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use futures_util::future::join_all;
use kvcore::commands::{flags, keys_api::parse_scan, CommandSpec};
use kvcore::resp::ReplyWriter;
use kvcore::{Session, ShardStats};

use crate::global::{lock, ClientEntry};
use crate::shard::Shard;

/// Bits of a SCAN cursor that carry the shard index.
const SHARD_SHIFT: u32 = 56;

fn is(a: &[u8], name: &str) -> bool {
    a.eq_ignore_ascii_case(name.as_bytes())
}

/// Whether this command is answered here rather than by one shard's store.
pub fn is_special(spec: &CommandSpec, args: &[&[u8]], n: usize) -> bool {
    match spec.name {
        "info" | "swapdb" => true,
        "client" => {
            args.len() >= 2 && (is(args[1], "LIST") || is(args[1], "INFO") || is(args[1], "KILL"))
        }
        "config" => n > 1 && args.len() >= 2 && (is(args[1], "SET") || is(args[1], "RESETSTAT")),
        _ => n > 1 && spec.has(flags::ALL_KEYS),
    }
}

/// Runs `f` on every shard in parallel; results in shard order.
async fn everywhere<R, F>(shard: &Shard, f: F) -> Vec<R>
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
        crate::log!(3, "User requested shutdown...");
        shard.global.shutdown.store(true, Ordering::SeqCst);
        return true;
    }
    if is(name, "INFO") {
        let parts = everywhere(shard, |sh| sh.db.borrow().shard_stats()).await;
        let mut agg = ShardStats::default();
        for p in &parts {
            agg.merge(p);
        }
        let g = &shard.global;
        let text = {
            let mut d = shard.db.borrow_mut();
            d.host.connected_clients = g.connected.load(Ordering::Relaxed) as u64;
            d.host.total_connections = g.total_connections.load(Ordering::Relaxed);
            d.host.moved_connections = g.moved_connections.load(Ordering::Relaxed);
            d.host.blocked_clients = g.blocked_clients.load(Ordering::Relaxed);
            d.host.tcp_port = g.port.load(Ordering::Relaxed);
            d.host.used_memory = Some(crate::alloc::allocated() as u64);
            d.host.rss = rss_bytes();
            d.host.shards = shard.n;
            d.info_with(&args[1..], &agg)
        };
        w.verbatim(b"txt", text.as_bytes());
        return false;
    }
    if is(name, "CLIENT") {
        client(shard, me, args, &mut w);
        return false;
    }
    if is(name, "CONFIG") {
        // Check and apply on this shard first: its answer is the reply; then everywhere else.
        let mut local = Vec::new();
        shard.db.borrow_mut().dispatch(session, args, &mut local);
        if local.starts_with(b"+") {
            let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
            let me_id = shard.id;
            everywhere(shard, move |sh| {
                if sh.id != me_id {
                    let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
                    let mut s = Session {
                        authenticated: true,
                        ..Session::default()
                    };
                    sh.db.borrow_mut().dispatch(&mut s, &refs, &mut Vec::new());
                }
            })
            .await;
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
        // Let one shard validate the arguments; apply everywhere only when they are good.
        let mut local = Vec::new();
        shard.db.borrow_mut().dispatch(session, args, &mut local);
        if local.starts_with(b"+") {
            let all = is(name, "FLUSHALL");
            everywhere(shard, move |sh| {
                sh.db.borrow_mut().flush((!all).then_some(db));
            })
            .await;
        }
        w.out.extend_from_slice(&local);
    } else if is(name, "SWAPDB") {
        // Every shard swaps its part (each checks the arguments the same way), then serves the
        // clients blocked on its keys: what they wait for may be in the other database now.
        let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let replies = everywhere(shard, move |sh| {
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            let mut s = Session {
                authenticated: true,
                ..Session::default()
            };
            let mut out = Vec::new();
            sh.db.borrow_mut().dispatch(&mut s, &refs, &mut out);
            sh.serve_all();
            out
        })
        .await;
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
        let clients = lock(&g.clients);
        let mut text = String::new();
        for e in clients.values() {
            text.push_str(&e.line());
            text.push('\n');
        }
        return w.verbatim(b"txt", text.as_bytes());
    }
    // CLIENT KILL addr:port (old form) or CLIENT KILL <filter> <value> ...
    if args.len() == 3 {
        let target = String::from_utf8_lossy(args[2]).into_owned();
        let n = g.kill(|e| e.addr.to_string() == target);
        return if n > 0 {
            w.ok()
        } else {
            w.error(b"ERR No such client")
        };
    }
    if args.len() < 3 || args.len() % 2 != 0 {
        return w.error(b"ERR syntax error");
    }
    let (mut id, mut addr, mut laddr, mut skipme) = (None, None, None, true);
    // TYPE: Some(true) subscribed clients, Some(false) the others.
    let mut pubsub: Option<bool> = None;
    for f in args[2..].chunks_exact(2) {
        let v = String::from_utf8_lossy(f[1]).into_owned();
        if is(f[0], "ID") {
            match v.parse::<u64>() {
                Ok(i) => id = Some(i),
                Err(_) => return w.error(b"ERR client-id should be greater than 0"),
            }
        } else if is(f[0], "ADDR") {
            addr = Some(v);
        } else if is(f[0], "LADDR") {
            laddr = Some(v);
        } else if is(f[0], "TYPE") {
            pubsub = match v.to_ascii_lowercase().as_str() {
                "pubsub" => Some(true),
                "normal" => Some(false),
                // No replicas or masters yet: nobody is of these types.
                "master" | "replica" | "slave" => return w.int(0),
                _ => {
                    let m = format!("ERR Unknown client type '{v}'");
                    return w.error(m.as_bytes());
                }
            };
        } else if is(f[0], "SKIPME") {
            skipme = match v.as_str() {
                "yes" => true,
                "no" => false,
                _ => return w.error(b"ERR syntax error"),
            };
        } else {
            return w.error(b"ERR syntax error");
        }
    }
    let n = g.kill(|e| {
        id.is_none_or(|i| e.id == i)
            && pubsub.is_none_or(|p| e.is_pubsub() == p)
            && addr.as_ref().is_none_or(|a| e.addr.to_string() == *a)
            && laddr.as_ref().is_none_or(|a| e.laddr.to_string() == *a)
            && !(skipme && e.id == me.id)
    });
    w.int(n as i64);
}

fn wrong(w: &mut ReplyWriter<'_>, name: &str) {
    let m = format!("ERR wrong number of arguments for '{name}' command");
    w.error(m.as_bytes());
}
