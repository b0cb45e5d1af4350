//! Key-level commands on every collection type: TYPE, OBJECT ENCODING, COPY, RENAME, MOVE,
//! SWAPDB, SCAN TYPE, MEMORY USAGE, DEL, UNLINK, RANDOMKEY, and WRONGTYPE between every pair
//! of types.

mod script;

use script::{run, setup};

/// One key of each type: (key, creating command, TYPE name, a read that checks the type).
const KINDS: &[(&str, &str, &str, &str)] = &[
    ("str", "SET str v", "string", "GET str"),
    ("z", "ZADD z 1 m", "zset", "ZCARD z"),
    ("h", "HSET h f v", "hash", "HLEN h"),
    ("l", "RPUSH l a b", "list", "LLEN l"),
    ("s", "SADD s a 1", "set", "SCARD s"),
];

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn every_type_answers_key_commands() {
    let (mut db, mut s) = setup();
    for (key, make, ty, _) in KINDS {
        run(&mut db, &mut s, make);
        assert_eq!(
            run(&mut db, &mut s, &format!("TYPE {key}")),
            format!("+{ty}\r\n")
        );
        let enc = run(&mut db, &mut s, &format!("OBJECT ENCODING {key}"));
        assert!(enc.starts_with('$'), "{key}: {enc}");
        let usage = run(&mut db, &mut s, &format!("MEMORY USAGE {key}"));
        assert!(
            usage.starts_with(':') && usage != ":0\r\n",
            "{key}: {usage}"
        );
        // COPY, RENAME and MOVE carry the value whole.
        assert_eq!(
            run(&mut db, &mut s, &format!("COPY {key} {key}2")),
            ":1\r\n"
        );
        assert_eq!(
            run(&mut db, &mut s, &format!("TYPE {key}2")),
            format!("+{ty}\r\n")
        );
        assert_eq!(
            run(&mut db, &mut s, &format!("RENAME {key}2 {key}3")),
            "+OK\r\n"
        );
        assert_eq!(run(&mut db, &mut s, &format!("MOVE {key}3 1")), ":1\r\n");
        run(&mut db, &mut s, "SELECT 1");
        assert_eq!(
            run(&mut db, &mut s, &format!("TYPE {key}3")),
            format!("+{ty}\r\n")
        );
        assert_eq!(run(&mut db, &mut s, &format!("UNLINK {key}3")), ":1\r\n");
        run(&mut db, &mut s, "SELECT 0");
    }
    // SCAN TYPE finds each type's keys, and only those.
    for (key, _, ty, _) in KINDS {
        assert_eq!(
            run(&mut db, &mut s, &format!("SCAN 0 COUNT 100 TYPE {ty}")),
            format!("*2\r\n$1\r\n0\r\n*1\r\n${}\r\n{key}\r\n", key.len())
        );
    }
    // SWAPDB moves every type along.
    assert_eq!(run(&mut db, &mut s, "SWAPDB 0 2"), "+OK\r\n");
    assert_eq!(run(&mut db, &mut s, "DBSIZE"), ":0\r\n");
    run(&mut db, &mut s, "SELECT 2");
    assert_eq!(run(&mut db, &mut s, "DBSIZE"), ":5\r\n");
    let rk = run(&mut db, &mut s, "RANDOMKEY");
    assert!(
        KINDS
            .iter()
            .any(|(k, ..)| rk.ends_with(&format!("{k}\r\n"))),
        "{rk}"
    );
    assert_eq!(run(&mut db, &mut s, "DEL str z h l s"), ":5\r\n");
}

#[test]
fn wrongtype_between_every_pair_of_types() {
    let (mut db, mut s) = setup();
    for (_, make, _, _) in KINDS {
        run(&mut db, &mut s, make);
    }
    for (key, _, _, _) in KINDS {
        for (other, _, _, read) in KINDS {
            if key == other {
                continue;
            }
            // The other type's read, aimed at this key.
            let cmd = read.replacen(other, key, 1);
            assert_eq!(run(&mut db, &mut s, &cmd), WRONGTYPE, "{cmd}");
        }
    }
    // Writes of another type leave the key as it was.
    for cmd in [
        "SADD l x",
        "RPUSH s x",
        "HSET z f v",
        "ZADD h 1 m",
        "LPUSH str x",
        "INCR l",
    ] {
        let key = cmd.split(' ').nth(1).unwrap();
        let before = run(&mut db, &mut s, &format!("TYPE {key}"));
        let got = run(&mut db, &mut s, cmd);
        assert!(
            got.starts_with("-WRONGTYPE") || got.starts_with("-ERR value"),
            "{cmd}: {got}"
        );
        assert_eq!(run(&mut db, &mut s, &format!("TYPE {key}")), before);
    }
}
