//! Self-checks shared by the fuzz targets and the corpus test.
//!
//! Each takes arbitrary bytes and panics if the codec breaks one of its
//! promises, so `cargo fuzz` and `cargo test` run the very same checks.

use super::float::{format_double, DOUBLE_BUF_LEN};
use super::parse::{Limits, Parsed, Parser, Status};
use super::reply::{parse_reply, skip_reply, Value};
use super::write::{Proto, ReplyWriter};
use super::ProtocolError;

/// Everything one connection's parser made of its input.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// `(offset, consumed, args)` of each command, in order.
    commands: Vec<(usize, usize, Vec<Vec<u8>>)>,
    /// The error that ended the stream, if any.
    error: Option<ProtocolError>,
}

/// Feeds `input` to one parser in pieces ending at each of `cuts` (the
/// last must be `input.len()`), as a connection would; also returns the
/// `(offset, hint)` of every `Incomplete`.
fn run(
    limits: Limits,
    input: &[u8],
    cuts: impl IntoIterator<Item = usize>,
) -> (Outcome, Vec<(usize, usize)>) {
    let mut parser = Parser::new(limits);
    let mut outcome = Outcome {
        commands: Vec::new(),
        error: None,
    };
    let mut hints = Vec::new();
    let mut start = 0;
    for avail in cuts {
        loop {
            match parser.parse(&input[start..avail]) {
                Ok(Parsed::Command { args, consumed }) => {
                    assert!(
                        consumed > 0 && consumed <= avail - start,
                        "consumed {consumed} of {}",
                        avail - start
                    );
                    outcome.commands.push((
                        start,
                        consumed,
                        args.iter().map(|a| a.to_vec()).collect(),
                    ));
                    start += consumed;
                }
                Ok(Parsed::Incomplete { hint }) => {
                    hints.push((start, hint));
                    break;
                }
                Err(e) => {
                    outcome.error = Some(e);
                    return (outcome, hints);
                }
            }
        }
    }
    (outcome, hints)
}

/// Encodes `args` as a multibulk request.
fn multibulk(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, Proto::Resp2);
    w.array_len(args.len());
    for arg in args {
        w.bulk(arg);
    }
    out
}

/// Checks the request parser on `input`, read as one connection's bytes,
/// under the default limits and under tiny ones:
///
/// - it never panics, and every command consumes at least one byte;
/// - the same bytes split at any point (or fed byte by byte, for short
///   inputs) give the same commands and the same error;
/// - [`Parser::parse_ahead`] reads every multibulk command with arguments as the parser
///   does, and nothing else;
/// - what [`Parser::scan_express`] takes at any offset, the parser reads as the same command
///   of the same length;
/// - an `Incomplete` hint never exceeds the size of the command it was for;
/// - every command re-encoded as multibulk parses back to the same
///   arguments, consuming exactly the encoding.
///
/// # Panics
///
/// When one of these fails; that is the point.
pub fn check_roundtrip(input: &[u8]) {
    let tiny = Limits {
        max_bulk_len: 16,
        max_args: 4,
        max_inline_len: 24,
    };
    for limits in [Limits::default(), tiny] {
        let len = input.len();
        let (whole, _) = run(limits, input, [len]);
        let step = if len <= 300 { 1 } else { len / 97 };
        let splits = (0..=len).step_by(step.max(1));
        for cut in splits {
            let (split, hints) = run(limits, input, [cut, len]);
            assert_eq!(split, whole, "split at {cut}");
            for (offset, hint) in hints {
                if let Some(&(_, consumed, _)) = whole.commands.iter().find(|c| c.0 == offset) {
                    assert!(
                        hint <= consumed,
                        "hint {hint} > command size {consumed} at {offset}"
                    );
                }
            }
        }
        if len <= 300 {
            assert_eq!(run(limits, input, 1..=len).0, whole, "byte by byte");
        }
        // The server's look ahead reads what the parser reads: every multibulk command with
        // arguments, the same way, and nothing else.
        let parser = Parser::new(limits);
        for &(offset, consumed, ref args) in &whole.commands {
            let rest = input.get(offset..).unwrap_or_default();
            let mut ahead: super::Args = super::Args::new();
            ahead.push(b"kept");
            let got = parser.parse_ahead(rest, &mut ahead);
            assert_eq!(ahead.first(), Some(&&b"kept"[..]), "look ahead at {offset}");
            if rest.first() == Some(&b'*') && !args.is_empty() {
                assert_eq!(got, Some(consumed), "look ahead at {offset}");
                assert!(
                    ahead[1..]
                        .iter()
                        .map(|a| a.to_vec())
                        .eq(args.iter().cloned()),
                    "look ahead at {offset}"
                );
            } else {
                assert_eq!(got, None, "look ahead at {offset}");
                assert_eq!(ahead.len(), 1, "look ahead at {offset}");
            }
        }
        // The express scanner, wherever it is pointed: what it takes, the parser reads as the
        // same command of the same length.
        let step = if len <= 300 { 1 } else { len / 97 };
        for offset in (0..len).step_by(step.max(1)) {
            let rest = input.get(offset..).unwrap_or_default();
            if let Some((x, got, consumed)) = parser.scan_express(rest) {
                let mut general = Parser::new(limits);
                let mut args = super::Args::new();
                let r = general.parse_into(rest, &mut args);
                assert_eq!(r, Ok(Status::Command { consumed }), "express at {offset}");
                assert_eq!(&got[..x.arity()], &args[..], "express at {offset}");
            }
        }
        for (_, _, args) in &whole.commands {
            let encoded = multibulk(args);
            let mut parser = Parser::new(Limits::default());
            match parser.parse(&encoded) {
                Ok(Parsed::Command {
                    args: back,
                    consumed,
                }) => {
                    assert_eq!(consumed, encoded.len());
                    assert!(
                        back.iter().map(|a| a.to_vec()).eq(args.iter().cloned()),
                        "re-encoded {args:?}"
                    );
                }
                other => panic!("re-encoded {args:?} parsed as {other:?}"),
            };
        }
    }
}

/// A value built from fuzz bytes, written with [`ReplyWriter`], and what
/// a client must read back in RESP2 and in RESP3.
struct Case {
    resp2: Value,
    resp3: Value,
}

/// Consumes bytes from the front of `data` (zeros once it runs out).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head.to_vec()
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, _| acc << 8 | u64::from(self.byte()))
    }
}

/// Writes one value chosen by `data` and returns what it should read as.
fn gen(
    data: &mut Bytes<'_>,
    w2: &mut ReplyWriter<'_>,
    w3: &mut ReplyWriter<'_>,
    depth: usize,
) -> Case {
    let tag = data.byte();
    let both = |v: Value| Case {
        resp2: v.clone(),
        resp3: v,
    };
    let line = |data: &mut Bytes<'_>| {
        let n = usize::from(data.byte() % 16);
        data.take(n)
            .into_iter()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect::<Vec<u8>>()
    };
    let kind = if depth >= 4 { tag % 10 } else { tag % 14 };
    match kind {
        0 => {
            let s = line(data);
            w2.simple(&s);
            w3.simple(&s);
            both(Value::Simple(s))
        }
        1 => {
            let s = line(data);
            w2.error(&s);
            w3.error(&s);
            both(Value::Error(s))
        }
        2 => {
            let n = data.u64() as i64;
            w2.int(n);
            w3.int(n);
            both(Value::Int(n))
        }
        3 => {
            let n = usize::from(data.byte());
            let b = data.take(n);
            w2.bulk(&b);
            w3.bulk(&b);
            both(Value::Bulk(b))
        }
        4 => {
            w2.null();
            w3.null();
            both(Value::Null)
        }
        5 => {
            w2.null_array();
            w3.null_array();
            Case {
                resp2: Value::NullArray,
                resp3: Value::Null,
            }
        }
        6 => {
            let mut d = f64::from_bits(data.u64());
            if d.is_nan() {
                d = f64::INFINITY;
            }
            w2.double(d);
            w3.double(d);
            let mut text = [0u8; DOUBLE_BUF_LEN];
            Case {
                resp2: Value::Bulk(format_double(d, &mut text).to_vec()),
                resp3: Value::Double(d),
            }
        }
        7 => {
            let b = data.byte() & 1 == 1;
            w2.bool(b);
            w3.bool(b);
            Case {
                resp2: Value::Int(i64::from(b)),
                resp3: Value::Bool(b),
            }
        }
        8 => {
            let n = usize::from(data.byte() % 32);
            let text = data.take(n);
            w2.verbatim(b"txt", &text);
            w3.verbatim(b"txt", &text);
            Case {
                resp2: Value::Bulk(text.clone()),
                resp3: Value::Verbatim {
                    format: *b"txt",
                    text,
                },
            }
        }
        9 => {
            let digits = itoa::Buffer::new()
                .format(data.u64() as i64)
                .as_bytes()
                .to_vec();
            w2.big_number(&digits);
            w3.big_number(&digits);
            Case {
                resp2: Value::Bulk(digits.clone()),
                resp3: Value::BigNumber(digits),
            }
        }
        kind => {
            let n = usize::from(data.byte() % 5);
            let (mut two, mut three) = (Vec::new(), Vec::new());
            match kind {
                10 => (w2.array_len(n), w3.array_len(n)),
                11 => (w2.set_len(n), w3.set_len(n)),
                12 => (w2.push_len(n), w3.push_len(n)),
                _ => (w2.map_len(n), w3.map_len(n)),
            };
            let items = if kind == 13 { 2 * n } else { n };
            for _ in 0..items {
                let case = gen(data, w2, w3, depth + 1);
                two.push(case.resp2);
                three.push(case.resp3);
            }
            let resp3 = match kind {
                10 => Value::Array(three),
                11 => Value::Set(three),
                12 => Value::Push(three),
                _ => {
                    let mut it = three.into_iter();
                    Value::Map(std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect())
                }
            };
            Case {
                resp2: Value::Array(two),
                resp3,
            }
        }
    }
}

/// Checks the reply writer against the reply parser: a sequence of values
/// chosen by `data` is written in RESP2 and in RESP3, and must read back as
/// expected with [`parse_reply`], [`skip_reply`] must agree on where each
/// reply ends, and [`Value::encode`] must read back unchanged. Every proper
/// prefix of a reply must read as incomplete.
///
/// # Panics
///
/// When one of these fails.
pub fn check_writer_roundtrip(data: &[u8]) {
    let mut data = Bytes(data);
    let (mut out2, mut out3) = (Vec::new(), Vec::new());
    let mut cases = Vec::new();
    while !data.0.is_empty() && cases.len() < 64 {
        let mut w2 = ReplyWriter::new(&mut out2, Proto::Resp2);
        let mut w3 = ReplyWriter::new(&mut out3, Proto::Resp3);
        cases.push(gen(&mut data, &mut w2, &mut w3, 0));
    }
    for (out, resp3) in [(&out2, false), (&out3, true)] {
        let mut pos = 0;
        for case in &cases {
            let expected = if resp3 { &case.resp3 } else { &case.resp2 };
            let rest = &out[pos..];
            let (value, used) = parse_reply(rest)
                .expect("valid reply")
                .expect("complete reply");
            assert_eq!(&value, expected);
            let (skipped, is_error) = skip_reply(rest)
                .expect("valid reply")
                .expect("complete reply");
            assert_eq!(skipped, used);
            assert_eq!(is_error, matches!(value, Value::Error(_)));
            for cut in [0, used / 2, used - 1] {
                assert_eq!(parse_reply(&rest[..cut]), Ok(None));
                assert_eq!(skip_reply(&rest[..cut]), Ok(None));
            }
            let mut again = Vec::new();
            value.encode(&mut again);
            assert_eq!(parse_reply(&again), Ok(Some((value, again.len()))));
            pos += used;
        }
        assert_eq!(pos, out.len());
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn writer_and_reply_parser_agree(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            super::check_writer_roundtrip(&data);
        }
    }
}
