//! The WATCH table: which clients watch which keys, and the rules that make their next EXEC
//! fail (Redis's `multi.c`).
//!
//! Each watched key of a database lists its watchers in the order they called WATCH; a
//! watcher holds the client's shared `dirty` flag (the server's `CLIENT_DIRTY_CAS`) and
//! whether the key was already logically expired when it was watched.
//!
//! - A modified key ([`Db::signal_modified`], Redis's `touchWatchedKey`) marks its watchers
//!   dirty, and a dirty client stops watching anything here. A watcher that saw the key
//!   expired is not dirtied by the key's deletion (no logical change; it forgets the expiry),
//!   and, as in Redis, when such a watcher meets a key that still exists the walk stops there:
//!   the watchers after it are not marked either.
//! - FLUSHDB/FLUSHALL and SWAPDB ([`Db::flush`], Redis's `touchAllWatchedKeysInDb`) dirty the
//!   watchers of every key that exists in the emptied database or in the one swapped in,
//!   except where an expired key stays expired or disappears.
//! - EXEC also fails when a key that was live at WATCH time has expired since
//!   ([`Db::watched_key_expired`]).
//!
//! With nothing watched, every hook is one test of a counter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::Db;

struct Watcher {
    client: u64,
    dirty: Arc<AtomicBool>,
    /// The key was logically expired (present, past its deadline) when watched.
    expired: bool,
}

/// A key of one logical database.
type DbKey = (usize, Box<[u8]>);

/// Watched keys per database, and each client's watched keys.
#[derive(Default)]
pub(crate) struct WatchTable {
    keys: Vec<HashMap<Box<[u8]>, Vec<Watcher>>>,
    by_client: HashMap<u64, Vec<DbKey>>,
    /// Number of (client, db, key) watches.
    count: usize,
}

impl WatchTable {
    /// Whether any key is watched.
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.count != 0
    }

    fn watchers_mut(&mut self, db: usize, key: &[u8]) -> Option<&mut Vec<Watcher>> {
        self.keys.get_mut(db)?.get_mut(key)
    }

    fn remove(&mut self, db: usize, key: &[u8], client: u64) -> bool {
        let Some(list) = self.watchers_mut(db, key) else {
            return false;
        };
        let Some(i) = list.iter().position(|w| w.client == client) else {
            return false;
        };
        list.remove(i);
        if list.is_empty() {
            self.keys[db].remove(key);
        }
        if let Some(mine) = self.by_client.get_mut(&client) {
            if let Some(j) = mine.iter().position(|(d, k)| *d == db && **k == *key) {
                mine.swap_remove(j);
            }
            if mine.is_empty() {
                self.by_client.remove(&client);
            }
        }
        self.count -= 1;
        true
    }

    fn remove_client(&mut self, client: u64) {
        let Some(mine) = self.by_client.remove(&client) else {
            return;
        };
        for (db, key) in mine {
            if let Some(list) = self.watchers_mut(db, &key) {
                list.retain(|w| w.client != client);
                if list.is_empty() {
                    self.keys[db].remove(&key);
                }
                self.count -= 1;
            }
        }
    }
}

fn mark(dirty: &AtomicBool) {
    dirty.store(true, Ordering::Release);
}

impl Db {
    /// WATCH: `client` watches `key` of database `db`; `dirty` is set when the key changes.
    /// Watching a key twice is one watch. Remembers whether the key was already expired.
    pub fn watch(&mut self, db: usize, key: &[u8], client: u64, dirty: &Arc<AtomicBool>) {
        self.pull_keyspace_logs();
        let now = self.now;
        let expired = self.dbs[db].is_expired(key, now);
        let t = &mut self.watch;
        if t.keys.len() < self.dbs.len() {
            t.keys.resize_with(self.dbs.len(), HashMap::new);
        }
        let list = t.keys[db].entry(key.into()).or_default();
        if list.iter().any(|w| w.client == client) {
            return;
        }
        list.push(Watcher {
            client,
            dirty: Arc::clone(dirty),
            expired,
        });
        t.by_client
            .entry(client)
            .or_default()
            .push((db, key.into()));
        t.count += 1;
        if t.count == 1 {
            self.sync_log_mask();
        }
    }

    /// Stops `client` watching `key` of database `db` (nothing if it did not).
    pub fn unwatch(&mut self, db: usize, key: &[u8], client: u64) {
        if self.watch.remove(db, key, client) && !self.watch.any() {
            self.sync_log_mask();
        }
    }

    /// Stops `client` watching every key of this store (UNWATCH, EXEC, DISCARD, a closed
    /// connection).
    pub fn unwatch_all(&mut self, client: u64) {
        self.watch.remove_client(client);
        if !self.watch.any() {
            self.sync_log_mask();
        }
    }

    /// Whether `key` (watched by `client`) was live when watched and is past its deadline
    /// now: Redis's `isWatchedKeyExpired` for one key, which makes EXEC fail.
    pub fn watched_key_expired(&mut self, db: usize, key: &[u8], client: u64) -> bool {
        self.pull_keyspace_logs();
        let now = self.now;
        let Some(list) = self.watch.keys.get(db).and_then(|m| m.get(key)) else {
            return false;
        };
        let Some(w) = list.iter().find(|w| w.client == client) else {
            return false;
        };
        !w.expired && self.dbs[db].is_expired(key, now)
    }

    /// Number of keys watched by any client, over all databases (a gauge for INFO).
    pub fn watched_keys(&self) -> usize {
        self.watch.keys.iter().map(HashMap::len).sum()
    }

    /// `key` of database `db` was modified: Redis's `signalModifiedKey`. Marks its watchers
    /// dirty.
    #[inline]
    pub fn signal_modified(&mut self, db: usize, key: &[u8]) {
        if !self.watch.any() {
            return;
        }
        // A deletion on expiry logged earlier in this command is touched first.
        self.pull_keyspace_logs();
        self.touch_watched(db, key, None);
    }

    /// Redis's `touchWatchedKey`. `present` overrides the lookup of whether the key exists
    /// (a deletion on expiry is touched as of right after the deletion).
    pub(crate) fn touch_watched(&mut self, db: usize, key: &[u8], present: Option<bool>) {
        if !self.watch.any() {
            return;
        }
        let Some(list) = self.watch.keys.get_mut(db).and_then(|m| m.get_mut(key)) else {
            return;
        };
        let ks = &self.dbs[db];
        let mut dirtied: Vec<u64> = Vec::new();
        for w in list.iter_mut() {
            if w.expired {
                if !present.unwrap_or_else(|| ks.holds(key)) {
                    w.expired = false;
                    continue;
                }
                // Redis leaves the loop here: later watchers are not marked.
                break;
            }
            mark(&w.dirty);
            dirtied.push(w.client);
        }
        for c in dirtied {
            self.watch.remove_client(c);
        }
        if !self.watch.any() {
            self.sync_log_mask();
        }
    }

    /// Redis's `touchAllWatchedKeysInDb`: `emptied` loses its keys (FLUSHDB) or receives
    /// those of `replaced_with` (SWAPDB).
    fn touch_all_watched(&mut self, emptied: usize, replaced_with: Option<usize>) {
        let now = self.now;
        let Some(map) = self.watch.keys.get_mut(emptied) else {
            return;
        };
        let dbs = &self.dbs;
        for (key, list) in map.iter_mut() {
            let in_emptied = dbs[emptied].holds(key);
            let in_replaced = replaced_with.is_some_and(|r| dbs[r].holds(key));
            if !in_emptied && !in_replaced {
                continue;
            }
            let expired_in_replaced = || replaced_with.is_some_and(|r| dbs[r].is_expired(key, now));
            for w in list.iter_mut() {
                if w.expired {
                    if !in_replaced {
                        w.expired = false;
                        continue;
                    } else if expired_in_replaced() {
                        continue;
                    }
                } else if !in_emptied && expired_in_replaced() {
                    w.expired = true;
                    continue;
                }
                mark(&w.dirty);
            }
        }
    }

    /// Empties database `db`, or every database with `None` (FLUSHDB, FLUSHALL), touching
    /// the watched keys that existed first. A server calls this on each shard.
    pub fn flush(&mut self, db: Option<usize>) {
        self.pull_keyspace_logs();
        let range = match db {
            Some(i) => i..i + 1,
            None => 0..self.dbs.len(),
        };
        for i in range {
            if self.watch.any() {
                self.touch_all_watched(i, None);
            }
            self.dbs[i].clear();
            self.hash_ttl_keys[i].clear();
        }
    }

    /// Swaps databases `x` and `y` (SWAPDB), touching the watched keys of both first.
    /// Watchers stay with their database index.
    pub fn swap_databases(&mut self, x: usize, y: usize) {
        self.pull_keyspace_logs();
        if x == y {
            return;
        }
        if self.watch.any() {
            self.touch_all_watched(x, Some(y));
            self.touch_all_watched(y, Some(x));
        }
        self.dbs.swap(x, y);
        self.hash_ttl_keys.swap(x, y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Clock;

    fn db() -> Db {
        let mut db = Db::new();
        db.set_clock(Clock::Manual(1_000));
        db
    }

    fn flag() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(false))
    }

    fn dirty(f: &Arc<AtomicBool>) -> bool {
        f.load(Ordering::Acquire)
    }

    fn run(db: &mut Db, args: &[&str]) {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        db.execute(&a);
    }

    fn advance(db: &mut Db, ms: u64) {
        if let Clock::Manual(t) = db.clock_mut() {
            *t += ms;
        }
        db.refresh_clock();
    }

    #[test]
    fn a_write_dirties_every_watcher_and_unwatches_them() {
        let mut db = db();
        let (a, b) = (flag(), flag());
        db.watch(0, b"k", 1, &a);
        db.watch(0, b"k", 1, &a);
        db.watch(0, b"k", 2, &b);
        db.watch(0, b"other", 2, &b);
        assert_eq!(db.watch.count, 3, "watching twice is one watch");
        run(&mut db, &["SET", "x", "1"]);
        run(&mut db, &["SELECT", "1"]);
        run(&mut db, &["SET", "k", "1"]);
        assert!(!dirty(&a) && !dirty(&b), "another key, another database");
        run(&mut db, &["SELECT", "0"]);
        run(&mut db, &["SET", "k", "1"]);
        assert!(dirty(&a) && dirty(&b));
        assert!(!db.watch.any(), "dirty clients watch nothing");
        assert_eq!(db.log_mask, 0, "nobody listens: the keyspace logs nothing");
    }

    #[test]
    fn unwatch_and_no_op_writes() {
        let mut db = db();
        let a = flag();
        db.watch(0, b"k", 1, &a);
        db.unwatch(0, b"k", 1);
        run(&mut db, &["SET", "k", "1"]);
        assert!(!dirty(&a));
        db.watch(0, b"k", 1, &a);
        // Redis signals only real changes: a SET NX that does not set, a DEL of nothing.
        run(&mut db, &["SET", "k", "2", "NX"]);
        run(&mut db, &["DEL", "nothing"]);
        assert!(!dirty(&a));
        db.unwatch_all(1);
        assert!(!db.watch.any());
    }

    #[test]
    fn expiry_after_watch_dirties_and_fails_exec() {
        let mut db = db();
        let a = flag();
        run(&mut db, &["SET", "k", "1", "PX", "10"]);
        db.watch(0, b"k", 1, &a);
        assert!(!db.watched_key_expired(0, b"k", 1));
        advance(&mut db, 20);
        // Not yet deleted: EXEC sees the expiry by itself.
        assert!(db.watched_key_expired(0, b"k", 1));
        assert!(!dirty(&a));
        // The lazy deletion touches the key.
        run(&mut db, &["GET", "k"]);
        assert!(dirty(&a));
    }

    #[test]
    fn expired_at_watch_then_deleted_is_no_change() {
        let mut db = db();
        let a = flag();
        run(&mut db, &["SET", "k", "1", "PX", "10"]);
        advance(&mut db, 20);
        db.watch(0, b"k", 1, &a);
        assert!(!db.watched_key_expired(0, b"k", 1), "expired at WATCH");
        run(&mut db, &["GET", "k"]);
        assert!(!dirty(&a), "the deletion of an expired key changes nothing");
        assert!(!db.watched_key_expired(0, b"k", 1));
        // The flag was cleared: the next write counts.
        run(&mut db, &["SET", "k", "2"]);
        assert!(dirty(&a));
    }

    #[test]
    fn expired_at_watch_then_written_over_counts() {
        // The write deletes the expired key first (no change), then sets it (a change).
        let mut db = db();
        let a = flag();
        run(&mut db, &["SET", "k", "1", "PX", "10"]);
        advance(&mut db, 20);
        db.watch(0, b"k", 1, &a);
        run(&mut db, &["SET", "k", "2"]);
        assert!(dirty(&a));
    }

    #[test]
    fn an_expired_watcher_over_a_present_key_stops_the_walk() {
        // Redis's touchWatchedKey leaves its loop at a watcher that saw the key expired when
        // the key is still there: watchers after it are not marked.
        let mut db = db();
        let (a, b, c) = (flag(), flag(), flag());
        run(&mut db, &["SET", "k", "1"]);
        db.watch(0, b"k", 1, &a);
        run(&mut db, &["PEXPIRE", "k", "10"]);
        assert!(dirty(&a));
        advance(&mut db, 20);
        db.watch(0, b"k", 2, &b);
        db.watch(0, b"k", 3, &c);
        db.signal_modified(0, b"k");
        assert!(!dirty(&b) && !dirty(&c));
    }

    #[test]
    fn flush_touches_keys_that_exist() {
        let mut db = db();
        let (a, b, c) = (flag(), flag(), flag());
        run(&mut db, &["SET", "k", "1"]);
        db.watch(0, b"k", 1, &a);
        db.watch(0, b"missing", 2, &b);
        db.watch(1, b"k", 3, &c);
        run(&mut db, &["FLUSHDB"]);
        assert!(dirty(&a));
        assert!(!dirty(&b), "a missing key is not touched");
        assert!(!dirty(&c), "another database");
        run(&mut db, &["SELECT", "1"]);
        run(&mut db, &["SET", "k", "1"]);
        assert!(dirty(&c));

        // Expired at WATCH: flushing it away is no change.
        let mut db = self::db();
        let d = flag();
        run(&mut db, &["SET", "k", "1", "PX", "10"]);
        advance(&mut db, 20);
        db.watch(0, b"k", 4, &d);
        db.flush(None);
        assert!(!dirty(&d));
        run(&mut db, &["SET", "k", "1"]);
        assert!(dirty(&d), "the expired mark was cleared");
    }

    #[test]
    fn swapdb_touches_keys_in_either_database() {
        let mut db = db();
        let (a, b, c) = (flag(), flag(), flag());
        run(&mut db, &["SELECT", "1"]);
        run(&mut db, &["SET", "in1", "1"]);
        run(&mut db, &["SELECT", "0"]);
        db.watch(0, b"in1", 1, &a);
        db.watch(0, b"nowhere", 2, &b);
        db.watch(1, b"in1", 3, &c);
        run(&mut db, &["SWAPDB", "0", "1"]);
        assert!(dirty(&a), "swapped in");
        assert!(!dirty(&b));
        assert!(dirty(&c), "swapped out");

        // A missing key replaced by an expired one: no change, but now marked expired.
        let mut db = self::db();
        let d = flag();
        run(&mut db, &["SELECT", "1"]);
        run(&mut db, &["SET", "e", "1", "PX", "10"]);
        run(&mut db, &["SELECT", "0"]);
        advance(&mut db, 20);
        db.watch(0, b"e", 4, &d);
        db.swap_databases(0, 1);
        assert!(!dirty(&d));
        assert!(!db.watched_key_expired(0, b"e", 4));
        // Expired at WATCH and still expired after the swap: no change either.
        db.swap_databases(0, 1);
        db.swap_databases(0, 1);
        assert!(!dirty(&d));
        // ... but a live key swapped in over it is.
        let mut db = self::db();
        let e = flag();
        run(&mut db, &["SET", "e", "1", "PX", "10"]);
        run(&mut db, &["SELECT", "1"]);
        run(&mut db, &["SET", "e", "live"]);
        advance(&mut db, 20);
        db.watch(0, b"e", 5, &e);
        run(&mut db, &["SWAPDB", "0", "1"]);
        assert!(dirty(&e));
    }
}
