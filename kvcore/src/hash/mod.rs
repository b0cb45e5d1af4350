//! Hashes: a listpack of field/value pairs while small, then a hash table.
//!
//! (Skeleton: the hashes work fills this in.)

use crate::listpack::Listpack;

/// A hash in either encoding. Must stay at most 16 bytes (a `Value` is 24).
#[derive(Clone, Debug, PartialEq)]
pub enum Hash {
    /// Small: field, value, field, value ... in one listpack.
    Pack(Listpack),
    /// Large (or with field TTLs).
    Big(Box<BigHash>),
}

/// The large encoding (defined by the hashes work).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct BigHash {}

impl Hash {
    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            Hash::Pack(lp) => lp.len() / 2,
            Hash::Big(_) => 0,
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
            Hash::Big(_) => "hashtable",
        }
    }

    /// Heap bytes owned by the hash.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Hash::Pack(lp) => lp.heap_bytes(),
            Hash::Big(_) => std::mem::size_of::<BigHash>(),
        }
    }
}
