//! Redis 7.2+'s text for a double: `fpconv_dtoa`, a Grisu2 conversion, ported from Redis's
//! `deps/fpconv` step for step so that the digits agree byte for byte.
//!
//! Grisu2 finds a short digit string that reads back as the same double using only 64-bit
//! integer arithmetic: the double and the two midpoints to its neighbours are scaled by a
//! cached power of ten into a window where their integer parts can be cut digit by digit,
//! and digit generation stops as soon as the remainder lies inside the rounding interval;
//! the last digit is then nudged toward the exact value. The result always reads back
//! exactly, and is the shortest such string for nearly every double (Grisu3 would detect the
//! rare exceptions; Redis uses Grisu2, so we do too). The text is plain up to 7 zeros past the
//! digits or 6 zeros before them, scientific (`1.5e-7`, `1e+300`) otherwise.
//!
//! Costs: a table of 87 powers, a few 64-bit multiplications, no allocation.

/// The cached powers of ten `10^(-348 + 8 i)`, as a normalised 64-bit fraction and a binary
/// exponent.
const POWERS: [(u64, i32); 87] = [
    (18054884314459144840, -1220),
    (13451937075301367670, -1193),
    (10022474136428063862, -1166),
    (14934650266808366570, -1140),
    (11127181549972568877, -1113),
    (16580792590934885855, -1087),
    (12353653155963782858, -1060),
    (18408377700990114895, -1034),
    (13715310171984221708, -1007),
    (10218702384817765436, -980),
    (15227053142812498563, -954),
    (11345038669416679861, -927),
    (16905424996341287883, -901),
    (12595523146049147757, -874),
    (9384396036005875287, -847),
    (13983839803942852151, -821),
    (10418772551374772303, -794),
    (15525180923007089351, -768),
    (11567161174868858868, -741),
    (17236413322193710309, -715),
    (12842128665889583758, -688),
    (9568131466127621947, -661),
    (14257626930069360058, -635),
    (10622759856335341974, -608),
    (15829145694278690180, -582),
    (11793632577567316726, -555),
    (17573882009934360870, -529),
    (13093562431584567480, -502),
    (9755464219737475723, -475),
    (14536774485912137811, -449),
    (10830740992659433045, -422),
    (16139061738043178685, -396),
    (12024538023802026127, -369),
    (17917957937422433684, -343),
    (13349918974505688015, -316),
    (9946464728195732843, -289),
    (14821387422376473014, -263),
    (11042794154864902060, -236),
    (16455045573212060422, -210),
    (12259964326927110867, -183),
    (18268770466636286478, -157),
    (13611294676837538539, -130),
    (10141204801825835212, -103),
    (15111572745182864684, -77),
    (11258999068426240000, -50),
    (16777216000000000000, -24),
    (12500000000000000000, 3),
    (9313225746154785156, 30),
    (13877787807814456755, 56),
    (10339757656912845936, 83),
    (15407439555097886824, 109),
    (11479437019748901445, 136),
    (17105694144590052135, 162),
    (12744735289059618216, 189),
    (9495567745759798747, 216),
    (14149498560666738074, 242),
    (10542197943230523224, 269),
    (15709099088952724970, 295),
    (11704190886730495818, 322),
    (17440603504673385349, 348),
    (12994262207056124023, 375),
    (9681479787123295682, 402),
    (14426529090290212157, 428),
    (10748601772107342003, 455),
    (16016664761464807395, 481),
    (11933345169920330789, 508),
    (17782069995880619868, 534),
    (13248674568444952270, 561),
    (9871031767461413346, 588),
    (14708983551653345445, 614),
    (10959046745042015199, 641),
    (16330252207878254650, 667),
    (12166986024289022870, 694),
    (18130221999122236476, 720),
    (13508068024458167312, 747),
    (10064294952495520794, 774),
    (14996968138956309548, 800),
    (11173611982879273257, 827),
    (16649979327439178909, 853),
    (12405201291620119593, 880),
    (9242595204427927429, 907),
    (13772540099066387757, 933),
    (10261342003245940623, 960),
    (15290591125556738113, 986),
    (11392378155556871081, 1013),
    (16975966327722178521, 1039),
    (12648080533535911531, 1066),
];

const FIRST_POWER: i32 = -348;
const STEP_POWERS: i32 = 8;
const EXP_MAX: i32 = -32;
const EXP_MIN: i32 = -60;

const FRAC_MASK: u64 = 0x000F_FFFF_FFFF_FFFF;
const EXP_MASK: u64 = 0x7FF0_0000_0000_0000;
const HIDDEN_BIT: u64 = 0x0010_0000_0000_0000;
const SIGN_MASK: u64 = 0x8000_0000_0000_0000;
const EXP_BIAS: i32 = 1023 + 52;

const TENS: [u64; 20] = [
    10000000000000000000,
    1000000000000000000,
    100000000000000000,
    10000000000000000,
    1000000000000000,
    100000000000000,
    10000000000000,
    1000000000000,
    100000000000,
    10000000000,
    1000000000,
    100000000,
    10000000,
    1000000,
    100000,
    10000,
    1000,
    100,
    10,
    1,
];

/// Size of the buffer [`fpconv_dtoa`] writes into: the longest text is 25 bytes, a sign, 17
/// digits and 7 zeros (Redis declares `char dest[24]`, but its callers pass more).
pub const FPCONV_BUF_LEN: usize = 32;

/// A number `frac * 2^exp`.
#[derive(Clone, Copy)]
struct Fp {
    frac: u64,
    exp: i32,
}

fn build_fp(bits: u64) -> Fp {
    let frac = bits & FRAC_MASK;
    let exp = ((bits & EXP_MASK) >> 52) as i32;
    if exp != 0 {
        Fp {
            frac: frac + HIDDEN_BIT,
            exp: exp - EXP_BIAS,
        }
    } else {
        Fp {
            frac,
            exp: -EXP_BIAS + 1,
        }
    }
}

fn normalize(fp: &mut Fp) {
    while fp.frac & HIDDEN_BIT == 0 {
        fp.frac <<= 1;
        fp.exp -= 1;
    }
    let shift = 64 - 52 - 1;
    fp.frac <<= shift;
    fp.exp -= shift;
}

/// The midpoints to the neighbouring doubles, normalised to one exponent.
fn normalized_boundaries(fp: &Fp) -> (Fp, Fp) {
    let mut upper = Fp {
        frac: (fp.frac << 1) + 1,
        exp: fp.exp - 1,
    };
    while upper.frac & (HIDDEN_BIT << 1) == 0 {
        upper.frac <<= 1;
        upper.exp -= 1;
    }
    let u_shift = 64 - 52 - 2;
    upper.frac <<= u_shift;
    upper.exp -= u_shift;
    let l_shift = if fp.frac == HIDDEN_BIT { 2 } else { 1 };
    let mut lower = Fp {
        frac: (fp.frac << l_shift) - 1,
        exp: fp.exp - l_shift,
    };
    lower.frac <<= lower.exp - upper.exp;
    lower.exp = upper.exp;
    (lower, upper)
}

fn multiply(a: &Fp, b: &Fp) -> Fp {
    const LO: u64 = 0x0000_0000_FFFF_FFFF;
    let ah_bl = (a.frac >> 32) * (b.frac & LO);
    let al_bh = (a.frac & LO) * (b.frac >> 32);
    let al_bl = (a.frac & LO) * (b.frac & LO);
    let ah_bh = (a.frac >> 32) * (b.frac >> 32);
    let mut tmp = (ah_bl & LO) + (al_bh & LO) + (al_bl >> 32);
    // Round up.
    tmp += 1 << 31;
    Fp {
        frac: ah_bh + (ah_bl >> 32) + (al_bh >> 32) + (tmp >> 32),
        exp: a.exp + b.exp + 64,
    }
}

/// The cached power that brings a number of binary exponent `exp` into
/// `[EXP_MIN, EXP_MAX]`, and its decimal exponent.
fn cached_pow10(exp: i32) -> (Fp, i32) {
    const ONE_LOG_TEN: f64 = 0.301_029_995_663_981_14;
    // As C: an int times a double, truncated to int; then integer division.
    let approx = (f64::from(-(exp + 87)) * ONE_LOG_TEN) as i32;
    let mut idx = ((approx - FIRST_POWER) / STEP_POWERS).clamp(0, 86) as usize;
    loop {
        let (frac, pexp) = POWERS[idx];
        let current = exp + pexp + 64;
        if current < EXP_MIN && idx < 86 {
            idx += 1;
            continue;
        }
        if current > EXP_MAX && idx > 0 {
            idx -= 1;
            continue;
        }
        return (
            Fp { frac, exp: pexp },
            FIRST_POWER + idx as i32 * STEP_POWERS,
        );
    }
}

fn round_digit(digits: &mut [u8], ndigits: usize, delta: u64, mut rem: u64, kappa: u64, frac: u64) {
    while rem < frac
        && delta.wrapping_sub(rem) >= kappa
        && (rem.wrapping_add(kappa) < frac
            || frac.wrapping_sub(rem) > rem.wrapping_add(kappa).wrapping_sub(frac))
    {
        if let Some(d) = ndigits.checked_sub(1).and_then(|i| digits.get_mut(i)) {
            *d = d.wrapping_sub(1);
        }
        rem = rem.wrapping_add(kappa);
    }
}

/// Writes the digits into `digits` and returns how many; adds the decimal exponent of the
/// last digit to `k`.
fn generate_digits(fp: &Fp, upper: &Fp, lower: &Fp, digits: &mut [u8; 18], k: &mut i32) -> usize {
    let wfrac = upper.frac.wrapping_sub(fp.frac);
    let mut delta = upper.frac.wrapping_sub(lower.frac);
    let shift = (-upper.exp) as u32;
    let one_frac = 1u64 << shift;
    let mut part1 = upper.frac >> shift;
    let mut part2 = upper.frac & (one_frac - 1);
    let mut idx = 0usize;
    let mut kappa = 10;
    // From 10^9 down.
    for &div in &TENS[10..] {
        if kappa <= 0 {
            break;
        }
        let digit = part1 / div;
        if digit != 0 || idx != 0 {
            if let Some(d) = digits.get_mut(idx) {
                *d = b'0' + digit as u8;
            }
            idx += 1;
        }
        part1 -= digit * div;
        kappa -= 1;
        let tmp = (part1 << shift).wrapping_add(part2);
        if tmp <= delta {
            *k += kappa;
            round_digit(digits, idx, delta, tmp, div << shift, wfrac);
            return idx;
        }
    }
    // Then the fraction, a digit at a time.
    let mut unit = 18;
    loop {
        part2 = part2.wrapping_mul(10);
        delta = delta.wrapping_mul(10);
        kappa -= 1;
        let digit = part2 >> shift;
        if digit != 0 || idx != 0 {
            if let Some(d) = digits.get_mut(idx) {
                *d = b'0' + digit as u8;
            }
            idx += 1;
        }
        part2 &= one_frac - 1;
        if part2 < delta {
            *k += kappa;
            let scale = TENS.get(unit).copied().unwrap_or(1);
            round_digit(
                digits,
                idx,
                delta,
                part2,
                one_frac,
                wfrac.wrapping_mul(scale),
            );
            return idx;
        }
        unit = unit.saturating_sub(1);
    }
}

fn grisu2(bits: u64, digits: &mut [u8; 18], k: &mut i32) -> usize {
    let mut w = build_fp(bits);
    let (mut lower, mut upper) = normalized_boundaries(&w);
    normalize(&mut w);
    let (cp, kk) = cached_pow10(upper.exp);
    w = multiply(&w, &cp);
    upper = multiply(&upper, &cp);
    lower = multiply(&lower, &cp);
    lower.frac = lower.frac.wrapping_add(1);
    upper.frac = upper.frac.wrapping_sub(1);
    *k = -kk;
    generate_digits(&w, &upper, &lower, digits, k)
}

/// Writes `digits` (with decimal exponent `k` for the last one) as fpconv does; returns the
/// length written.
fn emit_digits(digits: &[u8], k: i32, dest: &mut Out<'_>, neg: bool) {
    let ndigits = digits.len() as i32;
    let mut exp = (k + ndigits - 1).abs();
    // A plain integer.
    if k >= 0 && exp < ndigits + 7 {
        dest.extend(digits);
        for _ in 0..k {
            dest.push(b'0');
        }
        return;
    }
    // A plain decimal.
    if k < 0 && (k > -7 || exp < 4) {
        let offset = ndigits - k.abs();
        if offset <= 0 {
            dest.extend(b"0.");
            for _ in 0..-offset {
                dest.push(b'0');
            }
            dest.extend(digits);
        } else {
            let (int, frac) = digits.split_at(offset as usize);
            dest.extend(int);
            dest.push(b'.');
            dest.extend(frac);
        }
        return;
    }
    // Scientific.
    let ndigits = ndigits.min(18 - i32::from(neg)) as usize;
    let digits = digits.get(..ndigits).unwrap_or(digits);
    if let Some((first, rest)) = digits.split_first() {
        dest.push(*first);
        if !rest.is_empty() {
            dest.push(b'.');
            dest.extend(rest);
        }
    }
    dest.push(b'e');
    dest.push(if k + ndigits as i32 - 1 < 0 {
        b'-'
    } else {
        b'+'
    });
    let mut cent = 0;
    if exp > 99 {
        cent = exp / 100;
        dest.push(b'0' + cent as u8);
        exp -= cent * 100;
    }
    if exp > 9 {
        let dec = exp / 10;
        dest.push(b'0' + dec as u8);
        exp -= dec * 10;
    } else if cent != 0 {
        dest.push(b'0');
    }
    dest.push(b'0' + (exp % 10) as u8);
}

/// A bounded writer: bytes past the end are dropped (none are: see [`FPCONV_BUF_LEN`]).
struct Out<'a> {
    buf: &'a mut [u8; FPCONV_BUF_LEN],
    len: usize,
}

impl Out<'_> {
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn extend(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }
}

/// `d` as Redis's `fpconv_dtoa` writes it: `0` (or `-0`), `inf`, `nan`, or Grisu2's digits,
/// plain or scientific.
pub fn fpconv_dtoa(d: f64, buf: &mut [u8; FPCONV_BUF_LEN]) -> &[u8] {
    let bits = d.to_bits();
    let mut out = Out { buf, len: 0 };
    let neg = bits & SIGN_MASK != 0;
    if neg {
        out.push(b'-');
    }
    if d == 0.0 {
        out.push(b'0');
    } else if bits & EXP_MASK == EXP_MASK {
        out.extend(if bits & FRAC_MASK != 0 {
            b"nan"
        } else {
            b"inf"
        });
    } else {
        let mut digits = [0u8; 18];
        let mut k = 0;
        let n = grisu2(bits, &mut digits, &mut k);
        emit_digits(digits.get(..n).unwrap_or(&digits), k, &mut out, neg);
    }
    let len = out.len;
    &buf[..len]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(d: f64) -> String {
        let mut buf = [0; FPCONV_BUF_LEN];
        String::from_utf8(fpconv_dtoa(d, &mut buf).to_vec()).unwrap()
    }

    #[test]
    fn known_texts() {
        for (d, want) in [
            (1.1, "1.1"),
            (-9.223_372_036_854_776e18, "-9223372036854776000"),
            (1e300, "1e+300"),
            (1.5e-7, "1.5e-7"),
            (13.361389, "13.361389"),
            (123456789012345678.0, "123456789012345680"),
            (0.1 + 0.2, "0.30000000000000004"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (1e-5, "0.00001"),
            (1e-7, "1e-7"),
            (1e22, "1e+22"),
            (1e15, "1e+15"),
            (0.000123, "0.000123"),
            (-0.0, "-0"),
            // 25 bytes.
            (-2.4074506152704867e23, "-240745061527048670000000"),
            (-1.2345678901234567e-6, "-1.2345678901234567e-6"),
            (-1.2345678901234567e-3, "-0.0012345678901234567"),
        ] {
            assert_eq!(text(d), want, "{d:e}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        #[test]
        fn reads_back_exactly(bits in any::<u64>()) {
            let d = f64::from_bits(bits);
            prop_assume!(d.is_finite());
            let t = text(d);
            prop_assert_eq!(t.parse::<f64>().unwrap().to_bits(), d.to_bits(), "{}", t);
        }
    }
}
