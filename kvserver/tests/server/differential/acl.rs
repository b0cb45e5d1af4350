//! ACL against redis-server: the same steps, over several connections (an administrator, users
//! authenticated on their own connections), sent to kvserver and to a redis-server, replies
//! compared. Against Redis 7.4 (`REDIS_SERVER=...`) byte for byte, but for what is the host's
//! own: ACL LOG's `age-seconds`, `client-info` and timestamps, GENPASS's random digits.
//!
//! Against Debian's 7.0.15 (what CI has) the replies 7.2 changed are brought to one form on
//! both sides before comparing, and the cases are marked here:
//! - 7.2 reworded NOPERM: "this user has no permissions to access one of the keys used as
//!   arguments" became "No permissions to access a key" (channels alike), and "this user has no
//!   permissions to run the 'x' command" became "User <name> has no permissions to run the 'x'
//!   command" (the user's name is not compared against 7.0);
//! - 7.2 reworded a script's refusals ("The user executing the script can't ..." became "ACL
//!   failure in script: <the NOPERM text>") and DRYRUN's ("This user has ..." became "User
//!   <name> has ...");
//! - 7.2 shows the `sanitize-payload` flag in ACL LIST and GETUSER, and keeps command rules in
//!   the order given (a rule revoking a command stays, `-set`) where 7.0 rebuilt them from the
//!   bitmap: against 7.0 the flag is dropped and the adding rules after `+@all`/`-@all` are
//!   compared as a set;
//! - 7.2 added `entry-id`, `timestamp-created` and `timestamp-last-updated` to ACL LOG entries;
//! - 7.4's help ends in "Print this help." (7.0: "Prints").

use kvcore::resp::reply::{parse_reply, Value};

use super::{Cmd, Conn, Redis};
use crate::support::Server;

/// (connection, command). Connection 0 is the administrator (the default user).
const STEPS: &[(usize, &[&str])] = &[
    (0, &["ACL", "WHOAMI"]),
    (0, &["ACL", "USERS"]),
    (0, &["ACL", "LIST"]),
    (0, &["ACL", "GETUSER", "default"]),
    (0, &["ACL", "SETUSER", "bob"]),
    (0, &["ACL", "GETUSER", "bob"]),
    (
        0,
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">pw",
            "~k*",
            "%R~r*",
            "%W~w*",
            "&ch*",
            "+@read",
            "-get",
            "+set",
            "+mset",
            "+config|get",
            "+select|0",
            "+publish",
            "+subscribe",
            "+psubscribe",
            "+eval",
            "+multi",
            "+exec",
            "+acl|whoami",
            "+del",
        ],
    ),
    (0, &["ACL", "GETUSER", "bob"]),
    (0, &["ACL", "SETUSER", "bob", "+nosuch"]),
    (0, &["ACL", "SETUSER", "bob", "+@nosuch"]),
    (0, &["ACL", "SETUSER", "bob", "bogus"]),
    (0, &["ACL", "SETUSER", "bob", "allkeys", "~x"]),
    (0, &["ACL", "SETUSER", "bob", "<nope"]),
    (0, &["ACL", "SETUSER", "bob", "#abc"]),
    (0, &["ACL", "SETUSER", "bob", "+config|get|x"]),
    (0, &["ACL", "SETUSER", "bob", "+get|"]),
    (0, &["ACL", "SETUSER", "bob", "(+get", "~x"]),
    (0, &["ACL", "SETUSER", "a b"]),
    (0, &["ACL", "GETUSER", "bob"]),
    (0, &["ACL", "DRYRUN", "bob", "get", "k1"]),
    (0, &["ACL", "DRYRUN", "bob", "set", "x", "1"]),
    (0, &["ACL", "DRYRUN", "bob", "set", "r1", "1"]),
    (0, &["ACL", "DRYRUN", "bob", "strlen", "w1"]),
    (0, &["ACL", "DRYRUN", "bob", "publish", "zz", "m"]),
    (0, &["ACL", "DRYRUN", "bob", "config", "set", "a", "b"]),
    (0, &["ACL", "DRYRUN", "bob", "config", "get", "a"]),
    (0, &["ACL", "DRYRUN", "bob", "nosuch"]),
    (0, &["ACL", "DRYRUN", "nobody", "get", "x"]),
    (0, &["ACL", "DRYRUN", "bob", "get"]),
    (0, &["ACL", "CAT"]),
    (0, &["ACL", "CAT", "nosuch"]),
    (0, &["ACL", "GENPASS"]),
    (0, &["ACL", "GENPASS", "5"]),
    (0, &["ACL", "GENPASS", "0"]),
    (0, &["ACL", "GENPASS", "x"]),
    (0, &["ACL", "LOAD"]),
    (0, &["ACL", "SAVE"]),
    (0, &["ACL", "DELUSER", "default"]),
    (0, &["ACL", "NOSUCH"]),
    (0, &["ACL", "GETUSER"]),
    (0, &["ACL", "LOG", "x"]),
    (0, &["ACL", "HELP"]),
    (1, &["AUTH", "bob", "wrong"]),
    (1, &["AUTH", "nobody", "x"]),
    (1, &["AUTH", "x"]),
    (1, &["AUTH", "bob", "pw"]),
    (1, &["ACL", "WHOAMI"]),
    (1, &["ACL", "LIST"]),
    (1, &["SET", "k1", "v"]),
    (1, &["GET", "k1"]),
    (1, &["STRLEN", "k1"]),
    (1, &["STRLEN", "x"]),
    (1, &["SET", "r1", "v"]),
    (1, &["STRLEN", "r1"]),
    (1, &["SET", "w1", "v"]),
    (1, &["STRLEN", "w1"]),
    (1, &["MSET", "k1", "a", "x", "b"]),
    (1, &["MSET", "k1", "a", "k2", "b"]),
    (1, &["DEL", "k1", "r1"]),
    (1, &["FLUSHALL"]),
    (1, &["CONFIG", "GET", "maxmemory"]),
    (1, &["CONFIG", "SET", "maxmemory", "0"]),
    (1, &["SELECT", "0"]),
    (1, &["SELECT", "1"]),
    (1, &["PUBLISH", "ch1", "m"]),
    (1, &["PUBLISH", "zz", "m"]),
    (1, &["EVAL", "return redis.call('strlen','x')", "0"]),
    (1, &["EVAL", "return redis.pcall('strlen','x')", "0"]),
    (1, &["EVAL", "return redis.call('strlen','k2')", "0"]),
    (1, &["EVAL", "return redis.pcall('flushall')", "0"]),
    (1, &["EVAL", "return 1", "1", "x"]),
    (1, &["MULTI"]),
    (1, &["STRLEN", "k2"]),
    (1, &["STRLEN", "x"]),
    (1, &["EXEC"]),
    (1, &["MULTI"]),
    (1, &["SET", "k3", "1"]),
    (1, &["STRLEN", "k3"]),
    (1, &["PUBLISH", "ch2", "m"]),
    (0, &["ACL", "SETUSER", "bob", "-set", "resetchannels"]),
    (1, &["EXEC"]),
    (0, &["ACL", "SETUSER", "bob", "-exec"]),
    (1, &["MULTI"]),
    (1, &["EXEC"]),
    (1, &["EXEC"]),
    (1, &["PSUBSCRIBE", "ch*"]),
    (1, &["SUBSCRIBE", "zz"]),
    (0, &["ACL", "SETUSER", "bob", "&ch*", "&news"]),
    (1, &["PSUBSCRIBE", "ch1"]),
    (1, &["SUBSCRIBE", "news", "ch9"]),
    (2, &["AUTH", "bob", "pw"]),
    (2, &["HELLO", "2", "AUTH", "bob", "wrong"]),
    (2, &["ACL", "WHOAMI"]),
    (2, &["RESET"]),
    (2, &["ACL", "WHOAMI"]),
    (
        0,
        &[
            "ACL",
            "SETUSER",
            "carl",
            "on",
            "nopass",
            "+get",
            "(+set",
            "~s*)",
            "(+strlen ~t*)",
        ],
    ),
    (0, &["ACL", "GETUSER", "carl"]),
    (0, &["ACL", "LIST"]),
    (3, &["AUTH", "carl", "anything"]),
    (3, &["GET", "x"]),
    (3, &["SET", "s1", "v"]),
    (3, &["SET", "x", "v"]),
    (3, &["STRLEN", "t1"]),
    (3, &["STRLEN", "s1"]),
    (0, &["ACL", "SETUSER", "carl", "clearselectors", "reset"]),
    (0, &["ACL", "GETUSER", "carl"]),
    (0, &["ACL", "USERS"]),
    (0, &["ACL", "DELUSER", "carl", "nobody"]),
    (0, &["ACL", "USERS"]),
    (0, &["ACL", "LOG"]),
    (0, &["ACL", "LOG", "2"]),
    (0, &["ACL", "LOG", "RESET"]),
    (0, &["ACL", "LOG"]),
];

/// Whether the reference is older than 7.2 (see the module's notes).
fn old(redis: &Redis) -> bool {
    redis.version < (7, 2)
}

/// 7.0's wordings as 7.4's, and the user's name (which 7.0 does not say) left out.
fn canonical_text(s: &str) -> String {
    let s = s
        .replace(
            "this user has no permissions to access one of the keys used as arguments",
            "No permissions to access a key",
        )
        .replace(
            "this user has no permissions to access one of the channels used as arguments",
            "No permissions to access a channel",
        )
        .replace(
            "The user executing the script can't access at least one of the keys mentioned in the command arguments",
            "ACL failure in script: No permissions to access a key",
        )
        .replace(
            "The user executing the script can't run this command or subcommand",
            "ACL failure in script: a command refused",
        )
        .replace("this user has no permissions", "User ? has no permissions")
        .replace("This user has no permissions", "User ? has no permissions")
        .replace("Prints this help.", "Print this help.");
    // 7.4: "ACL failure in script: User bob has no permissions to run the 'x' command".
    let s = match (s.find("ACL failure in script: User "), s.find("' command")) {
        (Some(a), Some(b)) if a < b => format!(
            "{}ACL failure in script: a command refused{}",
            &s[..a],
            &s[b + "' command".len()..]
        ),
        _ => s,
    };
    match (s.find("User "), s.find(" has no permissions")) {
        (Some(a), Some(b)) if a < b => format!("{}User ?{}", &s[..a], &s[b..]),
        _ => s,
    }
}

/// A rules text as compared with 7.0: no `sanitize-payload`, command rules as a set.
fn canonical_rules(s: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut rules: Vec<&str> = Vec::new();
    for t in s.split(' ').filter(|t| *t != "sanitize-payload") {
        if t == "+@all" || t == "-@all" {
            rules.push(t);
        } else if !rules.is_empty() {
            if !t.starts_with('-') {
                rules.push(t);
            }
        } else {
            out.push(t.to_string());
        }
    }
    if let Some((first, rest)) = rules.split_first() {
        let mut rest = rest.to_vec();
        rest.sort_unstable();
        out.push(first.to_string());
        out.extend(rest.into_iter().map(str::to_string));
    }
    out.join(" ")
}

fn map_strings(v: Value, f: &dyn Fn(&str) -> String) -> Value {
    let text = |b: Vec<u8>| f(&String::from_utf8_lossy(&b)).into_bytes();
    match v {
        Value::Simple(b) => Value::Simple(text(b)),
        Value::Error(b) => Value::Error(text(b)),
        Value::Bulk(b) => Value::Bulk(text(b)),
        Value::Array(items) => Value::Array(items.into_iter().map(|i| map_strings(i, f)).collect()),
        Value::Set(items) => Value::Set(items.into_iter().map(|i| map_strings(i, f)).collect()),
        other => other,
    }
}

/// Keeps of each ACL LOG entry the fields that are not the host's own (and that 7.0 has).
fn log_fields(v: Value) -> Value {
    let Value::Array(entries) = v else { return v };
    let keep = ["count", "reason", "context", "object", "username"];
    Value::Array(
        entries
            .into_iter()
            .map(|e| match e {
                Value::Array(kv) => Value::Array(
                    kv.chunks(2)
                        .filter(|p| matches!(&p[0], Value::Bulk(k) if keep.contains(&String::from_utf8_lossy(k).as_ref())))
                        .flat_map(|p| p.to_vec())
                        .collect(),
                ),
                other => other,
            })
            .collect(),
    )
}

/// A reply as compared (see the module's notes).
fn normalize(cmd: &[&str], reply: &[u8], old: bool) -> String {
    let Ok(Some((mut v, _))) = parse_reply(reply) else {
        return String::from_utf8_lossy(reply).into_owned();
    };
    let sub = cmd
        .get(1)
        .map(|s| s.to_ascii_uppercase())
        .unwrap_or_default();
    if cmd[0] == "ACL" {
        match sub.as_str() {
            "LOG" if cmd.len() < 3 || cmd[2] != "RESET" => v = log_fields(v),
            // Random digits: their number is compared.
            "GENPASS" => {
                if let Value::Bulk(b) = &v {
                    return format!("{} random hex digits", b.len());
                }
            }
            // Redis lists a category's commands in its hash table's order.
            "CAT" if cmd.len() == 3 => {
                if let Value::Array(items) = &mut v {
                    items.sort_by_key(|i| format!("{i:?}"));
                }
            }
            "LIST" | "GETUSER" if old => {
                v = map_strings(v, &|s| {
                    if s == "sanitize-payload" {
                        String::new()
                    } else {
                        canonical_rules(s)
                    }
                });
                if let Value::Array(items) = &mut v {
                    if let Some(Value::Array(flags)) = items.get_mut(1) {
                        flags.retain(|f| !matches!(f, Value::Bulk(b) if b.is_empty()));
                    }
                }
            }
            _ => {}
        }
    }
    if old {
        v = map_strings(v, &canonical_text);
    }
    show(&v)
}

/// A reply as readable text.
fn show(v: &Value) -> String {
    let list = |items: &[Value]| items.iter().map(show).collect::<Vec<_>>().join(", ");
    match v {
        Value::Simple(b) => format!("+{}", String::from_utf8_lossy(b)),
        Value::Error(b) => format!("-{}", String::from_utf8_lossy(b)),
        Value::Bulk(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Value::Array(items) => format!("[{}]", list(items)),
        Value::Set(items) => format!("~[{}]", list(items)),
        other => format!("{other:?}"),
    }
}

fn run(port: u16) -> Vec<Vec<u8>> {
    let conns = STEPS.iter().map(|s| s.0).max().unwrap_or(0) + 1;
    let mut c: Vec<Conn> = (0..conns).map(|_| Conn::open(port)).collect();
    STEPS
        .iter()
        .map(|(i, args)| {
            let cmd: Cmd = args.iter().map(|a| a.as_bytes().to_vec()).collect();
            c[*i].pipeline(&[cmd]).remove(0)
        })
        .collect()
}

#[test]
fn acl_steps_as_redis() {
    let redis = Redis::start();
    let theirs = run(redis.port);
    for threads in ["1", "3"] {
        let server = Server::start(&["--threads", threads]);
        let ours = run(server.port);
        for ((step, o), t) in STEPS.iter().zip(&ours).zip(&theirs) {
            let (o, t) = (
                normalize(step.1, o, old(&redis)),
                normalize(step.1, t, old(&redis)),
            );
            assert_eq!(o, t, "threads {threads}, step {step:?}");
        }
    }
}

/// An ACL file every line of which Redis refuses for a different reason.
const BAD_ACL_FILE: &str = "user alice on >pw ~k* +get\n  user bob off  +set\nuser alice on\nusr x\nuser\nuser carol +nosuch +@nosuch bogus ~a allkeys ~b\nuser dave (+get ~x\nuser eve on #abc\n\n";

/// One server's session with its ACL file at `path`: ACL SAVE (and the file it wrote), ACL
/// LOAD of a bad file, of a good one (ends of lines, two spaces, no default user), of none.
/// Replies and file lines, with the path as `FILE` (the servers' files differ).
fn acl_file_session(port: u16, path: &str, old: bool) -> Vec<String> {
    let mut c = Conn::open(port);
    let mut seen = Vec::new();
    let send = |c: &mut Conn, args: &[&str]| {
        let cmd: Cmd = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let reply = c.pipeline(&[cmd]).remove(0);
        normalize(args, &reply, old).replace(path, "FILE")
    };
    let file = |seen: &mut Vec<String>| {
        for line in std::fs::read_to_string(path).unwrap().lines() {
            seen.push(if old {
                canonical_rules(line)
            } else {
                line.to_string()
            });
        }
    };
    seen.push(send(
        &mut c,
        &["ACL", "SETUSER", "zed", "on", ">z", "+@read", "~*"],
    ));
    seen.push(send(&mut c, &["ACL", "SAVE"]));
    file(&mut seen);
    std::fs::write(path, BAD_ACL_FILE).unwrap();
    seen.push(send(&mut c, &["ACL", "LOAD"]));
    seen.push(send(&mut c, &["ACL", "LIST"]));
    std::fs::write(
        path,
        "user alice on >pw ~k* +get\t\r\n  user bob off  -@all +set\n",
    )
    .unwrap();
    seen.push(send(&mut c, &["ACL", "LOAD"]));
    seen.push(send(&mut c, &["ACL", "LIST"]));
    std::fs::remove_file(path).unwrap();
    seen.push(send(&mut c, &["ACL", "LOAD"]));
    seen.push(send(&mut c, &["ACL", "SAVE"]));
    file(&mut seen);
    seen
}

#[test]
fn acl_files_as_redis() {
    let dir = crate::persistence::TempDir::new("diff-aclfile");
    let start = "user alice on >pw ~k* +get\n";
    let theirs_path = format!("{}/redis.acl", dir.path());
    std::fs::write(&theirs_path, start).unwrap();
    let redis = Redis::start_with(&["--aclfile", &theirs_path]);
    let theirs = acl_file_session(redis.port, &theirs_path, old(&redis));
    for threads in ["1", "3"] {
        let ours_path = format!("{}/ours-{threads}.acl", dir.path());
        std::fs::write(&ours_path, start).unwrap();
        let server = Server::start(&["--threads", threads, "--aclfile", &ours_path]);
        let ours = acl_file_session(server.port, &ours_path, old(&redis));
        assert_eq!(ours, theirs, "threads {threads}");
        server.terminate();
    }
}
