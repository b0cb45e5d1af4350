//! INFO: Redis 7.4's sections and fields, in Redis's order, with counters summed over shards.
//!
//! Fields a server without replication, modules, scripts, TLS or fork cannot have are shown
//! with the values Redis shows in the same situation (a master without replicas, no module,
//! no child process), so tools that parse them find every field they expect.

use std::fmt::Write;

use super::server::{human_bytes, ShardStats};
use crate::db::ServerInfo;
use crate::Db;

/// Every section, in the order Redis prints them.
const ORDER: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// The sections INFO prints without arguments (and for `default`).
const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

/// The sections an INFO call asks for, in print order.
pub fn wanted(args: &[&[u8]]) -> Vec<&'static str> {
    if args.is_empty() {
        return DEFAULT.to_vec();
    }
    let mut all = false;
    let mut picked: Vec<&str> = Vec::new();
    for a in args {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        match a.as_str() {
            "all" | "everything" => all = true,
            "default" => picked.extend_from_slice(DEFAULT),
            "module_list" => picked.push("modules"),
            other => {
                if let Some(s) = ORDER.iter().find(|s| **s == other) {
                    picked.push(s);
                }
            }
        }
    }
    ORDER
        .iter()
        .copied()
        .filter(|s| all || picked.contains(s))
        .collect()
}

/// Whether INFO with these arguments needs the latency histograms.
pub fn wants_histograms(args: &[&[u8]]) -> bool {
    wanted(args).contains(&"latencystats")
}

/// Redis's `%.2f`.
fn f2(x: f64) -> String {
    format!("{x:.2}")
}

/// CPU seconds as Redis prints a `timeval`: `12.345678`.
fn secs(x: f64) -> String {
    format!("{x:.6}")
}

/// A field name as INFO may show it: `#`, `:`, CR and LF become `_`.
fn safe(name: &str) -> String {
    name.replace(['#', ':', '\r', '\n'], "_")
}

impl Db {
    /// INFO text for the requested sections (none = the default ones), this store alone.
    pub fn info(&self, sections: &[&[u8]]) -> String {
        self.info_with(sections, &self.shard_stats_with(wants_histograms(sections)))
    }

    /// INFO text with counters summed over shards (`agg`) and the host's facts
    /// ([`crate::HostInfo`]).
    pub fn info_with(&self, sections: &[&[u8]], agg: &ShardStats) -> String {
        let default_server = ServerInfo::default();
        let srv = self.host.server.as_deref().unwrap_or(&default_server);
        let mut out = String::new();
        for (i, name) in wanted(sections).into_iter().enumerate() {
            if i > 0 {
                out.push_str("\r\n");
            }
            self.section(&mut out, name, agg, srv);
        }
        out
    }

    fn section(&self, s: &mut String, name: &str, agg: &ShardStats, srv: &ServerInfo) {
        let h = &self.host;
        let cfg = |n: &str| self.config.get(n).unwrap_or("").to_string();
        let mut line = |k: &str, v: &dyn std::fmt::Display| {
            let _ = write!(s, "{k}:{v}\r\n");
        };
        match name {
            "server" => {
                let uptime = self.now.saturating_sub(h.started_ms) / 1000;
                let hz = cfg("hz");
                let os = if srv.os.is_empty() {
                    std::env::consts::OS.to_string()
                } else {
                    srv.os.clone()
                };
                line("# Server\r\nredis_version", &crate::REDIS_VERSION);
                line("redis_git_sha1", &"00000000");
                line("redis_git_dirty", &0);
                line("redis_build_id", &build_id());
                line("redis_mode", &"standalone");
                line("os", &os);
                line("arch_bits", &(usize::BITS));
                line("monotonic_clock", &"POSIX clock_gettime");
                line("multiplexing_api", &"epoll");
                line("atomicvar_api", &"c11-builtin");
                line("gcc_version", &"0.0.0");
                line("process_id", &std::process::id());
                line("process_supervised", &"no");
                line("run_id", &srv.run_id);
                line("tcp_port", &h.tcp_port);
                line("server_time_usec", &(self.now * 1000));
                line("uptime_in_seconds", &uptime);
                line("uptime_in_days", &(uptime / 86_400));
                line("hz", &hz);
                line("configured_hz", &hz);
                line("lru_clock", &((self.now / 1000) & ((1 << 24) - 1)));
                line("executable", &srv.executable);
                line("config_file", &srv.config_file);
                line("io_threads_active", &0);
                line("kvstore_version", &env!("CARGO_PKG_VERSION"));
                line("shards", &h.shards);
                if h.tcp_port != 0 {
                    let mut l = "name=tcp".to_string();
                    for b in &srv.bind {
                        let _ = write!(l, ",bind={b}");
                    }
                    let _ = write!(l, ",port={}", h.tcp_port);
                    line("listener0", &l);
                }
            }
            "clients" => {
                line("# Clients\r\nconnected_clients", &h.connected_clients);
                line("cluster_connections", &0);
                line("maxclients", &cfg("maxclients"));
                line("client_recent_max_input_buffer", &0);
                line("client_recent_max_output_buffer", &0);
                line("blocked_clients", &h.blocked_clients);
                line("tracking_clients", &0);
                line("pubsub_clients", &srv.pubsub_clients);
                line("watching_clients", &srv.watching_clients);
                line("clients_in_timeout_table", &h.blocked_clients);
                line("total_watched_keys", &agg.watched_keys);
                line("total_blocking_keys", &srv.blocking_keys);
                line("total_blocking_keys_on_nokey", &srv.blocking_keys_nokey);
            }
            "memory" => {
                let m = self.overhead(agg);
                let maxmemory = self.config.maxmemory;
                let total_system = system_memory();
                let dataset = m.dataset();
                let net = m.net();
                let pct = |a: u64, b: u64| {
                    if b == 0 {
                        0.0
                    } else {
                        a as f64 * 100.0 / b as f64
                    }
                };
                let rss = m.rss;
                line("# Memory\r\nused_memory", &m.total);
                line("used_memory_human", &human_bytes(m.total));
                line("used_memory_rss", &rss);
                line("used_memory_rss_human", &human_bytes(rss));
                line("used_memory_peak", &m.peak);
                line("used_memory_peak_human", &human_bytes(m.peak));
                line(
                    "used_memory_peak_perc",
                    &format!("{}%", f2(pct(m.total, m.peak))),
                );
                line("used_memory_overhead", &m.overhead_total);
                line("used_memory_startup", &m.startup);
                line("used_memory_dataset", &dataset);
                line(
                    "used_memory_dataset_perc",
                    &format!("{}%", f2(pct(dataset, net))),
                );
                line("allocator_allocated", &m.total);
                line("allocator_active", &rss);
                line("allocator_resident", &rss);
                line("allocator_muzzy", &0);
                line("total_system_memory", &total_system);
                line("total_system_memory_human", &human_bytes(total_system));
                let lua = agg.lua_memory as u64;
                let scripts = self.scripts.body_bytes() as u64;
                line("used_memory_lua", &lua);
                line("used_memory_vm_eval", &lua);
                line("used_memory_lua_human", &human_bytes(lua));
                line("used_memory_scripts_eval", &scripts);
                line("number_of_cached_scripts", &self.scripts.len());
                let (libraries, functions) = self.scripts.functions().counts();
                let vm_functions = agg.functions_lua_memory as u64;
                let fn_bytes = self.scripts.functions().memory() as u64;
                line("number_of_functions", &functions);
                line("number_of_libraries", &libraries);
                line("used_memory_vm_functions", &vm_functions);
                line("used_memory_vm_total", &(lua + vm_functions));
                line(
                    "used_memory_vm_total_human",
                    &human_bytes(lua + vm_functions),
                );
                line("used_memory_functions", &fn_bytes);
                line("used_memory_scripts", &(scripts + fn_bytes));
                line(
                    "used_memory_scripts_human",
                    &human_bytes(scripts + fn_bytes),
                );
                line("maxmemory", &maxmemory);
                line("maxmemory_human", &human_bytes(maxmemory));
                line("maxmemory_policy", &cfg("maxmemory-policy"));
                line("allocator_frag_ratio", &f2(1.0));
                line("allocator_frag_bytes", &0);
                line("allocator_rss_ratio", &f2(1.0));
                line("allocator_rss_bytes", &0);
                line("rss_overhead_ratio", &f2(1.0));
                line("rss_overhead_bytes", &0);
                line("mem_fragmentation_ratio", &f2(m.total_frag()));
                line("mem_fragmentation_bytes", &m.total_frag_bytes());
                line("mem_not_counted_for_evict", &0);
                line("mem_replication_backlog", &0);
                line("mem_total_replication_buffers", &0);
                line("mem_clients_slaves", &0);
                line("mem_clients_normal", &0);
                line("mem_cluster_links", &0);
                line("mem_aof_buffer", &0);
                let alloc = if h.used_memory.is_some() {
                    "mimalloc"
                } else {
                    "libc"
                };
                line("mem_allocator", &alloc);
                let rehashing: usize = if agg.rehashing > 0 {
                    agg.tables.iter().map(|t| t.0).sum()
                } else {
                    0
                };
                line("mem_overhead_db_hashtable_rehashing", &rehashing);
                line("active_defrag_running", &0);
                line("lazyfree_pending_objects", &crate::lazyfree::pending());
                line("lazyfreed_objects", &crate::lazyfree::freed());
            }
            "persistence" => match &srv.persistence {
                Some(text) => s.push_str(text),
                None => {
                    line("# Persistence\r\nloading", &0);
                    for k in [
                        "async_loading",
                        "current_cow_peak",
                        "current_cow_size",
                        "current_cow_size_age",
                    ] {
                        line(k, &0);
                    }
                    line("current_fork_perc", &f2(0.0));
                    line("current_save_keys_processed", &0);
                    line("current_save_keys_total", &0);
                    line("rdb_changes_since_last_save", &0);
                    line("rdb_bgsave_in_progress", &0);
                    line("rdb_last_save_time", &(h.started_ms / 1000));
                    line("rdb_last_bgsave_status", &"ok");
                    line("rdb_last_bgsave_time_sec", &-1);
                    line("rdb_current_bgsave_time_sec", &-1);
                    line("rdb_saves", &0);
                    line("rdb_last_cow_size", &0);
                    line("rdb_last_load_keys_expired", &0);
                    line("rdb_last_load_keys_loaded", &0);
                    line("aof_enabled", &0);
                    line("aof_rewrite_in_progress", &0);
                    line("aof_rewrite_scheduled", &0);
                    line("aof_last_rewrite_time_sec", &-1);
                    line("aof_current_rewrite_time_sec", &-1);
                    line("aof_last_bgrewrite_status", &"ok");
                    line("aof_rewrites", &0);
                    line("aof_rewrites_consecutive_failures", &0);
                    line("aof_last_write_status", &"ok");
                    line("aof_last_cow_size", &0);
                    line("module_fork_in_progress", &0);
                    line("module_fork_last_cow_size", &0);
                }
            },
            "stats" => {
                let t = &agg.telemetry;
                line(
                    "# Stats\r\ntotal_connections_received",
                    &h.total_connections,
                );
                line("total_commands_processed", &agg.stats.commands);
                line("instantaneous_ops_per_sec", &srv.ops_per_sec);
                line("total_net_input_bytes", &srv.net_input_bytes);
                line("total_net_output_bytes", &srv.net_output_bytes);
                line("total_net_repl_input_bytes", &0);
                line("total_net_repl_output_bytes", &0);
                line("instantaneous_input_kbps", &f2(srv.input_kbps));
                line("instantaneous_output_kbps", &f2(srv.output_kbps));
                line("instantaneous_input_repl_kbps", &f2(0.0));
                line("instantaneous_output_repl_kbps", &f2(0.0));
                line("rejected_connections", &srv.rejected_connections);
                line("sync_full", &0);
                line("sync_partial_ok", &0);
                line("sync_partial_err", &0);
                line("expired_subkeys", &0);
                line("expired_keys", &agg.expired);
                line("expired_stale_perc", &f2(0.0));
                line("expired_time_cap_reached_count", &0);
                line("expire_cycle_cpu_milliseconds", &0);
                line("evicted_keys", &agg.evicted);
                line("evicted_clients", &0);
                line("evicted_scripts", &0);
                line("total_eviction_exceeded_time", &0);
                line("current_eviction_exceeded_time", &0);
                line("keyspace_hits", &agg.stats.keyspace_hits);
                line("keyspace_misses", &agg.stats.keyspace_misses);
                line("pubsub_channels", &srv.pubsub_channels);
                line("pubsub_patterns", &srv.pubsub_patterns);
                line("pubsubshard_channels", &srv.pubsubshard_channels);
                line("latest_fork_usec", &0);
                line("total_forks", &0);
                line("migrate_cached_sockets", &0);
                line("slave_expires_tracked_keys", &0);
                for k in [
                    "active_defrag_hits",
                    "active_defrag_misses",
                    "active_defrag_key_hits",
                    "active_defrag_key_misses",
                    "total_active_defrag_time",
                    "current_active_defrag_time",
                    "tracking_total_keys",
                    "tracking_total_items",
                    "tracking_total_prefixes",
                    "unexpected_error_replies",
                ] {
                    line(k, &0);
                }
                line("total_error_replies", &t.total_errors);
                line("dump_payload_sanitizations", &0);
                line("total_reads_processed", &srv.reads_processed);
                line("total_writes_processed", &srv.writes_processed);
                line("io_threaded_reads_processed", &0);
                line("io_threaded_writes_processed", &0);
                line(
                    "client_query_buffer_limit_disconnections",
                    &srv.query_limit_disconnections,
                );
                line(
                    "client_output_buffer_limit_disconnections",
                    &srv.output_limit_disconnections,
                );
                line("reply_buffer_shrinks", &0);
                line("reply_buffer_expands", &0);
                line("eventloop_cycles", &srv.reads_processed);
                line("eventloop_duration_sum", &0);
                line(
                    "eventloop_duration_cmd_sum",
                    &(t.cmds.values().map(|c| c.nanos).sum::<u64>() / 1000),
                );
                line("instantaneous_eventloop_cycles_per_sec", &0);
                line("instantaneous_eventloop_duration_usec", &0);
                let denied = self.acl.denied_counts();
                line("acl_access_denied_auth", &denied[0]);
                line("acl_access_denied_cmd", &denied[1]);
                line("acl_access_denied_key", &denied[2]);
                line("acl_access_denied_channel", &denied[3]);
                line("moved_connections", &h.moved_connections);
            }
            "replication" if srv.replication.is_some() => {
                s.push_str(srv.replication.as_deref().unwrap_or_default());
            }
            "replication" => {
                line("# Replication\r\nrole", &"master");
                line("connected_slaves", &0);
                line("master_failover_state", &"no-failover");
                line("master_replid", &srv_replid(srv));
                line("master_replid2", &"0".repeat(40));
                line("master_repl_offset", &0);
                line("second_repl_offset", &-1);
                line("repl_backlog_active", &0);
                line("repl_backlog_size", &1_048_576);
                line("repl_backlog_first_byte_offset", &0);
                line("repl_backlog_histlen", &0);
            }
            "cpu" => {
                let c = srv.cpu;
                line("# CPU\r\nused_cpu_sys", &secs(c[0]));
                line("used_cpu_user", &secs(c[1]));
                line("used_cpu_sys_children", &secs(c[2]));
                line("used_cpu_user_children", &secs(c[3]));
                line("used_cpu_sys_main_thread", &secs(c[4]));
                line("used_cpu_user_main_thread", &secs(c[5]));
            }
            "modules" => s.push_str("# Modules\r\n"),
            "commandstats" => {
                s.push_str("# Commandstats\r\n");
                for c in agg.telemetry.cmds.values() {
                    let usec = c.nanos / 1000;
                    let per = if c.calls == 0 {
                        0.0
                    } else {
                        c.nanos as f64 / 1000.0 / c.calls as f64
                    };
                    let _ = write!(
                        s,
                        "cmdstat_{}:calls={},usec={usec},usec_per_call={per:.2},rejected_calls={},failed_calls={}\r\n",
                        safe(c.name),
                        c.calls,
                        c.rejected,
                        c.failed
                    );
                }
            }
            "errorstats" => {
                s.push_str("# Errorstats\r\n");
                for (code, n) in &agg.telemetry.errors {
                    let _ = write!(
                        s,
                        "errorstat_{}:count={n}\r\n",
                        safe(&String::from_utf8_lossy(code))
                    );
                }
            }
            "latencystats" => {
                s.push_str("# Latencystats\r\n");
                if self.config.telemetry.tracking {
                    for c in agg.telemetry.cmds.values() {
                        if let Some(hist) = c.hist.as_ref().filter(|h| !h.is_empty()) {
                            let _ = write!(
                                s,
                                "latency_percentiles_usec_{}:{}\r\n",
                                safe(c.name),
                                crate::telemetry::percentiles_line(hist, &self.config.percentiles)
                            );
                        }
                    }
                }
            }
            "cluster" => s.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
            "keyspace" => {
                s.push_str("# Keyspace\r\n");
                for (i, &(keys, expires)) in agg.keyspace.iter().enumerate() {
                    if keys > 0 || expires > 0 {
                        let sub = agg.subexpiry.get(i).copied().unwrap_or(0);
                        let _ = write!(
                            s,
                            "db{i}:keys={keys},expires={expires},avg_ttl=0,subexpiry={sub}\r\n"
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

/// The replication id a master without replicas shows: the run id's digits.
fn srv_replid(srv: &ServerInfo) -> String {
    if srv.run_id.len() == 40 {
        srv.run_id.chars().rev().collect()
    } else {
        "0".repeat(40)
    }
}

/// A build id: this crate's version, hashed into 16 hex digits.
fn build_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(7).build_hasher();
    h.write(env!("CARGO_PKG_VERSION").as_bytes());
    format!("{:016x}", h.finish())
}

/// Physical memory of the machine, from `sysconf` facts exposed in /proc (0 if unknown).
fn system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_in_redis_order() {
        assert_eq!(wanted(&[]), DEFAULT);
        assert_eq!(wanted(&[b"KEYSPACE", b"server"]), ["server", "keyspace"]);
        assert_eq!(wanted(&[b"all"]).len(), ORDER.len());
        assert_eq!(wanted(&[b"nosuch"]), Vec::<&str>::new());
        assert!(!wanted(&[b"default"]).contains(&"commandstats"));
        assert!(wanted(&[b"default", b"commandstats"]).contains(&"commandstats"));
    }

    #[test]
    fn commandstats_errorstats_and_latencystats() {
        let mut db = Db::new();
        db.execute(&[b"SET", b"k", b"v"]);
        db.execute(&[b"GET", b"k"]);
        db.execute(&[b"LPUSH", b"k", b"x"]);
        db.execute(&[b"GET"]);
        db.execute(&[b"NOSUCH"]);
        db.execute(&[b"CONFIG", b"GET", b"hz"]);
        let text = db.info(&[b"commandstats", b"errorstats", b"latencystats"]);
        assert!(text.contains("cmdstat_set:calls=1,"), "{text}");
        assert!(
            text.contains("rejected_calls=1,failed_calls=0\r\n"),
            "{text}"
        );
        assert!(text.contains("cmdstat_lpush:calls=1,"), "{text}");
        assert!(text.contains("cmdstat_config|get:calls=1,"), "{text}");
        assert!(text.contains("errorstat_ERR:count=2\r\n"), "{text}");
        assert!(text.contains("errorstat_WRONGTYPE:count=1\r\n"), "{text}");
        assert!(text.contains("latency_percentiles_usec_get:p50="), "{text}");
        assert!(text.contains(",p99.9="), "{text}");
        let stats = db.info(&[b"stats"]);
        assert!(stats.contains("total_error_replies:3\r\n"), "{stats}");
        let mut fields = 0;
        for l in db.info(&[b"everything"]).split("\r\n") {
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            assert!(l.split_once(':').is_some(), "{l}");
            fields += 1;
        }
        assert!(fields > 150, "{fields}");
    }
}
