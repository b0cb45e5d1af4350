//! Results: latency histograms per command and what a report shows of them.
//!
//! Latencies are recorded in nanoseconds in an HDR histogram (3 significant
//! digits, up to 100 s); values above the range are clamped, never dropped.
//! Errors are counted per command, with the first error text kept.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency recorded exactly: 100 s in ns.
const MAX_NS: u64 = 100_000_000_000;

/// The counters of one command kind.
#[derive(Clone, Debug)]
pub struct Counts {
    /// Latency of every reply, in ns.
    pub hist: Histogram<u64>,
    /// Replies that were errors.
    pub errors: u64,
    /// The first error reply, as sent.
    pub first_error: Option<String>,
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            // 3 significant digits over 1 ns..100 s is a valid, fixed configuration.
            hist: Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid histogram bounds"),
            errors: 0,
            first_error: None,
        }
    }
}

impl Counts {
    /// Records one reply that took `ns`.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
    }

    /// Records `count` replies that each took `ns`.
    #[inline]
    pub fn record_n(&mut self, ns: u64, count: u64) {
        self.hist.saturating_record_n(ns.max(1), count);
    }

    /// Records an error reply (its latency counts too).
    pub fn error(&mut self, ns: u64, reply: &[u8]) {
        self.record(ns);
        self.errors += 1;
        if self.first_error.is_none() {
            let text = reply.strip_suffix(b"\r\n").unwrap_or(reply);
            let text = &text[..text.len().min(200)];
            self.first_error = Some(String::from_utf8_lossy(text).into_owned());
        }
    }

    /// Adds `other`'s replies to these.
    pub fn merge(&mut self, other: &Counts) {
        // Same bounds on both sides, so adding cannot fail.
        self.hist
            .add(&other.hist)
            .expect("histograms with equal bounds");
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }

    /// The report of these counts over `secs` seconds.
    pub fn summary(&self, name: &str, secs: f64) -> Summary {
        let h = &self.hist;
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1e6;
        let requests = h.len();
        Summary {
            name: name.to_string(),
            requests,
            errors: self.errors,
            first_error: self.first_error.clone(),
            secs,
            ops_per_sec: if secs > 0.0 {
                requests as f64 / secs
            } else {
                0.0
            },
            mean_ms: if requests > 0 { h.mean() / 1e6 } else { 0.0 },
            p50_ms: ms(0.50),
            p95_ms: ms(0.95),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: h.max() as f64 / 1e6,
        }
    }
}

/// Throughput and latency percentiles of one command (or of all).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Command name, or `all`.
    pub name: String,
    /// Replies received.
    pub requests: u64,
    /// Of which errors.
    pub errors: u64,
    /// The first error reply.
    pub first_error: Option<String>,
    /// Measured seconds.
    pub secs: f64,
    /// Replies per second.
    pub ops_per_sec: f64,
    /// Mean latency, ms.
    pub mean_ms: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// Slowest reply, ms.
    pub max_ms: f64,
}

/// Column titles matching [`Summary::row`].
pub const HEADER: &str = "        ops/s   p50 ms   p95 ms   p99 ms p99.9 ms   max ms   errors";

impl Summary {
    /// One table row: throughput, percentiles, errors.
    pub fn row(&self) -> String {
        format!(
            "{:>13.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8}",
            self.ops_per_sec,
            self.p50_ms,
            self.p95_ms,
            self.p99_ms,
            self.p999_ms,
            self.max_ms,
            self.errors
        )
    }
}

/// Median of `v` (mean of the middle two for even lengths); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_recorded_values() {
        let mut c = Counts::default();
        for us in 1..=1000u64 {
            c.record(us * 1000);
        }
        let s = c.summary("get", 2.0);
        assert_eq!(s.requests, 1000);
        assert!((s.ops_per_sec - 500.0).abs() < 1e-9);
        assert!((s.p50_ms - 0.5).abs() < 0.001, "{}", s.p50_ms);
        assert!((s.p99_ms - 0.99).abs() < 0.001, "{}", s.p99_ms);
        assert!((s.max_ms - 1.0).abs() < 0.001, "{}", s.max_ms);
        assert_eq!(s.errors, 0);
    }

    #[test]
    fn errors_are_counted_and_kept_through_merge() {
        let mut a = Counts::default();
        a.record(10);
        let mut b = Counts::default();
        b.error(20, b"-ERR unknown command 'FOO'\r\n");
        b.error(20, b"-ERR other\r\n");
        a.merge(&b);
        assert_eq!(a.hist.len(), 3);
        assert_eq!(a.errors, 2);
        assert_eq!(a.first_error.as_deref(), Some("-ERR unknown command 'FOO'"));
    }

    #[test]
    fn huge_latencies_are_clamped_not_dropped() {
        let mut c = Counts::default();
        c.record(u64::MAX);
        c.record(0);
        assert_eq!(c.hist.len(), 2);
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
