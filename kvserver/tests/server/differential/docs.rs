//! The docs mode of the differential run: commands drawn as the command fuzzer draws them
//! (any command of the reference server's COMMAND DOCS that we list too, its documented
//! tokens, its arity, a handful of keys, edge numbers and junk), sent to kvserver and to the
//! redis-server, replies compared after the driver's normalisation and this mode's own.
//!
//! Only commands whose replies are a function of the commands before them take part; the
//! others are in [`LEFT_OUT`] with the reason. The reply of a command that picks at random
//! (RANDOMKEY, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER) is compared by its shape, which its
//! count fixes; its errors byte for byte. Small relative expiry times are made large and
//! distinct (see [`Table::sequence`]), so that no key expires during a run and no two
//! deadlines tie.
//!
//! Short CI run: `cargo test -p kvserver --test server differential::docs`. Against the spec:
//! `REDIS_SERVER=/path/to/redis-7.4/redis-server KV_DIFF_SECONDS=600 cargo test -p kvserver
//! --test server differential::docs -- --nocapture` (`KV_DIFF_SEED`, `KV_DIFF_COMMANDS` as in
//! the family run).

use std::collections::HashMap;
use std::net::TcpStream;
use std::time::Duration;

use kvcore::resp::reply::{parse_reply, Value};

use super::families::{Cmd, Rng};
use super::{drive, Pair, Redis};
use crate::command_table::{arities, blocking, draw, table, Known, NOT_REQUEST_REPLY};
use crate::support::Server;

/// Commands (a container excludes its subcommands) left out, by reason:
/// - the reply depends on the clock: TIME, LASTSAVE, OBJECT IDLETIME, OBJECT FREQ (a decaying
///   counter, or an error naming the policy);
/// - the reply depends on the server's identity, build, configuration or memory layout:
///   INFO, MEMORY, CLIENT (ids, addresses; CLIENT REPLY also changes how many replies come),
///   CONFIG (the port, the directory; CONFIG SET changes the server under test), DEBUG,
///   COMMAND (the tables differ where we lack a command), LOLWUT (the version's art), MODULE,
///   ROLE; of ACL, what 7.2 reworded or reshaped (GETUSER, LIST, DRYRUN, LOG: see
///   `differential/acl.rs`, which compares them) and GENPASS (random); CAT with a category
///   lists Redis's commands in its hash table's order; SETUSER and DELUSER change the users
///   under test (the ACL run covers them). ACL USERS, WHOAMI, LOAD, SAVE, HELP and the
///   argument errors of every subcommand are compared here;
/// - the reply depends on timing: SLOWLOG, LATENCY, SAVE/BGSAVE/BGREWRITEAOF ("already in
///   progress", files written), PFSELFTEST (slow);
/// - the reply shows how Redis made the object, which we do not track: OBJECT REFCOUNT says
///   whether a value is one of Redis's shared integers (SET k 10 shares it, COPY duplicates
///   it unshared: refcount 1); we derive it from the value alone;
/// - the reply picks at random and changes the data, so the two servers' keys part: SPOP;
/// - the command leaves request-reply, waits or reaches other servers
///   ([`NOT_REQUEST_REPLY`]; the family run covers the (un)subscribe family one channel at a
///   time), and every command of @blocking (see [`Table::read`]);
/// - the command is one we do not serve whole: SCRIPT DEBUG (YES and SYNC start Redis's Lua
///   debugger, which we refuse).
const LEFT_OUT: &[&str] = &[
    "script|debug",
    "time",
    "lastsave",
    "object|idletime",
    "object|freq",
    "object|refcount",
    "info",
    "memory",
    "client",
    "config",
    "debug",
    "command",
    "lolwut",
    "acl|getuser",
    "acl|list",
    "acl|dryrun",
    "acl|log",
    "acl|genpass",
    "acl|cat",
    "acl|setuser",
    "acl|deluser",
    "module",
    "role",
    "slowlog",
    "latency",
    "save",
    "bgsave",
    "bgrewriteaof",
    "pfselftest",
    "spop",
];

/// Commands that pick at random: their replies are compared by shape.
const RANDOM: &[&[u8]] = &[b"RANDOMKEY", b"SRANDMEMBER", b"HRANDFIELD", b"ZRANDMEMBER"];

/// The commands the docs mode draws from.
pub(super) struct Table {
    known: Vec<Known>,
    arity: HashMap<String, i64>,
    /// The reference's version.
    version: (u32, u32),
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

impl Table {
    /// The reference server's documented commands that kvserver lists too, less [`LEFT_OUT`]
    /// and either server's @blocking; their arities as the reference gives them.
    pub(super) fn read(ours: &Server, redis: &Redis) -> Table {
        let mut theirs = connect(redis.port);
        let mut mine = connect(ours.port);
        let arity = arities(&mut theirs);
        let ours_listed = arities(&mut mine);
        let mut waiting = blocking(&mut theirs);
        waiting.extend(blocking(&mut mine));
        let docs = table(&mut theirs);
        let mut missing: Vec<String> = docs
            .iter()
            .map(|k| k.words.join("|").to_lowercase())
            .filter(|n| !ours_listed.contains_key(n))
            .collect();
        missing.sort();
        eprintln!(
            "differential docs: {} of the reference's commands are not ours, left out: {}",
            missing.len(),
            missing.join(" ")
        );
        let known: Vec<Known> = docs
            .into_iter()
            .filter(|k| {
                let full = k.words.join("|").to_lowercase();
                let container = k.words[0].to_lowercase();
                ours_listed.contains_key(&full)
                    && ![LEFT_OUT, NOT_REQUEST_REPLY]
                        .iter()
                        .any(|l| l.contains(&full.as_str()) || l.contains(&container.as_str()))
                    && !waiting.contains(&container)
            })
            .collect();
        assert!(
            known.len() > 100,
            "the reference's COMMAND DOCS lists the command table ({} usable)",
            known.len()
        );
        Table {
            known,
            arity,
            version: redis.version,
        }
    }

    /// `len` commands drawn from the table with `seed`. A relative expiry time (EXPIRE,
    /// PEXPIRE, SETEX, PSETEX, HEXPIRE, HPEXPIRE, SET's and GETEX's EX and PX) that is a
    /// positive integer below a million becomes a random one of at least a day: a key must
    /// not expire while a run and its shrinking replay it, and two such deadlines must not
    /// be equal (which one of `EXPIRE k t GT` after `SETEX k t v` is larger would depend on
    /// whether a millisecond passed, on either server).
    pub(super) fn sequence(&self, seed: u64, len: usize) -> Vec<Cmd> {
        let mut r = Rng(seed);
        (0..len)
            .map(|_| loop {
                let (_, mut args) = draw(&mut r, &self.known, &self.arity);
                if self.version >= (7, 2) && redis_7_2_bug(&args) {
                    continue;
                }
                lengthen_expiries(&mut r, &mut args);
                unclock_stream_ids(&mut args);
                break args;
            })
            .collect()
    }

    /// This mode's normalisation, after the driver's: random picks by shape, RESP3 sets and
    /// maps in sorted order, HELLO's map (the connection id, the version) by its protocol,
    /// SCAN pages that are not the whole keyspace as "a partial page".
    pub(super) fn normalize(&self, cmd: &[Vec<u8>], reply: Vec<u8>) -> Vec<u8> {
        let Ok(Some((mut value, _))) = parse_reply(&reply) else {
            return reply;
        };
        let name = cmd[0].to_ascii_uppercase();
        if self.version < (7, 2) {
            if let Some(r) = since_7_2(&name, cmd, &value) {
                return r;
            }
        }
        if matches!(value, Value::Error(_)) {
            return reply;
        }
        if RANDOM.contains(&name.as_slice()) {
            return format!("+{}\r\n", shape(&value)).into_bytes();
        }
        // DUMP payloads are compared as present or not: a hash-table set or hash is laid
        // out in its table's order, which differs between any two servers; and ours are RDB
        // 10 (Redis 7.0's format, which 7.0 and later restore) where 7.2 writes RDB 11 (sets
        // of strings as listpacks) and 7.4 RDB 12. The dump tests compare payload bytes
        // where they are deterministic.
        if name == b"DUMP" {
            return b"+a payload\r\n".to_vec();
        }
        // Times: consumers' idle and seen times, pending entries' delivery times.
        let sub = |i: usize, w: &str| {
            cmd.get(i)
                .is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()))
        };
        if (name == b"XINFO" && (sub(1, "CONSUMERS") || sub(3, "FULL")))
            || (name == b"XPENDING" && cmd.len() > 3)
        {
            return format!("+{}\r\n", shape(&value)).into_bytes();
        }
        if name == b"HELLO" {
            let proto = if matches!(value, Value::Map(_)) { 3 } else { 2 };
            return format!("+hello, RESP{proto}\r\n").into_bytes();
        }
        // A SCAN from a cursor other than 0, or one that stops before the end, covers the
        // part of the keyspace that the server's hash-table order puts there.
        if name == b"SCAN" || name == b"SSCAN" || name == b"HSCAN" || name == b"ZSCAN" {
            let cursor = if name == b"SCAN" { 1 } else { 2 };
            let from_zero = cmd.get(cursor).is_some_and(|c| c.as_slice() == b"0");
            let to_end = matches!(&value, Value::Array(p)
                if matches!(p.first(), Some(Value::Bulk(c)) if c.as_slice() == b"0"));
            if !from_zero || !to_end {
                return b"+partial page\r\n".to_vec();
            }
        }
        // SORT ... BY a pattern without `*` does not sort: a set comes in hash-table order
        // (Redis sorts it anyway only for STORE and scripts). Compared sorted, or by length
        // when LIMIT takes a part of it.
        if name == b"SORT" || name == b"SORT_RO" {
            let nosort = cmd
                .windows(2)
                .any(|w| w[0].eq_ignore_ascii_case(b"BY") && !w[1].contains(&b'*'));
            if let (true, Value::Array(items)) = (nosort, &mut value) {
                if cmd.iter().any(|a| a.eq_ignore_ascii_case(b"LIMIT")) {
                    return format!("+{} elements\r\n", items.len()).into_bytes();
                }
                items.sort_by_key(|i| format!("{i:?}"));
            }
        }
        sort_unordered(&mut value);
        let mut out = Vec::new();
        value.encode(&mut out);
        out
    }
}

/// XADD's `*` ID is made from the clock, which the two servers read a millisecond apart: it
/// becomes `1-*` (an ID made from the last one).
fn unclock_stream_ids(args: &mut [Vec<u8>]) {
    if args[0].eq_ignore_ascii_case(b"XADD") {
        for a in args.iter_mut().skip(2) {
            if a.as_slice() == b"*" {
                *a = b"1-*".to_vec();
            }
        }
    }
}

/// Whether two replies that differ after normalisation still agree: a SCAN page that stops
/// before the end on either side (Redis visits COUNT buckets of its hash table; we may
/// answer everything at once) agrees with any page of the other, errors aside.
pub(super) fn agree(cmd: &[Vec<u8>], ours: &[u8], theirs: &[u8]) -> bool {
    let name = cmd[0].to_ascii_uppercase();
    let scan = matches!(&name[..], b"SCAN" | b"SSCAN" | b"HSCAN" | b"ZSCAN");
    let partial = |r: &[u8]| r == b"+partial page\r\n";
    scan && (partial(ours) || partial(theirs))
        && !ours.starts_with(b"-")
        && !theirs.starts_with(b"-")
}

/// Whether `args` meets a bug of Redis 7.2 to 7.4 that we do not copy; not sent to them:
/// - an authentication that fails with a username (AUTH user pass, HELLO ... AUTH user pass;
///   no password is set here, so every such AUTH fails): Redis sends no reply at all when the
///   connection has replies not yet written (`addAuthErrReply` returns early on
///   `clientHasPendingReplies`, a check meant for module authentication), so in a pipeline
///   the reply goes missing or not by how the writes fell;
/// - LSET with an index beyond a C `int`: `listTypeReplaceAtIndex` takes an `int`, so LSET
///   of -2^63 or 2^32 sets element 0 where it should answer "index out of range" (as we do;
///   redis/redis#15402, fixed after 7.4);
/// - a hand-made sparse HyperLogLog (a SET of `HYLL...`) whose runs pass the last register:
///   Redis before 7.4.5 (the CVE-2025-32023 fix) reads it, as the 7.4.1 build at hand does; we
///   follow the fix, as Debian's 7.0.15 does, which still gets these.
pub(super) fn redis_7_2_bug(args: &[Vec<u8>]) -> bool {
    let is = |n: &str| args[0].eq_ignore_ascii_case(n.as_bytes());
    (is("SET") && args.get(2).is_some_and(|v| v.starts_with(b"HYLL")))
        || (is("AUTH") && args.len() >= 3)
        || (is("HELLO") && args.iter().any(|a| a.eq_ignore_ascii_case(b"AUTH")))
        || (is("LSET")
            && args.get(2).is_some_and(|i| {
                kvcore::num::parse_i64(i).is_some_and(|i| i32::try_from(i).is_err())
            }))
}

/// Whether Redis 7.2 changed what `args` does, we follow 7.2, and 7.0's answer would part
/// the two servers' data or connection state: not sent to 7.0 (by either mode, see
/// `Pair::sequence`).
/// - ZRANK and ZREVRANK with a fourth argument (7.2 added WITHSCORE): 7.0 refuses their
///   arity before it runs them (in MULTI, at queue time, aborting the transaction).
/// - LREM with a count of -2^63, LPOS with RANK -2^63: 7.2 refuses them, 7.0 takes them.
/// - HELLO with AUTH: 7.0 authenticates where it reads AUTH (a failure answers WRONGPASS
///   before the options after it are checked), 7.2 after reading every option.
/// - HELLO SETNAME with a NUL in an argument: 7.2 checks a name up to its NUL, 7.0 all of it.
pub(super) fn changed_in_7_2(args: &[Vec<u8>]) -> bool {
    let is = |n: &str| args[0].eq_ignore_ascii_case(n.as_bytes());
    ((is("ZRANK") || is("ZREVRANK")) && args.len() >= 4)
        || (is("LREM") && args.get(2).is_some_and(|c| c == b"-9223372036854775808"))
        || (is("LPOS") && args.iter().any(|a| a == b"-9223372036854775808"))
        || (is("HELLO") && args.iter().any(|a| a.eq_ignore_ascii_case(b"AUTH")))
        || (is("HELLO")
            && args.iter().any(|a| a.eq_ignore_ascii_case(b"SETNAME"))
            && args.iter().any(|a| a.contains(&0)))
}

/// A reply as compared against Redis 7.0, where 7.2 changed it and we follow 7.2 (both
/// servers' replies pass through this): `None` leaves it to the rest of the normalisation.
fn since_7_2(name: &[u8], cmd: &[Vec<u8>], value: &Value) -> Option<Vec<u8>> {
    let _ = value;
    // 7.2 reads SCAN cursors with string2ull (7.0: strtoul, which took "" and "-1" but not
    // " 1"); where the two readings differ, the replies are not compared.
    let cursor = match name {
        b"SCAN" => cmd.get(1),
        b"SSCAN" | b"HSCAN" | b"ZSCAN" => cmd.get(2),
        _ => None,
    };
    if cursor.is_some_and(|c| cursor_7_0(c) != kvcore::num::string2ull(c)) {
        return Some(b"+a cursor 7.2 reads differently\r\n".to_vec());
    }
    None
}

/// A SCAN cursor as Redis 7.0 reads it: C's `strtoul` over the text up to its first NUL, no
/// leading space, all of it consumed (so the empty text is 0), no overflow.
fn cursor_7_0(text: &[u8]) -> Option<u64> {
    let s = text.split(|&b| b == 0).next().unwrap_or_default();
    if s.first().is_some_and(u8::is_ascii_whitespace) || s.first() == Some(&0x0b) {
        return None;
    }
    let (negative, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if s.is_empty() {
        return Some(0);
    }
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits.iter().try_fold(0u64, |v, &c| {
        v.checked_mul(10)?.checked_add(u64::from(c - b'0'))
    })?;
    Some(if negative { v.wrapping_neg() } else { v })
}

/// What a random pick's reply holds, without its values: its type and lengths.
fn shape(v: &Value) -> String {
    match v {
        Value::Array(items) | Value::Set(items) | Value::Push(items) => {
            let inner: Vec<String> = items.iter().map(shape).collect();
            format!("[{}]", inner.join(","))
        }
        Value::Map(pairs) => format!("map of {}", pairs.len()),
        Value::Null | Value::NullArray => "nil".to_string(),
        Value::Int(_) => "int".to_string(),
        Value::Double(_) => "double".to_string(),
        Value::Bulk(_) | Value::Simple(_) | Value::Verbatim { .. } => "string".to_string(),
        other => format!("{other:?}"),
    }
}

/// RESP3 sets and maps have no order: their elements (pairs) sorted, at any depth.
fn sort_unordered(v: &mut Value) {
    match v {
        Value::Set(items) => {
            items.iter_mut().for_each(sort_unordered);
            items.sort_by_key(|i| format!("{i:?}"));
        }
        Value::Map(pairs) => {
            for (k, v) in pairs.iter_mut() {
                sort_unordered(k);
                sort_unordered(v);
            }
            pairs.sort_by_key(|p| format!("{p:?}"));
        }
        Value::Array(items) | Value::Push(items) => items.iter_mut().for_each(sort_unordered),
        _ => {}
    }
}

/// Makes small positive relative expiry times random and long (see [`Table::sequence`]), and
/// SET's past absolute ones future.
fn lengthen_expiries(r: &mut Rng, args: &mut [Vec<u8>]) {
    let name = args[0].to_ascii_uppercase();
    // (position, whether in milliseconds)
    let mut at: Vec<(usize, bool)> = Vec::new();
    match &name[..] {
        b"EXPIRE" | b"SETEX" | b"HEXPIRE" => at.push((2, false)),
        b"PEXPIRE" | b"PSETEX" | b"HPEXPIRE" => at.push((2, true)),
        b"SET" | b"GETEX" => {
            for (i, a) in args.iter().enumerate() {
                if a.eq_ignore_ascii_case(b"EX") {
                    at.push((i + 1, false));
                } else if a.eq_ignore_ascii_case(b"PX") {
                    at.push((i + 1, true));
                }
            }
        }
        _ => {}
    }
    // SET with a past EXAT or PXAT stores a key already expired, which DBSIZE counts until
    // Redis's active expiry happens to remove it (timing; we remove it at once): SET's
    // absolute times become future ones. GETEX and the EXPIREAT family delete at once.
    if name == b"SET" {
        let mut past = Vec::new();
        for (i, w) in args.windows(2).enumerate() {
            let t = std::str::from_utf8(&w[1])
                .ok()
                .and_then(|t| t.parse::<u64>().ok());
            let now_ms = 1_800_000_000_000;
            if w[0].eq_ignore_ascii_case(b"EXAT") && t.is_some_and(|t| t > 0 && t < now_ms / 1000) {
                past.push((i + 1, false));
            } else if w[0].eq_ignore_ascii_case(b"PXAT") && t.is_some_and(|t| t > 0 && t < now_ms) {
                past.push((i + 1, true));
            }
        }
        for (i, millis) in past {
            let t = 4_000_000_000 + r.below(1_000_000);
            args[i] = if millis { t * 1000 } else { t }.to_string().into_bytes();
        }
    }
    for (i, millis) in at {
        let Some(a) = args.get_mut(i) else { continue };
        let small = a.iter().all(u8::is_ascii_digit)
            && std::str::from_utf8(a)
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
                .is_some_and(|t| (1..1_000_000).contains(&t));
        if small {
            let t = if millis {
                86_400_000 + r.below(1_000_000_000)
            } else {
                86_400 + r.below(1_000_000)
            };
            *a = t.to_string().into_bytes();
        }
    }
}

/// Commands drawn from the reference's COMMAND DOCS against kvserver and redis-server: 40
/// seeds of 500 commands in the suite (about two seconds); `KV_DIFF_SECONDS` / `KV_DIFF_SEED` / `KV_DIFF_COMMANDS` and
/// `REDIS_SERVER` for long runs against the spec.
#[test]
fn docs_commands_against_redis() {
    let ours = Server::start(&["--threads", "2", "--save", ""]);
    let redis = Redis::start();
    let docs = Table::read(&ours, &redis);
    let pair = Pair {
        ours,
        redis,
        docs: Some(docs),
    };
    drive(&pair, 0..40, 500);
}
