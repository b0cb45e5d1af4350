//! Number parsing and formatting exactly as Redis does it.
//!
//! Redis is strict: `string2ll` accepts an optional `-`, no `+`, no spaces, no leading zeros,
//! and rejects `-0`; clients rely on `INCR` refusing `" 1"` and on `"007"` staying a string.

/// Parses a signed 64-bit integer the way Redis's `string2ll` does.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [] => return None,
        [b'0'] => return Some(0),
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    // Accumulate as a negative number so that i64::MIN parses without overflow.
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub(i64::from(c - b'0'))?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// The integer a string stored under a key is kept as (the `int` encoding): at most 20 bytes
/// that [`parse_i64`] accepts.
#[inline]
pub fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.len() <= 20 {
        parse_i64(s)
    } else {
        None
    }
}

/// Parses a non-negative integer that must fit in `u64` (strict, like [`parse_i64`]).
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    match s {
        [b'0'] => Some(0),
        [b'1'..=b'9', ..] => {
            let mut v: u64 = 0;
            for &c in s {
                if !c.is_ascii_digit() {
                    return None;
                }
                v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            }
            Some(v)
        }
        _ => None,
    }
}

/// Parses an unsigned 64-bit integer as Redis 7.2+'s `string2ull` does (SCAN cursors): the
/// text up to its first NUL (C's `strlen`), read by `string2ll` when it can (a negative value
/// is refused), else by `strtoull` in base 10: leading C whitespace, an optional sign (`-`
/// negates modulo 2^64), one digit or more, nothing after them, no overflow. So `+1`, ` 1`,
/// `007`, `-0` and ` -1` (2^64 - 1) are cursors; `-1`, `1 ` and `` are not.
pub fn string2ull(s: &[u8]) -> Option<u64> {
    let s = s.split(|&b| b == 0).next().unwrap_or_default();
    if let Some(v) = parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let start = s
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let mut rest = s.get(start..).unwrap_or_default();
    let negative = match rest.first() {
        Some(b'-') => true,
        Some(b'+') => false,
        _ => {
            return parse_digits(rest);
        }
    };
    rest = rest.get(1..).unwrap_or_default();
    let v = parse_digits(rest)?;
    Some(if negative { v.wrapping_neg() } else { v })
}

/// One ASCII digit or more, all of `s`, as a `u64` that does not overflow.
fn parse_digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |v, &c| {
        if !c.is_ascii_digit() {
            return None;
        }
        v.checked_mul(10)?.checked_add(u64::from(c - b'0'))
    })
}

/// Parses a float the way Redis's `getLongDoubleFromObject` does for INCRBYFLOAT (`strtold`):
/// the whole string must be consumed, no leading space, hexadecimal accepted, NaN and values
/// beyond `long double`'s range rejected. Infinity is accepted.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    crate::resp::float::parse_long_double(s)
}

/// Formats an integer into `buf` and returns the written bytes.
pub fn fmt_i64(v: i64, buf: &mut itoa::Buffer) -> &[u8] {
    buf.format(v).as_bytes()
}

#[cfg(test)]
mod tests {
    #[test]
    fn string2ull_as_redis_7_2() {
        // Each as Redis 7.4.1 answered SCAN <cursor>: a cursor, or "invalid cursor".
        for (text, want) in [
            (&b"0"[..], Some(0)),
            (b"18446744073709551615", Some(u64::MAX)),
            (b"18446744073709551616", None),
            (b"+1", Some(1)),
            (b" 1", Some(1)),
            (b"\t7", Some(7)),
            (b" -1", Some(u64::MAX)),
            (b"-18446744073709551615", Some(1)),
            (b"-18446744073709551616", None),
            (b"-0", Some(0)),
            (b"007", Some(7)),
            (b"-1", None),
            (b"-9223372036854775808", None),
            (b"1 ", None),
            (b"", None),
            (b" ", None),
            (b"+", None),
            (b"+ 1", None),
            (b"0x10", None),
            (b"1\0x", Some(1)),
            (b"\0\x01", None),
        ] {
            assert_eq!(
                super::string2ull(text),
                want,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    use super::*;

    #[test]
    fn strict_integers() {
        for (s, v) in [
            ("0", Some(0)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-0", None),
            ("+1", None),
            ("01", None),
            (" 1", None),
            ("1 ", None),
            ("", None),
            ("-", None),
            ("1a", None),
        ] {
            assert_eq!(parse_i64(s.as_bytes()), v, "{s:?}");
        }
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
    }

    #[test]
    fn floats() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"1 "), None);
        assert_eq!(parse_f64(b""), None);
        assert_eq!(parse_f64(b"abc"), None);
        // strtold's range (80-bit long double), decided at its edges.
        assert_eq!(parse_f64(b"1.1e4932"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-1.1e4932"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"1.2e4932"), None);
        assert_eq!(parse_f64(b"12e4931"), None);
        assert_eq!(parse_f64(b"1e-4951"), None);
        assert_eq!(parse_f64(b"2e-4951"), Some(0.0));
        assert_eq!(parse_f64(b"0.0000e99999"), Some(0.0));
        assert_eq!(parse_f64(b"0x1p-16445"), Some(0.0));
        assert_eq!(parse_f64(b"0x1p-16446"), None);
        assert_eq!(parse_f64(b"0x1p16383"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"0x1p16384"), None);
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
    }

    proptest::proptest! {
        #[test]
        fn i64_roundtrip(v: i64) {
            let mut b = itoa::Buffer::new();
            proptest::prop_assert_eq!(parse_i64(fmt_i64(v, &mut b)), Some(v));
        }
    }
}
