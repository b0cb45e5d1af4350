//! Redis Functions (FUNCTION, FCALL, FCALL_RO) against redis-server, replies compared byte for
//! byte; FUNCTION DUMP payloads restored across the two servers both ways; libraries kept by
//! an RDB file across a restart (and read by redis-server), by the AOF, and sent to a replica.

use super::{Cmd, Conn, Redis};
use crate::support::Server;

fn cmd(args: &[&str]) -> Cmd {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Runs `cmds` on a fresh server of each kind and compares every reply.
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
        let (o, t) = if show == ["FUNCTION", "DUMP"] {
            (records(o), records(t))
        } else {
            (o.clone(), t.clone())
        };
        assert_eq!(
            String::from_utf8_lossy(&o),
            String::from_utf8_lossy(&t),
            "{show:?}"
        );
    }
}

/// A FUNCTION DUMP reply without its footer: the payload's version is the RDB version of the
/// server (ours writes 10, Redis 7.0's, which 7.0 and 7.4 both restore; 7.4 writes 12), and the
/// CRC covers it.
fn records(reply: &[u8]) -> Vec<u8> {
    match kvcore::resp::parse_reply(reply) {
        Ok(Some((kvcore::Reply::Bulk(b), _))) if b.len() >= 10 => b[..b.len() - 10].to_vec(),
        _ => reply.to_vec(),
    }
}

const LIB: &str = "#!lua name=lib\n\
    local function key(keys) return keys[1] end\n\
    redis.register_function('setk', function(keys, args) return redis.call('set', key(keys), args[1]) end)\n\
    redis.register_function{function_name='getk', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads a key'}\n\
    redis.register_function('boom', function() error('boom') end)\n\
    redis.register_function('nokeys', function(keys, args) return {#keys, #args, type(KEYS)} end)\n\
    redis.register_function('bad', function() local x = nil; return x.y end)\n\
    redis.register_function('call_bad', function() return redis.call('nosuch') end)\n\
    redis.register_function('err_reply', function() return redis.error_reply('MY err') end)\n\
    redis.register_function('reg', function() return redis.register_function('x', function() end) end)\n\
    redis.register_function('glob', function() x = 1 end)\n\
    redis.register_function('both', function(keys) redis.call('incr', keys[1]) return redis.call('incr', keys[2]) end)";

/// One library of one function, for FUNCTION LIST (Redis lists several in hash order).
const ONE: &str = "#!lua name=one\nredis.register_function{function_name='only', callback=function() return 'only' end, flags={'allow-oom', 'no-writes'}}";

const CASES: &[&[&str]] = &[
    &["FUNCTION", "LOAD", LIB],
    &["FUNCTION", "LOAD", LIB],
    &["FUNCTION", "LOAD", "REPLACE", LIB],
    &["FUNCTION", "LOAD", "replace", "replace", LIB],
    &["FUNCTION", "LOAD", "bogus", LIB],
    &["FCALL", "setk", "1", "k", "v"],
    &["FCALL", "SETK", "1", "k", "v2"],
    &["FCALL", "getk", "1", "k"],
    &["FCALL_RO", "getk", "1", "k"],
    &["FCALL_RO", "setk", "1", "k", "v"],
    &["FCALL", "nope", "0"],
    &["FCALL", "getk", "x"],
    &["FCALL", "getk", "-1"],
    &["FCALL", "getk", "3", "a"],
    &["FCALL", "boom", "0"],
    &["FCALL", "nokeys", "2", "a", "b", "c"],
    &["FCALL", "bad", "0"],
    &["FCALL", "call_bad", "0"],
    &["FCALL", "err_reply", "0"],
    &["FCALL", "reg", "0"],
    &["FCALL", "glob", "0"],
    &["FCALL", "both", "2", "{t}a", "{t}b"],
    &["FCALL", "both", "2", "a", "b"],
    &["MGET", "{t}a", "{t}b", "a", "b"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('SETK', function() return 1 end)"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('f', function() return 1 end) redis.register_function('f', function() return 1 end)"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('a-b', function() return 1 end)"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('')"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function()"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('f1')"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('f1', function() end, 3)"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function(nil, function() end)"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function('f1', 'x')"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function{function_name='f1'}"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function{callback=function() end}"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function{function_name='f1', callback='x'}"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function{function_name='f1', callback=function() end, flags='no-writes'}"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function{function_name='f1', callback=function() end, flags={'nope'}}"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function{function_name='f1', callback=function() end, other=1}"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function{function_name={}, callback=function() end}"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.register_function{function_name='f1', callback=function() end, description={}}"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nreturn redis.call('ping')"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nreturn redis.setresp(3)"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nreturn math.random()"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nreturn redis.math.random()"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nmt = getmetatable(_G)"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\na = 1"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nreturn 1"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nreturn 1 +"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nlocal x = nil; x.y = 1"],
    &["FUNCTION", "LOAD", "#!lua name=lib2\nredis.log(redis.LOG_NOTICE, 'x') redis.register_function('v', function() return redis.REDIS_VERSION_NUM > 0 end)"],
    &["FCALL", "v", "0"],
    &["FUNCTION", "LOAD", "return 1"],
    &["FUNCTION", "LOAD", "#!lua name=x"],
    &["FUNCTION", "LOAD", "#!lua\nreturn 1"],
    &["FUNCTION", "LOAD", "#! name=x\nreturn 1"],
    &["FUNCTION", "LOAD", "#!js name=x\nreturn 1"],
    &["FUNCTION", "LOAD", "#!lua name=x foo=bar\nreturn 1"],
    &["FUNCTION", "LOAD", "#!lua name=x name=y\nreturn 1"],
    &["FUNCTION", "LOAD", "#!lua name=a.b\nreturn 1"],
    &["FUNCTION", "LOAD", "#!lua name=\"q\"\nredis.register_function('q', function() return 'q' end)"],
    &["FCALL", "q", "0"],
    &["FUNCTION", "STATS"],
    &["FUNCTION", "DELETE", "q"],
    &["FUNCTION", "DELETE", "lib2"],
    &["FUNCTION", "DELETE", "lib"],
    &["FUNCTION", "DELETE", "lib"],
    &["FUNCTION", "DELETE"],
    &["FUNCTION", "LIST"],
    &["FUNCTION", "LOAD", ONE],
    &["FUNCTION", "LIST"],
    &["FUNCTION", "LIST", "WITHCODE"],
    &["FUNCTION", "DUMP"],
    &["FUNCTION", "LIST", "LIBRARYNAME", "o*"],
    &["FUNCTION", "LIST", "libraryname", "x*", "withcode"],
    &["FUNCTION", "LIST", "LIBRARYNAME"],
    &["FUNCTION", "LIST", "WITHCODE", "WITHCODE"],
    &["FUNCTION", "LIST", "bad"],
    &["FUNCTION", "STATS"],
    &["FUNCTION", "STATS", "x"],
    &["FUNCTION", "KILL"],
    &["FUNCTION", "RESTORE", "junk"],
    &["FUNCTION", "RESTORE", "junk", "bad"],
    &["FUNCTION", "RESTORE", "junk", "flush", "x"],
    &["FUNCTION", "FLUSH", "x"],
    &["FUNCTION", "FLUSH", "sync", "x"],
    &["FUNCTION", "FLUSH", "ASYNC"],
    &["FUNCTION", "LIST"],
    &["FUNCTION", "DUMP"],
    &["FUNCTION", "DUMP", "x"],
    &["FUNCTION", "NOPE"],
    &["FUNCTION"],
    &["FCALL", "only", "0"],
    &["COMMAND", "GETKEYS", "FCALL", "f", "2", "a", "b", "c"],
    &["COMMAND", "GETKEYS", "FCALL_RO", "f", "1", "a"],
    &["SCRIPT", "KILL"],
];

/// The cases on one shard.
#[test]
fn functions_as_redis() {
    let cmds: Vec<Cmd> = CASES.iter().map(|c| cmd(c)).collect();
    compare(&cmds, &["--threads", "1"]);
}

/// The same cases on two shards: FCALL with keys on both shards or none takes every shard's
/// keys, as EVAL does; the libraries are every shard's.
#[test]
fn functions_as_redis_on_two_shards() {
    let cmds: Vec<Cmd> = CASES.iter().map(|c| cmd(c)).collect();
    compare(&cmds, &["--threads", "2"]);
}

/// The bulk reply's bytes.
fn bulk(reply: &[u8]) -> Vec<u8> {
    match kvcore::resp::parse_reply(reply) {
        Ok(Some((kvcore::Reply::Bulk(b), _))) => b,
        other => panic!("not a bulk reply: {other:?}"),
    }
}

/// FUNCTION DUMP of redis-server restores into ours and ours into redis-server (whatever its
/// version: ours is version 10, which 7.0 and 7.4 accept); each then calls the other's
/// functions. A damaged payload is refused by both alike.
#[test]
fn function_dump_restores_across_servers() {
    let redis = Redis::start();
    let ours = Server::start(&["--threads", "2"]);
    let (mut r, mut o) = (Conn::open(redis.port), Conn::open(ours.port));
    let theirs = r.pipeline(&[cmd(&["FUNCTION", "LOAD", LIB]), cmd(&["FUNCTION", "DUMP"])]);
    let theirs = bulk(&theirs[1]);
    let mine = o.pipeline(&[cmd(&["FUNCTION", "LOAD", ONE]), cmd(&["FUNCTION", "DUMP"])]);
    let mine = bulk(&mine[1]);
    let restore = |c: &mut Conn, payload: &[u8], policy: &str| {
        let mut args = vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), payload.to_vec()];
        if !policy.is_empty() {
            args.push(policy.as_bytes().to_vec());
        }
        c.pipeline(&[args]).remove(0)
    };
    assert_eq!(restore(&mut o, &theirs, ""), b"+OK\r\n".to_vec());
    assert_eq!(restore(&mut r, &mine, ""), b"+OK\r\n".to_vec());
    // Again: both libraries are there now.
    assert_eq!(
        restore(&mut o, &theirs, ""),
        restore(&mut r, &theirs, ""),
        "APPEND of a library already there"
    );
    assert_eq!(restore(&mut o, &theirs, "REPLACE"), b"+OK\r\n".to_vec());
    assert_eq!(restore(&mut r, &theirs, "REPLACE"), b"+OK\r\n".to_vec());
    let mut damaged = mine.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 1;
    assert_eq!(restore(&mut o, &damaged, ""), restore(&mut r, &damaged, ""));
    let calls = [
        cmd(&["FCALL", "only", "0"]),
        cmd(&["FCALL", "setk", "1", "k", "x"]),
        cmd(&["FCALL_RO", "getk", "1", "k"]),
        cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "one"]),
        cmd(&["FUNCTION", "STATS"]),
    ];
    assert_eq!(o.pipeline(&calls), r.pipeline(&calls));
    // FLUSH: only the payload's libraries remain.
    assert_eq!(restore(&mut o, &mine, "FLUSH"), b"+OK\r\n".to_vec());
    assert_eq!(restore(&mut r, &mine, "FLUSH"), b"+OK\r\n".to_vec());
    let after = [
        cmd(&["FUNCTION", "LIST"]),
        cmd(&["FCALL", "setk", "1", "k", "y"]),
    ];
    assert_eq!(o.pipeline(&after), r.pipeline(&after));
}
