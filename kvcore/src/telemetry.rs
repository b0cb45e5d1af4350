//! What a store records about the commands it runs, for the operators' tools: per-command
//! counters and latency histograms (INFO commandstats and latencystats, LATENCY HISTOGRAM),
//! error counters (INFO errorstats), the slow log (SLOWLOG) and the latency monitor's event
//! series (LATENCY LATEST, HISTORY, GRAPH, DOCTOR).
//!
//! Each shard keeps its own [`Telemetry`]; a server sums the shards' [`Snapshot`]s when it
//! answers. Recording costs a hash lookup and, with `latency-tracking yes`, one histogram
//! increment per command.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;

use crate::commands::CommandSpec;

/// Histogram range, as Redis: 1 ns to 1 s, 2 significant figures.
const HIST_MAX_NS: u64 = 1_000_000_000;
/// Redis keeps at most this many distinct error codes in errorstats.
const ERRORSTATS_LIMIT: usize = 128;
/// Samples kept per latency event (Redis's `LATENCY_TS_LEN`).
const LATENCY_TS_LEN: usize = 160;
/// Slow log entries keep at most this many arguments ...
const SLOWLOG_MAX_ARGC: usize = 32;
/// ... each at most this long.
const SLOWLOG_MAX_STRING: usize = 128;

/// Slow log entry ids, unique over the process (all shards).
static SLOWLOG_ID: AtomicU64 = AtomicU64::new(0);

/// Counters of one command (or subcommand, `config|get`).
#[derive(Clone, Debug)]
pub struct CmdStat {
    /// Full name, lowercase (`get`, `config|get`).
    pub name: &'static str,
    /// Completed calls.
    pub calls: u64,
    /// Time spent in them, ns.
    pub nanos: u64,
    /// Calls refused before running (arity, authentication, OOM ...).
    pub rejected: u64,
    /// Calls that ran and answered an error.
    pub failed: u64,
    /// Latency distribution in ns, once `latency-tracking` saw a call (in a snapshot taken
    /// with histograms; the live counters keep `counts`).
    pub hist: Option<Box<Histogram<u64>>>,
    /// The live latency distribution: calls per bucket of that histogram.
    counts: Option<Box<[u64]>>,
    /// A container command: its subcommands count, not itself.
    container: bool,
}

impl CmdStat {
    /// Counts `calls` runs that took `nanos` together, each in the latency histogram at their
    /// mean; whether that time is long enough for [`Telemetry::notable`].
    #[inline(always)]
    fn ran(&mut self, calls: u64, nanos: u64, set: &Settings) -> bool {
        self.calls += calls;
        self.nanos += nanos;
        if set.tracking && calls > 0 {
            let counts = self
                .counts
                .get_or_insert_with(|| vec![0; HIST_LEN].into_boxed_slice());
            if let Some(n) = counts.get_mut(hist_index(nanos / calls)) {
                *n += calls;
            }
        }
        nanos >= set.notable
    }

    fn new(name: &'static str) -> CmdStat {
        CmdStat {
            name,
            calls: 0,
            nanos: 0,
            rejected: 0,
            failed: 0,
            hist: None,
            counts: None,
            container: false,
        }
    }

    /// Adds another shard's counters for the same command.
    pub fn merge(&mut self, o: &CmdStat) {
        self.calls += o.calls;
        self.nanos += o.nanos;
        self.rejected += o.rejected;
        self.failed += o.failed;
        if let Some(h) = &o.hist {
            match &mut self.hist {
                Some(mine) => {
                    let _ = mine.add(&**h);
                }
                None => self.hist = Some(h.clone()),
            }
        }
    }
}

/// Buckets of [`new_histogram`]: 23 powers of two of 128 sub-buckets each, and the first
/// power's lower half.
const HIST_LEN: usize = 24 * 128;

/// The bucket of [`new_histogram`] that a latency of `nanos` falls in, computed as
/// hdrhistogram does for its bounds (unit 1 ns, 256 sub-buckets for 2 significant figures):
/// a command's call costs this and an increment, not the crate's general `record`.
#[inline]
fn hist_index(nanos: u64) -> usize {
    let v = nanos.clamp(1, HIST_MAX_NS);
    let bucket = 56 - (v | 255).leading_zeros() as usize;
    ((bucket + 1) << 7) + (v >> bucket) as usize - 128
}

/// The lowest latency in bucket `i` (hdrhistogram's `value_from_index`).
fn hist_value(i: usize) -> u64 {
    let (bucket, sub) = match (i >> 7).checked_sub(1) {
        Some(b) => (b, (i & 127) + 128),
        None => (0, i & 127),
    };
    (sub as u64) << bucket
}

/// The histogram of `counts` (calls per [`hist_index`] bucket).
fn to_histogram(counts: &[u64]) -> Box<Histogram<u64>> {
    let mut h = new_histogram();
    for (i, &n) in counts.iter().enumerate() {
        if n > 0 {
            h.saturating_record_n(hist_value(i), n);
        }
    }
    h
}

fn new_histogram() -> Box<Histogram<u64>> {
    Box::new(
        Histogram::new_with_bounds(1, HIST_MAX_NS, 2).expect("constant histogram bounds are valid"),
    )
}

/// One slow log entry.
#[derive(Clone, Debug)]
pub struct SlowEntry {
    /// Unique id, increasing.
    pub id: u64,
    /// Unix time, seconds.
    pub time: u64,
    /// Duration, µs.
    pub micros: u64,
    /// The arguments, trimmed as Redis trims them.
    pub args: Vec<Vec<u8>>,
    /// The client's id (the host turns it into an address and a name).
    pub client: u64,
    /// The client's `ip:port`, filled by the host.
    pub peer: Vec<u8>,
    /// The client's name, filled by the host.
    pub client_name: Vec<u8>,
}

/// One latency monitor event's samples: `(unix seconds, ms)`, at most one per second.
#[derive(Clone, Debug, Default)]
pub struct LatencySeries {
    /// Oldest first.
    pub samples: VecDeque<(u64, u64)>,
    /// The largest latency ever seen, ms.
    pub max: u64,
}

impl LatencySeries {
    /// Adds a sample; one in the same second as the last keeps the larger.
    pub fn add(&mut self, time: u64, ms: u64) {
        self.max = self.max.max(ms);
        if let Some(last) = self.samples.back_mut() {
            if last.0 == time {
                last.1 = last.1.max(ms);
                return;
            }
        }
        if self.samples.len() == LATENCY_TS_LEN {
            self.samples.pop_front();
        }
        self.samples.push_back((time, ms));
    }

    /// Adds another shard's samples of the same event.
    pub fn merge(&mut self, o: &LatencySeries) {
        let mut all: BTreeMap<u64, u64> = self.samples.iter().copied().collect();
        for &(t, ms) in &o.samples {
            let e = all.entry(t).or_insert(0);
            *e = (*e).max(ms);
        }
        let skip = all.len().saturating_sub(LATENCY_TS_LEN);
        self.samples = all.into_iter().skip(skip).collect();
        self.max = self.max.max(o.max);
    }
}

/// The settings recording reads (from the configuration).
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// `slowlog-log-slower-than`, µs (negative: off).
    pub slower_than: i64,
    /// `slowlog-max-len`.
    pub slowlog_max: usize,
    /// `latency-monitor-threshold`, ms (0: off).
    pub monitor_ms: u64,
    /// `latency-tracking`.
    pub tracking: bool,
    /// The shortest command, in ns, that the slow log or the latency monitor keeps (from the
    /// two thresholds; `u64::MAX` when both are off): one compare per command.
    notable: u64,
}

impl Settings {
    /// Whether express commands may share clock readings (see [`crate::db::Lap`]): the slow
    /// log and the latency monitor keep nothing shorter than
    /// [`crate::db::SHARED_CLOCK_FLOOR_NS`].
    #[inline(always)]
    pub fn shares_clock(&self) -> bool {
        self.notable >= crate::db::SHARED_CLOCK_FLOOR_NS
    }

    /// Settings from the configuration's values (the fields of the same names).
    pub const fn new(
        slower_than: i64,
        slowlog_max: usize,
        monitor_ms: u64,
        tracking: bool,
    ) -> Self {
        let slow = if slower_than >= 0 {
            (slower_than as u64).saturating_mul(1000)
        } else {
            u64::MAX
        };
        let monitor = if monitor_ms > 0 {
            monitor_ms.saturating_mul(1_000_000)
        } else {
            u64::MAX
        };
        Settings {
            slower_than,
            slowlog_max,
            monitor_ms,
            tracking,
            notable: if slow < monitor { slow } else { monitor },
        }
    }
}

/// One shard's records.
#[derive(Default)]
pub struct Telemetry {
    /// Where each command's counters are in `stats`, by the address of its spec (plain
    /// commands) or of its full name plus one (subcommands).
    cmds: hashbrown::HashMap<usize, usize, foldhash::fast::FixedState>,
    /// The same for a plain command with a table id ([`CommandSpec::id`]), by id: one load
    /// instead of a hash lookup per command (`u32::MAX`: none yet).
    by_id: Vec<u32>,
    stats: Vec<CmdStat>,
    errors: BTreeMap<Vec<u8>, u64>,
    total_errors: u64,
    slowlog: VecDeque<SlowEntry>,
    events: BTreeMap<String, LatencySeries>,
    /// Slow log entries ever added (tells a caller whether `record` added one).
    pushed: u64,
}

/// The parts of [`Telemetry`] INFO and LATENCY HISTOGRAM read, summed over shards.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Per command, by full name.
    pub cmds: BTreeMap<&'static str, CmdStat>,
    /// Error code (first word of the error) -> replies.
    pub errors: BTreeMap<Vec<u8>, u64>,
    /// Every error reply.
    pub total_errors: u64,
}

impl Snapshot {
    /// Adds another shard's snapshot.
    pub fn merge(&mut self, o: &Snapshot) {
        for (name, c) in &o.cmds {
            self.cmds
                .entry(name)
                .or_insert_with(|| CmdStat::new(name))
                .merge(c);
        }
        for (e, n) in &o.errors {
            if self.errors.len() < ERRORSTATS_LIMIT || self.errors.contains_key(e) {
                *self.errors.entry(e.clone()).or_insert(0) += n;
            }
        }
        self.total_errors += o.total_errors;
    }
}

/// How a command ended, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Refused before running (its error reply is counted too).
    Rejected,
    /// Ran; `true` when its reply is an error.
    Ran(bool),
}

/// The full name statistics use for a command: `parent|sub` for a container's subcommand
/// we serve, else the command's own name.
pub fn full_name(spec: &'static CommandSpec, args: &[&[u8]]) -> &'static str {
    let Some(sub) = args.get(1) else {
        return spec.name;
    };
    crate::commands::docs::SERVED_SUBCOMMANDS
        .iter()
        .find(|full| {
            full.split_once('|')
                .is_some_and(|(p, s)| p == spec.name && s.as_bytes().eq_ignore_ascii_case(sub))
        })
        .copied()
        .unwrap_or(spec.name)
}

/// The error code Redis counts for an error reply (`-WRONGTYPE Operation ...` -> `WRONGTYPE`).
pub fn error_code(reply: &[u8]) -> &[u8] {
    let body = reply.strip_prefix(b"-").unwrap_or(reply);
    let end = body
        .iter()
        .position(|&b| b == b' ' || b == b'\r' || b == b'\n')
        .unwrap_or(body.len());
    &body[..end]
}

impl Telemetry {
    /// Records one command: its counters, its latency, an error reply (`reply`, when it starts
    /// with `-`), and a slow log entry or latency event when it was slow enough.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        nanos: u64,
        outcome: Outcome,
        reply: &[u8],
        client: u64,
        set: Settings,
        now_s: u64,
    ) {
        if self.count(spec, args, nanos, outcome, reply, &set) {
            self.notable(spec, args, nanos, client, set, now_s);
        }
    }

    /// The counting part of [`Telemetry::record`], the part every command pays: whether the
    /// command was slow enough that [`Telemetry::notable`] must see it too.
    #[inline(always)]
    pub fn count(
        &mut self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        nanos: u64,
        outcome: Outcome,
        reply: &[u8],
        set: &Settings,
    ) -> bool {
        let stat = self.stat(spec, args);
        let notable = match outcome {
            Outcome::Rejected => {
                stat.rejected += 1;
                false
            }
            Outcome::Ran(failed) => {
                if failed {
                    stat.failed += 1;
                }
                stat.ran(1, nanos, set)
            }
        };
        if reply.first() == Some(&b'-') {
            self.error_reply(reply);
        }
        notable
    }

    /// Counts a run of `calls` commands of `spec` that succeeded and took `nanos` together
    /// (see [`crate::db::Lap`]): each goes in the latency histogram at the run's mean.
    /// Whether the run was long enough that [`Telemetry::notable`] must see it.
    pub fn count_run(
        &mut self,
        spec: &'static CommandSpec,
        calls: u32,
        nanos: u64,
        set: &Settings,
    ) -> bool {
        self.stat(spec, &[]).ran(u64::from(calls), nanos, set)
    }

    #[cold]
    #[inline(never)]
    fn error_reply(&mut self, reply: &[u8]) {
        self.error(reply);
    }

    /// A command slow enough for the slow log or the latency monitor, by their thresholds
    /// (the rest of [`Telemetry::record`] when [`Telemetry::count`] says so).
    #[cold]
    pub fn notable(
        &mut self,
        spec: &'static CommandSpec,
        args: &[&[u8]],
        nanos: u64,
        client: u64,
        set: Settings,
        now_s: u64,
    ) {
        let micros = nanos / 1000;
        if set.slower_than >= 0 && micros >= set.slower_than as u64 && spec.name != "exec" {
            self.slow(args, micros, client, set.slowlog_max, now_s);
        }
        let ms = micros / 1000;
        if set.monitor_ms > 0 && ms >= set.monitor_ms {
            let event = if spec.has(crate::commands::flags::FAST) {
                "fast-command"
            } else {
                "command"
            };
            self.latency_event(event, ms, now_s);
        }
    }

    /// The counters of `spec` (of its subcommand, for a container command such as CONFIG).
    /// One hash lookup for a plain command, two for a subcommand.
    #[inline]
    fn stat(&mut self, spec: &'static CommandSpec, args: &[&[u8]]) -> &mut CmdStat {
        let id = usize::from(spec.id);
        match self.by_id.get(id) {
            Some(&i) if i != u32::MAX => &mut self.stats[i as usize],
            _ => self.first_stat(spec, args),
        }
    }

    /// [`Telemetry::stat`] for a command not counted by its id yet, or a subcommand.
    #[cold]
    #[inline(never)]
    fn first_stat(&mut self, spec: &'static CommandSpec, args: &[&[u8]]) -> &mut CmdStat {
        let id = usize::from(spec.id);
        let i = self.slot(spec as *const CommandSpec as usize, || {
            let mut c = CmdStat::new(spec.name);
            c.container = crate::commands::docs::is_container(spec.name);
            c
        });
        if !self.stats[i].container {
            if spec.id != crate::commands::NO_ID {
                if self.by_id.len() <= id {
                    self.by_id.resize(id + 1, u32::MAX);
                }
                self.by_id[id] = i as u32;
            }
            return &mut self.stats[i];
        }
        let name = full_name(spec, args);
        let i = self.slot(name.as_ptr() as usize + 1, || CmdStat::new(name));
        &mut self.stats[i]
    }

    /// The index in `stats` of the counters under `key`, made by `new` the first time.
    #[inline]
    fn slot(&mut self, key: usize, new: impl FnOnce() -> CmdStat) -> usize {
        let stats = &mut self.stats;
        *self.cmds.entry(key).or_insert_with(|| {
            stats.push(new());
            stats.len() - 1
        })
    }

    /// Counts an error reply of no known command (unknown command, protocol error).
    pub fn error(&mut self, reply: &[u8]) {
        self.total_errors += 1;
        let code = error_code(reply);
        if let Some(n) = self.errors.get_mut(code) {
            *n += 1;
        } else if self.errors.len() < ERRORSTATS_LIMIT {
            self.errors.insert(code.to_vec(), 1);
        }
    }

    fn slow(&mut self, args: &[&[u8]], micros: u64, client: u64, max: usize, now_s: u64) {
        if max == 0 {
            return;
        }
        let mut kept: Vec<Vec<u8>> = Vec::with_capacity(args.len().min(SLOWLOG_MAX_ARGC));
        let redact_from = if args[0].eq_ignore_ascii_case(b"auth") {
            1
        } else {
            usize::MAX
        };
        for (j, a) in args.iter().enumerate() {
            if args.len() > SLOWLOG_MAX_ARGC && j == SLOWLOG_MAX_ARGC - 1 {
                kept.push(
                    format!("... ({} more arguments)", args.len() - SLOWLOG_MAX_ARGC + 1)
                        .into_bytes(),
                );
                break;
            }
            if j >= redact_from {
                kept.push(b"(redacted)".to_vec());
            } else if a.len() > SLOWLOG_MAX_STRING {
                let mut s = a[..SLOWLOG_MAX_STRING].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - SLOWLOG_MAX_STRING).as_bytes(),
                );
                kept.push(s);
            } else {
                kept.push(a.to_vec());
            }
        }
        self.pushed += 1;
        self.slowlog.push_front(SlowEntry {
            id: SLOWLOG_ID.fetch_add(1, Ordering::Relaxed),
            time: now_s,
            micros,
            args: kept,
            client,
            peer: Vec::new(),
            client_name: Vec::new(),
        });
        self.slowlog.truncate(max);
    }

    /// Adds a latency monitor sample for `event` (the caller checked the threshold).
    pub fn latency_event(&mut self, event: &str, ms: u64, now_s: u64) {
        if let Some(s) = self.events.get_mut(event) {
            s.add(now_s, ms);
        } else {
            let mut s = LatencySeries::default();
            s.add(now_s, ms);
            self.events.insert(event.to_string(), s);
        }
    }

    /// The counters, for INFO (`with_histograms`: also the latency histograms).
    pub fn snapshot(&self, with_histograms: bool) -> Snapshot {
        Snapshot {
            cmds: self
                .stats
                .iter()
                .filter(|c| c.calls + c.rejected + c.failed > 0)
                .map(|c| {
                    let hist = if with_histograms {
                        c.counts.as_deref().map(to_histogram)
                    } else {
                        None
                    };
                    let c = CmdStat {
                        hist,
                        counts: None,
                        ..*c
                    };
                    (c.name, c)
                })
                .collect(),
            errors: self.errors.clone(),
            total_errors: self.total_errors,
        }
    }

    /// The newest `count` slow log entries, newest first.
    pub fn slowlog(&self, count: usize) -> Vec<SlowEntry> {
        self.slowlog.iter().take(count).cloned().collect()
    }

    /// Slow log entries ever added.
    pub fn slowlog_pushed(&self) -> u64 {
        self.pushed
    }

    /// Sets the client address and name of the newest slow log entry.
    pub fn label_newest(&mut self, peer: Vec<u8>, name: Vec<u8>) {
        if let Some(e) = self.slowlog.front_mut() {
            e.peer = peer;
            e.client_name = name;
        }
    }

    /// Slow log length.
    pub fn slowlog_len(&self) -> usize {
        self.slowlog.len()
    }

    /// SLOWLOG RESET.
    pub fn slowlog_reset(&mut self) {
        self.slowlog.clear();
    }

    /// Trims the slow log to a new `slowlog-max-len`.
    pub fn slowlog_trim(&mut self, max: usize) {
        self.slowlog.truncate(max);
    }

    /// The latency monitor's series.
    pub fn events(&self) -> &BTreeMap<String, LatencySeries> {
        &self.events
    }

    /// LATENCY RESET: drops the named events (all when `names` is empty); returns how many.
    pub fn reset_events(&mut self, names: &[&[u8]]) -> usize {
        if names.is_empty() {
            let n = self.events.len();
            self.events.clear();
            return n;
        }
        let mut n = 0;
        for name in names {
            let key = String::from_utf8_lossy(name);
            if self.events.remove(key.as_ref()).is_some() {
                n += 1;
            }
        }
        n
    }

    /// CONFIG RESETSTAT: command, error and latency counters start again (the slow log and the
    /// latency monitor keep theirs, as in Redis).
    pub fn reset_stats(&mut self) {
        self.cmds.clear();
        self.by_id.clear();
        self.stats.clear();
        self.errors.clear();
        self.total_errors = 0;
    }
}

/// Redis's `trimDoubleString` of `%f`: a percentile as INFO names it (`50`, `99.9`).
pub fn percentile_label(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

/// The `latency_percentiles_usec_<name>:p50=..,p99=..` value for a histogram.
pub fn percentiles_line(h: &Histogram<u64>, percentiles: &[f64]) -> String {
    let mut s = String::new();
    for (i, &p) in percentiles.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let v = h.value_at_percentile(p) as f64 / 1000.0;
        s.push_str(&format!("p{}={v:.3}", percentile_label(p)));
    }
    s
}

/// LATENCY HISTOGRAM's `histogram_usec` pairs: `(µs bucket, cumulative calls)` on a log-2
/// scale from 1024 ns, only where the count grows (Redis's `fillCommandCDF`).
pub fn cdf(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut cumulative = 0u64;
    let mut previous = 0u64;
    for v in h.iter_log(1024, 2.0) {
        cumulative += v.count_since_last_iteration();
        let micros = h.highest_equivalent(v.value_iterated_to()) / 1000;
        if cumulative > previous {
            out.push((micros, cumulative));
        }
        previous = cumulative;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &[u8]) -> &'static CommandSpec {
        crate::commands::lookup(name).unwrap()
    }

    const ON: Settings = Settings::new(0, 2, 0, true);

    #[test]
    fn counters_errors_and_subcommands() {
        let mut t = Telemetry::default();
        let get = spec(b"get");
        t.record(
            get,
            &[b"get", b"k"],
            2000,
            Outcome::Ran(false),
            b"$-1\r\n",
            1,
            ON,
            5,
        );
        t.record(
            get,
            &[b"get", b"k"],
            4000,
            Outcome::Ran(true),
            b"-WRONGTYPE Op\r\n",
            1,
            ON,
            5,
        );
        t.record(
            get,
            &[b"get"],
            0,
            Outcome::Rejected,
            b"-ERR wrong number\r\n",
            1,
            ON,
            5,
        );
        let config = spec(b"config");
        t.record(
            config,
            &[b"config", b"GET", b"x"],
            10,
            Outcome::Ran(false),
            b"*0\r\n",
            1,
            ON,
            5,
        );
        t.error(b"-ERR unknown command\r\n");
        let s = t.snapshot(true);
        let g = &s.cmds["get"];
        assert_eq!((g.calls, g.nanos, g.rejected, g.failed), (2, 6000, 1, 1));
        assert_eq!(g.hist.as_ref().unwrap().len(), 2);
        assert_eq!(s.cmds["config|get"].calls, 1);
        assert!(!s.cmds.contains_key("config"));
        assert_eq!(s.errors[&b"WRONGTYPE"[..]], 1);
        assert_eq!(s.errors[&b"ERR"[..]], 2);
        assert_eq!(s.total_errors, 3);
        let mut sum = s.clone();
        sum.merge(&s);
        assert_eq!(sum.cmds["get"].calls, 4);
        assert_eq!(sum.cmds["get"].hist.as_ref().unwrap().len(), 4);
        assert_eq!(sum.total_errors, 6);
    }

    #[test]
    fn slowlog_trims_like_redis() {
        let mut t = Telemetry::default();
        let set = spec(b"set");
        let long = vec![b'x'; 130];
        let mut args: Vec<&[u8]> = vec![b"set", &long];
        t.record(set, &args, 5000, Outcome::Ran(false), b"+OK\r\n", 7, ON, 9);
        let e = &t.slowlog(10)[0];
        assert_eq!(e.micros, 5);
        assert_eq!(e.client, 7);
        assert_eq!(e.args[1], [&long[..128], b"... (2 more bytes)"].concat());
        let many: Vec<Vec<u8>> = (0..40).map(|i| i.to_string().into_bytes()).collect();
        args = vec![b"set"];
        args.extend(many.iter().map(Vec::as_slice));
        t.record(set, &args, 5000, Outcome::Ran(false), b"+OK\r\n", 7, ON, 9);
        let e = &t.slowlog(1)[0];
        assert_eq!(e.args.len(), 32);
        assert_eq!(e.args[31], b"... (10 more arguments)");
        t.record(
            set,
            &[b"set", b"a", b"b"],
            1,
            Outcome::Ran(false),
            b"+OK\r\n",
            7,
            ON,
            9,
        );
        assert_eq!(t.slowlog_len(), 2, "slowlog-max-len");
        let auth = spec(b"auth");
        t.record(
            auth,
            &[b"auth", b"pw"],
            1,
            Outcome::Ran(false),
            b"+OK\r\n",
            7,
            ON,
            9,
        );
        assert_eq!(
            t.slowlog(1)[0].args,
            vec![b"auth".to_vec(), b"(redacted)".to_vec()]
        );
        let off = Settings::new(-1, 2, 0, true);
        t.slowlog_reset();
        t.record(
            set,
            &[b"set", b"a", b"b"],
            1 << 30,
            Outcome::Ran(false),
            b"+OK\r\n",
            7,
            off,
            9,
        );
        assert_eq!(t.slowlog_len(), 0);
    }

    #[test]
    fn latency_series_keep_one_sample_per_second() {
        let mut s = LatencySeries::default();
        s.add(10, 5);
        s.add(10, 7);
        s.add(11, 3);
        assert_eq!(s.samples, [(10, 7), (11, 3)]);
        let mut o = LatencySeries::default();
        o.add(11, 9);
        o.add(12, 1);
        s.merge(&o);
        assert_eq!(s.samples, [(10, 7), (11, 9), (12, 1)]);
        assert_eq!(s.max, 9);
        for t in 0..200 {
            s.add(100 + t, 1);
        }
        assert_eq!(s.samples.len(), LATENCY_TS_LEN);
    }

    #[test]
    fn bucket_counts_give_the_histogram_hdrhistogram_records() {
        assert_eq!(new_histogram().distinct_values(), HIST_LEN);
        let mut values: Vec<u64> = (0..5000).collect();
        for p in 0..31 {
            let t = 1u64 << p;
            values.extend([t - 1, t, t + 1, t * 3 / 2, t * 10 + 7]);
        }
        values.extend([HIST_MAX_NS - 1, HIST_MAX_NS, HIST_MAX_NS + 1, u64::MAX]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            values.push(x >> (x % 64));
        }
        let mut direct = new_histogram();
        let mut counts = vec![0u64; HIST_LEN];
        for &v in &values {
            let i = hist_index(v);
            counts[i] += 1;
            let clamped = v.clamp(1, HIST_MAX_NS);
            direct.saturating_record(clamped);
            // The bucket's lowest value is in the same bucket, at or below the value.
            assert!(hist_value(i) <= clamped, "{v}");
            assert_eq!(hist_index(hist_value(i)), i, "{v}");
            assert!(direct.equivalent(hist_value(i), clamped), "{v}");
        }
        let rebuilt = to_histogram(&counts);
        assert_eq!(rebuilt.len(), direct.len());
        assert_eq!(cdf(&rebuilt), cdf(&direct));
        for p in [0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0] {
            assert_eq!(
                rebuilt.value_at_percentile(p),
                direct.value_at_percentile(p),
                "p{p}"
            );
        }
        assert_eq!(rebuilt.max(), direct.max());
        assert_eq!(rebuilt.min_nz(), direct.min_nz());
    }

    #[test]
    fn percentiles_and_cdf() {
        assert_eq!(percentile_label(50.0), "50");
        assert_eq!(percentile_label(99.9), "99.9");
        let mut h = new_histogram();
        for _ in 0..3 {
            h.record(1500).unwrap();
        }
        h.record(5000).unwrap();
        assert_eq!(percentiles_line(&h, &[50.0, 100.0]), "p50=1.503,p100=5.023");
        assert_eq!(cdf(&h), vec![(2, 3), (8, 4)]);
    }
}
