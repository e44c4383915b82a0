//! The kernel's osnoise tracer as latlab's noise measurement (`latlab run --mode noise
//! --backend osnoise`): the kernel's own `osnoise/N` threads spin on each measured CPU (as
//! `rtla osnoise`), and the tracer writes each noise at or above the threshold
//! (`osnoise:sample_threshold`), each interference by source with its time (`irq_noise`,
//! `softirq_noise`, `thread_noise`, `nmi_noise`) and, per period, the runtime, the noise and
//! the noise no interference explains (`hw_count`: hardware or the hypervisor).
//!
//! As the timerlat back end: latlab's own instance (`instances/latlab-<pid>-osnoise`, never
//! the top level), the global settings (`osnoise/` and the top-level `tracing_thresh`) saved in
//! the ledger before they change and restored at the end or by `latlab cleanup`; one reader
//! thread on a housekeeping CPU copies the binary pages and publishes into each CPU's
//! [`ThreadShared`] as a measuring thread would: each noise a sample.
//!
//! With [`Config::irqs_off`] (`--backend hwnoise`, as `rtla hwnoise`), the threads spin with
//! interrupts disabled (the tracer's `OSNOISE_IRQ_DISABLE` option; Debian's 6.1-rt and
//! 6.12-rt have it): no IRQ,
//! softirq or thread can interrupt them, so what noise remains is the hardware's, the
//! hypervisor's or an NMI's.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use latlab_core::escape::escape;
use latlab_core::hist::Layout;

use crate::hotloop::TraceHook;
use crate::ledger::Ledger;
use crate::live::{ModeShared, ThreadShared};
use crate::measure::ThreadResult;
use crate::rt::{self, Policy};

mod instance;
mod reader;

use instance::Instance;
use reader::{Reader, Sink};

/// The tracer's period (and runtime: the threads spin all of it, as rtla's default).
pub const PERIOD_US: u64 = 1_000_000;
/// How often the reader copies the rings.
const READ_EVERY_NS: u64 = 50_000_000;

/// What this kernel offers: Ok when it has the osnoise tracer and its settings, else one line
/// naming what is missing.
pub fn probe(root: &Path) -> Result<(), String> {
    let tracers = fs::read_to_string(root.join("available_tracers")).map_err(|e| {
        format!(
            "cannot read {}: {e} (is tracefs mounted? run as root)",
            root.join("available_tracers").display()
        )
    })?;
    if !tracers.split_whitespace().any(|t| t == "osnoise") {
        return Err(format!(
            "this kernel has no osnoise tracer (CONFIG_OSNOISE_TRACER is not set; its tracers: {}): use --backend real (latlab's own spinning thread)",
            escape(tracers.trim())
        ));
    }
    for f in [
        "osnoise/cpus",
        "osnoise/period_us",
        "osnoise/runtime_us",
        "tracing_thresh",
    ] {
        if !root.join(f).is_file() {
            return Err(format!(
                "this kernel's osnoise tracer has no {}: use --backend real",
                root.join(f).display()
            ));
        }
    }
    Ok(())
}

/// What the run asks.
pub struct Config {
    pub root: PathBuf,
    pub cpus: Vec<u32>,
    pub duration_ns: u64,
    /// Whole µs (the kernel's `tracing_thresh`).
    pub threshold_ns: u64,
    pub policy: Policy,
    pub priority: u32,
    pub layout: Layout,
    pub spike_threshold_ns: u64,
    pub buffer_kb: u64,
    /// Spin with interrupts disabled (hwnoise).
    pub irqs_off: bool,
    /// The flight recorder (`--trace-threshold`): each noise at or above its threshold writes
    /// its gap's marker (`… noise`), from the reader's CPU; the recorder places it on the
    /// noise's CPU at its end.
    pub trace: Option<TraceHook>,
}

impl Config {
    /// The method the record names: `osnoise`, or `hwnoise` with interrupts disabled.
    pub fn method(&self) -> &'static str {
        if self.irqs_off {
            "hwnoise"
        } else {
            "osnoise"
        }
    }
}

/// `osnoise/options`'s text has the option that disables interrupts, on or off (each option
/// is a token, `NO_`-prefixed when off).
pub fn has_irqs_off(options: &str) -> bool {
    options
        .split_whitespace()
        .any(|t| t == "OSNOISE_IRQ_DISABLE" || t == "NO_OSNOISE_IRQ_DISABLE")
}

/// The tracer's option that disables interrupts while its threads spin (hwnoise), in this
/// kernel's `osnoise/options`: Ok, or one line saying it is missing.
pub fn probe_irqs_off(root: &Path) -> Result<(), String> {
    let p = root.join("osnoise/options");
    if has_irqs_off(&fs::read_to_string(&p).unwrap_or_default()) {
        return Ok(());
    }
    Err(format!(
        "this kernel's osnoise tracer has no OSNOISE_IRQ_DISABLE option in {}: --backend hwnoise cannot disable interrupts here; --backend osnoise counts the noise by source",
        p.display()
    ))
}

/// A running osnoise measurement.
pub struct Engine {
    pub threads: Vec<Arc<ThreadShared>>,
    pub t0_ns: u64,
    pub stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    reader: Option<JoinHandle<(Vec<ThreadResult>, Vec<String>)>>,
}

impl Engine {
    /// Start the tracer in latlab's instance and its reader. Err: one line (nothing is left
    /// changed).
    pub fn start(cfg: Config, ledger: Arc<Mutex<Ledger>>) -> Result<Engine, String> {
        if cfg.threshold_ns == 0 || !cfg.threshold_ns.is_multiple_of(1_000) {
            return Err(format!(
                "--backend {}: --noise-threshold is the kernel's tracing_thresh, whole µs (not {} ns)",
                cfg.method(),
                cfg.threshold_ns
            ));
        }
        probe(&cfg.root)?;
        if cfg.irqs_off {
            probe_irqs_off(&cfg.root)?;
        }
        let inst = Instance::start(&cfg.root, &cfg, &mut ledger.lock().unwrap())?;
        let fail = |inst: Instance, e: String| -> Result<Engine, String> {
            let _ = inst.finish(&mut ledger.lock().unwrap());
            Err(e)
        };
        let mut raw = Vec::new();
        for &c in &cfg.cpus {
            match crate::tracefs::open_cpu_raw_at(inst.rec.dir(), c) {
                Ok(f) => raw.push(f),
                Err(e) => return fail(inst, format!("cannot read the CPU {c} ring: {e}")),
            }
        }
        let pids = match crate::timerlat::workers::kernel_threads(
            "osnoise/",
            &cfg.cpus,
            cfg.policy,
            cfg.priority,
        ) {
            Ok(p) => p,
            Err(e) => {
                drop(raw);
                return fail(inst, e);
            }
        };
        let threads: Vec<Arc<ThreadShared>> = cfg
            .cpus
            .iter()
            .map(|&c| {
                Arc::new(ThreadShared::new(
                    c,
                    cfg.layout,
                    ModeShared::noise(cfg.layout, cfg.threshold_ns, cfg.method()),
                    PERIOD_US * 1_000,
                    false,
                ))
            })
            .collect();
        let t0_ns = rt::now_ns();
        for t in &threads {
            t.first_ns.store(t0_ns, Release);
            if let Some(n) = &t.mode.noise {
                n.started_ns.store(t0_ns, Relaxed);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let mut reader = Reader {
            sinks: threads
                .iter()
                .zip(raw)
                .map(|(t, f)| {
                    Sink::new(
                        t.clone(),
                        f,
                        pids.iter().find(|p| p.0 == t.cpu).map(|p| p.1 as i64),
                    )
                })
                .collect(),
            t0: t0_ns,
            end: t0_ns + cfg.duration_ns,
            spike_threshold: cfg.spike_threshold_ns,
            page: inst.decoder.page_size(),
            max_copy: cfg.buffer_kb * 1024,
            buf: Vec::with_capacity(1 << 20),
            trace: cfg.trace.clone(),
            marker: [0; 128],
        };
        let (stop2, done2) = (stop.clone(), done.clone());
        let h = std::thread::Builder::new()
            .name("latlab-osnoise".into())
            .spawn(move || {
                rt::block_signals();
                reader.run(&inst, &stop2);
                reader.drain(&inst);
                reader.ran_until(rt::now_ns());
                for s in &mut reader.sinks {
                    s.lost += instance::dropped(inst.rec.dir(), s.sh.cpu).unwrap_or(0);
                    if let Some(n) = &s.sh.mode.noise {
                        n.dropped.store(s.lost, Relaxed);
                    }
                }
                let results = reader.finish();
                let mut lines = reader.lost_lines();
                drop(reader);
                lines.extend(inst.finish(&mut ledger.lock().unwrap()));
                done2.store(true, Release);
                (results, lines)
            });
        match h {
            Ok(h) => Ok(Engine {
                threads,
                t0_ns,
                stop,
                done,
                reader: Some(h),
            }),
            Err(e) => Err(format!("cannot start the osnoise reader: {e}")),
        }
    }

    pub fn all_done(&self) -> bool {
        self.done.load(Acquire)
    }

    /// Wait for the end: each CPU's result, and what could not be restored.
    pub fn join(mut self) -> (Vec<ThreadResult>, Vec<String>) {
        self.stop.store(true, Release);
        self.reader
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(h) = self.reader.take() {
            self.stop.store(true, Release);
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// hwnoise needs the tracer's `OSNOISE_IRQ_DISABLE` option, on or off; a kernel whose
    /// `osnoise/options` lacks it (or has no such file) is one line naming it. (Debian's 6.1-rt
    /// and 6.12-rt have it: the lab measures with it there.)
    #[test]
    fn hwnoise_needs_the_irq_disable_option() {
        let d = tempfile::tempdir().unwrap();
        let o = d.path().join("osnoise");
        std::fs::create_dir(&o).unwrap();
        let err = probe_irqs_off(d.path()).unwrap_err();
        assert!(err.contains("no OSNOISE_IRQ_DISABLE option"), "{err}");
        std::fs::write(
            o.join("options"),
            "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP\n",
        )
        .unwrap();
        let err = probe_irqs_off(d.path()).unwrap_err();
        assert!(
            err.contains("--backend osnoise") && !err.contains('\n'),
            "{err}"
        );
        for opts in ["NO_OSNOISE_IRQ_DISABLE", "OSNOISE_IRQ_DISABLE"] {
            std::fs::write(o.join("options"), format!("DEFAULTS {opts}\n")).unwrap();
            assert_eq!(probe_irqs_off(d.path()), Ok(()), "{opts}");
        }
    }
}
