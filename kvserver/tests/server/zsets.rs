//! Sorted-set and geo commands through the server: commands whose keys span shards give the
//! same replies as on one shard, and stay atomic against concurrent multi-shard writers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::support::{call, cmd, read_replies, Server};

const SHARDS: usize = 3;

/// The `i`-th key of the form `k<j>` that lives on `shard` of [`SHARDS`].
fn key_on(shard: usize, i: usize) -> String {
    crate::support::key_on("k", shard, SHARDS, i)
}

/// Runs `lines` (with `{A}`-style placeholders replaced) on a server; returns the replies.
fn run_script(server: &Server, lines: &[&str], names: &[(&str, String)]) -> Vec<String> {
    let mut s = server.raw();
    let mut req = Vec::new();
    for line in lines {
        let mut l = line.to_string();
        for (ph, k) in names {
            l = l.replace(ph, k);
        }
        req.extend(cmd(&l));
    }
    std::io::Write::write_all(&mut s, &req).unwrap();
    read_replies(&mut s, lines.len())
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r).into_owned())
        .collect()
}

#[test]
fn store_and_multi_key_commands_across_shards_answer_as_on_one_shard() {
    // Sources and destinations deliberately on different shards.
    let names: Vec<(&str, String)> = vec![
        ("{A}", key_on(0, 0)),
        ("{B}", key_on(1, 0)),
        ("{C}", key_on(2, 0)),
        ("{A2}", key_on(0, 1)),
        ("{B2}", key_on(1, 1)),
        ("{C2}", key_on(2, 1)),
        ("{S}", key_on(1, 2)),
        ("{G}", key_on(2, 2)),
        ("{X}", key_on(0, 2)),
        ("{Y}", key_on(1, 3)),
        ("{N1}", key_on(0, 3)),
        ("{N2}", key_on(2, 3)),
    ];
    let script = [
        "ZADD {A} 1 a 2 b 3 c",
        "ZADD {B} 2 b 3 c 4 d",
        "ZADD {C} 5 e 1 a",
        "SET {S} str",
        "ZUNIONSTORE {A2} 3 {A} {B} {C} WEIGHTS 1 2 3 AGGREGATE MAX",
        "ZRANGE {A2} 0 -1 WITHSCORES",
        "ZINTERSTORE {B2} 2 {A} {B} AGGREGATE SUM",
        "ZRANGE {B2} 0 -1 WITHSCORES",
        "ZDIFFSTORE {C2} 2 {A} {B}",
        "ZRANGE {C2} 0 -1 WITHSCORES",
        "ZUNION 3 {A} {B} {C} WITHSCORES",
        "ZINTER 2 {A} {B} WITHSCORES",
        "ZDIFF 2 {A} {C} WITHSCORES",
        "ZINTERCARD 2 {A} {B}",
        "ZINTERCARD 2 {A} {B} LIMIT 1",
        "ZUNIONSTORE {B2} 2 {A} {N1}",
        "ZUNIONSTORE {B2} 2 {A} {S}",
        "ZRANGE {B2} 0 -1",
        "ZINTERSTORE {B2} 2 {A} {N1}",
        "EXISTS {B2}",
        "ZRANGESTORE {C2} {A} 0 1",
        "ZRANGE {C2} 0 -1 WITHSCORES",
        "ZRANGESTORE {C2} {A} (1 +inf BYSCORE LIMIT 0 1",
        "ZRANGE {C2} 0 -1 WITHSCORES",
        "ZUNIONSTORE {A} 2 {A} {B}",
        "ZRANGE {A} 0 -1 WITHSCORES",
        "GEOADD {G} 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
        "GEOSEARCHSTORE {X} {G} FROMLONLAT 15 37 BYRADIUS 200 km ASC",
        "ZRANGE {X} 0 -1 WITHSCORES",
        "GEOSEARCHSTORE {X} {G} FROMLONLAT 15 37 BYRADIUS 200 km ASC STOREDIST",
        "ZRANGE {X} 0 -1 WITHSCORES",
        "GEORADIUS {G} 15 37 200 km STORE {Y}",
        "ZRANGE {Y} 0 -1 WITHSCORES",
        "GEORADIUSBYMEMBER {G} Palermo 200 km STOREDIST {Y}",
        "ZRANGE {Y} 0 -1 WITHSCORES",
        "ZMPOP 3 {N1} {B} {C} MIN COUNT 2",
        "ZMPOP 2 {N1} {N2} MAX",
        "ZMPOP 3 {N1} {S} {B} MIN",
        "ZMPOP 2 {N1} {B} MAX COUNT 0",
        "ZMPOP 2 {N1} {B} MAX COUNT 10",
        "ZRANGE {B} 0 -1",
        "ZUNIONSTORE {A2} 2 {A} {N1} WEIGHTS 1",
        "ZUNIONSTORE {A2} 2 {A} {N1} AGGREGATE AVG",
        "ZCARD {A2}",
        // A destination that is also a source and holds a string: the error leaves it whole.
        "SET {C2} str EXAT 4000000000",
        "ZUNIONSTORE {C2} 3 {A} {C2} {N1}",
        "EXPIRETIME {C2}",
        "GET {C2}",
        "ZADD {N2} 1 x",
        "EXPIRE {N2} 1000000",
        "ZINTERSTORE {N2} 2 {N2} {B}",
        "TTL {N2}",
    ];
    let one = Server::start(&["--threads", "1"]);
    let many = Server::start(&["--threads", &SHARDS.to_string()]);
    let want = run_script(&one, &script, &names);
    let got = run_script(&many, &script, &names);
    for (i, line) in script.iter().enumerate() {
        assert_eq!(got[i], want[i], "{line}");
    }
    // The script must exercise real results, not only errors and empties.
    assert_eq!(want[4], ":5\r\n");
    assert!(want[11].starts_with("*4\r\n"), "{}", want[11]);
    assert!(want[37].starts_with("-WRONGTYPE"), "{}", want[37]);
    assert_eq!(want[46], ":4000000000\r\n");
}

#[test]
fn store_reads_its_sources_atomically() {
    let server = Server::start(&["--threads", &SHARDS.to_string()]);
    let (a, b, d) = (key_on(0, 0), key_on(1, 0), key_on(2, 0));
    let mut s = server.raw();
    let members: Vec<String> = (0..100).map(|i| format!("{i} m{i}")).collect();
    assert_eq!(
        call(&mut s, &format!("ZADD {a} {}", members.join(" "))),
        ":100\r\n"
    );
    // One client moves the set back and forth between two shards (RENAME is atomic); the
    // other reads both keys at once: it must always find the set in exactly one of them.
    let stop = Arc::new(AtomicBool::new(false));
    let mover = {
        let (stop, a, b) = (stop.clone(), a.clone(), b.clone());
        let mut s = server.raw();
        std::thread::spawn(move || {
            let mut moves = 0;
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(call(&mut s, &format!("RENAME {a} {b}")), "+OK\r\n");
                assert_eq!(call(&mut s, &format!("RENAME {b} {a}")), "+OK\r\n");
                moves += 2;
            }
            moves
        })
    };
    for _ in 0..500 {
        assert_eq!(
            call(&mut s, &format!("ZUNIONSTORE {d} 2 {a} {b}")),
            ":100\r\n"
        );
        assert_eq!(call(&mut s, &format!("ZINTERCARD 2 {a} {b}")), ":0\r\n");
    }
    stop.store(true, Ordering::Relaxed);
    let moves = mover.join().unwrap();
    assert!(moves > 0);
}
