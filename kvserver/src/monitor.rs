//! MONITOR: clients that see every command the server runs, one status line each, as Redis
//! shows them (`+<secs>.<micros> [<db> <ip:port>] "cmd" "arg" ...`, `[<db> lua]` for a
//! script's commands).
//!
//! Each shard keeps the mailboxes of its own monitoring clients in a thread-local, as pub/sub
//! keeps its subscribers; [`Global::monitors`] counts them per shard. Every store has a
//! `monitoring` flag, set while any shard has a monitor (each change of the count is followed
//! by a message to every shard that sets the flag from the count as it is then). While it is
//! clear, the common case, a command pays one branch on it: no clock read, no allocation, no
//! atomic. While it is set, the store calls [`feeder`]'s hook for each command it runs (a
//! connection does the same for the commands it serves itself): the line is formatted once,
//! sent through the inbox of each shard that has monitors, its own included: inboxes are FIFO,
//! so a line reaches a monitor after every line of a command that ran before it in any
//! client's view (that command's shard queued its line before it answered).
//!
//! What is shown follows Redis's `call()`: a command is fed after it ran, with the database it
//! left selected; commands refused before running (unknown, wrong arity, NOAUTH) are not;
//! admin commands and subcommands are not; EVAL, EVALSHA, FCALL and their read-only forms
//! are fed before they run, so their script's commands follow them; the passwords of AUTH,
//! HELLO and MIGRATE are shown as `(redacted)`.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures_util::future::join_all;
use kvcore::commands::{docs, CommandSpec};
use kvcore::resp::Proto;
use kvcore::Session;
use tokio::sync::mpsc::UnboundedSender;

use crate::global::{lock, ClientEntry, Global};
use crate::options::OutputLimit;
use crate::pubsub::Mailbox;
use crate::shard::{Msg, Shard};

thread_local! {
    /// This shard's monitoring clients.
    static LOCAL: RefCell<Vec<Rc<Mailbox>>> = const { RefCell::new(Vec::new()) };
}

/// Redis counts a monitor as a replica for `client-output-buffer-limit`: `replica 256mb 64mb
/// 60`.
const REPLICA_LIMIT: OutputLimit = OutputLimit {
    hard: 256 << 20,
    soft: 64 << 20,
    soft_secs: 60,
};

/// Makes the client of `entry` a monitor: its mailbox, which every shard feeds once this
/// returns.
pub async fn start(shard: &Shard, entry: &ClientEntry, proto: Proto) -> Rc<Mailbox> {
    let mailbox = Mailbox::new(entry.id, proto, REPLICA_LIMIT);
    LOCAL.with(|l| l.borrow_mut().push(mailbox.clone()));
    {
        let mut counts = lock(&shard.global.monitors);
        if counts.len() < shard.n {
            counts.resize(shard.n, 0);
        }
        if let Some(c) = counts.get_mut(shard.id) {
            *c += 1;
        }
    }
    entry.monitor.store(true, Ordering::Relaxed);
    refresh(shard).await;
    mailbox
}

/// Ends the monitoring of client `entry` (RESET, or it left).
pub async fn stop(shard: &Shard, entry: &ClientEntry) {
    LOCAL.with(|l| l.borrow_mut().retain(|m| m.id != entry.id));
    if let Some(c) = lock(&shard.global.monitors).get_mut(shard.id) {
        *c = c.saturating_sub(1);
    }
    entry.monitor.store(false, Ordering::Relaxed);
    refresh(shard).await;
}

/// Sets every store's `monitoring` flag from the counts as they are when it runs there.
async fn refresh(shard: &Shard) {
    join_all((0..shard.n).map(|s| {
        shard.call(s, |sh: &Shard| {
            let on = lock(&sh.global.monitors).iter().any(|&c| c > 0);
            sh.db.borrow_mut().monitoring = on;
        })
    }))
    .await;
}

/// The store hook of a shard (see `kvcore::Db::monitor_feed`).
pub fn feeder(global: Arc<Global>, inboxes: Vec<UnboundedSender<Msg>>) -> kvcore::db::MonitorFeed {
    Box::new(move |session, spec, args, before| {
        feed(&global, &inboxes, session, spec, args, before);
    })
}

/// Feeds one command to every monitor, if Redis shows it at this moment (`before` it runs or
/// after).
fn feed(
    global: &Global,
    inboxes: &[UnboundedSender<Msg>],
    session: &Session,
    spec: &'static CommandSpec,
    args: &[&[u8]],
    before: bool,
) {
    if before != kvcore::commands::scripting_api::is_script_command(spec.name)
        || (!before && skipped(spec, args))
    {
        return;
    }
    let line: Arc<[u8]> = format_line(global, session, args).into();
    let shards: Vec<usize> = lock(&global.monitors)
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(s, _)| s)
        .collect();
    // Through the inbox even to this shard's own monitors: a line sent from another shard
    // before this command ran (it ran because a client saw that one's reply) is queued there
    // ahead of this one, so the stream keeps the order the clients saw.
    for s in shards {
        if let Some(inbox) = inboxes.get(s) {
            let line = line.clone();
            let _ = inbox.send(Msg::Post(Box::new(move |sh: &Shard| {
                deliver_here(&sh.global, &line)
            })));
        }
    }
}

/// Whether Redis leaves a command out of the feed: the admin commands and subcommands (and
/// MONITOR itself, one of them), and those flagged `skip_monitor`.
fn skipped(spec: &'static CommandSpec, args: &[&[u8]]) -> bool {
    let flagged = |name: &str| {
        docs::entry(name).is_some_and(|e| e.has_flag("admin") || e.has_flag("skip_monitor"))
    };
    if flagged(spec.name) {
        return true;
    }
    match args.get(1) {
        Some(sub) if docs::is_container(spec.name) => {
            let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
            flagged(&format!("{}|{sub}", spec.name))
        }
        _ => false,
    }
}

/// Whether a monitor may not run this command: Redis refuses the commands that read or write
/// the keyspace to a client it counts as a replica.
pub fn refused(args: &[&[u8]]) -> bool {
    let name = args
        .first()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .unwrap_or_default();
    docs::entry(&name).is_some_and(|e| {
        e.has_flag("write") || e.has_flag("readonly") || e.has_flag("may_replicate")
    })
}

/// Appends this shard's monitors' line; a monitor past its output limit is disconnected.
fn deliver_here(global: &Global, line: &[u8]) {
    let cut: Vec<u64> = LOCAL.with(|l| {
        l.borrow()
            .iter()
            .filter(|m| m.deliver_bytes(line))
            .map(|m| m.id)
            .collect()
    });
    for id in cut {
        global.kill(|e| e.id == id);
    }
}

/// The status line Redis's `replicationFeedMonitors` writes for a command.
fn format_line(global: &Global, session: &Session, args: &[&[u8]]) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut line = format!(
        "+{}.{:06} [{} ",
        now.as_secs(),
        now.subsec_micros(),
        session.db
    )
    .into_bytes();
    if session.in_script {
        line.extend_from_slice(b"lua");
    } else {
        let addr = lock(&global.clients)
            .get(&session.id)
            .map(|c| c.addr.to_string());
        line.extend_from_slice(addr.unwrap_or_default().as_bytes());
    }
    line.extend_from_slice(b"]");
    let redacted = redacted(args);
    for (i, a) in args.iter().enumerate() {
        line.push(b' ');
        if redacted.contains(&i) {
            line.extend_from_slice(b"\"(redacted)\"");
        } else {
            quote(&mut line, a);
        }
    }
    line.extend_from_slice(b"\r\n");
    line
}

/// The positions of the arguments Redis redacts: passwords (and user names beside them).
fn redacted(args: &[&[u8]]) -> Vec<usize> {
    let is = |i: usize, word: &[u8]| args.get(i).is_some_and(|a| a.eq_ignore_ascii_case(word));
    let mut out = Vec::new();
    if is(0, b"auth") {
        if args.len() <= 3 {
            out.extend(1..args.len());
        }
    } else if is(0, b"hello") {
        let mut j = 2;
        while j < args.len() {
            let more = args.len() - 1 - j;
            if is(j, b"auth") && more >= 2 {
                out.extend([j + 1, j + 2]);
                j += 3;
            } else if is(j, b"setname") && more >= 1 {
                j += 2;
            } else {
                break;
            }
        }
    } else if is(0, b"migrate") {
        let mut j = 6;
        while j < args.len() {
            let more = args.len() - 1 - j;
            if is(j, b"auth") && more >= 1 {
                out.push(j + 1);
                j += 2;
            } else if is(j, b"auth2") && more >= 2 {
                out.extend([j + 1, j + 2]);
                j += 3;
            } else if is(j, b"keys") {
                break;
            } else {
                j += 1;
            }
        }
    }
    out
}

/// Redis's `sdscatrepr`: the bytes in double quotes, escaping `"` `\` and control bytes.
fn quote(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_sdscatrepr() {
        let mut out = Vec::new();
        quote(&mut out, b"a\"b\\\n\r\t\x07\x08\x01\xffz ");
        assert_eq!(out, b"\"a\\\"b\\\\\\n\\r\\t\\a\\b\\x01\\xffz \"");
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(redacted(&[b"AUTH", b"pw"]), vec![1]);
        assert_eq!(redacted(&[b"auth", b"u", b"pw"]), vec![1, 2]);
        assert!(redacted(&[b"auth", b"a", b"b", b"c"]).is_empty());
        let hello: &[&[u8]] = &[b"HELLO", b"3", b"SETNAME", b"x", b"AUTH", b"u", b"p"];
        assert_eq!(redacted(hello), vec![5, 6]);
        let migrate: &[&[u8]] = &[
            b"migrate", b"h", b"1", b"", b"0", b"5", b"COPY", b"AUTH2", b"u", b"p", b"KEYS",
            b"auth",
        ];
        assert_eq!(redacted(migrate), vec![8, 9]);
        assert!(redacted(&[b"get", b"auth"]).is_empty());
    }
}
