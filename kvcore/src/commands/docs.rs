//! What COMMAND INFO, DOCS, LIST, GETKEYS and GETKEYSANDFLAGS say of each command: Redis
//! 7.4's own facts, written by `scripts/gen-command-docs.py` from Redis's command JSON files
//! into `redis-docs.txt` the way Redis derives them at start-up (implicit ACL categories, the
//! legacy key range, `movablekeys`). Only what this server serves is shown: its commands and,
//! of container commands, the subcommands in [`SERVED_SUBCOMMANDS`].
//!
//! The file is one token per line (see the script); the replies are written from the tokens,
//! so RESP2 and RESP3 get Redis's shapes (maps, sets, statuses) from one source.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use crate::resp::ReplyWriter;

static DATA: &str = include_str!("redis-docs.txt");

/// Subcommands served, by full name. A server test checks this list against what the server
/// answers (every other subcommand of a served container is an unknown subcommand).
pub const SERVED_SUBCOMMANDS: &[&str] = &[
    "acl|cat",
    "acl|deluser",
    "acl|dryrun",
    "acl|genpass",
    "acl|getuser",
    "acl|help",
    "acl|list",
    "acl|load",
    "acl|log",
    "acl|save",
    "acl|setuser",
    "acl|users",
    "acl|whoami",
    "client|getname",
    "client|help",
    "client|id",
    "client|info",
    "client|kill",
    "client|list",
    "client|no-evict",
    "client|no-touch",
    "client|pause",
    "client|reply",
    "client|setinfo",
    "client|setname",
    "client|unblock",
    "client|unpause",
    "command|count",
    "command|docs",
    "command|getkeys",
    "command|getkeysandflags",
    "command|help",
    "command|info",
    "command|list",
    "config|get",
    "config|help",
    "config|resetstat",
    "config|rewrite",
    "config|set",
    "function|delete",
    "function|dump",
    "function|flush",
    "function|help",
    "function|kill",
    "function|list",
    "function|load",
    "function|restore",
    "function|stats",
    "latency|doctor",
    "latency|graph",
    "latency|help",
    "latency|histogram",
    "latency|history",
    "latency|latest",
    "latency|reset",
    "memory|doctor",
    "memory|help",
    "memory|malloc-stats",
    "memory|purge",
    "memory|stats",
    "memory|usage",
    "object|encoding",
    "object|freq",
    "object|help",
    "object|idletime",
    "object|refcount",
    "pubsub|channels",
    "pubsub|help",
    "pubsub|numpat",
    "pubsub|numsub",
    "pubsub|shardchannels",
    "pubsub|shardnumsub",
    "script|debug",
    "script|exists",
    "script|flush",
    "script|help",
    "script|kill",
    "script|load",
    "slowlog|get",
    "slowlog|help",
    "slowlog|len",
    "slowlog|reset",
    "xgroup|create",
    "xgroup|createconsumer",
    "xgroup|delconsumer",
    "xgroup|destroy",
    "xgroup|help",
    "xgroup|setid",
    "xinfo|consumers",
    "xinfo|groups",
    "xinfo|help",
    "xinfo|stream",
];

/// Key spec flags, in Redis's reply order (`addReplyFlagsForKeyArgs`).
const KEY_FLAGS: &[&str] = &[
    "RO",
    "RW",
    "OW",
    "RM",
    "access",
    "update",
    "insert",
    "delete",
    "not_key",
    "incomplete",
    "variable_flags",
];
const RO: u16 = 1;
const RW: u16 = 1 << 1;
const OW: u16 = 1 << 2;
/// Key spec flag: the command reads the key's value (ACL read permission).
pub(crate) const ACCESS: u16 = 1 << 4;
/// Key spec flag: the command changes the key's value (ACL write permission).
pub(crate) const UPDATE: u16 = 1 << 5;
/// Key spec flag: the command adds a value (ACL write permission).
pub(crate) const INSERT: u16 = 1 << 6;
/// Key spec flag: the command deletes the key or part of it (ACL write permission).
pub(crate) const DELETE: u16 = 1 << 7;
const NOT_KEY: u16 = 1 << 8;
const INCOMPLETE: u16 = 1 << 9;
const VARIABLE_FLAGS: u16 = 1 << 10;

/// Where a key spec starts looking.
#[derive(Debug)]
enum Begin {
    Index(i64),
    Keyword(i64, &'static str),
    Unknown,
}

/// How a key spec finds its keys from there.
#[derive(Debug)]
enum Find {
    Range { last: i64, step: i64, limit: i64 },
    Keynum { idx: i64, first: i64, step: i64 },
    Unknown,
}

#[derive(Debug)]
struct KeySpec {
    begin: Begin,
    find: Find,
    flags: u16,
}

/// One command's facts.
#[derive(Debug)]
pub struct Entry {
    /// Full name, lower case (`config|get` for a subcommand).
    pub name: &'static str,
    container: bool,
    own_key_finder: bool,
    /// ACL categories, `@read,@string,@fast`.
    categories: &'static str,
    key_specs: Vec<KeySpec>,
    info: &'static str,
    docs_fields: usize,
    docs: &'static str,
    subcommands: Vec<&'static str>,
}

fn parse_spec(line: &'static str) -> Option<KeySpec> {
    let mut parts = line.splitn(3, ';');
    let (b, f, flags) = (parts.next()?, parts.next()?, parts.next()?);
    let nums = |s: &str| -> Vec<i64> { s.split(',').filter_map(|n| n.parse().ok()).collect() };
    let begin = match b.split_at(1) {
        ("i", pos) => Begin::Index(pos.parse().ok()?),
        ("w", rest) => {
            let (from, kw) = rest.split_once(',')?;
            Begin::Keyword(from.parse().ok()?, kw)
        }
        _ => Begin::Unknown,
    };
    let find = match f.split_at(1) {
        ("r", n) => match nums(n)[..] {
            [last, step, limit] => Find::Range { last, step, limit },
            _ => return None,
        },
        ("n", n) => match nums(n)[..] {
            [idx, first, step] => Find::Keynum { idx, first, step },
            _ => return None,
        },
        _ => Find::Unknown,
    };
    let flags = flags
        .split(',')
        .filter_map(|f| KEY_FLAGS.iter().position(|k| *k == f))
        .fold(0u16, |acc, i| acc | 1 << i);
    Some(KeySpec { begin, find, flags })
}

fn table() -> &'static HashMap<&'static str, Entry> {
    static TABLE: OnceLock<HashMap<&'static str, Entry>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: HashMap<&'static str, Entry> = HashMap::new();
        let mut order = Vec::new();
        let mut at = 0;
        let mut cur: Option<Entry> = None;
        // Byte offsets where the current entry's INFO and DOCS tokens start (and the length
        // of the `D` line before the latter).
        let (mut info_at, mut docs_at) = (None, None);
        type At = Option<usize>;
        let finish = |e: Option<Entry>, info_at: At, docs_at: Option<(usize, usize)>, end| {
            e.map(|mut e| {
                if let (Some(i), Some((d, dn))) = (info_at, docs_at) {
                    e.info = &DATA[i..d - dn];
                    e.docs = &DATA[d..end];
                }
                e
            })
        };
        for line in DATA.split_inclusive('\n') {
            let start = at;
            at += line.len();
            let text = line.trim_end_matches('\n');
            if let Some(name) = text.strip_prefix('>') {
                if let Some(e) = finish(cur.take(), info_at, docs_at, start) {
                    order.push(e.name);
                    table.insert(e.name, e);
                }
                cur = Some(Entry {
                    name,
                    container: false,
                    own_key_finder: false,
                    categories: "",
                    key_specs: Vec::new(),
                    info: "",
                    docs_fields: 0,
                    docs: "",
                    subcommands: Vec::new(),
                });
                (info_at, docs_at) = (None, None);
                continue;
            }
            let Some(e) = cur.as_mut() else { continue };
            if info_at.is_none() {
                match text.split_at(text.len().min(1)) {
                    ("+", _) => e.container = true,
                    ("G", _) => e.own_key_finder = true,
                    ("c", cats) => e.categories = cats,
                    ("K", spec) => e.key_specs.extend(parse_spec(spec)),
                    ("I", _) => info_at = Some(at),
                    _ => {}
                }
            } else if docs_at.is_none() {
                if let Some(n) = text.strip_prefix('D').and_then(|n| n.parse().ok()) {
                    e.docs_fields = n;
                    docs_at = Some((at, line.len()));
                }
            }
        }
        if let Some(e) = finish(cur, info_at, docs_at, DATA.len()) {
            order.push(e.name);
            table.insert(e.name, e);
        }
        for name in order {
            if let Some((parent, _)) = name.split_once('|') {
                if SERVED_SUBCOMMANDS.contains(&name) {
                    if let Some(p) = table.get_mut(parent) {
                        p.subcommands.push(name);
                    }
                }
            }
        }
        table
    })
}

/// Whether `name` is a container command we serve subcommands of (CONFIG, CLIENT ...).
pub fn is_container(name: &str) -> bool {
    SERVED_SUBCOMMANDS
        .iter()
        .any(|s| s.split_once('|').is_some_and(|(p, _)| p == name))
}

/// The facts of a command by full name (lower case), served or not.
pub fn entry(name: &str) -> Option<&'static Entry> {
    table().get(name)
}

/// Every command's full name as the facts list them (a container before its subcommands).
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    DATA.lines().filter_map(|l| l.strip_prefix('>'))
}

/// Looks up a command the way COMMAND INFO and DOCS do: `name` or `container|sub`, any case;
/// `None` unless this server serves it.
pub fn lookup_served(name: &[u8]) -> Option<&'static Entry> {
    let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    let (base, sub) = match lower.split_once('|') {
        Some((b, s)) if !s.contains('|') => (b, Some(s)),
        Some(_) => return None,
        None => (lower.as_str(), None),
    };
    let top = super::lookup(base.as_bytes())?;
    let e = entry(top.name)?;
    match sub {
        None => Some(e),
        Some(_) if !e.container => None,
        Some(_) => e
            .subcommands
            .iter()
            .find(|s| **s == lower)
            .and_then(|s| entry(s)),
    }
}

fn unescape(s: &str) -> Cow<'_, str> {
    if !s.contains('\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn write_tokens(w: &mut ReplyWriter<'_>, tokens: &str) {
    for line in tokens.lines() {
        let (kind, v) = line.split_at(line.len().min(1));
        let n = || v.parse::<usize>().unwrap_or(0);
        match kind {
            "m" => w.map_len(n()),
            "a" => w.array_len(n()),
            "s" => w.set_len(n()),
            "i" => w.int(v.parse().unwrap_or(0)),
            "t" => w.simple(unescape(v).as_bytes()),
            _ => w.bulk(unescape(v).as_bytes()),
        }
    }
}

impl Entry {
    /// Writes the COMMAND INFO reply of this command.
    pub fn write_info(&self, w: &mut ReplyWriter<'_>) {
        w.array_len(10);
        w.bulk(self.name.as_bytes());
        write_tokens(w, self.info);
        if self.container {
            w.array_len(self.subcommands.len());
            for s in self.subcommands.iter().filter_map(|s| entry(s)) {
                s.write_info(w);
            }
        } else {
            w.set_len(0);
        }
    }

    /// Writes the COMMAND DOCS map of this command (without its name).
    pub fn write_docs(&self, w: &mut ReplyWriter<'_>) {
        w.map_len(self.docs_fields + usize::from(self.container));
        write_tokens(w, self.docs);
        if self.container {
            w.bulk(b"subcommands");
            w.map_len(self.subcommands.len());
            for s in self.subcommands.iter().filter_map(|s| entry(s)) {
                w.bulk(s.name.as_bytes());
                s.write_docs(w);
            }
        }
    }

    /// Whether this is a container command (CONFIG, CLIENT ...).
    pub fn is_container(&self) -> bool {
        self.container
    }

    /// Redis's arity (negative: at least that many arguments).
    pub fn arity(&self) -> i64 {
        (self.info.lines().next())
            .and_then(|l| l.strip_prefix('i'))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Whether COMMAND INFO lists `flag` (lower case, as `admin` or `write`) among its flags.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.info.lines().any(|l| l.strip_prefix('t') == Some(flag))
    }

    /// Whether the command may be called without keys (the `no_mandatory_keys` flag).
    pub fn no_mandatory_keys(&self) -> bool {
        self.info.lines().any(|l| l == "tno_mandatory_keys")
    }

    /// Served subcommands, by full name.
    pub fn subcommands(&self) -> &[&'static str] {
        &self.subcommands
    }

    /// Whether the command is in ACL category `cat` (without the `@`, any case).
    pub fn in_category(&self, cat: &[u8]) -> bool {
        self.categories
            .split(',')
            .any(|c| c.as_bytes()[1..].eq_ignore_ascii_case(cat))
    }

    /// The ACL categories, without their `@`.
    pub(crate) fn categories(&self) -> impl Iterator<Item = &'static str> {
        let cats: &'static str = self.categories;
        cats.split(',').filter_map(|c| c.strip_prefix('@'))
    }

    /// Whether COMMAND GETKEYS may find keys in a call (Redis's doesCommandHaveKeys).
    pub fn has_keys(&self) -> bool {
        self.own_key_finder || self.key_specs.iter().any(|s| s.flags & NOT_KEY == 0)
    }

    /// The keys of a call (`a[0]` is the command name) with the flag names of each, as
    /// COMMAND GETKEYSANDFLAGS finds them (Redis's getKeysFromCommandWithSpecs): none when
    /// the arguments do not name keys the way the command expects.
    pub fn keys(&self, a: &[&[u8]]) -> Vec<(usize, Vec<&'static str>)> {
        let names = |flags: u16| -> Vec<&'static str> {
            (KEY_FLAGS.iter().enumerate())
                .filter(|(i, _)| flags & (1 << i) != 0)
                .map(|(_, n)| *n)
                .collect()
        };
        (self.key_refs(a).into_iter())
            .map(|(i, f)| (i, names(f)))
            .collect()
    }

    /// [`Entry::keys`] with each key's flags as bits ([`ACCESS`], [`UPDATE`] ...).
    pub(crate) fn key_refs(&self, a: &[&[u8]]) -> Vec<(usize, u16)> {
        let plain = self.key_specs.iter().any(|s| s.flags & NOT_KEY == 0);
        let varflags = self.key_specs.iter().any(|s| s.flags & VARIABLE_FLAGS != 0);
        if plain && !varflags {
            if let Some(keys) = self.keys_by_specs(a) {
                return keys;
            }
        }
        if !self.own_key_finder {
            return Vec::new();
        }
        own_keys(self.name, a)
    }

    /// Redis's getKeysUsingKeySpecs.
    fn keys_by_specs(&self, a: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
        let argc = a.len() as i64;
        let mut keys = Vec::new();
        for spec in &self.key_specs {
            if spec.flags & NOT_KEY != 0 {
                continue;
            }
            let first = match spec.begin {
                Begin::Index(pos) => pos,
                Begin::Keyword(from, kw) => {
                    let (start, end) = if from > 0 {
                        (from, argc - 1)
                    } else {
                        (argc + from, 1)
                    };
                    let mut i = start;
                    let mut found = 0;
                    loop {
                        if i >= argc || i < 1 {
                            break;
                        }
                        if a[i as usize].eq_ignore_ascii_case(kw.as_bytes()) {
                            found = i + 1;
                            break;
                        }
                        if i == end {
                            break;
                        }
                        i += if start <= end { 1 } else { -1 };
                    }
                    if found == 0 {
                        continue;
                    }
                    found
                }
                Begin::Unknown => return None,
            };
            let (first, last, step) = match spec.find {
                Find::Range { last, step, limit } => {
                    let last = if last >= 0 {
                        first + last
                    } else if limit == 0 {
                        argc + last
                    } else {
                        first + ((argc - first) / limit + last)
                    };
                    (first, last, step)
                }
                Find::Keynum {
                    idx,
                    first: off,
                    step,
                } => {
                    let at = first + idx;
                    if idx >= argc || at >= argc || at < 0 {
                        return None;
                    }
                    let n = super::args::int(a[at as usize]).ok().filter(|n| *n >= 0)?;
                    let first = first + off;
                    (first, first.checked_add(n)? - 1, step)
                }
                Find::Unknown => return None,
            };
            if last >= argc || last < first || first >= argc {
                return None;
            }
            let mut i = first;
            while i <= last {
                keys.push((i as usize, spec.flags));
                i += step.max(1);
            }
            if spec.flags & INCOMPLETE != 0 {
                return None;
            }
        }
        Some(keys)
    }
}

/// Keys of the commands whose specs are incomplete or whose flags vary, found the way their
/// Redis key functions find them (sortGetKeys, migrateGetKeys, setGetKeys ...). Other
/// commands with key functions of their own take a `numkeys`, which their specs already
/// read; when the specs fail, so do those functions (no keys).
fn own_keys(name: &str, a: &[&[u8]]) -> Vec<(usize, u16)> {
    let is = |i: usize, w: &str| a[i].eq_ignore_ascii_case(w.as_bytes());
    match name {
        "sort_ro" => vec![(1, RO | ACCESS)],
        "sort" => {
            let mut keys = vec![(1, RO | ACCESS)];
            let mut store = None;
            let mut i = 2;
            while i < a.len() {
                if is(i, "limit") {
                    i += 2;
                } else if is(i, "store") && i + 1 < a.len() {
                    store = Some(i + 1);
                } else if is(i, "get") || is(i, "by") {
                    i += 1;
                }
                i += 1;
            }
            keys.extend(store.map(|s| (s, OW | UPDATE)));
            keys
        }
        "migrate" => {
            let (mut first, mut num) = (3, 1);
            if a.len() > 6 {
                let mut i = 6;
                while i < a.len() {
                    if is(i, "keys") {
                        if a[3].is_empty() {
                            first = i + 1;
                            num = a.len() - first;
                        } else {
                            num = 0;
                        }
                        break;
                    }
                    if is(i, "auth") {
                        i += 1;
                    } else if is(i, "auth2") {
                        i += 2;
                    }
                    i += 1;
                }
            }
            (first..first + num)
                .map(|i| (i, RW | ACCESS | DELETE))
                .collect()
        }
        "georadius" | "georadiusbymember" => {
            let mut keys = vec![(1, 0)];
            let mut stored = None;
            let mut i = 5;
            while i < a.len() {
                if (is(i, "store") || is(i, "storedist")) && i + 1 < a.len() {
                    stored = Some(i + 1);
                    i += 1;
                }
                i += 1;
            }
            keys.extend(stored.map(|s| (s, 0)));
            keys
        }
        "set" => {
            let get = a.iter().skip(3).any(|x| x.eq_ignore_ascii_case(b"get"));
            vec![(
                1,
                if get {
                    RW | ACCESS | UPDATE
                } else {
                    OW | UPDATE
                },
            )]
        }
        "bitfield" => {
            let mut readonly = true;
            let mut i = 2;
            while i < a.len() {
                let rem = a.len() - i - 1;
                if is(i, "get") && rem >= 2 {
                    i += 2;
                } else if (is(i, "set") || is(i, "incrby")) && rem >= 3 {
                    readonly = false;
                    break;
                } else if is(i, "overflow") && rem >= 1 {
                    i += 1;
                } else {
                    readonly = false;
                    break;
                }
                i += 1;
            }
            vec![(
                1,
                if readonly {
                    RO | ACCESS
                } else {
                    RW | ACCESS | UPDATE
                },
            )]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::Proto;

    #[test]
    fn every_served_command_has_redis_facts() {
        for s in super::super::all() {
            assert!(entry(s.name).is_some(), "no facts for {}", s.name);
        }
        for s in SERVED_SUBCOMMANDS {
            let e = entry(s).unwrap_or_else(|| panic!("no facts for {s}"));
            let (parent, _) = s.split_once('|').unwrap();
            assert!(entry(parent).unwrap().subcommands.contains(&e.name));
        }
    }

    #[test]
    fn get_info_and_docs_as_redis_writes_them() {
        let mut out = Vec::new();
        entry("get")
            .unwrap()
            .write_info(&mut ReplyWriter::new(&mut out, Proto::Resp2));
        // Redis 7.4's COMMAND INFO GET (one element of it).
        let want = "*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
             *3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n\
             +access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n\
             *2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n\
             $4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n\
             *0\r\n";
        assert_eq!(String::from_utf8_lossy(&out), want);
    }

    #[test]
    fn keys_and_flags_as_redis_finds_them() {
        let keys = |name: &str, a: &[&str]| {
            let e = entry(name).unwrap();
            let a: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
            e.keys(&a)
        };
        assert_eq!(
            keys("mset", &["mset", "a", "1", "b", "2"]),
            vec![(1, vec!["OW", "update"]), (3, vec!["OW", "update"])]
        );
        assert_eq!(
            keys(
                "zunionstore",
                &["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"]
            ),
            vec![
                (1, vec!["OW", "update"]),
                (3, vec!["RO", "access"]),
                (4, vec!["RO", "access"])
            ]
        );
        // numkeys larger than the keys given: no keys.
        assert!(keys("zunionstore", &["zunionstore", "d", "3", "a", "b"]).is_empty());
        assert_eq!(
            keys("set", &["set", "k", "v", "GET"]),
            vec![(1, vec!["RW", "access", "update"])]
        );
        assert_eq!(
            keys("sort", &["sort", "k", "BY", "w_*", "STORE", "d"]),
            vec![(1, vec!["RO", "access"]), (5, vec!["OW", "update"])]
        );
        assert_eq!(
            keys("bitfield", &["bitfield", "k", "GET", "u8", "0"]),
            vec![(1, vec!["RO", "access"])]
        );
        assert_eq!(
            keys("lmove", &["lmove", "a", "b", "LEFT", "RIGHT"]),
            vec![
                (1, vec!["RW", "access", "delete"]),
                (2, vec!["RW", "insert"])
            ]
        );
    }
}
