//! latlab-engine: everything latlab runs on the machine, driven by typed plans.
//!
//! The CLI (`crates/latlab`) parses flags into plans and renders what comes back; this crate
//! owns the sessions: the run ([`run`], its back ends and collector), the session around it
//! ([`session`]: signals, ledger, run directory, loads), the tracefs flight [`recorder`] (one
//! trait, two strategies: one instance that never stops, or instances taking turns) and the one
//! tracefs set-up ([`instances`]) that the recorder, the profiler and the benches' captures
//! share. Its API returns [`Error`].

/// `return Err(…)` with a formatted [`Error`] (anyhow's `bail!`, for the engine's own type).
macro_rules! bail {
    ($($t:tt)*) => {
        return Err(anyhow::anyhow!($($t)*).into())
    };
}

pub mod actions;
pub mod analyze;
pub mod bench;
pub mod claim;
pub mod cleanup;
pub mod cyclictest_cli;
mod error;
pub mod export;
pub mod instances;
pub mod loads;
pub mod loads_alone;
pub mod metrics;
pub mod profile;
pub mod recorder;
pub mod run;
pub mod rundir;
pub mod scenario;
pub mod session;
pub mod store;

pub use error::{Error, Result};

/// A warning on stderr, `latlab: warning: MESSAGE`, the message escaped (it may quote input).
pub fn warn(msg: &str) {
    eprintln!("latlab: warning: {}", latlab_core::escape::escape(msg));
}
