//! Lists: a listpack while small, then a quicklist (a deque of listpack nodes).
//!
//! (Skeleton: the lists work fills this in.)

use std::collections::VecDeque;

use crate::listpack::Listpack;

/// A list in either encoding. Must stay at most 16 bytes (a `Value` is 24).
#[derive(Clone, Debug, PartialEq)]
pub enum List {
    /// Small: one listpack (`OBJECT ENCODING` says `listpack`).
    Pack(Listpack),
    /// Large: a quicklist of listpack nodes.
    Quick(Box<QuickList>),
}

/// A deque of listpack nodes.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct QuickList {
    nodes: VecDeque<Listpack>,
    len: usize,
}

impl List {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            List::Pack(lp) => lp.len(),
            List::Quick(q) => q.len,
        }
    }

    /// Whether the list has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            List::Pack(_) => "listpack",
            List::Quick(_) => "quicklist",
        }
    }

    /// Heap bytes owned by the list.
    pub fn heap_bytes(&self) -> usize {
        match self {
            List::Pack(lp) => lp.heap_bytes(),
            List::Quick(q) => {
                std::mem::size_of::<QuickList>()
                    + q.nodes.capacity() * std::mem::size_of::<Listpack>()
                    + q.nodes.iter().map(Listpack::heap_bytes).sum::<usize>()
            }
        }
    }
}
