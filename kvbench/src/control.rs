//! The control side: a small blocking client (PING, FLUSHALL, INFO) and the
//! servers `compare` and `calibrate` start, pin, measure and stop.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kvcore::resp::{Proto, ReplyWriter, Value};

use crate::sys;

/// Largest control reply accepted (INFO, CONFIG GET ...).
const MAX_REPLY: usize = 64 << 20;

/// Sends one command on a blocking socket and reads its reply.
pub fn roundtrip(s: &mut TcpStream, args: &[&[u8]]) -> io::Result<Value> {
    let mut req = Vec::new();
    let mut w = ReplyWriter::new(&mut req, Proto::Resp2);
    w.array_len(args.len());
    for a in args {
        w.bulk(a);
    }
    s.write_all(&req)?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some((v, _)) = crate::engine::parse_one(&buf)? {
            return Ok(v);
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        if buf.len() + n > MAX_REPLY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "reply too large",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A blocking control connection.
pub struct Ctl {
    sock: TcpStream,
}

impl Ctl {
    /// Connects (and authenticates when `auth` is given).
    pub fn connect(addr: SocketAddr, auth: Option<&str>) -> io::Result<Ctl> {
        let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        sock.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut ctl = Ctl { sock };
        if let Some(p) = auth {
            ctl.ok(&[b"AUTH", p.as_bytes()])?;
        }
        Ok(ctl)
    }

    /// Sends a command, returns its reply.
    pub fn cmd(&mut self, args: &[&[u8]]) -> io::Result<Value> {
        roundtrip(&mut self.sock, args)
    }

    /// Sends a command; an error reply becomes an `Err`.
    pub fn ok(&mut self, args: &[&[u8]]) -> io::Result<Value> {
        match self.cmd(args)? {
            Value::Error(e) => Err(io::Error::other(String::from_utf8_lossy(&e).into_owned())),
            v => Ok(v),
        }
    }

    /// `INFO section` as name → value.
    pub fn info(&mut self, section: &str) -> io::Result<HashMap<String, String>> {
        let text = match self.ok(&[b"INFO", section.as_bytes()])? {
            Value::Bulk(b) | Value::Verbatim { text: b, .. } => b,
            _ => return Err(io::Error::other("INFO did not answer a bulk string")),
        };
        Ok(String::from_utf8_lossy(&text)
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect())
    }

    /// INFO memory's `used_memory`, in bytes.
    pub fn used_memory(&mut self) -> Option<u64> {
        self.info("memory").ok()?.get("used_memory")?.parse().ok()
    }

    /// The server's process id, when it runs on this machine.
    pub fn local_pid(&mut self) -> Option<u32> {
        let pid: u32 = self.info("server").ok()?.get("process_id")?.parse().ok()?;
        sys::has_proc(pid).then_some(pid)
    }

    /// Whether the server knows `cmd` (an "unknown command" error says it does not).
    pub fn supports(&mut self, args: &[&[u8]]) -> io::Result<bool> {
        Ok(match self.cmd(args)? {
            Value::Error(e) => !e.starts_with(b"ERR unknown command"),
            _ => true,
        })
    }
}

/// A port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A server this program started; stopped (killed) when dropped.
pub struct Server {
    /// Name in reports (`kvserver`, `redis`, or the `--server` name).
    pub name: String,
    /// Its address.
    pub addr: SocketAddr,
    /// Its process id.
    pub pid: u32,
    child: Child,
}

impl Server {
    /// Starts `cmd` (with `{PORT}` replaced by a free port) pinned to `cpus`
    /// through `taskset`, and waits until it answers PING.
    pub fn start(name: &str, cmd: &[String], cpus: &str, logs: &Path) -> Result<Server, String> {
        let port = free_port().map_err(|e| format!("no free port: {e}"))?;
        let args: Vec<String> = cmd
            .iter()
            .map(|a| a.replace("{PORT}", &port.to_string()))
            .collect();
        let log_path: PathBuf = logs.join(format!("{name}.log"));
        let log = File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new("taskset")
            .arg("-c")
            .arg(cpus)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("{name}: cannot run taskset {}: {e}", args.join(" ")))?;
        let mut server = Server {
            name: name.to_string(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            pid: child.id(),
            child,
        };
        let t0 = Instant::now();
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "{name} exited ({status}) before answering: {}",
                    tail(&log_path)
                ));
            }
            let pong = Ctl::connect(server.addr, None)
                .and_then(|mut c| c.cmd(&[b"PING"]))
                .is_ok_and(|v| v == Value::Simple(b"PONG".to_vec()));
            if pong {
                return Ok(server);
            }
            if t0.elapsed() > Duration::from_secs(15) {
                return Err(format!(
                    "{name} did not answer PING on port {port} within 15 s: {}",
                    tail(&log_path)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A control connection to it.
    pub fn ctl(&self) -> io::Result<Ctl> {
        Ctl::connect(self.addr, None)
    }

    /// Its CPU seconds so far.
    pub fn cpu_secs(&self) -> f64 {
        sys::proc_cpu_secs(self.pid).unwrap_or(0.0)
    }

    /// Its resident set size in bytes.
    pub fn rss(&self) -> Option<u64> {
        sys::rss_bytes(self.pid)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last lines of a log file, on one line.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(3);
    let t = lines[from..].join(" | ");
    if t.is_empty() {
        format!("(no output; log {})", path.display())
    } else {
        t
    }
}

/// The command line of a reference redis-server with binary `bin` (`{PORT}` is filled in at
/// start): loopback only, no persistence, so disk work never enters a measurement.
pub fn redis_server_cmd(bin: &Path) -> Vec<String> {
    let args = [
        "--port",
        "{PORT}",
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--dir",
        "/tmp",
        "--appendonly",
        "no",
    ];
    std::iter::once(bin.to_string_lossy().into_owned())
        .chain(args.iter().map(|a| a.to_string()))
        .collect()
}

/// Finds `name` in the directories of `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).exists().then(|| PathBuf::from(name));
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

/// The arguments of an encoded command (a RESP array of bulk strings).
pub fn args_of(encoded: &[u8]) -> Vec<Vec<u8>> {
    match kvcore::resp::parse_reply(encoded) {
        Ok(Some((Value::Array(items), _))) => items
            .into_iter()
            .filter_map(|v| match v {
                Value::Bulk(b) => Some(b),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}
