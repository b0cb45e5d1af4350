//! Redis's text for doubles, and its parsing of them.
//!
//! Redis 7.2 and later reply a double (`ZSCORE`, `ZRANGE ... WITHSCORES`, `ZINCRBY`, RESP3
//! doubles) with `d2string`: integers up to 2^62 as integers, others in the short form of
//! [`super::fpconv`] (Grisu2), so `ZSCORE` of 1.1 is `1.1`: [`format_double`]. Redis 7.0
//! printed C's `"%.17g"` (`1.1000000000000001`); 7.4 still does where it formats a `long
//! double` with `"%.17Lg"` (ZSCAN of a skip-list sorted set), and our RDB writer keeps 7.0's
//! text: [`format_double_17g`]. That one we produce without libc: a double is `m * 2^e`
//! exactly, so its decimal expansion is the digits of `m << e` or of `m * 5^-e` (shifted by
//! `e` places), which a small fixed-size big integer computes exactly (at most 767 digits, for
//! subnormals). Rounding those exact digits to 17 places, half to even, is what glibc does.
//! Values that fit in a `u128` skip the big integer.
//!
//! `INCRBYFLOAT` itself now adds and prints in an emulated `long double`
//! ([`super::long_double`]), exactly as Redis does; the `f64` approximation
//! below remains for callers that hold an `f64`.
//!
//! `INCRBYFLOAT` is different: Redis adds in `long double` and prints
//! `"%.17Lf"` with trailing zeros trimmed, so `10.5 + 0.1` shows `10.6`. We
//! add in `f64`, whose last-place error the 17 fixed decimals would show
//! (`0.2 + 0.1` is `0.30000000000000004`), so [`format_long_double_incr`]
//! prints the shortest decimal whose nearest double lies within one unit in
//! the last place of the result (integers below 2^53 exactly), in plain
//! notation, cut at 17 decimals like `%.17Lf`. Known differences from
//! Redis, all from `long double`: a typed value with 16-17 significant
//! digits that lies within one ulp of a shorter decimal shows the shorter
//! one (`3.0000000000000004` shows `3`); results with more than ~17
//! significant digits differ in the digits beyond f64 precision (Redis
//! shows `long double` noise such as `12345.59999999999999964`); and sums
//! beyond `f64::MAX` (up to ~1.19e4932 in Redis) are infinite here.

use std::cmp::Ordering;

/// Size of the buffer [`format_double`] writes into.
pub const DOUBLE_BUF_LEN: usize = 40;
/// Size of the buffer [`format_long_double_incr`] writes into: a sign, 309
/// integer digits, a point and 17 decimals.
pub const INCR_BUF_LEN: usize = 328;

/// `v` as Redis 7.2+ replies a double (`d2string`): `nan`, `inf`, `-inf`, `0`, `-0`, an
/// integral value within `±2^62` as an integer, anything else as [`super::fpconv`] writes it.
pub fn format_double(v: f64, buf: &mut [u8; DOUBLE_BUF_LEN]) -> &[u8] {
    let mut out = Out { buf, len: 0 };
    if v.is_nan() {
        out.extend(b"nan");
    } else if v.is_infinite() {
        out.extend(if v < 0.0 { b"-inf" } else { b"inf" });
    } else if v == 0.0 {
        out.extend(if v.is_sign_negative() { b"-0" } else { b"0" });
    } else if v.abs() <= (i64::MAX / 2) as f64 && v.fract() == 0.0 {
        // Exact: an integer of magnitude at most 2^62.
        out.extend(itoa::Buffer::new().format(v as i64).as_bytes());
    } else {
        let mut text = [0u8; super::fpconv::FPCONV_BUF_LEN];
        out.extend(super::fpconv::fpconv_dtoa(v, &mut text));
    }
    let len = out.len;
    &buf[..len]
}

/// Rewrites the doubles of a Redis 7.0 reply as Redis 7.2+ writes them: each bulk string that
/// is exactly `"%.17g"` of a double (`0.10000000000000001`) becomes [`format_double`]'s text
/// of it (`0.1`). RESP3 doubles need nothing: [`super::Value::encode`] writes the new form.
/// For differential tests against a 7.0 server; a member that happens to look like 7.0's
/// text of a double is rewritten too.
pub fn rewrite_17g_doubles(v: &mut super::Value) {
    use super::Value;
    match v {
        Value::Bulk(b) => {
            let Some(d) = parse_double(b) else { return };
            let mut old = [0u8; DOUBLE_BUF_LEN];
            if format_double_17g(d, &mut old) == b.as_slice() {
                let mut new = [0u8; DOUBLE_BUF_LEN];
                *b = format_double(d, &mut new).to_vec();
            }
        }
        Value::Array(items) | Value::Set(items) | Value::Push(items) => {
            items.iter_mut().for_each(rewrite_17g_doubles);
        }
        Value::Map(pairs) => {
            for (k, v) in pairs {
                rewrite_17g_doubles(k);
                rewrite_17g_doubles(v);
            }
        }
        _ => {}
    }
}

/// Whether the RESP reply `ours` is Redis 7.0's reply `theirs` once its doubles are written
/// as 7.2+ writes them ([`rewrite_17g_doubles`]); for differential tests against a 7.0 server.
pub fn same_but_17g_doubles(ours: &[u8], theirs: &[u8]) -> bool {
    let (Ok(Some((a, _))), Ok(Some((mut z, _)))) =
        (super::parse_reply(ours), super::parse_reply(theirs))
    else {
        return false;
    };
    rewrite_17g_doubles(&mut z);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    a.encode(&mut x);
    z.encode(&mut y);
    x == y
}

/// `v` as C's `"%.17g"` prints it (Redis 7.0's replies; 7.4's `"%.17Lg"` of a double), with
/// `inf` and `-inf` (`nan` / `-nan` as glibc prints them, though Redis never stores NaN).
pub fn format_double_17g(v: f64, buf: &mut [u8; DOUBLE_BUF_LEN]) -> &[u8] {
    let mut out = Out { buf, len: 0 };
    if v.is_sign_negative() {
        out.push(b'-');
    }
    let a = v.abs();
    if a.is_nan() {
        out.extend(b"nan");
    } else if a.is_infinite() {
        out.extend(b"inf");
    } else if a < EXACT_INT_LIMIT && a.fract() == 0.0 {
        // Up to 16 digits: `%.17g` prints the integer itself. The cast is
        // exact: `a` is a non-negative integer below 2^53.
        out.extend(itoa::Buffer::new().format(a as u64).as_bytes());
    } else {
        let rounded = Exact::of(a).round(17);
        let exponent = rounded.point - 1;
        if (-4..17).contains(&exponent) {
            rounded.write_plain(&mut out);
        } else {
            rounded.write_scientific(&mut out);
        }
    }
    let len = out.len;
    &buf[..len]
}

/// The text Redis 7.0 stores and replies for an `INCRBYFLOAT` /
/// `HINCRBYFLOAT` result, from its `f64` value: plain notation (never an
/// exponent), at most 17 decimals, no trailing zeros, `0` for zero of
/// either sign. See the module notes for how `f64` differs from Redis's
/// `long double`. Callers reject NaN and infinities before (Redis's
/// "increment would produce NaN or Infinity"); they print as `nan`, `inf`.
pub fn format_long_double_incr(v: f64, buf: &mut [u8; INCR_BUF_LEN]) -> &[u8] {
    let mut out = Out { buf, len: 0 };
    let a = v.abs();
    if a.is_nan() {
        out.extend(b"nan");
    } else if a.is_infinite() {
        out.extend(if v < 0.0 { b"-inf" } else { b"inf" });
    } else if a != 0.0 {
        let exact = Exact::of(a);
        let rounded = if a < EXACT_INT_LIMIT && a.fract() == 0.0 {
            exact.round(17)
        } else {
            (1..=17)
                .map(|n| exact.round(n))
                .find(|r| r.within_one_ulp(a))
                .unwrap_or_else(|| exact.round(17))
        };
        // `%.17Lf` shows nothing below 1e-17.
        let rounded = if rounded.point - rounded.len() < -17 {
            exact.round(exact.point + 17)
        } else {
            rounded
        };
        if rounded.len() > 0 {
            if v < 0.0 {
                out.push(b'-');
            }
            rounded.write_plain(&mut out);
        }
    }
    if out.len == 0 {
        out.push(b'0');
    }
    let len = out.len;
    &buf[..len]
}

/// Parses a double as Redis's `string2d` (used for `ZADD` scores and the
/// like): all of `s` must be what `strtod` reads, with no leading space.
/// Accepts decimal and hexadecimal (`0x1.8p1`) forms, `inf` and `infinity`
/// in any case with an optional sign; rejects NaN, and values that overflow
/// to infinity or underflow to zero.
#[deny(clippy::indexing_slicing, clippy::unwrap_used)]
pub fn parse_double(s: &[u8]) -> Option<f64> {
    let (negative, body) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, s),
        None => return None,
    };
    let magnitude = if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        f64::INFINITY
    } else if let Some(hex) = body
        .strip_prefix(b"0x")
        .or_else(|| body.strip_prefix(b"0X"))
    {
        parse_hex(hex)?
    } else {
        parse_decimal(body)?
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// Parses an `INCRBYFLOAT` operand as Redis's `getLongDoubleFromObject`
/// does with `strtold`: all of `s` must be a decimal or hexadecimal number
/// (or `inf` / `infinity`), no leading space, not NaN, and within the range
/// of x86's 80-bit `long double` (about 3.6e-4951 to 1.19e4932). Values in
/// that range but beyond `f64` come back as an infinity (the caller's
/// "NaN or Infinity" error; Redis would add them in `long double`) or as a
/// zero of the right sign.
#[deny(clippy::indexing_slicing, clippy::unwrap_used)]
pub fn parse_long_double(s: &[u8]) -> Option<f64> {
    let (negative, body) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some((c, _)) if c.is_ascii_whitespace() => return None,
        Some(_) => (false, s),
        None => return None,
    };
    if let Some(v) = parse_double(s) {
        return Some(v);
    }
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some(if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    // Out of f64's range, or not a number: check the grammar and the magnitude.
    let (hex, digits) = match body
        .strip_prefix(b"0x")
        .or_else(|| body.strip_prefix(b"0X"))
    {
        Some(rest) => (true, rest),
        None => (false, body),
    };
    let is_digit = |c: u8| {
        if hex {
            c.is_ascii_hexdigit()
        } else {
            c.is_ascii_digit()
        }
    };
    let mut i = 0;
    let mut int_digits = 0i64;
    let mut seen_point = false;
    // Position of the leading nonzero digit (in digits, counted from the first) and the
    // value of that digit.
    let mut lead: Option<(i64, u8)> = None;
    let mut count = 0i64;
    while let Some(&c) = digits.get(i) {
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if is_digit(c) {
            if lead.is_none() && c != b'0' {
                lead = Some((count, c));
            }
            count += 1;
            if !seen_point {
                int_digits += 1;
            }
        } else {
            break;
        }
        i += 1;
    }
    if count == 0 {
        return None;
    }
    let mantissa = digits.get(..i).unwrap_or_default();
    let mut exp = 0i64;
    let marker: &[u8] = if hex { b"pP" } else { b"eE" };
    if let Some(c) = digits.get(i) {
        if !marker.contains(c) {
            return None;
        }
        let (neg, start) = match digits.get(i + 1) {
            Some(b'-') => (true, i + 2),
            Some(b'+') => (false, i + 2),
            _ => (false, i + 1),
        };
        let tail = digits.get(start..).unwrap_or_default();
        if tail.is_empty() || !tail.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let e = tail.iter().fold(0i64, |acc, &c| {
            (acc * 10 + i64::from(c - b'0')).min(1_000_000)
        });
        exp = if neg { -e } else { e };
    }
    let sign = if negative { -1.0 } else { 1.0 };
    let Some((pos, first)) = lead else {
        return Some(sign * 0.0);
    };
    // The power of the radix (10, or 2 for hex) of the leading digit.
    let (magnitude, max, min) = if hex {
        let bits = i64::from(32 - char::from(first).to_digit(16).unwrap_or(1).leading_zeros());
        (4 * (int_digits - pos - 1) + bits - 1 + exp, 16_383, -16_445)
    } else {
        (int_digits - pos - 1 + exp, 4_932, -4_951)
    };
    // At the decimal edges the leading digits decide: the largest `long double` is
    // 1.18973e4932, and below half the smallest subnormal (3.6452e-4951) strtold gives zero.
    let leading = || {
        let mut m = 0.0f64;
        let mut scale = 1.0f64;
        for &c in mantissa
            .iter()
            .filter(|c| c.is_ascii_digit())
            .skip(pos as usize)
            .take(17)
        {
            m += f64::from(c - b'0') * scale;
            scale /= 10.0;
        }
        m
    };
    let edge_out = !hex
        && ((magnitude == max && leading() > 1.189_731_495_357_231_8)
            || (magnitude == min && leading() < 1.822_599_765_941_237_3));
    if magnitude > max || magnitude < min || edge_out {
        return None; // ERANGE: strtold's HUGE_VALL or zero, which Redis refuses
    }
    Some(sign * if magnitude > 0 { f64::INFINITY } else { 0.0 })
}

/// Below this every integral `f64` is exact and prints as itself.
const EXACT_INT_LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

/// `digits [. digits] [e [sign] digits]` with at least one mantissa digit;
/// finite and not underflowed to zero unless all digits are zero.
#[deny(clippy::indexing_slicing, clippy::unwrap_used)]
fn parse_decimal(s: &[u8]) -> Option<f64> {
    let digits = |from: usize| {
        s.get(from..)
            .map_or(0, |t| t.iter().take_while(|c| c.is_ascii_digit()).count())
    };
    let int_digits = digits(0);
    let mut i = int_digits;
    let mut frac_digits = 0;
    if s.get(i) == Some(&b'.') {
        frac_digits = digits(i + 1);
        i += 1 + frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    let mantissa_end = i;
    if matches!(s.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(s.get(i + 1), Some(b'+' | b'-')));
        let exp_digits = digits(i + 1 + sign);
        if exp_digits == 0 {
            return None;
        }
        i += 1 + sign + exp_digits;
    }
    if i != s.len() {
        return None;
    }
    let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    let nonzero = s
        .get(..mantissa_end)
        .is_some_and(|m| m.iter().any(|&c| matches!(c, b'1'..=b'9')));
    (v.is_finite() && (v != 0.0 || !nonzero)).then_some(v)
}

/// The part after `0x`: `hexdigits [. hexdigits] [p [sign] digits]`,
/// rounded to nearest, ties to even, like glibc's `strtod`.
#[deny(clippy::indexing_slicing, clippy::unwrap_used)]
fn parse_hex(s: &[u8]) -> Option<f64> {
    let mut mantissa: u64 = 0;
    let mut exp: i64 = 0;
    let mut sticky = false;
    let mut any_digit = false;
    let mut seen_point = false;
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(d) = char::from(c).to_digit(16) {
            any_digit = true;
            if mantissa >> 60 == 0 {
                mantissa = mantissa << 4 | u64::from(d);
                if seen_point {
                    exp -= 4;
                }
            } else {
                sticky |= d != 0;
                if !seen_point {
                    exp += 4;
                }
            }
        } else {
            break;
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    if let Some(b'p' | b'P') = s.get(i) {
        let (negative, start) = match s.get(i + 1) {
            Some(b'-') => (true, i + 2),
            Some(b'+') => (false, i + 2),
            _ => (false, i + 1),
        };
        let tail = s.get(start..).unwrap_or_default();
        if tail.is_empty() || !tail.iter().all(u8::is_ascii_digit) {
            return None;
        }
        // Clamp: anything beyond ±100000 is zero or infinite anyway.
        let p = tail.iter().fold(0i64, |acc, &c| {
            (acc * 10 + i64::from(c - b'0')).min(100_000)
        });
        exp += if negative { -p } else { p };
        i = s.len();
    }
    if i != s.len() {
        return None;
    }
    let v = scale_binary(mantissa, sticky, exp)?;
    (v != 0.0 || mantissa == 0).then_some(v)
}

/// `mantissa * 2^exp` (plus a sticky bit for lost nonzero digits) rounded
/// to the nearest `f64`, ties to even; `None` on overflow.
fn scale_binary(mantissa: u64, sticky: bool, exp: i64) -> Option<f64> {
    if mantissa == 0 {
        return Some(0.0);
    }
    let lz = mantissa.leading_zeros();
    let m = mantissa << lz;
    // Value is 1.xxx * 2^top.
    let top = exp + 63 - i64::from(lz);
    if top > 1023 {
        return None;
    }
    // Mantissa bits the result keeps: 53, fewer for subnormals.
    let keep = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if keep < 0 {
        return Some(0.0);
    }
    let shift = 64 - keep as u32; // 11..=64
    let (q, rem) = if shift == 64 {
        (0, m)
    } else {
        (m >> shift, m & ((1u64 << shift) - 1))
    };
    let half = 1u64 << (shift - 1);
    let up = match rem.cmp(&half) {
        Ordering::Greater => true,
        Ordering::Equal => sticky || q & 1 == 1,
        Ordering::Less => false,
    };
    let q = q + u64::from(up);
    let bits = if top >= -1022 {
        // q is in [2^52, 2^53]; a carry to 2^53 bumps the exponent field.
        (((top + 1022) as u64) << 52) + q
    } else {
        q // subnormal; 2^52 becomes the smallest normal
    };
    let v = f64::from_bits(bits);
    v.is_finite().then_some(v)
}

// ---------------------------------------------------------------------------
// Exact decimal expansion
// ---------------------------------------------------------------------------

/// Most significant digits of a double: 767 for the subnormals.
const MAX_DIGITS: usize = 770;

/// The exact decimal value of a positive finite double:
/// `0.d1 d2 ... dn * 10^point`, no trailing zeros, digits in ASCII.
struct Exact {
    digits: [u8; MAX_DIGITS],
    len: usize,
    point: i64,
}

/// At most 17 significant digits, rounded: `0.d1 ... dn * 10^point`,
/// no trailing zeros; `len == 0` is zero.
struct Rounded {
    digits: [u8; 17],
    len: u8,
    point: i64,
}

impl Exact {
    fn of(v: f64) -> Exact {
        debug_assert!(v.is_finite() && v > 0.0);
        let bits = v.to_bits();
        let biased = (bits >> 52) as i64;
        let fraction = bits & ((1 << 52) - 1);
        let (m, e) = if biased == 0 {
            (fraction, -1074)
        } else {
            (fraction | 1 << 52, biased - 1075)
        };
        let tz = m.trailing_zeros();
        let (m, e) = (m >> tz, e + i64::from(tz));
        let mut exact = Exact {
            digits: [b'0'; MAX_DIGITS],
            len: 0,
            point: 0,
        };
        // The integer whose digits we print, and the power of ten it is scaled by.
        let scale = e.min(0);
        let bit_len = 64 - i64::from(m.leading_zeros());
        if e >= 0 && bit_len + e <= 128 {
            exact.set_digits(itoa::Buffer::new().format(u128::from(m) << e).as_bytes());
        } else if e < 0 && -e <= 27 {
            // 5^27 < 2^63 and m < 2^53: the product fits in 116 bits.
            exact.set_digits(
                itoa::Buffer::new()
                    .format(u128::from(m) * 5u128.pow((-e) as u32))
                    .as_bytes(),
            );
        } else {
            let mut n = BigUint::from_u64(m);
            if e >= 0 {
                n.shl(e as u32);
            } else {
                n.mul_pow5((-e) as u32);
            }
            n.write_decimal(&mut exact);
        }
        exact.point += scale;
        exact
    }

    fn set_digits(&mut self, ascii: &[u8]) {
        self.digits[..ascii.len()].copy_from_slice(ascii);
        self.len = ascii.len();
        self.point = ascii.len() as i64;
        while self.len > 0 && self.digits[self.len - 1] == b'0' {
            self.len -= 1;
        }
    }

    /// The first `keep` digits (at most 17), rounded half to even.
    fn round(&self, keep: i64) -> Rounded {
        let mut r = Rounded {
            digits: [b'0'; 17],
            len: 0,
            point: self.point,
        };
        if keep < 0 {
            return r;
        }
        let keep = (keep as usize).min(17);
        let n = keep.min(self.len);
        r.digits[..n].copy_from_slice(&self.digits[..n]);
        r.len = n as u8;
        if keep < self.len {
            let next = self.digits[keep];
            let odd = keep > 0 && self.digits[keep - 1] & 1 == 1; // ASCII parity is digit parity
            let up = next > b'5' || (next == b'5' && (self.len > keep + 1 || odd));
            if up {
                r.increment();
            }
        }
        r.trim();
        r
    }
}

impl Rounded {
    fn len(&self) -> i64 {
        i64::from(self.len)
    }

    fn digits(&self) -> &[u8] {
        &self.digits[..usize::from(self.len)]
    }

    /// Adds one unit in the last kept place (or makes `0.1 * 10^(point+1)`
    /// of an empty, i.e. zero-digit, result).
    fn increment(&mut self) {
        let mut i = usize::from(self.len);
        while i > 0 {
            i -= 1;
            if self.digits[i] == b'9' {
                self.digits[i] = b'0';
            } else {
                self.digits[i] += 1;
                return;
            }
        }
        // All nines (or no digits): 0.999 -> 0.1 * 10^1.
        self.digits[0] = b'1';
        self.len = 1;
        self.point += 1;
    }

    fn trim(&mut self) {
        while self.len > 0 && self.digits[usize::from(self.len) - 1] == b'0' {
            self.len -= 1;
        }
    }

    /// Whether the double nearest to this decimal is `v` or a neighbour.
    fn within_one_ulp(&self, v: f64) -> bool {
        let mut text = [0u8; 40];
        let mut out = Out {
            buf: &mut text,
            len: 0,
        };
        out.extend(b"0.");
        out.extend(self.digits());
        out.push(b'e');
        out.extend(itoa::Buffer::new().format(self.point).as_bytes());
        let len = out.len;
        let parsed = std::str::from_utf8(&text[..len])
            .ok()
            .and_then(|t| t.parse::<f64>().ok());
        parsed.is_some_and(|p| p.to_bits().abs_diff(v.to_bits()) <= 1)
    }

    /// Plain notation: `123.45`, `0.00012`, `1200`.
    fn write_plain(&self, out: &mut Out<'_>) {
        let digits = self.digits();
        if self.point <= 0 {
            out.extend(b"0.");
            out.repeat(b'0', (-self.point) as usize);
            out.extend(digits);
        } else {
            let point = self.point as usize;
            if point >= digits.len() {
                out.extend(digits);
                out.repeat(b'0', point - digits.len());
            } else {
                out.extend(&digits[..point]);
                out.push(b'.');
                out.extend(&digits[point..]);
            }
        }
    }

    /// `%g`'s scientific notation: `1.2345e+17`, `1e-05`.
    fn write_scientific(&self, out: &mut Out<'_>) {
        let digits = self.digits();
        out.extend(&digits[..1]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend(&digits[1..]);
        }
        let exponent = self.point - 1;
        out.extend(if exponent < 0 { b"e-" } else { b"e+" });
        if exponent.abs() < 10 {
            out.push(b'0');
        }
        out.extend(itoa::Buffer::new().format(exponent.abs()).as_bytes());
    }
}

/// A cursor over a fixed output buffer sized for the longest text.
struct Out<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Out<'_> {
    fn push(&mut self, byte: u8) {
        self.buf[self.len] = byte;
        self.len += 1;
    }

    fn extend(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn repeat(&mut self, byte: u8, n: usize) {
        self.buf[self.len..self.len + n].fill(byte);
        self.len += n;
    }
}

/// Just enough of an unsigned big integer: 53 bits times 5^1074 is under
/// 2,550 bits, 2^1024 under 1,030.
struct BigUint {
    limbs: [u32; 82],
    len: usize,
}

impl BigUint {
    fn from_u64(v: u64) -> BigUint {
        let mut n = BigUint {
            limbs: [0; 82],
            len: 2,
        };
        n.limbs[0] = v as u32;
        n.limbs[1] = (v >> 32) as u32;
        n.normalize();
        n
    }

    fn normalize(&mut self) {
        while self.len > 0 && self.limbs[self.len - 1] == 0 {
            self.len -= 1;
        }
    }

    fn mul_small(&mut self, k: u32) {
        let mut carry = 0u64;
        for limb in &mut self.limbs[..self.len] {
            let p = u64::from(*limb) * u64::from(k) + carry;
            *limb = p as u32;
            carry = p >> 32;
        }
        if carry > 0 {
            self.limbs[self.len] = carry as u32;
            self.len += 1;
        }
    }

    fn mul_pow5(&mut self, mut k: u32) {
        const POW5_13: u32 = 1_220_703_125;
        while k >= 13 {
            self.mul_small(POW5_13);
            k -= 13;
        }
        self.mul_small(5u32.pow(k));
    }

    fn shl(&mut self, bits: u32) {
        let (words, bits) = ((bits / 32) as usize, bits % 32);
        if bits > 0 {
            let mut carry = 0u32;
            for limb in &mut self.limbs[..self.len] {
                let next = *limb >> (32 - bits);
                *limb = *limb << bits | carry;
                carry = next;
            }
            if carry > 0 {
                self.limbs[self.len] = carry;
                self.len += 1;
            }
        }
        self.limbs.copy_within(..self.len, words);
        self.limbs[..words].fill(0);
        self.len += words;
    }

    /// Divides in place, returning the remainder.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.limbs[..self.len].iter_mut().rev() {
            let cur = rem << 32 | u64::from(*limb);
            *limb = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
        self.normalize();
        rem as u32
    }

    /// Writes the decimal digits of `self` (consumed) into `exact`.
    fn write_decimal(mut self, exact: &mut Exact) {
        const CHUNK: u32 = 1_000_000_000;
        // Base 10^9 chunks, least significant first: 770 digits need 86.
        let mut chunks = [0u32; 86];
        let mut n = 0;
        while self.len > 0 {
            chunks[n] = self.div_small(CHUNK);
            n += 1;
        }
        let mut ascii = [b'0'; MAX_DIGITS];
        let mut len = 0;
        for (i, &chunk) in chunks[..n].iter().rev().enumerate() {
            let mut text = itoa::Buffer::new();
            let text = text.format(chunk).as_bytes();
            if i > 0 {
                len += 9 - text.len(); // zero padding, already in place
            }
            ascii[len..len + text.len()].copy_from_slice(text);
            len += text.len();
        }
        exact.set_digits(&ascii[..len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::ffi::{c_char, c_int, CStr};

    extern "C" {
        fn snprintf(buf: *mut c_char, len: usize, fmt: *const c_char, ...) -> c_int;
        fn strtod(s: *const c_char, end: *mut *mut c_char) -> f64;
        fn __errno_location() -> *mut c_int;
    }

    /// glibc's `"%.17g"`, the reference.
    fn libc_g17(v: f64) -> String {
        let mut buf = [0 as c_char; 64];
        // SAFETY: the buffer is 64 bytes and its size is passed; the format
        // takes exactly one double, which is passed.
        let n = unsafe { snprintf(buf.as_mut_ptr(), buf.len(), c"%.17g".as_ptr(), v) };
        assert!(n > 0 && (n as usize) < buf.len());
        // SAFETY: snprintf NUL-terminated the buffer.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_str()
            .unwrap()
            .to_owned()
    }

    /// Redis's `string2d` on glibc's `strtod`, the reference.
    fn libc_string2d(s: &[u8]) -> Option<f64> {
        if s.is_empty() || s.contains(&0) || (s[0] as char).is_ascii_whitespace() || s[0] == 0x0b {
            return None;
        }
        let c = std::ffi::CString::new(s).unwrap();
        let mut end: *mut c_char = std::ptr::null_mut();
        // SAFETY: errno is thread-local; `c` is a valid NUL-terminated
        // string and `end` a valid out-pointer.
        let (v, errno, consumed) = unsafe {
            *__errno_location() = 0;
            let v = strtod(c.as_ptr(), &mut end);
            (v, *__errno_location(), end.offset_from(c.as_ptr()) as usize)
        };
        const ERANGE: c_int = 34;
        let range = errno == ERANGE && (v.is_infinite() || v == 0.0);
        (consumed == s.len() && !range && !v.is_nan()).then_some(v)
    }

    /// Our `"%.17g"`.
    fn ours(v: f64) -> String {
        let mut buf = [0; DOUBLE_BUF_LEN];
        String::from_utf8(format_double_17g(v, &mut buf).to_vec()).unwrap()
    }

    fn incr(v: f64) -> String {
        let mut buf = [0; INCR_BUF_LEN];
        String::from_utf8(format_long_double_incr(v, &mut buf).to_vec()).unwrap()
    }

    #[test]
    fn redis_zscore_texts() {
        // Each pair as redis-server 7.0.15 replied to ZADD z <input> a; ZSCORE z a.
        for (input, text) in [
            (1.1, "1.1000000000000001"),
            (0.1, "0.10000000000000001"),
            (1e300, "1.0000000000000001e+300"),
            (1e-300, "1e-300"),
            (3.0, "3"),
            (-0.0, "-0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.5, "0.5"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (12345678901234567.0, "12345678901234568"),
            (0.0001, "0.0001"),
            (1e-5, "1.0000000000000001e-05"),
            (2.5e-310, "2.5000000000000171e-310"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (1e-320, "9.9998886718268301e-321"),
            (5e-324, "4.9406564584124654e-324"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(ours(input), text, "{input:e}");
        }
    }

    #[test]
    fn ties_round_to_even() {
        // 26215 / 2^18 = 0.100002288818359375 exactly: 18 digits ending in 5.
        let tie = 26215.0 / 262144.0;
        assert_eq!(ours(tie), "0.10000228881835938");
        assert_eq!(ours(tie), libc_g17(tie));
        // Every m / 2^n whose exact expansion has 18 digits ending in 5.
        let mut ties = 0;
        for n in 1..=25u32 {
            let p = 5u128.pow(n);
            let lo = 10u128.pow(17) / p + 1;
            for m in (lo..lo + 40).filter(|m| m % 2 == 1 && m * p < 10u128.pow(18)) {
                let v = m as f64 / 2f64.powi(n as i32);
                assert_eq!(ours(v), libc_g17(v), "{m} / 2^{n}");
                ties += 1;
            }
        }
        assert!(ties > 400);
    }

    #[test]
    fn special_values_match_libc() {
        for v in [
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::EPSILON,
            1.0,
            0.0,
            2f64.powi(53),
            2f64.powi(64),
            1e21,
            9.5,
            0.001,
        ] {
            assert_eq!(ours(v), libc_g17(v), "{v:e}");
            assert_eq!(ours(-v), libc_g17(-v), "{v:e}");
        }
        assert_eq!(ours(f64::NAN), libc_g17(f64::NAN));
    }

    #[test]
    fn incrbyfloat_texts() {
        // As redis-server 7.0.15 replied INCRBYFLOAT, where f64 can agree.
        assert_eq!(incr(10.5 + 0.1), "10.6");
        assert_eq!(incr(10.5 + 0.1 - 5.0), "5.6");
        assert_eq!(incr(5.0e3 + 2.0e2), "5200");
        assert_eq!(incr(5200.0 + 5.0e3), "10200");
        assert_eq!(incr(1e20), "100000000000000000000");
        assert_eq!(incr(0.1 + 0.1), "0.2");
        assert_eq!(incr(0.2 + 0.1), "0.3");
        assert_eq!(incr(1e-18), "0");
        assert_eq!(incr(1.5e-17), "0.00000000000000002");
        assert_eq!(incr(0.12345678901234567), "0.12345678901234566");
        assert_eq!(incr(1000000000000000.5), "1000000000000000.5");
        assert_eq!(incr(-0.0), "0");
        assert_eq!(incr(-1.5), "-1.5");
        assert_eq!(incr(9007199254740991.0), "9007199254740991");
        assert_eq!(incr(-1e-18), "0");
        assert_eq!(incr(f64::MAX).len(), 309);
        // Known difference: Redis keeps long double digits here.
        assert_eq!(incr(3.0000000000000004), "3");
    }

    #[test]
    fn parse_double_like_redis() {
        let ok = |s: &str, v: f64| assert_eq!(parse_double(s.as_bytes()), Some(v), "{s}");
        let bad = |s: &str| assert_eq!(parse_double(s.as_bytes()), None, "{s}");
        ok("inf", f64::INFINITY);
        ok("+inf", f64::INFINITY);
        ok("-Infinity", f64::NEG_INFINITY);
        ok("INF", f64::INFINITY);
        ok("0x10", 16.0);
        ok("0x1p3", 8.0);
        ok("0x1.8p1", 3.0);
        ok("0X1P-1074", 5e-324);
        ok("1.", 1.0);
        ok(".5", 0.5);
        ok("+.5", 0.5);
        ok("0e-400", 0.0);
        ok("-0", -0.0);
        ok("1e-320", 1e-320);
        for s in [
            "nan", "NaN", "1e400", "1e-400", " 1", "1 ", "", ".", "1e", "infinit", "1_0", "0x",
            "0x1p", "--1", "+",
        ] {
            bad(s);
        }
    }

    #[test]
    fn parse_double_hex_rounding_matches_libc() {
        for s in [
            "0x1.fffffffffffff8p0",
            "0x1.fffffffffffff7ffffffp0",
            "0x1.00000000000008p0",
            "0x1.000000000000080000001p0",
            "0x1.00000000000018p0",
            "0x1p-1075",
            "0x1.0000001p-1075",
            "0x1.8p-1074",
            "0x1.fffffffffffffp1023",
            "0x1.fffffffffffff8p1023",
            "0x0.0000000000000000000001p0",
            "0x123456789abcdef0123p-40",
        ] {
            assert_eq!(
                parse_double(s.as_bytes()).map(f64::to_bits),
                libc_string2d(s.as_bytes()).map(f64::to_bits),
                "{s}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        #[test]
        fn format_double_matches_libc(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(!v.is_nan());
            prop_assert_eq!(ours(v), libc_g17(v));
        }

        #[test]
        fn format_double_matches_libc_short_decimals(m in -1_000_000i64..1_000_000, e in -30i32..30) {
            let v: f64 = format!("{m}e{e}").parse().unwrap();
            prop_assert_eq!(ours(v), libc_g17(v));
        }

        #[test]
        fn incr_text_parses_back_close(m in 1u64 << 52..1 << 53, e in -56i32..1024, negative in any::<bool>()) {
            // 1.38e-17 <= |v| < 2^1024.
            let v = m as f64 * 2f64.powi(e - 52) * if negative { -1.0 } else { 1.0 };
            let text = incr(v);
            prop_assert!(!text.contains('e'));
            let back: f64 = text.parse().unwrap();
            // Within one ulp, or half a unit of the 17th decimal (plus an ulp).
            prop_assert!(back.to_bits().abs_diff(v.to_bits()) <= 1 || (back - v).abs() <= 1e-17, "{} {}", v, text);
        }

        #[test]
        fn parse_double_matches_strtod(s in "[-+]?(0[xX])?[0-9a-fA-F]{0,20}(\\.[0-9a-fA-F]{0,20})?([eEpP][-+]?[0-9]{1,4})?|[-+]?(inf|INF|infinity|nan|Inf)") {
            let ours = parse_double(s.as_bytes()).map(f64::to_bits);
            prop_assert_eq!(ours, libc_string2d(s.as_bytes()).map(f64::to_bits));
        }

        #[test]
        fn parse_double_reads_format_double(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(!v.is_nan());
            let mut buf = [0; DOUBLE_BUF_LEN];
            prop_assert_eq!(parse_double(format_double(v, &mut buf)).map(f64::to_bits), Some(v.to_bits()));
        }
    }
}
