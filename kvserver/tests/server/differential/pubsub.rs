//! The pub/sub family of the differential run, on the one connection the driver has:
//! SUBSCRIBE and PSUBSCRIBE put it in RESP2 subscribed mode, where the other families'
//! commands meet Redis's error and PING its other shape, until the UNSUBSCRIBEs leave it;
//! PUBLISH to a channel nobody listens to (inside MULTI too); PUBSUB
//! introspection, subcommand errors, and all of these queued in MULTI. One channel or pattern
//! per (un)subscribe, so that each command has one reply.

use super::families::{word, Gen, Rng};

fn channel(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["news", "ch", "sport", "n", ""]))
}

fn pattern(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["n*", "ch", "[ns]*", "s?ort", "x*"]))
}

pub static PUBSUB: &[Gen] = &[
    |r| vec![word("SUBSCRIBE"), channel(r)],
    |r| vec![word("UNSUBSCRIBE"), channel(r)],
    |r| vec![word("PSUBSCRIBE"), pattern(r)],
    |r| vec![word("PUNSUBSCRIBE"), pattern(r)],
    // To channels nobody here subscribes to: a message to oneself inside EXEC lands in the
    // middle of EXEC's array (Redis does the same), which would shift the driver's count of
    // replies; hearing one's own messages is the integration tests' part.
    |_| vec![word("PUBLISH"), word("quiet"), word("hello")],
    |_| vec![word("SPUBLISH"), word("quiet"), word("hi")],
    |r| vec![word("PUBSUB"), word("NUMSUB"), channel(r), channel(r)],
    |r| vec![word("PUBSUB"), word("SHARDNUMSUB"), channel(r)],
    |_| vec![word("PUBSUB"), word("NUMPAT")],
    |r| vec![word("PUBSUB"), word("CHANNELS"), pattern(r)],
    |_| vec![word("PUBSUB"), word("HELP")],
    |_| vec![word("PUBSUB"), word("NOPE")],
    |_| vec![word("PUBSUB"), word("NUMPAT"), word("x")],
];

/// Commands whose reply count depends on their arguments: the driver leaves their arity alone.
pub const ONE_REPLY_EACH: &[&[u8]] =
    &[b"SUBSCRIBE", b"UNSUBSCRIBE", b"PSUBSCRIBE", b"PUNSUBSCRIBE"];
