#[test]
fn probe() {
    let mut db = kvcore::Db::new();
    for c in ["ZADD z2 -0 m21", "OBJECT ENCODING z2", "ZSCORE z2 m21", "CONFIG GET zset-max-listpack-entries"] {
        let a: Vec<&[u8]> = c.split(' ').map(str::as_bytes).collect();
        let mut s = kvcore::Session::default();
        let mut out = Vec::new();
        db.dispatch(&mut s, &a, &mut out);
        eprintln!("{c} => {:?}", String::from_utf8_lossy(&out));
    }
}
