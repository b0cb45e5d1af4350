//! x86's 80-bit `long double`, emulated, for `INCRBYFLOAT`.
//!
//! Redis reads both operands of `INCRBYFLOAT` with `strtold`, adds them in `long double`
//! (a 64-bit mantissa, exponents down to 2^-16445 and up to 2^16383) and stores
//! `"%.17Lf"` with trailing zeros trimmed. Doing the same in `f64` shows in the reply: `0.1 +
//! 0.2` must print `0.3`, `9223372036854775807 + 0` must stay exact, `1e308 + 1` has hundreds
//! of exact digits. So this module does the arithmetic the way the x87 unit does it:
//!
//! - A finite value is `mant * 2^exp` with a `u64` mantissa; parsing and addition round the
//!   exact result to 64 significant bits (fewer for subnormals), to nearest, ties to even.
//! - Exact results come from a small big integer: a decimal `D * 10^E` is `D * 10^E` exactly
//!   when `E >= 0`, and a quotient with 66 significant bits plus a sticky remainder bit when
//!   `E < 0`, which is all that correct rounding needs. Inputs with more than
//!   [`MAX_DIGITS`] significant digits keep a sticky bit for the rest.
//! - Printing is exact too: `round(mant * 2^exp * 10^17)` in a big integer, ties to even as
//!   glibc's `printf` does, then the decimal point goes 17 places from the right.
//!
//! Costs: numbers of ordinary size stay within a few machine words; the extremes (a
//! 4,933-digit integer part) take a few thousand word operations.

use super::float::parse_long_double;

/// Significant digits of an input that are used exactly; the rest only set a sticky bit.
pub const MAX_DIGITS: usize = 5_000;
/// Exponent of the least significant bit of the smallest subnormal.
const MIN_LSB: i64 = -16_445;
/// Values must stay below 2^(MAX_TOP + 1).
const MAX_TOP: i64 = 16_383;

/// A finite `long double`: `(-1)^neg * mant * 2^exp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
}

/// What `strtold` makes of an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// A finite value.
    Finite(LongDouble),
    /// `inf` / `infinity`: accepted, but any sum with it is refused.
    Infinite,
}

impl LongDouble {
    /// Zero.
    pub const ZERO: LongDouble = LongDouble {
        neg: false,
        mant: 0,
        exp: 0,
    };

    /// Parses an operand as Redis's `getLongDoubleFromObject`: `None` is "not a valid float".
    pub fn parse(s: &[u8]) -> Option<Operand> {
        let approx = parse_long_double(s)?;
        let (neg, body) = match s.split_first() {
            Some((b'-', rest)) => (true, rest),
            Some((b'+', rest)) => (false, rest),
            _ => (false, s),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(Operand::Infinite);
        }
        let exact = match body
            .strip_prefix(b"0x")
            .or_else(|| body.strip_prefix(b"0X"))
        {
            Some(hex) => parse_digits(hex, 16),
            None => parse_digits(body, 10),
        };
        // `parse_long_double` checked the grammar and the range; it and this agree on both.
        let v = exact.unwrap_or(LongDouble::from_f64(approx));
        Some(Operand::Finite(LongDouble { neg, ..v }))
    }

    /// The exact value of a double.
    pub fn from_f64(v: f64) -> LongDouble {
        if v == 0.0 || !v.is_finite() {
            return LongDouble {
                neg: v.is_sign_negative(),
                ..LongDouble::ZERO
            };
        }
        let bits = v.to_bits();
        let field = ((bits >> 52) & 0x7ff) as i64;
        let frac = bits & ((1 << 52) - 1);
        let (mant, exp) = if field == 0 {
            (frac, -1074)
        } else {
            (frac | 1 << 52, field - 1075)
        };
        LongDouble {
            neg: v < 0.0,
            mant,
            exp,
        }
    }

    /// The sum rounded to a `long double`; `None` when it overflows to infinity.
    pub fn checked_add(self, other: LongDouble) -> Option<LongDouble> {
        if other.mant == 0 {
            return Some(if self.mant == 0 {
                LongDouble::ZERO
            } else {
                self
            });
        }
        if self.mant == 0 {
            return Some(other);
        }
        let top = |x: &LongDouble| x.exp + 63 - i64::from(x.mant.leading_zeros());
        let (big, small) = if top(&self) >= top(&other) {
            (self, other)
        } else {
            (other, self)
        };
        // A term below 2^-70 of the other cannot move it by half a unit in the last place.
        if top(&big) - top(&small) > 70 {
            return Some(big);
        }
        let e = big.exp.min(small.exp);
        let mut a = Big::from_u64(big.mant);
        a.shl((big.exp - e) as usize);
        let mut b = Big::from_u64(small.mant);
        b.shl((small.exp - e) as usize);
        let (neg, sum) = if big.neg == small.neg {
            a.add(&b);
            (big.neg, a)
        } else if a.cmp(&b) >= std::cmp::Ordering::Equal {
            a.sub(&b);
            (big.neg, a)
        } else {
            b.sub(&a);
            (small.neg, b)
        };
        if sum.is_zero() {
            return Some(LongDouble::ZERO);
        }
        round(neg, &sum, e, false)
    }

    /// Redis's `INCRBYFLOAT` text: `"%.17Lf"`, trailing zeros and point trimmed, `-0` as `0`.
    pub fn to_human(self) -> Vec<u8> {
        let mut n = Big::from_u64(self.mant);
        let mut tens = Big::from_u64(1);
        tens.mul_pow10(17);
        n.mul(&tens);
        if self.exp >= 0 {
            n.shl(self.exp as usize);
        } else {
            let s = (-self.exp) as usize;
            let half = n.bit(s - 1);
            let rest = n.any_below(s - 1);
            n.shr(s);
            if half && (rest || n.bit(0)) {
                n.add(&Big::from_u64(1));
            }
        }
        let mut digits = n.to_decimal();
        while digits.len() < 18 {
            digits.insert(0, b'0');
        }
        let point = digits.len() - 17;
        let mut out = Vec::with_capacity(digits.len() + 2);
        if self.neg {
            out.push(b'-');
        }
        out.extend_from_slice(&digits[..point]);
        let frac = &digits[point..];
        let keep = frac.iter().rposition(|&d| d != b'0').map_or(0, |i| i + 1);
        if keep > 0 {
            out.push(b'.');
            out.extend_from_slice(&frac[..keep]);
        }
        if out == b"-0" {
            out.remove(0);
        }
        out
    }
}

/// `digits [. digits] [e|p [sign] digits]` in `radix` (10 or 16), already validated, as
/// the nearest `long double` (positive); `None` if the text is not in that shape.
fn parse_digits(s: &[u8], radix: u32) -> Option<LongDouble> {
    let marker: &[u8] = if radix == 16 { b"pP" } else { b"eE" };
    let end = s.iter().position(|c| marker.contains(c)).unwrap_or(s.len());
    let (mantissa, exp_part) = s.split_at(end);
    let mut exp: i64 = match exp_part.split_first() {
        None => 0,
        Some((_, e)) => {
            let (neg, digits) = match e.split_first() {
                Some((b'-', r)) => (true, r),
                Some((b'+', r)) => (false, r),
                _ => (false, e),
            };
            let v = digits.iter().try_fold(0i64, |acc, &c| {
                c.is_ascii_digit()
                    .then(|| (acc * 10 + i64::from(c - b'0')).min(1_000_000))
            })?;
            if neg {
                -v
            } else {
                v
            }
        }
    };
    let mut n = Big::from_u64(0);
    let mut used = 0usize;
    let mut sticky = false;
    let mut seen_point = false;
    // Digits are taken in groups so that the big integer grows a word at a time.
    let (mut group, mut group_len) = (0u32, 0u32);
    let group_max = if radix == 16 { 7 } else { 9 };
    for &c in mantissa {
        if c == b'.' {
            seen_point = true;
            continue;
        }
        let d = char::from(c).to_digit(radix)?;
        if used == 0 && d == 0 {
            if seen_point {
                exp -= if radix == 16 { 4 } else { 1 };
            }
            continue;
        }
        if used >= MAX_DIGITS {
            sticky |= d != 0;
            if !seen_point {
                exp += if radix == 16 { 4 } else { 1 };
            }
            continue;
        }
        used += 1;
        group = group * radix + d;
        group_len += 1;
        if group_len == group_max {
            n.mul_small(radix.pow(group_len));
            n.add(&Big::from_u64(u64::from(group)));
            (group, group_len) = (0, 0);
        }
        if seen_point {
            exp -= if radix == 16 { 4 } else { 1 };
        }
    }
    if group_len > 0 {
        n.mul_small(radix.pow(group_len));
        n.add(&Big::from_u64(u64::from(group)));
    }
    if n.is_zero() {
        return Some(LongDouble::ZERO);
    }
    if radix == 16 {
        return round(false, &n, exp, sticky);
    }
    if exp >= 0 {
        n.mul_pow10(exp as u32);
        return round(false, &n, 0, sticky);
    }
    // n / 10^-exp with 66 to 67 significant bits and a sticky remainder.
    let mut den = Big::from_u64(1);
    den.mul_pow10((-exp) as u32);
    let k = den.bit_len() as i64 + 66 - n.bit_len() as i64;
    if k >= 0 {
        n.shl(k as usize);
    } else {
        den.shl((-k) as usize);
    }
    // Either way the quotient is n / 10^-exp scaled by 2^k.
    let (q, rest) = n.div_small_quotient(&den);
    round(false, &Big::from_u128(q), -k, sticky || rest)
}

/// `(-1)^neg * (n + sticky) * 2^e` rounded to a `long double`, to nearest, ties to even;
/// `None` on overflow. With `sticky`, `n` must have at least 66 significant bits.
fn round(neg: bool, n: &Big, e: i64, sticky: bool) -> Option<LongDouble> {
    let len = n.bit_len() as i64;
    if len == 0 {
        return Some(LongDouble::ZERO);
    }
    let top = e + len - 1;
    if top > MAX_TOP {
        return None;
    }
    let lsb = (top - 63).max(MIN_LSB);
    let shift = lsb - e;
    if shift <= 0 {
        let mut m = n.clone();
        m.shl((-shift) as usize);
        return Some(LongDouble {
            neg,
            mant: m.low_u64(),
            exp: lsb,
        });
    }
    let shift = shift as usize;
    let half = n.bit(shift - 1);
    let rest = sticky || n.any_below(shift - 1);
    let mut m = n.clone();
    m.shr(shift);
    let mut mant = m.low_u64();
    let mut exp = lsb;
    if half && (rest || mant & 1 == 1) {
        match mant.checked_add(1) {
            Some(v) => mant = v,
            None => {
                mant = 1 << 63;
                exp += 1;
                if exp + 63 > MAX_TOP {
                    return None;
                }
            }
        }
    }
    Some(LongDouble { neg, mant, exp })
}

/// Just enough of an unsigned big integer: little-endian 32-bit limbs, no leading zeros.
#[derive(Clone, Debug)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn from_u128(v: u128) -> Big {
        let mut b = Big((0..4).map(|i| (v >> (32 * i)) as u32).collect());
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bit_len(&self) -> usize {
        self.0
            .last()
            .map_or(0, |&top| 32 * self.0.len() - top.leading_zeros() as usize)
    }

    fn bit(&self, i: usize) -> bool {
        self.0.get(i / 32).is_some_and(|&l| l >> (i % 32) & 1 == 1)
    }

    /// Whether any bit below `i` is set.
    fn any_below(&self, i: usize) -> bool {
        let (words, bits) = (i / 32, i % 32);
        self.0.iter().take(words).any(|&l| l != 0)
            || (bits > 0
                && self
                    .0
                    .get(words)
                    .is_some_and(|&l| l & ((1 << bits) - 1) != 0))
    }

    fn low_u64(&self) -> u64 {
        let w = |i: usize| u64::from(self.0.get(i).copied().unwrap_or(0));
        w(0) | w(1) << 32
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in self.0.iter_mut() {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn mul_pow10(&mut self, mut e: u32) {
        while e >= 9 {
            self.mul_small(1_000_000_000);
            e -= 9;
        }
        self.mul_small(10u32.pow(e));
    }

    fn mul(&mut self, other: &Big) {
        let mut out = vec![0u32; self.0.len() + other.0.len()];
        for (i, &a) in self.0.iter().enumerate() {
            let mut carry = 0u64;
            for (j, &b) in other.0.iter().enumerate() {
                let v = u64::from(a) * u64::from(b) + u64::from(out[i + j]) + carry;
                out[i + j] = v as u32;
                carry = v >> 32;
            }
            out[i + other.0.len()] = carry as u32;
        }
        self.0 = out;
        self.trim();
    }

    fn add(&mut self, other: &Big) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        let mut carry = 0u64;
        for (i, l) in self.0.iter_mut().enumerate() {
            let v = u64::from(*l) + u64::from(other.0.get(i).copied().unwrap_or(0)) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    /// `self -= other`; `self >= other`.
    fn sub(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for (i, l) in self.0.iter_mut().enumerate() {
            let v = i64::from(*l) - i64::from(other.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = i64::from(v < 0);
            *l = v.rem_euclid(1 << 32) as u32;
        }
        debug_assert_eq!(borrow, 0);
        self.trim();
    }

    fn cmp(&self, other: &Big) -> std::cmp::Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    fn shl(&mut self, bits: usize) {
        if self.is_zero() || bits == 0 {
            return;
        }
        let (words, bits) = (bits / 32, bits % 32);
        if bits > 0 {
            let mut carry = 0u32;
            for l in self.0.iter_mut() {
                let v = *l;
                *l = v << bits | carry;
                carry = v >> (32 - bits);
            }
            if carry > 0 {
                self.0.push(carry);
            }
        }
        self.0.splice(0..0, std::iter::repeat_n(0, words));
    }

    fn shr(&mut self, bits: usize) {
        let (words, bits) = (bits / 32, bits % 32);
        self.0.drain(..words.min(self.0.len()));
        if bits > 0 {
            let mut carry = 0u32;
            for l in self.0.iter_mut().rev() {
                let v = *l;
                *l = v >> bits | carry;
                carry = v << (32 - bits);
            }
        }
        self.trim();
    }

    /// `self / den` when the quotient fits in 128 bits, and whether a remainder is left.
    fn div_small_quotient(&self, den: &Big) -> (u128, bool) {
        let mut rem = self.clone();
        let mut q = 0u128;
        let span = self.bit_len().saturating_sub(den.bit_len());
        debug_assert!(span < 127);
        for i in (0..=span).rev() {
            let mut d = den.clone();
            d.shl(i);
            if rem.cmp(&d) != std::cmp::Ordering::Less {
                rem.sub(&d);
                q |= 1 << i;
            }
        }
        (q, !rem.is_zero())
    }

    /// Decimal digits, most significant first (`0` for zero).
    fn to_decimal(&self) -> Vec<u8> {
        let mut n = self.clone();
        let mut groups = Vec::new();
        while !n.is_zero() {
            let mut rem = 0u64;
            for l in n.0.iter_mut().rev() {
                let v = rem << 32 | u64::from(*l);
                *l = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            n.trim();
            groups.push(rem as u32);
        }
        let mut out = groups
            .pop()
            .map_or_else(|| b"0".to_vec(), |g| g.to_string().into_bytes());
        for g in groups.iter().rev() {
            out.extend_from_slice(format!("{g:09}").as_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> Option<String> {
        let (Some(Operand::Finite(x)), Some(Operand::Finite(y))) = (
            LongDouble::parse(a.as_bytes()),
            LongDouble::parse(b.as_bytes()),
        ) else {
            return None;
        };
        x.checked_add(y)
            .map(|s| String::from_utf8(s.to_human()).unwrap())
    }

    /// Replies of redis-server 7.0.15 (x86-64) to `SET k a` then `INCRBYFLOAT k b`.
    #[test]
    fn matches_redis() {
        for (a, b, want) in [
            ("0.1", "0.2", "0.3"),
            ("10.5", "0.1", "10.6"),
            ("1", "1.5", "2.5"),
            ("9223372036854775807", "0", "9223372036854775807"),
            ("-9223372036854775808", "0", "-9223372036854775808"),
            ("9223372036854775807", "1.5", "9223372036854775808"),
            ("3.0000000000000004", "0", "3.0000000000000004"),
            ("1e-17", "0", "0.00000000000000001"),
            ("-1e-17", "0", "-0.00000000000000001"),
            ("5e-18", "0", "0"),
            ("1.5e-17", "0", "0.00000000000000002"),
            ("2.5e-17", "0", "0.00000000000000002"),
            ("5e-324", "0", "0"),
            ("0x1p-16445", "0", "0"),
            ("123456789012345678901234567890", "0.1", "123456789012345678899921813504"),
            ("12345.6", "0", "12345.59999999999999964"),
            ("1", "-1", "0"),
            ("-0.5", "0.5", "0"),
            ("0", "-1e-30", "0"),
            ("1", "0x10", "17"),
            ("1", "1e-400", "1"),
            ("1e308", "1", "99999999999999999996685879655845645660560099847415567207797047994921734868838061872100126921888539320446747225054013223152134749593960583597420814430196418767959100019603190778663109604507106667939153395788938914560543563061268364901618630217086589253444881623791300855757318142424510452728255046343928578048"),
            ("5", "1e400", "10000000000000000000281880683947586514586453433629052038625910693539685534008629862039363994848324160522094053927317616200295822777259255734023828976593340661017797447434546173917862448116674971723778943824391593338047470675026246684401359237513603830343735485505244955964979021825038280091068414947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880"),
        ] {
            assert_eq!(incr(a, b).as_deref(), Some(want), "{a} + {b}");
        }
    }

    #[test]
    fn overflow_and_infinity() {
        assert_eq!(LongDouble::parse(b"inf"), Some(Operand::Infinite));
        assert_eq!(LongDouble::parse(b"-Infinity"), Some(Operand::Infinite));
        assert_eq!(LongDouble::parse(b"nan"), None);
        assert_eq!(LongDouble::parse(b"1e5000"), None);
        assert_eq!(incr("1.1e4932", "1.1e4932"), None);
        assert!(incr("1.1e4932", "1")
            .unwrap()
            .starts_with("10999999999999999999743731075282418176590308692790434077"));
    }

    #[test]
    fn f64_values_are_exact() {
        for (v, want) in [
            (0.1f64, "0.10000000000000001"),
            (-2.5, "-2.5"),
            (1152921504606846976.0, "1152921504606846976"),
            (5e-324, "0"),
            (-0.0, "0"),
            (f64::MAX, "179769313486231570814527423731704356798070567525844996598917476803157260780028538760589558632766878171540458953514382464234321326889464182768467546703537516986049910576551282076245490090389328944075868508455133942304583236903222948165808559332123348274797826204144723168738177180919299881250404026184124858368"),
        ] {
            assert_eq!(LongDouble::from_f64(v).to_human(), want.as_bytes(), "{v}");
        }
    }
}
