//! Keyspace events: what a command tells subscribers of `__keyspace@<db>__:<key>` and
//! `__keyevent@<db>__:<event>` (Redis's `notifyKeyspaceEvent`), and the hook that WATCH
//! listens to (Redis's `signalModifiedKey`, see [`crate::watch`]).
//!
//! The store only records: each command appends [`KeyEvent`]s to a queue on [`Db`], in the
//! order Redis would publish them, and the server drains the queue after the command and
//! publishes. The configured classes (`notify-keyspace-events`) filter at the source, so with
//! notifications off a call to [`Db::notify`] is one test of a word already in cache.
//!
//! Two kinds of events are raised inside the keyspace rather than by a command: a key found
//! past its deadline and deleted (`expired`, lazily on lookup or by the active cycle) and a key
//! created (`new`, Redis's `dbAdd`). The keyspace logs those only while someone listens (see
//! `Keyspace::log_mask`), and [`Db`] turns the log into events in order: before the next event
//! a command raises, and at the end of every command.

use crate::keyspace::{LOG_EXPIRED, LOG_NEW};
use crate::Db;

/// Event classes: Redis's `NOTIFY_*` bits.
pub mod class {
    /// `K`: publish on `__keyspace@<db>__:<key>`.
    pub const KEYSPACE: u32 = 1 << 0;
    /// `E`: publish on `__keyevent@<db>__:<event>`.
    pub const KEYEVENT: u32 = 1 << 1;
    /// `g`: generic commands (DEL, EXPIRE, RENAME ...).
    pub const GENERIC: u32 = 1 << 2;
    /// `$`: string commands.
    pub const STRING: u32 = 1 << 3;
    /// `l`: list commands.
    pub const LIST: u32 = 1 << 4;
    /// `s`: set commands.
    pub const SET: u32 = 1 << 5;
    /// `h`: hash commands.
    pub const HASH: u32 = 1 << 6;
    /// `z`: sorted-set commands.
    pub const ZSET: u32 = 1 << 7;
    /// `x`: a key (or hash field) expired.
    pub const EXPIRED: u32 = 1 << 8;
    /// `e`: a key was evicted for maxmemory.
    pub const EVICTED: u32 = 1 << 9;
    /// `t`: stream commands.
    pub const STREAM: u32 = 1 << 10;
    /// `m`: a read lookup missed (not part of `A`).
    pub const KEY_MISS: u32 = 1 << 11;
    /// Modules only: a key loaded from an RDB file (no letter).
    pub const LOADED: u32 = 1 << 12;
    /// `d`: module events.
    pub const MODULE: u32 = 1 << 13;
    /// `n`: a key was created (not part of `A`).
    pub const NEW: u32 = 1 << 14;
    /// `A`: `g$lshzxetd`.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// Parses a `notify-keyspace-events` value (Redis's `keyspaceEventsStringToFlags`); `None` when
/// a character names no class. The empty string is no class at all.
pub fn parse_classes(s: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in s {
        flags |= match c {
            b'A' => class::ALL,
            b'g' => class::GENERIC,
            b'$' => class::STRING,
            b'l' => class::LIST,
            b's' => class::SET,
            b'h' => class::HASH,
            b'z' => class::ZSET,
            b'x' => class::EXPIRED,
            b'e' => class::EVICTED,
            b'K' => class::KEYSPACE,
            b'E' => class::KEYEVENT,
            b't' => class::STREAM,
            b'm' => class::KEY_MISS,
            b'd' => class::MODULE,
            b'n' => class::NEW,
            // Redis stops at a NUL byte (the value is a C string there).
            0 => break,
            _ => return None,
        };
    }
    Some(flags)
}

/// The canonical text of a set of classes (Redis's `keyspaceEventsFlagsToString`): `A` when
/// every class of `A` is on, else their letters in a fixed order; then `K`, `E`, `m`.
pub fn classes_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & class::ALL == class::ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (class::GENERIC, 'g'),
            (class::STRING, '$'),
            (class::LIST, 'l'),
            (class::SET, 's'),
            (class::HASH, 'h'),
            (class::ZSET, 'z'),
            (class::EXPIRED, 'x'),
            (class::EVICTED, 'e'),
            (class::STREAM, 't'),
            (class::MODULE, 'd'),
            (class::NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [
        (class::KEYSPACE, 'K'),
        (class::KEYEVENT, 'E'),
        (class::KEY_MISS, 'm'),
    ] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// One recorded event: the server publishes `event` on `__keyspace@<db>__:<key>` (when `K` is
/// configured) and `key` on `__keyevent@<db>__:<event>` (when `E` is).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    /// The event's class (one [`class`] bit).
    pub class: u32,
    /// The event name (`set`, `del`, `expired` ...).
    pub event: &'static str,
    /// The logical database.
    pub db: usize,
    /// The key.
    pub key: Box<[u8]>,
}

impl Db {
    /// Records a keyspace event, if the configured classes include `class` and publish on
    /// either channel kind (`K` or `E`). Redis's `notifyKeyspaceEvent`.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &'static str, db: usize, key: &[u8]) {
        let on = self.config.notify_keyspace_events;
        if on & class == 0 || on & (class::KEYSPACE | class::KEYEVENT) == 0 {
            return;
        }
        self.notify_slow(class, event, db, key);
    }

    #[cold]
    fn notify_slow(&mut self, class: u32, event: &'static str, db: usize, key: &[u8]) {
        // What the keyspace logged (an expired or new key) came first.
        self.pull_keyspace_logs();
        self.events.push(KeyEvent {
            class,
            event,
            db,
            key: key.into(),
        });
    }

    /// Whether events wait to be drained.
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
            || (self.log_mask != 0 && self.dbs.iter().any(|ks| !ks.log.is_empty()))
    }

    /// Takes the recorded events, oldest first.
    pub fn drain_events(&mut self) -> std::vec::Drain<'_, KeyEvent> {
        self.pull_keyspace_logs();
        self.events.drain(..)
    }

    /// Turns what the keyspaces logged (keys deleted on expiry, keys created) into events and
    /// WATCH touches, in database order. Cheap when nothing was logged.
    #[inline]
    pub(crate) fn pull_keyspace_logs(&mut self) {
        if self.log_mask == 0 {
            return;
        }
        for dbi in 0..self.dbs.len() {
            if !self.dbs[dbi].log.is_empty() {
                self.pull_log_of(dbi);
            }
        }
    }

    #[cold]
    fn pull_log_of(&mut self, dbi: usize) {
        let log = std::mem::take(&mut self.dbs[dbi].log);
        for (kind, key) in &log {
            if *kind == LOG_EXPIRED {
                self.log_deleted(dbi, key);
                self.notify(class::EXPIRED, "expired", dbi, key);
                // The key is gone at this point (it may be back by now: the touch must see
                // it as it was right after the deletion).
                self.touch_watched(dbi, key, Some(false));
            } else if *kind == LOG_NEW {
                self.notify(class::NEW, "new", dbi, key);
            }
        }
        let mut log = log;
        log.clear();
        if self.dbs[dbi].log.is_empty() {
            self.dbs[dbi].log = log;
        }
    }

    /// What the keyspaces must log for the current configuration and watchers; applied to
    /// every keyspace when it changed. Runs with each clock refresh, CONFIG SET and WATCH.
    pub(crate) fn sync_log_mask(&mut self) {
        let on = self.config.notify_keyspace_events;
        let mut mask = 0;
        if on & (class::KEYSPACE | class::KEYEVENT) != 0 {
            if on & class::EXPIRED != 0 {
                mask |= LOG_EXPIRED;
            }
            if on & class::NEW != 0 {
                mask |= LOG_NEW;
            }
        }
        if self.watch.any() || self.changes.is_some() {
            mask |= LOG_EXPIRED;
        }
        if mask != self.log_mask {
            self.pull_keyspace_logs();
            self.log_mask = mask;
            for ks in &mut self.dbs {
                ks.log_mask = mask;
            }
        }
    }

    /// `key` was changed by a command: Redis's `signalModifiedKey` then `notifyKeyspaceEvent`.
    #[inline]
    pub(crate) fn modified(&mut self, class: u32, event: &'static str, db: usize, key: &[u8]) {
        self.signal_modified(db, key);
        self.notify(class, event, db, key);
    }

    /// A read lookup of `key` missed: Redis's `keymiss` event (lookupKeyRead).
    #[inline]
    pub(crate) fn key_miss(&mut self, db: usize, key: &[u8]) {
        self.notify(class::KEY_MISS, "keymiss", db, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_like_redis() {
        assert_eq!(parse_classes(b""), Some(0));
        assert_eq!(parse_classes(b"KEA"), Some(class::ALL | 3));
        assert_eq!(classes_to_string(class::ALL | 3), "AKE");
        assert_eq!(parse_classes(b"Ex"), Some(class::EXPIRED | class::KEYEVENT));
        assert_eq!(classes_to_string(class::EXPIRED | class::KEYEVENT), "xE");
        assert_eq!(
            parse_classes(b"KEAmn").map(classes_to_string).unwrap(),
            "AKEm"
        );
        // `n` is outside `A`, so it is only printed among the letters.
        assert_eq!(
            parse_classes(b"gn$K").map(classes_to_string).unwrap(),
            "g$nK"
        );
        assert_eq!(
            parse_classes(b"g$lshzxetd").map(classes_to_string).unwrap(),
            "A"
        );
        assert_eq!(parse_classes(b"KEw"), None);
        assert_eq!(parse_classes(b"a"), None);
        assert_eq!(parse_classes(b"m"), Some(class::KEY_MISS));
        assert_eq!(classes_to_string(0), "");
        // Letters twice are fine; the printed form is canonical.
        assert_eq!(parse_classes(b"llKK").map(classes_to_string).unwrap(), "lK");
        for flags in 0..(1u32 << 15) {
            let flags = flags & !class::LOADED;
            // `A` hides `n` (Redis prints `n` only among the single letters).
            let want = if flags & class::ALL == class::ALL {
                flags & !class::NEW
            } else {
                flags
            };
            assert_eq!(
                parse_classes(classes_to_string(flags).as_bytes()),
                Some(want)
            );
        }
    }

    #[test]
    fn notify_filters_by_class_and_channel_kind() {
        let mut db = Db::new();
        db.notify(class::STRING, "set", 0, b"k");
        assert!(!db.has_events());
        db.execute(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"$"]);
        db.notify(class::STRING, "set", 0, b"k");
        assert!(!db.has_events(), "no K or E: nothing is published");
        db.execute(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"K$"]);
        db.notify(class::STRING, "set", 0, b"k");
        db.notify(class::LIST, "lpush", 0, b"k");
        assert!(db.has_events());
        let got: Vec<KeyEvent> = db.drain_events().collect();
        assert_eq!(
            got,
            vec![KeyEvent {
                class: class::STRING,
                event: "set",
                db: 0,
                key: b"k"[..].into()
            }]
        );
        assert!(!db.has_events());
    }
}
