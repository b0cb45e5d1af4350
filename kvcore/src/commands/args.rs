//! Small helpers every handler uses to read arguments with Redis's error replies.

use crate::error::OpError;
use crate::num;

/// Parses an integer argument (`ERR value is not an integer or out of range` otherwise).
pub fn int(a: &[u8]) -> Result<i64, OpError> {
    num::parse_i64(a).ok_or(OpError::NotInteger)
}

/// Case-insensitive comparison of an argument with an uppercase option name.
pub fn is(a: &[u8], opt: &str) -> bool {
    a.eq_ignore_ascii_case(opt.as_bytes())
}
