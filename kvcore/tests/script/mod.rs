//! Shared by the command tests: run a command line through `Db::dispatch` and get the raw
//! reply, on a store with a manual clock.

#![allow(dead_code)]

use kvcore::{Clock, Db, Session};

/// Runs a command given as space-separated words (no quoting) and returns the raw reply.
pub fn run(db: &mut Db, s: &mut Session, line: &str) -> String {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    let mut out = Vec::new();
    db.dispatch(s, &args, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A store on a manual clock and a session.
pub fn setup() -> (Db, Session) {
    let mut db = Db::new();
    db.set_clock(Clock::Manual(1_700_000_000_000));
    (db, Session::default())
}
