//! The express lane: `GET key` and `SET key value` (no options), the commands clients send
//! most, run by [`Db::express`] without the steps of the general dispatch that cannot apply
//! to them (the table lookup, the handler's call through a pointer and its option parsing,
//! the checks for MONITOR, a replica's view, WRITE and BLOCKING flags).
//!
//! Everything a client can see is what [`Db::run_admitted`] with the GET or SET handler
//! gives: the reply, the keyspace hits and misses, the access time or LFU counter of the key,
//! WATCH, keyspace events, the change log (AOF, replicas), the dirty count, and the command's
//! statistics, latency histogram and slow-log entry. A store in a state the lane does not
//! cover (monitored, a replica's) answers `None` and the host takes the general path.

use crate::commands::{self, CommandSpec};
use crate::db::{Db, Lap, Session};
use crate::events::class;
use crate::resp::{Proto, ReplyWriter};
use crate::value::{Stored, Value};

/// A command of the express lane, recognised by [`Express::of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Express {
    /// `GET key`.
    Get,
    /// `SET key value`.
    Set,
}

impl Express {
    /// The express command `args` is, by its name (any case) and number of arguments: a
    /// comparison of one word.
    #[inline(always)]
    pub fn of(args: &[&[u8]]) -> Option<Express> {
        let x = Express::named(args.first()?)?;
        (args.len() == x.arity()).then_some(x)
    }

    /// The express command called `name` (any case), whatever its arguments.
    #[inline(always)]
    fn named(name: &[u8]) -> Option<Express> {
        let &[a, b, c] = name else {
            return None;
        };
        // Setting bit 5 lowers a letter and turns no other byte into one of these letters.
        match u32::from_le_bytes([a, b, c, 0]) | 0x0020_2020 {
            W_GET => Some(Express::Get),
            W_SET => Some(Express::Set),
            _ => None,
        }
    }

    /// Its name in lower case followed by `\r`, as a little-endian word, for a scanner that
    /// reads the name and the end of its line at once: a word read there and or-ed with
    /// `0x0020_2020` equals this exactly when the name is this command's (in any case) and a
    /// `\r` follows it.
    #[inline(always)]
    pub(crate) fn word(self) -> u32 {
        match self {
            Express::Get => u32::from_le_bytes(*b"get\r"),
            Express::Set => u32::from_le_bytes(*b"set\r"),
        }
    }

    /// Its number of arguments, the name included.
    #[inline(always)]
    pub fn arity(self) -> usize {
        match self {
            Express::Get => 2,
            Express::Set => 3,
        }
    }
}

/// The rows of GET and SET, kept by each store (a static's lazy initialisation would cost a
/// check per command).
pub(crate) fn specs() -> [&'static CommandSpec; 2] {
    let find = |name: &[u8]| commands::lookup(name).expect("GET and SET are commands");
    [find(b"get"), find(b"set")]
}

/// What an express GET found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Nothing (written as such last).
    Miss,
    /// A value, written.
    Written,
    /// A live value not light enough to share the run's clock reading: written once the run
    /// is counted.
    Heavy,
    /// A key past its deadline, freed once the run is counted.
    Expired,
}

/// Whether writing `v` as GET's reply is light work (see [`Lap`]): a string of at most
/// [`crate::db::LIGHT_BYTES`]. Another type's error reply is timed alone, so that a run holds
/// only commands that succeeded.
#[inline(always)]
fn light(v: Stored<'_>) -> bool {
    match v {
        Stored::Int(_) | Stored::Value(Value::Int(_) | Value::Inline(_)) => true,
        Stored::Str(b) => b.len() <= crate::db::LIGHT_BYTES,
        Stored::Value(Value::Str(b)) => b.len() <= crate::db::LIGHT_BYTES,
        Stored::Value(Value::Raw(b)) => b.len() <= crate::db::LIGHT_BYTES,
        Stored::Value(_) => false,
    }
}

/// GET's reply of a value it found (WRONGTYPE for another type than a string).
#[inline(always)]
fn write_hit(out: &mut Vec<u8>, proto: Proto, v: Stored<'_>) {
    let mut w = ReplyWriter::new(out, proto);
    if let Err(e) = commands::strings::write_value(&mut w, v) {
        commands::strings::reply_err(&mut w, e);
    }
}

const W_GET: u32 = u32::from_le_bytes(*b"get\0");
const W_SET: u32 = u32::from_le_bytes(*b"set\0");

impl Db {
    /// Runs `x` (with `args`, as [`Express::of`] read them) for a session the store
    /// [`admits`](Db::admits), as [`Db::run_admitted`] would run it; its row of the table
    /// (for the host's own steps after a command), or `None` when this store is in a state
    /// the lane leaves to the general path (nothing was done then: see
    /// [`Db::express_open`]).
    #[inline]
    pub fn express(
        &mut self,
        session: &mut Session,
        x: Express,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) -> Option<&'static CommandSpec> {
        if !self.express_open(session) {
            return None;
        }
        Some(self.express_admitted(session, x, args, out))
    }

    /// Whether [`Db::express`] takes `session`'s commands now: not while a client MONITORs
    /// (the general path feeds it), on a replica, nor for the host's internal sessions.
    /// Only a command of the general path (or of another client) changes this, so a host
    /// may ask once for a run of express commands.
    #[inline]
    pub fn express_open(&self, session: &Session) -> bool {
        !(self.monitoring || self.replica || session.internal)
    }

    /// [`Db::express`] for a caller that has found [`Db::admits`] and [`Db::express_open`]
    /// true since the last command of the general path. (Not asserted for `admits`: another
    /// thread may change a user's rules meanwhile, which the caller sees at its next ask.)
    /// Always inlined: called in [`Db::express_run`]'s loop it cost a SET about 40 more
    /// instructions (callgrind, `redis-benchmark -P 16`).
    #[inline(always)]
    pub fn express_admitted(
        &mut self,
        session: &mut Session,
        x: Express,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) -> &'static CommandSpec {
        debug_assert!(self.express_open(session));
        let spec = self.express_specs[x as usize];
        #[cfg(debug_assertions)]
        if self.admits(session) {
            self.debug_check_admitted(session, spec, args.len());
        }
        // Timed alone (`Some`: from when), or in the lap's run while its work stays light
        // (see `Lap`).
        let mut start = None;
        if session.lapping && self.config.telemetry.shares_clock() {
            match session.lap {
                Some(lap) if lap.takes(x) => {}
                // A run of the other command ends; this one's starts.
                _ => session.lap = Some(Lap::at(self.lap_start(session))),
            }
        } else {
            start = Some(self.lap_start(session));
        }
        self.stats.commands += 1;
        if session.no_touch != self.no_touch {
            self.set_no_touch(session.no_touch);
        }
        let dbi = session.db;
        let key = args[1];
        let now = self.now;
        let mark = out.len();
        match x {
            Express::Get => {
                let mut found = Found::Miss;
                match self.dbs[dbi].get_unexpired(key, now) {
                    Ok(None) => {}
                    Ok(Some(n)) => {
                        let v = n.value();
                        if start.is_some() || light(v) {
                            self.stats.keyspace_hits += 1;
                            write_hit(out, session.proto, v);
                            found = Found::Written;
                        } else {
                            found = Found::Heavy;
                        }
                    }
                    Err(_) => found = Found::Expired,
                }
                if matches!(found, Found::Heavy | Found::Expired) {
                    if start.is_none() {
                        start = Some(self.lap_start(session));
                    }
                    // A live key was touched already; an expired one is freed now.
                    let ks = &mut self.dbs[dbi];
                    let n = match found {
                        Found::Heavy => ks.get_untouched(key, now),
                        _ => ks.get(key, now),
                    };
                    if let Some(n) = n {
                        self.stats.keyspace_hits += 1;
                        write_hit(out, session.proto, n.value());
                        found = Found::Written;
                    } else {
                        found = Found::Miss;
                    }
                }
                if found == Found::Miss {
                    self.stats.keyspace_misses += 1;
                    out.extend_from_slice(match session.proto {
                        Proto::Resp2 => b"$-1\r\n",
                        Proto::Resp3 => b"_\r\n",
                    });
                    self.key_miss(dbi, key);
                }
            }
            Express::Set => {
                let v = args[2];
                let ks = &mut self.dbs[dbi];
                if start.is_some() {
                    ks.set_plain(key, v, now);
                } else if v.len() > crate::db::LIGHT_BYTES || !ks.set_plain_light(key, v, now) {
                    start = Some(self.lap_start(session));
                    self.dbs[dbi].set_plain_put(key, v, now);
                }
                self.signal_modified(dbi, key);
                self.notify(class::STRING, "set", dbi, key);
                out.extend_from_slice(b"+OK\r\n");
                self.stats.dirty += 1;
                if self.changes.is_some() {
                    self.pull_keyspace_logs();
                    self.log_command(dbi, spec, args, &out[mark..]);
                }
            }
        }
        match start {
            Some(start) => self.count_run(session, spec, args, start, &out[mark..]),
            None => {
                if let Some(lap) = &mut session.lap {
                    lap.join(x);
                }
            }
        }
        self.pull_keyspace_logs();
        spec
    }

    /// [`Db::express_admitted`] for each command of `run` in turn (each an express command
    /// and its arguments, as [`Express::of`] read them), stopping after the first that leaves
    /// `out` holding `flush_at` bytes or more: how many ran, and the last one's row of the
    /// table. A host's run of pipelined express commands in one call, with the store borrowed
    /// once.
    #[inline]
    pub fn express_run<'r, 'a: 'r>(
        &mut self,
        session: &mut Session,
        run: impl Iterator<Item = (Express, &'r [&'a [u8]])>,
        out: &mut Vec<u8>,
        flush_at: usize,
    ) -> (usize, Option<&'static CommandSpec>) {
        let mut ran = 0;
        let mut spec = None;
        for (x, args) in run {
            spec = Some(self.express_admitted(session, x, args, out));
            ran += 1;
            if out.len() >= flush_at {
                break;
            }
        }
        (ran, spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::resp::Proto;
    use crate::testutil::Rng;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// One store that takes the express lane where it may, one that never does.
    struct Pair {
        fast: Db,
        slow: Db,
        sf: Session,
        ss: Session,
        taken: u64,
        /// Express commands that joined a run of the fast store's lap.
        shared: u64,
    }

    impl Pair {
        fn new(proto: Proto) -> Pair {
            let db = || {
                let mut db = Db::new();
                db.set_clock(Clock::Manual(1_000_000));
                db
            };
            let session = || Session {
                authenticated: true,
                proto,
                ..Session::default()
            };
            let (fast, mut sf) = (db(), session());
            // As a host does before a client's first command: its user looked up (the default
            // user may run everything, so the store admits it).
            fast.acl.refresh(&mut sf);
            Pair {
                fast,
                slow: db(),
                sf,
                ss: session(),
                taken: 0,
                shared: 0,
            }
        }

        /// Runs `args` on both; their replies must be the same bytes.
        fn run(&mut self, args: &[&[u8]]) -> Vec<u8> {
            let mut a = Vec::new();
            let mut ran = false;
            // The fast store laps as a host does (the lap stays in the session between
            // commands), so express commands share clock readings where they may.
            self.sf.lapping = true;
            let before = self.sf.lap.map_or(0, |l| l.run);
            // As a host runs a window's express commands: `express_run` (here a run of one).
            if let Some(x) = Express::of(args) {
                if self.fast.admits(&self.sf) && self.fast.express_open(&self.sf) {
                    let one = std::iter::once((x, args));
                    let (n, spec) = self.fast.express_run(&mut self.sf, one, &mut a, usize::MAX);
                    let name = self.fast.express_specs[x as usize].name;
                    assert_eq!((n, spec.map(|s| s.name)), (1, Some(name)));
                    ran = true;
                }
            }
            if ran {
                self.taken += 1;
                if self.sf.lap.map_or(0, |l| l.run) > before {
                    self.shared += 1;
                }
            } else {
                self.fast.dispatch(&mut self.sf, args, &mut a);
            }
            self.sf.lapping = false;
            let mut b = Vec::new();
            self.slow.dispatch(&mut self.ss, args, &mut b);
            assert_eq!(
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b),
                "{:?}",
                args.iter()
                    .map(|a| String::from_utf8_lossy(a))
                    .collect::<Vec<_>>()
            );
            a
        }

        fn both(&mut self, f: impl Fn(&mut Db)) {
            f(&mut self.fast);
            f(&mut self.slow);
        }

        /// Everything else the two stores show must agree too (once the fast store's lap
        /// is ended, as a host ends it before it waits).
        fn check_same(&mut self) {
            let (f, s) = (&mut self.fast, &mut self.slow);
            f.end_lap(&mut self.sf.lap, self.sf.id);
            assert_eq!(f.stats.commands, s.stats.commands);
            assert_eq!(f.stats.keyspace_hits, s.stats.keyspace_hits);
            assert_eq!(f.stats.keyspace_misses, s.stats.keyspace_misses);
            assert_eq!(f.stats.dirty, s.stats.dirty);
            assert_eq!(f.take_changes(), s.take_changes());
            assert_eq!(
                f.drain_events().collect::<Vec<_>>(),
                s.drain_events().collect::<Vec<_>>()
            );
            let calls = |db: &Db| {
                let snap = db.telemetry.snapshot(true);
                let mut v: Vec<_> = snap
                    .cmds
                    .iter()
                    .map(|(n, c)| {
                        (
                            *n,
                            c.calls,
                            c.failed,
                            c.rejected,
                            c.hist.as_ref().map(|h| h.len()),
                        )
                    })
                    .collect();
                v.sort();
                (v, snap.total_errors)
            };
            assert_eq!(calls(f), calls(s));
        }
    }

    /// An overwrite in place records the access as the general path does.
    #[test]
    fn overwrite_in_place_touches_the_key() {
        let mut p = Pair::new(Proto::Resp2);
        p.run(&[b"SET", b"k", b"va"]);
        p.both(|db| {
            db.clock_mut().advance(5000);
            db.refresh_clock();
        });
        p.run(&[b"SET", b"k", b"vb"]);
        assert_eq!(p.run(&[b"OBJECT", b"IDLETIME", b"k"]), b":0\r\n");
        assert_eq!(p.taken, 2);
    }

    /// Random GETs and SETs among other commands that give their keys every form (integers,
    /// strings held in the node or not, other types, deadlines, expired keys), with keyspace
    /// events, the change log, WATCH, LFU and LRU access tracking and RESP3 on and off: the
    /// express lane's replies, counters, events, log entries, watches and access fields are
    /// the general path's. Seeds 5 and 6 watch nothing and log nothing.
    #[test]
    fn express_lane_is_the_general_path() {
        for (seed, proto) in [
            (1, Proto::Resp2),
            (2, Proto::Resp3),
            (3, Proto::Resp2),
            (4, Proto::Resp3),
            (5, Proto::Resp2),
            (6, Proto::Resp3),
        ] {
            let watches = seed <= 4;
            let rng = Rng::new(seed);
            let mut p = Pair::new(proto);
            // Commands are timed by the real clock, and the fast store's runs span the test's
            // own work between them: at the default 10 ms a busy machine pausing this thread
            // puts an entry in one store's slow log and not the other's. A threshold no pause
            // reaches keeps runs sharing readings (as at the default) and the logs equal;
            // seed 4 logs every command instead, so both stores' entries are compared there.
            p.run(&[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"100000000"]);
            if seed == 3 || seed == 4 {
                p.both(|db| db.set_change_log(true));
                p.run(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"]);
            }
            if seed >= 3 {
                p.run(&[b"CONFIG", b"SET", b"maxmemory-policy", b"allkeys-lfu"]);
            }
            // A WATCH of two clients on each store; their dirty flags must agree.
            let flags = || -> Vec<Arc<AtomicBool>> {
                (0..2).map(|_| Arc::new(AtomicBool::new(false))).collect()
            };
            let (df, ds) = (flags(), flags());
            let keys: [&[u8]; 5] = [
                b"k0",
                b"k1",
                b"key:000000000001",
                b"a-much-longer-key-name-than-16",
                b"",
            ];
            if seed == 4 {
                // Every command in the slow log: none may share a clock reading.
                p.run(&[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"]);
                p.run(&[b"CONFIG", b"SET", b"slowlog-max-len", b"1000"]);
            }
            let long = vec![b'x'; 300];
            // Past `LIGHT_BYTES`: its GETs and SETs are timed alone.
            let heavy = vec![b'h'; crate::db::LIGHT_BYTES + 1];
            let values: [&[u8]; 11] = [
                &heavy,
                b"v",
                b"12",
                b"-3",
                b"007",
                b"value-of-some-length",
                &long,
                b"",
                b"3.5",
                b"9223372036854775808",
                b"xyzxyzxyzxyzxyzxyzxy",
            ];
            for step in 0..6000 {
                let k = keys[rng.below(keys.len() as u64) as usize];
                let v = values[rng.below(values.len() as u64) as usize];
                match rng.below(24) {
                    0..=7 => {
                        p.run(&[b"GET", k]);
                    }
                    8..=14 => {
                        p.run(&[b"set", k, v]);
                    }
                    15 => {
                        p.run(&[b"SET", k, v, b"PX", b"50"]);
                    }
                    16 => {
                        p.run(&[b"LPUSH", k, v]);
                    }
                    17 => {
                        p.run(&[b"INCR", k]);
                    }
                    18 => {
                        p.run(&[b"APPEND", k, v]);
                    }
                    19 => {
                        p.run(&[b"DEL", k]);
                    }
                    20 => {
                        p.run(&[b"OBJECT", b"FREQ", k]);
                        p.run(&[b"OBJECT", b"IDLETIME", k]);
                        p.run(&[b"OBJECT", b"ENCODING", k]);
                    }
                    21 => {
                        p.run(&[b"GETEX", k, b"PX", b"30"]);
                    }
                    22 => {
                        let ms = rng.below(40);
                        p.both(|db| {
                            db.clock_mut().advance(ms);
                            db.refresh_clock();
                        });
                    }
                    _ if !watches => {
                        p.run(&[b"GET", k]);
                    }
                    _ => {
                        let c = rng.below(2) as usize;
                        let id = c as u64 + 100;
                        p.fast.watch(0, k, id, &df[c]);
                        p.slow.watch(0, k, id, &ds[c]);
                    }
                }
                if step % 97 == 0 {
                    p.check_same();
                    p.run(&[b"SLOWLOG", b"LEN"]);
                    p.run(&[b"SLOWLOG", b"RESET"]);
                    for (f, s) in df.iter().zip(&ds) {
                        assert_eq!(
                            f.swap(false, Ordering::Relaxed),
                            s.swap(false, Ordering::Relaxed)
                        );
                    }
                }
                if step == 3000 && seed % 2 == 1 {
                    p.run(&[b"CONFIG", b"SET", b"maxmemory-policy", b"allkeys-lru"]);
                }
            }
            p.check_same();
            assert!(p.taken > 2000, "the lane took {} commands", p.taken);
            if seed == 4 {
                assert_eq!(p.shared, 0);
            } else {
                assert!(p.shared > 500, "{} commands shared a reading", p.shared);
            }
            for k in keys {
                let a = p.run(&[b"DUMP", k]);
                assert!(!a.is_empty());
                p.run(&[b"PTTL", k]);
            }
        }
    }

    /// Light express commands of one kind in a row share one clock reading, counted when the
    /// run ends; a heavy one, one of the other kind or any other command ends the run first.
    #[test]
    fn a_run_of_light_commands_is_counted_when_it_ends() {
        let mut p = Pair::new(Proto::Resp2);
        let stat = |db: &Db, name: &str| {
            let snap = db.telemetry.snapshot(true);
            snap.cmds.get(name).map_or((0, 0), |c| {
                (c.calls, c.hist.as_ref().map_or(0, |h| h.len()))
            })
        };
        let run = |p: &Pair| p.sf.lap.map_or(0, |l| l.run);
        let heavy = vec![b'h'; crate::db::LIGHT_BYTES + 1];
        p.run(&[b"SET", b"k", b"v1"]);
        p.run(&[b"SET", b"k", b"v2"]);
        p.run(&[b"SET", b"n", b"v3"]);
        assert_eq!(run(&p), 3);
        // Not counted yet: the run is open.
        assert_eq!(stat(&p.fast, "set"), (0, 0));
        // GETs end the SETs' run and start their own.
        p.run(&[b"GET", b"k"]);
        p.run(&[b"GET", b"nothing"]);
        assert_eq!(stat(&p.fast, "set"), (3, 3));
        assert_eq!(run(&p), 2);
        // A value past the bound is timed alone, after the run is counted.
        p.run(&[b"SET", b"big", &heavy]);
        assert_eq!(run(&p), 0);
        assert_eq!(stat(&p.fast, "get"), (2, 2));
        assert_eq!(stat(&p.fast, "set"), (4, 4));
        p.run(&[b"GET", b"big"]);
        assert_eq!(run(&p), 0);
        // A wrong type's error is timed alone too.
        p.run(&[b"LPUSH", b"l", b"a"]);
        p.run(&[b"GET", b"k"]);
        assert_eq!(run(&p), 1);
        p.run(&[b"GET", b"l"]);
        assert_eq!(run(&p), 0);
        // Any other command ends the run before it runs.
        p.run(&[b"SET", b"k", b"v4"]);
        p.run(&[b"SET", b"k", b"v5"]);
        assert_eq!(run(&p), 2);
        p.run(&[b"STRLEN", b"k"]);
        assert_eq!(run(&p), 0);
        assert_eq!(stat(&p.fast, "set"), (6, 6));
        assert_eq!(stat(&p.fast, "get"), (5, 5));
        p.check_same();
        // With a slow-log threshold under the floor, every command is timed alone.
        p.run(&[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"999"]);
        p.run(&[b"SET", b"k", b"v6"]);
        p.run(&[b"SET", b"k", b"v7"]);
        assert_eq!(run(&p), 0);
        p.check_same();
    }

    #[test]
    fn recognises_get_and_set_by_name_and_arity_only() {
        assert_eq!(Express::of(&[b"GET", b"k"]), Some(Express::Get));
        assert_eq!(Express::of(&[b"gEt", b"k"]), Some(Express::Get));
        assert_eq!(Express::of(&[b"set", b"k", b"v"]), Some(Express::Set));
        assert_eq!(Express::of(&[b"SeT", b"k", b"v"]), Some(Express::Set));
        assert_eq!(Express::of(&[b"GET"]), None);
        assert_eq!(Express::of(&[b"GET", b"k", b"v"]), None);
        assert_eq!(Express::of(&[b"SET", b"k"]), None);
        assert_eq!(Express::of(&[b"SET", b"k", b"v", b"NX"]), None);
        assert_eq!(Express::of(&[b"GETX", b"k"]), None);
        assert_eq!(Express::of(&[b"GE", b"k"]), None);
        // Bytes that bit 5 maps onto a letter of the names are that letter's other case only.
        for b in 0..=255u8 {
            let name = [b, b'e', b't'];
            let lowered = b | 0x20;
            let expect = if lowered == b'g' {
                Some(Express::Get)
            } else {
                None
            };
            assert_eq!(Express::of(&[&name, b"k"]), expect, "{b:#x}");
            let name = [b's', b'e', b];
            let expect = if b | 0x20 == b't' {
                Some(Express::Set)
            } else {
                None
            };
            assert_eq!(Express::of(&[&name, b"k", b"v"]), expect, "{b:#x}");
        }
        let [get, set] = specs();
        assert_eq!((get.name, set.name), ("get", "set"));
        assert_eq!(Express::Get as usize, 0);
    }
}
