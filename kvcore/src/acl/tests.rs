//! Rule parsing, descriptions and checks, against what Redis 7.4 answers.

use super::*;
use crate::commands::lookup;

fn acl_with(name: &[u8], rules: &[&str]) -> Acl {
    let acl = Acl::default();
    let rules: Vec<&[u8]> = rules.iter().map(|r| r.as_bytes()).collect();
    acl.set_user(name, &rules).unwrap();
    acl
}

fn describe(acl: &Acl, name: &[u8]) -> String {
    String::from_utf8(acl.user(name).unwrap().describe()).unwrap()
}

fn check(acl: &Acl, name: &[u8], args: &[&str]) -> Result<(), Denial> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let spec = lookup(args[0]).unwrap();
    let (id, _) = command_of(spec, &args).unwrap();
    acl.user(name).unwrap().check_id(id, &args)
}

#[test]
fn default_user_and_new_users() {
    let acl = Acl::default();
    assert_eq!(
        describe(&acl, b"default"),
        "on nopass sanitize-payload ~* &* +@all"
    );
    assert!(acl.user(b"default").unwrap().unrestricted());
    acl.set_user(b"bob", &[]).unwrap();
    assert_eq!(
        describe(&acl, b"bob"),
        "off sanitize-payload resetchannels -@all"
    );
    assert!(!acl.authenticate(b"bob", b""), "off");
    assert_eq!(acl.user_names(), vec![b"bob".to_vec(), b"default".to_vec()]);
}

#[test]
fn rules_as_redis_shows_them() {
    let acl = acl_with(
        b"u",
        &[
            "on",
            ">p1",
            "~a*",
            "%R~r*",
            "%W~w*",
            "%RW~b*",
            "&ch*",
            "+@read",
            "-get",
            "+config|get",
            "+select|0",
            "+GET",
        ],
    );
    let hash = std::str::from_utf8(&sha256::hex(b"p1"))
        .unwrap()
        .to_string();
    assert_eq!(
        describe(&acl, b"u"),
        format!(
            "on sanitize-payload #{hash} ~a* %R~r* %W~w* ~b* resetchannels &ch* -@all +@read +config|get +select|0 +get"
        )
    );
    // A later rule for a command replaces its earlier ones (and those of its subcommands).
    acl.set_user(b"u", &[b"-config"]).unwrap();
    assert!(describe(&acl, b"u").ends_with("+@read +select|0 +get -config"));
    acl.set_user(b"u", &[b"+@all", b"-@dangerous"]).unwrap();
    assert!(describe(&acl, b"u").ends_with("+@all -@dangerous"));
    acl.set_user(b"u", &[b"reset"]).unwrap();
    assert_eq!(
        describe(&acl, b"u"),
        "off sanitize-payload resetchannels -@all"
    );
}

#[test]
fn rule_errors_apply_nothing() {
    let acl = acl_with(b"u", &["on", "~k*"]);
    let err = |rules: &[&str]| {
        let rules: Vec<&[u8]> = rules.iter().map(|r| r.as_bytes()).collect();
        String::from_utf8(acl.set_user(b"u", &rules).unwrap_err()).unwrap()
    };
    assert_eq!(
        err(&["+get", "+nosuch"]),
        "Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
    );
    assert_eq!(
        err(&["+@nosuch"]),
        "Error in ACL SETUSER modifier '+@nosuch': Unknown command or category name in ACL"
    );
    assert_eq!(
        err(&["bogus"]),
        "Error in ACL SETUSER modifier 'bogus': Syntax error"
    );
    assert!(err(&["allkeys", "~x"]).contains("'allkeys' flag"));
    assert!(err(&["allchannels", "&x"]).contains("'allchannels' flag"));
    assert!(err(&["<nope"]).contains("does not exist"));
    assert!(err(&["#abc"]).contains("exactly 64 characters"));
    assert!(err(&["+config|get|x"]).contains("first-arg of a subcommand"));
    assert_eq!(
        err(&["+get|"]),
        "Error in ACL SETUSER modifier '+get|': Syntax error"
    );
    assert!(err(&["%X~a"]).contains("Syntax error"));
    assert_eq!(
        err(&["(+get", "~a"]),
        "Unmatched parenthesis in acl selector starting at '(+get'."
    );
    // Nothing of the failed calls stuck.
    assert_eq!(
        describe(&acl, b"u"),
        "on sanitize-payload ~k* resetchannels -@all"
    );
}

#[test]
fn passwords() {
    let acl = acl_with(b"u", &["on", ">secret", ">other"]);
    assert!(acl.authenticate(b"u", b"secret"));
    assert!(acl.authenticate(b"u", b"other"));
    assert!(!acl.authenticate(b"u", b"nope"));
    assert!(!acl.authenticate(b"nobody", b"secret"));
    acl.set_user(b"u", &[b"<secret"]).unwrap();
    assert!(!acl.authenticate(b"u", b"secret"));
    let hash = sha256::hex(b"h");
    let mut op = b"#".to_vec();
    op.extend_from_slice(&hash);
    acl.set_user(b"u", &[&op]).unwrap();
    assert!(acl.authenticate(b"u", b"h"));
    acl.set_user(b"u", &[b"nopass"]).unwrap();
    assert!(acl.authenticate(b"u", b"anything"));
    acl.set_user(b"u", &[b"resetpass"]).unwrap();
    assert!(!acl.authenticate(b"u", b"anything"));
    acl.set_default_password(b"pw");
    assert!(!acl.default_open());
    assert!(acl.authenticate(b"default", b"pw"));
    acl.set_default_password(b"");
    assert!(acl.default_open());
}

#[test]
fn commands_keys_and_channels() {
    let acl = acl_with(
        b"u",
        &[
            "on",
            "+@all",
            "-flushall",
            "~k*",
            "%R~r*",
            "%W~w*",
            "&news.*",
        ],
    );
    assert_eq!(check(&acl, b"u", &["get", "k1"]), Ok(()));
    assert_eq!(check(&acl, b"u", &["get", "x"]), Err(Denial::Key(1)));
    assert_eq!(check(&acl, b"u", &["flushall"]), Err(Denial::Command));
    // Read-only patterns serve reads, write-only ones writes.
    assert_eq!(check(&acl, b"u", &["get", "r1"]), Ok(()));
    assert_eq!(check(&acl, b"u", &["set", "r1", "v"]), Err(Denial::Key(1)));
    assert_eq!(check(&acl, b"u", &["set", "w1", "v"]), Ok(()));
    assert_eq!(check(&acl, b"u", &["get", "w1"]), Err(Denial::Key(1)));
    assert_eq!(
        check(&acl, b"u", &["set", "w1", "v", "GET"]),
        Err(Denial::Key(1))
    );
    assert_eq!(check(&acl, b"u", &["copy", "r1", "w1"]), Ok(()));
    assert_eq!(
        check(&acl, b"u", &["mset", "k1", "v", "x", "v"]),
        Err(Denial::Key(3))
    );
    // Channels: names against patterns; a PSUBSCRIBE pattern must be one of them.
    assert_eq!(check(&acl, b"u", &["publish", "news.a", "m"]), Ok(()));
    assert_eq!(
        check(&acl, b"u", &["publish", "other", "m"]),
        Err(Denial::Channel(1))
    );
    assert_eq!(
        check(&acl, b"u", &["subscribe", "news.a", "x"]),
        Err(Denial::Channel(2))
    );
    assert_eq!(check(&acl, b"u", &["psubscribe", "news.*"]), Ok(()));
    assert_eq!(
        check(&acl, b"u", &["psubscribe", "news.a"]),
        Err(Denial::Channel(1))
    );
    assert_eq!(check(&acl, b"u", &["unsubscribe", "zzz"]), Ok(()));
}

#[test]
fn subcommands_first_args_and_selectors() {
    let acl = acl_with(b"u", &["on", "+config|get", "+select|0", "+auth"]);
    assert_eq!(check(&acl, b"u", &["config", "get", "x"]), Ok(()));
    assert_eq!(
        check(&acl, b"u", &["config", "set", "x", "y"]),
        Err(Denial::Command)
    );
    assert_eq!(check(&acl, b"u", &["select", "0"]), Ok(()));
    assert_eq!(check(&acl, b"u", &["select", "1"]), Err(Denial::Command));
    // Commands that need no authentication are never refused.
    assert_eq!(check(&acl, b"u", &["hello"]), Ok(()));
    // A selector adds what the root one lacks.
    acl.set_user(b"u", &[b"(+get", b"~s*)"]).unwrap();
    assert!(describe(&acl, b"u").ends_with(" (~s* resetchannels -@all +get)"));
    assert_eq!(check(&acl, b"u", &["get", "s1"]), Ok(()));
    assert_eq!(check(&acl, b"u", &["get", "x"]), Err(Denial::Key(1)));
    assert_eq!(check(&acl, b"u", &["set", "s1", "v"]), Err(Denial::Command));
    acl.set_user(b"u", &[b"clearselectors"]).unwrap();
    assert_eq!(check(&acl, b"u", &["get", "s1"]), Err(Denial::Command));
}

#[test]
fn epochs_and_sessions() {
    let acl = Acl::default();
    let mut s = Session::default();
    assert!(!acl.is_free(&s), "a new session looks its user up once");
    assert!(acl.refresh(&mut s).is_some());
    assert!(acl.is_free(&s));
    acl.set_user(b"bob", &[b"on", b"nopass", b"+get"]).unwrap();
    assert!(!acl.is_free(&s), "any change makes every client look again");
    acl.refresh(&mut s);
    assert!(acl.is_free(&s));
    s.user.set(b"bob");
    acl.refresh(&mut s);
    assert!(!acl.is_free(&s), "bob is restricted");
    acl.delete_users(&[b"bob"], 0);
    assert!(acl.refresh(&mut s).is_none());
}

#[test]
fn log_merges_alike_refusals() {
    let acl = Acl::default();
    acl.log(Reason::Key, Context::Toplevel, b"k", b"bob", 1, 1000);
    acl.log(Reason::Key, Context::Toplevel, b"k", b"bob", 2, 2000);
    acl.log(Reason::Command, Context::Multi, b"get", b"bob", 2, 3000);
    let e = acl.log_entries(10);
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].reason, Reason::Command);
    assert_eq!((e[1].count, e[1].created, e[1].updated), (2, 1000, 2000));
    // Past a minute apart they are separate.
    acl.log(Reason::Key, Context::Toplevel, b"k", b"bob", 1, 100_000);
    assert_eq!(acl.log_entries(10).len(), 3);
    acl.configure(false, 2);
    assert_eq!(acl.log_entries(10).len(), 2);
    acl.log_reset();
    assert!(acl.log_entries(10).is_empty());
    assert_eq!(acl.denied_counts(), [0, 1, 3, 0]);
}

#[test]
fn selector_rules_split_as_redis_splits_them() {
    let s = |l: &str| crate::resp::parse::split_words(l.as_bytes());
    assert_eq!(
        s("a  'b c' \"d\\x41\\n\""),
        Some(vec![b"a".to_vec(), b"b c".to_vec(), b"dA\n".to_vec()])
    );
    assert_eq!(s("\"unterminated"), None);
    assert_eq!(s("\"a\"b"), None);
    assert_eq!(s("   "), Some(vec![]));
}

#[test]
fn embedded_store_enforces_its_users() {
    let mut db = crate::Db::new();
    let e = |db: &mut crate::Db, a: &[&str]| {
        let a: Vec<&[u8]> = a.iter().map(|x| x.as_bytes()).collect();
        db.execute(&a)
    };
    use crate::Reply;
    assert_eq!(
        e(
            &mut db,
            &["ACL", "SETUSER", "bob", "on", ">pw", "+get", "~k*"]
        ),
        Reply::Simple(b"OK".to_vec())
    );
    assert_eq!(
        e(&mut db, &["AUTH", "bob", "nope"]),
        Reply::Error(WRONGPASS_TEXT.to_vec())
    );
    assert_eq!(
        e(&mut db, &["AUTH", "bob", "pw"]),
        Reply::Simple(b"OK".to_vec())
    );
    assert_eq!(e(&mut db, &["GET", "k1"]), Reply::Null);
    assert_eq!(
        e(&mut db, &["GET", "x"]),
        Reply::Error(b"NOPERM No permissions to access a key".to_vec())
    );
    assert_eq!(
        e(&mut db, &["SET", "k1", "v"]),
        Reply::Error(b"NOPERM User bob has no permissions to run the 'set' command".to_vec())
    );
    assert_eq!(
        e(&mut db, &["ACL", "WHOAMI"]),
        Reply::Error(
            b"NOPERM User bob has no permissions to run the 'acl|whoami' command".to_vec()
        )
    );
}

const WRONGPASS_TEXT: &[u8] = b"WRONGPASS invalid username-password pair or user is disabled.";

/// An ACL file Redis 7.4.1 refuses, and what ACL LOAD answered it (after `ERR `).
const BAD_FILE: &str = "user alice on >pw ~k* +get\n  user bob off  +set\nuser alice on\nusr x\nuser\nuser carol +nosuch +@nosuch bogus ~a allkeys ~b\nuser dave (+get ~x\nuser eve on #abc\n\n";
const BAD_FILE_ERRORS: &str = "WARNING: Duplicate user 'alice' found on line 3. users.acl:4 should start with user keyword followed by the username. users.acl:5 should start with user keyword followed by the username. users.acl:6: Error in applying operation '+nosuch': Unknown command or category name in ACL. users.acl:6: Error in applying operation '+@nosuch': Unknown command or category name in ACL. users.acl:6: Syntax error. users.acl:7: Unmatched parenthesis in selector definition.users.acl:8: The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters. WARNING: ACL errors detected, no change to the previously active ACL rules was performed";

#[test]
fn a_bad_acl_file_changes_nothing_and_names_every_bad_line() {
    let acl = acl_with(b"zed", &["on", ">zz", "+ping"]);
    let before = acl.list();
    let epoch = acl.epoch();
    let err = acl.load(BAD_FILE.as_bytes(), "users.acl", 0).unwrap_err();
    assert_eq!(String::from_utf8(err).unwrap(), BAD_FILE_ERRORS);
    assert_eq!(acl.list(), before);
    assert_eq!(acl.epoch(), epoch, "nothing changed, nobody looks again");
    assert!(acl.authenticate(b"zed", b"zz"));
}

#[test]
fn an_acl_file_replaces_every_user() {
    let acl = acl_with(b"zed", &["on", ">zz", "+ping"]);
    acl.set_user(b"alice", &[b"on", b">old"]).unwrap();
    // Redis 7.4.1 loads this (tabs and a carriage return at the ends of a line, two spaces
    // between rules, no default user) into the ACL LIST below.
    let file = "user alice on >pw ~k* +get\t\r\n  user bob off  -@all +set\n";
    let gone = acl.load(file.as_bytes(), "users.acl", 0).unwrap();
    assert_eq!(
        gone,
        vec![b"zed".to_vec()],
        "the users the file does not have"
    );
    let list: Vec<String> = (acl.list().into_iter())
        .map(|l| String::from_utf8(l).unwrap())
        .collect();
    assert_eq!(
        list,
        [
            "user alice on sanitize-payload #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~k* resetchannels -@all +get",
            "user bob off sanitize-payload resetchannels -@all +set",
            "user default on nopass sanitize-payload ~* &* +@all",
        ]
    );
    assert!(acl.authenticate(b"alice", b"pw"));
    assert!(!acl.authenticate(b"alice", b"old"));
    assert!(acl.user(b"zed").is_none());
    assert!(acl.default_open());
}

#[test]
fn the_saved_file_loads_back_to_the_same_users() {
    let acl = acl_with(
        b"bob",
        &["on", ">pw", "~k*", "%R~r*", "&ch*", "+@read", "-get"],
    );
    acl.set_user(b"sel", &[b"on", b"nopass", b"(+set ~s*)", b"(+get ~g*)"])
        .unwrap();
    acl.set_user(b"default", &[b">secret"]).unwrap();
    let text = acl.file_text();
    assert!(text.ends_with(b"\n"));
    let copy = Acl::default();
    assert_eq!(copy.load(&text, "f", 0).unwrap(), Vec::<Vec<u8>>::new());
    assert_eq!(copy.list(), acl.list());
    assert!(
        !copy.default_open(),
        "the default user's password came along"
    );
}
