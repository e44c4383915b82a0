//! What the session sees of a recorder: its options, the measuring threads' [`Hook`], and the
//! [`Recorder`] trait both strategies implement.

use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use latlab_core::record::SpikeRecord;
use latlab_core::trace::capture::Spike;
use latlab_core::trace_summary::TraceSummary;
use latlab_sys::live::{SpikeEvent, ThreadShared};

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
    /// Each spike's `trace.txt` beside its `trace.dat` (`--trace-text`); without a
    /// `trace.dat` (a layout latlab does not decode) the text is always written.
    pub text_files: bool,
    /// Keep the spikes' files in memory until the measurement ends (`defer_budget`).
    pub defer_files: bool,
    /// The back end writes a spike's marker from another CPU than the spike's (timerlat's
    /// reader): the spike's trace is its CPU's events up to its wake-up, and its marker is
    /// placed there, from the thread that armed the timer.
    pub markers_off_cpu: bool,
    /// The spikes are noise gaps (`--mode noise`): a marker placed for one is a gap's, at its
    /// end from the task on its CPU at its start ([`latlab_core::trace::capture::Place::Noise`]).
    pub noise: bool,
}

/// What the measuring threads' hook holds. On a sample above the threshold a thread does
/// `fd = armed_fd.swap(-1)` (instances taking turns; the recorder that never stops only loads
/// it) and `if fd >= 0 { write(fd, "LATLAB_STOP cpu=<c> intended=<ns> actual=<ns>
/// latency=<ns>\n") }` (one write syscall; no allocation), and counts the marker in
/// `marks[cpu]` when there are marks.
#[derive(Clone)]
pub struct Hook {
    /// The armed instance's pre-opened `trace_marker` fd; -1 while no instance may take a
    /// marker. One atomic, so that disarming and taking the fd are one step
    /// (latlab_sys::hotloop::TraceHook).
    pub armed_fd: Arc<AtomicI32>,
    /// Markers written, by CPU number: the recorder that never stops only.
    pub marks: Option<Arc<[AtomicU64]>>,
}

/// A flight recorder, whichever strategy: what the session and its collector call.
pub trait Recorder: Send {
    /// What the measuring threads' hook holds.
    fn hook(&self) -> &Hook;

    /// The armed instance's `trace_marker` fd (-1: none armed), an atomic the recorder
    /// switches and a spike's thread swaps out.
    fn armed_fd(&self) -> Arc<AtomicI32> {
        self.hook().armed_fd.clone()
    }

    /// True while an instance is armed and may take a marker.
    fn is_armed(&self) -> bool {
        self.hook()
            .armed_fd
            .load(std::sync::atomic::Ordering::Acquire)
            >= 0
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

/// Why a strategy did not start.
pub(super) enum Failure {
    /// Tracing is not possible here (a warning; an error with `--trace-required`).
    CannotTrace(String),
    /// An instance could not be cleared.
    Io(std::io::Error),
}

/// The spike of a measuring thread's event.
pub(super) fn spike_of(e: &SpikeEvent) -> Spike {
    Spike {
        cpu: e.cpu,
        intended_ns: e.intended_ns,
        actual_ns: e.actual_ns,
        latency_ns: e.latency_ns,
    }
}
