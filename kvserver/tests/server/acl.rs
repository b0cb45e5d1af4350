//! ACL with 1 and 3 shards: users made on one connection bind clients on every shard at once,
//! every route a command can take (here, another shard, several shards, the connection's own
//! pub/sub and transactions, blocking commands, scripts) is checked, deleted users' clients
//! are disconnected, ACL LOG records what Redis records, and hostile rules answer errors.
//! The texts are Redis 7.4's (see `differential/acl.rs` for the byte-for-byte comparison).

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::differential::Rng;
use crate::support::{call, closed, cmd, encode, key_on, read_replies, Server};

const SHARDS: [usize; 2] = [1, 3];

const NO_KEY: &str = "-NOPERM No permissions to access a key\r\n";
const NO_CHANNEL: &str = "-NOPERM No permissions to access a channel\r\n";

fn no_cmd(user: &str, cmd: &str) -> String {
    format!("-NOPERM User {user} has no permissions to run the '{cmd}' command\r\n")
}

/// Sends one command given as separate arguments (spaces allowed) and returns its reply.
fn call_args(s: &mut TcpStream, args: &[&str]) -> String {
    let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
    s.write_all(&encode(&a)).unwrap();
    String::from_utf8_lossy(&read_replies(s, 1)[0]).into_owned()
}

/// Several connections, so that with 3 shards some land on each (SO_REUSEPORT spreads them).
fn clients(server: &Server, n: usize) -> Vec<TcpStream> {
    (0..n).map(|_| server.raw()).collect()
}

/// Sends `cmd`, which must answer +OK.
fn ok(s: &mut TcpStream, cmd: &str) {
    assert_eq!(call(s, cmd), "+OK\r\n", "{cmd}");
}

fn auth(s: &mut TcpStream, user: &str, pass: &str) {
    ok(s, &format!("AUTH {user} {pass}"));
}

#[test]
fn users_bind_clients_on_every_shard_at_once() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut admin = server.raw();
        ok(
            &mut admin,
            "ACL SETUSER bob on >pw ~k* %R~r* +@all -@dangerous",
        );
        let mut bobs = clients(&server, 6);
        for b in &mut bobs {
            auth(b, "bob", "pw");
            assert_eq!(call(b, "ACL WHOAMI"), "$3\r\nbob\r\n");
            assert_eq!(call(b, "ACL LIST"), no_cmd("bob", "acl|list"));
        }
        for (i, b) in bobs.iter_mut().enumerate() {
            for s in 0..n {
                // Keys of every shard: here, on another shard (one hop), through the plain lane.
                let k = key_on("k", s, n, i);
                let x = key_on("x", s, n, i);
                let r = key_on("r", s, n, i);
                ok(b, &format!("SET {k} v"));
                assert_eq!(call(b, &format!("GET {k}")), "$1\r\nv\r\n");
                assert_eq!(call(b, &format!("GET {x}")), NO_KEY);
                assert_eq!(call(b, &format!("GET {r}")), "$-1\r\n");
                assert_eq!(call(b, &format!("SET {r} v")), NO_KEY, "read-only pattern");
            }
            // Keys of several shards (a command spanning shards).
            let (k0, k1) = (key_on("k", 0, n, 50), key_on("k", n - 1, n, 51));
            let x1 = key_on("x", n - 1, n, 52);
            ok(b, &format!("MSET {k0} 1 {k1} 2"));
            assert_eq!(call(b, &format!("MSET {k0} 1 {x1} 2")), NO_KEY);
            assert_eq!(call(b, "FLUSHALL"), no_cmd("bob", "flushall"));
            assert_eq!(call(b, "KEYS *"), no_cmd("bob", "keys"));
        }
        // A change made on one connection holds for the next command of every client.
        ok(&mut admin, "ACL SETUSER bob -get");
        for (i, b) in bobs.iter_mut().enumerate() {
            let k = key_on("k", i % n, n, 0);
            assert_eq!(call(b, &format!("GET {k}")), no_cmd("bob", "get"));
            assert_eq!(call(b, "CONFIG GET maxmemory"), no_cmd("bob", "config|get"));
        }
        // The unrestricted default user, restricted later: its clients are checked from then on.
        let mut others = clients(&server, 4);
        for o in &mut others {
            assert_eq!(call(o, "GET k"), "$-1\r\n");
        }
        ok(&mut admin, "ACL SETUSER default -get");
        for o in &mut others {
            assert_eq!(call(o, "GET k"), no_cmd("default", "get"));
            ok(o, "SET k v");
        }
        ok(&mut admin, "ACL SETUSER default +get");
        for o in &mut others {
            assert_eq!(call(o, "GET k"), "$1\r\nv\r\n");
        }
    }
}

#[test]
fn auth_hello_reset_and_client_list() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut admin = server.raw();
        ok(&mut admin, "ACL SETUSER amy on >a1 >a2 +@all ~*");
        ok(&mut admin, "ACL SETUSER off1 off nopass +@all");
        let mut c = server.raw();
        let wrong = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
        assert_eq!(call(&mut c, "AUTH amy nope"), wrong);
        assert_eq!(call(&mut c, "AUTH nobody x"), wrong);
        assert_eq!(call(&mut c, "AUTH off1 x"), wrong, "a disabled user");
        assert_eq!(
            call(&mut c, "AUTH x"),
            "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
        );
        ok(&mut c, "AUTH amy a2");
        assert_eq!(call(&mut c, "ACL WHOAMI"), "$3\r\namy\r\n");
        let info = call(&mut c, "CLIENT INFO");
        assert!(info.contains(" user=amy "), "{info}");
        let list = call(&mut admin, "CLIENT LIST");
        assert_eq!(list.matches(" user=amy ").count(), 1, "{list}");
        assert_eq!(call(&mut c, "HELLO 2 AUTH amy bad"), wrong);
        assert!(call(&mut c, "HELLO 3 AUTH default x").starts_with('%'));
        assert_eq!(call(&mut c, "ACL WHOAMI"), "$7\r\ndefault\r\n");
        ok(&mut c, "AUTH amy a1");
        assert_eq!(call(&mut c, "RESET"), "+RESET\r\n");
        assert_eq!(call(&mut c, "ACL WHOAMI"), "$7\r\ndefault\r\n");
        // Disabling a user leaves its connections working (as in Redis); it cannot log in.
        ok(&mut c, "AUTH amy a1");
        ok(&mut admin, "ACL SETUSER amy off");
        assert_eq!(call(&mut c, "PING"), "+PONG\r\n");
        assert_eq!(call(&mut server.raw(), "AUTH amy a1"), wrong);
        // CLIENT KILL USER.
        assert_eq!(
            call(&mut admin, "CLIENT KILL USER nobody"),
            "-ERR No such user 'nobody'\r\n"
        );
        assert_eq!(call(&mut admin, "CLIENT KILL USER amy"), ":1\r\n");
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(closed(&mut c));
    }
}

#[test]
fn requirepass_is_the_default_users_password() {
    let server = Server::start(&["--threads", "3", "--requirepass", "pw"]);
    let mut c = server.raw();
    assert_eq!(
        call(&mut c, "GET k"),
        "-NOAUTH Authentication required.\r\n"
    );
    ok(&mut c, "AUTH default pw");
    let list = call(&mut c, "ACL LIST");
    assert!(
        list.contains("user default on sanitize-payload #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~* &* +@all"),
        "{list}"
    );
    // ACL SETUSER default nopass opens the server: new clients need no AUTH.
    ok(&mut c, "ACL SETUSER default nopass");
    assert_eq!(call(&mut server.raw(), "GET k"), "$-1\r\n");
    ok(&mut c, "CONFIG SET requirepass other");
    assert_eq!(
        call(&mut server.raw(), "GET k"),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(call(&mut server.raw(), "AUTH other"), "+OK\r\n");
    assert_eq!(
        call_args(&mut c, &["CONFIG", "SET", "requirepass", ""]),
        "+OK\r\n"
    );
    assert_eq!(call(&mut server.raw(), "GET k"), "$-1\r\n");
}

#[test]
fn deleted_users_clients_are_disconnected() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut admin = server.raw();
        ok(&mut admin, "ACL SETUSER dan on nopass +@all ~* &*");
        let mut dans = clients(&server, 5);
        for d in &mut dans {
            auth(d, "dan", "x");
        }
        // One subscribed client, held by its mailbox rather than a read.
        let mut sub = server.raw();
        auth(&mut sub, "dan", "x");
        sub.write_all(&encode(&[b"SUBSCRIBE", b"ch"])).unwrap();
        read_replies(&mut sub, 1);
        assert_eq!(
            call(&mut admin, "ACL DELUSER default"),
            "-ERR The 'default' user cannot be removed\r\n"
        );
        assert_eq!(call(&mut admin, "ACL DELUSER dan nobody"), ":1\r\n");
        for d in dans.iter_mut().chain([&mut sub]) {
            d.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            assert!(closed(d), "a client of a deleted user stays");
        }
        // Deleting one's own user: the reply comes, then the connection closes.
        ok(&mut admin, "ACL SETUSER eve on nopass +@all");
        let mut eve = server.raw();
        auth(&mut eve, "eve", "x");
        assert_eq!(call(&mut eve, "ACL DELUSER eve"), ":1\r\n");
        eve.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(closed(&mut eve));
        assert_eq!(call(&mut admin, "PING"), "+PONG\r\n");
    }
}

/// What `s` receives until the server closes it (`None`: still open after 5 s).
fn rest_until_closed(s: &mut TcpStream) -> Option<Vec<u8>> {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return Some(got),
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(got),
            Err(_) => return None,
        }
    }
}

/// A subscriber whose user loses a channel it listens to (or the literal pattern it
/// subscribed with) is disconnected at once, as Redis does, sent nothing more; subscribers the
/// new rules still allow stay.
#[test]
fn subscribers_whose_channels_are_revoked_are_disconnected() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut admin = server.raw();
        ok(
            &mut admin,
            "ACL SETUSER sub on nopass +@all resetchannels &news.* &alerts",
        );
        let mut subs = clients(&server, 3);
        for s in &mut subs {
            auth(s, "sub", "x");
        }
        let (a, rest) = subs.split_at_mut(1);
        let (b, c) = rest.split_at_mut(1);
        let (a, b, c) = (&mut a[0], &mut b[0], &mut c[0]);
        assert_eq!(
            call(a, "SUBSCRIBE news.1"),
            "*3\r\n$9\r\nsubscribe\r\n$6\r\nnews.1\r\n:1\r\n"
        );
        assert_eq!(
            call(b, "PSUBSCRIBE news.*"),
            "*3\r\n$10\r\npsubscribe\r\n$6\r\nnews.*\r\n:1\r\n"
        );
        assert_eq!(
            call(c, "SUBSCRIBE alerts"),
            "*3\r\n$9\r\nsubscribe\r\n$6\r\nalerts\r\n:1\r\n"
        );
        assert_eq!(call(&mut admin, "PUBLISH news.1 before"), ":2\r\n");
        assert_eq!(
            read_replies(a, 1)[0],
            b"*3\r\n$7\r\nmessage\r\n$6\r\nnews.1\r\n$6\r\nbefore\r\n"
        );
        read_replies(b, 1);
        // `&news.1` allows the channel news.1, not the pattern `news.*`, which must be
        // written so in the rules: the pattern subscriber goes, with nothing published.
        ok(&mut admin, "ACL SETUSER sub resetchannels &alerts &news.1");
        assert_eq!(rest_until_closed(b), Some(Vec::new()));
        assert_eq!(call(&mut admin, "PUBLISH news.1 after"), ":1\r\n");
        assert_eq!(
            read_replies(a, 1)[0],
            b"*3\r\n$7\r\nmessage\r\n$6\r\nnews.1\r\n$5\r\nafter\r\n",
            "news.1 is still allowed"
        );
        ok(&mut admin, "ACL SETUSER sub resetchannels &alerts");
        assert_eq!(rest_until_closed(a), Some(Vec::new()));
        assert_eq!(call(&mut admin, "PUBLISH news.1 later"), ":0\r\n");
        assert_eq!(call(&mut admin, "PUBLISH alerts still"), ":1\r\n");
        assert_eq!(
            read_replies(c, 1)[0],
            b"*3\r\n$7\r\nmessage\r\n$6\r\nalerts\r\n$5\r\nstill\r\n"
        );
        ok(&mut admin, "ACL SETUSER sub resetchannels");
        assert_eq!(rest_until_closed(c), Some(Vec::new()));
        assert_eq!(call(&mut admin, "PING"), "+PONG\r\n");
    }
}

#[test]
fn channels_transactions_blocking_and_scripts() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut admin = server.raw();
        ok(
            &mut admin,
            "ACL SETUSER fay on nopass +@all -flushall ~k* &news.*",
        );
        let mut c = server.raw();
        auth(&mut c, "fay", "x");
        assert_eq!(call(&mut c, "PUBLISH news.a m"), ":0\r\n");
        assert_eq!(call(&mut c, "PUBLISH other m"), NO_CHANNEL);
        assert_eq!(call(&mut c, "SPUBLISH other m"), NO_CHANNEL);
        assert_eq!(call(&mut c, "SUBSCRIBE news.a other"), NO_CHANNEL);
        assert_eq!(
            call(&mut c, "PSUBSCRIBE news.a"),
            NO_CHANNEL,
            "literal patterns"
        );
        assert_eq!(
            call(&mut c, "PSUBSCRIBE news.*"),
            "*3\r\n$10\r\npsubscribe\r\n$6\r\nnews.*\r\n:1\r\n"
        );
        assert_eq!(
            call(&mut c, "PUNSUBSCRIBE"),
            "*3\r\n$12\r\npunsubscribe\r\n$6\r\nnews.*\r\n:0\r\n"
        );
        // Blocking commands: refused before they wait.
        assert_eq!(call(&mut c, "BLPOP x 0"), NO_KEY);
        assert_eq!(call(&mut c, "BLPOP k1 0.01"), "*-1\r\n");
        // MULTI: a refusal at queue time aborts the transaction.
        ok(&mut c, "MULTI");
        assert_eq!(call(&mut c, "SET k1 1"), "+QUEUED\r\n");
        assert_eq!(call(&mut c, "SET x 1"), NO_KEY);
        assert_eq!(
            call(&mut c, "EXEC"),
            "-EXECABORT Transaction discarded because of previous errors.\r\n"
        );
        // At EXEC the queued commands are checked again against the rules of then.
        let (k0, k1) = (key_on("k", 0, n, 0), key_on("k", n - 1, n, 1));
        ok(&mut c, "MULTI");
        assert_eq!(call(&mut c, &format!("SET {k0} 1")), "+QUEUED\r\n");
        assert_eq!(call(&mut c, &format!("GET {k1}")), "+QUEUED\r\n");
        assert_eq!(call(&mut c, "PUBLISH news.x m"), "+QUEUED\r\n");
        ok(&mut admin, "ACL SETUSER fay -set resetchannels");
        let prefix = "-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: ";
        assert_eq!(
            call(&mut c, "EXEC"),
            format!(
                "*3\r\n{prefix}no permission to execute the command or subcommand\r\n$-1\r\n{prefix}no permission to access one of the channels used as arguments\r\n"
            )
        );
        // A refused EXEC discards the transaction.
        ok(&mut admin, "ACL SETUSER fay -exec");
        ok(&mut c, "MULTI");
        assert_eq!(
            call(&mut c, "EXEC"),
            "-EXECABORT Transaction discarded because of: NOPERM User fay has no permissions to run the 'exec' command\r\n"
        );
        assert_eq!(call(&mut c, "DISCARD"), "-ERR DISCARD without MULTI\r\n");
        // Scripts: each redis.call is checked against the caller's user, on one shard or
        // several.
        ok(&mut admin, "ACL SETUSER fay +set");
        let (x0, x1) = (key_on("x", 0, n, 0), key_on("x", n - 1, n, 1));
        let script = "redis.call('set',KEYS[1],'v') return redis.call('get',KEYS[2])";
        assert_eq!(
            call_args(&mut c, &["EVAL", script, "2", &k0, &k1]),
            "$-1\r\n"
        );
        // Declared keys are checked with the EVAL itself.
        assert_eq!(call_args(&mut c, &["EVAL", script, "2", &k0, &x1]), NO_KEY);
        // Keys the script names on its own are checked as it calls.
        let undeclared = "redis.call('set',KEYS[1],'v') return redis.call('get',ARGV[1])";
        let r = call_args(
            &mut c,
            &["EVAL", undeclared, "1", &k0, &key_on("x", 0, n, 0)],
        );
        assert!(
            r.starts_with("-ERR ACL failure in script: No permissions to access a key script:"),
            "{r}"
        );
        let r = call_args(&mut c, &["EVAL", undeclared, "2", &k0, &k1, &x1]);
        assert!(
            r.starts_with("-ERR ACL failure in script: No permissions to access a key script:"),
            "{r}"
        );
        let r = call_args(&mut c, &["EVAL", "return redis.pcall('flushall')", "0"]);
        assert_eq!(
            r,
            "-ERR ACL failure in script: User fay has no permissions to run the 'flushall' command\r\n"
        );
        assert_eq!(call_args(&mut c, &["EVAL", script, "2", &x0, &k1]), NO_KEY);
        // The refusals are in the log: the EXEC's in the multi context, the scripts' in lua.
        let log = call(&mut admin, "ACL LOG 20");
        for want in [
            "$5\r\nmulti\r\n",
            "$3\r\nlua\r\n",
            "$8\r\ntoplevel\r\n",
            "$7\r\nchannel\r\n",
        ] {
            assert!(log.contains(want), "{want} in {log}");
        }
    }
}

/// ACL LOG entries: fields, merging of alike refusals, the count, RESET and acllog-max-len.
#[test]
fn acl_log_entries() {
    let server = Server::start(&["--threads", "2"]);
    let mut admin = server.raw();
    ok(&mut admin, "ACL SETUSER gus on >pw +get ~k*");
    let mut c = server.raw();
    auth(&mut c, "gus", "pw");
    for _ in 0..3 {
        assert_eq!(call(&mut c, "GET x"), NO_KEY);
    }
    assert_eq!(call(&mut c, "SET k v"), no_cmd("gus", "set"));
    assert_eq!(
        call(&mut c, "AUTH gus wrong"),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    let log = call(&mut admin, "ACL LOG");
    // Three entries, newest first; the three GETs are one entry counted three times.
    assert!(log.starts_with("*3\r\n*20\r\n$5\r\ncount\r\n:1\r\n$6\r\nreason\r\n$4\r\nauth\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$4\r\nAUTH\r\n$8\r\nusername\r\n$3\r\ngus\r\n$11\r\nage-seconds\r\n"), "{log}");
    assert!(log.contains("$6\r\nreason\r\n$7\r\ncommand\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$3\r\nset\r\n"), "{log}");
    assert!(log.contains("$5\r\ncount\r\n:3\r\n$6\r\nreason\r\n$3\r\nkey\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$1\r\nx\r\n"), "{log}");
    assert!(log.contains(" user=gus "), "client-info: {log}");
    assert!(log.contains("$8\r\nentry-id\r\n:0\r\n$17\r\ntimestamp-created\r\n:"));
    assert!(call(&mut admin, "ACL LOG 1").starts_with("*1\r\n"));
    assert_eq!(call(&mut admin, "ACL LOG -5"), "*0\r\n");
    assert_eq!(
        call(&mut admin, "ACL LOG x"),
        "-ERR value is not an integer or out of range\r\n"
    );
    let info = call(&mut admin, "INFO stats");
    for want in [
        "acl_access_denied_auth:1",
        "acl_access_denied_cmd:1",
        "acl_access_denied_key:3",
        "acl_access_denied_channel:0",
    ] {
        assert!(info.contains(want), "{want} in {info}");
    }
    ok(&mut admin, "ACL LOG RESET");
    assert_eq!(call(&mut admin, "ACL LOG"), "*0\r\n");
    ok(&mut admin, "CONFIG SET acllog-max-len 1");
    assert_eq!(call(&mut c, "GET y"), NO_KEY);
    assert_eq!(call(&mut c, "GET z"), NO_KEY);
    assert!(call(&mut admin, "ACL LOG").starts_with("*1\r\n"));
}

#[test]
fn acl_subcommands_and_errors() {
    let server = Server::start(&["--threads", "2"]);
    let mut c = server.raw();
    assert_eq!(call(&mut c, "ACL USERS"), "*1\r\n$7\r\ndefault\r\n");
    assert_eq!(call(&mut c, "ACL WHOAMI"), "$7\r\ndefault\r\n");
    assert_eq!(
        call(&mut c, "ACL GETUSER default"),
        "*12\r\n$5\r\nflags\r\n*3\r\n$2\r\non\r\n$6\r\nnopass\r\n$16\r\nsanitize-payload\r\n$9\r\npasswords\r\n*0\r\n$8\r\ncommands\r\n$5\r\n+@all\r\n$4\r\nkeys\r\n$2\r\n~*\r\n$8\r\nchannels\r\n$2\r\n&*\r\n$9\r\nselectors\r\n*0\r\n"
    );
    assert_eq!(call(&mut c, "ACL GETUSER nobody"), "$-1\r\n");
    assert_eq!(
        call(&mut c, "ACL GETUSER"),
        "-ERR wrong number of arguments for 'acl|getuser' command\r\n"
    );
    assert_eq!(
        call(&mut c, "ACL NOSUCH"),
        "-ERR unknown subcommand 'NOSUCH'. Try ACL HELP.\r\n"
    );
    assert_eq!(
        call(&mut c, "ACL SETUSER bob +nosuch"),
        "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n"
    );
    assert_eq!(
        call_args(&mut c, &["ACL", "SETUSER", "a b"]),
        "-ERR Usernames can't contain spaces or null characters\r\n"
    );
    assert_eq!(
        call(&mut c, "ACL USERS"),
        "*1\r\n$7\r\ndefault\r\n",
        "nothing made"
    );
    let cats = call(&mut c, "ACL CAT");
    assert!(
        cats.starts_with("*21\r\n$8\r\nkeyspace\r\n$4\r\nread\r\n"),
        "{cats}"
    );
    let read = call(&mut c, "ACL CAT read");
    assert!(read.contains("$3\r\nget\r\n") && !read.contains("$3\r\nset\r\n"));
    assert_eq!(
        call(&mut c, "ACL CAT nosuch"),
        "-ERR Unknown category 'nosuch'\r\n"
    );
    let pass = call(&mut c, "ACL GENPASS");
    assert!(pass.starts_with("$64\r\n"), "{pass}");
    assert_ne!(pass, call(&mut c, "ACL GENPASS"));
    assert!(call(&mut c, "ACL GENPASS 5").starts_with("$2\r\n"));
    assert_eq!(
        call(&mut c, "ACL GENPASS 0"),
        "-ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096\r\n"
    );
    for sub in ["LOAD", "SAVE"] {
        assert!(call(&mut c, &format!("ACL {sub}"))
            .starts_with("-ERR This Redis instance is not configured to use an ACL file."));
    }
    ok(&mut c, "ACL SETUSER hal on +get ~k*");
    ok(&mut c, "ACL DRYRUN hal get k1");
    assert_eq!(
        call(&mut c, "ACL DRYRUN hal get x"),
        "$49\r\nUser hal has no permissions to access the 'x' key\r\n"
    );
    assert_eq!(
        call(&mut c, "ACL DRYRUN hal set k1 v"),
        "$52\r\nUser hal has no permissions to run the 'set' command\r\n"
    );
    assert_eq!(
        call(&mut c, "ACL DRYRUN hal nosuch"),
        "-ERR Command 'nosuch' not found\r\n"
    );
    assert_eq!(
        call(&mut c, "ACL DRYRUN nobody get k"),
        "-ERR User 'nobody' not found\r\n"
    );
    assert_eq!(
        call(&mut c, "ACL DRYRUN hal get"),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    let help = call(&mut c, "ACL HELP");
    assert!(help.contains("+    Return the current connection username.\r\n"));
}

/// Random rules and calls, malformed on purpose: each gets one reply, the server stays up,
/// and a user whose rules were refused is unchanged.
#[test]
fn hostile_rules_answer_errors() {
    let server = Server::start(&["--threads", "2"]);
    let mut c = server.raw();
    let tokens: &[&[u8]] = &[
        b"",
        b"on",
        b"off",
        b"(",
        b")",
        b"()",
        b"(+get",
        b"~x)",
        b"%",
        b"%R",
        b"%RR~a",
        b"%W~",
        b"~",
        b"&",
        b"+",
        b"-",
        b"+@",
        b"-@",
        b"+|",
        b"+get|",
        b"+config|",
        b"+config|get|x",
        b"+||",
        b"-config|get",
        b"+select|0",
        b"#",
        b"!",
        b">",
        b"<",
        b"<x",
        b"#0123",
        b"~a b",
        b"&\0",
        b"+\0get",
        b"nopass",
        b"resetpass",
        b"reset",
        b"allkeys",
        b"~*",
        b"&*",
        b"+@all",
        b"-@all",
        b"+@READ",
        b"clearselectors",
        b"(~a (+get))",
        b"\xff\xfe",
        b"\r\n",
        b"%RW~*",
    ];
    ok(&mut c, "ACL SETUSER fuzz");
    let mut rng = Rng(7);
    for round in 0..400 {
        let mut args: Vec<Vec<u8>> = vec![b"ACL".to_vec(), b"SETUSER".to_vec(), b"fuzz".to_vec()];
        for _ in 0..rng.below(6) {
            let mut t = tokens[rng.below(tokens.len())].to_vec();
            if rng.below(4) == 0 {
                t.extend_from_slice(tokens[rng.below(tokens.len())]);
            }
            args.push(t);
        }
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        c.write_all(&encode(&refs)).unwrap();
        let reply = read_replies(&mut c, 1).remove(0);
        assert!(
            reply == b"+OK\r\n" || reply.starts_with(b"-ERR "),
            "round {round}: {:?} -> {}",
            args,
            String::from_utf8_lossy(&reply)
        );
        // Whatever was refused, the user is still there and described.
        let list = call(&mut c, "ACL GETUSER fuzz");
        assert!(list.starts_with("*12\r\n"), "{list}");
        for q in [
            &[b"ACL" as &[u8], b"DRYRUN", b"fuzz", b"get", b"k"][..],
            &[b"ACL", b"DRYRUN", b"fuzz", b"config", b"\0"],
            &[b"ACL", b"DRYRUN", b"fuzz", b"publish", b"ch", b"m"],
        ] {
            c.write_all(&encode(q)).unwrap();
            read_replies(&mut c, 1);
        }
    }
    let long = "x".repeat(100_000);
    ok(&mut c, &format!("ACL SETUSER {long} ~{long}"));
    assert!(call(&mut c, &format!("ACL CAT {long}")).starts_with("-ERR Unknown category 'xxx"));
    assert_eq!(call(&mut c, &format!("ACL DELUSER {long}")), ":1\r\n");
    assert_eq!(call(&mut c, "PING"), "+PONG\r\n");
}

/// A rule change inside a pipeline applies to the pipeline's next command, express ones too
/// (GET and SET ask the store whether it admits the client once for a run of them: a command
/// of another kind ends the run).
#[test]
fn a_rule_change_applies_to_the_next_command_of_a_pipeline() {
    for n in SHARDS {
        let server = Server::start(&["--threads", &n.to_string()]);
        let mut s = server.raw();
        // A first command alone: the client's user is then known to pass every check, so the
        // pipeline's first SET takes the express lane.
        ok(&mut s, "SET k0 x");
        let cmds = [
            "SET k1 a",
            "GET k1",
            "ACL SETUSER default -set",
            "SET k2 b",
            "GET k1",
            "SET k2 b",
            "ACL SETUSER default +set",
            "SET k2 c",
            "GET k2",
        ];
        let wire: Vec<u8> = cmds.iter().flat_map(|c| cmd(c)).collect();
        s.write_all(&wire).unwrap();
        let got: Vec<String> = read_replies(&mut s, cmds.len())
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        let denied = no_cmd("default", "set");
        let want = [
            "+OK\r\n",
            "$1\r\na\r\n",
            "+OK\r\n",
            &denied,
            "$1\r\na\r\n",
            &denied,
            "+OK\r\n",
            "+OK\r\n",
            "$1\r\nc\r\n",
        ];
        assert_eq!(got, want, "{n} shards");
    }
}
