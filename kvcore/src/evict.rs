//! maxmemory: access tracking, the eviction policies and the candidate pool.
//!
//! Every key node carries 24 bits of access data (Redis's `lru` field of an object):
//! - under an LRU policy (and every policy but the LFU ones) the LRU clock at the last access,
//!   seconds mod 2^24 ([`lru_clock`]), so the idle time is the clock minus the field;
//! - under an LFU policy, 16 bits of minutes at the last decrement and an 8-bit logarithmic
//!   counter: an access decays the counter by one per `lfu-decay-time` minutes passed, then
//!   increments it with probability `1 / ((counter - 5) · lfu-log-factor + 1)`, so it saturates
//!   at 255 after about a million accesses with the default factor; new keys start at 5.
//!
//! Lookups update the field (see [`crate::keyspace::Keyspace`]); OBJECT IDLETIME and OBJECT
//! FREQ read it. Eviction follows Redis's approximation: when memory is over the limit, sample
//! `maxmemory-samples` keys of each database (all keys, or those with a TTL for the volatile
//! policies), score them (idle time, 255 − frequency, or how soon the TTL ends), keep the best
//! sixteen in a [`Pool`] across rounds, and delete the best one still there; repeat until under
//! the limit. The random policies pick a random key instead, round robin over databases.
//!
//! How much memory is in use is the host's business: it installs a [`MemoryBudget`]. A server
//! with several stores (one per shard) shares one limit between them; the budget may answer
//! that another store holds a better candidate, and this store then lets its command through
//! while the other evicts (see kvserver's `shard::evict`).

use std::time::{Duration, Instant};

use crate::commands::flags;
use crate::db::Db;
use crate::events::class;
use crate::keyspace::{KeyNode, ACCESS_MAX};

/// A `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Refuse writes that may grow memory.
    NoEviction,
    /// Least recently used among all keys.
    AllkeysLru,
    /// Least frequently used among all keys.
    AllkeysLfu,
    /// Any key.
    AllkeysRandom,
    /// Least recently used among keys with a TTL.
    VolatileLru,
    /// Least frequently used among keys with a TTL.
    VolatileLfu,
    /// Any key with a TTL.
    VolatileRandom,
    /// The key with the nearest deadline.
    VolatileTtl,
}

impl Policy {
    /// Parses a policy name (as the config stores it, lower case); unknown names are
    /// `noeviction`.
    pub fn parse(name: &str) -> Policy {
        match name {
            "allkeys-lru" => Policy::AllkeysLru,
            "allkeys-lfu" => Policy::AllkeysLfu,
            "allkeys-random" => Policy::AllkeysRandom,
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => Policy::NoEviction,
        }
    }

    /// Whether the policy tracks frequency (the access field holds LFU data).
    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllkeysLfu | Policy::VolatileLfu)
    }

    /// Whether only keys with a TTL are candidates.
    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn random(self) -> bool {
        matches!(self, Policy::AllkeysRandom | Policy::VolatileRandom)
    }
}

/// What the access field of new and touched keys holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessMode {
    /// The LRU clock.
    Lru,
    /// LFU minutes and counter.
    Lfu {
        /// `lfu-log-factor`.
        log_factor: u32,
        /// `lfu-decay-time` in minutes (0: never decay).
        decay_time: u32,
    },
}

/// Counter of a new key under LFU (Redis's LFU_INIT_VAL).
pub const LFU_INIT_VAL: u32 = 5;
/// Candidates kept between eviction rounds (Redis's EVPOOL_SIZE).
pub const POOL_SIZE: usize = 16;

/// The LRU clock: Unix seconds mod 2^24.
#[inline]
pub fn lru_clock(now_ms: u64) -> u32 {
    ((now_ms / 1000) & u64::from(ACCESS_MAX)) as u32
}

/// Milliseconds since the access an LRU field records (the clock wraps every 194 days).
pub fn idle_ms(access: u32, now_ms: u64) -> u64 {
    let clock = lru_clock(now_ms);
    let secs = if clock >= access {
        clock - access
    } else {
        clock + (ACCESS_MAX - access)
    };
    u64::from(secs) * 1000
}

/// The LFU field of a key with counter `freq` stored now (RESTORE ... FREQ).
pub fn lfu_access(now_ms: u64, freq: u32) -> u32 {
    lfu_minutes(now_ms) << 8 | (freq & 0xff)
}

/// The LRU field of a key last used `idle_secs` ago (RESTORE ... IDLETIME).
pub fn lru_access(now_ms: u64, idle_secs: u64) -> u32 {
    let clock = u64::from(lru_clock(now_ms));
    let max = u64::from(ACCESS_MAX);
    ((clock + max + 1 - idle_secs % (max + 1)) % (max + 1)) as u32
}

fn lfu_minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 0xffff) as u32
}

/// The LFU counter of `access` after the decay owed for the minutes since it was stored
/// (Redis's LFUDecrAndReturn: OBJECT FREQ and eviction read this, without storing it).
pub fn lfu_counter(access: u32, now_ms: u64, decay_time: u32) -> u32 {
    let (then, counter) = (access >> 8, access & 0xff);
    if decay_time == 0 {
        return counter;
    }
    let now = lfu_minutes(now_ms);
    let elapsed = if now >= then {
        now - then
    } else {
        0xffff - then + now
    };
    counter.saturating_sub(elapsed / decay_time)
}

impl AccessMode {
    /// The mode a policy needs.
    pub fn of(policy: Policy, log_factor: u32, decay_time: u32) -> AccessMode {
        if policy.is_lfu() {
            AccessMode::Lfu {
                log_factor,
                decay_time,
            }
        } else {
            AccessMode::Lru
        }
    }

    /// The field of a key created now.
    #[inline]
    pub fn initial(self, now_ms: u64) -> u32 {
        match self {
            AccessMode::Lru => lru_clock(now_ms),
            AccessMode::Lfu { .. } => lfu_minutes(now_ms) << 8 | LFU_INIT_VAL,
        }
    }

    /// The field after an access at `now_ms`; `random` is a fresh random number (used by LFU).
    #[inline]
    pub fn touched(self, access: u32, now_ms: u64, random: impl FnOnce() -> u64) -> u32 {
        match self {
            AccessMode::Lru => lru_clock(now_ms),
            AccessMode::Lfu {
                log_factor,
                decay_time,
            } => {
                let mut counter = lfu_counter(access, now_ms, decay_time);
                if counter < 255 {
                    let base = counter.saturating_sub(LFU_INIT_VAL);
                    let p = 1.0 / (f64::from(base) * f64::from(log_factor) + 1.0);
                    let r = (random() >> 11) as f64 / (1u64 << 53) as f64;
                    if r < p {
                        counter += 1;
                    }
                }
                lfu_minutes(now_ms) << 8 | counter
            }
        }
    }
}

/// One eviction candidate: higher scores go first.
#[derive(Debug)]
struct Candidate {
    score: u64,
    db: usize,
    key: Box<[u8]>,
}

/// The best candidates seen so far, ascending by score (Redis's eviction pool).
#[derive(Debug, Default)]
pub struct Pool {
    entries: Vec<Candidate>,
}

impl Pool {
    /// Offers a sampled key: kept if the pool has room or it beats the worst kept one.
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        if let Some(i) = self
            .entries
            .iter()
            .position(|c| c.db == db && *c.key == *key)
        {
            self.entries.remove(i);
        } else if self.entries.len() == POOL_SIZE {
            if self.entries[0].score >= score {
                return;
            }
            self.entries.remove(0);
        }
        let at = self.entries.partition_point(|c| c.score <= score);
        self.entries.insert(
            at,
            Candidate {
                score,
                db,
                key: key.into(),
            },
        );
    }

    /// The best score kept.
    pub fn best(&self) -> Option<u64> {
        self.entries.last().map(|c| c.score)
    }

    /// Number of candidates kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no candidate is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn clear(&mut self) {
        self.entries.clear();
    }
}

/// Where a store learns the memory in use and shares the limit with other stores.
pub trait MemoryBudget {
    /// Bytes in use that count against `maxmemory` (for a server: all of its stores).
    fn used(&self) -> usize;

    /// A key of about `bytes` (its node and value, [`KeyNode::mem_bytes`]) was evicted. A host
    /// that measures its allocator ignores this; one that keeps an estimate subtracts it.
    fn freed(&self, bytes: usize) {
        let _ = bytes;
    }

    /// This store is over the limit and its best candidate scores `best` (`None`: it has
    /// none). Returns true when another store holds a better candidate and has been asked to
    /// evict it, so this store should let its command through instead of evicting.
    fn defer(&self, best: Option<u64>) -> bool {
        let _ = best;
        false
    }

    /// This store's best candidate now scores `best` (it is near the limit but not over it):
    /// lets other stores compare with a fresh score.
    fn publish(&self, best: Option<u64>) {
        let _ = best;
    }

    /// Rounds of sampling (`maxmemory-samples` keys each) this store owes for keys evicted by
    /// other stores since it last asked, at most `max` (older debt is forgotten).
    ///
    /// One process samples its whole keyspace once per eviction. Split in stores, a store
    /// whose keys are not being evicted would otherwise sample only when it happens to find
    /// memory over the limit, keep a stale pool, publish a poor best score and never be asked
    /// to evict its idle keys. Paying its share of the sampling (one round per eviction
    /// elsewhere, divided by the number of stores) keeps every store's best score as fresh
    /// as one process's pool.
    fn sampling_owed(&self, max: u32) -> u32 {
        let _ = max;
        0
    }
}

/// Most sampling rounds a store catches up on at one clock refresh (see
/// [`MemoryBudget::sampling_owed`]).
const MAX_CATCH_UP_ROUNDS: u32 = 32;

/// What [`Db::evict`] achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// Memory is within the limit (or there is none).
    Ok,
    /// Keys were evicted but the time budget ran out first; commands may proceed.
    Running,
    /// Another store evicts for this one; commands may proceed.
    Deferred,
    /// Over the limit with nothing this policy may evict: writes that grow memory are refused.
    Fail,
}

/// Eviction state of a store.
#[derive(Debug, Default)]
pub struct Evictor {
    pub(crate) pool: Pool,
    /// Keys evicted since start (INFO `evicted_keys`).
    pub evicted_keys: u64,
    /// Whether writes that may grow memory are refused (the last run failed).
    pub(crate) oom: bool,
    next_db: usize,
}

/// Time one eviction run may take, from `maxmemory-eviction-tenacity` (Redis's
/// evictionTimeLimitUs: 50 µs per step up to 500 µs at the default 10, then ×1.15 per step,
/// unlimited at 100). The time is checked every 16 keys.
fn time_limit(tenacity: u32) -> Option<Duration> {
    match tenacity {
        0..=10 => Some(Duration::from_micros(50 * u64::from(tenacity))),
        11..=99 => Some(Duration::from_micros(
            (500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64,
        )),
        _ => None,
    }
}

impl Db {
    /// Installs the host's memory budget; without one, `maxmemory` evicts nothing.
    pub fn set_memory_budget(&mut self, budget: Box<dyn MemoryBudget>) {
        self.budget = Some(budget);
    }

    /// Eviction counters.
    pub fn evictor(&self) -> &Evictor {
        &self.evictor
    }

    /// Whether the last memory check found the store over `maxmemory` with nothing it may
    /// evict (commands that may grow memory are refused until a check passes).
    pub fn out_of_memory(&self) -> bool {
        self.evictor.oom
    }

    /// Whether a command with these flags is refused for memory now (Redis's OOM check).
    #[inline]
    pub(crate) fn refused_for_memory(&self, spec_flags: u32) -> bool {
        self.evictor.oom && spec_flags & flags::DENYOOM != 0
    }

    /// Checks memory against `maxmemory` and evicts until within it, the time budget runs
    /// out, or another store takes over. Runs with every clock refresh when a limit is set;
    /// one budget read when under it.
    pub fn evict(&mut self) -> Eviction {
        let limit = self.config.maxmemory as usize;
        if limit != 0 {
            self.catch_up_sampling();
        }
        let outcome = match &self.budget {
            Some(b) if limit != 0 && b.used() > limit => self.evict_over(limit),
            _ => Eviction::Ok,
        };
        self.evictor.oom = outcome == Eviction::Fail;
        outcome
    }

    #[cold]
    fn evict_over(&mut self, limit: usize) -> Eviction {
        let policy = self.config.policy;
        if policy == Policy::NoEviction {
            return Eviction::Fail;
        }
        let start = Instant::now();
        let deadline = time_limit(self.config.eviction_tenacity);
        let mut evicted = 0u32;
        loop {
            let victim = if policy.random() {
                // Any key is as good as another: the store with the most candidates evicts.
                let mine = self
                    .dbs
                    .iter()
                    .map(|ks| ks.candidates(policy.volatile()) as u64)
                    .sum::<u64>();
                if self.budget.as_ref().is_some_and(|b| b.defer(Some(mine))) {
                    return Eviction::Deferred;
                }
                self.random_victim(policy)
            } else {
                self.populate_pool(policy);
                let best = self.evictor.pool.best();
                if self.budget.as_ref().is_some_and(|b| b.defer(best)) {
                    return Eviction::Deferred;
                }
                // A sample can miss every key of a sparse table: sample again while there
                // are candidates at all (Redis's loop in performEvictions).
                loop {
                    if let Some(v) = self.pool_victim(policy) {
                        break Some(v);
                    }
                    if self
                        .dbs
                        .iter()
                        .all(|ks| ks.candidates(policy.volatile()) == 0)
                    {
                        break None;
                    }
                    self.populate_pool(policy);
                }
            };
            let Some((db, key)) = victim else {
                // Nothing here; another store may still have candidates.
                let other = self.budget.as_ref().is_some_and(|b| b.defer(None));
                return if other {
                    Eviction::Deferred
                } else {
                    Eviction::Fail
                };
            };
            self.evict_key(db, &key);
            evicted += 1;
            if self.budget.as_ref().is_none_or(|b| b.used() <= limit) {
                return Eviction::Ok;
            }
            if evicted % 16 == 0 && deadline.is_some_and(|d| start.elapsed() >= d) {
                return Eviction::Running;
            }
        }
    }

    fn evict_key(&mut self, db: usize, key: &[u8]) {
        let bytes = self.dbs[db].peek_stored(key).map_or(0, KeyNode::mem_bytes);
        self.dbs[db].delete_stored(key);
        self.log_deleted(db, key);
        if let Some(b) = &self.budget {
            b.freed(bytes);
        }
        self.evictor.evicted_keys += 1;
        self.modified(class::EVICTED, "evicted", db, key);
    }

    /// Scores of a node under a pooled policy (higher: evict sooner).
    fn score(&self, policy: Policy, n: &KeyNode) -> u64 {
        let now = self.now;
        match policy {
            Policy::AllkeysLfu | Policy::VolatileLfu => {
                255 - u64::from(lfu_counter(n.access(), now, self.config.lfu_decay_time))
            }
            Policy::VolatileTtl => u64::MAX - n.deadline(),
            _ => idle_ms(n.access(), now),
        }
    }

    /// Samples every database into the pool.
    fn populate_pool(&mut self, policy: Policy) {
        let samples = self.config.maxmemory_samples;
        let mut pool = std::mem::take(&mut self.evictor.pool);
        for dbi in 0..self.dbs.len() {
            let r = self.random();
            let ks = &self.dbs[dbi];
            ks.sample(policy.volatile(), r, samples, |n| {
                pool.offer(self.score(policy, n), dbi, n.key());
            });
        }
        self.evictor.pool = pool;
    }

    /// The best pooled candidate still present (and still with a TTL for volatile policies).
    fn pool_victim(&mut self, policy: Policy) -> Option<(usize, Box<[u8]>)> {
        while let Some(c) = self.evictor.pool.entries.pop() {
            let Some(ks) = self.dbs.get(c.db) else {
                continue;
            };
            let present = if policy.volatile() {
                ks.has_deadline(&c.key)
            } else {
                ks.holds(&c.key)
            };
            if present {
                return Some((c.db, c.key));
            }
        }
        None
    }

    /// A random key (with a TTL for volatile-random), databases taken round robin.
    fn random_victim(&mut self, policy: Policy) -> Option<(usize, Box<[u8]>)> {
        let n = self.dbs.len();
        for i in 0..n {
            let dbi = (self.evictor.next_db + i) % n;
            let r = self.random();
            if let Some(key) = self.dbs[dbi].random_stored(policy.volatile(), r) {
                self.evictor.next_db = dbi + 1;
                return Some((dbi, key));
            }
        }
        None
    }

    /// Samples the rounds owed for evictions in other stores and publishes the best score.
    fn catch_up_sampling(&mut self) {
        let policy = self.config.policy;
        if policy == Policy::NoEviction || policy.random() {
            return;
        }
        let rounds = self
            .budget
            .as_ref()
            .map_or(0, |b| b.sampling_owed(MAX_CATCH_UP_ROUNDS));
        if rounds == 0 {
            return;
        }
        for _ in 0..rounds {
            self.populate_pool(policy);
        }
        if let Some(b) = &self.budget {
            b.publish(self.evictor.pool.best());
        }
    }

    /// When memory is within 10% of the limit, samples this store's candidates and publishes
    /// the best score (see [`MemoryBudget::publish`]), so other stores compare with fresh
    /// scores even if this one has not had to evict lately. For the host's periodic work.
    pub fn publish_candidates(&mut self) {
        let limit = self.config.maxmemory as usize;
        let policy = self.config.policy;
        let near = self
            .budget
            .as_ref()
            .is_some_and(|b| limit != 0 && b.used() >= limit - limit / 10);
        if !near || policy == Policy::NoEviction {
            return;
        }
        let best = if policy.random() {
            Some(
                self.dbs
                    .iter()
                    .map(|ks| ks.candidates(policy.volatile()) as u64)
                    .sum(),
            )
        } else {
            self.populate_pool(policy);
            self.evictor.pool.best()
        };
        if let Some(b) = &self.budget {
            b.publish(best);
        }
    }

    /// Evicts at another store's request (see [`MemoryBudget::defer`]): looks again with the
    /// current time and evicts here while this store's candidates are the best known.
    pub fn evict_for_peer(&mut self) -> Eviction {
        self.now = self.clock.now_ms();
        self.evict()
    }

    /// Forgets pooled candidates (FLUSHALL, a policy change).
    pub(crate) fn clear_eviction_pool(&mut self) {
        self.evictor.pool.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_idle_wraps() {
        let now = 5_000_000u64 * 1000;
        assert_eq!(idle_ms(lru_clock(now), now), 0);
        assert_eq!(idle_ms(lru_clock(now - 7000), now), 7000);
        // An access recorded just before the clock wrapped.
        let wrap = u64::from(ACCESS_MAX + 1) * 1000;
        assert_eq!(idle_ms(ACCESS_MAX - 2, wrap + 3000), 5000);
    }

    #[test]
    fn lfu_counts_logarithmically_and_decays() {
        let mode = AccessMode::Lfu {
            log_factor: 10,
            decay_time: 1,
        };
        let t0 = 1_000_000_000u64;
        let mut a = mode.initial(t0);
        assert_eq!(lfu_counter(a, t0, 1), LFU_INIT_VAL);
        let mut seed = 1u64;
        let mut rnd = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed
        };
        for _ in 0..1000 {
            a = mode.touched(a, t0, &mut rnd);
        }
        // Redis's table: factor 10 gives ~10 after 100 hits and ~18 after 1000.
        let c = lfu_counter(a, t0, 1);
        assert!((12..=24).contains(&c), "{c}");
        // Three minutes later the counter lost three; with decay 0 nothing.
        assert_eq!(lfu_counter(a, t0 + 180_000, 1), c - 3);
        assert_eq!(lfu_counter(a, t0 + 180_000, 0), c);
        assert_eq!(lfu_counter(a, t0 + 180_000 * 100, 1), 0);
    }

    #[test]
    fn pool_keeps_the_best_sixteen() {
        let mut p = Pool::default();
        for i in 0..40u64 {
            p.offer(i * 7 % 41, 0, format!("k{i}").as_bytes());
        }
        assert_eq!(p.len(), POOL_SIZE);
        let scores: Vec<u64> = p.entries.iter().map(|c| c.score).collect();
        let mut all: Vec<u64> = (0..40u64).map(|i| i * 7 % 41).collect();
        all.sort_unstable();
        assert_eq!(scores, all[all.len() - POOL_SIZE..]);
        // Offering a kept key again updates it instead of keeping two.
        p.offer(1000, 0, b"k0");
        assert_eq!(p.len(), POOL_SIZE);
        assert_eq!(p.best(), Some(1000));
        assert_eq!(&*p.entries.last().unwrap().key, b"k0");
    }

    #[test]
    fn tenacity_limits() {
        assert_eq!(time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(time_limit(0), Some(Duration::ZERO));
        assert!(time_limit(20).unwrap() > Duration::from_micros(2000));
        assert_eq!(time_limit(100), None);
    }
}
