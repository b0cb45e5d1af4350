//! Server commands: COMMAND, INFO, CONFIG, TIME, DBSIZE, FLUSHDB, FLUSHALL, MEMORY.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::strings::reply_err;
use super::{args, cmd, flags::*, unknown_subcommand, wrong_arity, CommandSpec, Ctx};
use crate::config::ConfigError;
use crate::error::OpError;
use crate::resp::ReplyWriter;
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
];

/// `(group, since)` of every Redis command, from Redis's own command facts.
fn docs_facts() -> &'static HashMap<&'static str, (&'static str, &'static str)> {
    static FACTS: OnceLock<HashMap<&'static str, (&'static str, &'static str)>> = OnceLock::new();
    FACTS.get_or_init(|| {
        include_str!("redis-commands.tsv")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let c: Vec<&str> = l.split('\t').collect();
                Some((*c.first()?, (*c.get(6)?, *c.get(7)?)))
            })
            .collect()
    })
}

fn write_command_info(w: &mut ReplyWriter<'_>, s: &CommandSpec) {
    w.array_len(10);
    w.bulk(s.name.as_bytes());
    w.int(i64::from(s.arity));
    let names: Vec<&str> = super::flags::NAMES
        .iter()
        .filter(|(bit, _)| s.flags & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    w.set_len(names.len());
    for n in names {
        w.simple(n.as_bytes());
    }
    w.int(i64::from(s.first_key));
    w.int(i64::from(s.last_key));
    w.int(i64::from(s.key_step));
    w.set_len(0); // ACL categories
    w.array_len(0); // tips
    w.array_len(0); // key specs
    w.array_len(0); // subcommands
}

fn write_command_docs(w: &mut ReplyWriter<'_>, s: &CommandSpec) {
    let (group, since) = docs_facts()
        .get(s.name)
        .copied()
        .unwrap_or(("generic", "1.0.0"));
    w.bulk(s.name.as_bytes());
    w.map_len(3);
    w.bulk(b"summary");
    w.bulk(b"");
    w.bulk(b"since");
    w.bulk(since.as_bytes());
    w.bulk(b"group");
    w.bulk(group.as_bytes());
}

fn command(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let all = super::all();
    let Some(sub) = a.get(1) else {
        c.out.array_len(all.len());
        for s in all {
            write_command_info(&mut c.out, s);
        }
        return;
    };
    if args::is(sub, "COUNT") {
        if a.len() != 2 {
            return wrong_arity(&mut c.out, "command|count");
        }
        c.out.int(all.len() as i64);
    } else if args::is(sub, "LIST") {
        c.out.array_len(all.len());
        for s in all {
            c.out.bulk(s.name.as_bytes());
        }
    } else if args::is(sub, "INFO") {
        let names: Vec<&[u8]> = if a.len() > 2 {
            a[2..].to_vec()
        } else {
            all.iter().map(|s| s.name.as_bytes()).collect()
        };
        c.out.array_len(names.len());
        for n in names {
            match super::lookup(n) {
                Some(s) => write_command_info(&mut c.out, s),
                None => c.out.null_array(),
            }
        }
    } else if args::is(sub, "DOCS") {
        let specs: Vec<&CommandSpec> = if a.len() > 2 {
            a[2..].iter().filter_map(|n| super::lookup(n)).collect()
        } else {
            all.to_vec()
        };
        c.out.map_len(specs.len());
        for s in specs {
            write_command_docs(&mut c.out, s);
        }
    } else if args::is(sub, "GETKEYS") {
        if a.len() < 3 {
            return wrong_arity(&mut c.out, "command|getkeys");
        }
        let target = &a[2..];
        let Some(s) = super::lookup(target[0]) else {
            return c.out.error(b"ERR Invalid command specified");
        };
        if !s.arity_ok(target.len()) {
            return c
                .out
                .error(b"ERR Invalid number of arguments specified for command");
        }
        let keys: Vec<usize> = s.key_indices(target.len()).collect();
        if keys.is_empty() {
            return c.out.error(b"ERR The command has no key arguments");
        }
        c.out.array_len(keys.len());
        for i in keys {
            c.out.bulk(target[i]);
        }
    } else {
        unknown_subcommand(&mut c.out, "command", sub);
    }
}

/// Sections INFO prints by default, in order.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "stats",
    "replication",
    "cpu",
    "keyspace",
];

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
        self.expired += o.expired;
        self.evicted += o.evicted;
    }
}

impl Db {
    /// This store's counters, for INFO over several shards.
    pub fn shard_stats(&self) -> ShardStats {
        ShardStats {
            keyspace: self
                .dbs
                .iter()
                .map(|k| (k.len(), k.expires_len()))
                .collect(),
            stats: self.stats,
            expired: self.dbs.iter().map(|k| k.expired_keys).sum(),
            evicted: self.evictor.evicted_keys,
        }
    }

    /// The text of one INFO section (with its `# Title` line), or `None` if unknown.
    pub fn info_section(&self, name: &str) -> Option<String> {
        self.info_section_with(name, &self.shard_stats())
    }

    /// Like [`Db::info_section`], with counters summed over shards.
    pub fn info_section_with(&self, name: &str, agg: &ShardStats) -> Option<String> {
        use std::fmt::Write;
        let mut s = String::new();
        let h = &self.host;
        match name {
            "server" => {
                let uptime = self.now.saturating_sub(h.started_ms) / 1000;
                let _ = write!(
                    s,
                    "# Server\r\nredis_version:{}\r\nredis_mode:standalone\r\nkvstore_version:{}\r\nos:{}\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:10\r\nshards:{}\r\n",
                    crate::REDIS_VERSION,
                    env!("CARGO_PKG_VERSION"),
                    std::env::consts::OS,
                    std::process::id(),
                    h.tcp_port,
                    uptime,
                    uptime / 86400,
                    h.shards,
                );
            }
            "clients" => {
                let _ = write!(
                    s,
                    "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n",
                    h.connected_clients,
                    self.config.get("maxclients").unwrap_or("0"),
                    h.blocked_clients,
                );
            }
            "memory" => {
                let used = h.used_memory.unwrap_or_else(|| self.estimated_memory());
                let _ = write!(
                    s,
                    "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:{}\r\nmem_allocator:{}\r\nlazyfree_pending_objects:{}\r\n",
                    human_bytes(used),
                    h.rss.unwrap_or(0),
                    self.config.maxmemory,
                    self.config.get("maxmemory-policy").unwrap_or("noeviction"),
                    if h.used_memory.is_some() { "mimalloc" } else { "libc" },
                    crate::lazyfree::pending(),
                );
            }
            "stats" => {
                let expired = agg.expired;
                let _ = write!(
                    s,
                    "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nexpired_keys:{expired}\r\nevicted_keys:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\nmoved_connections:{}\r\nlazyfreed_objects:{}\r\n",
                    h.total_connections, agg.stats.commands, agg.evicted, agg.stats.keyspace_hits, agg.stats.keyspace_misses, h.moved_connections, crate::lazyfree::freed(),
                );
            }
            "replication" => s.push_str("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"),
            "cpu" => {
                s.push_str("# CPU\r\n");
            }
            "keyspace" => {
                s.push_str("# Keyspace\r\n");
                for (i, &(keys, expires)) in agg.keyspace.iter().enumerate() {
                    if keys > 0 {
                        let _ = write!(s, "db{i}:keys={keys},expires={expires},avg_ttl=0\r\n");
                    }
                }
            }
            _ => return None,
        }
        Some(s)
    }

    /// A rough count of the bytes the keyspace holds, for hosts that do not count allocations.
    pub fn estimated_memory(&self) -> u64 {
        self.dbs
            .iter()
            .map(|ks| {
                ks.table_bytes()
                    + ks.expires_entry_bytes()
                    + ks.iter().map(|n| n.mem_bytes()).sum::<usize>()
            })
            .sum::<usize>() as u64
    }

    /// INFO text for the requested sections (empty = default sections).
    pub fn info(&self, sections: &[&[u8]]) -> String {
        self.info_with(sections, &self.shard_stats())
    }

    /// INFO text with counters summed over shards.
    pub fn info_with(&self, sections: &[&[u8]], agg: &ShardStats) -> String {
        let mut wanted: Vec<String> = sections
            .iter()
            .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
            .collect();
        if wanted.is_empty()
            || wanted
                .iter()
                .any(|w| w == "default" || w == "all" || w == "everything")
        {
            wanted = SECTIONS.iter().map(|s| s.to_string()).collect();
        }
        let parts: Vec<String> = wanted
            .iter()
            .filter_map(|w| self.info_section_with(w, agg))
            .collect();
        parts.join("\r\n")
    }
}

fn human_bytes(n: u64) -> String {
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

fn config(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let sub = a[1];
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
        match c.db.config.set_many(&pairs) {
            Ok(()) => {
                c.db.sync_log_mask();
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
        c.db.stats = Default::default();
        c.db.evictor.evicted_keys = 0;
        for ks in &mut c.db.dbs {
            ks.expired_keys = 0;
        }
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
    } else {
        unknown_subcommand(&mut c.out, "memory", sub);
    }
}
