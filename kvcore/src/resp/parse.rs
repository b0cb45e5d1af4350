//! Request parser: multibulk (`*N\r\n$len\r\n...`) and inline (`PING\r\n`) commands.
//!
//! The parser is stateless between calls: it looks at the unconsumed bytes
//! of a connection and returns one whole command, or `Incomplete` (nothing
//! consumed), or the protocol error Redis would send before closing the
//! connection. Every length is checked against [`Limits`] before the parser
//! waits for the bytes it announces, so a peer cannot make it buffer more
//! than one line of `max_inline_len` bytes or one bulk of `max_bulk_len`.
//!
//! Redis quirks kept on purpose, because clients and tests rely on them:
//! a header line ends at the first `\r` and the byte after it is skipped
//! unread, and so are the two bytes after each bulk's data (Redis never
//! checks that they are `\r\n`).

use memchr::memchr;
use smallvec::SmallVec;

use super::ProtocolError;
use crate::express::Express;

/// The arguments of one command: slices of the input buffer, or of the
/// parser's scratch space for inline arguments that needed unescaping.
pub type Args<'a> = SmallVec<[&'a [u8]; 16]>;

/// The smallest encoding of one multibulk argument: `$0\r\n\r\n`.
const MIN_ARG_BYTES: usize = 6;

/// Bounds on what one request may announce; checked before waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk argument (Redis's `proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Largest argument count of a multibulk request.
    pub max_args: usize,
    /// Longest inline request or header line without a newline.
    pub max_inline_len: usize,
}

impl Default for Limits {
    /// Redis's defaults: 512 MiB bulks, 64 KiB inline lines; 1 Mi arguments.
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_args: 1024 * 1024,
            max_inline_len: 64 * 1024,
        }
    }
}

/// What one call to [`Parser::parse`] found at the start of the buffer.
#[derive(Debug, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "the inline arguments are the point; boxing would allocate per command"
)]
pub enum Parsed<'a> {
    /// One command; `consumed` bytes of the input belong to it. `args` may be
    /// empty (empty inline line, `*0`, `*-1`): the caller just skips it.
    Command {
        /// The command name and its arguments.
        args: Args<'a>,
        /// Bytes of the input this command used; always at least 1.
        consumed: usize,
    },
    /// Not a whole command yet; nothing consumed. `hint` is a lower bound on
    /// the total bytes the command needs (0 when nothing is known), e.g.
    /// header plus data once a bulk header announces 10 MB. It is only a
    /// bound announced by the peer: cap any buffer growth based on it.
    Incomplete {
        /// Lower bound on the bytes the whole command needs, or 0.
        hint: usize,
    },
}

/// What one call to [`Parser::parse_into`] found; the arguments went to the caller's [`Args`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// One command of `consumed` bytes (at least 1); its arguments are in the `Args`, which
    /// may be empty (empty inline line, `*0`, `*-1`): the caller just skips it.
    Command {
        /// Bytes of the input this command used.
        consumed: usize,
    },
    /// Not a whole command yet; nothing consumed. `hint` as in [`Parsed::Incomplete`].
    Incomplete {
        /// Lower bound on the bytes the whole command needs, or 0.
        hint: usize,
    },
}

/// Where an argument of an inline command lives.
#[derive(Clone, Copy)]
enum Tok {
    /// `line[start..end]`, used as is.
    Line(usize, usize),
    /// `inline_scratch[start..end]`, unescaped.
    Scratch(usize, usize),
}

/// A request parser; keep one per connection to reuse its scratch space.
#[derive(Debug)]
pub struct Parser {
    limits: Limits,
    /// Whether the limits let the general path read `*2`/`*3` and `$3` in their short form
    /// and take a three-byte name, as [`Parser::scan_express`] reads them.
    express: bool,
    /// Unescaped inline arguments of the last inline command.
    inline_scratch: Vec<u8>,
}

impl Default for Parser {
    /// A parser enforcing Redis's default limits.
    fn default() -> Self {
        Parser::new(Limits::default())
    }
}

impl Parser {
    /// A parser enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        Parser {
            limits,
            express: Self::express_ok(&limits),
            inline_scratch: Vec::new(),
        }
    }

    fn express_ok(limits: &Limits) -> bool {
        limits.max_args >= 3 && limits.max_inline_len > 2 && limits.max_bulk_len >= 3
    }

    /// Replaces the limits (e.g. after `CONFIG SET proto-max-bulk-len`).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        self.express = Self::express_ok(&limits);
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Parses the command at the start of `buf`.
    ///
    /// Multibulk arguments borrow `buf`; inline arguments borrow `buf` or
    /// the parser's scratch space, which the next call reuses.
    pub fn parse<'a>(&'a mut self, buf: &'a [u8]) -> Result<Parsed<'a>, ProtocolError> {
        let mut args = Args::new();
        Ok(match self.parse_into(buf, &mut args)? {
            Status::Command { consumed } => Parsed::Command { args, consumed },
            Status::Incomplete { hint } => Parsed::Incomplete { hint },
        })
    }

    /// The multibulk command at the start of `buf` when it is complete, valid and has an
    /// argument: the bytes it takes, its arguments appended to `args`. `None` for anything
    /// else (an inline or incomplete command, a protocol error, `*0`), with `args` as it was:
    /// [`Parser::parse_into`] decides those. What this accepts, `parse_into` parses the same
    /// way; unlike it, this borrows the parser shared, so that a caller can parse several
    /// commands ahead of running them and keep all their arguments in one vector.
    pub fn parse_ahead<'b, A: smallvec::Array<Item = &'b [u8]>>(
        &self,
        buf: &'b [u8],
        args: &mut SmallVec<A>,
    ) -> Option<usize> {
        if buf.first() != Some(&b'*') {
            return None;
        }
        let mark = args.len();
        match parse_multibulk(&self.limits, buf, args) {
            Ok(Status::Command { consumed }) if args.len() > mark => Some(consumed),
            _ => {
                args.truncate(mark);
                None
            }
        }
    }

    /// The express command at the start of `buf` ([`Express`]: `GET key` or `SET key value`,
    /// the name in any case), read straight from its bytes: the command, its arguments (the
    /// name, the key and, for SET, the value; an unused slot is empty) and the bytes it takes.
    /// `None` for anything else, which [`Parser::parse_ahead`] and [`Parser::parse_into`]
    /// decide. What this accepts they read as the same arguments and length: the headers are
    /// read by the same function and within the same limits, and the two bytes after each
    /// bulk are skipped unread as they skip them. It costs a fraction of the general parse:
    /// one compare of eight bytes for the count and the name's header, no argument vector.
    #[inline]
    #[deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::arithmetic_side_effects
    )]
    pub fn scan_express<'a>(&self, buf: &'a [u8]) -> Option<(Express, [&'a [u8]; 3], usize)> {
        const GET_HEAD: u64 = u64::from_le_bytes(*b"*2\r\n$3\r\n");
        const SET_HEAD: u64 = u64::from_le_bytes(*b"*3\r\n$3\r\n");
        let x = match u64::from_le_bytes(*buf.first_chunk::<8>()?) {
            GET_HEAD => Express::Get,
            SET_HEAD => Express::Set,
            _ => return None,
        };
        if !self.express {
            return None;
        }
        // The name and its `\r` as one word, lowered as `Express::named` lowers it (the
        // byte after the `\r` is skipped unread, as the general path skips it).
        let word = u32::from_le_bytes(*buf.get(8..13)?.first_chunk::<4>()?) | 0x0020_2020;
        if word != x.word() {
            return None;
        }
        let name = buf.get(8..11)?;
        let (key, pos) = express_bulk(buf, 13, &self.limits)?;
        let (value, pos) = match x {
            Express::Get => (&[][..], pos),
            Express::Set => express_bulk(buf, pos, &self.limits)?,
        };
        Some((x, [name, key, value], pos))
    }

    /// [`Parser::parse`] writing the arguments into `args` (cleared first), which holds them
    /// only when the result is [`Status::Command`]. The hot path's form: the arguments are
    /// written where the caller keeps them, never moved (an `Args` is about 270 bytes).
    pub fn parse_into<'a>(
        &'a mut self,
        buf: &'a [u8],
        args: &mut Args<'a>,
    ) -> Result<Status, ProtocolError> {
        args.clear();
        let r = match buf.first() {
            None => Ok(Status::Incomplete { hint: 0 }),
            Some(b'*') => parse_multibulk(&self.limits, buf, args),
            Some(_) => self.parse_inline(buf, args),
        };
        if !matches!(r, Ok(Status::Command { .. })) {
            args.clear();
        }
        r
    }

    #[deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::arithmetic_side_effects
    )]
    fn parse_inline<'a>(
        &'a mut self,
        buf: &'a [u8],
        args: &mut Args<'a>,
    ) -> Result<Status, ProtocolError> {
        let max = self.limits.max_inline_len;
        let window = buf.get(..max.saturating_add(1)).unwrap_or(buf);
        let Some(newline) = memchr(b'\n', window) else {
            return if buf.len() > max {
                Err(ProtocolError::TooBigInline)
            } else {
                Ok(Status::Incomplete { hint: 0 })
            };
        };
        let line_end = match newline.checked_sub(1) {
            Some(cr) if buf.get(cr) == Some(&b'\r') => cr,
            _ => newline,
        };
        let line = buf.get(..line_end).unwrap_or_default();
        let mut toks: SmallVec<[Tok; 16]> = SmallVec::new();
        split_args(line, &mut self.inline_scratch, &mut toks)?;
        let this: &'a Parser = self;
        args.extend(
            toks.iter()
                .map(|&tok| match tok {
                    Tok::Line(start, end) => line.get(start..end),
                    Tok::Scratch(start, end) => this.inline_scratch.get(start..end),
                })
                .map(Option::unwrap_or_default),
        );
        Ok(Status::Command {
            consumed: newline.saturating_add(1),
        })
    }
}

// ---------------------------------------------------------------------------
// Multibulk
// ---------------------------------------------------------------------------

#[deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
fn parse_multibulk<'a, A: smallvec::Array<Item = &'a [u8]>>(
    limits: &Limits,
    buf: &'a [u8],
    args: &mut SmallVec<A>,
) -> Result<Status, ProtocolError> {
    let incomplete = |hint| Ok(Status::Incomplete { hint });
    let (count, mut pos) = match quick_header(buf, 0, limits.max_inline_len) {
        Some(found) => found,
        None => {
            let Some((digits_end, pos)) = header_line(
                buf,
                0,
                limits.max_inline_len,
                ProtocolError::TooBigMbulkCount,
            )?
            else {
                return incomplete(0);
            };
            let count = buf
                .get(1..digits_end)
                .and_then(string2ll)
                .ok_or(ProtocolError::InvalidMultibulkLength)?;
            if count <= 0 {
                return Ok(Status::Command { consumed: pos });
            }
            let count =
                usize::try_from(count).map_err(|_| ProtocolError::InvalidMultibulkLength)?;
            (count, pos)
        }
    };
    if count > limits.max_args || count > i32::MAX as usize {
        return Err(ProtocolError::InvalidMultibulkLength);
    }

    // Trust the count only as far as the bytes at hand can back it.
    args.reserve(count.min(buf.len().saturating_sub(pos) / MIN_ARG_BYTES));
    // The everyday argument first, in a tight loop: `$`, a length of one or two digits (no
    // leading zero, as `quick_header` reads it), the data and the two bytes after it all at
    // hand, within the limits. Anything else leaves the loop where it stands, and the general
    // loop below takes that argument and the rest.
    let mut fast = 0;
    if limits.max_inline_len > 2 {
        while fast < count {
            let Some(&[b'$', d0, b1, b2]) = buf.get(pos..pos.wrapping_add(4)) else {
                break;
            };
            let Some((len, head)) = short_header(d0, b1, b2) else {
                break;
            };
            let data = pos.wrapping_add(head);
            let end = data.wrapping_add(len);
            let next = end.wrapping_add(2);
            if len > limits.max_bulk_len || next > buf.len() {
                break;
            }
            let Some(arg) = buf.get(data..end) else {
                break;
            };
            args.push(arg);
            pos = next;
            fast = fast.wrapping_add(1);
        }
    }
    for done in fast..count {
        // The bytes the arguments after this one need at least (only for an incomplete hint).
        let rest_min = || {
            count
                .saturating_sub(done)
                .saturating_sub(1)
                .saturating_mul(MIN_ARG_BYTES)
        };
        let quick = match buf.get(pos) {
            Some(b'$') => quick_header(buf, pos, limits.max_inline_len),
            _ => None,
        };
        let (len, data) = match quick {
            Some(found) => found,
            None => {
                let Some((digits_end, data)) = header_line(
                    buf,
                    pos,
                    limits.max_inline_len,
                    ProtocolError::TooBigBulkCount,
                )?
                else {
                    return incomplete(
                        pos.saturating_add(MIN_ARG_BYTES).saturating_add(rest_min()),
                    );
                };
                match buf.get(pos) {
                    Some(b'$') => {}
                    Some(&other) => return Err(ProtocolError::ExpectedDollar(other)),
                    None => return incomplete(0),
                }
                let len = buf
                    .get(pos.saturating_add(1)..digits_end)
                    .and_then(string2ll)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or(ProtocolError::InvalidBulkLength)?;
                (len, data)
            }
        };
        if len > limits.max_bulk_len {
            return Err(ProtocolError::InvalidBulkLength);
        }
        let end = data.saturating_add(len);
        let next = end.saturating_add(2);
        match buf.get(data..end) {
            Some(arg) if next <= buf.len() => {
                args.push(arg);
                pos = next;
            }
            _ => return incomplete(next.saturating_add(rest_min())),
        }
    }
    Ok(Status::Command { consumed: pos })
}

/// One bulk of an express command at `pos` ([`Parser::scan_express`]): its data and where the
/// next header starts, as the general loop of [`parse_multibulk`] reads it; `None` when it is
/// not whole or not within the limits (the general path's to decide).
#[inline(always)]
#[deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
fn express_bulk<'a>(buf: &'a [u8], pos: usize, limits: &Limits) -> Option<(&'a [u8], usize)> {
    let &[b'$', d0, b1, b2] = buf.get(pos..pos.checked_add(4)?)? else {
        return None;
    };
    // One or two digits, the everyday key and value, without a call; longer lengths as
    // `quick_header` reads them. (Both need the byte after the `\r`, which the data's
    // bounds below cover.)
    let (len, data) = match short_header(d0, b1, b2) {
        Some((len, head)) => (len, pos.wrapping_add(head)),
        None => long_header(buf, pos, limits.max_inline_len)?,
    };
    if len > limits.max_bulk_len {
        return None;
    }
    let end = data.checked_add(len)?;
    let next = end.checked_add(2)?;
    if next > buf.len() {
        return None;
    }
    Some((buf.get(data..end)?, next))
}

/// [`quick_header`] out of line, for the rarer long lengths of [`express_bulk`].
#[inline(never)]
fn long_header(buf: &[u8], start: usize, max: usize) -> Option<(usize, usize)> {
    quick_header(buf, start, max)
}

/// The common header line in one pass: the type byte at `start`, 1 to 18 digits with no sign
/// and no leading zero, `\r` within `max` bytes of `start`, and one more byte. Returns the
/// value and the index after that byte, exactly what [`header_line`] and [`string2ll`] make
/// of such a line; `None` (anything else, including an incomplete line) sends the caller down
/// that general path, which decides every other case.
#[inline(always)]
#[deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
fn quick_header(buf: &[u8], start: usize, max: usize) -> Option<(usize, usize)> {
    // Most headers of a command are one or two digits (`*3`, `$3`, `$16`): read them
    // without the loop. Same conditions as below: no leading zero, `\r` within `max`, one
    // byte after it.
    if let Some(&[d0, b1, b2, _]) = buf.get(start.checked_add(1)?..start.checked_add(5)?) {
        if max > 2 {
            if let Some((v, head)) = short_header(d0, b1, b2) {
                return Some((v, start.wrapping_add(head)));
            }
        }
    }
    let digits = buf.get(start.checked_add(1)?..)?;
    let mut value: usize = 0;
    for (i, &c) in digits.iter().enumerate() {
        match c {
            // At most 18 digits: the value stays far below `usize::MAX` and `i64::MAX`.
            b'0'..=b'9' if i < 18 && (i > 0 || c != b'0') => {
                value = value
                    .wrapping_mul(10)
                    .wrapping_add(usize::from(c.wrapping_sub(b'0')));
            }
            // `\r` sits at `start + i + 1`, the line ends one byte after it.
            b'\r' if i > 0 && i < max && digits.len() > i.wrapping_add(1) => {
                return Some((value, start.saturating_add(i).saturating_add(3)));
            }
            _ => return None,
        }
    }
    None
}

/// A header line of one or two digits, given the three bytes after its type byte (`3\r\n`,
/// `16\r`): the value, and the bytes the line takes with its type byte and the byte after the
/// `\r`. `None` for anything else, a leading zero included (the general path decides those).
/// A line this accepts needs `max_inline_len` above 2.
#[inline(always)]
fn short_header(d0: u8, b1: u8, b2: u8) -> Option<(usize, usize)> {
    let v0 = usize::from(d0.wrapping_sub(b'0'));
    match (d0, b1, b2) {
        (b'1'..=b'9', b'\r', _) => Some((v0, 4)),
        (b'1'..=b'9', b'0'..=b'9', b'\r') => Some((
            v0.wrapping_mul(10)
                .wrapping_add(usize::from(b1.wrapping_sub(b'0'))),
            5,
        )),
        _ => None,
    }
}

/// Finds the header line starting at `start` (on its type byte).
///
/// Returns the index of its `\r` and the index after the byte that follows
/// it, or `None` while the line is incomplete. As in Redis, a line with no
/// `\r` within `max` bytes fails with `too_big`.
#[deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
fn header_line(
    buf: &[u8],
    start: usize,
    max: usize,
    too_big: ProtocolError,
) -> Result<Option<(usize, usize)>, ProtocolError> {
    let rest = buf.get(start..).unwrap_or_default();
    let window = rest.get(..max.saturating_add(1)).unwrap_or(rest);
    // Header lines are short: a plain scan of the first bytes beats memchr's setup.
    let short = window.get(..24).unwrap_or(window);
    let cr = short
        .iter()
        .position(|&c| c == b'\r')
        .or_else(|| memchr(b'\r', window));
    match cr {
        Some(cr) if cr.saturating_add(2) <= rest.len() => Ok(Some((
            start.saturating_add(cr),
            start.saturating_add(cr).saturating_add(2),
        ))),
        Some(_) => Ok(None),
        None if rest.len() > max => Err(too_big),
        None => Ok(None),
    }
}

/// Redis's `string2ll`: an optional `-`, no leading zeros or `+`, at most 20
/// characters, no overflow.
#[deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
pub(crate) fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let mut value: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(c.wrapping_sub(b'0')))?;
    }
    if negative {
        0i64.checked_sub_unsigned(value)
    } else {
        i64::try_from(value).ok()
    }
}

// ---------------------------------------------------------------------------
// Inline
// ---------------------------------------------------------------------------

/// C's `isspace` in the "C" locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Splits an inline line like Redis's `sdssplitargs`.
///
/// Plain words become `Tok::Line`; words with quotes are unescaped into
/// `scratch`. One difference: a NUL byte is an ordinary byte here, where
/// Redis's C strings stop at it.
#[deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
fn split_args(
    line: &[u8],
    scratch: &mut Vec<u8>,
    toks: &mut SmallVec<[Tok; 16]>,
) -> Result<(), ProtocolError> {
    scratch.clear();
    let at = |i: usize| line.get(i).copied();
    let mut i = 0usize;
    loop {
        while at(i).is_some_and(is_c_space) {
            i = i.saturating_add(1);
        }
        if i >= line.len() {
            return Ok(());
        }
        // A word without quotes is used in place.
        let start = i;
        while let Some(c) = at(i) {
            if matches!(c, b' ' | b'\n' | b'\r' | b'\t' | b'"' | b'\'') {
                break;
            }
            i = i.saturating_add(1);
        }
        if !matches!(at(i), Some(b'"' | b'\'')) {
            toks.push(Tok::Line(start, i));
            i = i.saturating_add(1);
            continue;
        }
        // Otherwise: copy what came before the quote, then unescape.
        let first = scratch.len();
        scratch.extend_from_slice(line.get(start..i).unwrap_or_default());
        i = unquote(line, i, scratch)?;
        toks.push(Tok::Scratch(first, scratch.len()));
    }
}

/// The words of `line` as Redis's `sdssplitargs` splits them (quotes and escapes), or `None`
/// for unbalanced quotes.
pub fn split_words(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut scratch = Vec::new();
    let mut toks = SmallVec::new();
    split_args(line, &mut scratch, &mut toks).ok()?;
    Some(
        toks.iter()
            .map(|t| match *t {
                Tok::Line(a, b) => line.get(a..b).unwrap_or_default().to_vec(),
                Tok::Scratch(a, b) => scratch.get(a..b).unwrap_or_default().to_vec(),
            })
            .collect(),
    )
}

/// Runs `sdssplitargs`'s word loop from `i` (on an opening quote) to the
/// end of the word; returns the index after the byte that ended it.
#[deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
fn unquote(line: &[u8], mut i: usize, out: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    let at = |i: usize| line.get(i).copied();
    let next = |i: usize| at(i.saturating_add(1));
    // A closing quote must be followed by a space or the end of the line.
    let closes = |i: usize| match next(i) {
        Some(c) if !is_c_space(c) => Err(ProtocolError::UnbalancedQuotes),
        _ => Ok(()),
    };
    let (mut in_double, mut in_single) = (false, false);
    loop {
        let Some(c) = at(i) else {
            return if in_double || in_single {
                Err(ProtocolError::UnbalancedQuotes)
            } else {
                Ok(i)
            };
        };
        let mut done = false;
        if in_double {
            match c {
                b'\\' => {
                    let hex = |k: usize| at(i.saturating_add(k)).and_then(hex_value);
                    if let (Some(b'x'), Some(hi), Some(lo)) = (next(i), hex(2), hex(3)) {
                        out.push(hi << 4 | lo);
                        i = i.saturating_add(3);
                    } else if let Some(escaped) = next(i) {
                        out.push(match escaped {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                        i = i.saturating_add(1);
                    } else {
                        out.push(c);
                    }
                }
                b'"' => {
                    closes(i)?;
                    done = true;
                }
                _ => out.push(c),
            }
        } else if in_single {
            match (c, next(i)) {
                (b'\\', Some(b'\'')) => {
                    out.push(b'\'');
                    i = i.saturating_add(1);
                }
                (b'\'', _) => {
                    closes(i)?;
                    done = true;
                }
                _ => out.push(c),
            }
        } else {
            match c {
                b' ' | b'\n' | b'\r' | b'\t' => done = true,
                b'"' => in_double = true,
                b'\'' => in_single = true,
                _ => out.push(c),
            }
        }
        i = i.saturating_add(1);
        if done {
            return Ok(i);
        }
    }
}

fn hex_value(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(buf: &[u8]) -> Result<Parsed<'_>, ProtocolError> {
        // Leak one parser per call: keeps the tests short.
        Box::leak(Box::new(Parser::default())).parse(buf)
    }

    fn command(buf: &[u8]) -> (Vec<Vec<u8>>, usize) {
        match parse(buf) {
            Ok(Parsed::Command { args, consumed }) => {
                (args.iter().map(|a| a.to_vec()).collect(), consumed)
            }
            other => panic!("{:?} gave {other:?}", buf.escape_ascii().to_string()),
        }
    }

    fn words(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn error(buf: &[u8]) -> String {
        match parse(buf) {
            Err(e) => e.to_string(),
            other => panic!("{:?} gave {other:?}", buf.escape_ascii().to_string()),
        }
    }

    #[test]
    fn multibulk() {
        assert_eq!(
            command(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nrest"),
            (words(&["GET", "k"]), 20)
        );
        assert_eq!(command(b"*1\r\n$0\r\n\r\n"), (words(&[""]), 10));
        assert_eq!(command(b"*0\r\n"), (vec![], 4));
        assert_eq!(command(b"*-1\r\n"), (vec![], 5));
        assert_eq!(command(b"*-5\r\n"), (vec![], 5));
        // Binary data, including CRLF inside a bulk.
        assert_eq!(
            command(b"*1\r\n$4\r\n\r\n\0\xff\r\n"),
            (vec![b"\r\n\0\xff".to_vec()], 14)
        );
    }

    #[test]
    fn multibulk_args_borrow_the_buffer() {
        let buf = b"*1\r\n$4\r\nPING\r\n";
        let Ok(Parsed::Command { args, .. }) = parse(buf) else {
            panic!()
        };
        assert!(std::ptr::eq(args[0].as_ptr(), buf[8..].as_ptr()));
    }

    #[test]
    fn redis_leniencies() {
        // Redis skips the two bytes after a bulk without looking at them,
        // and the byte after a header's '\r' too.
        assert_eq!(command(b"*1\r\n$3\r\nPINGX"), (words(&["PIN"]), 13));
        assert_eq!(command(b"*1\rX$4\r\nPING\r\n"), (words(&["PING"]), 14));
    }

    #[test]
    fn incomplete_multibulk() {
        let full = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        for cut in 0..full.len() {
            assert!(
                matches!(parse(&full[..cut]), Ok(Parsed::Incomplete { .. })),
                "cut {cut}"
            );
        }
        assert_eq!(command(full).1, full.len());
        // The header announces the size: the hint says so.
        assert_eq!(
            parse(b"*1\r\n$10000000\r\nab"),
            Ok(Parsed::Incomplete {
                hint: 15 + 10_000_000 + 2
            })
        );
        assert_eq!(
            parse(b"*3\r\n$3\r\nSET\r\n$2"),
            Ok(Parsed::Incomplete { hint: 13 + 6 + 6 })
        );
        assert_eq!(parse(b"*3\r"), Ok(Parsed::Incomplete { hint: 0 }));
    }

    #[test]
    fn multibulk_errors() {
        assert_eq!(
            error(b"*abc\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            error(b"*01\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            error(b"*+1\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(error(b"*\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(
            error(b"*3000000000\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            error(b"*1048577\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            error(b"*99999999999999999999\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            error(b"*1\r\nX3\r\n"),
            "Protocol error: expected '$', got 'X'"
        );
        assert_eq!(
            error(b"*1\r\n\r\n"),
            "Protocol error: expected '$', got ' '"
        );
        assert_eq!(
            error(b"*1\r\n\n\r\n"),
            "Protocol error: expected '$', got ' '"
        );
        assert_eq!(
            error(b"*2\r\n$1\r\na\r\n:1\r\n"),
            "Protocol error: expected '$', got ':'"
        );
        assert_eq!(
            error(b"*1\r\n$-1\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            error(b"*1\r\n$abc\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            error(b"*1\r\n$03\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            error(b"*1\r\n$-0\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            error(b"*1\r\n$536870913\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            parse(b"*1\r\n$536870912\r\n"),
            Ok(Parsed::Incomplete {
                hint: 16 + 536870912 + 2
            })
        );
    }

    #[test]
    fn the_expected_dollar_error_waits_for_the_line() {
        // Like Redis: the '$' is checked once the header line is complete.
        assert_eq!(parse(b"*1\r\nX3"), Ok(Parsed::Incomplete { hint: 10 }));
    }

    #[test]
    fn too_big_headers_fail_early() {
        let mut long = b"*".to_vec();
        long.resize(64 * 1024 + 1, b'1');
        assert_eq!(error(&long), "Protocol error: too big mbulk count string");
        assert!(matches!(
            parse(&long[..64 * 1024]),
            Ok(Parsed::Incomplete { .. })
        ));
        let mut bulk = b"*1\r\n$".to_vec();
        bulk.resize(4 + 64 * 1024 + 1, b'1');
        assert_eq!(error(&bulk), "Protocol error: too big bulk count string");
        // A 10 MB line with no newline: an error, not 10 MB of buffering.
        let inline = vec![b'A'; 10 << 20];
        assert_eq!(error(&inline), "Protocol error: too big inline request");
        assert_eq!(
            error(&inline[..64 * 1024 + 1]),
            "Protocol error: too big inline request"
        );
        assert!(matches!(
            parse(&inline[..64 * 1024]),
            Ok(Parsed::Incomplete { .. })
        ));
    }

    #[test]
    fn limits_apply() {
        let mut parser = Parser::new(Limits {
            max_bulk_len: 3,
            max_args: 2,
            max_inline_len: 8,
        });
        assert_eq!(
            parser.parse(b"*3\r\n"),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            parser.parse(b"*1\r\n$4\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert!(matches!(
            parser.parse(b"*1\r\n$3\r\n"),
            Ok(Parsed::Incomplete { .. })
        ));
        assert_eq!(
            parser.parse(b"GET 1234 5"),
            Err(ProtocolError::TooBigInline)
        );
        assert!(matches!(
            parser.parse(b"GET 1234\n"),
            Ok(Parsed::Command { consumed: 9, .. })
        ));
        parser.set_limits(Limits::default());
        assert!(matches!(
            parser.parse(b"*3\r\n"),
            Ok(Parsed::Incomplete { .. })
        ));
    }

    #[test]
    fn inline() {
        assert_eq!(command(b"PING\r\n"), (words(&["PING"]), 6));
        assert_eq!(command(b"PING\n"), (words(&["PING"]), 5));
        assert_eq!(
            command(b"  SET  k \t v  \r\nGET"),
            (words(&["SET", "k", "v"]), 16)
        );
        assert_eq!(command(b"\r\n"), (vec![], 2));
        assert_eq!(command(b"\n"), (vec![], 1));
        assert_eq!(command(b" \x0b\x0c \r\n"), (vec![], 6));
        // Only ' ', \t, \r, \n end a word; \v and \f are skipped between words.
        assert_eq!(
            command(b"ECHO a\x0bb\r\n"),
            (vec![b"ECHO".to_vec(), b"a\x0bb".to_vec()], 10)
        );
        assert_eq!(command(b"A\rB\r\n"), (words(&["A", "B"]), 5));
        assert!(matches!(parse(b"PING"), Ok(Parsed::Incomplete { hint: 0 })));
        assert!(matches!(
            parse(b"PING\r"),
            Ok(Parsed::Incomplete { hint: 0 })
        ));
    }

    #[test]
    fn inline_quotes() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (b"SET k \"a b\"\r\n", &[b"SET", b"k", b"a b"]),
            (b"ECHO \"\\x41\\x4g\\n\"\r\n", &[b"ECHO", b"Ax4g\n"]),
            (
                b"ECHO \"\\r\\t\\b\\a\\\\\\\"\\z\"\n",
                &[b"ECHO", b"\r\t\x08\x07\\\"z"],
            ),
            (b"ECHO 'a\\'b'\r\n", &[b"ECHO", b"a'b"]),
            (b"ECHO 'a\\nb'\r\n", &[b"ECHO", b"a\\nb"]),
            (b"ECHO a\"b c\"\r\n", &[b"ECHO", b"ab c"]),
            (b"ECHO \"\" ''\r\n", &[b"ECHO", b"", b""]),
            (b"ECHO \"x\"\x0b\r\n", &[b"ECHO", b"x"]),
            (b"ECHO \"a\rb\"\n", &[b"ECHO", b"a\rb"]),
            (b"\"\\xFF\\x00\"\n", &[b"\xff\x00"]),
        ];
        for &(input, expected) in cases {
            let (args, _) = command(input);
            let expected: Vec<Vec<u8>> = expected.iter().map(|a| a.to_vec()).collect();
            assert_eq!(args, expected, "{}", input.escape_ascii());
        }
    }

    #[test]
    fn inline_unbalanced_quotes() {
        for input in [
            &b"SET a \"b\r\n"[..],
            b"ECHO \"a\"b\r\n",
            b"ECHO 'a'b\r\n",
            b"ECHO 'abc\n",
            b"ECHO \"abc\\\"\n",
            b"\"\n",
        ] {
            assert_eq!(
                error(input),
                "Protocol error: unbalanced quotes in request",
                "{}",
                input.escape_ascii()
            );
        }
    }

    #[test]
    fn plain_inline_words_borrow_the_buffer() {
        let buf = b"GET key\r\n";
        let Ok(Parsed::Command { args, .. }) = parse(buf) else {
            panic!()
        };
        assert!(std::ptr::eq(args[1].as_ptr(), buf[4..].as_ptr()));
    }

    #[test]
    fn ten_thousand_command_pipeline_in_one_pass() {
        let mut buf = Vec::new();
        for i in 0..10_000 {
            let key = format!("key:{i}");
            if i % 2 == 0 {
                buf.extend_from_slice(
                    format!(
                        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$5\r\nvalue\r\n",
                        key.len()
                    )
                    .as_bytes(),
                );
            } else {
                buf.extend_from_slice(
                    format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).as_bytes(),
                );
            }
        }
        let mut parser = Parser::default();
        let mut pos = 0;
        let mut n = 0;
        while let Ok(Parsed::Command { args, consumed }) = parser.parse(&buf[pos..]) {
            assert_eq!(args[1], format!("key:{n}").as_bytes());
            pos += consumed;
            n += 1;
        }
        assert_eq!((n, pos), (10_000, buf.len()));
    }

    #[test]
    fn parse_ahead_reads_what_parse_into_reads_or_nothing() {
        // Every prefix of commands in every form: where the look ahead reads a command, the
        // parser reads the same one; it reads every complete everyday command; the rest
        // (inline, incomplete, errors, `*0`) it leaves alone.
        let mut buf = Vec::new();
        for c in [
            &[&b"SET"[..], b"key:1", b"value"][..],
            &[b"GET", b""],
            &[b"LPUSH", &[b'x'; 300], b"\r\n"],
        ] {
            buf.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
            for a in c {
                buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                buf.extend_from_slice(a);
                buf.extend_from_slice(b"\r\n");
            }
        }
        let everyday = buf.len();
        buf.extend_from_slice(b"*0\r\nPING x\r\n*01\r\n$4\r\nPING\r\n*1\r\n+PING\r\n$-1\r\n");
        let limits = Limits {
            max_bulk_len: 200,
            ..Limits::default()
        };
        let mut parser = Parser::new(limits);
        let mut pos = 0;
        while pos < buf.len() {
            for cut in pos..=buf.len() {
                let window = &buf[pos..cut];
                // Appended after what the vector holds, which stays.
                let mut ahead: SmallVec<[&[u8]; 4]> = SmallVec::new();
                ahead.push(b"before");
                let got = parser.parse_ahead(window, &mut ahead);
                assert_eq!(ahead[0], b"before");
                let ahead: Vec<Vec<u8>> = ahead[1..].iter().map(|a| a.to_vec()).collect();
                let mut args = Args::new();
                let r = parser.parse_into(window, &mut args);
                match got {
                    Some(n) => {
                        assert_eq!(r, Ok(Status::Command { consumed: n }));
                        assert_eq!(ahead, args.to_vec());
                    }
                    None => {
                        assert!(ahead.is_empty());
                        // Complete everyday multibulk commands are the look ahead's to read
                        // (an inline command is not: stepping past an error lands in one).
                        if let Ok(Status::Command { .. }) = r {
                            assert!(
                                args.is_empty() || window[0] != b'*' || pos >= everyday,
                                "left {:?}",
                                String::from_utf8_lossy(window)
                            );
                        }
                    }
                }
            }
            let mut args = Args::new();
            pos += match parser.parse_into(&buf[pos..], &mut args) {
                Ok(Status::Command { consumed }) => consumed,
                _ => 1,
            };
        }
    }

    /// What the express scanner accepts, the general parser reads as the same command of the
    /// same length, under any limits; and it accepts the everyday GET and SET, in any case and
    /// with any lengths, or it saves nothing.
    #[test]
    fn scan_express_reads_what_the_general_parser_reads() {
        let rng = crate::testutil::Rng::new(0x2545_f491_4f6c_dd1d);
        let next = || rng.below(u64::MAX);
        let encode = |args: &[&[u8]]| {
            let mut b = format!("*{}\r\n", args.len()).into_bytes();
            for a in args {
                b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                b.extend_from_slice(a);
                b.extend_from_slice(b"\r\n");
            }
            b
        };
        // Whole commands in every case and length are taken, with their bytes (but for empty
        // arguments: `$0` is the general path's, as `quick_header` leaves it).
        for (name, args) in [
            (&b"GET"[..], &[&b"k"[..]][..]),
            (b"get", &[b"key:000000000042"]),
            (b"SeT", &[b"k", b"v"]),
            (b"set", &[&[b'k'; 100][..], &[b'v'; 12345][..]]),
        ] {
            let mut cmd = vec![name];
            cmd.extend_from_slice(args);
            let mut buf = encode(&cmd);
            let whole = buf.len();
            buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
            let (x, got, consumed) = Parser::default().scan_express(&buf).expect("taken");
            assert_eq!(consumed, whole);
            assert_eq!(&got[..x.arity()], &cmd[..]);
        }
        let mut accepted = 0;
        for round in 0..300_000 {
            let key = vec![b'k'; [0, 1, 9, 10, 99, 100, 1000][(next() % 7) as usize]];
            let value = vec![b'v'; [0, 3, 10, 64, 512][(next() % 5) as usize]];
            let mut buf = match next() % 4 {
                0 => encode(&[b"GET", &key]),
                1 => encode(&[b"set", &key, &value]),
                2 => encode(&[b"GET", &key, &value]),
                _ => encode(&[b"SET", &key]),
            };
            // Damage some: a changed byte near a header, a cut, a leading zero, extra bytes.
            match round % 5 {
                0 => {
                    let at = (next() as usize) % buf.len().min(40);
                    let bytes = b"0123456789$*\r\nxSsGg-";
                    buf[at] = bytes[(next() as usize) % bytes.len()];
                }
                1 => buf.truncate((next() as usize) % (buf.len() + 1)),
                2 => {
                    let at = 13 + (next() as usize) % 3;
                    if at < buf.len() {
                        buf.insert(at, b'0');
                    }
                }
                _ => buf.extend_from_slice(b"*1\r\n"),
            }
            let limits = Limits {
                max_bulk_len: [2, 3, 16, 100, 512 * 1024 * 1024][(next() % 5) as usize],
                max_args: [2, 3, 1024][(next() % 3) as usize],
                max_inline_len: [2, 3, 4, 64 * 1024][(next() % 4) as usize],
            };
            let mut parser = Parser::new(limits);
            let Some((x, got, consumed)) = parser.scan_express(&buf) else {
                continue;
            };
            accepted += 1;
            let got: Vec<Vec<u8>> = got[..x.arity()].iter().map(|a| a.to_vec()).collect();
            let mut args = Args::new();
            let r = parser.parse_into(&buf, &mut args);
            assert_eq!(
                r,
                Ok(Status::Command { consumed }),
                "{}",
                buf.escape_ascii()
            );
            assert_eq!(got, args.to_vec(), "{}", buf.escape_ascii());
            assert_eq!(Express::of(&args), Some(x));
        }
        assert!(accepted > 10_000, "only {accepted} commands were taken");
    }

    #[test]
    fn quick_header_agrees_with_the_general_path() {
        // Every line the one-pass reader accepts must read the same through `header_line` and
        // `string2ll`; and it must accept the everyday lines, or it saves nothing.
        let general = |buf: &[u8], max: usize| {
            let (digits_end, next) = header_line(buf, 0, max, ProtocolError::TooBigBulkCount)
                .ok()
                .flatten()?;
            let n = string2ll(buf.get(1..digits_end)?)?;
            Some((usize::try_from(n).ok()?, next))
        };
        let alphabet = b"0123456789-+\r\n x";
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut accepted = 0;
        for round in 0..200_000 {
            let len = (next() % 24) as usize;
            let mut buf = vec![b'$'];
            for _ in 0..len {
                let pick = next() as usize;
                // Mostly digits, so that long valid numbers come up.
                buf.push(if pick % 3 == 0 {
                    alphabet[(pick >> 8) % alphabet.len()]
                } else {
                    b'0' + ((pick >> 8) % 10) as u8
                });
            }
            if round % 2 == 0 {
                let at = (next() as usize) % buf.len();
                buf.insert(at.max(1), b'\r');
            }
            let max = [2usize, 3, 5, 19, 20, 64 * 1024][(next() % 6) as usize];
            if let Some(quick) = quick_header(&buf, 0, max) {
                accepted += 1;
                assert_eq!(
                    Some(quick),
                    general(&buf, max),
                    "{:?} max {max}",
                    buf.escape_ascii().to_string()
                );
            }
        }
        assert!(accepted > 1000, "only {accepted} lines took the quick path");
        for (line, want) in [
            (&b"$3\r\nGET"[..], Some((3, 4))),
            (b"*2\r\n", Some((2, 4))),
            (
                b"$123456789012345678\r\n",
                Some((123_456_789_012_345_678, 21)),
            ),
            (b"$1234567890123456789\r\n", None),
            (b"$0\r\n", None),
            (b"$-1\r\n", None),
            (b"$01\r\n", None),
            (b"$3\r", None),
            (b"$\r\n", None),
        ] {
            assert_eq!(
                quick_header(line, 0, 64 * 1024),
                want,
                "{:?}",
                line.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn string2ll_like_redis() {
        for (s, v) in [
            ("0", Some(0)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
        ] {
            assert_eq!(string2ll(s.as_bytes()), v, "{s}");
        }
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for s in [
            "",
            "-",
            "-0",
            "01",
            "+1",
            " 1",
            "1 ",
            "9223372036854775808",
            "-9223372036854775809",
            "1a",
        ] {
            assert_eq!(string2ll(s.as_bytes()), None, "{s}");
        }
    }

    proptest! {
        #[test]
        fn any_bytes_hold_the_invariants(input in proptest::collection::vec(any::<u8>(), 0..200)) {
            crate::resp::check_roundtrip(&input);
        }

        #[test]
        fn protocol_like_bytes_hold_the_invariants(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    &b"*"[..], b"$", b"\r\n", b"\r", b"\n", b"1", b"3", b"-1", b"0", b" ", b"\"", b"'", b"\\",
                    b"\\x4", b"PING", b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
                ]),
                0..40,
            )
        ) {
            crate::resp::check_roundtrip(&parts.concat());
        }

        #[test]
        fn multibulk_encoding_round_trips(args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20)) {
            let mut buf = Vec::new();
            buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in &args {
                buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                buf.extend_from_slice(a);
                buf.extend_from_slice(b"\r\n");
            }
            let (parsed, consumed) = command(&buf);
            prop_assert_eq!(parsed, args);
            prop_assert_eq!(consumed, buf.len());
        }
    }
}
