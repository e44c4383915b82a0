//! latlab-engine: everything latlab runs on the machine, driven by typed plans.
//!
//! The CLI (`crates/latlab`) parses flags into plans and renders what comes back; this crate
//! owns the sessions: the tracefs flight [`recorder`] (one instance that never stops, or
//! instances taking turns).

pub mod recorder;
