//! Every command the server lists, with arguments drawn at random from its own documentation
//! (the tokens COMMAND DOCS gives it), keys, numbers at the edges of their ranges, patterns
//! and junk: whatever a client sends, the server answers with one well-formed reply, keeps the
//! connection, keeps serving everyone, and never panics.
//!
//! `KV_FUZZ_COMMANDS=N` sends N commands per seed instead of the default (CI's short run);
//! `KV_FUZZ_SEED=S` shifts the seeds by S (other sequences). A seed and a command number in a
//! failure repeat it.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use kvcore::resp::reply::Value;

use crate::command_table::{arities, blocking, draw, table, Known, Replies, NOT_REQUEST_REPLY};
use crate::differential::Rng;
use crate::support::{call, encode, Server};

/// Commands left out besides [`NOT_REQUEST_REPLY`], and why: they stop or freeze the server (SHUTDOWN, DEBUG, CLIENT PAUSE,
/// FAILOVER), turn the connection into something that is not request-reply (MONITOR,
/// SUBSCRIBE and friends, SYNC, PSYNC, REPLCONF, CLIENT TRACKING's pushes), wait on purpose
/// (blocking commands with a random timeout, WAIT, WAITAOF), reach for the network (MIGRATE,
/// REPLICAOF), lock the test's connection out (ACL SETUSER and DELUSER could take the default
/// user's permissions or disconnect it; `acl::hostile_rules_answer_errors` fuzzes SETUSER on
/// a user of its own), or change the server under the test (CONFIG SET: port, dir, limits).
const LEFT_OUT: &[&str] = &[
    "debug",
    "client",
    "config|set",
    "acl|setuser",
    "acl|deluser",
];

/// How many of the last commands a failure lists.
const RECALL: usize = 200;

fn history(recent: &std::collections::VecDeque<String>) -> String {
    recent
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

fn connect(server: &Server) -> TcpStream {
    let s = server.raw();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn fuzz(threads: &str, seeds: std::ops::Range<u64>) {
    let per_seed: usize = std::env::var("KV_FUZZ_COMMANDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2500);
    let mut server = Server::start(&["--threads", threads, "--save", ""]);
    let mut probe = server.raw();
    let mut s = connect(&server);
    let known: Vec<Known> = table(&mut s)
        .into_iter()
        .filter(|k| {
            let full = k.words.join("|").to_lowercase();
            ![LEFT_OUT, NOT_REQUEST_REPLY].iter().any(|l| {
                l.contains(&full.as_str()) || l.contains(&k.words[0].to_lowercase().as_str())
            })
        })
        .collect();
    assert!(
        known.len() > 150,
        "COMMAND DOCS lists the command table ({} usable)",
        known.len()
    );
    // Blocking commands would wait for their random timeout (or forever).
    let blocking = blocking(&mut s);
    let known: Vec<Known> = known
        .into_iter()
        .filter(|k| !blocking.contains(&k.words[0].to_lowercase()))
        .collect();
    let arity = arities(&mut s);
    assert_eq!(arity.get("get"), Some(&2), "COMMAND gives arities");
    assert_eq!(
        arity.get("config|get"),
        Some(&-3),
        "COMMAND gives subcommands' arities"
    );
    // Replies that are not errors, by command: most commands must get past their argument
    // checks sometimes, or the test would only exercise those.
    let mut ran = std::collections::BTreeMap::<String, (u32, u32)>::new();
    let shift: u64 = std::env::var("KV_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut recent = std::collections::VecDeque::with_capacity(RECALL);
    for seed in seeds.map(|s| s + shift) {
        recent.clear();
        let mut rng = Rng(seed);
        let mut i = 0;
        while i < per_seed {
            // One command in a write, or (one time in eight) a pipeline of up to 24 in one
            // write, replies read after all of them are sent.
            let batch = if rng.below(8) == 0 {
                2 + rng.below(23)
            } else {
                1
            };
            let mut wire = Vec::new();
            let mut sent = Vec::new();
            for _ in 0..batch {
                let (name, args) = draw(&mut rng, &known, &arity);
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                wire.extend_from_slice(&encode(&refs));
                let what = format!(
                    "seed {seed} #{i}: {:?}",
                    args.iter()
                        .map(|a| String::from_utf8_lossy(a))
                        .collect::<Vec<_>>()
                );
                if recent.len() == RECALL {
                    recent.pop_front();
                }
                recent.push_back(what.clone());
                sent.push((name, what));
                i += 1;
            }
            s.write_all(&wire).unwrap();
            let mut replies = Replies::default();
            for (name, what) in &sent {
                let reply = replies.next(&mut s).unwrap_or_else(|e| {
                    panic!(
                        "{e}, to {what}; the commands before it:\n{}",
                        history(&recent)
                    )
                });
                let Some(reply) = reply else {
                    panic!("the server closed the connection after {what}");
                };
                let tally = ran.entry(name.clone()).or_default();
                tally.0 += 1;
                if !matches!(reply, Value::Error(_)) {
                    tally.1 += 1;
                }
            }
            let what = &sent[sent.len() - 1].1;
            assert!(
                replies.buf.is_empty(),
                "one reply for each command, nothing after them, up to {what}"
            );
            if i % 250 < batch {
                assert!(server.alive(), "the server is running after {what}");
                assert_eq!(
                    call(&mut probe, "PING"),
                    "+PONG\r\n",
                    "another client is served after {what}"
                );
            }
        }
        // The next seed starts from a plain connection state (a transaction, RESP3, a
        // database other than 0 do not carry over).
        s = connect(&server);
        assert_eq!(call(&mut probe, "PING"), "+PONG\r\n");
    }
    let tried = ran.len();
    let succeeded = ran.values().filter(|t| t.1 > 0).count();
    eprintln!(
        "{} commands sent, {tried} different ones, {succeeded} of them answered without an error at least once",
        ran.values().map(|t| t.0).sum::<u32>()
    );
    if std::env::var_os("KV_FUZZ_VERBOSE").is_some() {
        for (name, (n, ok)) in &ran {
            eprintln!("{name:32} {n:6} {ok:6}");
        }
    }
    assert!(
        succeeded * 4 >= tried * 3,
        "three commands in four ran without an error at least once ({succeeded} of {tried})"
    );
    assert!(server.alive());
    assert!(
        server.log_lines_with("panicked").is_empty(),
        "no panic in the log: {:?}",
        server.log_lines_with("panicked")
    );
}

#[test]
fn random_commands_from_the_docs_one_shard() {
    fuzz("1", 0..4);
}

#[test]
fn random_commands_from_the_docs_two_shards() {
    fuzz("2", 100..104);
}
