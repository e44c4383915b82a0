//! Secrets latlab never records: the password of a URL (`postgres://user:PASSWORD@host/db`,
//! any scheme's `user:password@`) and the value of a `password=` key (libpq's `password=…` in a
//! connection string or in a URL's query, `sslpassword=`, `PGPASSWORD=`, `--password=`) become
//! `***`. This is the one masking: the command line a run records, every record read
//! (`record::RunRecord::from_json`), what the results database stores and shows, and
//! its error messages all go through it, so a `--db postgres://user:secret@host/db` never
//! reaches run.json, summary.txt, report.html, a report's output or the database.

use std::borrow::Cow;

/// What a secret is replaced by.
pub const MASK: &str = "***";

/// `s` with every URL password and `password=` value replaced by [`MASK`] (borrowed when
/// there is none).
pub fn mask(s: &str) -> Cow<'_, str> {
    let b = s.as_bytes();
    let mut out = String::new();
    // Bytes of `s` before `copied` are in `out` (or masked).
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"://") {
            let start = i + 3;
            let end = start
                + b[start..]
                    .iter()
                    .position(|&c| ends_authority(c))
                    .unwrap_or(b.len() - start);
            let auth = &b[start..end];
            if let Some(at) = auth.iter().rposition(|&c| c == b'@') {
                if let Some(colon) = auth[..at].iter().position(|&c| c == b':') {
                    if colon + 1 < at {
                        out.push_str(&s[copied..start + colon + 1]);
                        out.push_str(MASK);
                        copied = start + at;
                    }
                }
            }
            i = end.max(start);
            continue;
        }
        if b.len() - i >= 8 && b[i..i + 8].eq_ignore_ascii_case(b"password") {
            let mut j = i + 8;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            if j < b.len() && b[j] == b'=' {
                j += 1;
                while j < b.len() && b[j] == b' ' {
                    j += 1;
                }
                // libpq quotes a value with spaces: 'pass word', \' and \\ inside.
                let (from, to, next) = if j < b.len() && b[j] == b'\'' {
                    let mut k = j + 1;
                    while k < b.len() && b[k] != b'\'' {
                        k += if b[k] == b'\\' { 2 } else { 1 };
                    }
                    let k = k.min(b.len());
                    (j + 1, k, k + 1)
                } else {
                    let k = j + b[j..]
                        .iter()
                        .position(|&c| ends_value(c))
                        .unwrap_or(b.len() - j);
                    (j, k, k)
                };
                if to > from {
                    out.push_str(&s[copied..from]);
                    out.push_str(MASK);
                    copied = to;
                }
                i = next.max(i + 8);
                continue;
            }
            i += 8;
            continue;
        }
        i += 1;
    }
    if copied == 0 {
        return Cow::Borrowed(s);
    }
    out.push_str(&s[copied..]);
    Cow::Owned(out)
}

/// Where a URL's authority (`user:password@host:port`) ends.
fn ends_authority(c: u8) -> bool {
    matches!(c, b'/' | b'?' | b'#' | b'"' | b'\'' | b'\\') || c.is_ascii_whitespace()
}

/// Where an unquoted `password=` value ends (libpq separates keys by spaces, a URL's query by
/// `&`).
fn ends_value(c: u8) -> bool {
    matches!(c, b'&' | b'#' | b';' | b'"' | b'\'' | b',') || c.is_ascii_whitespace()
}

/// Whether [`mask`] could change `token` (raw bytes of a JSON string, escapes included): it
/// holds `://`, `password` in any case, or an escape that could spell either.
fn may_hold_secret(token: &[u8]) -> bool {
    token.contains(&b'\\')
        || token.windows(3).any(|w| w == b"://")
        || token
            .windows(8)
            .any(|w| w.eq_ignore_ascii_case(b"password"))
}

/// A JSON text with [`mask`] applied to every string in it, everything else byte for byte
/// (borrowed when nothing was masked). Bytes that are not JSON are left as they are, for the
/// parser to refuse.
pub fn mask_json(b: &[u8]) -> Cow<'_, [u8]> {
    let mut out: Vec<u8> = Vec::new();
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        // A string token: from this quote to the next one not escaped.
        let mut k = i + 1;
        while k < b.len() && b[k] != b'"' {
            k += if b[k] == b'\\' { 2 } else { 1 };
        }
        if k >= b.len() {
            break;
        }
        let token = &b[i..=k];
        if may_hold_secret(token) {
            if let Ok(text) = serde_json::from_slice::<String>(token) {
                if let Cow::Owned(m) = mask(&text) {
                    out.extend_from_slice(&b[copied..i]);
                    out.extend_from_slice(
                        serde_json::to_string(&m)
                            .expect("a string always serializes")
                            .as_bytes(),
                    );
                    copied = k + 1;
                }
            }
        }
        i = k + 1;
    }
    if copied == 0 {
        return Cow::Borrowed(b);
    }
    out.extend_from_slice(&b[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_passwords_are_masked_anywhere_in_the_text() {
        for (s, want) in [
            ("postgres://u:secretpw@host/db", "postgres://u:***@host/db"),
            (
                "--db=postgresql://lab:s3:cr@t@db.example:5432/latlab?x=1",
                "--db=postgresql://lab:***@db.example:5432/latlab?x=1",
            ),
            (
                "latlab run --db postgres://a:b@[::1]:5432/x -q",
                "latlab run --db postgres://a:***@[::1]:5432/x -q",
            ),
            (
                "https://u:p@h https://v:q@i",
                "https://u:***@h https://v:***@i",
            ),
            ("postgres://u@host/db", "postgres://u@host/db"),
            ("postgres://host:5432/db", "postgres://host:5432/db"),
            ("ssh://git@host:22/x", "ssh://git@host:22/x"),
            ("postgres://u:@host/db", "postgres://u:@host/db"),
            ("://", "://"),
            ("", ""),
        ] {
            assert_eq!(mask(s), want, "{s}");
        }
    }

    #[test]
    fn password_keys_are_masked() {
        for (s, want) in [
            (
                "postgres://u@h/db?sslmode=disable&password=secretpw&x=1",
                "postgres://u@h/db?sslmode=disable&password=***&x=1",
            ),
            (
                "host=h password=secretpw dbname=x",
                "host=h password=*** dbname=x",
            ),
            (
                "host=h password = 'secret pw \\' x' dbname=x",
                "host=h password = '***' dbname=x",
            ),
            ("PGPASSWORD=secretpw latlab", "PGPASSWORD=*** latlab"),
            ("sslpassword=k", "sslpassword=***"),
            ("--Password=k", "--Password=***"),
            ("password='unterminated", "password='***"),
            ("password=", "password="),
            ("password", "password"),
            (
                "no secret here: passwords are good",
                "no secret here: passwords are good",
            ),
        ] {
            assert_eq!(mask(s), want, "{s}");
        }
        // Not a secret: nothing is allocated.
        assert!(matches!(mask("latlab run --db x.sqlite"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_strings_are_masked_and_the_rest_is_kept_byte_for_byte() {
        let j = br#"{"a": 1e400, "command_line": "latlab run --db postgres://u:secretpw@h/db", "n": 340282366920938463463374607431768211455, "w": ["x \"password=pw\" y", "\u0070assword=pw"], "ok": "text"}"#;
        let m = mask_json(j);
        let s = std::str::from_utf8(&m).unwrap();
        assert!(!s.contains("secretpw") && !s.contains("=pw"), "{s}");
        assert!(s.contains(r#""command_line": "latlab run --db postgres://u:***@h/db""#));
        assert!(s.contains("1e400") && s.contains("340282366920938463463374607431768211455"));
        assert!(s.contains(r#""x \"password=***\" y""#), "{s}");
        assert!(s.contains(r#""ok": "text""#));
        let plain = br#"{"a": "b\"c", "d": [1, 2]}"#;
        assert!(matches!(mask_json(plain), Cow::Borrowed(_)));
        // Not JSON: left for the parser.
        assert_eq!(&*mask_json(b"\"password=x"), b"\"password=x");
        assert_eq!(&*mask_json(b"\xff\"\xfe\""), b"\xff\"\xfe\"");
    }
}
