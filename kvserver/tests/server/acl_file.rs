//! Users that outlive the process: an `aclfile` read at the start, ACL SAVE and ACL LOAD, the
//! config file's `user` lines and CONFIG REWRITE, with 1 and 3 shards. The error texts are
//! Redis 7.4.1's (`differential/acl.rs` compares them with a redis-server's).

use std::process::{Command, Stdio};

use crate::persistence::TempDir;
use crate::support::{call, closed, Server};

const SHARDS: [usize; 2] = [1, 3];

fn auth(server: &Server, user: &str, pass: &str) -> std::net::TcpStream {
    let mut s = server.raw();
    assert_eq!(call(&mut s, &format!("AUTH {user} {pass}")), "+OK\r\n");
    s
}

/// ACL LIST's lines, read as an array of bulk strings.
fn acl_list(s: &mut std::net::TcpStream) -> Vec<String> {
    let reply = call(s, "ACL LIST");
    let mut lines = reply.split("\r\n");
    let n: usize = lines.next().unwrap()[1..].parse().unwrap();
    (0..n)
        .map(|_| {
            lines.next().unwrap();
            lines.next().unwrap().to_string()
        })
        .collect()
}

/// The lines of the text `path` holds.
fn file_lines(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(str::to_string).collect()
}

/// `kvserver ARGS` that must refuse to start: its exit code and what it said.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kvserver"))
        .args(["--port", "0"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("kvserver runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn acl_save_and_load_keep_users_across_restarts() {
    for shards in SHARDS {
        let dir = TempDir::new(&format!("aclfile-{shards}"));
        let path = format!("{}/users.acl", dir.path());
        std::fs::write(&path, "user alice on >pw ~k* +@all\n").unwrap();
        let threads = shards.to_string();
        let args = ["--threads", &threads, "--aclfile", &path];
        let server = Server::start(&args);
        let mut admin = server.raw();
        let mut alice = auth(&server, "alice", "pw");
        assert_eq!(call(&mut alice, "SET k1 v"), "+OK\r\n");
        assert_eq!(
            call(&mut alice, "SET x v"),
            "-NOPERM No permissions to access a key\r\n"
        );
        assert_eq!(call(&mut admin, "ACL SETUSER bob on >b ~* +get"), "+OK\r\n");
        assert_eq!(call(&mut admin, "ACL SAVE"), "+OK\r\n");
        let saved = acl_list(&mut admin);
        assert_eq!(saved.len(), 3, "{saved:?}");
        assert_eq!(file_lines(&path), saved, "ACL SAVE writes ACL LIST's lines");
        drop(alice);
        server.terminate();

        // A new process reads the saved users.
        let server = Server::start(&args);
        let mut admin = server.raw();
        assert_eq!(acl_list(&mut admin), saved);
        let mut bob = auth(&server, "bob", "b");
        let mut alice = auth(&server, "alice", "pw");

        // A bad file: every bad line named, nothing changed, nobody disconnected.
        std::fs::write(&path, "user alice on\nuser alice off\nusr x\n").unwrap();
        assert_eq!(
            call(&mut admin, "ACL LOAD"),
            format!("-ERR WARNING: Duplicate user 'alice' found on line 2. {path}:3 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n")
        );
        assert_eq!(acl_list(&mut admin), saved);
        assert_eq!(call(&mut alice, "SET k1 w"), "+OK\r\n");

        // A file without alice: her clients go, bob's rules change under his open client.
        std::fs::write(&path, "user bob on >b ~* +set\n").unwrap();
        assert_eq!(call(&mut admin, "ACL LOAD"), "+OK\r\n");
        assert!(
            closed(&mut alice),
            "the removed user's client is disconnected"
        );
        assert_eq!(
            call(&mut bob, "GET k1"),
            "-NOPERM User bob has no permissions to run the 'get' command\r\n"
        );
        assert_eq!(call(&mut bob, "SET k2 v"), "+OK\r\n");
        assert_eq!(
            acl_list(&mut admin),
            [
                // (#... is the SHA-256 of "b".)
                "user bob on sanitize-payload #3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d ~* resetchannels -@all +set",
                "user default on nopass sanitize-payload ~* &* +@all",
            ]
        );

        // A missing file: Redis's words, nothing changed.
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            call(&mut admin, "ACL LOAD"),
            format!(
                "-ERR Error loading ACLs, opening file '{path}': No such file or directory\r\n"
            )
        );
        assert_eq!(acl_list(&mut admin).len(), 2);
        server.terminate();
    }
}

#[test]
fn acl_load_of_a_file_without_the_callers_user_closes_it_after_the_reply() {
    let dir = TempDir::new("aclfile-self");
    let path = format!("{}/users.acl", dir.path());
    std::fs::write(&path, "user root on >r ~* &* +@all\n").unwrap();
    let server = Server::start(&["--aclfile", &path]);
    let mut root = auth(&server, "root", "r");
    std::fs::write(&path, "user other on >o +@all\n").unwrap();
    assert_eq!(call(&mut root, "ACL LOAD"), "+OK\r\n");
    assert!(closed(&mut root));
    server.terminate();
}

#[test]
fn without_an_acl_file_load_and_save_say_so() {
    let server = Server::start(&[]);
    let mut s = server.raw();
    let text = "-ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.\r\n";
    assert_eq!(call(&mut s, "ACL LOAD"), text);
    assert_eq!(call(&mut s, "ACL SAVE"), text);
    assert_eq!(
        call(&mut s, "CONFIG SET aclfile /tmp/x.acl"),
        "-ERR CONFIG SET failed (possibly related to argument 'aclfile') - can't set immutable config\r\n"
    );
    server.terminate();
}

#[test]
fn the_start_refuses_bad_acl_files_and_users_in_both_places() {
    let dir = TempDir::new("aclfile-start");
    let missing = format!("{}/none.acl", dir.path());
    let (code, err) = refused(&["--aclfile", &missing]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!(
            "Error loading ACLs, opening file '{missing}': No such file or directory"
        )),
        "{err}"
    );
    let bad = format!("{}/bad.acl", dir.path());
    std::fs::write(&bad, "user a on +nosuch\n").unwrap();
    let (code, err) = refused(&["--aclfile", &bad]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!("Aborting startup because of ACL errors: {bad}:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. ")),
        "{err}"
    );
    let good = format!("{}/good.acl", dir.path());
    std::fs::write(&good, "user a on\n").unwrap();
    let (code, err) = refused(&["--aclfile", &good, "--user", "b on"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not both"), "{err}");
    let (code, err) = refused(&["--user", "b on +nosuch"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("Error in user declaration 'b on +nosuch'"),
        "{err}"
    );
}

#[test]
fn config_file_users_are_created_and_config_rewrite_writes_the_users() {
    for shards in SHARDS {
        let dir = TempDir::new(&format!("conf-users-{shards}"));
        let conf = format!("{}/kv.conf", dir.path());
        std::fs::write(
            &conf,
            // (`dir` here: CONFIG REWRITE writes it, and the next start needs it to exist.)
            format!("threads {shards}\ndir {}\nuser alice on >pw ~* +@all\n# the admin\nuser default on >admin ~* &* +@all\nsave \"\"\n", dir.path()),
        )
        .unwrap();
        let server = Server::start_from(Some(&conf), &[]);
        let mut admin = server.raw();
        assert_eq!(
            call(&mut admin, "PING"),
            "-NOAUTH Authentication required.\r\n"
        );
        assert_eq!(call(&mut admin, "AUTH admin"), "+OK\r\n");
        let mut alice = auth(&server, "alice", "pw");
        assert_eq!(call(&mut alice, "SET k v"), "+OK\r\n");
        assert_eq!(call(&mut admin, "ACL SETUSER bob on >b +get ~*"), "+OK\r\n");
        assert_eq!(call(&mut admin, "ACL DELUSER alice"), ":1\r\n");
        assert_eq!(call(&mut admin, "CONFIG REWRITE"), "+OK\r\n");
        let users: Vec<String> = file_lines(&conf)
            .into_iter()
            .filter(|l| l.starts_with("user "))
            .collect();
        assert_eq!(users, acl_list(&mut admin), "the users as they are now");
        let text = std::fs::read_to_string(&conf).unwrap();
        assert!(text.contains("# the admin\n"), "{text}");
        server.terminate();

        let server = Server::start_from(Some(&conf), &[]);
        let mut bob = auth(&server, "bob", "b");
        assert_eq!(call(&mut bob, "GET k"), "$-1\r\n");
        let mut s = server.raw();
        assert_eq!(
            call(&mut s, "AUTH alice pw"),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        );
        server.terminate();
    }
}

/// A relative `aclfile` is in `dir`, where Redis (which changes to `dir`) finds it; errors
/// name it as configured.
#[test]
fn a_relative_acl_file_is_in_dir() {
    let dir = TempDir::new("aclfile-relative");
    let path = format!("{}/users.acl", dir.path());
    std::fs::write(&path, "user alice on >pw ~* +@all\n").unwrap();
    let server = Server::start(&["--dir", dir.path(), "--aclfile", "users.acl"]);
    let mut alice = auth(&server, "alice", "pw");
    assert_eq!(
        call(&mut alice, "CONFIG GET aclfile"),
        "*2\r\n$7\r\naclfile\r\n$9\r\nusers.acl\r\n"
    );
    assert_eq!(call(&mut alice, "ACL SETUSER bob on"), "+OK\r\n");
    assert_eq!(call(&mut alice, "ACL SAVE"), "+OK\r\n");
    assert_eq!(file_lines(&path), acl_list(&mut alice));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        call(&mut alice, "ACL LOAD"),
        "-ERR Error loading ACLs, opening file 'users.acl': No such file or directory\r\n"
    );
    server.terminate();
}
