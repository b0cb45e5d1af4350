//! `kvbench run` against real servers: a redis-server and our kvserver, each started here on a
//! free port, loaded for a couple of seconds; the JSON report is checked.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const KVBENCH: &str = env!("CARGO_BIN_EXE_kvbench");

/// A server process, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn pong(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Whether the server answering on `port` is process `pid` (its `INFO server` says so): a
/// port found free can be taken by another test's server before ours binds it.
fn answered_by(port: u16, pid: u32) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"INFO server\r\n").is_err() {
        return false;
    }
    let want = format!("process_id:{pid}\r\n");
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = s.read(&mut chunk) {
        got.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(at) = text.find("process_id:") {
            if text[at..].contains("\r\n") {
                return text[at..].starts_with(&want);
            }
        }
    }
    false
}

/// Starts `program` on a free port (`{PORT}` in `args`) and waits until it answers; tries
/// another port when the server exits first or the port turns out to be another's (checked
/// through INFO, which the null server does not have: it is only checked for exiting).
fn start(program: &Path, args: &[&str]) -> Server {
    let has_info = program != Path::new(KVBENCH);
    for _ in 0..5 {
        let port = free_port();
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{PORT}", &port.to_string()))
            .collect();
        let child = Command::new(program)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let mut server = Server { child, port };
        let t0 = Instant::now();
        loop {
            if matches!(server.child.try_wait(), Ok(Some(_))) {
                break; // most likely the port was taken meanwhile: try another
            }
            if pong(port) && (!has_info || answered_by(port, server.child.id())) {
                return server;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{} did not answer PING",
                program.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("{} exited before answering, five times", program.display());
}

fn redis() -> Server {
    start(
        Path::new("redis-server"),
        &[
            "--port",
            "{PORT}",
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            "/tmp",
            "--appendonly",
            "no",
        ],
    )
}

/// The kvserver binary of this build: next to kvbench when `cargo test --workspace` built it,
/// otherwise built here (into a target directory of its own, so no cargo lock is shared).
fn kvserver_bin() -> PathBuf {
    let beside = Path::new(KVBENCH).with_file_name("kvserver");
    if beside.is_file() {
        return beside;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target = Path::new(KVBENCH)
        .parent()
        .unwrap()
        .join("kvbench-test-kvserver");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["build", "-p", "kvserver", "--target-dir"])
        .arg(&target)
        .status()
        .expect("run cargo build -p kvserver");
    assert!(status.success(), "cargo build -p kvserver failed");
    let built = target.join("debug").join("kvserver");
    assert!(built.is_file(), "{} missing after build", built.display());
    built
}

fn kvserver() -> Server {
    start(&kvserver_bin(), &["--port", "{PORT}", "--threads", "1"])
}

fn kvbench(args: &[&str]) -> Output {
    Command::new(KVBENCH)
        .args(args)
        .output()
        .expect("run kvbench")
}

/// Runs `kvbench run` with `args` against `port`; returns the JSON report.
fn run_json(port: u16, args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("kvbench-test-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("run.json");
    let port = port.to_string();
    let mut all = vec!["run", "-p", &port, "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = kvbench(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kvbench {all:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    doc
}

/// Every workload of `doc` served requests, without errors, and the server's CPU was measured.
fn check_clean(doc: &Value, workloads: &[&str], min_requests: u64) {
    let results = doc["results"].as_array().unwrap();
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(names, workloads);
    for r in results {
        let all = &r["all"];
        assert!(all["requests"].as_u64().unwrap() >= min_requests, "{r}");
        assert_eq!(all["errors"].as_u64(), Some(0), "{r}");
        assert!(all["ops_per_sec"].as_f64().unwrap() > 0.0);
        let (p50, p99, max) = (
            all["p50_ms"].as_f64().unwrap(),
            all["p99_ms"].as_f64().unwrap(),
            all["max_ms"].as_f64().unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{all}");
        assert!(r["server_cpu_us_per_req"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["client_cpu_us_per_req"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn timed_run_against_redis_server() {
    let s = redis();
    let doc = run_json(
        s.port,
        &[
            "--test-time",
            "1",
            "-t",
            "set,get",
            "-c",
            "10",
            "-P",
            "8",
            "-r",
            "1000",
        ],
    );
    check_clean(&doc, &["set", "get"], 1000);
}

#[test]
fn timed_run_against_kvserver() {
    let s = kvserver();
    let doc = run_json(
        s.port,
        &[
            "--test-time",
            "1",
            "-t",
            "set,get,incr,mset",
            "-c",
            "10",
            "-P",
            "8",
        ],
    );
    check_clean(&doc, &["set", "get", "incr", "mset"], 1000);
}

#[test]
fn open_loop_ratio_holds_its_rate() {
    let s = redis();
    let doc = run_json(
        s.port,
        &[
            "--ratio",
            "1:4",
            "--rate",
            "20000",
            "--test-time",
            "2",
            "-c",
            "4",
            "--key-dist",
            "zipf",
        ],
    );
    check_clean(&doc, &["set:get"], 10_000);
    let r = &doc["results"][0];
    let ops = r["all"]["ops_per_sec"].as_f64().unwrap();
    assert!(
        (16_000.0..24_000.0).contains(&ops),
        "open loop at 20000/s gave {ops}"
    );
    let cmds = r["commands"].as_array().unwrap();
    let sets = cmds[0]["requests"].as_f64().unwrap();
    let gets = cmds[1]["requests"].as_f64().unwrap();
    assert!((gets / sets - 4.0).abs() < 0.1, "sets {sets} gets {gets}");
    // How late the client sent is reported in open loop, in order.
    let lag: Vec<f64> = r["send_lag_us"]
        .as_array()
        .expect("send_lag_us in open loop")
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(lag[0] <= lag[1] && lag[1] <= lag[2], "send lag {lag:?}");
}

#[test]
fn error_replies_are_counted_and_fail_the_run() {
    let s = redis();
    let port = s.port.to_string();
    let out = kvbench(&[
        "run",
        "-p",
        &port,
        "-n",
        "300",
        "-c",
        "3",
        "--command",
        "NOSUCHCMD __rand_int__",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("300 errors in nosuchcmd"), "{stdout}");
    assert!(stdout.contains("unknown command"), "{stdout}");
}

#[test]
fn unreachable_server_fails_cleanly() {
    let port = free_port().to_string();
    let out = kvbench(&["run", "-p", &port, "-n", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach"));
}

#[test]
fn compare_starts_both_servers_and_writes_json_and_chart() {
    let ours = kvserver_bin();
    let out = std::env::temp_dir().join(format!("kvbench-compare-{}", std::process::id()));
    let r = kvbench(&[
        "compare",
        "--ours",
        ours.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-t",
        "set,get",
        "-n",
        "20000",
        "-c",
        "10",
        "-P",
        "8",
        "-r",
        "5000",
        "--rounds",
        "2",
        "--server-cpus",
        "0",
        "--load-cpus",
        "0",
    ]);
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(stdout.contains("kvserver/redis: throughput"), "{stdout}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare-custom.json")).unwrap())
            .unwrap();
    let workloads = doc["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 2);
    for w in workloads {
        let servers = w["servers"].as_array().unwrap();
        let names: Vec<&str> = servers
            .iter()
            .map(|s| s["server"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["kvserver", "redis"]);
        for s in servers {
            assert_eq!(s["ops_per_sec_rounds"].as_array().unwrap().len(), 2, "{s}");
            assert!(s["ops_per_sec"].as_f64().unwrap() > 0.0);
            assert!(s["cpu_us_per_req"].as_f64().unwrap() > 0.0);
            assert!(s["rss_bytes"].as_u64().unwrap() > 0);
            assert_eq!(s["errors"].as_u64(), Some(0));
        }
        assert!(w["ratios"][0]["throughput"][0].as_f64().unwrap() > 0.0);
    }
    let svg = std::fs::read_to_string(out.join("compare-custom.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("kvserver") && svg.contains(">\nget\n<"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn compare_fails_when_a_server_cannot_start() {
    let out = std::env::temp_dir().join(format!("kvbench-compare-fail-{}", std::process::id()));
    let r = kvbench(&[
        "compare",
        "--ours",
        "/bin/false",
        "--no-redis",
        "--out",
        out.to_str().unwrap(),
        "-n",
        "10",
    ]);
    assert_eq!(r.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("kvserver exited"), "{stderr}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn null_server_answers_every_request() {
    let s = start(Path::new(KVBENCH), &["null-server", "--port", "{PORT}"]);
    // Every request counted once, though replies of a batch are recorded together.
    let doc = run_json(
        s.port,
        &["-c", "3", "-P", "16", "-n", "4800", "-t", "ping,set,get"],
    );
    for r in doc["results"].as_array().unwrap() {
        assert_eq!(r["all"]["requests"].as_u64(), Some(4800), "{r}");
        assert_eq!(r["all"]["errors"].as_u64(), Some(0), "{r}");
    }
    // 2 MB of replies to a client that reads only after sending everything
    // all arrive. (Loopback buffers absorb this much here, so it does not
    // force the server's writable-event path: a mutation removing it still passed.)
    const N: usize = 300_000;
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(&b"*1\r\n$4\r\nPING\r\n".repeat(N)).unwrap();
    let want = b"+PONG\r\n".len() * N;
    let mut got = 0;
    let mut buf = vec![0u8; 64 << 10];
    while got < want {
        let k = c.read(&mut buf).expect("the null server stopped answering");
        assert!(
            k > 0,
            "the null server closed the connection after {got} bytes"
        );
        assert!(buf[..k].iter().all(|b| b"+PONG\r\n".contains(b)));
        got += k;
    }
    assert_eq!(got, want);
}
