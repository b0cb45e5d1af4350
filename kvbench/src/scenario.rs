//! Scenarios that a one-command load cannot express: pub/sub fan-out (subscribers that only
//! read, publishers that pipeline PUBLISH) and transactions (MULTI, some commands, EXEC as one
//! unit). Each reports its rate and, given the server's pid, the server's CPU time per unit
//! (utime + stime of all its threads over the run, from /proc).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use clap::Args;

use crate::sys;

/// Options of `kvbench fanout`.
#[derive(Args, Debug)]
pub struct FanoutArgs {
    /// Server port.
    #[arg(short = 'p', long, default_value_t = 6379)]
    port: u16,
    /// Subscribers of the channel.
    #[arg(long, default_value_t = 100)]
    subscribers: usize,
    /// Publishing connections.
    #[arg(long, default_value_t = 2)]
    publishers: usize,
    /// PUBLISH commands per pipeline batch.
    #[arg(short = 'P', long, default_value_t = 16)]
    pipeline: usize,
    /// Messages each publisher sends.
    #[arg(short = 'n', long, default_value_t = 20_000)]
    messages: usize,
    /// Message size in bytes.
    #[arg(short = 'd', long, default_value_t = 16)]
    data_size: usize,
    /// The server's pid, for its CPU time per delivered message.
    #[arg(long)]
    server_pid: Option<u32>,
    /// CPU to pin this process's threads to.
    #[arg(long)]
    cpu: Option<usize>,
}

/// Options of `kvbench tx`.
#[derive(Args, Debug)]
pub struct TxArgs {
    /// Server port.
    #[arg(short = 'p', long, default_value_t = 6379)]
    port: u16,
    /// Connections.
    #[arg(short = 'c', long, default_value_t = 50)]
    clients: usize,
    /// Transactions per pipeline batch.
    #[arg(short = 'P', long, default_value_t = 1)]
    pipeline: usize,
    /// Transactions per connection.
    #[arg(short = 'n', long, default_value_t = 20_000)]
    transactions: usize,
    /// The keys each transaction SETs (one SET each), e.g. `{a}1,{a}2,{a}3,{a}4`; `%c` stands
    /// for the connection's number (keys of its own, so transactions do not contend).
    #[arg(long, default_value = "{t}1,{t}2,{t}3,{t}4")]
    keys: String,
    /// The server's pid, for its CPU time per transaction.
    #[arg(long)]
    server_pid: Option<u32>,
    /// CPU to pin this process's threads to.
    #[arg(long)]
    cpu: Option<usize>,
}

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn connect(port: u16) -> Result<TcpStream, String> {
    let s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// Reads until `lines` more CRLF-terminated lines arrived (each reply here is one line or a
/// fixed shape the caller counts in lines).
fn read_lines(s: &mut TcpStream, buf: &mut [u8], mut lines: usize) -> Result<(), String> {
    let mut last = 0u8;
    while lines > 0 {
        let n = s.read(buf).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("server closed the connection".into());
        }
        for &b in &buf[..n] {
            if last == b'\r' && b == b'\n' {
                lines -= 1;
            }
            last = b;
        }
    }
    Ok(())
}

fn cpu_of(pid: Option<u32>) -> Option<f64> {
    pid.and_then(sys::proc_cpu_secs)
}

/// `kvbench fanout`: every subscriber must receive every message.
pub fn fanout(a: FanoutArgs) -> Result<i32, String> {
    if let Some(cpu) = a.cpu {
        sys::pin_thread(cpu);
    }
    let channel = b"fanout-bench";
    let payload = vec![b'x'; a.data_size];
    // `*3 $7 message $len channel $len payload`: fixed size for one channel and payload.
    let msg_len = encode(&[b"message", channel, &payload]).len();
    let total = a.publishers * a.messages;
    let received = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(Barrier::new(a.subscribers + 1));
    let failed = Arc::new(AtomicBool::new(false));
    let mut subs = Vec::new();
    for _ in 0..a.subscribers {
        let mut s = connect(a.port)?;
        let (received, ready, failed, cpu) =
            (received.clone(), ready.clone(), failed.clone(), a.cpu);
        subs.push(std::thread::spawn(move || {
            if let Some(cpu) = cpu {
                sys::pin_thread(cpu);
            }
            let mut buf = vec![0u8; 256 * 1024];
            let sub = encode(&[b"SUBSCRIBE", channel]);
            let ok = s.write_all(&sub).is_ok() && read_lines(&mut s, &mut buf, 6).is_ok();
            ready.wait();
            if !ok {
                failed.store(true, Ordering::Relaxed);
                return;
            }
            let want = (msg_len * total) as u64;
            let mut got = 0u64;
            while got < want {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        failed.store(true, Ordering::Relaxed);
                        return;
                    }
                    Ok(n) => got += n as u64,
                }
            }
            received.fetch_add(total as u64, Ordering::Relaxed);
        }));
    }
    ready.wait();
    if failed.load(Ordering::Relaxed) {
        return Err("a subscriber failed to subscribe".into());
    }
    let cpu0 = cpu_of(a.server_pid);
    let start = Instant::now();
    let mut pubs = Vec::new();
    for _ in 0..a.publishers {
        let mut s = connect(a.port)?;
        let (n, p, payload, cpu) = (a.messages, a.pipeline.max(1), payload.clone(), a.cpu);
        pubs.push(std::thread::spawn(move || -> Result<(), String> {
            if let Some(cpu) = cpu {
                sys::pin_thread(cpu);
            }
            let one = encode(&[b"PUBLISH", channel, &payload]);
            let mut buf = vec![0u8; 64 * 1024];
            let mut sent = 0;
            while sent < n {
                let k = p.min(n - sent);
                let batch: Vec<u8> = one.repeat(k);
                s.write_all(&batch).map_err(|e| e.to_string())?;
                read_lines(&mut s, &mut buf, k)?;
                sent += k;
            }
            Ok(())
        }));
    }
    for p in pubs {
        p.join().map_err(|_| "a publisher panicked")??;
    }
    let published = start.elapsed();
    for s in subs {
        let _ = s.join();
    }
    let elapsed = start.elapsed();
    let cpu1 = cpu_of(a.server_pid);
    if failed.load(Ordering::Relaxed) {
        return Err("a subscriber lost its connection".into());
    }
    let delivered = received.load(Ordering::Relaxed) as f64;
    println!(
        "fanout: {} subscribers, {} publishers x {} messages (pipeline {}), {} bytes",
        a.subscribers, a.publishers, a.messages, a.pipeline, a.data_size
    );
    println!(
        "published/s={:.0} delivered/s={:.0} elapsed_s={:.3}",
        total as f64 / published.as_secs_f64(),
        delivered / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        println!(
            "server_cpu_ns_per_delivered={:.1}",
            (c1 - c0) * 1e9 / delivered
        );
    }
    Ok(0)
}

/// `kvbench tx`: MULTI, one SET per key, EXEC, pipelined.
pub fn tx(a: TxArgs) -> Result<i32, String> {
    let keys: Vec<String> = a.keys.split(',').map(str::to_string).collect();
    let tx_of = |client: usize| {
        let mut one = encode(&[b"MULTI"]);
        for k in &keys {
            let k = k.replace("%c", &client.to_string());
            one.extend_from_slice(&encode(&[b"SET", k.as_bytes(), b"value"]));
        }
        one.extend_from_slice(&encode(&[b"EXEC"]));
        one
    };
    // Lines of the replies: +OK, +QUEUED per key, then `*n` and one +OK per key.
    let lines = 1 + keys.len() + 1 + keys.len();
    let cpu0 = cpu_of(a.server_pid);
    let start = Instant::now();
    let mut threads = Vec::new();
    for client in 0..a.clients {
        let mut s = connect(a.port)?;
        let (n, p, one, cpu) = (a.transactions, a.pipeline.max(1), tx_of(client), a.cpu);
        threads.push(std::thread::spawn(move || -> Result<(), String> {
            if let Some(cpu) = cpu {
                sys::pin_thread(cpu);
            }
            s.set_read_timeout(Some(Duration::from_secs(30)))
                .map_err(|e| e.to_string())?;
            let mut buf = vec![0u8; 64 * 1024];
            let mut done = 0;
            while done < n {
                let k = p.min(n - done);
                s.write_all(&one.repeat(k)).map_err(|e| e.to_string())?;
                read_lines(&mut s, &mut buf, k * lines)?;
                done += k;
            }
            Ok(())
        }));
    }
    for t in threads {
        t.join().map_err(|_| "a client panicked")??;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu1 = cpu_of(a.server_pid);
    let total = (a.clients * a.transactions) as f64;
    println!(
        "tx: {} clients x {} transactions of {} SETs (pipeline {})",
        a.clients,
        a.transactions,
        keys.len(),
        a.pipeline
    );
    println!("tx/s={:.0} elapsed_s={elapsed:.3}", total / elapsed);
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        println!("server_cpu_ns_per_tx={:.1}", (c1 - c0) * 1e9 / total);
    }
    Ok(0)
}
