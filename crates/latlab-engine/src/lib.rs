//! latlab-engine: everything latlab runs on the machine, driven by typed plans.
//!
//! The CLI (`crates/latlab`) parses flags into plans and renders what comes back; this crate
//! owns the sessions: the tracefs flight [`recorder`] (one instance that never stops, or
//! instances taking turns) and the run directory ([`rundir`]). Its API returns [`Error`].

/// `return Err(…)` with a formatted [`Error`] (anyhow's `bail!`, for the engine's own type).
macro_rules! bail {
    ($($t:tt)*) => {
        return Err($crate::Error::from(anyhow::anyhow!($($t)*)))
    };
}

mod error;
pub mod recorder;
pub mod rundir;

pub use error::{Error, Result};
