//! A store's side of RDB files: its keys as records for a file ([`Db::rdb_parts`], or a
//! point-in-time snapshot written in steps while the store keeps serving:
//! [`Db::snapshot_begin`], [`Db::snapshot_step`]) and keys read from a file put back
//! ([`Db::load_key`]). The file format is in [`crate::rdb`]; the server writes and reads the
//! files.
//!
//! A snapshot's records come out in chunks, each a SELECTDB and whole records, to be appended
//! to a file between [`rdb::file_header`] and [`rdb::file_end`]; the chunks of several stores
//! (a server's shards) may be interleaved in any order. How each keyspace stays at its moment
//! while commands change it is told in `keyspace::snap`.

use crate::keyspace::Ttl;
use crate::rdb::{self, DbPart, LoadedKey};
use crate::value::Value;
use crate::Db;

/// The error writes get while the last save failed (Redis's, without the leading `-`).
pub const MISCONF_RDB: &[u8] = b"MISCONF Redis is configured to save RDB snapshots, but it's \
currently unable to persist to disk. Commands that may modify the data set are disabled, \
because this instance is configured to report errors during writes if RDB snapshotting fails \
(stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB \
error.";

impl Db {
    /// Per database: keys stored and keys with a deadline.
    pub fn db_sizes(&self) -> Vec<(u64, u64)> {
        self.dbs
            .iter()
            .map(|ks| (ks.len() as u64, ks.expires_len() as u64))
            .collect()
    }

    /// Keys stored in every database, expired ones not yet collected included.
    pub fn key_count(&self) -> usize {
        self.dbs.iter().map(|ks| ks.len()).sum()
    }

    /// Whether `spec` is refused because the last save failed ([`Db::rdb_failed`] is set):
    /// writes and PING are, while save points are set and `stop-writes-on-bgsave-error` is yes.
    pub(crate) fn refused_for_disk(&self, spec: &crate::commands::CommandSpec) -> bool {
        (spec.has(crate::commands::flags::WRITE) || spec.name == "ping")
            && self.config.get("stop-writes-on-bgsave-error") == Some("yes")
            && !self.config.save_points().is_empty()
    }

    /// The encoding limits values read from a file are rebuilt under.
    pub fn rdb_limits(&self) -> rdb::Limits {
        crate::commands::dump_limits(self)
    }

    /// Every live key of every database as RDB records, one [`DbPart`] per database.
    pub fn rdb_parts(&self) -> Vec<DbPart> {
        let now = self.now;
        let mut w = rdb::Writer::new();
        w.list_limits = self.rdb_limits().list;
        self.dbs
            .iter()
            .map(|ks| {
                let mut part = DbPart {
                    version: rdb::VERSION_BASE,
                    ..DbPart::default()
                };
                w.out.clear();
                for node in ks.iter() {
                    let deadline = node.expire_at();
                    if node.expired(now) {
                        continue;
                    }
                    let v = rdb::key_record(&mut w, node.key(), node.value(), deadline);
                    part.version = part.version.max(v);
                    part.keys += 1;
                    part.expires += u64::from(deadline.is_some());
                }
                part.records = std::mem::take(&mut w.out);
                part
            })
            .collect()
    }

    /// Starts a point-in-time snapshot of every database at this moment; returns the RDB
    /// version its file must declare (12 when a hash has field deadlines, else 10). One
    /// snapshot at a time: a running one is abandoned first.
    pub fn snapshot_begin(&mut self) -> u16 {
        self.snapshot_begin_as(false)
    }

    /// [`Db::snapshot_begin`] whose records are RDB records, or (`commands`) the commands that
    /// recreate each key (an AOF base without the RDB preamble; the version is then moot).
    pub fn snapshot_begin_as(&mut self, commands: bool) -> u16 {
        self.snapshot_end();
        let now = self.now;
        let limits = self.rdb_limits().list;
        let mut version = rdb::VERSION_BASE;
        for (names, ks) in self.hash_ttl_keys.iter().zip(&self.dbs) {
            let field_ttls = names.iter().any(|k| {
                ks.peek_stored(k)
                    .is_some_and(|n| matches!(n.obj(), Some(Value::Hash(h)) if h.has_ttls()))
            });
            if field_ttls {
                version = rdb::VERSION_FIELD_TTL;
            }
        }
        for (i, ks) in self.dbs.iter_mut().enumerate() {
            ks.snapshot_begin(i, limits, now, commands);
        }
        version
    }

    /// Whether a snapshot runs.
    pub fn snapshot_running(&self) -> bool {
        self.dbs.iter().any(|ks| ks.snapshot_running())
    }

    /// Walks about `budget` more keys of the running snapshot and appends the records written
    /// since the last call (by the walk, or for keys about to change) to `chunk`. Returns true
    /// when the snapshot is complete: it has then ended, and `chunk` holds its last records.
    pub fn snapshot_step(&mut self, budget: usize, chunk: &mut Vec<u8>) -> bool {
        self.snapshot_step_counted(budget, chunk).0
    }

    /// [`Db::snapshot_step`], also returning the keys it visited (INFO
    /// `current_save_keys_processed`).
    pub fn snapshot_step_counted(&mut self, budget: usize, chunk: &mut Vec<u8>) -> (bool, usize) {
        let mut left = budget.max(1);
        let mut done = true;
        for ks in &mut self.dbs {
            if left == 0 {
                done = false;
                break;
            }
            let (visited, complete) = ks.snapshot_step(left);
            left = left.saturating_sub(visited);
            done &= complete;
        }
        self.snapshot_drain(chunk);
        if done {
            self.snapshot_end();
        }
        (done, budget.max(1) - left)
    }

    /// Appends the records written so far, each database's after a SELECTDB, to `chunk`.
    pub fn snapshot_drain(&mut self, chunk: &mut Vec<u8>) {
        for ks in &mut self.dbs {
            if let Some((db, bytes, commands)) = ks.snapshot_output() {
                if commands {
                    let mut b = itoa::Buffer::new();
                    crate::changes::encode(chunk, &[b"SELECT", b.format(db).as_bytes()]);
                } else {
                    rdb::select_db(chunk, db);
                }
                chunk.extend_from_slice(&bytes);
            }
        }
    }

    /// Ends the running snapshot, complete or not (an abandoned one's remaining records are
    /// never written).
    pub fn snapshot_end(&mut self) {
        for ks in &mut self.dbs {
            ks.snapshot_end();
        }
    }

    /// Moves every key out of this store, handing each that is live at the store's clock to
    /// `each` (a loader's store distributing what it loaded); returns the keys handed out and
    /// those left out as expired.
    pub fn drain_keys(&mut self, mut each: impl FnMut(LoadedKey)) -> (u64, u64) {
        let now = self.now;
        let (mut loaded, mut expired) = (0, 0);
        for (i, ks) in self.dbs.iter_mut().enumerate() {
            let keys: Vec<Box<[u8]>> = ks.iter().map(|n| n.key().into()).collect();
            for key in keys {
                // Taken at time 0: whatever its deadline, nothing counts as expired here.
                let Some((value, ttl)) = ks.take(&key, 0) else {
                    continue;
                };
                let deadline_ms = match ttl {
                    Ttl::At(t) => Some(t),
                    _ => None,
                };
                if deadline_ms.is_some_and(|d| d < now) {
                    expired += 1;
                    continue;
                }
                loaded += 1;
                each(LoadedKey {
                    db: i,
                    key: key.into_vec(),
                    value,
                    deadline_ms,
                });
            }
            self.hash_ttl_keys[i].clear();
        }
        (loaded, expired)
    }

    /// Makes room for `n` more keys in database `db` at once (before loading a file), so
    /// that its table does not grow step by step on the way.
    pub fn reserve_keys(&mut self, db: usize, n: usize) {
        if let Some(ks) = self.dbs.get_mut(db) {
            ks.reserve(n);
        }
    }

    /// Stores a key read from a file (replacing any key of that name).
    pub fn load_key(&mut self, k: LoadedKey) {
        let now = self.now;
        let Some(ks) = self.dbs.get_mut(k.db) else {
            return;
        };
        let field_ttls = matches!(&k.value, Value::Hash(h) if h.has_ttls());
        let ttl = k.deadline_ms.map_or(Ttl::Clear, Ttl::At);
        if ks.holds(&k.key) {
            ks.set(&k.key, k.value, ttl, now);
        } else {
            // The common case while loading: one look at the bucket, no expiry check.
            ks.insert_absent_at(&k.key, k.value, ttl, now);
        }
        if field_ttls {
            self.hash_ttl_keys[k.db].insert(k.key.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_round_trips_through_a_file() {
        let mut a = Db::new();
        a.execute(&[b"SET", b"s", b"hello"]);
        a.execute(&[b"SET", b"t", b"v", b"PX", b"100000"]);
        a.execute(&[b"RPUSH", b"l", b"a", b"b", b"c"]);
        a.execute(&[b"SADD", b"set", b"1", b"2"]);
        a.execute(&[b"HSET", b"h", b"f", b"v", b"g", b"w"]);
        a.execute(&[b"HPEXPIRE", b"h", b"100000", b"FIELDS", b"1", b"f"]);
        a.execute(&[b"ZADD", b"z", b"1.5", b"m"]);
        a.execute(&[b"SELECT", b"3"]);
        a.execute(&[b"SET", b"other", b"db"]);
        a.execute(&[b"SELECT", b"0"]);
        let bytes = rdb::file(&a.rdb_parts(), &[]);
        // A hash with field deadlines needs version 12.
        assert_eq!(&bytes[..9], b"REDIS0012");
        let mut b = Db::new();
        let limits = b.rdb_limits();
        let now = b.now_ms();
        let mut keys = Vec::new();
        rdb::load_file(&bytes, limits, now, 16, |k| keys.push(k)).unwrap();
        for k in keys {
            b.load_key(k);
        }
        for cmd in [
            &[&b"GET"[..], b"s"][..],
            &[b"LRANGE", b"l", b"0", b"-1"],
            &[b"SMEMBERS", b"set"],
            // (HGETALL's order of a hash with field deadlines may differ after a reload.)
            &[b"HMGET", b"h", b"f", b"g"],
            &[b"ZRANGE", b"z", b"0", b"-1", b"WITHSCORES"],
            &[b"HPEXPIRETIME", b"h", b"FIELDS", b"2", b"f", b"g"],
            &[b"PEXPIRETIME", b"t"],
        ] {
            assert_eq!(a.execute(cmd), b.execute(cmd), "{cmd:?}");
        }
        b.execute(&[b"SELECT", b"3"]);
        assert_eq!(
            b.execute(&[b"GET", b"other"]),
            crate::Reply::Bulk(b"db".to_vec())
        );
    }

    /// A whole file from a snapshot of `db` driven to its end in steps of 7 keys, with
    /// `between(db, i)` run after step i.
    fn snapshot(db: &mut Db, mut between: impl FnMut(&mut Db, usize)) -> Vec<u8> {
        let version = db.snapshot_begin();
        let mut body = rdb::file_header(version, &[]);
        let mut i = 0;
        while !db.snapshot_step(7, &mut body) {
            between(db, i);
            i += 1;
        }
        assert!(!db.snapshot_running());
        let mut d = rdb::file_digest();
        d.update(&body);
        body.extend_from_slice(&rdb::file_end(d));
        body
    }

    /// A key of a file: (db, key, dump of the value, deadline).
    type Record = (usize, Vec<u8>, Vec<u8>, Option<u64>);

    /// A file's keys, sorted.
    fn contents(file: &[u8]) -> Vec<Record> {
        let mut keys = Vec::new();
        rdb::load_file(file, rdb::Limits::default(), 0, 16, |k| {
            let v = rdb::dump(&k.value, crate::list::Limits::default());
            keys.push((k.db, k.key, v, k.deadline_ms));
        })
        .unwrap();
        keys.sort();
        keys
    }

    fn cmd(db: &mut Db, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        db.execute(&args);
    }

    fn filled() -> Db {
        let mut db = Db::new();
        db.set_clock(crate::Clock::Manual(1_000));
        for i in 0..500 {
            cmd(&mut db, &["SET", &format!("k{i}"), "old"]);
        }
        cmd(&mut db, &["RPUSH", "list", "a", "b"]);
        cmd(&mut db, &["HSET", "h", "f", "1"]);
        cmd(&mut db, &["SET", "dies", "soon", "PX", "50"]);
        cmd(&mut db, &["SELECT", "2"]);
        for i in 0..50 {
            cmd(&mut db, &["SET", &format!("d2:{i}"), "two"]);
        }
        cmd(&mut db, &["SELECT", "0"]);
        cmd(&mut db, &["PEXPIRE", "k7", "1000000"]);
        db
    }

    #[test]
    fn a_snapshot_is_the_state_at_its_start_whatever_changes_during_it() {
        let want = contents(&snapshot(&mut filled(), |_, _| {}));
        assert_eq!(want.len(), 500 + 3 + 50);
        let mut db = filled();
        let got = contents(&snapshot(&mut db, |db, i| {
            cmd(db, &["SET", &format!("k{i}"), "new"]);
            cmd(db, &["DEL", &format!("k{}", 499 - i)]);
            cmd(db, &["SET", &format!("fresh{i}"), "x"]);
            cmd(db, &["RPUSH", "list", "c"]);
            cmd(db, &["HSET", "h", "g", "2"]);
            cmd(db, &["PERSIST", "k7"]);
            cmd(
                db,
                &["RENAME", &format!("k{}", 250 + i), &format!("moved{i}")],
            );
            match i {
                // Past "dies"'s deadline: lazy expiry on access deletes it.
                2 => {
                    db.set_clock(crate::Clock::Manual(2_000));
                    cmd(db, &["GET", "dies"]);
                }
                3 => cmd(db, &["SWAPDB", "0", "2"]),
                5 => cmd(db, &["FLUSHDB"]),
                8 => cmd(db, &["FLUSHALL"]),
                _ => {}
            }
        }));
        assert_eq!(got, want);
        // The marks are at rest again: the next snapshot is of the state after the changes,
        // as the all-at-once writer sees it.
        cmd(&mut db, &["SET", "after", "1"]);
        let next = contents(&snapshot(&mut db, |_, _| {}));
        assert!(next.iter().any(|k| k.1 == b"after"));
        assert_eq!(next, contents(&rdb::file(&db.rdb_parts(), &[])));
    }

    #[test]
    fn an_abandoned_snapshot_leaves_the_store_ready_for_the_next() {
        let mut db = filled();
        db.snapshot_begin();
        let mut chunk = Vec::new();
        assert!(!db.snapshot_step(7, &mut chunk));
        cmd(&mut db, &["SET", "k1", "changed"]);
        db.snapshot_end();
        assert!(!db.snapshot_running());
        let keys = contents(&snapshot(&mut db, |_, _| {}));
        assert_eq!(keys.len(), 553);
        let k1 = keys.iter().find(|k| k.1 == b"k1").unwrap();
        let mut fresh = Db::new();
        cmd(&mut fresh, &["SET", "k1", "changed"]);
        let want = rdb::dump(
            fresh.dbs[0].peek_stored(b"k1").unwrap().value(),
            crate::list::Limits::default(),
        );
        assert_eq!(k1.2, want);
    }

    #[test]
    fn a_hash_with_field_deadlines_makes_the_snapshot_version_12() {
        let mut db = filled();
        assert_eq!(db.snapshot_begin(), rdb::VERSION_BASE);
        db.snapshot_end();
        cmd(&mut db, &["HPEXPIRE", "h", "100000", "FIELDS", "1", "f"]);
        let f = snapshot(&mut db, |_, _| {});
        assert_eq!(&f[..9], b"REDIS0012");
    }

    #[test]
    fn random_changes_during_snapshots_never_leak_into_them() {
        let rng = crate::testutil::Rng::new(0x9e37_79b9_7f4a_7c15);
        let next = |n: u64| rng.below(n);
        let mut db = Db::new();
        let mut now = 10_000;
        db.set_clock(crate::Clock::Manual(now));
        for round in 0..30 {
            let want = contents(&rdb::file(&db.rdb_parts(), &[]));
            let ops = |db: &mut Db, now: &mut u64| {
                for _ in 0..next(20) {
                    let k = format!("k{}", next(300));
                    let v = next(1000).to_string();
                    match next(12) {
                        0 => cmd(db, &["DEL", &k]),
                        1 => cmd(db, &["PEXPIRE", &k, &next(40).to_string()]),
                        2 => cmd(db, &["RPUSH", &format!("l{k}"), &v]),
                        3 => cmd(db, &["HSET", &format!("h{k}"), &v, &v]),
                        4 => cmd(db, &["SADD", &format!("s{k}"), &v]),
                        5 => cmd(db, &["ZADD", &format!("z{k}"), &v, &v]),
                        6 => cmd(db, &["SELECT", &next(3).to_string()]),
                        7 => cmd(db, &["RENAME", &k, &format!("k{}", next(300))]),
                        8 if next(50) == 0 => cmd(db, &["FLUSHDB"]),
                        8 if next(20) == 0 => cmd(db, &["SWAPDB", "0", "1"]),
                        9 => {
                            *now += next(20);
                            db.set_clock(crate::Clock::Manual(*now));
                        }
                        _ => cmd(db, &["SET", &k, &v, "PX", &(1 + next(200)).to_string()]),
                    }
                }
            };
            let version = db.snapshot_begin();
            let mut f = rdb::file_header(version, &[]);
            while !db.snapshot_step(1 + next(40) as usize, &mut f) {
                ops(&mut db, &mut now);
            }
            let mut d = rdb::file_digest();
            d.update(&f);
            f.extend_from_slice(&rdb::file_end(d));
            assert_eq!(contents(&f), want, "round {round}");
            ops(&mut db, &mut now);
        }
    }
}
