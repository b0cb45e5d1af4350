//! `kvbench calibrate`: the same workload from kvbench and from redis-benchmark,
//! against one redis-server this command starts, to show that the two agree on
//! throughput and server CPU per request, and what each costs in client CPU.
//!
//! Both tools run pinned to `--load-cpus` with one client thread; the server
//! is pinned to `--server-cpus`. Client CPU of each tool's whole process over
//! the run: kvbench's `getrusage(RUSAGE_SELF)` around the run (this program
//! runs nothing else meanwhile), redis-benchmark's `getrusage(RUSAGE_CHILDREN)`
//! around it. Server CPU: `/proc/PID/stat`.
//!
//! Each round runs both tools back to back (alternating which goes first), so
//! the two runs of a round see the same machine; the ratios are taken per
//! round and their median is reported with the spread, beside the medians of
//! each tool's own figures. A client's busy fraction (its CPU over the wall
//! time of its run) shows whether it was the bottleneck: near 100% it was.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Args;

use crate::cli::Load;
use crate::control::{redis_server_cmd, which, Ctl, Server};
use crate::run::{config, measure, prefill};
use crate::stats::median;
use crate::sys;

/// Options of `kvbench calibrate`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// redis-server's binary [default: on PATH].
    #[arg(long)]
    pub redis_server: Option<PathBuf>,
    /// redis-benchmark's binary [default: on PATH].
    #[arg(long)]
    pub redis_benchmark: Option<PathBuf>,
    /// CPUs of the server.
    #[arg(long, default_value = "0")]
    pub server_cpus: String,
    /// Load kvbench's null server (answers without doing the command) instead of
    /// redis-server, so the load generators are the bottleneck.
    #[arg(long)]
    pub null_server: bool,
    /// Rounds (each tool once per round, alternating which goes first).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Directory for the JSON report and the server log.
    #[arg(long, default_value = "target/kvbench")]
    pub out: PathBuf,
    /// Load options [defaults here: -c 50 -P 16 -d 64 -n 1000000 -t ping,set,get].
    #[command(flatten)]
    pub load: Load,
}

/// One tool's figures for one test and round.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    ops: f64,
    client_us: f64,
    server_us: f64,
    /// Client CPU over the wall time of the run.
    busy: f64,
    /// Reads that found their key (INFO keyspace_hits over hits + misses), when any read.
    hits: Option<f64>,
}

/// `(keyspace_hits, keyspace_misses)` of INFO stats, for servers that keep them.
fn lookups(ctl: &mut Option<Ctl>) -> Option<(u64, u64)> {
    let info = ctl.as_mut()?.info("stats").ok()?;
    let get = |k: &str| info.get(k)?.parse::<u64>().ok();
    Some((get("keyspace_hits")?, get("keyspace_misses")?))
}

/// The hit fraction between two [`lookups`], when there were reads.
fn hit_ratio(a: Option<(u64, u64)>, b: Option<(u64, u64)>) -> Option<f64> {
    let ((h0, m0), (h1, m1)) = (a?, b?);
    let (h, m) = (h1.checked_sub(h0)?, m1.checked_sub(m0)?);
    (h + m > 0).then(|| h as f64 / (h + m) as f64)
}

/// `kvbench calibrate`: returns the exit code.
pub fn main(args: CalibrateArgs) -> Result<i32, String> {
    let defaults = Load {
        clients: Some(50),
        pipeline: Some(16),
        data_size: Some(64),
        requests: Some(1_000_000),
        tests: Some("ping,set,get".into()),
        load_cpus: Some("1".into()),
        ..Load::default()
    };
    let spec = args.load.resolve(&defaults)?;
    if spec.threads != 1
        || !spec
            .tests
            .iter()
            .all(|t| crate::workload::TESTS.contains(&t.as_str()))
        || spec.rate.is_some()
        || spec.requests.is_none()
    {
        return Err(
            "calibrate compares single tests with -n requests, one client thread, closed loop"
                .into(),
        );
    }
    let n = spec.requests.unwrap_or(1);
    let rb = match &args.redis_benchmark {
        Some(p) => p.clone(),
        None => which("redis-benchmark")
            .ok_or("redis-benchmark not found (apt-get install redis-tools)")?,
    };
    let redis = match &args.redis_server {
        Some(p) => p.clone(),
        None => {
            which("redis-server").ok_or("redis-server not found (apt-get install redis-server)")?
        }
    };
    std::fs::create_dir_all(&args.out).map_err(|e| e.to_string())?;
    let cmd = redis_server_cmd(&redis);
    let (name, cmd) = if args.null_server {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let null = [&*exe.to_string_lossy(), "null-server", "--port", "{PORT}"];
        ("null-server", null.iter().map(|s| s.to_string()).collect())
    } else {
        ("redis-calibrate", cmd)
    };
    let server = Server::start(name, &cmd, &args.server_cpus, &args.out)?;
    // A control connection for INFO stats (hit ratio of each run); the null server keeps none.
    let mut ctl = if args.null_server {
        None
    } else {
        Ctl::connect(server.addr, None).ok()
    };
    let load_cpus = spec
        .load_cpus
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    println!(
        "calibrate: {name} on CPUs {}, load on CPUs {load_cpus}: -c {} -P {} -d {} -n {n} -r {}",
        args.server_cpus, spec.clients, spec.pipeline, spec.data_size, spec.keyspace
    );
    println!(
        "  {:<10} {:<22} {:>12} {:>14} {:>14} {:>12}",
        "test", "tool", "ops/s", "client µs/req", "server µs/req", "client busy"
    );
    let mut report = Vec::new();
    let mut errors = 0;
    for (wl, test) in spec.workloads.iter().zip(&spec.tests) {
        if !args.null_server {
            prefill(&spec, server.addr, None, test).map_err(|e| e.to_string())?;
        }
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for round in 0..args.rounds.max(1) {
            for tool in 0..2 {
                let l0 = lookups(&mut ctl);
                if (tool + round) % 2 == 0 {
                    let cfg = config(&spec, server.addr, None);
                    // The whole process, as for redis-benchmark: client threads, progress, set-up.
                    let t0 = Instant::now();
                    let c0 = sys::process_cpu_secs();
                    let r = measure(&cfg, wl, Some(server.pid)).map_err(|e| e.to_string())?;
                    let client = sys::process_cpu_secs() - c0;
                    let wall = t0.elapsed().as_secs_f64();
                    errors += r.all.errors;
                    ours.push(Sample {
                        ops: r.all.ops_per_sec,
                        client_us: client * 1e6 / r.all.requests.max(1) as f64,
                        server_us: r.server_cpu_us_per_req.unwrap_or(0.0),
                        busy: client / wall.max(1e-9),
                        hits: hit_ratio(l0, lookups(&mut ctl)),
                    });
                    print_sample(test, round, "kvbench", &ours[ours.len() - 1]);
                } else {
                    let mut s = redis_benchmark(&rb, &spec, &load_cpus, test, &server, n)?;
                    s.hits = hit_ratio(l0, lookups(&mut ctl));
                    print_sample(test, round, "redis-benchmark", &s);
                    theirs.push(s);
                }
            }
        }
        let med =
            |v: &[Sample], f: fn(&Sample) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
        let row = |tool: &str, v: &[Sample]| {
            let (o, c, s, b) = (
                med(v, |x| x.ops),
                med(v, |x| x.client_us),
                med(v, |x| x.server_us),
                med(v, |x| x.busy),
            );
            println!(
                "  {test:<10} {:<22} {o:>12.0} {c:>14.3} {s:>14.3} {:>11.0}%",
                format!("{tool} (med)"),
                b * 100.0
            );
            (o, c, s, b)
        };
        let a = row("kvbench", &ours);
        let b = row("redis-benchmark", &theirs);
        // Ratios of the two runs of each round, then their median and spread.
        let paired = |f: fn(&Sample) -> f64| {
            let r: Vec<f64> = ours
                .iter()
                .zip(&theirs)
                .map(|(x, y)| f(x) / f(y).max(1e-12))
                .collect();
            let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (median(&r), lo, hi)
        };
        let (ops_r, cpu_r, srv_r) = (
            paired(|x| x.ops),
            paired(|x| x.client_us),
            paired(|x| x.server_us),
        );
        let show = |(m, lo, hi): (f64, f64, f64)| format!("{m:.3} [{lo:.3}..{hi:.3}]");
        println!(
            "  {test:<10} kvbench/redis-benchmark per round, median [min..max]: ops/s {}, client CPU/req {}, server CPU/req {}",
            show(ops_r), show(cpu_r), show(srv_r)
        );
        let runs = |v: &[Sample]| {
            v.iter()
                .map(|x| {
                    serde_json::json!({
                        "ops_per_sec": x.ops, "client_cpu_us_per_req": x.client_us,
                        "server_cpu_us_per_req": x.server_us, "client_busy": x.busy, "hit_ratio": x.hits,
                    })
                })
                .collect::<Vec<_>>()
        };
        let ratio =
            |(m, lo, hi): (f64, f64, f64)| serde_json::json!({ "median": m, "min": lo, "max": hi });
        report.push(serde_json::json!({
            "test": test,
            "kvbench": { "ops_per_sec": a.0, "client_cpu_us_per_req": a.1, "server_cpu_us_per_req": a.2, "client_busy": a.3, "runs": runs(&ours) },
            "redis_benchmark": { "ops_per_sec": b.0, "client_cpu_us_per_req": b.1, "server_cpu_us_per_req": b.2, "client_busy": b.3, "runs": runs(&theirs) },
            "ratio_per_round": { "ops_per_sec": ratio(ops_r), "client_cpu_per_req": ratio(cpu_r), "server_cpu_per_req": ratio(srv_r) },
        }));
    }
    let path = args.out.join(format!("calibrate-{name}.json"));
    crate::write_json(
        &path,
        &serde_json::json!({
            "server": name, "clients": spec.clients, "pipeline": spec.pipeline, "data_size": spec.data_size,
            "requests": n, "keyspace": spec.keyspace, "tests": report,
        }),
    )?;
    println!("wrote {}", path.display());
    Ok(i32::from(errors > 0))
}

/// One redis-benchmark run of `test`; its rps from `--csv`, its CPU from rusage.
fn redis_benchmark(
    rb: &PathBuf,
    spec: &crate::cli::Spec,
    cpus: &str,
    test: &str,
    server: &Server,
    n: u64,
) -> Result<Sample, String> {
    let name = if test == "ping" { "ping_mbulk" } else { test };
    let s0 = server.cpu_secs();
    let t0 = Instant::now();
    let c0 = sys::children_cpu_secs();
    let out = Command::new("taskset")
        .args(["-c", cpus])
        .arg(rb)
        .args(["-h", "127.0.0.1", "-p", &server.addr.port().to_string()])
        .args([
            "-c",
            &spec.clients.to_string(),
            "-P",
            &spec.pipeline.to_string(),
        ])
        .args(["-d", &spec.data_size.to_string(), "-n", &n.to_string()])
        .args(["-r", &spec.keyspace.to_string(), "-t", name, "--csv"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", rb.display()))?;
    let client = sys::children_cpu_secs() - c0;
    let wall = t0.elapsed().as_secs_f64();
    let server_cpu = server.cpu_secs() - s0;
    let text = String::from_utf8_lossy(&out.stdout);
    let ops = parse_csv_rps(&text).ok_or_else(|| {
        format!(
            "redis-benchmark printed no result: {} {}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })?;
    Ok(Sample {
        ops,
        client_us: client * 1e6 / n as f64,
        server_us: server_cpu * 1e6 / n as f64,
        busy: client / wall.max(1e-9),
        hits: None,
    })
}

/// One run's line.
fn print_sample(test: &str, round: usize, tool: &str, s: &Sample) {
    let hits = s
        .hits
        .map_or(String::new(), |h| format!("  hits {:.1}%", h * 100.0));
    println!(
        "  {test:<10} {:<22} {:>12.0} {:>14.3} {:>14.3} {:>11.0}%{hits}",
        format!("{tool} #{}", round + 1),
        s.ops,
        s.client_us,
        s.server_us,
        s.busy * 100.0
    );
}

/// The rps of the first result line of redis-benchmark's `--csv` output.
fn parse_csv_rps(text: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with("\"test\""))
        .find_map(|l| l.split(',').nth(1)?.trim_matches('"').parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn hit_ratio_of_two_readings() {
        assert_eq!(super::hit_ratio(Some((10, 5)), Some((40, 15))), Some(0.75));
        // No reads in between, a server without the counters, counters reset.
        assert_eq!(super::hit_ratio(Some((10, 5)), Some((10, 5))), None);
        assert_eq!(super::hit_ratio(None, Some((1, 0))), None);
        assert_eq!(super::hit_ratio(Some((10, 5)), Some((0, 0))), None);
    }

    #[test]
    fn csv_rps() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\"\n\"SET\",\"812345.67\",\"0.9\"\n";
        assert_eq!(super::parse_csv_rps(out), Some(812345.67));
        assert_eq!(super::parse_csv_rps("garbage"), None);
    }
}
