//! A point-in-time snapshot of one keyspace, written in small steps while it keeps serving.
//!
//! Every key node carries a mark bit; the keyspace keeps a `parity`. A node whose mark equals
//! the parity is *done*: written by the running snapshot, or created after it began, or (no
//! snapshot running) simply at rest. Starting a snapshot flips the parity, which makes every
//! existing node pending at once, in O(1). Then:
//! - [`Keyspace::snapshot_step`] walks the table with a SCAN cursor (which visits every key
//!   present throughout at least once, however the table resizes) and writes each pending node
//!   it meets, marking it done; a node met twice is written once.
//! - Before any change to a pending node (a write, a new deadline, a deletion, expiry or
//!   eviction), the keyspace writes its old value first and marks it (`Snap::save_old`).
//! - New nodes are born done. A cleared table (FLUSHDB/FLUSHALL) is handed whole to the
//!   snapshot, which writes its pending nodes and frees it when done.
//!
//! So every key present at the start is written exactly once with its value of that moment,
//! and nothing created later is. When the walk ends every node is done again, which restores
//! the resting invariant (all marks equal the parity) for the next snapshot. Keys already past
//! their deadline at the start are not written.
//!
//! The records go to a buffer that the owner drains between steps (see
//! [`crate::Db::snapshot_step`]); a step visits about `budget` nodes, so the serving loop
//! never stalls for long (one very large value is still written whole in one step).

use super::{Keyspace, Node};
use crate::dict::Dict;
use crate::keyspace::KeyNode;
use crate::rdb::{key_record, Writer, VERSION_BASE};

/// The state of a snapshot running over one keyspace.
pub(crate) struct Snap {
    /// The database index the records are written under (the index at the start: a SWAPDB
    /// later moves the keyspace and its snapshot together).
    pub(crate) db: usize,
    /// Records as commands (an AOF base without the RDB preamble), not RDB records.
    commands: bool,
    cursor: u64,
    done: bool,
    /// Tables cleared since the start, still to write.
    frozen: Vec<(Dict<Node>, u64)>,
    out: Writer,
    /// The highest RDB version a record needed.
    pub(crate) version: u16,
    /// The snapshot's moment (Unix ms): keys expired by then are left out.
    at_ms: u64,
}

impl Snap {
    /// Writes `node` if it is pending, and marks it done.
    #[inline]
    pub(crate) fn save_old(&mut self, parity: bool, node: &mut KeyNode) {
        if node.mark() != parity {
            node.set_mark(parity);
            self.write(node);
        }
    }

    fn write(&mut self, node: &KeyNode) {
        record(
            &mut self.out,
            &mut self.version,
            self.at_ms,
            self.commands,
            node,
        );
    }

    /// Takes a cleared table whose pending nodes are still to be written.
    pub(crate) fn freeze(&mut self, table: Dict<Node>) {
        if !table.is_empty() {
            self.frozen.push((table, 0));
        }
    }
}

/// Writes `node`'s record unless it was past its deadline at the snapshot's moment `at_ms`;
/// raises `version` to what the record needs.
fn record(out: &mut Writer, version: &mut u16, at_ms: u64, commands: bool, node: &KeyNode) {
    if node.expired(at_ms) {
    } else if commands {
        crate::changes::key_commands(&mut out.out, node.key(), node.value(), node.expire_at());
    } else {
        *version = (*version).max(key_record(out, node.key(), node.value(), node.expire_at()));
    }
}

/// Output bytes after which a step returns, so its owner ships them.
const STEP_BYTES: usize = 256 << 10;

impl Keyspace {
    /// Starts a snapshot whose records (RDB records, or `commands`) go under database `db`, at
    /// the moment `now_ms`.
    pub(crate) fn snapshot_begin(
        &mut self,
        db: usize,
        list_limits: crate::list::Limits,
        now_ms: u64,
        commands: bool,
    ) {
        debug_assert!(self.snap.is_none(), "one snapshot at a time");
        self.parity = !self.parity;
        let mut out = Writer::new();
        out.list_limits = list_limits;
        self.snap = Some(Box::new(Snap {
            db,
            commands,
            cursor: 0,
            done: false,
            frozen: Vec::new(),
            out,
            version: VERSION_BASE,
            at_ms: now_ms,
        }));
    }

    /// Whether a snapshot runs here.
    pub(crate) fn snapshot_running(&self) -> bool {
        self.snap.is_some()
    }

    /// Writes up to about `budget` nodes; returns the nodes visited and whether the walk is
    /// complete.
    pub(crate) fn snapshot_step(&mut self, budget: usize) -> (usize, bool) {
        let parity = self.parity;
        let Some(s) = self.snap.as_deref_mut() else {
            return (0, true);
        };
        let mut visited = 0;
        while let Some((table, cursor)) = s.frozen.last_mut() {
            let (out, at_ms, version, commands) = (&mut s.out, s.at_ms, &mut s.version, s.commands);
            loop {
                *cursor = table.scan_mut(*cursor, |n| {
                    visited += 1;
                    if n.mark() != parity {
                        n.set_mark(parity);
                        record(out, version, at_ms, commands, n);
                    }
                });
                if *cursor == 0 || visited >= budget || out.out.len() >= STEP_BYTES {
                    break;
                }
            }
            if *cursor != 0 {
                return (visited, false);
            }
            if let Some((t, _)) = s.frozen.pop() {
                crate::lazyfree::defer(t);
            }
        }
        while !s.done && visited < budget && s.out.out.len() < STEP_BYTES {
            let cursor = self.main.scan_mut(s.cursor, |n| {
                visited += 1;
                s.save_old(parity, n);
            });
            s.cursor = cursor;
            s.done = cursor == 0;
        }
        (visited, s.done)
    }

    /// The records written since the last call, with the database index they belong to.
    pub(crate) fn snapshot_output(&mut self) -> Option<(usize, Vec<u8>, bool)> {
        let s = self.snap.as_deref_mut()?;
        if s.out.out.is_empty() {
            return None;
        }
        let cap = s.out.out.capacity();
        Some((
            s.db,
            std::mem::replace(&mut s.out.out, Vec::with_capacity(cap.min(STEP_BYTES * 2))),
            s.commands,
        ))
    }

    /// Ends the snapshot (complete or not); returns the RDB version its records needed. An
    /// incomplete walk is finished by marking, without writing, so the marks are at rest.
    pub(crate) fn snapshot_end(&mut self) -> u16 {
        let Some(s) = self.snap.take() else {
            return VERSION_BASE;
        };
        if !s.done {
            let parity = self.parity;
            self.main.retain(|n| {
                n.set_mark(parity);
                true
            });
        }
        for (t, _) in s.frozen {
            crate::lazyfree::defer(t);
        }
        s.version
    }
}
