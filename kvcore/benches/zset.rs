//! Sorted sets and geo through `Db::dispatch` at 1M members: ZADD of random members, ZRANK of
//! the last member, GEOADD of random points and GEOSEARCH BYRADIUS 5 km at random points.

use kvcore::{Db, Session};

fn main() {
    divan::main();
}

const N: u64 = 1_000_000;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn session() -> Session {
    Session {
        authenticated: true,
        ..Session::default()
    }
}

/// A 1M-member set `bench:z` with random integer scores.
fn zset_1m() -> Db {
    let mut db = Db::new();
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut pairs: Vec<(f64, Vec<u8>)> = Vec::with_capacity(10_000);
    for i in 0..N {
        pairs.push(((r.next() % N) as f64, format!("m:{i}").into_bytes()));
        if pairs.len() == 10_000 {
            let refs: Vec<(f64, &[u8])> = pairs.iter().map(|(s, m)| (*s, &m[..])).collect();
            db.zadd(b"bench:z", &refs).unwrap();
            pairs.clear();
        }
    }
    db
}

/// Random points over the whole storable area.
fn point(r: &mut Rng) -> (String, String) {
    let lon = (r.next() % 360_000_000) as f64 / 1e6 - 180.0;
    let lat = (r.next() % 170_000_000) as f64 / 1e6 - 85.0;
    (format!("{lon:.6}"), format!("{lat:.6}"))
}

/// A 1M-point geo set `bench:geo`.
fn geo_1m() -> Db {
    let mut db = Db::new();
    let mut r = Rng(0x1234_5678);
    let mut pts: Vec<(f64, f64, Vec<u8>)> = Vec::with_capacity(10_000);
    for i in 0..N {
        let lon = (r.next() % 360_000_000) as f64 / 1e6 - 180.0;
        let lat = (r.next() % 170_000_000) as f64 / 1e6 - 85.0;
        pts.push((lon, lat, format!("p:{i}").into_bytes()));
        if pts.len() == 10_000 {
            let refs: Vec<(f64, f64, &[u8])> =
                pts.iter().map(|(x, y, m)| (*x, *y, &m[..])).collect();
            db.geoadd(b"bench:geo", &refs).unwrap();
            pts.clear();
        }
    }
    db
}

/// `ZADD bench:z <rand> m:<rand>` into a 1M-member set (new members and score updates).
#[divan::bench(sample_count = 100, sample_size = 100)]
fn zadd_random_1m(bencher: divan::Bencher) {
    let mut db = zset_1m();
    let mut s = session();
    let mut out = Vec::with_capacity(1 << 16);
    let mut r = Rng(42);
    let mut ibuf = itoa::Buffer::new();
    bencher.bench_local(|| {
        out.clear();
        let score = ibuf.format(r.next() % N).to_owned();
        let member = format!("m:{}", r.next() % (2 * N));
        db.dispatch(
            &mut s,
            &[b"ZADD", b"bench:z", score.as_bytes(), member.as_bytes()],
            &mut out,
        );
        divan::black_box(&out);
    });
}

/// `ZRANK` of the member with the highest rank in a 1M-member set.
#[divan::bench(sample_count = 100, sample_size = 100)]
fn zrank_last_1m(bencher: divan::Bencher) {
    let mut db = zset_1m();
    let last = db
        .zrange_by_rank(b"bench:z", N as usize - 1, N as usize)
        .unwrap()[0]
        .0
        .clone();
    let mut s = session();
    let mut out = Vec::with_capacity(1 << 16);
    bencher.bench_local(|| {
        out.clear();
        db.dispatch(&mut s, &[b"ZRANK", b"bench:z", &last], &mut out);
        divan::black_box(&out);
    });
}

/// `ZRANK` of a random member of a 1M-member set (cold paths: the realistic case).
#[divan::bench(sample_count = 100, sample_size = 100)]
fn zrank_random_1m(bencher: divan::Bencher) {
    let mut db = zset_1m();
    let mut s = session();
    let mut out = Vec::with_capacity(1 << 16);
    let members: Vec<Vec<u8>> = (0..4096)
        .map(|i| format!("m:{}", i * 241).into_bytes())
        .collect();
    let mut i = 0;
    bencher.bench_local(|| {
        out.clear();
        i = (i + 1) % members.len();
        db.dispatch(&mut s, &[b"ZRANK", b"bench:z", &members[i]], &mut out);
        divan::black_box(&out);
    });
}

/// `ZRANK` of random members of a 100k-member set whose scores are all 0 (the ordering-by-
/// member use, as in autocomplete indexes): every search ties on the score.
#[divan::bench(sample_count = 100, sample_size = 100)]
fn zrank_tied_100k(bencher: divan::Bencher) {
    let mut db = Db::new();
    let members: Vec<Vec<u8>> = (0..100_000)
        .map(|i| format!("m:{i}").into_bytes())
        .collect();
    for chunk in members.chunks(10_000) {
        let refs: Vec<(f64, &[u8])> = chunk.iter().map(|m| (0.0, &m[..])).collect();
        db.zadd(b"bench:t", &refs).unwrap();
    }
    let mut s = session();
    let mut out = Vec::with_capacity(1 << 16);
    let mut i = 0;
    bencher.bench_local(|| {
        out.clear();
        i = (i + 241) % members.len();
        db.dispatch(&mut s, &[b"ZRANK", b"bench:t", &members[i]], &mut out);
        divan::black_box(&out);
    });
}

/// `GEOADD bench:geo lon lat p:<rand>` of random points into a 1M-point set.
#[divan::bench(sample_count = 100, sample_size = 100)]
fn geoadd_random_1m(bencher: divan::Bencher) {
    let mut db = geo_1m();
    let mut s = session();
    let mut out = Vec::with_capacity(1 << 16);
    let mut r = Rng(7);
    bencher.bench_local(|| {
        out.clear();
        let (lon, lat) = point(&mut r);
        let member = format!("p:{}", r.next() % (2 * N));
        db.dispatch(
            &mut s,
            &[
                b"GEOADD",
                b"bench:geo",
                lon.as_bytes(),
                lat.as_bytes(),
                member.as_bytes(),
            ],
            &mut out,
        );
        divan::black_box(&out);
    });
}

/// `GEOSEARCH bench:geo FROMLONLAT <rand> BYRADIUS 5 km` on a 1M-point set.
#[divan::bench(sample_count = 100, sample_size = 100)]
fn geosearch_5km_1m(bencher: divan::Bencher) {
    let mut db = geo_1m();
    let mut s = session();
    let mut out = Vec::with_capacity(1 << 16);
    let mut r = Rng(99);
    bencher.bench_local(|| {
        out.clear();
        let (lon, lat) = point(&mut r);
        db.dispatch(
            &mut s,
            &[
                b"GEOSEARCH",
                b"bench:geo",
                b"FROMLONLAT",
                lon.as_bytes(),
                lat.as_bytes(),
                b"BYRADIUS",
                b"5",
                b"km",
            ],
            &mut out,
        );
        divan::black_box(&out);
    });
}
