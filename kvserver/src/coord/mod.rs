//! Coordination across shards: which shard owns a key (`route`), commands whose keys span
//! shards, made atomic with key intent locks (`multi`), and clients blocked on keys of any
//! shard (`blocking`). Calls down into the shards (messages, locks, their stores) and never up
//! into the network side: a connection passes in what it owns (its session, its output).

pub mod blocking;
pub mod multi;
pub mod route;
pub mod script;
pub mod tx;
