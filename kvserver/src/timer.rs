//! Timers of a shard thread's tasks: tokio's, each also noted in a list of this thread's
//! deadlines while it waits, so that the shard's own event loop ([`crate::net::conn::fast`]),
//! which blocks in its own `epoll_wait` while tokio has nothing to do, knows when to give the
//! thread back for a timer. Tokio's timers are not visible from outside its runtime.
//!
//! Every timer of code that runs on a shard thread comes from here (clippy's
//! `disallowed-methods` names tokio's): one made directly would fire only when something else
//! wakes the thread. A deadline is noted from the timer's first poll until it fires or is
//! dropped, so the list holds no deadline tokio does not wait for.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

pub use tokio::time::error::Elapsed;

thread_local! {
    /// The deadlines this thread's timers wait for, each with its note's number.
    static DUE: RefCell<BTreeSet<(Instant, u64)>> = const { RefCell::new(BTreeSet::new()) };
    static NEXT: Cell<u64> = const { Cell::new(0) };
}

/// A deadline in the thread's list while this lives.
struct Note(Instant, u64);

impl Note {
    fn new(at: Instant) -> Note {
        let id = NEXT.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        });
        DUE.with(|d| d.borrow_mut().insert((at, id)));
        Note(at, id)
    }
}

impl Drop for Note {
    fn drop(&mut self) {
        // (At thread exit the list may be gone first.)
        let _ = DUE.try_with(|d| d.borrow_mut().remove(&(self.0, self.1)));
    }
}

/// How late after its deadline tokio may fire a timer: its wheel counts whole milliseconds of
/// its clock and fires a timer at the first count at or after the deadline.
pub const TOKIO_TICK: Duration = Duration::from_millis(1);

/// The earliest deadline a timer of this thread waits for.
#[cfg(test)]
pub fn next_due() -> Option<Instant> {
    next_due_after(None)
}

/// The earliest deadline later than `floor` that a timer of this thread waits for.
pub fn next_due_after(floor: Option<Instant>) -> Option<Instant> {
    use std::ops::Bound::{Excluded, Unbounded};
    DUE.with(|d| {
        let d = d.borrow();
        match floor {
            None => d.first(),
            Some(f) => d.range((Excluded((f, u64::MAX)), Unbounded)).next(),
        }
        .map(|&(at, _)| at)
    })
}

/// tokio's `sleep_until`, noted.
pub async fn sleep_until(at: Instant) {
    let _note = Note::new(at);
    #[allow(clippy::disallowed_methods)]
    tokio::time::sleep_until(at).await
}

/// tokio's `sleep`, noted.
pub async fn sleep(d: Duration) {
    sleep_until(Instant::now() + d).await
}

/// tokio's `timeout_at`, noted.
pub async fn timeout_at<F: Future>(at: Instant, f: F) -> Result<F::Output, Elapsed> {
    let _note = Note::new(at);
    #[allow(clippy::disallowed_methods)]
    tokio::time::timeout_at(at, f).await
}

/// tokio's `timeout`, noted.
pub async fn timeout<F: Future>(d: Duration, f: F) -> Result<F::Output, Elapsed> {
    timeout_at(Instant::now() + d, f).await
}

/// A sleep that can be moved to another deadline ([`Sleep::reset`]), as tokio's.
pub struct Sleep {
    inner: Pin<Box<tokio::time::Sleep>>,
    note: Option<Note>,
}

impl Sleep {
    /// Fires `d` from now.
    pub fn new(d: Duration) -> Sleep {
        #[allow(clippy::disallowed_methods)]
        let inner = Box::pin(tokio::time::sleep(d));
        Sleep { inner, note: None }
    }

    /// Fires at `at` instead.
    pub fn reset(&mut self, at: Instant) {
        self.inner.as_mut().reset(at);
        self.note = None;
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.note.is_none() {
            let at = self.inner.deadline();
            self.note = Some(Note::new(at));
        }
        let r = self.inner.as_mut().poll(cx);
        if r.is_ready() {
            self.note = None;
        }
        r
    }
}

/// tokio's `interval` with its default behaviour on a missed tick (burst): the first tick
/// at once, then one every `period` from the first.
pub struct Interval {
    next: Instant,
    period: Duration,
}

impl Interval {
    /// Ticks every `period`, the first at once.
    pub fn new(period: Duration) -> Interval {
        Interval {
            next: Instant::now(),
            period,
        }
    }

    /// Waits for the next tick.
    pub async fn tick(&mut self) {
        sleep_until(self.next).await;
        self.next += self.period;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_are_listed_while_timers_wait() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(next_due(), None);
            let start = Instant::now();
            let long = Box::pin(sleep(Duration::from_secs(60)));
            let mut long = long;
            // Not polled yet: not listed.
            assert_eq!(next_due(), None);
            assert!(futures_poll_once(long.as_mut()).is_pending());
            let due = next_due().expect("a polled sleep is listed");
            assert!(due >= start + Duration::from_secs(60));
            // A timeout that ends before its deadline leaves the list as it was.
            assert_eq!(timeout(Duration::from_secs(5), async { 7 }).await, Ok(7));
            assert_eq!(next_due(), Some(due));
            // One that fires is gone from it.
            assert!(
                timeout(Duration::from_millis(5), std::future::pending::<()>())
                    .await
                    .is_err()
            );
            assert_eq!(next_due(), Some(due));
            let mut s = Sleep::new(Duration::from_secs(30));
            assert!(futures_poll_once(Pin::new(&mut s)).is_pending());
            assert!(next_due().unwrap() < due);
            s.reset(Instant::now() + Duration::from_millis(2));
            (&mut s).await;
            assert_eq!(next_due(), Some(due));
            // Deadlines up to a floor are passed over.
            assert_eq!(next_due_after(Some(due)), None);
            assert_eq!(next_due_after(Some(start)), Some(due));
            drop(s);
            drop(long);
            assert_eq!(next_due(), None);
            let mut every = Interval::new(Duration::from_millis(3));
            let t0 = Instant::now();
            every.tick().await;
            every.tick().await;
            every.tick().await;
            assert!(t0.elapsed() >= Duration::from_millis(6));
            assert_eq!(next_due(), None);
        });
    }

    /// Polls `f` once with a waker that does nothing.
    fn futures_poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        f.poll(&mut cx)
    }
}
