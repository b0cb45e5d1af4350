//! Configuration parameters: what `CONFIG GET` shows and `CONFIG SET` changes.
//!
//! One static table describes every parameter (name, aliases, kind, default). Values are kept
//! as typed fields where the store reads them on a hot path, and as text otherwise; the server
//! reads the same table from its command line and config file, so names are made once.

use crate::glob;

/// How a parameter's text is checked and normalized.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A signed integer within bounds.
    Int(i64, i64),
    /// A byte count: accepts `1gb`, `512mb`, `100k` ...; shown in bytes.
    Memory,
    /// `yes` or `no`.
    Bool,
    /// One of the listed words.
    Enum(&'static [&'static str]),
    /// Free text.
    Text,
    /// Keyspace event classes (`notify-keyspace-events`): shown in canonical form.
    Events,
    /// Space-separated percentiles, each 0 to 100 (`latency-tracking-info-percentiles`).
    Percentiles,
    /// `save`'s points: pairs of seconds and changes, or nothing.
    SavePoints,
    /// A byte count or a percentage (`maxmemory-clients`: `0`, `1gb`, `10%`).
    MemoryOrPercent,
    /// Three OOM score adjustments, each -2000 to 2000 (`oom-score-adj-values`).
    OomScores,
    /// A host name: letters, digits, hyphens and dots, or nothing.
    Hostname,
}

/// Parameters of features this server does not have: any value but the default is refused,
/// with the reason, at start-up and by CONFIG SET, rather than silently not acting on it.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("tls-port", "TLS is not supported by this server"),
    ("tls-replication", "TLS is not supported by this server"),
    ("tls-cluster", "TLS is not supported by this server"),
    (
        "cluster-enabled",
        "cluster mode is not supported by this server",
    ),
    (
        "unixsocket",
        "Unix sockets are not supported by this server",
    ),
    (
        "syslog-enabled",
        "syslog is not supported by this server (logfile is)",
    ),
];

/// One parameter's description.
pub struct Param {
    /// Canonical name.
    pub name: &'static str,
    /// Other accepted names (e.g. the old `ziplist` spellings).
    pub aliases: &'static [&'static str],
    /// Value kind.
    pub kind: Kind,
    /// Default value text.
    pub default: &'static str,
    /// Can be changed at run time.
    pub mutable: bool,
}

const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];
const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning", "nothing"];
const I32: Kind = Kind::Int(0, i32::MAX as i64);

macro_rules! p {
    ($name:literal, $kind:expr, $default:literal) => {
        p!($name, [], $kind, $default, true)
    };
    ($name:literal, [$($alias:literal),*], $kind:expr, $default:literal, $mutable:expr) => {
        Param { name: $name, aliases: &[$($alias),*], kind: $kind, default: $default, mutable: $mutable }
    };
}

/// Every parameter we have.
pub static PARAMS: &[Param] = &[
    p!("port", [], Kind::Int(0, 65535), "6379", false),
    p!("bind", [], Kind::Text, "127.0.0.1", false),
    p!("databases", [], Kind::Int(1, i32::MAX as i64), "16", false),
    p!("requirepass", Kind::Text, ""),
    p!("protected-mode", Kind::Bool, "yes"),
    p!(
        "enable-debug-command",
        [],
        Kind::Enum(&["no", "yes", "local"]),
        "no",
        false
    ),
    p!(
        "enable-protected-configs",
        [],
        Kind::Enum(&["no", "yes", "local"]),
        "no",
        false
    ),
    p!("maxclients", Kind::Int(1, i32::MAX as i64), "10000"),
    p!("maxmemory", Kind::Memory, "0"),
    p!("maxmemory-policy", Kind::Enum(POLICIES), "noeviction"),
    p!("maxmemory-samples", Kind::Int(1, 64), "5"),
    p!("maxmemory-eviction-tenacity", Kind::Int(0, 100), "10"),
    p!("lfu-log-factor", I32, "10"),
    p!("lfu-decay-time", I32, "1"),
    p!("lazyfree-lazy-eviction", Kind::Bool, "no"),
    p!("proto-max-bulk-len", Kind::Memory, "536870912"),
    p!("client-query-buffer-limit", Kind::Memory, "1073741824"),
    p!(
        "client-output-buffer-limit",
        Kind::Text,
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    ),
    p!("timeout", I32, "0"),
    p!("replicaof", ["slaveof"], Kind::Text, "", false),
    p!("masterauth", Kind::Text, ""),
    p!("masteruser", Kind::Text, ""),
    p!(
        "replica-read-only",
        ["slave-read-only"],
        Kind::Bool,
        "yes",
        true
    ),
    p!(
        "replica-serve-stale-data",
        ["slave-serve-stale-data"],
        Kind::Bool,
        "yes",
        true
    ),
    p!("replica-priority", ["slave-priority"], I32, "100", true),
    p!(
        "replica-announce-ip",
        ["slave-announce-ip"],
        Kind::Text,
        "",
        true
    ),
    p!(
        "replica-announce-port",
        ["slave-announce-port"],
        Kind::Int(0, 65535),
        "0",
        true
    ),
    p!("repl-backlog-size", Kind::Memory, "1048576"),
    p!("repl-backlog-ttl", I32, "3600"),
    p!(
        "repl-ping-replica-period",
        ["repl-ping-slave-period"],
        Kind::Int(1, i32::MAX as i64),
        "10",
        true
    ),
    p!("repl-timeout", Kind::Int(1, i32::MAX as i64), "60"),
    p!("repl-diskless-sync", Kind::Bool, "yes"),
    p!("repl-diskless-sync-delay", I32, "5"),
    p!("repl-diskless-sync-max-replicas", I32, "0"),
    p!(
        "repl-diskless-load",
        [],
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
        true
    ),
    p!(
        "min-replicas-to-write",
        ["min-slaves-to-write"],
        I32,
        "0",
        true
    ),
    p!(
        "min-replicas-max-lag",
        ["min-slaves-max-lag"],
        I32,
        "10",
        true
    ),
    p!("tcp-keepalive", I32, "300"),
    p!("hz", I32, "10"),
    p!("loglevel", Kind::Enum(LOGLEVELS), "notice"),
    p!("save", Kind::SavePoints, "3600 1 300 100 60 10000"),
    p!("stop-writes-on-bgsave-error", Kind::Bool, "yes"),
    p!("rdbcompression", Kind::Bool, "yes"),
    p!("rdbchecksum", Kind::Bool, "yes"),
    p!("dir", Kind::Text, "."),
    p!("dbfilename", Kind::Text, "dump.rdb"),
    p!("appendonly", Kind::Bool, "no"),
    p!(
        "appendfsync",
        [],
        Kind::Enum(&["always", "everysec", "no"]),
        "everysec",
        true
    ),
    p!("appenddirname", [], Kind::Text, "appendonlydir", false),
    p!("appendfilename", [], Kind::Text, "appendonly.aof", false),
    p!("aof-use-rdb-preamble", Kind::Bool, "yes"),
    p!("aof-load-truncated", Kind::Bool, "yes"),
    p!(
        "auto-aof-rewrite-percentage",
        Kind::Int(0, i32::MAX as i64),
        "100"
    ),
    p!("auto-aof-rewrite-min-size", Kind::Memory, "67108864"),
    p!("notify-keyspace-events", Kind::Events, ""),
    p!(
        "slowlog-log-slower-than",
        Kind::Int(i64::MIN, i64::MAX),
        "10000"
    ),
    p!("slowlog-max-len", Kind::Int(0, i64::MAX), "128"),
    p!("latency-monitor-threshold", Kind::Int(0, i64::MAX), "0"),
    p!("latency-tracking", Kind::Bool, "yes"),
    p!("disable-thp", [], Kind::Bool, "yes", false),
    p!(
        "latency-tracking-info-percentiles",
        Kind::Percentiles,
        "50 99 99.9"
    ),
    p!(
        "hash-max-listpack-entries",
        ["hash-max-ziplist-entries"],
        I32,
        "512",
        true
    ),
    p!(
        "hash-max-listpack-value",
        ["hash-max-ziplist-value"],
        I32,
        "64",
        true
    ),
    p!(
        "zset-max-listpack-entries",
        ["zset-max-ziplist-entries"],
        I32,
        "128",
        true
    ),
    p!(
        "zset-max-listpack-value",
        ["zset-max-ziplist-value"],
        I32,
        "64",
        true
    ),
    p!("set-max-intset-entries", I32, "512"),
    p!("hll-sparse-max-bytes", Kind::Memory, "3000"),
    p!("set-max-listpack-entries", I32, "128"),
    p!("set-max-listpack-value", I32, "64"),
    p!(
        "list-max-listpack-size",
        ["list-max-ziplist-size"],
        Kind::Int(i32::MIN as i64, i32::MAX as i64),
        "-2",
        true
    ),
    // Start-up parameters the server reads (see kvserver's main).
    p!(
        "tcp-backlog",
        [],
        Kind::Int(0, i32::MAX as i64),
        "511",
        false
    ),
    p!("daemonize", [], Kind::Bool, "no", false),
    p!("pidfile", [], Kind::Text, "", false),
    p!("logfile", [], Kind::Text, "", false),
    // Redis 7's other parameters, with its kinds, bounds and defaults (read from a running
    // redis-server 7.0.15): accepted so that a redis.conf loads and CONFIG GET/SET answer as
    // Redis does. Those naming features this server does not have (TLS, cluster mode, Unix
    // sockets, syslog) refuse any value but their default (see `UNSUPPORTED`); the
    // rest tune mechanisms this server does differently or not at all (active defrag, io
    // threads, jemalloc, list compression, the OOM score ...) and change nothing here.
    p!(
        "acl-pubsub-default",
        [],
        Kind::Enum(&["allchannels", "resetchannels"]),
        "resetchannels",
        true
    ),
    p!("aclfile", [], Kind::Text, "", false),
    p!("acllog-max-len", [], Kind::Int(0, i64::MAX), "128", true),
    p!("active-defrag-cycle-max", [], Kind::Int(1, 99), "25", true),
    p!("active-defrag-cycle-min", [], Kind::Int(1, 99), "1", true),
    p!(
        "active-defrag-ignore-bytes",
        [],
        Kind::Memory,
        "104857600",
        true
    ),
    p!(
        "active-defrag-max-scan-fields",
        [],
        Kind::Int(1, i64::MAX),
        "1000",
        true
    ),
    p!(
        "active-defrag-threshold-lower",
        [],
        Kind::Int(0, 1000),
        "10",
        true
    ),
    p!(
        "active-defrag-threshold-upper",
        [],
        Kind::Int(0, 1000),
        "100",
        true
    ),
    p!("active-expire-effort", [], Kind::Int(1, 10), "1", true),
    p!("activedefrag", [], Kind::Bool, "no", true),
    p!("activerehashing", [], Kind::Bool, "yes", true),
    p!("always-show-logo", [], Kind::Bool, "no", false),
    p!("aof-disable-auto-gc", [], Kind::Bool, "no", true),
    p!("aof-rewrite-incremental-fsync", [], Kind::Bool, "yes", true),
    p!("aof-timestamp-enabled", [], Kind::Bool, "no", true),
    p!("aof_rewrite_cpulist", [], Kind::Text, "", false),
    p!("bgsave_cpulist", [], Kind::Text, "", false),
    p!("bind-source-addr", [], Kind::Text, "", true),
    p!("bio_cpulist", [], Kind::Text, "", false),
    p!(
        "busy-reply-threshold",
        [],
        Kind::Int(0, i64::MAX),
        "5000",
        true
    ),
    p!(
        "cluster-allow-pubsubshard-when-down",
        [],
        Kind::Bool,
        "yes",
        true
    ),
    p!("cluster-allow-reads-when-down", [], Kind::Bool, "no", true),
    p!(
        "cluster-allow-replica-migration",
        [],
        Kind::Bool,
        "yes",
        true
    ),
    p!(
        "cluster-announce-bus-port",
        [],
        Kind::Int(0, 65535),
        "0",
        true
    ),
    p!("cluster-announce-hostname", [], Kind::Hostname, "", true),
    p!("cluster-announce-ip", [], Kind::Text, "", true),
    p!("cluster-announce-port", [], Kind::Int(0, 65535), "0", true),
    p!(
        "cluster-announce-tls-port",
        [],
        Kind::Int(0, 65535),
        "0",
        true
    ),
    p!("cluster-config-file", [], Kind::Text, "nodes.conf", false),
    p!("cluster-enabled", [], Kind::Bool, "no", false),
    p!("cluster-link-sendbuf-limit", [], Kind::Memory, "0", true),
    p!(
        "cluster-migration-barrier",
        [],
        Kind::Int(0, i32::MAX as i64),
        "1",
        true
    ),
    p!(
        "cluster-node-timeout",
        [],
        Kind::Int(0, i64::MAX),
        "15000",
        true
    ),
    p!("cluster-port", [], Kind::Int(0, 65535), "0", false),
    p!(
        "cluster-preferred-endpoint-type",
        [],
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        "ip",
        true
    ),
    p!(
        "cluster-replica-no-failover",
        ["cluster-slave-no-failover"],
        Kind::Bool,
        "no",
        true
    ),
    p!(
        "cluster-replica-validity-factor",
        ["cluster-slave-validity-factor"],
        Kind::Int(0, i32::MAX as i64),
        "10",
        true
    ),
    p!("cluster-require-full-coverage", [], Kind::Bool, "yes", true),
    p!("crash-log-enabled", [], Kind::Bool, "yes", true),
    p!("crash-memcheck-enabled", [], Kind::Bool, "yes", true),
    p!("dynamic-hz", [], Kind::Bool, "yes", true),
    p!(
        "enable-module-command",
        [],
        Kind::Enum(&["no", "yes", "local"]),
        "no",
        false
    ),
    p!("ignore-warnings", [], Kind::Text, "", true),
    p!("io-threads", [], Kind::Int(1, 128), "1", false),
    p!("io-threads-do-reads", [], Kind::Bool, "no", false),
    p!("jemalloc-bg-thread", [], Kind::Bool, "yes", true),
    p!("lazyfree-lazy-expire", [], Kind::Bool, "no", true),
    p!("lazyfree-lazy-server-del", [], Kind::Bool, "no", true),
    p!("lazyfree-lazy-user-del", [], Kind::Bool, "no", true),
    p!("lazyfree-lazy-user-flush", [], Kind::Bool, "no", true),
    p!(
        "list-compress-depth",
        [],
        Kind::Int(0, i32::MAX as i64),
        "0",
        true
    ),
    p!("lua-time-limit", [], Kind::Int(0, i64::MAX), "5000", true),
    p!("maxmemory-clients", [], Kind::MemoryOrPercent, "0", true),
    p!("no-appendfsync-on-rewrite", [], Kind::Bool, "no", true),
    p!(
        "oom-score-adj",
        [],
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        "no",
        true
    ),
    p!(
        "oom-score-adj-values",
        [],
        Kind::OomScores,
        "0 200 800",
        true
    ),
    p!(
        "proc-title-template",
        [],
        Kind::Text,
        "{title} {listen-addr} {server-mode}",
        true
    ),
    p!(
        "propagation-error-behavior",
        [],
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore",
        true
    ),
    p!("rdb-del-sync-files", [], Kind::Bool, "no", true),
    p!("rdb-save-incremental-fsync", [], Kind::Bool, "yes", true),
    p!("repl-disable-tcp-nodelay", [], Kind::Bool, "no", true),
    p!("replica-announced", [], Kind::Bool, "yes", true),
    p!(
        "replica-ignore-disk-write-errors",
        [],
        Kind::Bool,
        "no",
        true
    ),
    p!(
        "replica-ignore-maxmemory",
        ["slave-ignore-maxmemory"],
        Kind::Bool,
        "yes",
        true
    ),
    p!(
        "replica-lazy-flush",
        ["slave-lazy-flush"],
        Kind::Bool,
        "no",
        true
    ),
    p!(
        "sanitize-dump-payload",
        [],
        Kind::Enum(&["no", "yes", "clients"]),
        "no",
        true
    ),
    p!("server_cpulist", [], Kind::Text, "", false),
    p!("set-proc-title", [], Kind::Bool, "yes", false),
    p!(
        "shutdown-on-sigint",
        [],
        Kind::Enum(&["default", "save", "nosave", "now", "force"]),
        "default",
        true
    ),
    p!(
        "shutdown-on-sigterm",
        [],
        Kind::Enum(&["default", "save", "nosave", "now", "force"]),
        "default",
        true
    ),
    p!(
        "shutdown-timeout",
        [],
        Kind::Int(0, i32::MAX as i64),
        "10",
        true
    ),
    p!("socket-mark-id", [], Kind::Int(0, 4294967295), "0", false),
    p!("stream-node-max-bytes", [], Kind::Memory, "4096", true),
    p!(
        "stream-node-max-entries",
        [],
        Kind::Int(0, i64::MAX),
        "100",
        true
    ),
    p!(
        "supervised",
        [],
        Kind::Enum(&["upstart", "systemd", "auto", "no"]),
        "no",
        false
    ),
    p!("syslog-enabled", [], Kind::Bool, "no", false),
    p!(
        "syslog-facility",
        [],
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"
        ]),
        "local0",
        false
    ),
    p!("syslog-ident", [], Kind::Text, "redis", false),
    p!(
        "tls-auth-clients",
        [],
        Kind::Enum(&["no", "yes", "optional"]),
        "yes",
        true
    ),
    p!("tls-ca-cert-dir", [], Kind::Text, "", true),
    p!("tls-ca-cert-file", [], Kind::Text, "", true),
    p!("tls-cert-file", [], Kind::Text, "", true),
    p!("tls-ciphers", [], Kind::Text, "", true),
    p!("tls-ciphersuites", [], Kind::Text, "", true),
    p!("tls-client-cert-file", [], Kind::Text, "", true),
    p!("tls-client-key-file", [], Kind::Text, "", true),
    p!("tls-client-key-file-pass", [], Kind::Text, "", true),
    p!("tls-cluster", [], Kind::Bool, "no", true),
    p!("tls-dh-params-file", [], Kind::Text, "", true),
    p!("tls-key-file", [], Kind::Text, "", true),
    p!("tls-key-file-pass", [], Kind::Text, "", true),
    p!("tls-port", [], Kind::Int(0, 65535), "0", true),
    p!("tls-prefer-server-ciphers", [], Kind::Bool, "no", true),
    p!("tls-protocols", [], Kind::Text, "", true),
    p!("tls-replication", [], Kind::Bool, "no", true),
    p!(
        "tls-session-cache-size",
        [],
        Kind::Int(0, i32::MAX as i64),
        "20480",
        true
    ),
    p!(
        "tls-session-cache-timeout",
        [],
        Kind::Int(0, i32::MAX as i64),
        "300",
        true
    ),
    p!("tls-session-caching", [], Kind::Bool, "yes", true),
    p!(
        "tracking-table-max-keys",
        [],
        Kind::Int(0, i64::MAX),
        "1000000",
        true
    ),
    p!("unixsocket", [], Kind::Text, "", false),
    p!("unixsocketperm", [], Kind::Int(0, 511), "0", false),
];

/// Current values, in [`PARAMS`] order, plus typed copies of the hot ones.
#[derive(Clone, Debug)]
pub struct Config {
    values: Vec<String>,
    /// `proto-max-bulk-len`: the largest string a command may create.
    pub proto_max_bulk_len: u64,
    /// `maxmemory` in bytes (0 = no limit).
    pub maxmemory: u64,
    /// `maxmemory-policy`.
    pub policy: crate::evict::Policy,
    /// `maxmemory-samples`.
    pub maxmemory_samples: usize,
    /// `maxmemory-eviction-tenacity`.
    pub eviction_tenacity: u32,
    /// `lfu-log-factor`.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time` (minutes).
    pub lfu_decay_time: u32,
    /// `zset-max-listpack-entries`.
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value`.
    pub zset_max_listpack_value: usize,
    /// `hash-max-listpack-entries`.
    pub hash_max_listpack_entries: usize,
    /// `stream-node-max-bytes`.
    pub stream_node_max_bytes: usize,
    /// `stream-node-max-entries`.
    pub stream_node_max_entries: i64,
    /// `hash-max-listpack-value`.
    pub hash_max_listpack_value: usize,
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: usize,
    /// `set-max-listpack-entries`.
    pub set_max_listpack_entries: usize,
    /// `set-max-listpack-value`.
    pub set_max_listpack_value: usize,
    /// `hll-sparse-max-bytes`: the longest sparse HyperLogLog string.
    pub hll_sparse_max_bytes: usize,
    /// `list-max-listpack-size`: positive = entries per list node, -1..-5 = 4..64 KiB per node.
    pub list_max_listpack_size: i64,
    /// `requirepass` (empty = none).
    pub requirepass: Vec<u8>,
    /// `databases`.
    pub databases: usize,
    /// `notify-keyspace-events` as [`crate::events::class`] bits.
    pub notify_keyspace_events: u32,
    /// The slow log and latency settings recording reads.
    pub telemetry: crate::telemetry::Settings,
    /// `latency-tracking-info-percentiles`.
    pub percentiles: Vec<f64>,
}

impl Default for Config {
    fn default() -> Self {
        let mut c = Config {
            values: PARAMS.iter().map(|p| p.default.to_string()).collect(),
            proto_max_bulk_len: 0,
            maxmemory: 0,
            policy: crate::evict::Policy::NoEviction,
            maxmemory_samples: 5,
            eviction_tenacity: 10,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            zset_max_listpack_entries: 0,
            zset_max_listpack_value: 0,
            hash_max_listpack_entries: 0,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            hash_max_listpack_value: 0,
            set_max_intset_entries: 0,
            set_max_listpack_entries: 0,
            set_max_listpack_value: 0,
            list_max_listpack_size: 0,
            hll_sparse_max_bytes: 0,
            requirepass: Vec::new(),
            databases: 16,
            notify_keyspace_events: 0,
            telemetry: crate::telemetry::Settings::new(10_000, 128, 0, true),
            percentiles: Vec::new(),
        };
        c.refresh_typed();
        c
    }
}

/// Why a parameter was refused; `Display` gives the text after `possibly related to ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// No such parameter.
    Unknown(String),
    /// Known, but not changeable at run time.
    Immutable(String),
    /// Bad value: parameter name and the reason.
    Invalid(String, String),
    /// The same parameter twice in one CONFIG SET.
    Duplicate(String),
    /// A protected parameter (`dir`, `dbfilename`) while `enable-protected-configs` forbids.
    Protected(String),
}

impl ConfigError {
    /// The exact Redis error line for CONFIG SET.
    pub fn reply_text(&self) -> String {
        match self {
            ConfigError::Unknown(n) => {
                format!("ERR Unknown option or number of arguments for CONFIG SET - '{n}'")
            }
            ConfigError::Immutable(n) => format!(
                "ERR CONFIG SET failed (possibly related to argument '{n}') - can't set immutable config"
            ),
            ConfigError::Invalid(n, why) => {
                format!("ERR CONFIG SET failed (possibly related to argument '{n}') - {why}")
            }
            ConfigError::Duplicate(n) => format!(
                "ERR CONFIG SET failed (possibly related to argument '{n}') - duplicate parameter"
            ),
            ConfigError::Protected(n) => format!(
                "ERR CONFIG SET failed (possibly related to argument '{n}') - can't set protected config"
            ),
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Unknown(n) => write!(f, "unknown option '{n}'"),
            ConfigError::Immutable(n) => write!(f, "'{n}' can't be changed at run time"),
            ConfigError::Invalid(n, why) => write!(f, "bad value for '{n}': {why}"),
            ConfigError::Duplicate(n) => write!(f, "'{n}' given twice"),
            ConfigError::Protected(n) => write!(f, "'{n}' is protected"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Parses a memory amount as Redis's `memtoull`: digits with an optional unit
/// (b, k, kb, m, mb, g, gb; k = 1000, kb = 1024), case-insensitive.
pub fn parse_memory(s: &str) -> Option<u64> {
    let s = s.to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// Finds a parameter by name or alias, case-insensitively.
pub fn find(name: &str) -> Option<(usize, &'static Param)> {
    PARAMS.iter().enumerate().find(|(_, p)| {
        p.name.eq_ignore_ascii_case(name) || p.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

fn normalize(p: &Param, v: &str) -> Result<String, String> {
    let shown = normalize_kind(p, v)?;
    match UNSUPPORTED.iter().find(|(n, _)| *n == p.name) {
        Some((_, why)) if shown != p.default => Err((*why).to_string()),
        _ => Ok(shown),
    }
}

fn normalize_kind(p: &Param, v: &str) -> Result<String, String> {
    match p.kind {
        Kind::MemoryOrPercent => {
            let ok = match v.strip_suffix('%') {
                Some(pct) => pct.parse::<u32>().is_ok(),
                None => parse_memory(v).is_some(),
            };
            match ok {
                true => Ok(v.strip_suffix('%').map_or_else(
                    || parse_memory(v).unwrap_or(0).to_string(),
                    |pct| format!("{}%", pct.parse::<u32>().unwrap_or(0)),
                )),
                false => Err("argument must be a memory or percent value".into()),
            }
        }
        Kind::OomScores => {
            let words: Vec<&str> = v.split_ascii_whitespace().collect();
            if words.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            let mut shown = Vec::new();
            for w in words {
                match w.parse::<i32>() {
                    Ok(n) if (-2000..=2000).contains(&n) => shown.push(n.to_string()),
                    _ => return Err("Invalid oom-score-adj-values".into()),
                }
            }
            Ok(shown.join(" "))
        }
        Kind::Hostname => {
            if v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            {
                Ok(v.to_string())
            } else {
                Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into())
            }
        }
        Kind::Int(lo, hi) => match v.parse::<i64>() {
            Ok(n) if (lo..=hi).contains(&n) => Ok(n.to_string()),
            Ok(_) => Err(format!("argument must be between {lo} and {hi} inclusive")),
            Err(_) => Err("argument couldn't be parsed into an integer".into()),
        },
        Kind::Memory => parse_memory(v)
            .map(|n| n.to_string())
            .ok_or_else(|| "argument must be a memory value".into()),
        Kind::Bool => match v.to_ascii_lowercase().as_str() {
            "yes" | "no" => Ok(v.to_ascii_lowercase()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Enum(words) => {
            let l = v.to_ascii_lowercase();
            if words.contains(&l.as_str()) {
                Ok(l)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    words.join(", ")
                ))
            }
        }
        Kind::Text => Ok(v.to_string()),
        Kind::Percentiles => {
            let mut shown = Vec::new();
            for w in v.split_ascii_whitespace() {
                match w.parse::<f64>() {
                    Ok(p) if (0.0..=100.0).contains(&p) => {
                        shown.push(crate::telemetry::percentile_label(p))
                    }
                    _ => return Err("Invalid percentile value".into()),
                }
            }
            Ok(shown.join(" "))
        }
        Kind::SavePoints => {
            let words: Vec<&str> = v.split_ascii_whitespace().collect();
            if words.len() % 2 != 0 || words.iter().any(|w| w.parse::<u32>().is_err()) {
                return Err("Invalid save parameters".into());
            }
            Ok(words.join(" "))
        }
        Kind::Events => crate::events::parse_classes(v.as_bytes())
            .map(crate::events::classes_to_string)
            .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
    }
}

impl Config {
    fn refresh_typed(&mut self) {
        let num = |c: &Config, n: &str| c.get(n).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        self.proto_max_bulk_len = num(self, "proto-max-bulk-len");
        self.maxmemory = num(self, "maxmemory");
        self.policy = crate::evict::Policy::parse(self.get("maxmemory-policy").unwrap_or(""));
        self.maxmemory_samples = num(self, "maxmemory-samples") as usize;
        self.eviction_tenacity = num(self, "maxmemory-eviction-tenacity") as u32;
        self.lfu_log_factor = num(self, "lfu-log-factor") as u32;
        self.lfu_decay_time = num(self, "lfu-decay-time") as u32;
        self.zset_max_listpack_entries = num(self, "zset-max-listpack-entries") as usize;
        self.zset_max_listpack_value = num(self, "zset-max-listpack-value") as usize;
        self.hash_max_listpack_entries = num(self, "hash-max-listpack-entries") as usize;
        self.stream_node_max_bytes = num(self, "stream-node-max-bytes") as usize;
        self.stream_node_max_entries = num(self, "stream-node-max-entries") as i64;
        self.hash_max_listpack_value = num(self, "hash-max-listpack-value") as usize;
        self.set_max_intset_entries = num(self, "set-max-intset-entries") as usize;
        self.set_max_listpack_entries = num(self, "set-max-listpack-entries") as usize;
        self.set_max_listpack_value = num(self, "set-max-listpack-value") as usize;
        self.hll_sparse_max_bytes = num(self, "hll-sparse-max-bytes") as usize;
        self.list_max_listpack_size = self
            .get("list-max-listpack-size")
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(-2);
        self.requirepass = self
            .get("requirepass")
            .unwrap_or_default()
            .as_bytes()
            .to_vec();
        self.databases = num(self, "databases").max(1) as usize;
        let int = |c: &Config, n: &str| c.get(n).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
        self.telemetry = crate::telemetry::Settings::new(
            int(self, "slowlog-log-slower-than"),
            num(self, "slowlog-max-len").min(usize::MAX as u64) as usize,
            num(self, "latency-monitor-threshold"),
            self.get("latency-tracking") == Some("yes"),
        );
        self.percentiles = self
            .get("latency-tracking-info-percentiles")
            .unwrap_or_default()
            .split_ascii_whitespace()
            .filter_map(|w| w.parse::<f64>().ok())
            .collect();
    }

    /// The event classes are kept from the value as given: the canonical text shown by
    /// CONFIG GET drops `n` when `A` is on (as Redis's does), the classes keep it.
    fn set_classes(&mut self, p: &Param, raw: &str) {
        if let Kind::Events = p.kind {
            self.notify_keyspace_events = crate::events::parse_classes(raw.as_bytes()).unwrap_or(0);
        }
    }

    /// The current value of a parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        find(name).map(|(i, _)| self.values[i].as_str())
    }

    /// The first of `names` that is a protected parameter (Redis 7's `dir` and `dbfilename`)
    /// while `enable-protected-configs` refuses a client (`local`: whether it is on loopback
    /// or a Unix socket).
    pub fn protected_among<'a>(&self, names: &[&'a str], local: bool) -> Option<&'a str> {
        let allowed = match self.get("enable-protected-configs") {
            Some("yes") => true,
            Some("local") => local,
            _ => false,
        };
        if allowed {
            return None;
        }
        names
            .iter()
            .copied()
            .find(|n| find(n).is_some_and(|(_, p)| matches!(p.name, "dir" | "dbfilename")))
    }

    /// `save`'s points as (seconds, changes): save when at least `changes` writes happened and
    /// more than `seconds` passed since the last save. Empty: no automatic saves.
    pub fn save_points(&self) -> Vec<(u64, u64)> {
        let nums: Vec<u64> = self
            .get("save")
            .unwrap_or("")
            .split_ascii_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        nums.chunks_exact(2).map(|c| (c[0], c[1])).collect()
    }

    /// `(name, value)` of every parameter whose name or alias matches the glob `pattern`.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        for (i, p) in PARAMS.iter().enumerate() {
            if glob::matches(pattern, p.name.as_bytes(), true) {
                out.push((p.name, self.values[i].as_str()));
            }
            for a in p.aliases {
                if glob::matches(pattern, a.as_bytes(), true) {
                    out.push((*a, self.values[i].as_str()));
                }
            }
        }
        out
    }

    /// Sets one parameter at start-up (immutable ones allowed).
    pub fn set_startup(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let (i, p) = find(name).ok_or_else(|| ConfigError::Unknown(name.to_string()))?;
        self.values[i] =
            normalize(p, value).map_err(|why| ConfigError::Invalid(p.name.into(), why))?;
        self.set_classes(p, value);
        self.refresh_typed();
        Ok(())
    }

    /// CONFIG SET of several pairs: all or nothing, as Redis 7 does.
    pub fn set_many(&mut self, pairs: &[(&str, &str)]) -> Result<(), ConfigError> {
        let mut staged: Vec<(usize, String)> = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            let (i, p) = find(name).ok_or_else(|| ConfigError::Unknown(name.to_string()))?;
            if !p.mutable {
                return Err(ConfigError::Immutable(name.to_string()));
            }
            if staged.iter().any(|(j, _)| *j == i) {
                return Err(ConfigError::Duplicate(name.to_string()));
            }
            let v =
                normalize(p, value).map_err(|why| ConfigError::Invalid(name.to_string(), why))?;
            staged.push((i, v));
        }
        for ((i, v), (_, raw)) in staged.into_iter().zip(pairs) {
            self.values[i] = v;
            self.set_classes(&PARAMS[i], raw);
        }
        self.refresh_typed();
        Ok(())
    }
}

/// The comment line CONFIG REWRITE puts before the options it appends.
pub const REWRITE_SIGNATURE: &str = "# Generated by CONFIG REWRITE";

/// What [`Config::rewrite_with_users`] does with a config file's `user` lines.
#[derive(Clone, Copy, Debug)]
pub enum UserLines<'a> {
    /// Leaves them as they are.
    Keep,
    /// Removes them: the users live in an ACL file (Redis's `rewriteConfigUserOption`).
    Drop,
    /// Replaces them by these, ACL LIST's lines (`user <name> <rules>`).
    Write(&'a [Vec<u8>]),
}

/// A byte count as a configuration file shows it: the largest of gb, mb, kb that divides it.
fn format_memory(bytes: u64) -> String {
    for (unit, size) in [("gb", 1u64 << 30), ("mb", 1 << 20), ("kb", 1 << 10)] {
        if bytes != 0 && bytes % size == 0 {
            return format!("{}{unit}", bytes / size);
        }
    }
    bytes.to_string()
}

/// A string value quoted as a configuration file reads it back.
fn quote(v: &str) -> String {
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Config {
    /// The lines that set parameter `i` to its current value in a configuration file.
    fn file_lines(&self, i: usize) -> Vec<String> {
        let p = &PARAMS[i];
        let v = self.values[i].as_str();
        let words = |n: usize| -> Vec<String> {
            let w: Vec<&str> = v.split_whitespace().collect();
            w.chunks(n)
                .map(|c| format!("{} {}", p.name, c.join(" ")))
                .collect()
        };
        match (p.name, p.kind) {
            ("save", _) if v.trim().is_empty() => vec![format!("{} \"\"", p.name)],
            ("save", _) => words(2),
            ("client-output-buffer-limit", _) => words(4),
            ("bind", _) => vec![format!("{} {v}", p.name)],
            (_, Kind::Memory) => {
                vec![format!(
                    "{} {}",
                    p.name,
                    format_memory(v.parse().unwrap_or(0))
                )]
            }
            (_, Kind::Text | Kind::Events | Kind::Percentiles | Kind::SavePoints) => {
                vec![format!("{} {}", p.name, quote(v))]
            }
            _ => vec![format!("{} {v}", p.name)],
        }
    }

    /// CONFIG REWRITE: the configuration file `old` brought up to date. Comments, blank lines
    /// and lines of options this table does not know stay as they are; a parameter the file
    /// sets gets its current value on its first line (its other lines go); a parameter the
    /// file does not set is appended, after [`REWRITE_SIGNATURE`], only when it differs from
    /// its default (`save` always is, as Redis writes it).
    pub fn rewrite(&self, old: &str) -> String {
        self.rewrite_with_users(old, UserLines::Keep)
    }

    /// [`Config::rewrite`] that also rewrites the file's `user` lines (see [`UserLines`]):
    /// the new ones take the place of the first old one, or go at the end.
    pub fn rewrite_with_users(&self, old: &str, users: UserLines<'_>) -> String {
        let mut lines: Vec<Option<String>> = old.lines().map(|l| Some(l.to_string())).collect();
        let mut at: Vec<Vec<usize>> = vec![Vec::new(); PARAMS.len()];
        let mut user_at: Vec<usize> = Vec::new();
        let mut has_signature = false;
        for (n, line) in old.lines().enumerate() {
            let t = line.trim();
            if t == REWRITE_SIGNATURE {
                has_signature = true;
            }
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let name = t.split_whitespace().next().unwrap_or("");
            if let Some((i, _)) = find(name) {
                at[i].push(n);
            } else if name.eq_ignore_ascii_case("user") {
                user_at.push(n);
            }
        }
        let mut tail: Vec<String> = Vec::new();
        let new_users: Option<Vec<String>> = match users {
            UserLines::Keep => None,
            UserLines::Drop => Some(Vec::new()),
            UserLines::Write(list) => Some(
                (list.iter())
                    .map(|l| String::from_utf8_lossy(l).into_owned())
                    .collect(),
            ),
        };
        if let Some(new) = new_users {
            for &n in &user_at {
                lines[n] = None;
            }
            match user_at.first() {
                Some(&first) if !new.is_empty() => lines[first] = Some(new.join("\n")),
                _ => tail.extend(new),
            }
        }
        for (i, p) in PARAMS.iter().enumerate() {
            let new = self.file_lines(i);
            let default = normalize(p, p.default).is_ok_and(|d| d == self.values[i]);
            let forced = p.name == "save";
            if at[i].is_empty() {
                if !default || forced {
                    tail.extend(new);
                }
                continue;
            }
            // The first of its old lines takes the new value (all of them for several lines).
            let first = at[i][0];
            for &n in &at[i] {
                lines[n] = None;
            }
            lines[first] = Some(new.join("\n"));
        }
        let mut out: Vec<String> = lines.into_iter().flatten().collect();
        if !tail.is_empty() {
            if !has_signature {
                out.push(REWRITE_SIGNATURE.to_string());
            }
            out.extend(tail);
        }
        let mut text = out.join("\n");
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_replaces_or_drops_user_lines() {
        // (The save lines are written whatever their values.)
        let save = "save 3600 1\nsave 300 100\nsave 60 10000";
        let old = format!("port 7000\nuser alice on >a\n# users\nuser bob off\n{save}\n");
        let mut c = Config::default();
        c.set_startup("port", "7000").unwrap();
        let list = [
            b"user alice on ~*".to_vec(),
            b"user default on nopass".to_vec(),
        ];
        assert_eq!(
            c.rewrite_with_users(&old, UserLines::Write(&list)),
            format!("port 7000\nuser alice on ~*\nuser default on nopass\n# users\n{save}\n")
        );
        assert_eq!(
            c.rewrite_with_users(&old, UserLines::Drop),
            format!("port 7000\n# users\n{save}\n")
        );
        assert_eq!(c.rewrite(&old), old, "kept by the plain rewrite");
        // A file with no user lines gets them at its end.
        assert_eq!(
            c.rewrite_with_users(
                &format!("port 7000\n{save}\n"),
                UserLines::Write(&list[1..])
            ),
            format!("port 7000\n{save}\n{REWRITE_SIGNATURE}\nuser default on nopass\n")
        );
    }

    #[test]
    fn rewrite_keeps_comments_and_updates_values() {
        let old = "# my server\nport 7000\nthreads 3\n\nmaxmemory 100mb\nhash-max-ziplist-entries 10\nmaxmemory 5\n";
        let mut c = Config::default();
        c.set_startup("maxmemory", "200mb").unwrap();
        c.set_startup("hash-max-ziplist-entries", "10").unwrap();
        c.set_many(&[("maxmemory-policy", "allkeys-lru"), ("requirepass", "a\"b")])
            .unwrap();
        let new = c.rewrite(old);
        assert_eq!(
            new,
            "# my server\nport 6379\nthreads 3\n\nmaxmemory 200mb\nhash-max-listpack-entries 10\n\
             # Generated by CONFIG REWRITE\nrequirepass \"a\\\"b\"\nmaxmemory-policy allkeys-lru\n\
             save 3600 1\nsave 300 100\nsave 60 10000\n"
        );
        // Once more: nothing new to append, no second signature.
        let again = c.rewrite(&new);
        assert_eq!(again, new);
        c.set_many(&[("save", "3600 1 300 100")]).unwrap();
        assert!(c.rewrite(&new).ends_with("save 3600 1\nsave 300 100\n"));
        assert_eq!(format_memory(1 << 30), "1gb");
        assert_eq!(format_memory(1000), "1000");
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("100k"), Some(100_000));
        assert_eq!(parse_memory("5MB"), Some(5 << 20));
        assert_eq!(parse_memory("abc"), None);
        assert_eq!(parse_memory("-1"), None);
    }

    #[test]
    fn set_is_all_or_nothing() {
        let mut c = Config::default();
        assert_eq!(
            c.set_many(&[("hz", "5"), ("maxmemory", "x")]).unwrap_err(),
            ConfigError::Invalid("maxmemory".into(), "argument must be a memory value".into())
        );
        assert_eq!(c.get("hz"), Some("10"));
        c.set_many(&[("hz", "5"), ("maxmemory", "1mb")]).unwrap();
        assert_eq!(c.get("hz"), Some("5"));
        assert_eq!(c.maxmemory, 1 << 20);
        assert!(matches!(
            c.set_many(&[("databases", "3")]),
            Err(ConfigError::Immutable(_))
        ));
        assert_eq!(
            c.matching(b"zset-max-ziplist-entries"),
            vec![("zset-max-ziplist-entries", "128")]
        );
    }
}
