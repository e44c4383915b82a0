//! Fuzz every renderer of one run (`latlab report` in each format, `histogram.txt`): from any
//! record that loads, each format renders without a panic, and what the record's text holds
//! cannot reach a terminal: the text, markdown and cyclictest outputs hold no control
//! character but newline (and tab in cyclictest's columns), no bidi or invisible format
//! character; the JSON output is JSON.
#![no_main]
use latlab_core::model::RunModel;
use latlab_core::record::RunRecord;
use latlab_report::{render, Format};
use libfuzzer_sys::fuzz_target;

fn assert_inert(what: &str, out: &[u8], tab_ok: bool) {
    let s = std::str::from_utf8(out).unwrap_or_else(|e| panic!("{what}: not UTF-8: {e}"));
    for c in s.chars() {
        let ok = c == '\n' || (tab_ok && c == '\t') || !latlab_report::escape::needs_escape(c);
        assert!(ok, "{what}: raw {c:?} in the output");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(r) = RunRecord::from_json(data) else {
        return;
    };
    let Ok(m) = RunModel::new(r) else {
        return;
    };
    assert_inert("text", &render(&m, Format::Text), false);
    assert_inert("markdown", &render(&m, Format::Markdown), false);
    assert_inert("cyclictest", &render(&m, Format::Cyclictest), true);
    let json = render(&m, Format::Json);
    serde_json::from_slice::<serde_json::Value>(&json).expect("the json report is JSON");
    let html = render(&m, Format::Html);
    std::str::from_utf8(&html).expect("the html report is UTF-8");
});
