//! One logical database: keys → values, and the expiry index.
//!
//! Keys live in a [`Dict`] of intrusively chained nodes: one allocation per key holding the
//! chain link, the value, the deadline (only for keys that have one) and the key bytes (see
//! [`Packed`]). Keys with a deadline are also listed in a second dict, `expires`, which the
//! active expiry cycle walks with a SCAN cursor, as Redis walks `db->expires`: keys without a
//! TTL cost nothing there. Its entries are the main nodes themselves, chained through a link
//! word that nodes with a deadline carry after it ([`ExpLink`]): no allocation and no copy of
//! the key per entry, only the bucket. A node is taken out of `expires` before it is freed or
//! rebuilt in a new block, and put back after.
//!
//! Expiry is lazy on access — every lookup that finds a key past its deadline deletes it and
//! reports it missing — plus [`Keyspace::active_expire`], which samples keys with a deadline in
//! rounds of 20 and goes on while more than 10% of a round had expired and budget remains.
//! Deadlines are absolute Unix milliseconds; `now` is passed in by the caller (cached per batch).

mod node;
mod snap;

use crate::dict::{retiring, Dict, REHASH_MOVES};
use crate::value::{Stored, Value};
use node::ExpLink;
pub(crate) use node::Thin;
pub use node::{KeyNode, Packed, Plain, ACCESS_MAX, EMB_STR_MAX};
use node::{NewValue, Node, Nodes};
pub(crate) use snap::Snap;

use crate::evict::AccessMode;

/// What a write does to the key's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// Remove any deadline (plain SET).
    Clear,
    /// Keep the current deadline (SET KEEPTTL, in-place modifications).
    Keep,
    /// Set this absolute deadline in Unix ms.
    At(u64),
}

/// Counters of one active expiry run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireRun {
    /// Keys looked at.
    pub sampled: usize,
    /// Keys deleted.
    pub expired: usize,
}

/// [`Keyspace::log_mask`] bit: log keys deleted on expiry.
pub const LOG_EXPIRED: u8 = 1;
/// [`Keyspace::log_mask`] bit: log keys created.
pub const LOG_NEW: u8 = 2;

/// Keys sampled per active-expire round (Redis's ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP).
pub const EXPIRE_SAMPLE: usize = 20;

/// What [`Keyspace::get_unexpired`] found instead of an answer: the key is stored past its
/// deadline, and left for [`Keyspace::get`] to free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expired;

/// One logical database.
pub struct Keyspace {
    main: Dict<Node>,
    /// The keys that have a deadline: their main nodes (the deadline lives there too).
    expires: Dict<ExpLink>,
    expire_cursor: u64,
    /// Keys found expired and deleted (lazily or actively) since start.
    pub expired_keys: u64,
    /// What to log ([`LOG_EXPIRED`], [`LOG_NEW`]); set by the store while someone listens
    /// (keyspace events, WATCH). Zero costs one test per deletion on expiry or creation.
    pub log_mask: u8,
    /// Logged `(kind, key)` pairs, oldest first; the store drains them.
    pub log: Vec<(u8, Box<[u8]>)>,
    /// What lookups record in a node's access field (the store sets it from the policy).
    pub access: AccessMode,
    /// Lookups leave the access field alone while set (OBJECT, TYPE, CLIENT NO-TOUCH ...).
    pub no_touch: bool,
    /// State of the random numbers LFU's counter increments draw.
    rng: u64,
    /// The time the last lookup was made at (the access field of a key inserted after a
    /// missed lookup).
    seen_now: u64,
    /// The snapshot mark that means "done" (see [`snap`]): flipped when a snapshot starts.
    parity: bool,
    /// The snapshot running over this keyspace, if any.
    snap: Option<Box<Snap>>,
    /// How a replica's lookups treat keys past their deadline (see [`ReplicaView`]).
    pub replica_view: ReplicaView,
}

/// How lookups treat keys past their deadline on a replica, which never deletes a key by itself
/// (its master sends the DEL when it expires one), as Redis replicas do.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum ReplicaView {
    /// Not a replica: an expired key is deleted when found.
    #[default]
    Own,
    /// A replica serving its clients: an expired key looks absent but stays.
    Hide,
    /// A replica applying its master's stream: every stored key is live (the master decides).
    Master,
}

impl Default for Keyspace {
    fn default() -> Self {
        Self::new()
    }
}

/// The next number of the keyspace's xorshift generator (LFU's counter increments).
#[inline]
fn xorshift(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

/// Records an access to `n` at `now` in its access field (the LRU clock, or the LFU counter
/// drawn with `rng`).
#[inline(always)]
fn record_access(mode: AccessMode, rng: &mut u64, n: &mut KeyNode, now: u64) {
    // LRU (every policy but the LFU ones) inline: a clock reading, no call.
    let access = match mode {
        AccessMode::Lru => crate::evict::lru_clock(now),
        _ => mode.touched(n.access(), now, || xorshift(rng)),
    };
    n.set_access(access);
}

impl Keyspace {
    /// An empty database.
    pub fn new() -> Self {
        Keyspace {
            main: retiring(Dict::new()),
            expires: retiring(Dict::new()),
            expire_cursor: 0,
            expired_keys: 0,
            log_mask: 0,
            log: Vec::new(),
            access: AccessMode::Lru,
            no_touch: false,
            rng: 0x2545_f491_4f6c_dd1d,
            replica_view: ReplicaView::Own,
            seen_now: 0,
            parity: false,
            snap: None,
        }
    }

    /// Number of keys, including ones past their deadline not yet collected.
    pub fn len(&self) -> usize {
        self.main.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.main.is_empty()
    }

    /// Makes room for `n` keys at once when empty (a load about to fill it); a table in use
    /// grows as usual.
    pub fn reserve(&mut self, n: usize) {
        if self.main.is_empty() && n > 0 {
            self.main = retiring(Dict::with_capacity(n));
        }
    }

    /// Number of keys with a deadline.
    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    /// The node of `key` if it is live; deletes it if it is past its deadline. One chain walk,
    /// no rehash step.
    #[inline]
    fn live(&mut self, key: &[u8], now: u64) -> Option<&mut KeyNode> {
        self.live_with(key, now, !self.no_touch, false, false)
    }

    /// Asks the CPU to start loading what looking up these keys will read (their buckets, then
    /// the first entries of their chains), so that the lookups of a batch of commands wait for
    /// memory together instead of one after the other. A hint: nothing changes.
    pub fn prefetch(&self, keys: &[&[u8]]) {
        let hashes: smallvec::SmallVec<[u64; 32]> =
            keys.iter().map(|k| self.main.hash(k)).collect();
        for &h in &hashes {
            self.main.prefetch_bucket(h);
        }
        for &h in &hashes {
            self.main.prefetch_chain(h);
        }
    }

    /// Like [`Keyspace::prefetch`], one level down: for each `(key, member)` whose key holds a
    /// hash or set in a table, asks the CPU to start loading the member's bucket, then its
    /// chain, so that a pipeline of HSET or SADD on big collections waits for memory once per
    /// batch rather than once per command. Call it after [`Keyspace::prefetch`] of the keys.
    pub fn prefetch_members(&self, pairs: &[(&[u8], &[u8])]) {
        let mut found: smallvec::SmallVec<[(&Value, u64); 32]> = smallvec::SmallVec::new();
        // Pipelines on one collection repeat its key: look it up once per run.
        let mut last: Option<(&[u8], Option<&Value>)> = None;
        for &(key, member) in pairs {
            let value = match last {
                Some((k, v)) if k == key => v,
                _ => {
                    let v = self.main.get(key).and_then(|n| n.obj());
                    last = Some((key, v));
                    v
                }
            };
            let h = match value {
                Some(Value::Hash(x)) => x.prefetch_bucket(member),
                Some(Value::Set(x)) => x.prefetch_bucket(member),
                _ => None,
            };
            if let (Some(v), Some(h)) = (value, h) {
                found.push((v, h));
            }
        }
        for (value, h) in found {
            match value {
                Value::Hash(x) => x.prefetch_chain(h),
                Value::Set(x) => x.prefetch_chain(h),
                _ => {}
            }
        }
    }

    /// [`Keyspace::live`] for a caller about to change the node: a running snapshot that has
    /// not written it yet writes its old value first.
    #[inline]
    fn live_w(&mut self, key: &[u8], now: u64) -> Option<&mut KeyNode> {
        self.live_with(key, now, !self.no_touch, true, false)
    }

    /// [`Keyspace::live`], recording the access in the node when `touch`, (`write`) letting
    /// a running snapshot write the old value, and (`unembed`) turning a string held in its
    /// node into a [`Value`] (for a change in place).
    #[inline]
    fn live_with(
        &mut self,
        key: &[u8],
        now: u64,
        touch: bool,
        write: bool,
        unembed: bool,
    ) -> Option<&mut KeyNode> {
        self.seen_now = now;
        let mut dead_at = now;
        if self.replica_view != ReplicaView::Own {
            if self.replica_view == ReplicaView::Master {
                dead_at = 0;
            } else if self.main.get(key).is_some_and(|n| n.expired(now)) {
                return None;
            }
        }
        let (snap, parity, expires) = (&mut self.snap, self.parity, &mut self.expires);
        // An expired node goes: written by a running snapshot first, out of `expires` (while
        // it can still be read), then freed.
        let gone = |mut dead: Node, nodes: &mut Nodes| {
            if let Some(s) = snap.as_deref_mut() {
                s.save_old(parity, dead.get_mut(nodes));
            }
            if dead.deadline(nodes) != 0 {
                expires.remove(key);
            }
            dead.release(nodes);
        };
        let found = self.main.get_or_evict_reformed(
            key,
            |n, s| n.expired(s, dead_at),
            |n, s| unembed && n.holds_string(s),
            Node::unembedded,
            gone,
        );
        match found {
            Ok(n) => {
                if write {
                    if let Some(s) = self.snap.as_deref_mut() {
                        s.save_old(self.parity, n);
                    }
                }
                if touch {
                    record_access(self.access, &mut self.rng, n, now);
                }
                Some(n)
            }
            Err(None) => None,
            Err(Some(())) => {
                self.expired_keys += 1;
                if self.log_mask & LOG_EXPIRED != 0 {
                    self.log.push((LOG_EXPIRED, key.into()));
                }
                None
            }
        }
    }

    /// Deletes the key if it is past its deadline; returns whether it is (still) live.
    fn check_live(&mut self, key: &[u8], now: u64) -> bool {
        self.live(key, now).is_some()
    }

    /// Takes `key`'s node out of both dicts (a running snapshot writes it first); the caller
    /// frees it through the main dict.
    fn unlink_node(&mut self, key: &[u8]) -> Option<Node> {
        let mut node = self.main.remove(key)?;
        let nodes = self.main.arena();
        if let Some(s) = self.snap.as_deref_mut() {
            s.save_old(self.parity, node.get_mut(nodes));
        }
        if node.deadline(nodes) != 0 {
            self.expires.remove(key);
        }
        Some(node)
    }

    /// Deletes `key`'s node; whether it was stored.
    fn delete_node(&mut self, key: &[u8]) -> bool {
        let Some(node) = self.unlink_node(key) else {
            return false;
        };
        self.main.release(node);
        true
    }

    /// The live node of `key`.
    pub fn get(&mut self, key: &[u8], now: u64) -> Option<&KeyNode> {
        self.live(key, now).map(|n| &*n)
    }

    /// [`Keyspace::get`] of a key that is absent or live: [`Expired`] when it is stored past
    /// its deadline, with nothing done (a [`Keyspace::get`] then frees it), so a caller knows
    /// the lookup freed nothing.
    #[inline]
    pub fn get_unexpired(&mut self, key: &[u8], now: u64) -> Result<Option<&KeyNode>, Expired> {
        if self.replica_view != ReplicaView::Own {
            return Err(Expired);
        }
        self.seen_now = now;
        match self.main.get_or_evict(key, |_| false) {
            Err(_) => Ok(None),
            Ok(n) if n.expired(now) => Err(Expired),
            Ok(n) => {
                if !self.no_touch {
                    record_access(self.access, &mut self.rng, n, now);
                }
                Ok(Some(n))
            }
        }
    }

    /// The live node of `key` without recording an access (Redis's LOOKUP_NOTOUCH: TYPE,
    /// EXISTS, TTL, OBJECT).
    pub fn get_untouched(&mut self, key: &[u8], now: u64) -> Option<&KeyNode> {
        self.live_with(key, now, false, false, false).map(|n| &*n)
    }

    /// Whether `key` is stored, live or past its deadline (Redis's `dbFind`).
    pub fn holds(&self, key: &[u8]) -> bool {
        self.main.get(key).is_some()
    }

    /// Whether `key` is stored and past its deadline (Redis's `keyIsExpired`).
    pub fn is_expired(&self, key: &[u8], now: u64) -> bool {
        self.main.get(key).is_some_and(|n| n.expired(now))
    }

    /// The live node of `key`, read without collecting it when expired (for `&self` callers).
    pub fn peek(&self, key: &[u8], now: u64) -> Option<&KeyNode> {
        self.main.get(key).filter(|n| !n.expired(now))
    }

    /// The live value of `key`, mutable. A string held in its node is moved into a [`Value`]
    /// first (as Redis turns an `embstr` into a `raw` string to change it).
    pub fn get_mut(&mut self, key: &[u8], now: u64) -> Option<&mut Value> {
        self.main.rehash_step(REHASH_MOVES);
        let touch = !self.no_touch;
        // A string held in a node with a deadline moves to a new block: out of `expires`
        // before, back in after.
        let relink = self
            .main
            .get(key)
            .is_some_and(|n| n.holds_string() && n.deadline() != 0);
        if !relink {
            return self
                .live_with(key, now, touch, true, true)
                .and_then(|n| n.obj_mut());
        }
        self.expires.remove(key);
        let live = self.live_with(key, now, touch, true, true).is_some();
        // Back in `expires` while stored (a replica hides an expired key but keeps it).
        if let Some(link) = self.exp_link(key) {
            self.expires.insert_new(link);
        }
        if !live {
            return None;
        }
        self.main.get_mut(key).and_then(|n| n.obj_mut())
    }

    /// Changes in place the integer a live `key` holds in its node (INCR on a counter):
    /// `Some(Some(verdict))` with `f`'s verdict, the new value stored when `Ok`; changing
    /// nothing, `Some(None)` when the key holds anything else (then take
    /// [`Keyspace::get_mut`]) and `None` when it is missing.
    pub fn update_int<E>(
        &mut self,
        key: &[u8],
        now: u64,
        f: impl FnOnce(i64) -> Result<i64, E>,
    ) -> Option<Option<Result<i64, E>>> {
        self.main.rehash_step(REHASH_MOVES);
        let node = self.live_w(key, now)?;
        let Stored::Int(cur) = node.value() else {
            return Some(None);
        };
        let r = f(cur);
        if let Ok(new) = r {
            node.set_int(new);
        }
        Some(Some(r))
    }

    /// Whether `key` exists and is live.
    pub fn contains(&mut self, key: &[u8], now: u64) -> bool {
        self.check_live(key, now)
    }

    /// Stores `value` under `key`, replacing any old value, with the deadline `ttl` says.
    pub fn set(&mut self, key: &[u8], value: Value, ttl: Ttl, now: u64) {
        self.put(key, NewValue::Value(value), ttl, now);
    }

    /// Stores the string `s` under `key` (`int` when canonical, as [`Value::from_bytes`]
    /// decides), replacing any old value, with the deadline `ttl` says. Builds no `Value` for
    /// a string its node can hold, and overwrites one of the same length in place.
    #[inline]
    pub fn set_str(&mut self, key: &[u8], s: &[u8], ttl: Ttl, now: u64) {
        self.put(key, NewValue::Bytes(s), ttl, now);
    }

    /// [`Keyspace::set_str`] with no deadline (SET without options), in one lookup for the
    /// common cases: a key that is absent, or whose node holds a string of `s`'s length and
    /// no deadline (so it cannot have expired), while no snapshot runs and this is not a
    /// replica's view. Anything else goes the general way.
    #[inline]
    pub fn set_plain(&mut self, key: &[u8], s: &[u8], now: u64) {
        if !self.set_plain_light(key, s, now) {
            self.set_plain_put(key, s, now);
        }
    }

    /// [`Keyspace::set_plain`] where it changes nothing but the key's own node: an absent key
    /// gets a new one, a string without a deadline whose node holds `s` is overwritten in
    /// place. Whether it did (otherwise nothing changed: [`Keyspace::set_plain_put`] does
    /// the rest, which may free an old value of any size).
    #[inline]
    pub fn set_plain_light(&mut self, key: &[u8], s: &[u8], now: u64) -> bool {
        if self.replica_view == ReplicaView::Own
            && self.snap.is_none()
            && crate::num::canonical_int(s).is_none()
        {
            match self.main.get_or_evict(key, |_| false) {
                Err(_) => {
                    self.set_plain_new(key, s, now);
                    return true;
                }
                Ok(n) => {
                    if let Some(b) = n.plain_bytes_mut(s.len()) {
                        b.copy_from_slice(s);
                        if !self.no_touch {
                            record_access(self.access, &mut self.rng, n, now);
                        }
                        self.seen_now = now;
                        self.main.rehash_step(REHASH_MOVES);
                        return true;
                    }
                }
            }
        }
        false
    }

    /// [`Keyspace::set_plain`] of an absent key (out of line: the overwrite in place is the
    /// part worth inlining).
    #[inline(never)]
    fn set_plain_new(&mut self, key: &[u8], s: &[u8], now: u64) {
        self.seen_now = now;
        self.insert_new(key, NewValue::Bytes(s), 0, now);
    }

    /// [`Keyspace::set_plain`] the general way.
    #[inline(never)]
    pub fn set_plain_put(&mut self, key: &[u8], s: &[u8], now: u64) {
        self.put(key, NewValue::Bytes(s), Ttl::Clear, now);
    }

    #[inline(always)]
    fn put(&mut self, key: &[u8], value: NewValue<'_>, ttl: Ttl, now: u64) {
        let Some(node) = self.live_w(key, now) else {
            let at = match ttl {
                Ttl::At(t) => t,
                Ttl::Clear | Ttl::Keep => 0,
            };
            self.insert_new(key, value, at, now);
            return;
        };
        let old = node.deadline();
        let new = match ttl {
            Ttl::Clear => 0,
            Ttl::Keep => old,
            Ttl::At(t) => t,
        };
        // In place when the node's form fits the new value (and its deadline); else a new
        // block in the same chain position.
        let placed = match &value {
            NewValue::Bytes(s) => match crate::num::canonical_int(s) {
                Some(i) => node.set_int(i),
                None => node
                    .embedded_mut(s.len())
                    .map(|b| b.copy_from_slice(s))
                    .is_some(),
            },
            NewValue::Value(Value::Int(i)) => node.set_int(*i),
            NewValue::Value(v) => !node.holds_string() && !Node::embeds(key, v),
        };
        if placed && node.try_set_deadline(new) {
            if let (NewValue::Value(v), Some(slot)) = (value, node.obj_mut()) {
                *slot = v;
            }
            if new != old {
                self.sync_expire(key, old, new);
            }
        } else {
            self.rebuild(key, old != 0, |n, s| n.remade(s, key, value, new));
        }
        self.main.rehash_step(REHASH_MOVES);
    }

    fn insert_new(&mut self, key: &[u8], value: NewValue<'_>, at: u64, now: u64) {
        if self.replica_view == ReplicaView::Hide {
            // A writable replica's client found the key absent because it is past its
            // deadline, but it is still stored: the write replaces it (Redis deletes an
            // expired key on a write lookup there too).
            self.delete_node(key);
        }
        if self.log_mask & LOG_NEW != 0 {
            self.log.push((LOG_NEW, key.into()));
        }
        let access = self.access.initial(now);
        let nodes = self.main.arena_mut();
        let mut node = match value {
            NewValue::Bytes(s) => Node::with_bytes(nodes, key, s, at, access),
            NewValue::Value(v) => Node::with_access(nodes, key, v, at, access),
        };
        // Created after a running snapshot's moment: not part of it.
        node.get_mut(nodes).set_mark(self.parity);
        // (The node stays where it is when its handle moves into the dict.)
        let link = (at != 0).then(|| ExpLink::of(&node, nodes));
        self.main.insert_new(node);
        if let Some(link) = link {
            self.expires.insert_new(link);
        }
    }

    /// Rebuilds the node of a present key without a deadline slot (so not in `expires`) with a
    /// slot holding `at` (its chain position kept), and lists it in `expires`.
    fn add_deadline_slot(&mut self, key: &[u8], at: u64) {
        self.rebuild(key, false, |n, s| n.reslotted(s, at, true));
    }

    /// Rebuilds the node of a present key in a new block (`f`), keeping its chain position,
    /// and `expires` listing it exactly when it has a deadline: the old block, `listed` there,
    /// leaves before it is freed; the new one comes in after.
    fn rebuild(&mut self, key: &[u8], listed: bool, f: impl FnOnce(Node, &mut Nodes) -> Node) {
        if listed {
            self.expires.remove(key);
        }
        let mut link = None;
        self.main.replace_with(key, |n, s| {
            let new = f(n, s);
            link = (new.deadline(s) != 0).then(|| ExpLink::of(&new, s));
            new
        });
        if let Some(link) = link {
            self.expires.insert_new(link);
        }
    }

    /// The expiry index's entry for `key`'s node, if it is stored with a deadline.
    fn exp_link(&self, key: &[u8]) -> Option<ExpLink> {
        let n = self.main.get_link(key)?;
        let nodes = self.main.arena();
        (n.deadline(nodes) != 0).then(|| ExpLink::of(n, nodes))
    }

    /// Inserts a key known to be absent (callers checked with a lookup first).
    pub fn insert_absent(&mut self, key: &[u8], value: Value, ttl: Ttl) {
        self.insert_absent_at(key, value, ttl, self.seen_now);
    }

    /// [`Keyspace::insert_absent`] with its access recorded at `now` (a key loaded from a
    /// file, with no lookup before it).
    pub fn insert_absent_at(&mut self, key: &[u8], value: Value, ttl: Ttl, now: u64) {
        let at = match ttl {
            Ttl::At(t) => t,
            _ => 0,
        };
        self.insert_new(key, NewValue::Value(value), at, now);
    }

    fn sync_expire(&mut self, key: &[u8], old: u64, new: u64) {
        match (old != 0, new != 0) {
            (false, false) => {}
            (true, false) => {
                self.expires.remove(key);
            }
            (false, true) => {
                if let Some(link) = self.exp_link(key) {
                    self.expires.insert_new(link);
                }
            }
            (true, true) => {}
        }
    }

    /// Removes `key`; returns its value if it was live.
    pub fn remove(&mut self, key: &[u8], now: u64) -> Option<Value> {
        if !self.check_live(key, now) {
            return None;
        }
        let n = self.unlink_node(key)?;
        Some(n.into_parts(self.main.arena_mut()).0)
    }

    /// Removes `key` with its deadline; returns `(value, deadline)` if it was live.
    pub fn take(&mut self, key: &[u8], now: u64) -> Option<(Value, Ttl)> {
        if !self.check_live(key, now) {
            return None;
        }
        let n = self.unlink_node(key)?;
        let (value, at) = n.into_parts(self.main.arena_mut());
        let ttl = if at != 0 { Ttl::At(at) } else { Ttl::Clear };
        Some((value, ttl))
    }

    /// Sets the access field (LRU clock or LFU counter) of `key`, if stored.
    pub fn set_access_of(&mut self, key: &[u8], access: u32) {
        if let Some(node) = self.main.get_mut(key) {
            node.set_access(access);
        }
    }

    /// Removes `key` whether or not it is past its deadline (Redis's `dbDelete` without a
    /// lookup first: the *STORE commands clearing their destination); whether it was stored.
    pub fn delete_stored(&mut self, key: &[u8]) -> bool {
        self.delete_node(key)
    }

    /// The deadline of a live key: `Some(None)` when it has none, `None` when missing.
    pub fn expire_of(&mut self, key: &[u8], now: u64) -> Option<Option<u64>> {
        self.get(key, now).map(KeyNode::expire_at)
    }

    /// Sets or clears the deadline of a live key; returns false when the key is missing.
    pub fn set_expire(&mut self, key: &[u8], at: Option<u64>, now: u64) -> bool {
        let Some(node) = self.live_w(key, now) else {
            return false;
        };
        let old = node.deadline();
        let new = at.unwrap_or(0);
        if new != old {
            if node.try_set_deadline(new) {
                self.sync_expire(key, old, new);
            } else {
                // No slot, so no deadline before.
                self.add_deadline_slot(key, new);
            }
        }
        true
    }

    /// One step of a SCAN over all keys (expired ones included; callers filter).
    pub fn scan(&self, cursor: u64, f: impl FnMut(&KeyNode)) -> u64 {
        let mut f = f;
        self.main.scan(cursor, |n| f(n))
    }

    /// Iterates over every node, expired ones included.
    pub fn iter(&self) -> impl Iterator<Item = &KeyNode> {
        self.main.iter()
    }

    /// Offers up to `n` stored nodes, found from the randomness `r`, to `f`: any key, or
    /// (`volatile`) keys with a deadline. For eviction sampling.
    pub fn sample(&self, volatile: bool, r: u64, n: usize, mut f: impl FnMut(&KeyNode)) {
        if volatile {
            self.expires.sample(r, n, |e| f(e.node()));
        } else {
            self.main.sample(r, n, |node| f(node));
        }
    }

    /// Number of keys eviction may pick from: all, or (`volatile`) those with a deadline.
    pub fn candidates(&self, volatile: bool) -> usize {
        if volatile {
            self.expires.len()
        } else {
            self.main.len()
        }
    }

    /// A random stored key (expired or not), or (`volatile`) one with a deadline.
    pub fn random_stored(&self, volatile: bool, r: u64) -> Option<Box<[u8]>> {
        if volatile {
            self.expires.random(r).map(|e| e.key().into())
        } else {
            self.main.random(r).map(|n| n.key().into())
        }
    }

    /// The node of `key`, live or past its deadline.
    pub fn peek_stored(&self, key: &[u8]) -> Option<&KeyNode> {
        self.main.get(key)
    }

    /// Whether `key` is stored with a deadline.
    pub fn has_deadline(&self, key: &[u8]) -> bool {
        self.main.get(key).is_some_and(|n| n.deadline() != 0)
    }

    /// A random live key, trying a few samples past expired ones.
    pub fn random_key(&mut self, mut rng: impl FnMut() -> u64, now: u64) -> Option<Box<[u8]>> {
        for _ in 0..100 {
            let node = self.main.random(rng())?;
            let key: Box<[u8]> = node.key().into();
            if !node.expired(now) {
                return Some(key);
            }
            self.check_live(&key, now);
        }
        None
    }

    /// Removes every key (and drops what was logged).
    pub fn clear(&mut self) {
        self.log.clear();
        if let Some(s) = self.snap.as_deref_mut() {
            // The snapshot still writes the old keys: it takes the table whole.
            s.freeze(std::mem::take(&mut self.main));
        }
        self.main.clear();
        self.expires.clear();
        self.expire_cursor = 0;
    }

    /// Runs active expiry: rounds of [`EXPIRE_SAMPLE`] keys with a deadline, repeated while
    /// more than 10% of a round had expired and `keep_going()` allows another round.
    pub fn active_expire(&mut self, now: u64, mut keep_going: impl FnMut() -> bool) -> ExpireRun {
        let mut run = ExpireRun::default();
        let mut dead: Vec<Box<[u8]>> = Vec::new();
        loop {
            if self.expires.is_empty() {
                break;
            }
            let mut sampled = 0;
            let mut cursor = self.expire_cursor;
            // A scan step visits one bucket; take steps until a round's worth was sampled.
            loop {
                cursor = self.expires.scan(cursor, |e| {
                    sampled += 1;
                    if e.node().expired(now) {
                        dead.push(e.key().into());
                    }
                });
                if cursor == 0 || sampled >= EXPIRE_SAMPLE {
                    break;
                }
            }
            self.expire_cursor = cursor;
            let expired = dead.len();
            for k in dead.drain(..) {
                self.delete_node(&k);
                if self.log_mask & LOG_EXPIRED != 0 {
                    self.log.push((LOG_EXPIRED, k));
                }
            }
            run.sampled += sampled;
            run.expired += expired;
            self.expired_keys += expired as u64;
            if expired * 10 <= sampled || !keep_going() {
                break;
            }
        }
        run
    }

    /// Background maintenance between batches: a bounded rehash step and shrinking.
    pub fn housekeeping(&mut self) {
        self.main.maybe_shrink();
        self.expires.maybe_shrink();
        self.main.rehash_step(64);
        self.expires.rehash_step(64);
    }

    /// Heap bytes of the bucket arrays of both dicts.
    pub fn table_bytes(&self) -> usize {
        self.main.table_bytes() + self.expires.table_bytes()
    }

    /// Heap bytes of the bucket arrays of the main dict and of the expiry index, and whether
    /// either is rehashing (MEMORY STATS).
    pub fn table_overhead(&self) -> (usize, usize, bool) {
        (
            self.main.table_bytes(),
            self.expires.table_bytes(),
            self.main.is_rehashing() || self.expires.is_rehashing(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `set_plain` against `set_str` with no deadline, on keys of every form (integers,
    /// strings in the node of the same or another length, strings too long for it, other
    /// types, deadlines, expired keys) under both access modes: the same values, deadlines,
    /// access fields and expiry counts.
    #[test]
    fn set_plain_is_set_str_without_a_deadline() {
        let rng = crate::testutil::Rng::new(11);
        let (mut a, mut b) = (Keyspace::new(), Keyspace::new());
        let keys: [&[u8]; 4] = [b"k", b"key:000000000001", b"a-key-longer-than-sixteen", b""];
        let long = vec![b'x'; 200];
        let values: [&[u8]; 8] = [
            b"va",
            b"vb",
            b"12",
            b"-0",
            b"",
            &long,
            b"vc",
            b"9223372036854775808",
        ];
        let mut now = 1_000_000;
        for step in 0..20_000 {
            let k = keys[rng.below(keys.len() as u64) as usize];
            let v = values[rng.below(values.len() as u64) as usize];
            match rng.below(10) {
                0..=4 => {
                    a.set_plain(k, v, now);
                    b.set_str(k, v, Ttl::Clear, now);
                }
                5 => {
                    let at = Ttl::At(now + rng.below(3000));
                    a.set_str(k, v, at, now);
                    b.set_str(k, v, at, now);
                }
                6 => {
                    a.set(k, Value::List(Default::default()), Ttl::Clear, now);
                    b.set(k, Value::List(Default::default()), Ttl::Clear, now);
                }
                7 => {
                    let (x, y) = (
                        a.get(k, now).map(|n| n.access()),
                        b.get(k, now).map(|n| n.access()),
                    );
                    assert_eq!(x, y);
                }
                8 => now += rng.below(2500),
                _ => {
                    let mode = if rng.below(2) == 0 {
                        AccessMode::Lru
                    } else {
                        AccessMode::Lfu {
                            log_factor: 1,
                            decay_time: 1,
                        }
                    };
                    a.access = mode;
                    b.access = mode;
                }
            }
            assert_eq!(a.len(), b.len(), "step {step}");
            assert_eq!(a.expires_len(), b.expires_len());
            assert_eq!(a.expired_keys, b.expired_keys);
            for k in keys {
                let (x, y) = (a.peek_stored(k), b.peek_stored(k));
                assert_eq!(
                    x.map(|n| (n.value(), n.expire_at(), n.access())),
                    y.map(|n| (n.value(), n.expire_at(), n.access())),
                    "step {step}"
                );
            }
        }
    }

    #[test]
    fn member_prefetch_is_only_a_hint() {
        use crate::hash::{Hash, Limits as HashLimits};
        use crate::set::{Limits as SetLimits, Set};
        let mut ks = Keyspace::new();
        let mut big_hash = Hash::default();
        let mut big_set = Set::default();
        for i in 0..1000 {
            let m = format!("m{i}");
            big_hash.set(HashLimits::default(), m.as_bytes(), b"v");
            big_set.add(SetLimits::default(), m.as_bytes());
        }
        assert_eq!(big_hash.encoding(), "hashtable");
        assert_eq!(big_set.encoding(), "hashtable");
        let mut small_hash = Hash::default();
        small_hash.set(HashLimits::default(), b"m1", b"v");
        ks.set(b"h", Value::Hash(big_hash), Ttl::Clear, 0);
        ks.set(b"s", Value::Set(big_set), Ttl::Clear, 0);
        ks.set(b"small", Value::Hash(small_hash), Ttl::Clear, 0);
        ks.set(b"str", Value::Int(1), Ttl::Clear, 0);
        let pairs: [(&[u8], &[u8]); 6] = [
            (b"h", b"m1"),
            (b"h", b"absent"),
            (b"s", b"m999"),
            (b"small", b"m1"),
            (b"str", b"x"),
            (b"missing", b"m1"),
        ];
        ks.prefetch(&pairs.map(|p| p.0));
        ks.prefetch_members(&pairs);
        assert_eq!(ks.len(), 4);
        let Some(Value::Hash(h)) = ks.peek(b"h", 0).and_then(|n| n.obj()) else {
            panic!("h is a hash");
        };
        assert_eq!((h.len(), h.get(b"m1")), (1000, Some(b"v".to_vec())));
        let Some(Value::Set(s)) = ks.peek(b"s", 0).and_then(|n| n.obj()) else {
            panic!("s is a set");
        };
        assert!(s.len() == 1000 && s.contains(b"m999") && !s.contains(b"absent"));
    }

    #[test]
    fn lazy_and_active_expiry() {
        let mut ks = Keyspace::new();
        ks.set(b"a", Value::Int(1), Ttl::At(100), 0);
        ks.set(b"b", Value::Int(2), Ttl::Clear, 0);
        assert!(ks.contains(b"a", 99));
        // Alive at its deadline, gone one millisecond later (Redis's `now > when`).
        assert!(ks.contains(b"a", 100));
        assert!(!ks.contains(b"a", 101));
        assert_eq!(ks.len(), 1);
        assert_eq!(ks.expires_len(), 0);
        for i in 0..1000u32 {
            ks.set(&i.to_be_bytes(), Value::Int(1), Ttl::At(50), 0);
        }
        assert_eq!(ks.expires_len(), 1000);
        let run = ks.active_expire(60, || true);
        assert_eq!(run.expired, 1000);
        assert_eq!(ks.len(), 1);
        assert_eq!(ks.expires_len(), 0);
    }

    #[test]
    fn a_replica_keeps_a_hidden_expired_key_in_the_expiry_index() {
        // `get_mut` takes a string held in its node out of `expires` to rebuild it; a replica
        // that hides the expired key (its master deletes it) must put the entry back.
        let mut ks = Keyspace::new();
        ks.set_str(b"k", b"held in the node", Ttl::At(100), 0);
        ks.replica_view = ReplicaView::Hide;
        assert!(ks.get_mut(b"k", 200).is_none());
        assert_eq!((ks.len(), ks.expires_len()), (1, 1));
        ks.replica_view = ReplicaView::Own;
        assert_eq!(ks.active_expire(200, || true).expired, 1);
        assert_eq!((ks.len(), ks.expires_len()), (0, 0));
    }

    #[test]
    fn ttl_kinds() {
        let mut ks = Keyspace::new();
        ks.set(b"k", Value::Int(1), Ttl::At(500), 0);
        ks.set(b"k", Value::Int(2), Ttl::Keep, 0);
        assert_eq!(ks.expire_of(b"k", 0), Some(Some(500)));
        ks.set(b"k", Value::Int(3), Ttl::Clear, 0);
        assert_eq!(ks.expire_of(b"k", 0), Some(None));
        assert_eq!(ks.expires_len(), 0);
        assert!(ks.set_expire(b"k", Some(10), 0));
        assert_eq!(ks.expires_len(), 1);
        assert_eq!(ks.remove(b"k", 20), None);
        assert_eq!(ks.expires_len(), 0);
    }

    #[test]
    fn deadline_slots_while_rehashing() {
        // Giving a deadline reallocates the node (it gains a slot); do it while the dict grows,
        // so rebuilt nodes land in half-migrated tables, and check every key afterwards.
        let mut ks = Keyspace::new();
        let key = |i: u32| format!("key:{i}").into_bytes();
        for i in 0..4000u32 {
            ks.set(&key(i), Value::Int(i.into()), Ttl::Clear, 0);
            if i % 3 == 0 {
                assert!(ks.set_expire(&key(i / 2), Some(1000 + u64::from(i)), 0));
            }
        }
        for i in 0..4000u32 {
            let n = ks.get(&key(i), 0).expect("present");
            assert_eq!(n.key(), &key(i)[..]);
            assert_eq!(n.value(), Stored::Int(i.into()));
            // Key k got the deadline of the step j in {2k, 2k + 1} that is a multiple of 3.
            let want = [i * 2, i * 2 + 1]
                .into_iter()
                .find(|j| j % 3 == 0 && *j < 4000)
                .map(|j| 1000 + u64::from(j));
            assert_eq!(n.expire_at(), want, "key {i}");
        }
        let with_ttl = (0..4000u32).filter(|i| i % 3 == 0).count();
        assert_eq!(ks.expires_len(), with_ttl);
        // Clearing keeps the slot; setting again reuses it. Overwriting keeps or clears.
        assert!(ks.set_expire(&key(0), None, 0));
        assert_eq!(ks.expire_of(&key(0), 0), Some(None));
        assert!(ks.set_expire(&key(0), Some(7), 0));
        ks.set(&key(0), Value::Int(-1), Ttl::Keep, 0);
        assert_eq!(ks.expire_of(&key(0), 0), Some(Some(7)));
        ks.set(&key(0), Value::Int(-2), Ttl::Clear, 0);
        assert_eq!(ks.expire_of(&key(0), 0), Some(None));
        assert_eq!(ks.expires_len(), with_ttl - 1);
        // Everything with a deadline is gone once the clock passes them all.
        let mut run = ExpireRun::default();
        while ks.expires_len() > 0 {
            let r = ks.active_expire(10_000, || true);
            run.expired += r.expired;
        }
        assert_eq!(run.expired, with_ttl - 1);
        assert_eq!(ks.len(), 4000 - (with_ttl - 1));
        assert_eq!(ks.take(&key(2), 10_000), Some((Value::Int(2), Ttl::Clear)));
    }

    /// One step of [`strings_match_a_model`].
    #[derive(Clone, Debug)]
    enum Op {
        /// SET through the bytes path: a string of `len` copies of `b`, or an integer.
        SetStr(u8, usize, u8, Option<u64>),
        /// SET through a `Value` (RDB load, RESTORE), or (`true`) a string that stays a string
        /// even when it reads as a number (INCRBYFLOAT's `embstr`).
        SetValue(u8, usize, u8, bool),
        /// INCRBY through `update_int`, else `get_mut`.
        Incr(u8, i64),
        /// APPEND `n` bytes in place (through `get_mut`).
        Append(u8, usize),
        /// Sets or clears a deadline.
        Expire(u8, Option<u64>),
        /// Removes the key.
        Remove(u8),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let len = prop_oneof![
            0..24usize,
            40..70usize,
            Just(EMB_STR_MAX),
            Just(EMB_STR_MAX + 1)
        ];
        let at = proptest::option::of(1u64..100);
        prop_oneof![
            (0..6u8, len.clone(), any::<u8>(), at.clone())
                .prop_map(|(k, n, b, t)| Op::SetStr(k, n, b, t)),
            (0..6u8, len, any::<u8>(), any::<bool>())
                .prop_map(|(k, n, b, s)| Op::SetValue(k, n, b, s)),
            (0..6u8, any::<i64>()).prop_map(|(k, by)| Op::Incr(k, by)),
            (0..6u8, 0..30usize).prop_map(|(k, n)| Op::Append(k, n)),
            (0..6u8, at).prop_map(|(k, t)| Op::Expire(k, t)),
            (0..6u8).prop_map(Op::Remove),
        ]
    }

    /// The string of a step: digits make a canonical integer (`int`) when `b` is a digit.
    fn text(len: usize, b: u8) -> Vec<u8> {
        if b.is_ascii_digit() && b != b'0' && (1..=18).contains(&len) {
            vec![b; len]
        } else {
            vec![b'a' + b % 26; len]
        }
    }

    proptest::proptest! {
        /// Strings in both node forms (held in the node or in a `Value`), overwritten in place
        /// or remade, appended to, given and cleared deadlines, against a HashMap.
        #[test]
        fn strings_match_a_model(ops in proptest::collection::vec(op(), 1..120)) {
            let mut ks = Keyspace::new();
            // Bytes, deadline, and whether OBJECT ENCODING says int.
            let mut model: std::collections::HashMap<Vec<u8>, (Vec<u8>, Option<u64>, bool)> =
                Default::default();
            let int = |v: &[u8]| crate::num::canonical_int(v).is_some();
            let now = 0;
            for op in ops {
                match op {
                    Op::SetStr(k, n, b, t) => {
                        let v = text(n, b);
                        let ttl = t.map_or(Ttl::Clear, Ttl::At);
                        ks.set_str(&[k], &v, ttl, now);
                        let i = int(&v);
                        model.insert(vec![k], (v, t, i));
                    }
                    Op::SetValue(k, n, b, string) => {
                        let v = text(n, b);
                        let value = if string { Value::string(&v) } else { Value::from_bytes(&v) };
                        ks.set(&[k], value, Ttl::Keep, now);
                        let at = model.get(&vec![k]).and_then(|e| e.1);
                        let i = !string && int(&v);
                        model.insert(vec![k], (v, at, i));
                    }
                    Op::Incr(k, by) => {
                        let add = |cur: i64| cur.checked_add(by).ok_or(());
                        let got = match ks.update_int(&[k], now, add) {
                            Some(Some(r)) => r.ok(),
                            None => {
                                ks.insert_absent(&[k], Value::Int(by), Ttl::Clear);
                                Some(by)
                            }
                            Some(None) => match ks.get_mut(&[k], now) {
                                None => {
                                    ks.insert_absent(&[k], Value::Int(by), Ttl::Clear);
                                    Some(by)
                                }
                                Some(v) => {
                                    let cur = v.as_str(&mut itoa::Buffer::new()).and_then(crate::num::canonical_int);
                                    match cur.and_then(|c| c.checked_add(by)) {
                                        Some(new) => {
                                            *v = Value::Int(new);
                                            Some(new)
                                        }
                                        None => None,
                                    }
                                }
                            },
                        };
                        let e = model.entry(vec![k]).or_insert((b"0".to_vec(), None, true));
                        let want = crate::num::canonical_int(&e.0).and_then(|c| c.checked_add(by));
                        proptest::prop_assert_eq!(got, want);
                        if let Some(new) = want {
                            *e = (new.to_string().into_bytes(), e.1, true);
                        }
                    }
                    Op::Append(k, n) => {
                        if let Some(v) = ks.get_mut(&[k], now).and_then(Value::make_raw) {
                            v.extend(std::iter::repeat_n(b'+', n));
                        }
                        if let Some(e) = model.get_mut(&vec![k]) {
                            e.0.extend(std::iter::repeat_n(b'+', n));
                            e.2 = false;
                        }
                    }
                    Op::Expire(k, t) => {
                        let found = ks.set_expire(&[k], t, now);
                        proptest::prop_assert_eq!(found, model.contains_key(&vec![k]));
                        if let Some(e) = model.get_mut(&vec![k]) {
                            e.1 = t;
                        }
                    }
                    Op::Remove(k) => {
                        let got = ks.remove(&[k], now).map(|v| {
                            v.as_str(&mut itoa::Buffer::new()).unwrap_or_default().to_vec()
                        });
                        proptest::prop_assert_eq!(got, model.remove(&vec![k]).map(|e| e.0));
                    }
                }
                proptest::prop_assert_eq!(ks.len(), model.len());
                proptest::prop_assert_eq!(
                    ks.expires_len(),
                    model.values().filter(|e| e.1.is_some()).count()
                );
                // The expiry index's entries are the main nodes with a deadline, each once.
                let mut listed: Vec<Vec<u8>> = ks.expires.iter().map(|e| {
                    let main = ks.main.get(e.key()).map(|n| n as *const KeyNode);
                    assert_eq!(main, Some(e.node() as *const KeyNode), "a stale expiry entry");
                    e.key().to_vec()
                }).collect();
                listed.sort();
                let mut with_ttl: Vec<Vec<u8>> =
                    model.iter().filter(|e| e.1.1.is_some()).map(|e| e.0.clone()).collect();
                with_ttl.sort();
                proptest::prop_assert_eq!(listed, with_ttl);
                for (k, (v, at, is_int)) in &model {
                    let n = ks.peek(k, now);
                    proptest::prop_assert!(n.is_some());
                    let Some(n) = n else { continue };
                    let mut buf = itoa::Buffer::new();
                    proptest::prop_assert_eq!(n.value().as_str(&mut buf), Some(&v[..]));
                    proptest::prop_assert_eq!(n.expire_at(), *at);
                    proptest::prop_assert_eq!(n.key(), &k[..]);
                    // What is held in the node is an integer or a string created whole that
                    // fits; appended strings are `raw`.
                    if n.holds_string() {
                        proptest::prop_assert!(v.len() <= EMB_STR_MAX);
                    }
                    let enc = n.value().encoding();
                    proptest::prop_assert_eq!(enc == "int", *is_int, "{}", enc);
                    proptest::prop_assert_eq!(n.holds_string(), matches!(n.value(), Stored::Str(_) | Stored::Int(_)));
                }
            }
        }
    }
}
