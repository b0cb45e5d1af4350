//! The load engine: one mio event loop per client thread, many connections each.
//!
//! Each connection sends one pre-encoded pipeline batch at a time and counts
//! the replies with kvcore's [`skip_reply`] (framing and the error flag only:
//! no reply value is built). Closed loop (the default) sends the next batch
//! when the last reply of the previous one arrives, and measures latency from
//! the send. Open loop (`rate`) gives each connection a schedule of intended
//! send times; a batch is sent at its intended time even if earlier ones are
//! still outstanding, and its latency is measured from that intended time, so
//! a stalled server shows in the percentiles instead of slowing the load
//! (no coordinated omission). Send times are kept to the microsecond by a
//! timerfd in the poll ([`Timer`]): epoll's own timeout counts whole
//! milliseconds, and a batch sent up to a millisecond late would charge the
//! client's lateness to the server. How late batches still left is reported
//! ([`Outcome::send_lag`]), so a saturated client shows.
//!
//! Per request the loop does no allocation and no formatting: it overwrites
//! the digits of the batch's key fields, and reads the clock once per wake-up.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use kvcore::resp::{parse_reply, skip_reply, Value};
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::stats::Counts;
use crate::sys;
use crate::workload::{Batch, KeyDist, KeyGen, Workload};

/// Batches a connection may have outstanding in open loop before it waits.
const MAX_INFLIGHT: usize = 1024;
/// A run fails when no reply came for this long while requests were outstanding.
const STALL: Duration = Duration::from_secs(30);
/// Read buffer per connection at start (grows when one reply is larger).
const READ_BUF: usize = 16 * 1024;

/// What to send, where, how much.
#[derive(Clone, Debug)]
pub struct Config {
    /// Server address.
    pub addr: SocketAddr,
    /// Connections in all.
    pub clients: usize,
    /// Client threads (event loops).
    pub threads: usize,
    /// Requests per batch.
    pub pipeline: usize,
    /// Measured requests in all (after warm-up); `None` = run for `duration`.
    pub requests: Option<u64>,
    /// Measured time when `requests` is `None`.
    pub duration: Duration,
    /// Time sent before measuring.
    pub warmup: Duration,
    /// Open loop: requests per second in all.
    pub rate: Option<f64>,
    /// Key numbers are drawn from `0..keyspace`.
    pub keyspace: u64,
    /// How key numbers are drawn.
    pub dist: KeyDist,
    /// Seed of the key generators.
    pub seed: u64,
    /// Password sent with AUTH on each connection.
    pub auth: Option<String>,
    /// CPUs the client threads are pinned to (round robin); empty = not pinned.
    pub cpus: Vec<usize>,
}

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    /// Counters per template of the workload.
    pub kinds: Vec<Counts>,
    /// Measured seconds.
    pub secs: f64,
    /// CPU seconds (user + system) of the client threads while sending.
    pub client_cpu_secs: f64,
    /// Open loop: how late each measured batch was sent after its intended time, in ns.
    pub send_lag: Counts,
}

impl Outcome {
    /// Replies measured, of every kind.
    pub fn requests(&self) -> u64 {
        self.kinds.iter().map(|c| c.hist.len()).sum()
    }

    /// Error replies, of every kind.
    pub fn errors(&self) -> u64 {
        self.kinds.iter().map(|c| c.errors).sum()
    }

    /// All kinds merged.
    pub fn total(&self) -> Counts {
        let mut all = Counts::default();
        for c in &self.kinds {
            all.merge(c);
        }
        all
    }
}

/// Runs `wl` against `cfg.addr`; `progress` counts measured replies as they come.
pub fn run(cfg: &Config, wl: &Workload, progress: &AtomicU64) -> io::Result<Outcome> {
    let threads = cfg.threads.clamp(1, cfg.clients.max(1));
    let barrier = Barrier::new(threads);
    let results: Vec<io::Result<ThreadOut>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let conns = share(cfg.clients as u64, threads, t) as usize;
                    let quota = cfg.requests.map(|r| share(r, threads, t));
                    let r = Thread::new(cfg, wl, (t, threads), conns, quota);
                    barrier.wait();
                    r?.run(progress)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("client thread panicked")))
            })
            .collect()
    });
    let mut out = Outcome {
        kinds: vec![Counts::default(); wl.templates.len()],
        secs: 0.0,
        client_cpu_secs: 0.0,
        send_lag: Counts::default(),
    };
    for r in results {
        let r = r?;
        for (a, b) in out.kinds.iter_mut().zip(&r.kinds) {
            a.merge(b);
        }
        out.secs = out.secs.max(r.secs);
        out.client_cpu_secs += r.cpu_secs;
        out.send_lag.merge(&r.send_lag);
    }
    Ok(out)
}

/// Thread `t`'s part of `total` split over `threads`.
fn share(total: u64, threads: usize, t: usize) -> u64 {
    let n = threads as u64;
    total / n + u64::from((t as u64) < total % n)
}

struct ThreadOut {
    kinds: Vec<Counts>,
    secs: f64,
    cpu_secs: f64,
    send_lag: Counts,
}

/// A batch that was sent and is waiting for replies.
struct Flight {
    start: Instant,
    batch: usize,
    n: usize,
    done: usize,
    measured: bool,
}

struct Conn {
    sock: TcpStream,
    batches: Vec<Batch>,
    next: usize,
    inflight: VecDeque<Flight>,
    /// The batch being written: (index, length, bytes written).
    writing: Option<(usize, usize, usize)>,
    /// Registered for writable events (while a write is stuck).
    watch_write: bool,
    buf: Vec<u8>,
    len: usize,
    due: Instant,
}

struct Thread<'a> {
    cfg: &'a Config,
    poll: Poll,
    conns: Vec<Conn>,
    keys: KeyGen,
    kinds: Vec<Counts>,
    /// Measured requests still to send (`None`: until the deadline).
    left: Option<u64>,
    interval: Option<Duration>,
    /// Open loop: wakes the thread at the next intended send time.
    timer: Option<Timer>,
    send_lag: Counts,
}

impl<'a> Thread<'a> {
    fn new(
        cfg: &'a Config,
        wl: &Workload,
        (t, threads): (usize, usize),
        nconns: usize,
        left: Option<u64>,
    ) -> io::Result<Thread<'a>> {
        if let Some(&cpu) = cfg.cpus.get(t % cfg.cpus.len().max(1)) {
            sys::pin_thread(cpu);
        }
        let poll = Poll::new()?;
        let batches = wl.batches(cfg.pipeline);
        let mut conns = Vec::with_capacity(nconns);
        for i in 0..nconns {
            let mut sock = connect(cfg)?;
            poll.registry()
                .register(&mut sock, Token(i), Interest::READABLE)?;
            conns.push(Conn {
                sock,
                batches: batches.clone(),
                next: 0,
                inflight: VecDeque::with_capacity(16),
                writing: None,
                watch_write: false,
                buf: vec![0; READ_BUF],
                len: 0,
                due: Instant::now(),
            });
        }
        let interval = cfg.rate.map(|r| {
            Duration::from_secs_f64((cfg.clients * cfg.pipeline.max(1)) as f64 / r.max(1e-3))
        });
        let timer = match interval {
            Some(_) => Some(Timer::new(&poll)?),
            None => None,
        };
        Ok(Thread {
            cfg,
            timer,
            send_lag: Counts::default(),
            poll,
            conns,
            keys: KeyGen::new(cfg.dist, cfg.keyspace, cfg.seed, t as u64, threads as u64),
            kinds: vec![Counts::default(); wl.templates.len()],
            left,
            interval,
        })
    }

    fn run(mut self, progress: &AtomicU64) -> io::Result<ThreadOut> {
        let cpu0 = sys::thread_cpu_secs();
        let start = Instant::now();
        let measure_from = start + self.cfg.warmup;
        let deadline = self
            .cfg
            .requests
            .is_none()
            .then(|| measure_from + self.cfg.duration);
        if let Some(iv) = self.interval {
            let n = self.conns.len().max(1) as u32;
            for (i, c) in self.conns.iter_mut().enumerate() {
                c.due = start + iv / n * i as u32;
            }
        }
        let mut events = Events::with_capacity(1024);
        let mut last_reply = start;
        let mut now = start;
        for i in 0..self.conns.len() {
            self.send(i, now, measure_from)?;
        }
        loop {
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            if self.left == Some(0)
                && self
                    .conns
                    .iter()
                    .all(|c| c.inflight.is_empty() && c.writing.is_none())
            {
                break;
            }
            let timeout = deadline.map(|d| d.saturating_duration_since(now));
            if let Some(timer) = &mut self.timer {
                let due = self.conns.iter().map(|c| c.due).min().unwrap_or(now);
                timer.wake_at(due, now)?;
            }
            // Wake at least once a second to notice a server that stopped answering.
            let timeout =
                Some(timeout.map_or(Duration::from_secs(1), |t| t.min(Duration::from_secs(1))));
            if now.saturating_duration_since(last_reply) > STALL
                && self.conns.iter().any(|c| !c.inflight.is_empty())
            {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no reply for {} s", STALL.as_secs()),
                ));
            }
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            now = Instant::now();
            // All replies of this wake-up first, then the next batches (as
            // redis-benchmark does), so requests reach the server together.
            for ev in &events {
                if ev.token() == TIMER {
                    if let Some(timer) = &mut self.timer {
                        timer.fired();
                    }
                    continue;
                }
                let i = ev.token().0;
                if ev.is_writable() {
                    flush(&mut self.conns[i], &self.poll, i)?;
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    let n = self.read(i, now)?;
                    if n > 0 {
                        progress.fetch_add(n, Ordering::Relaxed);
                    }
                    last_reply = now;
                }
            }
            for ev in &events {
                if ev.token() != TIMER {
                    self.send(ev.token().0, now, measure_from)?;
                }
            }
            if self.interval.is_some() {
                for i in 0..self.conns.len() {
                    self.send(i, now, measure_from)?;
                }
            }
        }
        let end = deadline.unwrap_or(last_reply);
        Ok(ThreadOut {
            kinds: self.kinds,
            secs: end.saturating_duration_since(measure_from).as_secs_f64(),
            cpu_secs: sys::thread_cpu_secs() - cpu0,
            send_lag: self.send_lag,
        })
    }

    /// Sends the batches connection `i` is due to send.
    fn send(&mut self, i: usize, now: Instant, measure_from: Instant) -> io::Result<()> {
        let p = self.cfg.pipeline.max(1);
        let c = &mut self.conns[i];
        while c.writing.is_none() {
            let start = match self.interval {
                None if c.inflight.is_empty() => now,
                Some(_) if c.due <= now && c.inflight.len() < MAX_INFLIGHT => c.due,
                _ => return Ok(()),
            };
            let measured = start >= measure_from;
            let n = match self.left {
                Some(left) if measured => left.min(p as u64) as usize,
                _ => p,
            };
            if n == 0 {
                return Ok(());
            }
            if measured {
                if let Some(left) = &mut self.left {
                    *left -= n as u64;
                }
                if self.interval.is_some() {
                    let lag = now.saturating_duration_since(start).as_nanos() as u64;
                    self.send_lag.record(lag);
                }
            }
            let b = c.next;
            c.next = (b + 1) % c.batches.len();
            let len = c.batches[b].fill(n, &mut self.keys);
            if let Some(iv) = self.interval {
                c.due += iv;
            }
            c.inflight.push_back(Flight {
                start,
                batch: b,
                n,
                done: 0,
                measured,
            });
            c.writing = Some((b, len, 0));
            flush(c, &self.poll, i)?;
        }
        Ok(())
    }

    /// Reads and counts the replies waiting on connection `i`; returns the
    /// measured requests it completed.
    fn read(&mut self, i: usize, now: Instant) -> io::Result<u64> {
        let c = &mut self.conns[i];
        let mut completed = 0;
        loop {
            if c.len == c.buf.len() {
                let grown = c.buf.len() * 2;
                c.buf.resize(grown, 0);
            }
            let room = c.buf.len() - c.len;
            let got = match c.sock.read(&mut c.buf[c.len..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the server closed a connection",
                    ))
                }
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            c.len += got;
            let mut pos = 0;
            // Replies of one flight parsed from this read share one latency:
            // they are recorded together, one histogram update per run of a kind.
            let mut run: Option<(usize, u64, u64)> = None;
            while let Some((used, is_err)) = skip_reply(&c.buf[pos..c.len]).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("bad reply: {e}"))
            })? {
                let Some(f) = c.inflight.front_mut() else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a reply to no request",
                    ));
                };
                if f.measured {
                    let kind = c.batches[f.batch].kinds[f.done] as usize;
                    if is_err {
                        let ns = now.saturating_duration_since(f.start).as_nanos() as u64;
                        self.kinds[kind].error(ns, &c.buf[pos..pos + used]);
                    } else {
                        match &mut run {
                            Some((k, _, count)) if *k == kind => *count += 1,
                            _ => {
                                if let Some((k, ns, count)) = run {
                                    self.kinds[k].record_n(ns, count);
                                }
                                let ns = now.saturating_duration_since(f.start).as_nanos() as u64;
                                run = Some((kind, ns, 1));
                            }
                        }
                    }
                }
                f.done += 1;
                pos += used;
                if f.done == f.n {
                    if f.measured {
                        completed += f.n as u64;
                    }
                    c.inflight.pop_front();
                    // The next flight started at another time.
                    if let Some((k, ns, count)) = run.take() {
                        self.kinds[k].record_n(ns, count);
                    }
                }
            }
            if let Some((k, ns, count)) = run {
                self.kinds[k].record_n(ns, count);
            }
            c.buf.copy_within(pos..c.len, 0);
            c.len -= pos;
            // A short read emptied the socket; the next arrival raises a new event.
            if got < room {
                break;
            }
        }
        Ok(completed)
    }
}

/// The poll token of a thread's [`Timer`] (connections are numbered from 0).
const TIMER: Token = Token(usize::MAX);

/// A timerfd registered in a thread's poll: wakes it at a send time to the
/// microsecond, where `Poll::poll`'s timeout rounds up to whole milliseconds.
struct Timer {
    fd: OwnedFd,
    /// The instant it is set for, if set and not yet fired.
    armed: Option<Instant>,
}

impl Timer {
    /// A timer registered in `poll` under [`TIMER`], not set.
    fn new(poll: &Poll) -> io::Result<Timer> {
        // SAFETY: a plain system call with constant flags; the result is checked below.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor just created here, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        poll.registry()
            .register(&mut SourceFd(&fd.as_raw_fd()), TIMER, Interest::READABLE)?;
        Ok(Timer { fd, armed: None })
    }

    /// Sets the timer to fire at `at` (now, if that has passed), unless it already is.
    fn wake_at(&mut self, at: Instant, now: Instant) -> io::Result<()> {
        if self.armed == Some(at) {
            return Ok(());
        }
        // Zero would disarm the timer: the earliest expiry is a nanosecond away.
        let after = at
            .saturating_duration_since(now)
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `spec` is a valid itimerspec that outlives the call; no old value is asked for.
        let r =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed = Some(at);
        Ok(())
    }

    /// Takes the expiry the poll reported, so the next one raises a new event.
    fn fired(&mut self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into an 8-byte buffer; a spurious wake-up (nothing to
        // read) returns EAGAIN, which needs no handling.
        unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
        self.armed = None;
    }
}

/// Writes what is left of the connection's current batch. Writability is
/// watched only while a write is stuck (a full socket buffer is rare), so
/// the usual wake-up is one readable event per batch.
fn flush(c: &mut Conn, poll: &Poll, i: usize) -> io::Result<()> {
    while let Some((b, len, written)) = c.writing {
        match c.sock.write(&c.batches[b].bytes[written..len]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(k) if written + k == len => {
                c.writing = None;
                if c.watch_write {
                    c.watch_write = false;
                    poll.registry()
                        .reregister(&mut c.sock, Token(i), Interest::READABLE)?;
                }
            }
            Ok(k) => c.writing = Some((b, len, written + k)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if !c.watch_write {
                    c.watch_write = true;
                    poll.registry().reregister(
                        &mut c.sock,
                        Token(i),
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                }
                return Ok(());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Opens one connection (blocking, so AUTH can be checked), then makes it non-blocking.
fn connect(cfg: &Config) -> io::Result<TcpStream> {
    let mut s = std::net::TcpStream::connect_timeout(&cfg.addr, Duration::from_secs(5))
        .map_err(|e| io::Error::new(e.kind(), format!("connect to {}: {e}", cfg.addr)))?;
    s.set_nodelay(true)?;
    if let Some(pass) = &cfg.auth {
        let reply = crate::control::roundtrip(&mut s, &[b"AUTH", pass.as_bytes()])?;
        if let Value::Error(e) = reply {
            return Err(io::Error::other(format!(
                "AUTH failed: {}",
                String::from_utf8_lossy(&e)
            )));
        }
    }
    s.set_nonblocking(true)?;
    Ok(TcpStream::from_std(s))
}

/// Parses one complete reply from the start of `buf`, for the control client.
pub fn parse_one(buf: &[u8]) -> io::Result<Option<(Value, usize)>> {
    parse_reply(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The timer wakes the poll well under a millisecond away, where `Poll::poll`'s own
    /// timeout cannot: it rounds any wait up to whole milliseconds.
    #[test]
    fn timer_wakes_the_poll_to_the_microsecond() {
        let mut poll = Poll::new().unwrap();
        let mut timer = Timer::new(&poll).unwrap();
        let mut events = Events::with_capacity(4);
        let wait = Duration::from_micros(200);
        // The best of a few tries, so that a busy machine does not fail the test.
        let mut best = Duration::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            timer.wake_at(start + wait, start).unwrap();
            // Nothing else is registered: the poll returns for the timer (or the 1 s bound).
            poll.poll(&mut events, Some(Duration::from_secs(1)))
                .unwrap();
            let took = start.elapsed();
            assert!(events.iter().any(|e| e.token() == TIMER), "no timer event");
            assert!(
                took >= wait,
                "woke after {took:?}, before the {wait:?} it was set for"
            );
            timer.fired();
            best = best.min(took);
        }
        assert!(
            best < Duration::from_micros(900),
            "best wake-up after {best:?}"
        );
        // A time already past fires at once.
        let now = Instant::now();
        timer.wake_at(now - Duration::from_millis(1), now).unwrap();
        poll.poll(&mut events, Some(Duration::from_secs(1)))
            .unwrap();
        assert!(now.elapsed() < Duration::from_millis(500));
        assert!(events.iter().any(|e| e.token() == TIMER));
    }
}
