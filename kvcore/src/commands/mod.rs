//! The command table and dispatch.
//!
//! Each family file (`strings`, `keys`, ...) ends in a `COMMANDS` array of rows: name, arity,
//! flags, key positions, handler — Dragonfly's `Register()` shape. [`lookup`] finds a row by a
//! case-insensitive hash of the name (lowercased into a stack buffer, no allocation), and
//! [`crate::Db::dispatch`] checks arity and authentication before it calls the handler.
//! A test checks every row against Redis's own command facts (`redis-commands.tsv`).

pub(crate) mod args;
mod connection;
mod geo;
pub(crate) mod keys;
mod keyspec;
mod server;
mod sources;
mod strings;
mod zset;

/// Typed options of the string commands.
pub mod strings_api {
    pub use super::strings::{SetCondition, SetOptions, SetOutcome};
}
/// Typed options of the key commands.
pub mod keys_api {
    pub use super::keys::{parse_scan, ExpireFlags, ScanArgs};
}
/// Typed options of the sorted-set commands.
pub mod zset_api {
    pub use super::zset::{ZaddError, ZaddFlags, ZaddOutcome, ZADD_NAN};
}
/// INFO over several shards.
pub mod server_api {
    pub use super::server::ShardStats;
}

use std::sync::OnceLock;

use hashbrown::HashTable;

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

    /// Flag names as COMMAND reports them, in its order.
    pub(crate) const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (NOSCRIPT, "noscript"),
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
}

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
        }
    };
}
pub(crate) use cmd;

/// All families' rows.
fn families() -> impl Iterator<Item = &'static CommandSpec> {
    connection::COMMANDS
        .iter()
        .chain(strings::COMMANDS)
        .chain(keys::COMMANDS)
        .chain(server::COMMANDS)
        .chain(zset::COMMANDS)
        .chain(geo::COMMANDS)
}

struct Table {
    specs: Vec<&'static CommandSpec>,
    index: HashTable<usize>,
}

const MAX_NAME: usize = 32;

/// A hash of a command name that ignores ASCII case, computed straight from the client's bytes
/// (no lowercase copy). `b | 0x20` folds letters only; other bytes that fold together merely
/// collide, and [`lookup`] compares names exactly (ignoring case) anyway.
fn name_hash(name: &[u8]) -> u64 {
    let mut h = name.len() as u64;
    for &b in name {
        h = (h.rotate_left(5) ^ u64::from(b | 0x20)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let specs: Vec<&'static CommandSpec> = families().collect();
        let mut index = HashTable::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            debug_assert!(s.name.len() <= MAX_NAME);
            index.insert_unique(name_hash(s.name.as_bytes()), i, |&j| {
                name_hash(specs[j].name.as_bytes())
            });
        }
        Table { specs, index }
    })
}

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > MAX_NAME {
        return None;
    }
    let t = table();
    t.index
        .find(name_hash(name), |&i| {
            t.specs[i].name.as_bytes().eq_ignore_ascii_case(name)
        })
        .map(|&i| t.specs[i])
}

/// Every command, in table order.
pub fn all() -> &'static [&'static CommandSpec] {
    &table().specs
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
pub(crate) fn sanitize(mut msg: Vec<u8>) -> Vec<u8> {
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
                    "rename",
                    "renamenx",
                    "copy",
                    "zrangestore",
                    "geosearchstore",
                ]
                .contains(&spec.name);
                if two_specs {
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
                let redis_has = f[2].split(',').any(|x| x == *name);
                assert_eq!(spec.has(*bit), redis_has, "flag {name} of {}", spec.name);
            }
        }
    }

    #[test]
    fn lookup_is_case_insensitive() {
        assert_eq!(lookup(b"GeT").unwrap().name, "get");
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(&[b'a'; 100]).is_none());
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
