//! Start-up options: `kvserver [config-file] [--name value ...]`, like redis-server.
//!
//! A config file holds `name value...` lines (`#` comments). Command-line `--name value` pairs
//! come after it and win. Store parameters (maxmemory, requirepass, proto-max-bulk-len, ...) go
//! to kvcore's [`kvcore::config::Config`] table, so CONFIG GET shows what was given here.

use kvcore::config::{parse_memory, Config};

/// Everything the server needs to start.
#[derive(Clone, Debug)]
pub struct Options {
    /// TCP port.
    pub port: u16,
    /// Address to bind.
    pub bind: String,
    /// Executors (shards); 0 = one per CPU the process may run on.
    pub threads: usize,
    /// Max connected clients.
    pub maxclients: usize,
    /// Output buffer limit of normal clients.
    pub output_limit: OutputLimit,
    /// Output buffer limit of clients subscribed to channels or patterns.
    pub pubsub_limit: OutputLimit,
    /// Log level: 0 debug, 1 verbose, 2 notice, 3 warning.
    pub loglevel: u8,
    /// Protected mode (refuse non-loopback clients without a password).
    pub protected_mode: bool,
    /// The store's configuration.
    pub store: Config,
    /// The configuration file the server was started with (CONFIG REWRITE writes it).
    pub config_file: Option<std::path::PathBuf>,
    /// Port of the Prometheus endpoint (`--metrics-port`; none by default).
    pub metrics_port: Option<u16>,
    /// The `user <name> <rules>` lines (without `user`), in order: the users to create at
    /// the start, as redis.conf declares them.
    pub users: Vec<String>,
}

/// One class of Redis's `client-output-buffer-limit`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimit {
    /// Close at once past this many unsent bytes (0 = none).
    pub hard: u64,
    /// Close when past this many bytes for `soft_secs` seconds (0 = none).
    pub soft: u64,
    /// See `soft`.
    pub soft_secs: u64,
}

impl OutputLimit {
    /// Redis's default for clients subscribed to channels or patterns: `pubsub 32mb 8mb 60`.
    pub const PUBSUB: OutputLimit = OutputLimit {
        hard: 32 << 20,
        soft: 8 << 20,
        soft_secs: 60,
    };

    /// Parses a `client-output-buffer-limit` value into `normal` and `pubsub` (the classes
    /// not named keep their values).
    pub fn parse_into(
        v: &str,
        normal: &mut OutputLimit,
        pubsub: &mut OutputLimit,
    ) -> Result<(), String> {
        let words: Vec<&str> = v.split_whitespace().collect();
        if words.is_empty() || words.len() % 4 != 0 {
            return Err(
                "client-output-buffer-limit wants groups of: class hard soft seconds".into(),
            );
        }
        for g in words.chunks(4) {
            let mem = |s: &str| parse_memory(s).ok_or_else(|| format!("bad memory value '{s}'"));
            let hard = mem(g[1])?;
            let soft = mem(g[2])?;
            let secs = g[3]
                .parse::<u64>()
                .map_err(|_| format!("bad seconds '{}'", g[3]))?;
            let limit = OutputLimit {
                hard,
                soft,
                soft_secs: secs,
            };
            match g[0] {
                "normal" => *normal = limit,
                "pubsub" => *pubsub = limit,
                "slave" | "replica" => {}
                c => return Err(format!("unknown client class '{c}'")),
            }
        }
        Ok(())
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            port: 6379,
            bind: "127.0.0.1".into(),
            threads: 0,
            maxclients: 10000,
            output_limit: OutputLimit::default(),
            pubsub_limit: OutputLimit::PUBSUB,
            loglevel: 2,
            protected_mode: true,
            store: Config::default(),
            config_file: None,
            metrics_port: None,
            users: Vec::new(),
        }
    }
}

/// `kvserver --help`.
pub const HELP: &str = "\
kvserver: a Redis-compatible in-memory data store

usage: kvserver [config-file] [--option value ...]

options (also accepted as `name value` lines in the config file):
  --port N                          TCP port (6379; 0 picks a free port and prints it)
  --bind ADDR                       address to listen on (127.0.0.1)
  --threads N                       executors, one shard each (default: one per usable CPU)
  --metrics-port N                  serve Prometheus metrics on http://BIND:N/metrics (off)
  --requirepass PASS                password for AUTH (none)
  --protected-mode yes|no           refuse non-loopback clients when no password is set (yes)
  --maxclients N                    connection limit (10000)
  --proto-max-bulk-len BYTES        largest bulk string accepted (512mb)
  --client-output-buffer-limit 'normal HARD SOFT SECS'
                                    disconnect clients whose unread replies pass the limit
  --loglevel debug|verbose|notice|warning   (notice)
  --maxmemory BYTES, --hz N, --zset-max-listpack-entries N, ... any CONFIG parameter
  --help                            this text
";

/// What the command line asked for.
pub enum Parsed {
    /// Run with these options.
    Run(Box<Options>),
    /// Print help and exit.
    Help,
}

/// Parses the command line (without the program name).
pub fn parse(args: &[String]) -> Result<Parsed, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut config_file = None;
    let mut i = 0;
    if let Some(first) = args.first() {
        if first == "--help" || first == "-h" {
            return Ok(Parsed::Help);
        }
        if !first.starts_with("--") {
            let text = std::fs::read_to_string(first)
                .map_err(|e| format!("can't read config file '{first}': {e}"))?;
            pairs.extend(parse_file(&text)?);
            config_file = Some(
                std::fs::canonicalize(first).unwrap_or_else(|_| std::path::PathBuf::from(first)),
            );
            i = 1;
        }
    }
    while i < args.len() {
        let a = &args[i];
        if a == "--help" || a == "-h" {
            return Ok(Parsed::Help);
        }
        let Some(name) = a.strip_prefix("--") else {
            return Err(format!(
                "unexpected argument '{a}' (options look like --port 6379)"
            ));
        };
        // Values run until the next --option, as redis-server reads them.
        let mut vals = Vec::new();
        while i + 1 < args.len() && !args[i + 1].starts_with("--") {
            i += 1;
            vals.push(args[i].clone());
        }
        if vals.is_empty() {
            return Err(format!("option --{name} needs a value"));
        }
        pairs.push((name.to_string(), vals.join(" ")));
        i += 1;
    }
    let mut o = Options {
        config_file,
        ..Options::default()
    };
    // Several `save` lines add up, as in Redis (the first replaces the default; `save ""`
    // clears what came before).
    let mut save: Option<String> = None;
    for (name, value) in pairs {
        if name.eq_ignore_ascii_case("save") {
            let v = value.trim();
            save = Some(match save {
                Some(acc) if !acc.is_empty() && !v.is_empty() => format!("{acc} {v}"),
                _ => v.to_string(),
            });
            continue;
        }
        apply(&mut o, &name, &value)?;
    }
    if let Some(v) = save {
        apply(&mut o, "save", &v)?;
    }
    // `dir` is where the RDB file goes; shown absolute, as Redis shows it after its chdir.
    let dir = o.store.get("dir").unwrap_or(".").to_string();
    let abs = std::fs::canonicalize(&dir)
        .map_err(|e| format!("can't use '{dir}' as the working directory: {e}"))?;
    o.store
        .set_startup("dir", &abs.to_string_lossy())
        .map_err(|e| e.to_string())?;
    Ok(Parsed::Run(Box::new(o)))
}

fn parse_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let value = value.trim().trim_matches('"');
        out.push((name.to_string(), value.to_string()));
        if name.is_empty() {
            return Err(format!("config file line {}: missing option name", n + 1));
        }
    }
    Ok(out)
}

fn apply(o: &mut Options, name: &str, value: &str) -> Result<(), String> {
    if name.eq_ignore_ascii_case("user") {
        if value.split_whitespace().next().is_none() {
            return Err("'user' wants a user name and its rules".into());
        }
        o.users.push(value.to_string());
        return Ok(());
    }
    let num = |what: &str| -> Result<u64, String> {
        value
            .parse::<u64>()
            .map_err(|_| format!("--{what} wants a number, got '{value}'"))
    };
    match name.to_ascii_lowercase().as_str() {
        "port" => {
            o.port =
                u16::try_from(num("port")?).map_err(|_| format!("port {value} is out of range"))?
        }
        "bind" => {
            o.bind = value
                .split_whitespace()
                .next()
                .unwrap_or("127.0.0.1")
                .to_string()
        }
        "threads" => o.threads = num("threads")? as usize,
        "metrics-port" => {
            let p = u16::try_from(num("metrics-port")?)
                .map_err(|_| format!("metrics port {value} is out of range"))?;
            o.metrics_port = (p != 0).then_some(p);
        }
        "maxclients" => o.maxclients = num("maxclients")?.max(1) as usize,
        "loglevel" => {
            o.loglevel = match value {
                "debug" => 0,
                "verbose" => 1,
                "notice" => 2,
                "warning" | "nothing" => 3,
                _ => {
                    return Err(format!(
                        "--loglevel wants debug, verbose, notice or warning, got '{value}'"
                    ))
                }
            }
        }
        "protected-mode" => match value {
            "yes" => o.protected_mode = true,
            "no" => o.protected_mode = false,
            _ => return Err(format!("--protected-mode wants yes or no, got '{value}'")),
        },
        "client-output-buffer-limit" => {
            OutputLimit::parse_into(value, &mut o.output_limit, &mut o.pubsub_limit)?
        }
        "daemonize" | "supervised" | "pidfile" | "logfile" | "dir" | "dbfilename" => {}
        _ => {}
    }
    let store_name = if name == "threads" || name == "metrics-port" {
        None
    } else {
        Some(name)
    };
    if let Some(n) = store_name {
        match o.store.set_startup(n, value) {
            Ok(()) => {}
            Err(kvcore::config::ConfigError::Unknown(_))
                if matches!(
                    n,
                    "threads"
                        | "loglevel"
                        | "daemonize"
                        | "supervised"
                        | "pidfile"
                        | "logfile"
                        | "dir"
                        | "dbfilename"
                ) => {}
            Err(kvcore::config::ConfigError::Unknown(_)) => {
                return Err(format!("unknown option '{name}' (see kvserver --help)"))
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Options, String> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse(&v)? {
            Parsed::Run(o) => Ok(*o),
            Parsed::Help => Err("help".into()),
        }
    }

    #[test]
    fn command_line() {
        let o = run(&[
            "--port",
            "7000",
            "--threads",
            "3",
            "--requirepass",
            "pw",
            "--maxmemory",
            "1mb",
        ])
        .unwrap();
        assert_eq!((o.port, o.threads), (7000, 3));
        assert_eq!(o.store.requirepass, b"pw");
        assert_eq!(o.store.maxmemory, 1 << 20);
        let o = run(&[
            "--client-output-buffer-limit",
            "normal",
            "1mb",
            "512kb",
            "10",
        ])
        .unwrap();
        assert_eq!(
            o.output_limit,
            OutputLimit {
                hard: 1 << 20,
                soft: 512 << 10,
                soft_secs: 10
            }
        );
        assert!(run(&["--port", "99999"])
            .unwrap_err()
            .contains("out of range"));
        assert!(run(&["--nosuch", "1"])
            .unwrap_err()
            .contains("unknown option 'nosuch'"));
        assert!(run(&["--port"]).unwrap_err().contains("needs a value"));
        assert!(run(&["/nonexistent/file.conf"])
            .unwrap_err()
            .contains("can't read config file"));
        assert!(matches!(parse(&["--help".to_string()]), Ok(Parsed::Help)));
    }

    #[test]
    fn config_file() {
        let pairs = parse_file(
            "# comment\nport 7001\nsave \"\"\nclient-output-buffer-limit normal 0 0 0\n",
        )
        .unwrap();
        assert_eq!(pairs[0], ("port".to_string(), "7001".to_string()));
        assert_eq!(pairs[1], ("save".to_string(), "".to_string()));
    }
}
