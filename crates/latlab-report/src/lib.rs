//! latlab-report: every rendering of latlab's results, as bytes.
//!
//! `render(&model, format) -> Vec<u8>`: one module per format; the caller decides whether the
//! bytes go to a file or stdout. Nothing here opens files or reads the system.

use latlab_core::model::RunModel;

pub mod analyze;
pub mod check;
pub mod compare;
pub mod contexts;
pub mod cyclictest;
/// The one escaping of untrusted text (latlab-core's, shared with `latlab analyze`).
pub use latlab_core::escape;
pub mod extra;
pub mod figures;
pub mod gates;
pub mod history;
pub mod html;
pub mod json;
pub mod kcidb;
pub mod lanes;
pub mod lava;
pub mod loads;
pub mod manual;
pub mod markdown;
pub mod modes;
pub mod perfetto;
pub mod profile;
pub mod profile_tables;
pub mod rt_tests;
pub mod scenario;
pub mod svg;
pub mod tables;
pub mod tail;
pub mod text;
pub mod timeline;

/// The formats a single run renders to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Json,
    Html,
    Cyclictest,
    /// rt-tests' `--json` file ([`rt_tests`]).
    RtTestsJson,
    /// LAVA result lines ([`lava`]).
    Lava,
}

/// Why `model` has nothing to render in `format` (one line, for an error), None when it has:
/// the formats of samples (cyclictest, rt-tests JSON) need a measured CPU.
pub fn refusal(model: &RunModel, format: Format) -> Option<String> {
    match format {
        Format::Cyclictest if model.cpus.is_empty() => Some("no latency was measured (a `latlab profile --no-measure` run has only the profile): the cyclictest format has no histogram to show; use --format text, markdown, json or html".into()),
        Format::RtTestsJson => rt_tests::refusal(model, "rt-tests-json"),
        Format::Lava => rt_tests::refusal(model, "lava"),
        _ => None,
    }
}

/// Render one run.
pub fn render(model: &RunModel, format: Format) -> Vec<u8> {
    match format {
        Format::Text => text::render(model),
        Format::Markdown => markdown::render(model),
        Format::Json => json::render(model),
        Format::Html => html::render(model),
        Format::Cyclictest => cyclictest::render(model),
        Format::RtTestsJson => rt_tests::render(model),
        Format::Lava => lava::render(model),
    }
}
