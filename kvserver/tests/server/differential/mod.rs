//! Differential testing: the same seeded random command sequences against kvserver and a real
//! `redis-server`, replies compared byte for byte.
//!
//! Commands come from [`FAMILIES`], one table per command family (add a family's table there
//! when it lands). Each row makes one command with arguments drawn from a small keyspace and
//! from lists of boundary and malformed values; the driver mixes in wrong arities, unknown
//! commands and random letter case. Replies whose order Redis leaves unspecified (KEYS, SCAN)
//! are sorted before comparing; commands with random or host-specific replies (RANDOMKEY,
//! INFO, TIME, CLIENT ID ...) are not generated; TTL-like replies may differ by the clock tick
//! that passes between the two servers.
//!
//! On a mismatch the driver shrinks the sequence (drops chunks of commands while a mismatch
//! remains, on fresh connections and flushed servers) and panics with the seed and the
//! minimal sequence.
//!
//! The suite runs a short fixed set of seeds. A long run:
//! `KV_DIFF_SECONDS=600 cargo test -p kvserver --test server differential -- --nocapture`
//! (optionally `KV_DIFF_SEED=N` to start from seed N; with `KV_DIFF_SEED` alone, only that
//! seed runs; `KV_DIFF_COMMANDS` sets the sequence length; `KV_DIFF_TRACE=1` prints every
//! batch sent). `REDIS_SERVER=/path/to/redis-server` compares with that build instead of
//! Debian's (7.0, what CI has); the spec is Redis 7.4.

mod acl;
mod bitmaps;
mod docs;
mod dump;
mod families;
mod functions;
mod hashes;
mod hyperloglog;
mod introspection;
mod lists;
mod monitor;
mod pubsub;
mod scripting;
mod sets;
mod sort;
mod streams;
mod transactions;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kvcore::resp::reply::{parse_reply, Value};

use crate::support::{encode, Server};
/// The seeded generator of the differential run (the command fuzzer uses it too).
pub(crate) use families::Rng;
use families::{generate, word, Cmd, FAMILIES};

// ---------------------------------------------------------------------------------------------
// Servers and comparison
// ---------------------------------------------------------------------------------------------

/// A real redis-server on a free port, killed on drop.
pub(crate) struct Redis {
    child: Child,
    pub(crate) port: u16,
    /// Its major and minor version (7.0 is Debian's, the one CI has; 7.4 is the spec).
    version: (u32, u32),
}

/// The redis-server binary the differential tests compare with: `REDIS_SERVER` when set
/// (e.g. a build of Redis 7.4, the spec), else Debian's.
fn redis_binary() -> String {
    if let Some(bin) = std::env::var_os("REDIS_SERVER") {
        return bin.to_string_lossy().into_owned();
    }
    ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("redis-server is installed (scripts/test installs it)")
        .to_string()
}

/// The major and minor version `redis-server --version` prints (`Redis server v=7.0.15 ...`).
fn redis_version(bin: &str) -> (u32, u32) {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .expect("redis-server --version runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or_else(|| panic!("a version in {text:?}"));
    let mut parts = v.split('.').map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

impl Redis {
    pub(crate) fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// A redis-server with these extra arguments.
    fn start_with(extra: &[&str]) -> Redis {
        let bin = redis_binary();
        let version = redis_version(&bin);
        // Pick a free port; retry if another process takes it first.
        for _ in 0..10 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new(&bin)
                .args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(extra)
                .arg("--dir")
                .arg(std::env::temp_dir())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server starts");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Redis {
                        child,
                        port,
                        version,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A connection that sends one command and reads one raw reply.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends `cmds` as one pipeline and returns their raw replies.
    fn pipeline(&mut self, cmds: &[Cmd]) -> Vec<Vec<u8>> {
        self.send(cmds);
        self.receive(cmds)
    }

    fn send(&mut self, cmds: &[Cmd]) {
        let mut bytes = Vec::new();
        for args in cmds {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            bytes.extend_from_slice(&encode(&refs));
        }
        self.stream.write_all(&bytes).unwrap();
    }

    /// The replies to `cmds`, sent before.
    fn receive(&mut self, cmds: &[Cmd]) -> Vec<Vec<u8>> {
        let mut chunk = [0u8; 65536];
        let mut replies = Vec::with_capacity(cmds.len());
        while replies.len() < cmds.len() {
            if let Some((_, used)) = parse_reply(&self.buf).expect("a valid reply") {
                replies.push(self.buf.drain(..used).collect());
                continue;
            }
            let n = self.stream.read(&mut chunk).unwrap_or_else(|e| {
                panic!(
                    "no reply in time ({e}) to {} (port {}), {} of {} replies, pending {:?}",
                    show(&cmds[replies.len()]),
                    self.stream.peer_addr().map_or(0, |a| a.port()),
                    replies.len(),
                    cmds.len(),
                    String::from_utf8_lossy(&self.buf)
                )
            });
            assert!(
                n > 0,
                "connection closed after {}",
                show(&cmds[replies.len()])
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
        replies
    }
}

/// The pair of servers under comparison, and what the run draws commands from.
struct Pair {
    ours: Server,
    redis: Redis,
    /// The docs mode's table, or `None` for the family tables.
    docs: Option<docs::Table>,
}

impl Pair {
    /// The sequence of `seed`, from the family tables or the docs mode's table; against
    /// Redis 7.0, without the commands whose effect 7.2 changed (see
    /// [`docs::changed_in_7_2`]).
    fn sequence(&self, seed: u64, len: usize) -> Vec<Cmd> {
        let mut cmds = match &self.docs {
            Some(t) => t.sequence(seed, len),
            None => sequence(seed, len),
        };
        if self.redis.version < (7, 2) {
            cmds.retain(|c| !docs::changed_in_7_2(c));
        } else {
            cmds.retain(|c| !docs::redis_7_2_bug(c));
        }
        cmds
    }

    /// A reply as compared: the driver's normalisation, then the docs mode's.
    fn normalize(&self, cmd: &[Vec<u8>], reply: Vec<u8>) -> Vec<u8> {
        let reply = normalize(cmd, reply);
        match &self.docs {
            Some(t) => t.normalize(cmd, reply),
            None => reply,
        }
    }
}

/// A command as a readable line.
fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An EXEC reply with each element normalized as the reply of the command queued for it (the
/// pair's normalisation: the driver's, then the docs mode's).
fn normalize_exec(pair: &Pair, queued: &[Cmd], reply: Vec<u8>) -> Vec<u8> {
    let header_end = match reply.iter().position(|&b| b == b'\n') {
        Some(i) if reply.starts_with(b"*") && !reply.starts_with(b"*-1") => i + 1,
        _ => return reply,
    };
    let mut out = reply[..header_end].to_vec();
    let mut at = header_end;
    for cmd in queued {
        let Ok(Some((_, used))) = parse_reply(&reply[at..]) else {
            return reply;
        };
        let one = reply[at..at + used].to_vec();
        let name = cmd[0].to_ascii_uppercase();
        // Inside EXEC a relative deadline cannot get the clock slack that `same` gives: a
        // non-negative TTL is compared as present, not by value.
        let timed = CLOCK_SENSITIVE.contains(&name.as_slice())
            && one.starts_with(b":")
            && !one.starts_with(b":-");
        // Nor can OBJECT ENCODING get the 7.0-versus-7.2 allowance of `same`.
        let encoding = name == b"OBJECT"
            && [
                &b"$8\r\nlistpack\r\n"[..],
                b"$9\r\nhashtable\r\n",
                b"$9\r\nquicklist\r\n",
            ]
            .contains(&one.as_slice());
        // Nor the 7.0-versus-7.2 BITCOUNT/BITPOS argument checks (see `same`).
        let bits_checked = (name == b"BITCOUNT" || name == b"BITPOS")
            && (one.starts_with(b"-")
                || one.as_slice() == b":0\r\n"
                || one.as_slice() == b":-1\r\n");
        out.extend_from_slice(&if bits_checked {
            b"+zero, -1 or an error\r\n".to_vec()
        } else if encoding {
            b"$1\r\nE\r\n".to_vec()
        } else if timed {
            b":T\r\n".to_vec()
        } else {
            pair.normalize(cmd, one)
        });
        at += used;
    }
    out.extend_from_slice(&reply[at..]);
    out
}

/// Sorts what Redis leaves unordered: the array of KEYS, the key list of SCAN.
fn normalize(cmd: &[Vec<u8>], reply: Vec<u8>) -> Vec<u8> {
    // 7.4's help replies end in "Print this help." (7.0: "Prints this help."); 7.4's FUNCTION
    // HELP no longer lists a library description under LIST.
    if cmd.len() == 2 && cmd[1].eq_ignore_ascii_case(b"HELP") {
        let text = String::from_utf8_lossy(&reply)
            .replace("+    Prints this help.\r\n", "+    Print this help.\r\n");
        if cmd[0].eq_ignore_ascii_case(b"FUNCTION") && text.starts_with("*40\r\n") {
            return text
                .replacen("*40\r\n", "*39\r\n", 1)
                .replace("+    * Library description\r\n", "")
                .into_bytes();
        }
        return text.into_bytes();
    }
    let name = cmd[0].to_ascii_uppercase();
    let sort = |v: &mut Vec<Value>| {
        v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    };
    let Ok(Some((mut value, _))) = parse_reply(&reply) else {
        return reply;
    };
    // A page of SSCAN/HSCAN/ZSCAN that is not the last one holds whatever the hash-table order
    // put first, which differs between any two servers: only "a partial page" is compared.
    if matches!(&name[..], b"SSCAN" | b"HSCAN" | b"ZSCAN") {
        if let Value::Array(parts) = &value {
            if matches!(parts.first(), Some(Value::Bulk(c)) if c.as_slice() != b"0") {
                return b"+partial page\r\n".to_vec();
            }
        }
    }
    match (&name[..], &mut value) {
        // Members of sets come in hash-table order, which differs between any two servers.
        (
            b"KEYS" | b"SMEMBERS" | b"SINTER" | b"SUNION" | b"SDIFF" | b"SPOP" | b"SRANDMEMBER"
            | b"HKEYS" | b"HVALS",
            Value::Array(items),
        ) => sort(items),
        (b"HRANDFIELD", Value::Array(items)) if cmd.len() == 3 => sort(items),
        // Field-value pairs of a hash table come in its bucket order.
        (b"HGETALL" | b"HRANDFIELD", Value::Array(items)) if items.len() % 2 == 0 => {
            let mut pairs: Vec<Vec<Value>> = items.chunks(2).map(<[Value]>::to_vec).collect();
            pairs.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            *items = pairs.concat();
        }
        (b"SSCAN", Value::Array(parts)) => match parts.get_mut(1) {
            Some(Value::Array(items)) => sort(items),
            _ => return reply,
        },
        // Pairs (member and score, field and value) of a big collection come in hash-table
        // order: compared as sorted pairs.
        (b"ZSCAN" | b"HSCAN", Value::Array(parts)) => match parts.get_mut(1) {
            Some(Value::Array(items)) if items.len() % 2 == 0 => {
                let mut pairs: Vec<Vec<Value>> = items.chunks(2).map(<[Value]>::to_vec).collect();
                pairs.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
                *items = pairs.concat();
            }
            _ => return reply,
        },
        (b"SCAN", Value::Array(parts)) => match parts.get_mut(1) {
            Some(Value::Array(items)) => sort(items),
            _ => return reply,
        },
        _ => return reply,
    }
    let mut out = Vec::new();
    value.encode(&mut out);
    out
}

/// Whether two replies agree. Relative deadlines are computed from each server's own clock,
/// so TTL-like replies may differ by the time that can pass between the two servers running
/// the same command, once when the deadline was set and once when it is read: each at most
/// `skew_ms`, the longest batch round trip so far.
fn same(cmd: &[Vec<u8>], ours: &[u8], theirs: &[u8], skew_ms: u64) -> bool {
    if ours == theirs {
        return true;
    }
    let name = cmd[0].to_ascii_uppercase();
    // Redis 7.2 checks BITCOUNT's and BITPOS's arguments before it looks up the key (#11734):
    // 7.0 answers 0 (or -1) for a missing key, WRONGTYPE for another type, whatever the
    // arguments; we follow 7.2.
    if (name == b"BITCOUNT" || name == b"BITPOS")
        && ours.starts_with(b"-ERR ")
        && (theirs == b":0\r\n" || theirs == b":-1\r\n" || theirs.starts_with(b"-WRONGTYPE"))
    {
        return true;
    }
    // Redis 7.2 keeps small lists in one listpack (7.0, the one at hand, says quicklist for
    // every list) and small sets of strings in a listpack (7.0: hashtable). Our thresholds are
    // tested against 7.2's rules in kvcore's list, set and hash tests.
    if name == b"OBJECT"
        && ours == b"$8\r\nlistpack\r\n"
        && (theirs == b"$9\r\nquicklist\r\n" || theirs == b"$9\r\nhashtable\r\n")
    {
        return true;
    }
    let slack = match &name[..] {
        b"TTL" | b"EXPIRETIME" => 2 * skew_ms / 1000 + 1,
        b"PTTL" | b"PEXPIRETIME" => 2 * skew_ms + 1,
        _ => return false,
    };
    let int = |r: &[u8]| match parse_reply(r) {
        Ok(Some((Value::Int(i), _))) => Some(i),
        _ => None,
    };
    match (int(ours), int(theirs)) {
        (Some(a), Some(b)) => a >= 0 && b >= 0 && a.abs_diff(b) <= slack,
        _ => false,
    }
}

/// Whether Redis's reply is SORT's score error while ours is not an error: the stale-errno
/// case (see `first_mismatch`).
fn stale_errno(cmd: &[Vec<u8>], ours: &[u8], theirs: &[u8]) -> bool {
    let name = cmd[0].to_ascii_uppercase();
    (name == b"SORT" || name == b"SORT_RO")
        && theirs == b"-ERR One or more scores can't be converted into double\r\n"
        && !ours.starts_with(b"-")
}

/// Runs `cmds` on both servers from a clean state; the index of the first differing reply,
/// with both replies.
fn first_mismatch(pair: &Pair, cmds: &[Cmd]) -> Option<(usize, Vec<u8>, Vec<u8>)> {
    let mut ours = Conn::open(pair.ours.port);
    let mut theirs = Conn::open(pair.redis.port);
    for c in [&mut ours, &mut theirs] {
        assert_eq!(c.pipeline(&[vec![word("FLUSHALL")]]), [b"+OK\r\n"]);
        // The hyperloglog family changes this; each sequence starts from the default.
        let reset = ["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]
            .map(word)
            .to_vec();
        assert_eq!(c.pipeline(&[reset]), [b"+OK\r\n"]);
    }
    // Pipelines of a bounded size: neither side's buffers fill while the other waits.
    let mut skew_ms = 0;
    let mut queue: Option<Vec<Cmd>> = None;
    for (b, batch) in cmds.chunks(64).enumerate() {
        // Both servers get the batch before either is read: their clocks stay close.
        let sent = Instant::now();
        if std::env::var_os("KV_DIFF_TRACE").is_some() {
            eprintln!(
                "batch {b}: ours on {}, redis on {}",
                pair.ours.port, pair.redis.port
            );
            for c in batch {
                eprintln!("  {}", show(c));
            }
        }
        ours.send(batch);
        theirs.send(batch);
        let a = ours.receive(batch);
        let z = theirs.receive(batch);
        skew_ms = skew_ms.max(sent.elapsed().as_millis() as u64 + 1);
        for (j, cmd) in batch.iter().enumerate() {
            // The commands a transaction queued, to normalize their replies inside EXEC's.
            let name = cmd[0].to_ascii_uppercase();
            let (a, z) = if name == b"EXEC" && queue.is_some() {
                let q = queue.take().unwrap_or_default();
                (
                    normalize_exec(pair, &q, a[j].clone()),
                    normalize_exec(pair, &q, z[j].clone()),
                )
            } else {
                if name == b"DISCARD" {
                    queue = None;
                } else if name == b"MULTI" && z[j] == b"+OK\r\n" {
                    queue = Some(Vec::new());
                } else if z[j] == b"+QUEUED\r\n" {
                    if let Some(q) = queue.as_mut() {
                        q.push(cmd.clone());
                    }
                }
                (
                    pair.normalize(cmd, a[j].clone()),
                    pair.normalize(cmd, z[j].clone()),
                )
            };
            let same = |a: &[u8], z: &[u8]| {
                same(cmd, a, z, skew_ms)
                    || (pair.redis.version < (7, 2) && kvcore::resp::same_but_17g_doubles(a, z))
                    // 7.2 calls a timeout beyond LLONG_MAX ms "out of range", 7.0 "negative".
                    || (pair.redis.version < (7, 2)
                        && a == b"-ERR timeout is out of range\r\n"
                        && z == b"-ERR timeout is negative\r\n")
                    || (pair.docs.is_some() && docs::agree(cmd, a, z))
            };
            if !same(&a, &z) && stale_errno(cmd, &a, &z) {
                // Redis 7.0's SORT reads `errno` after strtod without clearing it, so an
                // ERANGE left by an earlier command (INCRBYFLOAT 1e5000) fails it until some
                // system call fails and resets errno. Redis is wrong there; the rest of the
                // sequence runs on a state where Redis skipped this SORT, so stop comparing.
                eprintln!("differential: Redis's stale-errno SORT failure, rest of the sequence skipped: {}", show(cmd));
                return None;
            }
            if !same(&a, &z) {
                return Some((b * 64 + j, a, z));
            }
        }
    }
    None
}

/// Drops chunks of commands, then single commands, while a mismatch remains.
fn shrink(pair: &Pair, mut cmds: Vec<Cmd>) -> Vec<Cmd> {
    let mut chunk = cmds.len() / 2;
    while chunk >= 1 {
        let mut start = 0;
        while start < cmds.len() {
            let mut candidate = cmds.clone();
            let end = (start + chunk).min(candidate.len());
            candidate.drain(start..end);
            match first_mismatch(pair, &candidate) {
                Some((i, _, _)) => {
                    candidate.truncate(i + 1);
                    cmds = candidate;
                }
                None => start += chunk,
            }
        }
        chunk /= 2;
    }
    cmds
}

fn sequence(seed: u64, len: usize) -> Vec<Cmd> {
    let mut r = Rng(seed);
    (0..len).map(|_| generate(&mut r)).collect()
}

/// Commands whose reply depends on when each server ran them (relative deadlines): a
/// mismatch of one of these that does not come back on replay is clock timing, not a bug.
const CLOCK_SENSITIVE: &[&[u8]] = &[
    b"EXPIRE",
    b"PEXPIRE",
    b"TTL",
    b"PTTL",
    b"EXPIRETIME",
    b"PEXPIRETIME",
];

/// Runs one seed; on a mismatch, shrinks it and panics with the seed and the sequence.
/// Returns whether a clock-sensitive mismatch was seen that no replay or shrink could show
/// again (counted and printed, not fatal).
fn run_seed(pair: &Pair, seed: u64, len: usize) -> bool {
    let cmds = pair.sequence(seed, len);
    let Some((i, ours, theirs)) = first_mismatch(pair, &cmds) else {
        return false;
    };
    let again = first_mismatch(pair, &cmds[..=i]);
    let name = cmds[i][0].to_ascii_uppercase();
    if again.is_none() && CLOCK_SENSITIVE.contains(&name.as_slice()) {
        eprintln!(
            "seed {seed}: command {i} ({}) differed once, not on replay (clock timing): \
             kvserver {:?}, redis {:?}",
            show(&cmds[i]),
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs)
        );
        return true;
    }
    let minimal = shrink(pair, cmds[..=i].to_vec());
    let Some((j, ours, theirs)) = first_mismatch(pair, &minimal) else {
        if CLOCK_SENSITIVE.contains(&name.as_slice()) {
            // Replayed, the mismatch came back, but no shorter sequence shows it: the
            // clock ticked between two commands on one server and not on the other (e.g.
            // PSETEX then PEXPIRE ... GT with the same relative time).
            eprintln!(
                "seed {seed}: command {i} ({}) differed twice, never once shrunk (clock \
                 timing): kvserver {:?}, redis {:?}",
                show(&cmds[i]),
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs)
            );
            return true;
        }
        panic!(
            "seed {seed}: command {i} ({}) differed once and not on replay: \
             kvserver {:?}, redis {:?}",
            show(&cmds[i]),
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs)
        );
    };
    // A clock-sensitive reply that shows up shrunk may still be timing: the commands between
    // a relative deadline and its comparison took long enough on one server for the clock
    // to tick. A real difference replays every time; timing does not.
    let name = minimal[j][0].to_ascii_uppercase();
    if CLOCK_SENSITIVE.contains(&name.as_slice())
        && (0..5).any(|_| first_mismatch(pair, &minimal[..=j]).is_none())
    {
        eprintln!(
            "seed {seed}: command {i} ({}) differed shrunk, not on every replay (clock \
             timing): kvserver {:?}, redis {:?}",
            show(&minimal[j]),
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs)
        );
        return true;
    }
    let mut msg = format!(
        "seed {seed}: replies differ (rerun with KV_DIFF_SEED={seed}); minimal sequence:\n"
    );
    for c in &minimal {
        msg.push_str(&format!("  {}\n", show(c)));
    }
    msg.push_str(&format!(
        "command {j}: kvserver {:?}\n            redis    {:?}",
        String::from_utf8_lossy(&ours),
        String::from_utf8_lossy(&theirs)
    ));
    panic!("{msg}");
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

/// 30 seeds of 400 commands in the suite; `KV_DIFF_SECONDS` / `KV_DIFF_SEED` for long runs.
#[test]
fn differential_against_redis() {
    let pair = Pair {
        ours: Server::start(&["--threads", "2"]),
        redis: Redis::start(),
        docs: None,
    };
    drive(&pair, 0..30, 400);
}

/// Runs `seeds` of `len` commands, or what `KV_DIFF_SECONDS` (run that long, from
/// `KV_DIFF_SEED` or a seed from the clock), `KV_DIFF_SEED` alone (that seed only) and
/// `KV_DIFF_COMMANDS` (the length) ask; panics at the first mismatch (see [`run_seed`]).
fn drive(pair: &Pair, seeds: std::ops::Range<u64>, len: usize) {
    let len = env_u64("KV_DIFF_COMMANDS").map_or(len, |n| n as usize);
    let seconds = env_u64("KV_DIFF_SECONDS");
    let first = env_u64("KV_DIFF_SEED");
    let started = Instant::now();
    let mut count = 0u64;
    let mut timing = 0u64;
    match (seconds, first) {
        (None, Some(seed)) => {
            timing += u64::from(run_seed(pair, seed, len));
            count = 1;
        }
        (None, None) => {
            for seed in seeds {
                timing += u64::from(run_seed(pair, seed, len));
                count += 1;
            }
        }
        (Some(secs), first) => {
            let mut seed = first.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs()
                    << 16
            });
            while started.elapsed() < Duration::from_secs(secs) {
                timing += u64::from(run_seed(pair, seed, len));
                seed += 1;
                count += 1;
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "differential{}: {count} seeds x {len} commands = {} commands in {elapsed:.1} s ({:.0}/s), \
         no mismatch ({timing} clock-timing differences that did not replay)",
        if pair.docs.is_some() { " (docs)" } else { "" },
        count * len as u64,
        (count * len as u64) as f64 / elapsed
    );
}

/// Every generator of every family's table is reached by the driver.
#[test]
fn generated_commands_cover_every_family() {
    let mut r = Rng(1);
    let mut names = std::collections::HashSet::new();
    for _ in 0..20_000 {
        names.insert(generate(&mut r)[0].to_ascii_uppercase());
    }
    for family in FAMILIES {
        for g in family.commands {
            let mut probe = Rng(7);
            let name = g(&mut probe)[0].to_ascii_uppercase();
            assert!(
                names.contains(&name),
                "{} of {} never generated",
                String::from_utf8_lossy(&name),
                family.name
            );
        }
    }
}

/// One write whose commands move the connection in and out of its plain state (CLIENT REPLY
/// OFF/ON/SKIP, MULTI ... EXEC, SUBSCRIBE ... UNSUBSCRIBE, QUIT): the commands between take
/// the server's plain lane or its general path by the state each one finds, and every reply (or
/// its absence) must be Redis's, on one shard and on three.
#[test]
fn one_write_crossing_connection_states_as_redis() {
    let script = [
        "SET a 1",
        "CLIENT REPLY OFF",
        "SET b 2",
        "CLIENT REPLY ON",
        "GET b",
        "MULTI",
        "INCR a",
        "EXEC",
        "GET a",
        "SUBSCRIBE ch",
        "PING",
        "UNSUBSCRIBE",
        "GET a",
        "CLIENT REPLY SKIP",
        "GET a",
        "GET b",
        "QUIT",
        "GET a",
    ];
    let mut bytes = Vec::new();
    for line in script {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        bytes.extend_from_slice(&encode(&args));
    }
    // Everything until the server closes the connection after QUIT.
    let all_replies = |port: u16| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&bytes).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out)
            .expect("the server closes after QUIT");
        out
    };
    let redis = Redis::start();
    let theirs = all_replies(redis.port);
    assert!(theirs.ends_with(b"$1\r\n2\r\n+OK\r\n"), "{theirs:?}");
    for threads in ["1", "3"] {
        let ours = Server::start(&["--threads", threads]);
        assert_eq!(
            String::from_utf8_lossy(&all_replies(ours.port)),
            String::from_utf8_lossy(&theirs),
            "{threads} shard(s)"
        );
    }
}

/// Sends the space-separated command lines in one write; each line with its reply.
fn script_replies(port: u16, script: &[&str]) -> Vec<String> {
    let mut bytes = Vec::new();
    for line in script {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        bytes.extend_from_slice(&encode(&args));
    }
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&bytes).unwrap();
    crate::support::read_replies(&mut s, script.len())
        .iter()
        .zip(script)
        .map(|(r, line)| format!("{line} -> {}", String::from_utf8_lossy(r)))
        .collect()
}

/// ZRANDMEMBER, SRANDMEMBER and HRANDFIELD check their count and options in Redis's order,
/// with Redis's errors (the command fuzzer found ZRANDMEMBER taking -2^63 as a count, which
/// Redis refuses, and checking its option before its count).
#[test]
fn random_member_counts_are_checked_as_redis_checks_them() {
    let script = [
        "ZADD z 1 a 2 b",
        "SADD s a b",
        "HSET h a 1 b 2",
        "ZRANDMEMBER z -9223372036854775808",
        "ZRANDMEMBER z -9223372036854775808 WITHSCORES",
        "ZRANDMEMBER z -9223372036854775808 nope",
        "ZRANDMEMBER z abc nope",
        "ZRANDMEMBER z abc",
        "ZRANDMEMBER z 1 nope",
        "ZRANDMEMBER z 1 WITHSCORES extra",
        "ZRANDMEMBER z 4611686018427387904 WITHSCORES",
        "ZRANDMEMBER z -4611686018427387904 WITHSCORES",
        "ZRANDMEMBER z 0",
        "ZRANDMEMBER z 0 WITHSCORES",
        "ZRANDMEMBER nokey -9223372036854775808",
        "ZRANDMEMBER nokey 3",
        "SRANDMEMBER s -9223372036854775808",
        "SRANDMEMBER s abc",
        "SRANDMEMBER s 1 2",
        "SRANDMEMBER s 0",
        "HRANDFIELD h -9223372036854775808",
        "HRANDFIELD h -9223372036854775808 nope",
        "HRANDFIELD h abc nope",
        "HRANDFIELD h 1 nope",
        "HRANDFIELD h 4611686018427387904 WITHVALUES",
        "HRANDFIELD h 0 WITHVALUES",
    ];
    let replies = |port: u16| script_replies(port, &script);
    let redis = Redis::start();
    let theirs = replies(redis.port);
    assert!(
        theirs[3].contains("-ERR value is out of range"),
        "{:?}",
        theirs[3]
    );
    let ours = Server::start(&[]);
    assert_eq!(replies(ours.port), theirs);
}

/// The commands the server answers itself (not one shard's store), queued in a transaction, as
/// Redis answers them: SAVE, SHUTDOWN and SYNC refused at queue time (the transaction aborts);
/// BGSAVE and BGREWRITEAOF scheduled rather than started (Redis does not fork inside EXEC);
/// the others run. On one shard these used to reach the store, which only said it could not
/// serve them; on two, BGSAVE waited for the locks its own EXEC held, and the client (and the
/// keys) stayed locked. The scheduled save and rewrite then run.
#[test]
fn server_commands_in_a_transaction_as_redis() {
    let script = [
        "SET k1 v",
        "MULTI",
        "GET k1",
        "SAVE",
        "GET u8",
        "EXEC",
        "MULTI",
        "SHUTDOWN",
        "SYNC",
        "DISCARD",
        "MULTI",
        "GET k1",
        "GET u8",
        "BGSAVE",
        "BGREWRITEAOF",
        "BGSAVE SCHEDULE",
        "BGSAVE NOW",
        "SLOWLOG LEN",
        "LATENCY RESET",
        "MEMORY PURGE",
        "CONFIG GET appendonly",
        "DBSIZE",
        "EXEC",
        "GET k1",
    ];
    let replies = |port: u16| script_replies(port, &script);
    let tag = format!("kvtest-tx-{}", std::process::id());
    let (rdb, aof) = (format!("{tag}.rdb"), format!("{tag}-aof"));
    let redis = Redis::start_with(&["--dbfilename", &rdb, "--appenddirname", &aof]);
    let theirs = replies(redis.port);
    drop(redis);
    let _ = std::fs::remove_file(std::env::temp_dir().join(&rdb));
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(&aof));
    assert!(
        theirs[22].contains("+Background saving scheduled"),
        "{theirs:#?}"
    );
    for threads in ["1", "2"] {
        let ours = Server::start(&["--threads", threads]);
        assert_eq!(replies(ours.port), theirs, "{threads} shard(s)");
        // What was scheduled runs (the cron, once a second).
        let mut s = ours.raw();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info = crate::support::call(&mut s, "INFO persistence");
            if info.contains("rdb_saves:1") && info.contains("aof_rewrites:1") {
                break;
            }
            assert!(Instant::now() < deadline, "{threads} shard(s): {info}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Database indexes are C `int`s first (Redis's `getIntFromObjectOrReply`), then indexes: SELECT,
/// MOVE and COPY ... DB with 2^32 answer "value is out of range, value must between ..." (they
/// answered "DB index is out of range"), on one shard and across two (COPY between shards
/// parses its DB apart). Found by the docs mode.
#[test]
fn database_indexes_beyond_an_int_as_redis() {
    let (a, b) = (
        crate::support::key_on("a", 0, 2, 0),
        crate::support::key_on("b", 1, 2, 0),
    );
    let lines: Vec<String> = [
        "SET {a} v",
        "SELECT 4294967296",
        "SELECT 2147483648",
        "SELECT -2147483649",
        "SELECT 2147483647",
        "SELECT -1",
        "SELECT x",
        "MOVE {a} 4294967296",
        "MOVE {a} -2147483648",
        "MOVE {a} 16",
        "COPY {a} {b} DB 4294967296",
        "COPY {a} {b} DB 9223372036854775807",
        "COPY {a} {b} DB -1",
        "COPY {a} {b} DB x",
        "COPY {a} {b} DB 1",
        "SWAPDB 4294967296 0",
        "SWAPDB 0 2147483648",
    ]
    .iter()
    .map(|l| l.replace("{a}", &a).replace("{b}", &b))
    .collect();
    let script: Vec<&str> = lines.iter().map(String::as_str).collect();
    let redis = Redis::start();
    let theirs = script_replies(redis.port, &script);
    assert!(theirs[1].contains("must between"), "{theirs:?}");
    for threads in ["1", "2"] {
        let ours = Server::start(&["--threads", threads]);
        assert_eq!(
            script_replies(ours.port, &script),
            theirs,
            "{threads} shard(s)"
        );
    }
}

/// Score bounds are read with strtod on a C string, so a NUL ends them: `\0x` reads as the
/// empty text (0), `1\0x` as 1 (they were "min or max is not a float"). Found by the docs mode.
#[test]
fn score_bounds_end_at_a_nul_as_redis() {
    let script = [
        "ZADD z 0 a 1 b 2 c",
        "ZCOUNT z \0\u{1} 5",
        "ZCOUNT z 1\0x 5",
        "ZCOUNT z (1\0x +inf",
        "ZRANGEBYSCORE z \0 1\0",
        "ZREMRANGEBYSCORE nokey \0\u{1} \0\u{1}",
        "ZRANGE z (0\0 2\0\0 BYSCORE",
        "ZCOUNT z x\0 5",
        "ZCOUNT z 1x\0 5",
    ];
    let redis = Redis::start();
    let theirs = script_replies(redis.port, &script);
    assert!(theirs[1].ends_with(":3\r\n"), "{theirs:?}");
    let ours = Server::start(&[]);
    assert_eq!(script_replies(ours.port, &script), theirs);
}

/// HELLO's error for an unknown option prints it as Redis's `%s` does, up to its first NUL
/// (it printed every byte); a bad SETNAME is refused where it is read, before the options
/// after it (we checked it after them all; for the 7.2 order with AUTH before it, see
/// kvcore's hello_checks_setname_where_it_reads_it). Found by the docs mode.
#[test]
fn hello_option_errors_end_at_a_nul_as_redis() {
    let script = [
        "HELLO 2 \0\u{1}x -2",
        "HELLO 2 ab\0cd",
        "HELLO 3 a\rb\nc",
        "HELLO 2 SETNAME return1 [ x",
        "HELLO 2 SETNAME a\u{1}b [",
        "HELLO 2 SETNAME a\u{1}b AUTH u p",
        "PING",
    ];
    let redis = Redis::start();
    let theirs = script_replies(redis.port, &script);
    assert!(theirs[0].contains("option ''"), "{theirs:?}");
    let ours = Server::start(&[]);
    assert_eq!(script_replies(ours.port, &script), theirs);
}
