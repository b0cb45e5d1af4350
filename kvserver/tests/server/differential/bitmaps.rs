//! The bitmaps family of the differential run: SETBIT, GETBIT, BITCOUNT and BITPOS (BYTE and
//! BIT ranges, negative and crossed ends) over whatever the other families left in the keys
//! (integers, short and long strings, other types), BITOP over keys of any shard, and
//! BITFIELD / BITFIELD_RO with every type width, `#` offsets, overflow modes and bad input;
//! and LCS (LEN, IDX, MINMATCHLEN, WITHMATCHLEN) over the same string values. Offsets
//! stay small (no 512 MB string), with the out-of-range and malformed ones among them.

use super::families::{key, word, Cmd, Gen, Rng};

fn offset(r: &mut Rng) -> Vec<u8> {
    match r.below(6) {
        0 => word(r.pick(&[
            "-1",
            "x",
            "4294967296",
            "4294967295x",
            "9223372036854775807",
        ])),
        1 => r.below(1000).to_string().into_bytes(),
        _ => r.below(80).to_string().into_bytes(),
    }
}

fn bound(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&[
        "0", "1", "2", "3", "7", "8", "9", "15", "16", "100", "-1", "-2", "-8", "-9", "-100", "x",
    ]))
}

fn unit(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["BIT", "BYTE", "bit", "nope"]))
}

fn bitcount(r: &mut Rng) -> Cmd {
    let mut c = vec![word("BITCOUNT"), key(r)];
    match r.below(4) {
        0 => {}
        1 => c.extend([bound(r), bound(r)]),
        2 => c.extend([bound(r), bound(r), unit(r)]),
        _ => c.push(bound(r)),
    }
    c
}

fn bitpos(r: &mut Rng) -> Cmd {
    let mut c = vec![
        word("BITPOS"),
        key(r),
        word(r.pick(&["0", "1", "1", "0", "2", "x"])),
    ];
    match r.below(4) {
        0 => {}
        1 => c.push(bound(r)),
        2 => c.extend([bound(r), bound(r)]),
        _ => c.extend([bound(r), bound(r), unit(r)]),
    }
    c
}

fn bitop(r: &mut Rng) -> Cmd {
    let mut c = vec![
        word("BITOP"),
        word(r.pick(&["AND", "OR", "XOR", "NOT", "and", "NAND"])),
    ];
    c.push(key(r));
    for _ in 0..1 + r.below(3) {
        c.push(key(r));
    }
    c
}

fn field_type(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&[
        "i1", "i5", "i8", "i8", "u8", "u8", "i16", "u16", "u1", "i63", "i64", "u63", "u64", "x8",
        "i0", "i65", "u",
    ]))
}

fn field_offset(r: &mut Rng) -> Vec<u8> {
    match r.below(5) {
        0 => format!("#{}", r.below(6)).into_bytes(),
        1 => word(r.pick(&["-1", "x", "#-1", "#x", ""])),
        _ => r.below(100).to_string().into_bytes(),
    }
}

fn field_value(r: &mut Rng) -> Vec<u8> {
    match r.below(4) {
        0 => word(r.pick(&[
            "9223372036854775807",
            "-9223372036854775808",
            "255",
            "256",
            "-129",
            "127",
            "x",
        ])),
        _ => (r.below(2001) as i64 - 1000).to_string().into_bytes(),
    }
}

fn bitfield(name: &str, r: &mut Rng) -> Cmd {
    let mut c = vec![word(name), key(r)];
    for _ in 0..r.below(4) {
        match r.below(9) {
            0..=2 => c.extend([word("GET"), field_type(r), field_offset(r)]),
            3 | 4 => c.extend([word("SET"), field_type(r), field_offset(r), field_value(r)]),
            5 | 6 => c.extend([
                word("INCRBY"),
                field_type(r),
                field_offset(r),
                field_value(r),
            ]),
            7 => c.extend([
                word("OVERFLOW"),
                word(r.pick(&["WRAP", "SAT", "FAIL", "fail", "NOPE"])),
            ]),
            _ => c.push(word(r.pick(&["GET", "SET", "BOGUS"]))),
        }
    }
    c
}

fn lcs(r: &mut Rng) -> Cmd {
    let mut c = vec![word("LCS"), key(r), key(r)];
    for _ in 0..r.below(4) {
        match r.below(6) {
            0 => c.push(word("LEN")),
            1 | 2 => c.push(word("IDX")),
            3 => c.push(word("WITHMATCHLEN")),
            4 => c.extend([
                word("MINMATCHLEN"),
                word(r.pick(&["0", "1", "2", "4", "-1", "x"])),
            ]),
            _ => c.push(word(r.pick(&["MINMATCHLEN", "nope"]))),
        }
    }
    c
}

pub static BITMAPS: &[Gen] = &[
    |r| {
        vec![
            word("SETBIT"),
            key(r),
            offset(r),
            word(r.pick(&["0", "1", "1", "2", "-1", "x"])),
        ]
    },
    |r| vec![word("SETBIT"), key(r), offset(r), word("1")],
    |r| vec![word("GETBIT"), key(r), offset(r)],
    bitcount,
    bitpos,
    bitpos,
    bitop,
    |r| bitfield("BITFIELD", r),
    |r| bitfield("BITFIELD", r),
    |r| bitfield("BITFIELD_RO", r),
    lcs,
    lcs,
];
