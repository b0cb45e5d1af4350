//! `kvbench null-server --io uring`: the no-op RESP server on io_uring.
//!
//! It gives the epoll variant's replies (`+PONG` to PING, `+OK` to anything
//! else, through the same [`answer`]), so the two differ only in how bytes
//! move and their CPU time per request compares the event models.
//!
//! # How it runs
//! One thread, one ring set up with SINGLE_ISSUER and DEFER_TASKRUN: the
//! kernel finishes our operations only while this thread waits in
//! `submit_and_wait`, so there is no cross-thread wake-up. The listener has
//! one multishot accept. Each connection has one multishot recv drawing from
//! a provided-buffer ring that all connections share: a completion names a
//! buffer that is ours until we put it back in the ring, which we do as soon
//! as its bytes are parsed (or copied to the connection's leftover input).
//! After each batch of completions, every connection with replies gets one
//! Send of all of them; while it is in flight new replies gather in a second
//! buffer, and a short send is resubmitted for the rest.
//!
//! # Invariants
//! - A multishot operation ends with a completion without the MORE flag; we
//!   re-arm it then (also after ENOBUFS: all buffers were out, and by the
//!   time the new recv is submitted the batch has put them back).
//! - A connection's slot is freed, and its socket closed, only once neither
//!   its recv nor its send is in flight. Closing first shuts the socket down,
//!   which ends the recv (it reads EOF) and fails a waiting send. So no
//!   completion ever names a freed slot, and a send buffer is neither moved
//!   nor freed while the kernel may read it.
//! - `user_data` holds the operation's kind, the connection's slot and a
//!   generation number, and completions whose generation does not match the
//!   slot's connection are ignored.
//! - Unparsed input and unsent output are bounded by [`MAX_BUF`]; past it
//!   the connection is closed, as the epoll variant does.
//! - The buffer ring and its buffers are leaked, and so is the server once
//!   it stops: memory the kernel may still write outlives the ring, however
//!   the ring ends. One server runs per process (per test thread).

use std::alloc::Layout;
use std::io;
use std::mem::ManuallyDrop;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::{addr_of, addr_of_mut, NonNull};
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use kvcore::resp::Parser;

use crate::null_server::{answer, LIMITS, MAX_BUF};

/// Submission queue size (the completion queue gets twice as many).
const RING_ENTRIES: u32 = 1024;
/// Buffer group id of the provided-buffer ring.
const BGID: u16 = 0;
/// Buffers in the provided-buffer ring; a power of two.
const NBUF: u16 = 512;
/// Bytes per provided buffer.
const BUFSZ: usize = 16 << 10;

/// Kinds of operation, in the top two bits of `user_data`.
const ACCEPT: u64 = 0;
const RECV: u64 = 1;
const SEND: u64 = 2;
/// Generations use the 30 bits between the kind and the slot.
const GEN_MASK: u32 = (1 << 30) - 1;

const SETUP_HINT: &str =
    "check /proc/sys/kernel/io_uring_disabled and `ulimit -l`, or use --io epoll";

fn user_data(kind: u64, gen: u32, slot: u32) -> u64 {
    (kind << 62) | (u64::from(gen & GEN_MASK) << 32) | u64::from(slot)
}

/// One entry of the provided-buffer ring, as the kernel lays out
/// `struct io_uring_buf`. The `resv` field of entry 0 is the ring's tail.
#[repr(C)]
struct BufEntry {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

const _: () = assert!(std::mem::size_of::<BufEntry>() == 16);

/// The provided-buffer ring: `n` entries the kernel reads and `n` buffers
/// of `BUFSZ` bytes it fills. Both allocations are leaked.
struct BufRing {
    /// `n` entries, page aligned.
    entries: NonNull<BufEntry>,
    /// `n * BUFSZ` bytes.
    pool: NonNull<u8>,
    /// Number of buffers, a power of two.
    n: u16,
    /// Buffers ever handed to the kernel (wrapping); the published tail.
    tail: u16,
}

impl BufRing {
    /// Allocates a ring of `n` buffers (a power of two) with every buffer in it.
    fn new(n: u16) -> Option<Self> {
        if !n.is_power_of_two() {
            return None;
        }
        let layout = Layout::from_size_align(usize::from(n) * size_of::<BufEntry>(), 4096).ok()?;
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let entries = NonNull::new(raw.cast::<BufEntry>())?;
        let pool = vec![0u8; usize::from(n) * BUFSZ].leak();
        let pool = NonNull::new(pool.as_mut_ptr())?;
        let mut ring = BufRing {
            entries,
            pool,
            n,
            tail: 0,
        };
        for bid in 0..n {
            ring.put(bid);
        }
        Some(ring)
    }

    /// Hands buffer `bid` (back) to the kernel. Call it once per buffer we
    /// hold: at start, and for each buffer a completion gave us.
    fn put(&mut self, bid: u16) {
        if bid >= self.n {
            return;
        }
        let slot = usize::from(self.tail & (self.n - 1));
        let addr = self.pool.as_ptr() as u64 + u64::from(bid) * BUFSZ as u64;
        // SAFETY: `slot < n`, inside the entries allocation. The kernel reads
        // only entries between its head and the published tail; since we hold
        // `bid`, at most n - 1 buffers are published, so the entry at
        // the tail is not among them. Fields are written through raw pointers,
        // leaving `resv` (the tail the kernel reads, in entry 0) alone.
        unsafe {
            let e = self.entries.as_ptr().add(slot);
            addr_of_mut!((*e).addr).write(addr);
            addr_of_mut!((*e).len).write(BUFSZ as u32);
            addr_of_mut!((*e).bid).write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail is entry 0's `resv`, in our allocation and 2-byte
        // aligned; the kernel reads it concurrently, so it is only written
        // atomically, and Release makes the entry written above visible first.
        let tail = unsafe { &*addr_of!((*self.entries.as_ptr()).resv).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which a completion just gave us;
    /// `None` if the kernel named a buffer or length that cannot be.
    fn get(&self, bid: u16, len: usize) -> Option<&[u8]> {
        if bid >= self.n || len > BUFSZ {
            return None;
        }
        // SAFETY: the range lies inside the pool (checked above). The kernel
        // gave us this buffer with the completion and writes it again only
        // after `put`, which needs `&mut self` and so ends this borrow first.
        Some(unsafe {
            std::slice::from_raw_parts(self.pool.as_ptr().add(usize::from(bid) * BUFSZ), len)
        })
    }
}

/// A connection's replies: those gathering for the next Send, and those of
/// the last Send, which go again (their unsent rest) if it came up short.
#[derive(Default)]
struct Outbox {
    /// Replies waiting for the next Send.
    out: Vec<u8>,
    /// Replies of the last Send; the kernel reads them while it is in
    /// flight, so nothing touches them then.
    sending: Vec<u8>,
    /// Bytes of `sending` the kernel took.
    sent: usize,
}

impl Outbox {
    /// What the next Send carries: the unsent rest of the last one, else
    /// every reply gathered since; `None` if nothing waits.
    fn next(&mut self) -> Option<&[u8]> {
        if self.sent == self.sending.len() {
            self.sending.clear();
            self.sent = 0;
            std::mem::swap(&mut self.sending, &mut self.out);
        }
        self.sending
            .get(self.sent..)
            .filter(|rest| !rest.is_empty())
    }

    /// Records that the last Send took `n` bytes; true if more is waiting.
    fn took(&mut self, n: usize) -> bool {
        self.sent = (self.sent + n).min(self.sending.len());
        self.sent < self.sending.len() || !self.out.is_empty()
    }
}

/// One client connection.
struct Conn {
    sock: TcpStream,
    gen: u32,
    parser: Parser,
    /// Received bytes not yet forming a whole command.
    input: Vec<u8>,
    replies: Outbox,
    recv_armed: bool,
    send_busy: bool,
    /// In the `queued` list of connections to send to.
    queued: bool,
    /// Shut down; the slot is freed once nothing is in flight.
    closing: bool,
}

/// The io_uring null server: a ring, its buffers and the connections.
pub struct Server {
    ring: IoUring,
    bufs: BufRing,
    listener: TcpListener,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Connections (slot, generation) with replies to send this turn.
    queued: Vec<(usize, u32)>,
    next_gen: u32,
    cqes: Vec<cqueue::Entry>,
}

/// Queues `entry`, submitting first if the submission queue is full.
///
/// # Safety
/// Every buffer `entry` points to must stay valid, and unmoved, until its
/// (last) completion arrives.
unsafe fn push(ring: &mut IoUring, entry: &squeue::Entry) -> io::Result<()> {
    loop {
        // SAFETY: the caller's guarantee about `entry`'s buffers.
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

impl Server {
    /// Sets up the ring and its buffers and arms the accept on `listener`.
    /// The error is one line, with a hint when io_uring is unavailable.
    pub fn new(listener: TcpListener) -> Result<Self, String> {
        Self::with_buffers(listener, NBUF)
    }

    /// [`Server::new`] with `nbuf` provided buffers (a power of two); tests
    /// use a few to run out of them.
    pub fn with_buffers(listener: TcpListener, nbuf: u16) -> Result<Self, String> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(RING_ENTRIES)
            .map_err(|e| format!("io_uring_setup failed ({e}); {SETUP_HINT}"))?;
        let bufs = BufRing::new(nbuf).ok_or("cannot allocate the io_uring buffer ring")?;
        // SAFETY: the entries are `nbuf` page-aligned `io_uring_buf`s that
        // are leaked, so they stay valid as long as the ring and beyond.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                bufs.entries.as_ptr() as u64,
                nbuf,
                BGID,
                0,
            )
        }
        .map_err(|e| format!("io_uring buffer ring registration failed ({e}); {SETUP_HINT}"))?;
        let mut server = Server {
            ring,
            bufs,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            queued: Vec::new(),
            next_gen: 0,
            cqes: Vec::with_capacity(2 * RING_ENTRIES as usize),
        };
        server.arm_accept().map_err(|e| e.to_string())?;
        Ok(server)
    }

    /// Serves until an error, which it returns. The server is never dropped:
    /// its operations may be in flight when it stops (see the module notes).
    pub fn run(self) -> io::Error {
        let mut s = ManuallyDrop::new(self);
        loop {
            if let Err(e) = s.turn() {
                return e;
            }
        }
    }

    /// Submits, waits for at least one completion, handles them all, sends.
    fn turn(&mut self) -> io::Result<()> {
        match self.ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Completions overflowed; reaping them below makes room.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(e) => return Err(e),
        }
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.extend(self.ring.completion());
        let mut done = Ok(());
        for cqe in cqes.drain(..) {
            done = done.and_then(|()| self.complete(&cqe));
        }
        self.cqes = cqes;
        done?;
        self.flush()
    }

    fn complete(&mut self, cqe: &cqueue::Entry) -> io::Result<()> {
        let ud = cqe.user_data();
        let gen = (ud >> 32) as u32 & GEN_MASK;
        let slot = (ud & 0xffff_ffff) as usize;
        match ud >> 62 {
            ACCEPT => self.on_accept(cqe.result(), cqe.flags()),
            RECV => self.on_recv(slot, gen, cqe.result(), cqe.flags()),
            SEND => self.on_send(slot, gen, cqe.result()),
            _ => Ok(()),
        }
    }

    fn arm_accept(&mut self) -> io::Result<()> {
        let entry = opcode::AcceptMulti::new(types::Fd(self.listener.as_raw_fd()))
            .build()
            .user_data(user_data(ACCEPT, 0, 0));
        // SAFETY: a multishot accept passes no buffer, only the listener's
        // descriptor, which the server owns and never closes.
        unsafe { push(&mut self.ring, &entry) }
    }

    fn on_accept(&mut self, res: i32, flags: u32) -> io::Result<()> {
        if res >= 0 {
            // SAFETY: a successful accept's result is a new descriptor that
            // nothing else owns.
            let sock = TcpStream::from(unsafe { OwnedFd::from_raw_fd(res) });
            self.add(sock)?;
        } else if ![libc::ECONNABORTED, libc::EINTR, libc::EAGAIN, libc::EPROTO].contains(&-res) {
            return Err(io::Error::from_raw_os_error(-res));
        }
        if !cqueue::more(flags) {
            self.arm_accept()?;
        }
        Ok(())
    }

    /// Gives `sock` a slot and arms its recv.
    fn add(&mut self, sock: TcpStream) -> io::Result<()> {
        if sock.set_nodelay(true).is_err()
            || (self.free.is_empty() && self.conns.len() > GEN_MASK as usize)
        {
            return Ok(());
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let gen = self.next_gen;
        self.next_gen = (gen + 1) & GEN_MASK;
        let fd = sock.as_raw_fd();
        self.conns[slot] = Some(Conn {
            sock,
            gen,
            parser: Parser::new(LIMITS),
            input: Vec::new(),
            replies: Outbox::default(),
            recv_armed: true,
            send_busy: false,
            queued: false,
            closing: false,
        });
        arm_recv(&mut self.ring, fd, gen, slot)
    }

    fn on_recv(&mut self, slot: usize, gen: u32, res: i32, flags: u32) -> io::Result<()> {
        let bid = cqueue::buffer_select(flags);
        let Some(c) = conn(&mut self.conns, slot, gen) else {
            // Cannot happen (a slot outlives its recv), but the buffer is ours.
            if let Some(bid) = bid {
                self.bufs.put(bid);
            }
            return Ok(());
        };
        if !cqueue::more(flags) {
            c.recv_armed = false;
        }
        let ok = match (res, bid) {
            _ if c.closing => false,
            (1.., Some(bid)) => self
                .bufs
                .get(bid, res as usize)
                .is_some_and(|data| feed(c, data)),
            (e, None) => e == -libc::ENOBUFS,
            _ => false,
        };
        if let Some(bid) = bid {
            self.bufs.put(bid);
        }
        if !ok {
            self.close(slot);
        } else {
            if !c.recv_armed {
                c.recv_armed = true;
                arm_recv(&mut self.ring, c.sock.as_raw_fd(), gen, slot)?;
            }
            if !c.replies.out.is_empty() && !c.queued {
                c.queued = true;
                self.queued.push((slot, gen));
            }
        }
        self.reap(slot);
        Ok(())
    }

    fn on_send(&mut self, slot: usize, gen: u32, res: i32) -> io::Result<()> {
        let Some(c) = conn(&mut self.conns, slot, gen) else {
            return Ok(());
        };
        c.send_busy = false;
        if res <= 0 || c.closing {
            self.close(slot);
        } else {
            if c.replies.took(res as usize) && !c.queued {
                c.queued = true;
                self.queued.push((slot, gen));
            }
        }
        self.reap(slot);
        Ok(())
    }

    /// One Send per queued connection that has none in flight.
    fn flush(&mut self) -> io::Result<()> {
        while let Some((slot, gen)) = self.queued.pop() {
            let Some(c) = conn(&mut self.conns, slot, gen) else {
                continue;
            };
            c.queued = false;
            if c.send_busy || c.closing {
                continue;
            }
            let Some(rest) = c.replies.next() else {
                continue;
            };
            let len = u32::try_from(rest.len()).unwrap_or(u32::MAX);
            let entry = opcode::Send::new(types::Fd(c.sock.as_raw_fd()), rest.as_ptr(), len)
                .flags(libc::MSG_NOSIGNAL)
                .build()
                .user_data(user_data(SEND, gen, slot as u32));
            // SAFETY: the Send reads `len` bytes of the heap buffer of
            // `c.replies.sending`. With `send_busy` set nothing changes or
            // drops it until the completion: `feed` writes only `out`, `next`
            // is not called, `close` only shuts the socket, the slot is freed
            // only when `send_busy` is clear, and moving the `Conn` (as
            // `conns` grows) does not move the heap bytes.
            unsafe { push(&mut self.ring, &entry)? };
            c.send_busy = true;
        }
        Ok(())
    }

    /// Shuts the connection down; `reap` frees it once nothing is in flight.
    fn close(&mut self, slot: usize) {
        if let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) {
            if !c.closing {
                c.closing = true;
                let _ = c.sock.shutdown(Shutdown::Both);
            }
        }
    }

    fn reap(&mut self, slot: usize) {
        let Some(entry) = self.conns.get_mut(slot) else {
            return;
        };
        if entry
            .as_ref()
            .is_some_and(|c| c.closing && !c.recv_armed && !c.send_busy)
        {
            *entry = None;
            self.free.push(slot);
        }
    }
}

fn conn(conns: &mut [Option<Conn>], slot: usize, gen: u32) -> Option<&mut Conn> {
    conns
        .get_mut(slot)
        .and_then(Option::as_mut)
        .filter(|c| c.gen == gen)
}

fn arm_recv(ring: &mut IoUring, fd: i32, gen: u32, slot: usize) -> io::Result<()> {
    let entry = opcode::RecvMulti::new(types::Fd(fd), BGID)
        .build()
        .user_data(user_data(RECV, gen, slot as u32));
    // SAFETY: the recv writes only into buffers of the registered group,
    // which are leaked, so valid however long the operation lives.
    unsafe { push(ring, &entry) }
}

/// Answers what `data` completes; false if the connection must close
/// (protocol error, or input or output past [`MAX_BUF`]).
fn feed(c: &mut Conn, data: &[u8]) -> bool {
    let out = &mut c.replies.out;
    if c.input.is_empty() {
        let Some(used) = answer(&mut c.parser, data, out) else {
            return false;
        };
        c.input
            .extend_from_slice(data.get(used..).unwrap_or_default());
    } else {
        c.input.extend_from_slice(data);
        let Some(used) = answer(&mut c.parser, &c.input, out) else {
            return false;
        };
        c.input.drain(..used);
    }
    c.input.len() < MAX_BUF && out.len() <= MAX_BUF
}

#[cfg(test)]
mod tests {
    use super::Outbox;

    #[test]
    fn outbox_sends_the_rest_of_a_short_send_first() {
        let mut o = Outbox::default();
        assert_eq!(o.next(), None);
        o.out.extend_from_slice(b"+OK\r\n+PONG\r\n");
        assert_eq!(o.next(), Some(&b"+OK\r\n+PONG\r\n"[..]));
        // Replies gathered while the Send is in flight wait behind its rest.
        o.out.extend_from_slice(b"+OK\r\n");
        assert!(o.took(3));
        assert_eq!(o.next(), Some(&b"\r\n+PONG\r\n"[..]));
        assert!(o.took(9));
        assert_eq!(o.next(), Some(&b"+OK\r\n"[..]));
        assert!(!o.took(5));
        assert_eq!(o.next(), None);
    }
}
