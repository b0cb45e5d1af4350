//! Lua scripting (EVAL, EVALSHA, EVAL_RO, SCRIPT) against redis-server, replies compared byte
//! for byte: reply conversions both ways, errors with where they happened, the sandbox, and
//! the script cache.

use super::{Cmd, Conn, Redis};
use crate::support::Server;

fn cmd(args: &[&str]) -> Cmd {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Runs `cmds` on a fresh server of each kind; each command with both replies.
fn compare(cmds: &[Cmd], ours_args: &[&str]) {
    let redis = Redis::start();
    let theirs = Conn::open(redis.port).pipeline(cmds);
    let ours_server = Server::start(ours_args);
    let ours = Conn::open(ours_server.port).pipeline(cmds);
    for ((c, o), t) in cmds.iter().zip(&ours).zip(&theirs) {
        let show: Vec<String> = c
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(
            String::from_utf8_lossy(o),
            String::from_utf8_lossy(t),
            "{show:?}"
        );
    }
}

const CASES: &[&[&str]] = &[
    &["SET", "k", "v"],
    &["RPUSH", "l", "a", "b", "c"],
    &["EVAL", "return 1", "0"],
    &["EVAL", "return {1, 2, {3, 'x'}, nil, 5}", "0"],
    &["EVAL", "return 3.99", "0"],
    &["EVAL", "return -3.99", "0"],
    &["EVAL", "return true", "0"],
    &["EVAL", "return false", "0"],
    &["EVAL", "return nil", "0"],
    &["EVAL", "return {ok='fine'}", "0"],
    &["EVAL", "return {err='bad thing'}", "0"],
    &["EVAL", "return {err='-CODE bad thing'}", "0"],
    &["EVAL", "return redis.error_reply('My Error')", "0"],
    &["EVAL", "return redis.error_reply('-CODE2 x')", "0"],
    &["EVAL", "return redis.status_reply('FINE')", "0"],
    &[
        "EVAL",
        "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}",
        "2",
        "a",
        "b",
        "c",
        "d",
    ],
    &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"],
    &["EVAL", "return redis.call('get', 'nokey')", "0"],
    &[
        "EVAL",
        "return redis.call('set', KEYS[1], ARGV[1])",
        "1",
        "k2",
        "v2",
    ],
    &["EVAL", "return redis.call('lrange', 'l', 0, -1)", "0"],
    &["EVAL", "return redis.call('incrby', 'n', 2.0)", "0"],
    &["EVAL", "return redis.call('incrbyfloat', 'f', 0.5)", "0"],
    &["EVAL", "return type(redis.call('get', 'nokey'))", "0"],
    &["EVAL", "return redis.call('set', 'k3', 'x')['ok']", "0"],
    &["EVAL", "return redis.pcall('incr', 'k')", "0"],
    &["EVAL", "return redis.pcall('incr', 'k')['err']", "0"],
    &["EVAL", "return redis.call('incr', 'k')", "0"],
    &["EVAL", "return redis.call('lpush', 'k', 'x')", "0"],
    &["EVAL", "return redis.call('nosuch')", "0"],
    &["EVAL", "return redis.pcall('nosuch')", "0"],
    &["EVAL", "return redis.call('get')", "0"],
    &["EVAL", "return redis.call()", "0"],
    &["EVAL", "return redis.call('get', {})", "0"],
    &["EVAL", "return redis.call('multi')", "0"],
    &[
        "EVAL",
        "local ok, e = pcall(redis.call, 'nosuch'); return e",
        "0",
    ],
    &[
        "EVAL",
        "local ok, e = pcall(error, 'x'); return {tostring(ok), e}",
        "0",
    ],
    &["EVAL", "return x", "0"],
    &["EVAL", "x = 1", "0"],
    &["EVAL", "redis.call = nil", "0"],
    &["EVAL", "string.foo = 1", "0"],
    &["EVAL", "return 1 +", "0"],
    &["EVAL", "error('boom')", "0"],
    &["EVAL", "\n\nerror('on line three')", "0"],
    &["EVAL", "error({err='MY thing'})", "0"],
    &["EVAL", "local t = {} t[1] = 'a' t[3] = 'c' return t", "0"],
    &["EVAL", "return redis.sha1hex('')", "0"],
    &["EVAL", "return tostring(math.random())", "0"],
    &["EVAL", "return math.random(10)", "0"],
    &[
        "EVAL",
        "math.randomseed(7) return {math.random(1, 100), math.random(1, 100)}",
        "0",
    ],
    &["EVAL", "return {loadfile, dofile, print}", "0"],
    &["EVAL", "return _G.redis ~= nil", "0"],
    &["EVAL", "return string.format('%d-%s', 3, 'x')", "0"],
    &["EVAL", "return table.concat({'a','b'}, ',')", "0"],
    &["EVAL", "return redis.call('select', 1)", "0"],
    &["EVAL", "return 1", "-1"],
    &["EVAL", "return 1", "2", "a"],
    &["EVAL", "return 1", "abc"],
    &["EVAL_RO", "return redis.call('set', 'a', 'b')", "0"],
    &["EVAL_RO", "return redis.call('get', 'k2')", "0"],
    &[
        "EVAL",
        "#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')",
        "0",
    ],
    &["SCRIPT", "LOAD", "return 'loaded'"],
    &["EVALSHA", "2f31ba2bb6d6a0f42cc159d2e2dad55440778de3", "0"],
    &["EVALSHA", "a5b7c7d6c1a8f9b9fdd5da6c5d29efc1e2e3d4f0", "0"],
    &["EVALSHA", "nope", "0"],
    &[
        "SCRIPT",
        "EXISTS",
        "2f31ba2bb6d6a0f42cc159d2e2dad55440778de3",
        "ffff",
    ],
    &["SCRIPT", "LOAD", "return +"],
    &["SCRIPT", "FLUSH", "foo"],
    &["SCRIPT", "FLUSH"],
    &[
        "SCRIPT",
        "EXISTS",
        "2f31ba2bb6d6a0f42cc159d2e2dad55440778de3",
    ],
    &["EVALSHA", "2f31ba2bb6d6a0f42cc159d2e2dad55440778de3", "0"],
    &["SCRIPT", "KILL"],
    &["SCRIPT", "NOPE"],
    &["GET", "k2"],
    &["GET", "n"],
];

/// The cases on one shard, where every key is the script's.
#[test]
fn eval_as_redis() {
    let cmds: Vec<Cmd> = CASES.iter().map(|c| cmd(c)).collect();
    compare(&cmds, &["--threads", "1"]);
}

/// SCRIPT HELP as Redis 7.4 writes it (7.0.15, the reference here, says "Prints this help.").
#[test]
fn script_help_as_redis_7_4() {
    let server = Server::start(&[]);
    let r = Conn::open(server.port).pipeline(&[cmd(&["SCRIPT", "HELP"])]);
    let text = String::from_utf8_lossy(&r[0]);
    assert!(text.starts_with("*17\r\n+SCRIPT <subcommand>"), "{text}");
    assert!(
        text.ends_with("+HELP\r\n+    Print this help.\r\n"),
        "{text}"
    );
}

/// A script whose keys share a hash tag runs where they live, on any shard; one that touches
/// a key of another shard gets Redis Cluster's error for a non-local key.
#[test]
fn eval_on_two_shards() {
    let server = Server::start(&["--threads", "2"]);
    let mut c = Conn::open(server.port);
    let replies = c.pipeline(&[
        cmd(&[
            "EVAL",
            "redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])",
            "2",
            "{u}a",
            "{u}b",
            "x",
        ]),
        cmd(&["GET", "{u}a"]),
        cmd(&["EVAL", "return redis.call('get', KEYS[1])", "1", "{u}a"]),
    ]);
    assert_eq!(
        replies,
        vec![
            b":1\r\n".to_vec(),
            b"$1\r\nx\r\n".to_vec(),
            b"$1\r\nx\r\n".to_vec()
        ]
    );
    // Find two keys on different shards, as the server routes them.
    let mut found = None;
    for i in 0..100 {
        let k = format!("key{i}");
        let r = c.pipeline(&[cmd(&[
            "EVAL",
            "return redis.call('set', KEYS[1], 1)",
            "1",
            &k,
        ])]);
        assert_eq!(r[0], b"+OK\r\n".to_vec());
        let r = c.pipeline(&[cmd(&["EVAL", "return redis.call('get', ARGV[1])", "0", &k])]);
        if r[0].starts_with(b"-") {
            found = Some(String::from_utf8_lossy(&r[0]).into_owned());
            break;
        }
    }
    let err = found.expect("some key lives on the other shard");
    assert!(
        err.starts_with(
            "-ERR Script attempted to access a non local key in a cluster node script:"
        ),
        "{err}"
    );
}

/// A client blocked on a list is served when a script pushes to it (a key the script did not
/// declare, too), as Redis serves it after the script.
#[test]
fn script_push_serves_a_blocked_pop() {
    let server = Server::start(&["--threads", "1"]);
    let mut blocked = Conn::open(server.port);
    blocked.send(&[cmd(&["BLPOP", "q", "5"])]);
    let mut other = Conn::open(server.port);
    // The pop is waiting once the server counts it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let info = other.pipeline(&[cmd(&["INFO", "clients"])]);
        if String::from_utf8_lossy(&info[0]).contains("blocked_clients:1") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "BLPOP never blocked");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let r = other.pipeline(&[cmd(&["EVAL", "return redis.call('rpush', 'q', 'x')", "0"])]);
    assert_eq!(r[0], b":1\r\n".to_vec());
    let got = blocked.receive(&[cmd(&["BLPOP", "q", "5"])]);
    assert_eq!(got[0], b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n".to_vec());
}
