//! A client's commands for another shard, flattened, and their replies.

use kvcore::resp::Proto;
use kvcore::Session;
use smallvec::SmallVec;

/// Commands for one shard, flattened into one buffer: one allocation per batch, not per command.
#[derive(Default)]
pub struct RemoteBatch {
    pub(super) data: Vec<u8>,
    pub(super) arg_lens: Vec<u32>,
    pub(super) cmds: Vec<(u32, u32, u8)>, // (argc, db, RESP3 | NO_TOUCH bits)
    /// The client whose commands these are (one connection fills a batch).
    pub(super) client: u64,
    /// Its ACL user: the connection checked the commands themselves, but a script's own
    /// calls are checked where it runs.
    pub(super) user: kvcore::acl::ClientUser,
}

/// [`RemoteBatch`] command bit: the client speaks RESP3.
pub(super) const RESP3: u8 = 1;
/// [`RemoteBatch`] command bit: the client is in CLIENT NO-TOUCH mode.
pub(super) const NO_TOUCH: u8 = 2;
/// [`RemoteBatch`] command bit: the command comes from this replica's master.
pub(super) const MASTER: u8 = 4;

impl RemoteBatch {
    /// Appends one command of a client with this session.
    pub fn push(&mut self, args: &[&[u8]], session: &Session) {
        for a in args {
            self.data.extend_from_slice(a);
            self.arg_lens.push(a.len() as u32);
        }
        let bits = if session.proto == Proto::Resp3 {
            RESP3
        } else {
            0
        } | if session.no_touch { NO_TOUCH } else { 0 }
            | if session.master { MASTER } else { 0 };
        self.cmds.push((args.len() as u32, session.db as u32, bits));
        self.client = session.id;
        if !self.user.same(&session.user) {
            self.user = session.user.clone();
        }
    }

    /// Number of commands.
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    /// Whether there are no commands.
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// The commands in order, each with how its client was set up when it was pushed (see
    /// [`Setup::apply`]).
    pub(super) fn commands(&self) -> impl Iterator<Item = (SmallVec<[&[u8]; 16]>, Setup)> + '_ {
        let (mut off, mut arg) = (0usize, 0usize);
        self.cmds.iter().map(move |&(argc, db, bits)| {
            let mut args: SmallVec<[&[u8]; 16]> = SmallVec::new();
            for _ in 0..argc {
                let len = self.arg_lens[arg] as usize;
                args.push(&self.data[off..off + len]);
                off += len;
                arg += 1;
            }
            (args, Setup { db, bits })
        })
    }
}

/// How a [`RemoteBatch`] command's client was set up when it was pushed.
pub(super) struct Setup {
    db: u32,
    bits: u8,
}

impl Setup {
    /// Sets `session` up as the client's was.
    pub(super) fn apply(&self, session: &mut Session) {
        session.db = self.db as usize;
        session.proto = if self.bits & RESP3 != 0 {
            Proto::Resp3
        } else {
            Proto::Resp2
        };
        session.no_touch = self.bits & NO_TOUCH != 0;
        session.master = self.bits & MASTER != 0;
    }
}

/// The replies of a [`RemoteBatch`], concatenated, with each reply's end offset.
#[derive(Default)]
pub struct BatchReply {
    /// All reply bytes.
    pub out: Vec<u8>,
    /// End offset of each reply in `out`.
    pub ends: Vec<u32>,
}

impl BatchReply {
    /// The bytes of reply `i`.
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.out[start..self.ends[i] as usize]
    }
}
