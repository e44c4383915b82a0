//! A run's plan: everything `latlab run` (and `profile`, `cyclictest`, the benches) asks for,
//! typed and checked by the CLI before anything touches the machine, the disk or the ledger.
//! The engine reads nothing else of the command line.

use std::path::PathBuf;

use crate::actions::Actions;
use crate::loads::LoadOptions;
use crate::profile::ProfileOpts;
use crate::store::DbTarget;

pub mod measure;
pub use measure::{ModePlan, Plan};

/// Everything a run needs: the measurement, its mode, and the session around it.
pub struct RunPlan {
    pub measure: Plan,
    pub mode: ModePlan,
    pub session: SessionPlan,
}

/// What a run does around its measurement.
pub struct SessionPlan {
    /// What the measuring threads are (`--backend`: [`super::backend::BACKENDS`]).
    pub backend: &'static dyn super::backend::Backend,
    /// `--sim-seed` and `--sim-realtime`, for a back end that generates its samples.
    pub seed: u64,
    pub realtime: bool,
    /// Threads wake at the same instants (cyclictest's `--secaligned`).
    pub aligned: bool,
    /// Where the run directory goes.
    pub results: PathBuf,
    /// Warnings are recorded but not printed.
    pub quiet: bool,
    /// Another latlab measuring the same CPUs is a warning, not a refusal.
    pub force: bool,
    /// The `--load` profiles, and how they run.
    pub loads: Vec<String>,
    pub load_options: LoadOptions,
    /// `--metrics-listen ADDR`, and whether a non-loopback address is allowed.
    pub metrics: Option<(String, bool)>,
    pub db: DbTarget,
    pub actions: Actions,
    /// `latlab profile`: the scheduler profile recorded over the measurement.
    pub profile: Option<ProfileOpts>,
    /// The command, as another run's refusal names it (`latlab run`).
    pub command: String,
    /// `--dma-latency`: the value (µs) `/dev/cpu_dma_latency` is held at while measuring, or
    /// None to leave the CPUs' idle states as they are.
    pub dma_latency_us: Option<i32>,
}
