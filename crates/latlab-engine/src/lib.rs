//! latlab-engine: everything latlab runs on the machine, driven by typed plans.
//!
//! The CLI (`crates/latlab`) parses flags into plans and renders what comes back; this crate
//! owns the sessions: the tracefs flight [`recorder`] (one trait, two strategies: one instance
//! that never stops, or instances taking turns) and the one tracefs set-up ([`instances`])
//! that the recorder, the profiler and the benches' captures share.

pub mod instances;
pub mod recorder;
