//! Fuzz `latlab compare`: the input is two or three run.json documents separated by NUL bytes
//! (JSON never holds a raw NUL). When they all load, the comparison and each of its formats
//! render without a panic, and the text and markdown outputs hold no raw control character.
#![no_main]
use latlab_core::model::RunModel;
use latlab_core::record::RunRecord;
use latlab_report::compare::{render, CompareFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parts: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    if !(2..=3).contains(&parts.len()) {
        return;
    }
    let mut runs = Vec::new();
    for p in parts {
        let Ok(r) = RunRecord::from_json(p) else {
            return;
        };
        let Ok(m) = RunModel::new(r) else { return };
        runs.push(m);
    }
    let c = latlab_core::compare::compare(&runs);
    let _ = format!("{c:?}");
    for (f, name) in [
        (CompareFormat::Text, "text"),
        (CompareFormat::Markdown, "markdown"),
    ] {
        let out = String::from_utf8(render(&runs, f)).expect("UTF-8");
        for ch in out.chars() {
            assert!(
                ch == '\n' || !latlab_report::escape::needs_escape(ch),
                "{name}: raw {ch:?} in the output"
            );
        }
    }
    let json = render(&runs, CompareFormat::Json);
    serde_json::from_slice::<serde_json::Value>(&json).expect("the json comparison is JSON");
    String::from_utf8(render(&runs, CompareFormat::Html)).expect("UTF-8");
});
