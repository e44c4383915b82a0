//! JUnit XML of the checks, for CI systems that show test reports.

use std::fmt;

use super::Check;

/// Text safe inside XML 1.0 content and attribute values: markup characters as entities,
/// characters XML 1.0 cannot hold (controls other than tab/newline/CR, U+FFFE/U+FFFF) as
/// visible `\u{…}` escapes.
pub fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' | '\n' | '\r' => {
                let _ = fmt::Write::write_fmt(&mut o, format_args!("&#{};", c as u32));
            }
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' || c == '\u{7f}' => {
                let _ = fmt::Write::write_fmt(&mut o, format_args!("\\u{{{:x}}}", c as u32));
            }
            c => o.push(c),
        }
    }
    o
}

/// The checks as one JUnit XML test suite: one test case per check, a `<failure>` for each
/// failed one (Jenkins, GitLab).
pub fn junit(checks: &[Check]) -> String {
    use std::fmt::Write;
    let failures = checks.iter().filter(|c| !c.passed).count();
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuite name=\"latlab compare\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        checks.len()
    );
    for c in checks {
        let detail = format!(
            "{}: {} (baseline {}) → {} ({}), rule {}: observed {}{}",
            c.stat,
            c.show(c.a),
            c.baseline,
            c.show(c.b),
            c.run,
            c.rule,
            c.show_observed(),
            c.note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
        );
        let _ = write!(
            o,
            "  <testcase classname=\"latlab.compare.{}\" name=\"{}\">",
            xml_escape(&c.run),
            xml_escape(&c.expr)
        );
        if c.passed {
            if c.too_few_samples {
                let _ = write!(o, "<system-out>{}</system-out>", xml_escape(&detail));
            }
        } else {
            let _ = write!(
                o,
                "<failure type=\"regression\" message=\"{}\">{}</failure>",
                xml_escape(&format!(
                    "{} {} {}: observed {}",
                    c.run,
                    c.stat,
                    c.rule,
                    c.show_observed()
                )),
                xml_escape(&detail)
            );
        }
        o.push_str("</testcase>\n");
    }
    o.push_str("</testsuite>\n");
    o
}
