//! One `maxmemory` for the whole server, whatever the number of shards.
//!
//! Each shard's store evicts only its own keys (see `kvcore::evict`), but the limit is the
//! process's: the bytes the allocator counts ([`crate::alloc::allocated`]), whichever shard
//! allocated them. The budget is shared by candidate quality, not split into equal parts:
//! every shard that evicts publishes the score of its best candidate (idle time, 255 − LFU
//! counter, nearness of the deadline; see `kvcore::evict`) on a [`Board`]. A shard over the limit whose best
//! candidate is worse than another shard's asks that shard to evict (one request in flight per
//! shard) and lets its own command through. So a shard whose keys are hot keeps them while a
//! cold shard gives up its idle keys: the hot shard may hold most of the memory.
//!
//! Under the random policies the score is the number of candidates a shard holds, so the
//! shard with the most keys evicts and a shard that ran out passes the work on. Until a shard
//! has published, a shard over the limit asks it to look (and lets its command through);
//! every shard near the limit also publishes from its periodic tick, so scores stay fresh
//! on shards that had no reason to evict lately. And a shard pays its share of the sampling
//! one process would do: for every N keys the other shards evict (N shards), it samples one
//! round into its own pool at its next batch. Without that, a shard that rarely found memory
//! over the limit kept a stale pool, published a poor best score and kept its idle keys while
//! the others evicted fresher ones (about 2% of the idle keys survived in the LRU test on a
//! loaded machine).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use kvcore::evict::MemoryBudget;
use tokio::sync::mpsc::UnboundedSender;

use super::{Msg, Shard};

/// The best candidate score of every shard ([`UNKNOWN`] until it publishes, 0 for none, else
/// score + 1), and whether a request to evict is on its way to it.
pub struct Board {
    best: Box<[AtomicU64]>,
    asked: Box<[AtomicBool]>,
    /// Keys evicted by each shard.
    evicted: Box<[AtomicU64]>,
}

/// A shard that has not published yet.
const UNKNOWN: u64 = u64::MAX;

/// The process's board (one server per process).
static BOARD: OnceLock<Arc<Board>> = OnceLock::new();

impl Board {
    /// A board for `n` shards.
    pub fn new(n: usize) -> Arc<Board> {
        Arc::new(Board {
            best: (0..n).map(|_| AtomicU64::new(UNKNOWN)).collect(),
            asked: (0..n).map(|_| AtomicBool::new(false)).collect(),
            evicted: (0..n).map(|_| AtomicU64::new(0)).collect(),
        })
    }
}

/// Sets up the process's board for `n` shards, before the shards start.
pub fn init(n: usize) {
    let _ = BOARD.set(Board::new(n));
}

/// A shard's view of the shared limit, installed in its store.
pub struct Budget {
    me: usize,
    board: Arc<Board>,
    inboxes: Vec<UnboundedSender<Msg>>,
    /// Evictions by other shards already paid for by sampling here.
    sampled_for: AtomicU64,
}

impl Budget {
    /// The budget of shard `me`, which reaches the others through `inboxes` (on the board
    /// [`init`] made, or a board of its own if none was).
    pub fn new(me: usize, inboxes: Vec<UnboundedSender<Msg>>) -> Budget {
        let board = BOARD.get_or_init(|| Board::new(inboxes.len())).clone();
        Budget {
            me,
            board,
            inboxes,
            sampled_for: AtomicU64::new(0),
        }
    }
}

impl MemoryBudget for Budget {
    fn used(&self) -> usize {
        crate::alloc::allocated()
    }

    fn defer(&self, best: Option<u64>) -> bool {
        let mine = self.publish_score(best);
        // A shard that never published may hold better candidates: ask it to look (it
        // publishes, and evicts if its candidates are the best).
        let mut waiting = false;
        for (other, score) in self.board.best.iter().enumerate() {
            if other != self.me && score.load(Ordering::Relaxed) == UNKNOWN {
                waiting |= self.ask(other);
            }
        }
        let Some((other, theirs)) = self
            .board
            .best
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .enumerate()
            .filter(|&(i, score)| i != self.me && score != UNKNOWN)
            .max_by_key(|&(_, score)| score)
        else {
            return waiting;
        };
        if theirs <= mine {
            return waiting;
        }
        self.ask(other) || waiting
    }

    fn publish(&self, best: Option<u64>) {
        self.publish_score(best);
    }

    fn freed(&self, _bytes: usize) {
        // The allocator measures the bytes; count the eviction for the others' sampling.
        self.board.evicted[self.me].fetch_add(1, Ordering::Relaxed);
    }

    fn sampling_owed(&self, max: u32) -> u32 {
        let n = self.board.evicted.len() as u64;
        if n == 1 {
            return 0;
        }
        let others: u64 = (self.board.evicted.iter().enumerate())
            .filter(|&(i, _)| i != self.me)
            .map(|(_, e)| e.load(Ordering::Relaxed))
            .sum();
        let paid = self.sampled_for.load(Ordering::Relaxed);
        let owed = others.saturating_sub(paid) / n;
        if owed == 0 {
            return 0;
        }
        let rounds = owed.min(u64::from(max));
        // Pays whole rounds (the remainder waits for more evictions), forgetting older debt.
        let paid = if owed > rounds {
            others
        } else {
            paid + owed * n
        };
        self.sampled_for.store(paid, Ordering::Relaxed);
        rounds as u32
    }
}

impl Budget {
    fn publish_score(&self, best: Option<u64>) -> u64 {
        let mine = best.map_or(0, |b| b.saturating_add(1).min(UNKNOWN - 1));
        self.board.best[self.me].store(mine, Ordering::Relaxed);
        mine
    }

    /// Asks shard `other` to evict (unless a request is on its way); false if it stopped.
    fn ask(&self, other: usize) -> bool {
        if !self.board.asked[other].swap(true, Ordering::AcqRel) {
            let board = self.board.clone();
            let sent = self.inboxes[other].send(Msg::Post(Box::new(move |sh: &Shard| {
                board.asked[sh.id].store(false, Ordering::Release);
                sh.db.borrow_mut().evict_for_peer();
            })));
            if sent.is_err() {
                // That shard stopped: evict here instead.
                self.board.best[other].store(0, Ordering::Relaxed);
                return false;
            }
        }
        true
    }
}
