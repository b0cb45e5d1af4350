use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0u8..10).prop_map(|i| vec![b'f', b'0' + i]),
        2 => (-50i64..50).prop_map(|i| i.to_string().into_bytes()),
        1 => (3usize..12).prop_map(|n| vec![b'L'; n]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn behaves_like_a_hashmap(
        max_entries in 0usize..8,
        max_value in 0usize..10,
        ops in proptest::collection::vec((0u8..3, bytes(), bytes()), 1..80),
    ) {
        let limits = Limits { max_entries, max_value };
        let mut h = Hash::default();
        let mut m: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for (op, f, v) in ops {
            match op {
                0 => {
                    prop_assert_eq!(h.set(limits, &f, &v), m.insert(f.clone(), v.clone()).is_none());
                }
                1 => {
                    // Two pairs at once, the second sometimes on the same field.
                    let f2 = if v.len() % 2 == 0 { f.clone() } else { v.clone() };
                    let mut want = 0;
                    for (a, b) in [(&f, &v), (&f2, &f)] {
                        if m.insert(a.clone(), b.clone()).is_none() {
                            want += 1;
                        }
                    }
                    prop_assert_eq!(h.set_many(limits, &[&f, &v, &f2, &f]), want);
                }
                _ => prop_assert_eq!(h.remove(&f), m.remove(&f).is_some()),
            }
            prop_assert_eq!(h.len(), m.len());
            let got: HashMap<Vec<u8>, Vec<u8>> = h.to_vec().into_iter().collect();
            prop_assert_eq!(&got, &m);
            for (f, v) in &m {
                prop_assert_eq!(h.get(f), Some(v.clone()));
                prop_assert!(h.contains(f));
            }
            if h.encoding() == "listpack" {
                prop_assert!(m.len() <= max_entries);
                prop_assert!(m.iter().all(|(f, v)| f.len() <= max_value && v.len() <= max_value));
            }
            if let Some((f, v)) = h.random(99) {
                prop_assert_eq!(m.get(&f), Some(&v));
            }
            let mut scanned = HashMap::new();
            let mut c = 0;
            loop {
                c = h.scan(c, 2, |f, v| { scanned.insert(f.to_vec(), v.to_vec()); });
                if c == 0 { break; }
            }
            prop_assert_eq!(&scanned, &m);
        }
    }
}

#[test]
fn converts_at_redis_limits() {
    let l = Limits::default();
    let mut h = Hash::default();
    for i in 0..512 {
        h.set(l, format!("f{i}").as_bytes(), b"v");
    }
    assert_eq!(h.encoding(), "listpack");
    h.set(l, b"one more", b"v");
    assert_eq!(h.encoding(), "hashtable");
    let mut h = Hash::default();
    h.set(l, b"f", &[b'v'; 64]);
    assert_eq!(h.encoding(), "listpack");
    h.set(l, b"g", &[b'v'; 65]);
    assert_eq!(h.encoding(), "hashtable");
    assert_eq!(h.get(b"f"), Some(vec![b'v'; 64]));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Field deadlines against a model: a map of (value, deadline); the clock moves forward
    /// and purge must remove exactly the fields whose deadline passed.
    #[test]
    fn field_deadlines_behave_like_a_model(
        ops in proptest::collection::vec((0u8..5, bytes(), 0u64..50), 1..80),
    ) {
        let limits = Limits { max_entries: 4, max_value: 8 };
        let mut h = Hash::default();
        let mut m: HashMap<Vec<u8>, (Vec<u8>, Option<u64>)> = HashMap::new();
        let mut now = 0u64;
        for (op, f, t) in ops {
            match op {
                0 => {
                    h.set(limits, &f, b"v");
                    m.insert(f.clone(), (b"v".to_vec(), None));
                }
                1 => {
                    let at = now + 1 + t;
                    let had = m.contains_key(&f);
                    prop_assert_eq!(h.set_field_deadline(&f, Some(at)), had);
                    if let Some(e) = m.get_mut(&f) { e.1 = Some(at); }
                }
                2 => {
                    let had = m.contains_key(&f);
                    prop_assert_eq!(h.set_field_deadline(&f, None), had);
                    if let Some(e) = m.get_mut(&f) { e.1 = None; }
                }
                3 => {
                    prop_assert_eq!(h.remove(&f), m.remove(&f).is_some());
                }
                _ => {
                    now += t;
                    let gone = m.values().filter(|(_, d)| d.is_some_and(|d| d < now)).count();
                    m.retain(|_, (_, d)| d.is_none_or(|d| d >= now));
                    prop_assert_eq!(h.purge(now), gone);
                }
            }
            prop_assert_eq!(h.len(), m.len());
            for (f, (_, d)) in &m {
                prop_assert_eq!(h.field_deadline(f), Some(*d));
            }
            prop_assert_eq!(h.has_ttls(), m.values().any(|(_, d)| d.is_some()));
            let c = h.clone();
            for (f, (_, d)) in &m {
                prop_assert_eq!(c.field_deadline(f), Some(*d));
            }
        }
    }
}

#[test]
fn a_table_hash_gives_its_buckets_back_as_it_empties() {
    let l = Limits::default();
    let mut h = Hash::default();
    for i in 0..20_000 {
        h.set(l, format!("f{i}").as_bytes(), b"v");
    }
    let buckets = |h: &Hash| match h {
        Hash::Table(t) => t.dict.layout().buckets,
        Hash::Pack(_) => 0,
    };
    assert!(buckets(&h) >= 16_384, "{}", buckets(&h));
    for i in 0..19_990 {
        assert!(h.remove(format!("f{i}").as_bytes()));
    }
    // The shrink is progressive: the last deletes and a few more operations finish it.
    for i in 19_990..20_000 {
        assert_eq!(h.get(format!("f{i}").as_bytes()), Some(b"v".to_vec()));
        h.set(l, format!("f{i}").as_bytes(), b"w");
    }
    assert!(buckets(&h) <= 128, "{} buckets for 10 fields", buckets(&h));
    assert_eq!(h.len(), 10);
}
