//! Time source of a database: the system clock, or a manual one that tests move by hand.
//!
//! Commands never read the clock themselves: the owner of a [`crate::Db`] refreshes the cached
//! time once per batch of commands ([`crate::Db::refresh_clock`]), as Redis caches its time per
//! command, so a pipeline of a thousand GETs pays for one clock read.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The counter commands are timed with (for INFO commandstats, latency histograms and the
/// slow log): the TSC where quanta trusts it, else the monotonic clock.
fn timer() -> &'static quanta::Clock {
    static TIMER: OnceLock<quanta::Clock> = OnceLock::new();
    TIMER.get_or_init(quanta::Clock::new)
}

/// A raw reading of the command timer, for [`nanos_between`]. A fraction of the cost of
/// `quanta::Instant::now`, which looks for a thread's mock clock and scales every reading:
/// a command pays for one reading, and only its difference is scaled.
#[inline]
pub fn ticks() -> u64 {
    timer().raw()
}

/// Nanoseconds between two [`ticks`] readings (0 when `end` is not after `start`).
#[inline]
pub fn nanos_between(start: u64, end: u64) -> u64 {
    timer().delta_as_nanos(start, end)
}

/// Where a database gets the current time from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Wall-clock milliseconds since the Unix epoch.
    System,
    /// A fixed time in milliseconds since the epoch, moved only by [`Clock::advance`] or
    /// [`Clock::set`].
    Manual(u64),
}

impl Clock {
    /// The current time in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        match *self {
            // (Seconds and milliseconds apart: `as_millis` divides a u128, which costs as
            // much as reading the clock; this runs once per batch of commands.)
            Clock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() * 1000 + u64::from(d.subsec_millis())),
            Clock::Manual(t) => t,
        }
    }

    /// Moves a manual clock forward by `ms`; no effect on the system clock.
    pub fn advance(&mut self, ms: u64) {
        if let Clock::Manual(t) = self {
            *t = t.saturating_add(ms);
        }
    }

    /// Sets a manual clock; no effect on the system clock.
    pub fn set(&mut self, ms: u64) {
        if let Clock::Manual(t) = self {
            *t = ms;
        }
    }
}
