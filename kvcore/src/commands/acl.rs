//! ACL: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, GENPASS, DRYRUN, LOG, LOAD, SAVE,
//! HELP over the process-wide users of [`crate::acl`].

use super::{args, cmd, flags::*, CommandSpec, Ctx};
use crate::acl::{self, CATEGORIES};

pub(super) static COMMANDS: &[CommandSpec] = &[cmd!("acl", -2, SENTINEL, 0, 0, 0, acl)];

/// ACL LOAD's and SAVE's error without an `aclfile`.
pub const NO_ACL_FILE: &[u8] = b"ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL GENPASS's largest `bits`.
const GENPASS_MAX_BITS: i64 = 4096;

fn acl(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if let Some(spec) = super::lookup(b"acl") {
        if let Err(e) = super::check_subcommand(spec, a) {
            c.out.out.extend_from_slice(&e);
            return;
        }
    }
    let sub = a[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"setuser" => setuser(c, a),
        b"deluser" => deluser(c, a),
        b"getuser" => getuser(c, a[2]),
        b"list" => {
            let lines = c.db.acl.list();
            c.out.array_len(lines.len());
            for l in lines {
                c.out.bulk(&l);
            }
        }
        b"users" => {
            let names = c.db.acl.user_names();
            c.out.array_len(names.len());
            for n in names {
                c.out.bulk(&n);
            }
        }
        b"whoami" => {
            let name = c.session.user.name().to_vec();
            c.out.bulk(&name);
        }
        // (A host with an `aclfile` reads and writes it itself: the store does no I/O.)
        b"load" | b"save" => c.out.error(NO_ACL_FILE),
        b"cat" => cat(c, a),
        b"genpass" => genpass(c, a),
        b"log" => log(c, a),
        b"dryrun" => dryrun(c, a),
        b"help" => c.out.help("acl", ACL_HELP),
        _ => super::unknown_subcommand(&mut c.out, "acl", a[1]),
    }
}

fn error_text(c: &mut Ctx<'_>, text: &[u8]) {
    let mut m = b"ERR ".to_vec();
    m.extend_from_slice(text);
    c.out.error(&super::sanitize(m));
}

fn setuser(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let name = a[2];
    if acl::has_spaces(name) {
        return c
            .out
            .error(b"ERR Usernames can't contain spaces or null characters");
    }
    match c.db.acl.set_user(name, &a[3..]) {
        Ok(()) => c.out.ok(),
        Err(e) => error_text(c, &e),
    }
}

fn deluser(c: &mut Ctx<'_>, a: &[&[u8]]) {
    if a[2..].iter().any(|n| *n == b"default") {
        return c.out.error(b"ERR The 'default' user cannot be removed");
    }
    let own = a[2..].iter().any(|n| *n == c.session.user.name());
    let n = c.db.acl.delete_users(&a[2..], c.session.id);
    if own {
        // As Redis: this client gets its reply, then is disconnected.
        c.session.close_after_reply = true;
    }
    c.out.int(n as i64);
}

fn getuser(c: &mut Ctx<'_>, name: &[u8]) {
    let Some(u) = c.db.acl.user(name) else {
        return c.out.null();
    };
    let w = &mut c.out;
    w.map_len(6);
    w.bulk(b"flags");
    let flags = u.flag_names();
    w.set_len(flags.len());
    for f in flags {
        w.bulk(f.as_bytes());
    }
    w.bulk(b"passwords");
    w.array_len(u.passwords.len());
    for p in &u.passwords {
        w.bulk(p);
    }
    let selectors = u.selectors();
    let describe = |w: &mut crate::resp::ReplyWriter<'_>, s: &acl::Selector| {
        w.bulk(b"commands");
        w.bulk(&s.command_rules());
        w.bulk(b"keys");
        w.bulk(&s.key_rules());
        w.bulk(b"channels");
        w.bulk(&s.channel_rules());
    };
    if let Some(root) = selectors.first() {
        describe(w, root);
    }
    w.bulk(b"selectors");
    w.array_len(selectors.len().saturating_sub(1));
    for s in selectors.iter().skip(1) {
        w.map_len(3);
        describe(w, s);
    }
}

fn cat(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match a {
        [_, _] => {
            c.out.array_len(CATEGORIES.len());
            for cat in CATEGORIES {
                c.out.bulk(cat.as_bytes());
            }
        }
        [_, _, name] => match acl::commands_in(name) {
            Some(names) => {
                c.out.array_len(names.len());
                for n in names {
                    c.out.bulk(n.as_bytes());
                }
            }
            None => {
                let mut m = b"ERR Unknown category '".to_vec();
                let name = super::c_str(name);
                m.extend_from_slice(&name[..name.len().min(128)]);
                m.push(b'\'');
                c.out.error(&super::sanitize(m));
            }
        },
        _ => super::wrong_arity(&mut c.out, "acl|cat"),
    }
}

fn genpass(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let bits = match a.get(2) {
        None => 256,
        Some(b) => match args::int(b) {
            Ok(n) => n,
            Err(e) => return c.out.error(e.message().as_bytes()),
        },
    };
    if !(1..=GENPASS_MAX_BITS).contains(&bits) {
        return c.out.error(b"ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096");
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut raw = vec![0u8; chars.div_ceil(2)];
    if getrandom::fill(&mut raw).is_err() {
        return c.out.error(b"ERR no source of randomness");
    }
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let hex: Vec<u8> = raw
        .iter()
        .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .take(chars)
        .collect();
    c.out.bulk(&hex);
}

fn log(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let count = match a.get(2) {
        None => 10,
        Some(arg) if arg.eq_ignore_ascii_case(b"reset") => {
            c.db.acl.log_reset();
            return c.out.ok();
        }
        Some(arg) => match args::int(arg) {
            Ok(n) => n.max(0) as usize,
            Err(e) => return c.out.error(e.message().as_bytes()),
        },
    };
    let entries = c.db.acl.log_entries(count);
    let now = c.db.now_ms();
    c.out.array_len(entries.len());
    for e in &entries {
        e.write(&mut c.out, now);
    }
}

fn dryrun(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let Some(user) = c.db.acl.user(a[2]) else {
        let mut m = b"ERR User '".to_vec();
        m.extend_from_slice(super::c_str(a[2]));
        m.extend_from_slice(b"' not found");
        return c.out.error(&super::sanitize(m));
    };
    let call = &a[3..];
    let Some((id, name)) = acl::lookup_call(call) else {
        let mut m = b"ERR Command '".to_vec();
        m.extend_from_slice(super::c_str(a[3]));
        m.extend_from_slice(b"' not found");
        return c.out.error(&super::sanitize(m));
    };
    let arity = super::docs::entry(name).map_or(0, |e| e.arity());
    let argc = call.len() as i64;
    if (arity > 0 && arity != argc) || argc < -arity {
        return super::wrong_arity(&mut c.out, name);
    }
    match user.check_id(id, call) {
        Ok(()) => c.out.ok(),
        Err(d) => {
            let m = acl::denial_message_verbose(d, user.name(), name, call);
            c.out.bulk(&m);
        }
    }
}

const ACL_HELP: &[&str] = &[
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
];
