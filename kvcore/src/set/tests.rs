use std::collections::HashSet;

use proptest::prelude::*;

use super::*;

fn member() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (-20i64..20).prop_map(|i| i.to_string().into_bytes()),
        1 => any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        3 => (0u8..12).prop_map(|i| vec![b'a' + i]),
        1 => (5usize..12).prop_map(|n| vec![b'x'; n]),
        1 => Just(b"007".to_vec()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn behaves_like_a_hashset(
        max_intset in 0usize..8,
        max_pack_entries in 0usize..8,
        max_pack_value in 0usize..8,
        ops in proptest::collection::vec((0u8..3, member()), 1..80),
    ) {
        let limits = Limits { max_intset, max_pack_entries, max_pack_value };
        let mut s: Option<Set> = None;
        let mut m: HashSet<Vec<u8>> = HashSet::new();
        for (op, v) in ops {
            match op {
                0 | 1 => {
                    let set = s.get_or_insert_with(|| Set::for_members(limits, &v, 1));
                    prop_assert_eq!(set.add(limits, &v), m.insert(v.clone()));
                }
                _ => {
                    if let Some(set) = &mut s {
                        prop_assert_eq!(set.remove(&v), m.remove(&v));
                    }
                }
            }
            let Some(set) = &s else { continue };
            prop_assert_eq!(set.len(), m.len());
            let got: HashSet<Vec<u8>> = set.to_vec().into_iter().collect();
            prop_assert_eq!(&got, &m);
            prop_assert_eq!(set.to_vec().len(), m.len(), "a member listed twice");
            for x in &m {
                prop_assert!(set.contains(x));
            }
            match set.encoding() {
                "intset" => {
                    prop_assert!(m.iter().all(|x| as_int(x).is_some()));
                    prop_assert!(m.len() <= max_intset.max(1));
                    let v = set.to_vec();
                    let ints: Vec<i64> = v.iter().map(|x| as_int(x).unwrap()).collect();
                    prop_assert!(ints.windows(2).all(|w| w[0] < w[1]), "intset order");
                }
                "listpack" => {
                    prop_assert!(m.len() <= max_pack_entries.max(1));
                }
                _ => {}
            }
            if !m.is_empty() {
                let r = set.random(12345).unwrap();
                prop_assert!(m.contains(&r));
            }
            let mut scanned = HashSet::new();
            let mut c = 0;
            loop {
                c = set.scan(c, 3, |x| { scanned.insert(x.to_vec()); });
                if c == 0 { break; }
            }
            prop_assert_eq!(&scanned, &m);
        }
    }
}

#[test]
fn encodings_and_conversions_as_redis() {
    let l = Limits::default();
    let mut s = Set::for_members(l, b"1", 1);
    for i in (0..512).rev() {
        s.add(l, i.to_string().as_bytes());
    }
    assert_eq!(s.encoding(), "intset");
    assert_eq!(
        s.to_vec()[..3],
        [b"0".to_vec(), b"1".to_vec(), b"2".to_vec()]
    );
    s.add(l, b"512");
    assert_eq!(s.encoding(), "hashtable");
    // An intset taking a string becomes a listpack while that fits, keeping the order.
    let mut s = Set::for_members(l, b"3", 1);
    s.add(l, b"3");
    s.add(l, b"1");
    s.add(l, b"x");
    assert_eq!(s.encoding(), "listpack");
    assert_eq!(
        s.to_vec(),
        vec![b"1".to_vec(), b"3".to_vec(), b"x".to_vec()]
    );
    let mut s = Set::for_members(l, b"a", 1);
    for i in 0..128 {
        s.add(l, format!("m{i}").as_bytes());
    }
    assert_eq!(s.encoding(), "listpack");
    s.add(l, b"one more");
    assert_eq!(s.encoding(), "hashtable");
    let mut s = Set::for_members(l, b"a", 1);
    s.add(l, &[b'v'; 65]);
    assert_eq!(s.encoding(), "hashtable");
    assert_eq!(Set::for_members(l, b"a", 129).encoding(), "hashtable");
    assert_eq!(Set::for_members(l, b"1", 129).encoding(), "intset");
    assert_eq!(Set::for_members(l, b"1", 513).encoding(), "hashtable");
}

#[test]
fn a_table_set_gives_its_buckets_back_as_it_empties() {
    let l = Limits::default();
    let mut s = Set::for_members(l, b"m0", 20_000);
    for i in 0..20_000 {
        s.add(l, format!("m{i}").as_bytes());
    }
    let buckets = |s: &Set| match s {
        Set::Table(t) => t.dict.layout().buckets,
        Set::Small(_) => 0,
    };
    assert!(buckets(&s) >= 16_384, "{}", buckets(&s));
    for i in 0..19_990 {
        assert!(s.remove(format!("m{i}").as_bytes()));
    }
    // The shrink is progressive: the last deletes and a few more operations finish it.
    for i in 19_990..20_000 {
        assert!(s.contains(format!("m{i}").as_bytes()));
        assert!(!s.add(l, format!("m{i}").as_bytes()));
    }
    assert!(buckets(&s) <= 128, "{} buckets for 10 members", buckets(&s));
    assert_eq!(s.len(), 10);
}
