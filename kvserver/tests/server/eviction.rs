//! maxmemory on the real server, with 1 and 3 shards: memory stays at the limit however much
//! is written, the policies keep what they should, `noeviction` refuses growing writes with
//! Redis's error, and evictions raise `evicted` events. (Which key each policy picks is shown
//! on hand-made cases in kvcore's `tests/eviction.rs`.)

use std::io::Write;

use crate::support::{read_replies, Server};

fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

fn used(c: &mut redis::Connection) -> u64 {
    info_field(c, "memory", "used_memory")
}

fn set_config(c: &mut redis::Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(c)
        .unwrap();
}

const VALUE: usize = 512;
const LIMIT_ROOM: u64 = 4 << 20;
/// What a pipeline of writes may add before the next batch evicts, plus buffers in flight.
const SLACK: u64 = 1 << 20;

/// Writes `n` keys `prefix<i>` of 512 bytes in pipelines of 500, running `between` after each
/// pipeline; returns the largest used_memory seen after a pipeline.
fn flood(
    c: &mut redis::Connection,
    prefix: &str,
    n: usize,
    ttl: bool,
    mut between: impl FnMut(&mut redis::Connection),
) -> u64 {
    let value = "v".repeat(VALUE);
    let mut peak = 0;
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for i in chunk {
            let cmd = p.cmd("SET").arg(format!("{prefix}{i}")).arg(&value);
            if ttl {
                cmd.arg("EX").arg(3600);
            }
            cmd.ignore();
        }
        let () = p.query(c).unwrap();
        between(c);
        peak = peak.max(used(c));
    }
    peak
}

/// DBSIZE and `evicted_keys` at one moment: the server may evict between two commands (its
/// cron checks memory, and a command's first call allocates its statistics), so the pair is
/// read again until `evicted_keys` did not move across the DBSIZE.
fn keys_and_evicted(c: &mut redis::Connection) -> (u64, u64) {
    loop {
        let before = info_field(c, "stats", "evicted_keys");
        let keys: u64 = redis::cmd("DBSIZE").query(c).unwrap();
        if info_field(c, "stats", "evicted_keys") == before {
            return (keys, before);
        }
    }
}

/// Sets maxmemory to the current use plus `LIMIT_ROOM` under `policy`; returns the limit.
fn limit(c: &mut redis::Connection, policy: &str) -> u64 {
    let limit = used(c) + LIMIT_ROOM;
    set_config(c, "maxmemory-policy", policy);
    set_config(c, "maxmemory", &limit.to_string());
    limit
}

#[test]
fn lru_stays_under_the_limit_and_evicts_idle_keys_first() {
    for shards in ["1", "3"] {
        let server = Server::start(&["--threads", shards]);
        let mut c = server.client();
        // Keys written, then left alone for two LRU clock seconds.
        flood(&mut c, "old:", 1000, false, |_| {});
        std::thread::sleep(std::time::Duration::from_millis(2100));
        let limit = limit(&mut c, "allkeys-lru");
        let peak = flood(&mut c, "new:", 40_000, false, |_| {});
        assert!(
            peak <= limit + SLACK,
            "{shards} shards: used_memory {peak} over maxmemory {limit}"
        );
        let (keys, evicted) = keys_and_evicted(&mut c);
        assert!(evicted >= 30_000, "{shards} shards: {evicted} evicted");
        assert_eq!(keys + evicted, 41_000, "{shards} shards");
        // The idle keys went first: hardly any survived five times the memory written.
        let old_left = (0..1000)
            .filter(|i| {
                redis::cmd("EXISTS")
                    .arg(format!("old:{i}"))
                    .query::<i64>(&mut c)
                    .unwrap()
                    == 1
            })
            .count();
        assert!(old_left <= 10, "{shards} shards: {old_left} idle keys left");
    }
}

#[test]
fn lfu_keeps_the_hot_keys() {
    for shards in ["1", "3"] {
        let server = Server::start(&["--threads", shards]);
        let mut c = server.client();
        set_config(&mut c, "maxmemory-policy", "allkeys-lfu");
        flood(&mut c, "hot:", 100, false, |_| {});
        let read_hot = |c: &mut redis::Connection| {
            let mut p = redis::pipe();
            for i in 0..100 {
                p.cmd("GET").arg(format!("hot:{i}")).ignore();
            }
            let () = p.query(c).unwrap();
        };
        for _ in 0..20 {
            read_hot(&mut c);
        }
        let limit = limit(&mut c, "allkeys-lfu");
        let peak = flood(&mut c, "cold:", 40_000, false, read_hot);
        assert!(
            peak <= limit + SLACK,
            "{shards} shards: {peak} over {limit}"
        );
        let hot: i64 = redis::cmd("EXISTS")
            .arg((0..100).map(|i| format!("hot:{i}")).collect::<Vec<_>>())
            .query(&mut c)
            .unwrap();
        assert_eq!(hot, 100, "{shards} shards: hot keys evicted");
        assert!(info_field(&mut c, "stats", "evicted_keys") >= 30_000);
        let freq: i64 = redis::cmd("OBJECT")
            .arg("FREQ")
            .arg("hot:7")
            .query(&mut c)
            .unwrap();
        assert!(freq >= 7, "{freq}");
    }
}

#[test]
fn random_policies_stay_under_the_limit() {
    for shards in ["1", "3"] {
        let server = Server::start(&["--threads", shards]);
        let mut c = server.client();
        flood(&mut c, "keep:", 1000, false, |_| {});
        let limit = limit(&mut c, "volatile-random");
        let peak = flood(&mut c, "ttl:", 40_000, true, |_| {});
        assert!(
            peak <= limit + SLACK,
            "{shards} shards: {peak} over {limit}"
        );
        let kept: i64 = redis::cmd("EXISTS")
            .arg((0..1000).map(|i| format!("keep:{i}")).collect::<Vec<_>>())
            .query(&mut c)
            .unwrap();
        assert_eq!(kept, 1000, "volatile-random evicted a key without a TTL");
        set_config(&mut c, "maxmemory-policy", "allkeys-random");
        let peak = flood(&mut c, "any:", 20_000, false, |_| {});
        assert!(
            peak <= limit + SLACK,
            "{shards} shards: {peak} over {limit}"
        );
    }
}

#[test]
fn volatile_ttl_never_touches_keys_without_a_ttl() {
    for shards in ["1", "3"] {
        let server = Server::start(&["--threads", shards]);
        let mut c = server.client();
        flood(&mut c, "keep:", 2000, false, |_| {});
        let limit = limit(&mut c, "volatile-ttl");
        let peak = flood(&mut c, "ttl:", 40_000, true, |_| {});
        assert!(
            peak <= limit + SLACK,
            "{shards} shards: {peak} over {limit}"
        );
        let kept: i64 = redis::cmd("EXISTS")
            .arg((0..2000).map(|i| format!("keep:{i}")).collect::<Vec<_>>())
            .query(&mut c)
            .unwrap();
        assert_eq!(kept, 2000);
        assert!(info_field(&mut c, "stats", "evicted_keys") >= 30_000);
        // Below what the keys without a TTL take: once the others are gone (eviction runs
        // in steps of at most 500 µs, letting commands through between them), writes are
        // refused and those keys stay.
        set_config(&mut c, "maxmemory", "1");
        let refused = (0..10_000).find_map(|_| {
            redis::cmd("SET")
                .arg("x")
                .arg("y")
                .query::<()>(&mut c)
                .err()
        });
        assert_eq!(
            refused.and_then(|e| e.code().map(String::from)).as_deref(),
            Some("OOM")
        );
        let kept: i64 = redis::cmd("EXISTS")
            .arg((0..2000).map(|i| format!("keep:{i}")).collect::<Vec<_>>())
            .query(&mut c)
            .unwrap();
        assert_eq!(kept, 2000);
    }
}

#[test]
fn noeviction_refuses_growing_writes_and_serves_the_rest() {
    for shards in ["1", "3"] {
        let server = Server::start(&["--threads", shards]);
        let mut c = server.client();
        flood(&mut c, "k:", 100, false, |_| {});
        set_config(&mut c, "maxmemory", "1");
        let mut raw = server.raw();
        raw.write_all(b"SET k:1 x\r\nGET k:2\r\nINCR n\r\nDEL k:3\r\nLPUSH l a\r\nEXISTS k:3\r\nCONFIG SET maxmemory 0\r\nSET k:1 x\r\n")
            .unwrap();
        let oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n".to_vec();
        let mut get = format!("${VALUE}\r\n{}\r\n", "v".repeat(VALUE)).into_bytes();
        let replies = read_replies(&mut raw, 8);
        assert_eq!(replies[0], oom);
        assert_eq!(replies[1], std::mem::take(&mut get));
        assert_eq!(replies[2], oom);
        assert_eq!(replies[3], b":1\r\n");
        assert_eq!(replies[4], oom);
        assert_eq!(replies[5], b":0\r\n");
        assert_eq!(replies[6], b"+OK\r\n");
        assert_eq!(replies[7], b"+OK\r\n");
        assert_eq!(info_field(&mut c, "stats", "evicted_keys"), 0);
    }
}

#[test]
fn evictions_raise_keyspace_events() {
    for shards in ["1", "3"] {
        let server = Server::start(&["--threads", shards]);
        let mut c = server.client();
        set_config(&mut c, "notify-keyspace-events", "Ee");
        let mut sub = server.raw();
        sub.write_all(b"SUBSCRIBE __keyevent@0__:evicted\r\n")
            .unwrap();
        read_replies(&mut sub, 1);
        flood(&mut c, "k:", 10, false, |_| {});
        set_config(&mut c, "maxmemory-policy", "allkeys-lru");
        set_config(&mut c, "maxmemory", "1");
        // The next command of a shard evicts; a write reaches every shard of its key.
        let _ = redis::cmd("SET").arg("k:0").arg("x").query::<()>(&mut c);
        let msgs = read_replies(&mut sub, 1);
        let text = String::from_utf8_lossy(&msgs[0]).into_owned();
        assert!(
            text.starts_with("*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:evicted\r\n$3\r\nk:"),
            "{text}"
        );
    }
}

/// Redis 7.0.15's bytes for the same sequence: a transaction whose EXEC comes after memory ran
/// out is discarded with the reason; while out of memory every queued command is refused
/// (reads and DEL too) and the EXEC aborts.
#[test]
fn transactions_out_of_memory_as_redis() {
    for shards in ["1", "3"] {
        let server = Server::start(&["--threads", shards]);
        let mut c = server.client();
        let () = redis::cmd("SET").arg("a").arg("b").query(&mut c).unwrap();
        let mut tx = server.raw();
        tx.write_all(b"MULTI\r\nSET k v\r\n").unwrap();
        assert_eq!(read_replies(&mut tx, 2), [&b"+OK\r\n"[..], b"+QUEUED\r\n"]);
        set_config(&mut c, "maxmemory", "1");
        tx.write_all(b"EXEC\r\nMULTI\r\nGET a\r\nDEL a\r\nEXEC\r\nCONFIG SET maxmemory 0\r\n")
            .unwrap();
        let oom = "OOM command not allowed when used memory > 'maxmemory'.";
        let expected = [
            format!("-EXECABORT Transaction discarded because of: {oom}\r\n"),
            "+OK\r\n".into(),
            format!("-{oom}\r\n"),
            format!("-{oom}\r\n"),
            "-EXECABORT Transaction discarded because of previous errors.\r\n".into(),
            "+OK\r\n".into(),
        ];
        let got: Vec<String> = read_replies(&mut tx, 6)
            .into_iter()
            .map(|r| String::from_utf8(r).unwrap())
            .collect();
        assert_eq!(got, expected, "{shards} shards");
    }
}

/// Evicting a big collection hands it to the background freeing thread (INFO
/// `lazyfreed_objects`), as DEL does, so the shard does not stall on its frees.
#[test]
fn evicting_a_big_collection_frees_it_in_the_background() {
    let server = Server::start(&["--threads", "1"]);
    let mut c = server.client();
    for chunk in (0..200_000).collect::<Vec<u32>>().chunks(10_000) {
        let _: i64 = redis::cmd("SADD")
            .arg("big")
            .arg(chunk)
            .query(&mut c)
            .unwrap();
    }
    set_config(&mut c, "maxmemory-policy", "allkeys-random");
    set_config(&mut c, "maxmemory", "1");
    let start = std::time::Instant::now();
    while info_field(&mut c, "memory", "lazyfreed_objects") == 0 {
        assert!(
            start.elapsed().as_secs() < 10,
            "the set was never freed in the background"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "stats", "evicted_keys"), 1);
    let n: i64 = redis::cmd("EXISTS").arg("big").query(&mut c).unwrap();
    assert_eq!(n, 0);
}
