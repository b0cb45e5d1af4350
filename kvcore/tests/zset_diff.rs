//! Differential test: seeded random sorted-set and geo command sequences run against our `Db`
//! and a real `redis-server` (on a Unix socket of its own, so the two tests running at once
//! can never reach each other's server, as two "free" TCP ports can collide), replies compared
//! byte for byte.
//!
//! `ZSET_DIFF_SEED` picks the seed (default: a fixed one), `ZSET_DIFF_STEPS` the number of
//! commands (default 5000). A mismatch panics with the seed, the step and the command.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kvcore::resp::skip_reply;
use kvcore::{Db, Session};

struct Redis {
    child: Child,
    conn: UnixStream,
    socket: PathBuf,
    buf: Vec<u8>,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Redis {
    fn start(name: &str) -> Option<Redis> {
        let socket = std::env::temp_dir().join(format!(
            "kvcore-zset-diff-{}-{name}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&socket);
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--unixsocket",
                socket.to_str()?,
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--dir",
                std::env::temp_dir().to_str()?,
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(conn) = UnixStream::connect(&socket) {
                return Some(Redis {
                    child,
                    conn,
                    socket,
                    buf: Vec::new(),
                });
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn call(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.conn.write_all(&req).unwrap();
        loop {
            if let Ok(Some((n, _))) = skip_reply(&self.buf) {
                let reply = self.buf[..n].to_vec();
                self.buf.drain(..n);
                return reply;
            }
            let mut chunk = [0u8; 65536];
            let n = self.conn.read(&mut chunk).unwrap();
            assert!(n > 0, "redis-server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// xorshift64*.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const KEYS: &[&str] = &["z0", "z1", "z2", "z3"];
const SCORES: &[&str] = &[
    "0", "1", "2", "3", "-1", "-2", "5", "10", "1.5", "-0.5", "0.1", "-0", "inf", "-inf", "+inf",
    "1e300", "-1e-300", "3.14159", "2.5", "7", "100", "0x10", "1e3",
];
const BOUNDS: &[&str] = &[
    "-inf", "+inf", "0", "1", "(1", "2", "(2", "-1", "(-1", "5", "(0.1", "1.5", "10", "(inf",
    "abc", "(",
];
const LEX: &[&str] = &[
    "-", "+", "[a", "(a", "[b", "(c", "[m3", "(m5", "[zz", "(", "x", "[", "[m10",
];

fn member(r: &mut Rng) -> String {
    if r.chance(2) {
        // Longer than zset-max-listpack-value: forces the large encoding.
        format!("long-member-{}-{}", r.below(3), "x".repeat(60))
    } else {
        format!("m{}", r.below(25))
    }
}

fn geo_point(r: &mut Rng) -> (String, String) {
    // Near the antimeridian and the poles too (some points fall outside and get errors).
    let (clon, clat) = [
        (13.4, 38.1),
        (-73.98, 40.75),
        (151.2, -33.87),
        (0.0, 0.0),
        (179.6, 84.6),
        (-179.7, -70.0),
    ][r.below(6)];
    let lon = clon + (r.below(200_000) as f64 - 100_000.0) / 100_000.0;
    let lat = clat + (r.below(200_000) as f64 - 100_000.0) / 100_000.0;
    (format!("{lon:.6}"), format!("{lat:.6}"))
}

fn command(r: &mut Rng) -> Vec<String> {
    let k = r.pick(KEYS).to_string();
    let k2 = r.pick(KEYS).to_string();
    let mut v: Vec<String> = Vec::new();
    let s = |x: &str| x.to_string();
    match r.below(41) {
        0..=7 => {
            v.push(s("ZADD"));
            v.push(k);
            for opt in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
                if r.chance(8) {
                    v.push(opt.to_string());
                }
            }
            for _ in 0..1 + r.below(8) {
                v.push(r.pick(SCORES).to_string());
                v.push(member(r));
            }
        }
        8 => v.extend([s("ZINCRBY"), k, r.pick(SCORES).into(), member(r)]),
        9 | 10 => {
            v.extend([s("ZREM"), k]);
            for _ in 0..1 + r.below(3) {
                v.push(member(r));
            }
        }
        11 => v.extend([s("ZSCORE"), k, member(r)]),
        12 => v.extend([s("ZMSCORE"), k, member(r), member(r)]),
        13 => v.extend([s(r.pick(&["ZRANK", "ZREVRANK"])), k, member(r)]),
        14 => v.extend([s("ZCARD"), k]),
        15 => v.extend([s("ZCOUNT"), k, r.pick(BOUNDS).into(), r.pick(BOUNDS).into()]),
        16 | 17 => {
            let i = |r: &mut Rng| (r.below(30) as i64 - 15).to_string();
            v.extend([s(r.pick(&["ZRANGE", "ZREVRANGE"])), k, i(r), i(r)]);
            if r.chance(50) {
                v.push(s("WITHSCORES"));
            }
            if v[0] == "ZRANGE" && r.chance(20) {
                v.push(s("REV"));
            }
        }
        18 | 19 => {
            let cmd = r.pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZRANGE"]);
            v.extend([s(cmd), k, r.pick(BOUNDS).into(), r.pick(BOUNDS).into()]);
            if cmd == "ZRANGE" {
                v.push(s("BYSCORE"));
                if r.chance(40) {
                    v.push(s("REV"));
                }
            }
            if r.chance(50) {
                v.push(s("WITHSCORES"));
            }
            if r.chance(40) {
                v.extend([
                    s("LIMIT"),
                    (r.below(6) as i64 - 1).to_string(),
                    (r.below(6) as i64 - 1).to_string(),
                ]);
            }
        }
        20 => {
            let cmd = r.pick(&[
                "ZRANGEBYLEX",
                "ZREVRANGEBYLEX",
                "ZLEXCOUNT",
                "ZREMRANGEBYLEX",
            ]);
            v.extend([s(cmd), s("lx"), r.pick(LEX).into(), r.pick(LEX).into()]);
            if cmd.contains("RANGEBYLEX") && !cmd.starts_with("ZREM") && r.chance(30) {
                v.extend([s("LIMIT"), r.below(4).to_string(), r.below(4).to_string()]);
            }
        }
        21 => {
            v.extend([s("ZADD"), s("lx")]);
            for _ in 0..1 + r.below(3) {
                v.push(s("0"));
                v.push(
                    r.pick(&["a", "b", "c", "m3", "m5", "m10", "zz", "aa", "b1"])
                        .into(),
                );
            }
        }
        22 => {
            v.extend([s(r.pick(&["ZPOPMIN", "ZPOPMAX"])), k]);
            if r.chance(60) {
                v.push((r.below(5) as i64 - 1).to_string());
            }
        }
        23 => {
            v.extend([s("ZMPOP"), s("2"), k, k2, s(r.pick(&["MIN", "MAX"]))]);
            if r.chance(50) {
                v.extend([s("COUNT"), (r.below(4) as i64).to_string()]);
            }
        }
        24 | 25 => {
            let cmd = r.pick(&[
                "ZUNION",
                "ZINTER",
                "ZDIFF",
                "ZUNIONSTORE",
                "ZINTERSTORE",
                "ZDIFFSTORE",
                "ZINTERCARD",
            ]);
            v.push(s(cmd));
            let store = cmd.ends_with("STORE");
            if store {
                v.push(r.pick(KEYS).into());
            }
            let n = 1 + r.below(3);
            v.push(n.to_string());
            for _ in 0..n {
                v.push(r.pick(KEYS).into());
            }
            if !cmd.starts_with("ZDIFF") && cmd != "ZINTERCARD" {
                if r.chance(30) {
                    v.push(s("WEIGHTS"));
                    for _ in 0..n {
                        v.push(r.pick(&["1", "2", "0.5", "-1", "0"]).into());
                    }
                }
                if r.chance(30) {
                    v.extend([s("AGGREGATE"), s(r.pick(&["SUM", "MIN", "MAX"]))]);
                }
            }
            if !store && cmd != "ZINTERCARD" && r.chance(50) {
                v.push(s("WITHSCORES"));
            }
            if cmd == "ZINTERCARD" && r.chance(50) {
                v.extend([s("LIMIT"), r.below(3).to_string()]);
            }
        }
        26 => {
            let i = |r: &mut Rng| (r.below(20) as i64 - 10).to_string();
            v.extend([s("ZREMRANGEBYRANK"), k, i(r), i(r)]);
        }
        27 => v.extend([
            s("ZREMRANGEBYSCORE"),
            k,
            r.pick(BOUNDS).into(),
            r.pick(BOUNDS).into(),
        ]),
        28 => {
            v.extend([s("ZRANGESTORE"), k2, k, s("0"), s("5")]);
            if r.chance(50) {
                v.push(s("REV"));
            }
        }
        29 => v.extend([s(r.pick(&["OBJECT", "TYPE"])), k]),
        30..=32 => {
            let g = r.pick(&["g0", "g1"]).to_string();
            v.extend([s("GEOADD"), g]);
            if r.chance(10) {
                v.push(s(r.pick(&["NX", "XX", "CH"])));
            }
            for _ in 0..1 + r.below(4) {
                let (lon, lat) = geo_point(r);
                v.extend([lon, lat, format!("p{}", r.below(60))]);
            }
        }
        33..=35 => {
            let g = r.pick(&["g0", "g1"]).to_string();
            let (lon, lat) = geo_point(r);
            v.extend([s("GEOSEARCH"), g]);
            if r.chance(30) {
                v.extend([s("FROMMEMBER"), format!("p{}", r.below(60))]);
            } else {
                v.extend([s("FROMLONLAT"), lon, lat]);
            }
            if r.chance(70) {
                v.extend([
                    s("BYRADIUS"),
                    (1 + r.below(150)).to_string(),
                    s(r.pick(&["km", "mi", "m"])),
                ]);
            } else {
                v.extend([
                    s("BYBOX"),
                    (1 + r.below(300)).to_string(),
                    (1 + r.below(300)).to_string(),
                    s("km"),
                ]);
            }
            if r.chance(50) {
                v.push(s(r.pick(&["ASC", "DESC"])));
            }
            if r.chance(30) {
                v.extend([s("COUNT"), (1 + r.below(5)).to_string()]);
            }
            for opt in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
                if r.chance(40) {
                    v.push(s(opt));
                }
            }
        }
        36 => {
            let g = r.pick(&["g0", "g1"]).to_string();
            v.extend([
                s("GEODIST"),
                g,
                format!("p{}", r.below(60)),
                format!("p{}", r.below(60)),
            ]);
            if r.chance(50) {
                v.push(s(r.pick(&["m", "km", "mi", "ft"])));
            }
        }
        37 => {
            let g = r.pick(&["g0", "g1"]).to_string();
            v.extend([
                s(r.pick(&["GEOPOS", "GEOHASH"])),
                g,
                format!("p{}", r.below(60)),
                format!("p{}", r.below(60)),
            ]);
        }
        38 => {
            let g = r.pick(&["g0", "g1"]).to_string();
            let (lon, lat) = geo_point(r);
            v.extend([
                s("GEOSEARCHSTORE"),
                s("gs"),
                g,
                s("FROMLONLAT"),
                lon,
                lat,
                s("BYRADIUS"),
                (1 + r.below(100)).to_string(),
                s("km"),
            ]);
            if r.chance(50) {
                v.push(s("STOREDIST"));
            }
        }
        39 if r.chance(50) => {
            let g = r.pick(&["g0", "g1"]).to_string();
            if r.chance(50) {
                let (lon, lat) = geo_point(r);
                v.extend([s(r.pick(&["GEORADIUS", "GEORADIUS_RO"])), g, lon, lat]);
            } else {
                v.extend([
                    s(r.pick(&["GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO"])),
                    g,
                    format!("p{}", r.below(60)),
                ]);
            }
            v.extend([(1 + r.below(150)).to_string(), s("km")]);
            if r.chance(50) {
                v.push(s(r.pick(&["ASC", "DESC"])));
            }
            if r.chance(30) {
                v.extend([s("COUNT"), (1 + r.below(5)).to_string()]);
            }
            if !v[0].ends_with("_RO") && r.chance(30) {
                v.extend([s(r.pick(&["STORE", "STOREDIST"])), s("gs")]);
            } else if r.chance(40) {
                v.push(s(r.pick(&["WITHDIST", "WITHCOORD", "WITHHASH"])));
            }
        }
        _ => {
            let n = r.pick(&["4", "8", "128"]);
            v.extend([s("CONFIG"), s("SET"), s("zset-max-listpack-entries"), s(n)]);
        }
    }
    if v.first().is_some_and(|c| c == "OBJECT") {
        v.insert(1, s("ENCODING"));
    }
    v
}

#[test]
fn random_sequences_match_redis() {
    run(false);
}

/// The same with both sides speaking RESP3 (`HELLO 3`): nested pairs, doubles, nulls.
#[test]
fn random_sequences_match_redis_resp3() {
    run(true);
}

fn run(resp3: bool) {
    let Some(mut redis) = Redis::start(if resp3 { "resp3" } else { "resp2" }) else {
        panic!("redis-server could not be started (scripts/test installs it)");
    };
    let seed: u64 = std::env::var("ZSET_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2026)
        + u64::from(resp3);
    let steps: usize = std::env::var("ZSET_DIFF_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    // Redis 7.0 replies doubles as "%.17g" (0.10000000000000001); 7.2 and we, in their short
    // form (0.1): against 7.0, its reply is compared with its doubles rewritten.
    let info = redis.call(&[b"INFO".to_vec(), b"server".to_vec()]);
    let before_7_2 = String::from_utf8_lossy(&info).contains("redis_version:7.0.");
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut db = Db::new();
    let mut session = Session::default();
    if resp3 {
        let hello: Vec<Vec<u8>> = vec![b"HELLO".to_vec(), b"3".to_vec()];
        redis.call(&hello);
        let mut out = Vec::new();
        db.dispatch(&mut session, &[b"HELLO", b"3"], &mut out);
    }
    // Searches that found something, and non-empty range replies: the sequence must exercise
    // real data, not only empty keys and errors.
    let (mut geo_found, mut ranges_found) = (0usize, 0usize);
    for step in 0..steps {
        let cmd = command(&mut r);
        let args: Vec<Vec<u8>> = cmd.iter().map(|a| a.as_bytes().to_vec()).collect();
        let want = redis.call(&args);
        if std::env::var("ZSET_DIFF_TRACE").is_ok() {
            eprintln!("{step}: {}", cmd.join(" "));
        }
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let mut got = Vec::new();
        db.dispatch(&mut session, &refs, &mut got);
        assert!(
            got == want || (before_7_2 && kvcore::resp::same_but_17g_doubles(&got, &want)),
            "mismatch (seed {seed}, resp3 {resp3}, step {step}) on: {}\n ours:  {:?}\n redis: {:?}",
            cmd.join(" "),
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
        let nonempty =
            want.starts_with(b"*") && !want.starts_with(b"*0\r") && !want.starts_with(b"*-1");
        if cmd[0] == "GEOSEARCH" && nonempty {
            geo_found += 1;
        }
        if cmd[0].starts_with("ZRANGE") && nonempty {
            ranges_found += 1;
        }
    }
    assert!(
        geo_found > steps / 100,
        "only {geo_found} searches found points"
    );
    assert!(
        ranges_found > steps / 100,
        "only {ranges_found} ranges found members"
    );
}
