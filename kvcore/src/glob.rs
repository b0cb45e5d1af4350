//! Glob-style matching as Redis's KEYS, SCAN MATCH and CONFIG GET use it.
//!
//! `*` any run, `?` one byte, `[abc]` `[^abc]` `[a-z]` classes, `\x` a literal `x`. An
//! unterminated `[` class runs to the end of the pattern, as in Redis. Matching keeps only the
//! position of the last `*` and backtracks there, so the cost is O(pattern × subject) at worst —
//! never exponential, whatever a client sends.

/// Whether `subject` matches `pattern`.
pub fn matches(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
    let (mut p, mut s) = (0usize, 0usize);
    // Where to resume after the last star: (pattern index after the star, subject index).
    let mut star: Option<(usize, usize)> = None;
    while s < subject.len() {
        match pattern.get(p) {
            Some(b'*') => {
                while pattern.get(p) == Some(&b'*') {
                    p += 1;
                }
                if p == pattern.len() {
                    return true;
                }
                star = Some((p, s));
                continue;
            }
            Some(_) => {
                let (ok, next) = one(pattern, p, subject[s], nocase);
                if ok {
                    p = next;
                    s += 1;
                    continue;
                }
            }
            None => {}
        }
        match star {
            Some((sp, ss)) => {
                p = sp;
                s = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    a == b || (nocase && a.eq_ignore_ascii_case(&b))
}

/// Matches the single pattern token at `p` (not a star) against byte `c`; returns whether it
/// matched and the index after the token.
fn one(pattern: &[u8], p: usize, c: u8, nocase: bool) -> (bool, usize) {
    match pattern[p] {
        b'?' => (true, p + 1),
        b'\\' if p + 1 < pattern.len() => (eq(pattern[p + 1], c, nocase), p + 2),
        b'[' => class(pattern, p + 1, c, nocase),
        lit => (eq(lit, c, nocase), p + 1),
    }
}

fn class(pattern: &[u8], mut p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let negate = pattern.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut hit = false;
    loop {
        match pattern.get(p) {
            None => break,
            Some(b']') => {
                p += 1;
                break;
            }
            Some(b'\\') if p + 1 < pattern.len() => {
                hit |= eq(pattern[p + 1], c, nocase);
                p += 2;
            }
            Some(&lo) if pattern.get(p + 1) == Some(&b'-') && p + 2 < pattern.len() => {
                let hi = pattern[p + 2];
                let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                hit |= (lo..=hi).contains(&c)
                    || (nocase && (lo..=hi).contains(&c.to_ascii_lowercase()))
                    || (nocase && (lo..=hi).contains(&c.to_ascii_uppercase()));
                p += 3;
            }
            Some(&lit) => {
                hit |= eq(lit, c, nocase);
                p += 1;
            }
        }
    }
    (hit != negate, p)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_glob_cases() {
        let yes =
            |p: &str, s: &str| assert!(matches(p.as_bytes(), s.as_bytes(), false), "{p} ~ {s}");
        let no =
            |p: &str, s: &str| assert!(!matches(p.as_bytes(), s.as_bytes(), false), "{p} !~ {s}");
        yes("*", "");
        yes("*", "abc");
        yes("h?llo", "hello");
        no("h?llo", "hllo");
        yes("h*llo", "heeeello");
        yes("h[ae]llo", "hallo");
        no("h[ae]llo", "hillo");
        yes("h[^e]llo", "hallo");
        no("h[^e]llo", "hello");
        yes("h[a-b]llo", "hbllo");
        yes("h[b-a]llo", "hallo");
        yes("h\\*llo", "h*llo");
        no("h\\*llo", "hello");
        yes("a*b*c", "aXXbYYc");
        no("a*b*c", "aXXbYY");
        yes("*:1*", "key:123");
        no("a[", "a");
        yes("a[b", "ab");
        yes("a[^", "ab");
        no("a\\", "a");
        no("abc", "ab");
        no("ab", "abc");
        yes("**a**", "a");
        assert!(matches(b"HELLO", b"hello", true));
        assert!(matches(b"[A-C]x", b"bx", true));
    }

    #[test]
    fn no_exponential_blowup() {
        let pat = "a*".repeat(50) + "b";
        let subject = "a".repeat(5000);
        assert!(!matches(pat.as_bytes(), subject.as_bytes(), false));
    }
}
