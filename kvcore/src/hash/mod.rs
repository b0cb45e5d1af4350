//! Hashes: a listpack of field/value pairs while small, then a hash table.
//!
//! # Encodings
//!
//! - **listpack**: `field, value, field, value ...` in one [`ForwardListpack`] (a listpack
//!   without the backlens, which only a backward walk needs: 20 bytes less for ten pairs), in
//!   insertion order, while there are at most `hash-max-listpack-entries` (512) fields and no
//!   field or value is longer than `hash-max-listpack-value` (64) bytes. A lookup walks the
//!   fields (skipping values), at most a few kilobytes. Snapshots and DUMP carry Redis's form
//!   (with backlens).
//! - **hashtable** ([`HashTable`]): a [`Dict`] whose entries are one block each holding the
//!   chain link, the value (a boxed slice) and the field bytes, with the keyspace's
//!   progressive rehash (no HSET pays for a whole resize) and SCAN cursor (HSCAN).
//!
//! The conversion follows Redis's `hashTypeTryConversion`: before a write, more new fields
//! than the entry limit, or any argument longer than the value limit, converts first; after
//! it, more fields than the limit converts. A hash never converts back.
//!
//! # Field expiry (Redis 7.4)
//!
//! A field's deadline (Unix ms) lives in its table entry's deadline slot, and the table keeps
//! an index of `(deadline, field)` so that [`Hash::purge`] removes the expired fields in order,
//! in time proportional to how many expired. A listpack hash that gets its first deadline turns
//! into a table (Redis 7.4 keeps it small as `listpackex`). A field is expired once the clock
//! passes its deadline; setting a deadline at or before now deletes the field instead. HSET
//! over a field clears its deadline. Commands purge a hash before they use it, so an expired
//! field is never seen; the store's active cycle purges hashes that nobody reads.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::dict::Dict;
use crate::keyspace::Thin;
use crate::listpack::ForwardListpack;

/// The encoding limits, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `hash-max-listpack-entries`.
    pub max_entries: usize,
    /// `hash-max-listpack-value`.
    pub max_value: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: 512,
            max_value: 64,
        }
    }
}

/// A hash in either encoding. At most 16 bytes, so a `Value` stays 24.
#[derive(Clone, Debug, PartialEq)]
pub enum Hash {
    /// Small: field, value, field, value ... in one listpack, without backlens.
    Pack(ForwardListpack),
    /// Large: a hash table.
    Table(Box<HashTable>),
}

/// The large encoding.
pub struct HashTable {
    dict: Dict<Thin<Box<[u8]>>>,
    /// `(deadline, field)` of every field that has a deadline.
    ttl: BTreeSet<(u64, Box<[u8]>)>,
}

impl Default for HashTable {
    fn default() -> Self {
        HashTable {
            dict: crate::dict::retiring(Dict::new()),
            ttl: BTreeSet::new(),
        }
    }
}

/// Set once any field of any hash in the process gets a deadline: until then no hash can
/// hold an expired field, and commands skip looking.
static FIELD_TTLS_USED: AtomicBool = AtomicBool::new(false);

/// Whether any hash field has ever had a deadline in this process.
pub fn field_ttls_used() -> bool {
    FIELD_TTLS_USED.load(Ordering::Relaxed)
}

impl Clone for HashTable {
    fn clone(&self) -> Self {
        let mut t = HashTable::default();
        for e in self.dict.iter() {
            let at = e.expire_at().unwrap_or(0);
            let n = Thin::new_field(t.dict.arena_mut(), e.key(), e.value(), at);
            t.dict.insert_new(n);
        }
        t.ttl = self.ttl.clone();
        t
    }
}

impl PartialEq for HashTable {
    fn eq(&self, other: &Self) -> bool {
        self.dict.len() == other.dict.len()
            && self.dict.iter().all(|e| {
                other
                    .dict
                    .get(e.key())
                    .is_some_and(|o| o.value() == e.value())
            })
    }
}

impl std::fmt::Debug for HashTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.dict.iter().map(|e| {
                (
                    String::from_utf8_lossy(e.key()).into_owned(),
                    String::from_utf8_lossy(e.value()).into_owned(),
                )
            }))
            .finish()
    }
}

impl Drop for HashTable {
    fn drop(&mut self) {
        if self.dict.len() > crate::lazyfree::THRESHOLD {
            let parts = (
                std::mem::take(&mut self.dict),
                std::mem::take(&mut self.ttl),
            );
            crate::lazyfree::defer(parts);
        }
    }
}

impl HashTable {
    /// Sets the deadline of the existing entry `field` (0 clears it), keeping the index.
    fn set_deadline(&mut self, field: &[u8], at: u64) {
        let Some(e) = self.dict.get_mut(field) else {
            return;
        };
        if let Some(old) = e.expire_at() {
            self.ttl.remove(&(old, field.into()));
        }
        if !e.try_set_deadline(at) {
            self.dict
                .replace_with(field, |old, s| old.reslotted(s, at, false));
        }
        if at != 0 {
            self.ttl.insert((at, field.into()));
        }
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        match self.dict.remove(field) {
            Some(e) => {
                if let Some(at) = e.get(self.dict.arena()).expire_at() {
                    self.ttl.remove(&(at, field.into()));
                }
                self.dict.release(e);
                // As Redis does after each delete: buckets go back as the hash shrinks.
                self.dict.maybe_shrink();
                true
            }
            None => false,
        }
    }
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Pack(ForwardListpack::new())
    }
}

/// The position of `field`'s entry in a listpack hash.
fn find(lp: &ForwardListpack, field: &[u8]) -> Option<usize> {
    lp.first().and_then(|p| lp.find(p, field, 1))
}

impl Hash {
    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            Hash::Pack(lp) => lp.len() / 2,
            Hash::Table(t) => t.dict.len(),
        }
    }

    /// Whether the hash has no fields.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Pack(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    /// Heap bytes owned by the hash.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Hash::Pack(lp) => lp.heap_bytes(),
            Hash::Table(t) => {
                std::mem::size_of::<HashTable>()
                    + t.dict.table_bytes()
                    + t.dict
                        .iter()
                        .map(|e| 32 + e.key().len() + e.value().len())
                        .sum::<usize>()
            }
        }
    }

    /// Calls `f` with the value of `field`, if present.
    pub fn with<R>(&self, field: &[u8], f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        match self {
            Hash::Pack(lp) => {
                let p = lp.next(find(lp, field)?)?;
                let mut buf = itoa::Buffer::new();
                Some(f(lp.get(p).bytes(&mut buf)))
            }
            Hash::Table(t) => t.dict.get(field).map(|e| f(e.value())),
        }
    }

    /// In a table, asks the CPU to start loading the bucket of `field` and returns the field's
    /// hash for [`Hash::prefetch_chain`]; `None` for a listpack. A hint for pipelined batches.
    pub fn prefetch_bucket(&self, field: &[u8]) -> Option<u64> {
        let Hash::Table(t) = self else {
            return None;
        };
        Some(t.dict.prefetch_key(field))
    }

    /// Asks the CPU to start loading the first entry of the chain of hash `h` (from
    /// [`Hash::prefetch_bucket`], once the bucket had time to arrive).
    pub fn prefetch_chain(&self, h: u64) {
        if let Hash::Table(t) = self {
            t.dict.prefetch_chain(h);
        }
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<Vec<u8>> {
        self.with(field, <[u8]>::to_vec)
    }

    /// Whether `field` is present.
    pub fn contains(&self, field: &[u8]) -> bool {
        match self {
            Hash::Pack(lp) => find(lp, field).is_some(),
            Hash::Table(t) => t.dict.get(field).is_some(),
        }
    }

    /// Converts to the table before a write of `pairs` new fields whose longest argument is
    /// `longest` bytes, when the listpack could not take them (Redis's
    /// `hashTypeTryConversion`).
    pub fn prepare(&mut self, limits: Limits, pairs: usize, longest: usize) {
        if matches!(self, Hash::Pack(_))
            && (pairs > limits.max_entries || longest > limits.max_value)
        {
            self.convert();
        }
    }

    /// Sets `field` to `value`; true when the field is new. Converts to the table past the
    /// limits.
    pub fn set(&mut self, limits: Limits, field: &[u8], value: &[u8]) -> bool {
        if field.len().max(value.len()) > limits.max_value {
            self.prepare(limits, 0, field.len().max(value.len()));
        }
        match self {
            Hash::Pack(lp) => {
                if let Some(p) = find(lp, field) {
                    if let Some(v) = lp.next(p) {
                        lp.replace(v, value);
                    }
                    return false;
                }
                lp.push_back(field);
                lp.push_back(value);
                if lp.len() / 2 > limits.max_entries {
                    self.convert();
                }
                true
            }
            Hash::Table(t) => {
                if let Some(e) = t.dict.get_mut(field) {
                    // In place when the node holds as many bytes; else a new node.
                    let placed = e
                        .embedded_mut(value.len())
                        .map(|b| b.copy_from_slice(value));
                    let had_ttl = e.expire_at().is_some();
                    if placed.is_none() {
                        let at = e.expire_at().unwrap_or(0);
                        t.dict.replace_with(field, |old, s| {
                            old.release(s);
                            Thin::new_field(s, field, value, at)
                        });
                    }
                    // Overwriting a field clears its deadline.
                    if had_ttl {
                        t.set_deadline(field, 0);
                    }
                    return false;
                }
                let n = Thin::new_field(t.dict.arena_mut(), field, value, 0);
                t.dict.insert_new(n);
                true
            }
        }
    }

    /// Whether any field has a deadline.
    pub fn has_ttls(&self) -> bool {
        matches!(self, Hash::Table(t) if !t.ttl.is_empty())
    }

    /// The deadline of `field`: `None` when there is no such field, `Some(None)` when it has
    /// none.
    pub fn field_deadline(&self, field: &[u8]) -> Option<Option<u64>> {
        match self {
            Hash::Pack(lp) => find(lp, field).map(|_| None),
            Hash::Table(t) => t.dict.get(field).map(|e| e.expire_at()),
        }
    }

    /// Sets (`Some`) or clears (`None`) the deadline of the existing `field`; false when there
    /// is no such field. A listpack turns into a table to hold a deadline.
    pub fn set_field_deadline(&mut self, field: &[u8], at: Option<u64>) -> bool {
        if !self.contains(field) {
            return false;
        }
        if at.is_some() {
            FIELD_TTLS_USED.store(true, Ordering::Relaxed);
            self.convert();
        }
        if let Hash::Table(t) = self {
            t.set_deadline(field, at.unwrap_or(0));
        }
        true
    }

    /// Removes every field whose deadline is before `now`; returns how many.
    pub fn purge(&mut self, now: u64) -> usize {
        let Hash::Table(t) = self else {
            return 0;
        };
        let mut n = 0;
        while let Some((at, _)) = t.ttl.first() {
            if *at >= now {
                break;
            }
            if let Some((_, field)) = t.ttl.pop_first() {
                if let Some(e) = t.dict.remove(&field) {
                    t.dict.release(e);
                }
                n += 1;
            }
        }
        t.dict.maybe_shrink();
        n
    }

    /// Sets every `(field, value)` of `pairs` (field, value, field, value ...) in order, as
    /// that many [`Hash::set`]s would; returns how many fields were new. A listpack takes the
    /// new fields in one append (one reallocation, not one per field).
    pub fn set_many(&mut self, limits: Limits, pairs: &[&[u8]]) -> usize {
        let longest = pairs.iter().map(|a| a.len()).max().unwrap_or(0);
        self.prepare(limits, pairs.len() / 2, longest);
        let Hash::Pack(lp) = self else {
            return pairs
                .chunks_exact(2)
                .filter(|p| self.set(limits, p[0], p[1]))
                .count();
        };
        let mut new: Vec<&[u8]> = Vec::new();
        for p in pairs.chunks_exact(2) {
            if let Some(at) = find(lp, p[0]) {
                if let Some(v) = lp.next(at) {
                    lp.replace(v, p[1]);
                }
            } else if let Some(i) = new.chunks_exact(2).position(|q| q[0] == p[0]) {
                new[2 * i + 1] = p[1];
            } else {
                new.extend([p[0], p[1]]);
            }
        }
        let added = new.len() / 2;
        if added > 0 {
            let end = lp.end();
            lp.insert_at(end, &new);
            if lp.len() / 2 > limits.max_entries {
                self.convert();
            }
        }
        added
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Pack(lp) => match find(lp, field) {
                Some(p) => {
                    lp.delete(p, 2);
                    true
                }
                None => false,
            },
            Hash::Table(t) => t.remove(field),
        }
    }

    /// Calls `f` on every field and value, in the encoding's order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        match self {
            Hash::Pack(lp) => {
                let (mut fb, mut vb) = (itoa::Buffer::new(), itoa::Buffer::new());
                let mut it = lp.iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    f(k.bytes(&mut fb), v.bytes(&mut vb));
                }
            }
            Hash::Table(t) => {
                for e in t.dict.iter() {
                    f(e.key(), e.value());
                }
            }
        }
    }

    /// Every `(field, value)`, owned, in the encoding's order.
    pub fn to_vec(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|f, v| out.push((f.to_vec(), v.to_vec())));
        out
    }

    /// A random `(field, value)` (`r` a random number), or `None` when empty.
    pub fn random(&self, r: u64) -> Option<(Vec<u8>, Vec<u8>)> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        match self {
            Hash::Pack(lp) => {
                let i = (r % n as u64) as i64 * 2;
                let p = lp.seek(i)?;
                let v = lp.next(p)?;
                Some((lp.get(p).to_vec(), lp.get(v).to_vec()))
            }
            Hash::Table(t) => t
                .dict
                .random(r)
                .map(|e| (e.key().to_vec(), e.value().to_vec())),
        }
    }

    /// One step of HSCAN from `cursor`: a listpack gives every pair and cursor 0; a table the
    /// pairs of the buckets the cursor visits (`count` of them or more).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        match self {
            Hash::Pack(_) => {
                self.for_each(f);
                0
            }
            Hash::Table(t) => {
                let mut c = cursor;
                let mut seen = 0;
                loop {
                    c = t.dict.scan(c, |e| {
                        seen += 1;
                        f(e.key(), e.value());
                    });
                    if c == 0 || seen >= count {
                        return c;
                    }
                }
            }
        }
    }

    fn convert(&mut self) {
        if let Hash::Pack(lp) = self {
            let mut t = HashTable::default();
            let mut it = lp.iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                let n = Thin::new_field(t.dict.arena_mut(), &k.to_vec(), &v.to_vec(), 0);
                t.dict.insert_new(n);
            }
            *self = Hash::Table(Box::new(t));
        }
    }
}

#[cfg(test)]
mod tests;
