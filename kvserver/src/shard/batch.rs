//! A client's commands for another shard, flattened, and their replies.

use kvcore::resp::Proto;

/// Commands for one shard, flattened into one buffer: one allocation per batch, not per command.
#[derive(Default)]
pub struct RemoteBatch {
    pub(super) data: Vec<u8>,
    pub(super) arg_lens: Vec<u32>,
    pub(super) cmds: Vec<(u32, u32, bool)>, // (argc, db, resp3)
}

impl RemoteBatch {
    /// Appends one command.
    pub fn push(&mut self, args: &[&[u8]], db: usize, proto: Proto) {
        for a in args {
            self.data.extend_from_slice(a);
            self.arg_lens.push(a.len() as u32);
        }
        self.cmds
            .push((args.len() as u32, db as u32, proto == Proto::Resp3));
    }

    /// Number of commands.
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    /// Whether there are no commands.
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
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
