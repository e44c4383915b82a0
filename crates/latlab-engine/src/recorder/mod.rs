//! The tracefs flight recorder of `latlab run`: behind one trait, [`Recorder`] (what the
//! measuring threads' hook, the session and the collector use), two strategies:
//!
//! - [`running`] (the default: one instance read as binary pages): the recorder never stops;
//!   a spike's marker is an event, a copier reads the marked CPU's pages, and each spike
//!   takes its CPU's events from the previous marker to its own. Its files wait in memory
//!   until the measurement ends.
//! - [`turns`] (`--trace-instances` > 1, or spikes read as text): instances take turns; a
//!   marker stops the armed one in the kernel, a standby takes over within a slice, and the
//!   stopped one is copied for its spike.
//!
//! What they share ([`common`]): the instances (made by the one tracefs set-up,
//! [`crate::instances`]), the hook, the decoder ([`decoder`]), the tallies of run.json's
//! `"trace"` and the spikes' records and files ([`files`]). A spike's capture → analysis →
//! files is pure, in [`latlab_core::trace::capture`]. [`start`] probes tracefs, creates and
//! configures the instances and starts the strategy the options and the kernel call for;
//! [`Recorder::finish`] returns the JSON for `run.json`'s `"trace"`. The instances are
//! removed on every path: `finish`, Drop (panics), and the ledger for SIGKILL.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use latlab_core::record::SpikeRecord;
use latlab_core::trace::capture::Spike;
use latlab_core::trace_summary::TraceSummary;
use latlab_sys::ledger::Ledger;
use latlab_sys::live::{SpikeEvent, ThreadShared};
use latlab_sys::tracefs::{self, InstanceSpec};

use crate::instances::Instances;

mod common;
mod decoder;
mod files;
mod running;
#[cfg(test)]
mod tests;
mod turns;

pub use decoder::{dat_layout, instance_trace_dat, DatError};
pub use files::defer_budget;

use common::Common;
use decoder::binary_decoder;
use running::Running;
use turns::Turns;

pub struct TraceOptions {
    /// The measuring threads' threshold (they hold it; kept here for the caller's record).
    #[allow(dead_code)]
    pub threshold_ns: u64,
    pub buffer_kb: u64,
    pub max_spikes: u32,
    /// Instances to create (the first is required; later ones are best effort).
    pub instances: u32,
    /// `--trace-events full`: the timer interrupt's own events too.
    pub timer_irq: bool,
    pub required: bool,
    /// Keep the spikes' files in memory until the measurement ends ([`defer_budget`]).
    pub defer_files: bool,
}

/// What the measuring threads' hook holds. On a sample above the threshold a thread does `if
/// armed.swap(false)` (instances taking turns; the recorder that never stops leaves it set)
/// `{ write(marker_fd.load(), "LATLAB_STOP cpu=<c> intended=<ns> actual=<ns> latency=<ns>\n")
/// }` (one write syscall; no allocation), and counts the marker in `marks[cpu]` when there
/// are marks.
#[derive(Clone)]
pub struct Hook {
    /// The armed instance's pre-opened `trace_marker` fd.
    pub marker_fd: Arc<AtomicI32>,
    /// True while the armed instance runs and may take a marker.
    pub armed: Arc<AtomicBool>,
    /// Markers written, by CPU number: the recorder that never stops only.
    pub marks: Option<Arc<[AtomicU64]>>,
}

/// A flight recorder, whichever strategy: what the session and its collector call.
pub trait Recorder: Send {
    /// What the measuring threads' hook holds.
    fn hook(&self) -> &Hook;

    /// The armed instance's `trace_marker` fd, an atomic the recorder switches.
    fn marker_fd(&self) -> Arc<AtomicI32> {
        self.hook().marker_fd.clone()
    }

    /// True while the armed instance runs and may be stopped by a marker.
    fn armed(&self) -> Arc<AtomicBool> {
        self.hook().armed.clone()
    }

    /// The markers' counters: Some when the recorder never stops (every spike writes its
    /// marker and counts it).
    fn marks(&self) -> Option<Arc<[AtomicU64]>> {
        self.hook().marks.clone()
    }

    /// A marker stops the recorder (instances taking turns): the collector looks every slice
    /// ([`Recorder::poll`]) to re-arm it.
    fn stops(&self) -> bool;

    /// The measuring threads have started (`housekeeping`: the CPUs left unmeasured).
    fn attach(&self, _threads: &[Arc<ThreadShared>], _housekeeping: &[u32]) {}

    /// Collector, every slice: re-arm the recorder if a marker stopped it.
    fn poll(&mut self) {}

    /// True when a stopped instance waits for its spike (the collector should drain the
    /// spike rings now).
    fn wants_collector(&self) -> bool {
        false
    }

    /// Collector, after handing every spike drained at `drained_at` to
    /// [`Recorder::on_spike`]: recycle what waits for a spike record that was dropped.
    fn reap(&mut self, _drained_at: Instant) {}

    /// Collector thread (non-RT), once per spike at or above the threshold, in the order the
    /// markers were written: its capture analyzed and its files saved under
    /// `run_dir/spikes/NNN/`. None: not traced (counted).
    fn on_spike(&mut self, e: &SpikeEvent, run_dir: &Path) -> Option<SpikeRecord>;

    /// Spikes not traced so far (for `--metrics-listen`).
    fn not_traced(&self) -> u64;

    /// Stop, remove the instances (and unmount tracefs if the session mounted it), write the
    /// spikes' files kept until now; the summary stored as run.json's `"trace"`.
    fn finish(self: Box<Self>) -> TraceSummary;
}

/// A run's flight recorder.
pub type TraceSession = Box<dyn Recorder>;

/// Why the recorder could not start with `--trace-required` (or could not clear its
/// instances).
#[derive(Debug)]
pub struct StartError(String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

/// Why a strategy did not start.
enum Failure {
    /// Tracing is not possible here (a warning; an error with `--trace-required`).
    CannotTrace(String),
    /// An instance could not be cleared.
    Io(std::io::Error),
}

/// The spike of a measuring thread's event.
fn spike_of(e: &SpikeEvent) -> Spike {
    Spike {
        cpu: e.cpu,
        intended_ns: e.intended_ns,
        actual_ns: e.actual_ns,
        latency_ns: e.latency_ns,
    }
}

/// Probe + create + configure + start, on tracefs at `LATLAB_TRACEFS` or
/// `/sys/kernel/tracing`. When tracing is impossible (no tracefs, read-only, events missing):
/// Err if `opts.required`, else Ok(None) after pushing a one-line warning. A leftover
/// latlab-* instance of a dead run: warn ("run `latlab cleanup`") and continue.
pub fn start(
    opts: &TraceOptions,
    cpus: &[u32],
    ledger: Arc<Mutex<Ledger>>,
    warnings: &mut Vec<String>,
) -> Result<Option<TraceSession>, StartError> {
    start_at(&Instances::default_root(), opts, cpus, ledger, warnings)
}

/// [`start`] on a given tracefs root.
pub fn start_at(
    root: &Path,
    opts: &TraceOptions,
    cpus: &[u32],
    ledger: Arc<Mutex<Ledger>>,
    warnings: &mut Vec<String>,
) -> Result<Option<TraceSession>, StartError> {
    let started = match open(root, opts, cpus, ledger, warnings) {
        Ok(common) => start_strategy(common, true),
        Err(why) => Err(Failure::CannotTrace(why)),
    };
    match started {
        Ok(Started::Running(r)) => Ok(Some(Box::new(r))),
        Ok(Started::Turns(t)) => Ok(Some(Box::new(t))),
        Err(Failure::CannotTrace(e)) if opts.required => {
            Err(StartError(format!("--trace-required: cannot trace: {e}")))
        }
        Err(Failure::CannotTrace(e)) => {
            warnings.push(format!("tracing disabled: {e} (measuring without traces)"));
            Ok(None)
        }
        Err(Failure::Io(e)) => Err(StartError(format!("cannot clear the recorder: {e}"))),
    }
}

/// A started recorder, by strategy.
enum Started {
    Running(Running),
    Turns(Turns),
}

/// The strategy the instances call for: one instance read as binary pages never stops; more,
/// or text, take turns. `thread`: with the copier or re-arm thread (tests step without).
fn start_strategy(common: Common, thread: bool) -> Result<Started, Failure> {
    if common.binary.is_ok() && common.instances.all().len() == 1 {
        Running::start(common, thread).map(Started::Running)
    } else {
        Turns::start(common, thread).map(Started::Turns)
    }
}

/// tracefs found or mounted, the instances created and configured (the first required, the
/// others best effort), the warnings said. Err: why tracing is impossible.
fn open(
    root: &Path,
    opts: &TraceOptions,
    cpus: &[u32],
    ledger: Arc<Mutex<Ledger>>,
    warnings: &mut Vec<String>,
) -> Result<Common, String> {
    let mut set = Instances::open(root, ledger).map_err(|e| e.to_string())?;
    for left in tracefs::leftover_instances(set.root()) {
        warnings.push(format!(
            "tracefs instance {} was left by a killed latlab run: run `latlab cleanup` to free its memory",
            left.display()
        ));
    }
    let spec = if opts.timer_irq {
        InstanceSpec::RECORDER_FULL
    } else {
        InstanceSpec::RECORDER
    };
    let first = set
        .create("", opts.buffer_kb, &spec)
        .map_err(|e| e.to_string())?;
    // Standbys: while one stopped instance is copied, another is armed, and a third can
    // take over when that one stops too (spikes come in bursts under load). One instance
    // read as binary pages is re-armed in place; read as text (a layout latlab does not
    // decode) it could not be re-armed before its copy, so it gets two standbys.
    let binary = binary_decoder(&first.raw);
    let (missing, first_warnings) = (first.missing.clone(), first.warnings.clone());
    let instances = match (&binary, opts.instances) {
        (Err(_), 1) => 3,
        (_, n) => n.max(1),
    };
    for k in 1..instances {
        let suffix = ((b'a' + k as u8) as char).to_string();
        if let Err(e) = set.create(&suffix, opts.buffer_kb, &spec) {
            warnings.push(format!(
                "only {k} recorder instance(s) of {instances} ({e}): the recorder re-arms less often while spikes are copied"
            ));
            break;
        }
    }
    if !missing.is_empty() {
        warnings.push(format!(
            "tracing without these events (not in this kernel): {}",
            missing.join(", ")
        ));
    }
    warnings.extend(first_warnings);
    if let Err(why) = &binary {
        warnings.push(format!(
            "the recorder reads spikes' buffers as text (slower, and it delays the measured CPUs): {why}"
        ));
    }
    Ok(Common::new(set, binary, opts, cpus))
}
