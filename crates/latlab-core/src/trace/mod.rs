//! Traces: the tracefs text parser ([`parse`]) and the attribution of spikes ([`attribution`]),
//! pure functions over bytes and events, so `latlab run` (live recorder) and `latlab analyze`
//! (saved traces) share one code path and tests feed them fixtures and synthetic sequences.

pub mod attribution;
pub mod parse;

pub use attribution::{
    analyze_text, analyze_text_parallel, summarize, Analysis, AnalyzeOptions, Analyzer, Sample,
    SampleMode, SummaryRow,
};

pub use parse::{parse, Event, EventKind, Flags, ParseError, Parser, Record, TaskRef};
