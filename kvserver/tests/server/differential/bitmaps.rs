//! The bitmaps family of the differential run: SETBIT, GETBIT, BITCOUNT and BITPOS (BYTE and
//! BIT ranges, negative and crossed ends) over whatever the other families left in the keys
//! (integers, short and long strings, other types), and BITOP over keys of any shard. Offsets
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
];
