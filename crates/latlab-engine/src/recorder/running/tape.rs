//! The tapes of the recorder that never stops: a copier thread (`latlab-trace`, SCHED_FIFO 1,
//! every [`COPY_SLICE`]) reads the binary pages (`per_cpu/cpuN/trace_pipe_raw`, kept open) of
//! every measured CPU when a marker count moved, up to what the ring holds now, into each
//! CPU's *tape*; the collector takes a CPU's tape for a spike and gives back what follows its
//! session, and reads the other CPUs' tapes over the spike's window ([`Tapes::peek`]).
//!
//! The ring keeps seconds of history (about 2 MB/s per CPU under hackbench with the lean
//! events: a 4 MiB ring holds ~2 s), so the copier is in no hurry; reading only when a marker
//! came keeps the history in the kernel while nothing happens, where it costs nothing. Every
//! CPU is read then, so a spike finds the other CPUs' events of its window (a tape keeps at
//! most two rings, as the kernel would have overwritten the rest). The copy reads
//! the CPU's ring to the end, which consumes it (the kernel keeps overwriting what nobody
//! read: a flight recorder's normal state, counted as `overrun` in each capture).

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use latlab_core::trace::capture;
use latlab_core::trace::raw::PageLayout;
use latlab_sys::pimutex::PiMutex;
use latlab_sys::quiet::Quiet;
use latlab_sys::tracefs;

use latlab_sys::rt::now_ns as mono_ns;

/// How often the copier looks for new markers. The ring holds seconds; the collector waits
/// for the copy of each spike it takes, so this bounds that wait.
pub(super) const COPY_SLICE: Duration = Duration::from_millis(10);

/// The collector copies a CPU itself when the copier has not within this (a copier starved
/// by real-time loads above SCHED_FIFO 1), and gives the spike up after `COPY_WAIT`.
const SELF_COPY_AFTER: Duration = Duration::from_millis(200);

/// What the copier announces for one page read (or `stats` read) to the quiet windows: 1–5
/// µs as a rule; 0.05 % took over 20 µs and a few 70–380 µs under hackbench.
const READ_NEED_NS: u64 = 100_000;

/// One CPU's pages read from the ring and not yet handed to a spike.
#[derive(Default)]
pub(super) struct Tape {
    pages: Vec<u8>,
    /// `marks[cpu]` when the last read began: every marker counted up to it is in `pages` (or
    /// was handed to its spike).
    read_marks: u64,
    /// The reads since a spike last took the pages: `marks[cpu]` when each began and
    /// CLOCK_MONOTONIC when it ended (the first covering a marker dates its copy).
    reads: Vec<(u64, u64)>,
    /// Time spent reading this CPU since a spike last took its pages.
    read_ns: u64,
    /// CLOCK_MONOTONIC when the last read began: every event before it is in `pages` (or was
    /// handed on, dropped or overwritten).
    read_began_ns: u64,
    /// Events older than this belong to the previous spike of this CPU (its marker's time + 1).
    from_ns: u64,
    /// The kernel's cumulative `overrun` of this CPU at the last read, and what it added since
    /// a spike last took the pages.
    overrun_base: u64,
    overrun: u64,
    /// Pages dropped because the tape held more than the ring (the collector fell behind).
    dropped: u64,
}

/// What a spike takes from its CPU's tape.
pub(super) struct Taken {
    pub pages: Vec<u8>,
    pub from_ns: u64,
    /// When the read that brought the spike's marker ended (None: no read did).
    pub read_done_ns: Option<u64>,
    pub read_ns: u64,
    pub overrun: u64,
    pub dropped: u64,
}

/// What reads the rings: the files, open for the whole run (opening a tracefs file took
/// 33–46 µs under hackbench), and a scratch buffer kept from copy to copy.
struct Reader {
    /// `per_cpu/cpuN/trace_pipe_raw` (non-blocking) and `per_cpu/cpuN/stats`, by index in
    /// `cpus`; empty once closed (the instance cannot be removed while they are open).
    raw: Vec<File>,
    stats: Vec<Option<File>>,
    scratch: Vec<u8>,
}

pub(super) struct Tapes {
    /// The measured CPUs; tapes and fds are in this order.
    cpus: Vec<u32>,
    page: usize,
    layout: PageLayout,
    /// Markers written, by CPU number (shared with the measuring threads' hook).
    marks: Arc<[AtomicU64]>,
    tapes: PiMutex<Vec<Tape>>,
    /// One reader at a time (the copier, or the collector when the copier is late).
    reader: PiMutex<Reader>,
    /// The most a tape keeps (the ring's size per CPU): older pages are dropped.
    cap_bytes: usize,
    /// When every CPU is measured: the schedule the copier waits on before each read, on the
    /// CPU it is pinned to ([`latlab_sys::quiet`]).
    pub(super) quiet: OnceLock<Quiet>,
    pub(super) quit: AtomicBool,
}

impl Tapes {
    pub(super) fn open(
        dir: &Path,
        cpus: &[u32],
        layout: PageLayout,
        buffer_kb: u64,
    ) -> std::io::Result<Tapes> {
        let fds = cpus
            .iter()
            .map(|&c| tracefs::open_cpu_raw_at(dir, c))
            .collect::<std::io::Result<Vec<_>>>()?;
        let stats = cpus
            .iter()
            .map(|c| File::open(dir.join(format!("per_cpu/cpu{c}/stats"))).ok())
            .collect();
        let page = layout.page_size();
        let ring = usize::try_from(buffer_kb.saturating_mul(1024)).unwrap_or(usize::MAX);
        let n = cpus.iter().max().map_or(0, |&c| c as usize + 1);
        Ok(Tapes {
            cpus: cpus.to_vec(),
            page,
            layout,
            marks: (0..n).map(|_| AtomicU64::new(0)).collect(),
            tapes: PiMutex::new((0..cpus.len()).map(|_| Tape::default()).collect()),
            reader: PiMutex::new(Reader {
                raw: fds,
                stats,
                // Room for a whole ring, so the first copy allocates once.
                scratch: Vec::with_capacity(ring.min(64 << 20)),
            }),
            // A ring and what comes while the collector takes the first session.
            cap_bytes: ring.saturating_mul(2).max(page),
            quiet: OnceLock::new(),
            quit: AtomicBool::new(false),
        })
    }

    /// Close the files (then the instance can be removed); later reads read nothing.
    pub(super) fn close(&self) {
        let mut r = self.reader.lock();
        r.raw.clear();
        r.stats.clear();
    }

    pub(super) fn marks(&self) -> Arc<[AtomicU64]> {
        self.marks.clone()
    }

    fn marks_of(&self, cpu: u32) -> u64 {
        self.marks
            .get(cpu as usize)
            .map_or(0, |m| m.load(Ordering::Acquire))
    }

    /// Read every CPU when a marker count moved since its last read (the other CPUs'
    /// events of a spike's window come with it). The copier's step: its reads wait for the
    /// quiet windows of the CPU it is pinned to, if any.
    pub(super) fn copy_new(&self) {
        let moved = (0..self.cpus.len())
            .any(|k| self.marks_of(self.cpus[k]) != self.tapes.lock()[k].read_marks);
        if moved {
            for k in 0..self.cpus.len() {
                self.read_cpu(k, self.quiet.get());
            }
        }
    }

    /// Wait until CPU `k`'s tape holds every event before `at_ns` (a read began after it),
    /// reading it here when there is no copier or it is late. False after `wait`.
    pub(super) fn wait_past(&self, k: usize, at_ns: u64, copier: bool, wait: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            if self.tapes.lock()[k].read_began_ns > at_ns {
                return true;
            }
            if !copier || t0.elapsed() >= SELF_COPY_AFTER {
                self.read_cpu(k, None);
                if self.tapes.lock()[k].read_began_ns > at_ns {
                    return true;
                }
            }
            if t0.elapsed() >= wait {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A copy of CPU `k`'s pages that hold events of `span` (whole pages: trim them).
    pub(super) fn peek(&self, k: usize, span: std::ops::Range<u64>) -> Vec<u8> {
        let tapes = self.tapes.lock();
        let pages = &tapes[k].pages;
        let from = capture::split_at(&self.layout, pages, span.start).1;
        let to = capture::split_at(&self.layout, pages, span.end).0;
        pages.get(from..to.max(from)).unwrap_or_default().to_vec()
    }

    /// Read CPU `k`'s ring to its end into its tape, each read in a quiet window of `gate`.
    fn read_cpu(&self, k: usize, gate: Option<&Quiet>) {
        let cpu = self.cpus[k];
        let mut reader = self.reader.lock();
        let Reader {
            raw,
            stats,
            scratch,
        } = &mut *reader;
        let Some(f) = raw.get(k) else {
            return; // closed
        };
        // Loaded after the lock: a reader that waited for another saw that one's markers.
        let m = self.marks_of(cpu);
        let t0 = mono_ns();
        scratch.clear();
        // Before each read (and the `stats` read after), a quiet window.
        let wait = || {
            if let Some(q) = gate {
                q.wait(READ_NEED_NS);
            }
        };
        let _ = tracefs::read_pages_into(f, self.page, scratch, self.page, wait);
        wait();
        let overrun = stats
            .get(k)
            .and_then(Option::as_ref)
            .and_then(tracefs::cpu_stats_of)
            .map(|s| s.1);
        let done = mono_ns();
        let mut tapes = self.tapes.lock();
        let t = &mut tapes[k];
        t.read_began_ns = t.read_began_ns.max(t0);
        t.pages.extend_from_slice(scratch);
        if t.pages.len() > self.cap_bytes {
            let over = (t.pages.len() - self.cap_bytes).div_ceil(self.page) * self.page;
            let over = over.min(t.pages.len());
            t.pages.drain(..over);
            t.dropped += (over / self.page) as u64;
        }
        t.read_marks = t.read_marks.max(m);
        // A read that brought new markers (the others' reads with it change nothing).
        if t.reads.len() < 1024 && t.reads.last().is_none_or(|r| r.0 != m) {
            t.reads.push((m, done));
        }
        t.read_ns += done.saturating_sub(t0);
        if let Some(o) = overrun {
            t.overrun += o.saturating_sub(t.overrun_base);
            t.overrun_base = o;
        }
    }

    /// Markers of `cpu` the tape has read (for tests).
    #[cfg(test)]
    pub(super) fn copied_marks(&self, cpu: u32) -> u64 {
        let k = self
            .cpus
            .iter()
            .position(|&c| c == cpu)
            .expect("a measured CPU");
        self.tapes.lock()[k].read_marks
    }

    /// Wait until CPU `k`'s tape holds its `nth` marker (counted from 1 since the start),
    /// reading it here when there is no copier or it is late. False after `wait`.
    pub(super) fn wait_for(&self, k: usize, nth: u64, copier: bool, wait: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            if self.tapes.lock()[k].read_marks >= nth {
                return true;
            }
            if !copier || t0.elapsed() >= SELF_COPY_AFTER {
                self.read_cpu(k, None);
                if self.tapes.lock()[k].read_marks >= nth {
                    return true;
                }
            }
            if t0.elapsed() >= wait {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Take CPU `k`'s tape for the spike of its `nth` marker (its bookkeeping restarts).
    pub(super) fn take(&self, k: usize, nth: u64) -> Taken {
        let mut tapes = self.tapes.lock();
        let t = &mut tapes[k];
        let taken = Taken {
            pages: std::mem::take(&mut t.pages),
            from_ns: t.from_ns,
            read_done_ns: t.reads.iter().find(|r| r.0 >= nth).map(|r| r.1),
            read_ns: t.read_ns,
            overrun: t.overrun,
            dropped: t.dropped,
        };
        (t.read_ns, t.overrun, t.dropped) = (0, 0, 0);
        // Later markers' reads stay (this spike's read may have brought theirs too).
        t.reads.retain(|r| r.0 > nth);
        taken
    }

    /// Give back what follows a spike's session: `rest` (the page holding its marker and later
    /// ones) goes before the pages read since the take, and events from `from_ns` on are the
    /// next spike's.
    pub(super) fn give_back(&self, k: usize, mut rest: Vec<u8>, from_ns: u64) {
        let mut tapes = self.tapes.lock();
        let t = &mut tapes[k];
        rest.extend_from_slice(&t.pages);
        t.pages = rest;
        t.from_ns = from_ns;
    }

    /// Where to split `pages` at a marker's time (byte offsets): the session's pages end with
    /// the one holding the marker, the rest start with it ([`capture::split_at`]).
    pub(super) fn split_at(&self, pages: &[u8], at_ns: u64) -> (usize, usize) {
        capture::split_at(&self.layout, pages, at_ns)
    }
}

/// The copier thread: every [`COPY_SLICE`], the CPUs with a new marker are read. At
/// SCHED_FIFO 1 (above every normal task, below the measuring threads): under hackbench a
/// normal task waits tens to hundreds of ms for a CPU.
pub(super) fn spawn_copier(r: Arc<Tapes>) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("latlab-trace".into())
        .spawn(move || {
            let p = libc::sched_param { sched_priority: 1 };
            // SAFETY: plain syscall on this thread; failure (not root) leaves it SCHED_OTHER.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
            let mut pinned = false;
            while !r.quit.load(Ordering::Acquire) {
                // In a quiet window too, so its own wake-up never meets the measuring thread's.
                match r.quiet.get().filter(|_| pinned) {
                    Some(q) => {
                        let at = q.window_after(mono_ns() + COPY_SLICE.as_nanos() as u64);
                        latlab_sys::rt::sleep_until(at);
                    }
                    None => std::thread::sleep(COPY_SLICE),
                }
                if let Some(q) = r.quiet.get() {
                    // On the CPU whose schedule it waits on (it could move otherwise).
                    if !pinned {
                        pinned = q.pin().is_ok();
                    }
                    if !pinned {
                        continue;
                    }
                }
                r.copy_new();
            }
        })
        .ok()
}
