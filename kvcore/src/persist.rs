//! A store's side of RDB files: its keys as records for a file ([`Db::rdb_parts`]) and keys
//! read from a file put back ([`Db::load_key`]). The file format is in [`crate::rdb`]; the
//! server writes and reads the files.

use crate::keyspace::Ttl;
use crate::rdb::{self, DbPart, LoadedKey};
use crate::value::Value;
use crate::Db;

impl Db {
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
                    if deadline.is_some_and(|d| d <= now) {
                        continue;
                    }
                    let v = rdb::key_record(&mut w, node.key(), &node.value, deadline);
                    part.version = part.version.max(v);
                    part.keys += 1;
                    part.expires += u64::from(deadline.is_some());
                }
                part.records = std::mem::take(&mut w.out);
                part
            })
            .collect()
    }

    /// Stores a key read from a file (replacing any key of that name).
    pub fn load_key(&mut self, k: LoadedKey) {
        let now = self.now;
        let Some(ks) = self.dbs.get_mut(k.db) else {
            return;
        };
        let field_ttls = matches!(&k.value, Value::Hash(h) if h.has_ttls());
        ks.set(
            &k.key,
            k.value,
            k.deadline_ms.map_or(Ttl::Clear, Ttl::At),
            now,
        );
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
}
