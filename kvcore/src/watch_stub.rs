//! TEMPORARY stand-in for the WATCH table (replaced by events.rs when it lands).
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::Db;

impl Db {
    /// WATCH `key` of database `db` for client `client`.
    pub fn watch(&mut self, db: usize, key: &[u8], client: u64, dirty: &Arc<AtomicBool>) {
        let _ = (db, key, client, dirty);
    }
    /// UNWATCH one key.
    pub fn unwatch(&mut self, db: usize, key: &[u8], client: u64) {
        let _ = (db, key, client);
    }
    /// Whether the watched key expired since WATCH.
    pub fn watched_key_expired(&mut self, db: usize, key: &[u8], client: u64) -> bool {
        let _ = (db, key, client);
        false
    }
    /// FLUSHDB / FLUSHALL.
    pub fn flush(&mut self, db: Option<usize>) {
        let n = self.databases();
        for i in 0..n {
            if db.is_none_or(|d| d == i) {
                self.keyspace(i).clear();
            }
        }
    }
}
