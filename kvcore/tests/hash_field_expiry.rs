//! Hash field expiry (Redis 7.4: HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HTTL, HPTTL,
//! HEXPIRETIME, HPEXPIRETIME, HPERSIST), on a manual clock. Redis 7.0.15, the one at hand for
//! differential runs, lacks these commands; the replies and error texts here follow 7.4's
//! `t_hash.c`.

mod script;

use kvcore::Clock;
use script::{run, setup};

const T0: u64 = 1_700_000_000_000;

fn ints(v: &[i64]) -> String {
    let mut s = format!("*{}\r\n", v.len());
    for i in v {
        s.push_str(&format!(":{i}\r\n"));
    }
    s
}

#[test]
fn deadlines_are_set_read_conditioned_and_cleared() {
    let (mut db, mut s) = setup();
    let mut r = |l: &str| run(&mut db, &mut s, l);
    r("HSET h f1 v1 f2 v2 f3 v3");
    assert_eq!(r("HEXPIRE h 100 FIELDS 2 f1 nosuch"), ints(&[1, -2]));
    assert_eq!(r("HTTL h FIELDS 3 f1 f2 nosuch"), ints(&[100, -1, -2]));
    assert_eq!(r("HPTTL h FIELDS 1 f1"), ints(&[100_000]));
    assert_eq!(r("HEXPIRETIME h FIELDS 1 f1"), ints(&[1_700_000_100]));
    assert_eq!(r("HPEXPIRETIME h FIELDS 1 f1"), ints(&[1_700_000_100_000]));
    // NX, XX, GT, LT as in Redis: no deadline counts as infinite.
    assert_eq!(r("HEXPIRE h 50 NX FIELDS 1 f1"), ints(&[0]));
    assert_eq!(r("HEXPIRE h 50 XX FIELDS 1 f2"), ints(&[0]));
    assert_eq!(r("HEXPIRE h 50 GT FIELDS 1 f1"), ints(&[0]));
    assert_eq!(r("HEXPIRE h 200 GT FIELDS 1 f1"), ints(&[1]));
    assert_eq!(r("HEXPIRE h 50 LT FIELDS 2 f1 f2"), ints(&[1, 1]));
    assert_eq!(r("HPERSIST h FIELDS 3 f1 f3 nosuch"), ints(&[1, -1, -2]));
    assert_eq!(r("HTTL h FIELDS 2 f1 f2"), ints(&[-1, 50]));
    // A deadline now or in the past deletes the field.
    assert_eq!(r("HPEXPIREAT h 1000 FIELDS 1 f3"), ints(&[2]));
    assert_eq!(r("HEXISTS h f3"), ":0\r\n");
    // HSET over a field clears its deadline; HINCRBY keeps it.
    assert_eq!(r("HSET h f2 new"), ":0\r\n");
    assert_eq!(r("HTTL h FIELDS 1 f2"), ints(&[-1]));
    r("HSET h n 1");
    r("HEXPIRE h 30 FIELDS 1 n");
    assert_eq!(r("HINCRBY h n 5"), ":6\r\n");
    assert_eq!(r("HTTL h FIELDS 1 n"), ints(&[30]));
    // A missing key answers -2 for every field.
    assert_eq!(r("HEXPIRE nokey 10 FIELDS 2 a b"), ints(&[-2, -2]));
    assert_eq!(r("HTTL nokey FIELDS 1 a"), ints(&[-2]));
    assert_eq!(r("HPERSIST nokey FIELDS 1 a"), ints(&[-2]));
}

#[test]
fn expired_fields_vanish_lazily_and_actively_and_take_the_key_with_them() {
    let (mut db, mut s) = setup();
    run(&mut db, &mut s, "HSET h a 1 b 2 c 3");
    run(&mut db, &mut s, "HPEXPIRE h 1000 FIELDS 2 a b");
    db.set_clock(Clock::Manual(T0 + 1000));
    // At the deadline itself the field still lives.
    assert_eq!(run(&mut db, &mut s, "HGET h a"), "$1\r\n1\r\n");
    db.set_clock(Clock::Manual(T0 + 1001));
    assert_eq!(run(&mut db, &mut s, "HGET h a"), "$-1\r\n");
    assert_eq!(run(&mut db, &mut s, "HLEN h"), ":1\r\n");
    assert_eq!(
        run(&mut db, &mut s, "HGETALL h"),
        "*2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    run(&mut db, &mut s, "HPEXPIRE h 500 FIELDS 1 c");
    db.set_clock(Clock::Manual(T0 + 2000));
    // The last field expired: the hash is gone.
    assert_eq!(run(&mut db, &mut s, "HLEN h"), ":0\r\n");
    assert_eq!(run(&mut db, &mut s, "EXISTS h"), ":0\r\n");
    // The active cycle removes fields nobody reads: EXISTS does not look at fields, so the
    // key goes only when the cycle has purged its last field.
    run(&mut db, &mut s, "HSET g x 1 y 2");
    run(&mut db, &mut s, "HPEXPIRE g 100 FIELDS 2 x y");
    db.set_clock(Clock::Manual(T0 + 3000));
    assert_eq!(run(&mut db, &mut s, "EXISTS g"), ":1\r\n");
    db.cron(std::time::Duration::from_millis(5));
    db.set_clock(Clock::Manual(T0 + 3000));
    assert_eq!(run(&mut db, &mut s, "EXISTS g"), ":0\r\n");
}

#[test]
fn argument_errors_in_redis_order() {
    let (mut db, mut s) = setup();
    let mut r = |l: &str| run(&mut db, &mut s, l);
    r("HSET h f v");
    r("SET str v");
    assert_eq!(
        r("HEXPIRE str abc FIELDS 1 f"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        r("HEXPIRE h abc FIELDS 1 f"),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        r("HEXPIRE h -1 FIELDS 1 f"),
        "-ERR invalid expire time, must be >= 0\r\n"
    );
    assert_eq!(
        r("HEXPIRE h 99999999999999 FIELDS 1 f"),
        "-ERR invalid expire time in 'hexpire' command\r\n"
    );
    assert_eq!(
        r("HPEXPIREAT h 70368744177664 FIELDS 1 f"),
        "-ERR invalid expire time in 'hpexpireat' command\r\n"
    );
    assert_eq!(
        r("HEXPIRE h 10 FOO 1 f"),
        "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n"
    );
    assert_eq!(
        r("HEXPIRE h 10 FIELDS 0 f"),
        "-ERR Parameter `numFields` should be greater than 0\r\n"
    );
    assert_eq!(
        r("HEXPIRE h 10 NX FIELDS 2 f"),
        "-ERR The `numfields` parameter must match the number of arguments\r\n"
    );
    assert_eq!(
        r("HTTL h FIELDS x f"),
        "-ERR Number of fields must be a positive integer\r\n"
    );
    assert_eq!(
        r("HPERSIST h FIELD 1 f"),
        "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n"
    );
}
