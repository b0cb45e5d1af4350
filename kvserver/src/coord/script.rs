//! Scripts whose keys are not all one shard's: EVAL with keys declared on several shards, or
//! with none declared (it may touch any key).
//!
//! Such a script takes every key of every shard ([`EVERY_KEY`], exclusive, in ascending shard
//! order as every command spanning shards does), so nothing else runs against the keyspace
//! until it ends: as atomic as a script in Redis. It runs on the connection's shard; each of its
//! commands runs on the shard that owns the command's keys: this shard's store directly, another
//! shard's through a message whose answer the script waits for, blocking this thread.
//!
//! Blocking cannot deadlock: the other shard's thread is not waiting for this one (a script
//! holding every lock is the only code that blocks a thread for another shard, and no second
//! one can hold them at the same time), so it runs the message and answers.
//!
//! A script whose declared keys all live on one shard runs there as a plain command (no
//! locks); a command of it on a key of another shard is refused with Redis Cluster's error for
//! a non-local key (`Db::key_owner`).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::mpsc;

use kvcore::commands::{self, flags, scripting_api, CommandSpec};
use kvcore::resp::ReplyWriter;
use kvcore::script::Caller;
use kvcore::{Db, Session};

use super::{route, tx};
use crate::shard::locks::{LockKey, EVERY_KEY};
use crate::shard::Shard;

/// Whether a script call must take every shard's keys: on a server of several shards, when
/// its declared keys are none or on more than one shard.
pub fn spans_shards(spec: &CommandSpec, args: &[&[u8]], n: usize) -> bool {
    if n == 1 || !scripting_api::is_script_command(spec.name) {
        return false;
    }
    let keys = spec.key_positions(args);
    match keys.first() {
        None => true,
        Some(&first) => {
            let s = route::shard_of(args[first], n);
            keys.iter().any(|&i| route::shard_of(args[i], n) != s)
        }
    }
}

/// Runs EVAL/EVALSHA/FCALL (any form) holding every key of every shard; `held`: a transaction
/// already holds them.
pub async fn run_everywhere(
    shard: &Rc<Shard>,
    held: bool,
    session: &Session,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) {
    let locks: BTreeMap<usize, Vec<LockKey>> = (0..shard.n).map(|s| (s, vec![EVERY_KEY])).collect();
    if !held {
        tx::lock(shard, &locks).await;
    }
    let refused = {
        let mut db = shard.db.borrow_mut();
        db.refresh_clock();
        scripting_api::fcall_refused(&db, session, args)
    };
    if let Some(refused) = refused {
        out.extend_from_slice(&refused);
        if !held {
            tx::unlock(shard, locks).await;
        }
        return;
    }
    {
        let mut db = shard.db.borrow_mut();
        let cache = db.scripts.clone();
        let mut caller = ShardCaller {
            shard: shard.as_ref(),
            db: &mut db,
            session: scripting_api::script_session(session),
        };
        let mut w = ReplyWriter {
            out,
            proto: session.proto,
        };
        scripting_api::run_script_with(&cache, args, &mut caller, &mut w);
    }
    // Clients blocked on keys the script pushed to, and the keyspace events it raised, on
    // every shard (posts run in order, before the unlock below reaches each shard).
    for s in 0..shard.n {
        shard.post(s, |sh: &Shard| {
            sh.wake_every_waited();
            sh.after_writes();
        });
    }
    if !held {
        tx::unlock(shard, locks).await;
    }
}

/// A script's commands, each on the shard of its keys.
struct ShardCaller<'a> {
    shard: &'a Shard,
    db: &'a mut Db,
    session: Session,
}

impl Caller for ShardCaller<'_> {
    fn call(
        &mut self,
        args: &[&[u8]],
        proto: kvcore::resp::Proto,
        out: &mut Vec<u8>,
    ) -> Result<(), Vec<u8>> {
        self.session.proto = proto;
        let n = self.shard.n;
        let Some(spec) = commands::lookup(args[0]) else {
            self.db.dispatch(&mut self.session, args, out);
            return Ok(());
        };
        if spec.has(flags::ALL_KEYS) || crate::admin::may_be_special(spec) {
            // The whole keyspace (KEYS, DBSIZE, FLUSHALL ...) or the server's own state: one
            // shard's store would answer for its part only.
            return Err(b"ERR This command is not supported in a script spanning shards".to_vec());
        }
        let keys = spec.key_positions(args);
        let mut home = None;
        for &i in &keys {
            let s = route::shard_of(args[i], n);
            match home {
                None => home = Some(s),
                Some(h) if h != s => {
                    return Err(b"CROSSSLOT Keys in request don't hash to the same slot".to_vec())
                }
                Some(_) => {}
            }
        }
        match home {
            Some(s) if s != self.shard.id => {
                let (tx, rx) = mpsc::sync_channel(1);
                let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
                let mut session = self.session.clone();
                self.shard.post(s, move |sh: &Shard| {
                    let argv: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
                    let mut reply = Vec::new();
                    {
                        let mut db = sh.db.borrow_mut();
                        db.refresh_clock();
                        db.dispatch(&mut session, &argv, &mut reply);
                    }
                    sh.flush_changes();
                    let _ = tx.send((reply, session));
                });
                let (reply, session) = rx
                    .recv()
                    .map_err(|_| b"ERR the shard of this key did not answer".to_vec())?;
                self.session = session;
                out.extend_from_slice(&reply);
            }
            _ => self.db.dispatch(&mut self.session, args, out),
        }
        Ok(())
    }

    fn allow_oom(&mut self, on: bool) {
        self.session.allow_oom = on;
    }

    fn permitted(&mut self, spec: &CommandSpec, args: &[&[u8]]) -> Result<(), Vec<u8>> {
        self.db.acl_script_check(&mut self.session, spec, args)
    }
}
