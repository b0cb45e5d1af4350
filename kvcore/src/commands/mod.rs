//! The command table and dispatch.
//!
//! Each family file (`strings`, `keys`, ...) ends in a `COMMANDS` array of rows: name, arity,
//! flags, key positions, handler — Dragonfly's `Register()` shape. [`lookup`] finds a row by a
//! case-insensitive hash of the name (lowercased into a stack buffer, no allocation), and
//! [`crate::Db::dispatch`] checks arity and authentication before it calls the handler.
//! A test checks every row against Redis's own command facts (`redis-commands.tsv`).

mod acl;
/// ACL LOAD's and SAVE's error where no ACL file is configured.
pub use acl::NO_ACL_FILE;
pub(crate) mod args;
mod bitmaps;
pub mod blocking;
mod connection;
pub mod docs;
mod dump;
mod functions;
mod geo;
mod hash;
mod hyperloglog;
mod info;
pub(crate) use dump::limits as dump_limits;
pub(crate) mod keys;
mod keyspec;
pub use info::wants_histograms as info_wants_histograms;
mod lcs;
mod list;
mod lolwut;
pub mod monitoring;
mod scripting;
mod served;
mod server;
mod set;
mod sort;
mod sources;
mod stream;
pub(crate) mod strings;
mod subcommands;
mod zset;

/// Typed options of the string commands.
pub mod strings_api {
    pub use super::strings::{SetCondition, SetOptions, SetOutcome};
}
/// What a server needs to block XREAD and XREADGROUP.
pub mod stream_api {
    pub use super::stream::{
        parse_read, read_blocks, write_read_served, write_reads, ReadCall, ReadFrom, ReadWait,
    };
}
/// Typed options of the key commands.
pub mod keys_api {
    pub use super::keys::{parse_scan, ExpireFlags, ScanArgs};
}
/// Typed options of the sorted-set commands.
pub mod zset_api {
    pub use super::zset::{
        parse_blocking_pop, write_blocking_pop, BlockingPop, Popped, ZaddError, ZaddFlags,
        ZaddOutcome, ZADD_NAN,
    };
}
/// Set lookups other families share (sorted-set algebra reads plain sets).
pub(crate) mod set_api {
    pub(crate) use super::set::get_set;
}
/// What a server needs to run SORT over several shards.
pub mod sort_api {
    pub use super::sort::{has_patterns, parses, referenced_keys};
}
pub(crate) use scripting::noscript_subcommand as scripting_noscript_subcommand;

/// What a server needs to run a script whose commands reach several shards.
pub mod scripting_api {
    pub use super::functions::fcall_refused;
    pub use super::scripting::{is_script_command, run_script_with, script_session, NOT_LOCAL};
}
/// INFO over several shards.
pub mod server_api {
    pub use super::server::ShardStats;
}

use std::cell::Cell;
use std::sync::OnceLock;

use crate::resp::ReplyWriter;
use crate::{Db, Session};

/// Command flags (a subset of Redis's, plus what routing needs).
pub mod flags {
    /// Modifies the keyspace.
    pub const WRITE: u32 = 1 << 0;
    /// Only reads.
    pub const READONLY: u32 = 1 << 1;
    /// O(1) or O(log n).
    pub const FAST: u32 = 1 << 2;
    /// May grow memory use (refused over maxmemory).
    pub const DENYOOM: u32 = 1 << 3;
    /// Administrative.
    pub const ADMIN: u32 = 1 << 4;
    /// Not allowed from scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    /// Allowed while loading.
    pub const LOADING: u32 = 1 << 6;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 7;
    /// Allowed before authentication.
    pub const NO_AUTH: u32 = 1 << 8;
    /// Allowed in Sentinel mode.
    pub const SENTINEL: u32 = 1 << 9;
    /// Keys are found by the handler, not by positions.
    pub const MOVABLE_KEYS: u32 = 1 << 10;
    /// Touches every key of the database (KEYS, FLUSHDB ...): a server runs it on all shards.
    pub const ALL_KEYS: u32 = 1 << 11;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 12;
    /// May block the client (BZPOPMIN ...): a server runs it through its blocked-client path.
    pub const BLOCKING: u32 = 1 << 13;
    /// Served by a server's connection rather than a store (transactions, pub/sub).
    pub const CONN: u32 = 1 << 14;

    /// Flag names as COMMAND reports them, in its order.
    #[cfg(test)]
    pub(crate) const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (NO_AUTH, "no_auth"),
        (FAST, "fast"),
        (SENTINEL, "sentinel"),
        (MOVABLE_KEYS, "movablekeys"),
        (NO_MULTI, "no_multi"),
    ];
}

/// What a command handler gets: the store, the client's session and the reply writer.
pub struct Ctx<'a> {
    /// The whole store (all logical databases).
    pub db: &'a mut Db,
    /// The calling client's state (selected DB, protocol, name ...).
    pub session: &'a mut Session,
    /// Where the reply goes.
    pub out: ReplyWriter<'a>,
}

/// A command handler. `args[0]` is the command name.
pub type Handler = fn(&mut Ctx<'_>, &[&[u8]]);

/// One row of the command table.
pub struct CommandSpec {
    /// Lowercase name.
    pub name: &'static str,
    /// Redis arity: `n` exactly n arguments (name included), `-n` at least n.
    pub arity: i32,
    /// [`flags`] bits.
    pub flags: u32,
    /// Index of the first key argument (0 = no keys).
    pub first_key: i32,
    /// Index of the last key (negative counts from the end: -1 = last argument).
    pub last_key: i32,
    /// Step between keys.
    pub key_step: i32,
    /// The handler.
    pub handler: Handler,
    /// Position in the command table ([`all`]), for per-command counters kept in a plain
    /// array. Set when the table is built: every spec [`lookup`] and [`all`] give has it;
    /// [`NO_ID`] in a family's own rows.
    pub id: u16,
}

/// [`CommandSpec::id`] of a row not taken from the table.
pub const NO_ID: u16 = u16::MAX;

impl CommandSpec {
    /// Whether `argc` arguments (name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = i64::from(self.arity);
        if a >= 0 {
            argc == a
        } else {
            argc >= -a
        }
    }

    /// Whether the flag bits `f` are all set.
    pub fn has(&self, f: u32) -> bool {
        self.flags & f == f
    }

    /// Indices of the key arguments of a call with `argc` arguments, by the table's positions.
    pub fn key_indices(&self, argc: usize) -> impl Iterator<Item = usize> {
        let first = self.first_key.max(0) as usize;
        let last = if self.last_key < 0 {
            argc as i64 + i64::from(self.last_key)
        } else {
            i64::from(self.last_key)
        };
        let step = self.key_step.max(1) as usize;
        let end = if first == 0 {
            0
        } else {
            (last.max(0) as usize + 1).min(argc)
        };
        (first..end.max(first)).step_by(step)
    }
}

/// Builds one table row; `cmd!(name, arity, FLAGS | ..., first, last, step, handler)`.
macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $h:expr) => {
        $crate::commands::CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            key_step: $step,
            handler: $h,
            id: $crate::commands::NO_ID,
        }
    };
}
pub(crate) use cmd;

/// All families' rows.
fn families() -> impl Iterator<Item = &'static CommandSpec> {
    connection::COMMANDS
        .iter()
        .chain(acl::COMMANDS)
        .chain(strings::COMMANDS)
        .chain(keys::COMMANDS)
        .chain(server::COMMANDS)
        .chain(zset::COMMANDS)
        .chain(geo::COMMANDS)
        .chain(hash::COMMANDS)
        .chain(list::COMMANDS)
        .chain(set::COMMANDS)
        .chain(stream::COMMANDS)
        .chain(sort::COMMANDS)
        .chain(served::COMMANDS)
        .chain(bitmaps::COMMANDS)
        .chain(lcs::COMMANDS)
        .chain(dump::COMMANDS)
        .chain(hyperloglog::COMMANDS)
        .chain(monitoring::COMMANDS)
        .chain(scripting::COMMANDS)
        .chain(functions::COMMANDS)
}

struct Table {
    specs: Vec<&'static CommandSpec>,
    /// Every name, keyed by its lowercased bytes as four words: one multiply to hash, a
    /// compare of the words to confirm, no loop over the bytes.
    slots: Box<[Slot]>,
}

/// Longest command name (and the most bytes [`lookup`] looks at).
const MAX_NAME: usize = 32;
const WORDS: usize = MAX_NAME / 8;
/// Slots of the table: a power of two, about four per command, so probes are short.
const SLOTS: usize = 1024;
const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Slot {
    words: [u64; WORDS],
    len: u32,
    spec: u32,
}

/// ASCII-lowercases the eight bytes of `w` at once (other bytes unchanged).
#[inline(always)]
fn lower_word(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    let low7 = w & !HIGH;
    // Per byte, no carry crosses a byte: low7 <= 0x7f and each addend < 0x40.
    let ge_a = low7 + ONES * (0x80 - u64::from(b'A'));
    let gt_z = low7 + ONES * (0x7f - u64::from(b'Z'));
    let upper = ge_a & !gt_z & !w & HIGH;
    w | (upper >> 2)
}

/// The bytes of a name of 1..=16 bytes as two little-endian words padded with zero bytes.
/// Reads whole words from the slice, never past its end.
#[inline(always)]
fn two_words(name: &[u8]) -> [u64; 2] {
    let n = name.len();
    let u64_at = |i: usize| {
        name.get(i..i + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    };
    let u32_at = |i: usize| {
        name.get(i..i + 4).map_or(0, |b| {
            u64::from(u32::from_le_bytes(b.try_into().unwrap_or_default()))
        })
    };
    let byte = |i: usize| name.get(i).map_or(0, |&b| u64::from(b));
    if n >= 8 {
        // The last word overlaps the first; the shift drops the overlap.
        let w1 = if n > 8 {
            u64_at(n - 8) >> (8 * (16 - n))
        } else {
            0
        };
        [u64_at(0), w1]
    } else if n >= 4 {
        [u32_at(0) | u32_at(n - 4) << (8 * (n - 4)), 0]
    } else {
        [
            byte(0) | byte(n / 2) << (8 * (n / 2)) | byte(n - 1) << (8 * (n - 1)),
            0,
        ]
    }
}

/// The bytes of a name of 1..=[`MAX_NAME`] bytes, lowercased, as little-endian words padded
/// with zero bytes.
#[inline(always)]
fn name_words(name: &[u8]) -> [u64; WORDS] {
    debug_assert!((1..=MAX_NAME).contains(&name.len()));
    let (head, tail) = name.split_at(name.len().min(16));
    let [a, b] = two_words(head);
    // Most names fit one word: the zero words need no lowercasing (`lower_word(0) == 0`).
    if name.len() <= 8 {
        return [lower_word(a), 0, 0, 0];
    }
    let [c, d] = if tail.is_empty() {
        [0, 0]
    } else {
        two_words(tail)
    };
    [a, b, c, d].map(lower_word)
}

#[inline(always)]
fn slot_of(words: &[u64; WORDS], len: usize) -> usize {
    let mixed = words
        .iter()
        .fold(len as u64, |h, &w| h.rotate_left(29) ^ w)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mixed >> (64 - SLOTS.trailing_zeros())) as usize
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        // The table's own copies of the rows, numbered; they live as long as the process.
        let rows: Vec<CommandSpec> = families()
            .enumerate()
            .map(|(i, s)| CommandSpec {
                id: u16::try_from(i).expect("fewer commands than NO_ID"),
                ..*s
            })
            .collect();
        let rows: &'static [CommandSpec] = Box::leak(rows.into_boxed_slice());
        let specs: Vec<&'static CommandSpec> = rows.iter().collect();
        let empty = Slot {
            words: [0; WORDS],
            len: 0,
            spec: EMPTY,
        };
        let mut slots = vec![empty; SLOTS].into_boxed_slice();
        assert!(specs.len() * 2 < SLOTS, "the table must stay sparse");
        for (i, s) in specs.iter().enumerate() {
            let name = s.name.as_bytes();
            assert!((1..=MAX_NAME).contains(&name.len()), "{}", s.name);
            let words = name_words(name);
            let mut at = slot_of(&words, name.len());
            while slots[at].spec != EMPTY {
                at = (at + 1) % SLOTS;
            }
            slots[at] = Slot {
                words,
                len: name.len() as u32,
                spec: i as u32,
            };
        }
        Table { specs, slots }
    })
}

/// A name of at most 16 bytes found last on this thread, as it was spelled (its raw words
/// and length), and its row.
type LastHit = Option<([u64; 2], usize, &'static CommandSpec)>;

thread_local! {
    /// [`lookup`]'s memory of its last hit. A pipeline mostly repeats one command, and the
    /// table's slot is often out of the cache by the next batch (the kernel's network work
    /// evicts it): comparing two words here skips the probe.
    static LAST_HIT: Cell<LastHit> = const { Cell::new(None) };
}

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let n = name.len();
    if !(1..=MAX_NAME).contains(&n) {
        return None;
    }
    // The same bytes and length as the last hit: the same command.
    let raw = (n <= 16).then(|| two_words(name));
    if let (Some(raw), Some((words, len, spec))) = (raw, LAST_HIT.get()) {
        if raw == words && n == len {
            return Some(spec);
        }
    }
    let t = table();
    let words = name_words(name);
    let mut at = slot_of(&words, n);
    loop {
        let slot = t.slots.get(at)?;
        if slot.spec == EMPTY {
            return None;
        }
        if slot.words == words && slot.len as usize == n {
            let spec = t.specs.get(slot.spec as usize).copied()?;
            if let Some(raw) = raw {
                LAST_HIT.set(Some((raw, n, spec)));
            }
            return Some(spec);
        }
        at = (at + 1) % SLOTS;
    }
}

/// Every command, in table order.
pub fn all() -> &'static [&'static CommandSpec] {
    &table().specs
}

/// Checks a container command's subcommand (CLIENT SETNAME, CONFIG GET ...) as Redis does
/// before it runs or queues one: the error reply for an unknown subcommand or a wrong number
/// of arguments. Commands without subcommands pass.
pub fn check_subcommand(spec: &CommandSpec, args: &[&[u8]]) -> Result<(), Vec<u8>> {
    let rows = subcommands::SUBCOMMANDS;
    let Some(sub) = args.get(1) else {
        return Ok(());
    };
    if !rows.iter().any(|(c, _, _)| *c == spec.name) {
        return Ok(());
    }
    let lower = sub.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, crate::resp::Proto::Resp2);
    match rows
        .iter()
        .find(|(c, s, _)| *c == spec.name && s.as_bytes() == lower.as_slice())
    {
        None => unknown_subcommand(&mut w, spec.name, sub),
        Some((c, s, arity)) => {
            let (argc, a) = (args.len() as i64, i64::from(*arity));
            if (a >= 0 && argc == a) || (a < 0 && argc >= -a) {
                return Ok(());
            }
            wrong_arity(&mut w, &format!("{c}|{s}"));
        }
    }
    Err(out)
}

/// Writes Redis's unknown-command error for `args`.
pub(crate) fn unknown_command(out: &mut ReplyWriter<'_>, args: &[&[u8]]) {
    let mut msg = b"ERR unknown command '".to_vec();
    let name = c_str(args.first().copied().unwrap_or_default());
    msg.extend_from_slice(&name[..name.len().min(128)]);
    msg.extend_from_slice(b"', with args beginning with: ");
    let start = msg.len();
    for a in args.iter().skip(1).map(|a| c_str(a)) {
        let room = 128usize.saturating_sub(msg.len() - start);
        if room == 0 {
            break;
        }
        msg.push(b'\'');
        msg.extend_from_slice(&a[..a.len().min(room)]);
        msg.extend_from_slice(b"' ");
    }
    out.error(&sanitize(msg));
}

/// Writes Redis's wrong-arity error for the command `name` (`container|sub` for subcommands).
pub(crate) fn wrong_arity(out: &mut ReplyWriter<'_>, name: &str) {
    let mut msg = b"ERR wrong number of arguments for '".to_vec();
    msg.extend_from_slice(name.as_bytes());
    msg.extend_from_slice(b"' command");
    out.error(&msg);
}

/// Writes Redis's unknown-subcommand error: `ERR unknown subcommand 'x'. Try CMD HELP.`
pub(crate) fn unknown_subcommand(out: &mut ReplyWriter<'_>, container: &str, sub: &[u8]) {
    let mut msg = b"ERR unknown subcommand '".to_vec();
    let sub = c_str(sub);
    msg.extend_from_slice(&sub[..sub.len().min(128)]);
    msg.extend_from_slice(b"'. Try ");
    msg.extend_from_slice(container.to_ascii_uppercase().as_bytes());
    msg.extend_from_slice(b" HELP.");
    out.error(&sanitize(msg));
}

/// An argument as Redis's `%s` formatting prints it in error texts: up to its first NUL byte.
pub(crate) fn c_str(arg: &[u8]) -> &[u8] {
    memchr::memchr(0, arg).map_or(arg, |end| &arg[..end])
}

/// Error lines cannot hold CR or LF: Redis replaces them with spaces.
pub fn sanitize(mut msg: Vec<u8>) -> Vec<u8> {
    for b in msg.iter_mut() {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row agrees with Redis's own facts: arity, key positions, and the flags Redis sets.
    #[test]
    fn table_matches_redis_facts() {
        let tsv = include_str!("redis-commands.tsv");
        let facts: std::collections::HashMap<&str, Vec<&str>> = tsv
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("command\tarity"))
            .map(|l| {
                let cols: Vec<&str> = l.split('\t').collect();
                (cols[0], cols)
            })
            .collect();
        for spec in all() {
            let f = facts
                .get(spec.name)
                .unwrap_or_else(|| panic!("{} is not a Redis command", spec.name));
            assert_eq!(spec.arity.to_string(), f[1], "arity of {}", spec.name);
            // `keynum`: keys follow a count (ZUNION numkeys ...): Redis's legacy range is empty
            // and the command has movable keys.
            if f[4] == "keynum" {
                assert_eq!(
                    (spec.first_key, spec.last_key, spec.key_step),
                    (0, 0, 0),
                    "keys of {}",
                    spec.name
                );
                assert!(
                    spec.has(flags::MOVABLE_KEYS),
                    "{} has movable keys",
                    spec.name
                );
            } else {
                let want_keys = (
                    f[3].parse::<i32>().unwrap(),
                    f[4].parse::<i32>().unwrap(),
                    f[5].parse::<i32>().unwrap(),
                );
                // The facts give the first key spec only; these commands have a second one (the
                // destination or source), which our legacy range covers too.
                let two_specs = [
                    "smove",
                    "lmove",
                    "rpoplpush",
                    "blmove",
                    "brpoplpush",
                    "rename",
                    "renamenx",
                    "copy",
                    "zrangestore",
                    "geosearchstore",
                ]
                .contains(&spec.name);
                // The destination spec first, then the sources to the end: the legacy range
                // covers every key.
                let dest_then_sources =
                    ["sinterstore", "sunionstore", "sdiffstore", "pfmerge"].contains(&spec.name);
                if spec.name == "bitop" {
                    // Redis's first key spec is the destination; the sources follow to the end.
                    assert_eq!((spec.first_key, spec.last_key, spec.key_step), (2, -1, 1));
                } else if dest_then_sources {
                    assert_eq!(
                        (spec.first_key, spec.last_key, spec.key_step),
                        (1, -1, 1),
                        "keys of {}",
                        spec.name
                    );
                } else if two_specs {
                    assert_eq!(
                        (spec.first_key, spec.last_key, spec.key_step),
                        (1, 2, 1),
                        "keys of {}",
                        spec.name
                    );
                } else {
                    assert_eq!(
                        (spec.first_key, spec.last_key, spec.key_step),
                        want_keys,
                        "keys of {}",
                        spec.name
                    );
                }
            }
            for (bit, name) in flags::NAMES {
                if *bit == flags::MOVABLE_KEYS {
                    continue;
                }
                // XGROUP's subcommands but HELP write, and Redis flags them, not the
                // container: flagged here, a write reaches the change log and is refused on a
                // replica as Redis refuses `xgroup|create`.
                if spec.name == "xgroup" && *bit == flags::WRITE {
                    assert!(spec.has(*bit));
                    continue;
                }
                let redis_has = f[2].split(',').any(|x| x == *name);
                assert_eq!(spec.has(*bit), redis_has, "flag {name} of {}", spec.name);
            }
        }
    }

    /// The word table against a plain scan, on every name in several cases, on near misses
    /// (one byte changed, including to bytes that fold like letters) and on random bytes.
    #[test]
    fn lookup_agrees_with_a_scan() {
        let scan = |name: &[u8]| {
            all()
                .iter()
                .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
                .map(|s| s.name)
        };
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for s in all() {
            let name = s.name.as_bytes();
            cases.push(name.to_vec());
            cases.push(name.to_ascii_uppercase());
            cases.push(
                name.iter()
                    .enumerate()
                    .map(|(i, b)| {
                        if i % 2 == 0 {
                            b.to_ascii_uppercase()
                        } else {
                            *b
                        }
                    })
                    .collect(),
            );
            for i in 0..name.len() {
                for b in [
                    name[i] ^ 0x20,
                    name[i] ^ 0x80,
                    name[i] ^ 0x01,
                    0,
                    b'-' ^ 0x20,
                ] {
                    let mut v = name.to_vec();
                    v[i] = b;
                    cases.push(v);
                }
            }
            cases.push([name, b"x"].concat());
            cases.push(name[..name.len() - 1].to_vec());
            let mut padded = name.to_vec();
            padded.push(0);
            cases.push(padded);
        }
        for _ in 0..20_000 {
            let len = (next() % 36) as usize;
            let pool = b"abcgetsxzAZ@[`{-\0\xc1";
            cases.push(
                (0..len)
                    .map(|_| pool[(next() % pool.len() as u64) as usize])
                    .collect(),
            );
        }
        for c in cases {
            assert_eq!(
                lookup(&c).map(|s| s.name),
                scan(&c),
                "{:?}",
                String::from_utf8_lossy(&c)
            );
        }
    }

    #[test]
    fn lower_word_lowercases_ascii_letters_only() {
        for b in 0..=255u8 {
            let w = u64::from_le_bytes([b, b'A', b'z', b'@', b'[', b'`', b'{', b]);
            let want = u64::from_le_bytes(
                [b, b'A', b'z', b'@', b'[', b'`', b'{', b].map(|c| c.to_ascii_lowercase()),
            );
            assert_eq!(lower_word(w), want, "{b}");
        }
        // `name_words` leaves the padding words of short names as they are.
        assert_eq!(lower_word(0), 0);
    }

    #[test]
    fn lookup_is_case_insensitive() {
        assert_eq!(lookup(b"GeT").unwrap().name, "get");
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(&[b'a'; 100]).is_none());
    }

    #[test]
    fn the_last_hit_answers_only_its_own_spelling() {
        // Every row, in two spellings, each looked up twice in a row (the second one answered
        // by the last hit) and between lookups of other names, near misses among them: a
        // name zero-padded to the last hit's words, a prefix, a longer name.
        for spec in all() {
            let upper = spec.name.to_ascii_uppercase();
            for name in [spec.name.as_bytes(), upper.as_bytes()] {
                for _ in 0..2 {
                    assert!(std::ptr::eq(lookup(name).unwrap(), *spec), "{}", spec.name);
                }
                let mut padded = name.to_vec();
                padded.push(0);
                assert!(lookup(&padded).is_none(), "{}", spec.name);
                let mut longer = name.to_vec();
                longer.push(b'x');
                if let Some(other) = lookup(&longer) {
                    assert!(other
                        .name
                        .eq_ignore_ascii_case(std::str::from_utf8(&longer).unwrap()));
                }
                let shorter = &name[..name.len() - 1];
                if let Some(other) = lookup(shorter) {
                    assert!(other.name.as_bytes().eq_ignore_ascii_case(shorter));
                }
                assert!(std::ptr::eq(lookup(name).unwrap(), *spec), "{}", spec.name);
            }
        }
    }

    #[test]
    fn key_positions() {
        let mset = lookup(b"mset").unwrap();
        assert_eq!(mset.key_indices(5).collect::<Vec<_>>(), vec![1, 3]);
        let del = lookup(b"del").unwrap();
        assert_eq!(del.key_indices(4).collect::<Vec<_>>(), vec![1, 2, 3]);
        let ping = lookup(b"ping").unwrap();
        assert_eq!(ping.key_indices(2).count(), 0);
    }
}
