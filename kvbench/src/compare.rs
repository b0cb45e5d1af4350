//! `kvbench compare`: our server and redis-server (and others) side by side.
//!
//! Starts every server pinned to `--server-cpus`, waits until each answers
//! PING, then per workload: flushes and prefills each server once, and runs
//! the workload on each server in turn for `--rounds` rounds, rotating which
//! server goes first. Reported per server: median ops/s and server CPU µs per
//! request over the rounds, latency percentiles over all rounds, RSS and INFO
//! used_memory after the load; and the ratios of the first server (ours) to
//! each other one, per round, as median with min and max.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use crate::cli::{Load, Preset, Spec};
use crate::control::{redis_server_cmd, which, Server};
use crate::run::{config, measure, prefill, WorkloadResult};
use crate::stats::{median, HEADER};
use crate::workload::KeyDist;

/// Options of `kvbench compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// A published run to reproduce; explicit options override it.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Rounds per workload; servers alternate within each.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// CPUs the servers are pinned to (kvserver gets one shard per CPU).
    #[arg(long, default_value = "0")]
    pub server_cpus: String,
    /// Our server's binary [default: kvserver next to this program].
    #[arg(long)]
    pub ours: Option<PathBuf>,
    /// redis-server's binary [default: redis-server on PATH].
    #[arg(long)]
    pub redis_server: Option<PathBuf>,
    /// Leave redis-server out.
    #[arg(long)]
    pub no_redis: bool,
    /// Another server: NAME=COMMAND with {PORT}, e.g. valkey='valkey-server --port {PORT}'.
    #[arg(long = "server")]
    pub servers: Vec<String>,
    /// Directory for the JSON, the SVG chart and the server logs.
    #[arg(long, default_value = "target/kvbench")]
    pub out: PathBuf,
    /// Load options.
    #[command(flatten)]
    pub load: Load,
}

/// One server's figures for one workload.
#[derive(Debug, Serialize)]
struct ServerRow {
    server: String,
    supported: bool,
    ops_per_sec_rounds: Vec<f64>,
    cpu_us_rounds: Vec<f64>,
    ops_per_sec: f64,
    cpu_us_per_req: f64,
    rounds: Vec<WorkloadResult>,
    p50_ms: f64,
    p95_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
    errors: u64,
    rss_bytes: Option<u64>,
    used_memory: Option<u64>,
}

/// Ratio of ours to another server, over rounds.
#[derive(Debug, Serialize)]
struct Ratio {
    other: String,
    throughput: [f64; 3],
    cpu_per_req: [f64; 3],
}

/// `kvbench compare`: returns the exit code.
pub fn main(args: CompareArgs) -> Result<i32, String> {
    let preset = args.preset.map(Preset::load).unwrap_or_default();
    let mut spec = args.load.resolve(&preset)?;
    if spec.load_cpus.is_empty() {
        spec.load_cpus = crate::sys::parse_cpus("1")?;
    }
    let server_cpus = crate::sys::parse_cpus(&args.server_cpus)?;
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let servers = start_servers(&args, server_cpus.len())?;
    let label = args.preset.map_or("custom".to_string(), |p| {
        format!("{p:?}").to_ascii_lowercase()
    });
    if args.preset == Some(Preset::Memory) {
        return memory(&spec, &servers, &args.out, &label);
    }
    let rounds = args.rounds.max(1);
    println!(
        "{label}: {} clients, {} threads, pipeline {}, {} B values, {} keys ({:?}), {} rounds, servers on CPUs {}, load on CPUs {:?}",
        spec.clients, spec.threads, spec.pipeline, spec.data_size, spec.keyspace, spec.dist,
        rounds, args.server_cpus, spec.load_cpus
    );
    let mut report = Vec::new();
    let mut errors = 0;
    for (wl, test) in spec.workloads.iter().zip(&spec.tests) {
        let mut rows: Vec<ServerRow> = Vec::new();
        for s in &servers {
            let mut ctl = s.ctl().map_err(|e| format!("{}: {e}", s.name))?;
            let supported = wl.templates.iter().all(|t| {
                let args = crate::control::args_of(&t.bytes);
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                ctl.supports(&refs).unwrap_or(false)
            });
            if supported {
                ctl.ok(&[b"FLUSHALL"])
                    .map_err(|e| format!("{}: FLUSHALL: {e}", s.name))?;
                prefill(&spec, s.addr, None, test).map_err(|e| format!("{}: {e}", s.name))?;
            }
            rows.push(ServerRow::new(&s.name, supported));
        }
        for round in 0..rounds {
            for k in 0..servers.len() {
                let i = (k + round) % servers.len();
                if !rows[i].supported {
                    continue;
                }
                let s = &servers[i];
                let cfg = config(&spec, s.addr, None);
                let r = measure(&cfg, wl, Some(s.pid)).map_err(|e| format!("{}: {e}", s.name))?;
                rows[i].ops_per_sec_rounds.push(r.all.ops_per_sec);
                rows[i]
                    .cpu_us_rounds
                    .push(r.server_cpu_us_per_req.unwrap_or(0.0));
                rows[i].rounds.push(r);
            }
        }
        for (row, s) in rows.iter_mut().zip(&servers) {
            row.finish(s);
            errors += row.errors;
        }
        let ratios = ratios(&rows);
        print_table(&wl.name, &rows, &ratios);
        report.push(serde_json::json!({ "workload": wl.name, "servers": rows, "ratios": ratios }));
    }
    let json = args.out.join(format!("compare-{label}.json"));
    let doc = serde_json::json!({ "preset": label, "spec": spec_json(&spec, rounds, &args.server_cpus), "workloads": report });
    crate::write_json(&json, &doc)?;
    let svg = args.out.join(format!("compare-{label}.svg"));
    crate::chart::write(&svg, &label, &doc).map_err(|e| format!("{}: {e}", svg.display()))?;
    println!("wrote {} and {}", json.display(), svg.display());
    if errors > 0 {
        eprintln!("kvbench: {errors} error replies");
        return Ok(1);
    }
    Ok(0)
}

impl ServerRow {
    fn new(name: &str, supported: bool) -> ServerRow {
        ServerRow {
            server: name.to_string(),
            supported,
            ops_per_sec_rounds: Vec::new(),
            cpu_us_rounds: Vec::new(),
            ops_per_sec: 0.0,
            cpu_us_per_req: 0.0,
            rounds: Vec::new(),
            p50_ms: 0.0,
            p95_ms: 0.0,
            p99_ms: 0.0,
            p999_ms: 0.0,
            max_ms: 0.0,
            errors: 0,
            rss_bytes: None,
            used_memory: None,
        }
    }

    /// Medians over rounds (throughput, CPU, each percentile); memory now.
    fn finish(&mut self, s: &Server) {
        self.ops_per_sec = median(&self.ops_per_sec_rounds);
        self.cpu_us_per_req = median(&self.cpu_us_rounds);
        self.errors = self.rounds.iter().map(|r| r.all.errors).sum();
        let p =
            |f: fn(&WorkloadResult) -> f64| median(&self.rounds.iter().map(f).collect::<Vec<_>>());
        self.p50_ms = p(|r| r.all.p50_ms);
        self.p95_ms = p(|r| r.all.p95_ms);
        self.p99_ms = p(|r| r.all.p99_ms);
        self.p999_ms = p(|r| r.all.p999_ms);
        self.max_ms = self.rounds.iter().map(|r| r.all.max_ms).fold(0.0, f64::max);
        self.rss_bytes = s.rss();
        self.used_memory = s.ctl().ok().and_then(|mut c| c.used_memory());
    }
}

/// Ours (the first row) over each other server, per round: [median, min, max].
fn ratios(rows: &[ServerRow]) -> Vec<Ratio> {
    let Some((ours, others)) = rows.split_first() else {
        return Vec::new();
    };
    let stat = |v: Vec<f64>| {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        [median(&v), if v.is_empty() { 0.0 } else { min }, max]
    };
    others
        .iter()
        .filter(|o| o.supported && ours.supported)
        .map(|o| {
            let per = |a: &[f64], b: &[f64]| -> Vec<f64> {
                a.iter()
                    .zip(b)
                    .filter(|(_, y)| **y > 0.0)
                    .map(|(x, y)| x / y)
                    .collect()
            };
            Ratio {
                other: o.server.clone(),
                throughput: stat(per(&ours.ops_per_sec_rounds, &o.ops_per_sec_rounds)),
                cpu_per_req: stat(per(&ours.cpu_us_rounds, &o.cpu_us_rounds)),
            }
        })
        .collect()
}

fn print_table(name: &str, rows: &[ServerRow], ratios: &[Ratio]) {
    println!("\n== {name}");
    println!("  {:<10}{HEADER}  cpu µs/req   RSS MiB  used MiB", "server");
    for r in rows {
        if !r.supported {
            println!("  {:<10} unsupported (unknown command): skipped", r.server);
            continue;
        }
        let mib =
            |b: Option<u64>| b.map_or("-".to_string(), |b| format!("{:.1}", b as f64 / 1048576.0));
        println!(
            "  {:<10}{:>13.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8} {:>11.3} {:>9} {:>9}",
            r.server,
            r.ops_per_sec,
            r.p50_ms,
            r.p95_ms,
            r.p99_ms,
            r.p999_ms,
            r.max_ms,
            r.errors,
            r.cpu_us_per_req,
            mib(r.rss_bytes),
            mib(r.used_memory)
        );
        // A mixed workload: each command's median throughput and p99 over the rounds.
        let kinds = r.rounds.first().map_or(0, |rd| rd.commands.len());
        for k in (0..kinds).filter(|_| kinds > 1) {
            let per = |f: fn(&crate::stats::Summary) -> f64| {
                median(
                    &r.rounds
                        .iter()
                        .filter_map(|rd| rd.commands.get(k))
                        .map(f)
                        .collect::<Vec<_>>(),
                )
            };
            println!(
                "    {:<8}{:>13.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
                r.rounds[0].commands[k].name,
                per(|c| c.ops_per_sec),
                per(|c| c.p50_ms),
                per(|c| c.p95_ms),
                per(|c| c.p99_ms),
                per(|c| c.p999_ms)
            );
        }
        for rd in &r.rounds {
            if let Some(e) = &rd.all.first_error {
                println!("  {:<10} {} errors, first: {e}", "", rd.all.errors);
                break;
            }
        }
    }
    for q in ratios {
        println!(
            "  {}/{}: throughput {:.3} (min {:.3}, max {:.3}); CPU per request {:.3} (min {:.3}, max {:.3})",
            rows[0].server, q.other, q.throughput[0], q.throughput[1], q.throughput[2],
            q.cpu_per_req[0], q.cpu_per_req[1], q.cpu_per_req[2]
        );
    }
}

fn spec_json(spec: &Spec, rounds: usize, server_cpus: &str) -> serde_json::Value {
    serde_json::json!({
        "clients": spec.clients, "threads": spec.threads, "pipeline": spec.pipeline,
        "requests": spec.requests, "test_time": spec.test_time, "data_size": spec.data_size,
        "keyspace": spec.keyspace, "key_dist": format!("{:?}", spec.dist), "rounds": rounds,
        "server_cpus": server_cpus, "load_cpus": spec.load_cpus, "rate": spec.rate,
    })
}

/// Starts ours, redis-server and every `--server`, in that order.
fn start_servers(args: &CompareArgs, ncpus: usize) -> Result<Vec<Server>, String> {
    let ours = match &args.ours {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("kvserver"),
    };
    if !ours.is_file() {
        return Err(format!(
            "{} not found: build it first (cargo build --release -p kvserver) or give --ours",
            ours.display()
        ));
    }
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut specs = vec![(
        "kvserver".to_string(),
        s(&[
            &ours.to_string_lossy(),
            "--port",
            "{PORT}",
            "--threads",
            &ncpus.to_string(),
            // No persistence, as the reference runs: disk work never enters a measurement.
            "--save",
            "",
            "--dir",
            "/tmp",
        ]),
    )];
    if !args.no_redis {
        let redis = match &args.redis_server {
            Some(p) => p.clone(),
            None => which("redis-server")
                .ok_or("redis-server not found on PATH (apt-get install redis-server, or --redis-server PATH, or --no-redis)")?,
        };
        specs.push(("redis".to_string(), redis_server_cmd(&redis)));
    }
    for extra in &args.servers {
        let (name, cmd) = extra
            .split_once('=')
            .ok_or_else(|| format!("--server wants NAME=COMMAND, got '{extra}'"))?;
        specs.push((
            name.to_string(),
            cmd.split_whitespace().map(String::from).collect(),
        ));
    }
    let mut started = Vec::new();
    for (name, cmd) in specs {
        started.push(Server::start(&name, &cmd, &args.server_cpus, &args.out)?);
    }
    Ok(started)
}

/// The `memory` preset: bytes per key after SETting `requests` keys.
fn memory(spec: &Spec, servers: &[Server], out: &Path, label: &str) -> Result<i32, String> {
    let n = spec.requests.unwrap_or(1_000_000);
    let wl = &spec.workloads[0];
    let mut rows = Vec::new();
    println!(
        "memory: {n} SETs of {} B values (keys key:000000000000 ...)",
        spec.data_size
    );
    println!(
        "  {:<10} {:>14} {:>14} {:>14} {:>14}",
        "server", "used B/key", "RSS B/key", "used MiB", "RSS MiB"
    );
    let mut errors = 0;
    for s in servers {
        let mut ctl = s.ctl().map_err(|e| format!("{}: {e}", s.name))?;
        ctl.ok(&[b"FLUSHALL"])
            .map_err(|e| format!("{}: {e}", s.name))?;
        let used0 = ctl.used_memory().unwrap_or(0);
        let rss0 = s.rss().unwrap_or(0);
        let mut cfg = config(spec, s.addr, None);
        cfg.requests = Some(n);
        cfg.keyspace = n;
        cfg.dist = KeyDist::Sequential;
        let r = measure(&cfg, wl, Some(s.pid)).map_err(|e| format!("{}: {e}", s.name))?;
        errors += r.all.errors;
        let used1 = ctl.used_memory().unwrap_or(0);
        let rss1 = s.rss().unwrap_or(0);
        let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / n as f64;
        println!(
            "  {:<10} {:>14.1} {:>14.1} {:>14.1} {:>14.1}",
            s.name,
            per(used0, used1),
            per(rss0, rss1),
            used1 as f64 / 1048576.0,
            rss1 as f64 / 1048576.0
        );
        rows.push(serde_json::json!({
            "server": s.name, "keys": n, "used_memory_before": used0, "used_memory_after": used1,
            "rss_before": rss0, "rss_after": rss1, "used_bytes_per_key": per(used0, used1),
            "rss_bytes_per_key": per(rss0, rss1), "errors": r.all.errors,
        }));
    }
    let json = out.join(format!("compare-{label}.json"));
    crate::write_json(
        &json,
        &serde_json::json!({ "preset": label, "data_size": spec.data_size, "servers": rows }),
    )?;
    println!("wrote {}", json.display());
    Ok(i32::from(errors > 0))
}
