//! A Redis configuration file runs the server: Debian's redis.conf as installed, and every
//! parameter a real redis-server lists, with Redis's defaults.

use std::process::{Command, Stdio};

use crate::persistence::{q, TempDir};
use crate::replication::eventually;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `CONFIG GET *` as (name, value) pairs.
fn all_params(c: &mut redis::Connection) -> std::collections::BTreeMap<String, String> {
    let flat: Vec<String> = q(c, &["CONFIG", "GET", "*"]);
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect()
}

/// Debian's /etc/redis/redis.conf, with only its port, directory, log file and pid file moved
/// to this test's: the server daemonizes as the file says, writes its pid file and log there,
/// serves, and removes the pid file when it shuts down.
#[test]
fn debians_redis_conf_runs_the_server_in_the_background() {
    let conf = std::fs::read_to_string("/etc/redis/redis.conf")
        .expect("Debian's redis-server package (scripts/test installs it) provides the file");
    let dir = TempDir::new("debian-conf");
    let (port, d) = (free_port(), dir.path());
    let (log, pid) = (format!("{d}/kv.log"), format!("{d}/kv.pid"));
    let mut text = String::new();
    for line in conf.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        text += &match name {
            "port" => format!("port {port}"),
            "dir" => format!("dir {d}"),
            "logfile" => format!("logfile {log}"),
            "pidfile" => format!("pidfile {pid}"),
            _ => line.to_string(),
        };
        text.push('\n');
    }
    assert!(
        text.lines().any(|l| l == "daemonize yes"),
        "the file daemonizes"
    );
    let file = format!("{d}/redis.conf");
    std::fs::write(&file, text).unwrap();
    let started = Command::new(env!("CARGO_BIN_EXE_kvserver"))
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    // The foreground process ends once the server is in the background.
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut c = None;
    eventually(10, "the daemon serves", || {
        c = client.get_connection().ok();
        c.is_some()
    });
    let mut c = c.unwrap();
    let daemon: u32 = std::fs::read_to_string(&pid)
        .expect("the pid file")
        .trim()
        .parse()
        .unwrap();
    assert!(std::path::Path::new(&format!("/proc/{daemon}")).exists());
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let got: String = q(&mut c, &["GET", "k"]);
    assert_eq!(got, "v");
    let params = all_params(&mut c);
    assert_eq!(params["daemonize"], "yes");
    assert_eq!(params["tcp-backlog"], "511");
    assert_eq!(params["logfile"], log);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("Ready to accept connections"), "{logged}");
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    eventually(10, "the daemon exits", || {
        !std::path::Path::new(&format!("/proc/{daemon}")).exists()
    });
    assert!(
        !std::path::Path::new(&pid).exists(),
        "the pid file is removed"
    );
}

/// Every parameter a redis-server started with no configuration lists, we list, with the same
/// value (but `bind`: ours is loopback only by default, and the ports); CONFIG SET takes each
/// one's default back, or refuses it as Redis does for the immutable ones. Features this server
/// lacks refuse a value other than their default, saying so.
#[test]
fn every_redis_parameter_is_known_with_its_default() {
    let dir = TempDir::new("params");
    let (mut redis, mut r, _) = crate::persistence::redis_server_with(dir.path(), "none.rdb", &[]);
    let theirs = all_params(&mut r);
    let _ = redis.kill();
    let _ = redis.wait();
    let ours_server = crate::support::Server::start(&["--threads", "1"]);
    let mut o = ours_server.client();
    let ours = all_params(&mut o);
    let mut differ = Vec::new();
    for (name, value) in &theirs {
        match ours.get(name) {
            None => differ.push(format!("{name}: missing")),
            Some(v)
                if v != value
                    && !["bind", "port", "dir", "dbfilename", "save", "appendonly"]
                        .contains(&name.as_str()) =>
            {
                differ.push(format!("{name}: ours {v:?}, redis {value:?}"))
            }
            _ => {}
        }
    }
    assert!(differ.is_empty(), "{differ:#?}");
    assert!(theirs.len() > 180, "{}", theirs.len());
    for (name, why) in [
        ("tls-port", "TLS is not supported by this server"),
        ("cluster-enabled", "can't set immutable config"),
    ] {
        let value = if name == "tls-port" { "6380" } else { "yes" };
        let err = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query::<()>(&mut o)
            .unwrap_err();
        assert!(err.to_string().contains(why), "{name}: {err}");
    }
    // A tuning knob of Redis's own mechanisms is taken (and shown), changing nothing else.
    let _: () = q(
        &mut o,
        &["CONFIG", "SET", "activedefrag", "yes", "hz", "10"],
    );
    let shown: Vec<String> = q(&mut o, &["CONFIG", "GET", "activedefrag"]);
    assert_eq!(shown, ["activedefrag", "yes"]);
    let bad = redis::cmd("CONFIG")
        .arg("SET")
        .arg("oom-score-adj-values")
        .arg("0 200")
        .query::<()>(&mut o)
        .unwrap_err();
    assert!(
        bad.to_string().contains("wrong number of arguments"),
        "{bad}"
    );
    // And at start-up: a file asking for a missing feature stops the start, saying why.
    let out = Command::new(env!("CARGO_BIN_EXE_kvserver"))
        .args(["--port", "0", "--cluster-enabled", "yes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cluster mode is not supported"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Under systemd (`supervised systemd`, as Debian's unit runs redis-server, with
/// `NOTIFY_SOCKET` set), the server says READY=1 once it serves and STOPPING=1 on its way out.
#[test]
fn systemd_hears_ready_and_stopping() {
    let dir = TempDir::new("notify");
    let path = format!("{}/notify.sock", dir.path());
    let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvserver"))
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--dir",
            dir.path(),
        ])
        .args(["--supervised", "systemd", "--daemonize", "no"])
        .env("NOTIFY_SOCKET", &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).expect("a notification");
    let ready = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(ready.contains("READY=1"), "{ready}");
    // Ready means serving.
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut c = client.get_connection().unwrap();
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut c);
    let n = sock.recv(&mut buf).expect("a notification");
    assert_eq!(&buf[..n], b"STOPPING=1\n");
    assert!(child.wait().unwrap().success());
}
