//! Command statistics, the slow log and the latency monitor with 1 and 3 shards: each client
//! command is counted once whatever route it takes (on its shard, on another shard, spanning
//! shards, answered by the server, inside MULTI), errors by code, slow commands with their
//! client, and INFO carries every field Redis 7.0.15 prints.

use crate::support::{call, cmd, key_on, read_replies, Server};

const SHARDS: [usize; 2] = [1, 3];

/// `field:value` lines of an INFO reply (bulk or verbatim).
fn info(s: &mut std::net::TcpStream, section: &str) -> String {
    call(s, &format!("INFO {section}"))
}

fn stat<'a>(text: &'a str, name: &str) -> &'a str {
    text.split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

#[test]
fn commands_are_counted_once_whatever_their_route() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut s = server.raw();
        let (a, b) = (key_on("a", 0, n, 0), key_on("b", n - 1, n, 0));
        for k in [&a, &b] {
            assert_eq!(call(&mut s, &format!("SET {k} 1")), "+OK\r\n");
        }
        call(&mut s, &format!("MSET {a} 2 {b} 3"));
        call(&mut s, "CONFIG SET hz 10");
        call(&mut s, "MULTI");
        call(&mut s, &format!("GET {a}"));
        call(&mut s, &format!("GET {b}"));
        call(&mut s, "EXEC");
        call(&mut s, &format!("LPUSH {a} x"));
        call(&mut s, "GET");
        call(&mut s, "NOSUCHCOMMAND");
        let text = info(&mut s, "commandstats");
        let calls = |name: &str| {
            stat(&text, &format!("cmdstat_{name}"))
                .split(',')
                .map(|f| f.split_once('=').unwrap())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        assert_eq!(calls("set")["calls"], "2", "{n} shards: {text}");
        assert_eq!(calls("mset")["calls"], "1", "{n} shards: {text}");
        assert_eq!(calls("config|set")["calls"], "1", "{n} shards: {text}");
        assert_eq!(calls("multi")["calls"], "1");
        assert_eq!(calls("exec")["calls"], "1");
        assert_eq!(calls("get")["calls"], "2", "{text}");
        assert_eq!(calls("get")["rejected_calls"], "1", "{text}");
        assert_eq!(calls("lpush")["failed_calls"], "1", "{text}");
        let errors = info(&mut s, "errorstats");
        assert_eq!(stat(&errors, "errorstat_WRONGTYPE"), "count=1");
        assert_eq!(stat(&errors, "errorstat_ERR"), "count=2");
        let stats = info(&mut s, "stats");
        assert_eq!(stat(&stats, "total_error_replies"), "3");
        let latency = info(&mut s, "latencystats");
        assert!(stat(&latency, "latency_percentiles_usec_mset").starts_with("p50="));
        assert!(stat(&latency, "latency_percentiles_usec_mset").contains(",p99.9="));
        let h = call(&mut s, "LATENCY HISTOGRAM set");
        assert!(
            h.starts_with("*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:2\r\n"),
            "{h}"
        );
        assert_eq!(call(&mut s, "CONFIG RESETSTAT"), "+OK\r\n");
        let text = info(&mut s, "commandstats");
        assert!(!text.contains("cmdstat_set"), "{n} shards: {text}");
        assert_eq!(stat(&info(&mut s, "stats"), "total_error_replies"), "0");
    }
}

/// A pipeline of GETs and SETs shares clock readings between its commands (`kvcore::Lap`):
/// every command is still counted, in INFO commandstats and in its latency histogram, by any
/// command after it in the same pipeline or later; with the slow log catching everything,
/// each one is logged with its arguments.
#[test]
fn pipelined_gets_and_sets_are_each_counted() {
    use std::io::Write;
    let server = Server::start(&["--threads", "1"]);
    let mut s = server.raw();
    let mut batch = Vec::new();
    for i in 0..10 {
        batch.extend(cmd(&format!("SET k{i} v{i}")));
    }
    for i in 0..5 {
        batch.extend(cmd(&format!("GET k{i}")));
    }
    batch.extend(cmd("INFO commandstats"));
    for i in 0..3 {
        batch.extend(cmd(&format!("SET k{i} w{i}")));
    }
    s.write_all(&batch).unwrap();
    let replies = read_replies(&mut s, 19);
    let text = String::from_utf8_lossy(&replies[15]).into_owned();
    let calls = |text: &str, name: &str| -> u64 {
        let fields = stat(text, &format!("cmdstat_{name}"));
        let calls = fields.split(',').next().unwrap();
        calls.strip_prefix("calls=").unwrap().parse().unwrap()
    };
    assert_eq!(
        (calls(&text, "set"), calls(&text, "get")),
        (10, 5),
        "{text}"
    );
    let text = info(&mut s, "commandstats");
    assert_eq!(calls(&text, "set"), 13, "{text}");
    let usec: u64 = stat(&text, "cmdstat_set")
        .split(',')
        .nth(1)
        .unwrap()
        .strip_prefix("usec=")
        .unwrap()
        .parse()
        .unwrap();
    assert!(usec < 13_000, "{text}");
    let h = call(&mut s, "LATENCY HISTOGRAM set get");
    assert!(
        h.contains("$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:13\r\n"),
        "{h}"
    );
    assert!(
        h.contains("$3\r\nget\r\n*4\r\n$5\r\ncalls\r\n:5\r\n"),
        "{h}"
    );
    // Everything in the slow log: each SET of a pipeline is there with its arguments.
    call(&mut s, "CONFIG SET slowlog-log-slower-than 0");
    call(&mut s, "SLOWLOG RESET");
    let batch: Vec<u8> = (0..6).flat_map(|i| cmd(&format!("SET p{i} v"))).collect();
    s.write_all(&batch).unwrap();
    read_replies(&mut s, 6);
    let got = call(&mut s, "SLOWLOG GET -1");
    for i in 0..6 {
        assert!(
            got.contains(&format!("$3\r\nSET\r\n$2\r\np{i}\r\n$1\r\nv\r\n")),
            "{got}"
        );
    }
}

#[test]
fn slowlog_over_all_shards() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut s = server.raw();
        call(&mut s, "CLIENT SETNAME slowpoke");
        let me = call(&mut s, "CLIENT INFO");
        let addr = me
            .split_whitespace()
            .find_map(|f| f.strip_prefix("addr="))
            .unwrap()
            .to_string();
        assert_eq!(
            call(&mut s, "CONFIG SET slowlog-log-slower-than 0"),
            "+OK\r\n"
        );
        let keys: Vec<String> = (0..n).map(|i| key_on("k", i, n, 0)).collect();
        for k in &keys {
            call(&mut s, &format!("SET {k} v"));
        }
        let len: usize = call(&mut s, "SLOWLOG LEN")[1..].trim().parse().unwrap();
        // CONFIG SET itself, the SETs (SLOWLOG LEN is counted after it answers).
        assert_eq!(len, 1 + n, "{n} shards");
        let got = call(&mut s, "SLOWLOG GET -1");
        for k in &keys {
            assert!(
                got.contains(&format!("$3\r\nSET\r\n${}\r\n{k}\r\n", k.len())),
                "{got}"
            );
        }
        assert!(
            got.contains(&format!("${}\r\n{addr}\r\n$8\r\nslowpoke\r\n", addr.len())),
            "{got}"
        );
        // Newest first: the last SET leads.
        let last = keys.last().unwrap();
        let first_args = got.find("SET").unwrap();
        assert!(got[first_args..].starts_with(&format!("SET\r\n${}\r\n{last}", last.len())));
        assert_eq!(
            call(&mut s, "SLOWLOG GET -2"),
            "-ERR count should be greater than or equal to -1\r\n"
        );
        call(&mut s, "CONFIG SET slowlog-max-len 2");
        assert_eq!(call(&mut s, "SLOWLOG LEN"), ":2\r\n");
        assert_eq!(call(&mut s, "SLOWLOG RESET"), "+OK\r\n");
        call(&mut s, "CONFIG SET slowlog-log-slower-than -1");
        // As redis-server: the RESET itself is logged (the threshold was still 0), the CONFIG
        // SET that turns the log off is not.
        assert_eq!(call(&mut s, "SLOWLOG LEN"), ":1\r\n");
        assert!(call(&mut s, "SLOWLOG GET").contains("$7\r\nSLOWLOG\r\n$5\r\nRESET\r\n"));
        assert!(call(&mut s, "SLOWLOG NOPE").starts_with("-ERR unknown subcommand 'NOPE'"));
    }
}

#[test]
fn latency_monitor_events() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string(), "--enable-debug-command", "yes"]);
        let mut s = server.raw();
        assert_eq!(call(&mut s, "LATENCY LATEST"), "*0\r\n");
        assert!(call(&mut s, "LATENCY DOCTOR").len() > 20);
        call(&mut s, "CONFIG SET latency-monitor-threshold 5");
        assert_eq!(call(&mut s, "DEBUG SLEEP 0.02"), "+OK\r\n");
        let latest = call(&mut s, "LATENCY LATEST");
        assert!(
            latest.starts_with("*1\r\n*4\r\n$7\r\ncommand\r\n:"),
            "{latest}"
        );
        let history = call(&mut s, "LATENCY HISTORY command");
        assert!(history.starts_with("*1\r\n*2\r\n:"), "{history}");
        let ms: u64 = history.rsplit(':').next().unwrap().trim().parse().unwrap();
        assert!(ms >= 20, "{history}");
        assert!(call(&mut s, "LATENCY GRAPH command").contains("command - high"));
        assert_eq!(
            call(&mut s, "LATENCY GRAPH nope"),
            "-ERR No samples available for event 'nope'\r\n"
        );
        assert!(call(&mut s, "LATENCY DOCTOR").contains("command"));
        assert_eq!(call(&mut s, "LATENCY RESET"), ":1\r\n");
        assert_eq!(call(&mut s, "LATENCY LATEST"), "*0\r\n");
        assert_eq!(call(&mut s, "LATENCY HISTORY command"), "*0\r\n");
    }
}

/// A pipelined command's measured time starts where the previous one of its batch ended (one
/// clock read per command): a slow command's time is its own, not its successor's, and neither
/// the wait for the next batch nor an idle client counts.
#[test]
fn pipelined_commands_are_timed_each_on_its_own() {
    use std::io::Write;
    let server = Server::start(&["--enable-debug-command", "yes"]);
    let mut s = server.raw();
    call(&mut s, "CONFIG SET slowlog-log-slower-than 20000");
    call(&mut s, "SLOWLOG RESET");
    let mut batch = cmd("DEBUG SLEEP 0.05");
    for _ in 0..3 {
        batch.extend(cmd("PING"));
    }
    s.write_all(&batch).unwrap();
    assert_eq!(read_replies(&mut s, 4).len(), 4);
    // An idle client, then a batch of commands that take microseconds.
    std::thread::sleep(std::time::Duration::from_millis(60));
    s.write_all(&cmd("PING").repeat(3)).unwrap();
    assert_eq!(read_replies(&mut s, 3).len(), 3);
    let log = call(&mut s, "SLOWLOG GET");
    assert!(log.starts_with("*1\r\n"), "only DEBUG SLEEP is slow: {log}");
    assert!(log.contains("$5\r\nDEBUG\r\n"), "{log}");
    let stats = info(&mut s, "commandstats");
    let usec: u64 = stat(&stats, "cmdstat_ping")
        .split(',')
        .find_map(|f| f.strip_prefix("usec="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(usec < 20_000, "six PINGs took {usec} us: {stats}");
}

#[test]
fn config_rewrite_updates_the_file_it_started_with() {
    let server = Server::start(&["--threads", "1"]);
    let mut s = server.raw();
    assert_eq!(
        call(&mut s, "CONFIG REWRITE"),
        "-ERR The server is running without a config file\r\n"
    );
    drop(server);
    let dir = std::env::temp_dir().join(format!("kv-rewrite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kv.conf");
    std::fs::write(
        &file,
        "# a comment that stays\nmaxmemory 1mb\nthreads 3\n\nhash-max-ziplist-entries 7\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let dir_s = dir.to_str().unwrap();
    for n in SHARDS {
        // (`dir` goes into the file: one that outlives each server.)
        let server = Server::start_from(Some(path), &["--threads", &n.to_string(), "--dir", dir_s]);
        let mut s = server.raw();
        assert_eq!(
            call(&mut s, "CONFIG GET hash-max-listpack-entries"),
            "*2\r\n$25\r\nhash-max-listpack-entries\r\n$1\r\n7\r\n"
        );
        call(
            &mut s,
            "CONFIG SET maxmemory 10mb maxmemory-policy allkeys-lfu slowlog-max-len 5",
        );
        assert_eq!(call(&mut s, "CONFIG REWRITE"), "+OK\r\n");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("# a comment that stays\nmaxmemory 10mb\nthreads 3\n\nhash-max-listpack-entries 7\n"), "{text}");
        assert!(text.contains("\n# Generated by CONFIG REWRITE\n"), "{text}");
        assert!(text.contains("\nmaxmemory-policy allkeys-lfu\n"), "{text}");
        assert!(text.contains("\nslowlog-max-len 5\n"), "{text}");
        drop(server);
        // The rewritten file starts a server with the same settings.
        // (`dir` goes into the file: one that outlives each server.)
        let server = Server::start_from(Some(path), &["--threads", &n.to_string(), "--dir", dir_s]);
        let mut s = server.raw();
        assert_eq!(
            call(&mut s, "CONFIG GET maxmemory-policy"),
            "*2\r\n$16\r\nmaxmemory-policy\r\n$11\r\nallkeys-lfu\r\n"
        );
        assert_eq!(
            call(&mut s, "CONFIG GET maxmemory"),
            "*2\r\n$9\r\nmaxmemory\r\n$8\r\n10485760\r\n"
        );
        // Rewriting again changes nothing.
        assert_eq!(call(&mut s, "CONFIG REWRITE"), "+OK\r\n");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
        call(
            &mut s,
            "CONFIG SET maxmemory 0 maxmemory-policy noeviction slowlog-max-len 128",
        );
        call(&mut s, "CONFIG REWRITE");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// GET `path` from the metrics port; the status line and the body.
fn scrape(port: u16, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn prometheus_endpoint_serves_info_counters() {
    for n in SHARDS {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Server::start(&[
            "--threads",
            &n.to_string(),
            "--metrics-port",
            &port.to_string(),
        ]);
        let mut s = server.raw();
        for i in 0..n {
            call(&mut s, &format!("SET {} v", key_on("m", i, n, 0)));
        }
        call(&mut s, "LPUSH m x");
        let (status, body) = scrape(port, "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            body.contains(&format!("redis_commands_total{{cmd=\"set\"}} {n}\n")),
            "{body}"
        );
        assert!(
            body.contains(&format!("redis_db_keys{{db=\"db0\"}} {}\n", n + 1)),
            "{body}"
        );
        assert!(body.contains("redis_connected_clients 1\n"), "{body}");
        assert!(body.contains("# TYPE redis_commands_processed_total counter\n"));
        assert!(body.contains(&format!("redis_shards {n}\n")), "{body}");
        assert_eq!(scrape(port, "/other").0, "HTTP/1.1 404 Not Found");
    }
}
