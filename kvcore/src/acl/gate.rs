//! The check of a client's command against its user (Redis's `ACLCheckAllPerm`, run after
//! the arity and authentication checks and before the rest), and its refusal: the NOPERM
//! error and the ACL LOG entry.

use std::sync::Arc;

use super::{command_of, denial_message, Context, Denial, Reason, User};
use crate::commands::{self, flags, CommandSpec};
use crate::telemetry::Outcome;
use crate::{Db, Session};

/// A refusal: why, and the full name of the (sub)command refused.
pub type Refusal = (Denial, &'static str);

impl Db {
    /// Whether `session`'s user may run `spec` with `args` (the full check; the host tries
    /// [`super::Acl::is_free`] first). A client of this server's master and a step of a
    /// command already admitted are never refused; a client whose user was deleted is
    /// refused everything.
    pub fn acl_check(
        &self,
        session: &mut Session,
        spec: &CommandSpec,
        args: &[&[u8]],
    ) -> Result<(), Refusal> {
        if session.master || session.internal {
            return Ok(());
        }
        let user: Option<Arc<User>> = self.acl.refresh(session);
        if self.acl.is_free(session) {
            return Ok(());
        }
        let Some((id, name)) = command_of(spec, args) else {
            return Ok(());
        };
        match user {
            Some(u) => u.check_id(id, args).map_err(|d| (d, name)),
            None => Err((Denial::Command, name)),
        }
    }

    /// Records a refusal in ACL LOG.
    pub fn acl_log(&self, session: &Session, r: Refusal, args: &[&[u8]], context: Context) {
        let (reason, object): (Reason, &[u8]) = match r.0 {
            Denial::Command => (Reason::Command, r.1.as_bytes()),
            Denial::Key(at) => (Reason::Key, args.get(at).copied().unwrap_or_default()),
            Denial::Channel(at) => (Reason::Channel, args.get(at).copied().unwrap_or_default()),
        };
        let name = session.user.name();
        self.acl
            .log(reason, context, object, name, session.id, self.now_ms());
    }

    /// [`Db::acl_check`] and, when refused, the ACL LOG entry and the NOPERM error line
    /// appended to `out` (RESP, `-NOPERM ...\r\n`). Whether it was refused.
    pub fn acl_refused(
        &self,
        session: &mut Session,
        spec: &CommandSpec,
        args: &[&[u8]],
        context: Context,
        out: &mut Vec<u8>,
    ) -> bool {
        match self.acl_check(session, spec, args) {
            Ok(()) => false,
            Err(r) => {
                self.acl_log(session, r, args, context);
                out.extend_from_slice(b"-NOPERM ");
                out.extend_from_slice(&denial_message(r.0, session.user.name(), r.1));
                out.extend_from_slice(b"\r\n");
                true
            }
        }
    }

    /// The gate of a client's command by its arguments: `false` when it may run, or when
    /// another check comes first and will refuse it (unknown command or subcommand, arity,
    /// authentication, DEBUG); `true` when its user may not run it, with the NOPERM error in
    /// `out` and the refusal logged. A host calls this when [`super::Acl::is_free`] is false.
    pub fn acl_refuses_call(
        &mut self,
        session: &mut Session,
        args: &[&[u8]],
        context: Context,
        out: &mut Vec<u8>,
    ) -> bool {
        let Some(spec) = args.first().and_then(|n| commands::lookup(n)) else {
            return false;
        };
        let must_auth =
            !session.authenticated && !spec.has(flags::NO_AUTH) && !self.acl.default_open();
        if !spec.arity_ok(args.len())
            || must_auth
            || self.protected_refused(session, spec)
            || commands::check_subcommand(spec, args).is_err()
        {
            return false;
        }
        let mark = out.len();
        let refused = self.acl_refused(session, spec, args, context, out);
        if refused && !session.internal {
            let reply = out.get(mark..).unwrap_or_default().to_vec();
            self.record(spec, args, 0, Outcome::Rejected, &reply, session.id);
        }
        refused
    }

    /// A script's command against its caller's user (Redis's `scriptVerifyACL`): `Err` is the
    /// error the script gets, the refusal logged in the `lua` context.
    pub fn acl_script_check(
        &self,
        session: &mut Session,
        spec: &CommandSpec,
        args: &[&[u8]],
    ) -> Result<(), Vec<u8>> {
        if self.acl.is_free(session) {
            return Ok(());
        }
        self.acl_check(session, spec, args).map_err(|r| {
            self.acl_log(session, r, args, Context::Lua);
            let mut m = b"ACL failure in script: ".to_vec();
            m.extend_from_slice(&denial_message(r.0, session.user.name(), r.1));
            m
        })
    }
}
