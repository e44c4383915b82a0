//! Byte tools of the trace parser: word-at-a-time (SWAR) tests on 8 bytes in a `u64`, short
//! comparisons and searches without a call, and the decimal fast paths. Each tool is checked
//! against the standard library's own answer by a property test next to it.

/// The decimal digits at the start of 8 bytes: (how many, their value), in a few word
/// operations ([`non_digit_bytes`]); the digits, shifted to the top of the word with zeros
/// (leading zeros) below them, are combined pairwise, then in fours, then all eight.
#[inline(always)]
pub(super) fn lead_digits(b: &[u8; 8]) -> (usize, u64) {
    let w = u64::from_le_bytes(*b);
    let n = (non_digit_bytes(w).trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // The first digit is the lowest byte: keep the n digit values, move them to the top.
    let d = (w ^ 0x3030_3030_3030_3030) << (8 * (8 - n));
    let d = d.wrapping_mul(10).wrapping_add(d >> 8);
    let d = ((d & 0x0000_00ff_0000_00ff).wrapping_mul(100 + (1_000_000 << 32))
        + ((d >> 16) & 0x0000_00ff_0000_00ff).wrapping_mul(1 + (10_000 << 32)))
        >> 32;
    (n, d)
}

/// `str::parse::<i64>` with a fast path for plain decimal digits (most fields).
pub(super) fn parse_i64(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if !b.is_empty() && b.len() <= 18 {
        let mut n: i64 = 0;
        let mut ok = true;
        for &c in b {
            let d = c.wrapping_sub(b'0');
            ok &= d < 10;
            // Wrapping: non-digits (d up to 255) may overflow before `ok` rejects them; 18
            // real digits never do.
            n = n.wrapping_mul(10).wrapping_add(d as i64);
        }
        if ok {
            return Some(n);
        }
    }
    s.parse().ok()
}

/// `str::parse::<u64>` with the same fast path.
pub(super) fn parse_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if !b.is_empty() && b.len() <= 19 {
        let mut n: u64 = 0;
        let mut ok = true;
        for &c in b {
            let d = c.wrapping_sub(b'0');
            ok &= d < 10;
            n = n.wrapping_mul(10).wrapping_add(d as u64);
        }
        if ok {
            return Some(n);
        }
    }
    s.parse().ok()
}

/// Word-at-a-time byte tests on 8 bytes in a u64 (the first byte lowest): each returns the top
/// bit of every byte for which the test holds, exactly (`(x & 0x7f) + k` stays below 0x100, so
/// no carry crosses bytes).
const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
pub(super) const HI: u64 = 0x8080_8080_8080_8080;

/// Bytes of `x` that are not zero.
#[inline(always)]
pub(super) fn nonzero_bytes(x: u64) -> u64 {
    (((x & LO7) + LO7) | x) & HI
}

/// Bytes of `w` that are not ASCII digits.
#[inline(always)]
fn non_digit_bytes(w: u64) -> u64 {
    let x = w ^ 0x3030_3030_3030_3030;
    (((x & LO7) + 0x7676_7676_7676_7676) | x) & HI
}

/// Position of `c` in a short slice (a field, a column, an event name), 8 bytes per step:
/// memchr's set-up costs more than it saves on so few bytes, and a byte loop was the hottest
/// code of the parser. A word's bytes equal to `c` become zero after `^ c…c`; `(x − 0x01…01)
/// & !x & 0x80…80` flags the lowest zero byte exactly (bits above it may be false alarms,
/// which the lowest set bit ignores).
#[inline]
pub(super) fn find_byte(b: &[u8], c: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    let pat = LO * c as u64;
    let mut i = 0;
    while i + 8 <= b.len() {
        let x = u64::from_le_bytes(b[i..i + 8].try_into().unwrap()) ^ pat;
        let t = x.wrapping_sub(LO) & !x & HI;
        if t != 0 {
            return Some(i + (t.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..].iter().position(|&x| x == c).map(|p| i + p)
}

/// `a == b` for the short byte strings of a trace line (keys, event names, separators),
/// inline: a `memcmp` call per field was an eighth of the parse time. Compares 8 bytes at a
/// time, then the tail.
#[inline(always)]
pub(super) fn eq_short(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w8 = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().unwrap());
    let w4 = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().unwrap());
    if n >= 8 {
        // Whole words, then the last word (overlapping the one before): no byte loop.
        let mut i = 0;
        while i + 8 < n {
            if w8(a, i) != w8(b, i) {
                return false;
            }
            i += 8;
        }
        w8(a, n - 8) == w8(b, n - 8)
    } else if n >= 4 {
        w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4)
    } else {
        let mut d = 0u8;
        for i in 0..n {
            d |= a[i] ^ b[i];
        }
        d == 0
    }
}

/// `s.strip_prefix(p)` with [`eq_short`].
#[inline(always)]
pub(super) fn strip<'s>(s: &'s str, p: &str) -> Option<&'s str> {
    let (b, n) = (s.as_bytes(), p.as_bytes());
    // `p` ends on a char boundary of `s` when its bytes match (`p` is a whole str).
    (b.len() >= n.len() && eq_short(&b[..n.len()], n)).then(|| &s[n.len()..])
}

/// `str::find` for short needles without the two-way searcher's setup (the reference for
/// [`find_arrow`] in the tests).
#[cfg(test)]
pub(super) fn find_sub(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let first = *n.first()?;
    let mut i = 0;
    while let Some(p) = memchr::memchr(first, h.get(i..)?) {
        let at = i + p;
        if h.get(at..at + n.len()) == Some(n) {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

/// `str::rfind` counterpart of [`find_sub`].
pub(super) fn rfind_sub(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let first = *n.first()?;
    let mut end = h.len();
    while let Some(at) = memchr::memrchr(first, &h[..end]) {
        if h.len() - at >= n.len() && eq_short(&h[at..at + n.len()], n) {
            return Some(at);
        }
        end = at;
    }
    None
}

/// Decimal digits (1 to 18) ending at `end`, right after `key`: (start of `key`, value). The
/// fast paths read the kernel's fixed layouts backwards with it.
#[inline(always)]
pub(super) fn digits_back(b: &[u8], end: usize, key: &[u8]) -> Option<(usize, i64)> {
    let b = &b[..end];
    // The digits before `end`, counted 8 bytes at a time: in the word that ends at `end` (its
    // last byte is the most significant), the bytes above the highest non-digit are digits.
    let mut i = end;
    if end >= 8 {
        let w = u64::from_le_bytes(b[end - 8..].try_into().unwrap());
        let digits = (non_digit_bytes(w).leading_zeros() / 8) as usize;
        if digits < 8 {
            i = end - digits;
        } else {
            while i > end.saturating_sub(18) && b[i - 1].is_ascii_digit() {
                i -= 1;
            }
        }
    } else {
        while i > 0 && b[i - 1].is_ascii_digit() {
            i -= 1;
        }
    }
    let k = i.checked_sub(key.len())?;
    if i == end || !eq_short(&b[k..i], key) {
        return None;
    }
    let mut n = 0i64;
    for &c in &b[i..] {
        n = n * 10 + (c - b'0') as i64;
    }
    Some((k, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `never_panics_on_mangled_real_lines` (cut = 2322): 18 non-digit bytes in an
    /// integer field overflowed the fast path's arithmetic (a panic in debug builds).
    #[test]
    fn regression_parse_i64_of_18_non_digits_does_not_overflow() {
        assert_eq!(parse_i64("A0AA000AAAAAAAAAAA"), None);
        assert_eq!(parse_i64("~~~~~~~~~~~~~~~~~~"), None);
        assert_eq!(
            parse_i64("999999999999999999"),
            Some(999_999_999_999_999_999)
        );
    }

    proptest::proptest! {
        #[test]
        fn parse_i64_and_u64_are_str_parse(s in "[0-9A-z \t-]{0,20}") {
            proptest::prop_assert_eq!(parse_i64(&s), s.parse::<i64>().ok());
            proptest::prop_assert_eq!(parse_u64(&s), s.parse::<u64>().ok());
        }

        #[test]
        fn eq_short_is_slice_eq(
            a in proptest::collection::vec(0u8..3, 0..40),
            b in proptest::collection::vec(0u8..3, 0..40),
        ) {
            proptest::prop_assert_eq!(eq_short(&a, &b), a == b);
            proptest::prop_assert!(eq_short(&a, &a.clone()));
        }

        #[test]
        fn digits_back_reads_the_digits_before_the_end(
            pre in "[a-z =0-9/:]{0,12}",
            digits in "[0-9]{0,20}",
            post in "[ a-z0-9]{0,3}",
        ) {
            let key = " pid=";
            let s = format!("{pre}{key}{digits}{post}");
            let b = s.as_bytes();
            let end = pre.len() + key.len() + digits.len();
            // Reference: the longest run of at most 18 digits before `end`, after `key`.
            let run = b[..end].iter().rev().take(18).take_while(|c| c.is_ascii_digit()).count();
            let i = end - run;
            let want = (run > 0 && i >= key.len() && &b[i - key.len()..i] == key.as_bytes())
                .then(|| (i - key.len(), s[i..end].parse::<i64>().unwrap()));
            proptest::prop_assert_eq!(digits_back(b, end, key.as_bytes()), want, "{:?} {}", s, end);
        }

        #[test]
        fn lead_digits_reads_the_leading_digits(b in proptest::array::uniform8(proptest::sample::select(vec![b'0', b'1', b'5', b'9', b'/', b':', b' ', b'a', 0xb0, 0xb9]))) {
            let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
            let v = b[..n].iter().fold(0u64, |v, &c| v * 10 + (c - b'0') as u64);
            proptest::prop_assert_eq!(lead_digits(&b), (n, v));
        }

        #[test]
        fn find_byte_is_position(hay in proptest::collection::vec(0usize..6, 0..40), c in 0usize..6) {
            // A small alphabet, so that matches are common, with the values the word trick
            // could confuse (0x00, 0x80, 0xff and the neighbours of ':').
            const ABC: [u8; 6] = [0x00, 0x01, b':', b';', 0x80, 0xff];
            let hay: Vec<u8> = hay.into_iter().map(|i| ABC[i]).collect();
            let c = ABC[c];
            proptest::prop_assert_eq!(find_byte(&hay, c), hay.iter().position(|&x| x == c));
        }
    }
}
