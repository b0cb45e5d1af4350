//! Every null-server variant, each started in a thread on a free port, gets
//! the same bytes and must give the same exact replies.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Which server a test starts.
#[derive(Clone, Copy, Debug)]
enum Io {
    Epoll,
    Uring,
    /// io_uring with two provided buffers, so recvs run out of them (ENOBUFS).
    UringTwoBuffers,
    /// epoll with commands run on an embedded `Db` (`--execute`).
    EpollExecute,
    /// A tokio task per connection (`--io tokio`), with `--execute` or not.
    Tokio(bool),
    /// The epoll loop in a tokio task (`--io nested`), with `--execute` or not.
    Nested(bool),
}

/// Starts a null server; panics (fails the test) if it cannot start, so a
/// machine without io_uring fails the uring tests instead of skipping them.
fn start(io: Io) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local_addr");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let nbuf = match io {
            Io::Epoll => {
                let _ = tx.send(Ok(()));
                let _ = crate::null_server::serve(listener, false);
                return;
            }
            Io::EpollExecute => {
                let _ = tx.send(Ok(()));
                let _ = crate::null_server::serve(listener, true);
                return;
            }
            Io::Tokio(execute) => {
                let _ = tx.send(Ok(()));
                let _ = crate::null_server::serve_tokio(listener, execute);
                return;
            }
            Io::Nested(execute) => {
                let _ = tx.send(Ok(()));
                let _ = crate::null_server::serve_nested(listener, execute);
                return;
            }
            Io::Uring => 512,
            Io::UringTwoBuffers => 2,
        };
        // The ring must be set up on the thread that submits (SINGLE_ISSUER).
        match crate::null_uring::Server::with_buffers(listener, nbuf) {
            Ok(server) => {
                let _ = tx.send(Ok(()));
                let _ = server.run();
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
    });
    if let Err(e) = rx.recv().expect("server thread") {
        panic!("{io:?} null server did not start: {e}");
    }
    addr
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s
}

/// Reads exactly `want`, then checks nothing more arrives.
fn expect_exactly(s: &mut TcpStream, want: &[u8]) {
    let mut got = vec![0; want.len()];
    s.read_exact(&mut got).expect("read replies");
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let mut extra = [0; 64];
    match s.read(&mut extra) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("unexpected bytes or close after the replies: {other:?}"),
    }
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
}

fn pipelined_and_split(io: Io) {
    let mut s = connect(start(io));
    s.write_all(
        b"PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nping\r\n",
    )
    .expect("write");
    expect_exactly(&mut s, b"+PONG\r\n+OK\r\n+OK\r\n+PONG\r\n");
    for part in [
        &b"*3\r\n$3\r\nS"[..],
        b"ET\r\n$1\r\nk",
        b"\r\n$5\r\nhel",
        b"lo\r\n*1\r\n$4\r\nPI",
    ] {
        s.write_all(part).expect("write part");
        thread::sleep(Duration::from_millis(20));
    }
    // The SET is whole; the PING is not yet.
    expect_exactly(&mut s, b"+OK\r\n");
    s.write_all(b"NG\r\n").expect("write");
    expect_exactly(&mut s, b"+PONG\r\n");
}

/// `--execute` gives kvcore's replies, state kept across connections, split commands waited for;
/// GET and SET (the express lane) between other commands.
fn execute_runs_commands_on_one_db(io: Io) {
    let addr = start(io);
    let mut s = connect(addr);
    s.write_all(b"*6\r\n$4\r\nZADD\r\n$1\r\nz\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n*3\r\n$5\r\nZRANK\r\n$1\r\nz\r\n$1\r\nb\r\nGET z\r\n")
        .expect("write");
    expect_exactly(
        &mut s,
        b":2\r\n:1\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*2\r\n$3\r\nget\r\n$1\r\nn\r\n*2\r\n$3\r\nGET\r\n$1\r\nz\r\n*2\r\n$3\r\nGET\r\n$4\r\nnone\r\n")
        .expect("write");
    expect_exactly(
        &mut s,
        b"+OK\r\n$2\r\nv1\r\n:1\r\n$1\r\n1\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n$-1\r\n",
    );
    let mut t = connect(addr);
    t.write_all(b"*3\r\n$6\r\nZSCORE\r\n$1\r\nz")
        .expect("write");
    thread::sleep(Duration::from_millis(20));
    t.write_all(b"\r\n$1\r\na\r\n").expect("write");
    expect_exactly(&mut t, b"$1\r\n1\r\n");
}

#[test]
fn epoll_execute_runs_commands_on_one_db() {
    execute_runs_commands_on_one_db(Io::EpollExecute);
}

#[test]
fn tokio_execute_runs_commands_on_one_db() {
    execute_runs_commands_on_one_db(Io::Tokio(true));
}

#[test]
fn nested_execute_runs_commands_on_one_db() {
    execute_runs_commands_on_one_db(Io::Nested(true));
}

#[test]
fn epoll_replies_to_pipelined_and_split_commands() {
    pipelined_and_split(Io::Epoll);
}

#[test]
fn tokio_replies_to_pipelined_and_split_commands() {
    pipelined_and_split(Io::Tokio(false));
}

#[test]
fn nested_replies_to_pipelined_and_split_commands() {
    pipelined_and_split(Io::Nested(false));
}

#[test]
fn uring_replies_to_pipelined_and_split_commands() {
    pipelined_and_split(Io::Uring);
}

/// `n` pipelined commands, written while the replies are read: with
/// `n = 300_000`, more input than the provided-buffer ring holds.
fn large_pipeline(addr: SocketAddr, n: usize) {
    let s = connect(addr);
    let mut w = s.try_clone().expect("clone");
    let writer = thread::spawn(move || {
        let mut batch = Vec::new();
        for i in 0..n {
            if i % 3 == 0 {
                batch.extend_from_slice(b"PING\r\n");
            } else {
                batch.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
            }
            if batch.len() > 60_000 {
                w.write_all(&batch).expect("write");
                batch.clear();
            }
        }
        w.write_all(&batch).expect("write");
    });
    let want: Vec<u8> = (0..n)
        .flat_map(|i| {
            if i % 3 == 0 {
                &b"+PONG\r\n"[..]
            } else {
                b"+OK\r\n"
            }
        })
        .copied()
        .collect();
    let mut s = s;
    expect_exactly(&mut s, &want);
    writer.join().expect("writer");
}

#[test]
fn epoll_answers_a_large_pipeline_in_order() {
    large_pipeline(start(Io::Epoll), 300_000);
}

#[test]
fn tokio_answers_a_large_pipeline_in_order() {
    large_pipeline(start(Io::Tokio(false)), 300_000);
}

#[test]
fn nested_answers_a_large_pipeline_in_order() {
    large_pipeline(start(Io::Nested(false)), 300_000);
}

#[test]
fn uring_answers_a_large_pipeline_in_order() {
    large_pipeline(start(Io::Uring), 300_000);
}

/// Four connections share two buffers: recvs end with ENOBUFS and must be
/// re-armed, or a connection stalls and its reads time out.
#[test]
fn uring_with_two_buffers_serves_concurrent_pipelines() {
    let addr = start(Io::UringTwoBuffers);
    let clients: Vec<_> = (0..4)
        .map(|_| thread::spawn(move || large_pipeline(addr, 50_000)))
        .collect();
    for c in clients {
        c.join().expect("client");
    }
}

/// A multibulk command of `args` arguments of 1,000,000 bytes each.
fn big_set(args: usize) -> Vec<u8> {
    let mut cmd = format!("*{args}\r\n").into_bytes();
    for _ in 0..args {
        cmd.extend_from_slice(b"$1000000\r\n");
        cmd.extend(std::iter::repeat_n(b'x', 1_000_000));
        cmd.extend_from_slice(b"\r\n");
    }
    cmd
}

/// A 3 MB command is answered; a 5 MB one is cut off past 4 MiB of input
/// (if it were not, the whole command would get `+OK`).
fn input_bound(io: Io) {
    let addr = start(io);
    let mut s = connect(addr);
    s.write_all(&big_set(3)).expect("write 3 MB");
    expect_exactly(&mut s, b"+OK\r\n");

    let mut s = connect(addr);
    for chunk in big_set(5).chunks(64 << 10) {
        if s.write_all(chunk).is_err() {
            break;
        }
    }
    let mut buf = [0; 16];
    match s.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("connection past 4 MiB of input not closed: {other:?}"),
    }
}

#[test]
fn epoll_closes_a_connection_past_4_mib_of_input() {
    input_bound(Io::Epoll);
}

#[test]
fn uring_closes_a_connection_past_4_mib_of_input() {
    input_bound(Io::Uring);
}

#[test]
fn tokio_closes_a_connection_past_4_mib_of_input() {
    input_bound(Io::Tokio(false));
}

#[test]
fn nested_closes_a_connection_past_4_mib_of_input() {
    input_bound(Io::Nested(false));
}
