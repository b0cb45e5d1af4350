//! kvbench: load generator for RESP servers, and side-by-side comparison with redis-server.
//!
//! # Layout
//! - [`cli`]: load options shared by the subcommands, and the presets.
//! - [`workload`]: commands pre-encoded once, key distributions, SET:GET ratios.
//! - [`engine`]: the mio event loops that send batches and count replies.
//! - [`stats`]: HDR histograms per command and their summaries.
//! - [`run`]: `kvbench run`, one server.
//! - [`compare`]: `kvbench compare`, servers it starts itself, alternated over rounds.
//! - [`calibrate`]: the same workload from kvbench and from redis-benchmark.
//! - [`null_server`]: a server that does no work, so the load generator is the bottleneck;
//!   [`null_uring`]: the same on io_uring, to compare event models.
//! - [`scenario`]: `kvbench fanout` (pub/sub) and `kvbench tx` (MULTI/EXEC).
//! - [`chart`]: the SVG chart of a comparison.
//! - [`control`], [`sys`], [`progress`]: control client and server processes, /proc, progress.

mod calibrate;
mod chart;
mod cli;
mod compare;
mod control;
mod engine;
mod null_server;
#[cfg(test)]
mod null_tests;
mod null_uring;
mod progress;
mod run;
mod scenario;
mod stats;
mod sys;
mod workload;

use clap::{Parser, Subcommand};

// The system allocator: the load loop allocates nothing per request, and
// mimalloc's arenas asked for transparent huge pages, whose zeroing on first
// touch cost up to 15 ms of client CPU per run (perf: clear_page_erms under
// mi_page_fresh_alloc), counted in every calibration.

/// Load generator for RESP servers (kvserver, redis-server, valkey-server ...).
#[derive(Parser, Debug)]
#[command(name = "kvbench", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Load one running server and report throughput, latency percentiles and CPU per request.
    Run(run::RunArgs),
    /// Start kvserver and redis-server (and others), load each in turn, compare.
    Compare(compare::CompareArgs),
    /// Run one workload from kvbench and from redis-benchmark against one redis-server.
    Calibrate(calibrate::CalibrateArgs),
    /// A RESP server that answers every command without doing it (for calibration).
    NullServer(null_server::NullArgs),
    /// Pub/sub fan-out: subscribers of one channel, publishers pipelining PUBLISH.
    Fanout(scenario::FanoutArgs),
    /// Transactions: MULTI, a SET per key, EXEC, from many connections.
    Tx(scenario::TxArgs),
}

fn main() {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run(a) => run::main(a),
        Cmd::Compare(a) => compare::main(a),
        Cmd::Calibrate(a) => calibrate::main(a),
        Cmd::NullServer(a) => null_server::main(a),
        Cmd::Fanout(a) => scenario::fanout(a),
        Cmd::Tx(a) => scenario::tx(a),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("kvbench: {e}");
            std::process::exit(2);
        }
    }
}

/// Writes `doc` as pretty JSON to `path`, creating its directory.
fn write_json(path: &std::path::Path, doc: &serde_json::Value) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
