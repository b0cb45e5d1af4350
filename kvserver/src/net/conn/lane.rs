//! The plain lanes: a plain client's everyday commands run on the store at once, without
//! the general path's questions (see [`Conn::plain`]). Used by the connection's async loop and
//! by the shard's own event loop ([`super::fast`]), which serves plain clients without a task.

use super::*;

/// What the plain lanes work with: the shard, the client's session and its replies.
pub(super) struct Lanes<'c> {
    pub(super) shard: &'c Rc<Shard>,
    pub(super) session: &'c mut Session,
    pub(super) out: &'c mut Vec<u8>,
}

impl Lanes<'_> {
    /// Ends the batch's lap where it waits or stops (see `Session::lap`): a run of express
    /// commands in it is counted.
    #[inline]
    pub(super) fn end_lap(&mut self) {
        self.lap_with(kvcore::Db::end_lap);
    }

    /// `f` of the store, the session's lap and its client id, when there is a lap.
    #[inline(always)]
    pub(super) fn lap_with(&mut self, f: fn(&mut kvcore::Db, &mut Option<kvcore::Lap>, u64)) {
        if self.session.lap.is_some() {
            let id = self.session.id;
            f(&mut self.shard.db.borrow_mut(), &mut self.session.lap, id);
        }
    }

    /// Whether the express lane takes this client's express commands now ([`Lane`]): no
    /// lock held on the shard, and the store admits the client ([`kvcore::Db::admits`]) and
    /// runs express commands ([`kvcore::Db::express_open`]).
    pub(super) fn express_lane(&self) -> Lane {
        let shard = self.shard;
        if !shard.locks.borrow().is_idle() {
            return Lane::Shut;
        }
        let db = shard.db.borrow();
        if !(db.admits(self.session) && db.express_open(self.session)) {
            return Lane::Shut;
        }
        Lane::Open {
            waiters: shard.has_waiters(),
            alone: shard.n == 1,
        }
    }

    /// Runs the express commands of `window` from its command `from` on (GET and SET, read
    /// by the scanner or the general parser) whose keys are this shard's, in one call, when
    /// the lane is open: how many ran, stopping once the replies reach [`FLUSH_AT`], and
    /// where the last of them ends. It does what the general path would (see
    /// [`Lanes::run_plain`]). While a client waits on a key (a write may wake it), one command
    /// at a time. `0`: none ran; the command takes [`Lanes::run_plain`].
    #[inline]
    pub(super) fn run_express(
        &mut self,
        window: &Window<'_>,
        from: usize,
        lane: &mut Lane,
    ) -> (usize, usize) {
        if *lane == Lane::Unknown {
            *lane = self.express_lane();
        }
        let Lane::Open { waiters, alone } = *lane else {
            return (0, 0);
        };
        let shard = self.shard;
        // (`express_run` runs each command it takes from `run`: `end` and `last` are the
        // last one's.)
        let mut end = 0;
        let mut last = None;
        let run = window.cmds[from..]
            .iter()
            .map_while(|cmd| {
                let (args, express) = window.args_of(cmd);
                let x = express.or_else(|| Express::of(args))?;
                (alone || route::shard_of(args[1], shard.n) == shard.id).then(|| {
                    end = cmd.end;
                    last = Some(args);
                    (x, args)
                })
            })
            .take(if waiters { 1 } else { Window::COMMANDS });
        self.session.lapping = true;
        let (ran, spec, events) = {
            let mut db = shard.db.borrow_mut();
            let (ran, spec) = db.express_run(self.session, run, self.out, FLUSH_AT);
            (ran, spec, ran > 0 && db.has_events())
        };
        self.session.lapping = false;
        // As `Shard::after_command`, without asking again what the lane knows.
        if let (true, Some(spec), Some(args)) = (waiters, spec, last) {
            shard.wake_written(spec, args);
            // A served waiter's own command may have changed what the lane knows (a move to
            // another shard holds locks): asked again.
            *lane = Lane::Unknown;
        }
        if events {
            shard.after_writes();
        }
        (ran, end)
    }

    /// The common case in the fewest steps, for a [`Conn::plain`] client: a command of the
    /// lane (see [`LANE`]) with the right number of arguments, whose keys are all this
    /// shard's, run on the store at once when no lock is held and nothing can refuse it
    /// ([`kvcore::Db::admits`]). It does what the general path (`try_now`, `classify`,
    /// `Shard::execute`, `Db::dispatch_spec`) would, without asking what cannot apply.
    /// `None`: nothing was done; take the general path. `Some(keyed)`: it ran, and had keys.
    #[inline]
    pub(super) fn run_plain(&mut self, args: &[&[u8]], lane: &mut Lane) -> Option<bool> {
        let spec = commands::lookup(args[0])?;
        if !LANE.get(usize::from(spec.id)).copied().unwrap_or(false) || !spec.arity_ok(args.len()) {
            return None;
        }
        // Whatever runs now is asked about again by the next express command.
        *lane = Lane::Unknown;
        let shard = self.shard;
        // As `classify`: one shard owns every key; with more, the command has none or all
        // are this shard's.
        let keyed = shard.n == 1
            || match key_home(spec, args, shard.n) {
                KeyHome::None => false,
                KeyHome::One(s) if s == shard.id => true,
                _ => return None,
            };
        if !shard.locks.borrow().is_idle() {
            return None;
        }
        {
            let mut db = shard.db.borrow_mut();
            if !db.admits(self.session) {
                return None;
            }
            db.run_admitted(self.session, spec, args, self.out);
        }
        shard.after_command(spec, args);
        Some(keyed)
    }
}

/// Where [`Lanes::serve`] stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Stop {
    /// Every command read ran.
    Done,
    /// What follows is an incomplete command, which needs this many more bytes (a hint).
    Partial(usize),
    /// The replies reached [`FLUSH_AT`]: write them, then go on.
    Flush,
    /// What follows is a command the lanes do not take (or bad protocol): the general path's.
    Other,
    /// A command asked to close the connection once its reply is written (QUIT).
    Close,
}

impl Lanes<'_> {
    /// Runs the commands of `buf` from `pos` on for as long as the plain lanes take them,
    /// the express run of a window in one call ([`Lanes::run_express`]), others one by one
    /// ([`Lanes::run_plain`]), as [`Conn::serve_batch`] does for a [`Conn::plain`] client:
    /// where it stopped, and why. The caller reads the clock for the batch and ends its lap.
    pub(super) fn serve(
        &mut self,
        parser: &mut Parser,
        buf: &[u8],
        mut pos: usize,
    ) -> (usize, Stop) {
        loop {
            if pos == buf.len() {
                return (pos, Stop::Done);
            }
            let mut window = Window::new();
            window.fill(parser, buf, pos);
            if window.cmds.is_empty() {
                let mut args = Args::new();
                return match parser.parse_into(&buf[pos..], &mut args) {
                    Ok(Status::Incomplete { hint }) => (pos, Stop::Partial(hint)),
                    _ => (pos, Stop::Other),
                };
            }
            window.prefetch(&self.shard.db.borrow(), self.session.db);
            let mut lane = Lane::Unknown;
            let mut next = 0;
            while let Some(cmd) = window.cmds.get(next) {
                next += 1;
                let (args, express) = window.args_of(cmd);
                if args.is_empty() {
                    pos = cmd.end;
                    continue;
                }
                if express.or_else(|| Express::of(args)).is_some() {
                    let (ran, end) = self.run_express(&window, next - 1, &mut lane);
                    if ran > 0 {
                        next += ran - 1;
                        pos = end;
                        if self.out.len() >= FLUSH_AT {
                            return (pos, Stop::Flush);
                        }
                        continue;
                    }
                }
                self.session.lapping = true;
                let ran = self.run_plain(args, &mut lane);
                self.session.lapping = false;
                if ran.is_none() {
                    return (pos, Stop::Other);
                }
                pos = cmd.end;
                if self.session.close_after_reply {
                    return (pos, Stop::Close);
                }
                if self.out.len() >= FLUSH_AT {
                    return (pos, Stop::Flush);
                }
            }
        }
    }
}
