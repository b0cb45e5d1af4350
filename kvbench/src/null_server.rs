//! `kvbench null-server`: a RESP server that does no work, for measuring load generators.
//!
//! It parses each request with kvcore's parser and answers `+PONG` to PING
//! and `+OK` to anything else, from one thread. Against it the client is
//! the bottleneck, so `calibrate --null-server` shows what each load
//! generator costs per request when it runs flat out; and its own CPU time
//! per request is the I/O floor of an event model. This module is the mio
//! (epoll) loop, the default; `--io uring` runs [`crate::null_uring`], which
//! gives the same replies.

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
    parser: Parser,
    session: kvcore::Session,
    input: Vec<u8>,
    len: usize,
    out: Vec<u8>,
    sent: usize,
    /// Registered for writable events (only while a write is stuck, as redis-server does).
    watch_write: bool,
}

/// Serves until killed; returns only on a listener error.
pub fn main(args: NullArgs) -> Result<i32, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let fail = |e: String| format!("null-server on {addr}: {e}");
    let listener = std::net::TcpListener::bind(addr).map_err(|e| fail(e.to_string()))?;
    match args.io {
        Io::Epoll => serve(listener, args.execute).map_err(|e| fail(e.to_string()))?,
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
    let mut db = execute.then(kvcore::Db::new);
    listener.set_nonblocking(true)?;
    let mut listener = TcpListener::from_std(listener);
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut events = Events::with_capacity(1024);
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for ev in &events {
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
                                parser: Parser::new(LIMITS),
                                session: kvcore::Session {
                                    authenticated: true,
                                    ..kvcore::Session::default()
                                },
                                input: vec![0; 64 << 10],
                                len: 0,
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
            if serve_conn(c, db.as_mut(), &poll, Token(i)).is_err() {
                if let Some(mut c) = conns[i].take() {
                    let _ = poll.registry().deregister(&mut c.sock);
                }
            }
        }
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
        if c.len == c.input.len() {
            if c.input.len() >= MAX_BUF {
                return Err(io::ErrorKind::OutOfMemory.into());
            }
            let grown = c.input.len() * 2;
            c.input.resize(grown, 0);
        }
        let room = c.input.len() - c.len;
        let got = match c.sock.read(&mut c.input[c.len..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        c.len += got;
        let input = &c.input[..c.len];
        let pos = match db.as_deref_mut() {
            Some(db) => each_command(&mut c.parser, input, |args| {
                db.dispatch(&mut c.session, args, &mut c.out)
            }),
            None => answer(&mut c.parser, input, &mut c.out),
        }
        .ok_or(io::ErrorKind::InvalidData)?;
        c.input.copy_within(pos..c.len, 0);
        c.len -= pos;
        if got < room {
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
