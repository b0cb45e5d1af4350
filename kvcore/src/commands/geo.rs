//! Geo commands (placeholder while building).
use super::CommandSpec;
pub(super) static COMMANDS: &[CommandSpec] = &[];
