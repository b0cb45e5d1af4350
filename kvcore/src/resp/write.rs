//! Reply writer: appends RESP2 or RESP3 replies to an output buffer.
//!
//! Each method writes exactly one reply (or one aggregate header, to be
//! followed by its elements) as Redis 7.0 encodes it for the connection's
//! protocol. Numbers are written with `itoa`; nothing goes through `fmt`.

use super::float::{format_double, DOUBLE_BUF_LEN};
use super::ProtocolError;

/// The protocol a connection speaks (`HELLO 2` / `HELLO 3`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Proto {
    /// RESP2, the default.
    #[default]
    Resp2,
    /// RESP3.
    Resp3,
}

/// Appends replies to `out` in the encoding of `proto`.
#[derive(Debug)]
pub struct ReplyWriter<'a> {
    /// The connection's output buffer.
    pub out: &'a mut Vec<u8>,
    /// The protocol the replies are encoded in.
    pub proto: Proto,
}

const CRLF: &[u8] = b"\r\n";
/// The longest `<type><integer>\r\n` header: a type byte, up to 20 digits or a sign and 19
/// digits (`itoa` of any 64-bit integer), and CRLF.
const HEADER_MAX: usize = 1 + 20 + 2;

impl<'a> ReplyWriter<'a> {
    /// A writer appending to `out`.
    pub fn new(out: &'a mut Vec<u8>, proto: Proto) -> Self {
        ReplyWriter { out, proto }
    }

    fn resp3(&self) -> bool {
        self.proto == Proto::Resp3
    }

    /// `<ty><n>\r\n<body>\r\n`, or `<ty><n>\r\n` when `body` is `None`.
    fn framed<N: itoa::Integer>(&mut self, ty: u8, n: N, body: Option<&[&[u8]]>) {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(n).as_bytes();
        // The header goes out as one copy: most replies are a header and little else, and
        // each `extend_from_slice` is a capacity check and a `memcpy` call.
        let mut header = [0u8; HEADER_MAX];
        let header_len = digits.len() + 1 + CRLF.len();
        header[0] = ty;
        header[1..=digits.len()].copy_from_slice(digits);
        header[digits.len() + 1..header_len].copy_from_slice(CRLF);
        let body_len = body.map_or(0, |parts| {
            parts.iter().map(|p| p.len()).sum::<usize>() + CRLF.len()
        });
        self.out.reserve(header_len + body_len);
        self.out.extend_from_slice(&header[..header_len]);
        if let Some(parts) = body {
            for part in parts {
                self.out.extend_from_slice(part);
            }
            self.out.extend_from_slice(CRLF);
        }
    }

    /// `<ty><n>\r\n` for a length or count, with room reserved for `more` bytes after it.
    /// Below 1000 (nearly every reply) the header is built in one word, without `itoa`.
    #[inline(always)]
    fn head(&mut self, ty: u8, n: usize, more: usize) {
        let (word, len) = match n {
            0..=9 => (
                u64::from(ty) | (b'0' as u64 + n as u64) << 8 | 0x0a0d << 16,
                4,
            ),
            10..=99 => (
                u64::from(ty)
                    | (b'0' as u64 + n as u64 / 10) << 8
                    | (b'0' as u64 + n as u64 % 10) << 16
                    | 0x0a0d << 24,
                5,
            ),
            100..=999 => (
                u64::from(ty)
                    | (b'0' as u64 + n as u64 / 100) << 8
                    | (b'0' as u64 + n as u64 / 10 % 10) << 16
                    | (b'0' as u64 + n as u64 % 10) << 24
                    | 0x0a0d << 32,
                6,
            ),
            _ => {
                self.out.reserve(HEADER_MAX + more);
                return self.framed(ty, n, None);
            }
        };
        // The whole word (a fixed-size copy), then the bytes past the header dropped.
        let at = self.out.len();
        self.out.reserve(8 + more);
        self.out.extend_from_slice(&word.to_le_bytes());
        self.out.truncate(at + len);
    }

    /// `<ty><text>\r\n`.
    fn line(&mut self, ty: u8, text: &[u8]) {
        self.out.reserve(1 + text.len() + CRLF.len());
        self.out.push(ty);
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(CRLF);
    }

    /// A simple string, `+text\r\n`. `text` must not contain `\r` or `\n`.
    pub fn simple(&mut self, text: &[u8]) {
        self.line(b'+', text);
    }

    /// `+OK\r\n`.
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// An error, `-text\r\n`; `text` is the whole line, e.g. `b"ERR syntax error"`.
    pub fn error(&mut self, text: &[u8]) {
        self.line(b'-', text);
    }

    /// A protocol error: `-ERR Protocol error: ...\r\n`.
    pub fn protocol_error(&mut self, error: ProtocolError) {
        let text = error.as_bytes();
        self.out.reserve(5 + text.len() + CRLF.len());
        self.out.extend_from_slice(b"-ERR ");
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(CRLF);
    }

    /// An integer, `:n\r\n`.
    pub fn int(&mut self, n: i64) {
        match usize::try_from(n) {
            Ok(n) => self.head(b':', n, 0),
            Err(_) => self.framed(b':', n, None),
        }
    }

    /// A bulk string, `$len\r\nbytes\r\n`.
    pub fn bulk(&mut self, bytes: &[u8]) {
        self.head(b'$', bytes.len(), bytes.len() + CRLF.len());
        self.out.extend_from_slice(bytes);
        self.out.extend_from_slice(CRLF);
    }

    /// An integer as a bulk string (`GET` of an integer-encoded value).
    pub fn bulk_int(&mut self, n: i64) {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(n).as_bytes();
        self.bulk(digits);
    }

    /// The null bulk string: `$-1\r\n`, RESP3 `_\r\n`.
    pub fn null(&mut self) {
        self.out
            .extend_from_slice(if self.resp3() { b"_\r\n" } else { b"$-1\r\n" });
    }

    /// The null array: `*-1\r\n`, RESP3 `_\r\n`.
    pub fn null_array(&mut self) {
        self.out
            .extend_from_slice(if self.resp3() { b"_\r\n" } else { b"*-1\r\n" });
    }

    /// A HELP reply as Redis's `addReplyHelp`: a heading naming `command` (upper case), the
    /// lines, then the `HELP` entry, each a status line.
    pub fn help(&mut self, command: &str, lines: &[&str]) {
        self.array_len(lines.len() + 3);
        let head = format!(
            "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            command.to_ascii_uppercase()
        );
        self.simple(head.as_bytes());
        for line in lines {
            self.simple(line.as_bytes());
        }
        self.simple(b"HELP");
        self.simple(b"    Print this help.");
    }

    /// An array header, `*n\r\n`, followed by `n` replies.
    pub fn array_len(&mut self, n: usize) {
        self.head(b'*', n, 0);
    }

    /// A map header of `n` pairs (`%n`), followed by `2n` replies;
    /// RESP2 sends a flat array `*2n`.
    pub fn map_len(&mut self, n: usize) {
        if self.resp3() {
            self.head(b'%', n, 0);
        } else {
            self.head(b'*', n.saturating_mul(2), 0);
        }
    }

    /// A set header (`~n`, RESP2 `*n`), followed by `n` replies.
    pub fn set_len(&mut self, n: usize) {
        self.head(if self.resp3() { b'~' } else { b'*' }, n, 0);
    }

    /// A push header (`>n`, RESP2 `*n`), followed by `n` replies.
    pub fn push_len(&mut self, n: usize) {
        self.head(if self.resp3() { b'>' } else { b'*' }, n, 0);
    }

    /// A double as Redis 7.2+ sends it ([`format_double`]: `1.1`, `inf`, `-inf`);
    /// RESP3 `,text\r\n`, RESP2 a bulk string.
    pub fn double(&mut self, v: f64) {
        let mut buf = [0u8; DOUBLE_BUF_LEN];
        let text = format_double(v, &mut buf);
        if self.resp3() {
            self.line(b',', text);
        } else {
            self.bulk(text);
        }
    }

    /// A boolean: RESP3 `#t` / `#f`, RESP2 `:1` / `:0`.
    pub fn bool(&mut self, v: bool) {
        self.out.extend_from_slice(match (self.resp3(), v) {
            (true, true) => b"#t\r\n",
            (true, false) => b"#f\r\n",
            (false, true) => b":1\r\n",
            (false, false) => b":0\r\n",
        });
    }

    /// A verbatim string (`=len\r\nfmt:text\r\n`, e.g. format `txt`);
    /// RESP2 sends `text` as a bulk string.
    pub fn verbatim(&mut self, format: &[u8; 3], text: &[u8]) {
        if self.resp3() {
            self.framed(b'=', text.len() + 4, Some(&[format, b":", text]));
        } else {
            self.bulk(text);
        }
    }

    /// A big number given as its decimal digits: RESP3 `(digits\r\n`,
    /// RESP2 a bulk string.
    pub fn big_number(&mut self, digits: &[u8]) {
        if self.resp3() {
            self.line(b'(', digits);
        } else {
            self.bulk(digits);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(f: impl Fn(&mut ReplyWriter<'_>)) -> (Vec<u8>, Vec<u8>) {
        let (mut two, mut three) = (Vec::new(), Vec::new());
        f(&mut ReplyWriter::new(&mut two, Proto::Resp2));
        f(&mut ReplyWriter::new(&mut three, Proto::Resp3));
        (two, three)
    }

    fn check(f: impl Fn(&mut ReplyWriter<'_>), resp2: &[u8], resp3: &[u8]) {
        let (two, three) = both(f);
        assert_eq!(
            two.escape_ascii().to_string(),
            resp2.escape_ascii().to_string()
        );
        assert_eq!(
            three.escape_ascii().to_string(),
            resp3.escape_ascii().to_string()
        );
    }

    #[test]
    fn headers_of_every_size_read_as_their_number() {
        let mut ns: Vec<i64> = (-1100..=1100).collect();
        ns.extend([9_999, 10_000, 123_456_789, i64::MAX, i64::MIN]);
        for n in ns {
            let mut out = Vec::new();
            let mut w = ReplyWriter::new(&mut out, Proto::Resp2);
            w.int(n);
            if let Ok(len) = usize::try_from(n) {
                w.array_len(len);
                w.map_len(len / 2);
                if len < 5000 {
                    w.bulk(&vec![b'x'; len]);
                }
            }
            let mut want = format!(":{n}\r\n");
            if n >= 0 {
                want += &format!("*{n}\r\n*{}\r\n", n / 2 * 2);
                if n < 5000 {
                    want += &format!("${n}\r\n{}\r\n", "x".repeat(n as usize));
                }
            }
            assert_eq!(
                out.escape_ascii().to_string(),
                want.escape_debug().to_string()
            );
        }
    }

    #[test]
    fn scalars() {
        check(|w| w.ok(), b"+OK\r\n", b"+OK\r\n");
        check(|w| w.simple(b"PONG"), b"+PONG\r\n", b"+PONG\r\n");
        check(
            |w| w.error(b"ERR syntax error"),
            b"-ERR syntax error\r\n",
            b"-ERR syntax error\r\n",
        );
        check(|w| w.int(-42), b":-42\r\n", b":-42\r\n");
        check(
            |w| w.int(i64::MIN),
            b":-9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
        );
        check(|w| w.bulk(b"hello"), b"$5\r\nhello\r\n", b"$5\r\nhello\r\n");
        check(|w| w.bulk(b""), b"$0\r\n\r\n", b"$0\r\n\r\n");
        check(|w| w.bulk_int(1234), b"$4\r\n1234\r\n", b"$4\r\n1234\r\n");
        check(|w| w.null(), b"$-1\r\n", b"_\r\n");
        check(|w| w.null_array(), b"*-1\r\n", b"_\r\n");
        check(|w| w.bool(true), b":1\r\n", b"#t\r\n");
        check(|w| w.bool(false), b":0\r\n", b"#f\r\n");
        check(|w| w.big_number(b"-123"), b"$4\r\n-123\r\n", b"(-123\r\n");
        check(
            |w| w.verbatim(b"txt", b"hi"),
            b"$2\r\nhi\r\n",
            b"=6\r\ntxt:hi\r\n",
        );
    }

    #[test]
    fn doubles() {
        // Redis 7.2+'s short form (7.0 sent 1.1000000000000001).
        check(|w| w.double(1.1), b"$3\r\n1.1\r\n", b",1.1\r\n");
        check(|w| w.double(3.0), b"$1\r\n3\r\n", b",3\r\n");
        check(|w| w.double(f64::INFINITY), b"$3\r\ninf\r\n", b",inf\r\n");
        check(
            |w| w.double(f64::NEG_INFINITY),
            b"$4\r\n-inf\r\n",
            b",-inf\r\n",
        );
    }

    #[test]
    fn aggregates() {
        check(|w| w.array_len(3), b"*3\r\n", b"*3\r\n");
        check(|w| w.map_len(2), b"*4\r\n", b"%2\r\n");
        check(|w| w.set_len(2), b"*2\r\n", b"~2\r\n");
        check(|w| w.push_len(3), b"*3\r\n", b">3\r\n");
        check(|w| w.array_len(0), b"*0\r\n", b"*0\r\n");
    }

    #[test]
    fn protocol_error_line() {
        check(
            |w| w.protocol_error(ProtocolError::InvalidBulkLength),
            b"-ERR Protocol error: invalid bulk length\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        );
    }

    #[test]
    fn appends() {
        let mut out = b"+x\r\n".to_vec();
        let mut w = ReplyWriter::new(&mut out, Proto::Resp2);
        w.array_len(2);
        w.bulk(b"a");
        w.int(1);
        assert_eq!(out, b"+x\r\n*2\r\n$1\r\na\r\n:1\r\n");
    }
}
