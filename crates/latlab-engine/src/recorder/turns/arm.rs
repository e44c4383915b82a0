//! The re-arm state of instances taking turns, shared by the collector and the re-arm
//! thread: which instance is armed, which stopped instances wait for their spike (and their
//! copied pages), which are standbys; the thread itself ([`spawn_rearm`]) and the binary copy
//! of a stopped instance ([`drain`]).

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_sys::pimutex::{PiGuard, PiMutex};
use latlab_sys::rt::now_ns as mono_ns;
use latlab_sys::tracefs;

/// Bytes of a binary copy between two polls of the armed instance (16 pages: well under a ms).
pub(super) const RAW_POLL_EVERY: usize = 64 << 10;

/// How long the collector waits for the in-kernel stop after a marker.
pub(super) const STOP_WAIT: Duration = Duration::from_millis(200);

/// One stopped instance waiting for its spike.
pub(super) struct Pending {
    pub(super) slot: usize,
    pub(super) stopped: Instant,
    /// CLOCK_MONOTONIC when the other instance took over (None: not re-armed yet).
    pub(super) rearmed_ns: Option<u64>,
    /// Not re-armed because it took the last slot of `--trace-max-spikes`.
    pub(super) capped: bool,
    /// Its buffers, copied by the re-arm thread (the instance is then a standby again).
    pub(super) copy: Option<Copied>,
}

/// A stopped instance's buffers as binary pages, per CPU, with the events the ring overwrote.
#[derive(Default)]
pub(super) struct Copied {
    pub(super) pages: Vec<(u32, Vec<u8>)>,
    pub(super) overruns: Vec<(u32, u64)>,
    pub(super) read_ns: u64,
}

/// Which instance is armed, which wait for their spike, which are ready: shared by the
/// collector and the re-arm thread.
pub(super) struct Arming {
    /// The armed instance, if any.
    pub(super) active: Option<usize>,
    /// Stopped instances, oldest first, waiting to be copied.
    pub(super) pending: VecDeque<Pending>,
    /// Cleared, stopped instances ready to take over.
    pub(super) standby: Vec<usize>,
    /// Spikes traced so far (with `pending`, against `--trace-max-spikes`).
    pub(super) traced: u32,
    /// Per instance and CPU (index in `cpus`): the kernel's cumulative `overrun` count at the
    /// last copy. A consumed instance is re-armed without a clear, so its counter keeps
    /// counting; each copy reports what it added since.
    pub(super) overrun_base: Vec<Vec<u64>>,
    /// Re-arms without a clear (the copy consumed every event) and with one (it did not).
    pub(super) reused: u32,
    pub(super) cleared: u32,
}

/// What re-arming needs, shared with the re-arm thread: the state, and per instance its
/// `tracing_on` and `trace_marker` fds (valid until the thread is joined; the instances are
/// removed after that).
pub(super) struct Arm {
    /// With priority inheritance: the collector (a normal task) holding it runs at the re-arm
    /// thread's priority while the thread waits (a plain mutex: re-arms of 345 ms under
    /// hackbench, the holder preempted).
    pub(super) st: PiMutex<Arming>,
    pub(super) fds: Vec<(RawFd, RawFd)>,
    /// With the binary reader: the instances' directories, the CPUs and the page size, for
    /// the thread's copies.
    pub(super) dirs: Vec<PathBuf>,
    pub(super) cpus: Vec<u32>,
    pub(super) raw_page: Option<usize>,
    /// The hook's armed fd (-1: disarmed), shared with the measuring threads.
    pub(super) armed_fd: Arc<AtomicI32>,
    pub(super) trigger: bool,
    pub(super) max_spikes: u32,
    pub(super) quit: AtomicBool,
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
    pub(super) fn lock(&self) -> PiGuard<'_, Arming> {
        self.st.lock()
    }

    /// When a marker has disarmed the recorder: move the stopped instance to the pending queue
    /// and arm a standby at once (one `write` to its `tracing_on`). Cheap when nothing
    /// happened (one atomic load).
    pub(super) fn step(&self, a: &mut Arming) {
        if let Some(x) = a.active {
            if self.armed_fd.load(Ordering::Acquire) >= 0 {
                return;
            }
            // A marker went to instance `x` (the fd a thread swapped out can only be `x`'s:
            // it is there only while `x` is active). Without the trigger, stop it ourselves.
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
        a.active = Some(next);
        self.armed_fd.store(self.fds[next].1, Ordering::Release);
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
pub(super) fn drain(
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
    pub(super) fn copy_stopped(&self, a: &mut Arming) {
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
pub(super) fn spawn_rearm(arm: Arc<Arm>) -> Option<std::thread::JoinHandle<()>> {
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
                if arm.armed_fd.load(Ordering::Acquire) < 0 {
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
