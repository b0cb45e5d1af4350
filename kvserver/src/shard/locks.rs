//! Key intent locks of one shard, for commands that span shards (VLL-style).
//!
//! A multi-shard command locks its keys on every shard it touches, in ascending shard order (so
//! two such commands can never wait on each other in a cycle), runs its pieces, then unlocks.
//! Any other command that touches a locked key waits for the release, so nobody sees half of an
//! MSET. Readers share; writers are exclusive. Requests are granted first come, first served: a
//! request never overtakes an earlier waiting one it conflicts with.
//!
//! The common case costs one branch: [`LockTable::is_idle`] is true when nothing is held or
//! waiting, and then single-shard commands run without looking at the table at all.

use std::collections::{HashMap, VecDeque};

use futures_channel::oneshot;

/// A locked key: (database index, key bytes).
pub type LockKey = (usize, Vec<u8>);

/// Stands for every key of the shard, in every database: it conflicts with any other lock. A
/// transaction takes it where its keys are not known up front (KEYS, FLUSHALL, SORT with BY
/// patterns ...).
pub const EVERY_KEY: LockKey = (usize::MAX, Vec::new());

fn is_every(k: &LockKey) -> bool {
    k.0 == usize::MAX
}

/// Whether two requests name a common key (every key overlaps everything).
fn overlap(a: &[LockKey], b: &[LockKey]) -> bool {
    a.iter().any(is_every) || b.iter().any(is_every) || a.iter().any(|k| b.contains(k))
}

#[derive(Default)]
struct Held {
    shared: u32,
    exclusive: bool,
}

struct Waiter {
    keys: Vec<LockKey>,
    exclusive: bool,
    grant: oneshot::Sender<()>,
}

/// The lock table of one shard.
#[derive(Default)]
pub struct LockTable {
    held: HashMap<LockKey, Held>,
    waiting: VecDeque<Waiter>,
}

fn conflicts(a_excl: bool, b_excl: bool) -> bool {
    a_excl || b_excl
}

impl LockTable {
    /// Nothing held and nothing waiting: commands may skip lock checks.
    pub fn is_idle(&self) -> bool {
        self.held.is_empty() && self.waiting.is_empty()
    }

    fn free_for(&self, keys: &[LockKey], exclusive: bool, upto: usize) -> bool {
        let blocks = |h: &Held| h.exclusive || (exclusive && h.shared > 0);
        let held_ok = if keys.iter().any(is_every) {
            self.held.values().all(|h| !blocks(h))
        } else {
            self.held.get(&EVERY_KEY).is_none_or(|h| !blocks(h))
                && keys
                    .iter()
                    .all(|k| self.held.get(k).is_none_or(|h| !blocks(h)))
        };
        held_ok
            && self
                .waiting
                .iter()
                .take(upto)
                .all(|w| !conflicts(w.exclusive, exclusive) || !overlap(&w.keys, keys))
    }

    fn take(&mut self, keys: &[LockKey], exclusive: bool) {
        for k in keys {
            let h = self.held.entry(k.clone()).or_default();
            if exclusive {
                h.exclusive = true;
            } else {
                h.shared += 1;
            }
        }
    }

    /// Takes the locks now if they are free; otherwise queues the request and returns the
    /// receiver that fires when they are granted.
    pub fn acquire(
        &mut self,
        keys: Vec<LockKey>,
        exclusive: bool,
    ) -> Option<oneshot::Receiver<()>> {
        if self.free_for(&keys, exclusive, self.waiting.len()) {
            self.take(&keys, exclusive);
            return None;
        }
        let (tx, rx) = oneshot::channel();
        self.waiting.push_back(Waiter {
            keys,
            exclusive,
            grant: tx,
        });
        Some(rx)
    }

    /// Whether a held lock covers `key` in any database (or every key).
    pub fn holds_name(&self, key: &[u8]) -> bool {
        !self.held.is_empty()
            && (self.held.contains_key(&EVERY_KEY)
                || self.held.keys().any(|(_, k)| k.as_slice() == key))
    }

    /// Whether a command touching `keys` would have to wait.
    pub fn must_wait(&self, keys: &[LockKey], exclusive: bool) -> bool {
        !self.free_for(keys, exclusive, self.waiting.len())
    }

    /// Releases locks taken with [`LockTable::acquire`] and grants waiters that now fit.
    pub fn release(&mut self, keys: &[LockKey], exclusive: bool) {
        for k in keys {
            if let Some(h) = self.held.get_mut(k) {
                if exclusive {
                    h.exclusive = false;
                } else {
                    h.shared = h.shared.saturating_sub(1);
                }
                if !h.exclusive && h.shared == 0 {
                    self.held.remove(k);
                }
            }
        }
        let mut i = 0;
        while i < self.waiting.len() {
            let w = &self.waiting[i];
            if self.free_for(&w.keys, w.exclusive, i) {
                let w = self.waiting.remove(i).expect("index is in range");
                self.take(&w.keys, w.exclusive);
                if w.grant.send(()).is_err() {
                    // The waiter went away (connection closed): give the locks back.
                    let (keys, excl) = (w.keys, w.exclusive);
                    self.release(&keys, excl);
                    return;
                }
            } else {
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> LockKey {
        (0, s.as_bytes().to_vec())
    }

    #[test]
    fn exclusive_blocks_and_fifo_grants() {
        let mut t = LockTable::default();
        assert!(t.is_idle());
        assert!(t.acquire(vec![k("a"), k("b")], true).is_none());
        assert!(t.must_wait(&[k("a")], false));
        assert!(!t.must_wait(&[k("c")], true));
        let mut r1 = t.acquire(vec![k("a")], false).expect("waits");
        let mut r2 = t
            .acquire(vec![k("a")], false)
            .expect("waits behind the first");
        t.release(&[k("a"), k("b")], true);
        assert!(r1.try_recv().unwrap().is_some());
        assert!(r2.try_recv().unwrap().is_some());
        let mut w = t.acquire(vec![k("a")], true).expect("readers hold it");
        t.release(&[k("a")], false);
        assert!(w.try_recv().unwrap().is_none());
        t.release(&[k("a")], false);
        assert!(w.try_recv().unwrap().is_some());
        t.release(&[k("a")], true);
        assert!(t.is_idle());
    }

    #[test]
    fn every_key_conflicts_with_any_key() {
        let mut t = LockTable::default();
        assert!(t.acquire(vec![k("a")], false).is_none());
        let mut all = t.acquire(vec![EVERY_KEY], true).expect("a reader holds a");
        assert!(
            t.must_wait(&[k("b")], false),
            "behind the waiting EVERY_KEY"
        );
        t.release(&[k("a")], false);
        assert!(all.try_recv().unwrap().is_some());
        assert!(t.must_wait(&[k("zzz")], false));
        let mut later = t.acquire(vec![k("c")], true).expect("every key is held");
        t.release(&[EVERY_KEY], true);
        assert!(later.try_recv().unwrap().is_some());
        t.release(&[k("c")], true);
        assert!(t.is_idle());
    }

    #[test]
    fn shared_readers_coexist() {
        let mut t = LockTable::default();
        assert!(t.acquire(vec![k("a")], false).is_none());
        assert!(t.acquire(vec![k("a")], false).is_none());
        assert!(t.must_wait(&[k("a")], true));
    }
}
