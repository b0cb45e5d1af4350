//! Any bytes, as one connection's input: the parser never panics, allocates no more than the
//! bytes it has seen plus a constant, parses the same split at any point, and re-encoded
//! commands parse back equal.
#![no_main]

#[path = "../../kvcore/tests/parse_alloc/mod.rs"]
mod parse_alloc;

#[global_allocator]
static ALLOC: parse_alloc::Counting = parse_alloc::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    parse_alloc::check_parse_allocation(data);
    kvcore::resp::check_roundtrip(data);
});
