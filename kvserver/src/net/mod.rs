//! The network side: the listening socket of each shard, accepting clients (protected mode,
//! `maxclients`), and serving each connection (`conn`). It calls down into the features,
//! the coordination across shards and the shard; nothing calls back up into it.

pub mod conn;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket};

use crate::log;
use crate::shard::{Handoff, Shard};

pub(crate) const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Binds a listening socket with SO_REUSEPORT, so that every shard accepts on the same port;
/// `backlog` is the queue of connections not yet accepted (`tcp-backlog`).
pub fn listen(bind: &str, port: u16, backlog: u32) -> std::io::Result<TcpListener> {
    let addr = (bind, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("address resolves to nothing"))?;
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// Accepts clients on this shard's listener, and serves the clients other shards hand over,
/// until the server stops.
pub async fn accept(shard: Rc<Shard>, listener: TcpListener) {
    let global = shard.global.clone();
    loop {
        let next = tokio::select! {
            a = listener.accept() => Some(a),
            _ = shard.arrived.notified() => {
                adopt_arrivals(&shard);
                continue;
            }
            _ = shard.stop.notified() => None,
        };
        let stream = match next {
            None => break,
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                log!(3, "accept: {e}");
                crate::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let (stream, peer): (tokio::net::TcpStream, SocketAddr) = stream;
        global.total_connections.fetch_add(1, Ordering::Relaxed);
        let refuse = if global.connected.fetch_add(1, Ordering::Relaxed) >= global.opts.maxclients {
            global.rejected_connections.fetch_add(1, Ordering::Relaxed);
            Some(&b"-ERR max number of clients reached\r\n"[..])
        } else if !is_local(peer.ip()) && protected(&shard) {
            Some(DENIED)
        } else {
            None
        };
        match refuse {
            Some(msg) => {
                global.connected.fetch_sub(1, Ordering::Relaxed);
                tokio::task::spawn_local(async move {
                    let mut s = stream;
                    let _ = s.write_all(msg).await;
                    let _ = s.shutdown().await;
                });
            }
            None => {
                tokio::task::spawn_local(conn::serve(shard.clone(), stream, peer));
            }
        }
    }
    log!(2, "shard {} stopping", shard.id);
}

/// Redis counts only 127.0.0.1 and ::1 as local clients for protected mode.
pub(crate) fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4 == std::net::Ipv4Addr::LOCALHOST,
        IpAddr::V6(v6) => {
            v6 == std::net::Ipv6Addr::LOCALHOST
                || v6.to_ipv4_mapped() == Some(std::net::Ipv4Addr::LOCALHOST)
        }
    }
}

/// Protected mode is on and no password is set.
fn protected(shard: &Shard) -> bool {
    let db = shard.db.borrow();
    db.config.get("protected-mode") == Some("yes") && db.acl.default_open()
}

/// Serves the clients that other shards handed over (see [`conn`]: a client moves to the
/// shard that holds its keys).
fn adopt_arrivals(shard: &Rc<Shard>) {
    loop {
        let Some(h) = shard.arrivals.borrow_mut().pop_front() else {
            return;
        };
        let Handoff {
            stream,
            session,
            entry,
        } = h;
        match tokio::net::TcpStream::from_std(stream) {
            Ok(stream) => {
                tokio::task::spawn_local(conn::serve_conn(shard.clone(), stream, session, entry));
            }
            Err(e) => {
                log!(3, "client {} lost moving shards: {e}", entry.id);
                conn::forget(shard, &entry);
            }
        }
    }
}
