//! `kvcore::lzf::Compressor` on any bytes (what DUMP, a snapshot or a full sync may compress),
//! checked as `kvcore/tests/lzf_check` says.
#![no_main]

#[path = "../../kvcore/tests/lzf_check/mod.rs"]
mod lzf_check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lzf_check::check(data);
});
