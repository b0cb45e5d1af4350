//! WATCH: the keys clients watch, and the flag of each client that a change to one sets.
//!
//! Each logical database has its table of watched keys (it stays with the database index when
//! SWAPDB swaps the data, as in Redis). While a database has watched keys, its keyspace logs
//! the keys it changes (see `Keyspace::touched`); [`Db`] applies the log to the table after
//! every command, and before it answers a watch question, setting the flag of every client
//! that watches a changed key. A client that watched a key already past its deadline is not
//! touched when that key is then deleted (no logical change), as Redis 7.0+ does.
//!
//! What counts as a change: a new value (SET and every command that stores a whole value), a
//! deletion, a deadline set or cleared, an expiry, FLUSHDB, FLUSHALL and SWAPDB of a database
//! holding the key, and an in-place update of a collection, which is found by comparing the
//! watched keys a write command names before and after it runs (only while the key is
//! watched). So a write that changes nothing (SADD of a member already there, an error) touches
//! nothing, as in Redis. One difference: an in-place update that leaves the value exactly as it
//! was (HSET of the same value, INCRBY 0, LSET of the same element) touches the key in Redis
//! and not here; nothing is lost by that, the EXEC just runs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::Db;

/// A key's value and deadline, to tell whether a command changed it.
pub(crate) type Snapshot = Option<(crate::value::Value, Option<u64>)>;

/// One client's watch of one key.
struct Watcher {
    client: u64,
    dirty: Arc<AtomicBool>,
    /// The key was already past its deadline when watched.
    expired: bool,
}

/// The watched keys of one logical database.
#[derive(Default)]
pub(crate) struct WatchTable {
    keys: HashMap<Box<[u8]>, Vec<Watcher>>,
}

impl WatchTable {
    fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Marks the watchers of `key` dirty; `exists`: whether the key is in the database now.
    fn touch(&mut self, key: &[u8], exists: bool) {
        if let Some(list) = self.keys.get_mut(key) {
            for w in list.iter_mut() {
                if w.expired && !exists {
                    // Expired when watched, deleted now: logically nothing changed.
                    w.expired = false;
                    continue;
                }
                w.dirty.store(true, Ordering::Release);
            }
        }
    }
}

impl Db {
    /// WATCH `key` of database `db` for `client`, whose `dirty` flag a change sets.
    pub fn watch(&mut self, db: usize, key: &[u8], client: u64, dirty: &Arc<AtomicBool>) {
        self.apply_touches();
        let now = self.now;
        let Some(ks) = self.dbs.get_mut(db) else {
            return;
        };
        let expired = ks.holds_expired(key, now);
        let list = self.watched[db].keys.entry(key.into()).or_default();
        if list.iter().any(|w| w.client == client) {
            return;
        }
        list.push(Watcher {
            client,
            dirty: dirty.clone(),
            expired,
        });
        ks.log_touches(true);
        self.watching = self.watched.iter().filter(|t| !t.is_empty()).count();
    }

    /// Forgets `client`'s watch of `key` in database `db`.
    pub fn unwatch(&mut self, db: usize, key: &[u8], client: u64) {
        self.apply_touches();
        let Some(table) = self.watched.get_mut(db) else {
            return;
        };
        if let Some(list) = table.keys.get_mut(key) {
            list.retain(|w| w.client != client);
            if list.is_empty() {
                table.keys.remove(key);
            }
        }
        if table.is_empty() {
            self.dbs[db].log_touches(false);
        }
        self.watching = self.watched.iter().filter(|t| !t.is_empty()).count();
    }

    /// Whether `client`'s watched `key` has passed its deadline since WATCH (Redis's
    /// `isWatchedKeyExpired`: EXEC aborts then). Applies pending changes first, so the
    /// client's flag is current when this returns.
    pub fn watched_key_expired(&mut self, db: usize, key: &[u8], client: u64) -> bool {
        self.apply_touches();
        let now = self.now;
        let Some(list) = self.watched.get(db).and_then(|t| t.keys.get(key)) else {
            return false;
        };
        let was_expired = list.iter().any(|w| w.client == client && w.expired);
        !was_expired && self.dbs[db].holds_expired(key, now)
    }

    /// Empties database `db` (every database with `None`): FLUSHDB and FLUSHALL. Watchers of
    /// keys that were there are touched.
    pub fn flush(&mut self, db: Option<usize>) {
        self.apply_touches();
        for i in 0..self.dbs.len() {
            if db.is_some_and(|d| d != i) {
                continue;
            }
            if !self.watched[i].is_empty() {
                let present: Vec<Box<[u8]>> = self.watched[i]
                    .keys
                    .keys()
                    .filter(|k| self.dbs[i].holds(k))
                    .cloned()
                    .collect();
                for k in present {
                    self.watched[i].touch(&k, false);
                }
            }
            let watched = !self.watched[i].is_empty();
            self.dbs[i].clear();
            self.dbs[i].log_touches(watched);
            self.hash_ttl_keys[i].clear();
        }
    }

    /// SWAPDB's effect on watchers: a watched key of either database that is present in
    /// either one before the swap is touched (the watch tables stay with their index).
    pub(crate) fn touch_swapped(&mut self, x: usize, y: usize) {
        self.apply_touches();
        for (a, b) in [(x, y), (y, x)] {
            if self.watched[a].is_empty() {
                continue;
            }
            let keys: Vec<(Box<[u8]>, bool)> = self.watched[a]
                .keys
                .keys()
                .filter_map(|k| {
                    let (in_a, in_b) = (self.dbs[a].holds(k), self.dbs[b].holds(k));
                    (in_a || in_b).then(|| (k.clone(), in_b))
                })
                .collect();
            for (k, in_b) in keys {
                self.watched[a].touch(&k, in_b);
            }
        }
    }

    /// After SWAPDB moved the data: each keyspace logs changes if its index is watched.
    pub(crate) fn relog_after_swap(&mut self, x: usize, y: usize) {
        for i in [x, y] {
            let watched = !self.watched[i].is_empty();
            self.dbs[i].log_touches(watched);
        }
    }

    /// The watched keys among a write command's keys, each with its value and deadline now.
    pub(crate) fn watched_before(
        &mut self,
        db: usize,
        spec: &crate::commands::CommandSpec,
        args: &[&[u8]],
    ) -> Vec<(Box<[u8]>, Snapshot)> {
        let now = self.now;
        let Some(table) = self.watched.get(db) else {
            return Vec::new();
        };
        spec.key_positions(args)
            .into_iter()
            .filter_map(|i| args.get(i))
            .filter(|k| table.keys.contains_key(**k))
            .map(|k| (Box::<[u8]>::from(*k), self.dbs[db].snapshot(k, now)))
            .collect()
    }

    /// Touches the keys whose value or deadline differs from `before` (an in-place update of a
    /// collection, which the keyspace does not see as a new value).
    pub(crate) fn touch_changed(&mut self, db: usize, before: Vec<(Box<[u8]>, Snapshot)>) {
        let now = self.now;
        for (k, old) in before {
            if self.dbs[db].snapshot(&k, now) != old {
                let exists = self.dbs[db].holds(&k);
                self.watched[db].touch(&k, exists);
            }
        }
    }

    /// Touches the watchers of `key` in database `db`: a change the server made through the
    /// typed methods (a list push or a set add of a command spanning shards).
    pub fn signal_modified(&mut self, db: usize, key: &[u8]) {
        if self.watching == 0 {
            return;
        }
        self.apply_touches();
        if let Some(table) = self.watched.get_mut(db) {
            let exists = self.dbs[db].holds(key);
            table.touch(key, exists);
        }
    }

    /// Applies the keyspaces' logs of changed keys to the watch tables. One branch per
    /// database-with-watches; nothing at all while nobody watches.
    pub(crate) fn apply_touches(&mut self) {
        if self.watching == 0 {
            return;
        }
        for i in 0..self.dbs.len() {
            let Some(keys) = self.dbs[i].take_touched() else {
                continue;
            };
            for k in keys {
                let exists = self.dbs[i].holds(&k);
                self.watched[i].touch(&k, exists);
            }
        }
        self.watching = self.watched.iter().filter(|t| !t.is_empty()).count();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(false))
    }

    #[test]
    fn writes_touch_reads_do_not() {
        let mut db = Db::new();
        db.refresh_clock();
        let f = flag();
        db.execute(&[b"SET", b"k", b"1"]);
        db.watch(0, b"k", 1, &f);
        db.execute(&[b"GET", b"k"]);
        db.execute(&[b"SET", b"other", b"1"]);
        db.execute(&[b"SET", b"k", b"2", b"NX"]);
        db.apply_touches();
        assert!(!f.load(Ordering::Acquire));
        db.execute(&[b"INCR", b"k"]);
        db.apply_touches();
        assert!(f.load(Ordering::Acquire));
        db.unwatch(0, b"k", 1);
        let g = flag();
        db.watch(0, b"k", 2, &g);
        db.execute(&[b"DEL", b"nosuch"]);
        db.apply_touches();
        assert!(!g.load(Ordering::Acquire));
        db.execute(&[b"DEL", b"k"]);
        db.apply_touches();
        assert!(g.load(Ordering::Acquire));
    }

    #[test]
    fn flush_and_swap_touch_present_keys() {
        let mut db = Db::new();
        db.refresh_clock();
        let (f, g) = (flag(), flag());
        db.execute(&[b"SET", b"here", b"1"]);
        db.watch(0, b"here", 1, &f);
        db.watch(0, b"absent", 2, &g);
        db.execute(&[b"FLUSHDB"]);
        db.apply_touches();
        assert!(f.load(Ordering::Acquire));
        assert!(
            !g.load(Ordering::Acquire),
            "a missing key is not touched by a flush"
        );
        let h = flag();
        db.execute(&[b"SELECT", b"1"]);
        db.execute(&[b"SET", b"x", b"1"]);
        db.watch(0, b"x", 3, &h);
        db.execute(&[b"SWAPDB", b"0", b"1"]);
        db.apply_touches();
        assert!(
            h.load(Ordering::Acquire),
            "present in the database swapped in"
        );
    }

    #[test]
    fn expired_at_watch_then_deleted_is_no_change() {
        let mut db = Db::new();
        db.refresh_clock();
        db.execute(&[b"SET", b"k", b"1", b"PX", b"1"]);
        std::thread::sleep(std::time::Duration::from_millis(3));
        db.refresh_clock();
        let f = flag();
        db.watch(0, b"k", 1, &f);
        assert!(!db.watched_key_expired(0, b"k", 1));
        db.execute(&[b"GET", b"k"]);
        db.apply_touches();
        assert!(!f.load(Ordering::Acquire));
        // Live when watched, expired at EXEC: abort.
        db.execute(&[b"SET", b"j", b"1", b"PX", b"1"]);
        let g = flag();
        db.watch(0, b"j", 2, &g);
        std::thread::sleep(std::time::Duration::from_millis(3));
        db.refresh_clock();
        assert!(db.watched_key_expired(0, b"j", 2));
    }
}
