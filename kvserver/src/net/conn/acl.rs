//! The connection's ACL checks: each command of a client whose user is not unrestricted is
//! checked once, before it is routed (so a command of any route, local, on other shards or
//! served by the connection, is checked the same way), and a transaction's commands are
//! checked again at EXEC, as Redis does, since the rules may have changed meanwhile. An
//! unrestricted client never gets here (`Acl::is_free`, one branch).

use kvcore::acl::{Context, Denial};
use kvcore::commands;
use kvcore::resp::reply::skip_reply;

use super::{Conn, Seg};
use crate::coord::tx;

impl Conn<'_> {
    /// Checks a command against the client's user; `true` when it is refused, its NOPERM
    /// error in the replies (inside MULTI the transaction is then aborted, as Redis flags
    /// it). A refused EXEC is answered by the EXEC path (EXECABORT ...).
    pub(super) fn acl_gate(&mut self, args: &[&[u8]]) -> bool {
        let context = if self.multi.is_some() {
            Context::Multi
        } else {
            Context::Toplevel
        };
        let mut err = Vec::new();
        let refused =
            self.shard
                .db
                .borrow_mut()
                .acl_refuses_call(self.session, args, context, &mut err);
        if !refused {
            return false;
        }
        if args[0].eq_ignore_ascii_case(b"exec") {
            self.acl_exec = Some(err);
            return false;
        }
        if let Some(m) = self.multi.as_mut() {
            m.aborted = true;
        }
        if self.pend.active {
            let a = self.pend.local.len();
            self.pend.local.extend_from_slice(&err);
            self.pend.segs.push(Seg::Local(a, self.pend.local.len()));
        } else {
            self.out.extend_from_slice(&err);
        }
        true
    }

    /// At EXEC: the queued commands the client's user may no longer run, taken out of the
    /// queue, with their positions and errors (see [`splice_refusals`]).
    pub(super) fn acl_recheck_queue(&mut self) -> Vec<(usize, Vec<u8>)> {
        let Conn {
            multi,
            shard,
            session,
            ..
        } = self;
        let Some(multi) = multi.as_deref_mut().filter(|m| !m.aborted) else {
            return Vec::new();
        };
        let db = shard.db.borrow();
        if db.acl.is_free(session) {
            return Vec::new();
        }
        let mut refused = Vec::new();
        let mut kept = tx::Queue::default();
        for (i, args) in multi.queue.iter().enumerate() {
            let Some(spec) = commands::lookup(args[0]) else {
                kept.push(&args);
                continue;
            };
            match db.acl_check(session, spec, &args) {
                Ok(()) => kept.push(&args),
                Err(r) => {
                    db.acl_log(session, r, &args, Context::Multi);
                    let reason: &[u8] = match r.0 {
                        Denial::Command => b"no permission to execute the command or subcommand",
                        Denial::Key(_) => b"no permission to touch the specified keys",
                        Denial::Channel(_) => {
                            b"no permission to access one of the channels used as arguments"
                        }
                    };
                    let mut e = b"-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: ".to_vec();
                    e.extend_from_slice(reason);
                    e.extend_from_slice(b"\r\n");
                    refused.push((i, e));
                }
            }
        }
        if !refused.is_empty() {
            multi.queue = kept;
        }
        refused
    }
}

/// Puts the errors of refused commands back in their places of an EXEC reply written from
/// `mark` (an array of the replies of the commands that ran). Anything else there (EXECABORT,
/// a null array for a broken WATCH) is left as it is.
pub(super) fn splice_refusals(out: &mut Vec<u8>, mark: usize, refused: &[(usize, Vec<u8>)]) {
    if refused.is_empty() {
        return;
    }
    let Some(reply) = out.get(mark..) else { return };
    let Some(rest) = reply.strip_prefix(b"*") else {
        return;
    };
    let Some(eol) = memchr::memchr(b'\n', rest) else {
        return;
    };
    let Some(ran) = std::str::from_utf8(&rest[..eol])
        .ok()
        .and_then(|n| n.trim_end().parse::<usize>().ok())
    else {
        return;
    };
    let mut items = Vec::with_capacity(ran);
    let mut at = 1 + eol + 1;
    for _ in 0..ran {
        match reply.get(at..).map(skip_reply) {
            Some(Ok(Some((len, _)))) => {
                items.push(at..at + len);
                at += len;
            }
            _ => return,
        }
    }
    let total = ran + refused.len();
    let mut new = format!("*{total}\r\n").into_bytes();
    let mut ran_items = items.into_iter();
    let mut errors = refused.iter().peekable();
    for i in 0..total {
        match errors.peek() {
            Some((pos, e)) if *pos == i => {
                new.extend_from_slice(e);
                errors.next();
            }
            _ => {
                if let Some(r) = ran_items.next() {
                    new.extend_from_slice(&reply[r]);
                }
            }
        }
    }
    new.extend_from_slice(&reply[at..]);
    out.truncate(mark);
    out.extend_from_slice(&new);
}

#[cfg(test)]
mod tests {
    use super::splice_refusals;

    #[test]
    fn refusals_go_back_in_their_places() {
        let mut out = b"+OK\r\n*2\r\n:1\r\n$1\r\nx\r\n".to_vec();
        splice_refusals(
            &mut out,
            5,
            &[
                (0, b"-NOPERM a\r\n".to_vec()),
                (2, b"-NOPERM b\r\n".to_vec()),
            ],
        );
        assert_eq!(
            out,
            b"+OK\r\n*4\r\n-NOPERM a\r\n:1\r\n-NOPERM b\r\n$1\r\nx\r\n".to_vec()
        );
        let mut null = b"*-1\r\n".to_vec();
        splice_refusals(&mut null, 0, &[(0, b"-NOPERM a\r\n".to_vec())]);
        assert_eq!(null, b"*-1\r\n".to_vec());
    }
}
