// Random command sequences over every family, on a small pool of keys shared by all types
// (so type errors, overwrites and deletions on emptying happen often).

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
    fn pick(&mut self, xs: &[&str]) -> String {
        xs[self.below(xs.len())].to_string()
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const KEYS: &[&str] = &["k0", "k1", "k2", "k3", "k4", "k5"];

fn random_command(r: &mut Rng) -> Vec<String> {
    let k = r.pick(KEYS);
    let k2 = r.pick(KEYS);
    let m = |r: &mut Rng| format!("m{}", r.below(6));
    let n = |r: &mut Rng| (r.below(7) as i64 - 2).to_string();
    let s = |x: &str| x.to_string();
    let mut v: Vec<String> = Vec::new();
    match r.below(78) {
        0 => v.extend([s("SET"), k, n(r)]),
        1 => {
            v.extend([s("SET"), k, m(r)]);
            v.push(r.pick(&["NX", "XX", "GET", "KEEPTTL", "EX", "PX"]));
            if v[3] == "EX" {
                v.push(s("100"));
            } else if v[3] == "PX" {
                v.push(s("3"));
            }
        }
        2 => v.extend([s(&r.pick(&["INCR", "DECR"])), k]),
        3 => v.extend([s(&r.pick(&["INCRBY", "DECRBY", "INCRBYFLOAT"])), k, n(r)]),
        4 => v.extend([s("APPEND"), k, m(r)]),
        5 => v.extend([s("SETRANGE"), k, r.below(4).to_string(), s(&r.pick(&["", "ab"]))]),
        6 => v.extend([s(&r.pick(&["GET", "STRLEN", "GETDEL"])), k]),
        7 => v.extend([s("GETEX"), k, s(&r.pick(&["EX", "PERSIST"]))]),
        8 => v.extend([s("MSET"), k, m(r), k2, m(r)]),
        9 => v.extend([s("MSETNX"), k, m(r), k2, m(r)]),
        10 => v.extend([s("MGET"), k, k2]),
        11 => v.extend([s("GETSET"), k, m(r)]),
        12 => v.extend([s(&r.pick(&["DEL", "UNLINK", "EXISTS", "TOUCH"])), k, k2]),
        13 => v.extend([s(&r.pick(&["EXPIRE", "PEXPIRE"])), k, s(&r.pick(&["100", "-1", "200"]))]),
        14 => {
            if r.chance(30) {
                v.extend([s("PEXPIRE"), k, s("3")]);
            } else {
                v.extend([s(&r.pick(&["PERSIST", "TTL", "TYPE"])), k]);
            }
        }
        15 => v.extend([s(&r.pick(&["RENAME", "RENAMENX"])), k, k2]),
        16 => v.extend([s("COPY"), k, k2, s(&r.pick(&["REPLACE", "DB"]))]),
        17 => v.extend([s("MOVE"), k, s("1")]),
        18 => v.extend([s("SELECT"), s(&r.pick(&["0", "0", "1"]))]),
        19 => v.extend([s(&r.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"])), k, m(r), m(r)]),
        20 => {
            v.extend([s(&r.pick(&["LPOP", "RPOP"])), k]);
            if r.chance(50) {
                v.push(r.below(4).to_string());
            }
        }
        21 => v.extend([s("LSET"), k, n(r), m(r)]),
        22 => v.extend([s("LINSERT"), k, s(&r.pick(&["BEFORE", "AFTER"])), m(r), m(r)]),
        23 => v.extend([s("LREM"), k, n(r), m(r)]),
        24 => v.extend([s("LTRIM"), k, n(r), n(r)]),
        25 => v.extend([
            s("LMOVE"),
            k,
            k2,
            s(&r.pick(&["LEFT", "RIGHT"])),
            s(&r.pick(&["LEFT", "RIGHT"])),
        ]),
        26 => v.extend([s("RPOPLPUSH"), k, k2]),
        27 => v.extend([
            s("LMPOP"),
            s("2"),
            k,
            k2,
            s(&r.pick(&["LEFT", "RIGHT"])),
            s("COUNT"),
            (1 + r.below(3)).to_string(),
        ]),
        28 => v.extend([s(&r.pick(&["LRANGE", "LINDEX", "LLEN", "LPOS"])), k, s("0"), s("-1")]),
        29 => v.extend([s("SADD"), k, m(r), m(r)]),
        30 => v.extend([s("SREM"), k, m(r), m(r)]),
        31 => v.extend([s("SMOVE"), k, k2, m(r)]),
        32 => v.extend([s("SPOP"), k, s("10")]),
        33 => v.extend([
            s(&r.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"])),
            k,
            k2,
            r.pick(KEYS),
        ]),
        34 => v.extend([s(&r.pick(&["SMEMBERS", "SCARD", "SISMEMBER"])), k, m(r)]),
        35 => v.extend([s("HSET"), k, m(r), n(r), m(r), n(r)]),
        36 => v.extend([s("HSETNX"), k, m(r), n(r)]),
        37 => v.extend([s("HDEL"), k, m(r), m(r)]),
        38 => v.extend([s(&r.pick(&["HINCRBY", "HINCRBYFLOAT"])), k, m(r), n(r)]),
        39 => v.extend([s(&r.pick(&["HGET", "HEXISTS", "HSTRLEN"])), k, m(r)]),
        40 => v.extend([s(&r.pick(&["HGETALL", "HLEN", "HKEYS"])), k]),
        41 => v.extend([s("ZADD"), k, n(r), m(r), n(r), m(r)]),
        42 => {
            v.extend([s("ZADD"), k, s(&r.pick(&["NX", "XX", "GT", "LT", "CH"]))]);
            v.extend([n(r), m(r)]);
        }
        43 => v.extend([s("ZINCRBY"), k, n(r), m(r)]),
        44 => v.extend([s("ZREM"), k, m(r), m(r)]),
        45 => {
            v.extend([s(&r.pick(&["ZPOPMIN", "ZPOPMAX"])), k]);
            if r.chance(50) {
                v.push(r.below(4).to_string());
            }
        }
        46 => v.extend([s("ZREMRANGEBYRANK"), k, n(r), n(r)]),
        47 => v.extend([s("ZREMRANGEBYSCORE"), k, n(r), n(r)]),
        // (ZREMRANGEBYLEX over mixed scores is undefined: the hand-written cases cover it.)
        48 => v.extend([s("ZREMRANGEBYSCORE"), k, s("(0"), s("+inf")]),
        49 => v.extend([
            s(&r.pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"])),
            k,
            s("2"),
            k2,
            r.pick(KEYS),
        ]),
        50 => v.extend([s("ZRANGESTORE"), k, k2, n(r), n(r)]),
        51 => v.extend([
            s("ZMPOP"),
            s("2"),
            k,
            k2,
            s(&r.pick(&["MIN", "MAX"])),
            s("COUNT"),
            (1 + r.below(3)).to_string(),
        ]),
        52 => v.extend([s(&r.pick(&["ZSCORE", "ZRANK"])), k, m(r)]),
        53 => v.extend([s("ZRANGE"), k, s("0"), s("-1")]),
        54 => v.extend([
            s("GEOADD"),
            k,
            format!("13.{}", r.below(9)),
            format!("38.{}", r.below(9)),
            m(r),
        ]),
        55 => {
            v.extend([
                s("GEOSEARCHSTORE"),
                k,
                k2,
                s("FROMLONLAT"),
                s("13.5"),
                s("38.5"),
                s("BYRADIUS"),
                s(&r.pick(&["1", "100"])),
                s("km"),
            ]);
        }
        56 => v.extend([
            s("GEORADIUS"),
            k,
            s("13.5"),
            s("38.5"),
            s(&r.pick(&["1", "100"])),
            s("km"),
            s(&r.pick(&["STORE", "STOREDIST"])),
            k2,
        ]),
        57 => v.extend([s("GEOPOS"), k, m(r)]),
        58 => {
            v.extend([s("SORT"), k]);
            if r.chance(50) {
                v.push(s("ALPHA"));
            }
            if r.chance(50) {
                v.extend([s("STORE"), k2]);
            }
        }
        59 => v.extend([s("SWAPDB"), s("0"), s("1")]),
        60 => {
            if r.chance(10) {
                v.push(s("FLUSHDB"));
            } else {
                v.extend([s("DBSIZE")]);
            }
        }
        61 => v.extend([s("BLPOP"), k, k2, s("0")]),
        62 => v.extend([s("BZPOPMIN"), k, s("0")]),
        63 => v.extend([s("BLMOVE"), k, k2, s("LEFT"), s("RIGHT"), s("0")]),
        64 => v.extend([s("SETBIT"), k, r.below(40).to_string(), r.pick(&["0", "1"])]),
        65 => v.extend([s("GETBIT"), k, r.below(40).to_string()]),
        66 => v.extend([s("BITOP"), r.pick(&["AND", "OR", "XOR"]), k, k2, r.pick(KEYS)]),
        67 => v.extend([s("BITOP"), s("NOT"), k, k2]),
        68 => v.extend([
            s("BITFIELD"),
            k,
            s("OVERFLOW"),
            r.pick(&["WRAP", "SAT", "FAIL"]),
            s("INCRBY"),
            r.pick(&["i4", "u4", "i8"]),
            r.below(20).to_string(),
            n(r),
        ]),
        69 => v.extend([s("BITFIELD"), k, s("SET"), s("u8"), r.below(20).to_string(), n(r)]),
        // Streams: explicit IDs (the clock is not shared), trims, groups.
        70 | 71 => {
            v.extend([s("XADD"), k]);
            if r.chance(30) {
                v.extend([s("MAXLEN"), r.below(3).to_string()]);
            }
            v.extend([format!("{}-*", 1 + r.below(9)), m(r), n(r)]);
        }
        72 => v.extend([s("XDEL"), k, format!("{}-{}", 1 + r.below(9), r.below(2))]),
        73 => v.extend([s("XTRIM"), k, s("MAXLEN"), r.below(3).to_string()]),
        74 => {
            v.extend([s("XGROUP"), s("CREATE"), k, s("g"), s("0")]);
            if r.chance(50) {
                v.push(s("MKSTREAM"));
            }
        }
        75 => v.extend([s("XREADGROUP"), s("GROUP"), s("g"), m(r), s("STREAMS"), k, s(">")]),
        76 => v.extend([s(&r.pick(&["XLEN", "XINFO"])), k]),
        _ => v.extend([s("XGROUP"), s(&r.pick(&["DESTROY", "CREATECONSUMER"])), k, s("g"), m(r)]),
    }
    // XINFO's key follows a subcommand; XGROUP DESTROY takes no consumer.
    if v[0] == "XINFO" {
        v.insert(1, s("STREAM"));
    }
    if v[0] == "XGROUP" && v[1] == "DESTROY" {
        v.pop();
    }
    if v[0] == "COPY" && v[3] == "DB" {
        v.push(s("1"));
    }
    v
}
