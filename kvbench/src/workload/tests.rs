//! Tests of the workload generators: encoding, key distributions, ratios.

use super::*;
use kvcore::resp::{parse_reply, Value};

fn args(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some((v, used)) = parse_reply(&bytes[pos..]).unwrap() {
        let Value::Array(items) = v else {
            panic!("not an array")
        };
        for i in items {
            let Value::Bulk(b) = i else {
                panic!("not a bulk")
            };
            out.push(String::from_utf8(b).unwrap());
        }
        pos += used;
        if pos == bytes.len() {
            break;
        }
    }
    out
}

#[test]
fn template_encodes_resp_with_zeroed_fields() {
    let t = builtin("set", 5).unwrap();
    assert_eq!(args(&t.bytes), ["SET", "key:000000000000", "xxxxx"]);
    assert_eq!(t.slots.len(), 1);
    assert_eq!(&t.bytes[t.slots[0].0 - 4..t.slots[0].0], b"key:");
}

#[test]
fn every_builtin_test_encodes() {
    for name in TESTS {
        let t = builtin(name, 8).unwrap();
        assert_eq!(args(&t.bytes)[0].to_ascii_lowercase(), *name);
    }
    assert_eq!(builtin("mset", 3).unwrap().slots.len(), 10);
    assert!(builtin("nosuch", 3).is_err());
}

#[test]
fn custom_command_fields_and_data() {
    let t = Template::custom("HSET h:__rand_int__ f __data__", 4).unwrap();
    assert_eq!(t.name, "hset");
    assert_eq!(args(&t.bytes), ["HSET", "h:000000000000", "f", "xxxx"]);
    assert!(Template::custom("   ", 4).is_err());
}

#[test]
fn filled_batch_has_keys_in_range() {
    let wl = Workload::single(builtin("zadd", 1).unwrap());
    let mut b = wl.batches(4).remove(0);
    let mut keys = KeyGen::new(KeyDist::Uniform, 50, 7, 0, 1);
    let len = b.fill(3, &mut keys);
    assert_eq!(len, b.ends[2]);
    let a = args(&b.bytes[..len]);
    assert_eq!(a.len(), 12);
    for req in a.chunks(4) {
        assert_eq!(req[0], "ZADD");
        let score: f64 = req[2].parse().unwrap();
        assert!(score >= 0.0);
        let member: u64 = req[3].strip_prefix("element:").unwrap().parse().unwrap();
        assert!(member < 50);
    }
}

#[test]
fn digits_are_fixed_width() {
    let mut buf = [0u8; 12];
    write_digits(&mut buf, 42);
    assert_eq!(&buf, b"000000000042");
    write_digits(&mut buf, MAX_KEYSPACE - 1);
    assert_eq!(&buf, b"999999999999");
    write_digits(&mut buf, 123_456_789_012);
    assert_eq!(&buf, b"123456789012");
    // Odd widths: the leading digit comes from the remainder.
    let mut odd = [0u8; 5];
    write_digits(&mut odd, 12_345);
    assert_eq!(&odd, b"12345");
    write_digits(&mut odd, 7);
    assert_eq!(&odd, b"00007");
    let mut one = [0u8; 1];
    write_digits(&mut one, 9);
    assert_eq!(&one, b"9");
}

#[test]
fn uniform_keys_cover_the_keyspace_evenly() {
    let mut g = KeyGen::new(KeyDist::Uniform, 10, 1, 0, 1);
    let mut counts = [0u32; 10];
    for _ in 0..100_000 {
        counts[g.next() as usize] += 1;
    }
    for c in counts {
        assert!((9_000..11_000).contains(&c), "{counts:?}");
    }
}

#[test]
fn zipf_keys_favour_the_first() {
    let mut g = KeyGen::new(KeyDist::Zipf(0.99), 1000, 1, 0, 1);
    let mut counts = vec![0u32; 1000];
    for _ in 0..100_000 {
        let k = g.next();
        assert!(k < 1000);
        counts[k as usize] += 1;
    }
    // Zipf(0.99) over 1000 keys: key 0 gets about 13%, key 9 about a tenth of that.
    assert!(counts[0] > 10_000, "{}", counts[0]);
    assert!(counts[0] > 5 * counts[9], "{} {}", counts[0], counts[9]);
    assert!(counts[..10].iter().sum::<u32>() > counts[500..].iter().sum::<u32>());
}

#[test]
fn sequential_keys_stripe_threads() {
    let mut a = KeyGen::new(KeyDist::Sequential, 5, 1, 0, 2);
    let mut b = KeyGen::new(KeyDist::Sequential, 5, 1, 1, 2);
    let got: Vec<u64> = (0..3).map(|_| a.next()).collect();
    assert_eq!(got, [0, 2, 4]);
    let got: Vec<u64> = (0..3).map(|_| b.next()).collect();
    assert_eq!(got, [1, 3, 0]);
}

#[test]
fn same_seed_same_keys() {
    let mut a = KeyGen::new(KeyDist::Uniform, 1 << 40, 9, 0, 1);
    let mut b = KeyGen::new(KeyDist::Uniform, 1 << 40, 9, 0, 1);
    let mut c = KeyGen::new(KeyDist::Uniform, 1 << 40, 10, 0, 1);
    let x: Vec<u64> = (0..8).map(|_| a.next()).collect();
    let y: Vec<u64> = (0..8).map(|_| b.next()).collect();
    let z: Vec<u64> = (0..8).map(|_| c.next()).collect();
    assert_eq!(x, y);
    assert_ne!(x, z);
}

#[test]
fn ratio_cycle_is_exact_and_spread() {
    let t = || vec![builtin("set", 1).unwrap(), builtin("get", 1).unwrap()];
    let w = Workload::mixed(t(), &[1, 4]).unwrap();
    assert_eq!(w.cycle.len(), 5);
    assert_eq!(w.cycle.iter().filter(|&&k| k == 0).count(), 1);
    let w = Workload::mixed(t(), &[3, 5]).unwrap();
    assert_eq!(w.cycle.iter().filter(|&&k| k == 0).count(), 3);
    // Spread: never two SETs in a row when SETs are the minority.
    assert!(w.cycle.windows(2).all(|p| p != [0, 0]), "{:?}", w.cycle);
    assert!(Workload::mixed(t(), &[0, 0]).is_err());
}

#[test]
fn batches_follow_the_cycle_across_pipeline_boundaries() {
    let t = vec![builtin("set", 1).unwrap(), builtin("get", 1).unwrap()];
    let w = Workload::mixed(t, &[1, 4]).unwrap();
    // Pipeline 3 over a cycle of 5: 5 batches before it lines up again.
    let batches = w.batches(3);
    assert_eq!(batches.len(), 5);
    let kinds: Vec<u8> = batches.iter().flat_map(|b| b.kinds.clone()).collect();
    assert_eq!(kinds.len(), 15);
    assert_eq!(kinds.iter().filter(|&&k| k == 0).count(), 3);
    for (i, k) in kinds.iter().enumerate() {
        assert_eq!(*k as usize, w.cycle[i % 5]);
    }
    // Pipeline 10: one batch, 2 SETs and 8 GETs.
    let b = w.batches(10);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].kinds.iter().filter(|&&k| k == 0).count(), 2);
}

#[test]
fn key_dist_parsing() {
    assert_eq!("uniform".parse::<KeyDist>().unwrap(), KeyDist::Uniform);
    assert_eq!("zipf".parse::<KeyDist>().unwrap(), KeyDist::Zipf(0.99));
    assert_eq!("zipf:1.2".parse::<KeyDist>().unwrap(), KeyDist::Zipf(1.2));
    assert!("zipf:-1".parse::<KeyDist>().is_err());
    assert!("gauss".parse::<KeyDist>().is_err());
}
