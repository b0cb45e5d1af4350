//! Running a command whose source keys live elsewhere: [`Db::dispatch_with_sources`].
//!
//! A server that shards the keyspace runs ZUNIONSTORE, ZRANGESTORE, GEOSEARCHSTORE and the like
//! on the shard that owns the destination. It fetches a clone of each source key's value from
//! the shard owning it (`Db::dump_in`), then calls this with those values. They are installed
//! under their keys in the session's database for the duration of the one command and the
//! previous local state of those keys is put back afterwards, so the command's own code reads
//! them like any local key. Source keys that the command writes (e.g. `ZUNIONSTORE a 2 a b`
//! where `a` is both) are owned by this shard already and are not restored: the command's
//! result stands.

use crate::keyspace::Ttl;
use crate::value::Value;
use crate::{Db, Session};

/// A provided key and what this store held under it before.
type Saved = (Vec<u8>, Option<(Value, Ttl)>);

impl Db {
    /// Runs one command like [`Db::dispatch`], with the values of some of its keys provided by
    /// the caller: `sources` holds `(key, value)` pairs, `None` meaning "the key does not
    /// exist". Each provided key reads as the given value during the command only (no
    /// deadline); afterwards every provided key the command does not write gets its previous
    /// value (and deadline) back in this store. Keys the command writes keep what the command
    /// left there. The command's reply is appended to `out`.
    pub fn dispatch_with_sources(
        &mut self,
        session: &mut Session,
        args: &[&[u8]],
        sources: Vec<(Vec<u8>, Option<Value>)>,
        out: &mut Vec<u8>,
    ) {
        let spec = args.first().and_then(|n| crate::commands::lookup(n));
        let written: Vec<&[u8]> = spec
            .map(|s| {
                s.written_key_positions(args)
                    .into_iter()
                    .filter_map(|i| args.get(i).copied())
                    .collect()
            })
            .unwrap_or_default();
        let dbi = session.db.min(self.dbs.len().saturating_sub(1));
        let now = self.now;
        let mut saved: Vec<Saved> = Vec::with_capacity(sources.len());
        // Installing and restoring the provided keys is no keyspace change: nothing is logged
        // (no `new`, no `expired`); the command's own events are raised as usual.
        self.pull_keyspace_logs();
        let mask = std::mem::replace(&mut self.dbs[dbi].log_mask, 0);
        for (key, value) in sources {
            let ks = &mut self.dbs[dbi];
            let prev = ks.take(&key, now);
            if let Some(v) = value {
                ks.set(&key, v, Ttl::Clear, now);
            }
            if !written.contains(&&key[..]) {
                saved.push((key, prev));
            }
        }
        self.dbs[dbi].log_mask = mask;
        self.dispatch_spec(session, spec, args, out);
        let now = self.now;
        let mask = std::mem::replace(&mut self.dbs[dbi].log_mask, 0);
        // Last saved first: a key provided twice was saved a second time holding the first
        // copy, so only the reverse order ends with the true previous state.
        for (key, prev) in saved.into_iter().rev() {
            let ks = &mut self.dbs[dbi];
            ks.remove(&key, now);
            if let Some((v, ttl)) = prev {
                ks.set(&key, v, ttl, now);
            }
        }
        self.dbs[dbi].log_mask = mask;
    }
}

#[cfg(test)]
mod tests {
    use crate::{Db, Reply, Session};

    #[test]
    fn sources_read_as_local_keys_and_are_restored() {
        let mut other = Db::new();
        other.execute(&[b"ZADD", b"b", b"1", b"x", b"2", b"y"]);
        let b = other.dump_in(0, b"b").map(|(v, _)| v);
        let mut db = Db::new();
        db.execute(&[b"ZADD", b"a", b"5", b"x"]);
        db.execute(&[b"SET", b"b", b"local"]);
        let mut s = Session::default();
        let mut out = Vec::new();
        db.dispatch_with_sources(
            &mut s,
            &[b"ZUNIONSTORE", b"a", b"2", b"a", b"b"],
            vec![(b"b".to_vec(), b)],
            &mut out,
        );
        assert_eq!(out, b":2\r\n");
        assert_eq!(
            db.execute(&[b"ZRANGE", b"a", b"0", b"-1", b"WITHSCORES"]),
            Reply::Array(vec![
                Reply::Bulk(b"y".to_vec()),
                Reply::Bulk(b"2".to_vec()),
                Reply::Bulk(b"x".to_vec()),
                Reply::Bulk(b"6".to_vec()),
            ])
        );
        // The provided source does not stay; the local value is back.
        assert_eq!(db.execute(&[b"GET", b"b"]), Reply::Bulk(b"local".to_vec()));
        // A missing source reads as missing.
        out.clear();
        db.dispatch_with_sources(
            &mut s,
            &[b"ZRANGESTORE", b"d", b"b", b"0", b"-1"],
            vec![(b"b".to_vec(), None)],
            &mut out,
        );
        assert_eq!(out, b":0\r\n");
        assert_eq!(db.execute(&[b"GET", b"b"]), Reply::Bulk(b"local".to_vec()));
    }

    #[test]
    fn a_source_given_twice_leaves_nothing_behind() {
        let mut db = Db::new();
        let mut other = Db::new();
        other.execute(&[b"SET", b"s", b"str"]);
        let v = other.dump_in(0, b"s").map(|(v, _)| v);
        let mut s = Session::default();
        let mut out = Vec::new();
        db.dispatch_with_sources(
            &mut s,
            &[b"ZINTERSTORE", b"d", b"2", b"s", b"s"],
            vec![(b"s".to_vec(), v.clone()), (b"s".to_vec(), v)],
            &mut out,
        );
        assert!(
            out.starts_with(b"-WRONGTYPE"),
            "{}",
            String::from_utf8_lossy(&out)
        );
        assert_eq!(db.execute(&[b"DBSIZE"]), Reply::Int(0));
    }
}
