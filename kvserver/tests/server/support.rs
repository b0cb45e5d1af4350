//! Starting a server and talking raw RESP to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running kvserver, killed on drop.
pub struct Server {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    /// What it wrote to stderr (panics included), but its ready line.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Its working directory, private to it (where its RDB file goes unless `--dir` says
    /// otherwise), removed on drop.
    pub cwd: std::path::PathBuf,
}

impl Server {
    /// Starts kvserver with `--port 0` and extra arguments; waits until it is ready.
    pub fn start(args: &[&str]) -> Server {
        Server::start_from(None, args)
    }

    /// Like [`Server::start`], with a configuration file first on the command line.
    pub fn start_from(config_file: Option<&str>, args: &[&str]) -> Server {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cwd = std::env::temp_dir().join(format!("kvtest-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cwd);
        std::fs::create_dir_all(&cwd).expect("a working directory for the server");
        let mut child = Command::new(env!("CARGO_BIN_EXE_kvserver"))
            .current_dir(&cwd)
            .args(config_file)
            .args(["--port", "0"])
            .args(args)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("kvserver starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut lines = BufReader::new(stderr).lines();
        let mut before = Vec::new();
        let port = loop {
            let line = lines
                .next()
                .expect("kvserver printed a ready line")
                .expect("utf-8 log");
            if let Some(rest) = line.split("Ready to accept connections tcp on ").nth(1) {
                break rest.rsplit(':').next().unwrap().trim().parse().unwrap();
            }
            before.push(line);
        };
        // Keep draining stderr so the server never blocks on a full pipe; keep the lines.
        let log = std::sync::Arc::new(std::sync::Mutex::new(before));
        let keep = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                keep.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            port,
            log,
            cwd,
        }
    }

    /// A `redis` crate connection.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// A raw socket.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// Stops the server as a service manager does (SIGTERM) and waits for it to exit: a clean
    /// stop, which syncs what it must.
    pub fn terminate(mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        assert!(
            self.exit_status(10).is_some(),
            "the server stops on SIGTERM"
        );
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// The stderr lines so far that contain `text`.
    pub fn log_lines_with(&self, text: &str) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log.iter().filter(|l| l.contains(text)).cloned().collect()
    }

    /// Waits up to `secs` for the process to exit; its exit status if it did.
    pub fn exit_status(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's resident set size in KiB.
    pub fn rss_kib(&self) -> u64 {
        rss_kib_of(&self.pid().to_string())
    }
}

/// The first word of line `field` of `/proc/<pid>/status` (`pid` may be `self`), if the
/// kernel reports it.
pub fn proc_status(pid: &str, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .map(str::to_string)
}

/// The resident set size of process `pid` in KiB.
pub fn rss_kib_of(pid: &str) -> u64 {
    proc_status(pid, "VmRSS")
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.cwd);
    }
}

/// Encodes a command as a RESP multibulk.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Encodes a space-separated command line.
pub fn cmd(line: &str) -> Vec<u8> {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    encode(&args)
}

/// Reads until `n` complete replies have arrived; returns the raw bytes of each.
pub fn read_replies(s: &mut TcpStream, n: usize) -> Vec<Vec<u8>> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(30);
    while out.len() < n {
        let mut off = 0;
        out.clear();
        while out.len() < n {
            match kvcore::resp::reply::parse_reply(&buf[off..]).expect("valid reply") {
                Some((_, used)) => {
                    out.push(buf[off..off + used].to_vec());
                    off += used;
                }
                None => break,
            }
        }
        if out.len() == n {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "timed out with {} of {n} replies",
            out.len()
        );
        let got = s.read(&mut chunk).expect("read");
        assert!(got > 0, "server closed after {} of {n} replies", out.len());
        buf.extend_from_slice(&chunk[..got]);
    }
    out
}

/// Sends one command and returns its raw reply as text.
pub fn call(s: &mut TcpStream, line: &str) -> String {
    s.write_all(&cmd(line)).unwrap();
    String::from_utf8_lossy(&read_replies(s, 1)[0]).into_owned()
}

/// Whether the peer closed the connection (EOF) within the read timeout.
pub fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// The shard kvserver routes `key` to among `n` (Redis Cluster slot, contiguous ranges).
pub fn shard_of(key: &str, n: usize) -> usize {
    const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    usize::from(CRC16.checksum(key.as_bytes()) & 0x3fff) * n / 16384
}

/// The `i`-th key of the form `<prefix><j>` that lives on `shard` of `n` shards.
pub fn key_on(prefix: &str, shard: usize, n: usize, i: usize) -> String {
    (0..)
        .map(|j| format!("{prefix}{j}"))
        .filter(|k| shard_of(k, n) == shard)
        .nth(i)
        .unwrap()
}
