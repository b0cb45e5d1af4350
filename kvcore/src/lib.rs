//! kvcore: an embeddable Redis-compatible in-memory store. No I/O, no threads, no async.
//!
//! # Layout
//! - [`resp`]: RESP2/RESP3 request parser (zero-copy), reply writer, reply parser.
//! - [`dict`]: the keyspace hash map, with progressive rehash and a SCAN cursor that survives
//!   resizing.
//! - [`keyspace`]: one logical database — keys, values, deadlines, lazy and active expiry.
//! - [`value`]: stored values and their encodings (`int`, `embstr`, `raw`, `listpack` ...).
//! - [`listpack`]: Redis's listpack byte format, the compact encoding of small hashes, sets
//!   and list nodes.
//! - [`hash`], [`list`], [`set`]: hashes, lists (quicklist) and sets (intset, listpack, table).
//! - [`zset`]: sorted sets (listpack and hash table + order-statistic B+tree); [`geo`]: geohash
//!   math for the geo commands.
//! - [`db`]: [`Db`], the store: 16 databases, clock, config, stats, dispatch and typed API.
//! - [`commands`]: the command table, one file per family, each ending in its rows.
//! - [`hll`]: HyperLogLog in Redis's own dense and sparse byte formats.
//! - [`lazyfree`]: big collections are freed off the command path.
//! - [`events`]: keyspace events (`notify-keyspace-events`); [`watch`]: the WATCH table.
//! - [`acl`]: users, their permissions (ACL SETUSER rules) and the ACL log.
//! - [`config`], [`clock`], [`error`], [`glob`], [`num`]: the small pieces they share.
//!
//! # Example
//! ```
//! let mut db = kvcore::Db::new();
//! db.set(b"k", b"v").unwrap();
//! assert_eq!(db.execute(&[b"GET", b"k"]), kvcore::Reply::Bulk(b"v".to_vec()));
//! ```

pub mod dict;
pub mod resp;

pub mod acl;
pub mod changes;
pub mod clock;
pub mod commands;
pub mod config;
pub mod db;
pub mod error;
pub mod events;
pub mod evict;
pub mod express;
pub mod function;
pub mod geo;
pub mod glob;
pub mod hash;
pub mod hll;
pub mod keyspace;
pub mod lazyfree;
pub mod list;
pub mod listpack;
pub mod lzf;
pub mod num;
pub mod persist;
pub mod rdb;
pub mod script;
pub mod set;
pub mod slab;
pub mod stream;
pub mod tally;
pub mod telemetry;
#[cfg(test)]
mod testutil;
pub mod value;
pub mod watch;
pub mod zset;

pub use clock::Clock;
pub use commands::keys_api::ExpireFlags;
pub use commands::server_api::ShardStats;
pub use commands::strings_api::{SetCondition, SetOptions, SetOutcome};
pub use db::{Db, HostInfo, Lap, ServerInfo, Session, Stats};
pub use error::{OpError, OpResult};
pub use keyspace::{ReplicaView, Ttl};
pub use resp::reply::Value as Reply;

/// The Redis version we answer as (HELLO, INFO): the behaviour we reproduce.
pub const REDIS_VERSION: &str = "7.0.15";
