//! The transactions family of the differential run: MULTI, EXEC, DISCARD, WATCH and UNWATCH
//! mixed into the other families' commands, so that queued commands, queue-time errors
//! (unknown commands, wrong arities the driver makes), nested MULTI, WATCH inside MULTI,
//! EXEC and DISCARD without MULTI, and WATCHed keys written by the sequence itself all meet.
//! WAIT (no replicas) rides along. (A second client's writes are the integration tests' part:
//! one connection per server here.)

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
    // No replicas on either side: 0 at once, or after a 1 ms timeout, or an argument error
    // (never a replica asked for with timeout 0: that waits forever on both).
    |r| {
        let n = r.pick(&["0", "1", "-1", "x"]);
        let t = if n == "1" {
            r.pick(&["1", "-1", "1.5"])
        } else {
            r.pick(&["0", "1", "-1", "1.5"])
        };
        vec![word("WAIT"), word(n), word(t)]
    },
];
