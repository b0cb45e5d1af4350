//! RESP, the Redis serialization protocol: requests in, replies out.
//!
//! # What is here
//!
//! - [`parse`]: the server side request parser. [`Parser::parse`] looks at
//!   the unconsumed bytes of a connection and returns one command as
//!   argument slices borrowed from those bytes, or "incomplete", or the
//!   protocol error Redis would send. It accepts multibulk requests
//!   (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) and inline ones (`GET k\r\n`, split
//!   with Redis's quoting rules).
//! - [`write`]: [`ReplyWriter`] appends RESP2 or RESP3 replies to an output
//!   buffer; integers and lengths are written with `itoa`, never `fmt`.
//! - [`reply`]: the client side: [`parse_reply`] builds a [`Value`] tree,
//!   [`skip_reply`] only measures a reply (for load generators).
//! - [`float`]: Redis's text for doubles (7.2+'s short form, 7.0's `%.17g`), for
//!   `INCRBYFLOAT` results, and its `strtod`-based double parsing; [`fpconv`] the short
//!   form's Grisu2 digits.
//!
//! # Invariants
//!
//! - No input makes the parsers panic, read past the buffer, or allocate
//!   from a length the peer announced: counts and lengths are checked
//!   against [`Limits`] first, and buffers are sized by the bytes present.
//! - Parsing is incremental and split-invariant: feeding the same bytes in
//!   any number of pieces yields the same commands and the same error.
//!   [`check_roundtrip`] asserts this (and re-encoding) for the fuzzer and
//!   the corpus test.
//! - Error texts are Redis 7.0's, byte for byte.
//!
//! # Costs
//!
//! A multibulk command costs one pass over its header lines (a `memchr` for
//! each `\r`) and no copy; a command of up to 16 arguments allocates
//! nothing. An incomplete command is parsed again from its start when more
//! bytes arrive; [`Parsed::Incomplete`]'s `hint` (a lower bound on the
//! command's size) lets the caller wait for enough bytes first, which keeps
//! huge commands that arrive in pieces from costing quadratic time.

mod check;
pub mod float;
pub mod fpconv;
pub mod long_double;
pub mod parse;
pub mod reply;
pub mod write;

use std::fmt;

pub use check::{check_roundtrip, check_writer_roundtrip};
pub use float::{
    format_double, format_double_17g, format_long_double_incr, parse_double, rewrite_17g_doubles,
    same_but_17g_doubles,
};
pub use parse::{Args, Limits, Parsed, Parser, Status};
pub use reply::{parse_reply, skip_reply, ReplyError, Value};
pub use write::{Proto, ReplyWriter};

/// A malformed request; the connection is closed after the error reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*` count not a number, or above the limits.
    InvalidMultibulkLength,
    /// `$` length not a number, negative, or above `max_bulk_len`.
    InvalidBulkLength,
    /// A multibulk argument did not start with `$`; holds the byte found.
    ExpectedDollar(u8),
    /// An inline request with an unclosed quote, or a closing quote not
    /// followed by a space.
    UnbalancedQuotes,
    /// No `\r` within `max_inline_len` bytes of a `*` header.
    TooBigMbulkCount,
    /// No `\r` within `max_inline_len` bytes of a `$` header.
    TooBigBulkCount,
    /// No newline within `max_inline_len` bytes of an inline request.
    TooBigInline,
}

const EXPECTED_PREFIX: &[u8] = b"Protocol error: expected '$', got '";
const EXPECTED_LEN: usize = EXPECTED_PREFIX.len() + 2;

/// "Protocol error: expected '$', got 'X'" for every byte X, with `\r` and
/// `\n` shown as spaces as Redis's error replies do.
static EXPECTED_DOLLAR: [[u8; EXPECTED_LEN]; 256] = {
    let mut table = [[0u8; EXPECTED_LEN]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut i = 0;
        while i < EXPECTED_PREFIX.len() {
            table[byte][i] = EXPECTED_PREFIX[i];
            i += 1;
        }
        table[byte][i] = match byte as u8 {
            b'\r' | b'\n' => b' ',
            other => other,
        };
        table[byte][i + 1] = b'\'';
        byte += 1;
    }
    table
};

impl ProtocolError {
    /// Redis's text for this error, without the leading `ERR `.
    pub fn as_bytes(&self) -> &'static [u8] {
        match self {
            ProtocolError::InvalidMultibulkLength => b"Protocol error: invalid multibulk length",
            ProtocolError::InvalidBulkLength => b"Protocol error: invalid bulk length",
            ProtocolError::ExpectedDollar(byte) => &EXPECTED_DOLLAR[usize::from(*byte)],
            ProtocolError::UnbalancedQuotes => b"Protocol error: unbalanced quotes in request",
            ProtocolError::TooBigMbulkCount => b"Protocol error: too big mbulk count string",
            ProtocolError::TooBigBulkCount => b"Protocol error: too big bulk count string",
            ProtocolError::TooBigInline => b"Protocol error: too big inline request",
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

impl std::error::Error for ProtocolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_dollar_text() {
        assert_eq!(
            ProtocolError::ExpectedDollar(b'X').as_bytes(),
            b"Protocol error: expected '$', got 'X'"
        );
        assert_eq!(
            ProtocolError::ExpectedDollar(b'\r').as_bytes(),
            b"Protocol error: expected '$', got ' '"
        );
        assert_eq!(
            ProtocolError::ExpectedDollar(b'\n').as_bytes(),
            b"Protocol error: expected '$', got ' '"
        );
        assert_eq!(
            ProtocolError::ExpectedDollar(0xff).as_bytes(),
            b"Protocol error: expected '$', got '\xff'"
        );
        assert_eq!(
            ProtocolError::TooBigInline.to_string(),
            "Protocol error: too big inline request"
        );
    }
}
