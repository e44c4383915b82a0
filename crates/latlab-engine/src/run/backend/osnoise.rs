//! `--backend osnoise` (with `--mode noise`): the kernel's osnoise tracer measures
//! (latlab-sys's `osnoise`): its own `osnoise/N` threads spin on each measured CPU, and it
//! writes each noise at or above `--noise-threshold` and each interference by source with its
//! time. latlab reads them from the ring's binary pages and publishes them as its own spinning
//! thread would: the CPU's histogram holds the noises, `cpus[].mode.noise` the runtime, the
//! noise and the sources with their times (`method` `osnoise`).
//!
//! `--backend hwnoise` is the same tracer with interrupts disabled while its threads spin
//! (as `rtla hwnoise`): what noise remains is the hardware's, the hypervisor's or an NMI's
//! (`method` `hwnoise`).

use std::sync::Arc;

use latlab_sys::measure::{ThreadResult, ThreadShared};
use latlab_sys::modes::Mode;

use super::{Backend, Measurement, Start};
use crate::run::plan::measure::{ModePlan, Plan};

pub struct Osnoise;
pub struct Hwnoise;

/// The per-CPU ring of latlab's osnoise instance (KiB).
const BUFFER_KB: u64 = 2048;

fn threshold(mode: &ModePlan) -> Option<u64> {
    match mode.mode {
        Mode::Noise { threshold_ns } => Some(threshold_ns),
        _ => None,
    }
}

impl Backend for Osnoise {
    fn name(&self) -> &'static str {
        "osnoise"
    }
    fn on_the_machine(&self) -> bool {
        true
    }
    fn preflight(&self, p: &Plan, mode: &ModePlan) -> crate::Result<Vec<String>> {
        preflight(self.name(), p, mode)?;
        Ok(Vec::new())
    }
    fn start(&self, s: Start) -> crate::Result<Box<dyn Measurement>> {
        start(s, false)
    }
}

impl Backend for Hwnoise {
    fn name(&self) -> &'static str {
        "hwnoise"
    }
    fn on_the_machine(&self) -> bool {
        true
    }
    fn preflight(&self, p: &Plan, mode: &ModePlan) -> crate::Result<Vec<String>> {
        preflight(self.name(), p, mode)?;
        let root = std::path::Path::new(latlab_sys::tracefs::DEFAULT_ROOT);
        latlab_sys::osnoise::probe_irqs_off(root).map_err(crate::Error::msg)?;
        Ok(Vec::new())
    }
    fn start(&self, s: Start) -> crate::Result<Box<dyn Measurement>> {
        start(s, true)
    }
}

/// What both back ends check before anything changes: noise mode, a threshold in whole µs,
/// one priority, the tracer on this kernel, no other user of it.
fn preflight(name: &str, p: &Plan, mode: &ModePlan) -> crate::Result<()> {
    let Some(t) = threshold(mode) else {
        return Err(crate::Error::msg(format!(
            "--backend {name} measures noise, not --mode {}: add --mode noise",
            mode.name
        )));
    };
    if !t.is_multiple_of(1_000) {
        return Err(crate::Error::msg(format!(
            "--backend {name}: --noise-threshold is the kernel's tracing_thresh, whole µs (not {t} ns)"
        )));
    }
    if p.distance_ns != 0 || p.priority_step != 0 {
        return Err(crate::Error::msg(format!(
            "--backend {name}: one priority for every CPU (the tracer's threads); leave --distance and --priospread out"
        )));
    }
    let root = std::path::Path::new(latlab_sys::tracefs::DEFAULT_ROOT);
    latlab_sys::osnoise::probe(root).map_err(crate::Error::msg)?;
    if let Some(c) =
        latlab_sys::timerlat::conflicts(root, "", latlab_sys::timerlat::OSNOISE_CONFLICTS)
    {
        return Err(crate::Error::msg(c));
    }
    Ok(())
}

fn start(s: Start, irqs_off: bool) -> crate::Result<Box<dyn Measurement>> {
    let p = s.plan;
    let root = latlab_sys::timerlat::tracefs_root(&mut s.ledger.lock().unwrap())
        .map_err(crate::Error::msg)?;
    let e = latlab_sys::osnoise::Engine::start(
        latlab_sys::osnoise::Config {
            root,
            cpus: p.cpus.clone(),
            duration_ns: p.duration_ns,
            threshold_ns: threshold(s.mode).unwrap_or(1_000),
            policy: p.policy,
            priority: p.priority,
            layout: p.layout,
            spike_threshold_ns: s.spike_threshold_ns,
            buffer_kb: BUFFER_KB,
            irqs_off,
            trace: s.trace,
        },
        s.ledger.clone(),
    )
    .map_err(crate::Error::msg)?;
    Ok(Box::new(Running(e)))
}

struct Running(latlab_sys::osnoise::Engine);

impl Measurement for Running {
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
    fn join(self: Box<Self>, warnings: &mut Vec<String>) -> Vec<ThreadResult> {
        let (results, lines) = self.0.join();
        warnings.extend(lines);
        results
    }
}
