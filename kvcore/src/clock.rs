//! Time source of a database: the system clock, or a manual one that tests move by hand.
//!
//! Commands never read the clock themselves: the owner of a [`crate::Db`] refreshes the cached
//! time once per batch of commands ([`crate::Db::refresh_clock`]), as Redis caches its time per
//! command, so a pipeline of a thousand GETs pays for one clock read.

use std::time::{SystemTime, UNIX_EPOCH};

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
            Clock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
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
