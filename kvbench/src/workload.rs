//! Workloads: which commands a run sends, and with which keys.
//!
//! A command is a [`Template`]: its RESP encoding made once, with the byte
//! offsets of the fixed-width number fields (`__rand_int__`, 12 digits as in
//! redis-benchmark's `-r`) that change per request. A [`Workload`] is a set of
//! templates and a cycle of template indices (one entry for a single test;
//! `S` sets and `G` gets spread evenly for `--ratio S:G`). Each connection
//! turns the cycle into a few pre-encoded pipeline batches ([`Batch`]) and,
//! per request, only overwrites the digits: no allocation and no formatting
//! per request.

use kvcore::resp::{Proto, ReplyWriter};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

/// Width of a number field; keys look like `key:000000012345`.
pub const DIGITS: usize = 12;
/// Keyspace bound: every key number must fit in [`DIGITS`] digits.
pub const MAX_KEYSPACE: u64 = 1_000_000_000_000;

/// What a number field draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The key distribution (`__rand_int__`).
    Key,
    /// Uniform noise, independent of the key order (scores, coordinates).
    Noise,
}

/// One command, encoded once, with its number fields.
#[derive(Clone, Debug)]
pub struct Template {
    /// Lower-case command name, for reports (`set`, `zadd`, or the custom command's first word).
    pub name: String,
    /// The RESP encoding, number fields zero-filled.
    pub bytes: Vec<u8>,
    /// Offsets of the number fields in `bytes`.
    pub slots: Vec<(usize, Slot)>,
}

const RAND: &str = "__rand_int__";
const NOISE: &str = "__noise__";
const DATA: &str = "__data__";

impl Template {
    /// Encodes `args` as a RESP array; `__rand_int__` becomes a key field,
    /// `__noise__` a noise field and an argument `__data__` the value of `data_size` bytes.
    pub fn new(name: &str, args: &[&str], data_size: usize) -> Template {
        let mut bytes = Vec::new();
        let mut slots = Vec::new();
        let mut w = ReplyWriter::new(&mut bytes, Proto::Resp2);
        w.array_len(args.len());
        for arg in args {
            if *arg == DATA {
                w.bulk(&vec![b'x'; data_size]);
                continue;
            }
            let (text, fields) = expand(arg);
            let start = w.out.len();
            w.bulk(&text);
            // The bulk's body starts after its `$<len>\r\n` header.
            let body = w.out.len() - 2 - text.len();
            debug_assert!(body > start);
            slots.extend(fields.into_iter().map(|(at, s)| (body + at, s)));
        }
        Template {
            name: name.to_ascii_lowercase(),
            bytes,
            slots,
        }
    }

    /// A custom command line, split at spaces (`INCRBY n:__rand_int__ 3`).
    pub fn custom(line: &str, data_size: usize) -> Result<Template, String> {
        let args: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = args.first() else {
            return Err("empty --command".into());
        };
        Ok(Template::new(first, &args, data_size))
    }
}

/// Replaces the placeholders of one argument by zero digits; returns the
/// text and the field offsets within it.
fn expand(arg: &str) -> (Vec<u8>, Vec<(usize, Slot)>) {
    let mut text = Vec::with_capacity(arg.len());
    let mut fields = Vec::new();
    let mut rest = arg;
    loop {
        let r = rest.find(RAND).map(|i| (i, RAND, Slot::Key));
        let n = rest.find(NOISE).map(|i| (i, NOISE, Slot::Noise));
        let next = match (r, n) {
            (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        let Some((i, token, slot)) = next else {
            text.extend_from_slice(rest.as_bytes());
            return (text, fields);
        };
        text.extend_from_slice(&rest.as_bytes()[..i]);
        fields.push((text.len(), slot));
        text.extend_from_slice(&[b'0'; DIGITS]);
        rest = &rest[i + token.len()..];
    }
}

/// The built-in tests, named as in redis-benchmark's `-t`.
pub const TESTS: &[&str] = &[
    "ping",
    "set",
    "get",
    "incr",
    "lpush",
    "rpush",
    "lpop",
    "rpop",
    "hset",
    "sadd",
    "zadd",
    "zrank",
    "geoadd",
    "geosearch",
    "mget",
    "mset",
];

/// The template of a built-in test.
pub fn builtin(test: &str, data_size: usize) -> Result<Template, String> {
    let t = |args: &[&str]| Ok(Template::new(test, args, data_size));
    match test {
        "ping" => t(&["PING"]),
        "set" => t(&["SET", "key:__rand_int__", DATA]),
        "get" => t(&["GET", "key:__rand_int__"]),
        "incr" => t(&["INCR", "counter:__rand_int__"]),
        "lpush" => t(&["LPUSH", "mylist", DATA]),
        "rpush" => t(&["RPUSH", "mylist", DATA]),
        "lpop" => t(&["LPOP", "mylist"]),
        "rpop" => t(&["RPOP", "mylist"]),
        "hset" => t(&["HSET", "myhash", "element:__rand_int__", DATA]),
        "sadd" => t(&["SADD", "myset", "element:__rand_int__"]),
        "zadd" => t(&["ZADD", "myzset", "__noise__", "element:__rand_int__"]),
        "zrank" => t(&["ZRANK", "myzset", "element:__rand_int__"]),
        "geoadd" => t(&[
            "GEOADD",
            "mygeo",
            "13.__noise__",
            "52.__noise__",
            "member:__rand_int__",
        ]),
        "geosearch" => t(&[
            "GEOSEARCH",
            "mygeo",
            "FROMLONLAT",
            "13.5",
            "52.5",
            "BYRADIUS",
            "30",
            "km",
            "COUNT",
            "10",
            "ASC",
        ]),
        "mget" => {
            let mut args = vec!["MGET"];
            args.extend(std::iter::repeat_n("key:__rand_int__", 10));
            t(&args)
        }
        "mset" => {
            let mut args = vec!["MSET"];
            for _ in 0..10 {
                args.extend(["key:__rand_int__", DATA]);
            }
            t(&args)
        }
        other => Err(format!(
            "unknown test '{other}' (known: {})",
            TESTS.join(",")
        )),
    }
}

/// The test that fills the data a test reads, if it reads any.
pub fn prefill_for(test: &str) -> Option<&'static str> {
    match test {
        "get" | "mget" => Some("set"),
        "zrank" => Some("zadd"),
        "geosearch" => Some("geoadd"),
        "rpop" | "lpop" => Some("lpush"),
        _ => None,
    }
}

/// A set of templates sent in a fixed cycle.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Report name: the test, `set:get` for a ratio, or the custom command's name.
    pub name: String,
    /// The distinct commands.
    pub templates: Vec<Template>,
    /// Template indices in sending order, repeated forever.
    pub cycle: Vec<usize>,
}

impl Workload {
    /// One template, repeated.
    pub fn single(t: Template) -> Workload {
        Workload {
            name: t.name.clone(),
            templates: vec![t],
            cycle: vec![0],
        }
    }

    /// `weights[i]` requests of `templates[i]` per cycle, spread evenly.
    pub fn mixed(templates: Vec<Template>, weights: &[u32]) -> Result<Workload, String> {
        let total: u32 = weights.iter().sum();
        if weights.len() != templates.len() || total == 0 || total > 1000 {
            return Err("a ratio needs one weight per command, summing to 1..=1000".into());
        }
        // Largest-remainder interleave: at step k, take the template furthest behind its share.
        let mut sent = vec![0u32; weights.len()];
        let mut cycle = Vec::with_capacity(total as usize);
        for k in 1..=total {
            let i = (0..weights.len())
                .max_by(|&a, &b| {
                    let da = f64::from(weights[a]) * f64::from(k) / f64::from(total)
                        - f64::from(sent[a]);
                    let db = f64::from(weights[b]) * f64::from(k) / f64::from(total)
                        - f64::from(sent[b]);
                    da.total_cmp(&db).then(b.cmp(&a))
                })
                .unwrap_or(0);
            sent[i] += 1;
            cycle.push(i);
        }
        let name = templates
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(":");
        Ok(Workload {
            name,
            templates,
            cycle,
        })
    }

    /// The pipeline batches of one connection: `pipeline` requests each,
    /// enough batches that the cycle lines up again after the last.
    pub fn batches(&self, pipeline: usize) -> Vec<Batch> {
        let p = pipeline.max(1);
        let n = self.cycle.len() / gcd(p, self.cycle.len());
        (0..n)
            .map(|b| {
                let mut batch = Batch::default();
                for j in 0..p {
                    let kind = self.cycle[(b * p + j) % self.cycle.len()];
                    let t = &self.templates[kind];
                    let base = batch.bytes.len();
                    batch.bytes.extend_from_slice(&t.bytes);
                    batch
                        .slots
                        .extend(t.slots.iter().map(|&(at, s)| (base + at, s)));
                    batch.ends.push(batch.bytes.len());
                    batch.kinds.push(kind as u8);
                }
                batch
            })
            .collect()
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Up to `pipeline` encoded requests sent together.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    /// All requests, back to back.
    pub bytes: Vec<u8>,
    /// Number fields to fill before each send.
    pub slots: Vec<(usize, Slot)>,
    /// End offset of each request in `bytes`.
    pub ends: Vec<usize>,
    /// Template index of each request.
    pub kinds: Vec<u8>,
}

impl Batch {
    /// Fills the number fields of the first `n` requests; returns their byte length.
    pub fn fill(&mut self, n: usize, keys: &mut KeyGen) -> usize {
        let end = self.ends[n - 1];
        for &(at, slot) in &self.slots {
            if at >= end {
                break;
            }
            let v = match slot {
                Slot::Key => keys.next(),
                Slot::Noise => keys.noise(),
            };
            write_digits(&mut self.bytes[at..at + DIGITS], v);
        }
        end
    }
}

/// Writes `v` as exactly `out.len()` decimal digits, zero-padded.
pub fn write_digits(out: &mut [u8], mut v: u64) {
    // Two digits per division, from a table of "00".."99".
    const PAIRS: [[u8; 2]; 100] = {
        let mut t = [[0u8; 2]; 100];
        let mut i = 0;
        while i < 100 {
            t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
            i += 1;
        }
        t
    };
    let mut chunks = out.rchunks_exact_mut(2);
    for pair in &mut chunks {
        pair.copy_from_slice(&PAIRS[(v % 100) as usize]);
        v /= 100;
    }
    if let [b] = chunks.into_remainder() {
        *b = b'0' + (v % 10) as u8;
    }
}

/// How keys are drawn from `0..keyspace`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform,
    /// Zipf with this exponent: key 0 hottest.
    Zipf(f64),
    /// 0, 1, 2 ... (each thread a stripe), for prefilling.
    Sequential,
}

impl std::str::FromStr for KeyDist {
    type Err = String;
    fn from_str(s: &str) -> Result<KeyDist, String> {
        match s {
            "uniform" => Ok(KeyDist::Uniform),
            "zipf" | "zipfian" => Ok(KeyDist::Zipf(0.99)),
            "sequential" => Ok(KeyDist::Sequential),
            _ => match s.strip_prefix("zipf:") {
                Some(e) => match e.parse::<f64>() {
                    Ok(x) if x > 0.0 && x.is_finite() => Ok(KeyDist::Zipf(x)),
                    _ => Err(format!("bad zipf exponent '{e}'")),
                },
                None => Err(format!(
                    "unknown key distribution '{s}' (uniform, zipf, zipf:EXP, sequential)"
                )),
            },
        }
    }
}

/// A per-thread key source.
#[derive(Debug)]
pub struct KeyGen {
    dist: KeyDist,
    n: u64,
    rng: SmallRng,
    zipf: Option<Zipf<f64>>,
    next: u64,
    step: u64,
}

impl KeyGen {
    /// Keys in `0..n` for thread `thread` of `threads`, seeded by `seed`.
    pub fn new(dist: KeyDist, n: u64, seed: u64, thread: u64, threads: u64) -> KeyGen {
        let n = n.clamp(1, MAX_KEYSPACE);
        let zipf = match dist {
            // `Zipf::new` fails only for n < 1 or a negative exponent, both excluded.
            KeyDist::Zipf(s) => Zipf::new(n as f64, s).ok(),
            _ => None,
        };
        KeyGen {
            dist,
            n,
            rng: SmallRng::seed_from_u64(seed ^ thread.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            zipf,
            next: thread,
            step: threads.max(1),
        }
    }

    /// The next key number.
    #[inline]
    pub fn next(&mut self) -> u64 {
        match (self.dist, &self.zipf) {
            (KeyDist::Zipf(_), Some(z)) => (z.sample(&mut self.rng) as u64 - 1).min(self.n - 1),
            (KeyDist::Sequential, _) => {
                let k = self.next % self.n;
                self.next += self.step;
                k
            }
            _ => self.rng.random_range(0..self.n),
        }
    }

    /// A uniform number of [`DIGITS`] digits.
    #[inline]
    pub fn noise(&mut self) -> u64 {
        self.rng.random_range(0..MAX_KEYSPACE)
    }
}

#[cfg(test)]
mod tests;
