//! Operations on a `kvcore::Db` (strings, keys, expiry with a manual clock, active expiry, the
//! typed API) decoded from the input, checked against a plain model after every step.
#![no_main]

#[path = "../../kvcore/tests/db_model/mod.rs"]
mod db_model;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    db_model::check_ops(data);
});
