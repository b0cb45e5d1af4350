//! Commands that need more than one store: transactions (MULTI, EXEC, DISCARD, WATCH,
//! UNWATCH), pub/sub (SUBSCRIBE ... PUBLISH, PUBSUB), WAIT, MONITOR and replication (REPLICAOF, REPLCONF,
//! PSYNC, SYNC, ROLE). A server answers them itself before
//! it dispatches to a store; their rows are here so that lookup, arity checks and COMMAND know
//! them. A store called directly (an embedded `Db`) has no other clients to publish to and no
//! connection to queue on, and says so.

use super::{cmd, flags::*, CommandSpec, Ctx};

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "exec",
        1,
        NOSCRIPT | LOADING | STALE | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "watch",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | CONN,
        1,
        -1,
        1,
        server_only
    ),
    cmd!(
        "unwatch",
        1,
        NOSCRIPT | LOADING | STALE | FAST | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "subscribe",
        -2,
        NOSCRIPT | LOADING | STALE | SENTINEL | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "unsubscribe",
        -1,
        NOSCRIPT | LOADING | STALE | SENTINEL | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "psubscribe",
        -2,
        NOSCRIPT | LOADING | STALE | SENTINEL | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "punsubscribe",
        -1,
        NOSCRIPT | LOADING | STALE | SENTINEL | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "ssubscribe",
        -2,
        NOSCRIPT | LOADING | STALE | CONN,
        1,
        -1,
        1,
        server_only
    ),
    cmd!(
        "sunsubscribe",
        -1,
        NOSCRIPT | LOADING | STALE | CONN,
        1,
        -1,
        1,
        server_only
    ),
    cmd!(
        "publish",
        3,
        LOADING | STALE | FAST | SENTINEL | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "spublish",
        3,
        LOADING | STALE | FAST | CONN,
        1,
        1,
        1,
        server_only
    ),
    cmd!("pubsub", -2, CONN, 0, 0, 0, server_only),
    cmd!("wait", 3, BLOCKING | CONN, 0, 0, 0, server_only),
    cmd!(
        "monitor",
        1,
        ADMIN | NOSCRIPT | LOADING | STALE | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "replicaof",
        3,
        ADMIN | NOSCRIPT | STALE | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "slaveof",
        3,
        ADMIN | NOSCRIPT | STALE | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "replconf",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "psync",
        -3,
        ADMIN | NOSCRIPT | NO_MULTI | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "sync",
        1,
        ADMIN | NOSCRIPT | NO_MULTI | CONN,
        0,
        0,
        0,
        server_only
    ),
    cmd!(
        "role",
        1,
        NOSCRIPT | LOADING | STALE | FAST | SENTINEL | CONN,
        0,
        0,
        0,
        server_only
    ),
];

fn server_only(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let mut msg = b"ERR '".to_vec();
    msg.extend_from_slice(&a[0].to_ascii_lowercase());
    msg.extend_from_slice(b"' is served by a server's connections, not by a store alone");
    c.out.error(&super::sanitize(msg));
}
