//! Command-line options shared by `run`, `compare` and `calibrate`, and the presets.
//!
//! Every load option is optional on the command line so that a preset can
//! fill what the user left out: user > preset > built-in default.

use clap::{Args, ValueEnum};

use crate::workload::{self, KeyDist, Template, Workload, MAX_KEYSPACE};

/// Load options, in the spirit of redis-benchmark and memtier_benchmark.
#[derive(Args, Clone, Debug, Default)]
pub struct Load {
    /// Connections in all [default: 50].
    #[arg(short = 'c', long)]
    pub clients: Option<usize>,
    /// Client threads (event loops), connections spread over them [default: 1].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Requests per pipeline batch [default: 1].
    #[arg(short = 'P', long)]
    pub pipeline: Option<usize>,
    /// Requests per test [default: 100000].
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Seconds per test, instead of a request count.
    #[arg(long)]
    pub test_time: Option<f64>,
    /// Value size in bytes [default: 64].
    #[arg(short = 'd', long)]
    pub data_size: Option<usize>,
    /// Keys are drawn from this many (`key:000000000000` ...) [default: 1000000].
    #[arg(short = 'r', long)]
    pub keyspace: Option<u64>,
    /// Key distribution: uniform, zipf, zipf:EXPONENT [default: uniform].
    #[arg(long)]
    pub key_dist: Option<KeyDist>,
    /// Tests to run one after the other [default: set,get].
    #[arg(short = 't', long)]
    pub tests: Option<String>,
    /// One mixed workload of SETs and GETs, e.g. 1:4 (memtier's --ratio).
    #[arg(long)]
    pub ratio: Option<String>,
    /// A custom command; `__rand_int__` is a key number, `__data__` the value.
    #[arg(long)]
    pub command: Option<String>,
    /// Seconds of load before measuring [default: 0].
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Seed of the key generators [default: 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Open loop: send this many requests per second in all (latency from the intended send time).
    #[arg(long)]
    pub rate: Option<f64>,
    /// CPUs to pin the client threads to, e.g. 1 or 2-3.
    #[arg(long)]
    pub load_cpus: Option<String>,
}

/// Load options with every default applied and checked.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Connections.
    pub clients: usize,
    /// Client threads.
    pub threads: usize,
    /// Pipeline depth.
    pub pipeline: usize,
    /// Requests per workload (`None` when timed).
    pub requests: Option<u64>,
    /// Seconds per workload when timed.
    pub test_time: f64,
    /// Value size.
    pub data_size: usize,
    /// Key count.
    pub keyspace: u64,
    /// Key distribution.
    pub dist: KeyDist,
    /// The workloads, in order.
    pub workloads: Vec<Workload>,
    /// Test names, parallel to `workloads` (`set:get` for a ratio).
    pub tests: Vec<String>,
    /// Warm-up seconds.
    pub warmup: f64,
    /// Seed.
    pub seed: u64,
    /// Open-loop rate.
    pub rate: Option<f64>,
    /// Client CPUs.
    pub load_cpus: Vec<usize>,
}

impl Load {
    /// Applies `preset` under these options, then the defaults.
    pub fn resolve(&self, preset: &Load) -> Result<Spec, String> {
        let clients = self.clients.or(preset.clients).unwrap_or(50);
        let threads = self.threads.or(preset.threads).unwrap_or(1);
        let pipeline = self.pipeline.or(preset.pipeline).unwrap_or(1);
        let test_time = self.test_time.or(preset.test_time);
        let requests = match (self.requests, test_time) {
            (Some(n), _) => Some(n),
            (None, Some(_)) => None,
            (None, None) => Some(preset.requests.unwrap_or(100_000)),
        };
        let data_size = self.data_size.or(preset.data_size).unwrap_or(64);
        let keyspace = self.keyspace.or(preset.keyspace).unwrap_or(1_000_000);
        let rate = self.rate.or(preset.rate);
        if !(1..=10_000).contains(&clients) {
            return Err("--clients must be 1..=10000".into());
        }
        if !(1..=1024).contains(&threads) || threads > clients {
            return Err("--threads must be 1..=1024 and at most --clients".into());
        }
        if !(1..=100_000).contains(&pipeline) {
            return Err("--pipeline must be 1..=100000".into());
        }
        if data_size > 64 << 20 {
            return Err("--data-size must be at most 64 MiB".into());
        }
        if !(1..=MAX_KEYSPACE).contains(&keyspace) {
            return Err(format!("--keyspace must be 1..={MAX_KEYSPACE}"));
        }
        if requests == Some(0) || test_time.is_some_and(|t| !(t > 0.0 && t < 1e6)) {
            return Err("--requests and --test-time must be positive".into());
        }
        if rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            return Err("--rate must be positive".into());
        }
        let warmup = self.warmup.or(preset.warmup).unwrap_or(0.0);
        if !(0.0..1e6).contains(&warmup) {
            return Err("--warmup must be 0 or more seconds".into());
        }
        let (workloads, tests) = self.workloads(preset, data_size)?;
        Ok(Spec {
            clients,
            threads,
            pipeline,
            requests,
            test_time: test_time.unwrap_or(0.0),
            data_size,
            keyspace,
            dist: self
                .key_dist
                .or(preset.key_dist)
                .unwrap_or(KeyDist::Uniform),
            workloads,
            tests,
            warmup,
            seed: self.seed.or(preset.seed).unwrap_or(1),
            rate,
            load_cpus: match self.load_cpus.as_ref().or(preset.load_cpus.as_ref()) {
                Some(s) => crate::sys::parse_cpus(s)?,
                None => Vec::new(),
            },
        })
    }

    /// A custom command wins over a ratio, which wins over a test list.
    fn workloads(
        &self,
        preset: &Load,
        size: usize,
    ) -> Result<(Vec<Workload>, Vec<String>), String> {
        if let Some(line) = &self.command {
            let w = Workload::single(Template::custom(line, size)?);
            return Ok((vec![w.clone()], vec![w.name]));
        }
        let ratio = if self.tests.is_some() {
            self.ratio.as_ref()
        } else {
            self.ratio.as_ref().or(preset.ratio.as_ref())
        };
        if let Some(r) = ratio {
            let w = ratio_workload(r, size)?;
            return Ok((vec![w], vec!["set:get".into()]));
        }
        let list = self
            .tests
            .as_deref()
            .or(preset.tests.as_deref())
            .unwrap_or("set,get");
        let mut ws = Vec::new();
        let mut names = Vec::new();
        for t in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let t = t.to_ascii_lowercase();
            ws.push(Workload::single(workload::builtin(&t, size)?));
            names.push(t);
        }
        if ws.is_empty() {
            return Err("--tests names no test".into());
        }
        Ok((ws, names))
    }
}

/// `S:G`: S SETs for every G GETs, spread evenly.
pub fn ratio_workload(r: &str, size: usize) -> Result<Workload, String> {
    let bad = || format!("bad --ratio '{r}' (want SET:GET weights such as 1:4)");
    let (s, g) = r.split_once(':').ok_or_else(bad)?;
    let s: u32 = s.trim().parse().map_err(|_| bad())?;
    let g: u32 = g.trim().parse().map_err(|_| bad())?;
    let mut templates = Vec::new();
    let mut weights = Vec::new();
    for (name, w) in [("set", s), ("get", g)] {
        if w > 0 {
            templates.push(workload::builtin(name, size)?);
            weights.push(w);
        }
    }
    if templates.is_empty() {
        return Err(bad());
    }
    let mut w = Workload::mixed(templates, &weights).map_err(|_| bad())?;
    w.name = "set:get".into();
    Ok(w)
}

/// The published runs this project compares against.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// 50 clients, pipeline 16, 64-byte values: SET, GET, ZADD with random members.
    Pipelined,
    /// The same without pipelining.
    Unpipelined,
    /// memtier_benchmark's mix: SET:GET 1:4, 256-byte values, pipeline 30, 50 connections.
    Memtier,
    /// Bytes per key after 1M SETs of 64-byte values (INFO used_memory and RSS).
    Memory,
}

impl Preset {
    /// The options the preset stands for.
    pub fn load(self) -> Load {
        let base = Load {
            clients: Some(50),
            data_size: Some(64),
            ..Load::default()
        };
        match self {
            Preset::Pipelined => Load {
                pipeline: Some(16),
                tests: Some("set,get,zadd".into()),
                requests: Some(1_000_000),
                ..base
            },
            Preset::Unpipelined => Load {
                pipeline: Some(1),
                tests: Some("set,get,zadd".into()),
                requests: Some(200_000),
                ..base
            },
            Preset::Memtier => Load {
                pipeline: Some(30),
                data_size: Some(256),
                ratio: Some("1:4".into()),
                requests: Some(1_000_000),
                ..base
            },
            Preset::Memory => Load {
                clients: Some(8),
                pipeline: Some(64),
                requests: Some(1_000_000),
                tests: Some("set".into()),
                key_dist: Some(KeyDist::Sequential),
                ..base
            },
        }
    }
}

#[cfg(test)]
mod tests;
