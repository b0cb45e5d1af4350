//! Any bytes, as one connection's input: the parser never panics, parses
//! the same split at any point, and re-encoded commands parse back equal.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kvcore::resp::check_roundtrip(data);
});
