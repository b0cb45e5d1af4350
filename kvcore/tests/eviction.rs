//! maxmemory policies on small hand-made cases: which keys each policy evicts first, that the
//! volatile policies never touch keys without a TTL, Redis's OOM error when nothing may be
//! evicted, and the access data OBJECT IDLETIME and OBJECT FREQ read.
//!
//! The memory budget here counts keys, not bytes: the test sets "used" to the limit plus n,
//! and each eviction frees one unit, so exactly n keys go. `maxmemory-samples 64` makes the
//! sample cover these few keys, so the approximations choose as the exact policies would.

use std::cell::Cell;
use std::rc::Rc;

use kvcore::evict::MemoryBudget;
use kvcore::{Clock, Db, Reply};

const LIMIT: usize = 1_000_000;
const T0: u64 = 1_700_000_000_000;

struct Units(Rc<Cell<usize>>);

impl MemoryBudget for Units {
    fn used(&self) -> usize {
        self.0.get()
    }
    fn freed(&self, _bytes: usize) {
        self.0.set(self.0.get() - 1);
    }
}

struct Store {
    db: Db,
    used: Rc<Cell<usize>>,
}

impl Store {
    fn new(policy: &str) -> Store {
        let mut db = Db::new();
        db.set_clock(Clock::Manual(T0));
        let used = Rc::new(Cell::new(0));
        db.set_memory_budget(Box::new(Units(used.clone())));
        let mut s = Store { db, used };
        s.ok(&["CONFIG", "SET", "maxmemory-policy", policy]);
        s.ok(&["CONFIG", "SET", "maxmemory-samples", "64"]);
        s.ok(&["CONFIG", "SET", "maxmemory", &LIMIT.to_string()]);
        s
    }

    fn run(&mut self, args: &[&str]) -> Reply {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.db.execute(&a)
    }

    fn ok(&mut self, args: &[&str]) {
        assert_eq!(self.run(args), Reply::Simple("OK".into()), "{args:?}");
    }

    fn int(&mut self, args: &[&str]) -> i64 {
        match self.run(args) {
            Reply::Int(n) => n,
            r => panic!("{args:?} answered {r:?}"),
        }
    }

    /// Runs a harmless command with memory `n` units over the limit (so exactly `n` keys are
    /// evicted if the policy can find them) and returns how many were.
    fn evict(&mut self, n: usize) -> u64 {
        let before = self.db.evictor().evicted_keys;
        self.used.set(LIMIT + n);
        self.run(&["PING"]);
        self.db.evictor().evicted_keys - before
    }

    fn advance(&mut self, ms: u64) {
        self.db.clock_mut().advance(ms);
    }

    fn exists(&mut self, keys: &[&str]) -> Vec<bool> {
        keys.iter().map(|k| self.int(&["EXISTS", k]) == 1).collect()
    }
}

const TEN: [&str; 10] = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"];

#[test]
fn lru_evicts_the_least_recently_used_first() {
    let mut s = Store::new("allkeys-lru");
    for k in TEN {
        s.ok(&["SET", k, "v"]);
    }
    // Read k9 first and k0 last, a second apart: k9 is the least recently used.
    for k in TEN.iter().rev() {
        s.advance(1000);
        s.run(&["GET", k]);
    }
    s.advance(5000);
    assert_eq!(s.evict(3), 3);
    assert_eq!(
        s.exists(&TEN),
        [true, true, true, true, true, true, true, false, false, false]
    );
    // A write is an access too: k6, the next in line, is written, so k5 goes instead.
    s.advance(1000);
    s.ok(&["SET", "k6", "w"]);
    s.advance(1000);
    assert_eq!(s.evict(1), 1);
    assert_eq!(s.exists(&["k5", "k6"]), [false, true]);
}

#[test]
fn idletime_counts_seconds_and_lookups_without_touch_keep_it() {
    let mut s = Store::new("noeviction");
    s.ok(&["SET", "k", "v"]);
    s.int(&["EXPIRE", "k", "1000"]);
    s.advance(30_000);
    assert_eq!(s.run(&["TYPE", "k"]), Reply::Simple("string".into()));
    assert_eq!(s.int(&["EXISTS", "k"]), 1);
    assert_eq!(s.int(&["TTL", "k"]), 970);
    assert_eq!(s.int(&["OBJECT", "IDLETIME", "k"]), 30);
    assert_eq!(s.int(&["OBJECT", "IDLETIME", "k"]), 30);
    s.run(&["GET", "k"]);
    assert_eq!(s.int(&["OBJECT", "IDLETIME", "k"]), 0);
    s.advance(2_000);
    s.int(&["TOUCH", "k"]);
    assert_eq!(s.int(&["OBJECT", "IDLETIME", "k"]), 0);
    // Under an LRU policy FREQ is refused; under LFU IDLETIME is.
    assert!(
        matches!(s.run(&["OBJECT", "FREQ", "k"]), Reply::Error(e) if e.starts_with(b"ERR An LFU maxmemory policy is not selected"))
    );
    s.ok(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
    assert!(
        matches!(s.run(&["OBJECT", "IDLETIME", "k"]), Reply::Error(e) if e.starts_with(b"ERR An LFU maxmemory policy is selected, idle time not tracked"))
    );
    assert_eq!(s.run(&["OBJECT", "FREQ", "nokey"]), Reply::Null);
}

#[test]
fn lfu_evicts_the_least_frequently_used_first() {
    let mut s = Store::new("allkeys-lfu");
    // Factor 0: every access increments the counter, so the counts are exact.
    s.ok(&["CONFIG", "SET", "lfu-log-factor", "0"]);
    for k in TEN {
        s.ok(&["SET", k, "v"]);
    }
    // Key i is read 20 - 2i times: k9 is the least frequently used.
    for (i, k) in TEN.iter().enumerate() {
        for _ in 0..20 - 2 * i {
            s.run(&["GET", k]);
        }
    }
    // SET counts one access too; new keys start at 5.
    assert_eq!(s.int(&["OBJECT", "FREQ", "k0"]), 5 + 20);
    assert_eq!(s.int(&["OBJECT", "FREQ", "k9"]), 5 + 2);
    assert_eq!(s.evict(4), 4);
    assert_eq!(
        s.exists(&TEN),
        [true, true, true, true, true, true, false, false, false, false]
    );
    // The counter decays by one per lfu-decay-time minute without access.
    s.advance(3 * 60_000);
    assert_eq!(s.int(&["OBJECT", "FREQ", "k0"]), 22);
    s.ok(&["CONFIG", "SET", "lfu-decay-time", "0"]);
    assert_eq!(s.int(&["OBJECT", "FREQ", "k0"]), 25);
}

#[test]
fn lfu_counter_grows_logarithmically_with_the_default_factor() {
    let mut s = Store::new("allkeys-lfu");
    s.ok(&["SET", "hot", "v"]);
    s.ok(&["SET", "cold", "v"]);
    for _ in 0..10_000 {
        s.run(&["GET", "hot"]);
    }
    let hot = s.int(&["OBJECT", "FREQ", "hot"]);
    // Redis's table for factor 10: about 18 after 1k hits, 142 after 100k; 10k gives ~60.
    assert!((30..=100).contains(&hot), "{hot}");
    assert_eq!(s.evict(1), 1);
    assert_eq!(s.exists(&["hot", "cold"]), [true, false]);
}

#[test]
fn volatile_ttl_evicts_the_nearest_deadline_and_never_keys_without_one() {
    let mut s = Store::new("volatile-ttl");
    s.ok(&["SET", "p1", "v"]);
    s.ok(&["SET", "a", "v", "EX", "100"]);
    s.ok(&["SET", "b", "v", "EX", "50"]);
    s.ok(&["SET", "c", "v", "EX", "200"]);
    s.ok(&["SET", "p2", "v"]);
    assert_eq!(s.evict(1), 1);
    assert_eq!(s.exists(&["a", "b", "c"]), [true, false, true]);
    assert_eq!(s.evict(1), 1);
    assert_eq!(s.exists(&["a", "c"]), [false, true]);
    // Asked for more than the keys with a TTL: only those go, then writes are refused.
    assert_eq!(s.evict(5), 1);
    assert_eq!(s.exists(&["p1", "p2", "c"]), [true, true, false]);
    assert_oom_refuses_growth_only(&mut s);
}

/// Over the limit with nothing evictable: writes that may grow memory get Redis's OOM error,
/// reads and deletes go through.
fn assert_oom_refuses_growth_only(s: &mut Store) {
    let oom = Reply::Error("OOM command not allowed when used memory > 'maxmemory'.".into());
    s.used.set(LIMIT + 1);
    assert_eq!(s.run(&["SET", "new", "v"]), oom);
    assert_eq!(s.run(&["APPEND", "p1", "x"]), oom);
    assert_eq!(s.run(&["INCR", "n"]), oom);
    assert_eq!(s.run(&["GET", "p1"]), Reply::Bulk(b"v".to_vec()));
    assert_eq!(s.int(&["DEL", "p2"]), 1);
    assert_eq!(s.int(&["EXPIRE", "p1", "100"]), 1);
    // Back under the limit, writes are accepted again.
    s.used.set(LIMIT - 1);
    s.ok(&["SET", "new", "v"]);
}

#[test]
fn volatile_policies_leave_keys_without_ttl() {
    for policy in ["volatile-lru", "volatile-lfu", "volatile-random"] {
        let mut s = Store::new(policy);
        s.ok(&["SET", "p1", "v"]);
        s.ok(&["SET", "p2", "v"]);
        for k in ["t1", "t2", "t3"] {
            s.ok(&["SET", k, "v", "PX", "100000"]);
        }
        assert_eq!(s.evict(2), 2, "{policy}");
        assert_eq!(s.evict(10), 1, "{policy}");
        assert_eq!(
            s.exists(&["p1", "p2", "t1", "t2", "t3"]),
            [true, true, false, false, false]
        );
        assert_oom_refuses_growth_only(&mut s);
    }
}

#[test]
fn volatile_lru_picks_the_idlest_key_with_a_ttl() {
    let mut s = Store::new("volatile-lru");
    s.ok(&["SET", "old-persistent", "v"]);
    for k in ["t1", "t2", "t3"] {
        s.ok(&["SET", k, "v", "EX", "1000"]);
        s.advance(1000);
    }
    s.run(&["GET", "t1"]);
    assert_eq!(s.evict(1), 1);
    assert_eq!(
        s.exists(&["old-persistent", "t1", "t2", "t3"]),
        [true, true, false, true]
    );
}

#[test]
fn allkeys_random_evicts_any_key_across_databases() {
    let mut s = Store::new("allkeys-random");
    for k in TEN {
        s.ok(&["SET", k, "v"]);
    }
    s.ok(&["SELECT", "3"]);
    for k in TEN {
        s.ok(&["SET", k, "v"]);
    }
    assert_eq!(s.evict(15), 15);
    let left: i64 = (0..16)
        .map(|db| {
            s.ok(&["SELECT", &db.to_string()]);
            s.int(&["DBSIZE"])
        })
        .sum();
    assert_eq!(left, 5);
    assert_eq!(s.evict(10), 5);
    assert_oom_after_everything_went(&mut s);
}

fn assert_oom_after_everything_went(s: &mut Store) {
    s.used.set(LIMIT + 1);
    let r = s.run(&["SET", "x", "y"]);
    assert_eq!(
        r,
        Reply::Error("OOM command not allowed when used memory > 'maxmemory'.".into())
    );
}

#[test]
fn noeviction_refuses_writes_that_grow_memory() {
    let mut s = Store::new("noeviction");
    s.ok(&["SET", "p1", "v"]);
    s.ok(&["SET", "p2", "v"]);
    assert_eq!(s.evict(1), 0);
    assert_oom_refuses_growth_only(&mut s);
    // Without a limit nothing is refused, whatever the budget says.
    s.used.set(LIMIT * 10);
    s.ok(&["CONFIG", "SET", "maxmemory", "0"]);
    s.ok(&["SET", "more", "v"]);
}

#[test]
fn evictions_raise_keyspace_events() {
    let mut s = Store::new("allkeys-lru");
    s.ok(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    s.ok(&["SET", "a", "v"]);
    s.advance(1000);
    s.ok(&["SET", "b", "v"]);
    s.db.drain_events().for_each(drop);
    assert_eq!(s.evict(1), 1);
    let events: Vec<(&str, Vec<u8>)> =
        s.db.drain_events()
            .map(|e| (e.event, e.key.to_vec()))
            .collect();
    assert_eq!(events, [("evicted", b"a".to_vec())]);
    let info = s.db.info(&[b"stats"]);
    assert!(info.contains("evicted_keys:1\r\n"), "{info}");
}
