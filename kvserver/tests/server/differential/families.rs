//! What the differential run sends: a seeded generator, argument makers over a small
//! keyspace and lists of boundary and malformed values, and one table of command generators
//! per family. A family that lands adds its table to [`FAMILIES`].

// ---------------------------------------------------------------------------------------------
// Random choices
// ---------------------------------------------------------------------------------------------

/// splitmix64: small, seedable, good enough to pick commands.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// One generated command: its arguments, name first.
pub type Cmd = Vec<Vec<u8>>;

pub(super) fn key(r: &mut Rng) -> Vec<u8> {
    const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "k4", "{t}a", "{t}b", "n", "f", ""];
    r.pick(KEYS).as_bytes().to_vec()
}

pub(super) fn value(r: &mut Rng) -> Vec<u8> {
    const VALUES: &[&str] = &[
        "v",
        "abc",
        "0",
        "1",
        "-1",
        "10",
        "12345",
        "007",
        "-0",
        "+1",
        " 1",
        "1.5",
        "3.0e3",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "",
        "0x10",
        "inf",
        "nan",
    ];
    match r.below(10) {
        0 => vec![b'x'; [43, 44, 45, 100][r.below(4)]],
        1 => b"a\r\nb\0c".to_vec(),
        2 => r.below(100_000).to_string().into_bytes(),
        _ => r.pick(VALUES).as_bytes().to_vec(),
    }
}

pub(super) fn int(r: &mut Rng) -> Vec<u8> {
    const INTS: &[&str] = &[
        "0",
        "1",
        "-1",
        "2",
        "5",
        "-3",
        "100",
        "-100",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "abc",
        "",
        "1.5",
        " 1",
        "01",
        "+1",
        "-0",
    ];
    if r.chance(40) {
        (r.below(40) as i64 - 20).to_string().into_bytes()
    } else {
        r.pick(INTS).as_bytes().to_vec()
    }
}

/// INCRBYFLOAT operands: ordinary, beyond `f64`, beyond `long double`, malformed.
fn float(r: &mut Rng) -> Vec<u8> {
    const FLOATS: &[&str] = &[
        "1.5",
        "-0.5",
        "0",
        "1e3",
        "inf",
        "-inf",
        "nan",
        "abc",
        "0x10",
        "1e5000",
        "1e-400",
        "",
        "3.0e-2",
        "+.5",
        "1.",
        " 1",
        "1e",
        "10.1",
        "-1e-5",
        "5",
        "0x1p-3",
        "1e400",
        "0.1",
        "1.18e4932",
        "-1.1e4932",
        "12345.6",
        "1e-17",
    ];
    r.pick(FLOATS).as_bytes().to_vec()
}

/// A relative expire in seconds: long enough to outlive a run, or invalid. Mostly random,
/// so that two relative deadlines rarely tie: whether `EXPIRE k t GT` after `SETEX k t v`
/// succeeds depends on whether a millisecond passed between them, on either server.
fn seconds(r: &mut Rng) -> Vec<u8> {
    if r.chance(60) {
        return (100 + r.below(1_000_000)).to_string().into_bytes();
    }
    const S: &[&str] = &[
        "100",
        "1000",
        "5000",
        "0",
        "-1",
        "abc",
        "9223372036854775807",
        "99999999999999999",
        "1.5",
        "",
    ];
    r.pick(S).as_bytes().to_vec()
}

fn millis(r: &mut Rng) -> Vec<u8> {
    if r.chance(60) {
        return (100_000 + r.below(1_000_000_000)).to_string().into_bytes();
    }
    const MS: &[&str] = &[
        "100000",
        "2000000",
        "0",
        "-5",
        "abc",
        "9223372036854775807",
        "9223372036854775",
    ];
    r.pick(MS).as_bytes().to_vec()
}

/// Absolute deadlines: far future, long past, invalid.
fn unix_seconds(r: &mut Rng) -> Vec<u8> {
    r.pick(&["4000000000", "4100000000", "1000", "0", "-1", "x"])
        .as_bytes()
        .to_vec()
}

fn unix_millis(r: &mut Rng) -> Vec<u8> {
    r.pick(&["4000000000000", "4100000000123", "1000", "0", "-1"])
        .as_bytes()
        .to_vec()
}

fn db_index(r: &mut Rng) -> Vec<u8> {
    r.pick(&["0", "1", "2", "15", "16", "-1", "x"])
        .as_bytes()
        .to_vec()
}

fn pattern(r: &mut Rng) -> Vec<u8> {
    r.pick(&["*", "k*", "k[0-2]", "?", "{t}*", "*a*", "[", "k\\1", "n"])
        .as_bytes()
        .to_vec()
}

/// Builds a command from its name and argument makers.
pub(super) fn make(name: &str, parts: &[fn(&mut Rng) -> Vec<u8>], r: &mut Rng) -> Cmd {
    let mut c = vec![name.as_bytes().to_vec()];
    c.extend(parts.iter().map(|p| p(r)));
    c
}

pub fn word(w: &str) -> Vec<u8> {
    w.as_bytes().to_vec()
}

// ---------------------------------------------------------------------------------------------
// Command families: one table each
// ---------------------------------------------------------------------------------------------

/// A generator of one command (name and arguments).
pub(super) type Gen = fn(&mut Rng) -> Cmd;

/// A command family: a name for reports and its generators.
pub struct Family {
    /// Family name.
    pub name: &'static str,
    /// Generators, each equally likely within the family.
    pub commands: &'static [Gen],
    /// Relative weight of the family.
    pub weight: usize,
}

/// SET's and GETEX's options, valid or not, in random order.
fn expire_options(r: &mut Rng, for_set: bool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for _ in 0..r.below(4) {
        match r.below(if for_set { 9 } else { 6 }) {
            0 => out.extend([word("EX"), seconds(r)]),
            1 => out.extend([word("PX"), millis(r)]),
            // SET with a past EXAT/PXAT: Redis stores the key already expired and DBSIZE
            // counts it until active expiry runs (timing); we delete it at once. So SET gets
            // future or invalid absolute times only.
            2 if for_set => out.extend([word("EXAT"), word(r.pick(&["4000000000", "0", "x"]))]),
            3 if for_set => out.extend([word("PXAT"), word(r.pick(&["4000000000000", "-1"]))]),
            2 => out.extend([word("EXAT"), unix_seconds(r)]),
            3 => out.extend([word("PXAT"), unix_millis(r)]),
            4 => out.push(word(if for_set { "KEEPTTL" } else { "PERSIST" })),
            5 => out.push(word(r.pick(&["EX", "BOGUS", "NX"]))),
            6 => out.push(word("NX")),
            7 => out.push(word("XX")),
            _ => out.push(word("GET")),
        }
    }
    out
}

/// Strings: every command of the family, with options.
pub static STRINGS: &[Gen] = &[
    |r| make("GET", &[key], r),
    |r| {
        let mut c = make("SET", &[key, value], r);
        c.extend(expire_options(r, true));
        c
    },
    |r| make("SETNX", &[key, value], r),
    |r| make("SETEX", &[key, seconds, value], r),
    |r| make("PSETEX", &[key, millis, value], r),
    |r| make("GETSET", &[key, value], r),
    |r| make("GETDEL", &[key], r),
    |r| {
        let mut c = make("GETEX", &[key], r);
        c.extend(expire_options(r, false));
        c
    },
    |r| {
        let mut c = vec![word("MGET")];
        c.extend((0..1 + r.below(4)).map(|_| key(r)));
        c
    },
    |r| {
        let mut c = vec![word(r.pick(&["MSET", "MSETNX"]))];
        for _ in 0..1 + r.below(3) {
            c.extend([key(r), value(r)]);
        }
        c
    },
    |r| make("APPEND", &[key, value], r),
    |r| make("STRLEN", &[key], r),
    |r| make(r.pick(&["GETRANGE", "SUBSTR"]), &[key, int, int], r),
    |r| {
        let offset = |r: &mut Rng| {
            if r.chance(20) {
                word(r.pick(&["1000000", "536870912", "-1", "x"]))
            } else {
                r.below(20).to_string().into_bytes()
            }
        };
        // Offsets stay small (a 512 MB string per replay would make the run slow); the limit
        // itself is checked through its error.
        vec![word("SETRANGE"), key(r), offset(r), value(r)]
    },
    |r| make(r.pick(&["INCR", "DECR"]), &[key], r),
    |r| make(r.pick(&["INCRBY", "DECRBY"]), &[key, int], r),
    |r| make("INCRBYFLOAT", &[key, float], r),
];

/// Keys: deletion, existence, expiry, renaming, copying, listing.
pub static KEYS: &[Gen] = &[
    |r| {
        let mut c = vec![word(r.pick(&["DEL", "UNLINK", "EXISTS", "TOUCH"]))];
        c.extend((0..1 + r.below(3)).map(|_| key(r)));
        c
    },
    |r| make("TYPE", &[key], r),
    |r| {
        let (name, time): (&str, fn(&mut Rng) -> Vec<u8>) = match r.below(4) {
            0 => ("EXPIRE", seconds),
            1 => ("PEXPIRE", millis),
            2 => ("EXPIREAT", unix_seconds),
            _ => ("PEXPIREAT", unix_millis),
        };
        let mut c = make(name, &[key, time], r);
        for _ in 0..r.below(3) {
            c.push(word(r.pick(&["NX", "XX", "GT", "LT", "nx", "bad"])));
        }
        c
    },
    |r| {
        make(
            r.pick(&["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]),
            &[key],
            r,
        )
    },
    |r| make("PERSIST", &[key], r),
    |r| make(r.pick(&["RENAME", "RENAMENX"]), &[key, key], r),
    |r| {
        let mut c = make("COPY", &[key, key], r);
        if r.chance(40) {
            c.extend([word("DB"), db_index(r)]);
        }
        if r.chance(40) {
            c.push(word("REPLACE"));
        }
        if r.chance(5) {
            c.push(word("BOGUS"));
        }
        c
    },
    |r| make("MOVE", &[key, db_index], r),
    |r| make("KEYS", &[pattern], r),
    |r| {
        let mut c = vec![word("SCAN"), word("0")];
        if r.chance(50) {
            c.extend([word("MATCH"), pattern(r)]);
        }
        c.extend([word("COUNT"), word("1000")]);
        if r.chance(30) {
            c.extend([word("TYPE"), word(r.pick(&["string", "hash", "nosuch"]))]);
        }
        if r.chance(5) {
            c.push(word("COUNT"));
        }
        c
    },
    |r| {
        // Not REFCOUNT: Redis's count depends on object sharing (COPY unshares an integer).
        // FREQ is refused under the default policy (noeviction). Not IDLETIME yet: a 120 s
        // run found a key idle 46 s on Redis and 0 with us, so some command records an access
        // that Redis's does not (not reproduced on a short replay); see the closing note.
        let sub = r.pick(&["ENCODING", "encoding", "NOSUCH", "FREQ", "freq"]);
        vec![word("OBJECT"), word(sub), key(r)]
    },
    |r| {
        let mut c = vec![word("OBJECT"), word(r.pick(&["HELP", "help"]))];
        if r.chance(20) {
            c.push(key(r));
        }
        c
    },
];

/// Connection commands with deterministic replies.
pub static CONNECTION: &[Gen] = &[
    |r| {
        let mut c = vec![word("PING")];
        if r.chance(50) {
            c.push(value(r));
        }
        c
    },
    |r| make("ECHO", &[value], r),
    |r| make("SELECT", &[db_index], r),
    |r| {
        vec![
            word("CLIENT"),
            word("SETNAME"),
            word(r.pick(&["me", "a b", "", "x\ny"])),
        ]
    },
    |_| vec![word("CLIENT"), word("GETNAME")],
    |r| vec![word("CLIENT"), word(r.pick(&["NOSUCH", "SETNAME"]))],
    |r| vec![word("HELLO"), word(r.pick(&["4", "0", "x", "1"]))],
    |r| make("AUTH", &[value], r),
];

/// Server commands with deterministic replies.
pub static SERVER: &[Gen] = &[
    |_| vec![word("DBSIZE")],
    |r| {
        let mut c = vec![word(if r.chance(70) { "FLUSHDB" } else { "FLUSHALL" })];
        if r.chance(30) {
            c.push(word(r.pick(&["ASYNC", "SYNC", "bad"])));
        }
        c
    },
    |r| {
        vec![
            word("CONFIG"),
            word("GET"),
            word(r.pick(&["maxmemory", "databases", "nosuchparam"])),
        ]
    },
];

// Sorted sets and geo ------------------------------------------------------------------------

fn member(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&[
        "a", "b", "c", "d", "e", "m1", "m2", "Palermo", "Catania", "",
    ]))
}

fn score(r: &mut Rng) -> Vec<u8> {
    if r.chance(50) {
        return (r.below(10) as i64 - 3).to_string().into_bytes();
    }
    word(r.pick(&[
        "0", "-0", "2.5", "-1.5", "inf", "-inf", "+inf", "1e300", "0.1", "nan", "abc", "", "1e",
        "0x10", "3e-5",
    ]))
}

fn score_bound(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&[
        "-inf", "+inf", "inf", "0", "1", "(1", "2.5", "(2.5", "-1", "(-inf", "abc", "((1", "1e300",
    ]))
}

fn lex_bound(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&[
        "-", "+", "[a", "(a", "[c", "(d", "[m1", "[", "(", "b", "[Palermo",
    ]))
}

pub(super) fn rank(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&[
        "0",
        "1",
        "2",
        "-1",
        "-2",
        "5",
        "-100",
        "100",
        "abc",
        "9223372036854775807",
    ]))
}

pub(super) fn count(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["0", "1", "2", "3", "10", "-1", "abc"]))
}

/// `numkeys` followed by that many keys (sometimes a wrong count).
pub(super) fn keys_with_count(r: &mut Rng) -> Vec<Vec<u8>> {
    let n = 1 + r.below(3);
    let mut c = vec![if r.chance(5) {
        word(r.pick(&["0", "-1", "9", "x"]))
    } else {
        n.to_string().into_bytes()
    }];
    for _ in 0..n {
        c.push(key(r));
    }
    c
}

/// WEIGHTS / AGGREGATE / WITHSCORES options of ZUNION and friends.
fn set_op_options(r: &mut Rng, c: &mut Cmd, nkeys: usize, withscores: bool) {
    if r.chance(30) {
        c.push(word("WEIGHTS"));
        for _ in 0..nkeys {
            c.push(word(r.pick(&["1", "2", "-1", "0.5", "inf", "x"])));
        }
    }
    if r.chance(30) {
        c.extend([
            word("AGGREGATE"),
            word(r.pick(&["SUM", "MIN", "MAX", "avg"])),
        ]);
    }
    if withscores && r.chance(50) {
        c.push(word("WITHSCORES"));
    }
}

fn zset_op(name: &str, store: bool, r: &mut Rng) -> Cmd {
    let mut c = vec![word(name)];
    if store {
        c.push(key(r));
    }
    let ks = keys_with_count(r);
    let n = ks.len() - 1;
    c.extend(ks);
    set_op_options(r, &mut c, n, !store);
    c
}

fn zrange_options(r: &mut Rng, c: &mut Cmd, withscores: bool) {
    if r.chance(30) {
        c.push(word("REV"));
    }
    if r.chance(25) {
        c.extend([word("LIMIT"), rank(r), count(r)]);
    }
    if withscores && r.chance(40) {
        c.push(word("WITHSCORES"));
    }
}

/// The one key lex-range commands use. Redis leaves their result unspecified when members
/// have different scores (its answer then depends on its skiplist's shape), so only this key,
/// written by a score-0 ZADD alone, sees them.
fn lex_key(_: &mut Rng) -> Vec<u8> {
    word("L")
}

/// ZRANGE / ZRANGESTORE after the name (and destination): source key, bounds by rank, score
/// or lex, options.
fn zrange_body(r: &mut Rng, c: &mut Cmd, withscores: bool) {
    match r.below(3) {
        0 => c.extend([key(r), rank(r), rank(r)]),
        1 => c.extend([key(r), score_bound(r), score_bound(r), word("BYSCORE")]),
        _ => c.extend([lex_key(r), lex_bound(r), lex_bound(r), word("BYLEX")]),
    }
    zrange_options(r, c, withscores);
}

/// Sorted-set commands (not ZRANDMEMBER: random; not WITHSCORE of ZRANK: Redis 7.2+).
pub static ZSETS: &[Gen] = &[
    |r| {
        let mut c = vec![word("ZADD"), key(r)];
        for opt in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
            if r.chance(12) {
                c.push(word(opt));
            }
        }
        for _ in 0..1 + r.below(4) {
            c.extend([score(r), member(r)]);
        }
        c
    },
    |r| make("ZINCRBY", &[key, score, member], r),
    |r| {
        let mut c = vec![word("ZREM"), key(r)];
        for _ in 0..1 + r.below(3) {
            c.push(member(r));
        }
        c
    },
    |r| make("ZSCORE", &[key, member], r),
    |r| make("ZMSCORE", &[key, member, member], r),
    |r| make(r.pick(&["ZRANK", "ZREVRANK"]), &[key, member], r),
    |r| make("ZCARD", &[key], r),
    |r| make("ZCOUNT", &[key, score_bound, score_bound], r),
    |r| make("ZLEXCOUNT", &[lex_key, lex_bound, lex_bound], r),
    |r| {
        let mut c = vec![word("ZADD"), word("L")];
        for _ in 0..1 + r.below(3) {
            c.extend([word("0"), member(r)]);
        }
        c
    },
    |r| {
        let mut c = vec![word("ZRANGE")];
        zrange_body(r, &mut c, true);
        c
    },
    |r| {
        let mut c = vec![word("ZRANGESTORE"), key(r)];
        zrange_body(r, &mut c, false);
        c
    },
    |r| {
        let name = r.pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]);
        let mut c = make(name, &[key, score_bound, score_bound], r);
        if r.chance(40) {
            c.push(word("WITHSCORES"));
        }
        if r.chance(25) {
            c.extend([word("LIMIT"), rank(r), count(r)]);
        }
        c
    },
    |r| {
        let name = r.pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX"]);
        let mut c = make(name, &[lex_key, lex_bound, lex_bound], r);
        if r.chance(25) {
            c.extend([word("LIMIT"), rank(r), count(r)]);
        }
        c
    },
    |r| {
        let mut c = make("ZREVRANGE", &[key, rank, rank], r);
        if r.chance(40) {
            c.push(word("WITHSCORES"));
        }
        c
    },
    |r| make("ZREMRANGEBYRANK", &[key, rank, rank], r),
    |r| make("ZREMRANGEBYSCORE", &[key, score_bound, score_bound], r),
    |r| make("ZREMRANGEBYLEX", &[lex_key, lex_bound, lex_bound], r),
    |r| {
        let mut c = make(r.pick(&["ZPOPMIN", "ZPOPMAX"]), &[key], r);
        if r.chance(50) {
            c.push(count(r));
        }
        c
    },
    |r| {
        let mut c = vec![word("ZMPOP")];
        c.extend(keys_with_count(r));
        c.push(word(r.pick(&["MIN", "MAX", "max", "MID"])));
        if r.chance(40) {
            c.extend([word("COUNT"), count(r)]);
        }
        c
    },
    |r| {
        // Timeouts that end soon (nothing wakes a lone client) or are refused.
        let mut c = vec![word(r.pick(&["BZPOPMIN", "BZPOPMAX"])), key(r)];
        if r.chance(50) {
            c.push(key(r));
        }
        c.push(word(r.pick(&["0.01", "0.002", "-1", "x", "inf", "1e300"])));
        c
    },
    |r| {
        let mut c = vec![word("BZMPOP"), word(r.pick(&["0.01", "-1", "x"]))];
        c.extend(keys_with_count(r));
        c.push(word(r.pick(&["MIN", "MAX", "max", "MID"])));
        if r.chance(40) {
            c.extend([word("COUNT"), count(r)]);
        }
        c
    },
    |r| zset_op(r.pick(&["ZUNION", "ZINTER", "ZDIFF"]), false, r),
    |r| {
        zset_op(
            r.pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]),
            true,
            r,
        )
    },
    |r| {
        let mut c = vec![word("ZINTERCARD")];
        c.extend(keys_with_count(r));
        if r.chance(30) {
            c.extend([word("LIMIT"), count(r)]);
        }
        c
    },
    |r| {
        // Small sets only: a listpack's ZSCAN answers everything at once, in order.
        vec![
            word("ZSCAN"),
            key(r),
            word("0"),
            word("COUNT"),
            word("1000"),
        ]
    },
];

/// A longitude and latitude, valid (distinct places) or not.
fn lon_lat(r: &mut Rng) -> [Vec<u8>; 2] {
    let (lon, lat) = [
        ("13.361389", "38.115556"),
        ("15.087269", "37.502669"),
        ("2.3522", "48.8566"),
        ("-0.1276", "51.5072"),
        ("0", "0"),
        ("-179.9", "85.05"),
        ("180.5", "0"),
        ("0", "86"),
        ("abc", "1"),
    ][r.below(9)];
    [word(lon), word(lat)]
}

fn unit(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["m", "km", "mi", "ft", "KM", "yd"]))
}

fn radius(r: &mut Rng) -> Vec<u8> {
    word(r.pick(&["100", "200", "1000", "5000000", "0", "-1", "x"]))
}

/// WITHCOORD / WITHDIST / WITHHASH, a sort order (always: unsorted output order is the
/// server's scan order), and sometimes COUNT (never ANY: which members it picks is unspecified).
fn geo_reply_options(r: &mut Rng, c: &mut Cmd, with: bool) {
    if with {
        for opt in ["WITHCOORD", "WITHDIST", "WITHHASH"] {
            if r.chance(30) {
                c.push(word(opt));
            }
        }
    }
    c.push(word(r.pick(&["ASC", "DESC"])));
    if r.chance(30) {
        c.extend([word("COUNT"), count(r)]);
    }
}

fn geo_search_body(r: &mut Rng, c: &mut Cmd) {
    if r.chance(50) {
        c.extend([word("FROMMEMBER"), member(r)]);
    } else {
        c.push(word("FROMLONLAT"));
        c.extend(lon_lat(r));
    }
    if r.chance(60) {
        c.extend([word("BYRADIUS"), radius(r), unit(r)]);
    } else {
        c.extend([word("BYBOX"), radius(r), radius(r), unit(r)]);
    }
}

/// Geo commands.
pub static GEO: &[Gen] = &[
    |r| {
        let mut c = vec![word("GEOADD"), key(r)];
        for opt in ["NX", "XX", "CH"] {
            if r.chance(10) {
                c.push(word(opt));
            }
        }
        for _ in 0..1 + r.below(3) {
            c.extend(lon_lat(r));
            c.push(member(r));
        }
        c
    },
    |r| make("GEOPOS", &[key, member, member], r),
    |r| {
        let mut c = make("GEODIST", &[key, member, member], r);
        if r.chance(60) {
            c.push(unit(r));
        }
        c
    },
    |r| make("GEOHASH", &[key, member, member], r),
    |r| {
        let mut c = vec![word(r.pick(&["GEOSEARCH", "GEOSEARCH"])), key(r)];
        geo_search_body(r, &mut c);
        geo_reply_options(r, &mut c, true);
        c
    },
    |r| {
        let mut c = vec![word("GEOSEARCHSTORE"), key(r), key(r)];
        geo_search_body(r, &mut c);
        geo_reply_options(r, &mut c, false);
        if r.chance(40) {
            c.push(word("STOREDIST"));
        }
        c
    },
    |r| {
        let by_member = r.chance(50);
        let name = match (by_member, r.chance(30)) {
            (false, false) => "GEORADIUS",
            (false, true) => "GEORADIUS_RO",
            (true, false) => "GEORADIUSBYMEMBER",
            (true, true) => "GEORADIUSBYMEMBER_RO",
        };
        let mut c = vec![word(name), key(r)];
        if by_member {
            c.push(member(r));
        } else {
            c.extend(lon_lat(r));
        }
        c.extend([radius(r), unit(r)]);
        geo_reply_options(r, &mut c, true);
        if !name.ends_with("_RO") && r.chance(30) {
            c.extend([word(r.pick(&["STORE", "STOREDIST"])), key(r)]);
        }
        c
    },
];

/// Every family that exists; a new family adds its table here.
pub static FAMILIES: &[Family] = &[
    Family {
        name: "strings",
        commands: STRINGS,
        weight: 10,
    },
    Family {
        name: "lists",
        commands: super::lists::LISTS,
        weight: 8,
    },
    Family {
        name: "sets",
        commands: super::sets::SETS,
        weight: 8,
    },
    Family {
        name: "hashes",
        commands: super::hashes::HASHES,
        weight: 8,
    },
    Family {
        name: "sort",
        commands: super::sort::SORTS,
        weight: 4,
    },
    Family {
        name: "keys",
        commands: KEYS,
        weight: 6,
    },
    Family {
        name: "connection",
        commands: CONNECTION,
        weight: 2,
    },
    Family {
        name: "server",
        commands: SERVER,
        weight: 1,
    },
    Family {
        name: "zsets",
        commands: ZSETS,
        weight: 10,
    },
    Family {
        name: "geo",
        commands: GEO,
        weight: 5,
    },
    Family {
        name: "bitmaps",
        commands: super::bitmaps::BITMAPS,
        weight: 5,
    },
    Family {
        name: "hyperloglog",
        commands: super::hyperloglog::HYPERLOGLOG,
        weight: 5,
    },
    Family {
        name: "pubsub",
        commands: super::pubsub::PUBSUB,
        weight: 3,
    },
    Family {
        name: "streams",
        commands: super::streams::STREAMS,
        weight: 6,
    },
    Family {
        name: "transactions",
        commands: super::transactions::TRANSACTIONS,
        weight: 4,
    },
];

/// One command: a family by weight, a generator, then sometimes a broken arity, an unknown
/// name, and always a random letter case of the name.
pub fn generate(r: &mut Rng) -> Cmd {
    if r.chance(1) {
        return vec![word(r.pick(&["NOSUCHCMD", "GETT", "sett"])), key(r)];
    }
    let total: usize = FAMILIES.iter().map(|f| f.weight).sum();
    let mut at = r.below(total);
    let family = FAMILIES
        .iter()
        .find(|f| {
            if at < f.weight {
                true
            } else {
                at -= f.weight;
                false
            }
        })
        .expect("weights cover the range");
    let mut c = family.commands[r.below(family.commands.len())](r);
    // A plain HELLO answers the connection id, which differs between the servers.
    let counted = super::pubsub::ONE_REPLY_EACH
        .iter()
        .any(|n| c[0].eq_ignore_ascii_case(n));
    if r.chance(3) && !c[0].eq_ignore_ascii_case(b"HELLO") && !counted {
        // (Not SPOP k, SRANDMEMBER k or HRANDFIELD k: without their count they pick at
        // random.)
        let random_without_count = [&b"SPOP"[..], b"SRANDMEMBER", b"HRANDFIELD"]
            .iter()
            .any(|n| c[0].eq_ignore_ascii_case(n));
        if r.chance(50) && c.len() > 1 && !random_without_count {
            c.pop();
        } else if ![&b"ZRANK"[..], b"ZREVRANK", b"SORT", b"SORT_RO"]
            .iter()
            .any(|n| c[0].eq_ignore_ascii_case(n))
        {
            // (Not ZRANK k m extra: Redis 7.0 counts arguments, 7.2 takes WITHSCORE there
            // and refuses other words with a syntax error, as we do. Not SORT ... BY extra:
            // a pattern without `*` leaves a set in hash-table order.)
            c.push(word("extra"));
        }
    }
    for b in c[0].iter_mut() {
        if r.chance(20) {
            b.make_ascii_lowercase();
        }
    }
    c
}
