//! The HyperLogLog family of the differential run: PFADD, PFCOUNT, PFMERGE and PFDEBUG over the
//! shared keys (HLLs, other strings, other types), GET of the raw bytes after them, SET of
//! hand-made raw values (sparse and dense, valid, with a valid or invalid cached cardinality,
//! and corrupt: short runs, long runs, truncated, bad magic or encoding or length), SETRANGE
//! over the header, and CONFIG SET hll-sparse-max-bytes (the driver puts it
//! back to 3000 before each sequence).
//!
//! Also here: values made by a real redis-server, sparse and dense, loaded into ours with SET
//! count the same, and the other way round.

use super::families::{key, make, word, Cmd, Gen, Rng};
use super::{Conn, Redis};
use crate::support::Server;

/// An element: mostly from a small pool (so adds repeat), sometimes empty, binary or long
/// (every tail length of the hash).
fn element(r: &mut Rng) -> Vec<u8> {
    match r.below(12) {
        0 => Vec::new(),
        1 => b"a\r\n\0b".to_vec(),
        2 => vec![b'x'; r.below(40)],
        _ => format!("e{}", r.below(400)).into_bytes(),
    }
}

fn pfadd(r: &mut Rng) -> Cmd {
    let mut c = vec![word("PFADD"), key(r)];
    let n = match r.below(10) {
        0 => 0,
        1 => 200 + r.below(2000),
        _ => 1 + r.below(6),
    };
    if n > 100 {
        // Many distinct elements at once: past the sparse limit.
        let base = r.below(100_000);
        c.extend((0..n).map(|i| format!("m{}", base + i).into_bytes()));
    } else {
        c.extend((0..n).map(|_| element(r)));
    }
    c
}

fn keys(c: &mut Cmd, r: &mut Rng, most: usize) {
    for _ in 0..r.below(most + 1) {
        c.push(key(r));
    }
}

/// A sparse body covering exactly 16384 registers with random runs.
fn sparse_body(r: &mut Rng) -> Vec<u8> {
    let mut body = Vec::new();
    let mut left = 16384usize;
    while left > 0 {
        let run = match r.below(4) {
            0 => {
                let len = 1 + r.below(4).min(left - 1);
                body.push(0x80 | ((r.below(32) as u8) << 2) | (len as u8 - 1));
                len
            }
            1 => {
                let len = 1 + r.below(64).min(left - 1);
                body.push(len as u8 - 1);
                len
            }
            _ => {
                let len = 1 + r.below(2000).min(left - 1);
                body.extend([0x40 | ((len - 1) >> 8) as u8, (len - 1) as u8]);
                len
            }
        };
        left -= run;
    }
    body
}

/// A header: encoding byte, then a cached cardinality that is valid (a small number) or not.
fn header(r: &mut Rng, encoding: u8) -> Vec<u8> {
    let mut h = b"HYLL".to_vec();
    h.push(encoding);
    h.extend([0, 0, 0]);
    let card = if r.chance(30) {
        r.below(100_000) as u64
    } else {
        (r.next() >> 8) | 1 << 63
    };
    h.extend(card.to_le_bytes());
    h
}

/// A raw value for SET: a well-formed HLL of either encoding, or one of the ways to break one.
fn raw(r: &mut Rng) -> Vec<u8> {
    let mut v;
    match r.below(12) {
        0..=3 => {
            v = header(r, 1);
            v.extend(sparse_body(r));
        }
        4 | 5 => {
            v = header(r, 0);
            // Mostly small registers (a real dense HLL), sometimes anything up to 63.
            let wide = r.chance(30);
            v.extend((0..12288).map(|_| {
                if wide {
                    r.next() as u8
                } else {
                    (r.next() as u8) & 0b0100_0001
                }
            }));
        }
        6 => {
            // Runs that do not add up.
            v = header(r, 1);
            v.extend((0..r.below(12)).map(|_| r.next() as u8));
        }
        7 => {
            // A valid body cut short or grown by a byte.
            v = header(r, 1);
            v.extend(sparse_body(r));
            if r.chance(50) {
                v.pop();
            } else {
                v.push(r.next() as u8);
            }
        }
        8 => {
            let encoding = [0u8, 2, 255][r.below(3)];
            v = header(r, encoding);
            v.extend(vec![0u8; [0, 2, 12287, 12289][r.below(4)]]);
        }
        9 => {
            v = b"HYLX".to_vec();
            v.extend(header(r, 1).split_off(4));
            v.extend([0x7f, 0xff]);
        }
        _ => {
            v = header(r, 1);
            v.truncate(r.below(17));
        }
    }
    if v.get(4) == Some(&1) && lone_xzero_tail(v.get(16..).unwrap_or_default()) {
        v.push(r.next() as u8);
    }
    v
}

/// Whether a sparse body ends in the first byte of an XZERO alone. Redis then reads the byte
/// past the string (0 after SET) as its second byte, and a PFADD that splits that XZERO
/// writes its last byte there, out of the string, where the next command reads it again; we
/// cannot keep a byte outside the value, so our next read sees 0 (see `kvcore::hll::sparse`).
/// Values made here avoid the shape; the unit tests cover the reads that agree.
fn lone_xzero_tail(body: &[u8]) -> bool {
    let mut p = 0;
    while p < body.len() {
        let xzero = body[p] & 0xc0 == 0x40;
        if xzero && p + 1 == body.len() {
            return true;
        }
        p += if xzero { 2 } else { 1 };
    }
    false
}

pub static HYPERLOGLOG: &[Gen] = &[
    pfadd,
    pfadd,
    |r| {
        let mut c = vec![word("PFCOUNT"), key(r)];
        keys(&mut c, r, 3);
        c
    },
    |r| {
        let mut c = vec![word("PFMERGE"), key(r)];
        keys(&mut c, r, 3);
        c
    },
    |r| make("GET", &[key], r),
    |r| vec![word("SET"), key(r), raw(r)],
    |r| {
        // Header bytes: magic, encoding, cache.
        let at = r.below(16);
        vec![
            word("SETRANGE"),
            key(r),
            at.to_string().into_bytes(),
            vec![r.next() as u8],
        ]
    },
    |r| {
        vec![
            word("PFDEBUG"),
            word(r.pick(&["ENCODING", "DECODE", "TODENSE", "decode", "NOPE"])),
            key(r),
        ]
    },
    |r| {
        vec![
            word("CONFIG"),
            word("SET"),
            word("hll-sparse-max-bytes"),
            word(r.pick(&["0", "30", "100", "300", "3000", "3000", "1kb"])),
        ]
    },
    |r| {
        vec![
            word("CONFIG"),
            word("GET"),
            word(r.pick(&["hll-sparse-max-bytes", "hll*"])),
        ]
    },
];

fn one(c: &mut Conn, args: &[&[u8]]) -> Vec<u8> {
    let cmd: Cmd = args.iter().map(|a| a.to_vec()).collect();
    c.pipeline(&[cmd]).remove(0)
}

/// The bulk payload of a GET reply.
fn payload(reply: &[u8]) -> Vec<u8> {
    match kvcore::resp::reply::parse_reply(reply) {
        Ok(Some((kvcore::Reply::Bulk(b), _))) => b,
        other => panic!("not a bulk reply: {other:?}"),
    }
}

/// One direction of [`values_move_between_redis_and_us`]: `made` builds the HLL, `other` gets
/// its bytes.
fn exchange(made: &mut Conn, other: &mut Conn, encoding: &str, n: usize, made_by: &str) {
    let elems: Vec<Vec<u8>> = (0..n).map(|i| format!("v{i}").into_bytes()).collect();
    let mut args: Vec<&[u8]> = vec![b"PFADD", b"h"];
    args.extend(elems.iter().map(Vec::as_slice));
    assert_eq!(one(made, &args), b":1\r\n");
    let got = one(made, &[b"PFDEBUG", b"ENCODING", b"h"]);
    assert_eq!(got, format!("+{encoding}\r\n").into_bytes());
    // Uncached bytes first, then with the cache PFCOUNT stored.
    for _ in 0..2 {
        let bytes = payload(&one(made, &[b"GET", b"h"]));
        assert_eq!(one(other, &[b"SET", b"h", &bytes]), b"+OK\r\n");
        let want = one(made, &[b"PFCOUNT", b"h"]);
        let count = one(other, &[b"PFCOUNT", b"h"]);
        assert_eq!(count, want, "{encoding} made by {made_by}");
        assert_eq!(one(other, &[b"GET", b"h"]), one(made, &[b"GET", b"h"]));
    }
    // Both go on adding from the same bytes.
    for extra in [&b"w1"[..], b"w2", b"w3"] {
        let args: [&[u8]; 3] = [b"PFADD", b"h", extra];
        assert_eq!(one(made, &args), one(other, &args));
    }
    let union: [&[u8]; 3] = [b"PFCOUNT", b"h", b"none"];
    assert_eq!(one(made, &union), one(other, &union));
    assert_eq!(one(made, &[b"GET", b"h"]), one(other, &[b"GET", b"h"]));
    one(made, &[b"DEL", b"h"]);
    one(other, &[b"DEL", b"h"]);
}

/// HLLs made by Redis, sparse and dense, counted by us after SET, and ours counted by Redis;
/// PFADD then continues on each side from the other's bytes and both end in the same bytes.
#[test]
fn values_move_between_redis_and_us() {
    let ours = Server::start(&["--threads", "2"]);
    let redis = Redis::start();
    let (mut a, mut z) = (Conn::open(ours.port), Conn::open(redis.port));
    assert_eq!(one(&mut a, &[b"FLUSHALL"]), b"+OK\r\n");
    assert_eq!(one(&mut z, &[b"FLUSHALL"]), b"+OK\r\n");
    for (encoding, n) in [("sparse", 300usize), ("dense", 20_000)] {
        exchange(&mut z, &mut a, encoding, n, "redis");
        exchange(&mut a, &mut z, encoding, n, "kvserver");
    }
}
