//! Sets over several shards: the algebra commands read keys of every shard, SMOVE between
//! shards is atomic as seen by other clients.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::support::{call, key_on, Server};

const SHARDS: usize = 3;

fn k(shard: usize, i: usize) -> String {
    key_on("s", shard, SHARDS, i)
}

#[test]
fn algebra_and_store_across_shards_give_the_one_shard_answers() {
    let (a, b, d) = (k(0, 0), k(1, 0), k(2, 0));
    let mut replies = Vec::new();
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let mut c = server.raw();
        let script = [
            format!("SADD {a} 1 2 3 x y"),
            format!("SADD {b} 3 y z 4"),
            format!("SINTERSTORE {d} {a} {b}"),
            format!("SMEMBERS {d}"),
            format!("SUNIONSTORE {d} {a} {b}"),
            format!("SCARD {d}"),
            format!("SDIFFSTORE {d} {a} {b}"),
            format!("SMEMBERS {d}"),
            format!("OBJECT ENCODING {d}"),
            format!("SINTERCARD 2 {a} {b}"),
            format!("SINTER {a} {b}"),
            format!("SDIFF {b} {a}"),
            format!("SMOVE {a} {b} x"),
            format!("SMOVE {a} {b} nope"),
            format!("SISMEMBER {b} x"),
            format!("SET {d} str"),
            format!("SMOVE {b} {d} x"),
            format!("SISMEMBER {b} x"),
            format!("SINTERSTORE {d} {a} nosuchkey"),
            format!("EXISTS {d}"),
        ];
        let got: Vec<String> = script.iter().map(|l| call(&mut c, l)).collect();
        replies.push(got);
    }
    assert_eq!(replies[0], replies[1]);
    // Spot checks of the one-shard answers.
    assert_eq!(replies[0][2], ":2\r\n");
    assert_eq!(replies[0][3], "*2\r\n$1\r\n3\r\n$1\r\ny\r\n");
    assert_eq!(replies[0][8], "$8\r\nlistpack\r\n");
    assert_eq!(replies[0][12], ":1\r\n");
    assert_eq!(
        replies[0][16],
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(replies[0][17], ":1\r\n", "nothing moved to a string");
    assert_eq!(replies[0][19], ":0\r\n");
}

/// Members move back and forth between two sets on different shards while readers look at
/// both at once: a member is always in exactly one of them.
#[test]
fn smove_across_shards_is_atomic() {
    let server = Server::start(&["--threads", "3"]);
    let (a, b) = (k(0, 1), k(2, 1));
    const N: usize = 20;
    let mut c = server.raw();
    let members: Vec<String> = (0..N).map(|i| format!("m{i}")).collect();
    call(&mut c, &format!("SADD {a} {}", members.join(" ")));
    let stop = Arc::new(AtomicBool::new(false));
    let movers: Vec<_> = (0..3)
        .map(|t| {
            let (mut s, a, b, stop) = (server.raw(), a.clone(), b.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let m = format!("m{}", i % N);
                    let (from, to) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
                    let r = call(&mut s, &format!("SMOVE {from} {to} {m}"));
                    assert!(r == ":0\r\n" || r == ":1\r\n", "{r}");
                    i += 7;
                }
            })
        })
        .collect();
    let mut reader = server.raw();
    for _ in 0..300 {
        let union = call(&mut reader, &format!("SUNION {a} {b}"));
        assert!(
            union.starts_with(&format!("*{N}\r\n")),
            "a member in neither set: {union}"
        );
        assert_eq!(
            call(&mut reader, &format!("SINTERCARD 2 {a} {b}")),
            ":0\r\n"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for m in movers {
        m.join().unwrap();
    }
}

/// SORT whose BY and GET patterns name keys on every shard answers as on one shard.
#[test]
fn sort_with_patterns_over_keys_of_every_shard() {
    let mut replies = Vec::new();
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let mut c = server.raw();
        call(&mut c, "RPUSH ids 1 2 3 4 5 6");
        for i in 1..=6 {
            call(&mut c, &format!("SET weight_{i} {}", (i * 7) % 6));
            call(&mut c, &format!("HSET obj_{i} name n{i}"));
        }
        let script = [
            "SORT ids BY weight_* GET # GET obj_*->name",
            "SORT ids BY weight_* DESC LIMIT 1 3 GET obj_*->name",
            "SORT ids BY weight_* GET obj_*->name STORE sorted",
            "LRANGE sorted 0 -1",
            "SORT_RO ids BY nosort GET weight_*",
        ];
        replies.push(script.iter().map(|l| call(&mut c, l)).collect::<Vec<_>>());
    }
    assert_eq!(replies[0], replies[1]);
    assert!(
        replies[0][0].starts_with("*12\r\n$1\r\n6\r\n$2\r\nn6\r\n"),
        "{}",
        replies[0][0]
    );
}
