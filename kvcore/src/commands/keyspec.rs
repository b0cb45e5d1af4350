//! Which arguments of a call are keys, and which of those the call writes.
//!
//! Most commands name their keys by fixed positions in the table (first, last, step). Commands
//! flagged [`MOVABLE_KEYS`] find them from their arguments: a `numkeys` count (ZUNIONSTORE,
//! ZINTER, ZMPOP ...), a `STORE`/`STOREDIST` option (GEORADIUS), or a subcommand (OBJECT
//! ENCODING key, MEMORY USAGE key). A server routes a call by these positions and, for calls
//! that write some keys and only read others, runs the command where the written key lives
//! (see [`crate::Db::dispatch_with_sources`]).

use smallvec::SmallVec;

use super::flags::{MOVABLE_KEYS, WRITE};
use super::{args, CommandSpec};

/// Key indices, usually few.
pub type KeyIndices = SmallVec<[usize; 4]>;

/// `numkeys` at `a[at]` followed by that many keys; nothing when malformed.
fn numkeys(a: &[&[u8]], at: usize) -> KeyIndices {
    let Some(n) = a.get(at).and_then(|n| args::int(n).ok()) else {
        return KeyIndices::new();
    };
    if n < 1 || n as u64 > (a.len() - at - 1) as u64 {
        return KeyIndices::new();
    }
    (at + 1..at + 1 + n as usize).collect()
}

/// The destination of SORT ... STORE key, if any (the last one given). Options are read in
/// order, skipping their arguments, so a key or pattern spelled "STORE" is not taken for one.
fn sort_store_key(a: &[&[u8]]) -> Option<usize> {
    let mut found = None;
    let mut i = 2;
    while i < a.len() {
        let left = a.len() - i - 1;
        if args::is(a[i], "LIMIT") && left >= 2 {
            i += 3;
        } else if (args::is(a[i], "BY") || args::is(a[i], "GET")) && left >= 1 {
            i += 2;
        } else if args::is(a[i], "STORE") && left >= 1 {
            found = Some(i + 1);
            i += 2;
        } else {
            i += 1;
        }
    }
    found
}

/// The destination of GEORADIUS[BYMEMBER] ... STORE|STOREDIST key, if any (the last one given).
fn geo_store_key(a: &[&[u8]]) -> Option<usize> {
    let mut found = None;
    let mut i = 5;
    while i + 1 < a.len() {
        if args::is(a[i], "STORE") || args::is(a[i], "STOREDIST") {
            found = Some(i + 1);
            i += 2;
        } else {
            i += 1;
        }
    }
    found
}

impl CommandSpec {
    /// Indices in `args` (command name at 0) of every key argument, movable ones included.
    /// Malformed calls (which the command will reject) may yield fewer keys.
    pub fn key_positions(&self, args: &[&[u8]]) -> KeyIndices {
        if !self.has(MOVABLE_KEYS) {
            return self.key_indices(args.len()).collect();
        }
        match self.name {
            "zunionstore" | "zinterstore" | "zdiffstore" => {
                let mut v = KeyIndices::new();
                if args.len() > 1 {
                    v.push(1);
                }
                v.extend(numkeys(args, 2));
                v
            }
            "zunion" | "zinter" | "zdiff" | "zintercard" | "zmpop" | "lmpop" | "sintercard" => {
                numkeys(args, 1)
            }
            "bzmpop" | "blmpop" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall"
            | "fcall_ro" => numkeys(args, 2),
            "xread" | "xreadgroup" => super::stream::read_key_positions(args)
                .into_iter()
                .collect(),
            "sort" => {
                let mut v = KeyIndices::new();
                if args.len() > 1 {
                    v.push(1);
                }
                v.extend(sort_store_key(args));
                v
            }
            "georadius" | "georadiusbymember" => {
                let mut v = KeyIndices::new();
                if args.len() > 1 {
                    v.push(1);
                }
                v.extend(geo_store_key(args));
                v
            }
            // DEBUG OBJECT|LISTPACK|QUICKLIST key; its other subcommands name no key.
            "debug" => {
                let keyed = ["OBJECT", "LISTPACK", "QUICKLIST"];
                if args.len() >= 3 && keyed.iter().any(|s| args::is(args[1], s)) {
                    SmallVec::from_slice(&[2])
                } else {
                    KeyIndices::new()
                }
            }
            // OBJECT <sub> key, MEMORY USAGE key.
            _ => {
                if args.len() >= 3 {
                    SmallVec::from_slice(&[2])
                } else {
                    KeyIndices::new()
                }
            }
        }
    }

    /// Indices of the keys the call may write (a subset of [`CommandSpec::key_positions`]):
    /// the destination of the *STORE forms and COPY, every key of other write commands, none
    /// for read-only commands.
    pub fn written_key_positions(&self, args: &[&[u8]]) -> KeyIndices {
        match self.name {
            "zunionstore" | "zinterstore" | "zdiffstore" | "zrangestore" | "geosearchstore"
            | "sinterstore" | "sunionstore" | "sdiffstore" | "pfmerge"
                if args.len() > 1 =>
            {
                SmallVec::from_slice(&[1])
            }
            "copy" | "bitop" if args.len() > 2 => SmallVec::from_slice(&[2]),
            "georadius" | "georadiusbymember" => geo_store_key(args).into_iter().collect(),
            "sort" => sort_store_key(args).into_iter().collect(),
            _ if self.has(WRITE) => self.key_positions(args),
            _ => KeyIndices::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::commands::lookup;

    fn keys(line: &str) -> (Vec<usize>, Vec<usize>) {
        let a: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let spec = lookup(a[0]).unwrap();
        (
            spec.key_positions(&a).to_vec(),
            spec.written_key_positions(&a).to_vec(),
        )
    }

    #[test]
    fn key_positions_of_every_shape() {
        assert_eq!(keys("GET k"), (vec![1], vec![]));
        assert_eq!(keys("SET k v"), (vec![1], vec![1]));
        assert_eq!(keys("MSET a 1 b 2"), (vec![1, 3], vec![1, 3]));
        assert_eq!(keys("COPY a b"), (vec![1, 2], vec![2]));
        assert_eq!(keys("RENAME a b"), (vec![1, 2], vec![1, 2]));
        assert_eq!(keys("ZADD z 1 a"), (vec![1], vec![1]));
        assert_eq!(
            keys("ZUNIONSTORE d 2 a b WEIGHTS 1 2"),
            (vec![1, 3, 4], vec![1])
        );
        assert_eq!(keys("ZINTERSTORE d 1 a"), (vec![1, 3], vec![1]));
        assert_eq!(keys("ZDIFFSTORE d 3 a b c"), (vec![1, 3, 4, 5], vec![1]));
        assert_eq!(keys("ZINTER 2 a b WITHSCORES"), (vec![2, 3], vec![]));
        assert_eq!(keys("ZUNION 1 a"), (vec![2], vec![]));
        assert_eq!(keys("ZDIFF 2 a b"), (vec![2, 3], vec![]));
        assert_eq!(keys("ZINTERCARD 2 a b LIMIT 5"), (vec![2, 3], vec![]));
        assert_eq!(keys("ZMPOP 2 a b MIN COUNT 2"), (vec![2, 3], vec![2, 3]));
        assert_eq!(keys("ZUNION 5 a b"), (vec![], vec![]));
        assert_eq!(keys("ZUNION x a b"), (vec![], vec![]));
        assert_eq!(keys("ZRANGESTORE d s 0 -1"), (vec![1, 2], vec![1]));
        assert_eq!(
            keys("GEOSEARCHSTORE d s FROMLONLAT 0 0 BYRADIUS 1 km"),
            (vec![1, 2], vec![1])
        );
        assert_eq!(
            keys("GEOSEARCH s FROMLONLAT 0 0 BYRADIUS 1 km"),
            (vec![1], vec![])
        );
        assert_eq!(keys("GEORADIUS s 0 0 1 km"), (vec![1], vec![]));
        assert_eq!(keys("GEORADIUS s 0 0 1 km STORE d"), (vec![1, 7], vec![7]));
        assert_eq!(
            keys("GEORADIUSBYMEMBER s m 1 km ASC STOREDIST d"),
            (vec![1, 7], vec![7])
        );
        assert_eq!(keys("GEORADIUS_RO s 0 0 1 km"), (vec![1], vec![]));
        assert_eq!(keys("OBJECT ENCODING k"), (vec![2], vec![]));
        assert_eq!(keys("MEMORY USAGE k"), (vec![2], vec![]));
        assert_eq!(keys("PING"), (vec![], vec![]));
        assert_eq!(keys("SINTERSTORE d a b"), (vec![1, 2, 3], vec![1]));
        assert_eq!(keys("PFMERGE d a b"), (vec![1, 2, 3], vec![1]));
        assert_eq!(keys("PFCOUNT a b"), (vec![1, 2], vec![]));
        assert_eq!(keys("SINTERCARD 2 a b LIMIT 3"), (vec![2, 3], vec![]));
        assert_eq!(keys("SMOVE a b m"), (vec![1, 2], vec![1, 2]));
        assert_eq!(keys("LMPOP 2 a b LEFT"), (vec![2, 3], vec![2, 3]));
        assert_eq!(keys("BLMPOP 0 1 a LEFT"), (vec![3], vec![3]));
        assert_eq!(keys("SORT s"), (vec![1], vec![]));
        assert_eq!(
            keys("SORT s BY w_* LIMIT 0 5 GET # STORE d"),
            (vec![1, 10], vec![10])
        );
        assert_eq!(keys("SORT s GET STORE"), (vec![1], vec![]));
        assert_eq!(keys("SORT_RO s BY w_*"), (vec![1], vec![]));
    }
}
