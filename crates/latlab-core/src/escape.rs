//! The one escaping of untrusted text (labels, policies, task names, command lines, anything
//! read from a record, an imported file or the system) on its way to a terminal or a text
//! file. Every text renderer (text, markdown, cyclictest/`histogram.txt`, compare, check) and
//! the HTML/SVG escaper go through [`escape`]: what could move the cursor, recolour, reorder or
//! hide text is shown as a visible `\u{..}` escape instead of being interpreted.
//!
//! Escaped: C0 and C1 control characters and DEL (ESC, CR, newline, tab, CSI `\u{9b}`…), the
//! bidirectional controls (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069), the other
//! invisible format characters (zero-width U+200B–U+200D, U+2060–U+206F, BOM U+FEFF,
//! interlinear annotations U+FFF9–U+FFFB, tags U+E0000–U+E007F), the line and paragraph
//! separators U+2028/U+2029, and U+FFFD, which is what invalid bytes in a file name become.

use std::fmt::Write;

/// Whether `c` is shown escaped (see the module documentation).
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{fffd}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// Append `c` to `out` as text can show it: itself, or `\u{1b}` when [`needs_escape`].
pub fn push_char(out: &mut String, c: char) {
    if needs_escape(c) {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    } else {
        out.push(c);
    }
}

/// Untrusted text made safe for a terminal or a text file: one line, nothing interpreted.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        push_char(&mut o, c);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_invalid_bytes_are_visible_escapes() {
        let bad = "a\x1b[31mb\rc\nd\te\u{9b}2Jf\u{202e}g\u{2066}h\u{200b}i\u{fffd}j\u{7f}";
        assert_eq!(
            escape(bad),
            "a\\u{1b}[31mb\\u{d}c\\u{a}d\\u{9}e\\u{9b}2Jf\\u{202e}g\\u{2066}h\\u{200b}i\\u{fffd}j\\u{7f}"
        );
        // Ordinary text, other scripts and symbols are untouched.
        let good = "preempt-rt 6.1 µs ≤ 57 — 日本語 (ünïcode) | <b>";
        assert_eq!(escape(good), good);
        assert!(escape(bad).chars().all(|c| !needs_escape(c)));
    }

    #[test]
    fn invalid_bytes_in_a_lossy_file_name_are_escaped() {
        let name = String::from_utf8_lossy(b"run\xff\xfe-1");
        assert_eq!(escape(&name), "run\\u{fffd}\\u{fffd}-1");
    }
}
