//! `kvbench null-server`: a RESP server that does no work, for measuring load generators.
//!
//! It parses each request with kvcore's parser and answers `+PONG` to PING
//! and `+OK` to anything else, from one thread. Against it the client is
//! the bottleneck, so `calibrate --null-server` shows what each load
//! generator costs per request when it runs flat out; and its own CPU time
//! per request is the I/O floor of an event model. This module is the mio
//! (epoll) loop, the default, and the same work on tokio (`--io tokio`: a task
//! per connection; `--io nested`: the mio loop as one tokio task); `--io uring`
//! runs [`crate::null_uring`]. All give the same replies.

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use clap::{Args, ValueEnum};
use kvcore::resp::{Limits, Parsed, Parser};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

/// Options of `kvbench null-server`.
#[derive(Args, Debug)]
pub struct NullArgs {
    /// Port on 127.0.0.1.
    #[arg(long, default_value_t = 6399)]
    pub port: u16,
    /// Event model: epoll (mio, readiness) or io_uring (completions).
    #[arg(long, value_enum, default_value_t = Io::Epoll)]
    pub io: Io,
    /// Run each command on one embedded kvcore `Db` (no shards, no tasks) instead of answering
    /// `+OK`: what kvcore's execution costs on the bare epoll loop (epoll only).
    #[arg(long)]
    pub execute: bool,
}

/// The event model of `null-server`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Io {
    /// mio on epoll: one read per readable event, writable interest only while a reply is stuck.
    Epoll,
    /// io_uring: multishot accept, multishot recv into a provided-buffer ring, one send per
    /// connection per loop turn.
    Uring,
    /// tokio's current-thread runtime, a task per connection on a `LocalSet` (as kvserver's
    /// shards serve their clients).
    Tokio,
    /// The epoll loop as a task of tokio's current-thread runtime: its epoll instance
    /// registered in tokio's.
    Nested,
}

/// Unanswered input (or unsent output) a connection may hold before it is closed.
pub const MAX_BUF: usize = 4 << 20;
/// Parser limits of both variants.
pub const LIMITS: Limits = Limits {
    max_bulk_len: 1 << 20,
    max_args: 1 << 16,
    max_inline_len: 64 << 10,
};
const LISTENER: Token = Token(usize::MAX);

struct Conn {
    sock: TcpStream,
    input: Input,
    out: Vec<u8>,
    sent: usize,
    /// Registered for writable events (only while a write is stuck, as redis-server does).
    watch_write: bool,
}

/// A connection's input not answered yet: its buffer, the parser over it, the session its
/// commands run in.
struct Input {
    parser: Parser,
    session: kvcore::Session,
    buf: Vec<u8>,
    len: usize,
}

impl Input {
    fn new() -> Input {
        Input {
            parser: Parser::new(LIMITS),
            session: kvcore::Session {
                authenticated: true,
                ..kvcore::Session::default()
            },
            buf: vec![0; 64 << 10],
            len: 0,
        }
    }

    /// Where the next read goes: the free end of the buffer, which doubles when full; an
    /// error once it holds [`MAX_BUF`].
    fn room(&mut self) -> io::Result<&mut [u8]> {
        if self.len == self.buf.len() {
            if self.buf.len() >= MAX_BUF {
                return Err(io::ErrorKind::OutOfMemory.into());
            }
            let grown = self.buf.len() * 2;
            self.buf.resize(grown, 0);
        }
        Ok(&mut self.buf[self.len..])
    }

    /// Takes `got` more bytes read into [`Input::room`], answers the whole commands into `out`
    /// (run on `db` when there is one, see [`execute`]) and keeps the rest at the front; an
    /// error on a protocol error.
    fn answer(
        &mut self,
        got: usize,
        db: Option<&mut kvcore::Db>,
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        self.len += got;
        let buf = &self.buf[..self.len];
        let pos = match db {
            Some(db) => execute(db, &mut self.session, &mut self.parser, buf, out),
            None => answer(&mut self.parser, buf, out),
        }
        .ok_or(io::ErrorKind::InvalidData)?;
        self.buf.copy_within(pos..self.len, 0);
        self.len -= pos;
        Ok(())
    }
}

/// Serves until killed; returns only on a listener error.
pub fn main(args: NullArgs) -> Result<i32, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let fail = |e: String| format!("null-server on {addr}: {e}");
    let listener = std::net::TcpListener::bind(addr).map_err(|e| fail(e.to_string()))?;
    match args.io {
        Io::Epoll => serve(listener, args.execute).map_err(|e| fail(e.to_string()))?,
        Io::Tokio => serve_tokio(listener, args.execute).map_err(|e| fail(e.to_string()))?,
        Io::Nested => serve_nested(listener, args.execute).map_err(|e| fail(e.to_string()))?,
        Io::Uring => {
            let server = crate::null_uring::Server::new(listener).map_err(fail)?;
            return Err(fail(server.run().to_string()));
        }
    }
    Ok(0)
}

/// Appends the reply of every whole command at the start of `buf` to `out`;
/// returns the bytes they used, or `None` on a protocol error.
pub fn answer(parser: &mut Parser, buf: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    each_command(parser, buf, |args| {
        if let Some(name) = args.first() {
            if name.eq_ignore_ascii_case(b"ping") {
                out.extend_from_slice(b"+PONG\r\n");
            } else {
                out.extend_from_slice(b"+OK\r\n");
            }
        }
    })
}

/// Runs every whole command at the start of `buf` on `db`, as kvserver runs a read batch: the
/// clock read once, GET and SET through the express lane (`Db::express_admitted`, timed together
/// in the session's lap) while the store admits them, the rest through `Db::dispatch`; returns
/// the bytes they used, or `None` on a protocol error.
fn execute(
    db: &mut kvcore::Db,
    session: &mut kvcore::Session,
    parser: &mut Parser,
    buf: &[u8],
    out: &mut Vec<u8>,
) -> Option<usize> {
    db.refresh_clock();
    if !db.acl.is_free(session) {
        // The session's view of its ACL user, which `Db::admits` reads (kvserver's gate
        // refreshes it too).
        db.acl.refresh(session);
    }
    let mut pos = 0;
    loop {
        if db.express_open(session) && db.admits(session) {
            session.lapping = true;
            while let Some((x, args, consumed)) = parser.scan_express(&buf[pos..]) {
                db.express_admitted(session, x, &args[..x.arity()], out);
                pos += consumed;
            }
            session.lapping = false;
        }
        db.end_lap(&mut session.lap, session.id);
        match parser.parse(&buf[pos..]) {
            Ok(Parsed::Command { args, consumed }) => {
                db.dispatch(session, &args, out);
                pos += consumed;
            }
            Ok(Parsed::Incomplete { .. }) => break,
            Err(_) => return None,
        }
    }
    Some(pos)
}

/// Calls `f` on every whole command at the start of `buf`; returns the bytes they used, or
/// `None` on a protocol error.
fn each_command(parser: &mut Parser, buf: &[u8], mut f: impl FnMut(&[&[u8]])) -> Option<usize> {
    let mut pos = 0;
    while let Some(rest) = buf.get(pos..) {
        match parser.parse(rest) {
            Ok(Parsed::Command { args, consumed }) => {
                f(&args);
                pos += consumed;
            }
            Ok(Parsed::Incomplete { .. }) => break,
            Err(_) => return None,
        }
    }
    Some(pos.min(buf.len()))
}

/// The mio loop on an already bound listener; returns only on an error. With `execute`,
/// commands run on one embedded `Db`.
pub fn serve(listener: std::net::TcpListener, execute: bool) -> io::Result<()> {
    let mut lp = Loop::new(listener, execute)?;
    loop {
        if let Err(e) = lp.poll.poll(&mut lp.events, None) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        lp.handle()?;
    }
}

/// [`serve`]'s loop driven from a task of a tokio current-thread runtime: the loop's epoll
/// instance is registered in tokio's (an epoll descriptor is readable while it has events),
/// the task waits for it and then takes the ready connections with a zero-timeout poll,
/// as a server that serves most connections from one such loop beside its tokio tasks
/// would (one more `epoll_wait` per wakeup than [`serve`]).
pub fn serve_nested(listener: std::net::TcpListener, execute: bool) -> io::Result<()> {
    use std::os::fd::{AsRawFd, RawFd};
    struct Fd(RawFd);
    impl AsRawFd for Fd {
        fn as_raw_fd(&self) -> RawFd {
            self.0
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let mut lp = Loop::new(listener, execute)?;
        // SAFETY: the descriptor is the epoll instance of `lp`, which is declared before `fd`
        // and so outlives it, and never replaced.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                Fd(lp.poll.as_raw_fd()),
                tokio::io::Interest::READABLE,
            )
        }
        .map_err(io::Error::from)?;
        loop {
            let mut ready = fd.readable().await?;
            loop {
                match lp
                    .poll
                    .poll(&mut lp.events, Some(std::time::Duration::ZERO))
                {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => r?,
                }
                let full = lp.events.iter().count() == lp.events.capacity();
                lp.handle()?;
                if !full {
                    break;
                }
            }
            // (An event that arrives from here on wakes the task again: the outer epoll
            // hears of every event added to the inner one.)
            ready.clear_ready();
        }
    })
}

/// The state of the mio loop: its epoll instance, the listener, the connections.
struct Loop {
    poll: Poll,
    events: Events,
    listener: TcpListener,
    conns: Vec<Option<Conn>>,
    db: Option<kvcore::Db>,
}

impl Loop {
    fn new(listener: std::net::TcpListener, execute: bool) -> io::Result<Loop> {
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(Loop {
            poll,
            events: Events::with_capacity(1024),
            listener,
            conns: Vec::new(),
            db: execute.then(kvcore::Db::new),
        })
    }

    /// Accepts and serves what the last poll reported.
    fn handle(&mut self) -> io::Result<()> {
        let Loop {
            poll,
            events,
            listener,
            conns,
            db,
        } = self;
        for ev in events.iter() {
            if ev.token() == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((mut sock, _)) => {
                            sock.set_nodelay(true)?;
                            let i = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                                conns.push(None);
                                conns.len() - 1
                            });
                            poll.registry()
                                .register(&mut sock, Token(i), Interest::READABLE)?;
                            conns[i] = Some(Conn {
                                sock,
                                input: Input::new(),
                                out: Vec::with_capacity(64 << 10),
                                sent: 0,
                                watch_write: false,
                            });
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e),
                    }
                }
                continue;
            }
            let i = ev.token().0;
            let Some(c) = conns.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            if serve_conn(c, db.as_mut(), poll, Token(i)).is_err() {
                if let Some(mut c) = conns[i].take() {
                    let _ = poll.registry().deregister(&mut c.sock);
                }
            }
        }
        Ok(())
    }
}

/// Reads what arrived, answers every whole command, writes what it can.
///
/// Like redis-server: one read per readable event unless the buffer filled
/// (a short read emptied the socket, and the next arrival raises a new
/// edge), and writable events watched only while a reply is stuck.
fn serve_conn(
    c: &mut Conn,
    mut db: Option<&mut kvcore::Db>,
    poll: &Poll,
    token: Token,
) -> io::Result<()> {
    loop {
        let room = c.input.room()?;
        let free = room.len();
        let got = match c.sock.read(room) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        c.input.answer(got, db.as_deref_mut(), &mut c.out)?;
        if got < free {
            break;
        }
    }
    while c.sent < c.out.len() {
        match c.sock.write(&c.out[c.sent..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(k) => c.sent += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let stuck = c.sent < c.out.len();
    if !stuck {
        c.out.clear();
        c.sent = 0;
    } else if c.out.len() > MAX_BUF {
        return Err(io::ErrorKind::OutOfMemory.into());
    }
    if stuck != c.watch_write {
        c.watch_write = stuck;
        let interest = if stuck {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        poll.registry().reregister(&mut c.sock, token, interest)?;
    }
    Ok(())
}

/// [`serve`] on tokio: a task per connection, each reading, answering and writing as
/// [`serve_conn`] does; with `execute`, commands run on one embedded `Db` shared by the tasks.
pub fn serve_tokio(listener: std::net::TcpListener, execute: bool) -> io::Result<()> {
    use std::cell::RefCell;
    use std::rc::Rc;
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let db = Rc::new(RefCell::new(execute.then(kvcore::Db::new)));
        let listener = tokio::net::TcpListener::from_std(listener)?;
        loop {
            let (sock, _) = listener.accept().await?;
            sock.set_nodelay(true)?;
            tokio::task::spawn_local(serve_tokio_conn(sock, db.clone()));
        }
    })
}

/// One connection of [`serve_tokio`]: read once when readable, answer, write it all.
async fn serve_tokio_conn(
    sock: tokio::net::TcpStream,
    db: std::rc::Rc<std::cell::RefCell<Option<kvcore::Db>>>,
) {
    let mut input = Input::new();
    let mut out = Vec::with_capacity(64 << 10);
    loop {
        if std::future::poll_fn(|cx| sock.poll_read_ready(cx))
            .await
            .is_err()
        {
            return;
        }
        let Ok(room) = input.room() else { return };
        // One `recv` per batch, as kvserver reads: a short read drained the socket, so its
        // readiness is cleared then rather than by a second `recv` failing.
        let mut got = 0usize;
        let r = sock.try_io(tokio::io::Interest::READABLE, || {
            use std::os::fd::AsRawFd;
            // SAFETY: `room` is a live, writable buffer of `room.len()` bytes.
            let n =
                unsafe { libc::recv(sock.as_raw_fd(), room.as_mut_ptr().cast(), room.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            got = n as usize;
            if got > 0 && got < room.len() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(())
        });
        match r {
            Ok(()) if got == 0 => return,
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        if input
            .answer(got, db.borrow_mut().as_mut(), &mut out)
            .is_err()
        {
            return;
        }
        let mut sent = 0;
        while sent < out.len() {
            match sock.try_write(&out[sent..]) {
                Ok(k) => sent += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if sock.writable().await.is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
        out.clear();
    }
}
