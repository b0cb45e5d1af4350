//! Progress while a workload runs: a bar on a terminal, a plain line every few seconds otherwise.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Runs `f` with a counter of completed requests and shows its progress on stderr.
/// `total` is the request count, or `None` for a timed run of `secs` seconds.
pub fn watch<T>(label: &str, total: Option<u64>, secs: f64, f: impl FnOnce(&AtomicU64) -> T) -> T {
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let t = s.spawn(|| ticker(label, total, secs, &done, &stop));
        let r = f(&done);
        stop.store(true, Ordering::Relaxed);
        // Wake the ticker now, so the caller's wall time ends with the load.
        t.thread().unpark();
        r
    })
}

fn ticker(label: &str, total: Option<u64>, secs: f64, done: &AtomicU64, stop: &AtomicBool) {
    let t0 = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let bar = tty.then(|| {
        let (len, tmpl) = match total {
            Some(n) => (n, "{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}"),
            None => ((secs * 1000.0) as u64, "{msg:>12} [{bar:40}] {elapsed}"),
        };
        let b = ProgressBar::new(len);
        if let Ok(style) = ProgressStyle::with_template(tmpl) {
            b.set_style(style.progress_chars("=> "));
        }
        b.set_message(label.to_string());
        b
    });
    let mut last_line = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // Parked, not asleep: `watch` unparks it when the load ends.
        std::thread::park_timeout(Duration::from_millis(100));
        let n = done.load(Ordering::Relaxed);
        match &bar {
            Some(b) => b.set_position(match total {
                Some(_) => n,
                None => t0.elapsed().as_millis() as u64,
            }),
            None if last_line.elapsed() >= Duration::from_secs(5) => {
                last_line = Instant::now();
                let rate = n as f64 / t0.elapsed().as_secs_f64().max(1e-9);
                eprintln!("{label}: {n} requests, {rate:.0}/s so far");
            }
            None => {}
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}
