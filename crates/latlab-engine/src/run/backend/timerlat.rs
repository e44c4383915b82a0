//! `--backend timerlat`: the kernel's timerlat tracer measures (latlab-sys's `timerlat`): its
//! timer fires each `--interval` on each measured CPU and the kernel itself writes, per
//! activation, the IRQ latency, the thread latency and, with latlab's threads waiting on
//! `timerlat_fd`, the return-to-user latency. latlab reads them from the ring's binary pages
//! and publishes them as a measuring thread would: the CPU's histogram is what the measuring
//! thread sees (return to user, or the kernel thread's latency where there is no
//! `timerlat_fd`), `cpus[].mode.irq` and `cpus[].mode.thread` the other contexts.

use std::sync::Arc;

use latlab_sys::measure::{ThreadResult, ThreadShared};

use super::{Backend, Measurement, Start};
use crate::run::plan::measure::{ModePlan, Plan};

pub struct Timerlat;

/// The per-CPU ring of latlab's timerlat instance (KiB): about 3 s of samples at 100 µs.
const BUFFER_KB: u64 = 2048;

impl Backend for Timerlat {
    fn name(&self) -> &'static str {
        "timerlat"
    }
    fn on_the_machine(&self) -> bool {
        true
    }
    fn preflight(&self, p: &Plan, mode: &ModePlan) -> crate::Result<Vec<String>> {
        if mode.name != "timer" {
            return Err(crate::Error::msg(format!(
                "--backend timerlat measures the timer only, not --mode {}: leave --mode out",
                mode.name
            )));
        }
        if p.distance_ns != 0 || p.priority_step != 0 {
            return Err(crate::Error::msg(
                "--backend timerlat: one period and one priority for every CPU (the tracer's); leave --distance and --priospread out",
            ));
        }
        if !p.interval_ns.is_multiple_of(1_000)
            || !(100_000..=1_000_000_000).contains(&p.interval_ns)
        {
            return Err(crate::Error::msg(format!(
                "--backend timerlat: --interval is the tracer's period, whole µs from 100us to 1s (not {} ns)",
                p.interval_ns
            )));
        }
        let root = std::path::Path::new(latlab_sys::tracefs::DEFAULT_ROOT);
        latlab_sys::timerlat::probe(root, &p.cpus).map_err(crate::Error::msg)?;
        if let Some(c) =
            latlab_sys::timerlat::conflicts(root, "", latlab_sys::timerlat::TIMERLAT_CONFLICTS)
        {
            return Err(crate::Error::msg(c));
        }
        // Not refused (a different tracer), but every latency measured includes its
        // interrupts-off time: the record says so.
        Ok(latlab_sys::timerlat::hwlat_beside(root, "")
            .into_iter()
            .collect())
    }
    fn start(&self, s: Start) -> crate::Result<Box<dyn Measurement>> {
        let p = s.plan;
        let root = latlab_sys::timerlat::tracefs_root(&mut s.ledger.lock().unwrap())
            .map_err(crate::Error::msg)?;
        let e = latlab_sys::timerlat::Engine::start(
            latlab_sys::timerlat::Config {
                root,
                cpus: p.cpus.clone(),
                interval_ns: p.interval_ns,
                duration_ns: p.duration_ns,
                policy: p.policy,
                priority: p.priority,
                layout: p.layout,
                spike_threshold_ns: s.spike_threshold_ns,
                trace: s.trace,
                // The kernel's threads even where `timerlat_fd` exists: the lab's knob for
                // the path of a kernel without it (docs/testing.md).
                kernel_threads: std::env::var_os("LATLAB_TIMERLAT_THREADS")
                    .is_some_and(|v| v == "kernel"),
                buffer_kb: BUFFER_KB,
            },
            s.ledger.clone(),
        )
        .map_err(crate::Error::msg)?;
        Ok(Box::new(Running(e)))
    }
}

struct Running(latlab_sys::timerlat::Engine);

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
