//! List, set, hash and SORT commands with arguments decoded from the input: no panic, one
//! well-formed reply each, and each key's views agree after every command.
#![no_main]

#[path = "../../kvcore/tests/coll_ops/mod.rs"]
mod coll_ops;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    coll_ops::check_ops(data);
});
