//! The hashes family of the differential run. HRANDFIELD is sent only where its answer is
//! determined (counts of at least the hash's size, 0, errors, missing or wrong-typed keys);
//! HSCAN only from cursor 0 with a COUNT that covers the hash. The field-expiry commands of
//! Redis 7.4 are not in 7.0.15: they are tested in kvcore.

use super::families::{int, key, make, value, word, Cmd, Gen, Rng};

fn field(r: &mut Rng) -> Vec<u8> {
    match r.below(10) {
        0..=5 => word(r.pick(&["f1", "f2", "f3", "name", "1", "-1"])),
        6 => vec![b'F'; 65],
        7 => value(r),
        _ => word(r.pick(&["", "007", "f4", "f5"])),
    }
}

fn hvalue(r: &mut Rng) -> Vec<u8> {
    match r.below(10) {
        0..=3 => (r.below(200) as i64 - 50).to_string().into_bytes(),
        4 => vec![b'v'; 65],
        5 => word(r.pick(&["1.5", "-0.25", "1e3", "inf", "abc", "9223372036854775807"])),
        _ => value(r),
    }
}

fn float(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&[
        "1.5", "-2", "0", "1e2", "inf", "nan", "abc", "", "0x10", "3.0e-2",
    ]))
}

fn pairs(c: &mut Cmd, r: &mut Rng, most: usize) {
    for _ in 0..1 + r.below(most) {
        c.push(field(r));
        c.push(hvalue(r));
    }
}

pub static HASHES: &[Gen] = &[
    |r| {
        let mut c = vec![word(r.pick(&["HSET", "HMSET"])), key(r)];
        pairs(&mut c, r, 6);
        c
    },
    |r| {
        // Past the listpack's 512 entries.
        let mut c = vec![word("HSET"), key(r)];
        let base = r.below(1000);
        for i in 0..300 + r.below(400) {
            c.push(format!("k{}", base + i).into_bytes());
            c.push(hvalue(r));
        }
        c
    },
    |r| make("HSETNX", &[key, field, hvalue], r),
    |r| make("HGET", &[key, field], r),
    |r| make("HMGET", &[key, field, field, field], r),
    |r| {
        let mut c = vec![word("HDEL"), key(r)];
        for _ in 0..1 + r.below(3) {
            c.push(field(r));
        }
        c
    },
    |r| make("HLEN", &[key], r),
    |r| make("HSTRLEN", &[key, field], r),
    |r| make("HEXISTS", &[key, field], r),
    |r| make("HINCRBY", &[key, field, int], r),
    |r| make("HINCRBYFLOAT", &[key, field, float], r),
    |r| make(r.pick(&["HKEYS", "HVALS", "HGETALL"]), &[key], r),
    |r| {
        let n = word(r.pick(&[
            "100000",
            "0",
            "x",
            "-9223372036854775808",
            "9223372036854775807",
        ]));
        let mut c = vec![word("HRANDFIELD"), key(r), n];
        if r.chance(40) {
            c.push(word(r.pick(&["WITHVALUES", "withvalues", "WITHSCORES"])));
        }
        c
    },
    |r| {
        let mut c = make("HSCAN", &[key], r);
        c.push(word(r.pick(&["0", "0", "x"])));
        c.extend([word("COUNT"), word("100000")]);
        if r.chance(40) {
            c.extend([word("MATCH"), word(r.pick(&["*", "f*", "k1*", "[a-z]*"]))]);
        }
        c
    },
];
