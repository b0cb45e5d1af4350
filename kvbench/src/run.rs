//! `kvbench run`: load one server and report each workload.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use crate::cli::{Load, Spec};
use crate::control::Ctl;
use crate::engine::{self, Config, Outcome};
use crate::stats::{Summary, HEADER};
use crate::workload::{KeyDist, Workload};
use crate::{progress, sys};

/// Options of `kvbench run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port.
    #[arg(short = 'p', long, default_value_t = 6379)]
    pub port: u16,
    /// Password (AUTH) for every connection.
    #[arg(short = 'a', long)]
    pub auth: Option<String>,
    /// Write every result to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Load options.
    #[command(flatten)]
    pub load: Load,
}

/// The result of one workload against one server.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadResult {
    /// Workload name (`set`, `set:get` ...).
    pub workload: String,
    /// One summary per command, then `all` when there are several.
    pub commands: Vec<Summary>,
    /// All commands together.
    pub all: Summary,
    /// Client CPU µs per request (client threads' user + system time).
    pub client_cpu_us_per_req: f64,
    /// Server CPU µs per request (utime + stime from /proc), when the server is local.
    pub server_cpu_us_per_req: Option<f64>,
    /// Open loop: how late the client sent its batches after their intended times, µs
    /// (p50, p99, max). The latencies include it.
    pub send_lag_us: Option<[f64; 3]>,
}

impl WorkloadResult {
    /// Summaries of `out` for workload `wl`.
    pub fn new(wl: &Workload, out: &Outcome, server_cpu_secs: Option<f64>) -> WorkloadResult {
        let n = out.requests().max(1) as f64;
        WorkloadResult {
            workload: wl.name.clone(),
            commands: wl
                .templates
                .iter()
                .zip(&out.kinds)
                .map(|(t, c)| c.summary(&t.name, out.secs))
                .collect(),
            all: out.total().summary("all", out.secs),
            client_cpu_us_per_req: out.client_cpu_secs * 1e6 / n,
            server_cpu_us_per_req: server_cpu_secs.map(|s| s * 1e6 / n),
            send_lag_us: (!out.send_lag.hist.is_empty()).then(|| {
                let h = &out.send_lag.hist;
                let us = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
                [us(0.5), us(0.99), h.max() as f64 / 1e3]
            }),
        }
    }

    /// Prints the table of this result.
    pub fn print(&self) {
        println!("  {:<9}{HEADER}", "");
        if self.commands.len() > 1 {
            for c in &self.commands {
                println!("  {:<9}{}", c.name, c.row());
            }
        }
        println!("  {:<9}{}", self.all.name, self.all.row());
        let server = self
            .server_cpu_us_per_req
            .map_or("n/a (not local)".to_string(), |v| format!("{v:.3}"));
        println!(
            "  CPU µs/request: server {server}, client {:.3}",
            self.client_cpu_us_per_req
        );
        if let Some([p50, p99, max]) = self.send_lag_us {
            println!(
                "  client send lag µs (included above): p50 {p50:.1}, p99 {p99:.1}, max {max:.1}"
            );
        }
        for c in &self.commands {
            if let Some(e) = &c.first_error {
                println!("  {} errors in {}, first: {e}", c.errors, c.name);
            }
        }
    }
}

/// The engine configuration of `spec` against `addr`.
pub fn config(spec: &Spec, addr: SocketAddr, auth: Option<String>) -> Config {
    Config {
        addr,
        clients: spec.clients,
        threads: spec.threads,
        pipeline: spec.pipeline,
        requests: spec.requests,
        duration: Duration::from_secs_f64(spec.test_time),
        warmup: Duration::from_secs_f64(spec.warmup),
        rate: spec.rate,
        keyspace: spec.keyspace,
        dist: spec.dist,
        seed: spec.seed,
        auth,
        cpus: spec.load_cpus.clone(),
    }
}

/// Runs `wl` with progress shown; measures the CPU of the server process `pid` if given.
pub fn measure(cfg: &Config, wl: &Workload, pid: Option<u32>) -> std::io::Result<WorkloadResult> {
    // The progress display runs on this thread: on the load's CPUs too, not beside the server
    // (seen unpinned: it preempted a server pinned to CPU 0 a few dozen times a run).
    if let Some(&cpu) = cfg.cpus.first() {
        sys::pin_thread(cpu);
    }
    let cpu0 = pid.and_then(sys::proc_cpu_secs);
    let secs = cfg.duration.as_secs_f64() + cfg.warmup.as_secs_f64();
    let out = progress::watch(&wl.name, cfg.requests, secs, |done| {
        engine::run(cfg, wl, done)
    })?;
    let cpu1 = pid.and_then(sys::proc_cpu_secs);
    let server = cpu0.zip(cpu1).map(|(a, b)| b - a);
    Ok(WorkloadResult::new(wl, &out, server))
}

/// Fills keys `0..keyspace` with the test that `test` reads, when it reads any.
pub fn prefill(
    spec: &Spec,
    addr: SocketAddr,
    auth: Option<String>,
    test: &str,
) -> std::io::Result<()> {
    let producer = if test == "set:get" {
        Some("set")
    } else {
        crate::workload::prefill_for(test)
    };
    let Some(p) = producer else { return Ok(()) };
    let wl = Workload::single(
        crate::workload::builtin(p, spec.data_size).map_err(std::io::Error::other)?,
    );
    let mut cfg = config(spec, addr, auth);
    cfg.clients = cfg.clients.min(16);
    cfg.threads = cfg.threads.min(cfg.clients);
    cfg.pipeline = 64;
    cfg.requests = Some(spec.keyspace);
    cfg.dist = KeyDist::Sequential;
    cfg.rate = None;
    cfg.warmup = Duration::ZERO;
    let out = progress::watch(&format!("prefill {p}"), cfg.requests, 0.0, |done| {
        engine::run(&cfg, &wl, done)
    })?;
    if out.errors() > 0 {
        let first = out.total().first_error.unwrap_or_default();
        return Err(std::io::Error::other(format!(
            "prefill with {p} failed: {first}"
        )));
    }
    Ok(())
}

/// `kvbench run`: returns the process exit code.
pub fn main(args: RunArgs) -> Result<i32, String> {
    let spec = args.load.resolve(&Load::default())?;
    let addr = (args.host.as_str(), args.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}:{}: {e}", args.host, args.port))?
        .next()
        .ok_or_else(|| format!("{}: no address", args.host))?;
    let mut ctl = Ctl::connect(addr, args.auth.as_deref())
        .map_err(|e| format!("cannot reach {addr}: {e}"))?;
    // A remote server's process id means nothing in this machine's /proc.
    let pid = if addr.ip().is_loopback() {
        ctl.local_pid()
    } else {
        None
    };
    let mut results = Vec::new();
    let mut errors = 0;
    for wl in &spec.workloads {
        let cfg = config(&spec, addr, args.auth.clone());
        let r = measure(&cfg, wl, pid).map_err(|e| format!("{}: {e}", wl.name))?;
        println!(
            "{}: {} requests in {:.2} s, {} clients, {} threads, pipeline {}, {} B values, {} keys{}",
            wl.name,
            r.all.requests,
            r.all.secs,
            spec.clients,
            spec.threads,
            spec.pipeline,
            spec.data_size,
            spec.keyspace,
            spec.rate.map_or(String::new(), |r| format!(", open loop at {r:.0}/s")),
        );
        r.print();
        errors += r.all.errors;
        results.push(r);
    }
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "server": addr.to_string(),
            "clients": spec.clients,
            "threads": spec.threads,
            "pipeline": spec.pipeline,
            "data_size": spec.data_size,
            "keyspace": spec.keyspace,
            "rate": spec.rate,
            "results": results,
        });
        crate::write_json(path, &doc)?;
    }
    if errors > 0 {
        eprintln!("kvbench: {errors} error replies");
        return Ok(1);
    }
    Ok(0)
}
