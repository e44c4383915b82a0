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

    /// ESC (colour, clear screen, title), CR, newline, C1 CSI, bidi overrides and isolates,
    /// a zero-width space and U+FFFD (invalid bytes of a file name).
    const EVIL: &str = "x\x1b[2J\x1b]0;t\x07\r\n\u{9b}1m\u{202e}\u{2066}\u{200b}\u{fffd}y";

    fn model(label: &str, policy: &str) -> latlab_core::model::RunModel {
        use latlab_core::hist::{Histogram, Layout};
        use latlab_core::record::*;
        let mut h = Histogram::new(Layout::default());
        for v in [1_500, 20_000, 9_000_000] {
            h.record(v);
        }
        let mut r = RunRecord {
            schema_version: SCHEMA_VERSION,
            label: label.into(),
            source: Source::Latlab,
            complete: true,
            tool_version: None,
            command_line: Some(format!("latlab run {label}")),
            started_at: Some(label.into()),
            ended_at: None,
            config: RunConfig {
                backend: label.into(),
                policy: Some(policy.into()),
                priority: Some(95),
                ..RunConfig::default()
            },
            machine: Machine::default(),
            inventory: None,
            total: Default::default(),
            cpus: vec![CpuRecord {
                cpu: 0,
                stats: Default::default(),
                histogram: h.to_record(),
                per_second_max_ns: vec![],
                top_spikes: vec![],
                thread: ThreadInfo::default(),
                mode: None,
            }],
            spikes: vec![],
            trace: None,
            loads: vec![],
            activity: None,
            warnings: vec![label.into()],
            notes: vec![],
            scenario: None,
        };
        r.refresh().unwrap();
        latlab_core::model::RunModel::new(r).unwrap()
    }

    /// Every character of a text output but newline (and cyclictest's column tabs) is inert.
    fn assert_inert(what: &str, out: &[u8], tab_ok: bool) -> String {
        let s = String::from_utf8(out.to_vec()).unwrap();
        for c in s.chars() {
            assert!(
                c == '\n' || (tab_ok && c == '\t') || !needs_escape(c),
                "{what}: raw {c:?} in {s}"
            );
        }
        s
    }

    /// The label and the policy reach the text, markdown and cyclictest (`histogram.txt`)
    /// outputs escaped, never raw.
    #[test]
    fn label_and_policy_are_escaped_in_every_text_format() {
        use crate::{render, Format};
        let m = model(&format!("lab{EVIL}"), &format!("fifo{EVIL}"));
        let esc = r"x\u{1b}[2J\u{1b}]0;t\u{7}\u{d}\u{a}\u{9b}1m\u{202e}\u{2066}\u{200b}\u{fffd}y";
        let text = assert_inert("text", &render(&m, Format::Text), false);
        assert!(
            text.contains(&format!("latlab report: lab{esc}\n")),
            "{text}"
        );
        assert!(text.contains(&format!("fifo{esc} 95")), "{text}");
        let md = assert_inert("markdown", &render(&m, Format::Markdown), false);
        assert!(md.contains(r"## latlab report: labx\u{1b}\[2J"), "{md}");
        let ct = assert_inert("cyclictest", &render(&m, Format::Cyclictest), true);
        assert!(
            ct.starts_with(&format!("# latlab lab{esc} (cyclictest -h format)\n")),
            "{ct}"
        );
        let html = String::from_utf8(render(&m, Format::Html)).unwrap();
        assert!(
            !html.contains('\u{1b}') && !html.contains('\u{202e}'),
            "{html}"
        );
    }

    /// `latlab compare` text and markdown escape the labels too.
    #[test]
    fn compare_escapes_labels() {
        use crate::compare::{render, CompareFormat};
        let runs = [model(&format!("a{EVIL}"), "fifo"), model("b", "rr")];
        for f in [CompareFormat::Text, CompareFormat::Markdown] {
            let out = assert_inert("compare", &render(&runs, f), false);
            assert!(out.contains(r"\u{202e}"), "{out}");
        }
    }
}
