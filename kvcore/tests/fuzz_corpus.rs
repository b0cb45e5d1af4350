//! Replays every fuzz target's corpus (`fuzz/corpus/<target>/`) and saved crashes
//! (`fuzz/regressions/<target>/`) through the same checks the fuzz targets run, so a plain
//! `cargo test` on stable guards everything the fuzzer ever found.

mod coll_ops;
mod db_model;
mod dict_model;
mod lp_model;
mod lzf_check;
mod parse_alloc;
mod zset_model;

#[global_allocator]
static ALLOC: parse_alloc::Counting = parse_alloc::Counting;

use std::fs;
use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `check` on every corpus and regression file of `target`; at least `min` corpus files
/// must exist (the seed corpus is part of the repository).
fn replay(target: &str, min: usize, check: fn(&[u8])) {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let corpus = files(&fuzz.join("corpus").join(target));
    assert!(
        corpus.len() >= min,
        "seed corpus of {target} missing under {}",
        fuzz.display()
    );
    for path in corpus
        .iter()
        .chain(&files(&fuzz.join("regressions").join(target)))
    {
        let bytes = fs::read(path).unwrap();
        if let Err(e) = std::panic::catch_unwind(|| check(&bytes)) {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{} fails the {target} checks: {why}", path.display());
        }
    }
}

#[test]
fn resp_parse_corpus_holds_the_parser_invariants() {
    replay("resp_parse", 10, |bytes| {
        parse_alloc::check_parse_allocation(bytes);
        kvcore::resp::check_roundtrip(bytes);
    });
}

#[test]
fn resp_reply_corpus_holds_the_writer_invariants() {
    replay("resp_reply", 5, kvcore::resp::check_writer_roundtrip);
}

#[test]
fn db_ops_corpus_agrees_with_the_model() {
    replay("db_ops", 5, db_model::check_ops);
}

/// Announced lengths and counts never turn into allocations.
#[test]
fn parser_allocation_is_bounded_by_the_input() {
    for input in [
        &b"*1048576\r\n$3\r\nSET\r\n"[..],
        b"*1\r\n$536870912\r\nab",
        b"*2147483647\r\n",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000000\r\nxyz",
    ] {
        parse_alloc::check_parse_allocation(input);
    }
    parse_alloc::check_parse_allocation(&vec![b'a'; 1 << 20]);
    let mut many = b"*100000\r\n".to_vec();
    for _ in 0..100_000 {
        many.extend_from_slice(b"$1\r\nx\r\n");
    }
    parse_alloc::check_parse_allocation(&many);
}

/// `n` seeded random inputs of up to `max_len` bytes, so `cargo test` explores a little on its
/// own.
fn random_inputs(seed: u64, n: usize, max_len: u64, check: fn(&[u8])) {
    let mut x: u64 = seed;
    for _ in 0..n {
        let len = (x % max_len) as usize;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        check(&data);
    }
}

#[test]
fn db_ops_random_inputs_agree_with_the_model() {
    random_inputs(0x2545_f491_4f6c_dd1d, 1500, 600, db_model::check_ops);
}

#[test]
fn dict_corpus_agrees_with_the_model() {
    replay("dict", 5, dict_model::check_ops);
}

#[test]
fn dict_random_inputs_agree_with_the_model() {
    random_inputs(0x9e37_79b9_7f4a_7c15, 150, 600, dict_model::check_ops);
}

#[test]
fn listpack_corpus_agrees_with_the_model() {
    replay("listpack", 5, zset_model::check_ops);
}

#[test]
fn listpack_random_inputs_agree_with_the_model() {
    random_inputs(0xd1b5_4a32_d192_ed03, 400, 800, zset_model::check_ops);
}

#[test]
fn lp_bytes_corpus_agrees_with_the_model() {
    replay("lp_bytes", 5, lp_model::check);
}

#[test]
fn lp_bytes_random_inputs_agree_with_the_model() {
    random_inputs(0x6c70_6279_7465_7321, 400, 600, lp_model::check);
}

#[test]
fn coll_ops_corpus_keeps_the_views_consistent() {
    replay("coll_ops", 3, coll_ops::check_ops);
}

#[test]
fn coll_ops_random_inputs_keep_the_views_consistent() {
    random_inputs(0x636f_6c6c_6f70_7321, 300, 600, coll_ops::check_ops);
}

#[test]
fn lzf_corpus_compresses_within_its_limits_and_round_trips() {
    replay("lzf", 6, lzf_check::check);
}
