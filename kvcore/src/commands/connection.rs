//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT ID/SETNAME/GETNAME.
//!
//! CLIENT LIST, INFO and KILL need the server's view of every connection; a server answers
//! those itself before dispatching here.

use super::{args, cmd, flags::*, unknown_subcommand, wrong_arity, CommandSpec, Ctx};
use crate::resp::Proto;

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("ping", -1, FAST | SENTINEL, 0, 0, 0, ping),
    cmd!("echo", 2, LOADING | STALE | FAST, 0, 0, 0, echo),
    cmd!(
        "hello",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL,
        0,
        0,
        0,
        hello
    ),
    cmd!(
        "auth",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL,
        0,
        0,
        0,
        auth
    ),
    cmd!("select", 2, LOADING | STALE | FAST, 0, 0, 0, select),
    cmd!(
        "quit",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH,
        0,
        0,
        0,
        quit
    ),
    cmd!(
        "reset",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH,
        0,
        0,
        0,
        reset
    ),
    cmd!("client", -2, SENTINEL, 0, 0, 0, client),
];

fn ping(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match a {
        [_] => c.out.simple(b"PONG"),
        [_, msg] => c.out.bulk(msg),
        _ => wrong_arity(&mut c.out, "ping"),
    }
}

fn echo(c: &mut Ctx<'_>, a: &[&[u8]]) {
    c.out.bulk(a[1]);
}

/// Client names may not hold spaces, newlines or other special characters.
/// Redis 7.2+'s `validateClientAttr` (client names, CLIENT SETINFO values): printable ASCII
/// without spaces, so that CLIENT LIST splits on spaces. It reads a C string: what follows a
/// NUL is not checked (and is kept), as 7.4 does (7.0 checked every byte of a name).
fn valid_name(n: &[u8]) -> bool {
    super::c_str(n).iter().all(|&b| (b'!'..=b'~').contains(&b))
}

const BAD_NAME: &[u8] = b"ERR Client names cannot contain spaces, newlines or special characters.";

/// Authenticates the client as `user` (AUTH, HELLO AUTH): on success the session's user and
/// authentication change; on failure the refusal goes to ACL LOG (as `a[0]` was spelled).
fn authenticate(c: &mut Ctx<'_>, a0: &[u8], user: &[u8], pass: &[u8]) -> bool {
    if c.db.acl.authenticate(user, pass) {
        c.session.user.set(user);
        c.session.authenticated = true;
        return true;
    }
    let now = c.db.now_ms();
    c.db.acl.log(
        crate::acl::Reason::Auth,
        crate::acl::Context::Toplevel,
        a0,
        user,
        c.session.id,
        now,
    );
    false
}

const WRONGPASS: &[u8] = b"WRONGPASS invalid username-password pair or user is disabled.";

fn hello(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let mut proto = c.session.proto;
    if let Some(v) = a.get(1) {
        match args::int(v) {
            Ok(2) => proto = Proto::Resp2,
            Ok(3) => proto = Proto::Resp3,
            Ok(_) => return c.out.error(b"NOPROTO unsupported protocol version"),
            Err(_) => {
                return c
                    .out
                    .error(b"ERR Protocol version is not an integer or out of range")
            }
        }
    }
    let mut name = None;
    let mut auth = None;
    let mut i = 2;
    while i < a.len() {
        let more = a.len() - i - 1;
        if args::is(a[i], "AUTH") && more >= 2 {
            auth = Some((a[i + 1], a[i + 2]));
            i += 3;
        } else if args::is(a[i], "SETNAME") && more >= 1 {
            // As Redis: the name is checked where it is read, before the options after it
            // and before authentication.
            if !valid_name(a[i + 1]) {
                return c.out.error(BAD_NAME);
            }
            name = Some(a[i + 1]);
            i += 2;
        } else {
            // Redis formats the option with %s: a NUL ends it.
            let mut msg = b"ERR Syntax error in HELLO option '".to_vec();
            msg.extend_from_slice(super::c_str(a[i]));
            msg.push(b'\'');
            return c.out.error(&super::sanitize(msg));
        }
    }
    c.db.acl.sync_requirepass(&c.db.config.requirepass);
    if let Some((user, pass)) = auth {
        if !authenticate(c, a[0], user, pass) {
            return c.out.error(WRONGPASS);
        }
    }
    if !c.session.authenticated && !c.db.acl.default_open() {
        return c.out.error(
            b"NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        );
    }
    if let Some(n) = name {
        c.session.name = (!n.is_empty()).then(|| n.to_vec());
    }
    c.session.proto = proto;
    c.out.proto = proto;
    let w = &mut c.out;
    w.map_len(7);
    w.bulk(b"server");
    w.bulk(b"redis");
    w.bulk(b"version");
    w.bulk(crate::REDIS_VERSION.as_bytes());
    w.bulk(b"proto");
    w.int(if proto == Proto::Resp3 { 3 } else { 2 });
    w.bulk(b"id");
    w.int(c.session.id as i64);
    w.bulk(b"mode");
    w.bulk(b"standalone");
    w.bulk(b"role");
    w.bulk(b"master");
    w.bulk(b"modules");
    w.array_len(0);
}

fn auth(c: &mut Ctx<'_>, a: &[&[u8]]) {
    c.db.acl.sync_requirepass(&c.db.config.requirepass);
    let (user, pass): (&[u8], &[u8]) = match a {
        [_, p] => (b"default", *p),
        [_, u, p] => (*u, *p),
        _ => return c.out.error(b"ERR syntax error"),
    };
    if a.len() == 2 && c.db.acl.user(b"default").is_some_and(|u| u.nopass()) {
        return c.out.error(b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
    }
    if authenticate(c, a[0], user, pass) {
        c.out.ok();
    } else {
        c.out.error(WRONGPASS);
    }
}

fn select(c: &mut Ctx<'_>, a: &[&[u8]]) {
    match args::int32(a[1]) {
        Err(e) => c.out.error(e.message().as_bytes()),
        Ok(i) if i < 0 || i as usize >= c.db.databases() => {
            c.out.error(b"ERR DB index is out of range")
        }
        Ok(i) => {
            c.session.db = i as usize;
            c.out.ok();
        }
    }
}

fn quit(c: &mut Ctx<'_>, _a: &[&[u8]]) {
    c.session.close_after_reply = true;
    c.out.ok();
}

fn reset(c: &mut Ctx<'_>, _a: &[&[u8]]) {
    c.session.db = 0;
    c.session.proto = Proto::Resp2;
    c.session.name = None;
    // Not LIB-NAME and LIB-VER: they still describe the client's library.
    c.session.no_touch = false;
    c.session.no_evict = false;
    c.session.reply_off = false;
    c.session.reply_skip = false;
    c.session.user.set(b"default");
    c.session.authenticated = c.db.acl.default_open();
    c.out.proto = Proto::Resp2;
    c.out.simple(b"RESET");
}

fn client(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let sub = a[1];
    if args::is(sub, "ID") {
        if a.len() != 2 {
            return wrong_arity(&mut c.out, "client|id");
        }
        c.out.int(c.session.id as i64);
    } else if args::is(sub, "SETNAME") {
        if a.len() != 3 {
            return wrong_arity(&mut c.out, "client|setname");
        }
        if !valid_name(a[2]) {
            return c.out.error(BAD_NAME);
        }
        c.session.name = (!a[2].is_empty()).then(|| a[2].to_vec());
        c.out.ok();
    } else if args::is(sub, "GETNAME") {
        if a.len() != 2 {
            return wrong_arity(&mut c.out, "client|getname");
        }
        match &c.session.name {
            Some(n) => c.out.bulk(n),
            None => c.out.null(),
        }
    } else if args::is(sub, "SETINFO") {
        if a.len() != 4 {
            return wrong_arity(&mut c.out, "client|setinfo");
        }
        let slot = if args::is(a[2], "LIB-NAME") {
            &mut c.session.lib_name
        } else if args::is(a[2], "LIB-VER") {
            &mut c.session.lib_ver
        } else {
            let mut m = b"ERR Unrecognized option '".to_vec();
            m.extend_from_slice(super::c_str(a[2]));
            m.push(b'\'');
            return c.out.error(&super::sanitize(m));
        };
        // Redis's validateClientAttr: CLIENT LIST must stay splittable on spaces.
        if !valid_name(a[3]) {
            let mut m = b"ERR ".to_vec();
            m.extend_from_slice(a[2]);
            m.extend_from_slice(b" cannot contain spaces, newlines or special characters.");
            return c.out.error(&super::sanitize(m));
        }
        *slot = (!a[3].is_empty()).then(|| a[3].to_vec());
        c.out.ok();
    } else if args::is(sub, "NO-EVICT") || args::is(sub, "NO-TOUCH") {
        let name = if args::is(sub, "NO-EVICT") {
            "client|no-evict"
        } else {
            "client|no-touch"
        };
        if a.len() != 3 {
            return wrong_arity(&mut c.out, name);
        }
        let on = if args::is(a[2], "ON") {
            true
        } else if args::is(a[2], "OFF") {
            false
        } else {
            return c.out.error(b"ERR syntax error");
        };
        if name == "client|no-evict" {
            c.session.no_evict = on;
        } else {
            c.session.no_touch = on;
        }
        c.out.ok();
    } else if args::is(sub, "REPLY") {
        if a.len() != 3 {
            return wrong_arity(&mut c.out, "client|reply");
        }
        // OFF and SKIP answer nothing (the host drops replies while they hold).
        if args::is(a[2], "ON") {
            c.session.reply_off = false;
            c.session.reply_skip_now = false;
            c.out.ok();
        } else if args::is(a[2], "OFF") {
            c.session.reply_off = true;
        } else if args::is(a[2], "SKIP") {
            if !c.session.reply_off {
                c.session.reply_skip = true;
            }
        } else {
            c.out.error(b"ERR syntax error");
        }
    } else if args::is(sub, "UNBLOCK") && (a.len() == 3 || a.len() == 4) {
        // Nobody blocks in the embedded store (a server answers this itself).
        if a.len() == 4 && !args::is(a[3], "TIMEOUT") && !args::is(a[3], "ERROR") {
            return c
                .out
                .error(b"ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
        }
        match args::int(a[2]) {
            Ok(_) => c.out.int(0),
            Err(e) => super::strings::reply_err(&mut c.out, e),
        }
    } else if args::is(sub, "HELP") && a.len() == 2 {
        c.out.help("client", CLIENT_HELP);
    } else {
        unknown_subcommand(&mut c.out, "client", sub);
    }
}

const CLIENT_HELP: &[&str] = &[
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
];
