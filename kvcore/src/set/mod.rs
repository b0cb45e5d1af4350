//! Sets: an intset of integers, a listpack of strings while small, then a hash table.
//!
//! (Skeleton: the sets work fills this in.)

use crate::listpack::Listpack;

/// A set in any encoding. Must stay at most 16 bytes (a `Value` is 24).
#[derive(Clone, Debug, PartialEq)]
pub enum Set {
    /// Small (intset or listpack; defined by the sets work).
    Pack(Listpack),
    /// Large: a hash table.
    Table(Box<SetTable>),
}

/// The large encoding (defined by the sets work).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SetTable {}

impl Set {
    /// Number of members.
    pub fn len(&self) -> usize {
        match self {
            Set::Pack(lp) => lp.len(),
            Set::Table(_) => 0,
        }
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Pack(_) => "listpack",
            Set::Table(_) => "hashtable",
        }
    }

    /// Heap bytes owned by the set.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Set::Pack(lp) => lp.heap_bytes(),
            Set::Table(_) => std::mem::size_of::<SetTable>(),
        }
    }
}
