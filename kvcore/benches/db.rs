//! GET and SET through `Db::dispatch` (the path a server takes), and dict-backed keyspace
//! lookups at 1M keys.

use kvcore::{Db, Session};

fn main() {
    divan::main();
}

const KEYS: usize = 1_000_000;

fn filled() -> Db {
    let mut db = Db::new();
    for i in 0..KEYS {
        db.set(format!("key:{i:07}").as_bytes(), &[b'v'; 64])
            .unwrap();
    }
    db
}

#[divan::bench(sample_count = 100, sample_size = 1000)]
fn get_hit_1m(bencher: divan::Bencher) {
    let mut db = filled();
    let mut s = Session {
        authenticated: true,
        ..Session::default()
    };
    let mut out = Vec::with_capacity(1 << 16);
    let keys: Vec<Vec<u8>> = (0..1024)
        .map(|i| format!("key:{:07}", i * 977 % KEYS).into_bytes())
        .collect();
    let mut i = 0;
    bencher.bench_local(|| {
        out.clear();
        i = (i + 1) & 1023;
        db.dispatch(&mut s, &[b"GET", &keys[i]], &mut out);
        divan::black_box(&out);
    });
}

#[divan::bench(sample_count = 100, sample_size = 1000)]
fn set_existing_1m(bencher: divan::Bencher) {
    let mut db = filled();
    let mut s = Session {
        authenticated: true,
        ..Session::default()
    };
    let mut out = Vec::with_capacity(1 << 16);
    let keys: Vec<Vec<u8>> = (0..1024)
        .map(|i| format!("key:{:07}", i * 977 % KEYS).into_bytes())
        .collect();
    let value = [b'w'; 64];
    let mut i = 0;
    bencher.bench_local(|| {
        out.clear();
        i = (i + 1) & 1023;
        db.dispatch(&mut s, &[b"SET", &keys[i], &value], &mut out);
        divan::black_box(&out);
    });
}

#[divan::bench(sample_count = 100, sample_size = 1000)]
fn set_new_keys(bencher: divan::Bencher) {
    let mut db = Db::new();
    let mut s = Session {
        authenticated: true,
        ..Session::default()
    };
    let mut out = Vec::with_capacity(1 << 16);
    let value = [b'w'; 64];
    let mut i = 0u64;
    let mut key = Vec::with_capacity(32);
    bencher.bench_local(|| {
        out.clear();
        i += 1;
        key.clear();
        key.extend_from_slice(b"key:");
        key.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
        db.dispatch(&mut s, &[b"SET", &key, &value], &mut out);
        divan::black_box(&out);
    });
}

/// GET of random keys among the 1M: each lookup misses the caches, so this measures the
/// memory touched per lookup (bucket, node, key bytes, value).
#[divan::bench(sample_count = 100, sample_size = 1000)]
fn get_random_1m(bencher: divan::Bencher) {
    let mut db = filled();
    let mut s = Session {
        authenticated: true,
        ..Session::default()
    };
    let mut out = Vec::with_capacity(1 << 16);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut key = *b"key:0000000";
    bencher.bench_local(|| {
        out.clear();
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut i = ((x >> 32) as usize * KEYS) >> 32;
        for d in key[4..].iter_mut().rev() {
            *d = b'0' + (i % 10) as u8;
            i /= 10;
        }
        db.dispatch(&mut s, &[b"GET", &key], &mut out);
        divan::black_box(&out);
    });
}
