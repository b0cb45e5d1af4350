//! The commands ACL rules name: every command and subcommand of Redis 7.4's command facts
//! (`redis-docs.txt`), served here or not, so that a rule Redis accepts is accepted here and
//! ACL CAT lists what Redis lists. Each gets a number (its bit in a selector's bitmap), its
//! categories as bits, and its place among containers and subcommands.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::commands::docs;

/// Redis's categories, in its order (ACL CAT without an argument).
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The numbered commands.
pub(crate) struct Catalog {
    /// Full name of each (`config|get` for a subcommand).
    pub(crate) names: Vec<&'static str>,
    /// Category bits of each (bit `i` is [`CATEGORIES`]`[i]`).
    pub(crate) cats: Vec<u32>,
    /// The container of a subcommand.
    pub(crate) parent: Vec<Option<usize>>,
    /// The subcommands of a container.
    pub(crate) subs: Vec<Vec<usize>>,
    /// Commands a client may run before authenticating (AUTH, HELLO ...): never refused.
    pub(crate) no_auth: Vec<bool>,
    by_name: HashMap<&'static str, usize>,
}

/// Longest name [`Catalog::find`] looks up without giving up (longer ones name nothing).
const MAX_NAME: usize = 64;

pub(crate) fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let mut c = Catalog {
            names: Vec::new(),
            cats: Vec::new(),
            parent: Vec::new(),
            subs: Vec::new(),
            no_auth: Vec::new(),
            by_name: HashMap::new(),
        };
        for name in docs::names() {
            let Some(e) = docs::entry(name) else { continue };
            let id = c.names.len();
            let cats = e
                .categories()
                .filter_map(|n| CATEGORIES.iter().position(|c| c.eq_ignore_ascii_case(n)))
                .fold(0u32, |m, i| m | 1 << i);
            let parent = name
                .split_once('|')
                .and_then(|(p, _)| c.by_name.get(p).copied());
            if let Some(p) = parent {
                c.subs[p].push(id);
            }
            c.names.push(name);
            c.cats.push(cats);
            c.parent.push(parent);
            c.subs.push(Vec::new());
            c.no_auth.push(e.has_flag("no_auth"));
            c.by_name.insert(name, id);
        }
        c
    })
}

impl Catalog {
    /// Number of commands.
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// A command by its name as a rule spells it: `name` or `container|sub`, any case (Redis's
    /// strict lookup: a subcommand only of a container, one level).
    pub(crate) fn find(&self, name: &[u8]) -> Option<usize> {
        if name.is_empty() || name.len() > MAX_NAME {
            return None;
        }
        let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        let mut parts = lower.split('|');
        let base = parts.next()?;
        let sub = parts.next();
        if parts.next().is_some() {
            return None;
        }
        let id = *self.by_name.get(base)?;
        match sub {
            None => Some(id),
            Some(_) if self.subs[id].is_empty() => None,
            Some(_) => self.by_name.get(lower.as_str()).copied(),
        }
    }

    /// The command a call of the table's `name` with `args` runs: its subcommand for a
    /// container (`None` when the subcommand is unknown).
    pub(crate) fn of_call(&self, name: &str, args: &[&[u8]]) -> Option<usize> {
        let id = *self.by_name.get(name)?;
        if self.subs[id].is_empty() {
            return Some(id);
        }
        let sub = args.get(1)?;
        if sub.len() + name.len() >= MAX_NAME {
            return None;
        }
        let mut buf = [0u8; MAX_NAME];
        let full = name.len() + 1 + sub.len();
        buf[..name.len()].copy_from_slice(name.as_bytes());
        buf[name.len()] = b'|';
        buf[name.len() + 1..full].copy_from_slice(sub);
        buf[..full].make_ascii_lowercase();
        let full = std::str::from_utf8(&buf[..full]).ok()?;
        self.by_name.get(full).copied()
    }
}

/// A category's bit by its name (any case), as `+@name` spells it without the `@`.
pub(crate) fn category(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_subcommands_by_name() {
        let c = catalog();
        let get = c.find(b"GET").unwrap();
        assert_eq!(c.names[get], "get");
        assert!(c.cats[get] & category(b"read").unwrap() != 0);
        let cfg = c.find(b"config").unwrap();
        let cfg_get = c.find(b"Config|Get").unwrap();
        assert_eq!(c.parent[cfg_get], Some(cfg));
        assert!(c.subs[cfg].contains(&cfg_get));
        assert_eq!(c.find(b"get|x"), None, "GET has no subcommands");
        assert_eq!(c.find(b"config|get|x"), None);
        assert_eq!(c.find(b"nosuch"), None);
        assert_eq!(
            c.of_call("config", &[b"config", b"GET", b"x"]),
            Some(cfg_get)
        );
        assert_eq!(c.of_call("config", &[b"config", b"nosuch"]), None);
        assert_eq!(c.of_call("get", &[b"get", b"k"]), Some(get));
        assert!(c.no_auth[c.find(b"auth").unwrap()]);
        // Served or not, Redis's commands are all there.
        assert!(c.find(b"cluster|info").is_some());
        assert_eq!(CATEGORIES.len(), 21);
    }
}
