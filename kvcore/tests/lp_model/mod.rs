//! Checks of `kvcore::listpack::Listpack` driven by arbitrary bytes (the `lp_bytes` fuzz
//! target and its corpus replay):
//! - the input itself as a blob from outside: `from_blob` refuses it or accepts it, and an
//!   accepted listpack reads the same entries walking forward, backward and by index;
//! - the input as operations (push at either end, insert, replace, delete) applied to a
//!   listpack and to a `VecDeque`, compared after every step, and the result's bytes accepted
//!   by `from_blob`.
//!
//! Both forms are checked: Redis's and the forward-only one (no backlens), and each converts
//! to the other with the same entries (to Redis's exact bytes).

#![allow(dead_code)]

use std::collections::VecDeque;

use kvcore::listpack::{ForwardListpack, Listpack};

fn strings<const B: bool>(lp: &Listpack<B>) -> Vec<Vec<u8>> {
    lp.iter().map(|e| e.to_vec()).collect()
}

/// Runs both checks on `data`.
pub fn check(data: &[u8]) {
    check_blob(data);
    check_ops(data);
}

/// `data` as a listpack blob of either form.
pub fn check_blob(data: &[u8]) {
    if let Some(lp) = <Listpack>::from_blob(data.into()) {
        let fwd = read_back::<true>(&lp);
        assert_eq!(strings(&lp.forward_only()), fwd);
    }
    if let Some(lp) = ForwardListpack::from_blob(data.into()) {
        let fwd = read_back::<false>(&lp);
        let redis = lp.to_redis();
        assert_eq!(strings(&redis), fwd);
        assert!(<Listpack>::from_blob(redis.as_bytes().into()).is_some());
    }
}

/// Reads an accepted blob forward, backward and by index, and returns its entries.
fn read_back<const B: bool>(lp: &Listpack<B>) -> Vec<Vec<u8>> {
    let fwd = strings(lp);
    assert_eq!(fwd.len(), lp.len());
    let mut back: Vec<Vec<u8>> = lp.iter().rev().map(|e| e.to_vec()).collect();
    back.reverse();
    assert_eq!(fwd, back);
    for (i, v) in fwd.iter().enumerate() {
        let p = lp.seek(i as i64).expect("every index seeks");
        assert_eq!(&lp.get(p).to_vec(), v);
    }
    // Re-encoding the same strings gives a listpack with the same entries.
    let again = Listpack::<B>::from_items(fwd.iter().map(Vec::as_slice));
    assert_eq!(strings(&again), fwd);
    fwd
}

/// A small value derived from the input: integers of every width and strings of a few sizes.
fn value(b: u8, i: usize) -> Vec<u8> {
    match b % 8 {
        0 => (i as i64 * 37 - 500).to_string().into_bytes(),
        1 => i64::MIN.wrapping_add(i as i64).to_string().into_bytes(),
        2 => ((i as i64) << (b as i64 % 60)).to_string().into_bytes(),
        3 => vec![b'a' + (i % 26) as u8; usize::from(b % 70)],
        4 => vec![b'z'; 4090 + usize::from(b % 10)],
        5 => format!("0{i}").into_bytes(),
        6 => Vec::new(),
        _ => vec![b; 1 + usize::from(b % 5)],
    }
}

/// `data` as operations, on both forms: the same entries, and the forward-only form converts
/// to exactly the bytes of Redis's.
pub fn check_ops(data: &[u8]) {
    let (redis, forward) = (ops::<true>(data), ops::<false>(data));
    assert_eq!(forward.to_redis().as_bytes(), redis.as_bytes());
    assert_eq!(redis.forward_only().as_bytes(), forward.as_bytes());
}

/// `data` as operations on one form, checked against a `VecDeque`; returns the listpack.
fn ops<const B: bool>(data: &[u8]) -> Listpack<B> {
    let mut lp = Listpack::<B>::new();
    let mut model: VecDeque<Vec<u8>> = VecDeque::new();
    for (i, pair) in data.chunks(2).enumerate() {
        let (op, arg) = (pair[0], pair.get(1).copied().unwrap_or(0));
        match op % 5 {
            0 => {
                let v = value(arg, i);
                lp.push_back(&v);
                model.push_back(v);
            }
            1 => {
                let v = value(arg, i);
                lp.push_front(&v);
                model.push_front(v);
            }
            2 => {
                let at = usize::from(arg) % (model.len() + 1);
                let v = value(arg.wrapping_mul(7), i);
                let p = lp.seek(at as i64).unwrap_or(lp.end());
                lp.insert_at(p, &[&v]);
                model.insert(at, v);
            }
            3 if !model.is_empty() => {
                let at = usize::from(arg) % model.len();
                let v = value(arg.wrapping_add(3), i);
                let p = lp.seek(at as i64).expect("index in range");
                lp.replace(p, &v);
                model[at] = v;
            }
            4 if !model.is_empty() => {
                let at = usize::from(arg) % model.len();
                let n = usize::from(arg % 4);
                lp.delete_range(at, n);
                for _ in 0..n.min(model.len() - at) {
                    model.remove(at);
                }
            }
            _ => {}
        }
        assert_eq!(lp.len(), model.len());
    }
    assert_eq!(strings(&lp), model.iter().cloned().collect::<Vec<_>>());
    let again = Listpack::<B>::from_blob(lp.as_bytes().into()).expect("our bytes are well formed");
    assert_eq!(strings(&again), strings(&lp));
    lp
}
