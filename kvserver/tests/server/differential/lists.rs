//! The lists family of the differential run: every list command that Redis 7.0.15 answers
//! the way 7.4 does. Not here: OBJECT ENCODING (7.0 reports small lists as `quicklist`, 7.2+
//! as `listpack`; tested in `kvcore/tests/list_commands.rs`);
//! blocking waits that end other than by timing out are tested in `blocking_lists.rs`.

use super::families::{count, int, key, keys_with_count, make, rank, value, word, Cmd, Gen, Rng};

/// Elements: a few values that repeat (so LREM, LPOS and LINSERT find them), integers, long
/// strings (so a list spans quicklist nodes once it grows).
fn elem(r: &mut Rng) -> Vec<u8> {
    if r.chance(10) {
        return vec![b'q'; [100, 3000, 9000][r.below(3)]];
    }
    if r.chance(30) {
        return value(r);
    }
    word(r.pick(&["a", "b", "c", "1", "2", "-1", "x"]))
}

fn side(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["LEFT", "RIGHT", "left", "Right", "up"]))
}

fn push(name: &str, r: &mut Rng) -> Cmd {
    let mut c = vec![word(name), key(r)];
    for _ in 0..1 + r.below(20) {
        c.push(elem(r));
    }
    c
}

pub static LISTS: &[Gen] = &[
    |r| push("LPUSH", r),
    |r| push("RPUSH", r),
    |r| push("RPUSH", r),
    |r| push(r.pick(&["LPUSHX", "RPUSHX"]), r),
    |r| {
        let name = r.pick(&["LPOP", "RPOP"]);
        if r.chance(50) {
            make(name, &[key], r)
        } else {
            make(name, &[key, count], r)
        }
    },
    |r| make("LLEN", &[key], r),
    |r| make("LINDEX", &[key, rank], r),
    |r| make("LSET", &[key, rank, elem], r),
    |r| make("LRANGE", &[key, rank, rank], r),
    |r| make("LRANGE", &[key, rank, rank], r),
    |r| make("LTRIM", &[key, rank, rank], r),
    |r| make("LREM", &[key, int, elem], r),
    |r| {
        let w = word(r.pick(&["BEFORE", "AFTER", "after", "middle"]));
        let mut c = vec![word("LINSERT"), key(r), w];
        c.extend([elem(r), elem(r)]);
        c
    },
    |r| {
        let mut c = make("LPOS", &[key, elem], r);
        for _ in 0..r.below(4) {
            match r.below(4) {
                0 => c.extend([word("RANK"), rank(r)]),
                1 => c.extend([word("COUNT"), count(r)]),
                2 => c.extend([word("MAXLEN"), count(r)]),
                _ => c.push(word(r.pick(&["RANK", "COUNT", "FOO"]))),
            }
        }
        c
    },
    |r| make("LMOVE", &[key, key, side, side], r),
    |r| make("RPOPLPUSH", &[key, key], r),
    |r| {
        let mut c = vec![word("LMPOP")];
        c.extend(keys_with_count(r));
        c.push(side(r));
        if r.chance(50) {
            c.extend([word("COUNT"), count(r)]);
        }
        c
    },
    // The blocking forms answer at once when a key holds elements, give argument errors
    // before any wait, and otherwise time out after 10 ms on both servers alike.
    |r| {
        let name = r.pick(&["BLPOP", "BRPOP"]);
        let t = word(r.pick(&["0.01", "-1", "x"]));
        vec![word(name), key(r), key(r), t]
    },
    |r| {
        let t = word(r.pick(&["0.01", "-1"]));
        let mut c = make("BLMOVE", &[key, key, side, side], r);
        c.push(t);
        c
    },
];
