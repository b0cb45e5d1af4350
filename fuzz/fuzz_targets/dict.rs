//! Operations on `kvcore::dict::Dict` (inserts, removals, growth, shrinks, progressive rehash,
//! SCAN across all of them, random draws) decoded from the input, checked against a `HashMap`
//! and the per-operation rehash bounds after every step.
#![no_main]

#[path = "../../kvcore/tests/dict_model/mod.rs"]
mod dict_model;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    dict_model::check_ops(data);
});
