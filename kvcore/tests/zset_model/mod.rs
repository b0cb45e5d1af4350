//! A sequence of operations on a [`kvcore::zset::ZSet`] (listpack and large encodings, with
//! conversions forced by small limits), decoded from arbitrary bytes and checked step by step
//! against a model: a `BTreeSet` of `(score, member)` plus a `HashMap` of scores, as the
//! property test in `kvcore/src/zset/tests.rs` does.
//!
//! Shared by the `listpack` fuzz target (`fuzz/fuzz_targets/listpack.rs` includes this file)
//! and by `cargo test` (`kvcore/tests/fuzz_corpus.rs` replays the corpus and random inputs).
//!
//! Checked after every operation: results of insert (ZADD), increment (ZINCRBY), remove,
//! remove by ranks, score, rank, rank ranges both ways, score ranges and lex ranges (through
//! [`ScoreRange::ranks`] and [`LexRange::ranks`]), `at`; the length; the encoding (a listpack
//! always fits the limits, a set past them is never a listpack); and the whole order.

use std::collections::{BTreeSet, HashMap};

use kvcore::zset::bounds::{LexBound, LexRange, ScoreRange};
use kvcore::zset::{Limits, ZSet};

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

/// Reads the fuzz input from the front; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn score(&mut self) -> f64 {
        const SCORES: [f64; 12] = [
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.0,
            1e300,
            -1e300,
            5e-324,
            -2.5e-308,
            0.1,
            9_007_199_254_740_993.0,
            1.5,
            -1.5,
        ];
        match self.byte() % 4 {
            0 | 1 => f64::from(self.byte() as i8 % 6),
            2 => SCORES[usize::from(self.byte()) % SCORES.len()],
            _ => {
                let mut b = [0u8; 8];
                b.iter_mut().for_each(|x| *x = self.byte());
                let f = f64::from_le_bytes(b);
                if f.is_nan() {
                    2.0
                } else {
                    f
                }
            }
        }
    }

    fn member(&mut self) -> Vec<u8> {
        let b = self.byte();
        match b {
            // Long members push a listpack past its value limit.
            0..=7 => vec![b'L'; 40 + usize::from(b) * 8],
            8..=15 => {
                let n = usize::from(self.byte() % 10).min(self.0.len());
                let (v, rest) = self.0.split_at(n);
                self.0 = rest;
                v.to_vec()
            }
            _ => format!("m{}", b % 48).into_bytes(),
        }
    }

    fn rank(&mut self, len: usize) -> usize {
        usize::from(self.byte()) % (len + 3)
    }
}

struct Model {
    order: BTreeSet<(Ord64, Vec<u8>)>,
    map: HashMap<Vec<u8>, f64>,
}

impl Model {
    fn insert(&mut self, m: &[u8], s: f64) -> Option<f64> {
        let old = self.map.insert(m.to_vec(), s);
        if let Some(o) = old {
            self.order.remove(&(Ord64(o), m.to_vec()));
        }
        self.order.insert((Ord64(s), m.to_vec()));
        old
    }

    fn remove(&mut self, m: &[u8]) -> Option<f64> {
        let old = self.map.remove(m)?;
        self.order.remove(&(Ord64(old), m.to_vec()));
        Some(old)
    }

    /// A listpack stores `-0` as the integer 0, as Redis's does: it reads back as `0`.
    fn listpack_zeros(&mut self) {
        let negs: Vec<Vec<u8>> = self
            .map
            .iter()
            .filter(|(_, s)| same(**s, -0.0))
            .map(|(m, _)| m.clone())
            .collect();
        for m in negs {
            self.insert(&m, 0.0);
        }
    }

    fn all(&self) -> Vec<(f64, Vec<u8>)> {
        self.order.iter().map(|(s, m)| (s.0, m.clone())).collect()
    }
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
}

fn lex_bound(input: &mut Input<'_>) -> LexBound {
    match input.byte() % 6 {
        0 => LexBound::NegInf,
        1 => LexBound::PosInf,
        2 | 3 => LexBound::Incl(input.member()),
        _ => LexBound::Excl(input.member()),
    }
}

fn range(z: &ZSet, start: usize, end: usize, rev: bool) -> Vec<(f64, Vec<u8>)> {
    let mut got = Vec::new();
    z.range(start, end, rev, |m, s| got.push((s, m.to_vec())));
    got
}

fn assert_same(got: &[(f64, Vec<u8>)], want: &[(f64, Vec<u8>)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (g, w) in got.iter().zip(want) {
        assert!(
            same(g.0, w.0) && g.1 == w.1,
            "{what}: got {g:?}, want {w:?}"
        );
    }
}

/// Checks everything the set can answer against the model. O(n log n).
fn check_all(z: &ZSet, model: &Model, limits: Limits) {
    assert_eq!(z.len(), model.order.len(), "len");
    let max_len = model.map.keys().map(Vec::len).max().unwrap_or(0);
    match z.encoding() {
        "listpack" => assert!(
            limits.fits(z.len(), max_len),
            "listpack past the limits {limits:?}: {} members, longest {max_len}",
            z.len()
        ),
        e => assert_eq!(e, "skiplist"),
    }
    let all = model.all();
    assert_same(&range(z, 0, usize::MAX, false), &all, "full range");
    for (r, (s, m)) in all.iter().enumerate() {
        assert!(z.score(m).is_some_and(|x| same(x, *s)), "score of {m:?}");
        let (rank, score) = z.rank(m).expect("rank of a member");
        assert!(rank == r && same(score, *s), "rank of {m:?}");
    }
    let _ = z.heap_bytes();
}

/// Runs the operations `data` decodes to against a fresh set and the model, panicking at the
/// first difference. At most 300 operations.
pub fn check_ops(data: &[u8]) {
    let mut input = Input(data);
    let limits = match input.byte() % 4 {
        0 => Limits {
            max_entries: 128,
            max_value: 64,
        },
        1 => Limits {
            max_entries: 0,
            max_value: 64,
        },
        _ => Limits {
            max_entries: usize::from(input.byte() % 20),
            max_value: usize::from(input.byte() % 80),
        },
    };
    let mut z = ZSet::new(limits, 0);
    let mut model = Model {
        order: BTreeSet::new(),
        map: HashMap::new(),
    };
    for n in 0..300 {
        if input.0.is_empty() {
            break;
        }
        let len = model.order.len();
        match input.byte() % 14 {
            0..=3 => {
                let (m, s) = (input.member(), input.score());
                if z.is_empty() {
                    z = ZSet::new(limits, m.len());
                }
                let got = z.insert(&m, s, limits);
                let want = model.insert(&m, s);
                assert!(
                    got.map(f64::to_bits) == want.map(f64::to_bits),
                    "insert {m:?} {s}: got {got:?}, want {want:?}"
                );
            }
            4 => {
                // ZINCRBY: the new score is old + by; a NaN sum is refused.
                let (m, by) = (input.member(), input.score());
                let new = model.map.get(&m).map_or(by, |&o| o + by);
                if !new.is_nan() {
                    if z.is_empty() {
                        z = ZSet::new(limits, m.len());
                    }
                    let old = z.score(&m);
                    assert!(old.map(f64::to_bits) == model.map.get(&m).map(|x| x.to_bits()));
                    z.insert(&m, new, limits);
                    model.insert(&m, new);
                }
            }
            5 | 6 => {
                let m = input.member();
                let got = z.remove(&m);
                let want = model.remove(&m);
                assert!(
                    got.map(f64::to_bits) == want.map(f64::to_bits),
                    "remove {m:?}: got {got:?}, want {want:?}"
                );
            }
            7 => {
                let (a, b) = (input.rank(len), input.rank(len));
                let (a, b) = (a.min(b), a.max(b));
                let victims: Vec<_> = model.order.iter().skip(a).take(b - a).cloned().collect();
                assert_eq!(z.remove_ranks(a, b), victims.len(), "remove_ranks {a} {b}");
                for (_, m) in victims {
                    model.remove(&m);
                }
            }
            8 => {
                let (a, b, rev) = (input.rank(len), input.rank(len), input.byte() % 2 == 0);
                let all = model.all();
                let mut want: Vec<_> = all
                    .iter()
                    .skip(a)
                    .take(b.saturating_sub(a))
                    .cloned()
                    .collect();
                if rev {
                    want.reverse();
                }
                assert_same(&range(&z, a, b, rev), &want, "range by rank");
            }
            9 => {
                let r = input.rank(len);
                let got = z.at(r);
                let want = model.all().get(r).map(|(s, m)| (m.clone(), *s));
                assert!(
                    got.as_ref().map(|(m, s)| (m, s.to_bits()))
                        == want.as_ref().map(|(m, s)| (m, s.to_bits())),
                    "at {r}: got {got:?}, want {want:?}"
                );
            }
            10 | 11 => {
                let range_ = ScoreRange {
                    min: input.score(),
                    minex: input.byte() % 2 == 0,
                    max: input.score(),
                    maxex: input.byte() % 2 == 0,
                };
                let (start, end) = range_.ranks(&z);
                let want: Vec<usize> = model
                    .order
                    .iter()
                    .enumerate()
                    .filter(|(_, (s, _))| range_.above_min(s.0) && range_.below_max(s.0))
                    .map(|(i, _)| i)
                    .collect();
                if want.is_empty() {
                    assert!(
                        start >= end,
                        "score range {range_:?}: {start}..{end}, want none"
                    );
                } else {
                    assert_eq!(
                        (start, end),
                        (want[0], want[want.len() - 1] + 1),
                        "score range {range_:?}"
                    );
                }
                assert!(
                    range_.is_empty() <= want.is_empty(),
                    "{range_:?} called empty"
                );
            }
            12 => {
                // Lex ranges are specified only when every score is equal.
                let range_ = LexRange {
                    min: lex_bound(&mut input),
                    max: lex_bound(&mut input),
                };
                let equal = model.order.first().map(|x| x.0) == model.order.last().map(|x| x.0);
                if equal {
                    let (start, end) = range_.ranks(&z);
                    let want: Vec<usize> = model
                        .order
                        .iter()
                        .enumerate()
                        .filter(|(_, (_, m))| range_.above_min(m) && range_.below_max(m))
                        .map(|(i, _)| i)
                        .collect();
                    if want.is_empty() {
                        assert!(start >= end, "lex range {range_:?}: {start}..{end}");
                    } else {
                        assert_eq!(
                            (start, end),
                            (want[0], want[want.len() - 1] + 1),
                            "lex range {range_:?}"
                        );
                    }
                    assert!(
                        range_.is_empty() <= want.is_empty(),
                        "{range_:?} called empty"
                    );
                }
            }
            _ => {
                // Rebuild from the sorted items (as a load or a store command does).
                let all = model.all();
                let items: Vec<(&[u8], f64)> =
                    all.iter().map(|(s, m)| (m.as_slice(), *s)).collect();
                z = ZSet::from_sorted(limits, &items);
            }
        }
        if z.encoding() == "listpack" {
            model.listpack_zeros();
        }
        if n % 8 == 0 || model.order.len() < 24 {
            check_all(&z, &model, limits);
        } else {
            assert_eq!(z.len(), model.order.len(), "len");
        }
    }
    check_all(&z, &model, limits);
}
