//! Server commands: COMMAND, INFO, CONFIG, TIME, DBSIZE, FLUSHDB, FLUSHALL, MEMORY.

use super::strings::reply_err;
use super::{args, cmd, docs, flags::*, unknown_subcommand, wrong_arity, CommandSpec, Ctx};
use crate::config::ConfigError;
use crate::error::OpError;
use crate::resp::ReplyWriter;
use crate::value::{Stored, Value};
use crate::Db;

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("command", -1, LOADING | STALE | SENTINEL, 0, 0, 0, command),
    cmd!("info", -1, LOADING | STALE | SENTINEL, 0, 0, 0, info),
    cmd!("config", -2, 0, 0, 0, 0, config),
    cmd!("time", 1, LOADING | STALE | FAST, 0, 0, 0, time),
    cmd!("dbsize", 1, READONLY | FAST | ALL_KEYS, 0, 0, 0, dbsize),
    cmd!("flushdb", -1, WRITE | ALL_KEYS, 0, 0, 0, flushdb),
    cmd!("flushall", -1, WRITE | ALL_KEYS, 0, 0, 0, flushall),
    cmd!("swapdb", 3, WRITE | FAST | ALL_KEYS, 0, 0, 0, swapdb),
    cmd!("memory", -2, MOVABLE_KEYS, 0, 0, 0, memory),
    cmd!(
        "lolwut",
        -1,
        READONLY | FAST,
        0,
        0,
        0,
        super::lolwut::lolwut
    ),
    cmd!(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_MULTI,
        0,
        0,
        0,
        needs_server
    ),
    cmd!("bgsave", -1, ADMIN | NOSCRIPT, 0, 0, 0, needs_server),
    cmd!("bgrewriteaof", 1, ADMIN | NOSCRIPT, 0, 0, 0, needs_server),
    cmd!("lastsave", 1, LOADING | STALE | FAST, 0, 0, 0, needs_server),
    cmd!(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | SENTINEL,
        0,
        0,
        0,
        needs_server
    ),
    cmd!(
        "debug",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE | MOVABLE_KEYS,
        0,
        0,
        0,
        debug
    ),
];

/// DEBUG HELP's lines: Redis 7.4's, for the subcommands served here.
const DEBUG_HELP: &[&str] = &[
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys (and hash-fields) in background ",
    "    when they are not accessed (otherwise the Redis behavior). Setting it",
    "    to 1 reenables back the default.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
];

/// DEBUG (enabled by `enable-debug-command`): the subcommands test tools use. SLEEP stops
/// the shard that runs it (a server of one shard: the server).
fn debug(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let sub = a[1];
    let n = a.len();
    if args::is(sub, "HELP") && n == 2 {
        c.out.help("debug", DEBUG_HELP);
    } else if args::is(sub, "SLEEP") && n == 3 {
        // Redis reads the seconds with strtod: the longest prefix that is a number.
        let text = std::str::from_utf8(a[2]).unwrap_or("").trim_start();
        let secs = (1..=text.len().min(64))
            .rev()
            .filter(|&e| text.is_char_boundary(e))
            .find_map(|e| text[..e].parse::<f64>().ok())
            .unwrap_or(0.0);
        if secs.is_finite() && secs > 0.0 {
            std::thread::sleep(std::time::Duration::from_secs_f64(
                secs.min(86_400.0 * 365.0),
            ));
        }
        c.out.ok();
    } else if args::is(sub, "SET-ACTIVE-EXPIRE") && n == 3 {
        // Redis reads the flag with atoi: anything but a non-zero number turns it off.
        c.db.active_expire = crate::num::parse_i64(leading_int(a[2])).unwrap_or(0) != 0;
        c.out.ok();
    } else if args::is(sub, "ERROR") && n == 3 {
        let mut text = b"-".to_vec();
        text.extend(
            a[2].iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        text.extend_from_slice(b"\r\n");
        c.out.out.extend_from_slice(&text);
    } else if args::is(sub, "PROTOCOL") && n == 3 {
        debug_protocol(c, a[2]);
    } else if args::is(sub, "OBJECT") && n == 3 {
        debug_object(c, a[2]);
    } else if (args::is(sub, "LISTPACK") && n == 3)
        || (args::is(sub, "QUICKLIST") && (n == 3 || n == 4))
    {
        debug_layout(c, a);
    } else if args::is(sub, "QUICKLIST-PACKED-THRESHOLD") && n == 3 {
        let size = std::str::from_utf8(a[2])
            .ok()
            .and_then(crate::config::parse_memory)
            .filter(|&s| s <= (1 << 32) - (1 << 20));
        match size {
            Some(s) => {
                c.db.quicklist_packed_threshold = match s {
                    0 => crate::list::PACKED_THRESHOLD,
                    s => s as usize,
                };
                c.out.ok();
            }
            None => c
                .out
                .error(b"ERR argument must be a memory value bigger than 1 and smaller than 4gb"),
        }
    } else {
        let mut msg = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
        msg.extend_from_slice(&sub[..sub.len().min(128)]);
        msg.extend_from_slice(b"'. Try DEBUG HELP.");
        c.out.error(&msg);
    }
}

/// DEBUG OBJECT key: Redis's line (the address is where the value lives here).
fn debug_object(c: &mut Ctx<'_>, key: &[u8]) {
    let now = c.db.now;
    let list_limits = super::list::limits(c.db);
    let lru_lfu =
        c.db.config
            .get("maxmemory-policy")
            .is_some_and(|p| p.contains("lru") || p.contains("lfu"));
    let Some(n) = c.db.dbs[c.session.db].peek_stored(key) else {
        return c.out.error(b"ERR no such key");
    };
    let shared = n.value().shared_int() && !lru_lfu;
    let mut extra = String::new();
    if let Some(Value::List(l @ crate::list::List::Quick(_))) = n.obj() {
        let (nodes, bytes) = l.node_stats();
        extra = format!(
            " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:0 ql_uncompressed_size:{bytes}",
            l.len() as f64 / nodes.max(1) as f64,
            list_limits.fill,
        );
    }
    let line = format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}{extra}",
        (n as *const crate::keyspace::KeyNode).cast::<u8>(),
        if shared { i32::MAX } else { 1 },
        n.value().encoding(),
        crate::rdb::serialized_len(n.value(), list_limits),
        n.access(),
        crate::evict::idle_ms(n.access(), now) / 1000,
    );
    c.out.simple(line.as_bytes());
}

/// DEBUG LISTPACK key / DEBUG QUICKLIST key [0|1]: writes the layout to the standard output,
/// as Redis does, and answers that it did.
fn debug_layout(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let quick = args::is(a[1], "QUICKLIST");
    let now = c.db.now;
    let Some(n) = c.db.dbs[c.session.db].get_untouched(a[2], now) else {
        return c.out.error(b"ERR no such key");
    };
    let v = n.value();
    let text = match v {
        Stored::Value(Value::List(l @ crate::list::List::Quick(_))) if quick => {
            let (nodes, bytes) = l.node_stats();
            format!(
                "{{quicklist nodes:{nodes} count:{} bytes:{bytes}}}",
                l.len()
            )
        }
        _ if quick => return c.out.error(b"ERR Not a quicklist encoded object."),
        _ if v.encoding() == "listpack" || v.encoding() == "listpackex" => {
            format!(
                "{{listpack encoding:{} bytes:{}}}",
                v.encoding(),
                v.heap_bytes()
            )
        }
        _ => return c.out.error(b"ERR Not a listpack encoded object."),
    };
    println!("{text}");
    if quick {
        c.out.simple(b"Quicklist structure printed on stdout");
    } else {
        c.out.simple(b"Listpack structure printed on stdout");
    }
}

/// The digits atoi would read: optional spaces and sign, then digits.
fn leading_int(a: &[u8]) -> &[u8] {
    let a = &a[a.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
    let sign = usize::from(matches!(a.first(), Some(b'-' | b'+')));
    let digits = a[sign..].iter().take_while(|b| b.is_ascii_digit()).count();
    &a[..sign + digits]
}

/// DEBUG PROTOCOL type: a sample reply of each RESP type, as Redis sends them.
fn debug_protocol(c: &mut Ctx<'_>, name: &[u8]) {
    let w = &mut c.out;
    if args::is(name, "STRING") {
        w.bulk(b"Hello World");
    } else if args::is(name, "INTEGER") {
        w.int(12345);
    } else if args::is(name, "DOUBLE") {
        // Redis's sample value, not π.
        #[allow(clippy::approx_constant)]
        w.double(3.141);
    } else if args::is(name, "BIGNUM") {
        w.big_number(b"1234567999999999999999999999999999999");
    } else if args::is(name, "NULL") {
        w.null();
    } else if args::is(name, "ARRAY") || args::is(name, "SET") {
        if args::is(name, "SET") {
            w.set_len(3);
        } else {
            w.array_len(3);
        }
        for j in 0..3 {
            w.int(j);
        }
    } else if args::is(name, "MAP") {
        w.map_len(3);
        for j in 0..3 {
            w.int(j);
            w.bool(j == 1);
        }
    } else if args::is(name, "ATTRIB") {
        if w.proto == crate::resp::Proto::Resp3 {
            w.out.extend_from_slice(b"|1\r\n");
            w.bulk(b"key-popularity");
            w.array_len(2);
            w.bulk(b"key:123");
            w.int(90);
        }
        w.bulk(b"Some real reply following the attribute");
    } else if args::is(name, "PUSH") {
        if w.proto != crate::resp::Proto::Resp3 {
            return w.error(b"ERR RESP2 is not supported by this command");
        }
        w.push_len(2);
        w.bulk(b"server-cpu-usage");
        w.int(42);
        w.bulk(b"Some real reply following the push reply");
    } else if args::is(name, "TRUE") || args::is(name, "FALSE") {
        w.bool(args::is(name, "TRUE"));
    } else if args::is(name, "VERBATIM") {
        w.verbatim(b"txt", b"This is a verbatim\nstring");
    } else {
        w.error(b"ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false");
    }
}

/// LOLWUT [VERSION v]: Redis 7's own version's output, its version line (the art of
/// versions 5 and 6 is not drawn; those answer the same line).
/// SAVE, LASTSAVE and SHUTDOWN concern the server's files and process: a store embedded
/// without a server has neither.
fn needs_server(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let msg = format!(
        "ERR {} is served by the server, not by an embedded store",
        String::from_utf8_lossy(a[0]).to_uppercase()
    );
    c.out.error(&super::sanitize(msg.into_bytes()));
}

fn command(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let served = || {
        super::all()
            .iter()
            .filter_map(|s| docs::entry(s.name))
            .collect::<Vec<_>>()
    };
    let Some(sub) = a.get(1) else {
        let all = served();
        c.out.array_len(all.len());
        for e in all {
            e.write_info(&mut c.out);
        }
        return;
    };
    if args::is(sub, "COUNT") {
        if a.len() != 2 {
            return wrong_arity(&mut c.out, "command|count");
        }
        c.out.int(served().len() as i64);
    } else if args::is(sub, "LIST") {
        command_list(c, a, served());
    } else if args::is(sub, "INFO") {
        if a.len() == 2 {
            let all = served();
            c.out.array_len(all.len());
            for e in all {
                e.write_info(&mut c.out);
            }
            return;
        }
        c.out.array_len(a.len() - 2);
        for n in &a[2..] {
            match docs::lookup_served(n) {
                Some(e) => e.write_info(&mut c.out),
                None => c.out.null(),
            }
        }
    } else if args::is(sub, "DOCS") {
        let found: Vec<_> = if a.len() == 2 {
            served()
        } else {
            a[2..]
                .iter()
                .filter_map(|n| docs::lookup_served(n))
                .collect()
        };
        c.out.map_len(found.len());
        for e in found {
            c.out.bulk(e.name.as_bytes());
            e.write_docs(&mut c.out);
        }
    } else if args::is(sub, "GETKEYS") || args::is(sub, "GETKEYSANDFLAGS") {
        let with_flags = args::is(sub, "GETKEYSANDFLAGS");
        if a.len() < 3 {
            let name = if with_flags {
                "command|getkeysandflags"
            } else {
                "command|getkeys"
            };
            return wrong_arity(&mut c.out, name);
        }
        command_getkeys(c, &a[2..], with_flags);
    } else if args::is(sub, "HELP") && a.len() == 2 {
        c.out.help("command", COMMAND_HELP);
    } else {
        unknown_subcommand(&mut c.out, "command", sub);
    }
}

/// COMMAND HELP's lines (Redis 7.4).
const COMMAND_HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
];

/// COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN pattern]: commands and their
/// subcommands by full name.
fn command_list(c: &mut Ctx<'_>, a: &[&[u8]], served: Vec<&'static docs::Entry>) {
    enum Filter<'x> {
        All,
        Module,
        Category(&'x [u8]),
        Pattern(&'x [u8]),
    }
    let mut filter = Filter::All;
    let mut i = 2;
    while i < a.len() {
        if args::is(a[i], "FILTERBY") && a.len() - 1 - i == 2 {
            filter = if args::is(a[i + 1], "MODULE") {
                Filter::Module
            } else if args::is(a[i + 1], "ACLCAT") {
                Filter::Category(a[i + 2])
            } else if args::is(a[i + 1], "PATTERN") {
                Filter::Pattern(a[i + 2])
            } else {
                return reply_err(&mut c.out, OpError::Syntax);
            };
            i += 3;
        } else {
            return reply_err(&mut c.out, OpError::Syntax);
        }
    }
    let keep = |e: &docs::Entry| match filter {
        Filter::All => true,
        Filter::Module => false,
        Filter::Category(cat) => e.in_category(cat),
        Filter::Pattern(p) => crate::glob::matches(p, e.name.as_bytes(), true),
    };
    let mut names = Vec::new();
    for e in served {
        if keep(e) {
            names.push(e.name);
        }
        for s in e.subcommands().iter().filter_map(|s| docs::entry(s)) {
            if keep(s) {
                names.push(s.name);
            }
        }
    }
    c.out.array_len(names.len());
    for n in names {
        c.out.bulk(n.as_bytes());
    }
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS of the call `t` (Redis's getKeysSubcommandImpl).
fn command_getkeys(c: &mut Ctx<'_>, t: &[&[u8]], with_flags: bool) {
    let entry = super::lookup(t[0]).and_then(|spec| {
        let top = docs::entry(spec.name)?;
        if t.len() == 1 || !top.is_container() {
            return Some(top);
        }
        let full = format!(
            "{}|{}",
            spec.name,
            String::from_utf8_lossy(t[1]).to_lowercase()
        );
        docs::lookup_served(full.as_bytes())
    });
    let Some(entry) = entry else {
        return c.out.error(b"ERR Invalid command specified");
    };
    if !entry.has_keys() {
        return c.out.error(b"ERR The command has no key arguments");
    }
    let arity = entry.arity();
    let argc = t.len() as i64;
    if (arity > 0 && arity != argc) || argc < -arity {
        return c
            .out
            .error(b"ERR Invalid number of arguments specified for command");
    }
    let keys = entry.keys(t);
    if keys.is_empty() {
        if entry.no_mandatory_keys() {
            return c.out.array_len(0);
        }
        return c.out.error(b"ERR Invalid arguments specified for command");
    }
    c.out.array_len(keys.len());
    for (i, flags) in keys {
        if with_flags {
            c.out.array_len(2);
            c.out.bulk(t[i]);
            c.out.set_len(flags.len());
            for f in flags {
                c.out.simple(f.as_bytes());
            }
        } else {
            c.out.bulk(t[i]);
        }
    }
}

/// Counters of one shard that INFO sums over all shards.
#[derive(Clone, Debug, Default)]
pub struct ShardStats {
    /// `(keys, keys with a deadline)` of each logical database.
    pub keyspace: Vec<(usize, usize)>,
    /// Command and hit/miss counters.
    pub stats: crate::Stats,
    /// Keys expired since start.
    pub expired: u64,
    /// Keys evicted for maxmemory since start.
    pub evicted: u64,
    /// `(main, expires)` bucket array bytes of each logical database (MEMORY STATS).
    pub tables: Vec<(usize, usize)>,
    /// Databases rehashing a table now.
    pub rehashing: usize,
    /// Command and error counters (latency histograms only when asked for).
    pub telemetry: crate::telemetry::Snapshot,
    /// Keys watched by some client.
    pub watched_keys: usize,
    /// Hashes with field deadlines, per logical database.
    pub subexpiry: Vec<usize>,
    /// Bytes the Lua state of this store's thread holds (INFO `used_memory_lua`).
    pub lua_memory: usize,
    /// Bytes this store's thread's function Lua state holds.
    pub functions_lua_memory: usize,
}

impl ShardStats {
    /// Adds another shard's counters to these.
    pub fn merge(&mut self, o: &ShardStats) {
        if self.keyspace.len() < o.keyspace.len() {
            self.keyspace.resize(o.keyspace.len(), (0, 0));
        }
        for (a, b) in self.keyspace.iter_mut().zip(&o.keyspace) {
            a.0 += b.0;
            a.1 += b.1;
        }
        self.stats.commands += o.stats.commands;
        self.stats.keyspace_hits += o.stats.keyspace_hits;
        self.stats.keyspace_misses += o.stats.keyspace_misses;
        self.stats.dirty += o.stats.dirty;
        self.expired += o.expired;
        self.evicted += o.evicted;
        if self.tables.len() < o.tables.len() {
            self.tables.resize(o.tables.len(), (0, 0));
        }
        for (a, b) in self.tables.iter_mut().zip(&o.tables) {
            a.0 += b.0;
            a.1 += b.1;
        }
        self.rehashing += o.rehashing;
        self.telemetry.merge(&o.telemetry);
        self.watched_keys += o.watched_keys;
        self.lua_memory += o.lua_memory;
        self.functions_lua_memory += o.functions_lua_memory;
        if self.subexpiry.len() < o.subexpiry.len() {
            self.subexpiry.resize(o.subexpiry.len(), 0);
        }
        for (a, b) in self.subexpiry.iter_mut().zip(&o.subexpiry) {
            *a += b;
        }
    }
}

impl Db {
    /// This store's counters, for INFO over several shards.
    pub fn shard_stats(&self) -> ShardStats {
        self.shard_stats_with(false)
    }

    /// [`Db::shard_stats`], with the latency histograms when `histograms`.
    pub fn shard_stats_with(&self, histograms: bool) -> ShardStats {
        ShardStats {
            telemetry: self.telemetry.snapshot(histograms),
            watched_keys: self.watched_keys(),
            subexpiry: self.hash_ttl_keys.iter().map(|k| k.len()).collect(),
            keyspace: self
                .dbs
                .iter()
                .map(|k| (k.len(), k.expires_len()))
                .collect(),
            stats: self.stats,
            expired: self.dbs.iter().map(|k| k.expired_keys).sum(),
            evicted: self.evictor.evicted_keys,
            tables: (self.dbs.iter())
                .map(|k| {
                    let (main, expires, _) = k.table_overhead();
                    (main, expires)
                })
                .collect(),
            rehashing: self.dbs.iter().filter(|k| k.table_overhead().2).count(),
            lua_memory: crate::script::lua_memory(&self.scripts),
            functions_lua_memory: self.scripts.functions().lua_memory(),
        }
    }

    /// A rough count of the bytes the keyspace holds, for hosts that do not count allocations.
    pub fn estimated_memory(&self) -> u64 {
        self.dbs
            .iter()
            .map(|ks| ks.table_bytes() + ks.iter().map(|n| n.mem_bytes()).sum::<usize>())
            .sum::<usize>() as u64
    }
}

pub(crate) fn human_bytes(n: u64) -> String {
    let units = [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (u, size) in units {
        if n >= size {
            return format!("{:.2}{u}", n as f64 / size as f64);
        }
    }
    format!("{n}B")
}

fn info(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let text = c.db.info(&a[1..]);
    c.out.verbatim(b"txt", text.as_bytes());
}

/// CONFIG HELP's lines (Redis 7.4).
const CONFIG_HELP: &[&str] = &[
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
];

fn config(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let sub = a[1];
    if args::is(sub, "HELP") && a.len() == 2 {
        return c.out.help("config", CONFIG_HELP);
    }
    if args::is(sub, "GET") {
        if a.len() < 3 {
            return wrong_arity(&mut c.out, "config|get");
        }
        let mut pairs: Vec<(&str, String)> = Vec::new();
        for p in &a[2..] {
            for (n, v) in c.db.config.matching(p) {
                if !pairs.iter().any(|(m, _)| *m == n) {
                    pairs.push((n, v.to_string()));
                }
            }
        }
        c.out.map_len(pairs.len());
        for (n, v) in pairs {
            c.out.bulk(n.as_bytes());
            c.out.bulk(v.as_bytes());
        }
    } else if args::is(sub, "SET") {
        if a.len() < 4 {
            return wrong_arity(&mut c.out, "config|set");
        }
        if a.len() % 2 != 0 {
            return c.out.error(b"ERR syntax error");
        }
        let text: Vec<(String, String)> = a[2..]
            .chunks_exact(2)
            .map(|p| {
                (
                    String::from_utf8_lossy(p[0]).into_owned(),
                    String::from_utf8_lossy(p[1]).into_owned(),
                )
            })
            .collect();
        let pairs: Vec<(&str, &str)> = text.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        // (The server repeats a change on its other shards internally: checked once, here.)
        if !c.session.internal {
            let names: Vec<&str> = pairs.iter().map(|p| p.0).collect();
            if let Some(n) = c.db.config.protected_among(&names, c.session.local) {
                let e = crate::config::ConfigError::Protected(n.to_string());
                return c.out.error(e.reply_text().as_bytes());
            }
        }
        match c.db.config.set_many(&pairs) {
            Ok(()) => {
                // `requirepass` sets the default user's password (on every shard the server
                // repeats the change on: the users are shared, and it is the same change).
                if pairs
                    .iter()
                    .any(|p| p.0.eq_ignore_ascii_case("requirepass"))
                {
                    let pass = c.db.config.requirepass.clone();
                    c.db.acl.set_default_password(&pass);
                }
                c.db.sync_acl_config();
                c.db.sync_log_mask();
                let max = c.db.config.telemetry.slowlog_max;
                c.db.telemetry.slowlog_trim(max);
                // A new limit or policy applies at once, as Redis evicts on CONFIG SET.
                c.db.sync_access();
                c.db.evict();
                c.out.ok()
            }
            Err(e @ ConfigError::Unknown(_)) | Err(e) => c
                .out
                .error(super::sanitize(e.reply_text().into_bytes()).as_slice()),
        }
    } else if args::is(sub, "RESETSTAT") {
        c.db.stats = crate::Stats {
            dirty: c.db.stats.dirty,
            ..Default::default()
        };
        c.db.evictor.evicted_keys = 0;
        for ks in &mut c.db.dbs {
            ks.expired_keys = 0;
        }
        c.db.telemetry.reset_stats();
        c.out.ok();
    } else if args::is(sub, "REWRITE") {
        c.out
            .error(b"ERR The server is running without a config file");
    } else {
        unknown_subcommand(&mut c.out, "config", sub);
    }
}

fn time(c: &mut Ctx<'_>, _a: &[&[u8]]) {
    // TIME wants microseconds: read the real clock, not the batch's cached milliseconds.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut b = itoa::Buffer::new();
    c.out.array_len(2);
    c.out.bulk(b.format(now.as_secs()).as_bytes());
    c.out.bulk(b.format(now.subsec_micros()).as_bytes());
}

fn dbsize(c: &mut Ctx<'_>, _a: &[&[u8]]) {
    let n = c.db.dbs[c.session.db].len();
    c.out.int(n as i64);
}

fn flush_mode_ok(a: &[&[u8]]) -> bool {
    match a {
        [_] => true,
        [_, m] => args::is(m, "ASYNC") || args::is(m, "SYNC"),
        _ => false,
    }
}

fn flushdb(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if !flush_mode_ok(a) {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    c.db.flush(Some(c.session.db));
    c.out.ok();
}

fn flushall(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if !flush_mode_ok(a) {
        return reply_err(&mut c.out, OpError::Syntax);
    }
    c.db.flush(None);
    c.out.ok();
}

/// SWAPDB index1 index2: the two databases trade their keys (an O(1) swap of the keyspaces).
fn swapdb(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let index = |arg: &[u8], which: &'static [u8]| match args::int(arg) {
        Ok(i) if i32::try_from(i).is_ok() => Ok(i),
        _ => Err(which),
    };
    let (x, y) = match (
        index(a[1], b"ERR invalid first DB index"),
        index(a[2], b"ERR invalid second DB index"),
    ) {
        (Err(e), _) | (_, Err(e)) => return c.out.error(e),
        (Ok(x), Ok(y)) => (x, y),
    };
    let n = c.db.dbs.len() as i64;
    if !(0..n).contains(&x) || !(0..n).contains(&y) {
        return c.out.error(b"ERR DB index is out of range");
    }
    c.db.swap_databases(x as usize, y as usize);
    c.out.ok();
}

fn memory(c: &mut Ctx<'_>, a: &[&[u8]]) {
    // Unknown subcommands and subcommand arities, as Redis checks them before the command.
    if let Some(Err(e)) = super::lookup(b"memory").map(|s| super::check_subcommand(s, a)) {
        return c.out.out.extend_from_slice(&e);
    }
    let sub = a[1];
    if args::is(sub, "USAGE") {
        if a.len() < 3 {
            return wrong_arity(&mut c.out, "memory|usage");
        }
        match &a[3..] {
            [] => {}
            [o, n] if args::is(o, "SAMPLES") => {
                if let Err(e) = args::int(n) {
                    return reply_err(&mut c.out, e);
                }
            }
            _ => return reply_err(&mut c.out, OpError::Syntax),
        }
        let now = c.db.now;
        match c.db.dbs[c.session.db].get_untouched(a[2], now) {
            Some(n) => c.out.int(n.mem_bytes() as i64),
            None => c.out.null(),
        }
    } else if args::is(sub, "HELP") && a.len() == 2 {
        c.out.help("memory", MEMORY_HELP);
    } else if args::is(sub, "MALLOC-STATS") && a.len() == 2 {
        // Redis's answer for an allocator it cannot ask for a report (all but jemalloc).
        c.out.bulk(b"Stats not supported for the current allocator");
    } else if args::is(sub, "PURGE") && a.len() == 2 {
        // Nothing to give back here; a server returns its allocator's free pages.
        c.out.ok();
    } else if args::is(sub, "STATS") && a.len() == 2 {
        let agg = c.db.shard_stats();
        c.db.memory_stats_with(&agg, &mut c.out);
    } else if args::is(sub, "DOCTOR") && a.len() == 2 {
        let agg = c.db.shard_stats();
        let report = c.db.memory_doctor_with(&agg);
        c.out.verbatim(b"txt", report.as_bytes());
    } else {
        unknown_subcommand(&mut c.out, "memory", sub);
    }
}

/// Memory figures MEMORY STATS and MEMORY DOCTOR report (Redis's redisMemOverhead).
pub(crate) struct Overhead {
    pub(crate) peak: u64,
    pub(crate) total: u64,
    pub(crate) startup: u64,
    pub(crate) rss: u64,
    pub(crate) tables: Vec<(usize, usize)>,
    pub(crate) overhead_total: u64,
    pub(crate) keys: u64,
}

impl Overhead {
    pub(crate) fn net(&self) -> u64 {
        self.total.saturating_sub(self.startup)
    }
    pub(crate) fn dataset(&self) -> u64 {
        self.total.saturating_sub(self.overhead_total)
    }
    pub(crate) fn total_frag(&self) -> f64 {
        self.rss as f64 / self.total.max(1) as f64
    }
    pub(crate) fn total_frag_bytes(&self) -> i64 {
        self.rss as i64 - self.total as i64
    }
}

impl Db {
    pub(crate) fn overhead(&self, agg: &ShardStats) -> Overhead {
        let h = &self.host;
        let total = h.used_memory.unwrap_or_else(|| self.estimated_memory());
        let startup = h.startup_memory.unwrap_or(0).min(total);
        let tables: u64 = agg.tables.iter().map(|(m, e)| (m + e) as u64).sum();
        Overhead {
            peak: h.peak_memory.unwrap_or(total).max(total),
            total,
            startup,
            rss: h.rss.unwrap_or(total),
            tables: agg.tables.clone(),
            overhead_total: startup + tables,
            keys: agg.keyspace.iter().map(|k| k.0 as u64).sum(),
        }
    }

    /// Writes the MEMORY STATS reply with counters summed over shards. The allocator figures
    /// are Redis's for an allocator that reports none of its own: allocated is the memory in
    /// use, active and resident the process's RSS. Replication, clients' buffers, the AOF
    /// buffer, scripts and cluster links are not counted (0).
    pub fn memory_stats_with(&self, agg: &ShardStats, w: &mut ReplyWriter<'_>) {
        let m = self.overhead(agg);
        let dbs: Vec<(usize, &(usize, usize))> = (m.tables.iter().enumerate())
            .filter(|(i, _)| agg.keyspace.get(*i).is_some_and(|k| k.0 > 0))
            .collect();
        w.map_len(31 + dbs.len());
        let int = |w: &mut ReplyWriter<'_>, name: &str, v: i64| {
            w.bulk(name.as_bytes());
            w.int(v);
        };
        int(w, "peak.allocated", m.peak as i64);
        int(w, "total.allocated", m.total as i64);
        int(w, "startup.allocated", m.startup as i64);
        for name in [
            "replication.backlog",
            "clients.slaves",
            "clients.normal",
            "cluster.links",
            "aof.buffer",
            "lua.caches",
            "functions.caches",
        ] {
            int(w, name, 0);
        }
        for (i, (main, expires)) in dbs {
            w.bulk(format!("db.{i}").as_bytes());
            w.map_len(2);
            int(w, "overhead.hashtable.main", *main as i64);
            int(w, "overhead.hashtable.expires", *expires as i64);
        }
        int(w, "overhead.db.hashtable.lut", 0);
        int(w, "overhead.db.hashtable.rehashing", 0);
        int(w, "overhead.total", m.overhead_total as i64);
        int(w, "db.dict.rehashing.count", agg.rehashing as i64);
        int(w, "keys.count", m.keys as i64);
        int(
            w,
            "keys.bytes-per-key",
            m.net().checked_div(m.keys).unwrap_or(0) as i64,
        );
        int(w, "dataset.bytes", m.dataset() as i64);
        let pct = |a: u64, b: u64| {
            if b == 0 {
                0.0
            } else {
                a as f64 * 100.0 / b as f64
            }
        };
        w.bulk(b"dataset.percentage");
        w.double(pct(m.dataset(), m.net()));
        w.bulk(b"peak.percentage");
        w.double(pct(m.total, m.peak));
        int(w, "allocator.allocated", m.total as i64);
        int(w, "allocator.active", m.rss as i64);
        int(w, "allocator.resident", m.rss as i64);
        int(w, "allocator.muzzy", 0);
        w.bulk(b"allocator-fragmentation.ratio");
        w.double(1.0);
        int(w, "allocator-fragmentation.bytes", 0);
        w.bulk(b"allocator-rss.ratio");
        w.double(1.0);
        int(w, "allocator-rss.bytes", 0);
        w.bulk(b"rss-overhead.ratio");
        w.double(1.0);
        int(w, "rss-overhead.bytes", 0);
        w.bulk(b"fragmentation");
        w.double(m.total_frag());
        int(w, "fragmentation.bytes", m.total_frag_bytes());
    }

    /// The MEMORY DOCTOR report (Redis's getMemoryDoctorReport over the figures
    /// [`Db::memory_stats_with`] reports).
    pub fn memory_doctor_with(&self, agg: &ShardStats) -> String {
        let m = self.overhead(agg);
        if m.total < 5 << 20 {
            return "Hi Sam, this instance is empty or is using very little memory, my issues \
                    detector can't be used in these conditions. Please, leave for your mission \
                    on Earth and fill it with some data. The new Sam and I will be back to our \
                    programming as soon as I finished rebooting.\n"
                .to_string();
        }
        let mut issues = String::new();
        if m.peak as f64 / m.total as f64 > 1.5 {
            issues.push_str(DOCTOR_PEAK);
        }
        if m.total_frag() > 1.4 && m.total_frag_bytes() > 10 << 20 {
            issues.push_str(DOCTOR_FRAG);
        }
        if issues.is_empty() {
            return "Hi Sam, I can't find any memory issue in your instance. I can only account \
                    for what occurs on this base.\n"
                .to_string();
        }
        format!(
            "Sam, I detected a few issues in this Redis instance memory implants:\n\n{issues}\
             I'm here to keep you safe, Sam. I want to help you.\n"
        )
    }
}

const DOCTOR_PEAK: &str = " * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n";
const DOCTOR_FRAG: &str = " * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"mimalloc\".\n\n";

/// MEMORY HELP's lines (Redis 7.4).
const MEMORY_HELP: &[&str] = &[
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
];
