//! Command sequences through `Db::dispatch`, checked against Redis's exact reply bytes.

use kvcore::{Clock, Db, Session};

/// Runs a command given as space-separated words (no quoting) and returns the raw reply.
fn run(db: &mut Db, s: &mut Session, line: &str) -> String {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    let mut out = Vec::new();
    db.dispatch(s, &args, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs `(command, expected reply)` pairs in order.
fn check(db: &mut Db, s: &mut Session, script: &[(&str, &str)]) {
    for (cmd, want) in script {
        assert_eq!(run(db, s, cmd), *want, "command: {cmd}");
    }
}

fn setup() -> (Db, Session) {
    let mut db = Db::new();
    db.set_clock(Clock::Manual(1_700_000_000_000));
    (db, Session::default())
}

#[test]
fn strings_family() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("GET k", "$-1\r\n"),
            ("SET k v", "+OK\r\n"),
            ("GET k", "$1\r\nv\r\n"),
            ("SET k v2 NX", "$-1\r\n"),
            ("SET k v2 XX GET", "$1\r\nv\r\n"),
            ("SET k v NX XX", "-ERR syntax error\r\n"),
            (
                "SET k v EX 0",
                "-ERR invalid expire time in 'set' command\r\n",
            ),
            (
                "SET k v EX abc",
                "-ERR value is not an integer or out of range\r\n",
            ),
            ("SET k v EX 10 PX 10", "-ERR syntax error\r\n"),
            ("SET k v KEEPTTL EX 10", "-ERR syntax error\r\n"),
            ("SET k v EX", "-ERR syntax error\r\n"),
            ("SETNX k x", ":0\r\n"),
            ("SETNX n 10", ":1\r\n"),
            ("INCR n", ":11\r\n"),
            ("INCRBY n -20", ":-9\r\n"),
            ("DECRBY n 1", ":-10\r\n"),
            ("DECR n", ":-11\r\n"),
            ("INCR k", "-ERR value is not an integer or out of range\r\n"),
            ("SET big 9223372036854775807", "+OK\r\n"),
            ("INCR big", "-ERR increment or decrement would overflow\r\n"),
            (
                "DECRBY n -9223372036854775808",
                "-ERR decrement would overflow\r\n",
            ),
            (
                "INCRBY n +1",
                "-ERR value is not an integer or out of range\r\n",
            ),
            ("OBJECT ENCODING n", "$3\r\nint\r\n"),
            ("APPEND n 5", ":4\r\n"),
            ("GET n", "$4\r\n-115\r\n"),
            ("OBJECT ENCODING n", "$3\r\nraw\r\n"),
            ("INCR n", ":-114\r\n"),
            ("STRLEN n", ":4\r\n"),
            ("STRLEN nokey", ":0\r\n"),
            ("SET s Hello_World", "+OK\r\n"),
            ("GETRANGE s 0 4", "$5\r\nHello\r\n"),
            ("GETRANGE s -5 -1", "$5\r\nWorld\r\n"),
            ("GETRANGE s -1 -5", "$0\r\n\r\n"),
            ("GETRANGE s 5 100", "$6\r\n_World\r\n"),
            ("SUBSTR s 0 0", "$1\r\nH\r\n"),
            ("GETRANGE nokey 0 1", "$0\r\n\r\n"),
            ("SETRANGE s 6 Redis", ":11\r\n"),
            ("GET s", "$11\r\nHello_Redis\r\n"),
            ("SETRANGE s -1 x", "-ERR offset is out of range\r\n"),
            (
                "SETRANGE s 536870912 x",
                "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
            ),
            ("SETRANGE new 3 ab", ":5\r\n"),
            ("GET new", "$5\r\n\0\0\0ab\r\n"),
            ("SETRANGE empty 3 ", ":0\r\n"),
            ("EXISTS empty", ":0\r\n"),
            ("GETSET s x", "$11\r\nHello_Redis\r\n"),
            ("GETDEL s", "$1\r\nx\r\n"),
            ("GETDEL s", "$-1\r\n"),
            ("MSET a 1 b 2", "+OK\r\n"),
            (
                "MSET a 1 b",
                "-ERR wrong number of arguments for 'mset' command\r\n",
            ),
            ("MGET a nokey b", "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n"),
            ("MSETNX a 9 c 3", ":0\r\n"),
            ("MSETNX c 3 d 4", ":1\r\n"),
            ("GET c", "$1\r\n3\r\n"),
            ("SET f 10.5", "+OK\r\n"),
            ("INCRBYFLOAT f abc", "-ERR value is not a valid float\r\n"),
            ("INCRBYFLOAT k 1", "-ERR value is not a valid float\r\n"),
            (
                "GET",
                "-ERR wrong number of arguments for 'get' command\r\n",
            ),
            (
                "FOO a b",
                "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n",
            ),
        ],
    );
}

#[test]
fn expiry_with_a_manual_clock() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("SET k v EX 10", "+OK\r\n"),
            ("TTL k", ":10\r\n"),
            ("PTTL k", ":10000\r\n"),
            ("EXPIRETIME k", ":1700000010\r\n"),
            ("PEXPIRETIME k", ":1700000010000\r\n"),
            ("SET k v2 KEEPTTL", "+OK\r\n"),
            ("TTL k", ":10\r\n"),
            ("EXPIRE k 100 NX", ":0\r\n"),
            ("EXPIRE k 100 GT", ":1\r\n"),
            ("EXPIRE k 50 GT", ":0\r\n"),
            ("EXPIRE k 50 LT", ":1\r\n"),
            (
                "EXPIRE k 10 NX XX",
                "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
            ),
            (
                "EXPIRE k 10 GT LT",
                "-ERR GT and LT options at the same time are not compatible\r\n",
            ),
            ("EXPIRE k 10 FOO", "-ERR Unsupported option FOO\r\n"),
            (
                "EXPIRE k 9223372036854775807",
                "-ERR invalid expire time in 'expire' command\r\n",
            ),
            ("PERSIST k", ":1\r\n"),
            ("PERSIST k", ":0\r\n"),
            ("TTL k", ":-1\r\n"),
            ("TTL nokey", ":-2\r\n"),
            ("EXPIRE nokey 10", ":0\r\n"),
            ("PEXPIRE k 1500", ":1\r\n"),
            (
                "SETEX e 0 v",
                "-ERR invalid expire time in 'setex' command\r\n",
            ),
            ("PSETEX e 100 v", "+OK\r\n"),
            ("GETEX k PERSIST", "$2\r\nv2\r\n"),
            ("TTL k", ":-1\r\n"),
            ("GETEX k EX 5", "$2\r\nv2\r\n"),
            ("TTL k", ":5\r\n"),
            ("GETEX k EX 5 PX 4", "-ERR syntax error\r\n"),
        ],
    );
    db.clock_mut().advance(200);
    db.refresh_clock();
    check(
        &mut db,
        &mut s,
        &[("GET e", "$-1\r\n"), ("EXISTS k", ":1\r\n")],
    );
    db.clock_mut().advance(5000);
    db.refresh_clock();
    check(
        &mut db,
        &mut s,
        &[("GET k", "$-1\r\n"), ("DBSIZE", ":0\r\n")],
    );
    check(
        &mut db,
        &mut s,
        &[
            ("SET k v", "+OK\r\n"),
            ("EXPIRE k -5", ":1\r\n"),
            ("EXISTS k", ":0\r\n"),
        ],
    );
}

#[test]
fn keys_family() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("MSET a 1 b 2 c 3", "+OK\r\n"),
            ("EXISTS a b nokey a", ":3\r\n"),
            ("DEL a nokey", ":1\r\n"),
            ("UNLINK b", ":1\r\n"),
            ("TYPE c", "+string\r\n"),
            ("TYPE nokey", "+none\r\n"),
            ("RENAME nokey x", "-ERR no such key\r\n"),
            ("RENAME c d", "+OK\r\n"),
            ("GET d", "$1\r\n3\r\n"),
            ("RENAME d d", "+OK\r\n"),
            ("RENAMENX d d", ":0\r\n"),
            ("SET e 5", "+OK\r\n"),
            ("RENAMENX d e", ":0\r\n"),
            (
                "COPY d d",
                "-ERR source and destination objects are the same\r\n",
            ),
            ("COPY d e", ":0\r\n"),
            ("COPY d e REPLACE", ":1\r\n"),
            ("COPY d f DB 99", "-ERR DB index is out of range\r\n"),
            ("COPY d f DB 1", ":1\r\n"),
            ("COPY d f FOO", "-ERR syntax error\r\n"),
            (
                "MOVE d 0",
                "-ERR source and destination objects are the same\r\n",
            ),
            ("MOVE d 1", ":1\r\n"),
            ("SELECT 1", "+OK\r\n"),
            ("DBSIZE", ":2\r\n"),
            ("SELECT 16", "-ERR DB index is out of range\r\n"),
            ("FLUSHDB FOO", "-ERR syntax error\r\n"),
            ("FLUSHDB", "+OK\r\n"),
            ("DBSIZE", ":0\r\n"),
            ("SELECT 0", "+OK\r\n"),
            ("RANDOMKEY", "$1\r\ne\r\n"),
            ("KEYS *", "*1\r\n$1\r\ne\r\n"),
            ("KEYS x*", "*0\r\n"),
            ("SCAN x", "-ERR invalid cursor\r\n"),
            ("SCAN 0 COUNT 0", "-ERR syntax error\r\n"),
            ("SCAN 0 MATCH", "-ERR syntax error\r\n"),
            ("SCAN 0 TYPE string", "*2\r\n$1\r\n0\r\n*1\r\n$1\r\ne\r\n"),
            ("OBJECT ENCODING nokey", "$-1\r\n"),
            (
                "OBJECT FOO",
                "-ERR unknown subcommand 'FOO'. Try OBJECT HELP.\r\n",
            ),
            ("FLUSHALL", "+OK\r\n"),
            ("RANDOMKEY", "$-1\r\n"),
        ],
    );
}

#[test]
fn scan_returns_every_key_once_when_stable() {
    let (mut db, mut s) = setup();
    for i in 0..1000 {
        db.set(format!("key:{i}").as_bytes(), b"v").unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let mut out = Vec::new();
        let c = cursor.clone();
        db.dispatch(&mut s, &[b"SCAN", c.as_bytes(), b"COUNT", b"50"], &mut out);
        let (v, _) = kvcore::resp::reply::parse_reply(&out).unwrap().unwrap();
        let kvcore::Reply::Array(parts) = v else {
            panic!("not an array")
        };
        let (kvcore::Reply::Bulk(next), kvcore::Reply::Array(keys)) = (&parts[0], &parts[1]) else {
            panic!()
        };
        for k in keys {
            let kvcore::Reply::Bulk(k) = k else { panic!() };
            seen.insert(k.clone());
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 1000);
}

#[test]
fn connection_family() {
    let (mut db, mut s) = setup();
    check(&mut db, &mut s, &[
        ("PING", "+PONG\r\n"),
        ("PING hi", "$2\r\nhi\r\n"),
        ("PING a b", "-ERR wrong number of arguments for 'ping' command\r\n"),
        ("ECHO x", "$1\r\nx\r\n"),
        ("HELLO 4", "-NOPROTO unsupported protocol version\r\n"),
        ("HELLO x", "-ERR Protocol version is not an integer or out of range\r\n"),
        ("HELLO 3 FOO", "-ERR Syntax error in HELLO option 'FOO'\r\n"),
        ("AUTH x", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"),
        ("CLIENT GETNAME", "$-1\r\n"),
        ("CLIENT SETNAME ok", "+OK\r\n"),
        ("CLIENT GETNAME", "$2\r\nok\r\n"),
        ("CLIENT FOO", "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"),
        ("RESET", "+RESET\r\n"),
        ("CLIENT GETNAME", "$-1\r\n"),
        ("SELECT x", "-ERR value is not an integer or out of range\r\n"),
    ]);
    let hello = run(&mut db, &mut s, "HELLO 3");
    assert!(
        hello.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{hello}"
    );
    assert_eq!(run(&mut db, &mut s, "GET nokey"), "_\r\n");
    assert_eq!(run(&mut db, &mut s, "QUIT"), "+OK\r\n");
    assert!(s.close_after_reply);
}

#[test]
fn auth_required() {
    let (mut db, _) = setup();
    db.config.set_startup("requirepass", "secret").unwrap();
    let mut s = Session::default();
    check(
        &mut db,
        &mut s,
        &[
            ("GET k", "-NOAUTH Authentication required.\r\n"),
            (
                "AUTH wrong",
                "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
            ),
            ("AUTH secret", "+OK\r\n"),
            ("GET k", "$-1\r\n"),
        ],
    );
}

#[test]
fn server_family() {
    let (mut db, mut s) = setup();
    check(&mut db, &mut s, &[
        ("CONFIG GET maxmemory", "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"),
        ("CONFIG SET maxmemory 1gb", "+OK\r\n"),
        ("CONFIG GET maxmemory", "*2\r\n$9\r\nmaxmemory\r\n$10\r\n1073741824\r\n"),
        ("CONFIG SET foo 1", "-ERR Unknown option or number of arguments for CONFIG SET - 'foo'\r\n"),
        ("CONFIG SET maxmemory abc", "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value\r\n"),
        ("CONFIG SET databases 3", "-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config\r\n"),
        ("CONFIG SET hz 1 hz 2", "-ERR CONFIG SET failed (possibly related to argument 'hz') - duplicate parameter\r\n"),
        ("CONFIG GET", "-ERR wrong number of arguments for 'config|get' command\r\n"),
        ("CONFIG GET zset-max-ziplist-entries", "*2\r\n$24\r\nzset-max-ziplist-entries\r\n$3\r\n128\r\n"),
        ("MEMORY USAGE nokey", "$-1\r\n"),
    ]);
    let count = run(&mut db, &mut s, "COMMAND COUNT");
    assert_eq!(count, format!(":{}\r\n", kvcore::commands::all().len()));
    let info = run(&mut db, &mut s, "INFO keyspace");
    assert!(info.contains("# Keyspace"), "{info}");
    let docs = run(&mut db, &mut s, "COMMAND DOCS get");
    assert!(docs.contains("string"), "{docs}");
}

/// GETEX on a missing key answers nil before it looks at the expire value (Redis's order);
/// syntax errors still come first.
#[test]
fn getex_missing_key_with_bad_expire_is_nil() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("GETEX missing EX bad", "$-1\r\n"),
            ("GETEX missing EX -1", "$-1\r\n"),
            ("GETEX missing EX 1 PX 1", "-ERR syntax error\r\n"),
            ("SET k v", "+OK\r\n"),
            (
                "GETEX k EX bad",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                "GETEX k EX 0",
                "-ERR invalid expire time in 'getex' command\r\n",
            ),
            ("TTL k", ":-1\r\n"),
        ],
    );
}

/// A repeated SET/GETEX option is accepted and the last expire value wins; only a different,
/// conflicting option is a syntax error.
#[test]
fn repeated_set_and_getex_options() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("SET k v EX 10 EX 20", "+OK\r\n"),
            ("TTL k", ":20\r\n"),
            ("SET k v PX 5000 PX 3000", "+OK\r\n"),
            ("TTL k", ":3\r\n"),
            ("SET k v KEEPTTL KEEPTTL", "+OK\r\n"),
            ("TTL k", ":3\r\n"),
            ("SET k v NX NX", "$-1\r\n"),
            ("SET k v GET GET", "$1\r\nv\r\n"),
            (
                "SET k v EX 10 EX bad",
                "-ERR value is not an integer or out of range\r\n",
            ),
            ("SET k v EX 10 PXAT 10", "-ERR syntax error\r\n"),
            ("SET k v EX 10 KEEPTTL", "-ERR syntax error\r\n"),
            ("SET k v PERSIST", "-ERR syntax error\r\n"),
            ("GETEX k EX 10 EX 30", "$1\r\nv\r\n"),
            ("TTL k", ":30\r\n"),
            ("GETEX k PERSIST PERSIST", "$1\r\nv\r\n"),
            ("TTL k", ":-1\r\n"),
            ("GETEX k PERSIST EX 10", "-ERR syntax error\r\n"),
            ("GETEX k NX", "-ERR syntax error\r\n"),
            ("GETEX k KEEPTTL", "-ERR syntax error\r\n"),
        ],
    );
}

/// EXPIRE checks its options before its time argument, and its unsupported-option text
/// stops at a NUL byte as Redis's `%s` does.
#[test]
fn expire_checks_options_first() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("SET k v", "+OK\r\n"),
            ("EXPIRE k bad foo", "-ERR Unsupported option foo\r\n"),
            (
                "EXPIRE missing bad NX XX",
                "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
            ),
            (
                "PEXPIRE k bad GT LT",
                "-ERR GT and LT options at the same time are not compatible\r\n",
            ),
            (
                "EXPIRE k bad NX",
                "-ERR value is not an integer or out of range\r\n",
            ),
        ],
    );
    let mut out = Vec::new();
    db.dispatch(&mut s, &[b"EXPIRE", b"k", b"10", b"f\0oo"], &mut out);
    assert_eq!(out, b"-ERR Unsupported option f\r\n");
}

/// The unknown-command error prints the name and arguments up to their first NUL byte.
#[test]
fn unknown_command_text_stops_at_nul() {
    let (mut db, mut s) = setup();
    let mut out = Vec::new();
    db.dispatch(&mut s, &[b"a\0bcd", b"x\0y", b"z"], &mut out);
    assert_eq!(
        out,
        b"-ERR unknown command 'a', with args beginning with: 'x' 'z' \r\n"
    );
    out.clear();
    db.dispatch(&mut s, &[b"CONFIG", b"f\0oo"], &mut out);
    assert_eq!(out, b"-ERR unknown subcommand 'f'. Try CONFIG HELP.\r\n");
}

/// Redis's reply to `INCRBYFLOAT g 1e400` on a missing or small key.
const BIG_1E400: &str = "$401\r\n10000000000000000000281880683947586514586453433629052038625910693539685534008629862039363994848324160522094053927317616200295822777259255734023828976593340661017797447434546173917862448116674971723778943824391593338047470675026246684401359237513603830343735485505244955964979021825038280091068414947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880\r\n";

/// INCRBYFLOAT reads its operand (and the stored value) as `strtold` does, and adds in
/// `long double`.
#[test]
fn incrbyfloat_parses_like_strtold() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("SET f 1", "+OK\r\n"),
            ("INCRBYFLOAT f 0x10", "$2\r\n17\r\n"),
            ("INCRBYFLOAT f 0x1p3", "$2\r\n25\r\n"),
            ("INCRBYFLOAT f +.5", "$4\r\n25.5\r\n"),
            ("INCRBYFLOAT f 1.", "$4\r\n26.5\r\n"),
            ("INCRBYFLOAT f 1e-400", "$4\r\n26.5\r\n"),
            (
                "INCRBYFLOAT f 1e5000",
                "-ERR value is not a valid float\r\n",
            ),
            (
                "INCRBYFLOAT f 1e-5000",
                "-ERR value is not a valid float\r\n",
            ),
            (
                "INCRBYFLOAT f 0x1p99999",
                "-ERR value is not a valid float\r\n",
            ),
            ("INCRBYFLOAT g 1e400", BIG_1E400),
            ("SET h 1e4932", "+OK\r\n"),
            (
                "INCRBYFLOAT h 1.18e4932",
                "-ERR increment would produce NaN or Infinity\r\n",
            ),
            ("SET x 0.1", "+OK\r\n"),
            ("INCRBYFLOAT x 0.2", "$3\r\n0.3\r\n"),
            ("SET x 9223372036854775807", "+OK\r\n"),
            ("INCRBYFLOAT x 0", "$19\r\n9223372036854775807\r\n"),
            ("INCRBYFLOAT f 1e", "-ERR value is not a valid float\r\n"),
            ("INCRBYFLOAT f 0x", "-ERR value is not a valid float\r\n"),
            ("INCRBYFLOAT f nan", "-ERR value is not a valid float\r\n"),
            ("INCRBYFLOAT f -nan", "-ERR value is not a valid float\r\n"),
            ("SET h 0x10", "+OK\r\n"),
            ("INCRBYFLOAT h 1", "$2\r\n17\r\n"),
            ("GET f", "$4\r\n26.5\r\n"),
        ],
    );
}

/// Sorted-set commands; expected bytes recorded from redis-server 7.0.15, the doubles from
/// 7.4.1 (7.2 replies them in their short form: `4.6`, 7.0 sent `4.5999999999999996`).
#[test]
fn zset_family() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("ZADD z 1 a 2 b 3 c", ":3\r\n"),
            ("ZADD z NX 10 a 4 d", ":1\r\n"),
            ("ZADD z XX CH 5 a 9 nosuch", ":1\r\n"),
            ("ZADD z GT 1 b", ":0\r\n"),
            ("ZADD z LT 1 b", ":0\r\n"),
            ("ZADD z INCR 2.5 c", "$3\r\n5.5\r\n"),
            ("ZADD z INCR NX 1 c", "$-1\r\n"),
            ("ZINCRBY z -1 c", "$3\r\n4.5\r\n"),
            ("ZINCRBY z 0.1 c", "$3\r\n4.6\r\n"),
            ("ZSCORE z c", "$3\r\n4.6\r\n"),
            ("ZADD z 0.1 e -0 f 1e300 g inf h -inf i", ":5\r\n"),
            ("ZSCORE z e", "$3\r\n0.1\r\n"),
            ("ZSCORE z f", "$1\r\n0\r\n"),
            ("ZSCORE z g", "$6\r\n1e+300\r\n"),
            ("ZSCORE z h", "$3\r\ninf\r\n"),
            ("ZMSCORE z a nosuch i", "*3\r\n$1\r\n5\r\n$-1\r\n$4\r\n-inf\r\n"),
            ("ZCARD z", ":9\r\n"),
            ("ZRANK z a", ":6\r\n"),
            ("ZREVRANK z a", ":2\r\n"),
            ("ZRANK z nosuch", "$-1\r\n"),
            ("ZRANGE z 0 -1 WITHSCORES", "*18\r\n$1\r\ni\r\n$4\r\n-inf\r\n$1\r\nf\r\n$1\r\n0\r\n$1\r\ne\r\n$3\r\n0.1\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$3\r\n4.6\r\n$1\r\na\r\n$1\r\n5\r\n$1\r\ng\r\n$6\r\n1e+300\r\n$1\r\nh\r\n$3\r\ninf\r\n"),
            ("ZRANGE z 0 2 REV", "*3\r\n$1\r\nh\r\n$1\r\ng\r\n$1\r\na\r\n"),
            ("ZRANGE z (1 +inf BYSCORE LIMIT 1 2 WITHSCORES", "*4\r\n$1\r\nc\r\n$3\r\n4.6\r\n$1\r\na\r\n$1\r\n5\r\n"),
            ("ZRANGE z +inf (1 BYSCORE REV LIMIT 0 3", "*3\r\n$1\r\nh\r\n$1\r\ng\r\n$1\r\na\r\n"),
            ("ZRANGEBYSCORE z -inf 2", "*4\r\n$1\r\ni\r\n$1\r\nf\r\n$1\r\ne\r\n$1\r\nb\r\n"),
            ("ZREVRANGEBYSCORE z 5 (1 WITHSCORES", "*6\r\n$1\r\na\r\n$1\r\n5\r\n$1\r\nc\r\n$3\r\n4.6\r\n$1\r\nd\r\n$1\r\n4\r\n"),
            ("ZREVRANGE z 0 1", "*2\r\n$1\r\nh\r\n$1\r\ng\r\n"),
            ("ZCOUNT z (0 inf", ":7\r\n"),
            ("ZCOUNT z x 1", "-ERR min or max is not a float\r\n"),
            ("OBJECT ENCODING z", "$8\r\nlistpack\r\n"),
            ("TYPE z", "+zset\r\n"),
            ("ZADD lex 0 a 0 b 0 c 0 d 0 e", ":5\r\n"),
            ("ZRANGEBYLEX lex [b (e", "*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
            ("ZREVRANGEBYLEX lex + - LIMIT 1 2", "*2\r\n$1\r\nd\r\n$1\r\nc\r\n"),
            ("ZRANGE lex [c + BYLEX", "*3\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"),
            ("ZLEXCOUNT lex - +", ":5\r\n"),
            ("ZLEXCOUNT lex x +", "-ERR min or max not valid string range item\r\n"),
            ("ZREMRANGEBYLEX lex [a [b", ":2\r\n"),
            ("ZRANGESTORE dst z 0 2", ":3\r\n"),
            ("ZRANGE dst 0 -1 WITHSCORES", "*6\r\n$1\r\ni\r\n$4\r\n-inf\r\n$1\r\nf\r\n$1\r\n0\r\n$1\r\ne\r\n$3\r\n0.1\r\n"),
            ("ZREMRANGEBYRANK z 0 0", ":1\r\n"),
            ("ZREMRANGEBYSCORE z 1e300 +inf", ":2\r\n"),
            ("ZPOPMIN z", "*2\r\n$1\r\nf\r\n$1\r\n0\r\n"),
            ("ZPOPMAX z 2", "*4\r\n$1\r\na\r\n$1\r\n5\r\n$1\r\nc\r\n$3\r\n4.6\r\n"),
            ("ZPOPMIN z -1", "-ERR value is out of range, must be positive\r\n"),
            ("ZMPOP 2 nokey z MIN COUNT 2", "*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\ne\r\n$3\r\n0.1\r\n*2\r\n$1\r\nb\r\n$1\r\n1\r\n"),
            ("ZMPOP 1 nokey MAX", "*-1\r\n"),
            ("ZMPOP 0 z MIN", "-ERR numkeys should be greater than 0\r\n"),
            ("ZADD u1 1 a 2 b 3 c", ":3\r\n"),
            ("ZADD u2 10 b 20 c 30 d", ":3\r\n"),
            ("ZUNION 2 u1 u2 WITHSCORES", "*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            ("ZUNION 2 u1 u2 WEIGHTS 2 1 AGGREGATE MAX WITHSCORES", "*8\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$2\r\n10\r\n$1\r\nc\r\n$2\r\n20\r\n$1\r\nd\r\n$2\r\n30\r\n"),
            ("ZINTER 2 u1 u2 AGGREGATE MIN WITHSCORES", "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            ("ZDIFF 2 u1 u2 WITHSCORES", "*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
            ("ZINTERCARD 2 u1 u2 LIMIT 1", ":1\r\n"),
            ("ZUNIONSTORE out 2 u1 u2", ":4\r\n"),
            ("ZINTERSTORE out 2 u1 nokey", ":0\r\n"),
            ("EXISTS out", ":0\r\n"),
            ("ZDIFFSTORE out 1 u2", ":3\r\n"),
            ("ZRANGE out 0 -1", "*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
            ("ZUNION 0 u1", "-ERR at least 1 input key is needed for 'zunion' command\r\n"),
            ("ZUNION 3 u1 u2", "-ERR syntax error\r\n"),
            ("SET s x", "+OK\r\n"),
            ("ZADD s 1 a", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            ("ZRANGE s 0 -1", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            ("GET u1", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            ("ZADD z nan x", "-ERR value is not a valid float\r\n"),
            ("ZADD z 1", "-ERR wrong number of arguments for 'zadd' command\r\n"),
            ("ZADD z NX XX 1 a", "-ERR XX and NX options at the same time are not compatible\r\n"),
            ("ZADD z GT LT 1 a", "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"),
            ("ZADD z INCR 1 a 2 b", "-ERR INCR option supports a single increment-element pair\r\n"),
            ("ZADD z INCR inf q", "$3\r\ninf\r\n"),
            ("ZADD z INCR -inf q", "-ERR resulting score is not a number (NaN)\r\n"),
            ("ZRANGE z 0 -1 LIMIT 0 1", "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n"),
            ("ZRANGE lex [a [b BYLEX WITHSCORES", "-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n"),
            ("ZSCAN u1 0", "*2\r\n$1\r\n0\r\n*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            // Redis 7.2's WITHSCORE option.
            ("ZRANK u1 b WITHSCORE", "*2\r\n:1\r\n$1\r\n2\r\n"),
            ("ZREVRANK u1 b WITHSCORE", "*2\r\n:1\r\n$1\r\n2\r\n"),
            ("ZRANK u1 nosuch WITHSCORE", "*-1\r\n"),
            ("ZRANK u1 b x", "-ERR syntax error\r\n"),
        ],
    );
}

/// Both encodings give the same replies: the family again with every set forced to the large
/// encoding.
#[test]
fn zset_family_large_encoding() {
    let (mut db, mut s) = setup();
    run(&mut db, &mut s, "CONFIG SET zset-max-listpack-entries 0");
    check(
        &mut db,
        &mut s,
        &[
            ("ZADD z 1 a 2 b 3 c -0 f", ":4\r\n"),
            ("OBJECT ENCODING z", "$8\r\nskiplist\r\n"),
            ("ZSCORE z f", "$2\r\n-0\r\n"),
            ("ZRANGE z 0 -1 WITHSCORES", "*8\r\n$1\r\nf\r\n$2\r\n-0\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            ("ZREVRANK z f", ":3\r\n"),
            ("ZREMRANGEBYSCORE z (1 2", ":1\r\n"),
            ("ZPOPMAX z", "*2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            ("CONFIG SET zset-max-listpack-entries 128", "+OK\r\n"),
            ("ZADD small 1 a", ":1\r\n"),
            ("OBJECT ENCODING small", "$8\r\nlistpack\r\n"),
            ("CONFIG SET zset-max-listpack-value 2", "+OK\r\n"),
            ("ZADD small 2 abc", ":1\r\n"),
            ("OBJECT ENCODING small", "$8\r\nskiplist\r\n"),
            ("CONFIG GET zset-max-listpack-value", "*2\r\n$23\r\nzset-max-listpack-value\r\n$1\r\n2\r\n"),
            ("SCAN 0 TYPE string", "*2\r\n$1\r\n0\r\n*0\r\n"),
            ("COPY z zc", ":1\r\n"),
            ("ZADD zc 9 new", ":1\r\n"),
            ("ZCARD z", ":2\r\n"),
            ("ZRANGE zc 0 -1", "*3\r\n$1\r\nf\r\n$1\r\na\r\n$3\r\nnew\r\n"),
            ("RENAME zc zr", "+OK\r\n"),
            ("MOVE zr 1", ":1\r\n"),
            ("SELECT 1", "+OK\r\n"),
            ("ZSCORE zr new", "$1\r\n9\r\n"),
            ("OBJECT ENCODING zr", "$8\r\nskiplist\r\n"),
            ("GET zr", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            ("APPEND zr x", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            ("INCR zr", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            ("SET zr x", "+OK\r\n"),
            ("ZADD zr 1 a", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
            ("SELECT 0", "+OK\r\n"),
            ("DEL z", ":1\r\n"),
            ("SCAN 0 TYPE zset", "*2\r\n$1\r\n0\r\n*1\r\n$5\r\nsmall\r\n"),
        ],
    );
}

/// Geo commands; expected bytes recorded from redis-server 7.0.15, the doubles from 7.4.1.
#[test]
fn geo_family() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania", ":2\r\n"),
            ("GEOADD Sicily NX CH 13.583333 37.316667 Agrigento 0 0 Palermo", ":1\r\n"),
            ("GEOPOS Sicily Palermo nosuch Catania", "*3\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n*-1\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n"),
            ("GEODIST Sicily Palermo Catania", "$11\r\n166274.1516\r\n"),
            ("GEODIST Sicily Palermo Catania km", "$8\r\n166.2742\r\n"),
            ("GEODIST Sicily Palermo Catania mi", "$8\r\n103.3182\r\n"),
            ("GEODIST Sicily Palermo Catania ft", "$11\r\n545518.8700\r\n"),
            ("GEODIST Sicily Palermo nosuch", "$-1\r\n"),
            ("GEODIST Sicily Palermo Catania yards", "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n"),
            ("GEOHASH Sicily Palermo Catania nosuch", "*3\r\n$11\r\nsqc8b49rny0\r\n$11\r\nsqdtr74hyu0\r\n$-1\r\n"),
            ("GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC", "*3\r\n$7\r\nCatania\r\n$9\r\nAgrigento\r\n$7\r\nPalermo\r\n"),
            ("GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km DESC WITHDIST WITHCOORD WITHHASH", "*3\r\n*4\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n:3479099956230698\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n*4\r\n$9\r\nAgrigento\r\n$8\r\n130.4235\r\n:3479030013248308\r\n*2\r\n$19\r\n13.5833314061164856\r\n$20\r\n37.31666804993816555\r\n*4\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n:3479447370796909\r\n*2\r\n$20\r\n15.08726745843887329\r\n$20\r\n37.50266842333162032\r\n"),
            ("GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km ASC COUNT 2 WITHDIST", "*2\r\n*2\r\n$7\r\nPalermo\r\n$6\r\n0.0000\r\n*2\r\n$9\r\nAgrigento\r\n$7\r\n90.9778\r\n"),
            ("GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 100 km COUNT 1 ANY", "*1\r\n$7\r\nCatania\r\n"),
            ("GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST", ":3\r\n"),
            ("ZRANGE dst 0 -1 WITHSCORES", "*6\r\n$7\r\nCatania\r\n$16\r\n56.4412578701582\r\n$9\r\nAgrigento\r\n$18\r\n130.42348706714702\r\n$7\r\nPalermo\r\n$18\r\n190.44242984775784\r\n"),
            ("GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 1 m", ":0\r\n"),
            ("EXISTS dst", ":0\r\n"),
            ("GEORADIUS Sicily 15 37 200 km WITHDIST ASC", "*3\r\n*2\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n*2\r\n$9\r\nAgrigento\r\n$8\r\n130.4235\r\n*2\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n"),
            ("GEORADIUS_RO Sicily 15 37 200 km COUNT 1", "*1\r\n$7\r\nCatania\r\n"),
            ("GEORADIUSBYMEMBER Sicily Agrigento 100 km", "*2\r\n$9\r\nAgrigento\r\n$7\r\nPalermo\r\n"),
            ("GEORADIUS Sicily 15 37 200 km STORE dst2", ":3\r\n"),
            ("ZRANGE dst2 0 -1 WITHSCORES", "*6\r\n$9\r\nAgrigento\r\n$16\r\n3479030013248308\r\n$7\r\nPalermo\r\n$16\r\n3479099956230698\r\n$7\r\nCatania\r\n$16\r\n3479447370796909\r\n"),
            ("GEOADD Sicily 200 100 bad", "-ERR invalid longitude,latitude pair 200.000000,100.000000\r\n"),
            ("GEOADD Sicily NX XX 1 1 a", "-ERR syntax error\r\n"),
            ("GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km ANY", "-ERR the ANY argument requires COUNT argument\r\n"),
            ("GEOSEARCH Sicily BYRADIUS 1 km ASC COUNT 1", "-ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH\r\n"),
            ("GEOSEARCH Sicily FROMLONLAT 15 37 ASC COUNT 1", "-ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH\r\n"),
            ("GEOSEARCHSTORE d Sicily FROMLONLAT 0 0 BYRADIUS 1 km WITHDIST", "-ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n"),
            ("GEORADIUS Sicily 0 0 1 km STORE d WITHDIST", "-ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n"),
            ("GEORADIUSBYMEMBER Sicily nosuch 1 km", "-ERR could not decode requested zset member\r\n"),
            ("GEORADIUSBYMEMBER nokey nosuch 1 km", "*0\r\n"),
            ("GEORADIUS Sicily 0 0 -1 km", "-ERR radius cannot be negative\r\n"),
            ("GEORADIUS Sicily 0 0 x km", "-ERR need numeric radius\r\n"),
            ("GEOSEARCH Sicily FROMLONLAT 0 0 BYBOX -1 1 km", "-ERR height or width cannot be negative\r\n"),
            ("GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 km COUNT 0", "-ERR COUNT must be > 0\r\n"),
            ("GEOPOS nokey a", "*1\r\n*-1\r\n"),
            ("OBJECT ENCODING Sicily", "$8\r\nlistpack\r\n"),
            ("TYPE Sicily", "+zset\r\n"),
        ],
    );
}

/// ZRANDMEMBER: shapes of the replies (members are random).
#[test]
fn zrandmember_shapes() {
    let (mut db, mut s) = setup();
    run(
        &mut db,
        &mut s,
        "ZADD z 1 a 2 b 3 c 4 d 5 e 6 f 7 g 8 h 9 i 10 j",
    );
    let one = run(&mut db, &mut s, "ZRANDMEMBER z");
    assert!(one.starts_with("$1\r\n"), "{one}");
    for (cmd, n) in [
        ("ZRANDMEMBER z 2", 2),
        ("ZRANDMEMBER z 9", 9),
        ("ZRANDMEMBER z 50", 10),
    ] {
        let r = run(&mut db, &mut s, cmd);
        assert!(r.starts_with(&format!("*{n}\r\n")), "{cmd}: {r}");
        let mut members: Vec<&str> = r.split("\r\n").skip(2).step_by(2).collect();
        members.retain(|m| !m.is_empty());
        let count = members.len();
        members.sort_unstable();
        members.dedup();
        assert_eq!(members.len(), count, "{cmd} repeated a member: {r}");
    }
    let rep = run(&mut db, &mut s, "ZRANDMEMBER z -30 WITHSCORES");
    assert!(rep.starts_with("*60\r\n"), "{rep}");
    assert_eq!(run(&mut db, &mut s, "ZRANDMEMBER z 0"), "*0\r\n");
    assert_eq!(run(&mut db, &mut s, "ZRANDMEMBER nokey"), "$-1\r\n");
    assert_eq!(run(&mut db, &mut s, "ZRANDMEMBER nokey 3"), "*0\r\n");
    assert_eq!(
        run(&mut db, &mut s, "ZRANDMEMBER z 1 x"),
        "-ERR syntax error\r\n"
    );
}

/// GEOPOS and GEOHASH of members whose scores are not geohashes (any ZADD score): positions
/// as Redis's `(uint64_t)score` conversion makes them; bytes from redis-server 7.0.15.
#[test]
fn geo_of_arbitrary_scores() {
    let (mut db, mut s) = setup();
    check(
        &mut db,
        &mut s,
        &[
            ("ZADD z -3 d 1e300 b -0 z", ":3\r\n"),
            (
                "GEOPOS z d",
                "*1\r\n*2\r\n$3\r\n180\r\n$19\r\n85.0511287799999991\r\n",
            ),
            ("GEOHASH z b", "*1\r\n$11\r\n00bh0hbj200\r\n"),
        ],
    );
}

/// A key lives until the clock passes its deadline (Redis's `now > when`): at the deadline
/// it is still there with a PTTL of 0, one millisecond later it is gone.
#[test]
fn a_key_expires_after_its_deadline_not_at_it() {
    let (mut db, mut s) = setup();
    check(&mut db, &mut s, &[("SET k v PX 100", "+OK\r\n")]);
    db.clock_mut().advance(100);
    db.refresh_clock();
    check(
        &mut db,
        &mut s,
        &[
            ("PTTL k", ":0\r\n"),
            ("TTL k", ":0\r\n"),
            ("GET k", "$1\r\nv\r\n"),
            ("KEYS *", "*1\r\n$1\r\nk\r\n"),
        ],
    );
    db.clock_mut().advance(1);
    db.refresh_clock();
    check(
        &mut db,
        &mut s,
        &[
            ("GET k", "$-1\r\n"),
            ("PTTL k", ":-2\r\n"),
            ("KEYS *", "*0\r\n"),
        ],
    );
}

/// Work outside commands (a host's expire cycle) reaches LATENCY once it takes at least
/// `latency-monitor-threshold`, and not below it or with the monitor off.
#[test]
fn latency_samples_of_work_outside_commands() {
    use std::time::Duration;
    let (mut db, mut s) = setup();
    db.latency_sample("expire-cycle", Duration::from_millis(50));
    assert_eq!(run(&mut db, &mut s, "LATENCY LATEST"), "*0\r\n");
    run(&mut db, &mut s, "CONFIG SET latency-monitor-threshold 10");
    db.latency_sample("expire-cycle", Duration::from_millis(9));
    assert_eq!(run(&mut db, &mut s, "LATENCY LATEST"), "*0\r\n");
    db.latency_sample("expire-cycle", Duration::from_millis(12));
    let latest = run(&mut db, &mut s, "LATENCY LATEST");
    assert!(
        latest.starts_with("*1\r\n*4\r\n$12\r\nexpire-cycle\r\n:")
            && latest.ends_with(":12\r\n:12\r\n"),
        "{latest}"
    );
}

/// SCAN cursors are read as Redis 7.2+'s `string2ull` reads them: `+1`, ` 1`, `-0`, ` -1`
/// (wrapped) are cursors; `-1`, `""`, `1 ` are not (Redis 7.0's strtoul took `""` and `-1`,
/// refused ` 1`). Replies recorded from redis-server 7.4.1; found by the docs mode.
#[test]
fn scan_cursors_read_as_redis_7_2() {
    let (mut db, mut s) = setup();
    let empty = "*2\r\n$1\r\n0\r\n*0\r\n";
    let invalid = "-ERR invalid cursor\r\n";
    let mut script = Vec::new();
    for (cursor, want) in [
        ("+1", empty),
        ("-0", empty),
        ("007", empty),
        ("18446744073709551615", empty),
        ("18446744073709551616", invalid),
        ("-1", invalid),
        ("-9223372036854775808", invalid),
        ("", invalid),
        ("+", invalid),
        ("0x10", invalid),
    ] {
        script.push((format!("SCAN {cursor}"), want));
        script.push((format!("SSCAN nokey {cursor}"), want));
        script.push((format!("HSCAN nokey {cursor}"), want));
        script.push((format!("ZSCAN nokey {cursor}"), want));
    }
    let script: Vec<(&str, &str)> = script.iter().map(|(c, w)| (c.as_str(), *w)).collect();
    check(&mut db, &mut s, &script);
    // Spaces do not survive `run`'s split: through dispatch directly.
    for (cursor, want) in [
        (&b" 1"[..], empty),
        (b" -1", empty),
        (b"\t7", empty),
        (b"1 ", invalid),
    ] {
        let mut out = Vec::new();
        db.dispatch(&mut s, &[b"SCAN", cursor], &mut out);
        assert_eq!(String::from_utf8_lossy(&out), want, "{cursor:?}");
    }
}

/// HELLO checks SETNAME's name where it reads it, as Redis 7.2+ does: a bad name after a
/// failing AUTH is the name's error (7.0 authenticated first: WRONGPASS). Replies recorded
/// from redis-server 7.4.1; found by the docs mode.
#[test]
fn hello_checks_setname_where_it_reads_it() {
    let (mut db, mut s) = setup();
    let bad_name = "-ERR Client names cannot contain spaces, newlines or special characters.\r\n";
    check(
        &mut db,
        &mut s,
        &[
            ("HELLO 2 AUTH u p SETNAME a\u{1}b", bad_name),
            ("HELLO 2 SETNAME a\u{1}b AUTH u p", bad_name),
            (
                "HELLO 2 SETNAME ok [",
                "-ERR Syntax error in HELLO option '['\r\n",
            ),
            (
                "HELLO 2 AUTH u p SETNAME ok",
                "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
            ),
        ],
    );
}

/// Client names and CLIENT SETINFO values are checked as Redis 7.2+'s validateClientAttr
/// checks them, as a C string: bytes after a NUL are not checked and are kept (7.0 refused a
/// name with any NUL). Replies recorded from redis-server 7.4.1; found by the docs mode
/// (HELLO 3 SETNAME "\0\x01...").
#[test]
fn client_names_are_checked_up_to_a_nul_as_redis_7_2() {
    let (mut db, mut s) = setup();
    let bad_name = "-ERR Client names cannot contain spaces, newlines or special characters.\r\n";
    let mut call = |args: &[&[u8]]| {
        let mut out = Vec::new();
        db.dispatch(&mut s, args, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    assert_eq!(call(&[b"CLIENT", b"SETNAME", b"\0\x01"]), "+OK\r\n");
    assert_eq!(call(&[b"CLIENT", b"GETNAME"]), "$2\r\n\0\x01\r\n");
    assert_eq!(call(&[b"CLIENT", b"SETNAME", b"a\0b c"]), "+OK\r\n");
    assert_eq!(call(&[b"CLIENT", b"GETNAME"]), "$5\r\na\0b c\r\n");
    assert_eq!(call(&[b"CLIENT", b"SETNAME", b"a\x01"]), bad_name);
    assert!(call(&[b"HELLO", b"2", b"SETNAME", b"\0\x01"]).starts_with("*14\r\n"));
    assert_eq!(call(&[b"HELLO", b"2", b"SETNAME", b"a\x01\0"]), bad_name);
    assert_eq!(
        call(&[b"CLIENT", b"SETINFO", b"LIB-NAME", b"a\0 b"]),
        "+OK\r\n"
    );
    assert_eq!(
        call(&[b"CLIENT", b"SETINFO", b"LIB-x\0y", b"a"]),
        "-ERR Unrecognized option 'LIB-x'\r\n"
    );
    assert_eq!(
        call(&[b"CLIENT", b"SETINFO", b"lib-ver", b"a b"]),
        "-ERR lib-ver cannot contain spaces, newlines or special characters.\r\n"
    );
}
