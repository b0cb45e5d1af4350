//! The shard's own event loop for plain clients.
//!
//! A shard thread runs tokio's current-thread runtime, and each wakeup of a task costs the
//! runtime's cycle (park, `epoll_wait`, wake, task poll): measured, about half of what our
//! server spends beyond a bare epoll loop per batch at pipeline 16, and most of it at pipeline 1
//! (README, "Which layer those lines belong to"). Here the shard serves its plain clients (no
//! transaction, subscription, blocked command ...) without a task: a client is a socket in an
//! epoll instance of the shard's own, and its batches run through the plain lanes
//! ([`Lanes::serve`]) straight from the event, read into and replied from buffers the whole
//! loop shares.
//!
//! The loop runs when tokio has nothing to do: tokio calls [`park`] just before it would block
//! (`on_thread_park`), and the loop then blocks in its own `epoll_wait` instead. Tokio's own
//! epoll instance is one of the loop's sources, so the loop gives the thread back as soon as
//! tokio has an event (a socket of a task, a wake from another thread, which tokio turns into
//! an event of its own); and it gives it back when the earliest timer of the thread is due
//! ([`crate::timer`]). Tokio then finds its events at once.
//!
//! A command the lanes do not take moves the client to a task ([`super::serve_carried`]),
//! with what it sent after that command and the replies not yet written: the task serves
//! everything else as before. Where tokio's epoll instance cannot be found (see
//! [`build_runtime`]) the shard serves every client from tasks.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::lane::Stop;
use super::*;

/// The event that stands for tokio's epoll instance.
const TOKIO: u64 = u64::MAX;
/// Events taken per `epoll_wait`.
const EVENTS: usize = 256;

thread_local! {
    static LOOP: RefCell<Option<FastLoop>> = const { RefCell::new(None) };
}

/// Builds a shard thread's runtime, which lets the loop run before it parks, and finds its
/// epoll instance: the epoll file descriptors that building it added to the process, which
/// must all be one open file (the builds are serialised, and nothing else of the server makes
/// epoll instances). `None` when they are not, or the loop is off (`KVSERVER_FAST_LOOP=0`).
pub fn build_runtime() -> std::io::Result<(tokio::runtime::Runtime, Option<RawFd>)> {
    static BUILDS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    let before = epoll_fds();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .on_thread_park(park)
        .build()?;
    let on = std::env::var("KVSERVER_FAST_LOOP").map_or(true, |v| v != "0");
    let found: Vec<RawFd> = epoll_fds()
        .into_iter()
        .filter(|fd| !before.contains(fd))
        .collect();
    // (Tokio keeps a second descriptor of its instance, a `dup` of the first: one file.)
    let fd = match found[..] {
        [fd, ref rest @ ..] if on && rest.iter().all(|&other| same_file(fd, other)) => Some(fd),
        _ => None,
    };
    if on && fd.is_none() {
        log!(
            1,
            "the shard's own event loop is off: tokio's epoll instance not found ({} new)",
            found.len()
        );
    }
    Ok((rt, fd))
}

/// Whether two descriptors of this process are one open file (`kcmp`).
fn same_file(a: RawFd, b: RawFd) -> bool {
    const KCMP_FILE: libc::c_long = 0;
    // SAFETY: kcmp takes no pointers; it compares two descriptors of this very process.
    let r = unsafe {
        let pid = libc::getpid() as libc::c_long;
        libc::syscall(
            libc::SYS_kcmp,
            pid,
            pid,
            KCMP_FILE,
            a as libc::c_long,
            b as libc::c_long,
        )
    };
    r == 0
}

/// The process's epoll file descriptors.
fn epoll_fds() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let fd: RawFd = e.file_name().to_str()?.parse().ok()?;
        let target = std::fs::read_link(e.path()).ok()?;
        (target.as_os_str() == "anon_inode:[eventpoll]").then_some(fd)
    })
    .collect()
}

/// The future a shard thread's runtime runs, with what tells the loop that a task woke.
///
/// A wake on the runtime's own thread does not go through tokio's epoll instance (tokio only
/// flags itself, knowing it will look before it parks), so the loop, which runs inside tokio's
/// park, would not see it. Every waker the shard's tasks hold leads to the waker of this
/// future (the `LocalSet` wakes it for each of its tasks); wrapped, it raises `woken` first.
pub struct Watched<F> {
    inner: F,
    woken: Arc<Woken>,
    /// Tokio's waker and the wrapped one, made once.
    wakers: Option<(std::task::Waker, std::task::Waker)>,
}

/// Whether a task of the shard woke since the loop last looked.
#[derive(Default)]
pub struct Woken {
    flag: std::sync::atomic::AtomicBool,
    inner: std::sync::Mutex<Option<std::task::Waker>>,
}

impl std::task::Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.flag.store(true, Ordering::Release);
        if let Some(w) = lock(&self.inner).as_ref() {
            w.wake_by_ref();
        }
    }
}

/// `f`, watched for wakes (see [`Watched`]).
pub fn watched<F: std::future::Future>(f: F, woken: Arc<Woken>) -> Watched<F> {
    Watched {
        inner: f,
        woken,
        wakers: None,
    }
}

impl<F: std::future::Future> std::future::Future for Watched<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        // SAFETY: `inner` is never moved out of the pinned `Watched`; the other fields are
        // not structurally pinned.
        let me = unsafe { self.get_unchecked_mut() };
        let fresh = match &me.wakers {
            Some((theirs, _)) => !theirs.will_wake(cx.waker()),
            None => true,
        };
        if fresh {
            *lock(&me.woken.inner) = Some(cx.waker().clone());
            let ours = std::task::Waker::from(me.woken.clone());
            me.wakers = Some((cx.waker().clone(), ours));
        }
        let ours = &me.wakers.as_ref().expect("made above").1;
        let mut cx = std::task::Context::from_waker(ours);
        // SAFETY: as above, `inner` stays where it is.
        unsafe { std::pin::Pin::new_unchecked(&mut me.inner) }.poll(&mut cx)
    }
}

/// Starts this shard thread's loop over tokio's epoll instance `tokio_fd`; `woken` is the
/// flag of the thread's [`Watched`] future.
pub fn install(
    shard: &Rc<Shard>,
    local: Rc<tokio::task::LocalSet>,
    tokio_fd: RawFd,
    woken: Arc<Woken>,
) -> std::io::Result<()> {
    // SAFETY: epoll_create1 takes no pointers; the result is checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `ep` was just created and is owned by nothing else.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, tokio_fd, TOKIO)?;
    let l = FastLoop {
        shard: shard.clone(),
        local,
        woken,
        ep,
        conns: Vec::new(),
        free: Vec::new(),
        rbuf: vec![0; READ_CHUNK],
        out: Vec::with_capacity(READ_CHUNK),
        events: vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS],
        handed: None,
    };
    LOOP.with(|cell| *cell.borrow_mut() = Some(l));
    Ok(())
}

/// Stops this thread's loop: its clients are closed and forgotten.
pub fn uninstall() {
    let l = LOOP.with(|cell| cell.borrow_mut().take());
    if let Some(l) = l {
        for c in l.conns.into_iter().flatten() {
            forget(&l.shard, &c.entry);
        }
    }
}

/// Whether this thread's shard serves plain clients from its own loop.
pub fn active() -> bool {
    LOOP.with(|cell| cell.try_borrow().is_ok_and(|l| l.is_some()))
}

/// Serves the client from this thread's loop; it comes back when there is none.
pub fn adopt(
    stream: std::net::TcpStream,
    session: Session,
    entry: Arc<ClientEntry>,
) -> Result<(), Box<(std::net::TcpStream, Session)>> {
    LOOP.with(|cell| {
        let Ok(mut l) = cell.try_borrow_mut() else {
            return Err(Box::new((stream, session)));
        };
        match l.as_mut() {
            Some(l) => l.adopt(stream, session, entry),
            None => Err(Box::new((stream, session))),
        }
    })
}

/// Serves the clients that are ready now, without waiting: for a task that holds the thread
/// for long (a snapshot's steps) between its yields.
pub fn serve_ready() {
    LOOP.with(|cell| {
        if let Ok(mut l) = cell.try_borrow_mut() {
            if let Some(l) = l.as_mut() {
                l.run(false);
            }
        }
    });
}

/// Tokio's `on_thread_park`: runs the loop until tokio has something to do.
fn park() {
    LOOP.with(|cell| {
        if let Ok(mut l) = cell.try_borrow_mut() {
            if let Some(l) = l.as_mut() {
                l.run(true);
            }
        }
    });
}

fn ctl(ep: RawFd, op: libc::c_int, fd: RawFd, token: u64) -> std::io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: `ev` outlives the call; the kernel copies it.
    if unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

struct FastLoop {
    shard: Rc<Shard>,
    /// The shard's task set, entered while the loop runs, so that what a command wakes or
    /// spawns lands there.
    local: Rc<tokio::task::LocalSet>,
    /// Raised when a task of the shard woke: tokio has work.
    woken: Arc<Woken>,
    ep: OwnedFd,
    /// The clients, by their events' token; `free` lists the empty places.
    conns: Vec<Option<Box<FastConn>>>,
    free: Vec<usize>,
    /// Every client's reads go here, and their replies there, one batch at a time.
    rbuf: Vec<u8>,
    out: Vec<u8>,
    events: Vec<libc::epoll_event>,
    /// Timers due by this instant were handed to tokio (see [`FastLoop::run`]).
    handed: Option<tokio::time::Instant>,
}

/// The loop's `epoll_wait` timeout in milliseconds for the earliest timer deadline `due` at
/// `now`: until tokio surely fires it, which is up to [`crate::timer::TOKIO_TICK`] after the
/// deadline (returning sooner, tokio would block in its own `epoll_wait`, which does not watch
/// the loop's clients, until then); 0 once it does.
fn timer_wait(due: tokio::time::Instant, now: tokio::time::Instant) -> i32 {
    let fires = due + crate::timer::TOKIO_TICK;
    if fires <= now {
        return 0;
    }
    let ms = (fires - now).as_nanos().div_ceil(1_000_000);
    ms.min(i32::MAX as u128) as i32
}

/// A plain client served by the loop.
struct FastConn {
    stream: std::net::TcpStream,
    session: Session,
    entry: Arc<ClientEntry>,
    parser: Parser,
    /// The start of an incomplete command, kept until the rest comes.
    partial: Vec<u8>,
}

/// What becomes of a client after an event.
enum After {
    Keep,
    Close,
    /// To a task, with what it sent that did not run and the replies not written.
    Task(Vec<u8>, Vec<u8>),
}

impl FastLoop {
    fn adopt(
        &mut self,
        stream: std::net::TcpStream,
        session: Session,
        entry: Arc<ClientEntry>,
    ) -> Result<(), Box<(std::net::TcpStream, Session)>> {
        let idx = self.free.pop().unwrap_or(self.conns.len());
        if let Err(e) = stream.set_nonblocking(true).and_then(|()| {
            ctl(
                self.ep.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                stream.as_raw_fd(),
                idx as u64,
            )
        }) {
            log!(1, "client {} stays on a task: {e}", entry.id);
            if idx < self.conns.len() {
                self.free.push(idx);
            }
            return Err(Box::new((stream, session)));
        }
        let parser = Parser::new(Limits {
            max_bulk_len: self.shard.db.borrow().config.proto_max_bulk_len as usize,
            ..Limits::default()
        });
        let c = Box::new(FastConn {
            stream,
            session,
            entry,
            parser,
            partial: Vec::new(),
        });
        if idx == self.conns.len() {
            self.conns.push(Some(c));
        } else {
            self.conns[idx] = Some(c);
        }
        Ok(())
    }

    /// Waits for and serves events until tokio has one (or, `block` false, serves what is
    /// ready now). When a timer of the thread is due it serves what is ready and returns.
    fn run(&mut self, block: bool) {
        let _local = self.local.enter();
        // Tasks woken before tokio parks were seen by tokio itself (it parks only when none
        // are): from here on the flag tells of wakes the loop causes.
        self.woken.flag.store(false, Ordering::Release);
        loop {
            let mut timer_due = false;
            let timeout = if !block {
                0
            } else {
                match crate::timer::next_due_after(self.handed) {
                    None => -1,
                    Some(due) => {
                        let now = tokio::time::Instant::now();
                        let t = timer_wait(due, now);
                        if t == 0 {
                            // Tokio's next park fires every timer due by `handed` (and wakes
                            // its task); one that stays listed after that is not waited for
                            // (its future is not polled), and must not keep the loop from
                            // blocking.
                            timer_due = true;
                            self.handed = now.checked_sub(crate::timer::TOKIO_TICK);
                        }
                        t
                    }
                }
            };
            // SAFETY: `events` has room for `EVENTS` entries, and lives through the call.
            let n = unsafe {
                libc::epoll_wait(
                    self.ep.as_raw_fd(),
                    self.events.as_mut_ptr(),
                    EVENTS as i32,
                    timeout,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                log!(0, "the shard's event loop: {e}");
                return;
            }
            // (None ready at a timer's wait's end: the next turn finds the timer due.)
            let mut tokio = false;
            for i in 0..n as usize {
                let token = self.events[i].u64;
                if token == TOKIO {
                    tokio = true;
                } else {
                    self.event(token as usize);
                }
            }
            // A command may have woken a task (a blocked client served, a subscriber's
            // mail): tokio runs it now.
            if tokio || timer_due || !block || self.woken.flag.swap(false, Ordering::AcqRel) {
                return;
            }
        }
    }

    /// Serves the client at `idx`, which has something to read.
    fn event(&mut self, idx: usize) {
        let Some(mut c) = self.conns.get_mut(idx).and_then(Option::take) else {
            return;
        };
        match self.serve(&mut c) {
            After::Keep => self.conns[idx] = Some(c),
            After::Close => {
                self.free.push(idx);
                forget(&self.shard, &c.entry);
            }
            After::Task(input, out) => {
                self.free.push(idx);
                let fd = c.stream.as_raw_fd();
                let _ = ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, 0);
                let FastConn {
                    stream,
                    session,
                    entry,
                    ..
                } = *c;
                match tokio::net::TcpStream::from_std(stream) {
                    Ok(stream) => {
                        tokio::task::spawn_local(serve_carried(
                            self.shard.clone(),
                            stream,
                            session,
                            entry,
                            input,
                            out,
                        ));
                    }
                    Err(e) => {
                        log!(3, "client {} lost moving to a task: {e}", entry.id);
                        forget(&self.shard, &entry);
                    }
                }
            }
        }
    }

    /// Reads what the client sent and runs it while the plain lanes take it.
    fn serve(&mut self, c: &mut FastConn) -> After {
        let shard = &self.shard.clone();
        let have = c.partial.len();
        if have >= self.rbuf.len() {
            // One command larger than the loop's buffer: the task's grows.
            return After::Task(std::mem::take(&mut c.partial), Vec::new());
        }
        self.rbuf[..have].copy_from_slice(&c.partial);
        c.partial.clear();
        let n = match (&c.stream).read(&mut self.rbuf[have..]) {
            Ok(0) => return After::Close,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                c.partial.extend_from_slice(&self.rbuf[..have]);
                return After::Keep;
            }
            Err(_) => return After::Close,
        };
        shard.net.read(n);
        let end = have + n;
        if shard.global.pause_end.load(Ordering::Relaxed) != 0 {
            return After::Task(self.rbuf[..end].to_vec(), Vec::new());
        }
        {
            let mut db = shard.db.borrow_mut();
            db.refresh_clock();
            // The lanes take a client whose user may run everything as of the users' last
            // change (`Acl::is_free`); the general path's ACL gate refreshes that view, which
            // the loop does itself (a restricted user's client goes to a task).
            if !db.acl.is_free(&c.session) {
                db.acl.refresh(&mut c.session);
            }
        }
        let mut pos = 0;
        let mut close = false;
        loop {
            let mut lanes = Lanes {
                shard,
                session: &mut c.session,
                out: &mut self.out,
            };
            let (at, stop) = lanes.serve(&mut c.parser, &self.rbuf[..end], pos);
            lanes.end_lap();
            pos = at;
            match stop {
                Stop::Done => break,
                Stop::Partial(hint) => {
                    if hint > self.rbuf.len() {
                        return After::Task(self.rbuf[pos..end].to_vec(), self.take_out());
                    }
                    c.partial.extend_from_slice(&self.rbuf[pos..end]);
                    break;
                }
                Stop::Other => {
                    return After::Task(self.rbuf[pos..end].to_vec(), self.take_out());
                }
                Stop::Close => {
                    close = true;
                    break;
                }
                Stop::Flush => {
                    if !self.write(c) {
                        return After::Task(self.rbuf[pos..end].to_vec(), self.take_out());
                    }
                }
            }
        }
        if !self.write(c) {
            if close {
                return After::Close;
            }
            return After::Task(std::mem::take(&mut c.partial), self.take_out());
        }
        if close {
            After::Close
        } else {
            After::Keep
        }
    }

    /// The replies not written, for a task; the loop keeps a buffer.
    fn take_out(&mut self) -> Vec<u8> {
        std::mem::replace(&mut self.out, Vec::with_capacity(READ_CHUNK))
    }

    /// Writes the replies: `false` when not all of them went (or the store must be made
    /// durable first), and what is left stays in `out` for a task.
    fn write(&mut self, c: &FastConn) -> bool {
        if self.out.is_empty() {
            return true;
        }
        // Over an output limit: the task applies it (closes the client, or times it).
        let limit = self.shard.global.opts.output_limit;
        let len = self.out.len() as u64;
        if (limit.hard > 0 && len > limit.hard) || (limit.soft > 0 && len > limit.soft) {
            return false;
        }
        if !self.shard.persist_fast() {
            return false;
        }
        match (&c.stream).write(&self.out) {
            Ok(n) if n == self.out.len() => {
                self.shard.net.wrote(n);
                self.out.clear();
                true
            }
            Ok(n) => {
                self.shard.net.wrote(n);
                self.out.drain(..n);
                false
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                false
            }
            // The task meets the error too, and ends the client as usual.
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn the_loop_waits_for_a_timer_until_tokio_surely_fires_it() {
        let now = Instant::now();
        let us = Duration::from_micros;
        // Tokio fires up to a millisecond after the deadline: the wait covers that millisecond,
        // in whole milliseconds rounded up.
        assert_eq!(timer_wait(now + us(300), now), 2);
        assert_eq!(timer_wait(now + us(1000), now), 2);
        assert_eq!(timer_wait(now + us(1001), now), 3);
        assert_eq!(timer_wait(now + Duration::from_secs(100), now), 100_001);
        // Past the deadline but within the millisecond: tokio may not have fired it yet.
        if let Some(past) = now.checked_sub(us(400)) {
            assert_eq!(timer_wait(past, now), 1);
        }
        // A whole millisecond past: due.
        if let Some(past) = now.checked_sub(us(1000)) {
            assert_eq!(timer_wait(past, now), 0);
        }
    }
}
