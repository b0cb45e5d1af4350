//! Property tests of [`ZSet`] against a model (`BTreeSet` of `(score, member)` plus a
//! `HashMap`), run under both encodings and across conversions.

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;

use super::{Limits, ZSet};

/// A score with a total order in which `-0 == 0`, as Redis orders them.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ord64(f64);
impl Eq for Ord64 {}
impl PartialOrd for Ord64 {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ord64 {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        let n = |x: f64| if x == 0.0 { 0.0 } else { x };
        n(self.0).total_cmp(&n(o.0))
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8, f64),
    Remove(u8),
    RemoveRanks(u8, u8),
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-5i32..5).prop_map(f64::from),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(0.0),
        Just(1e300),
        Just(-1e300),
        Just(5e-324),
        Just(-2.5e-308),
        Just(0.1),
        Just(9_007_199_254_740_993.0),
        any::<i64>().prop_map(|i| i as f64),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), score()).prop_map(|(m, s)| Op::Insert(m, s)),
        3 => any::<u8>().prop_map(Op::Remove),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::RemoveRanks(a % 8, b % 8)),
    ]
}

fn member(m: u8) -> Vec<u8> {
    // A few long members push a listpack past zset-max-listpack-value.
    if m >= 250 {
        vec![b'L'; 70 + usize::from(m)]
    } else {
        format!("m{}", m % 90).into_bytes()
    }
}

fn run(limits: Limits, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut z = ZSet::new(limits, 0);
    let mut order: BTreeSet<(Ord64, Vec<u8>)> = BTreeSet::new();
    let mut map: HashMap<Vec<u8>, f64> = HashMap::new();
    for op in ops {
        match op {
            Op::Insert(m, s) => {
                let m = member(m);
                let old = z.insert(&m, s, limits);
                let want = map.insert(m.clone(), s);
                prop_assert_eq!(old.is_some(), want.is_some());
                if let Some(w) = want {
                    order.remove(&(Ord64(w), m.clone()));
                }
                order.insert((Ord64(s), m));
            }
            Op::Remove(m) => {
                let m = member(m);
                let got = z.remove(&m);
                let want = map.remove(&m);
                prop_assert_eq!(got.is_some(), want.is_some());
                if let Some(w) = want {
                    prop_assert!(got == Some(w));
                    order.remove(&(Ord64(w), m));
                }
            }
            Op::RemoveRanks(a, b) => {
                let (a, b) = (usize::from(a.min(b)), usize::from(a.max(b)));
                let victims: Vec<_> = order.iter().skip(a).take(b - a).cloned().collect();
                prop_assert_eq!(z.remove_ranks(a, b), victims.len());
                for v in victims {
                    map.remove(&v.1);
                    order.remove(&v);
                }
            }
        }
        prop_assert_eq!(z.len(), order.len());
    }
    // Encoding follows the limits.
    let max_len = map.keys().map(Vec::len).max().unwrap_or(0);
    if limits.max_entries == 0 || max_len > limits.max_value {
        prop_assert_eq!(z.encoding(), "skiplist");
    }
    // Scores, ranks and the full order.
    let all: Vec<(f64, Vec<u8>)> = order.iter().map(|(s, m)| (s.0, m.clone())).collect();
    for (r, (s, m)) in all.iter().enumerate() {
        prop_assert!(z.score(m) == Some(*s));
        prop_assert_eq!(z.rank(m).map(|x| x.0), Some(r));
    }
    let mut got = Vec::new();
    z.range(0, z.len(), false, |m, s| got.push((s, m.to_vec())));
    prop_assert_eq!(got.len(), all.len());
    for (g, w) in got.iter().zip(&all) {
        prop_assert!(g.0 == w.0 && g.1 == w.1);
    }
    let mut back = Vec::new();
    z.range(1, z.len(), true, |m, _| back.push(m.to_vec()));
    let want_back: Vec<Vec<u8>> = all.iter().skip(1).rev().map(|x| x.1.clone()).collect();
    prop_assert_eq!(back, want_back);
    for bound in [f64::NEG_INFINITY, -1.0, 0.0, 2.0, f64::INFINITY] {
        let want = all.iter().filter(|x| x.0 < bound).count();
        prop_assert_eq!(z.rank_by(|s, _| s < bound), want);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn listpack_matches_model(ops in prop::collection::vec(op(), 1..400)) {
        run(Limits { max_entries: 1 << 15, max_value: 1 << 20 }, ops)?;
    }

    #[test]
    fn large_encoding_matches_model(ops in prop::collection::vec(op(), 1..400)) {
        run(Limits { max_entries: 0, max_value: 64 }, ops)?;
    }

    #[test]
    fn conversions_match_model(ops in prop::collection::vec(op(), 1..400)) {
        run(Limits { max_entries: 16, max_value: 64 }, ops)?;
    }
}

#[test]
fn the_member_table_grows_and_shrinks_progressively() {
    let mut b = super::Big::default();
    let m = |i: usize| format!("member:{i}");
    let mut rehashing = 0;
    for i in 0..20_000 {
        assert_eq!(b.upsert(m(i).as_bytes(), i as f64), None);
        rehashing += usize::from(b.map.is_rehashing());
    }
    // Each doubling is spread over many inserts, not done inside one.
    assert!(
        rehashing > 100,
        "{rehashing} inserts saw a rehash under way"
    );
    assert!(b.map.layout().buckets >= 16_384);
    for i in 0..19_990 {
        assert_eq!(b.remove(m(i).as_bytes()), Some(i as f64));
    }
    for i in 19_990..20_000 {
        assert_eq!(b.score(m(i).as_bytes()), Some(i as f64));
        assert_eq!(b.upsert(m(i).as_bytes(), 1.0), Some(i as f64));
    }
    assert!(b.map.layout().buckets <= 128, "{:?}", b.map.layout());
    assert_eq!((b.map.len(), b.tree.len()), (10, 10));
}
