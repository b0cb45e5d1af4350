//! HyperLogLog through `Db::dispatch`: PFADD of new elements to a sparse and to a dense HLL,
//! PFCOUNT of a dense HLL with its cache invalid (the full estimate) and valid, and PFCOUNT of
//! the union of two dense HLLs.

use kvcore::{Db, Session};

fn main() {
    divan::main();
}

fn session() -> Session {
    Session {
        authenticated: true,
        ..Session::default()
    }
}

/// `h` with `n` elements added one PFADD each.
fn with_elements(key: &[u8], n: usize) -> Db {
    let mut db = Db::new();
    for i in 0..n {
        db.execute(&[b"PFADD", key, format!("e{i}").as_bytes()]);
    }
    db
}

#[divan::bench(args = [100, 20_000])]
fn pfadd(bencher: divan::Bencher, n: usize) {
    let mut db = with_elements(b"h", n);
    let mut s = session();
    let mut out = Vec::new();
    let mut i = 0u64;
    bencher.bench_local(|| {
        i += 1;
        out.clear();
        // Sparse stays sparse: the element count grows little over a run.
        db.dispatch(
            &mut s,
            &[b"PFADD", b"h", format!("x{i}").as_bytes()],
            &mut out,
        );
    });
}

#[divan::bench]
fn pfcount_dense_uncached(bencher: divan::Bencher) {
    let mut db = with_elements(b"h", 20_000);
    let mut s = session();
    let mut out = Vec::new();
    bencher.bench_local(|| {
        out.clear();
        // Setting the top bit of the cache byte keeps the estimate from being reused.
        db.dispatch(&mut s, &[b"SETRANGE", b"h", b"15", b"\x80"], &mut out);
        db.dispatch(&mut s, &[b"PFCOUNT", b"h"], &mut out);
    });
}

#[divan::bench]
fn pfcount_cached(bencher: divan::Bencher) {
    let mut db = with_elements(b"h", 20_000);
    let mut s = session();
    let mut out = Vec::new();
    bencher.bench_local(|| {
        out.clear();
        db.dispatch(&mut s, &[b"PFCOUNT", b"h"], &mut out);
    });
}

#[divan::bench]
fn pfcount_union_of_two_dense(bencher: divan::Bencher) {
    let mut db = with_elements(b"a", 20_000);
    for i in 0..20_000 {
        db.execute(&[b"PFADD", b"b", format!("f{i}").as_bytes()]);
    }
    let mut s = session();
    let mut out = Vec::new();
    bencher.bench_local(|| {
        out.clear();
        db.dispatch(&mut s, &[b"PFCOUNT", b"a", b"b"], &mut out);
    });
}
