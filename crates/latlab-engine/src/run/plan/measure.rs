//! What the measuring threads are asked to do: their timing, CPUs, policy and mode. Below the
//! back ends (which start threads from it) and below the session's plan (which names the back
//! end).

use latlab_core::hist::Layout;
use latlab_core::modes::{AudioRecord, CpuMode, ExecRecord, ModeParams, NoiseRecord};
use latlab_core::units::Nanos;
use latlab_sys::measure::ThreadShared;
use latlab_sys::modes::Mode;
use latlab_sys::rt::Policy;

use crate::recorder::TraceOptions;

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
    /// `--max-latency-of` (`--backend timerlat`): the latency `--max-latency` judges; None:
    /// the CPU's histogram (timerlat: the thread latency).
    pub max_latency_of: Option<latlab_core::trace::raw::TimerlatContext>,
    /// The flight recorder's options, with `--trace-threshold`.
    pub trace: Option<TraceOptions>,
    pub warmup_ns: Nanos,
    /// `--until STAT:PRECISION`: end the run once the statistic is known that well.
    pub until: Option<latlab_core::until::Until>,
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
        let (irq, thread) = (t.mode.irq.as_ref(), t.mode.thread.as_ref());
        if matches!(self.mode, Mode::Timer) && irq.is_none() {
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
        let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        let noise = t.mode.noise.as_ref().map(|n| NoiseRecord {
            method: n.method.into(),
            threshold_ns: n.threshold_ns,
            started_ns: load(&n.started_ns),
            runtime_ns: load(&n.runtime_ns),
            noise_ns: load(&n.noise_ns),
            loops: load(&n.loops),
            dropped: load(&n.dropped),
            sources: n.sources.lock().map(|s| s.clone()).unwrap_or_default(),
            // The collector's series (build_record).
            per_second_ns: Vec::new(),
        });
        Some(CpuMode {
            pair: self.pairs.get(i).cloned(),
            exec,
            audio,
            irq: irq.map(|h| h.snapshot().to_record()),
            thread: thread.map(|h| h.snapshot().to_record()),
            timerlat_threads: irq.map(|_| if thread.is_some() { "user" } else { "kernel" }.into()),
            noise,
        })
    }
}
