//! Embedding kvcore in a program: typed calls, any command by its arguments, expiry with a
//! controllable clock.
//!
//! Run: `cargo run -p kvexamples --bin embedded`

use kvcore::{Clock, Db, Reply, SetOptions, Ttl};

fn main() {
    let mut db = Db::new();

    // Typed API.
    db.set(b"user:1:name", b"Ada").expect("a string key");
    db.incr_by(b"user:1:visits", 1).expect("an integer");
    let name = db.get(b"user:1:name").expect("a string key");
    println!(
        "name = {}",
        String::from_utf8_lossy(&name.unwrap_or_default())
    );

    // Any command, by its arguments, with the reply decoded.
    let reply = db.execute(&[b"MGET", b"user:1:name", b"user:1:visits", b"nokey"]);
    println!("MGET -> {reply:?}");
    assert!(matches!(reply, Reply::Array(ref v) if v.len() == 3));

    // Expiry, with a clock the program controls.
    db.set_clock(Clock::Manual(1_000_000));
    let opts = SetOptions {
        ttl: Ttl::At(1_000_000 + 5_000),
        ..SetOptions::default()
    };
    db.set_with(b"session", b"token", opts)
        .expect("a string key");
    println!("TTL -> {:?}", db.execute(&[b"TTL", b"session"]));
    db.clock_mut().advance(6_000);
    db.refresh_clock();
    println!(
        "after 6 s: GET session -> {:?}",
        db.execute(&[b"GET", b"session"])
    );
    assert_eq!(db.execute(&[b"GET", b"session"]), Reply::Null);
}
