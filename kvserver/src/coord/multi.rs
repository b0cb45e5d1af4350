//! Commands whose keys span shards, made atomic with key intent locks.
//!
//! The coordinator (the client's executor) groups the key arguments by shard, locks them shard
//! by shard in ascending order, runs one piece per shard in parallel, then unlocks everywhere.
//! Nobody else can touch a locked key in between, so a reader never sees half of an MSET, and
//! MSETNX checks and writes under the same locks. Each piece is a closure run on the owning
//! shard's store; values cross executors by move (RENAME) or by clone (COPY).

use std::collections::BTreeMap;
use std::rc::Rc;

use futures_util::future::join_all;
use kvcore::commands::{self, flags, sort_api, stream_api, CommandSpec};
use kvcore::events::class::GENERIC;
use kvcore::resp::ReplyWriter;
use kvcore::value::Value;
use kvcore::{OpError, Session, SetOptions};

use super::route;
use crate::shard::locks::LockKey;
use crate::shard::Shard;

/// Key arguments grouped by owning shard, in ascending shard order.
type Plan = BTreeMap<usize, Vec<Vec<u8>>>;
/// Key-value pairs grouped by owning shard.
type PairPlan = BTreeMap<usize, Vec<(Vec<u8>, Vec<u8>)>>;

fn plan(n: usize, keys: impl Iterator<Item = Vec<u8>>) -> Plan {
    let mut p = Plan::new();
    for k in keys {
        p.entry(route::shard_of(&k, n)).or_default().push(k);
    }
    p
}

async fn lock_all(shard: &Shard, held: bool, db: usize, p: &Plan, exclusive: bool) {
    if held {
        return;
    }
    for (&s, keys) in p {
        let lk: Vec<LockKey> = keys.iter().map(|k| (db, k.clone())).collect();
        shard.lock(s, lk, exclusive).await;
    }
}

async fn unlock_all(shard: &Shard, held: bool, db: usize, p: &Plan, exclusive: bool) {
    if held {
        return;
    }
    for (&s, keys) in p {
        let lk: Vec<LockKey> = keys.iter().map(|k| (db, k.clone())).collect();
        shard.unlock(s, lk, exclusive).await;
    }
}

/// Logs a command spanning shards whole, once, in this shard's change log, and hands it to
/// the AOF writer: called with its keys still locked, so that no later write to them can
/// reach the file first. (Commands a shard ran through its store are logged there.)
fn log_whole(shard: &Shard, db: usize, args: &[&[u8]]) {
    if !shard.db.borrow().logs_changes() {
        return;
    }
    shard.db.borrow_mut().log_change(db, args);
    shard.flush_changes();
}

/// Runs `f(keys)` on every shard of the plan in parallel; results in plan order.
async fn on_each<R, F>(shard: &Shard, p: &Plan, f: F) -> Vec<R>
where
    R: Send + 'static,
    F: Fn(&Shard, Vec<Vec<u8>>) -> R + Send + Sync + Clone + 'static,
{
    join_all(p.iter().map(|(&s, keys)| {
        let keys = keys.clone();
        let f = f.clone();
        shard.call(s, move |sh: &Shard| {
            sh.db.borrow_mut().refresh_clock();
            f(sh, keys)
        })
    }))
    .await
}

/// Locks the plan's keys on each shard in ascending order and runs `f(keys)` there in the step
/// that grants them ([`Shard::lock_call`]: one round trip a shard, where [`lock_all`] then
/// [`on_each`] take one more); results in plan order. Nothing is released: the caller logs,
/// then calls [`unlock_all`]. Running a shard's piece before a later shard's locks are granted
/// is safe: every lock is held until all pieces have run. With `held` (a transaction holds the
/// locks), [`on_each`].
async fn in_lock_steps<R, F>(
    shard: &Shard,
    held: bool,
    db: usize,
    p: &Plan,
    exclusive: bool,
    f: F,
) -> Vec<R>
where
    R: Send + 'static,
    F: Fn(&Shard, Vec<Vec<u8>>) -> R + Send + Sync + Clone + 'static,
{
    if held {
        return on_each(shard, p, f).await;
    }
    let mut out = Vec::with_capacity(p.len());
    for (&s, keys) in p {
        let lk: Vec<LockKey> = keys.iter().map(|k| (db, k.clone())).collect();
        let (keys, f) = (keys.clone(), f.clone());
        let r = shard
            .lock_call(s, lk, exclusive, move |sh: &Shard| {
                sh.db.borrow_mut().refresh_clock();
                f(sh, keys)
            })
            .await;
        out.push(r);
    }
    out
}

/// Runs a multi-key command whose keys live on several shards; appends the reply to `out`,
/// then serves the clients blocked on the keys it wrote.
pub async fn run(shard: &Rc<Shard>, session: &mut Session, args: &[&[u8]], out: &mut Vec<u8>) {
    run_locked(shard, false, session, args, out).await;
    if let Some(spec) = commands::lookup(args[0]) {
        super::blocking::wake_after_multi(shard, spec, args).await;
    }
}

/// Runs a multi-key command; `held`: the caller (a transaction) already holds the locks of
/// its keys, so it takes none. The clients blocked on its keys are the caller's to serve.
pub async fn run_locked(
    shard: &Rc<Shard>,
    held: bool,
    session: &mut Session,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) {
    let mut w = ReplyWriter {
        out,
        proto: session.proto,
    };
    let Some(spec) = commands::lookup(args[0]) else {
        return;
    };
    let db = session.db;
    let n = shard.n;
    let owned = |i: usize| args[i].to_vec();
    match spec.name {
        "mget" => {
            let p = plan(n, (1..args.len()).map(owned));
            let parts = in_lock_steps(shard, held, db, &p, false, move |sh, keys| {
                let mut d = sh.db.borrow_mut();
                keys.iter()
                    .map(|k| d.get_in(db, k).ok().flatten())
                    .collect::<Vec<_>>()
            })
            .await;
            unlock_all(shard, held, db, &p, false).await;
            // Answers come back grouped by shard; put them back in argument order.
            let mut by_shard: BTreeMap<usize, std::vec::IntoIter<Option<Vec<u8>>>> = p
                .keys()
                .copied()
                .zip(parts.into_iter().map(Vec::into_iter))
                .collect();
            w.array_len(args.len() - 1);
            for k in &args[1..] {
                match by_shard
                    .get_mut(&route::shard_of(k, n))
                    .and_then(Iterator::next)
                    .flatten()
                {
                    Some(v) => w.bulk(&v),
                    None => w.null(),
                }
            }
        }
        "mset" | "msetnx" => {
            if args.len() % 2 == 0 {
                let mut m = b"ERR wrong number of arguments for '".to_vec();
                m.extend_from_slice(spec.name.as_bytes());
                m.extend_from_slice(b"' command");
                return w.error(&m);
            }
            let mut pairs = PairPlan::new();
            for kv in args[1..].chunks_exact(2) {
                pairs
                    .entry(route::shard_of(kv[0], n))
                    .or_default()
                    .push((kv[0].to_vec(), kv[1].to_vec()));
            }
            let p: Plan = pairs
                .iter()
                .map(|(&s, kvs)| (s, kvs.iter().map(|(k, _)| k.clone()).collect()))
                .collect();
            lock_all(shard, held, db, &p, true).await;
            let nx = spec.name == "msetnx";
            let mut allowed = true;
            if nx {
                let found = on_each(shard, &p, move |sh, keys| {
                    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                    sh.db.borrow_mut().exists_in(db, &refs)
                })
                .await;
                allowed = found.iter().all(|&c| c == 0);
            }
            if allowed {
                join_all(pairs.into_iter().map(|(s, kvs)| {
                    shard.call(s, move |sh: &Shard| {
                        let mut d = sh.db.borrow_mut();
                        d.refresh_clock();
                        for (k, v) in &kvs {
                            let _ = d.set_in(db, k, v, SetOptions::default());
                        }
                    })
                }))
                .await;
                log_whole(shard, db, args);
            }
            unlock_all(shard, held, db, &p, true).await;
            if nx {
                w.int(i64::from(allowed));
            } else {
                w.ok();
            }
        }
        "del" | "unlink" | "exists" | "touch" => {
            let write = spec.has(flags::WRITE);
            let touch = spec.name == "touch";
            let p = plan(n, (1..args.len()).map(owned));
            let counts = in_lock_steps(shard, held, db, &p, write, move |sh, keys| {
                let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let mut d = sh.db.borrow_mut();
                if write {
                    d.del_in(db, &refs)
                } else if touch {
                    d.touch_in(db, &refs)
                } else {
                    d.exists_in(db, &refs)
                }
            })
            .await;
            if write && counts.iter().any(|&c| c > 0) {
                log_whole(shard, db, args);
            }
            unlock_all(shard, held, db, &p, write).await;
            w.int(counts.iter().sum::<usize>() as i64);
        }
        "rename" | "renamenx" | "copy" => {
            move_key(shard, held, session, spec.name, args, &mut w).await
        }
        "zunionstore" | "zinterstore" | "zdiffstore" | "zrangestore" | "geosearchstore"
        | "georadius" | "georadiusbymember" | "zunion" | "zinter" | "zdiff" | "zintercard"
        | "sinter" | "sunion" | "sdiff" | "sintercard" | "sinterstore" | "sunionstore"
        | "sdiffstore" | "bitop" | "lcs" | "pfcount" | "pfmerge" => {
            with_sources(shard, held, session, spec, args, w.out).await
        }
        "zmpop" | "lmpop" => mpop(shard, held, session, spec, args, w.out).await,
        "smove" => match set_move_across(shard, held, db, args[1], args[2], args[3]).await {
            Ok(moved) => w.int(i64::from(moved)),
            Err(e) => w.error(e.message().as_bytes()),
        },
        "lmove" | "rpoplpush" => {
            let side = |a: &[u8]| {
                if a.eq_ignore_ascii_case(b"LEFT") {
                    Some(true)
                } else if a.eq_ignore_ascii_case(b"RIGHT") {
                    Some(false)
                } else {
                    None
                }
            };
            let (from, to) = if spec.name == "rpoplpush" {
                (Some(false), Some(true))
            } else {
                (side(args[3]), side(args[4]))
            };
            let (Some(from), Some(to)) = (from, to) else {
                return w.error(b"ERR syntax error");
            };
            match list_move_across(shard, held, db, args[1], args[2], from, to).await {
                Ok(Some(v)) => w.bulk(&v),
                Ok(None) => w.null(),
                Err(e) => w.error(e.message().as_bytes()),
            }
        }
        "sort" | "sort_ro" => sort(shard, held, session, spec, args, w.out).await,
        "xread" | "xreadgroup" => {
            // Inside a transaction, or without BLOCK: answered at once.
            let keys = match stream_api::parse_read(args, 0) {
                Ok(c) => c.keys.to_vec(),
                Err(e) => return w.error(&e),
            };
            match stream_read_across(shard, held, session.db, session.proto, args).await {
                Ok((served, _)) if !served.is_empty() => {
                    stream_api::write_reads(&mut w, &keys, &served)
                }
                Ok(_) => w.null_array(),
                Err(e) => w.error(&e),
            }
        }
        name if commands::scripting_api::is_script_command(name) => {
            super::script::run_everywhere(shard, held, session, args, w.out).await
        }
        _ => w.error(b"CROSSSLOT Keys in request don't hash to the same slot"),
    }
}

/// RENAME, RENAMENX and COPY between two shards.
async fn move_key(
    shard: &Rc<Shard>,
    held: bool,
    session: &Session,
    name: &str,
    args: &[&[u8]],
    w: &mut ReplyWriter<'_>,
) {
    let src_db = session.db;
    let (mut dst_db, mut replace) = (src_db, false);
    if name == "copy" {
        let mut i = 3;
        while i < args.len() {
            if args[i].eq_ignore_ascii_case(b"REPLACE") {
                replace = true;
                i += 1;
            } else if args[i].eq_ignore_ascii_case(b"DB") && i + 1 < args.len() {
                let d = match kvcore::num::parse_i64(args[i + 1]) {
                    None => return w.error(OpError::NotInteger.message().as_bytes()),
                    Some(d) if i32::try_from(d).is_err() => {
                        return w.error(OpError::NotInt32.message().as_bytes())
                    }
                    Some(d) => d,
                };
                match usize::try_from(d) {
                    Ok(d) if d < shard.db.borrow().databases() => dst_db = d,
                    _ => return w.error(OpError::DbIndexOutOfRange.message().as_bytes()),
                }
                i += 2;
            } else {
                return w.error(b"ERR syntax error");
            }
        }
    }
    let (src, dst) = (args[1].to_vec(), args[2].to_vec());
    let (ss, ds) = (
        route::shard_of(&src, shard.n),
        route::shard_of(&dst, shard.n),
    );
    // Lock in ascending shard order, like every other multi-shard command.
    let order = if ss < ds {
        [(ss, src_db, &src), (ds, dst_db, &dst)]
    } else {
        [(ds, dst_db, &dst), (ss, src_db, &src)]
    };
    for (s, d, k) in order {
        if !held {
            shard.lock(s, vec![(d, k.clone())], true).await;
        }
    }
    let reply = async {
        let k = src.clone();
        let moved = if name == "copy" {
            shard
                .call(ss, move |sh: &Shard| {
                    let mut d = sh.db.borrow_mut();
                    d.refresh_clock();
                    d.dump_in(src_db, &k)
                })
                .await
        } else {
            let k2 = dst.clone();
            // RENAMENX checks the destination before anything moves.
            if name == "renamenx" {
                let exists_src = shard
                    .call(ss, {
                        let k = k.clone();
                        move |sh: &Shard| sh.db.borrow_mut().exists_in(src_db, &[&k])
                    })
                    .await;
                if exists_src == 0 {
                    return Err(&b"ERR no such key"[..]);
                }
                let taken = shard
                    .call(ds, move |sh: &Shard| {
                        let mut d = sh.db.borrow_mut();
                        d.refresh_clock();
                        d.exists_in(dst_db, &[&k2])
                    })
                    .await;
                if taken > 0 {
                    return Ok(0);
                }
            }
            shard
                .call(ss, move |sh: &Shard| {
                    let mut d = sh.db.borrow_mut();
                    d.refresh_clock();
                    let taken = d.take_in(src_db, &k);
                    if taken.is_some() {
                        d.notify(GENERIC, "rename_from", src_db, &k);
                    }
                    taken
                })
                .await
        };
        let Some((value, ttl)) = moved else {
            return if name == "copy" {
                Ok(0)
            } else {
                Err(&b"ERR no such key"[..])
            };
        };
        let k = dst.clone();
        let is_copy = name == "copy";
        let done = shard
            .call(ds, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                d.refresh_clock();
                if is_copy && !replace && d.exists_in(dst_db, &[&k]) > 0 {
                    return false;
                }
                d.restore_in(dst_db, &k, value, ttl);
                d.notify(
                    GENERIC,
                    if is_copy { "copy_to" } else { "rename_to" },
                    dst_db,
                    &k,
                );
                true
            })
            .await;
        Ok(i64::from(done))
    }
    .await;
    if matches!(reply, Ok(v) if v > 0) {
        log_whole(shard, src_db, args);
    }
    for (s, d, k) in order {
        if !held {
            shard.unlock(s, vec![(d, k.clone())], true).await;
        }
    }
    match reply {
        Err(e) => w.error(e),
        Ok(_) if name == "rename" => w.ok(),
        Ok(v) => w.int(v),
    }
}

/// A command reading keys of several shards and writing at most one (ZUNIONSTORE,
/// ZRANGESTORE, GEOSEARCHSTORE, GEORADIUS ... STORE, PFMERGE, and the pure reads ZUNION,
/// ZINTERCARD, PFCOUNT of several keys ...): with every key locked, copies of the sources travel to the shard owning the
/// destination (this one, for a pure read) and the command runs there on them, so no other
/// client sees the sources change under it or the destination half-written.
async fn with_sources(
    shard: &Rc<Shard>,
    held: bool,
    session: &Session,
    spec: &'static CommandSpec,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) {
    let (db, n) = (session.db, shard.n);
    let positions = spec.key_positions(args);
    let dest = spec.written_key_positions(args).first().copied();
    let all = plan(n, positions.iter().map(|&i| args[i].to_vec()));
    let write = dest.is_some();
    lock_all(shard, held, db, &all, write).await;
    let target = dest.map_or(shard.id, |i| route::shard_of(args[i], n));
    // Only sources of other shards travel: the target's own keys (the destination among them,
    // when it is also a source) are read in place, deadline and all.
    let mut source_keys: Vec<Vec<u8>> = positions
        .iter()
        .filter(|&&i| Some(i) != dest && route::shard_of(args[i], n) != target)
        .map(|&i| args[i].to_vec())
        .collect();
    // A key named twice (ZINTER 2 a a) travels once.
    source_keys.sort_unstable();
    source_keys.dedup();
    let values = fetch(shard, db, source_keys).await;
    let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    let reply = dispatch_on(shard, target, session, owned, values).await;
    unlock_all(shard, held, db, &all, write).await;
    out.extend_from_slice(&reply);
}

/// Clones of `keys`' values from the shards that own them (`None`: missing), for
/// [`dispatch_on`].
async fn fetch(shard: &Shard, db: usize, keys: Vec<Vec<u8>>) -> Vec<(Vec<u8>, Option<Value>)> {
    let p = plan(shard.n, keys.into_iter());
    on_each(shard, &p, move |sh, keys| {
        let mut d = sh.db.borrow_mut();
        keys.into_iter()
            .map(|k| {
                let v = d.dump_in(db, &k).map(|(v, _deadline)| v);
                (k, v)
            })
            .collect::<Vec<(Vec<u8>, Option<Value>)>>()
    })
    .await
    .into_iter()
    .flatten()
    .collect()
}

/// SORT and SORT_RO whose keys may live on several shards. The keys that BY and GET patterns
/// name depend on the sorted key's elements, so: read the elements, lock the sorted key, the
/// destination and every named key, and read the elements again under the locks; if they now
/// name a key that is not locked (a write came in between), unlock and start over with it
/// added. Then the values of keys on other shards travel to the shard of the destination (this
/// one, without STORE) and the command runs there on them, as in [`with_sources`].
async fn sort(
    shard: &Rc<Shard>,
    held: bool,
    session: &Session,
    spec: &'static CommandSpec,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) {
    let (db, n) = (session.db, shard.n);
    let dest = spec.written_key_positions(args).first().copied();
    let target = dest.map_or(shard.id, |i| route::shard_of(args[i], n));
    let own: Vec<&[u8]> = spec.key_positions(args).iter().map(|&i| args[i]).collect();
    let source = args[1].to_vec();
    let elements_of =
        |fetched: Vec<(Vec<u8>, Option<Value>)>| fetched.into_iter().next().and_then(|(_, v)| v);
    let first = elements_of(fetch(shard, db, vec![source.clone()]).await);
    let mut named = sort_api::referenced_keys(args, first.as_ref());
    loop {
        let mut keys: Vec<Vec<u8>> = own.iter().map(|k| k.to_vec()).collect();
        keys.extend(named.iter().cloned());
        keys.sort_unstable();
        keys.dedup();
        let all = plan(n, keys.into_iter());
        lock_all(shard, held, db, &all, dest.is_some()).await;
        if sort_api::parses(args) {
            let k = source.clone();
            shard
                .call(route::shard_of(&source, n), move |sh: &Shard| {
                    let mut d = sh.db.borrow_mut();
                    d.refresh_clock();
                    d.sort_prepare(db, &k);
                })
                .await;
        }
        let value = elements_of(fetch(shard, db, vec![source.clone()]).await);
        let now_named = sort_api::referenced_keys(args, value.as_ref());
        if now_named.iter().any(|k| named.binary_search(k).is_err()) {
            unlock_all(shard, held, db, &all, dest.is_some()).await;
            named.extend(now_named);
            named.sort_unstable();
            named.dedup();
            continue;
        }
        let mut travel: Vec<Vec<u8>> = std::iter::once(source.clone())
            .chain(now_named)
            .filter(|k| route::shard_of(k, n) != target)
            .collect();
        travel.sort_unstable();
        travel.dedup();
        let values = fetch(shard, db, travel).await;
        let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let reply = dispatch_on(shard, target, session, owned, values).await;
        unlock_all(shard, held, db, &all, dest.is_some()).await;
        out.extend_from_slice(&reply);
        return;
    }
}

/// Locks one key on each of two different shards, exclusively, in ascending shard order (the
/// order every command spanning shards locks in); returns what [`unlock_two`] releases.
async fn lock_two(
    shard: &Shard,
    held: bool,
    db: usize,
    a: (usize, &[u8]),
    b: (usize, &[u8]),
) -> [(usize, Vec<LockKey>); 2] {
    let on = |(s, k): (usize, &[u8])| (s, vec![(db, k.to_vec())]);
    let order = if a.0 <= b.0 {
        [on(a), on(b)]
    } else {
        [on(b), on(a)]
    };
    if !held {
        for (s, keys) in &order {
            shard.lock(*s, keys.clone(), true).await;
        }
    }
    order
}

async fn unlock_two(shard: &Shard, held: bool, order: [(usize, Vec<LockKey>); 2]) {
    if held {
        return;
    }
    for (s, keys) in order {
        shard.unlock(s, keys, true).await;
    }
}

/// LMOVE (RPOPLPUSH, a served BLMOVE) from `src` to `dst`, wherever they live, atomic as seen
/// by other clients: both keys locked, the source looked at first (missing: `None`, whatever
/// the destination holds, as Redis answers), then the destination's type (a wrong type moves
/// nothing), then the pop and the push, and the destination's waiters served.
pub async fn list_move_across(
    shard: &Shard,
    held: bool,
    db: usize,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> Result<Option<Vec<u8>>, OpError> {
    let n = shard.n;
    let (src, dst) = (src.to_vec(), dst.to_vec());
    let (ss, ds) = (route::shard_of(&src, n), route::shard_of(&dst, n));
    if ss == ds {
        // One shard: one step of it is atomic already.
        return shard
            .call(ss, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                d.refresh_clock();
                let r = d.list_move(db, &src, &dst, from_left, to_left);
                if matches!(r, Ok(Some(_))) {
                    d.log_change(db, &lmove_args(&src, &dst, from_left, to_left));
                }
                drop(d);
                sh.serve(&dst);
                r
            })
            .await;
    }
    let order = lock_two(shard, held, db, (ss, &src), (ds, &dst)).await;
    let moved = async {
        let k = src.clone();
        let has = shard
            .call(ss, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                d.refresh_clock();
                d.holds_list(db, &k)
            })
            .await?;
        if !has {
            return Ok(None);
        }
        let k = dst.clone();
        shard
            .call(ds, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                d.refresh_clock();
                d.holds_list(db, &k)
            })
            .await?;
        let k = src.clone();
        let v = shard
            .call(ss, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                let popped = d.list_pop(db, &k, from_left, 1);
                d.signal_modified(db, &k);
                popped
            })
            .await?;
        let Some(v) = v.into_iter().next() else {
            return Ok(None);
        };
        let (k, pushed) = (dst.clone(), v.clone());
        shard
            .call(ds, move |sh: &Shard| {
                let r = {
                    let mut d = sh.db.borrow_mut();
                    let r = d.list_push(db, &k, &[&pushed], to_left, false);
                    d.signal_modified(db, &k);
                    r
                };
                sh.serve(&k);
                r
            })
            .await?;
        Ok(Some(v))
    }
    .await;
    if matches!(moved, Ok(Some(_))) {
        log_whole(shard, db, &lmove_args(&src, &dst, from_left, to_left));
    }
    unlock_two(shard, held, order).await;
    moved
}

/// The LMOVE that logs a move.
fn lmove_args<'a>(src: &'a [u8], dst: &'a [u8], from_left: bool, to_left: bool) -> [&'a [u8]; 5] {
    let side = |left: bool| if left { &b"LEFT"[..] } else { &b"RIGHT"[..] };
    [b"LMOVE", src, dst, side(from_left), side(to_left)]
}

/// SMOVE between two shards, atomic as seen by other clients: both keys locked, the source
/// looked at first (missing: 0), then the destination's type (a wrong type moves nothing, as
/// Redis checks both before it removes), then the removal and the add.
async fn set_move_across(
    shard: &Shard,
    held: bool,
    db: usize,
    src: &[u8],
    dst: &[u8],
    member: &[u8],
) -> Result<bool, OpError> {
    let n = shard.n;
    let (src, dst, m) = (src.to_vec(), dst.to_vec(), member.to_vec());
    let (ss, ds) = (route::shard_of(&src, n), route::shard_of(&dst, n));
    let order = lock_two(shard, held, db, (ss, &src), (ds, &dst)).await;
    let moved = async {
        let look = |s: usize, k: Vec<u8>, m: Vec<u8>| {
            shard.call(s, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                d.refresh_clock();
                d.set_contains(db, &k, &m)
            })
        };
        let Some(is_member) = look(ss, src.clone(), m.clone()).await? else {
            return Ok(false);
        };
        look(ds, dst.clone(), m.clone()).await?;
        if !is_member {
            return Ok(false);
        }
        let (k, mm) = (src.clone(), m.clone());
        shard
            .call(ss, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                let removed = d.set_remove(db, &k, &[&mm]);
                d.signal_modified(db, &k);
                removed
            })
            .await?;
        let (k, mm) = (dst.clone(), m.clone());
        shard
            .call(ds, move |sh: &Shard| {
                let mut d = sh.db.borrow_mut();
                let added = d.set_add(db, &k, &[&mm]);
                d.signal_modified(db, &k);
                added
            })
            .await?;
        Ok(true)
    }
    .await;
    if matches!(moved, Ok(true)) {
        log_whole(shard, db, &[b"SMOVE", &src, &dst, &m]);
    }
    unlock_two(shard, held, order).await;
    moved
}

/// ZMPOP and LMPOP over keys of several shards: with every key locked, pops from the first
/// key (in argument order) that holds elements, as Redis does, by running the one-key form on
/// the shard owning each key in turn until one answers with elements (or an error).
async fn mpop(
    shard: &Rc<Shard>,
    held: bool,
    session: &Session,
    spec: &'static CommandSpec,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) {
    let (db, n) = (session.db, shard.n);
    let positions = spec.key_positions(args);
    let after_keys = positions.last().map_or(args.len(), |&l| l + 1);
    if after_keys >= args.len() {
        // No MIN|MAX after the keys (the one-key form would misreport it as an arity error).
        out.extend_from_slice(b"-ERR syntax error\r\n");
        return;
    }
    let all = plan(n, positions.iter().map(|&i| args[i].to_vec()));
    lock_all(shard, held, db, &all, true).await;
    let tail: Vec<Vec<u8>> = args[after_keys..].iter().map(|a| a.to_vec()).collect();
    let mut reply = Vec::new();
    for &i in &positions {
        let mut one = vec![args[0].to_vec(), b"1".to_vec(), args[i].to_vec()];
        one.extend(tail.iter().cloned());
        reply = dispatch_on(shard, route::shard_of(args[i], n), session, one, Vec::new()).await;
        // A null reply: this key holds nothing, try the next.
        if reply != b"*-1\r\n" && reply != b"_\r\n" {
            break;
        }
    }
    unlock_all(shard, held, db, &all, true).await;
    out.extend_from_slice(&reply);
}

/// Runs `args` in `session`'s database and protocol on shard `to`, with the values of keys
/// from other shards (`sources`, see `Db::dispatch_with_sources`); returns the reply bytes.
async fn dispatch_on(
    shard: &Shard,
    to: usize,
    session: &Session,
    args: Vec<Vec<u8>>,
    sources: Vec<(Vec<u8>, Option<Value>)>,
) -> Vec<u8> {
    let (db, proto) = (session.db, session.proto);
    shard
        .call(to, move |sh: &Shard| {
            let mut d = sh.db.borrow_mut();
            d.refresh_clock();
            let mut s = Session {
                db,
                proto,
                authenticated: true,
                internal: true,
                ..Session::default()
            };
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let mut out = Vec::new();
            d.dispatch_with_sources(&mut s, &refs, sources, &mut out);
            out
        })
        .await
}

/// What a stream read over several shards gave: each served key's index with its `[entries]`
/// reply (in key order), and every key's resolved start (for a wait).
type StreamRead = (Vec<(usize, Vec<u8>)>, Vec<(usize, stream_api::ReadFrom)>);

/// XREAD or XREADGROUP (already parsed without error) whose keys live on several shards,
/// under their locks (shared for XREAD): every key's start is resolved first, so that an error
/// (the first in key order) leaves everything as it was, as in Redis; then each shard serves
/// its keys. With `held`, a transaction holds the locks.
pub async fn stream_read_across(
    shard: &Shard,
    held: bool,
    db: usize,
    proto: kvcore::resp::Proto,
    args: &[&[u8]],
) -> Result<StreamRead, Vec<u8>> {
    let call = stream_api::parse_read(args, 0)?;
    let exclusive = call.group.is_some();
    let mut by_shard: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, k) in call.keys.iter().enumerate() {
        by_shard
            .entry(route::shard_of(k, shard.n))
            .or_default()
            .push(i);
    }
    let p: Plan = by_shard
        .iter()
        .map(|(&s, idx)| (s, idx.iter().map(|&i| call.keys[i].to_vec()).collect()))
        .collect();
    let owned: std::sync::Arc<Vec<Vec<u8>>> =
        std::sync::Arc::new(args.iter().map(|a| a.to_vec()).collect());
    let (a1, idx1) = (owned.clone(), std::sync::Arc::new(by_shard));
    let resolved = in_lock_steps(shard, held, db, &p, exclusive, move |sh, _| {
        let refs: Vec<&[u8]> = a1.iter().map(Vec::as_slice).collect();
        let idx = idx1.get(&sh.id).cloned().unwrap_or_default();
        sh.db.borrow_mut().stream_read_resolve(db, &refs, &idx)
    })
    .await;
    let mut all = Vec::new();
    let mut first_err: Option<(usize, Vec<u8>)> = None;
    for r in resolved {
        match r {
            Ok(v) => all.extend(v),
            Err((i, e)) if first_err.as_ref().is_none_or(|(j, _)| i < *j) => {
                first_err = Some((i, e))
            }
            Err(_) => {}
        }
    }
    if let Some((_, e)) = first_err {
        unlock_all(shard, held, db, &p, exclusive).await;
        return Err(e);
    }
    let starts: std::sync::Arc<Vec<(usize, stream_api::ReadFrom)>> =
        std::sync::Arc::new(all.clone());
    let a2 = owned.clone();
    let n = shard.n;
    let pieces = on_each(shard, &p, move |sh, _| {
        let refs: Vec<&[u8]> = a2.iter().map(Vec::as_slice).collect();
        let mine: Vec<(usize, stream_api::ReadFrom)> = starts
            .iter()
            .filter(|(i, _)| {
                route::shard_of(
                    refs.get(stream_key_arg(&refs, *i))
                        .copied()
                        .unwrap_or_default(),
                    n,
                ) == sh.id
            })
            .copied()
            .collect();
        let served = sh
            .db
            .borrow_mut()
            .stream_read_serve_keys(db, &refs, proto, &mine);
        sh.flush_changes();
        served
    })
    .await;
    unlock_all(shard, held, db, &p, exclusive).await;
    let mut served: Vec<(usize, Vec<u8>)> = pieces.into_iter().flatten().collect();
    served.sort_by_key(|(i, _)| *i);
    Ok((served, all))
}

/// The argument index of the `i`th stream key of an XREAD/XREADGROUP call.
fn stream_key_arg(args: &[&[u8]], i: usize) -> usize {
    commands::lookup(args[0])
        .map(|spec| spec.key_positions(args))
        .and_then(|k| k.get(i).copied())
        .unwrap_or(0)
}
