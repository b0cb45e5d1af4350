//! Access control lists: users, what each may run, and the log of refusals (Redis 7.4's ACL).
//!
//! The users are process-wide: a server gives every shard's store one [`Acl`] (as it shares
//! the script cache), so ACL SETUSER on one shard takes effect for the clients of all. Each
//! user is an immutable snapshot behind an `Arc`; a change builds the new user aside (all of
//! the rules apply or none), swaps it in and moves the *epoch* on.
//!
//! A client's [`Session`] holds its user's name, the snapshot it last looked at, and the
//! epoch at which it last found that user unrestricted (every command, key and channel).
//! The hot path asks one question per command, "is that epoch the current one?"
//! ([`Acl::is_free`]): one load of a rarely written word and one predictable branch. Any
//! change to any user moves the epoch, so every client looks its user up again on its next
//! command (the full check, [`crate::Db::acl_check`]), and an unrestricted client finds its
//! way back to the fast path.

mod catalog;
mod gate;
pub(crate) mod sha256;
mod user;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

pub use catalog::CATEGORIES;
pub(crate) use user::has_spaces;
pub use user::{Denial, RuleError, Selector, User};

use crate::Session;

/// A session's [`ClientUser::free_at`] when it has not been found unrestricted.
const NEVER: u64 = u64::MAX;

/// Most entries of ACL LOG looked at for one to merge a new refusal into (as Redis).
const LOG_MERGE_SCAN: usize = 10;
/// Refusals this close in time (ms) and otherwise alike are counted in one entry.
const LOG_MERGE_MS: u64 = 60_000;

/// The user a client is authenticated as, as its session keeps it.
#[derive(Clone, Debug)]
pub struct ClientUser {
    /// The user's name; `None` is `default`.
    name: Option<Arc<[u8]>>,
    /// The snapshot last looked up, and the epoch it was looked up at.
    user: Option<Arc<User>>,
    seen_at: u64,
    /// The epoch at which the user was found unrestricted, or [`NEVER`].
    free_at: u64,
}

impl Default for ClientUser {
    fn default() -> Self {
        ClientUser {
            name: None,
            user: None,
            seen_at: NEVER,
            free_at: NEVER,
        }
    }
}

impl ClientUser {
    /// The user's name.
    pub fn name(&self) -> &[u8] {
        self.name.as_deref().unwrap_or(b"default")
    }

    /// Whether `other` names the same user by the same handle (a pointer compare: `false`
    /// may still be the same name).
    #[inline]
    pub fn same(&self, other: &ClientUser) -> bool {
        match (&self.name, &other.name) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Switches to user `name` (AUTH); the next check looks it up.
    pub fn set(&mut self, name: &[u8]) {
        *self = ClientUser {
            name: (name != b"default").then(|| Arc::from(name)),
            ..ClientUser::default()
        };
    }
}

/// Where a refusal happened (ACL LOG's `context`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// A command the client sent.
    Toplevel,
    /// A command of a transaction (queued, or checked again at EXEC).
    Multi,
    /// A command a script called.
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// Why an ACL LOG entry was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A command refused.
    Command,
    /// A key refused.
    Key,
    /// A channel refused.
    Channel,
    /// A failed AUTH or HELLO AUTH.
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// One ACL LOG entry.
#[derive(Clone, Debug)]
pub struct LogEntry {
    count: u64,
    reason: Reason,
    context: Context,
    object: Vec<u8>,
    username: Vec<u8>,
    /// Unix ms of the last refusal counted here, and of the first.
    updated: u64,
    created: u64,
    client_info: Vec<u8>,
    id: u64,
}

/// The CLIENT INFO line of a client by id, from the host (ACL LOG's `client-info`).
pub type ClientInfo = Box<dyn Fn(u64) -> Vec<u8> + Send + Sync>;
/// Called with a deleted user's name and the id of the client that deleted it: the host
/// disconnects that user's other clients.
pub type OnDelete = Box<dyn Fn(&[u8], u64) + Send + Sync>;

/// Called after every change to the users (ACL SETUSER, DELUSER, LOAD, a new `requirepass`),
/// with no lock held: the host looks again at what its clients hold under the old rules (a
/// subscriber's channels).
pub type OnChange = Box<dyn Fn() + Send + Sync>;

struct State {
    users: BTreeMap<Vec<u8>, Arc<User>>,
    log: VecDeque<LogEntry>,
    next_log_id: u64,
    log_max: usize,
    pubsub_all: bool,
    denied: [u64; 4],
    /// The `requirepass` last given to the default user.
    requirepass: Vec<u8>,
}

struct Shared {
    epoch: AtomicU64,
    /// The `default` user needs no password and is on: new clients start authenticated.
    default_open: AtomicBool,
    state: Mutex<State>,
    client_info: Mutex<Option<ClientInfo>>,
    on_delete: Mutex<Option<OnDelete>>,
    on_change: Mutex<Option<OnChange>>,
}

/// The users and the ACL log, shared by every store of a process that clones it.
#[derive(Clone)]
pub struct Acl(Arc<Shared>);

impl Default for Acl {
    fn default() -> Self {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), Arc::new(User::new_default()));
        Acl(Arc::new(Shared {
            epoch: AtomicU64::new(0),
            default_open: AtomicBool::new(true),
            state: Mutex::new(State {
                users,
                log: VecDeque::new(),
                next_log_id: 0,
                log_max: 128,
                pubsub_all: false,
                denied: [0; 4],
                requirepass: Vec::new(),
            }),
            client_info: Mutex::new(None),
            on_delete: Mutex::new(None),
            on_change: Mutex::new(None),
        }))
    }
}

impl std::fmt::Debug for Acl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Acl")
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Acl {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.0.state)
    }

    /// The current epoch (moves on with every change to a user).
    #[inline(always)]
    pub fn epoch(&self) -> u64 {
        self.0.epoch.load(Ordering::Acquire)
    }

    /// Whether `session`'s user was unrestricted as of the current epoch: the one-branch
    /// check of the hot path. `false` says only "look closer".
    #[inline(always)]
    pub fn is_free(&self, session: &Session) -> bool {
        session.user.free_at == self.epoch()
    }

    /// Whether the `default` user needs no password and is on: clients start authenticated
    /// and none is ever asked to authenticate (Redis's `authRequired`).
    #[inline]
    pub fn default_open(&self) -> bool {
        self.0.default_open.load(Ordering::Acquire)
    }

    /// Runs `f` over the users, then moves the epoch on if it says it changed something.
    /// ([`OnChange`] is told after.)
    fn change<R>(&self, f: impl FnOnce(&mut State) -> (R, bool)) -> R {
        let mut st = self.state();
        let (r, changed) = f(&mut st);
        if changed {
            let open = st
                .users
                .get(&b"default"[..])
                .is_some_and(|u| u.nopass && u.enabled);
            self.0.default_open.store(open, Ordering::Release);
            self.0.epoch.fetch_add(1, Ordering::AcqRel);
            drop(st);
            if let Some(hook) = lock(&self.0.on_change).as_ref() {
                hook();
            }
        }
        r
    }

    /// Looks `session`'s user up again if the users changed since it last did: the snapshot
    /// to check against (`None`: the user was deleted).
    pub fn refresh(&self, session: &mut Session) -> Option<Arc<User>> {
        let epoch = self.epoch();
        let cu = &mut session.user;
        if cu.seen_at != epoch || cu.user.is_none() {
            let st = self.state();
            cu.user = st.users.get(cu.name()).cloned();
            cu.seen_at = epoch;
            cu.free_at = match &cu.user {
                Some(u) if u.unrestricted() => epoch,
                _ => NEVER,
            };
        }
        cu.user.clone()
    }

    /// A user by name.
    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.state().users.get(name).cloned()
    }

    /// The names of the users, in order.
    pub fn user_names(&self) -> Vec<Vec<u8>> {
        self.state().users.keys().cloned().collect()
    }

    /// ACL LIST's lines.
    pub fn list(&self) -> Vec<Vec<u8>> {
        let st = self.state();
        st.users
            .values()
            .map(|u| {
                let mut line = b"user ".to_vec();
                line.extend_from_slice(&u.name);
                line.push(b' ');
                line.extend_from_slice(&u.describe());
                line
            })
            .collect()
    }

    /// The text of an ACL file holding the users as they are now (ACL SAVE): ACL LIST's
    /// lines, each ended by a newline.
    pub fn file_text(&self) -> Vec<u8> {
        let mut text = Vec::new();
        for line in self.list() {
            text.extend_from_slice(&line);
            text.push(b'\n');
        }
        text
    }

    /// Replaces every user by those of an ACL file's `text` (ACL LOAD, and the start with an
    /// `aclfile`), all or nothing, as Redis's `ACLLoadFromFile`: each line `user <name>
    /// <rules>`, applied to a new user; a file without a `default` user gets the default one.
    /// `Ok`: the names of the users the file no longer has; the host is told of each, as of
    /// a deleted one (see [`OnDelete`]; `by`: the loading client). `Err`: Redis's text naming
    /// each bad line by `file` and its number; the users are unchanged.
    pub fn load(&self, text: &[u8], file: &str, by: u64) -> Result<Vec<Vec<u8>>, Vec<u8>> {
        let pubsub_all = self.state().pubsub_all;
        let mut users: BTreeMap<Vec<u8>, Arc<User>> = BTreeMap::new();
        let mut errors = String::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let n = i + 1;
            let line = trim(line, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            // Split at each space, as Redis does (two spaces make an empty rule).
            let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            if argv[0] != b"user" || argv.len() < 2 {
                errors += &format!(
                    "{file}:{n} should start with user keyword followed by the username. "
                );
                continue;
            }
            let name = argv[1];
            if user::has_spaces(name) {
                // (Redis's text opens with a stray quote.)
                errors += &format!(
                    "'{file}:{n}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(c_str(name))
                );
                continue;
            }
            if users.contains_key(name) {
                errors += &format!(
                    "WARNING: Duplicate user '{}' found on line {n}. ",
                    String::from_utf8_lossy(c_str(name))
                );
                continue;
            }
            let mut user = User::new(name, pubsub_all);
            let Ok(rules) = merge_selectors(&argv[2..]) else {
                errors += &format!("{file}:{n}: Unmatched parenthesis in selector definition.");
                users.insert(name.to_vec(), Arc::new(user));
                continue;
            };
            let mut syntax_error = false;
            for rule in &rules {
                let rule = trim(rule, b"\t\r\n");
                match user.apply(rule, pubsub_all) {
                    Ok(()) => {}
                    // A rule naming no command says so each time (it shows nothing secret).
                    Err(e @ RuleError::Unknown) => {
                        errors += &format!(
                            "{file}:{n}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(c_str(rule)),
                            e.message()
                        );
                    }
                    // Others only the first time: it may be why the next ones fail.
                    Err(e) if !syntax_error => {
                        errors += &format!("{file}:{n}: {}. ", e.message());
                        syntax_error = true;
                    }
                    Err(_) => {}
                }
            }
            users.insert(name.to_vec(), Arc::new(user));
        }
        if !errors.is_empty() {
            errors += "WARNING: ACL errors detected, no change to the previously active ACL rules was performed";
            return Err(errors.into_bytes());
        }
        users
            .entry(b"default".to_vec())
            .or_insert_with(|| Arc::new(User::new_default()));
        let gone: Vec<Vec<u8>> = self.change(|st| {
            let gone = (st.users.keys())
                .filter(|name| !users.contains_key(*name))
                .cloned()
                .collect();
            st.users = users;
            (gone, true)
        });
        self.tell_deleted(&gone, by);
        Ok(gone)
    }

    /// Creates or changes user `name` by `rules`, all or nothing (ACL SETUSER). `Err` is
    /// Redis's error text.
    pub fn set_user(&self, name: &[u8], rules: &[&[u8]]) -> Result<(), Vec<u8>> {
        let merged = merge_selectors(rules).map_err(|at| {
            let mut e = b"Unmatched parenthesis in acl selector starting at '".to_vec();
            e.extend_from_slice(c_str(rules.get(at).copied().unwrap_or_default()));
            e.extend_from_slice(b"'.");
            e
        })?;
        self.change(|st| {
            let pubsub_all = st.pubsub_all;
            let mut user = match st.users.get(name) {
                Some(u) => (**u).clone(),
                None => User::new(name, pubsub_all),
            };
            for op in &merged {
                if let Err(e) = user.apply(op, pubsub_all) {
                    let mut m = b"Error in ACL SETUSER modifier '".to_vec();
                    m.extend_from_slice(c_str(op));
                    m.extend_from_slice(b"': ");
                    m.extend_from_slice(e.message().as_bytes());
                    return (Err(m), false);
                }
            }
            st.users.insert(name.to_vec(), Arc::new(user));
            (Ok(()), true)
        })
    }

    /// Deletes users (ACL DELUSER by client `by`): how many existed. The host is told of each
    /// so that it disconnects their clients.
    pub fn delete_users(&self, names: &[&[u8]], by: u64) -> usize {
        let gone: Vec<Vec<u8>> = self.change(|st| {
            let gone: Vec<Vec<u8>> = names
                .iter()
                .filter(|n| st.users.remove(**n).is_some())
                .map(|n| n.to_vec())
                .collect();
            let changed = !gone.is_empty();
            (gone, changed)
        });
        self.tell_deleted(&gone, by);
        gone.len()
    }

    /// Tells the host of deleted users (see [`OnDelete`]).
    fn tell_deleted(&self, gone: &[Vec<u8>], by: u64) {
        if let Some(hook) = lock(&self.0.on_delete).as_ref() {
            for name in gone {
                hook(name, by);
            }
        }
    }

    /// `requirepass` set (at start, CONFIG SET): the `default` user's password, or none
    /// (Redis's `ACLUpdateDefaultUserPassword`).
    pub fn set_default_password(&self, password: &[u8]) {
        self.change(|st| {
            st.requirepass = password.to_vec();
            let pubsub_all = st.pubsub_all;
            let mut u = match st.users.get(&b"default"[..]) {
                Some(u) => (**u).clone(),
                None => User::new_default(),
            };
            let _ = u.apply(b"resetpass", pubsub_all);
            if password.is_empty() {
                let _ = u.apply(b"nopass", pubsub_all);
            } else {
                let mut op = b">".to_vec();
                op.extend_from_slice(password);
                let _ = u.apply(&op, pubsub_all);
            }
            st.users.insert(b"default".to_vec(), Arc::new(u));
            ((), true)
        });
    }

    /// Gives the default user `requirepass` if it is not the one it was last given (an
    /// embedder may set the configuration directly); cheap when it is.
    pub fn sync_requirepass(&self, password: &[u8]) {
        if self.state().requirepass != password {
            self.set_default_password(password);
        }
    }

    /// `acl-pubsub-default` (`allchannels` or not) and `acllog-max-len`.
    pub fn configure(&self, pubsub_all: bool, log_max: usize) {
        let mut st = self.state();
        st.pubsub_all = pubsub_all;
        st.log_max = log_max;
        st.log.truncate(log_max);
    }

    /// Sets the host's source of CLIENT INFO lines for ACL LOG.
    pub fn set_client_info(&self, f: ClientInfo) {
        *lock(&self.0.client_info) = Some(f);
    }

    /// Sets what is told of deleted users (see [`OnDelete`]).
    pub fn set_on_delete(&self, f: OnDelete) {
        *lock(&self.0.on_delete) = Some(f);
    }

    /// Sets what is told of every change to the users (see [`OnChange`]).
    pub fn set_on_change(&self, f: OnChange) {
        *lock(&self.0.on_change) = Some(f);
    }

    /// Whether `user` and `password` authenticate (AUTH, HELLO AUTH).
    pub fn authenticate(&self, user: &[u8], password: &[u8]) -> bool {
        self.user(user).is_some_and(|u| u.accepts(password))
    }

    /// Records a refusal in ACL LOG (Redis's `addACLLogEntry`): merged into a recent entry
    /// that is alike, else added first. `client` is the client's id for its CLIENT INFO line.
    pub fn log(
        &self,
        reason: Reason,
        context: Context,
        object: &[u8],
        username: &[u8],
        client: u64,
        now_ms: u64,
    ) {
        let client_info = match lock(&self.0.client_info).as_ref() {
            Some(f) => f(client),
            None => format!("id={client}").into_bytes(),
        };
        let mut st = self.state();
        st.denied[match reason {
            Reason::Auth => 0,
            Reason::Command => 1,
            Reason::Key => 2,
            Reason::Channel => 3,
        }] += 1;
        if st.log_max == 0 {
            st.log.clear();
            return;
        }
        let alike = st.log.iter().take(LOG_MERGE_SCAN).position(|e| {
            e.reason == reason
                && e.context == context
                && e.updated.abs_diff(now_ms) <= LOG_MERGE_MS
                && e.object == object
                && e.username == username
        });
        if let Some(at) = alike {
            if let Some(mut e) = st.log.remove(at) {
                e.client_info = client_info;
                e.updated = now_ms;
                e.count += 1;
                st.log.push_front(e);
            }
            return;
        }
        let id = st.next_log_id;
        st.next_log_id += 1;
        st.log.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.to_vec(),
            updated: now_ms,
            created: now_ms,
            client_info,
            id,
        });
        let max = st.log_max;
        st.log.truncate(max);
    }

    /// ACL LOG RESET.
    pub fn log_reset(&self) {
        self.state().log.clear();
    }

    /// The newest `count` entries of ACL LOG.
    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.state().log.iter().take(count).cloned().collect()
    }

    /// INFO stats' `acl_access_denied_auth`, `_cmd`, `_key` and `_channel`.
    pub fn denied_counts(&self) -> [u64; 4] {
        self.state().denied
    }
}

impl LogEntry {
    /// Writes the entry as ACL LOG shows it (`now_ms` for its age).
    pub fn write(&self, w: &mut crate::resp::ReplyWriter<'_>, now_ms: u64) {
        w.map_len(10);
        w.bulk(b"count");
        w.int(self.count as i64);
        w.bulk(b"reason");
        w.bulk(self.reason.name().as_bytes());
        w.bulk(b"context");
        w.bulk(self.context.name().as_bytes());
        w.bulk(b"object");
        w.bulk(&self.object);
        w.bulk(b"username");
        w.bulk(&self.username);
        w.bulk(b"age-seconds");
        w.double((now_ms as f64 - self.updated as f64) / 1000.0);
        w.bulk(b"client-info");
        w.bulk(&self.client_info);
        w.bulk(b"entry-id");
        w.int(self.id as i64);
        w.bulk(b"timestamp-created");
        w.int(self.created as i64);
        w.bulk(b"timestamp-last-updated");
        w.int(self.updated as i64);
    }
}

/// `s` without the bytes of `set` at either end (Redis's `sdstrim`).
fn trim<'s>(mut s: &'s [u8], set: &[u8]) -> &'s [u8] {
    while let [first, rest @ ..] = s {
        if !set.contains(first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !set.contains(last) {
            break;
        }
        s = rest;
    }
    s
}

/// `s` up to its first NUL, as Redis's `%s` formats it.
fn c_str(s: &[u8]) -> &[u8] {
    s.split(|&b| b == 0).next().unwrap_or_default()
}

/// Joins a selector given over several arguments (`(+get`, `~x)`) into one rule, as Redis's
/// `ACLMergeSelectorArguments`; `Err` is the index where an unclosed one starts.
fn merge_selectors(rules: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::with_capacity(rules.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, op) in rules.iter().enumerate() {
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                if let Some((_, sel)) = open.take() {
                    out.push(sel);
                }
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((i, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((at, _)) => Err(at),
        None => Ok(out),
    }
}

/// The NOPERM error of a refusal (without the `-`), as Redis words it for a client.
pub fn denial_message(d: Denial, user: &[u8], command: &str) -> Vec<u8> {
    match d {
        Denial::Command => {
            let mut m = b"User ".to_vec();
            m.extend_from_slice(user);
            m.extend_from_slice(b" has no permissions to run the '");
            m.extend_from_slice(command.as_bytes());
            m.extend_from_slice(b"' command");
            m
        }
        Denial::Key(_) => b"No permissions to access a key".to_vec(),
        Denial::Channel(_) => b"No permissions to access a channel".to_vec(),
    }
}

/// The wording of ACL DRYRUN, which names the key or channel.
pub fn denial_message_verbose(d: Denial, user: &[u8], command: &str, args: &[&[u8]]) -> Vec<u8> {
    let (what, at) = match d {
        Denial::Command => return denial_message(d, user, command),
        Denial::Key(at) => ("key", at),
        Denial::Channel(at) => ("channel", at),
    };
    let mut m = b"User ".to_vec();
    m.extend_from_slice(user);
    m.extend_from_slice(b" has no permissions to access the '");
    m.extend_from_slice(args.get(at).copied().unwrap_or_default());
    m.extend_from_slice(b"' ");
    m.extend_from_slice(what.as_bytes());
    m
}

/// The ACL number and full name of the command a call of `spec` with `args` runs (its
/// subcommand for a container).
pub(crate) fn command_of(
    spec: &crate::commands::CommandSpec,
    args: &[&[u8]],
) -> Option<(usize, &'static str)> {
    let cat = catalog::catalog();
    let id = cat
        .of_call(spec.name, args)
        .or_else(|| cat.find(spec.name.as_bytes()))?;
    Some((id, cat.names[id]))
}

/// The full name of a command (`config|get`), as DRYRUN finds it: `args[0]` and, for a
/// container, `args[1]`; `None` when there is no such command.
pub(crate) fn lookup_call(args: &[&[u8]]) -> Option<(usize, &'static str)> {
    let cat = catalog::catalog();
    let base = cat.find(args.first()?)?;
    if cat.subs[base].is_empty() || args.len() < 2 {
        return Some((base, cat.names[base]));
    }
    let id = cat.of_call(cat.names[base], args)?;
    Some((id, cat.names[id]))
}

/// ACL CAT `category`: the commands in it, in the catalog's order; `None` for no such category.
pub fn commands_in(category: &[u8]) -> Option<Vec<&'static str>> {
    let bit = catalog::category(category)?;
    let cat = catalog::catalog();
    Some(
        (0..cat.len())
            .filter(|&i| cat.cats[i] & bit != 0)
            .map(|i| cat.names[i])
            .collect(),
    )
}

#[cfg(test)]
mod tests;
