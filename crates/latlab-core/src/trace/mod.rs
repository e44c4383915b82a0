//! Traces: the tracefs text parser and the attribution of spikes, pure functions over bytes and
//! events, so `latlab run` (live recorder) and `latlab analyze` (saved traces) share one code
//! path and tests feed them fixtures and synthetic sequences.
//!
//! The parser, one job per module: `bytes` (word-at-a-time byte tools), `line` (the fixed
//! part of a line: anchor and TASK-PID column), [`event`] (event bodies), [`parser`] (the
//! streaming parser and its records), [`blocks`] (block cutting for the parallel parser).
//! The attribution: [`analyzer`] (the per-CPU state machine, one handler per event),
//! [`classify`] (cause kinds, their names, and which cause a stretch of time is charged to),
//! [`parallel`] (parse on several threads, feed one analyzer in trace order).
//! [`tracedat`]: trace-cmd's `trace.dat` file (written for spikes, read by `latlab analyze`).
//! [`capture`]: a spike's capture (pages or text) → analysis → its record and files.

pub mod analyzer;
pub mod blocks;
mod bytes;
pub mod capture;
pub mod classify;
pub mod event;
mod line;
pub mod parallel;
pub mod parser;
mod pid_map;
pub mod raw;
pub mod tracedat;

/// The attribution's paths from before its split into [`analyzer`], [`classify`] and
/// [`parallel`] (`latlab_core::trace::attribution::kind_str` and co. keep working).
pub mod attribution {
    pub use super::analyzer::*;
    pub use super::classify::*;
    pub use super::parallel::*;
}

pub use analyzer::{parse_marker, Analysis, AnalyzeOptions, Analyzer, Sample, SampleMode};
pub use classify::{kind_str, sort_causes, summarize, switch_to_user, SummaryRow};
pub use parallel::{
    analyze_bytes_parallel, analyze_events, analyze_text, analyze_text_parallel, has_markers,
    Parallel,
};

pub use event::{Event, EventKind, TaskRef};
pub use line::Flags;
pub use parser::{header_entries, parse, ParseError, Parser, Record};

/// The trace fixtures the unit tests share.
#[cfg(test)]
pub(crate) mod fixtures {
    pub(crate) const EVENTS: &str = include_str!("../../tests/fixtures/trace/trace-events.txt");
    pub(crate) const ODD: &str = include_str!("../../tests/fixtures/trace/trace-oddcomm.txt");
    pub(crate) const WORST: &str =
        include_str!("../../tests/fixtures/trace/trace-worst-window-cpu1.txt");
    pub(crate) const LOST: &str = include_str!("../../tests/fixtures/trace/trace-lost-events.txt");

    /// The oddcomm fixture shows raw bytes through `cat -A` on the lines ending in `$`.
    pub(crate) fn un_cat_a(t: &str) -> String {
        t.split('\n')
            .map(|l| match l.strip_suffix('$') {
                Some(l) => l.replace("^I", "\t").replace("^[", "\x1b"),
                None => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
