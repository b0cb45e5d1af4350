//! The transactions family of the differential run: MULTI, EXEC, DISCARD, WATCH and UNWATCH
//! mixed into the other families' commands, so that queued commands, queue-time errors
//! (unknown commands, wrong arities the driver makes), nested MULTI, WATCH inside MULTI,
//! EXEC and DISCARD without MULTI, and WATCHed keys written by the sequence itself all meet.
//! (A second client's writes are the integration tests' part: one connection per server here.)

use super::families::{key, word, Cmd, Gen, Rng};

fn watch(r: &mut Rng) -> Cmd {
    let mut c = vec![word("WATCH"), key(r)];
    for _ in 0..r.below(3) {
        c.push(key(r));
    }
    c
}

pub static TRANSACTIONS: &[Gen] = &[
    |_| vec![word("MULTI")],
    |_| vec![word("MULTI")],
    |_| vec![word("EXEC")],
    |_| vec![word("EXEC")],
    |_| vec![word("DISCARD")],
    watch,
    |_| vec![word("UNWATCH")],
];
