//! List commands where Redis 7.2/7.4 answer differently from the 7.0.15 at hand (so the
//! differential run cannot check them), and encoding conversions at run-time thresholds.

mod script;

use script::{run, setup};

/// Redis 7.2+: a small list is one listpack, a big one a quicklist, and it turns back into a
/// listpack once it shrinks to half the limit (7.0 says quicklist for every list).
#[test]
fn encodings_follow_redis_7_2() {
    let (mut db, mut s) = setup();
    assert_eq!(run(&mut db, &mut s, "RPUSH l a b c"), ":3\r\n");
    assert_eq!(
        run(&mut db, &mut s, "OBJECT ENCODING l"),
        "$8\r\nlistpack\r\n"
    );
    // -2: 8 KiB per node. 600 elements of 16 bytes are about 10.8 KiB.
    let v = "0123456789abcdef";
    for _ in 0..600 {
        run(&mut db, &mut s, &format!("RPUSH l {v}"));
    }
    assert_eq!(
        run(&mut db, &mut s, "OBJECT ENCODING l"),
        "$9\r\nquicklist\r\n"
    );
    assert_eq!(run(&mut db, &mut s, "LTRIM l 0 9"), "+OK\r\n");
    assert_eq!(
        run(&mut db, &mut s, "OBJECT ENCODING l"),
        "$8\r\nlistpack\r\n"
    );
    // The threshold changes at run time; a positive value counts entries.
    assert_eq!(
        run(&mut db, &mut s, "CONFIG SET list-max-listpack-size 4"),
        "+OK\r\n"
    );
    assert_eq!(run(&mut db, &mut s, "RPUSH m 1 2 3 4"), ":4\r\n");
    assert_eq!(
        run(&mut db, &mut s, "OBJECT ENCODING m"),
        "$8\r\nlistpack\r\n"
    );
    assert_eq!(run(&mut db, &mut s, "RPUSH m 5"), ":5\r\n");
    assert_eq!(
        run(&mut db, &mut s, "OBJECT ENCODING m"),
        "$9\r\nquicklist\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "LRANGE m 0 -1"),
        "*5\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "CONFIG GET list-max-ziplist-size"),
        "*2\r\n$21\r\nlist-max-ziplist-size\r\n$1\r\n4\r\n"
    );
}

/// Redis 7.2+ refuses RANK i64::MIN (7.0 negates it and overflows).
#[test]
fn lpos_rank_range_follows_redis_7_2() {
    let (mut db, mut s) = setup();
    run(&mut db, &mut s, "RPUSH l a b a");
    assert_eq!(
        run(&mut db, &mut s, "LPOS l a RANK -9223372036854775808"),
        "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "LPOS l a RANK -9223372036854775807"),
        "$-1\r\n"
    );
    assert_eq!(run(&mut db, &mut s, "LPOS l a RANK -1"), ":2\r\n");
    assert_eq!(
        run(
            &mut db,
            &mut s,
            "LPOS l a COUNT 0 MAXLEN 9223372036854775807"
        ),
        "*2\r\n:0\r\n:2\r\n"
    );
}

/// Redis 7.2+ refuses an LREM count of i64::MIN before it looks at the key (7.0 takes it);
/// replies recorded from redis-server 7.4.1. Found by the docs-mode differential fuzzer.
#[test]
fn lrem_count_range_follows_redis_7_2() {
    let (mut db, mut s) = setup();
    let refused = "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n";
    run(&mut db, &mut s, "RPUSH l a b a");
    run(&mut db, &mut s, "SET str x");
    assert_eq!(
        run(&mut db, &mut s, "LREM l -9223372036854775808 a"),
        refused
    );
    assert_eq!(
        run(&mut db, &mut s, "LREM nokey -9223372036854775808 a"),
        refused
    );
    assert_eq!(
        run(&mut db, &mut s, "LREM str -9223372036854775808 a"),
        refused
    );
    assert_eq!(
        run(&mut db, &mut s, "LREM l -9223372036854775807 zz"),
        ":0\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "LREM l 9223372036854775807 zz"),
        ":0\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "LREM l -9223372036854775807 a"),
        ":2\r\n"
    );
}

/// Counts and indexes near the i64 limits answer like Redis and allocate only what the reply
/// holds.
#[test]
fn huge_counts_and_indexes() {
    let (mut db, mut s) = setup();
    run(&mut db, &mut s, "RPUSH l a b c");
    assert_eq!(
        run(
            &mut db,
            &mut s,
            "LRANGE l -9223372036854775808 9223372036854775807"
        ),
        "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "LINDEX l -9223372036854775808"),
        "$-1\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "LSET l 9223372036854775807 x"),
        "-ERR index out of range\r\n"
    );
    assert_eq!(
        run(&mut db, &mut s, "LPOP l 9223372036854775807"),
        "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    run(&mut db, &mut s, "RPUSH l a b c");
    assert_eq!(
        run(&mut db, &mut s, "LMPOP 1 l RIGHT COUNT 9223372036854775807"),
        "*2\r\n$1\r\nl\r\n*3\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"
    );
    run(&mut db, &mut s, "RPUSH l a");
    // (-2^63 itself is refused since 7.2: lrem_count_range_follows_redis_7_2.)
    assert_eq!(
        run(&mut db, &mut s, "LREM l -9223372036854775807 a"),
        ":1\r\n"
    );
    assert_eq!(run(&mut db, &mut s, "EXISTS l"), ":0\r\n");
}

/// Blocking forms without a server to block in (the embedded store, like MULTI): served at
/// once, or the "nothing to pop" reply at once.
#[test]
fn blocking_forms_answer_at_once_when_they_cannot_block() {
    let (mut db, mut s) = setup();
    assert_eq!(run(&mut db, &mut s, "BLPOP l 0"), "*-1\r\n");
    assert_eq!(run(&mut db, &mut s, "BLMOVE l d LEFT RIGHT 0"), "$-1\r\n");
    run(&mut db, &mut s, "RPUSH l a b");
    assert_eq!(
        run(&mut db, &mut s, "BRPOP x l 0"),
        "*2\r\n$1\r\nl\r\n$1\r\nb\r\n"
    );
    assert_eq!(run(&mut db, &mut s, "BRPOPLPUSH l d 0"), "$1\r\na\r\n");
    assert_eq!(run(&mut db, &mut s, "LRANGE d 0 -1"), "*1\r\n$1\r\na\r\n");
    assert_eq!(
        run(&mut db, &mut s, "BLMPOP 0 2 l d LEFT COUNT 5"),
        "*2\r\n$1\r\nd\r\n*1\r\n$1\r\na\r\n"
    );
    run(&mut db, &mut s, "SET str x");
    assert_eq!(
        run(&mut db, &mut s, "BLPOP str 0"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    run(&mut db, &mut s, "RPUSH l a");
    assert_eq!(
        run(&mut db, &mut s, "BLMOVE l str LEFT RIGHT 0"),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(run(&mut db, &mut s, "LLEN l"), ":1\r\n", "nothing moved");
}

/// Redis 7.2+ refuses a blocking timeout beyond LLONG_MAX milliseconds as "out of range"
/// (7.0 called it negative). Replies recorded from redis-server 7.4.1; found by the family
/// run against 7.4.1 (BZPOPMIN k1 "" inf).
#[test]
fn blocking_timeouts_out_of_range_follow_redis_7_2() {
    let (mut db, mut s) = setup();
    let out_of_range = "-ERR timeout is out of range\r\n";
    for t in [
        "inf",
        "1e400",
        "9223372036854775808",
        "9223372036854775.807",
    ] {
        assert_eq!(
            run(&mut db, &mut s, &format!("BLPOP nokey {t}")),
            out_of_range,
            "{t}"
        );
        assert_eq!(
            run(&mut db, &mut s, &format!("BZPOPMIN nokey {t}")),
            out_of_range,
            "{t}"
        );
    }
    for t in ["-inf", "-1"] {
        assert_eq!(
            run(&mut db, &mut s, &format!("BLPOP nokey {t}")),
            "-ERR timeout is negative\r\n",
            "{t}"
        );
    }
}
