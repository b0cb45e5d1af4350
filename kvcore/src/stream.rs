//! Streams: an append-only log of entries named by increasing IDs, with consumer groups.
//!
//! Entries live in nodes of Redis's exact layout (`t_stream.c`): each node is a listpack
//! ([`Listpack`]) keyed by its *master ID*, the ID of the first entry added to it, in an ordered
//! map (Redis's radix tree of 128-bit big-endian IDs orders them the same way). So a snapshot
//! or a DUMP payload carries each node as the blob it is, and trimming by whole nodes
//! (`MAXLEN ~`) drops the same entries as Redis does.
//!
//! A node starts with its *master entry*, then holds entries:
//!
//! ```text
//! master: <count> <deleted> <num-fields> <field-1> ... <field-N> 0
//! entry:  <flags> <ms-diff> <seq-diff> [<num-fields> <field-1>] <value-1> ... <lp-count>
//! ```
//!
//! `count` is the node's live entries and `deleted` the ones flagged deleted (XDEL and exact
//! trimming flag entries rather than remove them). An entry whose fields are the master's
//! has the SAMEFIELDS flag and carries only its values. IDs are deltas from the master ID,
//! and `lp-count` (the entry's listpack items before it) lets Redis walk a node backwards;
//! here a node is walked forward (its entries are decoded once per visit) and reversed when
//! a reverse range needs it.
//!
//! Consumer groups ([`Group`]) keep their pending entries (the PEL: delivered, not yet
//! acknowledged) in ordered maps, the group's and each consumer's, as Redis's radix trees do.

use std::collections::{BTreeMap, BTreeSet};

use crate::listpack::{Entry, Listpack, Pos};

/// Entry flag: deleted (a tombstone until its node goes).
pub const FLAG_DELETED: i64 = 1;
/// Entry flag: the entry's fields are its node's master fields.
pub const FLAG_SAMEFIELDS: i64 = 2;
/// Largest node, and largest entry (Redis's `STREAM_LISTPACK_MAX_SIZE`).
pub const LISTPACK_MAX_SIZE: usize = 1 << 30;
/// A group's `entries_read` when unknown (Redis's `SCG_INVALID_ENTRIES_READ`).
pub const INVALID_ENTRIES_READ: i64 = -1;

/// A stream entry ID: milliseconds, then a sequence number within the millisecond.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`, what `-` means.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID, what `+` means.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// An ID from its parts.
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID (Redis's `streamIncrID`); `None` past the largest.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID (Redis's `streamDecrID`); `None` before `0-0`.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// The 16-byte big-endian form: a node's key in snapshots, a PEL entry's raw ID.
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// Reads the 16-byte big-endian form.
    pub fn from_be_bytes(b: &[u8]) -> Option<StreamId> {
        let b: &[u8; 16] = b.try_into().ok()?;
        let (ms, seq) = b.split_at(8);
        Some(StreamId::new(
            u64::from_be_bytes(ms.try_into().ok()?),
            u64::from_be_bytes(seq.try_into().ok()?),
        ))
    }

    /// `ms-seq`, as replies and commands write an ID.
    pub fn text(self) -> Vec<u8> {
        let mut b = itoa::Buffer::new();
        let mut v = b.format(self.ms).as_bytes().to_vec();
        v.push(b'-');
        v.extend_from_slice(b.format(self.seq).as_bytes());
        v
    }

    /// Parses an ID argument as Redis does (`streamGenericParseIDOrReply`): `ms-seq`, or `ms`
    /// with the sequence `missing_seq`; `-` and `+` (unless `strict`); `ms-*` when `seq_star`
    /// (then the second value is false: the sequence is to be generated). Numbers read as C's
    /// `strtoull` does after `string2ll` (so `+5` and ` 5` are 5), up to a NUL byte.
    pub fn parse(
        arg: &[u8],
        missing_seq: u64,
        strict: bool,
        seq_star: bool,
    ) -> Option<(StreamId, bool)> {
        if arg.len() > 127 {
            return None;
        }
        let arg = &arg[..memchr::memchr(0, arg).unwrap_or(arg.len())];
        match arg {
            b"-" | b"+" if strict => None,
            b"-" => Some((StreamId::MIN, true)),
            b"+" => Some((StreamId::MAX, true)),
            _ => {
                let (ms, seq) = match memchr::memchr(b'-', arg) {
                    Some(d) => (&arg[..d], Some(&arg[d + 1..])),
                    None => (arg, None),
                };
                let ms = strtoull(ms)?;
                match seq {
                    Some(b"*") if seq_star => Some((StreamId::new(ms, 0), false)),
                    Some(s) => Some((StreamId::new(ms, strtoull(s)?), true)),
                    None => Some((StreamId::new(ms, missing_seq), true)),
                }
            }
        }
    }
}

/// Redis's `string2ull`: a canonical `i64` must not be negative; anything else is read by
/// `strtoull` (leading blanks, a sign, digits to the end; `-` wraps).
fn strtoull(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::num::parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let start = s
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let mut rest = &s[start..];
    let neg = match rest.first() {
        Some(b'-') => {
            rest = &rest[1..];
            true
        }
        Some(b'+') => {
            rest = &rest[1..];
            false
        }
        _ => false,
    };
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in rest {
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Node limits from the configuration (`stream-node-max-bytes`, `stream-node-max-entries`).
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    /// Bytes a node may reach (0: no limit but Redis's 1 GB).
    pub max_bytes: usize,
    /// Entries, live or deleted, a node may hold (0: no limit).
    pub max_entries: i64,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_bytes: 4096,
            max_entries: 100,
        }
    }
}

/// Why an entry could not be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// The ID is not greater than the stream's last ID (or the sequence would overflow).
    IdTooSmall,
    /// The entry is larger than a node can hold.
    TooLarge,
}

/// How a trim chooses what goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimBy {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries with IDs below this.
    MinId(StreamId),
}

/// One entry, borrowed from its node.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    /// The entry's ID.
    pub id: StreamId,
    /// Its flags ([`FLAG_DELETED`], [`FLAG_SAMEFIELDS`]).
    pub flags: i64,
    /// Number of field-value pairs.
    pub pairs: usize,
    lp: &'a Listpack,
    flags_pos: Pos,
    master_fields: Option<Pos>,
    body: Option<Pos>,
}

impl<'a> Item<'a> {
    /// Calls `f` with each field and value.
    pub fn for_each(&self, mut f: impl FnMut(Entry<'a>, Entry<'a>)) {
        let lp = self.lp;
        let same = self.flags & FLAG_SAMEFIELDS != 0;
        let mut field = self.master_fields;
        let mut p = self.body;
        for _ in 0..self.pairs {
            let (Some(fp), Some(vp0)) = (if same { field } else { p }, p) else {
                return;
            };
            let vp = if same {
                vp0
            } else {
                lp.next(vp0).unwrap_or(vp0)
            };
            f(lp.get(fp), lp.get(vp));
            if same {
                field = lp.next(fp);
            }
            p = lp.next(vp);
        }
    }

    /// Whether the entry is flagged deleted.
    pub fn deleted(&self) -> bool {
        self.flags & FLAG_DELETED != 0
    }
}

fn int(lp: &Listpack, p: Option<Pos>) -> Option<i64> {
    lp.get(p?).as_i64()
}

/// Walks a node's entries in order; `None` ends the walk (also on a malformed node).
struct NodeWalk<'a> {
    lp: &'a Listpack,
    master: StreamId,
    master_fields: Option<Pos>,
    n_master: usize,
    next: Option<Pos>,
}

impl<'a> NodeWalk<'a> {
    fn new(master: StreamId, lp: &'a Listpack) -> NodeWalk<'a> {
        let count = lp.first();
        let deleted = count.and_then(|p| lp.next(p));
        let nfields = deleted.and_then(|p| lp.next(p));
        let n_master = int(lp, nfields).and_then(|n| usize::try_from(n).ok());
        let mut p = nfields.and_then(|p| lp.next(p));
        let master_fields = p;
        for _ in 0..n_master.unwrap_or(0) {
            p = p.and_then(|q| lp.next(q));
        }
        // `p` is at the master entry's terminating 0.
        let next = if n_master.is_some() {
            p.and_then(|q| lp.next(q))
        } else {
            None
        };
        NodeWalk {
            lp,
            master,
            master_fields,
            n_master: n_master.unwrap_or(0),
            next,
        }
    }
}

impl<'a> Iterator for NodeWalk<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        let lp = self.lp;
        let flags_pos = self.next.take()?;
        let flags = lp.get(flags_pos).as_i64()?;
        let ms_pos = lp.next(flags_pos);
        let seq_pos = ms_pos.and_then(|p| lp.next(p));
        let ms = int(lp, ms_pos)?;
        let seq = int(lp, seq_pos)?;
        let id = StreamId::new(
            self.master.ms.wrapping_add(ms as u64),
            self.master.seq.wrapping_add(seq as u64),
        );
        let mut p = seq_pos.and_then(|p| lp.next(p));
        let same = flags & FLAG_SAMEFIELDS != 0;
        let (pairs, items) = if same {
            (self.n_master, self.n_master)
        } else {
            let n = usize::try_from(int(lp, p)?).ok()?;
            p = p.and_then(|q| lp.next(q));
            (n, n.checked_mul(2)?)
        };
        let body = p;
        for _ in 0..items {
            p = lp.next(p?);
        }
        // `p` is at the entry's lp-count.
        self.next = p.and_then(|q| lp.next(q));
        Some(Item {
            id,
            flags,
            pairs,
            lp,
            flags_pos,
            master_fields: self.master_fields,
            body: if pairs == 0 { None } else { body },
        })
    }
}

/// A consumer group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Group {
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// Entries the group has read (its logical position), or [`INVALID_ENTRIES_READ`].
    pub entries_read: i64,
    /// Pending entries: delivered, not acknowledged.
    pub pel: BTreeMap<StreamId, Nack>,
    /// Consumers by name.
    pub consumers: BTreeMap<Box<[u8]>, Consumer>,
}

/// A pending entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Nack {
    /// The consumer it was delivered to.
    pub consumer: Box<[u8]>,
    /// When it was last delivered (Unix ms).
    pub delivery_time: u64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Consumer {
    /// When it last tried to read or claim (Unix ms).
    pub seen_time: u64,
    /// When it last read or claimed something (Unix ms), -1 if never.
    pub active_time: i64,
    /// Its pending entries.
    pub pel: BTreeSet<StreamId>,
}

/// A stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Listpack>,
    length: u64,
    /// The last ID ever added (or set by XSETID).
    pub last_id: StreamId,
    /// The first live entry's ID (0-0 when empty).
    pub first_id: StreamId,
    /// The largest ID ever deleted (XDEL).
    pub max_deleted: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// Consumer groups by name.
    pub groups: BTreeMap<Box<[u8]>, Group>,
}

/// Items of an entry: a small buffer set for integers.
fn text_i64(v: i64, b: &mut itoa::Buffer) -> &[u8] {
    b.format(v).as_bytes()
}

impl Stream {
    /// Live entries.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// Whether there are no live entries.
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Number of nodes (radix tree keys, as XINFO STREAM reports them).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes: master ID and listpack, in order (for snapshots).
    pub fn nodes(&self) -> impl Iterator<Item = (StreamId, &Listpack)> {
        self.nodes.iter().map(|(k, v)| (*k, v))
    }

    /// Builds a stream from snapshot parts; `None` when a node is malformed or the counts
    /// disagree with the nodes.
    pub fn from_parts(
        nodes: Vec<(StreamId, Listpack)>,
        length: u64,
        last_id: StreamId,
        first_id: StreamId,
        max_deleted: StreamId,
        entries_added: u64,
    ) -> Option<Stream> {
        let mut s = Stream {
            last_id,
            first_id,
            max_deleted,
            entries_added,
            length,
            ..Stream::default()
        };
        let mut live = 0u64;
        let mut prev: Option<StreamId> = None;
        for (master, lp) in nodes {
            let (count, deleted) = Self::header(&lp)?;
            let mut seen = 0i64;
            let mut seen_live = 0i64;
            for it in NodeWalk::new(master, &lp) {
                if prev.is_some_and(|p| it.id <= p) || it.id < master {
                    return None;
                }
                prev = Some(it.id);
                seen += 1;
                seen_live += i64::from(!it.deleted());
            }
            if seen != count + deleted || seen_live != count || count == 0 {
                return None;
            }
            live += count as u64;
            if s.nodes.insert(master, lp).is_some() {
                return None;
            }
        }
        (live == length).then_some(s)
    }

    /// A node's live and deleted counts.
    fn header(lp: &Listpack) -> Option<(i64, i64)> {
        let p = lp.first()?;
        let count = lp.get(p).as_i64()?;
        let deleted = int(lp, lp.next(p))?;
        (count >= 0 && deleted >= 0).then_some((count, deleted))
    }

    /// Adds an entry of `pairs` (field, value, field, value ...). `id` is `None` for an ID made
    /// from `now_ms` and the last ID, else the ID given with whether its sequence was given
    /// (`ms-*` leaves it to be generated).
    pub fn append(
        &mut self,
        pairs: &[&[u8]],
        id: Option<(StreamId, bool)>,
        now_ms: u64,
        limits: NodeLimits,
    ) -> Result<StreamId, AddError> {
        let id = match id {
            None => {
                if now_ms > self.last_id.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    self.last_id.incr().unwrap_or(StreamId::MIN)
                }
            }
            Some((id, true)) => id,
            Some((id, false)) if id.ms == self.last_id.ms => {
                if self.last_id.seq == u64::MAX {
                    return Err(AddError::IdTooSmall);
                }
                StreamId::new(id.ms, self.last_id.seq + 1)
            }
            Some((id, false)) => id,
        };
        if id <= self.last_id {
            return Err(AddError::IdTooSmall);
        }
        let total: usize = pairs.iter().map(|p| p.len()).sum();
        if total > LISTPACK_MAX_SIZE {
            return Err(AddError::TooLarge);
        }
        let nfields = pairs.len() / 2;
        let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            limits.max_bytes
        };
        let mut bufs: [itoa::Buffer; 5] = Default::default();
        let [b0, b1, b2, b3, b4] = &mut bufs;
        let tail = self.nodes.last_key_value().and_then(|(master, lp)| {
            let (count, deleted) = Self::header(lp)?;
            let full = lp.byte_len() + total >= max_bytes
                || (limits.max_entries > 0 && count + deleted >= limits.max_entries);
            (!full).then_some(*master)
        });
        let (master, lp, same) = match tail {
            Some(master) => {
                let lp = self.nodes.get_mut(&master).ok_or(AddError::TooLarge)?;
                let first = lp.first().ok_or(AddError::TooLarge)?;
                let count = lp.get(first).as_i64().unwrap_or(0);
                lp.replace(first, text_i64(count + 1, b0));
                let walk = NodeWalk::new(master, lp);
                let mut same = walk.n_master == nfields;
                let mut f = walk.master_fields;
                for field in pairs.iter().step_by(2) {
                    if !same {
                        break;
                    }
                    match f {
                        Some(p) if lp.get(p).eq_bytes(field) => f = lp.next(p),
                        _ => same = false,
                    }
                }
                (master, lp, same)
            }
            None => {
                let mut items: Vec<&[u8]> = Vec::with_capacity(nfields + 4);
                items.extend([&b"1"[..], b"0", text_i64(nfields as i64, b0)]);
                items.extend(pairs.iter().step_by(2).copied());
                items.push(b"0");
                self.nodes
                    .insert(id, Listpack::from_items(items.iter().copied()));
                let lp = self.nodes.get_mut(&id).ok_or(AddError::TooLarge)?;
                (id, lp, true)
            }
        };
        let flags = if same { FLAG_SAMEFIELDS } else { 0 };
        let lp_count = if same { nfields + 3 } else { 2 * nfields + 4 } as i64;
        let mut nf = itoa::Buffer::new();
        let mut items: Vec<&[u8]> = Vec::with_capacity(2 * nfields + 5);
        items.push(text_i64(flags, b1));
        items.push(text_i64(id.ms.wrapping_sub(master.ms) as i64, b2));
        items.push(text_i64(id.seq.wrapping_sub(master.seq) as i64, b3));
        if same {
            items.extend(pairs.iter().skip(1).step_by(2).copied());
        } else {
            items.push(nf.format(nfields).as_bytes());
            items.extend(pairs.iter().copied());
        }
        items.push(text_i64(lp_count, b4));
        let end = lp.byte_len() - 1;
        lp.insert_at(end, &items);
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
        Ok(id)
    }

    /// Calls `f` with each entry from `start` to `end` (inclusive), in order or reversed,
    /// tombstones included only when `tombstones`, until `f` returns false.
    pub fn range<'a>(
        &'a self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        tombstones: bool,
        mut f: impl FnMut(Item<'a>) -> bool,
    ) {
        if start > end {
            return;
        }
        if !rev {
            let from = self
                .nodes
                .range(..=start)
                .next_back()
                .map_or(StreamId::MIN, |(k, _)| *k);
            for (master, lp) in self.nodes.range(from..) {
                if *master > end {
                    return;
                }
                for it in NodeWalk::new(*master, lp) {
                    if it.id < start || (it.deleted() && !tombstones) {
                        continue;
                    }
                    if it.id > end || !f(it) {
                        return;
                    }
                }
            }
        } else {
            for (master, lp) in self.nodes.range(..=end).rev() {
                let items: Vec<Item<'a>> = NodeWalk::new(*master, lp).collect();
                for it in items.into_iter().rev() {
                    if it.id > end || (it.deleted() && !tombstones) {
                        continue;
                    }
                    if it.id < start || !f(it) {
                        return;
                    }
                }
            }
        }
    }

    /// The entry `id`, if live.
    pub fn get(&self, id: StreamId) -> Option<Item<'_>> {
        let mut found = None;
        self.range(id, id, false, false, |it| {
            found = Some(it);
            false
        });
        found
    }

    /// The first or last entry's ID, tombstones included when `tombstones`
    /// (Redis's `streamGetEdgeID`): the largest ID when there is none and `first`, else 0-0.
    pub fn edge_id(&self, first: bool, tombstones: bool) -> StreamId {
        let mut id = None;
        self.range(StreamId::MIN, StreamId::MAX, !first, tombstones, |it| {
            id = Some(it.id);
            false
        });
        id.unwrap_or(if first { StreamId::MAX } else { StreamId::MIN })
    }

    /// The last live entry's ID (0-0 when empty).
    pub fn last_valid_id(&self) -> StreamId {
        self.edge_id(false, false)
    }

    /// Flags the entry at `flags_pos` of the node `master` deleted; removes the node when it
    /// was its last live entry.
    fn mark_deleted(&mut self, master: StreamId, flags_pos: Pos, flags: i64) {
        let Some(lp) = self.nodes.get_mut(&master) else {
            return;
        };
        let mut b = itoa::Buffer::new();
        lp.replace(flags_pos, text_i64(flags | FLAG_DELETED, &mut b));
        let (count, deleted) = Self::header(lp).unwrap_or((1, 0));
        if count <= 1 {
            self.nodes.remove(&master);
        } else if let Some(first) = lp.first() {
            let p = lp.replace(first, text_i64(count - 1, &mut b));
            if let Some(p) = lp.next(p) {
                lp.replace(p, text_i64(deleted + 1, &mut b));
            }
        }
        self.length = self.length.saturating_sub(1);
    }

    /// Deletes entry `id`; whether it was there (XDEL). The caller updates `max_deleted` and
    /// `first_id` as XDEL does.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((master, at)) = self.get(id).map(|it| {
            let master = self
                .nodes
                .range(..=id)
                .next_back()
                .map_or(StreamId::MIN, |(k, _)| *k);
            (master, (it.flags_pos, it.flags))
        }) else {
            return false;
        };
        self.mark_deleted(master, at.0, at.1);
        true
    }

    /// Trims entries from the head (Redis's `streamTrim`): whole nodes, then (unless
    /// `approx`) entries inside the first node left; at most `limit` entries when not 0.
    /// Returns how many went.
    pub fn trim(&mut self, by: TrimBy, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        while let Some((&master, lp)) = self.nodes.first_key_value() {
            if let TrimBy::MaxLen(max) = by {
                if self.length <= max {
                    break;
                }
            }
            let (entries, _) = Self::header(lp).unwrap_or((0, 0));
            let entries = entries as u64;
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let remove = match by {
                TrimBy::MaxLen(max) => self.length - entries >= max,
                TrimBy::MinId(min) => {
                    let last = NodeWalk::new(master, lp).last().map_or(master, |it| it.id);
                    last < min
                }
            };
            if remove {
                self.nodes.remove(&master);
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let marks: Vec<(Pos, i64)> = {
                let mut length = self.length;
                let mut marks = Vec::new();
                for it in NodeWalk::new(master, lp) {
                    let stop = match by {
                        TrimBy::MaxLen(max) => length <= max,
                        TrimBy::MinId(min) => it.id >= min,
                    };
                    if stop {
                        break;
                    }
                    if !it.deleted() {
                        marks.push((it.flags_pos, it.flags));
                        length -= 1;
                    }
                }
                marks
            };
            let n = marks.len() as u64;
            if let Some(lp) = self.nodes.get_mut(&master) {
                let mut b = itoa::Buffer::new();
                for &(pos, flags) in &marks {
                    lp.replace(pos, text_i64(flags | FLAG_DELETED, &mut b));
                }
                let (count, dead) = Self::header(lp).unwrap_or((0, 0));
                if let Some(first) = lp.first() {
                    let p = lp.replace(first, text_i64(count - n as i64, &mut b));
                    if let Some(p) = lp.next(p) {
                        lp.replace(p, text_i64(dead + n as i64, &mut b));
                    }
                }
            }
            self.length -= n;
            deleted += n;
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.edge_id(true, false);
        }
        deleted
    }

    /// Whether `start..=end` may hold a tombstone (Redis's `streamRangeHasTombstones`).
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted == StreamId::MIN {
            return false;
        }
        if self.first_id > self.max_deleted {
            return false;
        }
        start <= self.max_deleted && self.max_deleted <= end
    }

    /// An ID's logical read counter, or [`INVALID_ENTRIES_READ`] when it cannot be known
    /// (Redis's `streamEstimateDistanceFromFirstEverEntry`).
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return added;
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return added,
            std::cmp::Ordering::Greater => return INVALID_ENTRIES_READ,
            std::cmp::Ordering::Less => {}
        }
        if self.max_deleted == StreamId::MIN || self.max_deleted < self.first_id {
            if id < self.first_id {
                return added - self.length as i64;
            } else if id == self.first_id {
                return added - self.length as i64 + 1;
            }
        }
        INVALID_ENTRIES_READ
    }

    /// A group's lag: entries not yet delivered to it, when known (Redis's
    /// `streamReplyWithCGLag`).
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != INVALID_ENTRIES_READ
            && !self.range_has_tombstones(g.last_id, StreamId::MAX)
        {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let read = self.estimate_distance(g.last_id);
        (read != INVALID_ENTRIES_READ).then(|| self.entries_added as i64 - read)
    }

    /// Heap bytes: nodes, their map slots, groups.
    pub fn heap_bytes(&self) -> usize {
        const SLOT: usize = 16 + std::mem::size_of::<Listpack>();
        let nodes: usize = self.nodes.values().map(|lp| lp.heap_bytes() + SLOT).sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| {
                name.len()
                    + std::mem::size_of::<Group>()
                    + g.pel.len() * (16 + std::mem::size_of::<Nack>())
                    + g.consumers
                        .iter()
                        .map(|(n, c)| n.len() + std::mem::size_of::<Consumer>() + c.pel.len() * 16)
                        .sum::<usize>()
            })
            .sum();
        std::mem::size_of::<Stream>() + nodes + groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn entries(s: &Stream, rev: bool) -> Vec<(StreamId, Pairs)> {
        let mut out = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, rev, false, |it| {
            let mut pairs = Vec::new();
            it.for_each(|f, v| pairs.push((f.to_vec(), v.to_vec())));
            out.push((it.id, pairs));
            true
        });
        out
    }

    #[test]
    fn ids_parse_as_redis_reads_them() {
        let p = |s: &str| StreamId::parse(s.as_bytes(), 0, false, false).map(|x| x.0);
        assert_eq!(p("1-2"), Some(StreamId::new(1, 2)));
        assert_eq!(p("5"), Some(StreamId::new(5, 0)));
        assert_eq!(p("-"), Some(StreamId::MIN));
        assert_eq!(p("+"), Some(StreamId::MAX));
        assert_eq!(p("+5"), Some(StreamId::new(5, 0)));
        assert_eq!(p(" 7-1"), Some(StreamId::new(7, 1)));
        assert_eq!(p("1--1"), None);
        assert_eq!(p("1--01"), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(
            p("18446744073709551615-0"),
            Some(StreamId::new(u64::MAX, 0))
        );
        assert_eq!(p("18446744073709551616"), None);
        assert_eq!(p("a"), None);
        assert_eq!(p(""), None);
        assert_eq!(p("1-"), None);
        assert_eq!(p("1\0zz"), Some(StreamId::new(1, 0)));
        assert_eq!(StreamId::parse(b"+", 0, true, false), None);
        assert_eq!(
            StreamId::parse(b"3-*", 0, true, true),
            Some((StreamId::new(3, 0), false))
        );
        assert_eq!(StreamId::parse(b"3-*", 0, true, false), None);
    }

    #[test]
    fn append_range_delete_trim_match_a_model() {
        let limits = NodeLimits {
            max_bytes: 200,
            max_entries: 7,
        };
        let mut s = Stream::default();
        let mut model: BTreeMap<StreamId, Pairs> = BTreeMap::new();
        let mut rng = 12345u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for i in 0..2000u64 {
            match next() % 10 {
                0..=6 => {
                    let nf = 1 + (next() % 3) as usize;
                    let mut pairs: Vec<Vec<u8>> = Vec::new();
                    for j in 0..nf {
                        let f = if next() % 4 == 0 {
                            format!("x{j}")
                        } else {
                            format!("f{j}")
                        };
                        pairs.push(f.into_bytes());
                        pairs.push(format!("{}", next() % 1000).into_bytes());
                    }
                    let refs: Vec<&[u8]> = pairs.iter().map(Vec::as_slice).collect();
                    let id = s.append(&refs, None, i / 3, limits).unwrap();
                    model.insert(
                        id,
                        pairs
                            .chunks(2)
                            .map(|c| (c[0].clone(), c[1].clone()))
                            .collect(),
                    );
                }
                7 | 8 => {
                    if let Some(&id) = model.keys().nth((next() % 5) as usize) {
                        assert!(s.delete(id));
                        assert!(!s.delete(id));
                        model.remove(&id);
                    }
                }
                _ => {
                    let max = model.len().saturating_sub((next() % 4) as usize);
                    s.trim(TrimBy::MaxLen(max as u64), false, 0);
                    while model.len() > max {
                        model.pop_first();
                    }
                }
            }
            assert_eq!(s.len(), model.len() as u64);
            let want: Vec<_> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
            assert_eq!(entries(&s, false), want);
            if i % 50 == 0 {
                let mut rev = want.clone();
                rev.reverse();
                assert_eq!(entries(&s, true), rev);
                let nodes: Vec<(StreamId, Listpack)> =
                    s.nodes().map(|(k, v)| (k, v.clone())).collect();
                let back =
                    Stream::from_parts(nodes, s.len(), s.last_id, s.first_id, s.max_deleted, 0)
                        .unwrap();
                assert_eq!(entries(&back, false), want);
            }
        }
    }

    #[test]
    fn explicit_ids() {
        let mut s = Stream::default();
        let l = NodeLimits::default();
        let a: &[&[u8]] = &[b"a", b"1"];
        assert_eq!(
            s.append(a, Some((StreamId::new(5, 0), false)), 0, l),
            Ok(StreamId::new(5, 0))
        );
        assert_eq!(
            s.append(a, Some((StreamId::new(5, 0), false)), 0, l),
            Ok(StreamId::new(5, 1))
        );
        assert_eq!(
            s.append(a, Some((StreamId::new(5, 1), true)), 0, l),
            Err(AddError::IdTooSmall)
        );
        assert_eq!(s.append(a, None, 3, l), Ok(StreamId::new(5, 2)));
        assert_eq!(s.append(a, None, 9, l), Ok(StreamId::new(9, 0)));
        s.trim(TrimBy::MinId(StreamId::new(5, 2)), false, 0);
        assert_eq!(s.len(), 2);
        assert_eq!(s.first_id, StreamId::new(5, 2));
    }
}
