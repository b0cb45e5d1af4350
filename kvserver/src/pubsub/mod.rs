//! Pub/sub: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH, SPUBLISH, PUBSUB,
//! and the keyspace notifications the stores raise.
//!
//! Each shard keeps its own subscribers: the mailboxes of the clients it serves, by channel
//! and by pattern. Each shard also keeps a view of where every channel and pattern has
//! subscribers (a count per shard), so a PUBLISH knows at once how many receive it and which
//! shards to send it to: none when nobody listens, which is the common case. A SUBSCRIBE (or
//! UNSUBSCRIBE) is answered only once every shard's view has it, so a message published
//! anywhere after the reply reaches the subscriber. Delivery to another shard is one message
//! on its inbox; inboxes are FIFO, so a publisher's messages arrive in the order sent (a client
//! that moves between shards leaves the old one's messages queued ahead of its new ones).
//!
//! A subscriber's mailbox holds what was delivered and not yet written to its socket. Past
//! `client-output-buffer-limit pubsub` (hard at once, soft after its seconds) the client is
//! cut off and its mailbox freed, so subscribers that do not read cannot grow the server.
//!
//! The state lives in a thread-local of each shard's thread: the shard knows nothing of it.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use kvcore::acl::User;
use kvcore::resp::{Proto, ReplyWriter};
use kvcore::Session;

use crate::global::ClientEntry;
use crate::options::OutputLimit;
use crate::shard::Shard;

/// Channels of PUBLISH and those of SPUBLISH are separate namespaces.
const GLOBAL: usize = 0;
const SHARDED: usize = 1;

/// Counts per shard of the subscriptions to one channel or pattern.
type PerShard = Vec<u32>;
/// This shard's subscribers, by channel or pattern.
type Subscribers = HashMap<Box<[u8]>, Vec<Rc<Mailbox>>>;

#[derive(Default)]
struct Local {
    /// This shard's subscribers, by channel (`[GLOBAL]`, `[SHARDED]`).
    subs: [Subscribers; 2],
    /// This shard's pattern subscribers, by pattern.
    psubs: Subscribers,
    /// Every shard's subscriptions, counted per shard, by channel.
    view: [HashMap<Box<[u8]>, PerShard>; 2],
    /// Every shard's pattern subscriptions, counted per shard, by pattern.
    pview: HashMap<Box<[u8]>, PerShard>,
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

/// Wakes every subscriber of this shard, to look at its subscriptions under its user's rules
/// again (the users changed: see [`Subscriptions::revoked`]).
pub fn wake_subscribers() {
    LOCAL.with(|l| {
        let l = l.borrow();
        let [channels, shard_channels] = &l.subs;
        for mailbox in [channels, shard_channels, &l.psubs]
            .into_iter()
            .flat_map(|m| m.values())
            .flatten()
        {
            mailbox.wake.notify();
        }
    });
}

/// What has been delivered to one subscribed client and not yet written to its socket.
pub struct Mailbox {
    /// The client's id.
    pub id: u64,
    resp3: Cell<bool>,
    buf: RefCell<Vec<u8>>,
    /// Signalled when something is delivered, or when the client is cut off.
    pub wake: LocalNotify,
    cut: Cell<bool>,
    soft_since: Cell<Option<Instant>>,
    limit: OutputLimit,
}

impl Mailbox {
    /// Whether the client went past its output limit and must be disconnected.
    pub fn is_cut(&self) -> bool {
        self.cut.get()
    }

    /// Moves what is waiting to `out`.
    pub fn drain_into(&self, out: &mut Vec<u8>) {
        let mut buf = self.buf.borrow_mut();
        if out.is_empty() {
            std::mem::swap(out, &mut buf);
        } else {
            out.extend_from_slice(&buf);
            buf.clear();
        }
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.buf.borrow().is_empty()
    }

    /// An empty mailbox for client `id`, cut off past `limit`.
    pub fn new(id: u64, proto: Proto, limit: OutputLimit) -> Rc<Mailbox> {
        Rc::new(Mailbox {
            id,
            resp3: Cell::new(proto == Proto::Resp3),
            buf: RefCell::new(Vec::new()),
            wake: LocalNotify::default(),
            cut: Cell::new(false),
            soft_since: Cell::new(None),
            limit,
        })
    }

    /// Appends a message; true when this cut the client off.
    fn deliver(&self, message: &mut Encoded<'_>) -> bool {
        if self.cut.get() {
            return false;
        }
        let bytes = message.get(self.resp3.get());
        self.deliver_bytes(bytes)
    }

    /// Appends bytes already encoded; true when this cut the client off.
    pub fn deliver_bytes(&self, bytes: &[u8]) -> bool {
        if self.cut.get() {
            return false;
        }
        let len = {
            let mut buf = self.buf.borrow_mut();
            buf.extend_from_slice(bytes);
            buf.len() as u64
        };
        let l = self.limit;
        let over_soft = l.soft > 0 && len > l.soft;
        let cut = (l.hard > 0 && len > l.hard)
            || (over_soft
                && match self.soft_since.get() {
                    None => {
                        self.soft_since.set(Some(Instant::now()));
                        false
                    }
                    Some(t) => t.elapsed().as_secs() >= l.soft_secs,
                });
        if !over_soft {
            self.soft_since.set(None);
        }
        if cut {
            crate::log!(
                2,
                "Client id={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                self.id
            );
            self.cut.set(true);
            *self.buf.borrow_mut() = Vec::new();
        }
        self.wake.notify();
        cut
    }
}

/// A wake-up for one task of this thread: a flag and the waker of the task that waits (no
/// lock, no atomic: mailbox and connection live on the same shard thread). A notification
/// before the wait is kept until the wait.
#[derive(Default)]
pub struct LocalNotify {
    set: Cell<bool>,
    waker: Cell<Option<std::task::Waker>>,
}

impl LocalNotify {
    /// Sets the flag and wakes the waiting task, if any.
    pub fn notify(&self) {
        self.set.set(true);
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    /// Resolves once notified (at once if it was since the last wait).
    pub fn notified(&self) -> impl std::future::Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.set.replace(false) {
                std::task::Poll::Ready(())
            } else {
                self.waker.set(Some(cx.waker().clone()));
                std::task::Poll::Pending
            }
        })
    }
}

/// A message as subscribers get it, encoded once per protocol on first use, then copied into
/// each mailbox.
struct Encoded<'a> {
    pattern: Option<&'a [u8]>,
    kind: usize,
    channel: &'a [u8],
    msg: &'a [u8],
    bytes: [Vec<u8>; 2],
}

impl<'a> Encoded<'a> {
    fn new(pattern: Option<&'a [u8]>, kind: usize, channel: &'a [u8], msg: &'a [u8]) -> Self {
        Encoded {
            pattern,
            kind,
            channel,
            msg,
            bytes: [Vec::new(), Vec::new()],
        }
    }

    fn get(&mut self, resp3: bool) -> &[u8] {
        let i = usize::from(resp3);
        if self.bytes[i].is_empty() {
            let proto = if resp3 { Proto::Resp3 } else { Proto::Resp2 };
            let mut w = ReplyWriter::new(&mut self.bytes[i], proto);
            match self.pattern {
                Some(p) => {
                    w.push_len(4);
                    w.bulk(b"pmessage");
                    w.bulk(p);
                }
                None => {
                    w.push_len(3);
                    w.bulk(if self.kind == SHARDED {
                        b"smessage"
                    } else {
                        b"message"
                    });
                }
            }
            w.bulk(self.channel);
            w.bulk(self.msg);
        }
        &self.bytes[i]
    }
}

/// One connection's subscriptions (it has some, or had some in this batch).
pub struct Subscriptions {
    /// Where its messages wait.
    pub mailbox: Rc<Mailbox>,
    channels: [HashSet<Box<[u8]>>; 2],
    patterns: HashSet<Box<[u8]>>,
    /// The ACL epoch the subscriptions were last known to be allowed at (see
    /// [`Subscriptions::revoked`]).
    acl_epoch: u64,
}

impl Subscriptions {
    fn new(id: u64, proto: Proto, limit: OutputLimit, acl_epoch: u64) -> Box<Subscriptions> {
        Box::new(Subscriptions {
            mailbox: Mailbox::new(id, proto, limit),
            channels: Default::default(),
            patterns: HashSet::new(),
            acl_epoch,
        })
    }

    /// Whether the users changed since the subscriptions were last looked at and `user` (the
    /// client's user now; `None`: deleted) no longer allows one of the channels, shard
    /// channels or patterns (a pattern only as written in the user's rules), as Redis's
    /// `ACLShouldKillPubsubClient`: such a subscriber is disconnected, before anything more
    /// is delivered to it. (Every change wakes every subscriber to ask this at once, see
    /// [`wake_subscribers`].)
    pub fn revoked(&mut self, epoch: u64, user: impl FnOnce() -> Option<Arc<User>>) -> bool {
        if self.acl_epoch == epoch {
            return false;
        }
        self.acl_epoch = epoch;
        let Some(user) = user() else {
            return true;
        };
        let channels = self.channels.iter().flatten();
        !(channels.into_iter().all(|c| user.channel_allowed(c, false))
            && self.patterns.iter().all(|p| user.channel_allowed(p, true)))
    }

    /// Channels and patterns (what SUBSCRIBE and PSUBSCRIBE replies count).
    fn count(&self) -> usize {
        self.channels[GLOBAL].len() + self.patterns.len()
    }

    /// Follows the client's protocol (HELLO) for the messages delivered from now on.
    pub fn set_proto(&self, proto: Proto) {
        self.mailbox.resp3.set(proto == Proto::Resp3);
    }

    /// What a (un)subscribe confirmation of `target` counts: channels and patterns, or shard
    /// channels.
    fn count_for(&self, target: Target) -> usize {
        match target {
            Target::Channel(SHARDED) => self.channels[SHARDED].len(),
            _ => self.count(),
        }
    }

    /// Every subscription of every kind: the client is in subscribed mode while this is not 0.
    pub fn total(&self) -> usize {
        self.count() + self.channels[SHARDED].len()
    }

    fn show(&self, entry: &ClientEntry) {
        entry
            .sub
            .store(self.channels[GLOBAL].len() as u32, Ordering::Relaxed);
        entry
            .psub
            .store(self.patterns.len() as u32, Ordering::Relaxed);
        entry
            .ssub
            .store(self.channels[SHARDED].len() as u32, Ordering::Relaxed);
    }
}

/// Whether a RESP2 client in subscribed mode may run `name` (Redis's list).
pub fn allowed_when_subscribed(name: &str) -> bool {
    matches!(
        name,
        "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

/// One (un)subscribe confirmation: `[name, channel or null, count]`, a push in RESP3.
fn confirm(w: &mut ReplyWriter<'_>, name: &[u8], channel: Option<&[u8]>, count: usize) {
    w.push_len(3);
    w.bulk(name);
    match channel {
        Some(c) => w.bulk(c),
        None => w.null(),
    }
    w.int(count as i64);
}

/// What a subscription change does to every shard's view.
#[derive(Clone, Copy)]
enum Target {
    Channel(usize),
    Pattern,
}

/// Adds `delta` to shard `from`'s count of each name in every shard's view, and returns once
/// all have it.
async fn update_views(shard: &Shard, target: Target, names: Vec<Box<[u8]>>, delta: i64) {
    if names.is_empty() {
        return;
    }
    let (from, n) = (shard.id, shard.n);
    let names = std::sync::Arc::new(names);
    join_all((0..n).map(|s| {
        let names = names.clone();
        shard.call(s, move |_: &Shard| {
            LOCAL.with(|l| {
                let mut l = l.borrow_mut();
                let view = match target {
                    Target::Channel(kind) => &mut l.view[kind],
                    Target::Pattern => &mut l.pview,
                };
                for name in names.iter() {
                    let counts = view.entry(name.clone()).or_insert_with(|| vec![0; n]);
                    counts[from] = (i64::from(counts[from]) + delta).max(0) as u32;
                    if counts.iter().all(|&c| c == 0) {
                        view.remove(name);
                    }
                }
            })
        })
    }))
    .await;
}

/// Runs a pub/sub command for a connection; `subs` holds its subscriptions (created by its
/// first subscribe). `deny_blocking`: inside EXEC.
pub async fn command(
    shard: &Rc<Shard>,
    session: &Session,
    entry: &ClientEntry,
    subs: &mut Option<Box<Subscriptions>>,
    args: &[&[u8]],
    deny_blocking: bool,
    out: &mut Vec<u8>,
) {
    let name = args[0].to_ascii_lowercase();
    let name = std::str::from_utf8(&name).unwrap_or("");
    let mut w = ReplyWriter::new(out, session.proto);
    match name {
        "publish" | "spublish" => {
            let kind = if name == "spublish" { SHARDED } else { GLOBAL };
            let n = publish(shard, kind, args[1], args[2]);
            // A client hearing its own message gets it before the reply, as in Redis.
            if let Some(s) = subs.as_ref() {
                s.mailbox.drain_into(w.out);
            }
            w.int(n);
        }
        "pubsub" => match kvcore::commands::lookup(b"pubsub").map_or(Ok(()), |spec| {
            kvcore::commands::check_subcommand(spec, args)
        }) {
            Ok(()) => introspect(args, &mut w),
            Err(e) => w.out.extend_from_slice(&e),
        },
        "subscribe" | "psubscribe" | "ssubscribe" => {
            if deny_blocking && name == "ssubscribe" {
                return w.error(b"ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
            }
            let s = subs.get_or_insert_with(|| {
                let epoch = shard.global.acl.epoch();
                Subscriptions::new(
                    entry.id,
                    session.proto,
                    shard.global.opts.pubsub_limit,
                    epoch,
                )
            });
            s.mailbox.resp3.set(session.proto == Proto::Resp3);
            let target = match name {
                "subscribe" => Target::Channel(GLOBAL),
                "ssubscribe" => Target::Channel(SHARDED),
                _ => Target::Pattern,
            };
            let mut added: Vec<Box<[u8]>> = Vec::new();
            let reply_name: &[u8] = name.as_bytes();
            for &ch in &args[1..] {
                let set = match target {
                    Target::Channel(k) => &mut s.channels[k],
                    Target::Pattern => &mut s.patterns,
                };
                if set.insert(ch.into()) {
                    added.push(ch.into());
                    LOCAL.with(|l| {
                        let mut l = l.borrow_mut();
                        let map = match target {
                            Target::Channel(k) => &mut l.subs[k],
                            Target::Pattern => &mut l.psubs,
                        };
                        map.entry(ch.into()).or_default().push(s.mailbox.clone());
                    });
                }
                confirm(&mut w, reply_name, Some(ch), s.count_for(target));
            }
            s.show(entry);
            update_views(shard, target, added, 1).await;
        }
        _ => {
            // UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE.
            let target = match name {
                "unsubscribe" => Target::Channel(GLOBAL),
                "sunsubscribe" => Target::Channel(SHARDED),
                _ => Target::Pattern,
            };
            let named: Vec<Box<[u8]>> = args[1..].iter().map(|&a| a.into()).collect();
            let removed = unsubscribe(shard, subs, target, named, Some(&mut w));
            if let Some(s) = subs.as_ref() {
                s.show(entry);
            }
            update_views(shard, target, removed, -1).await;
        }
    }
}

/// Removes subscriptions of one kind (all of them when `named` is empty) from this shard's
/// tables, writing one confirmation each to `w` if given; returns the names that were
/// subscribed (for the views).
fn unsubscribe(
    shard: &Shard,
    subs: &mut Option<Box<Subscriptions>>,
    target: Target,
    named: Vec<Box<[u8]>>,
    mut w: Option<&mut ReplyWriter<'_>>,
) -> Vec<Box<[u8]>> {
    let _ = shard;
    let reply_name: &[u8] = match target {
        Target::Channel(GLOBAL) => b"unsubscribe",
        Target::Channel(_) => b"sunsubscribe",
        Target::Pattern => b"punsubscribe",
    };
    let Some(s) = subs.as_mut() else {
        if let Some(w) = w {
            for ch in &named {
                confirm(w, reply_name, Some(ch), 0);
            }
            if named.is_empty() {
                confirm(w, reply_name, None, 0);
            }
        }
        return Vec::new();
    };
    let all = named.is_empty();
    let names: Vec<Box<[u8]>> = if all {
        match target {
            Target::Channel(k) => s.channels[k].iter().cloned().collect(),
            Target::Pattern => s.patterns.iter().cloned().collect(),
        }
    } else {
        named
    };
    let mut removed = Vec::new();
    for ch in &names {
        let was = match target {
            Target::Channel(k) => s.channels[k].remove(ch),
            Target::Pattern => s.patterns.remove(ch),
        };
        if was {
            removed.push(ch.clone());
            LOCAL.with(|l| {
                let mut l = l.borrow_mut();
                let map = match target {
                    Target::Channel(k) => &mut l.subs[k],
                    Target::Pattern => &mut l.psubs,
                };
                if let Some(list) = map.get_mut(ch) {
                    list.retain(|m| !Rc::ptr_eq(m, &s.mailbox));
                    if list.is_empty() {
                        map.remove(ch);
                    }
                }
            });
        }
        if let Some(w) = w.as_deref_mut() {
            confirm(w, reply_name, Some(ch), s.count_for(target));
        }
    }
    if all && names.is_empty() {
        if let Some(w) = w {
            confirm(w, reply_name, None, s.count_for(target));
        }
    }
    removed
}

/// Drops every subscription of a connection that resets or goes away.
pub async fn leave(shard: &Shard, subs: &mut Option<Box<Subscriptions>>, entry: &ClientEntry) {
    if subs.is_none() {
        return;
    }
    for target in [
        Target::Channel(GLOBAL),
        Target::Channel(SHARDED),
        Target::Pattern,
    ] {
        let removed = unsubscribe(shard, subs, target, Vec::new(), None);
        update_views(shard, target, removed, -1).await;
    }
    if let Some(s) = subs.as_ref() {
        s.show(entry);
    }
    *subs = None;
}

/// PUBLISH (or SPUBLISH when `sharded`) `args[1]` `args[2]`: how many receive it.
pub fn publish_command(shard: &Shard, sharded: bool, args: &[&[u8]]) -> i64 {
    publish(
        shard,
        if sharded { SHARDED } else { GLOBAL },
        args[1],
        args[2],
    )
}

/// Publishes `msg` on `channel`: delivers it to this shard's subscribers and sends it to the
/// shards that have others; returns how many clients receive it (pattern matches included).
pub fn publish(shard: &Shard, kind: usize, channel: &[u8], msg: &[u8]) -> i64 {
    let n = shard.n;
    let mut to = [0u64; 4];
    let mut count = 0i64;
    let local = LOCAL.with(|l| {
        let l = l.borrow();
        let mut add = |counts: &PerShard| {
            for (s, &c) in counts.iter().enumerate() {
                if c > 0 {
                    count += i64::from(c);
                    to[s / 64] |= 1 << (s % 64);
                }
            }
        };
        if let Some(c) = l.view[kind].get(channel) {
            add(c);
        }
        if kind == GLOBAL {
            for (p, c) in &l.pview {
                if kvcore::glob::matches(p, channel, false) {
                    add(c);
                }
            }
        }
        to[shard.id / 64] & (1 << (shard.id % 64)) != 0
    });
    if count == 0 {
        return 0;
    }
    if local {
        deliver_here(shard, kind, channel, msg);
    }
    for s in (0..n).filter(|&s| s != shard.id && to[s / 64] & (1 << (s % 64)) != 0) {
        let (channel, msg) = (channel.to_vec(), msg.to_vec());
        shard.post(s, move |sh: &Shard| deliver_here(sh, kind, &channel, &msg));
    }
    count
}

/// Publishes the keyspace events this shard's store raised: `__keyspace@DB__:KEY` with the
/// event as message (flag K), `__keyevent@DB__:EVENT` with the key (flag E), as Redis does.
pub fn publish_events(shard: &Shard) {
    let (flags, events): (u32, Vec<kvcore::events::KeyEvent>) = {
        let mut db = shard.db.borrow_mut();
        let flags = db.config.notify_keyspace_events;
        (flags, db.drain_events().collect())
    };
    let mut channel = Vec::new();
    let mut db_digits = itoa::Buffer::new();
    for e in events {
        let dbn = db_digits.format(e.db).as_bytes().to_vec();
        if flags & kvcore::events::class::KEYSPACE != 0 {
            channel.clear();
            channel.extend_from_slice(b"__keyspace@");
            channel.extend_from_slice(&dbn);
            channel.extend_from_slice(b"__:");
            channel.extend_from_slice(&e.key);
            publish(shard, GLOBAL, &channel, e.event.as_bytes());
        }
        if flags & kvcore::events::class::KEYEVENT != 0 {
            channel.clear();
            channel.extend_from_slice(b"__keyevent@");
            channel.extend_from_slice(&dbn);
            channel.extend_from_slice(b"__:");
            channel.extend_from_slice(e.event.as_bytes());
            publish(shard, GLOBAL, &channel, &e.key);
        }
    }
}

/// Delivers a message to the subscribers of this shard (the thread's own). A subscriber cut
/// off at its output limit has its socket shut down, so a write it is stuck in fails and its
/// connection ends (and unsubscribes).
fn deliver_here(shard: &Shard, kind: usize, channel: &[u8], msg: &[u8]) {
    let mut cut: Vec<u64> = Vec::new();
    LOCAL.with(|l| {
        let l = l.borrow();
        if let Some(list) = l.subs[kind].get(channel) {
            let mut message = Encoded::new(None, kind, channel, msg);
            for m in list {
                if m.deliver(&mut message) {
                    cut.push(m.id);
                }
            }
        }
        if kind == GLOBAL {
            for (p, list) in &l.psubs {
                if kvcore::glob::matches(p, channel, false) {
                    let mut message = Encoded::new(Some(p), kind, channel, msg);
                    for m in list {
                        if m.deliver(&mut message) {
                            cut.push(m.id);
                        }
                    }
                }
            }
        }
    });
    for id in cut {
        shard.global.kill(|e| e.id == id);
    }
}

/// Channels, patterns and shard channels with subscribers (INFO stats), from this shard's
/// view of every shard.
pub fn counts() -> (u64, u64, u64) {
    LOCAL.with(|l| {
        let l = l.borrow();
        (
            l.view[GLOBAL].len() as u64,
            l.pview.len() as u64,
            l.view[SHARDED].len() as u64,
        )
    })
}

/// PUBSUB CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS, SHARDNUMSUB and HELP, from this shard's
/// view of every shard.
fn introspect(args: &[&[u8]], w: &mut ReplyWriter<'_>) {
    let sub = args[1];
    let is = |n: &str| sub.eq_ignore_ascii_case(n.as_bytes());
    LOCAL.with(|l| {
        let l = l.borrow();
        let total = |c: &PerShard| c.iter().map(|&x| i64::from(x)).sum::<i64>();
        if args.len() == 2 && is("help") {
            let lines: &[&str] = &[
                "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "SHARDCHANNELS [<pattern>]",
                "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Return the number of subscribers for the specified shard level channel(s)",
                "HELP",
                "    Print this help.",
            ];
            w.array_len(lines.len());
            for line in lines {
                w.simple(line.as_bytes());
            }
        } else if (is("channels") || is("shardchannels")) && args.len() <= 3 {
            let kind = if is("channels") { GLOBAL } else { SHARDED };
            let names: Vec<&Box<[u8]>> = l.view[kind]
                .keys()
                .filter(|c| args.len() == 2 || kvcore::glob::matches(args[2], c, false))
                .collect();
            w.array_len(names.len());
            for c in names {
                w.bulk(c);
            }
        } else if is("numsub") || is("shardnumsub") {
            let kind = if is("numsub") { GLOBAL } else { SHARDED };
            w.array_len((args.len() - 2) * 2);
            for &c in &args[2..] {
                w.bulk(c);
                w.int(l.view[kind].get(c).map_or(0, total));
            }
        } else if is("numpat") && args.len() == 2 {
            w.int(l.pview.len() as i64);
        } else {
            let mut m = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
            // As Redis's `%.128s`: up to a NUL, at most 128 bytes; no line breaks in an error.
            let name = sub.split(|&b| b == 0).next().unwrap_or_default();
            m.extend(name[..name.len().min(128)].iter().map(|&b| match b {
                b'\r' | b'\n' => b' ',
                b => b,
            }));
            m.extend_from_slice(b"'. Try PUBSUB HELP.");
            w.error(&m);
        }
    });
}
