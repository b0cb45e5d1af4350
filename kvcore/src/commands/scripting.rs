//! Scripting commands: EVAL, EVALSHA, their read-only forms, and SCRIPT (see
//! [`crate::script`] for the Lua side).

use super::flags::*;
use super::{args, cmd, unknown_subcommand, wrong_arity, CommandSpec, Ctx};
use crate::script::{self, Caller, Outcome, Source};
use crate::{Db, Session};

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("eval", -3, NOSCRIPT | STALE | MOVABLE_KEYS, 0, 0, 0, eval),
    cmd!(
        "evalsha",
        -3,
        NOSCRIPT | STALE | MOVABLE_KEYS,
        0,
        0,
        0,
        evalsha
    ),
    cmd!(
        "eval_ro",
        -3,
        NOSCRIPT | STALE | READONLY | MOVABLE_KEYS,
        0,
        0,
        0,
        eval_ro
    ),
    cmd!(
        "evalsha_ro",
        -3,
        NOSCRIPT | STALE | READONLY | MOVABLE_KEYS,
        0,
        0,
        0,
        evalsha_ro
    ),
    cmd!("script", -2, 0, 0, 0, 0, script_cmd),
];

const SCRIPT_HELP: &[&str] = &[
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
];

fn eval(c: &mut Ctx<'_>, a: &[&[u8]]) {
    run_script(c, a, false, false);
}

fn evalsha(c: &mut Ctx<'_>, a: &[&[u8]]) {
    run_script(c, a, true, false);
}

fn eval_ro(c: &mut Ctx<'_>, a: &[&[u8]]) {
    run_script(c, a, false, true);
}

fn evalsha_ro(c: &mut Ctx<'_>, a: &[&[u8]]) {
    run_script(c, a, true, true);
}

/// Commands a script runs on the store it was called on, with a session of its own (its
/// SELECT stays in the script) speaking RESP2.
pub(super) struct StoreCaller<'a> {
    pub(super) db: &'a mut Db,
    pub(super) session: Session,
}

impl Caller for StoreCaller<'_> {
    fn call(
        &mut self,
        args: &[&[u8]],
        proto: crate::resp::Proto,
        out: &mut Vec<u8>,
    ) -> Result<(), Vec<u8>> {
        self.session.proto = proto;
        if let Some(owns) = &self.db.key_owner {
            if let Some(spec) = super::lookup(args[0]) {
                if spec.key_positions(args).iter().any(|&i| !owns(args[i])) {
                    return Err(NOT_LOCAL.to_vec());
                }
            }
        }
        self.db.dispatch(&mut self.session, args, out);
        Ok(())
    }

    fn allow_oom(&mut self, on: bool) {
        self.session.allow_oom = on;
    }

    fn permitted(&mut self, spec: &super::CommandSpec, args: &[&[u8]]) -> Result<(), Vec<u8>> {
        self.db.acl_script_check(&mut self.session, spec, args)
    }
}

/// Whether `args` names a subcommand Redis flags `noscript` (SCRIPT LOAD, CONFIG SET,
/// CLIENT KILL ...), by Redis's own command facts.
pub(crate) fn noscript_subcommand(args: &[&[u8]]) -> bool {
    static NAMES: std::sync::OnceLock<std::collections::HashSet<String>> =
        std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        include_str!("redis-commands.tsv")
            .lines()
            .filter_map(|l| {
                let mut cols = l.split('\t');
                let name = cols.next()?;
                let flags = cols.nth(1)?;
                (name.contains(' ') && flags.split(',').any(|f| f == "noscript"))
                    .then(|| name.to_string())
            })
            .collect()
    });
    let [container, sub, ..] = args else {
        return false;
    };
    let name = format!(
        "{} {}",
        String::from_utf8_lossy(container).to_ascii_lowercase(),
        String::from_utf8_lossy(sub).to_ascii_lowercase()
    );
    names.contains(&name)
}

/// A script's command on a key this store does not own (a server's other shard).
pub const NOT_LOCAL: &[u8] = b"Script attempted to access a non local key in a cluster node";

fn run_script(c: &mut Ctx<'_>, a: &[&[u8]], by_sha: bool, read_only: bool) {
    let cache = c.db.scripts.clone();
    let mark = c.db.log_effects_begin(c.session.db);
    let mut caller = StoreCaller {
        session: script_session(c.session),
        db: c.db,
    };
    run_with(&cache, a, by_sha, read_only, &mut caller, &mut c.out);
    drop(caller);
    c.db.log_effects_end(mark);
}

/// The session a script's commands run in, for a script called by `caller`: its database,
/// RESP2, authenticated (a SELECT in the script stays in the script).
pub fn script_session(caller: &Session) -> Session {
    Session {
        db: caller.db,
        id: caller.id,
        local: caller.local,
        authenticated: true,
        in_script: true,
        user: caller.user.clone(),
        ..Session::default()
    }
}

/// Whether `name` (lowercase) is EVAL, EVALSHA, FCALL or a read-only form.
pub fn is_script_command(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// EVAL, EVALSHA, FCALL or a read-only form (`a[0]`) with its commands run through `caller`,
/// for a host that runs a script's commands itself (a server whose keys live on several
/// stores). An FCALL's refusals by its function's flags are the host's to check first
/// ([`super::functions::fcall_refused`]).
pub fn run_script_with(
    cache: &script::ScriptCache,
    a: &[&[u8]],
    caller: &mut dyn Caller,
    w: &mut crate::resp::ReplyWriter<'_>,
) {
    let name = a[0].to_ascii_lowercase();
    if name.starts_with(b"fcall") {
        return super::functions::fcall_with(cache, a, caller, w);
    }
    let by_sha = name.starts_with(b"evalsha");
    let read_only = name.ends_with(b"_ro");
    run_with(cache, a, by_sha, read_only, caller, w);
}

fn run_with(
    cache: &script::ScriptCache,
    a: &[&[u8]],
    by_sha: bool,
    read_only: bool,
    caller: &mut dyn Caller,
    w: &mut crate::resp::ReplyWriter<'_>,
) {
    // EVALSHA answers NOSCRIPT for a name of the wrong length before it reads anything else.
    if by_sha && a[1].len() != 40 {
        return w.error(NO_SCRIPT);
    }
    let n = match args::int(a[2]) {
        Ok(n) => n,
        Err(e) => return w.error(e.message().as_bytes()),
    };
    if n < 0 {
        return w.error(b"ERR Number of keys can't be negative");
    }
    if n as u64 > (a.len() - 3) as u64 {
        return w.error(b"ERR Number of keys can't be greater than number of args");
    }
    let (keys, argv) = a[3..].split_at(n as usize);
    let source = if by_sha {
        match script::parse_sha(a[1]) {
            Some(sha) => Source::Sha(sha),
            None => return w.error(NO_SCRIPT),
        }
    } else {
        Source::Body(a[1])
    };
    let read_only = read_only || source_is_no_writes(cache, &source);
    if script::run(cache, source, keys, argv, read_only, caller, w) == Outcome::NoScript {
        w.error(NO_SCRIPT);
    }
}

const NO_SCRIPT: &[u8] = b"NOSCRIPT No matching script. Please use EVAL.";

/// Whether the script's shebang line (`#!lua flags=...`) declares `no-writes`.
fn source_is_no_writes(cache: &script::ScriptCache, source: &Source<'_>) -> bool {
    let body;
    let b: &[u8] = match source {
        Source::Body(b) => b,
        Source::Sha(sha) => match cache.get(sha) {
            Some(found) => {
                body = found;
                &body
            }
            None => return false,
        },
    };
    script::shebang_flags(b).is_ok_and(|f| f.is_some_and(|f| f.contains(&&b"no-writes"[..])))
}

fn script_cmd(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let sub = a[1];
    if args::is(sub, "HELP") {
        if a.len() != 2 {
            return wrong_arity(&mut c.out, "script|help");
        }
        return c.out.help("script", SCRIPT_HELP);
    }
    if args::is(sub, "LOAD") {
        if a.len() != 3 {
            return wrong_arity(&mut c.out, "script|load");
        }
        let cache = c.db.scripts.clone();
        return match script::load(&cache, a[2]) {
            Ok(sha) => c.out.bulk(&sha),
            Err(e) => c.out.error(&e),
        };
    }
    if args::is(sub, "EXISTS") {
        if a.len() < 3 {
            return wrong_arity(&mut c.out, "script|exists");
        }
        c.out.array_len(a.len() - 2);
        for s in &a[2..] {
            let found = script::parse_sha(s).is_some_and(|sha| c.db.scripts.contains(&sha));
            c.out.int(i64::from(found));
        }
        return;
    }
    if args::is(sub, "FLUSH") {
        if a.len() > 3 || (a.len() == 3 && !args::is(a[2], "SYNC") && !args::is(a[2], "ASYNC")) {
            return c
                .out
                .error(b"ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        }
        c.db.scripts.flush();
        return c.out.ok();
    }
    if args::is(sub, "KILL") {
        if a.len() != 2 {
            return wrong_arity(&mut c.out, "script|kill");
        }
        // A script runs to its end on its store's thread: this reaches one running on another
        // (a server's other shard), whose instruction hook then stops it.
        return match c.db.scripts.kill() {
            Ok(()) => c.out.ok(),
            Err(e) => c.out.error(e),
        };
    }
    if args::is(sub, "DEBUG") {
        if a.len() != 3 {
            return wrong_arity(&mut c.out, "script|debug");
        }
        return if args::is(a[2], "NO") {
            c.out.ok()
        } else if args::is(a[2], "YES") || args::is(a[2], "SYNC") {
            c.out
                .error(b"ERR The Lua debugger (SCRIPT DEBUG YES/SYNC) is not supported")
        } else {
            c.out.error(b"ERR Use SCRIPT DEBUG YES/SYNC/NO")
        };
    }
    unknown_subcommand(&mut c.out, "script", sub)
}

#[cfg(test)]
mod tests {
    use crate::Db;

    fn logged(db: &mut Db, args: &[&[u8]]) -> String {
        db.execute(args);
        String::from_utf8_lossy(&db.take_changes().unwrap_or_default()).into_owned()
    }

    /// More scripts than mlua's reference stack holds handles (about 8000) stay loaded and
    /// run: a thread keeps them in Lua (SCRIPT LOAD of thousands panicked the shard).
    #[test]
    fn thousands_of_scripts_load_and_run() {
        let mut db = Db::new();
        for i in 0..9000 {
            let body = format!("return {i}");
            assert!(matches!(
                db.execute(&[b"SCRIPT", b"LOAD", body.as_bytes()]),
                crate::Reply::Bulk(_)
            ));
        }
        assert_eq!(
            db.execute(&[b"EVAL", b"return 8999", b"0"]),
            crate::Reply::Int(8999)
        );
    }

    /// A script's writes reach the change log as Redis propagates them: several between MULTI
    /// and EXEC, one bare, none at all for a script that only read.
    #[test]
    fn script_effects_are_logged_whole() {
        let mut db = Db::new();
        db.set_change_log(true);
        let two = logged(
            &mut db,
            &[
                b"EVAL",
                b"redis.call('set', 'a', '1') redis.call('incr', 'n') return 1",
                b"0",
            ],
        );
        assert_eq!(
            two,
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*1\r\n$5\r\nMULTI\r\n\
             *3\r\n$3\r\nset\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$4\r\nincr\r\n$1\r\nn\r\n\
             *1\r\n$4\r\nEXEC\r\n"
        );
        let one = logged(&mut db, &[b"EVAL", b"return redis.call('incr', 'n')", b"0"]);
        assert_eq!(
            one,
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*2\r\n$4\r\nincr\r\n$1\r\nn\r\n"
        );
        let none = logged(&mut db, &[b"EVAL", b"return redis.call('get', 'n')", b"0"]);
        assert_eq!(none, "");
    }
}
