//! Replies written by the writer, in RESP2 and RESP3, parse back as
//! expected; `skip_reply` agrees on their length.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kvcore::resp::check_writer_roundtrip(data);
});
