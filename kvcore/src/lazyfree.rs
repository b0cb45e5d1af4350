//! Freeing big values off the command path (Redis's lazyfree).
//!
//! Dropping a collection of millions of elements takes as many deallocations: tens of
//! milliseconds in which a shard would serve nobody. So the large encodings of collections
//! (whose drop is the expensive part) hand their contents to [`defer`] when they hold more than
//! [`THRESHOLD`] elements, whatever removed them: DEL, UNLINK, an overwrite, expiry, FLUSHALL,
//! a RENAME over them. A host that runs threads installs a sink with [`set_sink`] (kvserver sends
//! the contents to a thread that only drops); without one (the embedded store), `defer` drops at
//! once, as before. Small values are always dropped in place: sending them costs more than
//! freeing them.
//!
//! The contents must not depend on the store any more (no references into it): each large
//! encoding moves out its own owned parts, so freeing them anywhere is the same as freeing them
//! here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Elements above which a collection is freed through the sink (Redis's LAZYFREE_THRESHOLD).
pub const THRESHOLD: usize = 64;

/// Where deferred contents go.
pub type Sink = Box<dyn Fn(Box<dyn Send>) + Send + Sync>;

static SINK: OnceLock<Sink> = OnceLock::new();
static DEFERRED: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

/// Installs the process's sink; returns false if one was installed already.
pub fn set_sink(sink: Sink) -> bool {
    SINK.set(sink).is_ok()
}

/// Frees `parts` through the sink if one is installed, else here.
pub fn defer<T: Send + 'static>(parts: T) {
    match SINK.get() {
        Some(sink) => {
            DEFERRED.fetch_add(1, Ordering::Relaxed);
            sink(Box::new(parts));
        }
        None => drop(parts),
    }
}

/// Frees `parts` through the sink when `elements` is above [`THRESHOLD`], else here.
pub fn free<T: Send + 'static>(elements: usize, parts: T) {
    if elements > THRESHOLD {
        defer(parts);
    } else {
        drop(parts);
    }
}

/// Called by the sink's owner after it dropped one deferred object.
pub fn note_freed() {
    FREED.fetch_add(1, Ordering::Relaxed);
}

/// Objects handed to the sink and not freed yet (INFO `lazyfree_pending_objects`).
pub fn pending() -> u64 {
    DEFERRED
        .load(Ordering::Relaxed)
        .saturating_sub(FREED.load(Ordering::Relaxed))
}

/// Objects the sink has freed since start (INFO `lazyfreed_objects`).
pub fn freed() -> u64 {
    FREED.load(Ordering::Relaxed)
}
