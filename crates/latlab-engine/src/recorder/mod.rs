//! Glue between `latlab run` and the tracefs flight recorder.
//!
//! With one instance (`--trace-instances 1`, the default) read as binary pages, the recorder
//! never stops ([`running`]): a spike's marker is an event, a copier reads the marked CPU's
//! pages, and each spike takes its CPU's events from the previous marker to its own. Its
//! files wait in memory until the measurement ends ([`TraceSession::finish`]). With more
//! instances, or when spikes are read as text, instances take turns: `latlab-<pid>`,
//! `latlab-<pid>-b`, `latlab-<pid>-c` …, all in the ledger, configured alike; the rest of this
//! paragraph describes that mode.
//! One is *armed* (running; its `trace_marker` fd is in [`TraceSession::marker_fd`], an atomic
//! the measurement threads load after taking [`TraceSession::armed`]). A thread that takes
//! `armed` on a spike writes one `LATLAB_STOP …` marker, which stops that instance in the
//! kernel. The collector calls [`TraceSession::poll`] every slice: it sees `armed` cleared,
//! moves the stopped instance to the *pending* queue, starts a *standby* one, stores its fd and
//! sets `armed` again — the recorder is back within a slice (~1 ms). Then
//! [`TraceSession::on_spike`] (once per spike, in order) copies the pending instance's buffer
//! as binary pages (`per_cpu/cpuN/trace_pipe_raw`: the kernel copies pages and formats
//! nothing, so a copy of MiBs takes milliseconds instead of the text's hundreds of ms of
//! kernel time on a CPU that may be measured; reading empties every CPU's ring, so it is made
//! a standby without a clear, which would wait for an RCU grace period and reset every page
//! with interrupts off), then
//! decodes the pages (`latlab_core::trace::raw`), writes them as the kernel's text layout
//! (`spikes/NNN/trace.txt`) and attributes the events with the same analyzer as `latlab
//! analyze`. When the kernel's layout is not one latlab decodes (`binary_fallback` in
//! run.json), the text is copied as before, in short reads polling between them (a third
//! instance takes over when the second stops during a long copy). A stopped instance whose
//! spike never reaches the collector
//! (the spike ring was full) is recycled by [`TraceSession::reap`], so the recorder never stays
//! disarmed. [`TraceSession::finish`] returns the JSON for `run.json`'s `"trace"`. The
//! instances are removed on every path: `finish`, `Drop` (panics), and the ledger for SIGKILL.

use std::collections::{BTreeMap, VecDeque};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latlab_core::escape::escape;
use latlab_core::record::SpikeRecord;
use latlab_core::trace::raw::{Comms, RawDecoder, Symbols};
use latlab_core::trace::{
    analyze_events, analyze_text, Analysis, AnalyzeOptions, ParseError, Sample, SampleMode,
};
use latlab_core::trace_summary::{CpuOverruns, SpikeCapture, TraceSummary};
use latlab_sys::ledger::Ledger;
use latlab_sys::pimutex::{PiGuard, PiMutex};
use latlab_sys::rt::now_ns as mono_ns;
use latlab_sys::tracefs::{self, RawLayout, Recorder, RecorderConfig, Tracefs};

mod running;
use running::Running;

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
    /// Keep the spikes' files in memory until the measurement ends ([`DEFER_MAX_BYTES`]).
    pub defer_files: bool,
}

/// The spikes' files wait in memory, as the pages they are rendered from, until the measuring
/// threads have stopped: writing them (megabytes per spike, a directory and three files)
/// puts the collector in the kernel for 40–150 µs at a time (`mkdir`, `openat`, `rename`,
/// page-cache allocation), on a measured CPU when every CPU is measured, where a kernel
/// without full preemption makes a woken measuring thread wait for it. Past this many bytes
/// waiting (or a sixteenth of the memory available, if less), a spike's files are written at
/// once.
const DEFER_MAX_BYTES: usize = 128 << 20;

/// The bytes of spike files kept in memory until the run ends: [`DEFER_MAX_BYTES`], or a
/// sixteenth of the memory available if less (the run's heap reserve includes them).
pub fn defer_budget() -> usize {
    latlab_sys::rt::mem_available()
        .map_or(DEFER_MAX_BYTES, |m| (m / 16) as usize)
        .min(DEFER_MAX_BYTES)
}

/// A spike's files, written when the run ends (or at once).
struct SpikeFiles {
    dir: PathBuf,
    analysis: String,
    /// Binary pages of one CPU, rendered as `trace.txt` and `trace.dat` when written.
    raw: Option<RawFiles>,
}

struct RawFiles {
    cpu: u32,
    pages: Vec<u8>,
    comms: Comms,
    slot: usize,
}

/// Bytes of a spike's copy between two polls of the armed instance (about 2 ms of reading under
/// load).
const POLL_EVERY: usize = 32 << 10;

/// Bytes of a binary copy between two polls of the armed instance (16 pages: well under a ms).
const RAW_POLL_EVERY: usize = 64 << 10;

/// How long the collector waits for the in-kernel stop after a marker.
const STOP_WAIT: Duration = Duration::from_millis(200);

/// The recorder that never stops: how long the collector waits for a spike's pages before it
/// gives the spike up.
const COPY_WAIT: Duration = Duration::from_secs(2);

/// A stopped instance whose spike has not been handed over by a drain of the spike rings that
/// began this long after the stop is an orphan (its spike record was dropped: ring full). The
/// measuring thread pushes the record microseconds after its marker; the margin covers a
/// preempted measuring thread on a busy VM.
const ORPHAN_AFTER: Duration = Duration::from_millis(100);

/// A spike that found the recorder stopped this long after another CPU's marker stopped it
/// may be read from that capture (a VM stalled on every CPU at once).
const COVER_WITHIN: Duration = Duration::from_millis(1);

/// The last capture's pages of the CPUs other than its spike's.
struct LastCapture {
    /// The spike's clock read (its marker stopped the instance microseconds later).
    stop_ns: u64,
    spike: u32,
    slot: usize,
    pages: Vec<(u32, Vec<u8>)>,
}

/// One stopped instance waiting for its spike.
struct Pending {
    slot: usize,
    stopped: Instant,
    /// CLOCK_MONOTONIC when the other instance took over (None: not re-armed yet).
    rearmed_ns: Option<u64>,
    /// Not re-armed because it took the last slot of `--trace-max-spikes`.
    capped: bool,
    /// Its buffers, copied by the re-arm thread (the instance is then a standby again).
    copy: Option<Copied>,
}

/// A stopped instance's buffers as binary pages, per CPU, with the events the ring overwrote.
#[derive(Default)]
struct Copied {
    pages: Vec<(u32, Vec<u8>)>,
    overruns: Vec<(u32, u64)>,
    read_ns: u64,
}

/// Which instance is armed, which wait for their spike, which are ready: shared by the
/// collector and the re-arm thread.
struct Arming {
    /// The armed instance, if any.
    active: Option<usize>,
    /// Stopped instances, oldest first, waiting to be copied.
    pending: VecDeque<Pending>,
    /// Cleared, stopped instances ready to take over.
    standby: Vec<usize>,
    /// Spikes traced so far (with `pending`, against `--trace-max-spikes`).
    traced: u32,
    /// Per instance and CPU (index in `cpus`): the kernel's cumulative `overrun` count at the
    /// last copy. A consumed instance is re-armed without a clear, so its counter keeps
    /// counting; each copy reports what it added since.
    overrun_base: Vec<Vec<u64>>,
    /// Re-arms without a clear (the copy consumed every event) and with one (it did not).
    reused: u32,
    cleared: u32,
}

/// What re-arming needs, shared with the re-arm thread: the state, and per instance its
/// `tracing_on` and `trace_marker` fds (valid until the thread is joined; the instances are
/// removed after that).
struct Arm {
    /// With priority inheritance: the collector (a normal task) holding it runs at the re-arm
    /// thread's priority while the thread waits (a plain mutex: re-arms of 345 ms under
    /// hackbench, the holder preempted).
    st: PiMutex<Arming>,
    fds: Vec<(RawFd, RawFd)>,
    /// With the binary reader: the instances' directories, the CPUs and the page size, for
    /// the thread's copies.
    dirs: Vec<PathBuf>,
    cpus: Vec<u32>,
    raw_page: Option<usize>,
    armed: Arc<AtomicBool>,
    marker_fd: Arc<AtomicI32>,
    trigger: bool,
    max_spikes: u32,
    quit: AtomicBool,
}

/// How often the re-arm thread looks at `armed`.
const REARM_SLICE: Duration = Duration::from_millis(1);

/// Spikes come in bursts (a stalled CPU is late several periods in a row, a stalled VM on
/// every CPU at once): for [`HOT_FOR`] after a spike disarmed the recorder, the re-arm thread
/// looks every [`HOT_SLICE`], so the next period's spike finds an instance armed. Measured
/// under hackbench: untraced spikes came 0.67–0.95 ms after a traced one, within a 1 ms slice.
const HOT_SLICE: Duration = Duration::from_micros(100);
const HOT_FOR: Duration = Duration::from_millis(20);

impl Arm {
    fn lock(&self) -> PiGuard<'_, Arming> {
        self.st.lock()
    }

    /// When a marker has disarmed the recorder: move the stopped instance to the pending queue
    /// and arm a standby at once (one `write` to its `tracing_on`). Cheap when nothing
    /// happened (one atomic load).
    fn step(&self, a: &mut Arming) {
        if let Some(x) = a.active {
            if self.armed.load(Ordering::Acquire) {
                return;
            }
            // A marker went to instance `x`. Without the trigger, stop it ourselves.
            if !self.trigger {
                let _ = set_on(self.fds[x].0, false);
            }
            a.active = None;
            a.pending.push_back(Pending {
                slot: x,
                stopped: Instant::now(),
                rearmed_ns: None,
                capped: false,
                copy: None,
            });
        }
        if a.traced as usize + a.pending.len() >= self.max_spikes as usize {
            // Every slot of --trace-max-spikes is taken: never re-armed, so no re-arm time.
            for p in a.pending.iter_mut().filter(|p| p.rearmed_ns.is_none()) {
                p.capped = true;
            }
            return;
        }
        let Some(next) = a.standby.pop() else {
            return;
        };
        if !set_on(self.fds[next].0, true) {
            a.standby.push(next);
            return;
        }
        self.marker_fd.store(self.fds[next].1, Ordering::Release);
        a.active = Some(next);
        self.armed.store(true, Ordering::Release);
        let now = mono_ns();
        for p in a.pending.iter_mut().filter(|p| p.rearmed_ns.is_none()) {
            p.rearmed_ns = Some(now);
        }
    }
}

/// Read every CPU's pages of a stopped instance (`trace_pipe_raw`, which consumes them): up to
/// three passes per CPU, until its `stats` say `entries: 0` (a page the kernel was still
/// committing may be missed by one pass). `base`: the kernel's cumulative overrun count per
/// CPU at the last copy (updated). `tick` runs between pages. True in the second field when a
/// ring still holds events (or its stats could not be read): only then must it be cleared
/// before it is armed again.
fn drain(
    dir: &Path,
    cpus: &[u32],
    page: usize,
    base: &mut [u64],
    mut tick: impl FnMut(),
) -> (Copied, bool) {
    let t0 = Instant::now();
    let mut pages = Vec::with_capacity(cpus.len());
    let mut overruns = Vec::with_capacity(cpus.len());
    let mut left = false;
    for (k, &cpu) in cpus.iter().enumerate() {
        let mut p = Vec::new();
        let mut stats = None;
        for _ in 0..3 {
            let _ = tracefs::open_cpu_raw_at(dir, cpu)
                .and_then(|f| tracefs::read_pages_into(f, page, &mut p, RAW_POLL_EVERY, &mut tick));
            stats = tracefs::cpu_stats_at(dir, cpu);
            if stats.is_some_and(|(entries, _)| entries == 0) {
                break;
            }
        }
        pages.push((cpu, p));
        let (entries, overrun) = stats.unwrap_or((1, 0));
        left |= entries > 0;
        if let Some(b) = base.get_mut(k) {
            overruns.push((cpu, overrun.saturating_sub(*b)));
            *b = overrun;
        }
    }
    let read_ns = t0.elapsed().as_nanos() as u64;
    (
        Copied {
            pages,
            overruns,
            read_ns,
        },
        left,
    )
}

impl Arm {
    /// The re-arm thread, with the binary reader: copy every stopped instance's buffers (each
    /// CPU's pages: ms, nothing formatted in the kernel), clear it and make it a standby, so
    /// the next re-arm never waits for the collector (which under load waits long for a CPU).
    /// An instance still on (its trigger not fired yet) waits for a later slice, up to
    /// [`STOP_WAIT`], then is stopped here.
    fn copy_stopped(&self, a: &mut Arming) {
        for i in 0..a.pending.len() {
            if a.pending[i].copy.is_none() {
                self.copy_one(a, i);
            }
        }
    }

    /// Copy pending `i`'s buffers (binary reader, instances taking turns). False while its
    /// instance still runs (the trigger has not stopped it yet), up to [`STOP_WAIT`]; then it
    /// is stopped here.
    fn copy_one(&self, a: &mut Arming, i: usize) -> bool {
        let Some(page) = self.raw_page else {
            return false;
        };
        let slot = a.pending[i].slot;
        let dir = &self.dirs[slot];
        if is_on(dir) {
            if a.pending[i].stopped.elapsed() < STOP_WAIT {
                return false;
            }
            let _ = set_on(self.fds[slot].0, false);
        }
        let (copied, left) = drain(dir, &self.cpus, page, &mut a.overrun_base[slot], || {});
        // The reads consumed the rings: an empty instance is armed again as it is. A clear
        // (writing `trace`) waits for an RCU grace period, measured at 22–346 ms under
        // hackbench on this VM, and re-arming waited for it. Only a ring with events left
        // (or stats that could not be read) is cleared.
        if left {
            let _ = tracefs::clear_at(dir);
            a.overrun_base[slot].iter_mut().for_each(|b| *b = 0);
            a.cleared += 1;
        } else {
            a.reused += 1;
        }
        a.pending[i].copy = Some(copied);
        a.standby.push(slot);
        true
    }
}

/// True when the instance in `dir` records (its `tracing_on` reads 1).
fn is_on(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("tracing_on")).is_ok_and(|s| s.trim() == "1")
}

/// `tracing_on` of an instance, through its pre-opened fd.
fn set_on(fd: RawFd, on: bool) -> bool {
    let v: &[u8] = if on { b"1" } else { b"0" };
    // SAFETY: a valid fd (the instances outlive the re-arm thread) and buffer.
    unsafe { libc::pwrite(fd, v.as_ptr().cast(), 1, 0) == 1 }
}

/// The re-arm thread: every [`REARM_SLICE`], when a marker has disarmed the recorder, it arms
/// a standby instance. At SCHED_FIFO 1 (above every normal task, below the measuring
/// threads): under hackbench the collector (a normal task among hundreds) waited tens to
/// hundreds of ms for a CPU, and spikes meanwhile went untraced. It does one atomic load per
/// slice, and a `write` to `tracing_on` per spike.
fn spawn_rearm(arm: Arc<Arm>) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("latlab-rearm".into())
        .spawn(move || {
            let p = libc::sched_param { sched_priority: 1 };
            // SAFETY: plain syscall on this thread; failure (not root) leaves it SCHED_OTHER.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
            let mut hot_until: Option<Instant> = None;
            while !arm.quit.load(Ordering::Acquire) {
                let hot = hot_until.is_some_and(|t| Instant::now() < t);
                std::thread::sleep(if hot { HOT_SLICE } else { REARM_SLICE });
                if !arm.armed.load(Ordering::Acquire) {
                    hot_until = Some(Instant::now() + HOT_FOR);
                    let mut a = arm.lock();
                    arm.step(&mut a);
                }
                if arm.raw_page.is_some() {
                    let mut a = arm.lock();
                    if a.pending.iter().any(|p| p.copy.is_none()) {
                        arm.copy_stopped(&mut a);
                        arm.step(&mut a);
                    }
                }
            }
        })
        .ok()
}

pub struct TraceSession {
    /// `--trace-instances` instances (fewer when the kernel refused more).
    recorders: Vec<Recorder>,
    arm: Arc<Arm>,
    rearm: Option<std::thread::JoinHandle<()>>,
    marker_fd: Arc<AtomicI32>,
    tracefs: Tracefs,
    ledger: Arc<Mutex<Ledger>>,
    armed: Arc<AtomicBool>,
    cpus: Vec<u32>,
    max_spikes: u32,
    virtualized: bool,
    not_traced: u64,
    /// Instances recycled because their spike never reached the collector.
    orphaned: u32,
    /// Overwritten events per CPU, summed over every clear.
    overruns: BTreeMap<u32, u64>,
    /// Spikes whose marker was not found in the copied trace.
    unmatched: u32,
    /// Spikes after `max_spikes` were traced.
    over_max_spikes: u64,
    /// Spikes read from another spike's capture ([`TraceSession::cover`]).
    covered: u32,
    last: Option<LastCapture>,
    /// Spike (its clock read) → recorder running again, over every traced spike: (sum, max, n).
    rearm_ns: (u64, u64, u64),
    instance: PathBuf,
    instances: Vec<PathBuf>,
    clock: String,
    events: Vec<String>,
    missing: Vec<String>,
    trigger: bool,
    buffer_kb: u64,
    warnings: Vec<String>,
    /// The decoder of the instances' binary pages (Err: why spikes are read as text).
    binary: Result<RawDecoder, String>,
    captures: Vec<SpikeCapture>,
    /// The default recorder, which never stops (one instance read as binary pages); None
    /// when instances take turns (`--trace-instances` > 1, or spikes read as text).
    running: Option<Arc<Running>>,
    /// Per measured CPU (index in `cpus`): markers handed to the collector so far.
    handed: Vec<u64>,
    /// Spike (its clock read) → its pages read by the copier: (sum, max, n).
    copy_delay_ns: (u64, u64, u64),
    /// Pages a tape dropped because the collector fell a ring behind.
    dropped_pages: u64,
    defer_files: bool,
    /// [`DEFER_MAX_BYTES`], or less on a small machine.
    defer_max: usize,
    pending_files: Vec<SpikeFiles>,
    pending_bytes: usize,
    /// Spikes whose files were written during the run (past [`DEFER_MAX_BYTES`]).
    written_during_run: u32,
    /// Per instance, its layout (kept for the files written after the instances are gone).
    layouts: Vec<Option<RawLayout>>,
}

impl TraceSession {
    /// Probe + create + configure + start. When tracing is impossible (no tracefs, read-only,
    /// events missing): Err if opts.required, else Ok(None) after pushing a one-line warning.
    /// A leftover latlab-* instance of a dead run: warn ("run `latlab cleanup`") and continue.
    pub fn start(
        opts: &TraceOptions,
        cpus: &[u32],
        ledger: Arc<Mutex<Ledger>>,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<Option<TraceSession>> {
        let root = std::env::var_os("LATLAB_TRACEFS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(tracefs::DEFAULT_ROOT));
        Self::start_at(&root, opts, cpus, ledger, warnings)
    }

    /// [`TraceSession::start`] on a given tracefs root.
    pub fn start_at(
        root: &Path,
        opts: &TraceOptions,
        cpus: &[u32],
        ledger: Arc<Mutex<Ledger>>,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<Option<TraceSession>> {
        Self::start_with(root, opts, cpus, ledger, warnings, true)
    }

    /// [`TraceSession::start_at`], with or without the re-arm thread (tests drive
    /// [`TraceSession::poll`] themselves, step by step).
    fn start_with(
        root: &Path,
        opts: &TraceOptions,
        cpus: &[u32],
        ledger: Arc<Mutex<Ledger>>,
        warnings: &mut Vec<String>,
        thread: bool,
    ) -> anyhow::Result<Option<TraceSession>> {
        let fail =
            |e: String, warnings: &mut Vec<String>| -> anyhow::Result<Option<TraceSession>> {
                if opts.required {
                    anyhow::bail!("--trace-required: cannot trace: {e}")
                }
                warnings.push(format!("tracing disabled: {e} (measuring without traces)"));
                Ok(None)
            };
        let mut l = ledger.lock().unwrap_or_else(|p| p.into_inner());
        let tfs = match tracefs::ensure_mounted(root, &mut l) {
            Ok(t) => t,
            Err(e) => {
                drop(l);
                return fail(e.to_string(), warnings);
            }
        };
        for left in tracefs::leftover_instances(&tfs.root) {
            warnings.push(format!(
                "tracefs instance {} was left by a killed latlab run: run `latlab cleanup` to free its memory",
                left.display()
            ));
        }
        let cfg = RecorderConfig {
            name: format!("latlab-{}", std::process::id()),
            buffer_kb: opts.buffer_kb,
        };
        let spec = if opts.timer_irq {
            tracefs::InstanceSpec::RECORDER_FULL
        } else {
            tracefs::InstanceSpec::RECORDER
        };
        let rec = match Recorder::create_with(&tfs.root, &cfg, &spec, &mut l) {
            Ok(r) => r,
            Err(e) => {
                if let Some(id) = tfs.mounted {
                    let _ = latlab_sys::ledger::undo(&latlab_sys::ledger::Entry::TracefsMount {
                        path: tfs.root.clone(),
                    });
                    let _ = l.forget(id);
                }
                drop(l);
                return fail(e.to_string(), warnings);
            }
        };
        // Standbys: while one stopped instance is copied, another is armed, and a third can
        // take over when that one stops too (spikes come in bursts under load). One instance
        // read as binary pages is re-armed in place; read as text (a layout latlab does not
        // decode) it could not be re-armed before its copy, so it gets two standbys.
        let binary = binary_decoder(&rec.raw);
        let instances = match (&binary, opts.instances) {
            (Err(_), 1) => 3,
            (_, n) => n.max(1),
        };
        let mut standbys = Vec::new();
        for k in 1..instances {
            let suffix = (b'a' + k as u8) as char;
            match Recorder::create_with(
                &tfs.root,
                &RecorderConfig {
                    name: format!("latlab-{}-{suffix}", std::process::id()),
                    buffer_kb: opts.buffer_kb,
                },
                &spec,
                &mut l,
            ) {
                Ok(r) => standbys.push(r),
                Err(e) => {
                    warnings.push(format!(
                        "only {} recorder instance(s) of {} ({e}): the recorder re-arms less often while spikes are copied",
                        k,
                        instances
                    ));
                    break;
                }
            }
        }
        drop(l);
        if !rec.missing.is_empty() {
            warnings.push(format!(
                "tracing without these events (not in this kernel): {}",
                rec.missing.join(", ")
            ));
        }
        warnings.extend(rec.warnings.iter().cloned());
        if let Err(why) = &binary {
            warnings.push(format!(
                "the recorder reads spikes' buffers as text (slower, and it delays the measured CPUs): {why}"
            ));
        }
        let mut recorders = vec![rec];
        recorders.extend(standbys);
        // One instance read as binary pages never stops: its markers are plain events.
        let running = match (&binary, recorders.len()) {
            (Ok(dec), 1) => {
                if let Err(e) = recorders[0].drop_trigger() {
                    return fail(format!("cannot take the stop trigger off: {e}"), warnings);
                }
                match Running::open(
                    recorders[0].dir(),
                    cpus,
                    dec.page_layout(),
                    recorders[0].buffer_kb,
                ) {
                    Ok(r) => Some(Arc::new(r)),
                    Err(e) => return fail(format!("trace_pipe_raw: {e}"), warnings),
                }
            }
            _ => None,
        };
        let r = &recorders[0];
        let marker_fd = Arc::new(AtomicI32::new(-1));
        let armed = Arc::new(AtomicBool::new(false));
        let arm = Arc::new(Arm {
            st: PiMutex::new(Arming {
                active: None,
                pending: VecDeque::new(),
                standby: (0..recorders.len()).rev().collect(),
                traced: 0,
                overrun_base: vec![vec![0; cpus.len()]; recorders.len()],
                reused: 0,
                cleared: 0,
            }),
            fds: recorders
                .iter()
                .map(|r| (r.tracing_on_fd(), r.marker_fd()))
                .collect(),
            dirs: recorders.iter().map(|r| r.dir().to_path_buf()).collect(),
            cpus: cpus.to_vec(),
            raw_page: binary.as_ref().ok().map(|d| d.page_size()),
            armed: armed.clone(),
            marker_fd: marker_fd.clone(),
            trigger: recorders.iter().all(|r| r.trigger),
            max_spikes: opts.max_spikes,
            quit: AtomicBool::new(false),
        });
        let layouts = recorders
            .iter()
            .map(|r| r.raw.as_ref().ok().cloned())
            .collect();
        let mut s = TraceSession {
            instance: r.dir().to_path_buf(),
            instances: recorders.iter().map(|r| r.dir().to_path_buf()).collect(),
            clock: r.clock.clone(),
            events: r.events.clone(),
            missing: r.missing.clone(),
            // Both instances must stop in the kernel for the marker path to be the fast one.
            trigger: recorders.iter().all(|r| r.trigger),
            buffer_kb: r.buffer_kb,
            warnings: r.warnings.clone(),
            marker_fd,
            arm,
            rearm: None,
            recorders,
            tracefs: tfs,
            ledger,
            armed,
            cpus: cpus.to_vec(),
            max_spikes: opts.max_spikes,
            virtualized: tracefs::virtualized(),
            not_traced: 0,
            over_max_spikes: 0,
            covered: 0,
            last: None,
            orphaned: 0,
            overruns: BTreeMap::new(),
            unmatched: 0,
            rearm_ns: (0, 0, 0),
            binary,
            captures: Vec::new(),
            handed: vec![0; cpus.len()],
            copy_delay_ns: (0, 0, 0),
            dropped_pages: 0,
            defer_files: opts.defer_files,
            defer_max: defer_budget(),
            pending_files: Vec::new(),
            pending_bytes: 0,
            written_during_run: 0,
            layouts,
            running,
        };
        for r in &s.recorders {
            r.clear()?;
        }
        if let Some(run) = &s.running {
            let rec = &s.recorders[0];
            if !set_on(rec.tracing_on_fd(), true) {
                return fail("cannot start the recorder (tracing_on)".into(), warnings);
            }
            s.marker_fd.store(rec.marker_fd(), Ordering::Release);
            s.armed.store(true, Ordering::Release);
            if thread {
                s.rearm = running::spawn_copier(run.clone());
            }
            return Ok(Some(s));
        }
        s.poll();
        if thread {
            s.rearm = spawn_rearm(s.arm.clone());
        }
        Ok(Some(s))
    }

    /// The armed instance's pre-opened `trace_marker` fd, as an atomic the collector switches.
    /// The measurement thread, on a sample above the threshold, does `if armed.swap(false) {
    /// write(marker_fd.load(), "LATLAB_STOP cpu=<c> intended=<ns> actual=<ns> latency=<ns>\n")
    /// }` (one write syscall; no allocation).
    /// Spikes not traced so far (for `--metrics-listen`).
    pub fn not_traced(&self) -> u64 {
        self.not_traced
    }

    pub fn marker_fd(&self) -> Arc<AtomicI32> {
        self.marker_fd.clone()
    }

    /// The markers' counters for the measuring threads' hook: Some when the recorder never
    /// stops (every spike writes its marker and counts it).
    pub fn marks(&self) -> Option<Arc<[std::sync::atomic::AtomicU64]>> {
        self.running.as_ref().map(|r| r.marks())
    }

    /// True when a stopped instance waits for its spike to be collected (the collector should
    /// drain the spike rings now).
    pub fn wants_collector(&self) -> bool {
        self.running.is_none() && !self.arm.lock().pending.is_empty()
    }

    /// The measuring threads have started: when every CPU is measured (no housekeeping CPU
    /// for latlab's own threads), the copier of the recorder that never stops pins itself to
    /// the last measured CPU and reads in the quiet part of that CPU's periods
    /// ([`latlab_sys::quiet`]); with a CPU to spare, it runs there and needs none.
    pub fn attach(&self, threads: &[Arc<latlab_sys::live::ThreadShared>], housekeeping: &[u32]) {
        let Some(r) = &self.running else { return };
        if !housekeeping.is_empty() {
            return;
        }
        if let Some(q) = threads.last().and_then(latlab_sys::quiet::Quiet::of) {
            let _ = r.quiet.set(q);
        }
    }

    /// A marker stops the recorder (instances taking turns): the collector looks every slice
    /// to re-arm it. False for the default recorder, which never stops.
    pub fn stops(&self) -> bool {
        self.running.is_none()
    }

    /// Shared flag: true while the armed instance runs and may be stopped by a marker.
    pub fn armed(&self) -> Arc<AtomicBool> {
        self.armed.clone()
    }

    /// Collector, every slice (and the re-arm thread, every [`REARM_SLICE`]): when a marker
    /// has disarmed the recorder, move the stopped instance to the pending queue and arm the
    /// standby at once. Cheap when nothing happened (one atomic load).
    pub fn poll(&mut self) {
        if self.running.is_some() || self.armed.load(Ordering::Acquire) {
            return;
        }
        let mut a = self.arm.lock();
        self.arm.step(&mut a);
    }

    /// Collector, after handing every drained spike to [`TraceSession::on_spike`]: instances
    /// stopped before `drained_at - ORPHAN_AFTER` that no spike claimed lost their spike record
    /// (spike ring full): clear them and make them standbys, so the recorder re-arms.
    pub fn reap(&mut self, drained_at: Instant) {
        if self.running.is_some() {
            return;
        }
        loop {
            let p = {
                let mut a = self.arm.lock();
                let old = a
                    .pending
                    .front()
                    .is_some_and(|p| p.stopped + ORPHAN_AFTER <= drained_at);
                if old {
                    a.pending.pop_front()
                } else {
                    None
                }
            };
            let Some(p) = p else { break };
            match p.copy {
                Some(c) => self.count_overruns(&c.overruns),
                None => self.recycle(p.slot),
            }
            self.orphaned += 1;
        }
        self.poll();
    }

    fn count_overruns(&mut self, o: &[(u32, u64)]) {
        for &(c, n) in o {
            *self.overruns.entry(c).or_default() += n;
        }
    }

    /// Events instance `slot`'s ring overwrote on `cpu` since its last copy or clear.
    fn overruns_since(&self, slot: usize, cpu: u32) -> Option<u64> {
        let o = self.recorders[slot].overruns(cpu)?;
        let k = self.cpus.iter().position(|&c| c == cpu)?;
        Some(o.saturating_sub(self.arm.lock().overrun_base[slot][k]))
    }

    /// Read every CPU's pages of stopped instance `slot` (consuming them, [`drain`]),
    /// polling the armed instance between pages, and make it a standby: as it is when the
    /// rings are empty, cleared when not. None when the session reads text.
    fn drain_polling(&mut self, slot: usize) -> Option<Copied> {
        let page = self.binary.as_ref().ok()?.page_size();
        let dir = self.recorders[slot].dir().to_path_buf();
        let cpus = self.cpus.clone();
        let mut base = self.arm.lock().overrun_base[slot].clone();
        let (copied, left) = drain(&dir, &cpus, page, &mut base, || self.poll());
        if left {
            let _ = self.recorders[slot].clear();
        }
        let mut a = self.arm.lock();
        if left {
            a.overrun_base[slot].iter_mut().for_each(|b| *b = 0);
            a.cleared += 1;
        } else {
            a.overrun_base[slot] = base;
            a.reused += 1;
        }
        a.standby.push(slot);
        Some(copied)
    }

    /// Make an abandoned instance (its spike never reached the collector) a standby: with the
    /// binary reader, its rings are read and dropped (no clear, which waits for an RCU grace
    /// period and resets every page with interrupts off); else counted and cleared.
    fn recycle(&mut self, slot: usize) {
        let _ = self.recorders[slot].stop();
        if let Some(c) = self.drain_polling(slot) {
            self.count_overruns(&c.overruns);
            return;
        }
        self.recycle_cleared(slot);
    }

    /// Count the overruns of a copied (or abandoned) instance, clear it, make it the standby.
    fn recycle_cleared(&mut self, slot: usize) {
        let _ = self.recorders[slot].stop();
        for &c in &self.cpus {
            if let Some(o) = self.overruns_since(slot, c) {
                *self.overruns.entry(c).or_default() += o;
            }
        }
        let _ = self.recorders[slot].clear();
        let mut a = self.arm.lock();
        a.overrun_base[slot].iter_mut().for_each(|b| *b = 0);
        a.cleared += 1;
        a.standby.push(slot);
    }

    /// Copy a stopped instance's buffer of `cpu` in short reads (latlab_sys::shortio), and
    /// [`TraceSession::poll`] every [`POLL_EVERY`] bytes: a copy takes up to hundreds of ms
    /// under load, and when the armed instance stops meanwhile, a standby takes over now
    /// rather than after the copy.
    fn copy_polling(&mut self, slot: usize, cpu: u32) -> Vec<u8> {
        let Ok(f) = self.recorders[slot].open_cpu_trace(cpu) else {
            return Vec::new();
        };
        latlab_sys::shortio::read_chunked_ticking(
            f,
            latlab_sys::shortio::READ_CHUNK,
            POLL_EVERY,
            || self.poll(),
        )
        .unwrap_or_default()
    }

    /// Collector thread (non-RT), once per spike, in order. See the module docs.
    pub fn on_spike(
        &mut self,
        cpu: u32,
        intended_ns: u64,
        actual_ns: u64,
        latency_ns: u64,
        marker_written: bool,
        run_dir: &Path,
    ) -> Option<SpikeRecord> {
        if self.running.is_some() {
            let s = [cpu as u64, intended_ns, actual_ns, latency_ns];
            return self.on_spike_running(s, marker_written, run_dir);
        }
        self.poll();
        let p = {
            let mut a = self.arm.lock();
            if !marker_written || a.traced >= self.max_spikes {
                None
            } else {
                // None: its instance was already recycled as an orphan.
                a.pending.pop_front().inspect(|_| a.traced += 1)
            }
        };
        let Some(p) = p else {
            let s = [cpu as u64, intended_ns, actual_ns, latency_ns];
            if let Some(sp) = self.cover(s, marker_written, run_dir) {
                return Some(sp);
            }
            self.not_traced += 1;
            // Over the cap also when the stops waiting for collection take its last slots (the
            // recorder is not re-armed after them).
            let a = self.arm.lock();
            if a.traced as usize + a.pending.len() >= self.max_spikes as usize {
                self.over_max_spikes += 1;
            }
            return None;
        };
        let rec = &self.recorders[p.slot];
        // Wait (bounded) for the in-kernel stop (unless the re-arm thread copied it already).
        let t0 = Instant::now();
        while p.copy.is_none() && rec.is_on() && t0.elapsed() < STOP_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
        if p.copy.is_none() && rec.is_on() {
            // The marker did not stop it (trigger refused?): stop now; history is still there.
            let _ = rec.stop();
        }
        let n = self.arm.lock().traced;
        let rel = format!("spikes/{n:03}");
        let dir = run_dir.join(&rel);
        let _ = std::fs::create_dir_all(&dir);
        let opts = AnalyzeOptions {
            threshold_ns: 0,
            virtualized: self.virtualized,
            mode: Some(SampleMode::Markers),
        };
        let t_read = Instant::now();
        let mut cap = SpikeCapture {
            spike: n,
            cpu,
            ..Default::default()
        };
        // The binary path: pages (a copy of ms, no formatting in the kernel), decoded,
        // rendered and analyzed here. The instance is recycled (re-armable) right after the
        // copy, before the decoding.
        // Copied by the re-arm thread (the instance is a standby already), else now.
        // Not copied by the re-arm thread yet: every CPU's pages are read here the same way.
        let copy = match p.copy {
            Some(c) => Some(c),
            None => self.drain_polling(p.slot),
        };
        let copied = match copy {
            Some(c) => {
                self.count_overruns(&c.overruns);
                cap.overrun = c.overruns.iter().find(|o| o.0 == cpu).map_or(0, |o| o.1);
                cap.read_ns = c.read_ns;
                let (mine, others): (Vec<_>, Vec<_>) =
                    c.pages.into_iter().partition(|x| x.0 == cpu);
                // The other CPUs' pages, for a spike that found the recorder stopped by this one.
                self.last = Some(LastCapture {
                    stop_ns: actual_ns,
                    spike: n,
                    slot: p.slot,
                    pages: others,
                });
                Some(mine.into_iter().next().map(|x| x.1).unwrap_or_default())
            }
            None => None,
        };
        let outcome = match copied {
            Some(pages) => {
                // Not re-armed yet (no standby was free): the instance just cleared takes over.
                self.poll();
                let t_dec = Instant::now();
                let dec = self.binary.as_ref().expect("the binary path has a decoder");
                let layout = self.recorders[p.slot].raw.as_ref().ok();
                let clock = self.recorders[p.slot].clock.clone();
                let o = binary_outcome(
                    dec,
                    Some((layout, &clock)),
                    cpu,
                    &pages,
                    &opts,
                    (intended_ns, None),
                    &mut cap,
                );
                cap.decode_ns = t_dec.elapsed().as_nanos() as u64;
                // Several MB: written safely (a temp file, never through a planted link), in
                // short calls (latlab_sys::shortio).
                let _ = latlab_sys::safefile::write_atomic_unsynced(
                    &dir.join("trace.txt"),
                    o.text.as_bytes(),
                );
                // The same pages as trace-cmd's file, for trace-cmd report and KernelShark.
                if let Some(dat) = &o.dat {
                    let _ =
                        latlab_sys::safefile::write_atomic_unsynced(&dir.join("trace.dat"), dat);
                }
                o
            }
            None => {
                let text = self.copy_polling(p.slot, cpu);
                cap.read_ns = t_read.elapsed().as_nanos() as u64;
                cap.overrun = self.overruns_since(p.slot, cpu).unwrap_or(0);
                let text = String::from_utf8_lossy(&text).into_owned();
                let _ = latlab_sys::safefile::write_atomic_unsynced(
                    &dir.join("trace.txt"),
                    text.as_bytes(),
                );
                self.recycle_cleared(p.slot);
                // Not re-armed yet (no standby was free): the instance just cleared takes over.
                self.poll();
                let t_dec = Instant::now();
                let analysis = analyze_text(&text, &opts);
                cap.read_as = "text".into();
                cap.bytes = text.len() as u64;
                let o = outcome_of(analysis, cpu, intended_ns, &mut cap);
                cap.decode_ns = t_dec.elapsed().as_nanos() as u64;
                o
            }
        };
        self.captures.push(cap);
        // The spikes that took the last slots of `--trace-max-spikes` are never followed by a
        // re-arm: not counted (it would count the time until their collection). Others not
        // re-armed yet count until now, a lower bound.
        if !p.capped && (p.rearmed_ns.is_some() || n < self.max_spikes) {
            let rearmed = p.rearmed_ns.unwrap_or_else(mono_ns);
            let d = rearmed.saturating_sub(actual_ns);
            self.rearm_ns = (
                self.rearm_ns.0 + d,
                self.rearm_ns.1.max(d),
                self.rearm_ns.2 + 1,
            );
        }
        let s = [cpu as u64, intended_ns, actual_ns, latency_ns];
        Some(self.spike_record(n, s, &outcome, &rel, &dir, None))
    }

    /// The spike's record and its `analysis.txt`, from its analyzed capture. `s`: cpu,
    /// intended, actual, latency.
    fn spike_record(
        &mut self,
        n: u32,
        s: [u64; 4],
        outcome: &Outcome,
        rel: &str,
        dir: &Path,
        raw: Option<RawFiles>,
    ) -> SpikeRecord {
        let [cpu, intended_ns, actual_ns, latency_ns] = s;
        let cpu = cpu as u32;
        let mut spike = match &outcome.sample {
            Some(s) => s.to_spike(),
            None => {
                self.unmatched += 1;
                SpikeRecord {
                    cpu,
                    at_ns: intended_ns,
                    latency_ns,
                    causes: vec![],
                    trace_file: None,
                    timeline: vec![outcome.why.clone()],
                    timeline_events: vec![],
                    lanes: None,
                }
            }
        };
        spike.latency_ns = latency_ns;
        spike.at_ns = intended_ns;
        // A spike of the recorder that never stops has a trace when its pages were found.
        spike.trace_file =
            (self.running.is_none() || raw.is_some()).then(|| format!("{rel}/trace.txt"));
        // run.json keeps the timeline as data and, for outside readers, as its text lines.
        spike.timeline = latlab_report::timeline::lines(&spike);
        let mut txt = format!(
            "spike {n}: CPU {cpu}, intended {intended_ns} ns, actual {actual_ns} ns, latency {:.1} us\n",
            latency_ns as f64 / 1000.0
        );
        for l in &spike.timeline {
            txt.push_str(l);
            txt.push('\n');
        }
        // What the parser skipped (an odd task name can cost lines, never the analysis), a cut
        // last line, time going backwards, events the kernel lost: escaped, the trace's text
        // is untrusted.
        for w in &outcome.warnings {
            txt.push_str(&format!("warning: {}\n", escape(w)));
        }
        self.save(SpikeFiles {
            dir: dir.to_path_buf(),
            analysis: txt,
            raw,
        });
        spike
    }

    /// A spike's files: kept in memory until the run ends when they come as pages, the session
    /// defers ([`TraceOptions::defer_files`]) and fewer than [`DEFER_MAX_BYTES`] wait; else
    /// written now.
    fn save(&mut self, f: SpikeFiles) {
        let bytes = f.analysis.len() + f.raw.as_ref().map_or(0, |r| r.pages.len());
        if f.raw.is_some() && self.defer_files && self.pending_bytes + bytes <= self.defer_max {
            self.pending_bytes += bytes;
            self.pending_files.push(f);
            return;
        }
        if f.raw.is_some() {
            self.written_during_run += 1;
        }
        self.write_files(&f);
    }

    /// Write a spike's directory: its `trace.txt` and `trace.dat` rendered from its pages,
    /// and `analysis.txt` (safely: a temp file, never through a planted link, in short calls).
    fn write_files(&self, f: &SpikeFiles) {
        let _ = std::fs::create_dir_all(&f.dir);
        if let (Some(r), Ok(dec)) = (&f.raw, &self.binary) {
            let mut events = Vec::new();
            let _ = dec.decode_cpu(r.cpu, &r.pages, &r.comms, &mut events);
            let layout = self.layouts.get(r.slot).and_then(|l| l.as_ref());
            let (text, dat) =
                render_raw(dec, layout, &self.clock, r.cpu, &r.pages, &r.comms, &events);
            let _ = latlab_sys::safefile::write_atomic_unsynced(
                &f.dir.join("trace.txt"),
                text.as_bytes(),
            );
            // The same pages as trace-cmd's file, for trace-cmd report and KernelShark.
            if let Some(dat) = &dat {
                let _ = latlab_sys::safefile::write_atomic_unsynced(&f.dir.join("trace.dat"), dat);
            }
        }
        let _ = latlab_sys::safefile::write_atomic_unsynced(
            &f.dir.join("analysis.txt"),
            f.analysis.as_bytes(),
        );
    }

    /// Write every spike's files kept until the end (after the measuring threads stopped).
    fn write_pending(&mut self) {
        let files = std::mem::take(&mut self.pending_files);
        self.pending_bytes = 0;
        for f in &files {
            self.write_files(f);
        }
    }

    /// The recorder that never stops ([`running`]): the spike's trace is its CPU's session,
    /// the pages from the previous spike's marker (exclusive) to its own (inclusive).
    fn on_spike_running(
        &mut self,
        s: [u64; 4],
        marker_written: bool,
        run_dir: &Path,
    ) -> Option<SpikeRecord> {
        let [cpu, intended_ns, actual_ns, _] = s;
        let cpu = cpu as u32;
        let run = self.running.clone()?;
        let k = self.cpus.iter().position(|&c| c == cpu)?;
        if marker_written {
            self.handed[k] += 1;
        }
        let traced = self.arm.lock().traced;
        if !marker_written || traced >= self.max_spikes {
            // Without a marker: written after --trace-max-spikes (the threads write none then).
            self.not_traced += 1;
            if traced >= self.max_spikes {
                self.over_max_spikes += 1;
            }
            return None;
        }
        let copied = run.wait_for(k, self.handed[k], self.rearm.is_some(), COPY_WAIT);
        let n = {
            let mut a = self.arm.lock();
            a.traced += 1;
            a.traced
        };
        if n >= self.max_spikes {
            // The last one: the threads write no more markers.
            self.armed.store(false, Ordering::Release);
        }
        let taken = run.take(k, self.handed[k]);
        if let Some(d) = taken.read_done_ns.map(|t| t.saturating_sub(actual_ns)) {
            let c = &mut self.copy_delay_ns;
            *c = (c.0 + d, c.1.max(d), c.2 + 1);
        }
        self.dropped_pages += taken.dropped;
        self.count_overruns(&[(cpu, taken.overrun)]);
        let dec = self.binary.as_ref().ok()?;
        let mut cap = SpikeCapture {
            spike: n,
            cpu,
            read_ns: taken.read_ns,
            overrun: taken.overrun,
            ..Default::default()
        };
        let t_dec = Instant::now();
        let pages = match running::marker_time(dec, cpu, &taken.pages, taken.from_ns, intended_ns) {
            Some(at) => {
                let (end, rest) = run.split_at(&taken.pages, at);
                run.give_back(k, taken.pages[rest..].to_vec(), at + 1);
                dec.trim_pages(&taken.pages[..end], taken.from_ns..at + 1)
            }
            None => {
                // Not in the copy (the copier never got to it, or the ring lost it): the pages
                // stay for the next spike of this CPU.
                run.give_back(k, taken.pages, taken.from_ns);
                Vec::new()
            }
        };
        let opts = AnalyzeOptions {
            threshold_ns: 0,
            virtualized: self.virtualized,
            mode: Some(SampleMode::Markers),
        };
        let mut o = binary_outcome(dec, None, cpu, &pages, &opts, (intended_ns, None), &mut cap);
        cap.decode_ns = t_dec.elapsed().as_nanos() as u64;
        if !copied {
            o.why = format!(
                "the spike's pages were not read within {} s (the copier starved)",
                COPY_WAIT.as_secs()
            );
        }
        if taken.dropped > 0 {
            o.warnings.push(format!(
                "{} page(s) of this CPU's history were dropped before this spike's session (the collector fell a ring behind)",
                taken.dropped
            ));
        }
        self.captures.push(cap);
        let rel = format!("spikes/{n:03}");
        let dir = run_dir.join(&rel);
        let raw = (!pages.is_empty()).then(|| RawFiles {
            cpu,
            pages,
            comms: std::mem::take(&mut o.comms),
            slot: 0,
        });
        Some(self.spike_record(n, s, &o, &rel, &dir, raw))
    }

    /// A spike whose marker found the recorder stopped by another CPU's spike microseconds
    /// before (a stall of the whole VM makes every CPU late at once): the capture of that
    /// spike holds this CPU's events too, up to the stop. When this spike's window began
    /// before the stop, it is analyzed from there: a marker is placed after the last event
    /// of its CPU, so what came after the stop is unexplained time, and the analysis says so.
    fn cover(&mut self, s: [u64; 4], marker_written: bool, run_dir: &Path) -> Option<SpikeRecord> {
        let [cpu, intended_ns, actual_ns, _] = s;
        let last = self.last.as_ref()?;
        if marker_written || intended_ns >= last.stop_ns || actual_ns < last.stop_ns {
            return None;
        }
        if actual_ns - last.stop_ns > COVER_WITHIN.as_nanos() as u64 {
            return None;
        }
        let (_, pages) = last.pages.iter().find(|x| u64::from(x.0) == cpu)?;
        let dec = self.binary.as_ref().ok()?;
        let (slot, of_spike, stop_ns) = (last.slot, last.spike, last.stop_ns);
        let layout = self.recorders[slot].raw.as_ref().ok();
        let clock = self.recorders[slot].clock.clone();
        let opts = AnalyzeOptions {
            threshold_ns: 0,
            virtualized: self.virtualized,
            mode: Some(SampleMode::Markers),
        };
        let n = {
            let mut a = self.arm.lock();
            if a.traced >= self.max_spikes {
                return None;
            }
            a.traced += 1;
            a.traced
        };
        let mut cap = SpikeCapture {
            spike: n,
            cpu: cpu as u32,
            ..Default::default()
        };
        let t_dec = Instant::now();
        let mut o = binary_outcome(
            dec,
            Some((layout, &clock)),
            cpu as u32,
            pages,
            &opts,
            (intended_ns, Some(s)),
            &mut cap,
        );
        cap.decode_ns = t_dec.elapsed().as_nanos() as u64;
        if o.sample.is_none() {
            // Its window is not in that capture: not traced after all.
            self.arm.lock().traced -= 1;
            return None;
        }
        o.warnings.push(format!(
            "read from the capture of spike {of_spike} (its marker stopped the recorder {:.1} us \
             before this spike's clock read): what came after is unexplained",
            (actual_ns - stop_ns) as f64 / 1000.0
        ));
        self.covered += 1;
        let rel = format!("spikes/{n:03}");
        let dir = run_dir.join(&rel);
        let _ = std::fs::create_dir_all(&dir);
        let _ =
            latlab_sys::safefile::write_atomic_unsynced(&dir.join("trace.txt"), o.text.as_bytes());
        if let Some(dat) = &o.dat {
            let _ = latlab_sys::safefile::write_atomic_unsynced(&dir.join("trace.dat"), dat);
        }
        self.captures.push(cap);
        Some(self.spike_record(n, s, &o, &rel, &dir, None))
    }

    /// Stop, remove the instances (and unmount if we mounted), forget the ledger entries;
    /// return the summary stored as run.json's "trace".
    pub fn finish(mut self) -> TraceSummary {
        let never_stopped = self.running.is_some();
        // The thread first: it would take a disarmed recorder for a marker and arm another.
        self.stop_rearm();
        if never_stopped {
            // What the ring overwrote over the run (nobody reads a CPU without spikes).
            for &c in &self.cpus {
                if let Some(o) = self.recorders[0].overruns(c) {
                    self.overruns.insert(c, o);
                }
            }
        }
        self.armed.store(false, Ordering::SeqCst);
        let mut removal = None;
        let in_use: Vec<usize> = {
            let a = self.arm.lock();
            a.active
                .iter()
                .copied()
                .chain(
                    a.pending
                        .iter()
                        .filter(|p| p.copy.is_none())
                        .map(|p| p.slot),
                )
                .collect()
        };
        let copied: Vec<(u32, u64)> = self
            .arm
            .lock()
            .pending
            .iter()
            .filter_map(|p| p.copy.as_ref())
            .flat_map(|c| c.overruns.iter().copied())
            .collect();
        self.count_overruns(&copied);
        for &i in &in_use {
            let _ = self.recorders[i].stop();
            for &c in &self.cpus {
                if let Some(o) = self.overruns_since(i, c) {
                    *self.overruns.entry(c).or_default() += o;
                }
            }
        }
        let recs = std::mem::take(&mut self.recorders);
        for rec in recs {
            let _ = rec.stop();
            // Standbys were counted when they were copied or cleared.
            let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = rec.remove(&mut l) {
                removal.get_or_insert(e.to_string());
            }
        }
        self.unmount();
        // The measuring threads have stopped: the spikes' files now.
        self.write_pending();
        let path = |p: &PathBuf| p.to_string_lossy().into_owned();
        // One lock, taken here: a guard in the literal below would live to its end.
        let (traced, rearm_reused, rearm_cleared) = {
            let a = self.arm.lock();
            (a.traced, a.reused, a.cleared)
        };
        TraceSummary {
            instance: path(&self.instance),
            instances: self.instances.iter().map(path).collect(),
            clock: self.clock.clone(),
            events: self.events.clone(),
            missing_events: self.missing.clone(),
            stop: if never_stopped {
                "never: each spike's trace ends at its marker"
            } else if self.trigger {
                "in-kernel traceoff trigger on a marker"
            } else {
                "tracing_on written by the collector"
            }
            .into(),
            buffer_kb: self.buffer_kb,
            max_spikes: self.max_spikes,
            traced,
            not_traced: self.not_traced,
            over_max_spikes: self.over_max_spikes,
            covered: self.covered,
            rearm_reused,
            rearm_cleared,
            orphaned: self.orphaned,
            unmatched: self.unmatched,
            rearm_mean_ns: self.rearm_ns.0.checked_div(self.rearm_ns.2),
            rearm_max_ns: self.rearm_ns.1,
            copy_delay_mean_ns: self.copy_delay_ns.0.checked_div(self.copy_delay_ns.2),
            copy_delay_max_ns: (self.copy_delay_ns.2 > 0).then_some(self.copy_delay_ns.1),
            files_written_while_measuring: self.written_during_run,
            dropped_pages: self.dropped_pages,
            overruns: self
                .overruns
                .iter()
                .map(|(&cpu, &events)| CpuOverruns { cpu, events })
                .collect(),
            virtualized: self.virtualized,
            warnings: self.warnings.clone(),
            removal_error: removal,
            read_as: Some(
                if self.binary.is_ok() {
                    "binary"
                } else {
                    "text"
                }
                .into(),
            ),
            binary_fallback: self.binary.as_ref().err().cloned(),
            captures: std::mem::take(&mut self.captures),
        }
    }

    fn unmount(&mut self) {
        if let Some(id) = self.tracefs.mounted.take() {
            let _ = latlab_sys::ledger::undo(&latlab_sys::ledger::Entry::TracefsMount {
                path: self.tracefs.root.clone(),
            });
            let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
            let _ = l.forget(id);
        }
    }
}

impl TraceSession {
    /// Stop and join the re-arm thread (before the instances and their fds go).
    fn stop_rearm(&mut self) {
        self.arm.quit.store(true, Ordering::Release);
        if let Some(r) = &self.running {
            r.quit.store(true, Ordering::Release);
        }
        if let Some(t) = self.rearm.take() {
            let _ = t.join();
        }
        // Its trace_pipe_raw fds close, or the instance could not be removed.
        if let Some(r) = self.running.take() {
            r.close();
        }
    }
}

impl Drop for TraceSession {
    /// Removes the instances too if finish() was not called (panic path).
    fn drop(&mut self) {
        self.stop_rearm();
        self.armed.store(false, Ordering::SeqCst);
        for rec in std::mem::take(&mut self.recorders) {
            let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
            let _ = rec.remove(&mut l);
        }
        self.unmount();
        // Best effort: the spikes kept in memory are not lost with the collector.
        self.write_pending();
    }
}

/// What a spike's copy gave: the trace text to save, the spike's sample (None: why not), and
/// warnings for its analysis.txt.
#[derive(Default)]
struct Outcome {
    text: String,
    /// The spike's pages as a trace-cmd file (binary path only).
    dat: Option<Vec<u8>>,
    sample: Option<Sample>,
    why: String,
    warnings: Vec<String>,
    /// The task names the pages' events and `/proc` gave (binary path), to render them later.
    comms: Comms,
}

/// The spike's sample in an analysis (the last one of its CPU at its intended time).
fn outcome_of(
    analysis: Result<Analysis, ParseError>,
    cpu: u32,
    intended_ns: u64,
    cap: &mut SpikeCapture,
) -> Outcome {
    let mut o = Outcome::default();
    match analysis {
        Ok(a) => {
            if cap.events == 0 {
                cap.events = a.events;
            }
            o.sample = a
                .spikes
                .iter()
                .rev()
                .find(|s| s.cpu == cpu && s.intended_ns == intended_ns)
                .cloned();
            o.why = "the spike's marker is not in the trace (overwritten or lost)".into();
            o.warnings = a.warnings;
        }
        Err(e) => o.why = format!("trace not analyzable: line {}: {}", e.line, e.msg),
    }
    o
}

/// Decode a spike's pages, render them as the trace text, and analyze the events.
fn binary_outcome(
    dec: &RawDecoder,
    render: Option<(Option<&RawLayout>, &str)>,
    cpu: u32,
    pages: &[u8],
    opts: &AnalyzeOptions,
    (intended_ns, end): (u64, Option<[u64; 4]>),
    cap: &mut SpikeCapture,
) -> Outcome {
    cap.read_as = "binary".into();
    cap.bytes = pages.len() as u64;
    let mut comms = Comms::default();
    let _ = dec.learn_comms(pages, &mut comms);
    let mut events = Vec::new();
    let mut st = dec.decode_cpu(cpu, pages, &comms, &mut events);
    // Pids the pages' scheduler events do not name (a task running since before the buffer's
    // start): their `/proc/PID/comm`, a few small reads. Not the kernel's `saved_cmdlines`:
    // reading it walks the whole table with preemption disabled on every read() (~300 µs
    // on a measured CPU, measured as `preempt_off latlab` causes).
    let mut unknown: Vec<i64> = events
        .iter()
        .filter(|e| e.task_comm == "<...>")
        .map(|e| e.pid)
        .collect();
    unknown.sort_unstable();
    unknown.dedup();
    unknown.truncate(64);
    if !unknown.is_empty() {
        drop(events);
        for pid in unknown {
            if let Ok(c) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
                comms.learn(pid, c.trim_end_matches('\n'));
            }
        }
        events = Vec::new();
        st = dec.decode_cpu(cpu, pages, &comms, &mut events);
    }
    let st = match st {
        Ok(st) => st,
        Err(e) => {
            return Outcome {
                why: e.to_string(),
                ..Outcome::default()
            }
        }
    };
    cap.pages = st.pages;
    cap.events = st.events;
    cap.lost_events = st.lost_events;
    cap.lost_unknown = st.lost_unknown;
    let lost: Vec<(usize, u32, u64)> = st
        .lost
        .iter()
        .filter_map(|m| Some((m.before, cpu, m.events?)))
        .collect();
    let analysis = match end {
        Some(s) => {
            let mut events = events.clone();
            match end_marker(&events, s) {
                Some(m) => events.push(m),
                None => {
                    return Outcome {
                        why: "the thread's timer is not in the capture".into(),
                        ..Outcome::default()
                    }
                }
            }
            analyze_events(&events, &lost, opts)
        }
        None => analyze_events(&events, &lost, opts),
    };
    let mut o = outcome_of(analysis, cpu, intended_ns, cap);
    if let Some((layout, clock)) = render {
        (o.text, o.dat) = render_raw(dec, layout, clock, cpu, pages, &comms, &events);
    }
    o.comms = comms.clone();
    if st.bad_pages > 0 || st.unknown_events > 0 {
        o.warnings.push(format!(
            "binary trace: {} inconsistent page(s) (their rest skipped), {} event(s) of unknown ID",
            st.bad_pages, st.unknown_events
        ));
    }
    // Events lost before the first one are the ring's overwritten past (a flight recorder's
    // normal state); lost inside the copy, history has a hole: said.
    let inside: Vec<Option<u64>> = st
        .lost
        .iter()
        .filter(|m| m.before > 0)
        .map(|m| m.events)
        .collect();
    if !inside.is_empty() {
        let counted: u64 = inside.iter().flatten().sum();
        o.warnings.push(format!(
            "the kernel lost events at {} place(s) inside this CPU's trace ({counted} counted{})",
            inside.len(),
            if inside.iter().any(Option::is_none) {
                ", some uncounted"
            } else {
                ""
            }
        ));
    }
    o
}

/// A CPU's pages as the kernel's text layout (`trace.txt`) and as trace-cmd's file
/// (`trace.dat`, when the layout is known), `events` being their decoded events.
fn render_raw(
    dec: &RawDecoder,
    layout: Option<&RawLayout>,
    clock: &str,
    cpu: u32,
    pages: &[u8],
    comms: &Comms,
    events: &[latlab_core::trace::Event],
) -> (String, Option<Vec<u8>>) {
    let mut text = String::with_capacity(pages.len() * 2);
    let _ = dec.render_text(cpu, pages, comms, &mut text);
    let dat = layout.and_then(|l| trace_dat(dec, l, clock, &[(cpu, pages)], comms, events));
    (text, dat)
}

/// The marker a spike would have written (`s`: cpu, intended, actual, latency), placed after
/// the last event of its CPU, from the thread that armed its timer for the intended time
/// (None when that `hrtimer_start` is not among the events).
fn end_marker<'a>(
    events: &[latlab_core::trace::Event<'a>],
    s: [u64; 4],
) -> Option<latlab_core::trace::Event<'a>> {
    use latlab_core::trace::{Event, EventKind, Flags};
    let [cpu, intended, actual, latency] = s;
    let armer = events.iter().rev().find(|e| {
        u64::from(e.cpu) == cpu
            && matches!(&e.kind, EventKind::HrtimerStart { function, expires, .. }
                if function == "hrtimer_wakeup" && *expires == intended)
    })?;
    let last = events
        .iter()
        .filter(|e| u64::from(e.cpu) == cpu)
        .map(|e| e.ts)
        .max()?;
    Some(Event {
        line: events.iter().map(|e| e.line).max().unwrap_or(0) + 1,
        cpu: cpu as u32,
        ts: last,
        task_comm: armer.task_comm.clone(),
        pid: armer.pid,
        flags: Flags::default(),
        kind: EventKind::Marker {
            text: format!(
                "LATLAB_STOP cpu={cpu} intended={intended} actual={actual} latency={latency}"
            )
            .into(),
        },
    })
}

/// Pages of some CPUs (ascending) as a trace-cmd file (version 6): the instance's header and
/// format files, the task names and the few kernel symbols its events name.
pub fn trace_dat(
    dec: &RawDecoder,
    layout: &RawLayout,
    clock: &str,
    cpus: &[(u32, &[u8])],
    comms: &Comms,
    events: &[latlab_core::trace::Event],
) -> Option<Vec<u8>> {
    use latlab_core::trace::raw::named_symbols;
    use latlab_core::trace::tracedat::{self, CpuData, TraceDat};
    use std::borrow::Cow;
    let mut ftrace = Vec::new();
    let mut systems: Vec<(String, Vec<Cow<[u8]>>)> = Vec::new();
    for (e, f) in layout.events.iter().zip(&layout.formats) {
        let (sys, _) = e.split_once('/')?;
        let f = Cow::Borrowed(f.as_bytes());
        if sys == "ftrace" {
            ftrace.push(f);
        } else if let Some(s) = systems.iter_mut().find(|s| s.0 == sys) {
            s.1.push(f);
        } else {
            systems.push((sys.to_string(), vec![f]));
        }
    }
    let syms = named_symbols(dec.symbols(), events);
    let dat = TraceDat {
        big_endian: cfg!(target_endian = "big"),
        long_size: std::mem::size_of::<usize>() as u8,
        page_size: u32::try_from(dec.page_size()).ok()?,
        clock: Cow::Borrowed(clock),
        header_page: Cow::Borrowed(layout.header_page.as_bytes()),
        header_event: Cow::Borrowed(layout.header_event.as_bytes()),
        ftrace_formats: ftrace,
        event_formats: systems,
        kallsyms: (!syms.is_empty()).then(|| Cow::Owned(syms.into_bytes())),
        printk: None,
        cmdlines: Cow::Owned(comms.to_saved_cmdlines().into_bytes()),
        // CPUs 0..=last: a CPU's number is its place in the file; the others are empty.
        cpus: (0..=cpus.last()?.0)
            .map(|c| CpuData {
                cpu: c,
                pages: Cow::Borrowed(cpus.iter().find(|x| x.0 == c).map_or(&[][..], |x| x.1)),
            })
            .collect(),
        cpu_stats: vec![],
    };
    let bytes: usize = cpus.iter().map(|c| c.1.len()).sum();
    let mut out = Vec::with_capacity(bytes + (64 << 10));
    tracedat::write(&dat, &mut out).ok()?;
    Some(out)
}

/// A stopped instance's whole buffer (every CPU of `cpus`) as a trace-cmd file, read as binary
/// pages (this consumes them: copy the text first if it is wanted too). For `bench analyze`.
pub fn instance_trace_dat(rec: &Recorder, cpus: &[u32]) -> anyhow::Result<Vec<u8>> {
    let dec = binary_decoder(&rec.raw).map_err(|e| anyhow::anyhow!("binary pages: {e}"))?;
    let layout = rec.raw.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut pages = Vec::new();
    for &c in cpus {
        let f = rec.open_cpu_raw(c)?;
        pages.push((
            c,
            tracefs::read_pages(f, dec.page_size(), usize::MAX, || {})?,
        ));
    }
    let mut comms = Comms::default();
    let mut events = Vec::new();
    for (_, p) in &pages {
        let _ = dec.learn_comms(p, &mut comms);
    }
    for (c, p) in &pages {
        let _ = dec.decode_cpu(*c, p, &comms, &mut events);
    }
    let refs: Vec<(u32, &[u8])> = pages.iter().map(|(c, p)| (*c, p.as_slice())).collect();
    trace_dat(&dec, layout, &rec.clock, &refs, &comms, &events)
        .ok_or_else(|| anyhow::anyhow!("the pages could not be written as a trace.dat"))
}

/// The binary decoder for the session's instances (all alike), or why spikes are read as text.
fn binary_decoder(layout: &Result<RawLayout, String>) -> Result<RawDecoder, String> {
    // A measuring knob (docs/performance.md): the kernel's text, to compare the two readers.
    if std::env::var_os("LATLAB_TRACE_READ").is_some_and(|v| v == "text") {
        return Err("LATLAB_TRACE_READ=text".into());
    }
    let layout = layout.as_ref().map_err(|e| e.clone())?;
    let formats: Vec<&str> = layout.formats.iter().map(String::as_str).collect();
    let dec = RawDecoder::new(&layout.header_page, &layout.header_event, &formats)
        .map_err(|e| e.to_string())?;
    // hrtimer callbacks are `%ps` fields: the attribution needs `hrtimer_wakeup`'s name.
    let ksyms = latlab_sys::shortio::read_chunked(
        std::fs::File::open("/proc/kallsyms").map_err(|e| format!("/proc/kallsyms: {e}"))?,
        64 << 10,
    )
    .map_err(|e| format!("/proc/kallsyms: {e}"))?;
    let syms = Symbols::parse_kallsyms(&String::from_utf8_lossy(&ksyms));
    if syms.addr_of("hrtimer_wakeup").is_none() {
        return Err(
            "kernel symbols not readable in /proc/kallsyms (hrtimer callbacks would be unnamed)"
                .into(),
        );
    }
    // Pointers are shown mixed with a per-run key (never kernel addresses in a file).
    use std::hash::BuildHasher;
    let key = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    Ok(dec.with_symbols(syms).with_pointer_key(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instances_left() -> Vec<String> {
        std::fs::read_dir("/sys/kernel/tracing/instances")
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| {
                        let me = format!("latlab-{}", std::process::id());
                        n == &me || n.starts_with(&format!("{me}-"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A real session without the re-arm thread: the test polls, step by step.
    fn start_stepped(
        opts: &TraceOptions,
        cpus: &[u32],
        l: Arc<Mutex<Ledger>>,
        w: &mut Vec<String>,
    ) -> anyhow::Result<Option<TraceSession>> {
        TraceSession::start_with(Path::new(tracefs::DEFAULT_ROOT), opts, cpus, l, w, false)
    }

    /// The tests' recorder: 256 KiB per CPU, tracing required, files deferred.
    fn opts(max_spikes: u32, instances: u32) -> TraceOptions {
        TraceOptions {
            threshold_ns: 1,
            buffer_kb: 256,
            max_spikes,
            instances,
            timer_irq: false,
            required: true,
            defer_files: true,
        }
    }

    fn ledger(dir: &Path) -> Arc<Mutex<Ledger>> {
        Arc::new(Mutex::new(Ledger::open_in(dir).unwrap()))
    }

    #[test]
    fn no_tracefs_warns_or_fails_when_required() {
        let t = tempfile::tempdir().unwrap();
        let l = ledger(&t.path().join("run"));
        let mut w = vec![];
        let opts = TraceOptions {
            buffer_kb: 64,
            required: false,
            ..opts(1, 2)
        };
        let s =
            TraceSession::start_at(&t.path().join("none"), &opts, &[0], l.clone(), &mut w).unwrap();
        assert!(s.is_none());
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("tracing disabled: tracefs is not available"),
            "{w:?}"
        );
        let opts = TraceOptions {
            required: true,
            ..opts
        };
        let e = TraceSession::start_at(&t.path().join("none"), &opts, &[0], l, &mut w)
            .err()
            .unwrap();
        assert!(e.to_string().contains("--trace-required"), "{e}");
    }

    /// Real tracefs: one marked spike is copied, analyzed and the recorder restarted; the
    /// instance is gone after finish and after a panic.
    #[test]
    fn real_session_marker_spike_finish_and_panic() {
        let Some(_g) = latlab_sys::privileged::guard("real_session_marker_spike_finish_and_panic")
        else {
            return;
        };
        let t = tempfile::tempdir().unwrap();
        let l = ledger(&t.path().join("run"));
        let mut w = vec![];
        let opts = opts(1, 2);
        let mut s = start_stepped(&opts, &[0], l.clone(), &mut w)
            .unwrap()
            .unwrap();
        assert_eq!(s.clock, "mono");
        assert!(s.armed().load(Ordering::SeqCst));
        let fd = s.marker_fd().load(Ordering::SeqCst);
        assert!(fd >= 0);
        assert_eq!(instances_left().len(), 2, "the ping-pong pair");
        let armed = s.armed();
        // Stand in for the measurement thread, pinned to CPU 0.
        let (e, r) = std::thread::spawn(move || {
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            unsafe { libc::CPU_SET(0, &mut set) };
            unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
            std::thread::sleep(Duration::from_millis(5));
            let now = |c| {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                unsafe { libc::clock_gettime(c, &mut ts) };
                ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
            };
            let e = now(libc::CLOCK_MONOTONIC) - 300_000;
            let r = now(libc::CLOCK_MONOTONIC);
            let m = format!(
                "LATLAB_STOP cpu=0 intended={e} actual={r} latency={}\n",
                r - e
            );
            assert!(armed.swap(false, Ordering::SeqCst));
            let n = unsafe { libc::write(fd, m.as_ptr().cast(), m.len()) };
            assert_eq!(n as usize, m.len());
            (e, r)
        })
        .join()
        .unwrap();
        // The trigger stopped the recorder in the kernel.
        assert!(!s.recorders[0].is_on(), "trigger did not stop the instance");
        let run = t.path().join("rundir");
        let sp = s
            .on_spike(0, e, r, r - e, true, &run)
            .expect("a traced spike");
        assert_eq!(sp.trace_file.as_deref(), Some("spikes/001/trace.txt"));
        let trace = std::fs::read_to_string(run.join("spikes/001/trace.txt")).unwrap();
        assert!(trace.contains("LATLAB_STOP"), "{trace}");
        assert!(run.join("spikes/001/analysis.txt").exists());
        assert!(sp.causes.iter().map(|c| c.ns).sum::<u64>() <= sp.latency_ns);
        // max_spikes reached: no instance re-armed; later spikes are counted.
        assert!(s.recorders.iter().all(|r| !r.is_on()));
        assert!(!s.armed().load(Ordering::SeqCst));
        assert!(s.on_spike(0, e, r, r - e, false, &run).is_none());
        let v = serde_json::to_value(s.finish()).unwrap();
        // Read as binary pages, decoded and rendered by latlab.
        assert_eq!(v["read_as"], "binary", "{v}");
        let c = &v["captures"][0];
        assert_eq!(
            (&c["read_as"], &c["spike"], &c["cpu"]),
            (&"binary".into(), &1.into(), &0.into())
        );
        assert!(
            c["pages"].as_u64().unwrap() >= 1 && c["events"].as_u64().unwrap() >= 1,
            "{c}"
        );
        assert_eq!(c["bytes"].as_u64().unwrap() % 4096, 0, "{c}");
        assert!(
            trace.starts_with("# tracer: nop (latlab: CPU 0 decoded from"),
            "{trace}"
        );
        assert_eq!(v["traced"], 1);
        assert_eq!(v["not_traced"], 1);
        assert_eq!(v["clock"], "mono");
        assert!(v["removal_error"].is_null(), "{v}");
        assert!(instances_left().is_empty());
        assert_eq!(l.lock().unwrap().entries().count(), 0);

        // Panic path: Drop removes the instance.
        let l2 = l.clone();
        let res = std::panic::catch_unwind(move || {
            let mut w = vec![];
            let _s = start_stepped(&opts, &[0], l2, &mut w).unwrap().unwrap();
            assert_eq!(instances_left().len(), 2);
            panic!("collector panic");
        });
        assert!(res.is_err());
        assert!(instances_left().is_empty(), "instance left after a panic");
        assert_eq!(l.lock().unwrap().entries().count(), 0);
    }

    /// A real session on CPUs 0 and 1 with `instances` instances of 256 KiB (all created), its
    /// temp dir and ledger.
    /// A session of `instances` on CPUs 0 and 1, stepped by the test (no re-arm thread).
    fn session(instances: u32) -> (tempfile::TempDir, Arc<Mutex<Ledger>>, TraceSession) {
        make_session(instances, false)
    }

    /// The same with the re-arm thread running, as `latlab run` has it.
    fn session_with_rearm(instances: u32) -> (tempfile::TempDir, Arc<Mutex<Ledger>>, TraceSession) {
        let (t, l, s) = make_session(instances, true);
        assert!(s.rearm.is_some());
        (t, l, s)
    }

    fn make_session(
        instances: u32,
        rearm: bool,
    ) -> (tempfile::TempDir, Arc<Mutex<Ledger>>, TraceSession) {
        let t = tempfile::tempdir().unwrap();
        let l = ledger(&t.path().join("run"));
        let mut w = vec![];
        let opts = opts(10, instances);
        let start = if rearm {
            TraceSession::start
        } else {
            start_stepped
        };
        let s = start(&opts, &[0, 1], l.clone(), &mut w).unwrap().unwrap();
        assert_eq!(s.recorders.len(), instances as usize, "{w:?}");
        (t, l, s)
    }

    /// Stand in for a measurement thread: take `armed`, write one marker to the armed fd.
    fn mark(s: &TraceSession, cpu: u32) -> (u64, u64) {
        // On `cpu`, so the marker lands in that CPU's buffer (the one on_spike copies).
        // SAFETY: plain syscall on the calling (test) thread with a valid set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
        }
        let r = mono_ns();
        let e = r - 300_000;
        assert!(s.armed().swap(false, Ordering::SeqCst), "not armed");
        let m = format!(
            "LATLAB_STOP cpu={cpu} intended={e} actual={r} latency={}\n",
            r - e
        );
        let fd = s.marker_fd().load(Ordering::SeqCst);
        let n = unsafe { libc::write(fd, m.as_ptr().cast(), m.len()) };
        assert_eq!(n as usize, m.len());
        (e, r)
    }

    /// The ping-pong: a marker stops instance A; one poll arms B (running, its fd in the
    /// atomic) before A's trace is copied; the copy makes A the standby. And the ring-full
    /// bug: a marker whose spike record never arrives is reaped, so the recorder re-arms.
    #[test]
    fn ping_pong_rearms_before_the_copy_and_reaps_orphans() {
        let Some(_g) =
            latlab_sys::privileged::guard("ping_pong_rearms_before_the_copy_and_reaps_orphans")
        else {
            return;
        };
        let (t, l, mut s) = session(2);
        // Both instances in the ledger (plus the mount, when the session mounted tracefs).
        let mount = s.tracefs.mounted.is_some() as usize;
        assert_eq!(l.lock().unwrap().entries().count(), 2 + mount);
        let fd_a = s.marker_fd().load(Ordering::SeqCst);
        assert_eq!(fd_a, s.recorders[0].marker_fd());
        let (e1, r1) = mark(&s, 0);
        assert!(!s.recorders[0].is_on(), "the marker stopped A");
        s.poll();
        assert!(s.armed().load(Ordering::SeqCst), "re-armed before the copy");
        assert_eq!(
            s.marker_fd().load(Ordering::SeqCst),
            s.recorders[1].marker_fd()
        );
        assert!(s.recorders[1].is_on());
        assert!(s.wants_collector());
        let run = t.path().join("rundir");
        let sp = s.on_spike(0, e1, r1, r1 - e1, true, &run).expect("traced");
        assert_eq!(sp.trace_file.as_deref(), Some("spikes/001/trace.txt"));
        let trace = std::fs::read_to_string(run.join("spikes/001/trace.txt")).unwrap();
        assert!(trace.contains(&format!("intended={e1}")), "{trace}");
        assert!(!s.wants_collector());
        assert!(s.recorders[1].is_on(), "B still armed");
        // Ring full: B's marker is written, its spike record never arrives.
        let _ = mark(&s, 1);
        s.poll();
        assert!(s.armed().load(Ordering::SeqCst), "A took over");
        assert_eq!(s.marker_fd().load(Ordering::SeqCst), fd_a);
        // Only a drain that began well after the stop may call B an orphan.
        s.reap(Instant::now());
        assert!(s.wants_collector());
        s.reap(Instant::now() + ORPHAN_AFTER);
        assert!(!s.wants_collector());
        assert_eq!(s.orphaned, 1);
        // A's next marker: B (recycled) takes over again; the recorder never stays disarmed.
        let (e3, r3) = mark(&s, 0);
        s.poll();
        assert!(s.armed().load(Ordering::SeqCst));
        assert!(s.recorders[1].is_on());
        let sp = s.on_spike(0, e3, r3, r3 - e3, true, &run).expect("traced");
        assert_eq!(sp.trace_file.as_deref(), Some("spikes/002/trace.txt"));
        let trace2 = std::fs::read_to_string(run.join("spikes/002/trace.txt")).unwrap();
        assert!(trace2.contains(&format!("intended={e3}")));
        // A was read (consumed), not cleared, before it was armed again: nothing of spike 1.
        assert!(!trace2.contains(&format!("intended={e1}")), "{trace2}");
        let v = serde_json::to_value(s.finish()).unwrap();
        assert_eq!(v["traced"], 2);
        assert_eq!(v["orphaned"], 1);
        // The collector's copies and the orphan were consumed by reading: no clear (an RCU
        // grace period, and every page reset with interrupts off, on a measured CPU).
        assert_eq!(v["rearm_cleared"], 0, "{v}");
        assert_eq!(v["rearm_reused"], 3, "{v}");
        assert!(v["rearm_max_ns"].as_u64().unwrap() > 0);
        assert!(v["removal_error"].is_null(), "{v}");
        assert!(instances_left().is_empty());
        assert_eq!(l.lock().unwrap().entries().count(), 0);
    }

    /// Wait for a condition (bounded), never calling poll.
    fn wait(what: &str, f: &dyn Fn() -> bool) {
        let t0 = Instant::now();
        while !f() && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(f(), "{what}");
    }

    /// Write `text` to the armed instance's marker on `cpu` (a plain marker: no stop).
    fn note(s: &TraceSession, cpu: u32, text: &str) {
        latlab_sys::rt::set_affinity(&[cpu]).unwrap();
        let fd = s.marker_fd().load(Ordering::SeqCst);
        // SAFETY: plain syscall with a valid buffer.
        let n = unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
        assert_eq!(n as usize, text.len());
    }

    /// Stand in for a measuring thread of the recorder that never stops: on `cpu`, write the
    /// marker while `armed` (left set) and count it in `marks`, as the hot loop does.
    fn mark_running(s: &TraceSession, cpu: u32) -> (u64, u64) {
        latlab_sys::rt::set_affinity(&[cpu]).unwrap();
        let r = mono_ns();
        let e = r - 300_000;
        assert!(s.armed().load(Ordering::SeqCst), "not armed");
        let m = format!(
            "LATLAB_STOP cpu={cpu} intended={e} actual={r} latency={}\n",
            r - e
        );
        let fd = s.marker_fd().load(Ordering::SeqCst);
        // SAFETY: plain syscall with a valid buffer.
        let n = unsafe { libc::write(fd, m.as_ptr().cast(), m.len()) };
        assert_eq!(n as usize, m.len());
        s.marks().expect("the recorder that never stops")[cpu as usize]
            .fetch_add(1, Ordering::Release);
        (e, r)
    }

    /// One instance (the default) never stops: a spike's marker is a plain event, the
    /// instance records on, and each spike's trace is its CPU's session, from the previous
    /// spike's marker to its own. What came between the two markers (a note) and the second
    /// marker are the second capture's only, and nothing of the first is in it: without the
    /// split at the marker, capture 1 holds both. The files wait in memory until the run ends.
    #[test]
    fn the_recorder_never_stops_and_each_spike_gets_its_session() {
        let Some(_g) = latlab_sys::privileged::guard(
            "the_recorder_never_stops_and_each_spike_gets_its_session",
        ) else {
            return;
        };
        let (t, _l, s) = session(1);
        assert!(
            s.running.is_some(),
            "binary pages on this kernel: the running recorder"
        );
        assert!(!s.stops());
        let (e1, r1) = mark_running(&s, 1);
        assert!(s.recorders[0].is_on(), "a marker does not stop it");
        note(&s, 1, "BETWEEN_1_AND_2\n");
        let (e2, r2) = mark_running(&s, 1);
        let run = t.path().join("rundir");
        let v = two_sessions_apart(s, &run, [(e1, r1), (e2, r2)], "BETWEEN_1_AND_2");
        assert_eq!(
            v["stop"], "never: each spike's trace ends at its marker",
            "{v}"
        );
        assert!(v["rearm_mean_ns"].is_null(), "never re-armed: {v}");
        assert_eq!(v["files_written_while_measuring"], 0, "{v}");
    }

    /// Hand both spikes (on CPU 1: intended, actual) to the collector and check that each
    /// capture holds its own session: `note` (written between the two markers) and spike 2's
    /// marker in capture 2 only, in its text and in its `trace.dat` (trimmed pages, not just
    /// the text), nothing of spike 1 there. The files are written by finish, not before.
    fn two_sessions_apart(
        mut s: TraceSession,
        run: &Path,
        spikes: [(u64, u64); 2],
        note: &str,
    ) -> serde_json::Value {
        for (e, r) in spikes {
            let sp = s.on_spike(1, e, r, r - e, true, run).expect("traced");
            assert!(!sp.causes.is_empty() || !sp.timeline.is_empty());
        }
        assert!(
            !run.join("spikes/001/trace.txt").exists() && !run.join("spikes/001").exists(),
            "files written while measuring"
        );
        assert!(s.recorders[0].is_on(), "still recording after both copies");
        let v = serde_json::to_value(s.finish()).unwrap();
        let [(e1, _), (e2, _)] = spikes;
        let (m1, m2) = (format!("intended={e1}"), format!("intended={e2}"));
        let has = |b: &[u8], w: &str| b.windows(w.len()).any(|x| x == w.as_bytes());
        for ext in ["txt", "dat"] {
            let read =
                |n: u32| std::fs::read(run.join(format!("spikes/{n:03}/trace.{ext}"))).unwrap();
            let (c1, c2) = (read(1), read(2));
            assert!(has(&c1, &m1), "capture 1 ({ext}) lacks its marker");
            assert!(
                !has(&c1, note) && !has(&c1, &m2),
                "capture 1 ({ext}) holds session 2"
            );
            assert!(
                has(&c2, note) && has(&c2, &m2),
                "capture 2 ({ext}) lacks its session"
            );
            assert!(!has(&c2, &m1), "capture 2 ({ext}) holds spike 1");
        }
        assert!(run.join("spikes/002/analysis.txt").exists());
        assert_eq!(v["traced"], 2);
        assert_eq!(v["unmatched"], 0, "{v}");
        assert_eq!(v["instances"].as_array().map(Vec::len), Some(1), "{v}");
        assert!(v["removal_error"].is_null(), "{v}");
        assert!(instances_left().is_empty());
        v
    }

    /// The same with the copier thread, as `latlab run` has it: it reads the marked CPU's
    /// pages with no call from the collector; what the kernel wrote after that copy and a
    /// second spike are the second capture's only. Then spikes on both CPUs at once (a VM
    /// stalled on both) are traced each from its own CPU's session, and the copy delay is
    /// recorded.
    #[test]
    fn the_copier_reads_marked_cpus_without_the_collector() {
        let Some(_g) =
            latlab_sys::privileged::guard("the_copier_reads_marked_cpus_without_the_collector")
        else {
            return;
        };
        let (t, _l, s) = session_with_rearm(1);
        let run = s.running.clone().expect("the running recorder");
        let (e1, r1) = mark_running(&s, 1);
        wait("read by the copier", &|| run.copied_marks(1) >= 1);
        note(&s, 1, "AFTER_COPY_1\n");
        let (e2, r2) = mark_running(&s, 1);
        wait("read again by the copier", &|| run.copied_marks(1) >= 2);
        let run_dir = t.path().join("rundir");
        let mut s = s;
        for (e, r) in [(e1, r1), (e2, r2)] {
            s.on_spike(1, e, r, r - e, true, &run_dir).expect("traced");
        }
        let (e3, r3) = mark_running(&s, 0);
        let (e4, r4) = mark_running(&s, 1);
        for (cpu, e, r) in [(0, e3, r3), (1, e4, r4)] {
            let sp = s
                .on_spike(cpu, e, r, r - e, true, &run_dir)
                .expect("traced");
            assert_eq!(sp.cpu, cpu);
        }
        let v = serde_json::to_value(s.finish()).unwrap();
        assert_eq!(v["traced"], 4, "{v}");
        assert_eq!(v["unmatched"], 0, "{v}");
        let has = |n: u32, w: &str| {
            let t =
                std::fs::read_to_string(run_dir.join(format!("spikes/{n:03}/trace.txt"))).unwrap();
            t.contains(w)
        };
        assert!(has(2, "AFTER_COPY_1") && !has(1, "AFTER_COPY_1"));
        assert!(has(3, &format!("intended={e3}")) && !has(3, &format!("intended={e4}")));
        assert!(has(4, &format!("intended={e4}")) && !has(4, &format!("intended={e2}")));
        let d = v["copy_delay_max_ns"]
            .as_u64()
            .expect("copy delays recorded");
        assert!(d > 0 && d < 5_000_000_000, "{v}");
        assert_eq!(v["captures"][2]["cpu"], 0);
        // Removed although the test still holds the copier's state (its files were closed).
        assert!(v["removal_error"].is_null(), "{v}");
        assert!(instances_left().is_empty());
        drop(run);
    }

    /// --trace-max-spikes: after the last spike traced, the threads write no more markers
    /// (`armed` cleared), and a later spike is counted over the cap.
    #[test]
    fn the_running_recorder_stops_marking_at_the_cap() {
        let Some(_g) =
            latlab_sys::privileged::guard("the_running_recorder_stops_marking_at_the_cap")
        else {
            return;
        };
        let (t, _l, mut s) = session(1);
        s.max_spikes = 1;
        let (e, r) = mark_running(&s, 0);
        let run = t.path().join("rundir");
        s.on_spike(0, e, r, r - e, true, &run).expect("traced");
        assert!(
            !s.armed().load(Ordering::SeqCst),
            "still marking after the cap"
        );
        assert!(s
            .on_spike(0, e + 1_000_000, r + 1_000_000, r - e, false, &run)
            .is_none());
        let v = serde_json::to_value(s.finish()).unwrap();
        assert_eq!(
            (&v["traced"], &v["not_traced"], &v["over_max_spikes"]),
            (&1.into(), &1.into(), &1.into()),
            "{v}"
        );
        assert!(run.join("spikes/001/trace.dat").exists());
    }

    /// A layout latlab does not decode (here a 32-bit commit) is refused with its reason, and
    /// a session without a decoder reads spikes as text and says so in run.json.
    #[test]
    fn an_unknown_layout_falls_back_to_the_text_copy() {
        let Some(_g) =
            latlab_sys::privileged::guard("an_unknown_layout_falls_back_to_the_text_copy")
        else {
            return;
        };
        let (t, _l, mut s) = session(2);
        let mut layout = s.recorders[0].raw.clone().expect("this kernel's layout");
        assert!(binary_decoder(&Ok(layout.clone())).is_ok());
        layout.header_page = layout.header_page.replace(
            "local_t commit;\toffset:8;\tsize:8;",
            "local_t commit;\toffset:8;\tsize:4;",
        );
        s.binary = binary_decoder(&Ok(layout));
        let why = s.binary.as_ref().unwrap_err().clone();
        assert!(why.contains("4-byte commit"), "{why}");
        let (e, r) = mark(&s, 0);
        s.poll();
        let run = t.path().join("rundir");
        let sp = s.on_spike(0, e, r, r - e, true, &run).expect("traced");
        assert!(!sp.causes.is_empty() || !sp.timeline.is_empty());
        let trace = std::fs::read_to_string(run.join("spikes/001/trace.txt")).unwrap();
        assert!(trace.contains(&format!("intended={e}")), "{trace}");
        assert!(
            trace.starts_with("# tracer: nop\n"),
            "the kernel's own text"
        );
        let v = serde_json::to_value(s.finish()).unwrap();
        assert_eq!(v["read_as"], "text");
        assert_eq!(v["binary_fallback"], why.as_str());
        assert_eq!(v["captures"][0]["read_as"], "text");
        assert!(v["captures"][0]["events"].as_u64().unwrap() > 0, "{v}");
    }

    /// The re-arm thread arms a standby after a marker with no call from the collector (which
    /// under load waits long for a CPU), copies the stopped instance's pages and makes it a
    /// standby again: two spikes in a row with two instances are both traced, the collector
    /// only handing them over afterwards.
    #[test]
    fn the_rearm_thread_rearms_and_copies_without_the_collector() {
        let Some(_g) = latlab_sys::privileged::guard(
            "the_rearm_thread_rearms_and_copies_without_the_collector",
        ) else {
            return;
        };
        let (t, _l, mut s) = session_with_rearm(2);
        let (e1, r1) = mark(&s, 0);
        wait("B armed by the thread", &|| {
            s.armed().load(Ordering::SeqCst)
        });
        assert_eq!(
            s.marker_fd().load(Ordering::SeqCst),
            s.recorders[1].marker_fd()
        );
        assert!(s.recorders[1].is_on());
        wait("A copied by the thread", &|| {
            s.arm.lock().pending[0].copy.is_some()
        });
        assert!(s.arm.lock().pending[0].rearmed_ns.expect("re-armed") > r1);
        let (e2, r2) = mark(&s, 1);
        wait("A armed again by the thread", &|| {
            s.armed().load(Ordering::SeqCst)
        });
        assert_eq!(
            s.marker_fd().load(Ordering::SeqCst),
            s.recorders[0].marker_fd()
        );
        assert!(s.wants_collector());
        let run = t.path().join("rundir");
        for (n, (cpu, e, r)) in [(0, e1, r1), (1, e2, r2)].into_iter().enumerate() {
            let sp = s.on_spike(cpu, e, r, r - e, true, &run).expect("traced");
            let f = run.join(format!("spikes/{:03}/trace.txt", n + 1));
            let trace = std::fs::read_to_string(f).unwrap();
            assert!(trace.contains(&format!("intended={e}")), "{trace}");
            assert!(sp.trace_file.is_some());
        }
        // A again: re-armed without a clear (its copy consumed the ring), so its next capture
        // holds the third spike and nothing of the first.
        let (e3, r3) = mark(&s, 0);
        wait("A copied again by the thread", &|| {
            s.arm
                .lock()
                .pending
                .front()
                .is_some_and(|p| p.copy.is_some())
        });
        s.on_spike(0, e3, r3, r3 - e3, true, &run).expect("traced");
        let trace = std::fs::read_to_string(run.join("spikes/003/trace.txt")).unwrap();
        assert!(trace.contains(&format!("intended={e3}")), "{trace}");
        assert!(!trace.contains(&format!("intended={e1}")), "{trace}");
        let v = serde_json::to_value(s.finish()).unwrap();
        assert_eq!(v["traced"], 3);
        assert_eq!(v["rearm_reused"], 3, "{v}");
        assert_eq!(v["rearm_cleared"], 0, "{v}");
        assert_eq!(v["captures"][1]["cpu"], 1);
        assert_eq!(v["captures"][1]["read_as"], "binary");
        assert!(v["removal_error"].is_null(), "{v}");
        assert!(instances_left().is_empty());
    }

    /// A VM stalled on both CPUs: CPU 0's marker stops the recorder, CPU 1's thread (woken
    /// during the same stall) finds it stopped. Its window began before the stop, so it is read
    /// from CPU 0's capture; a spike whose window began after the stop is not.
    #[test]
    fn a_spike_that_found_the_recorder_stopped_is_read_from_the_capture() {
        let Some(_g) = latlab_sys::privileged::guard(
            "a_spike_that_found_the_recorder_stopped_is_read_from_the_capture",
        ) else {
            return;
        };
        let (t, _l, mut s) = session_with_rearm(2);
        // A measuring thread on CPU 1: SCHED_FIFO (no timer slack: its hrtimer expires at the
        // intended time exactly), one absolute sleep.
        let (e2, r2) = std::thread::spawn(|| unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(1, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
            let p = libc::sched_param { sched_priority: 1 };
            assert_eq!(libc::sched_setscheduler(0, libc::SCHED_FIFO, &p), 0);
            let e = mono_ns() + 200_000;
            let ts = libc::timespec {
                tv_sec: (e / 1_000_000_000) as i64,
                tv_nsec: (e % 1_000_000_000) as i64,
            };
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            );
            (e, mono_ns())
        })
        .join()
        .unwrap();
        let (e1, r1) = mark(&s, 0);
        assert!(r1 > r2);
        let t0 = Instant::now();
        while s
            .arm
            .lock()
            .pending
            .front()
            .is_none_or(|p| p.copy.is_none())
        {
            assert!(t0.elapsed() < Duration::from_secs(2), "not copied");
            std::thread::sleep(Duration::from_micros(200));
        }
        let run = t.path().join("rundir");
        s.on_spike(0, e1, r1, r1 - e1, true, &run).expect("traced");
        // CPU 1's clock read 20 µs after the stop (its marker was not written).
        let late = r1 + 20_000;
        let sp = s
            .on_spike(1, e2, late, late - e2, false, &run)
            .expect("read from spike 1's capture");
        assert_eq!((sp.cpu, sp.at_ns, sp.latency_ns), (1, e2, late - e2));
        let a = std::fs::read_to_string(run.join("spikes/002/analysis.txt")).unwrap();
        assert!(a.contains("read from the capture of spike 1"), "{a}");
        assert!(run.join("spikes/002/trace.txt").is_file());
        // A window that began after the stop is not in the capture.
        assert!(s
            .on_spike(1, r1 + 10_000, r1 + 400_000, 390_000, false, &run)
            .is_none());
        let v = serde_json::to_value(s.finish()).unwrap();
        assert_eq!(
            (v["traced"].as_u64(), v["covered"].as_u64()),
            (Some(2), Some(1)),
            "{v}"
        );
        assert_eq!(v["not_traced"], 1);
        assert!(instances_left().is_empty());
    }

    /// Three instances: A's spike is being copied and B stops meanwhile; the copy itself polls,
    /// so C is armed before the copy ends (with two polls around the copy only, the recorder
    /// stayed disarmed for the whole copy: hundreds of ms under load).
    #[test]
    fn a_third_instance_is_armed_during_a_copy() {
        let Some(_g) = latlab_sys::privileged::guard("a_third_instance_is_armed_during_a_copy")
        else {
            return;
        };
        let (_t, l, mut s) = session(3);
        assert_eq!(instances_left().len(), 3);
        // Scheduler events on CPU 0, in A's buffer: children of a thread pinned there.
        // SAFETY: plain syscall on this (test) thread with a valid set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
        }
        for _ in 0..300 {
            let _ = std::process::Command::new("true").status();
        }
        let _ = mark(&s, 0);
        s.poll();
        assert_eq!(
            s.marker_fd().load(Ordering::SeqCst),
            s.recorders[1].marker_fd(),
            "B armed"
        );
        // B's spike comes while A is still waiting for its copy: nothing polls but the copy.
        let _ = mark(&s, 0);
        assert!(!s.armed().load(Ordering::SeqCst));
        let c = s.drain_polling(0).expect("a binary copy");
        let pages = &c.pages.iter().find(|p| p.0 == 0).expect("CPU 0's pages").1;
        assert!(
            pages.len() >= RAW_POLL_EVERY,
            "A's copy holds {} bytes, fewer than one poll interval",
            pages.len()
        );
        assert!(s.armed().load(Ordering::SeqCst), "C armed during the copy");
        assert_eq!(
            s.marker_fd().load(Ordering::SeqCst),
            s.recorders[2].marker_fd()
        );
        assert!(s.recorders[2].is_on());
        let v = serde_json::to_value(s.finish()).unwrap();
        assert!(v["removal_error"].is_null(), "{v}");
        assert!(instances_left().is_empty());
        assert_eq!(l.lock().unwrap().entries().count(), 0);
    }
}
