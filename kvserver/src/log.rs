//! Leveled logging to stderr, or to the file `logfile` names, Redis-style lines:
//! `pid:role time level message`.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

static LEVEL: AtomicU8 = AtomicU8::new(2);
/// The log file, when `logfile` names one.
static FILE: OnceLock<Mutex<std::fs::File>> = OnceLock::new();

/// Sends the log lines to `path` (appended to, created when missing) instead of stderr.
pub fn to_file(path: &str) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let _ = FILE.set(Mutex::new(f));
    Ok(())
}

/// Whether lines go to a log file (see [`to_file`]).
pub fn to_a_file() -> bool {
    FILE.get().is_some()
}

/// Sets the least level printed (0 debug .. 3 warning).
pub fn set_level(l: u8) {
    LEVEL.store(l, Ordering::Relaxed);
}

/// Whether messages of `level` are printed.
pub fn enabled(level: u8) -> bool {
    level >= LEVEL.load(Ordering::Relaxed)
}

/// Prints one log line.
pub fn line(level: u8, msg: std::fmt::Arguments<'_>) {
    if enabled(level) {
        let mark = ['.', '-', '*', '#'][usize::from(level.min(3))];
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        // One write per line (stderr is unbuffered: `eprintln!` writes each piece), and a
        // closed or full stderr loses the line instead of panicking the shard as `eprintln!`
        // would.
        let text = format!(
            "{}:M {}.{:03} {mark} {msg}\n",
            std::process::id(),
            now.as_secs(),
            now.subsec_millis()
        );
        match FILE.get() {
            Some(f) => {
                let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
                let _ = f.write_all(text.as_bytes());
            }
            None => {
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            }
        }
    }
}

/// `log!(level, "fmt", args...)`.
#[macro_export]
macro_rules! log {
    ($lvl:expr, $($t:tt)*) => { $crate::log::line($lvl, format_args!($($t)*)) };
}
