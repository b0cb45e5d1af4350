//! Small helpers every handler uses to read arguments with Redis's error replies.

use crate::error::OpError;
use crate::num;

/// Parses an integer argument (`ERR value is not an integer or out of range` otherwise).
pub fn int(a: &[u8]) -> Result<i64, OpError> {
    num::parse_i64(a).ok_or(OpError::NotInteger)
}

/// Redis's error for -2^63 where it takes a long it may negate (-LONG_MAX..=LONG_MAX): the
/// counts of SRANDMEMBER, HRANDFIELD, ZRANDMEMBER and LREM, LPOS's RANK.
pub const NOT_NEGATABLE: &[u8] =
    b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

/// Parses an integer argument that must fit a C `int` (`getIntFromObjectOrReply`), with
/// Redis's two errors.
pub fn int32(a: &[u8]) -> Result<i32, OpError> {
    i32::try_from(int(a)?).map_err(|_| OpError::NotInt32)
}

/// Case-insensitive comparison of an argument with an uppercase option name.
pub fn is(a: &[u8], opt: &str) -> bool {
    a.eq_ignore_ascii_case(opt.as_bytes())
}

/// `numkeys` at `a[at]` and that many keys after it (ZMPOP, LMPOP ...); the keys and the index
/// after them. Errors are Redis's lines: a count below 1, or fewer arguments than it says.
pub fn numkeys<'a, 'b>(
    a: &'a [&'b [u8]],
    at: usize,
) -> Result<(&'a [&'b [u8]], usize), &'static [u8]> {
    let n = match int(a[at]) {
        Ok(n) if n > 0 => n as usize,
        _ => return Err(b"ERR numkeys should be greater than 0"),
    };
    if n >= a.len() - at - 1 {
        return Err(OpError::Syntax.message().as_bytes());
    }
    Ok((&a[at + 1..at + 1 + n], at + 1 + n))
}

/// A blocking command's timeout in seconds, as Redis 7.0 reads it: milliseconds rounded up to
/// a 64-bit integer (0 waits for ever; a positive fraction of a millisecond waits one).
pub fn timeout_ms(arg: &[u8]) -> Result<u64, &'static [u8]> {
    let secs =
        crate::num::parse_f64(arg).ok_or(&b"ERR timeout is not a float or out of range"[..])?;
    // Redis 7.2+ refuses milliseconds beyond LLONG_MAX ("out of range"; 7.0 called them
    // negative), then converts ceil(seconds * 1000) to a long long: below its range that
    // gives LLONG_MIN on x86, which reads as negative.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if secs * 1000.0 >= LIMIT {
        return Err(b"ERR timeout is out of range");
    }
    let ms = (secs * 1000.0).ceil();
    let ms = if (-LIMIT..LIMIT).contains(&ms) {
        ms as i64
    } else {
        i64::MIN
    };
    u64::try_from(ms).map_err(|_| &b"ERR timeout is negative"[..])
}
