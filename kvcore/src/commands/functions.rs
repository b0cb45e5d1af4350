//! Function commands: FUNCTION (LOAD, DELETE, FLUSH, LIST, DUMP, RESTORE, STATS, KILL, HELP),
//! FCALL and FCALL_RO (see [`crate::function`]).
//!
//! The subcommands that change the libraries are Redis's write commands (LOAD and RESTORE also
//! deny OOM): refused as writes are, and logged whole in the change log, as Redis propagates
//! them. FCALL is refused by the flags of the function it names, as Redis derives an FCALL's
//! command flags from them; its effects are logged, not the call.

use super::flags::*;
use super::{args, cmd, unknown_subcommand, wrong_arity, CommandSpec, Ctx};
use crate::function::{flag, lua, Functions, Policy, FLAG_NAMES};
use crate::resp::ReplyWriter;
use crate::script::{Caller, ScriptCache};
use crate::{Db, Session};

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("fcall", -3, NOSCRIPT | STALE | MOVABLE_KEYS, 0, 0, 0, fcall),
    cmd!(
        "fcall_ro",
        -3,
        NOSCRIPT | STALE | READONLY | MOVABLE_KEYS,
        0,
        0,
        0,
        fcall_ro
    ),
    cmd!("function", -2, 0, 0, 0, 0, function_cmd),
];

const HELP: &[&str] = &[
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
];

fn fcall(c: &mut Ctx<'_>, a: &[&[u8]]) {
    run_fcall(c, a);
}

fn fcall_ro(c: &mut Ctx<'_>, a: &[&[u8]]) {
    run_fcall(c, a);
}

/// The error an FCALL gets before it runs, as Redis refuses a command by the flags the named
/// function gives it: a function that may write is a write that denies OOM (unless
/// `allow-oom`), one without `allow-stale` is refused on a stale replica.
pub fn fcall_refused(db: &Db, session: &Session, args: &[&[u8]]) -> Option<Vec<u8>> {
    let spec = super::lookup(args.first()?)?;
    let (_, info) = db.scripts.functions().find(args.get(1)?)?;
    let mut flags = spec.flags & !(STALE | DENYOOM | WRITE);
    if info.flags & (flag::ALLOW_OOM | flag::NO_WRITES) == 0 {
        flags |= DENYOOM;
    }
    if info.flags & flag::NO_WRITES == 0 {
        flags |= WRITE;
    }
    if info.flags & flag::ALLOW_STALE != 0 {
        flags |= STALE;
    }
    let as_declared = CommandSpec { flags, ..*spec };
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, session.proto);
    db.refused(session, &as_declared, args.len(), &mut w)
        .then_some(out)
}

fn run_fcall(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if let Some(refused) = fcall_refused(c.db, c.session, a) {
        c.out.out.extend_from_slice(&refused);
        return;
    }
    let cache = c.db.scripts.clone();
    let mark = c.db.log_effects_begin(c.session.db);
    let mut caller = super::scripting::StoreCaller {
        session: super::scripting::script_session(c.session),
        db: c.db,
    };
    fcall_with(&cache, a, &mut caller, &mut c.out);
    drop(caller);
    c.db.log_effects_end(mark);
}

/// FCALL or FCALL_RO (`a[0]`) with its commands run through `caller` (refusals by the
/// function's flags already checked, see [`fcall_refused`]).
pub fn fcall_with(
    cache: &ScriptCache,
    a: &[&[u8]],
    caller: &mut dyn Caller,
    w: &mut ReplyWriter<'_>,
) {
    let functions = cache.functions();
    let Some((lib, info)) = functions.find(a[1]) else {
        return w.error(b"ERR Function not found");
    };
    let Some(n) = crate::num::parse_i64(a[2]) else {
        return w.error(b"ERR Bad number of keys provided");
    };
    if n > (a.len() - 3) as i64 {
        return w.error(b"ERR Number of keys can't be greater than number of args");
    }
    if n < 0 {
        return w.error(b"ERR Number of keys can't be negative");
    }
    let ro = a[0].eq_ignore_ascii_case(b"fcall_ro");
    if ro && info.flags & flag::NO_WRITES == 0 {
        return w.error(b"ERR Can not execute a script with write flag using *_ro command.");
    }
    let (keys, argv) = a[3..].split_at(n as usize);
    functions.set_current(Some((&info.name, a)));
    let args = lua::CallArgs {
        keys,
        argv,
        read_only: ro,
    };
    lua::call(functions, &lib, &info, args, caller, w);
    functions.set_current(None);
}

/// Redis's reply to a subcommand with the wrong number of arguments that its handler checks.
fn syntax_error(w: &mut ReplyWriter<'_>, sub: &[u8]) {
    let mut m = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    let sub = super::c_str(sub);
    m.extend_from_slice(&sub[..sub.len().min(128)]);
    m.extend_from_slice(b"'. Try FUNCTION HELP.");
    w.error(&super::sanitize(m));
}

/// Whether a subcommand that writes (`denyoom`: one that may grow memory) is refused.
fn write_refused(c: &mut Ctx<'_>, argc: usize, denyoom: bool) -> bool {
    let Some(spec) = super::lookup(b"function") else {
        return false;
    };
    let flags = WRITE | if denyoom { DENYOOM } else { 0 };
    let as_write = CommandSpec { flags, ..*spec };
    c.db.refused(c.session, &as_write, argc, &mut c.out)
}

/// A change to the libraries, done: counted and logged as it was sent.
fn changed(c: &mut Ctx<'_>, a: &[&[u8]]) {
    c.db.stats.dirty += 1;
    c.db.log_change(c.session.db, a);
}

fn function_cmd(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let sub = a[1];
    let is = |s: &str| args::is(sub, s);
    let functions = c.db.scripts.functions().clone();
    if let Some((name, arity)) = [
        ("help", 2),
        ("load", -3),
        ("delete", 3),
        ("flush", -2),
        ("list", -2),
        ("dump", 2),
        ("restore", -3),
        ("stats", 2),
        ("kill", 2),
    ]
    .into_iter()
    .find(|(n, _)| is(n))
    {
        let ok = if arity > 0 {
            a.len() == arity as usize
        } else {
            a.len() >= (-arity) as usize
        };
        if !ok {
            return wrong_arity(&mut c.out, &format!("function|{name}"));
        }
    } else {
        return unknown_subcommand(&mut c.out, "function", sub);
    }
    if is("HELP") {
        c.out.help("function", HELP);
    } else if is("LOAD") {
        if write_refused(c, a.len(), true) {
            return;
        }
        let mut replace = false;
        for opt in &a[2..a.len() - 1] {
            if args::is(opt, "REPLACE") {
                replace = true;
            } else {
                let mut m = b"ERR Unknown option given: ".to_vec();
                m.extend_from_slice(super::c_str(opt));
                return c.out.error(&super::sanitize(m));
            }
        }
        // A master's stream and a file being loaded are obeyed whatever the time it takes.
        let no_timeout = c.session.master || c.session.internal;
        match functions.load(a[a.len() - 1], replace, no_timeout) {
            Ok(name) => {
                c.out.bulk(&name);
                changed(c, a);
            }
            Err(e) => c.out.error(&e),
        }
    } else if is("DELETE") {
        if write_refused(c, a.len(), false) {
            return;
        }
        if functions.delete(a[2]) {
            c.out.ok();
            changed(c, a);
        } else {
            c.out.error(b"ERR Library not found");
        }
    } else if is("FLUSH") {
        if a.len() > 3 {
            return syntax_error(&mut c.out, sub);
        }
        if a.len() == 3 && !args::is(a[2], "SYNC") && !args::is(a[2], "ASYNC") {
            return c
                .out
                .error(b"ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
        }
        if write_refused(c, a.len(), false) {
            return;
        }
        functions.flush();
        c.out.ok();
        changed(c, a);
    } else if is("LIST") {
        list(c, &functions, a);
    } else if is("DUMP") {
        c.out.bulk(&functions.dump());
    } else if is("RESTORE") {
        if a.len() > 4 {
            return syntax_error(&mut c.out, sub);
        }
        let policy = match a.get(3) {
            None => Policy::Append,
            Some(p) if args::is(p, "APPEND") => Policy::Append,
            Some(p) if args::is(p, "REPLACE") => Policy::Replace,
            Some(p) if args::is(p, "FLUSH") => Policy::Flush,
            Some(_) => return c.out.error(
                b"ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
        if write_refused(c, a.len(), true) {
            return;
        }
        let codes = match crate::rdb::functions_restore(a[2]) {
            Ok(codes) => codes,
            Err(e) => return c.out.error(&[b"ERR ", e.as_bytes()].concat()),
        };
        match functions.restore(&codes, policy) {
            Ok(()) => {
                c.out.ok();
                changed(c, a);
            }
            Err(e) => c.out.error(&e),
        }
    } else if is("STATS") {
        stats(c, &functions);
    } else {
        match functions.kill(&c.db.scripts) {
            Ok(()) => c.out.ok(),
            Err(e) => c.out.error(e),
        }
    }
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn list(c: &mut Ctx<'_>, functions: &Functions, a: &[&[u8]]) {
    let (mut with_code, mut pattern): (bool, Option<&[u8]>) = (false, None);
    let mut i = 2;
    while i < a.len() {
        let arg = a[i];
        if !with_code && args::is(arg, "WITHCODE") {
            with_code = true;
        } else if pattern.is_none() && args::is(arg, "LIBRARYNAME") {
            let Some(p) = a.get(i + 1) else {
                return c.out.error(b"ERR library name argument was not given");
            };
            pattern = Some(p);
            i += 1;
        } else {
            let mut m = b"ERR Unknown argument ".to_vec();
            m.extend_from_slice(super::c_str(arg));
            return c.out.error(&super::sanitize(m));
        }
        i += 1;
    }
    let libs: Vec<_> = functions
        .libraries()
        .into_iter()
        .filter(|l| pattern.is_none_or(|p| crate::glob::matches(p, &l.name, false)))
        .collect();
    let w = &mut c.out;
    w.array_len(libs.len());
    for lib in libs {
        w.map_len(if with_code { 4 } else { 3 });
        w.bulk(b"library_name");
        w.bulk(&lib.name);
        w.bulk(b"engine");
        w.bulk(b"LUA");
        w.bulk(b"functions");
        w.array_len(lib.functions.len());
        for f in &lib.functions {
            w.map_len(3);
            w.bulk(b"name");
            w.bulk(&f.name);
            w.bulk(b"description");
            match &f.description {
                Some(d) => w.bulk(d),
                None => w.null(),
            }
            w.bulk(b"flags");
            let names: Vec<&str> = FLAG_NAMES
                .iter()
                .filter(|(bit, _)| f.flags & bit != 0)
                .map(|(_, n)| *n)
                .collect();
            w.set_len(names.len());
            for n in names {
                w.simple(n.as_bytes());
            }
        }
        if with_code {
            w.bulk(b"library_code");
            w.bulk(&lib.code);
        }
    }
}

/// FUNCTION STATS: the function running now, if any, and the engine's counts.
fn stats(c: &mut Ctx<'_>, functions: &Functions) {
    let w = &mut c.out;
    if c.db.scripts.eval_busy() {
        return w.error(
            b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
        );
    }
    w.map_len(2);
    w.bulk(b"running_script");
    match functions.current() {
        None => w.null(),
        Some((name, command, ms)) => {
            w.map_len(3);
            w.bulk(b"name");
            w.bulk(&name);
            w.bulk(b"command");
            w.array_len(command.len());
            for arg in &command {
                w.bulk(arg);
            }
            w.bulk(b"duration_ms");
            w.int(ms as i64);
        }
    }
    let (libraries, fns) = functions.counts();
    w.bulk(b"engines");
    w.map_len(1);
    w.bulk(b"LUA");
    w.map_len(2);
    w.bulk(b"libraries_count");
    w.int(libraries as i64);
    w.bulk(b"functions_count");
    w.int(fns as i64);
}

#[cfg(test)]
mod tests {
    use crate::{Db, Reply};

    fn text(r: Reply) -> String {
        match r {
            Reply::Bulk(b) | Reply::Simple(b) | Reply::Error(b) => String::from_utf8(b).unwrap(),
            Reply::Int(i) => i.to_string(),
            other => format!("{other:?}"),
        }
    }

    fn run(db: &mut Db, args: &[&str]) -> String {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        text(db.execute(&a))
    }

    const LIB: &str = "#!lua name=lib\n\
        redis.register_function('set_it', function(keys, args) return redis.call('set', keys[1], args[1]) end)\n\
        redis.register_function{function_name='get_it', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}";

    #[test]
    fn load_call_list_delete() {
        let mut db = Db::new();
        assert_eq!(run(&mut db, &["FUNCTION", "LOAD", LIB]), "lib");
        assert_eq!(run(&mut db, &["FCALL", "SET_IT", "1", "k", "v"]), "OK");
        assert_eq!(run(&mut db, &["FCALL_RO", "get_it", "1", "k"]), "v");
        assert_eq!(
            run(&mut db, &["FCALL_RO", "set_it", "1", "k", "v"]),
            "ERR Can not execute a script with write flag using *_ro command."
        );
        assert_eq!(
            run(&mut db, &["FUNCTION", "LOAD", LIB]),
            "ERR Library 'lib' already exists"
        );
        assert_eq!(run(&mut db, &["FUNCTION", "LOAD", "REPLACE", LIB]), "lib");
        assert_eq!(
            run(&mut db, &["FCALL", "nope", "0"]),
            "ERR Function not found"
        );
        assert_eq!(
            run(&mut db, &["FCALL", "get_it", "x"]),
            "ERR Bad number of keys provided"
        );
        assert_eq!(
            run(&mut db, &["FCALL", "get_it", "2", "k"]),
            "ERR Number of keys can't be greater than number of args"
        );
        let list = db.execute(&[b"FUNCTION", b"LIST", b"WITHCODE"]);
        let Reply::Array(libs) = list else { panic!() };
        assert_eq!(libs.len(), 1);
        assert_eq!(run(&mut db, &["FUNCTION", "DELETE", "lib"]), "OK");
        assert_eq!(
            run(&mut db, &["FUNCTION", "DELETE", "lib"]),
            "ERR Library not found"
        );
        assert_eq!(
            run(&mut db, &["FCALL", "get_it", "1", "k"]),
            "ERR Function not found"
        );
    }

    #[test]
    fn load_time_sandbox_and_errors() {
        let mut db = Db::new();
        let load = |db: &mut Db, body: &str| {
            run(db, &["FUNCTION", "LOAD", &format!("#!lua name=t\n{body}")])
        };
        assert_eq!(
            load(&mut db, "redis.call('ping')"),
            "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"
        );
        assert_eq!(
            load(&mut db, "a = 1"),
            "ERR Error registering functions: ERR user_function:2: Attempt to modify a readonly table"
        );
        assert_eq!(
            load(&mut db, "local x = string"),
            "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'string'"
        );
        assert_eq!(
            load(&mut db, "redis.register_function()"),
            "ERR Error registering functions: ERR wrong number of arguments to redis.register_function"
        );
        assert_eq!(load(&mut db, "return 1"), "ERR No functions registered");
        assert!(load(&mut db, "return 1 +")
            .starts_with("ERR Error compiling function: user_function:2:"));
        assert_eq!(
            load(&mut db, "local a = 1 while true do a = a + 1 end"),
            "ERR Error registering functions: ERR FUNCTION LOAD timeout"
        );
        // At run time the full API is there, register_function is not, and errors name the
        // function.
        assert_eq!(
            load(
                &mut db,
                "local lib = redis\n\
                 redis.register_function('f', function() error('boom') end)\n\
                 redis.register_function('g', function() return redis.register_function end)\n\
                 redis.register_function('h', function() return lib.register_function('x', function() end) end)\n\
                 redis.register_function('k', function(keys, args) return {#keys, #args, string.upper(args[1])} end)"
            ),
            "t"
        );
        assert_eq!(
            run(&mut db, &["FCALL", "f", "0"]),
            "ERR user_function:3: boom script: f, on @user_function:3."
        );
        assert_eq!(
            format!("{:?}", db.execute(&[b"FCALL", b"g", b"0"])),
            format!("{:?}", Reply::Null)
        );
        assert_eq!(
            run(&mut db, &["FCALL", "h", "0"]),
            "ERR redis.register_function can only be called on FUNCTION LOAD command script: h, on @user_function:5."
        );
        assert_eq!(
            format!(
                "{:?}",
                db.execute(&[b"FCALL", b"k", b"1", b"a", b"b", b"c"])
            ),
            format!(
                "{:?}",
                Reply::Array(vec![
                    Reply::Int(1),
                    Reply::Int(2),
                    Reply::Bulk(b"B".to_vec())
                ])
            )
        );
    }

    /// More functions than mlua's reference stack holds handles (about 8000), in one library
    /// and over many: a thread keeps them in Lua (it panicked).
    #[test]
    fn thousands_of_functions_load_and_run() {
        let mut db = Db::new();
        let mut code = String::from("#!lua name=big\n");
        for i in 0..9000 {
            code.push_str(&format!(
                "redis.register_function('b{i}', function() return {i} end)\n"
            ));
        }
        // As a master's stream loads it: no 500 ms load timeout, which a loaded test machine
        // could pass while 9000 functions register in a debug build.
        let mut master = crate::Session {
            authenticated: true,
            master: true,
            ..Default::default()
        };
        let mut out = Vec::new();
        db.dispatch(
            &mut master,
            &[b"FUNCTION", b"LOAD", code.as_bytes()],
            &mut out,
        );
        assert_eq!(out, b"$3\r\nbig\r\n");
        for i in 0..9000 {
            let lib = format!(
                "#!lua name=l{i}\nredis.register_function('f{i}', function() return {i} end)"
            );
            assert_eq!(run(&mut db, &["FUNCTION", "LOAD", &lib]), format!("l{i}"));
        }
        assert_eq!(run(&mut db, &["FCALL", "b8999", "0"]), "8999");
        assert_eq!(run(&mut db, &["FCALL", "f8999", "0"]), "8999");
        assert_eq!(run(&mut db, &["FUNCTION", "DELETE", "big"]), "OK");
        assert_eq!(run(&mut db, &["FCALL", "f0", "0"]), "0");
    }

    #[test]
    fn dump_restore_and_the_change_log() {
        let mut db = Db::new();
        db.set_change_log(true);
        run(&mut db, &["FUNCTION", "LOAD", LIB]);
        let Reply::Bulk(payload) = db.execute(&[b"FUNCTION", b"DUMP"]) else {
            panic!()
        };
        assert_eq!(run(&mut db, &["FUNCTION", "FLUSH"]), "OK");
        let log = String::from_utf8_lossy(&db.take_changes().unwrap()).into_owned();
        assert!(log.contains("FUNCTION") && log.contains("LOAD") && log.contains("FLUSH"));
        assert_eq!(
            text(db.execute(&[b"FUNCTION", b"RESTORE", b"bad"])),
            "ERR DUMP payload version or checksum are wrong"
        );
        assert_eq!(text(db.execute(&[b"FUNCTION", b"RESTORE", &payload])), "OK");
        assert_eq!(
            text(db.execute(&[b"FUNCTION", b"RESTORE", &payload])),
            "ERR Library lib already exists"
        );
        assert_eq!(
            text(db.execute(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"])),
            "OK"
        );
        assert_eq!(run(&mut db, &["FCALL", "set_it", "1", "k", "w"]), "OK");
        // The script's effect is logged, not the FCALL.
        let log = String::from_utf8_lossy(&db.take_changes().unwrap()).into_owned();
        assert!(log.contains("RESTORE") && log.contains("set") && !log.contains("FCALL"));
        assert_eq!(run(&mut db, &["GET", "k"]), "w");
    }
}
