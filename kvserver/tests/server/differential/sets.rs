//! The sets family of the differential run. Replies that list members are compared sorted
//! (hash-table order differs between servers; see `normalize`). Random picks are sent only
//! where the answer is determined: counts of at least the set's size, 0, errors, and missing
//! or wrong-typed keys. OBJECT ENCODING of small string
//! sets differs (7.0 has no listpack sets) and is tested in kvcore.

use super::families::{count, key, keys_with_count, make, value, word, Cmd, Gen, Rng};

/// Members: small integers (intsets), a few strings, longer strings (past 64 bytes a set
/// leaves the listpack), and the odd integer-looking string.
fn member(r: &mut Rng) -> Vec<u8> {
    match r.below(10) {
        0..=3 => (r.below(20) as i64 - 5).to_string().into_bytes(),
        4..=6 => word(r.pick(&["a", "b", "c", "d", "x"])),
        7 => vec![b'L'; 65],
        8 => value(r),
        _ => word(r.pick(&["007", "-0", "9223372036854775807", "1e3"])),
    }
}

fn members(c: &mut Cmd, r: &mut Rng, most: usize) {
    for _ in 0..1 + r.below(most) {
        c.push(member(r));
    }
}

fn keys(c: &mut Cmd, r: &mut Rng) {
    for _ in 0..1 + r.below(3) {
        c.push(key(r));
    }
}

pub static SETS: &[Gen] = &[
    |r| {
        let mut c = vec![word("SADD"), key(r)];
        members(&mut c, r, 12);
        c
    },
    |r| {
        // Enough members to pass the intset and listpack limits.
        let mut c = vec![word("SADD"), key(r)];
        let base = r.below(1000);
        for i in 0..200 + r.below(400) {
            c.push((base + i).to_string().into_bytes());
        }
        c
    },
    |r| {
        let mut c = vec![word("SREM"), key(r)];
        members(&mut c, r, 4);
        c
    },
    |r| make("SISMEMBER", &[key, member], r),
    |r| make("SMISMEMBER", &[key, member, member, member], r),
    |r| make("SCARD", &[key], r),
    |r| make("SMEMBERS", &[key], r),
    |r| make("SMOVE", &[key, key, member], r),
    |r| {
        let name = r.pick(&["SINTER", "SUNION", "SDIFF"]);
        let mut c = vec![word(name)];
        keys(&mut c, r);
        c
    },
    |r| {
        let name = r.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]);
        let mut c = vec![word(name), key(r)];
        keys(&mut c, r);
        c
    },
    |r| {
        let mut c = vec![word("SINTERCARD")];
        c.extend(keys_with_count(r));
        if r.chance(50) {
            c.extend([word("LIMIT"), count(r)]);
        }
        c
    },
    |r| {
        // Determined answers only: the whole set, none, or errors.
        let (name, counts): (&str, &[&str]) = if r.chance(50) {
            ("SPOP", &["100000", "0", "-1", "x", "9223372036854775807"])
        } else {
            (
                "SRANDMEMBER",
                &[
                    "100000",
                    "0",
                    "x",
                    "9223372036854775807",
                    "-9223372036854775808",
                ],
            )
        };
        let n = word(r.pick(counts));
        vec![word(name), key(r), n]
    },
    |r| {
        let mut c = make("SSCAN", &[key], r);
        // Cursor 0 only: elsewhere a hash table answers by its own bucket layout.
        c.push(word(r.pick(&["0", "0", "x"])));
        c.extend([word("COUNT"), word("1000")]);
        if r.chance(40) {
            c.extend([word("MATCH"), word(r.pick(&["*", "a*", "1*", "[0-3]"]))]);
        }
        c
    },
];
