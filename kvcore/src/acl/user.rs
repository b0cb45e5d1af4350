//! A user and its selectors: the rules ACL SETUSER applies (Redis's `ACLSetUser` and
//! `ACLSetSelector`), the text ACL LIST and GETUSER show, and the permission check of a call.
//!
//! A selector holds a bitmap of the commands it may run (numbered by [`super::catalog`]), the
//! first arguments allowed of commands it may not run otherwise (`+select|0`), its key
//! patterns (each readable, writable or both) and its channel patterns. It also keeps the
//! command rules as given (`+get -@write`, lower case, a later rule for the same command
//! replacing an earlier one), which is how Redis shows them back: the bitmap alone cannot say
//! which rules made it. A user passes a check when any of its selectors does (the root one,
//! then those added with `(...)`).

use super::catalog::{catalog, category};
use super::sha256;
use crate::commands::docs;

/// Key pattern permission: read (`%R~`).
pub(crate) const READ: u8 = 1;
/// Key pattern permission: write (`%W~`).
pub(crate) const WRITE: u8 = 2;
/// Both (`~`).
pub(crate) const READ_WRITE: u8 = READ | WRITE;

/// Why a rule was refused (Redis's errno cases of `ACLSetUser`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// Not a rule, or a pattern with spaces (EINVAL).
    Syntax,
    /// `+`/`-` of a command or category that does not exist (ENOENT).
    Unknown,
    /// A key pattern after `allkeys` (EEXIST).
    KeyAfterAll,
    /// A channel pattern after `allchannels` (EISDIR).
    ChannelAfterAll,
    /// `<pass` or `!hash` of a password the user does not have (ENODEV).
    NoSuchPassword,
    /// `#hash` that is not 64 lowercase hex digits (EBADMSG).
    BadHash,
    /// `+container|sub|arg` (ECHILD).
    FirstArgOfSubcommand,
}

impl RuleError {
    /// Redis's text for it (`ACLSetUserStringError`).
    pub fn message(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// Why a call is refused, with the argument that caused it (0 for the command itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denial {
    /// The command (or subcommand) is not allowed.
    Command,
    /// The key at this argument is not.
    Key(usize),
    /// The channel at this argument is not.
    Channel(usize),
}

impl Denial {
    /// Redis's ranking when selectors disagree: a key beats the command, a channel both.
    fn rank(self) -> (u8, usize) {
        match self {
            Denial::Command => (1, 0),
            Denial::Key(i) => (2, i),
            Denial::Channel(i) => (4, i),
        }
    }
}

/// One key pattern and what it allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyPattern {
    pub(crate) flags: u8,
    pub(crate) pattern: Vec<u8>,
}

impl KeyPattern {
    fn write_rule(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.flags {
            READ => b"%R~",
            WRITE => b"%W~",
            _ => b"~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// A set of permissions: the root one of a user, or one added with `(...)`.
#[derive(Clone, Debug)]
pub struct Selector {
    all_keys: bool,
    all_channels: bool,
    all_commands: bool,
    /// Set by `+@all` (and kept until `-@all`): the rules are shown starting from `+@all`.
    from_all: bool,
    allowed: Vec<u64>,
    /// Allowed first arguments of commands not allowed otherwise, by command number.
    first_args: Vec<(usize, Vec<Vec<u8>>)>,
    keys: Vec<KeyPattern>,
    channels: Vec<Vec<u8>>,
    /// The command rules as Redis shows them, space-separated.
    rules: Vec<u8>,
}

/// Whether `s` has a space or a NUL (Redis's `ACLStringHasSpaces`).
pub(crate) fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0))
}

impl Selector {
    /// An empty selector (no command, key or channel), with every channel when
    /// `acl-pubsub-default` is `allchannels`.
    pub(crate) fn new(all_channels: bool) -> Selector {
        Selector {
            all_keys: false,
            all_channels,
            all_commands: false,
            from_all: false,
            allowed: vec![0; catalog().len().div_ceil(64)],
            first_args: Vec::new(),
            keys: Vec::new(),
            channels: Vec::new(),
            rules: Vec::new(),
        }
    }

    /// Whether it allows every command, key and channel.
    pub(crate) fn unrestricted(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels
    }

    fn bit(&self, id: usize) -> bool {
        self.allowed
            .get(id / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if let Some(w) = self.allowed.get_mut(id / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
            }
        }
        if !on {
            self.all_commands = false;
        }
    }

    /// Allows or denies a command and, for a container, all its subcommands.
    fn change(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.first_args.retain(|(c, _)| *c != id);
        for &sub in &catalog().subs[id] {
            self.set_bit(sub, on);
        }
    }

    /// Records a command rule (`rule` without its sign, lower case), replacing an earlier rule
    /// for the same command (or any of its subcommands).
    fn note_rule(&mut self, rule: &[u8], allow: bool) {
        let rule = rule.to_ascii_lowercase();
        let kept: Vec<&[u8]> = self
            .rules
            .split(|&b| b == b' ')
            .filter(|t| !t.is_empty())
            .filter(|t| {
                let name = &t[1..];
                !(name == rule.as_slice()
                    || (name.len() > rule.len()
                        && name.starts_with(&rule)
                        && name[rule.len()] == b'|'))
            })
            .collect();
        let mut rules = kept.join(&b' ');
        if !rules.is_empty() {
            rules.push(b' ');
        }
        rules.push(if allow { b'+' } else { b'-' });
        rules.extend_from_slice(&rule);
        self.rules = rules;
    }

    fn set_all_commands(&mut self, on: bool) {
        let fill = if on { u64::MAX } else { 0 };
        self.allowed.iter_mut().for_each(|w| *w = fill);
        self.all_commands = on;
        self.from_all = on;
        self.rules.clear();
        self.first_args.clear();
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    pub(crate) fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || is("~*") {
            self.all_keys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all_commands(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all_commands(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            self.add_key_pattern(op)?;
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.all_channels = false;
        } else if op.len() > 1 && op[1] == b'@' && (op[0] == b'+' || op[0] == b'-') {
            let allow = op[0] == b'+';
            let bit = category(&op[2..]).ok_or(RuleError::Unknown)?;
            self.note_rule(&op[1..], allow);
            let cat = catalog();
            for id in 0..cat.len() {
                if cat.cats[id] & bit != 0 {
                    self.change(id, allow);
                }
            }
        } else if op[0] == b'+' {
            self.allow_command(&op[1..])?;
        } else if op[0] == b'-' {
            let cat = catalog();
            let id = cat.find(&op[1..]).ok_or(RuleError::Unknown)?;
            self.change(id, false);
            self.note_rule(cat.names[id].as_bytes(), false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `+name`, `+container|sub` or `+command|first-arg`.
    fn allow_command(&mut self, name: &[u8]) -> Result<(), RuleError> {
        let cat = catalog();
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let id = cat.find(name).ok_or(RuleError::Unknown)?;
            self.change(id, true);
            self.note_rule(cat.names[id].as_bytes(), true);
            return Ok(());
        };
        let (base, sub) = (&name[..bar], &name[bar + 1..]);
        let id = cat.find(base).ok_or(RuleError::Unknown)?;
        if cat.parent[id].is_some() {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if cat.subs[id].is_empty() {
            // A first argument of an otherwise refused command (`+select|0`).
            match self.first_args.iter_mut().find(|(c, _)| *c == id) {
                Some((_, args)) => {
                    if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                        args.push(sub.to_vec());
                    }
                }
                None => self.first_args.push((id, vec![sub.to_vec()])),
            }
        } else {
            let sub_id = cat.find(name).ok_or(RuleError::Unknown)?;
            self.change(sub_id, true);
        }
        self.note_rule(name, true);
        Ok(())
    }

    /// `~pattern` or `%R~`, `%W~`, `%RW~pattern`.
    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAll);
        }
        let (flags, at) = if op[0] == b'%' {
            let mut flags = 0u8;
            let mut at = 1;
            while at < op.len() {
                match op[at].to_ascii_uppercase() {
                    b'R' if flags & READ == 0 => flags |= READ,
                    b'W' if flags & WRITE == 0 => flags |= WRITE,
                    b'~' if flags != 0 => {
                        at += 1;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                at += 1;
            }
            (flags, at)
        } else {
            (READ_WRITE, 1)
        };
        let pattern = op.get(at..).unwrap_or_default();
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(k) => k.flags |= flags,
            None => self.keys.push(KeyPattern {
                flags,
                pattern: pattern.to_vec(),
            }),
        }
        Ok(())
    }

    /// The command rules as ACL GETUSER's `commands` shows them.
    pub(crate) fn command_rules(&self) -> Vec<u8> {
        let mut out = if self.from_all {
            b"+@all".to_vec()
        } else {
            b"-@all".to_vec()
        };
        if !self.rules.is_empty() {
            out.push(b' ');
            out.extend_from_slice(&self.rules);
        }
        out
    }

    /// ACL GETUSER's `keys`.
    pub(crate) fn key_rules(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            k.write_rule(&mut out);
        }
        out
    }

    /// ACL GETUSER's `channels`.
    pub(crate) fn channel_rules(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// The selector as ACL LIST shows it.
    fn describe(&self, out: &mut Vec<u8>) {
        if self.all_keys {
            out.extend_from_slice(b"~* ");
        } else {
            for k in &self.keys {
                k.write_rule(out);
                out.push(b' ');
            }
        }
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(&self.command_rules());
    }

    /// Whether this selector lets `id` run with `args`; `keys` caches the call's keys between
    /// the selectors of a user.
    fn check(
        &self,
        id: usize,
        args: &[&[u8]],
        keys: &mut Option<Vec<(usize, u16)>>,
    ) -> Result<(), Denial> {
        let cat = catalog();
        if !self.all_commands && !cat.no_auth[id] && !self.bit(id) {
            let at = if cat.parent[id].is_some() { 2 } else { 1 };
            let first_ok = args.len() >= 2
                && (self.first_args.iter())
                    .find(|(c, _)| *c == id)
                    .is_some_and(|(_, allowed)| {
                        args.get(at)
                            .is_some_and(|a| allowed.iter().any(|s| s.eq_ignore_ascii_case(a)))
                    });
            if !first_ok {
                return Err(Denial::Command);
            }
        }
        if !self.all_keys {
            if let Some(entry) = docs::entry(cat.names[id]).filter(|e| e.has_keys()) {
                let refs = keys.get_or_insert_with(|| entry.key_refs(args));
                for &(at, flags) in refs.iter() {
                    let key = args.get(at).copied().unwrap_or_default();
                    if !self.key_allowed(key, flags) {
                        return Err(Denial::Key(at));
                    }
                }
            }
        }
        if !self.all_channels {
            let name = cat.names[cat.parent[id].unwrap_or(id)];
            let (from, to, pattern) = match name {
                "publish" | "spublish" => (1, 2.min(args.len()), false),
                "subscribe" | "ssubscribe" => (1, args.len(), false),
                "psubscribe" => (1, args.len(), true),
                _ => (0, 0, false),
            };
            for (at, channel) in args.iter().enumerate().take(to).skip(from) {
                if !self.channel_allowed(channel, pattern) {
                    return Err(Denial::Channel(at));
                }
            }
        }
        Ok(())
    }

    fn key_allowed(&self, key: &[u8], spec_flags: u16) -> bool {
        let mut need = 0;
        if spec_flags & docs::ACCESS != 0 {
            need |= READ;
        }
        if spec_flags & (docs::INSERT | docs::DELETE | docs::UPDATE) != 0 {
            need |= WRITE;
        }
        self.keys
            .iter()
            .any(|k| k.flags & need == need && crate::glob::matches(&k.pattern, key, false))
    }

    /// A channel against the patterns; a PSUBSCRIBE pattern must equal one of them.
    pub(crate) fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    p == channel
                } else {
                    crate::glob::matches(p, channel, false)
                }
            })
    }
}

/// A user: its flags, passwords and selectors.
#[derive(Clone, Debug)]
pub struct User {
    pub(crate) name: Vec<u8>,
    pub(crate) enabled: bool,
    pub(crate) nopass: bool,
    pub(crate) skip_sanitize: bool,
    /// SHA-256 hex of each password.
    pub(crate) passwords: Vec<[u8; 64]>,
    /// The root selector first.
    pub(crate) selectors: Vec<Selector>,
}

/// Whether `hash` is a password hash as Redis keeps one: 64 lowercase hex digits.
fn valid_hash(hash: &[u8]) -> Option<[u8; 64]> {
    let ok = hash.len() == 64
        && hash
            .iter()
            .all(|&c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
    ok.then(|| {
        let mut h = [0u8; 64];
        h.copy_from_slice(hash);
        h
    })
}

impl User {
    /// A new user as ACL SETUSER creates it: off, no password, no permissions.
    pub(crate) fn new(name: &[u8], all_channels: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            skip_sanitize: false,
            passwords: Vec::new(),
            selectors: vec![Selector::new(all_channels)],
        }
    }

    /// The `default` user of a fresh server: on, no password, everything allowed.
    pub(crate) fn new_default() -> User {
        let mut u = User::new(b"default", true);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = u.apply(op.as_bytes(), false);
        }
        u
    }

    /// The user's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// Whether the user needs no password (`nopass`).
    pub fn nopass(&self) -> bool {
        self.nopass
    }

    /// The selectors, the root one first.
    pub fn selectors(&self) -> &[Selector] {
        &self.selectors
    }

    /// Whether the user may run every command on every key and channel.
    pub fn unrestricted(&self) -> bool {
        self.selectors.iter().any(Selector::unrestricted)
    }

    /// Whether `password` lets one authenticate as this user (enabled, and no password needed
    /// or one matches).
    pub fn accepts(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hashed = sha256::hex(password);
        // Compared in time independent of where they differ.
        self.passwords.iter().fold(false, |found, p| {
            found | (p.iter().zip(&hashed).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0)
        })
    }

    /// Applies one rule (Redis's `ACLSetUser`); `all_channels` is `acl-pubsub-default`.
    pub(crate) fn apply(&mut self, op: &[u8], all_channels: bool) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if op.is_empty() {
            return Ok(());
        }
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.skip_sanitize = true;
        } else if is("sanitize-payload") {
            self.skip_sanitize = false;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                sha256::hex(&op[1..])
            } else {
                valid_hash(&op[1..]).ok_or(RuleError::BadHash)?
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                sha256::hex(&op[1..])
            } else {
                valid_hash(&op[1..]).ok_or(RuleError::BadHash)?
            };
            let at = (self.passwords.iter().position(|p| *p == hash))
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op.len() > 1 && op[op.len() - 1] == b')' {
            let mut s = Selector::new(all_channels);
            let inner = &op[1..op.len() - 1];
            for rule in crate::resp::parse::split_words(inner).unwrap_or_default() {
                if !rule.is_empty() {
                    s.apply(&rule)?;
                }
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for op in ["resetpass", "resetkeys", "resetchannels"] {
                self.apply(op.as_bytes(), all_channels)?;
            }
            if all_channels {
                self.apply(b"allchannels", all_channels)?;
            }
            for op in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                self.apply(op.as_bytes(), all_channels)?;
            }
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// The user's rules as ACL LIST shows them after `user <name> `.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(if self.enabled { b"on " } else { b"off " });
        if self.nopass {
            out.extend_from_slice(b"nopass ");
        }
        out.extend_from_slice(if self.skip_sanitize {
            b"skip-sanitize-payload "
        } else {
            b"sanitize-payload "
        });
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p);
            out.push(b' ');
        }
        for (i, s) in self.selectors.iter().enumerate() {
            if i == 0 {
                s.describe(&mut out);
            } else {
                out.extend_from_slice(b" (");
                s.describe(&mut out);
                out.push(b')');
            }
        }
        out
    }

    /// ACL GETUSER's flags, in Redis's order.
    pub(crate) fn flag_names(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        f.push(if self.skip_sanitize {
            "skip-sanitize-payload"
        } else {
            "sanitize-payload"
        });
        f
    }

    /// Whether this user may run `command` (its number in the catalog) with `args`: the
    /// denial Redis would pick when no selector allows it.
    pub(crate) fn check_id(&self, id: usize, args: &[&[u8]]) -> Result<(), Denial> {
        let mut keys = None;
        let mut worst: Option<Denial> = None;
        for s in &self.selectors {
            match s.check(id, args, &mut keys) {
                Ok(()) => return Ok(()),
                Err(d) => {
                    if worst.is_none_or(|w| d.rank() > w.rank()) {
                        worst = Some(d);
                    }
                }
            }
        }
        Err(worst.unwrap_or(Denial::Command))
    }

    /// Whether this user may subscribe to `channel` (a pattern for PSUBSCRIBE).
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors
            .iter()
            .any(|s| s.channel_allowed(channel, is_pattern))
    }
}
