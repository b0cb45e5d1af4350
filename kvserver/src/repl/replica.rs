//! The replica's side: REPLICAOF host port, the link to the master and what comes over it.
//!
//! A link task (on the shard that ran REPLICAOF) connects, says PING, AUTH (`masterauth`),
//! `REPLCONF listening-port`, `REPLCONF capa eof capa psync2`, then `PSYNC <id> <offset + 1>`
//! with this server's own stream identity, so a former master pointed at its promoted replica
//! continues without a full synchronization. `+FULLRESYNC` brings a snapshot (either of Redis's
//! two formats), loaded in place of every database with every key of every shard locked;
//! `+CONTINUE` keeps the data. The link's socket is then served as a client whose commands are
//! the master's stream (`Session::master`: never refused, replies dropped; see `net::conn`),
//! which answers `REPLCONF GETACK` and acknowledges its offset every second. When the link
//! breaks the task connects again and asks to continue.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kvcore::rdb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{ensure_backlog, MasterLink};
use crate::coord::route;
use crate::global::lock;
use crate::log;
use crate::shard::locks::EVERY_KEY;
use crate::shard::Shard;

/// REPLICAOF / SLAVEOF.
pub async fn replicaof(shard: &Shard, args: &[&[u8]], out: &mut Vec<u8>) {
    let g = &shard.global;
    if args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one") {
        if g.repl.is_replica.load(Ordering::Relaxed) {
            promote(shard).await;
            log!(2, "MASTER MODE enabled (user request)");
        }
        out.extend_from_slice(b"+OK\r\n");
        return;
    }
    let Some(port) = kvcore::num::parse_i64(args[2]) else {
        out.extend_from_slice(b"-ERR value is not an integer or out of range\r\n");
        return;
    };
    let Ok(port) = u16::try_from(port) else {
        out.extend_from_slice(b"-ERR Invalid master port\r\n");
        return;
    };
    let host = String::from_utf8_lossy(args[1]).into_owned();
    {
        let st = lock(&g.repl.state);
        if st
            .master
            .as_ref()
            .is_some_and(|m| m.host.eq_ignore_ascii_case(&host) && m.port == port)
        {
            out.extend_from_slice(b"+OK Already connected to specified master\r\n");
            return;
        }
    }
    follow(shard, host.clone(), port).await;
    log!(2, "REPLICAOF {host}:{port} enabled (user request)");
    out.extend_from_slice(b"+OK\r\n");
}

/// Becomes a replica of `host:port` (from REPLICAOF or the `replicaof` option at start).
pub async fn follow(shard: &Shard, host: String, port: u16) {
    let g = &shard.global;
    let generation = {
        let mut st = lock(&g.repl.state);
        end_link(g, &st);
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
        st.master = Some(MasterLink {
            host: host.clone(),
            port,
            up: false,
            syncing: false,
            last_io: Instant::now(),
            down_since: Instant::now(),
            sync_read: 0,
            generation,
            client: None,
        });
        // Replicas of this server start over from it (they may continue with PSYNC).
        for f in &mut st.followers {
            f.end();
        }
        g.repl.is_replica.store(true, Ordering::Relaxed);
        g.repl.feeding.store(false, Ordering::Relaxed);
        generation
    };
    crate::admin::everywhere(shard, |sh| {
        sh.flush_changes();
        let mut db = sh.db.borrow_mut();
        db.set_replica(true);
        db.master_down = true;
        if sh.aof.borrow().is_none() {
            db.set_change_log(false);
        }
    })
    .await;
    let Some(me) = shard.rc() else {
        return;
    };
    tokio::task::spawn_local(async move {
        link(me, host, port, generation).await;
    });
}

/// REPLICAOF NO ONE: the stream goes on under a new id; the old one stays valid up to here, so
/// the former master and its other replicas can continue from this server.
async fn promote(shard: &Shard) {
    let g = &shard.global;
    {
        let mut st = lock(&g.repl.state);
        // The link being served ends now; its task when it next looks.
        end_link(g, &st);
        st.master = None;
        st.replid2 = std::mem::replace(&mut st.replid, crate::global::new_hex_id());
        st.second_offset = st.offset as i64 + 1;
        g.repl.is_replica.store(false, Ordering::Relaxed);
        if st.backlog.is_some() {
            g.repl.feeding.store(true, Ordering::Relaxed);
        }
    }
    crate::admin::everywhere(shard, |sh| {
        let mut db = sh.db.borrow_mut();
        db.set_replica(false);
        db.master_down = false;
        if sh.global.repl.feeding.load(Ordering::Relaxed) || sh.aof.borrow().is_some() {
            db.set_change_log(true);
        }
    })
    .await;
    super::ensure_backlog(shard).await;
}

/// Cuts the link being served, if any (its socket is shut down: the stream stops at once).
fn end_link(g: &crate::global::Global, st: &super::State) {
    if let Some(id) = st.master.as_ref().and_then(|m| m.client) {
        g.kill(|e| e.id == id);
    }
}

/// The last link generation given out: each REPLICAOF host port starts a new one.
static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Whether the link task of `generation` is still wanted.
pub fn current(shard: &Shard, generation: u64) -> bool {
    lock(&shard.global.repl.state)
        .master
        .as_ref()
        .is_some_and(|m| m.generation == generation)
}

/// Updates the master link's record, if it is still this generation's.
fn note(shard: &Shard, generation: u64, f: impl FnOnce(&mut MasterLink)) {
    let mut st = lock(&shard.global.repl.state);
    if let Some(m) = st.master.as_mut().filter(|m| m.generation == generation) {
        f(m);
    }
}

/// The link task: connects, synchronizes, applies the stream; again after every break, until
/// another REPLICAOF.
async fn link(shard: Rc<Shard>, host: String, port: u16, generation: u64) {
    while current(&shard, generation) {
        log!(2, "Connecting to MASTER {host}:{port}");
        match connect(&shard, &host, port, generation).await {
            Ok(()) => log!(2, "Connection with master lost."),
            Err(e) => log!(3, "Replication with {host}:{port}: {e}"),
        }
        note(&shard, generation, |m| {
            if m.up {
                m.down_since = Instant::now();
            }
            m.up = false;
            m.syncing = false;
        });
        if current(&shard, generation) {
            link_status(&shard, false).await;
        }
        if !current(&shard, generation) {
            break;
        }
        crate::timer::sleep(Duration::from_millis(1000)).await;
    }
}

/// A connection to the master, line by line while handshaking.
struct Wire {
    stream: TcpStream,
    buf: Vec<u8>,
    timeout: Duration,
}

impl Wire {
    async fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut out = Vec::new();
        kvcore::changes::encode(&mut out, args);
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| format!("can't write to the master: {e}"))
    }

    /// Reads what the master sent onto the end of the buffer.
    async fn fill(&mut self) -> Result<(), String> {
        self.buf.reserve(64 << 10);
        let n = crate::timer::timeout(self.timeout, self.stream.read_buf(&mut self.buf))
            .await
            .map_err(|_| "timeout talking to the master".to_string())?
            .map_err(|e| format!("reading from the master: {e}"))?;
        if n == 0 {
            return Err("the master closed the connection".into());
        }
        Ok(())
    }

    /// The next line, without its CRLF.
    async fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf) {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let line = line.strip_suffix(b"\n").unwrap_or(&line);
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                return Ok(String::from_utf8_lossy(line).into_owned());
            }
            if self.buf.len() > 64 << 10 {
                return Err("the master sent a line too long".into());
            }
            self.fill().await?;
        }
    }

    async fn command(&mut self, args: &[&[u8]]) -> Result<String, String> {
        self.send(args).await?;
        self.line().await
    }
}

/// One connection to the master, until it breaks.
async fn connect(shard: &Rc<Shard>, host: &str, port: u16, generation: u64) -> Result<(), String> {
    let g = &shard.global;
    let timeout = super::timeout(shard);
    let stream = crate::timer::timeout(timeout, TcpStream::connect((host, port)))
        .await
        .map_err(|_| "timeout connecting to the master".to_string())?
        .map_err(|e| format!("error connecting to the master: {e}"))?;
    let _ = stream.set_nodelay(true);
    log!(2, "MASTER <-> REPLICA sync started");
    let mut wire = Wire {
        stream,
        buf: Vec::new(),
        timeout,
    };
    let pong = wire.command(&[b"PING"]).await?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") && !pong.starts_with("-NOPERM") {
        return Err(format!("error reply to PING from master: '{pong}'"));
    }
    log!(2, "Master replied to PING, replication can continue...");
    let (auth, user) = {
        let db = shard.db.borrow();
        (
            db.config.get("masterauth").unwrap_or("").to_string(),
            db.config.get("masteruser").unwrap_or("").to_string(),
        )
    };
    if !auth.is_empty() {
        let r = if user.is_empty() {
            wire.command(&[b"AUTH", auth.as_bytes()]).await?
        } else {
            wire.command(&[b"AUTH", user.as_bytes(), auth.as_bytes()])
                .await?
        };
        if r.starts_with('-') {
            return Err(format!("unable to AUTH to MASTER: {r}"));
        }
    }
    let my_port = g.port.load(Ordering::Relaxed).to_string();
    let r = wire
        .command(&[b"REPLCONF", b"listening-port", my_port.as_bytes()])
        .await?;
    if r.starts_with('-') {
        log!(
            2,
            "(Non critical) Master does not understand REPLCONF listening-port: {r}"
        );
    }
    let r = wire
        .command(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])
        .await?;
    if r.starts_with('-') {
        log!(
            2,
            "(Non critical) Master does not understand REPLCONF capa: {r}"
        );
    }
    let (replid, from) = {
        let st = lock(&g.repl.state);
        (st.replid.clone(), st.offset + 1)
    };
    log!(
        2,
        "Trying a partial resynchronization (request {replid}:{from})."
    );
    let from_text = from.to_string();
    wire.send(&[b"PSYNC", replid.as_bytes(), from_text.as_bytes()])
        .await?;
    let reply = loop {
        let l = wire.line().await?;
        // Newlines keep the link alive while the master prepares.
        if !l.is_empty() {
            break l;
        }
    };
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut words = rest.split_whitespace();
        let (Some(id), Some(off)) = (words.next(), words.next().and_then(|o| o.parse().ok()))
        else {
            return Err(format!("bad FULLRESYNC reply: '{reply}'"));
        };
        log!(2, "Full resync from master: {id}:{off}");
        note(shard, generation, |m| m.syncing = true);
        let file = receive_file(&mut wire, shard, generation).await?;
        load(shard, file, id, off).await?;
        log!(2, "MASTER <-> REPLICA sync: Finished with success");
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let new_id = rest.trim();
        {
            let mut st = lock(&g.repl.state);
            if !new_id.is_empty() && new_id != st.replid {
                st.replid2 = std::mem::replace(&mut st.replid, new_id.to_string());
                st.second_offset = st.offset as i64 + 1;
                // Replicas of this one learn the new id by connecting again.
                for f in &mut st.followers {
                    f.end();
                }
            }
        }
        ensure_backlog(shard).await;
        log!(2, "Successful partial resynchronization with master.");
    } else {
        return Err(format!("unexpected reply to PSYNC from master: '{reply}'"));
    }
    if !current(shard, generation) {
        return Ok(());
    }
    note(shard, generation, |m| {
        m.up = true;
        m.syncing = false;
        m.last_io = Instant::now();
    });
    link_status(shard, true).await;
    let Wire { stream, buf, .. } = wire;
    crate::net::conn::serve_master(shard.clone(), stream, buf, generation).await;
    Ok(())
}

/// Tells every shard whether the link is up (MASTERDOWN while it is not).
async fn link_status(shard: &Shard, up: bool) {
    crate::admin::everywhere(shard, move |sh| sh.db.borrow_mut().master_down = !up).await;
}

/// Receives the snapshot in either of Redis's formats: `$<length>` and that many bytes, or
/// `$EOF:<40-byte mark>`, the bytes, and the mark again. Bytes after it (the stream's first)
/// stay in the wire's buffer.
async fn receive_file(wire: &mut Wire, shard: &Shard, generation: u64) -> Result<Vec<u8>, String> {
    let head = loop {
        let l = wire.line().await?;
        if !l.is_empty() {
            break l;
        }
    };
    if head.starts_with('-') {
        return Err(format!("the master aborted the synchronization: {head}"));
    }
    let Some(spec) = head.strip_prefix('$') else {
        return Err(format!("bad snapshot header from master: '{head}'"));
    };
    let progress = |wire: &Wire| {
        let n = wire.buf.len() as u64;
        note(shard, generation, |m| {
            m.sync_read = n;
            m.last_io = Instant::now();
        });
    };
    if let Some(mark) = spec.strip_prefix("EOF:") {
        let mark = mark.as_bytes().to_vec();
        if mark.len() != 40 {
            return Err("bad end mark from master".into());
        }
        let mut searched = 0;
        loop {
            if let Some(i) = memchr::memmem::find(&wire.buf[searched..], &mark) {
                let end = searched + i;
                let rest = wire.buf.split_off(end + mark.len());
                let mut file = std::mem::replace(&mut wire.buf, rest);
                file.truncate(end);
                return Ok(file);
            }
            searched = wire.buf.len().saturating_sub(mark.len());
            wire.fill().await?;
            progress(wire);
        }
    }
    let len: usize = spec
        .parse()
        .map_err(|_| format!("bad snapshot length from master: '{head}'"))?;
    // Room for the file up front, up to a bound (a length is only a claim until the bytes
    // come; past it the buffer grows as they do).
    wire.buf
        .reserve(len.min(256 << 20).saturating_sub(wire.buf.len()));
    while wire.buf.len() < len {
        wire.fill().await?;
        progress(wire);
    }
    let rest = wire.buf.split_off(len);
    Ok(std::mem::replace(&mut wire.buf, rest))
}

/// Replaces every database with the snapshot's keys (every key of every shard locked
/// meanwhile), and takes the master's stream identity: its id, its offset, an empty backlog.
async fn load(shard: &Shard, file: Vec<u8>, replid: &str, offset: u64) -> Result<(), String> {
    let g = &shard.global;
    let config = shard.db.borrow().config.clone();
    let n = shard.n;
    let started = Instant::now();
    // The file is parsed on a thread of its own, so this shard's event loop goes on meanwhile
    // (the old data is served until the switch).
    let (tx, rx) = futures_channel::oneshot::channel();
    std::thread::Builder::new()
        .name("repl-load".into())
        .spawn(move || {
            let mut by_shard: Vec<Vec<rdb::LoadedKey>> = (0..n).map(|_| Vec::new()).collect();
            let store = kvcore::Db::with_config(config.clone());
            // Keys past their deadline are loaded too: the master decides when they go.
            let r = rdb::load_file(&file, store.rdb_limits(), 0, config.databases, |k| {
                by_shard[route::shard_of(&k.key, n)].push(k)
            });
            let _ = tx.send(r.map(|stats| (stats, by_shard)));
        })
        .map_err(|e| format!("can't start the loading thread: {e}"))?;
    let (stats, by_shard) = rx
        .await
        .map_err(|_| "the loading thread stopped".to_string())?
        .map_err(|e| format!("can't load the master's snapshot: {e}"))?;
    for s in 0..n {
        shard.lock(s, vec![EVERY_KEY], true).await;
    }
    // The master's functions replace ours, as its keys do.
    let functions = shard.db.borrow().scripts.functions().clone();
    if let Err(e) = functions.restore(&stats.functions, kvcore::function::Policy::Flush) {
        log!(
            3,
            "MASTER <-> REPLICA sync: can't load the master's functions: {}",
            String::from_utf8_lossy(&e)
        );
    }
    let loads = by_shard.into_iter().enumerate().map(|(s, keys)| {
        shard.call(s, move |sh| {
            sh.flush_changes();
            let mut db = sh.db.borrow_mut();
            db.flush(None);
            for k in keys {
                db.load_key(k);
            }
        })
    });
    futures_util::future::join_all(loads).await;
    {
        let mut st = lock(&g.repl.state);
        st.replid = replid.to_string();
        st.replid2 = "0".repeat(40);
        st.second_offset = -1;
        st.offset = offset;
        st.link_db = 0;
        st.backlog = None;
        for f in &mut st.followers {
            f.end();
        }
    }
    ensure_backlog(shard).await;
    for s in 0..n {
        shard.unlock(s, vec![EVERY_KEY], true).await;
    }
    g.loaded_keys.store(stats.loaded, Ordering::Relaxed);
    // The append-only file held the data before the sync: it is rewritten from the new data
    // (as Redis restarts its AOF after a sync).
    if lock(&g.aof.link).is_some() {
        g.aof.scheduled.store(true, Ordering::Relaxed);
    }
    log!(
        2,
        "MASTER <-> REPLICA sync: Loading DB in memory: {:.3} seconds ({} keys)",
        started.elapsed().as_secs_f64(),
        stats.loaded
    );
    Ok(())
}
