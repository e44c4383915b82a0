//! A run's plan: everything `latlab run` (and `profile`, `cyclictest`, the benches) asks for,
//! typed and checked by the CLI before anything touches the machine, the disk or the ledger.
//! The engine reads nothing else of the command line.

use std::path::PathBuf;

use latlab_core::hist::Layout;
use latlab_core::modes::{AudioRecord, CpuMode, ExecRecord, ModeParams};
use latlab_core::units::Nanos;
use latlab_sys::measure::ThreadShared;
use latlab_sys::modes::Mode;
use latlab_sys::rt::Policy;

use crate::actions::Actions;
use crate::loads::LoadOptions;
use crate::profile::ProfileOpts;
use crate::recorder::TraceOptions;
use crate::store::DbTarget;

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
}

/// Everything `run` needs, typed and validated before anything touches the machine or the disk.
pub struct Plan {
    pub duration_ns: Nanos,
    pub interval_ns: Nanos,
    /// `--interval` was given (an audio run's period is `--period`).
    pub interval_given: bool,
    pub distance_ns: Nanos,
    pub layout: Layout,
    pub cpus: Vec<u32>,
    pub policy: Policy,
    pub priority: u32,
    /// Thread i's priority is `priority − i × priority_step` (cyclictest's `--priospread`).
    pub priority_step: u32,
    pub trace_threshold_ns: Option<Nanos>,
    pub max_latency_ns: Option<Nanos>,
    /// The flight recorder's options, with `--trace-threshold`.
    pub trace: Option<TraceOptions>,
    pub warmup_ns: Nanos,
    pub label: String,
    /// The CPUs latlab's own threads were confined to (`rt::confine_calling_thread`), set by
    /// `run_with` once the mode's senders are known; empty: not confined.
    pub housekeeping: Vec<u32>,
}

/// The validated mode.
pub struct ModePlan {
    pub mode: Mode,
    pub name: &'static str,
    pub params: Option<ModeParams>,
    /// Wakeup: the pair description of each measured CPU.
    pub pairs: Vec<String>,
}

impl ModePlan {
    /// What thread `i` adds to its CPU record (None for the timer).
    pub fn cpu_mode(&self, i: usize, t: &ThreadShared, backend_sim: bool) -> Option<CpuMode> {
        if matches!(self.mode, Mode::Timer) {
            return None;
        }
        let exec = t.mode.exec.as_ref().map(|h| ExecRecord {
            iterations: if backend_sim {
                0
            } else {
                t.mode
                    .exec_iterations
                    .load(std::sync::atomic::Ordering::Relaxed)
            },
            calibrated_ns: t
                .mode
                .exec_calibrated_ns
                .load(std::sync::atomic::Ordering::Relaxed),
            histogram: h.snapshot().to_record(),
        });
        let audio: Option<AudioRecord> = t.mode.audio.as_ref().map(|a| a.tally().to_record());
        Some(CpuMode {
            pair: self.pairs.get(i).cloned(),
            exec,
            audio,
            irq: None,
            thread: None,
        })
    }
}
