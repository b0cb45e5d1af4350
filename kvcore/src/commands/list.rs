//! The list commands.

use super::CommandSpec;

pub(in crate::commands) static COMMANDS: &[CommandSpec] = &[];
