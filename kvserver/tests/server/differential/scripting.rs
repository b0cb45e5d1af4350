//! Lua scripting (EVAL, EVALSHA, EVAL_RO, SCRIPT) against redis-server, replies compared byte
//! for byte: reply conversions both ways, errors with where they happened, the sandbox, and
//! the script cache.

use std::io::{Read, Write};

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
    &["EVAL", "return cjson.encode({1,2,3,'x',true,false})", "0"],
    &["EVAL", "return cjson.encode({a=1})", "0"],
    &["EVAL", "return cjson.encode({})", "0"],
    &["EVAL", "return cjson.encode({[1]=1,[3]=3})", "0"],
    &["EVAL", "return cjson.encode({[20]=1})", "0"],
    &[
        "EVAL",
        "return cjson.encode('a/b\"c\\\\d\\n\\t\\1\\127é')",
        "0",
    ],
    &["EVAL", "return cjson.encode(1/3)", "0"],
    &["EVAL", "return cjson.encode(1e20)", "0"],
    &["EVAL", "return cjson.encode(0/0)", "0"],
    &["EVAL", "return cjson.encode(cjson.null)", "0"],
    &["EVAL", "return cjson.encode({f=function() end})", "0"],
    &["EVAL", "return cjson.encode({[true]=1})", "0"],
    &["EVAL", "return cjson.encode(3, 4)", "0"],
    &[
        "EVAL",
        "return cjson.decode('[1,2,\"x\",null,{\"a\":true}]')[3]",
        "0",
    ],
    &[
        "EVAL",
        "return type(cjson.decode('[1,2,\"x\",null]')[4])",
        "0",
    ],
    &[
        "EVAL",
        "return cjson.decode('{\"a\":[1,2,{\"b\":\"c\"}]}').a[3].b",
        "0",
    ],
    &["EVAL", "return cjson.decode('{\"a\":1.5}').a * 2", "0"],
    &["EVAL", "return bit.band(0xff, 0x0f)", "0"],
    &["EVAL", "return bit.bor(1, 2, 4)", "0"],
    &["EVAL", "return bit.tohex(255)", "0"],
    &["EVAL", "return bit.tohex(-1, -4)", "0"],
    &["EVAL", "return bit.lshift(1, 31)", "0"],
    &["EVAL", "return bit.rshift(-1, 28)", "0"],
    &["EVAL", "return bit.arshift(-16, 2)", "0"],
    &["EVAL", "return bit.bnot(0)", "0"],
    &["EVAL", "return bit.tobit(2^32 + 5)", "0"],
    &["EVAL", "return bit.bxor(5, 3)", "0"],
    &["EVAL", "return bit.rol(0x12345678, 8)", "0"],
    &["EVAL", "return bit.bswap(0x12345678)", "0"],
    &["EVAL", "return bit.band('x')", "0"],
    &["EVAL", "cjson.encode = nil", "0"],
    &["EVAL", "return math.random('x')", "0"],
    &["EVAL", "return math.random(0)", "0"],
    &["EVAL", "return math.random(1, 2, 3)", "0"],
    &[
        "EVAL",
        "return redis.call('script', 'load', 'return 1')",
        "0",
    ],
    &["EVAL", "return redis.call('script', 'help')[1]", "0"],
    &[
        "EVAL",
        "return redis.call('config', 'set', 'maxmemory', '0')",
        "0",
    ],
    &["EVAL", "return redis.call('client', 'id')", "0"],
    &["SCRIPT", "LOAD", "#!lua name=lib\nreturn 1"],
    &["EVAL", "#!lua flags=no-writes,nope\nreturn 1", "0"],
    &["EVAL", "#!python\nreturn 1", "0"],
    &["EVAL", "#!lua", "0"],
    &["EVAL", "#!lua flags=allow-oom\nreturn 2", "0"],
    &["HSET", "h", "f", "v"],
    &[
        "EVAL",
        "redis.setresp(3); return redis.call('hgetall', KEYS[1])",
        "1",
        "h",
    ],
    &[
        "EVAL",
        "redis.setresp(3); return redis.call('hgetall', KEYS[1]).map.f",
        "1",
        "h",
    ],
    &[
        "EVAL",
        "redis.setresp(3); return type(redis.call('get', 'nokey'))",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3); return {true, false, redis.call('smembers', 'h2')}",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3); return redis.call('zscore', 'nozset', 'm')",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(2); return redis.call('hgetall', KEYS[1])",
        "1",
        "h",
    ],
    &["EVAL", "redis.setresp(4)", "0"],
    &["EVAL", "redis.setresp()", "0"],
    &["SCRIPT", "LOAD", "return 'loaded'"],
    &["EVALSHA", "2f31ba2bb6d6a0f42cc159d2e2dad55440778de3", "0"],
    &["EVALSHA", "a5b7c7d6c1a8f9b9fdd5da6c5d29efc1e2e3d4f0", "0"],
    &["EVALSHA", "nope", "0"],
    &["EVALSHA", "[", "m1", "-inf"],
    &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "x"],
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
    // lua-cjson's configuration functions (last: the settings stay for later scripts).
    &["EVAL", "return cjson.encode_max_depth()", "0"],
    &["EVAL", "return cjson.encode_max_depth(2)", "0"],
    &["EVAL", "return {pcall(cjson.encode, {{{1}}})}", "0"],
    &["EVAL", "return cjson.encode({{1}})", "0"],
    &["EVAL", "return cjson.encode_max_depth(0)", "0"],
    &["EVAL", "return cjson.encode_max_depth('x')", "0"],
    &["EVAL", "return cjson.decode_max_depth(1)", "0"],
    &[
        "EVAL",
        "return {pcall(cjson.decode, '{\"obj\": {\"array\": [1,2,3,4]}}')}",
        "0",
    ],
    &["EVAL", "return cjson.encode_invalid_numbers()", "0"],
    &["EVAL", "return {pcall(cjson.encode, {num1=0/0})}", "0"],
    &["EVAL", "return cjson.encode_invalid_numbers(true)", "0"],
    &["EVAL", "return cjson.encode({0/0, 1/0, -1/0})", "0"],
    &["EVAL", "return cjson.encode_invalid_numbers('null')", "0"],
    &["EVAL", "return cjson.encode({0/0, 1/0})", "0"],
    &["EVAL", "return cjson.encode_invalid_numbers('bogus')", "0"],
    &["EVAL", "return cjson.encode_number_precision(3)", "0"],
    &["EVAL", "return cjson.encode({3.14159, 100000})", "0"],
    &["EVAL", "return cjson.encode_number_precision(15)", "0"],
    &["EVAL", "return {cjson.encode_sparse_array()}", "0"],
    &["EVAL", "return {cjson.encode_sparse_array(true)}", "0"],
    &["EVAL", "return cjson.encode({[1]=1, [20]=2})", "0"],
    &["EVAL", "return {cjson.encode_sparse_array(false, 0)}", "0"],
    &["EVAL", "return cjson.encode({[1]=1, [20]=2})", "0"],
    &["EVAL", "return cjson.decode_invalid_numbers()", "0"],
    &["EVAL", "return cjson.decode_invalid_numbers(false)", "0"],
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

/// The same cases on two shards: scripts with no keys, or keys on both shards, take every
/// shard's keys and reach each key where it lives.
#[test]
fn eval_as_redis_on_two_shards() {
    let cmds: Vec<Cmd> = CASES.iter().map(|c| cmd(c)).collect();
    compare(&cmds, &["--threads", "2"]);
}

/// On two shards: a script whose keys share a hash tag runs where they live; one with keys
/// on both shards, or none declared, reaches every key atomically; one whose declared keys are
/// one shard's gets Redis Cluster's error for a non-local key when it touches another shard's.
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
    // Keys on both shards (k0 ... k15 fall on both), declared and not.
    let keys: Vec<String> = (0..16).map(|i| format!("k{i}")).collect();
    let mut declared = vec![
        "EVAL",
        "for i, k in ipairs(KEYS) do redis.call('set', k, i) end return #KEYS",
        "16",
    ];
    declared.extend(keys.iter().map(String::as_str));
    let read = [
        "EVAL",
        "local t = {} for i = 1, 16 do t[i] = redis.call('get', 'k' .. (i - 1)) end return t",
        "0",
    ];
    let r = c.pipeline(&[cmd(&declared), cmd(&read)]);
    assert_eq!(r[0], b":16\r\n".to_vec());
    let mut want = b"*16\r\n".to_vec();
    for i in 1..=16 {
        want.extend_from_slice(format!("${}\r\n{i}\r\n", i.to_string().len()).as_bytes());
    }
    assert_eq!(
        String::from_utf8_lossy(&r[1]),
        String::from_utf8_lossy(&want)
    );
    // One declared key: its shard's alone.
    let mut refused = 0;
    for k in &keys {
        let r = c.pipeline(&[cmd(&[
            "EVAL",
            "return redis.call('get', ARGV[1])",
            "1",
            "k0",
            k,
        ])]);
        if r[0].starts_with(b"-") {
            let text = String::from_utf8_lossy(&r[0]).into_owned();
            assert!(
                text.starts_with(
                    "-ERR Script attempted to access a non local key in a cluster node script:"
                ),
                "{text}"
            );
            refused += 1;
        }
    }
    assert!(
        refused > 0 && refused < keys.len(),
        "{refused} of {} refused",
        keys.len()
    );
    // One cache for both shards: the five bodies above, counted once; Lua memory reported.
    let info = c.pipeline(&[cmd(&["INFO", "memory"])]);
    let info = String::from_utf8_lossy(&info[0]).into_owned();
    assert!(
        info.contains("\r\nnumber_of_cached_scripts:5\r\n"),
        "{info}"
    );
    let lua: u64 = info
        .split("\r\n")
        .find_map(|l| l.strip_prefix("used_memory_lua:"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(lua > 10_000, "{info}");
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

/// Scripts moving units between keys of both shards, from clients on both shards at once,
/// while readers sum every key (a script and an MGET): no reader sees a move half done, and
/// no script waits forever for another shard.
#[test]
fn scripts_across_shards_are_atomic_under_load() {
    let server = Server::start(&["--threads", "2"]);
    let keys: Vec<String> = (0..8).map(|i| format!("acct{i}")).collect();
    let mut setup = vec!["MSET".to_string()];
    for k in &keys {
        setup.push(k.clone());
        setup.push("100".to_string());
    }
    let setup: Vec<&str> = setup.iter().map(String::as_str).collect();
    Conn::open(server.port).pipeline(&[cmd(&setup)]);
    let port = server.port;
    let movers: Vec<_> = (0..4)
        .map(|t| {
            let keys = keys.clone();
            std::thread::spawn(move || {
                let mut c = Conn::open(port);
                let mut rng = 0x9e37_79b9_u64 + t;
                for _ in 0..300 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let (a, b) = (rng as usize % 8, (rng >> 8) as usize % 8);
                    let r = c.pipeline(&[cmd(&[
                        "EVAL",
                        "redis.call('decrby', KEYS[1], 1) return redis.call('incrby', KEYS[2], 1)",
                        "2",
                        &keys[a],
                        &keys[b],
                    ])]);
                    assert!(r[0].starts_with(b":"), "{}", String::from_utf8_lossy(&r[0]));
                }
            })
        })
        .collect();
    let mut reader = Conn::open(port);
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    let sum_script =
        "local s = 0 for i = 0, 7 do s = s + tonumber(redis.call('get', 'acct' .. i)) end return s";
    while !movers.iter().all(|m| m.is_finished()) {
        let r = reader.pipeline(&[cmd(&["EVAL", sum_script, "0"]), cmd(&mget)]);
        assert_eq!(
            r[0],
            b":800\r\n".to_vec(),
            "{}",
            String::from_utf8_lossy(&r[0])
        );
        let text = String::from_utf8_lossy(&r[1]).into_owned();
        let sum: i64 = text
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
            .map(|l| l.parse::<i64>().unwrap())
            .sum();
        assert_eq!(sum, 800, "{text}");
    }
    for m in movers {
        m.join().unwrap();
    }
}

/// A connection that answers PING within a moment (not on the shard a running script holds).
fn free_connection(port: u16) -> std::net::TcpStream {
    use std::io::{Read, Write};
    for _ in 0..50 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(300)))
            .unwrap();
        s.write_all(b"PING\r\n").unwrap();
        let mut buf = [0u8; 7];
        if s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n" {
            s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            return s;
        }
    }
    panic!("no connection reached a free shard");
}

fn send_line(s: &mut std::net::TcpStream, args: &[&str]) -> String {
    use std::io::{Read, Write};
    let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    s.write_all(&crate::support::encode(&argv)).unwrap();
    let mut buf = vec![0u8; 512];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Sends SCRIPT KILL from new connections until one on a shard the running script does not
/// hold answers something other than NOTBUSY (a connection on the busy shard gets no answer
/// in time and is dropped); that answer.
fn kill_from_another_shard(port: u16) -> String {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no SCRIPT KILL got through"
        );
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(300)))
            .unwrap();
        s.write_all(b"SCRIPT KILL\r\n").unwrap();
        let mut buf = vec![0u8; 512];
        let Ok(n) = s.read(&mut buf) else {
            continue;
        };
        let r = String::from_utf8_lossy(&buf[..n]).into_owned();
        if !r.starts_with("-NOTBUSY") {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// SCRIPT KILL from a connection of another shard stops a script that has not written, which
/// then answers Redis's error; one that wrote is UNKILLABLE; with none running, NOTBUSY.
#[test]
fn script_kill_stops_a_running_script() {
    let server = Server::start(&["--threads", "2"]);
    let mut idle = free_connection(server.port);
    assert_eq!(
        send_line(&mut idle, &["SCRIPT", "KILL"]),
        "-NOTBUSY No scripts in execution right now.\r\n"
    );
    let mut busy = Conn::open(server.port);
    busy.send(&[cmd(&[
        "EVAL",
        "local i = 0 while true do i = i + 1 end",
        "1",
        "k",
    ])]);
    assert_eq!(kill_from_another_shard(server.port), "+OK\r\n");
    let r = busy.receive(&[cmd(&["EVAL"])]);
    let text = String::from_utf8_lossy(&r[0]).into_owned();
    assert!(
        text.starts_with("-ERR Script killed by user with SCRIPT KILL... script: ")
            && text.ends_with(", on @user_script:1.\r\n"),
        "{text}"
    );
    // The shard serves again.
    assert_eq!(busy.pipeline(&[cmd(&["PING"])])[0], b"+PONG\r\n".to_vec());
    // A script that wrote cannot be killed (the server is killed at the end of the test). A
    // SCRIPT KILL that lands before its write stops it there; then try again.
    for attempt in 0.. {
        assert!(attempt < 20, "SCRIPT KILL always landed before the write");
        busy.send(&[cmd(&[
            "EVAL",
            "redis.call('set', KEYS[1], 'v') while true do end",
            "1",
            "k",
        ])]);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let r = kill_from_another_shard(server.port);
        if r.starts_with("-UNKILLABLE Sorry the script already executed write commands") {
            break;
        }
        assert_eq!(r, "+OK\r\n");
        let stopped = busy.receive(&[cmd(&["EVAL"])]);
        assert!(
            stopped[0].starts_with(b"-ERR Script killed by user with SCRIPT KILL..."),
            "{}",
            String::from_utf8_lossy(&stopped[0])
        );
    }
}

/// A RESP3 client's scripts, against redis-server (the HELLO reply itself differs: server
/// name, version, id).
#[test]
fn eval_for_a_resp3_client_as_redis() {
    let cmds: Vec<Cmd> = [
        &["HELLO", "3"][..],
        &["HSET", "h", "f", "v"],
        &["SADD", "s", "a"],
        &[
            "EVAL",
            "redis.setresp(3); return redis.call('hgetall', KEYS[1])",
            "1",
            "h",
        ],
        &[
            "EVAL",
            "redis.setresp(2); return redis.call('hgetall', KEYS[1])",
            "1",
            "h",
        ],
        &[
            "EVAL",
            "redis.setresp(3); return redis.call('smembers', 's')",
            "0",
        ],
        &["EVAL", "redis.setresp(3); return {true, false}", "0"],
        &["EVAL", "return {true, false}", "0"],
        &["EVAL", "return {double = 1.5}", "0"],
        &["EVAL", "return nil", "0"],
        &[
            "EVAL",
            "redis.setresp(3); return redis.call('get', 'nokey')",
            "0",
        ],
    ]
    .iter()
    .map(|c| cmd(c))
    .collect();
    let redis = Redis::start();
    let theirs = Conn::open(redis.port).pipeline(&cmds);
    let ours_server = Server::start(&["--threads", "1"]);
    let ours = Conn::open(ours_server.port).pipeline(&cmds);
    for ((c, o), t) in cmds.iter().zip(&ours).zip(&theirs).skip(1) {
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

/// A returned table nested past Lua's stack (a self-referencing one) ends in Redis's error,
/// and the server stays up (in a debug build too, whose frames are larger). Redis nests 7995
/// arrays (2665 maps) before the error, we 1000 (see `script::MAX_DEPTH`), so the replies are
/// compared by their ends, as raw bytes (deeper than the test's reply parser goes).
#[test]
fn self_referencing_tables_end_in_redis_error() {
    let redis = Redis::start();
    let ours = Server::start(&["--threads", "2"]);
    let scripts = [
        "local t = {}; t[1] = t; return t",
        "local t = {}; t[1] = t; t[2] = 5; return t",
        "local t = {}; t['map'] = {}; t['map'][1] = t; return t",
        "redis.setresp(3); local t = {}; t['map'] = {}; t['map'][1] = t; return t",
    ];
    for script in scripts {
        let raw = |port: u16| {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            let req = crate::support::encode(&[b"EVAL", script.as_bytes(), b"0"]);
            let ping = crate::support::encode(&[b"PING"]);
            s.write_all(&[req, ping].concat()).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 65536];
            while !got.ends_with(b"+PONG\r\n") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "closed after {script}");
                got.extend_from_slice(&buf[..n]);
            }
            got
        };
        let (o, t) = (raw(ours.port), raw(redis.port));
        let limit: &[u8] = b"-ERR reached lua stack limit\r\n";
        let has = |r: &[u8]| r.windows(limit.len()).any(|w| w == limit);
        assert!(has(&t) && has(&o), "{script}");
        // The same shape: the header each level repeats.
        assert_eq!(o[..4], t[..4], "{script}");
    }
}
