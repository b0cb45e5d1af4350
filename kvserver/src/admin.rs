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
        "debug" => {
            n > 1
                && args.len() == 3
                && (is(args[1], "SET-ACTIVE-EXPIRE") || is(args[1], "QUICKLIST-PACKED-THRESHOLD"))
        }
        "memory" => args.len() == 2 && ["STATS", "DOCTOR", "PURGE"].iter().any(|s| is(args[1], s)),
        "client" => {
            args.len() >= 2
                && ["LIST", "INFO", "KILL", "PAUSE", "UNPAUSE"]
                    .iter()
                    .any(|s| is(args[1], s))
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
            d.host.used_memory = Some(crate::alloc::sample_peak() as u64);
            d.host.peak_memory = Some(crate::alloc::peak() as u64);
            d.host.startup_memory = Some(crate::alloc::startup() as u64);
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
    if is(name, "CONFIG") || is(name, "DEBUG") {
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
    client_kill(g, me, args, w)
}

/// The kind of client a TYPE filter names: `Some(true)` subscribed, `Some(false)` normal,
/// `None` masters and replicas (there are none yet); `Err` for an unknown name.
fn client_type(name: &[u8]) -> Result<Option<bool>, Vec<u8>> {
    match name.to_ascii_lowercase().as_slice() {
        b"pubsub" => Ok(Some(true)),
        b"normal" => Ok(Some(false)),
        b"master" | b"replica" | b"slave" => Ok(None),
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
            if kind.is_some_and(|pubsub| e.is_pubsub() == pubsub) {
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
    let mut max_age: Option<u64> = None;
    // TYPE: Some(Some(true)) subscribed clients, Some(Some(false)) the others, Some(None)
    // masters and replicas (none yet).
    let mut kind: Option<Option<bool>> = None;
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
            // One user exists: `default`, whom every client is.
            if value != b"default" {
                let mut m = b"ERR No such user '".to_vec();
                m.extend_from_slice(value);
                m.push(b'\'');
                return w.error(&m);
            }
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
            && kind.is_none_or(|k| k.is_some_and(|pubsub| e.is_pubsub() == pubsub))
            && addr.as_ref().is_none_or(|a| e.addr.to_string() == *a)
            && laddr.as_ref().is_none_or(|a| e.laddr.to_string() == *a)
            && max_age.is_none_or(|m| e.created.elapsed().as_secs() >= m)
            && !(skipme && e.id == me.id)
    });
    w.int(n as i64);
}

fn wrong(w: &mut ReplyWriter<'_>, name: &str) {
    let m = format!("ERR wrong number of arguments for '{name}' command");
    w.error(m.as_bytes());
}
