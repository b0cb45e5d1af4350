//! `kvcore::listpack`: arbitrary bytes as a blob from outside (refused or read consistently)
//! and as operations checked against a `VecDeque`.
#![no_main]

#[path = "../../kvcore/tests/lp_model/mod.rs"]
mod lp_model;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lp_model::check(data);
});
