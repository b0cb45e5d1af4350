//! Function libraries kept across restarts and sent to replicas: an RDB file (ours read by
//! redis-server and redis-server's read by ours), the AOF (increments, an RDB base and a base
//! of commands), DEBUG RELOAD, and replication (full sync and the stream).

use std::path::Path;

use crate::persistence::{q, redis_server_with, wait_info, TempDir};
use crate::replication::eventually;
use crate::support::Server;

const LIB: &str = "#!lua name=lib\n\
    redis.register_function('incr2', function(keys) redis.call('incr', keys[1]) return redis.call('incr', keys[2]) end)\n\
    redis.register_function{function_name='hello', callback=function() return 'hello' end, flags={'no-writes'}, description='greets'}";

const LIB2: &str = "#!lua name=lib2\nredis.register_function('two', function() return 2 end)";

/// FUNCTION LIST WITHCODE, each library's functions sorted (Redis lists them in the order
/// of its hash table).
fn list(c: &mut redis::Connection) -> Vec<Vec<String>> {
    let v: redis::Value = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .query(c)
        .unwrap();
    let redis::Value::Array(libs) = v else {
        panic!("{v:?}")
    };
    let mut out: Vec<Vec<String>> = libs
        .into_iter()
        .map(|lib| {
            let redis::Value::Array(fields) = lib else {
                panic!("{lib:?}")
            };
            let mut shown: Vec<String> = fields
                .into_iter()
                .map(|f| match f {
                    redis::Value::Array(mut fns) => {
                        fns.sort_by_key(|f| format!("{f:?}"));
                        format!("{fns:?}")
                    }
                    other => format!("{other:?}"),
                })
                .collect();
            shown.shrink_to_fit();
            shown
        })
        .collect();
    out.sort();
    out
}

fn hello(c: &mut redis::Connection) -> String {
    q(c, &["FCALL", "hello", "0"])
}

/// SAVE keeps the libraries; a restart (1 and 2 shards) has them, and redis-server loads our
/// file with them; redis-server's file with a library loads into ours.
#[test]
fn libraries_survive_a_restart_and_redis_reads_them() {
    let dir = TempDir::new("fn-rdb");
    let server = Server::start(&["--threads", "2", "--dir", dir.path()]);
    let mut c = server.client();
    let name: String = q(&mut c, &["FUNCTION", "LOAD", LIB]);
    assert_eq!(name, "lib");
    let n: i64 = q(&mut c, &["FCALL", "incr2", "2", "a", "b"]);
    assert_eq!(n, 1);
    let before = list(&mut c);
    let _: () = q(&mut c, &["SAVE"]);
    drop(server);
    for threads in ["1", "2"] {
        let server = Server::start(&["--threads", threads, "--dir", dir.path()]);
        let mut c = server.client();
        assert_eq!(list(&mut c), before);
        assert_eq!(hello(&mut c), "hello");
        let info: String = q(&mut c, &["INFO", "memory"]);
        assert!(info.contains("\r\nnumber_of_functions:2\r\n"), "{info}");
        assert!(info.contains("\r\nnumber_of_libraries:1\r\n"), "{info}");
    }
    let (mut child, mut r, _) = redis_server_with(dir.path(), "dump.rdb", &[]);
    assert_eq!(list(&mut r), before, "redis-server loading our file");
    assert_eq!(hello(&mut r), "hello");
    let name: String = q(&mut r, &["FUNCTION", "LOAD", LIB2]);
    assert_eq!(name, "lib2");
    let _: () = q(&mut r, &["SAVE"]);
    let _ = child.kill();
    let _ = child.wait();
    let server = Server::start(&["--threads", "2", "--dir", dir.path()]);
    let mut c = server.client();
    let two: i64 = q(&mut c, &["FCALL", "two", "0"]);
    assert_eq!(two, 2);
    assert_eq!(hello(&mut c), "hello");
}

/// DEBUG RELOAD as Redis: the libraries come back from the file; NOFLUSH alone fails on a
/// library already there, NOFLUSH MERGE replaces it.
#[test]
fn debug_reload_loads_the_libraries() {
    let dir = TempDir::new("fn-reload");
    let server = Server::start(&[
        "--threads",
        "2",
        "--dir",
        dir.path(),
        "--enable-debug-command",
        "yes",
    ]);
    let mut c = server.client();
    let _: String = q(&mut c, &["FUNCTION", "LOAD", LIB]);
    let _: () = q(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(hello(&mut c), "hello");
    let e = redis::cmd("DEBUG")
        .arg("RELOAD")
        .arg("NOFLUSH")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(
        e.to_string().contains("Error trying to load the RDB"),
        "{e}"
    );
    let _: () = q(&mut c, &["DEBUG", "RELOAD", "NOFLUSH", "MERGE"]);
    assert_eq!(hello(&mut c), "hello");
    let _: () = q(&mut c, &["FUNCTION", "FLUSH"]);
    let _: () = q(&mut c, &["DEBUG", "RELOAD", "NOSAVE"]);
    assert_eq!(hello(&mut c), "hello", "the file still held the library");
}

/// The AOF keeps FUNCTION LOAD, DELETE and FLUSH (increment files), and a rewrite keeps the
/// libraries in its base, RDB or commands; redis-server reads the files.
#[test]
fn the_aof_keeps_the_libraries() {
    for preamble in ["yes", "no"] {
        let dir = TempDir::new(&format!("fn-aof-{preamble}"));
        let args = crate::aof::aof_args(
            "2",
            dir.path(),
            "always",
            &["--aof-use-rdb-preamble", preamble],
        );
        let server = Server::start(&args);
        let mut c = server.client();
        let _: String = q(&mut c, &["FUNCTION", "LOAD", LIB2]);
        let _: () = q(&mut c, &["FUNCTION", "FLUSH"]);
        let _: String = q(&mut c, &["FUNCTION", "LOAD", LIB2]);
        let _: () = q(&mut c, &["FUNCTION", "DELETE", "lib2"]);
        let _: String = q(&mut c, &["FUNCTION", "LOAD", LIB]);
        let before = list(&mut c);
        drop(server);
        let server = Server::start(&args);
        let mut c = server.client();
        assert_eq!(list(&mut c), before, "from the increments");
        let _: String = q(&mut c, &["BGREWRITEAOF"]);
        wait_info(&mut c, "aof_rewrites", "1");
        drop(server);
        let ext = if preamble == "yes" { "rdb" } else { "aof" };
        let base = Path::new(dir.path()).join(format!("appendonlydir/appendonly.aof.2.base.{ext}"));
        let bytes = std::fs::read(&base).unwrap();
        assert!(
            bytes.windows(3).any(|w| w == b"lib"),
            "the base holds the library"
        );
        let server = Server::start(&args);
        let mut c = server.client();
        assert_eq!(list(&mut c), before, "from the base ({preamble})");
        assert_eq!(hello(&mut c), "hello");
        drop(server);
        let (mut child, mut r, _) = redis_server_with(
            dir.path(),
            "dump.rdb",
            &["--appendonly", "yes", "--aof-use-rdb-preamble", preamble],
        );
        assert_eq!(list(&mut r), before, "redis-server loading our AOF");
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A replica gets the libraries of its master's snapshot (replacing its own), then FUNCTION
/// LOAD, RESTORE, DELETE and FLUSH through the stream; it refuses them from its own clients,
/// and runs a `no-writes` function but not one that may write, as Redis does.
#[test]
fn replicas_get_the_libraries() {
    let master = Server::start(&["--threads", "2"]);
    let replica = Server::start(&["--threads", "2"]);
    let (mut m, mut r) = (master.client(), replica.client());
    let _: String = q(&mut m, &["FUNCTION", "LOAD", LIB]);
    let _: String = q(&mut r, &["FUNCTION", "LOAD", LIB2]);
    let ok: String = q(
        &mut r,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    assert_eq!(ok, "OK");
    eventually(20, "the snapshot's libraries", || {
        list(&mut r) == list(&mut m)
    });
    assert_eq!(hello(&mut r), "hello");
    let e = redis::cmd("FCALL")
        .arg("incr2")
        .arg(2)
        .arg("a")
        .arg("b")
        .query::<i64>(&mut r)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "ReadOnly: You can't write against a read only replica."
    );
    let e = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(LIB2)
        .query::<String>(&mut r)
        .unwrap_err();
    assert!(e.to_string().contains("read only replica"), "{e}");
    let payload: Vec<u8> = q(&mut m, &["FUNCTION", "DUMP"]);
    let _: String = q(&mut m, &["FUNCTION", "LOAD", LIB2]);
    let n: i64 = q(&mut m, &["FCALL", "incr2", "2", "a", "b"]);
    assert_eq!(n, 1);
    eventually(20, "FUNCTION LOAD and the call's effects", || {
        list(&mut r) == list(&mut m)
            && q::<Option<String>>(&mut r, &["GET", "b"]).as_deref() == Some("1")
    });
    let _: () = q(&mut m, &["FUNCTION", "DELETE", "lib2"]);
    eventually(20, "FUNCTION DELETE", || list(&mut r) == list(&mut m));
    let _: () = q(&mut m, &["FUNCTION", "FLUSH"]);
    eventually(20, "FUNCTION FLUSH", || list(&mut r) == list(&mut m));
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(payload)
        .query(&mut m)
        .unwrap();
    eventually(20, "FUNCTION RESTORE", || {
        list(&mut r) == list(&mut m) && !list(&mut r).is_empty()
    });
    assert_eq!(hello(&mut r), "hello");
}
