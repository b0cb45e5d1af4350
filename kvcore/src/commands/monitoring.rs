//! SLOWLOG and LATENCY over one store's [`crate::telemetry`]; a server with several shards
//! gathers every shard's records and answers with the same reply writers.

use std::collections::BTreeMap;

use super::{args, cmd, unknown_subcommand, wrong_arity, CommandSpec, Ctx};
use crate::resp::ReplyWriter;
use crate::telemetry::{cdf, LatencySeries, SlowEntry, Snapshot};

pub(super) static COMMANDS: &[CommandSpec] = &[
    cmd!("slowlog", -2, 0, 0, 0, 0, slowlog),
    cmd!("latency", -2, 0, 0, 0, 0, latency),
];

/// SLOWLOG HELP's lines (Redis 7.4).
const SLOWLOG_HELP: &[&str] = &[
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
];

/// LATENCY HELP's lines (Redis 7.4).
const LATENCY_HELP: &[&str] = &[
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
];

/// What a SLOWLOG call asks for, checked as Redis checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowlogOp {
    /// GET with the number of entries wanted.
    Get(usize),
    /// LEN.
    Len,
    /// RESET.
    Reset,
}

/// Parses SLOWLOG's arguments; on a bad call the error (or HELP) reply is written and `None`
/// returned.
pub fn parse_slowlog(w: &mut ReplyWriter<'_>, a: &[&[u8]]) -> Option<SlowlogOp> {
    let sub = a[1];
    if a.len() == 2 && args::is(sub, "HELP") {
        w.help("slowlog", SLOWLOG_HELP);
    } else if a.len() == 2 && args::is(sub, "RESET") {
        return Some(SlowlogOp::Reset);
    } else if a.len() == 2 && args::is(sub, "LEN") {
        return Some(SlowlogOp::Len);
    } else if (a.len() == 2 || a.len() == 3) && args::is(sub, "GET") {
        if a.len() == 2 {
            return Some(SlowlogOp::Get(10));
        }
        return match crate::num::parse_i64(a[2]) {
            Some(-1) => Some(SlowlogOp::Get(usize::MAX)),
            Some(n) if n >= 0 => Some(SlowlogOp::Get(n as usize)),
            Some(_) => {
                w.error(b"ERR count should be greater than or equal to -1");
                None
            }
            None => {
                w.error(b"ERR value is not an integer or out of range");
                None
            }
        };
    } else if is_known(a, "slowlog") {
        wrong_arity(
            w,
            &format!("slowlog|{}", String::from_utf8_lossy(sub).to_lowercase()),
        );
    } else {
        unknown_subcommand(w, "slowlog", sub);
    }
    None
}

/// A known subcommand with the wrong number of arguments gets the arity error.
fn is_known(a: &[&[u8]], container: &str) -> bool {
    super::lookup(container.as_bytes())
        .map(|spec| super::check_subcommand(spec, a))
        .is_some_and(|r| match r {
            Err(e) => e.starts_with(b"-ERR wrong number"),
            Ok(()) => true,
        })
}

/// SLOWLOG GET's reply for entries newest first (peer and name filled in).
pub fn write_slowlog(w: &mut ReplyWriter<'_>, entries: &[SlowEntry]) {
    w.array_len(entries.len());
    for e in entries {
        w.array_len(6);
        w.int(e.id as i64);
        w.int(e.time as i64);
        w.int(e.micros as i64);
        w.array_len(e.args.len());
        for a in &e.args {
            w.bulk(a);
        }
        w.bulk(&e.peer);
        w.bulk(&e.client_name);
    }
}

fn slowlog(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let Some(op) = parse_slowlog(&mut c.out, a) else {
        return;
    };
    let t = &mut c.db.telemetry;
    match op {
        SlowlogOp::Reset => {
            t.slowlog_reset();
            c.out.ok();
        }
        SlowlogOp::Len => c.out.int(t.slowlog_len() as i64),
        SlowlogOp::Get(n) => {
            let mut entries = t.slowlog(n);
            for e in &mut entries {
                if e.client == c.session.id {
                    e.client_name = c.session.name.clone().unwrap_or_default();
                }
            }
            write_slowlog(&mut c.out, &entries)
        }
    }
}

/// What a LATENCY call asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LatencyOp {
    /// HISTORY event.
    History(String),
    /// GRAPH event.
    Graph(String),
    /// LATEST.
    Latest,
    /// DOCTOR.
    Doctor,
    /// RESET [event ...].
    Reset(Vec<Vec<u8>>),
    /// HISTOGRAM [command ...].
    Histogram(Vec<Vec<u8>>),
}

/// Parses LATENCY's arguments; on a bad call the error (or HELP) reply is written and `None`
/// returned.
pub fn parse_latency(w: &mut ReplyWriter<'_>, a: &[&[u8]]) -> Option<LatencyOp> {
    let sub = a[1];
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let rest = || a[2..].iter().map(|x| x.to_vec()).collect();
    if args::is(sub, "HISTORY") && a.len() == 3 {
        return Some(LatencyOp::History(text(a[2])));
    } else if args::is(sub, "GRAPH") && a.len() == 3 {
        return Some(LatencyOp::Graph(text(a[2])));
    } else if args::is(sub, "LATEST") && a.len() == 2 {
        return Some(LatencyOp::Latest);
    } else if args::is(sub, "DOCTOR") && a.len() == 2 {
        return Some(LatencyOp::Doctor);
    } else if args::is(sub, "RESET") {
        return Some(LatencyOp::Reset(rest()));
    } else if args::is(sub, "HISTOGRAM") {
        return Some(LatencyOp::Histogram(rest()));
    } else if args::is(sub, "HELP") && a.len() == 2 {
        w.help("latency", LATENCY_HELP);
    } else if is_known(a, "latency") {
        wrong_arity(
            w,
            &format!("latency|{}", String::from_utf8_lossy(sub).to_lowercase()),
        );
    } else {
        unknown_subcommand(w, "latency", sub);
    }
    None
}

/// LATENCY LATEST: `[event, time, latest ms, max ms]` per event.
pub fn write_latest(w: &mut ReplyWriter<'_>, events: &BTreeMap<String, LatencySeries>) {
    w.array_len(events.len());
    for (name, s) in events {
        let (time, ms) = s.samples.back().copied().unwrap_or((0, 0));
        w.array_len(4);
        w.bulk(name.as_bytes());
        w.int(time as i64);
        w.int(ms as i64);
        w.int(s.max as i64);
    }
}

/// LATENCY HISTORY: `[time, ms]` pairs, oldest first.
pub fn write_history(w: &mut ReplyWriter<'_>, series: Option<&LatencySeries>) {
    let Some(s) = series else {
        return w.array_len(0);
    };
    w.array_len(s.samples.len());
    for &(t, ms) in &s.samples {
        w.array_len(2);
        w.int(t as i64);
        w.int(ms as i64);
    }
}

/// How long ago, as a short label: `12s`, `5m`, `3h`, `2d`.
fn ago(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// LATENCY GRAPH's text: a title line, a rule, then one column per sample (newest right),
/// `#` bars four rows high scaled between the lowest and highest sample, and under each
/// column how long ago it was, written downwards.
pub fn graph(event: &str, s: &LatencySeries, now_s: u64) -> String {
    const COLS: usize = 80;
    const ROWS: u64 = 4;
    let samples: Vec<(u64, u64)> = s.samples.iter().rev().take(COLS).rev().copied().collect();
    let hi = samples.iter().map(|x| x.1).max().unwrap_or(0);
    let lo = samples.iter().map(|x| x.1).min().unwrap_or(0);
    let mut out = format!(
        "{event} - high {hi} ms, low {lo} ms (all time high {} ms)\n{}\n",
        s.max,
        "-".repeat(COLS)
    );
    let height = |ms: u64| {
        if hi == lo {
            ROWS
        } else {
            1 + (ms - lo) * (ROWS - 1) / (hi - lo)
        }
    };
    for row in (1..=ROWS).rev() {
        let line: String = samples
            .iter()
            .map(|&(_, ms)| if height(ms) >= row { '#' } else { ' ' })
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let labels: Vec<Vec<char>> = samples
        .iter()
        .map(|&(t, _)| ago(now_s.saturating_sub(t)).chars().collect())
        .collect();
    let depth = labels.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..depth {
        let line: String = labels
            .iter()
            .map(|l| l.get(i).copied().unwrap_or(' '))
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// LATENCY DOCTOR's report: per event its spikes, average, mean deviation and period, and
/// what usually causes that kind of event.
pub fn doctor(
    events: &BTreeMap<String, LatencySeries>,
    threshold_ms: u64,
    slowlog_us: i64,
    now_s: u64,
) -> String {
    use std::fmt::Write;
    if events.is_empty() {
        return if threshold_ms == 0 {
            "The latency monitor is off, so there is nothing to report. Turn it on with \
             'CONFIG SET latency-monitor-threshold <milliseconds>': every event slower than \
             that is then recorded.\n"
                .to_string()
        } else {
            "No latency spike has been recorded since the server started (or since the last \
             LATENCY RESET). Nothing to worry about.\n"
                .to_string()
        };
    }
    let mut out = String::from("Latency spikes were recorded:\n\n");
    let mut advice: Vec<String> = Vec::new();
    for (i, (name, s)) in events.iter().enumerate() {
        let n = s.samples.len() as u64;
        let avg = s.samples.iter().map(|x| x.1).sum::<u64>() / n.max(1);
        let mad = s.samples.iter().map(|x| x.1.abs_diff(avg)).sum::<u64>() / n.max(1);
        let oldest = s.samples.iter().map(|x| x.0).min().unwrap_or(now_s);
        let period = now_s.saturating_sub(oldest).max(1);
        let _ = writeln!(
            out,
            "{}. {name}: {n} spikes, average {avg} ms, mean deviation {mad} ms, one every {:.2} s; \
             worst ever {} ms.",
            i + 1,
            period as f64 / n.max(1) as f64,
            s.max
        );
        match name.as_str() {
            "command" => {
                if slowlog_us < 0 {
                    advice.push(format!(
                        "Slow commands: the slow log is off; 'CONFIG SET slowlog-log-slower-than {}' \
                         records the commands behind these spikes.",
                        threshold_ms * 1000
                    ));
                } else if slowlog_us as u64 / 1000 > threshold_ms {
                    advice.push(format!(
                        "Slow commands: the slow log only keeps commands slower than the latency \
                         threshold's spikes; 'CONFIG SET slowlog-log-slower-than {}' lines them up.",
                        threshold_ms * 1000
                    ));
                }
                advice.push(
                    "SLOWLOG GET shows which commands were slow: commands over big collections \
                     (KEYS, SMEMBERS, LRANGE 0 -1, SORT ...) take time in proportion to their size."
                        .into(),
                );
            }
            "fast-command" => advice.push(
                "Commands that should take microseconds took milliseconds: the server was not \
                 given the CPU (an overloaded machine, a noisy neighbour, CPU throttling)."
                    .into(),
            ),
            "expire-cycle" | "eviction-cycle" | "eviction-del" => advice.push(
                "Expiring or evicting keys took long: many keys expire at once, or big \
                 collections are freed; spreading deadlines out helps."
                    .into(),
            ),
            _ => {}
        }
    }
    if !advice.is_empty() {
        out.push_str("\nWhat may help:\n\n");
        for a in advice {
            let _ = writeln!(out, "- {a}");
        }
    }
    out
}

/// LATENCY HISTOGRAM: per command with data, its calls and cumulative distribution. `names`
/// empty means every command; a container's name stands for its subcommands.
pub fn write_histogram(w: &mut ReplyWriter<'_>, snap: &Snapshot, names: &[Vec<u8>]) {
    let wanted = |full: &str| -> bool {
        if names.is_empty() {
            return true;
        }
        names.iter().any(|n| {
            let n = String::from_utf8_lossy(n).to_ascii_lowercase();
            n == full || full.split_once('|').is_some_and(|(p, _)| p == n)
        })
    };
    let rows: Vec<_> = snap
        .cmds
        .values()
        .filter(|c| c.hist.as_ref().is_some_and(|h| !h.is_empty()) && wanted(c.name))
        .collect();
    w.map_len(rows.len());
    for c in rows {
        let h = c.hist.as_ref().expect("filtered above");
        w.bulk(c.name.as_bytes());
        w.map_len(2);
        w.bulk(b"calls");
        w.int(h.len() as i64);
        w.bulk(b"histogram_usec");
        let points = cdf(h);
        w.map_len(points.len());
        for (us, n) in points {
            w.int(us as i64);
            w.int(n as i64);
        }
    }
}

fn latency(c: &mut Ctx<'_>, a: &[&[u8]]) {
    let Some(op) = parse_latency(&mut c.out, a) else {
        return;
    };
    let now_s = c.db.now / 1000;
    match op {
        LatencyOp::History(e) => write_history(&mut c.out, c.db.telemetry.events().get(&e)),
        LatencyOp::Graph(e) => match c.db.telemetry.events().get(&e) {
            Some(s) => {
                let text = graph(&e, s, now_s);
                c.out.verbatim(b"txt", text.as_bytes());
            }
            None => c.out.error(
                super::sanitize(format!("ERR No samples available for event '{e}'").into_bytes())
                    .as_slice(),
            ),
        },
        LatencyOp::Latest => write_latest(&mut c.out, c.db.telemetry.events()),
        LatencyOp::Doctor => {
            let set = c.db.config.telemetry;
            let text = doctor(
                c.db.telemetry.events(),
                set.monitor_ms,
                set.slower_than,
                now_s,
            );
            c.out.verbatim(b"txt", text.as_bytes());
        }
        LatencyOp::Reset(names) => {
            let refs: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
            let n = c.db.telemetry.reset_events(&refs);
            c.out.int(n as i64);
        }
        LatencyOp::Histogram(names) => {
            let snap = if c.db.config.telemetry.tracking {
                c.db.telemetry.snapshot(true)
            } else {
                Snapshot::default()
            };
            write_histogram(&mut c.out, &snap, &names);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_and_doctor_name_the_samples() {
        let mut s = LatencySeries::default();
        s.add(100, 10);
        s.add(101, 40);
        let g = graph("command", &s, 105);
        assert!(g.starts_with("command - high 40 ms, low 10 ms (all time high 40 ms)\n"));
        let lines: Vec<&str> = g.lines().collect();
        assert_eq!(&lines[2..], [" #", " #", " #", "##", "54", "ss"]);
        let mut events = BTreeMap::new();
        events.insert("command".to_string(), s);
        let d = doctor(&events, 5, 10_000, 105);
        assert!(d.contains("1. command: 2 spikes, average 25 ms"), "{d}");
        assert!(d.contains("SLOWLOG GET"));
        assert!(doctor(&BTreeMap::new(), 0, 0, 0).contains("off"));
    }
}
