//! The one escaping (`latlab_report::escape`, from latlab-core) in every text format: a label
//! and a policy carrying controls, bidi and invalid bytes come out inert.

use latlab_report::escape::needs_escape;

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
    let config = RunConfig {
        backend: label.into(),
        policy: Some(policy.into()),
        priority: Some(95),
        ..RunConfig::default()
    };
    let cpus = vec![CpuRecord::new(0, h.to_record())];
    let mut r = RunRecord::new(label, Source::Latlab, config, cpus);
    r.complete = true;
    r.command_line = Some(format!("latlab run {label}"));
    r.started_at = Some(label.into());
    r.warnings = vec![label.into()];
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
    use latlab_report::{render, Format};
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
    use latlab_report::compare::{render, CompareFormat};
    let runs = [model(&format!("a{EVIL}"), "fifo"), model("b", "rr")];
    for f in [CompareFormat::Text, CompareFormat::Markdown] {
        let out = assert_inert("compare", &render(&runs, f), false);
        assert!(out.contains(r"\u{202e}"), "{out}");
    }
}
