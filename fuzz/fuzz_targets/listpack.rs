//! Operations on `kvcore::zset::ZSet` (listpack and large encodings, conversions forced by
//! small limits) decoded from the input, checked against a `BTreeSet` + `HashMap` model.
#![no_main]

#[path = "../../kvcore/tests/zset_model/mod.rs"]
mod zset_model;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    zset_model::check_ops(data);
});
