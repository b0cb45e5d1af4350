//! The Prometheus endpoint (`--metrics-port`, off by default): INFO's counters in Prometheus's
//! text exposition format, so a user needs no exporter. Shard 0's event loop serves it, one
//! HTTP/1.1 request per connection, with the INFO code the RESP command uses. Metric names
//! follow the common Redis exporter's (`redis_connected_clients`, `redis_commands_total{cmd}`,
//! `redis_db_keys{db}` ...), so existing dashboards find them.

use std::fmt::Write as _;
use std::rc::Rc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::shard::Shard;

/// The longest request head read.
const MAX_REQUEST: usize = 8 * 1024;

/// Binds the metrics port on the server's address.
pub fn bind(addr: &str, port: u16) -> std::io::Result<TcpListener> {
    let l = std::net::TcpListener::bind((addr, port))?;
    l.set_nonblocking(true)?;
    TcpListener::from_std(l)
}

/// Accepts scrapes until the server stops.
pub async fn serve(shard: Rc<Shard>, listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            crate::timer::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let shard = shard.clone();
        tokio::task::spawn_local(async move {
            let _ = crate::timer::timeout(Duration::from_secs(10), answer(&shard, stream)).await;
        });
    }
}

async fn answer(shard: &Shard, mut stream: TcpStream) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 || head.len() + n > MAX_REQUEST {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let (method, path) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let (status, body) = if method != b"GET" {
        ("405 Method Not Allowed", "only GET\n".to_string())
    } else if path == b"/metrics" || path == b"/" {
        let info = crate::admin::info_text(shard, &[b"everything"]).await;
        ("200 OK", render(&info))
    } else {
        ("404 Not Found", "try /metrics\n".to_string())
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

/// A label value as the exposition format writes it.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Metric samples grouped by family, in first-seen order, each family with its TYPE line.
#[derive(Default)]
struct Families {
    order: Vec<(String, &'static str)>,
    samples: std::collections::HashMap<String, Vec<String>>,
}

impl Families {
    fn add(&mut self, name: &str, kind: &'static str, labels: &str, value: f64) {
        if !self.samples.contains_key(name) {
            self.order.push((name.to_string(), kind));
        }
        let sample = if labels.is_empty() {
            format!("{name} {value}")
        } else {
            format!("{name}{{{labels}}} {value}")
        };
        self.samples
            .entry(name.to_string())
            .or_default()
            .push(sample);
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for (name, kind) in &self.order {
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for s in &self.samples[name] {
                out.push_str(s);
                out.push('\n');
            }
        }
        out
    }
}

/// INFO fields that count since start: exported as counters with the exporter's `_total`
/// names.
const COUNTERS: &[(&str, &str)] = &[
    (
        "total_connections_received",
        "redis_connections_received_total",
    ),
    ("total_commands_processed", "redis_commands_processed_total"),
    ("total_net_input_bytes", "redis_net_input_bytes_total"),
    ("total_net_output_bytes", "redis_net_output_bytes_total"),
    ("rejected_connections", "redis_rejected_connections_total"),
    ("expired_keys", "redis_expired_keys_total"),
    ("evicted_keys", "redis_evicted_keys_total"),
    ("keyspace_hits", "redis_keyspace_hits_total"),
    ("keyspace_misses", "redis_keyspace_misses_total"),
    ("total_error_replies", "redis_total_error_replies"),
    ("used_cpu_sys", "redis_cpu_sys_seconds_total"),
    ("used_cpu_user", "redis_cpu_user_seconds_total"),
    (
        "used_cpu_sys_children",
        "redis_cpu_sys_children_seconds_total",
    ),
    (
        "used_cpu_user_children",
        "redis_cpu_user_children_seconds_total",
    ),
];

/// Fields whose digits are no quantity.
const NOT_NUMBERS: &[&str] = &[
    "redis_git_sha1",
    "redis_git_dirty",
    "redis_build_id",
    "run_id",
];

/// Text fields that go into `redis_instance_info`'s labels.
const INFO_LABELS: &[&str] = &[
    "redis_version",
    "redis_mode",
    "os",
    "arch_bits",
    "run_id",
    "tcp_port",
    "process_id",
    "role",
    "maxmemory_policy",
    "mem_allocator",
    "kvstore_version",
];

/// INFO text -> Prometheus exposition text.
pub fn render(info: &str) -> String {
    let mut f = Families::default();
    f.add("redis_up", "gauge", "", 1.0);
    let mut labels: Vec<String> = Vec::new();
    for line in info.split("\r\n") {
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        if field.starts_with('#') {
            continue;
        }
        if INFO_LABELS.contains(&field) {
            labels.push(format!("{field}=\"{}\"", label(value)));
        }
        let pairs = || {
            value
                .split(',')
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k, v.parse::<f64>().ok()))
        };
        if let Some(cmd) = field.strip_prefix("cmdstat_") {
            let l = format!("cmd=\"{}\"", label(cmd));
            for (k, v) in pairs() {
                let Some(v) = v else { continue };
                match k {
                    "calls" => f.add("redis_commands_total", "counter", &l, v),
                    "usec" => f.add(
                        "redis_commands_duration_seconds_total",
                        "counter",
                        &l,
                        v / 1e6,
                    ),
                    "rejected_calls" => {
                        f.add("redis_commands_rejected_calls_total", "counter", &l, v)
                    }
                    "failed_calls" => f.add("redis_commands_failed_calls_total", "counter", &l, v),
                    _ => {}
                }
            }
        } else if let Some(err) = field.strip_prefix("errorstat_") {
            if let Some((_, Some(v))) = pairs().next() {
                f.add(
                    "redis_errors_total",
                    "counter",
                    &format!("err=\"{}\"", label(err)),
                    v,
                );
            }
        } else if let Some(cmd) = field.strip_prefix("latency_percentiles_usec_") {
            for (k, v) in pairs() {
                let (Some(v), Some(q)) = (v, k.strip_prefix('p')) else {
                    continue;
                };
                let l = format!("cmd=\"{}\",quantile=\"{q}\"", label(cmd));
                f.add("redis_latency_percentiles_usec", "gauge", &l, v);
            }
        } else if field.starts_with("db") && field[2..].bytes().all(|b| b.is_ascii_digit()) {
            let l = format!("db=\"{field}\"");
            for (k, v) in pairs() {
                let Some(v) = v else { continue };
                match k {
                    "keys" => f.add("redis_db_keys", "gauge", &l, v),
                    "expires" => f.add("redis_db_keys_expiring", "gauge", &l, v),
                    "avg_ttl" => f.add("redis_db_avg_ttl_seconds", "gauge", &l, v / 1000.0),
                    _ => {}
                }
            }
        } else if NOT_NUMBERS.contains(&field) {
            continue;
        } else if let Ok(v) = value.trim_end_matches('%').parse::<f64>() {
            match COUNTERS.iter().find(|(k, _)| *k == field) {
                Some((_, name)) => f.add(name, "counter", "", v),
                None if field
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
                {
                    f.add(&format!("redis_{field}"), "gauge", "", v)
                }
                None => {}
            }
        }
    }
    f.add("redis_instance_info", "gauge", &labels.join(","), 1.0);
    f.text()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_become_metrics() {
        let info = "# Server\r\nredis_version:7.4.0\r\nrun_id:abc\r\n\r\n# Clients\r\nconnected_clients:3\r\n\
                    used_memory_human:1.00M\r\nused_memory_peak_perc:50.00%\r\n\r\n# Stats\r\n\
                    total_commands_processed:42\r\n# Commandstats\r\n\
                    cmdstat_config|get:calls=2,usec=30,usec_per_call=15.00,rejected_calls=0,failed_calls=1\r\n\
                    errorstat_ERR:count=4\r\nlatency_percentiles_usec_get:p50=1.003,p99.9=2.007\r\n\
                    db0:keys=5,expires=1,avg_ttl=2000,subexpiry=0\r\n";
        let text = render(info);
        for want in [
            "# TYPE redis_up gauge\nredis_up 1\n",
            "redis_connected_clients 3\n",
            "redis_used_memory_peak_perc 50\n",
            "# TYPE redis_commands_processed_total counter\nredis_commands_processed_total 42\n",
            "redis_commands_total{cmd=\"config|get\"} 2\n",
            "redis_commands_duration_seconds_total{cmd=\"config|get\"} 0.00003\n",
            "redis_commands_failed_calls_total{cmd=\"config|get\"} 1\n",
            "redis_errors_total{err=\"ERR\"} 4\n",
            "redis_latency_percentiles_usec{cmd=\"get\",quantile=\"99.9\"} 2.007\n",
            "redis_db_keys{db=\"db0\"} 5\n",
            "redis_db_keys_expiring{db=\"db0\"} 1\n",
            "redis_db_avg_ttl_seconds{db=\"db0\"} 2\n",
            "redis_instance_info{redis_version=\"7.4.0\",run_id=\"abc\"} 1\n",
        ] {
            assert!(text.contains(want), "{want} missing in\n{text}");
        }
        assert!(!text.contains("human"));
        // Every sample line is `name{labels} value` or `name value`.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let v = l.rsplit(' ').next().unwrap();
            assert!(v.parse::<f64>().is_ok(), "{l}");
        }
    }
}
