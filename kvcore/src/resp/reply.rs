//! Client side: parses the replies a server sends (RESP2 and RESP3).
//!
//! [`parse_reply`] builds a [`Value`] tree for tests and the embedded API;
//! [`skip_reply`] only finds where a reply ends, without allocating, for
//! load generators that count replies. Both return `Ok(None)` until the
//! whole reply is in the buffer. Nesting is bounded by [`MAX_NESTING`] and
//! no vector is sized from a count larger than the bytes at hand could
//! hold, so a hostile server can make neither overflow the stack nor
//! allocate memory it did not send.

use std::fmt;

use memchr::memchr;

use super::write::{Proto, ReplyWriter};

/// Deepest nesting of aggregates [`parse_reply`] accepts.
pub const MAX_NESTING: usize = 64;

/// One reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `+text`.
    Simple(Vec<u8>),
    /// `-text` (also RESP3's blob error `!len`).
    Error(Vec<u8>),
    /// `:n`.
    Int(i64),
    /// `$len` bytes.
    Bulk(Vec<u8>),
    /// RESP2's null bulk `$-1`, RESP3's `_`.
    Null,
    /// RESP2's null array `*-1`.
    NullArray,
    /// `*n`.
    Array(Vec<Value>),
    /// RESP3 `%n`: key-value pairs in the order sent.
    Map(Vec<(Value, Value)>),
    /// RESP3 `~n`.
    Set(Vec<Value>),
    /// RESP3 `>n`: an out-of-band message (pub/sub, invalidation).
    Push(Vec<Value>),
    /// RESP3 `,text`.
    Double(f64),
    /// RESP3 `#t` / `#f`.
    Bool(bool),
    /// RESP3 `=len` with a three-letter format (`txt`, `mkd`).
    Verbatim {
        /// The format, e.g. `*b"txt"`.
        format: [u8; 3],
        /// The text after `fmt:`.
        text: Vec<u8>,
    },
    /// RESP3 `(digits`.
    BigNumber(Vec<u8>),
}

/// A reply that is not valid RESP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyError {
    /// A type byte RESP does not define (holds the byte).
    UnknownType(u8),
    /// A line or a bulk not ended by `\r\n`.
    MissingCrlf,
    /// A length or count that is not a valid number for its type.
    InvalidLength,
    /// A `:` reply that is not a 64-bit integer.
    InvalidInteger,
    /// A `,` reply that is not a double.
    InvalidDouble,
    /// A `#` reply other than `t` or `f`, or `_` with a payload.
    InvalidScalar,
    /// A verbatim string without its `fmt:` prefix.
    InvalidVerbatim,
    /// Aggregates nested deeper than [`MAX_NESTING`].
    TooDeep,
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyError::UnknownType(b) => write!(f, "unknown reply type byte 0x{b:02x}"),
            ReplyError::MissingCrlf => f.write_str("reply line or bulk not ended by CRLF"),
            ReplyError::InvalidLength => f.write_str("invalid length in reply"),
            ReplyError::InvalidInteger => f.write_str("invalid integer reply"),
            ReplyError::InvalidDouble => f.write_str("invalid double reply"),
            ReplyError::InvalidScalar => f.write_str("invalid null or boolean reply"),
            ReplyError::InvalidVerbatim => f.write_str("invalid verbatim string reply"),
            ReplyError::TooDeep => f.write_str("reply nested too deeply"),
        }
    }
}

impl std::error::Error for ReplyError {}

type Step<T> = Result<Option<T>, ReplyError>;

/// Parses the reply at the start of `buf`: the value and the bytes it
/// used, or `Ok(None)` if it is not all there yet. RESP3 attributes (`|`)
/// are read and dropped.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Value, usize)>, ReplyError> {
    let mut pos = 0;
    Ok(value(buf, &mut pos, 0)?.map(|v| (v, pos)))
}

/// Finds the end of the reply at the start of `buf` without building it:
/// the bytes it used and whether it is an error reply, or `Ok(None)` if it
/// is not all there yet. Checks framing (lengths, CRLF), not the text of
/// scalars, and has no nesting limit (it keeps a count, not a stack).
#[deny(clippy::indexing_slicing, clippy::unwrap_used)]
pub fn skip_reply(buf: &[u8]) -> Result<Option<(usize, bool)>, ReplyError> {
    let mut pos = 0;
    let mut pending: u64 = 1;
    let mut is_error = None;
    while pending > 0 {
        let Some((ty, line, next)) = header(buf, pos)? else {
            return Ok(None);
        };
        pending -= 1;
        if ty != b'|' {
            is_error.get_or_insert(matches!(ty, b'-' | b'!'));
        }
        pos = next;
        match ty {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
            b'$' | b'=' | b'!' => {
                let len = number(line, ReplyError::InvalidLength)?;
                if len == -1 && ty == b'$' {
                    continue;
                }
                let Some(data) = bulk(buf, pos, len)? else {
                    return Ok(None);
                };
                pos = data.1;
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n = number(line, ReplyError::InvalidLength)?;
                if n == -1 && ty == b'*' {
                    continue;
                }
                let n = u64::try_from(n).map_err(|_| ReplyError::InvalidLength)?;
                pending = pending.saturating_add(match ty {
                    b'%' => n.saturating_mul(2),
                    // An attribute map, then the reply it annotates.
                    b'|' => n.saturating_mul(2).saturating_add(1),
                    _ => n,
                });
            }
            other => return Err(ReplyError::UnknownType(other)),
        }
    }
    Ok(Some((pos, is_error.unwrap_or(false))))
}

/// Reads the type byte and line at `pos`: `(type, line, index after CRLF)`.
#[deny(clippy::indexing_slicing, clippy::unwrap_used)]
fn header(buf: &[u8], pos: usize) -> Step<(u8, &[u8], usize)> {
    let Some((&ty, rest)) = buf.get(pos..).and_then(<[u8]>::split_first) else {
        return Ok(None);
    };
    let Some(cr) = memchr(b'\r', rest) else {
        return Ok(None);
    };
    match rest.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some((
            ty,
            rest.get(..cr).unwrap_or_default(),
            pos + 1 + cr + 2,
        ))),
        Some(_) => Err(ReplyError::MissingCrlf),
    }
}

/// The `len` bytes at `pos` and the index after their CRLF.
#[deny(clippy::indexing_slicing, clippy::unwrap_used)]
fn bulk(buf: &[u8], pos: usize, len: i64) -> Step<(&[u8], usize)> {
    let len = usize::try_from(len).map_err(|_| ReplyError::InvalidLength)?;
    let end = pos.checked_add(len).ok_or(ReplyError::InvalidLength)?;
    let (Some(data), Some(crlf)) = (buf.get(pos..end), buf.get(end..end.saturating_add(2))) else {
        return Ok(None);
    };
    if crlf != b"\r\n" {
        return Err(ReplyError::MissingCrlf);
    }
    Ok(Some((data, end + 2)))
}

fn number(line: &[u8], error: ReplyError) -> Result<i64, ReplyError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(error)
}

fn value(buf: &[u8], pos: &mut usize, depth: usize) -> Step<Value> {
    let Some((ty, line, next)) = header(buf, *pos)? else {
        return Ok(None);
    };
    *pos = next;
    let v = match ty {
        b'+' => Value::Simple(line.to_vec()),
        b'-' => Value::Error(line.to_vec()),
        b':' => Value::Int(number(line, ReplyError::InvalidInteger)?),
        b'(' => Value::BigNumber(line.to_vec()),
        b'_' if line.is_empty() => Value::Null,
        b'#' => match line {
            b"t" => Value::Bool(true),
            b"f" => Value::Bool(false),
            _ => return Err(ReplyError::InvalidScalar),
        },
        b'_' => return Err(ReplyError::InvalidScalar),
        b',' => Value::Double(
            std::str::from_utf8(line)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(ReplyError::InvalidDouble)?,
        ),
        b'$' | b'=' | b'!' => {
            let len = number(line, ReplyError::InvalidLength)?;
            if len == -1 && ty == b'$' {
                return Ok(Some(Value::Null));
            }
            let Some((data, end)) = bulk(buf, *pos, len)? else {
                return Ok(None);
            };
            *pos = end;
            match (ty, data) {
                (b'$', _) => Value::Bulk(data.to_vec()),
                (b'!', _) => Value::Error(data.to_vec()),
                (_, [a, b, c, b':', text @ ..]) => Value::Verbatim {
                    format: [*a, *b, *c],
                    text: text.to_vec(),
                },
                _ => return Err(ReplyError::InvalidVerbatim),
            }
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = number(line, ReplyError::InvalidLength)?;
            if n == -1 && ty == b'*' {
                return Ok(Some(Value::NullArray));
            }
            let n = usize::try_from(n).map_err(|_| ReplyError::InvalidLength)?;
            if depth >= MAX_NESTING {
                return Err(ReplyError::TooDeep);
            }
            let Some(v) = aggregate(buf, pos, depth, ty, n)? else {
                return Ok(None);
            };
            v
        }
        other => return Err(ReplyError::UnknownType(other)),
    };
    Ok(Some(v))
}

/// The `n` elements (or pairs) of an aggregate of type `ty`.
fn aggregate(buf: &[u8], pos: &mut usize, depth: usize, ty: u8, n: usize) -> Step<Value> {
    // Each element takes at least 3 bytes ("_\r\n"): cap the allocation.
    let room = buf.len().saturating_sub(*pos) / 3;
    if ty == b'%' || ty == b'|' {
        let mut pairs = Vec::with_capacity(n.min(room / 2));
        for _ in 0..n {
            let Some(k) = value(buf, pos, depth + 1)? else {
                return Ok(None);
            };
            let Some(v) = value(buf, pos, depth + 1)? else {
                return Ok(None);
            };
            pairs.push((k, v));
        }
        if ty == b'|' {
            // Attributes annotate the reply that follows; we drop them. The
            // reply counts as nested so that chains of attributes are bounded.
            return value(buf, pos, depth + 1);
        }
        return Ok(Some(Value::Map(pairs)));
    }
    let mut items = Vec::with_capacity(n.min(room));
    for _ in 0..n {
        let Some(v) = value(buf, pos, depth + 1)? else {
            return Ok(None);
        };
        items.push(v);
    }
    Ok(Some(match ty {
        b'~' => Value::Set(items),
        b'>' => Value::Push(items),
        _ => Value::Array(items),
    }))
}

impl Value {
    /// Appends this value in RESP3 (`NullArray` as RESP2's `*-1`).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = ReplyWriter::new(out, Proto::Resp3);
        self.write(&mut w);
    }

    /// Writes this value through `w`, in `w`'s protocol.
    pub fn write(&self, w: &mut ReplyWriter<'_>) {
        match self {
            Value::Simple(s) => w.simple(s),
            Value::Error(e) => w.error(e),
            Value::Int(n) => w.int(*n),
            Value::Bulk(b) => w.bulk(b),
            Value::Null => w.null(),
            Value::NullArray if w.proto == Proto::Resp3 => w.out.extend_from_slice(b"*-1\r\n"),
            Value::NullArray => w.null_array(),
            Value::Array(items) | Value::Set(items) | Value::Push(items) => {
                match self {
                    Value::Set(_) => w.set_len(items.len()),
                    Value::Push(_) => w.push_len(items.len()),
                    _ => w.array_len(items.len()),
                }
                for item in items {
                    item.write(w);
                }
            }
            Value::Map(pairs) => {
                w.map_len(pairs.len());
                for (k, v) in pairs {
                    k.write(w);
                    v.write(w);
                }
            }
            Value::Double(d) => w.double(*d),
            Value::Bool(b) => w.bool(*b),
            Value::Verbatim { format, text } => w.verbatim(format, text),
            Value::BigNumber(digits) => w.big_number(digits),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(bytes: &[u8]) -> Value {
        let (v, used) = parse_reply(bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(skip_reply(bytes).unwrap().unwrap().0, bytes.len());
        // Every proper prefix is incomplete.
        for cut in 0..bytes.len() {
            assert_eq!(parse_reply(&bytes[..cut]), Ok(None), "cut {cut}");
            assert_eq!(skip_reply(&bytes[..cut]), Ok(None), "cut {cut}");
        }
        v
    }

    #[test]
    fn scalars() {
        assert_eq!(parse_all(b"+OK\r\n"), Value::Simple(b"OK".to_vec()));
        assert_eq!(parse_all(b"-ERR x\r\n"), Value::Error(b"ERR x".to_vec()));
        assert_eq!(parse_all(b":-12\r\n"), Value::Int(-12));
        assert_eq!(
            parse_all(b"$3\r\na\r\n\r\n"),
            Value::Bulk(b"a\r\n".to_vec())
        );
        assert_eq!(parse_all(b"$-1\r\n"), Value::Null);
        assert_eq!(parse_all(b"*-1\r\n"), Value::NullArray);
        assert_eq!(parse_all(b"_\r\n"), Value::Null);
        assert_eq!(parse_all(b",1.5\r\n"), Value::Double(1.5));
        assert_eq!(parse_all(b",-inf\r\n"), Value::Double(f64::NEG_INFINITY));
        assert_eq!(parse_all(b"#t\r\n"), Value::Bool(true));
        assert_eq!(parse_all(b"(123\r\n"), Value::BigNumber(b"123".to_vec()));
        assert_eq!(
            parse_all(b"!5\r\nERR x\r\n"),
            Value::Error(b"ERR x".to_vec())
        );
        assert_eq!(
            parse_all(b"=8\r\ntxt:abcd\r\n"),
            Value::Verbatim {
                format: *b"txt",
                text: b"abcd".to_vec()
            }
        );
    }

    #[test]
    fn aggregates() {
        let v = parse_all(b"*3\r\n:1\r\n*1\r\n+a\r\n%1\r\n$1\r\nk\r\n~1\r\n#f\r\n");
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Int(1),
                Value::Array(vec![Value::Simple(b"a".to_vec())]),
                Value::Map(vec![(
                    Value::Bulk(b"k".to_vec()),
                    Value::Set(vec![Value::Bool(false)])
                )]),
            ])
        );
        assert_eq!(
            parse_all(b">2\r\n+a\r\n+b\r\n"),
            Value::Push(vec![
                Value::Simple(b"a".to_vec()),
                Value::Simple(b"b".to_vec())
            ])
        );
        assert_eq!(parse_all(b"|1\r\n+ttl\r\n:3\r\n:7\r\n"), Value::Int(7));
        assert_eq!(parse_all(b"*0\r\n"), Value::Array(vec![]));
    }

    #[test]
    fn error_flag_and_pipelines() {
        assert_eq!(skip_reply(b"-ERR x\r\n+OK\r\n"), Ok(Some((8, true))));
        assert_eq!(skip_reply(b"+OK\r\n-ERR x\r\n"), Ok(Some((5, false))));
        assert_eq!(skip_reply(b"*2\r\n-ERR\r\n:1\r\n"), Ok(Some((14, false))));
        assert_eq!(parse_reply(b":1\r\n:2\r\n"), Ok(Some((Value::Int(1), 4))));
    }

    #[test]
    fn malformed() {
        assert_eq!(parse_reply(b"?x\r\n"), Err(ReplyError::UnknownType(b'?')));
        assert_eq!(skip_reply(b"?x\r\n"), Err(ReplyError::UnknownType(b'?')));
        assert_eq!(parse_reply(b"+OK\rX"), Err(ReplyError::MissingCrlf));
        assert_eq!(parse_reply(b"$1\r\nabc"), Err(ReplyError::MissingCrlf));
        assert_eq!(skip_reply(b"$1\r\nabc"), Err(ReplyError::MissingCrlf));
        assert_eq!(parse_reply(b"$-2\r\n"), Err(ReplyError::InvalidLength));
        assert_eq!(parse_reply(b"*x\r\n"), Err(ReplyError::InvalidLength));
        assert_eq!(parse_reply(b"%-1\r\n"), Err(ReplyError::InvalidLength));
        assert_eq!(parse_reply(b":1.5\r\n"), Err(ReplyError::InvalidInteger));
        assert_eq!(parse_reply(b",x\r\n"), Err(ReplyError::InvalidDouble));
        assert_eq!(parse_reply(b"#x\r\n"), Err(ReplyError::InvalidScalar));
        assert_eq!(
            parse_reply(b"=3\r\ntxt\r\n"),
            Err(ReplyError::InvalidVerbatim)
        );
    }

    #[test]
    fn huge_counts_allocate_nothing_up_front() {
        // Claims 2^62 elements but sends one: incomplete, no giant allocation.
        assert_eq!(parse_reply(b"*4611686018427387904\r\n:1\r\n"), Ok(None));
        assert_eq!(skip_reply(b"*4611686018427387904\r\n:1\r\n"), Ok(None));
        assert_eq!(parse_reply(b"$4611686018427387904\r\nab"), Ok(None));
    }

    #[test]
    fn nesting_is_bounded() {
        let nested = |levels: usize| {
            let mut bytes = b"*1\r\n".repeat(levels);
            bytes.extend_from_slice(b":1\r\n");
            bytes
        };
        assert!(parse_reply(&nested(MAX_NESTING)).unwrap().is_some());
        assert_eq!(
            parse_reply(&nested(MAX_NESTING + 1)),
            Err(ReplyError::TooDeep)
        );
        // Far deeper than any stack could recurse: still an error, no overflow.
        assert_eq!(parse_reply(&nested(1_000_000)), Err(ReplyError::TooDeep));
        assert_eq!(
            skip_reply(&nested(100_000)).unwrap().unwrap().0,
            100_000 * 4 + 4
        );
        let attributes = b"|0\r\n".repeat(100_000);
        assert_eq!(parse_reply(&attributes), Err(ReplyError::TooDeep));
    }

    #[test]
    fn encode_round_trips() {
        let v = Value::Array(vec![
            Value::Map(vec![(Value::Simple(b"a".to_vec()), Value::Double(1.1))]),
            Value::Set(vec![Value::Int(i64::MIN), Value::Null, Value::NullArray]),
            Value::Push(vec![Value::Bool(true), Value::BigNumber(b"-1".to_vec())]),
            Value::Verbatim {
                format: *b"mkd",
                text: b"# t".to_vec(),
            },
            Value::Error(b"ERR e".to_vec()),
            Value::Bulk(b"\r\n\0".to_vec()),
        ]);
        let mut out = Vec::new();
        v.encode(&mut out);
        assert_eq!(parse_all(&out), v);
    }
}
