//! What the operating system tells about processes: CPU time, memory, affinity.

use std::path::Path;

/// Pins the calling thread to `cpu` (best effort: a CPU outside the allowed set is ignored).
pub fn pin_thread(cpu: usize) {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
}

fn rusage(who: libc::c_int) -> f64 {
    // SAFETY: `rusage` is plain old data, so all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage`; `who` is one of the RUSAGE_* constants.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// User + system CPU seconds of the calling thread.
pub fn thread_cpu_secs() -> f64 {
    rusage(libc::RUSAGE_THREAD)
}

/// User + system CPU seconds of this whole process (every thread).
pub fn process_cpu_secs() -> f64 {
    rusage(libc::RUSAGE_SELF)
}

/// User + system CPU seconds of the waited-for children of this process.
pub fn children_cpu_secs() -> f64 {
    rusage(libc::RUSAGE_CHILDREN)
}

/// Clock ticks per second of `/proc/PID/stat` times.
fn clk_tck() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// User + system CPU seconds of process `pid` (all its threads), from `/proc/PID/stat`.
pub fn proc_cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu(&stat).map(|ticks| ticks as f64 / clk_tck())
}

/// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line, in ticks.
fn parse_stat_cpu(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Resident set size of process `pid` in bytes, from `/proc/PID/status`.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Whether process `pid` exists here (a local server we can measure).
pub fn has_proc(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}/stat")).exists()
}

/// Parses a CPU list such as `0`, `0,2` or `0-3`.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("bad CPU list '{s}' (e.g. 0 or 0,2 or 1-3)");
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if a > b || b > 4096 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_odd_command_name() {
        let line = "1234 (my (odd) srv) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 4 0";
        assert_eq!(parse_stat_cpu(line), Some(325));
    }

    #[test]
    fn own_process_has_cpu_and_rss() {
        let pid = std::process::id();
        assert!(proc_cpu_secs(pid).is_some());
        assert!(rss_bytes(pid).unwrap() > 0);
        assert!(has_proc(pid));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0").unwrap(), vec![0]);
        assert_eq!(parse_cpus("0,2").unwrap(), vec![0, 2]);
        assert_eq!(parse_cpus("1-3").unwrap(), vec![1, 2, 3]);
        assert!(parse_cpus("").is_err());
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("x").is_err());
    }
}
