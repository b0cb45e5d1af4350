//! Facts taken from Redis 7.0.15 (`PFDEBUG DECODE`, `GET` after PFADD, PFCOUNT) and
//! properties of the two representations.

use super::*;
use crate::{Db, Reply};

/// FNV-1a 64 of a value: the fingerprints below were computed from Redis's GET bytes.
fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn get(db: &mut Db, key: &[u8]) -> Vec<u8> {
    match db.execute(&[b"GET", key]) {
        Reply::Bulk(b) => b,
        other => panic!("{other:?}"),
    }
}

fn int(r: Reply) -> i64 {
    match r {
        Reply::Int(i) => i,
        other => panic!("{other:?}"),
    }
}

/// Adds `e1` ..= `eN`, one PFADD per element (as a client adding one at a time).
fn add_each(db: &mut Db, key: &[u8], n: usize) {
    for i in 1..=n {
        db.execute(&[b"PFADD", key, format!("e{i}").as_bytes()]);
    }
}

#[test]
fn constants_and_hash_match_redis() {
    assert_eq!(
        "0.721347520444481703680".parse::<f64>().unwrap(),
        0.721_347_520_444_481_7
    );
    assert_eq!(DENSE_SIZE, 12304);
    // PFDEBUG DECODE of a one-element HLL: the register and its value.
    for (e, reg, val) in [
        ("a", 12711, 2),
        ("b", 15780, 1),
        ("c", 8436, 1),
        ("hello", 9216, 1),
        ("foo", 7348, 5),
    ] {
        assert_eq!(pattern(e.as_bytes()), (reg, val), "{e}");
    }
    // Every tail length of the hash's byte loop, against the reference computation.
    let data: Vec<u8> = (0u8..40).collect();
    let mut seen = std::collections::HashSet::new();
    for len in 0..data.len() {
        assert!(seen.insert(murmur64a(&data[..len], 0xadc8_3b19)));
    }
}

#[test]
fn pfadd_writes_redis_bytes_and_pfcount_caches() {
    let mut db = Db::new();
    assert_eq!(
        db.execute(&[b"PFADD", b"h", b"a", b"b", b"c"]),
        Reply::Int(1)
    );
    let mut want = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
    want.extend_from_slice(b"\x60\xf3\x80\x50\xb1\x84\x4b\xfb\x80\x42\x5a");
    assert_eq!(get(&mut db, b"h"), want);
    assert_eq!(db.execute(&[b"PFCOUNT", b"h"]), Reply::Int(3));
    want[8] = 3;
    want[15] = 0;
    assert_eq!(get(&mut db, b"h"), want);
    assert_eq!(
        db.execute(&[b"PFDEBUG", b"DECODE", b"h"]),
        Reply::Bulk(b"Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603".to_vec())
    );
    // Nothing new: 0, and the cache stays valid.
    assert_eq!(db.execute(&[b"PFADD", b"h", b"a"]), Reply::Int(0));
    assert_eq!(get(&mut db, b"h"), want);
    // A new key with no element: created, cache invalid.
    assert_eq!(db.execute(&[b"PFADD", b"e"]), Reply::Int(1));
    assert_eq!(
        get(&mut db, b"e"),
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff"
    );
    assert_eq!(db.execute(&[b"PFADD", b"e"]), Reply::Int(0));
}

#[test]
fn estimates_match_redis() {
    let mut db = Db::new();
    let mut done = 0;
    for (n, want) in [(10, 10), (100, 100), (1000, 1008), (10_000, 9972)] {
        for i in done + 1..=n {
            db.execute(&[b"PFADD", b"x", format!("e{i}").as_bytes()]);
        }
        done = n;
        assert_eq!(int(db.execute(&[b"PFCOUNT", b"x"])), want, "{n}");
    }
    assert_eq!(get(&mut db, b"x").len(), DENSE_SIZE);
    // The bytes of a fresh key: an invalidated cache keeps its old bytes under the flag, so a
    // key counted along the way differs in its header.
    add_each(&mut db, b"y", 1000);
    let s = get(&mut db, b"y");
    assert_eq!((s.len(), fnv(&s)), (1906, 0x1ae9_f4f3_5eb4_b4a0));
    assert_eq!(int(db.execute(&[b"PFCOUNT", b"y"])), 1008);
    let s = get(&mut db, b"y");
    assert_eq!((s.len(), fnv(&s)), (1906, 0x8b59_617d_ea27_b6b9));
}

#[test]
fn sparse_turns_dense_past_the_configured_size() {
    let mut db = Db::new();
    db.execute(&[b"CONFIG", b"SET", b"hll-sparse-max-bytes", b"100"]);
    for i in 1..=60 {
        db.execute(&[b"PFADD", b"y", format!("e{i}").as_bytes()]);
        let dense = get(&mut db, b"y").len() == DENSE_SIZE;
        assert_eq!(dense, i >= 29, "after {i}");
        if dense {
            break;
        }
    }
    let s = get(&mut db, b"y");
    assert_eq!(fnv(&s), 0x14a8_05e7_dfa2_1a19);
    assert_eq!(
        db.execute(&[b"PFDEBUG", b"ENCODING", b"y"]),
        Reply::Simple(b"dense".to_vec())
    );
    assert_eq!(db.execute(&[b"PFCOUNT", b"y"]), Reply::Int(29));
    assert_eq!(fnv(&get(&mut db, b"y")), 0xb4b0_5cf2_86ad_c20c);
    // The same 40 elements in one PFADD stay sparse under 200 bytes as under 3000.
    for max in [&b"200"[..], b"3000"] {
        db.execute(&[b"CONFIG", b"SET", b"hll-sparse-max-bytes", max]);
        db.execute(&[b"DEL", b"z"]);
        let mut cmd: Vec<Vec<u8>> = vec![b"PFADD".to_vec(), b"z".to_vec()];
        cmd.extend((1..=40).map(|i| format!("e{i}").into_bytes()));
        let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
        db.execute(&refs);
        let s = get(&mut db, b"z");
        assert_eq!((s.len(), fnv(&s)), (130, 0x6077_7874_4a81_c727));
    }
    assert_eq!(
        db.execute(&[b"CONFIG", b"GET", b"hll-sparse-max-bytes"]),
        Reply::Array(vec![
            Reply::Bulk(b"hll-sparse-max-bytes".to_vec()),
            Reply::Bulk(b"3000".to_vec())
        ])
    );
}

/// Registers set in both representations, in random order, read back the same; the sparse
/// one turns dense on a value past 32 and counts agree all along.
#[test]
fn sparse_and_dense_agree_register_by_register() {
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..20 {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        to_dense(&mut dense).unwrap();
        let mut model = [0u8; REGISTERS];
        let n = 1 + next() % 400;
        for _ in 0..n {
            // Clustered indices exercise VAL joins and ZERO splits next to each other.
            let index = if round % 2 == 0 {
                (next() % 64) as usize + 1000
            } else {
                (next() % REGISTERS as u64) as usize
            };
            let count = if round == 7 {
                1 + (next() % 40) as u8
            } else {
                1 + (next() % 6) as u8
            };
            let a = set_register(&mut sparse, index, count, 3000).unwrap();
            let b = set_register(&mut dense, index, count, 3000).unwrap();
            assert_eq!(a, b);
            assert_eq!(a, count > model[index]);
            model[index] = model[index].max(count);
        }
        let mut regs = [0u8; REGISTERS];
        merge_into(&mut regs, &sparse).unwrap();
        assert_eq!(regs, model);
        let mut regs = [0u8; REGISTERS];
        merge_into(&mut regs, &dense).unwrap();
        assert_eq!(regs, model);
        assert_eq!(count(&sparse), count(&dense));
        assert_eq!(count(&dense).unwrap(), count_registers(&model));
        if round == 7 {
            assert_eq!(check(&sparse), Some(Encoding::Dense));
        }
    }
}

#[test]
fn dense_registers_round_trip_without_touching_neighbours() {
    let mut regs = vec![0u8; DENSE_BYTES];
    let val = |i: usize| ((i * 7 + 3) % 64) as u8;
    for i in 0..REGISTERS {
        dense::put(&mut regs, i, val(i));
    }
    for i in 0..REGISTERS {
        assert_eq!(dense::get(&regs, i), val(i), "{i}");
    }
    let mut histo = [0u32; 64];
    dense::histogram(&regs, &mut histo);
    assert_eq!(histo.iter().sum::<u32>(), REGISTERS as u32);
    assert_eq!(histo[3], 256);
}

#[test]
fn estimator_edge_cases_match_redis() {
    let mut db = Db::new();
    let header = b"HYLL\0\0\0\0\0\0\0\0\0\0\0\x80";
    // Every register 63, or 51: the sum is 0, C's llroundl of infinity gives LLONG_MIN, and
    // the stored cache (top bit set) stays invalid.
    for fill in [[0xffu8, 0xff, 0xff], [0xf3, 0x3c, 0xcf]] {
        let mut v = header.to_vec();
        v.extend(fill.iter().copied().cycle().take(DENSE_BYTES));
        db.execute(&[b"SET", b"d", &v]);
        assert_eq!(db.execute(&[b"PFCOUNT", b"d"]), Reply::Int(i64::MIN));
        assert_eq!(&get(&mut db, b"d")[..16], header);
    }
    // Every register 1.
    let mut v = header.to_vec();
    v.extend(
        [0x41u8, 0x10, 0x04]
            .iter()
            .copied()
            .cycle()
            .take(DENSE_BYTES),
    );
    db.execute(&[b"SET", b"d", &v]);
    assert_eq!(db.execute(&[b"PFCOUNT", b"d"]), Reply::Int(23637));
    assert_eq!(
        &get(&mut db, b"d")[..16],
        b"HYLL\0\0\0\0\x55\x5c\0\0\0\0\0\0"
    );
    // Empty.
    assert_eq!(count(&new_sparse()), Ok(0));
    assert_eq!(estimate::sigma(1.0), f64::INFINITY);
    assert_eq!(estimate::tau(0.0), 0.0);
}

#[test]
fn invalid_and_corrupt_values_are_refused() {
    let mut db = Db::new();
    let not_hll = Reply::Error(b"WRONGTYPE Key is not a valid HyperLogLog string value.".to_vec());
    let corrupt = Reply::Error(b"INVALIDOBJ Corrupted HLL object detected".to_vec());
    for v in [
        &b"12345"[..],
        b"HYLL",
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0",
        b"HYLX\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff",
        b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff",
        b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff",
    ] {
        db.execute(&[b"SET", b"k", v]);
        for cmd in [
            &[&b"PFADD"[..], b"k", b"x"][..],
            &[b"PFCOUNT", b"k"],
            &[b"PFMERGE", b"k"],
        ] {
            assert_eq!(db.execute(cmd), not_hll, "{v:?} {cmd:?}");
        }
    }
    db.execute(&[b"LPUSH", b"l", b"x"]);
    assert_eq!(
        db.execute(&[b"PFCOUNT", b"l"]),
        Reply::Error(b"WRONGTYPE Operation against a key holding the wrong kind of value".to_vec())
    );
    // Runs that cover too few registers (XZERO:16383), or too many.
    for body in [&b"\x7f\xfe"[..], b"\x7f\xff\x00", b"\x7f\xfe\x80\x80", b""] {
        let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        v.extend_from_slice(body);
        db.execute(&[b"SET", b"k", &v]);
        assert_eq!(db.execute(&[b"PFCOUNT", b"k"]), corrupt, "{body:?}");
        assert_eq!(db.execute(&[b"PFCOUNT", b"k", b"nokey"]), corrupt);
        assert_eq!(db.execute(&[b"PFMERGE", b"d", b"k"]), corrupt);
    }
    // A lone XZERO byte at the end reads its second byte as 0 (Redis's terminator):
    // 0x7f then 0 is XZERO:16129, after 255 zeros from a ZERO:64 x3 + ZERO:63.
    let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x3f\x3f\x3f\x3e\x7f".to_vec();
    db.execute(&[b"SET", b"k", &v]);
    assert_eq!(db.execute(&[b"PFCOUNT", b"k"]), Reply::Int(0));
    v.push(0);
    assert_eq!(count(&v), Ok(0));
}

/// Every prefix and many byte flips of real values: PF commands answer (any reply) and never
/// panic; every length is bounded before use.
#[test]
fn arbitrary_bytes_never_panic() {
    let mut db = Db::new();
    add_each(&mut db, b"src", 300);
    let sparse = get(&mut db, b"src");
    add_each(&mut db, b"big", 5000);
    let dense = get(&mut db, b"big");
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut cases: Vec<Vec<u8>> = (0..sparse.len()).map(|n| sparse[..n].to_vec()).collect();
    for base in [&sparse, &dense] {
        for _ in 0..300 {
            let mut v = base.to_vec();
            for _ in 0..1 + next() % 4 {
                let at = HDR + (next() as usize) % (v.len() - HDR);
                v[at] = next() as u8;
            }
            cases.push(v);
        }
    }
    for _ in 0..300 {
        let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        v.extend((0..next() % 40).map(|_| next() as u8));
        cases.push(v);
    }
    for v in cases {
        db.execute(&[b"SET", b"k", &v]);
        db.execute(&[b"PFCOUNT", b"k", b"src"]);
        db.execute(&[b"PFMERGE", b"m", b"src", b"k"]);
        for e in 0..20 {
            db.execute(&[b"PFADD", b"k", format!("x{e}").as_bytes()]);
        }
        db.execute(&[b"PFCOUNT", b"k"]);
        db.execute(&[b"PFDEBUG", b"DECODE", b"k"]);
        db.execute(&[b"PFDEBUG", b"GETREG", b"k"]);
    }
}

#[test]
fn pfmerge_keeps_sparse_unless_a_source_is_dense() {
    let mut db = Db::new();
    db.execute(&[b"PFADD", b"a", b"1", b"2", b"3"]);
    db.execute(&[b"PFADD", b"b", b"3", b"4"]);
    assert_eq!(
        db.execute(&[b"PFMERGE", b"d", b"a", b"b"]),
        Reply::Simple(b"OK".to_vec())
    );
    assert_eq!(
        db.execute(&[b"PFDEBUG", b"ENCODING", b"d"]),
        Reply::Simple(b"sparse".to_vec())
    );
    assert_eq!(db.execute(&[b"PFCOUNT", b"d"]), Reply::Int(4));
    assert_eq!(
        db.execute(&[b"PFCOUNT", b"a", b"b", b"nokey"]),
        Reply::Int(4)
    );
    assert_eq!(db.execute(&[b"PFDEBUG", b"TODENSE", b"b"]), Reply::Int(1));
    assert_eq!(
        db.execute(&[b"PFMERGE", b"d2", b"a", b"b"]),
        Reply::Simple(b"OK".to_vec())
    );
    assert_eq!(
        db.execute(&[b"PFDEBUG", b"ENCODING", b"d2"]),
        Reply::Simple(b"dense".to_vec())
    );
    assert_eq!(db.execute(&[b"PFCOUNT", b"d2"]), Reply::Int(4));
    // A missing destination alone: an empty HLL, cache invalid.
    assert_eq!(
        db.execute(&[b"PFMERGE", b"e"]),
        Reply::Simple(b"OK".to_vec())
    );
    assert_eq!(
        get(&mut db, b"e"),
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff"
    );
}

/// Events and WATCH as Redis raises them: `pfadd` for PFADD that changed something and for
/// PFMERGE (`new` first when they create the key), nothing for PFCOUNT; PFCOUNT of one key
/// signals WATCH when it stores a recomputed cardinality, not when the cache was valid.
#[test]
fn events_and_watch_signals() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mut db = Db::new();
    db.execute(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"]);
    db.execute(&[b"PFADD", b"h", b"a"]);
    db.execute(&[b"PFADD", b"h", b"a"]);
    db.execute(&[b"PFCOUNT", b"h"]);
    db.execute(&[b"PFCOUNT", b"h", b"missing"]);
    db.execute(&[b"PFMERGE", b"d", b"h"]);
    let got: Vec<(&str, Vec<u8>)> = db
        .drain_events()
        .map(|e| (e.event, e.key.to_vec()))
        .collect();
    let want: Vec<(&str, Vec<u8>)> = vec![("pfadd", b"h".to_vec()), ("pfadd", b"d".to_vec())];
    assert_eq!(got, want);
    db.execute(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEAnm"]);
    db.execute(&[b"PFMERGE", b"e", b"missing"]);
    let got: Vec<(&str, Vec<u8>)> = db
        .drain_events()
        .map(|e| (e.event, e.key.to_vec()))
        .collect();
    let want: Vec<(&str, Vec<u8>)> = vec![
        ("keymiss", b"e".to_vec()),
        ("keymiss", b"missing".to_vec()),
        ("new", b"e".to_vec()),
        ("pfadd", b"e".to_vec()),
    ];
    assert_eq!(got, want);

    let dirty = Arc::new(AtomicBool::new(false));
    db.watch(0, b"h", 1, &dirty);
    // The cache is valid: nothing written.
    db.execute(&[b"PFCOUNT", b"h"]);
    assert!(!dirty.load(Ordering::Acquire));
    db.execute(&[b"PFADD", b"h", b"a"]);
    assert!(!dirty.load(Ordering::Acquire), "no register changed");
    db.execute(&[b"PFADD", b"h", b"b"]);
    assert!(dirty.load(Ordering::Acquire));
    // A touched client stops watching (as in Redis): watch again for each check.
    let dirty = Arc::new(AtomicBool::new(false));
    db.watch(0, b"h", 2, &dirty);
    db.execute(&[b"PFCOUNT", b"h"]);
    assert!(
        dirty.load(Ordering::Acquire),
        "the recomputed cache is a write"
    );
    let dirty = Arc::new(AtomicBool::new(false));
    db.watch(0, b"h", 3, &dirty);
    db.execute(&[b"PFCOUNT", b"h", b"d"]);
    assert!(!dirty.load(Ordering::Acquire), "a union writes nothing");
}
