//! The SORT family of the differential run: SORT and SORT_RO over whatever the keys hold,
//! with BY and GET patterns that name the other keys of the run (`k*` reads `k0` ...,
//! `*->f1` reads hash fields), LIMIT, ASC/DESC, ALPHA and STORE. Not here: `BY nosort` (a
//! hash-table set lists its members in bucket order) and ALPHA with BY (Redis's quicksort
//! leaves equal weights in no fixed order); both are tested in kvcore.

use super::families::{key, word, Cmd, Gen, Rng};

fn by(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["k*", "*", "{t}*", "k*->f1", "*->name", "w_*", "k*->"]))
}

fn get(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["#", "k*", "*->f1", "k*->f2", "nosuch*", "nostar", "{t}*"]))
}

fn limit(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&[
        "0",
        "1",
        "2",
        "-1",
        "10",
        "x",
        "9223372036854775807",
        "-9223372036854775808",
    ]))
}

fn sort(name: &str, r: &mut Rng) -> Cmd {
    let mut c = vec![word(name), key(r)];
    let alpha = r.chance(40);
    if !alpha && r.chance(50) {
        c.extend([word("BY"), by(r)]);
    }
    if r.chance(40) {
        c.extend([word("LIMIT"), limit(r), limit(r)]);
    }
    for _ in 0..r.below(3) {
        c.extend([word("GET"), get(r)]);
    }
    if r.chance(40) {
        c.push(word(r.pick(&["ASC", "DESC", "desc"])));
    }
    if alpha {
        c.push(word("ALPHA"));
    }
    if name == "SORT" && r.chance(30) {
        c.extend([word("STORE"), key(r)]);
    }
    if r.chance(3) {
        c.push(word(r.pick(&["BY", "LIMIT", "FOO", "STORE"])));
    }
    c
}

pub static SORTS: &[Gen] = &[|r| sort("SORT", r), |r| sort("SORT_RO", r)];
