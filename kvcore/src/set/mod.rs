//! Sets: an intset of integers, a listpack of strings while small, then a hash table.
//!
//! # Encodings (Redis 7.2+)
//!
//! - **intset** ([`intset`]): sorted integers, while every member is a canonical integer and
//!   there are at most `set-max-intset-entries` (512) of them. Members come out ascending.
//! - **listpack**: members in insertion order, while there are at most
//!   `set-max-listpack-entries` (128) of at most `set-max-listpack-value` (64) bytes.
//! - **hashtable** ([`SetTable`]): a [`Dict`] of members, each one block holding its chain
//!   link and bytes, with the keyspace's progressive rehash (no SADD pays for a whole resize)
//!   and its SCAN cursor for SSCAN.
//!
//! Conversions follow Redis's `setTypeAddAux`: an intset takes a non-integer by turning into a
//! listpack when that still fits (else a hash table), and turns into a hash table past its
//! entry limit; a listpack turns into a hash table past either of its limits. Sets never
//! convert back; results of the *STORE commands are built from an empty intset, so they take
//! the smallest encoding that fits.
//!
//! # Layout
//!
//! [`Set::Small`] holds either an intset or a listpack in one `Box<[u8]>` (kept in a
//! [`Listpack`] value), told apart by the first four bytes: an intset starts with its width
//! (2, 4 or 8), a listpack with its total size (7, or at least 9). So a `Set` is 16 bytes and a
//! `Value` stays 24, where a third variant would cost every key 8 bytes.

pub mod intset;

use crate::dict::Dict;
use crate::keyspace::Thin;
use crate::listpack::Listpack;

/// The encoding limits, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `set-max-intset-entries`.
    pub max_intset: usize,
    /// `set-max-listpack-entries`.
    pub max_pack_entries: usize,
    /// `set-max-listpack-value`.
    pub max_pack_value: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_intset: 512,
            max_pack_entries: 128,
            max_pack_value: 64,
        }
    }
}

/// A set in any encoding.
#[derive(Clone, Debug, PartialEq)]
pub enum Set {
    /// An intset or a listpack (see the module docs).
    Small(Listpack),
    /// A hash table.
    Table(Box<SetTable>),
}

/// The large encoding.
pub struct SetTable {
    dict: Dict<Thin<()>>,
}

impl Default for SetTable {
    fn default() -> Self {
        SetTable {
            dict: crate::dict::retiring(Dict::new()),
        }
    }
}

impl Clone for SetTable {
    fn clone(&self) -> Self {
        let mut t = SetTable::default();
        for m in self.dict.iter() {
            let n = Thin::new(t.dict.arena_mut(), m.key(), (), 0);
            t.dict.insert_new(n);
        }
        t
    }
}

impl PartialEq for SetTable {
    fn eq(&self, other: &Self) -> bool {
        self.dict.len() == other.dict.len()
            && self.dict.iter().all(|m| other.dict.get(m.key()).is_some())
    }
}

impl std::fmt::Debug for SetTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set()
            .entries(
                self.dict
                    .iter()
                    .map(|m| String::from_utf8_lossy(m.key()).into_owned()),
            )
            .finish()
    }
}

impl Drop for SetTable {
    fn drop(&mut self) {
        if self.dict.len() > crate::lazyfree::THRESHOLD {
            crate::lazyfree::defer(std::mem::take(&mut self.dict));
        }
    }
}

/// What a small set holds.
enum Small<'a> {
    Ints(&'a [u8]),
    Pack(&'a Listpack),
}

fn small(lp: &Listpack) -> Small<'_> {
    if intset::is_intset(lp.raw_bytes()) {
        Small::Ints(lp.raw_bytes())
    } else {
        Small::Pack(lp)
    }
}

/// A member as an intset value: canonical integers only (what `string2ll` accepts).
fn as_int(m: &[u8]) -> Option<i64> {
    if m.len() <= 20 {
        crate::num::parse_i64(m)
    } else {
        None
    }
}

/// Decimal digits of `v`, sign included.
fn digits(v: i64) -> usize {
    itoa::Buffer::new().format(v).len()
}

impl Default for Set {
    fn default() -> Self {
        Set::Small(Listpack::from_raw(intset::new()))
    }
}

impl Set {
    /// An empty set in the encoding Redis's `setTypeCreate` picks for a first member `first`
    /// and about `size_hint` members.
    pub fn for_members(limits: Limits, first: &[u8], size_hint: usize) -> Set {
        if as_int(first).is_some() && size_hint <= limits.max_intset {
            Set::default()
        } else if size_hint <= limits.max_pack_entries {
            Set::Small(Listpack::new())
        } else {
            Set::Table(Box::default())
        }
    }

    /// A set of `members` (duplicates ignored), built from an empty intset as Redis builds
    /// the results of SINTERSTORE, SUNIONSTORE and SDIFFSTORE.
    pub fn from_members<'a>(limits: Limits, members: impl IntoIterator<Item = &'a [u8]>) -> Set {
        let mut s = Set::default();
        for m in members {
            s.add(limits, m);
        }
        s
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            Set::Small(lp) => match small(lp) {
                Small::Ints(b) => intset::len(b),
                Small::Pack(lp) => lp.len(),
            },
            Set::Table(t) => t.dict.len(),
        }
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Small(lp) => match small(lp) {
                Small::Ints(_) => "intset",
                Small::Pack(_) => "listpack",
            },
            Set::Table(_) => "hashtable",
        }
    }

    /// Heap bytes owned by the set.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Set::Small(lp) => lp.heap_bytes(),
            Set::Table(t) => {
                std::mem::size_of::<SetTable>()
                    + t.dict.table_bytes()
                    + t.dict.iter().map(|m| 16 + m.key().len()).sum::<usize>()
            }
        }
    }

    /// [`crate::hash::Hash::prefetch_bucket`] for a member.
    pub fn prefetch_bucket(&self, m: &[u8]) -> Option<u64> {
        let Set::Table(t) = self else {
            return None;
        };
        Some(t.dict.prefetch_key(m))
    }

    /// [`crate::hash::Hash::prefetch_chain`] for a member.
    pub fn prefetch_chain(&self, h: u64) {
        if let Set::Table(t) = self {
            t.dict.prefetch_chain(h);
        }
    }

    /// Whether `m` is a member.
    pub fn contains(&self, m: &[u8]) -> bool {
        match self {
            Set::Small(lp) => match small(lp) {
                Small::Ints(b) => as_int(m).is_some_and(|v| intset::search(b, v).is_ok()),
                Small::Pack(lp) => lp.first().and_then(|p| lp.find(p, m, 0)).is_some(),
            },
            Set::Table(t) => t.dict.get(m).is_some(),
        }
    }

    /// Adds `m`; false if it was a member already.
    pub fn add(&mut self, limits: Limits, m: &[u8]) -> bool {
        match self {
            Set::Table(t) => {
                if t.dict.get(m).is_some() {
                    return false;
                }
                let n = Thin::new(t.dict.arena_mut(), m, (), 0);
                t.dict.insert_new(n);
                true
            }
            Set::Small(lp) => {
                if intset::is_intset(lp.raw_bytes()) {
                    let mut blob = std::mem::take(lp).into_raw();
                    let added = match as_int(m) {
                        Some(v) => {
                            let added = intset::insert(&mut blob, v);
                            *lp = Listpack::from_raw(blob);
                            if added && self.len() > limits.max_intset {
                                self.convert_to_table();
                            }
                            added
                        }
                        None => {
                            // Would a listpack of every member still fit? Measured with the
                            // longest of the intset's extremes, as Redis estimates.
                            let n = intset::len(&blob);
                            let longest = if n == 0 {
                                0
                            } else {
                                digits(intset::get(&blob, 0)).max(digits(intset::get(&blob, n - 1)))
                            };
                            *lp = Listpack::from_raw(blob);
                            if n < limits.max_pack_entries
                                && m.len() <= limits.max_pack_value
                                && longest <= limits.max_pack_value
                            {
                                self.convert_to_pack();
                            } else {
                                self.convert_to_table();
                            }
                            self.add(limits, m)
                        }
                    };
                    return added;
                }
                if lp.first().and_then(|p| lp.find(p, m, 0)).is_some() {
                    return false;
                }
                if lp.len() < limits.max_pack_entries && m.len() <= limits.max_pack_value {
                    lp.push_back(m);
                    return true;
                }
                self.convert_to_table();
                self.add(limits, m)
            }
        }
    }

    /// Removes `m`; false if it was not a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self {
            Set::Table(t) => {
                let gone = t.dict.remove(m).map(|e| t.dict.release(e)).is_some();
                // As Redis does after each delete: a set popped down from millions of members
                // gives its buckets back, progressively, and random draws stay cheap.
                t.dict.maybe_shrink();
                gone
            }
            Set::Small(lp) => {
                if intset::is_intset(lp.raw_bytes()) {
                    let Some(v) = as_int(m) else {
                        return false;
                    };
                    let mut blob = std::mem::take(lp).into_raw();
                    let removed = intset::remove(&mut blob, v);
                    *lp = Listpack::from_raw(blob);
                    return removed;
                }
                match lp.first().and_then(|p| lp.find(p, m, 0)) {
                    Some(p) => {
                        lp.delete(p, 1);
                        true
                    }
                    None => false,
                }
            }
        }
    }

    /// Calls `f` on every member, in the encoding's order (intset ascending, listpack in
    /// insertion order, hash table in bucket order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        match self {
            Set::Small(lp) => match small(lp) {
                Small::Ints(b) => {
                    let mut buf = itoa::Buffer::new();
                    for v in intset::iter(b) {
                        f(buf.format(v).as_bytes());
                    }
                }
                Small::Pack(lp) => {
                    let mut buf = itoa::Buffer::new();
                    for e in lp.iter() {
                        f(e.bytes(&mut buf));
                    }
                }
            },
            Set::Table(t) => {
                for m in t.dict.iter() {
                    f(m.key());
                }
            }
        }
    }

    /// Every member, owned, in the encoding's order.
    pub fn to_vec(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|m| out.push(m.to_vec()));
        out
    }

    /// A random member (`r` a random number), or `None` when empty.
    pub fn random(&self, r: u64) -> Option<Vec<u8>> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        match self {
            Set::Small(lp) => match small(lp) {
                Small::Ints(b) => Some(
                    itoa::Buffer::new()
                        .format(intset::get(b, (r % n as u64) as usize))
                        .as_bytes()
                        .to_vec(),
                ),
                Small::Pack(lp) => lp.seek((r % n as u64) as i64).map(|p| lp.get(p).to_vec()),
            },
            Set::Table(t) => t.dict.random(r).map(|m| m.key().to_vec()),
        }
    }

    /// One step of SSCAN from `cursor`: small sets give every member and cursor 0; a table
    /// gives the members of the buckets the cursor visits (`count` of them or more).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        match self {
            Set::Small(_) => {
                self.for_each(f);
                0
            }
            Set::Table(t) => {
                let mut c = cursor;
                let mut seen = 0;
                loop {
                    c = t.dict.scan(c, |m| {
                        seen += 1;
                        f(m.key());
                    });
                    if c == 0 || seen >= count {
                        return c;
                    }
                }
            }
        }
    }

    fn convert_to_table(&mut self) {
        let mut t = SetTable::default();
        self.for_each(|m| {
            let n = Thin::new(t.dict.arena_mut(), m, (), 0);
            t.dict.insert_new(n);
        });
        *self = Set::Table(Box::new(t));
    }

    fn convert_to_pack(&mut self) {
        let members = self.to_vec();
        *self = Set::Small(Listpack::from_items(members.iter().map(Vec::as_slice)));
    }
}

#[cfg(test)]
mod tests;
