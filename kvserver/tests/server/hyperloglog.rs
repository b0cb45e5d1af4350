//! HyperLogLog across shards: PFCOUNT of keys on several shards and PFMERGE with sources on
//! other shards give what the same keys on one shard give (replies and the merged bytes), and
//! leave the sources as they were.

use std::net::TcpStream;

use crate::support::{encode, key_on, read_replies, shard_of, Server};

const N: usize = 3;

fn send(s: &mut TcpStream, args: &[&[u8]]) -> Vec<u8> {
    use std::io::Write;
    s.write_all(&encode(args)).unwrap();
    read_replies(s, 1).remove(0)
}

/// Adds `from..to` as elements `e<i>` to `key`, in one PFADD.
fn add(s: &mut TcpStream, key: &str, from: usize, to: usize) {
    let elems: Vec<Vec<u8>> = (from..to).map(|i| format!("e{i}").into_bytes()).collect();
    let mut args: Vec<&[u8]> = vec![b"PFADD", key.as_bytes()];
    args.extend(elems.iter().map(Vec::as_slice));
    let r = send(s, &args);
    assert!(r == b":1\r\n" || r == b":0\r\n", "{r:?}");
}

/// Runs the same scenario on keys of three shards and on `{t}`-tagged keys of one shard.
fn scenario(s: &mut TcpStream, keys: [&str; 4], sizes: [(usize, usize); 3]) -> Vec<Vec<u8>> {
    let [a, b, c, d] = keys;
    for (k, (from, to)) in [a, b, c].into_iter().zip(sizes) {
        add(s, k, from, to);
    }
    let get = |s: &mut TcpStream, k: &str| send(s, &[b"GET", k.as_bytes()]);
    let before: Vec<Vec<u8>> = [a, b, c].into_iter().map(|k| get(s, k)).collect();
    let mut out = vec![
        send(s, &[b"PFCOUNT", a.as_bytes(), b.as_bytes(), c.as_bytes()]),
        send(s, &[b"PFCOUNT", a.as_bytes(), b"nokey", c.as_bytes()]),
        send(s, &[b"PFMERGE", d.as_bytes(), a.as_bytes(), b.as_bytes()]),
        get(s, d),
        // The destination is a source too, and merges with a third shard's key.
        send(s, &[b"PFMERGE", d.as_bytes(), c.as_bytes()]),
        get(s, d),
        send(s, &[b"PFCOUNT", d.as_bytes()]),
        get(s, d),
        // A source on another shard is merged into an existing destination on this one.
        send(s, &[b"PFMERGE", a.as_bytes(), b.as_bytes(), c.as_bytes()]),
        get(s, a),
    ];
    // Sources other than the destination are unchanged.
    assert_eq!(get(s, b), before[1]);
    assert_eq!(get(s, c), before[2]);
    // A source that is not an HLL fails the whole merge, nothing written.
    send(s, &[b"SET", b.as_bytes(), b"not an hll"]);
    out.push(send(
        s,
        &[b"PFMERGE", c.as_bytes(), a.as_bytes(), b.as_bytes()],
    ));
    out.push(send(s, &[b"PFCOUNT", a.as_bytes(), b.as_bytes()]));
    assert_eq!(get(s, c), before[2]);
    out
}

#[test]
fn pfcount_and_pfmerge_across_shards_match_one_shard() {
    let server = Server::start(&["--threads", &N.to_string()]);
    let mut s = server.raw();
    // Small (sparse) and large (dense) registers, and one of each.
    let sizes = [
        [(0, 50), (25, 90), (80, 130)],
        [(0, 5000), (2500, 9000), (100, 400)],
        [(0, 3000), (3000, 6000), (6000, 9000)],
    ];
    for (round, sizes) in sizes.into_iter().enumerate() {
        let spread: Vec<String> = (0..4)
            .map(|i| key_on(&format!("hll{round}:"), i % N, N, i))
            .collect();
        assert_eq!(
            spread.iter().map(|k| shard_of(k, N)).collect::<Vec<_>>(),
            [0, 1, 2, 0]
        );
        let local: Vec<String> = ["a", "b", "c", "d"]
            .iter()
            .map(|k| format!("{{t{round}}}{k}"))
            .collect();
        let four = |v: &[String]| -> [String; 4] { std::array::from_fn(|i| v[i].clone()) };
        let (ks, kl) = (four(&spread), four(&local));
        let across = scenario(&mut s, ks.each_ref().map(String::as_str), sizes);
        let one = scenario(&mut s, kl.each_ref().map(String::as_str), sizes);
        assert_eq!(across, one, "round {round}");
        // The union counts are real counts.
        assert!(across[0].starts_with(b":"), "{:?}", across[0]);
    }
}
