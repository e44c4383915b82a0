//! Back ends: what a run's measuring threads are — their clock, their sleep and where their
//! samples come from. A back end is one file here and one line in [`BACKENDS`]: the CLI's
//! `--backend` takes the names listed there, the run record keeps the name
//! (`config.backend`), and the run's collector (`run::run`) sees only the [`Measurement`] a
//! back end starts: the threads' shared histograms and spike rings, a stop flag and a join.
//!
//! - [`cyclic`] (`real`): SCHED_FIFO threads sleeping with absolute `clock_nanosleep`, one per
//!   CPU, as cyclictest (latlab-sys's hot loop on the real clock);
//! - [`sim`] (`sim`): the same loop fed by a seeded generator, in simulated time (or real time
//!   with `realtime`), so the whole pipeline runs without root;
//! - [`timerlat`] (`timerlat`): the kernel's timerlat tracer in latlab's own instance, its
//!   samples (IRQ, thread, return-to-user latency) read from the ring's binary pages;
//! - [`osnoise`] (`osnoise`, `--mode noise` only): the kernel's osnoise tracer in latlab's own
//!   instance, its noises and their sources read from the ring's binary pages; `hwnoise`
//!   the same with interrupts disabled while the tracer's threads spin (`rtla hwnoise`);
//! - [`idle`]: no thread at all (`latlab profile --no-measure`): the run lasts its duration.
//!
//! docs/design.md ("Adding a back end") walks through `sim` as the worked example.

use std::sync::Arc;

use latlab_sys::measure::{ThreadResult, ThreadShared, TraceHook};

use super::plan::measure::{ModePlan, Plan};

pub mod cyclic;
pub mod idle;
pub mod osnoise;
pub mod sim;
pub mod timerlat;

/// What a run asks of its back end's threads.
pub struct Start<'a> {
    pub plan: &'a Plan,
    pub mode: &'a ModePlan,
    /// Threads wake at the same instants (cyclictest's `--secaligned`).
    pub aligned: bool,
    /// Samples at or above this go to the spike rings the collector drains.
    pub spike_threshold_ns: u64,
    /// The flight recorder's marker, written by a thread whose sample crosses its threshold.
    pub trace: Option<TraceHook>,
    /// The run's ledger, for a back end that changes the machine (the timerlat tracer's
    /// settings).
    pub ledger: Arc<std::sync::Mutex<latlab_sys::ledger::Ledger>>,
    /// `--sim-seed`, for back ends that generate their samples.
    pub seed: u64,
    /// Generated samples come in real time (`--sim-realtime`).
    pub realtime: bool,
}

/// A back end: a name (`--backend NAME`, `config.backend`) and how it starts its threads.
pub trait Backend: Sync {
    /// Its name on the command line and in the record.
    fn name(&self) -> &'static str;
    /// Its samples are generated in simulated time: the run's duration is the periods its
    /// threads went through, not wall time, and it has no per-minute histograms.
    fn simulated_time(&self, realtime: bool) -> bool {
        let _ = realtime;
        false
    }
    /// Its samples are generated (from `--sim-seed`): the record keeps the seed, and an
    /// execution-time mode's iteration count means nothing.
    fn generated(&self) -> bool {
        false
    }
    /// It runs real-time threads on the machine: it needs the machine probed (root,
    /// `mlockall`, `/dev/cpu_dma_latency`), latlab's own threads kept off its CPUs, and its
    /// CPUs claimed against other latlab runs.
    fn on_the_machine(&self) -> bool;
    /// What this kernel and this plan allow, checked before anything is changed or written
    /// (a kernel without the back end's tracer: one line, exit 1). Ok: the warnings the run
    /// record keeps (`warnings`) about what it runs beside.
    fn preflight(&self, p: &Plan, mode: &ModePlan) -> crate::Result<Vec<String>> {
        let _ = (p, mode);
        Ok(Vec::new())
    }
    /// Start the threads.
    fn start(&self, s: Start) -> crate::Result<Box<dyn Measurement>>;
}

/// A running measurement, as the collector sees it.
pub trait Measurement {
    /// Per measured CPU, what its thread publishes (histogram, spike ring, last sample).
    fn threads(&self) -> &[Arc<ThreadShared>];
    /// CLOCK_MONOTONIC ns of the common start.
    fn t0_ns(&self) -> u64;
    /// Ask the threads to end (they notice within a period).
    fn stop(&self);
    /// Every thread has ended (its duration is over, or it was stopped).
    fn all_done(&self) -> bool;
    /// Wait for the threads: what each hands back. What went wrong at the end (a tracer's
    /// setting that could not be restored) goes to `warnings`, for the record.
    fn join(self: Box<Self>, warnings: &mut Vec<String>) -> Vec<ThreadResult>;
}

/// Every back end, by name: the one list to extend.
pub const BACKENDS: &[&dyn Backend] = &[
    &cyclic::Cyclic,
    &sim::Sim,
    &timerlat::Timerlat,
    &osnoise::Osnoise,
    &osnoise::Hwnoise,
];

/// The back end called `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Backend> {
    BACKENDS.iter().copied().find(|b| b.name() == name)
}

/// The names `--backend` takes.
pub fn names() -> Vec<&'static str> {
    BACKENDS.iter().map(|b| b.name()).collect()
}

/// A measurement by latlab-sys's engine (the hot loop every thread runs).
pub(crate) struct SysEngine(pub latlab_sys::measure::Engine);

impl Measurement for SysEngine {
    fn threads(&self) -> &[Arc<ThreadShared>] {
        &self.0.threads
    }
    fn t0_ns(&self) -> u64 {
        self.0.t0_ns
    }
    fn stop(&self) {
        self.0
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
    }
    fn all_done(&self) -> bool {
        self.0.all_done()
    }
    fn join(self: Box<Self>, _: &mut Vec<String>) -> Vec<ThreadResult> {
        self.0.join()
    }
}

/// latlab-sys's engine on `backend` for `s`.
pub(crate) fn start_sys(
    s: Start,
    backend: latlab_sys::measure::Backend,
) -> crate::Result<Box<dyn Measurement>> {
    let p = s.plan;
    let e = latlab_sys::measure::Engine::start_mode(
        latlab_sys::measure::Config {
            cpus: p.cpus.clone(),
            interval_ns: p.interval_ns,
            distance_ns: p.distance_ns,
            duration_ns: p.duration_ns,
            policy: p.policy,
            priority: p.priority,
            priority_step: p.priority_step,
            aligned: s.aligned,
            layout: p.layout,
            spike_threshold_ns: s.spike_threshold_ns,
            trace: s.trace,
            backend,
        },
        s.mode.mode.clone(),
    )
    .map_err(crate::Error::msg)?;
    Ok(Box::new(SysEngine(e)))
}
