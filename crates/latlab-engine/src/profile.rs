//! `latlab profile`: `latlab run` (the same lifecycle, the same measuring threads and run
//! directory) with a scheduler profile recorded over the same seconds.
//!
//! The profile has its own tracefs instance (`latlab-<pid>-prof`, in the ledger, removed on
//! every path) with the events of [`InstanceSpec::PROFILE`] in producer/consumer mode. One
//! reader thread (SCHED_OTHER, on no particular CPU) reads every CPU's
//! `per_cpu/cpuN/trace_pipe_raw` every [`POLL`] until it is empty, decodes the pages
//! ([`StreamDecoder`]) and feeds the events to the reconstruction ([`Profiler`]) in time
//! order up to a watermark ([`LAG`] behind the poll: a CPU read empty at time t has handed over
//! its events before t), so memory stays bounded: nothing but the aggregates and a bounded raw
//! window is kept. The first `--profile-window` bytes of pages (all CPUs; kept until one CPU's
//! share is full, so every CPU covers the same seconds) go to `profile/trace.dat` for
//! `latlab export`; the heat maps' series to `profile/series.bin`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::instances::Instances;
use crate::recorder::dat_layout;
use anyhow::Context;
use latlab_core::profile::decode::StreamDecoder;
use latlab_core::profile::{PEvent, ProfileRecord, Profiler};
use latlab_core::trace::capture::{self, DatInput};
use latlab_core::trace::raw::{Comms, RawDecoder};
use latlab_sys::ledger::Ledger;
use latlab_sys::tasks;
use latlab_sys::tracefs::{self, InstanceSpec, RawLayout};

/// How often the reader empties the buffers.
const POLL: Duration = Duration::from_millis(10);
/// Events younger than this at a poll wait for the next one (other CPUs' may still come).
const LAG: u64 = 2_000_000;

/// The largest `--profile-window`: what `latlab export` reads back (whole, in memory).
pub const MAX_WINDOW: u64 = 1 << 30;

#[derive(Debug, Clone)]
pub struct ProfileOpts {
    pub top: usize,
    pub window_bytes: u64,
    pub buffer_kb: u64,
    pub duration_ns: u64,
    /// `--no-measure`: the profile alone, no measuring threads (`config.mode` `none`).
    pub no_measure: bool,
}

/// Measuring threads (tid, CPU) handed to the reader thread from outside it.
type Found = Arc<std::sync::Mutex<Vec<(i64, u32)>>>;

/// What the reader thread hands back.
struct Output {
    record: ProfileRecord,
    series: Vec<u8>,
    window: Vec<(u32, Vec<u8>)>,
    names: Comms,
    read_errors: Vec<String>,
}

pub struct ProfileSession {
    /// The profile's one instance (`latlab-<pid>-prof`), removed with it.
    set: Instances,
    quit: Arc<AtomicBool>,
    /// Measuring threads found by [`ProfileSession::measuring_started`], for the reader.
    found: Found,
    thread: Option<std::thread::JoinHandle<Output>>,
    layout: RawLayout,
    clock: String,
    cpus: Vec<u32>,
}

impl ProfileSession {
    /// Create the instance, seed the run queues from /proc, start tracing and the reader.
    pub fn start(
        o: &ProfileOpts,
        ledger: Arc<Mutex<Ledger>>,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<ProfileSession> {
        let mut set = Instances::open(&Instances::default_root(), ledger)
            .context("latlab profile needs tracefs (run as root)")?;
        let rec = set
            .create("prof", o.buffer_kb, &InstanceSpec::PROFILE)
            .context("cannot create the profile's tracefs instance")?;
        if !rec.missing.is_empty() {
            warnings.push(format!(
                "profile without these events (not in this kernel): {}",
                rec.missing.join(", ")
            ));
        }
        if rec.clock != "mono" {
            warnings.push(format!(
                "profile: trace clock {} (not mono): times are not on CLOCK_MONOTONIC",
                rec.clock
            ));
        }
        let layout = rec
            .raw
            .clone()
            .map_err(|e| anyhow::anyhow!("the profile reads binary pages only: {e}"))?;
        let formats: Vec<&str> = layout.formats.iter().map(String::as_str).collect();
        let mut dec = StreamDecoder::new(&layout.header_page, &layout.header_event, &formats)
            .map_err(|e| anyhow::anyhow!("the profile cannot decode this kernel's events: {e}"))?;
        let cpus = latlab_sys::rt::online_cpus()?;
        let mut files = Vec::new();
        for &c in &cpus {
            files.push(CpuSource {
                cpu: c,
                file: rec.open_cpu_raw(c)?,
                dir: rec.dir().to_path_buf(),
                dropped: 0,
                held: Vec::new(),
                drop_pending: false,
            });
        }
        let start_ns = mono_ns();
        let mut prof = Profiler::new(&cpus, start_ns, o.duration_ns);
        // The run queues' seed: the tasks runnable now (what is uncertain: see
        // latlab_core::profile).
        for (pid, cpu, prio) in tasks::runnable(Path::new("/")) {
            prof.seed_runnable(pid, cpu, prio);
        }
        rec.start()
            .context("cannot start the profile's tracefs instance")?;
        let quit = Arc::new(AtomicBool::new(false));
        let q = quit.clone();
        let found = Found::default();
        let f = found.clone();
        let opts = ReaderOpts {
            page: dec.page_size(),
            top: o.top,
            window_cap: o.window_bytes / cpus.len().max(1) as u64,
        };
        let thread = std::thread::Builder::new()
            .name("latlab-profile".into())
            .spawn(move || reader(files, &mut dec, prof, q, f, opts))
            .context("cannot start the profile reader")?;
        let clock = rec.clock.clone();
        Ok(ProfileSession {
            set,
            quit,
            found,
            thread: Some(thread),
            layout,
            clock,
            cpus,
        })
    }

    /// The measuring threads have started (all named, none measuring yet): hand them to the
    /// reader now. Its own scan at each poll can miss them all: under TCG on 8 CPUs one pass
    /// of the reader (SCHED_OTHER, decoding every CPU's pages behind a load) took longer than
    /// a 2 s measurement, and the profile had no measuring thread.
    pub fn measuring_started(&self) {
        let mut m = MeasuringThreads::default();
        let mut v = Vec::new();
        m.scan(|tid, cpu| v.push((tid, cpu)));
        self.found
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(v);
    }

    /// Stop tracing, read what is left, remove the instance, write the side files into `dir`
    /// (`profile/series.bin`, `profile/trace.dat`): the record's `profile`.
    pub fn finish(mut self, dir: &Path, warnings: &mut Vec<String>) -> Option<ProfileRecord> {
        if let Some(r) = self.set.all().first() {
            let _ = r.stop();
        }
        self.quit.store(true, Ordering::Release);
        let out = self.thread.take().and_then(|t| t.join().ok());
        let mut dropped = 0u64;
        if let Some(r) = self.set.all().first() {
            for &c in &self.cpus {
                dropped += dropped_events(r.dir(), c);
            }
        }
        let _ = self.set.remove();
        let mut out = out?;
        warnings.append(&mut out.read_errors);
        out.record.lost_events = out.record.lost_events.max(dropped);
        if out.record.lost_events > 0 || out.record.lost_unknown > 0 {
            warnings.push(format!(
                "profile: the kernel dropped {} events (the reader fell behind; raise --profile-buffer): the gaps are left out of rq_share",
                out.record.lost_events
            ));
        }
        if out.record.unrecorded_switches > 0 {
            warnings.push(format!(
                "profile: the kernel's record lacks {} context switches though it counted no loss (a task switched out that it never switched in): wake-up and switch counts may be short by as many",
                out.record.unrecorded_switches
            ));
        }
        let pdir = dir.join("profile");
        if let Err(e) = latlab_sys::safefile::ensure_private_dir(&pdir) {
            warnings.push(format!("profile: cannot write {}: {e}", pdir.display()));
            return Some(out.record);
        }
        match latlab_sys::safefile::write_atomic_unsynced(&pdir.join("series.bin"), &out.series) {
            Ok(()) => out.record.series = Some("profile/series.bin".into()),
            Err(e) => warnings.push(format!("profile: series.bin: {e}")),
        }
        if out.window.iter().any(|(_, p)| !p.is_empty()) {
            let formats: Vec<&str> = self.layout.formats.iter().map(String::as_str).collect();
            let dat = RawDecoder::new(
                &self.layout.header_page,
                &self.layout.header_event,
                &formats,
            )
            .ok()
            .and_then(|dec| {
                let cpus: Vec<(u32, &[u8])> =
                    out.window.iter().map(|(c, p)| (*c, p.as_slice())).collect();
                capture::trace_dat(&DatInput {
                    decoder: &dec,
                    layout: dat_layout(&self.layout, &self.clock),
                    cpus: &cpus,
                    comms: &out.names,
                    events: &[],
                })
            });
            match dat {
                Some(d) => {
                    if let Err(e) =
                        latlab_sys::safefile::write_atomic_unsynced(&pdir.join("trace.dat"), &d)
                    {
                        warnings.push(format!("profile: trace.dat: {e}"));
                    }
                }
                None => warnings.push("profile: could not write trace.dat".into()),
            }
        }
        Some(out.record)
    }
}

impl Drop for ProfileSession {
    /// The reader first (its files are open); then the instance goes with `set`.
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One CPU's buffer as the reader sees it: its `trace_pipe_raw`, the instance (for its
/// `stats`) and the kernel's count of events it dropped so far.
struct CpuSource {
    cpu: u32,
    file: std::fs::File,
    dir: PathBuf,
    dropped: u64,
    /// Events held back from the profiler: the last of the read before the last, and all of
    /// the last read; a drop found after the last read lies among them (see [`place_drops`]).
    held: Vec<PEvent>,
    /// A drop found and not placed yet.
    drop_pending: bool,
}

/// Producer/consumer mode: a full buffer drops new events and marks no page, so a loss is
/// found in `per_cpu/cpuN/stats` (`dropped events`), read right after each read of the CPU's
/// pages ([`count_drops`]). Drops found after read `j` happened after the last event of read
/// `j − 1` and before the first event of read `j + 1`: a reader stopped between two reads, or
/// in the middle of one (SIGSTOP), finds the full buffer's old events and the new ones
/// written once its first pages were freed in one read, or in two. So each CPU's events are
/// held back ([`CpuSource::held`]: the last event of read `j − 1` and all of read `j`) until
/// read `j + 1`, and the drop is placed in the longest silence from the first held event to
/// the first of read `j + 1`, on the event that begins it (`lost_after`): the CPU's state is
/// unknown from there to its next own event, whatever other CPUs' wake-ups and migrations
/// say of its run queue meanwhile. The kernel drops only when the buffer is full, i.e. when
/// the CPU is busy, so that silence is the drop's; on a CPU that is also idle for long at
/// times the placement is uncertain (docs/design.md, "Profile").
fn count_drops(src: &mut CpuSource, lost: &mut u64) {
    let dropped = dropped_events(&src.dir, src.cpu);
    if dropped > src.dropped {
        *lost += dropped - src.dropped;
        src.dropped = dropped;
        src.drop_pending = true;
    }
}

/// A read of `src` gave `new` (in time order, maybe none): place a pending drop among the
/// held events and the first of `new`, hand all held events but the last to `out`, and hold
/// `new` after it.
fn place_drops(src: &mut CpuSource, mut new: Vec<PEvent>, out: &mut Vec<PEvent>) {
    if src.drop_pending {
        // The silence between candidates k − 1 and k, largest first; it begins at a held
        // event (k − 1 < held.len()).
        let cand: Vec<u64> = src.held.iter().chain(new.first()).map(|e| e.ts).collect();
        let best = (1..cand.len()).max_by_key(|&k| (cand[k].saturating_sub(cand[k - 1]), k));
        if let Some(k) = best {
            src.held[k - 1].lost_after = true;
            src.drop_pending = false;
        } else if let (true, Some(e)) = (src.held.is_empty(), new.first_mut()) {
            // Nothing held to begin the silence: unknown since the CPU's previous event.
            e.lost_before = true;
            src.drop_pending = false;
        }
    }
    if new.is_empty() && !src.drop_pending {
        // The buffer was empty at this read and nothing is pending: a later drop lies after
        // this read, so nothing held can begin its silence. (An idle CPU would otherwise
        // hold the watermark, and every CPU's events, back until its next event.)
        out.append(&mut src.held);
        return;
    }
    if src.held.len() > 1 {
        let keep = src.held.split_off(src.held.len() - 1);
        out.append(&mut src.held);
        src.held = keep;
    }
    src.held.extend(new);
}

/// Every event still held (at the end): a pending drop placed among them.
fn release_all(src: &mut CpuSource, out: &mut Vec<PEvent>) {
    place_drops(src, Vec::new(), out);
    out.append(&mut src.held);
}

/// What the reader thread is given besides its sources: the page size, how many tasks the
/// record names, and each CPU's share of `--profile-window`.
struct ReaderOpts {
    page: usize,
    top: usize,
    window_cap: u64,
}

/// What the reader gathers from poll to poll.
struct Gathered {
    /// Events handed over by the CPUs' sources, waiting for the watermark.
    pending: Vec<PEvent>,
    lost_flag: HashMap<u32, bool>,
    /// Each CPU's first pages, for `trace.dat`, while they fit in `window_cap`.
    window: Vec<(u32, Vec<u8>)>,
    window_cap: u64,
    window_open: bool,
    lost: u64,
    lost_unknown: u64,
    errors: Vec<String>,
}

impl Gathered {
    fn new(files: &[CpuSource], window_cap: u64) -> Gathered {
        Gathered {
            pending: Vec::new(),
            lost_flag: HashMap::new(),
            window: files.iter().map(|c| (c.cpu, Vec::new())).collect(),
            window_cap,
            window_open: window_cap > 0,
            lost: 0,
            lost_unknown: 0,
            errors: Vec::new(),
        }
    }

    /// A read or decode error, the first four kept.
    fn error(&mut self, e: String) {
        if self.errors.len() < 4 {
            self.errors.push(e);
        }
    }

    /// Read the `i`-th CPU's new pages: decoded, its drops placed and counted, its pages
    /// kept for the window while it has room.
    fn read(&mut self, i: usize, src: &mut CpuSource, dec: &mut StreamDecoder, page: usize) {
        let (cpu, f) = (&src.cpu.clone(), &mut src.file);
        let pages = match tracefs::read_pages(&mut *f, page, usize::MAX, || {}) {
            Ok(p) => p,
            Err(e) => {
                self.error(format!("profile: CPU {cpu}: read: {e}"));
                return;
            }
        };
        let mut new = Vec::new();
        if !pages.is_empty() {
            let lf = self.lost_flag.entry(*cpu).or_default();
            match dec.decode(*cpu, &pages, lf, &mut new) {
                Ok(st) => {
                    self.lost += st.lost_events;
                    self.lost_unknown += st.lost_unknown;
                }
                Err(e) => self.error(format!("profile: CPU {cpu}: {e}")),
            }
            new.sort_by_key(|e| e.ts);
        }
        place_drops(src, new, &mut self.pending);
        count_drops(src, &mut self.lost);
        if pages.is_empty() {
            return;
        }
        if self.window_open {
            let w = &mut self.window[i].1;
            if (w.len() + pages.len()) as u64 <= self.window_cap {
                w.extend_from_slice(&pages);
            } else {
                self.window_open = false;
            }
        }
    }
}

/// The reader thread: poll, decode, merge to the watermark, reconstruct.
fn reader(
    mut files: Vec<CpuSource>,
    dec: &mut StreamDecoder,
    mut prof: Profiler,
    quit: Arc<AtomicBool>,
    found: Found,
    opts: ReaderOpts,
) -> Output {
    let mut g = Gathered::new(&files, opts.window_cap);
    let mut measuring = MeasuringThreads::default();
    loop {
        let last = quit.load(Ordering::Acquire);
        let wm = if last {
            u64::MAX
        } else {
            mono_ns().saturating_sub(LAG)
        };
        for (i, src) in files.iter_mut().enumerate() {
            g.read(i, src, dec, opts.page);
        }
        // Before the events up to the watermark: a measuring thread started since the last
        // scan has no event older than the previous watermark, so none of its is missed.
        // Those found from outside (before any of their events is past the watermark: the
        // reader has not handed events over since they started, or its own scan found them).
        for (tid, cpu) in std::mem::take(&mut *found.lock().unwrap_or_else(|p| p.into_inner())) {
            if measuring.known.insert(tid) {
                prof.watch(tid, cpu);
            }
        }
        if !last {
            measuring.scan(|tid, cpu| prof.watch(tid, cpu));
        }
        if last {
            for src in files.iter_mut() {
                release_all(src, &mut g.pending);
            }
        }
        // Held events are not handed over yet: nothing after the oldest of them either.
        let wm = files
            .iter()
            .filter_map(|c| c.held.first().map(|e| e.ts))
            .fold(wm, u64::min);
        g.pending.sort_by_key(|e| e.ts);
        let n = g.pending.partition_point(|e| e.ts < wm);
        for e in g.pending.drain(..n) {
            prof.event(&e);
        }
        if last {
            break;
        }
        std::thread::sleep(POLL);
    }
    let names = dec.names();
    let (record, series) = prof.finish(
        mono_ns(),
        opts.top,
        |pid| dec.name(pid),
        g.lost,
        g.lost_unknown,
    );
    Output {
        record,
        series: series.to_bytes(),
        window: g.window,
        names,
        read_errors: g.errors,
    }
}

/// latlab's measuring threads (`latlab-cpuN` in this process), found in `/proc/self/task`
/// at every poll and handed to the profiler to watch.
#[derive(Default)]
struct MeasuringThreads {
    /// Tids settled: watched, or named otherwise (a thread not named yet has its parent's
    /// name and is looked at again).
    known: std::collections::HashSet<i64>,
    main_comm: Option<String>,
}

impl MeasuringThreads {
    /// Calls `watch` for each measuring thread not known yet.
    fn scan(&mut self, mut watch: impl FnMut(i64, u32)) {
        let root = Path::new("/");
        let main = self
            .main_comm
            .get_or_insert_with(|| tasks::own_comm(root).unwrap_or_default());
        for tid in tasks::own_threads(root) {
            if self.known.contains(&tid) {
                continue;
            }
            let Some(comm) = tasks::own_thread_comm(root, tid) else {
                continue;
            };
            if let Some(cpu) = measuring_cpu(&comm) {
                watch(tid, cpu);
                self.known.insert(tid);
            } else if comm != *main {
                self.known.insert(tid);
            }
        }
    }
}

/// N of a measuring thread's name `latlab-cpuN`.
fn measuring_cpu(comm: &str) -> Option<u32> {
    let n = comm.strip_prefix("latlab-cpu")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// `dropped events:` of a CPU's stats (events the producer/consumer buffer refused).
fn dropped_events(dir: &Path, cpu: u32) -> u64 {
    std::fs::read_to_string(dir.join(format!("per_cpu/cpu{cpu}/stats")))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("dropped events:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

use latlab_sys::rt::now_ns as mono_ns;

#[cfg(test)]
mod tests {
    #[test]
    fn measuring_thread_names() {
        assert_eq!(super::measuring_cpu("latlab-cpu0"), Some(0));
        assert_eq!(super::measuring_cpu("latlab-cpu17"), Some(17));
        for n in [
            "latlab-cpu",
            "latlab-cpu1x",
            "latlab-send1",
            "latlab",
            "latlab-cpu-1",
        ] {
            assert_eq!(super::measuring_cpu(n), None, "{n}");
        }
    }
}
