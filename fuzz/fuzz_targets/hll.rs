//! `kvcore::hll` through the PF commands: arbitrary bytes stored as a string value, then
//! added to, counted, merged and decoded. Any reply is fine; a panic is not.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut db = kvcore::Db::new();
    let (head, elems) = data.split_at(data.len().min(64));
    let mut value = b"HYLL".to_vec();
    value.extend_from_slice(head);
    db.execute(&[b"SET", b"k", &value]);
    db.execute(&[b"PFADD", b"s", b"x", b"y"]);
    for e in elems.chunks(3) {
        db.execute(&[b"PFADD", b"k", e]);
    }
    db.execute(&[b"PFCOUNT", b"k"]);
    db.execute(&[b"PFCOUNT", b"k", b"s"]);
    db.execute(&[b"PFMERGE", b"s", b"k"]);
    db.execute(&[b"PFDEBUG", b"DECODE", b"k"]);
    db.execute(&[b"PFDEBUG", b"TODENSE", b"k"]);
});
