//! Integration tests: the real kvserver binary on 127.0.0.1:0, driven by the `redis` crate,
//! raw sockets and Redis's own tools. One test binary, one module per area.

mod acl;
mod acl_file;
mod aof;
mod basics;
mod blocking;
mod blocking_lists;
mod clients;
mod collection_rss;
mod command_fuzz;
mod command_table;
mod config_files;
mod differential;
mod disk;
mod eviction;
mod functions;
mod hashes;
mod hostile;
mod hyperloglog;
mod lazyfree;
mod limits;
mod monitoring;
mod multishard;
mod notifications;
mod own_loop;
mod persistence;
mod pubsub;
mod replication;
mod sets;
mod support;
mod transactions;
mod zsets;
