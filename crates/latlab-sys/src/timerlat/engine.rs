//! The measurement: the instance and the waiting threads started, then one reader thread
//! (on a housekeeping CPU, as latlab's own threads are) that copies each CPU's binary pages
//! every few milliseconds, decodes the samples and publishes them into the CPU's
//! [`ThreadShared`], until the run's duration is over or it is stopped; then the workers are
//! ended, the last pages read, the tracer stopped and the settings restored.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use latlab_core::hist::Layout;
use latlab_core::record::SampleSpike;
use latlab_core::trace::raw::{MissedActivations, TimerlatContext, TimerlatSample};

use super::setup::{Instance, InstanceConfig, Threads};
use super::workers::{kernel_threads, UserWorkers};
use crate::hotloop::{format_marker, TraceHook, TOP_N};
use crate::ledger::Ledger;
use crate::live::{ModeShared, Seconds, ThreadShared};
use crate::measure::ThreadResult;
use crate::rt::{self, Policy};

/// What the run asks.
pub struct Config {
    /// tracefs (mounted).
    pub root: PathBuf,
    pub cpus: Vec<u32>,
    pub interval_ns: u64,
    pub duration_ns: u64,
    pub policy: Policy,
    pub priority: u32,
    pub layout: Layout,
    pub spike_threshold_ns: u64,
    pub trace: Option<TraceHook>,
    /// The kernel's threads even where `timerlat_fd` exists.
    pub kernel_threads: bool,
    pub buffer_kb: u64,
}

/// A running timerlat measurement.
pub struct Engine {
    pub threads: Vec<Arc<ThreadShared>>,
    pub t0_ns: u64,
    pub stop: Arc<AtomicBool>,
    /// Whose threads measure.
    pub kind: Threads,
    done: Arc<AtomicBool>,
    reader: Option<JoinHandle<(Vec<ThreadResult>, Vec<String>)>>,
}

/// How often the reader copies the rings.
const READ_EVERY_NS: u64 = 10_000_000;

impl Engine {
    /// Start the tracer in latlab's instance and the threads that wait on it. Err: one line
    /// (nothing is left changed).
    pub fn start(cfg: Config, ledger: Arc<Mutex<Ledger>>) -> Result<Engine, String> {
        if !cfg.interval_ns.is_multiple_of(1_000)
            || !(100_000..=1_000_000_000).contains(&cfg.interval_ns)
        {
            return Err(format!(
                "--backend timerlat: the interval is the tracer's period, whole µs from 100us to 1s (not {} ns)",
                cfg.interval_ns
            ));
        }
        let offered = super::probe(&cfg.root, &cfg.cpus)?;
        let kind = if cfg.kernel_threads {
            Threads::Kernel
        } else {
            offered
        };
        let icfg = InstanceConfig {
            name: format!("latlab-{}-timerlat", std::process::id()),
            cpus: cfg.cpus.clone(),
            period_us: cfg.interval_ns / 1_000,
            threads: kind,
            buffer_kb: cfg.buffer_kb,
        };
        let inst = Instance::start(&cfg.root, &icfg, &mut ledger.lock().unwrap())?;
        let fail = |inst: Instance, e: String| -> Result<Engine, String> {
            let _ = inst.finish(&mut ledger.lock().unwrap());
            Err(e)
        };
        let mut raw = Vec::new();
        for &c in &cfg.cpus {
            match crate::tracefs::open_cpu_raw_at(inst.dir(), c) {
                Ok(f) => raw.push(f),
                Err(e) => return fail(inst, format!("cannot read the CPU {c} ring: {e}")),
            }
        }
        let user = kind == Threads::User;
        let threads: Vec<Arc<ThreadShared>> = cfg
            .cpus
            .iter()
            .map(|&c| {
                Arc::new(ThreadShared::new(
                    c,
                    cfg.layout,
                    ModeShared::timerlat(cfg.layout, user),
                    cfg.interval_ns,
                    true,
                ))
            })
            .collect();
        let (workers, pids) = match kind {
            Threads::User => {
                match UserWorkers::start(
                    &cfg.root.join("osnoise"),
                    &cfg.cpus,
                    cfg.policy,
                    cfg.priority,
                ) {
                    Ok(w) => {
                        let p = w.pids.clone();
                        (Some(w), p)
                    }
                    Err(e) => {
                        drop(raw);
                        return fail(inst, e);
                    }
                }
            }
            Threads::Kernel => {
                match kernel_threads("timerlat/", &cfg.cpus, cfg.policy, cfg.priority) {
                    Ok(p) => (None, p),
                    Err(e) => {
                        drop(raw);
                        return fail(inst, e);
                    }
                }
            }
        };
        // The measurement starts once every thread waits (forking and opening take a while
        // under emulation): activations before it are not the run's.
        let t0_ns = rt::now_ns();
        for t in &threads {
            t.first_ns.store(t0_ns + cfg.interval_ns, Release);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let reader = Reader {
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
            user,
            t0: t0_ns,
            end: t0_ns + cfg.duration_ns,
            period: cfg.interval_ns,
            spike_threshold: cfg.spike_threshold_ns,
            trace: cfg.trace,
            page: inst.decoder.page_size(),
            buf: Vec::with_capacity(1 << 20),
            marker: [0; 128],
        };
        let (stop2, done2) = (stop.clone(), done.clone());
        let h = std::thread::Builder::new()
            .name("latlab-timerlat".into())
            .spawn(move || {
                rt::block_signals();
                let mut reader = reader;
                let mut workers = workers;
                reader.run(&inst, &stop2);
                if let Some(w) = workers.as_mut() {
                    w.stop();
                }
                reader.drain(&inst);
                let results = reader.finish();
                drop(reader);
                let lines = inst.finish(&mut ledger.lock().unwrap());
                done2.store(true, Release);
                (results, lines)
            });
        match h {
            Ok(h) => Ok(Engine {
                threads,
                t0_ns,
                stop,
                kind,
                done,
                reader: Some(h),
            }),
            Err(e) => Err(format!("cannot start the timerlat reader: {e}")),
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

/// One CPU as the reader publishes it (the hot loop's bookkeeping, per sample).
struct Sink {
    sh: Arc<ThreadShared>,
    raw: File,
    tid: Option<i64>,
    missed: MissedActivations,
    seconds: Seconds,
    top: [SampleSpike; TOP_N],
    top_min: u64,
    /// The last IRQ and thread samples (seqnum, latency): a spike's activation's own.
    irq: Option<(u32, u64)>,
    thread: Option<(u32, u64)>,
}

impl Sink {
    fn new(sh: Arc<ThreadShared>, raw: File, tid: Option<i64>) -> Sink {
        Sink {
            sh,
            raw,
            tid,
            missed: MissedActivations::default(),
            seconds: Seconds::new(),
            top: [SampleSpike {
                at_ns: 0,
                latency_ns: 0,
            }; TOP_N],
            top_min: 0,
            irq: None,
            thread: None,
        }
    }
}

struct Reader {
    sinks: Vec<Sink>,
    user: bool,
    t0: u64,
    end: u64,
    period: u64,
    spike_threshold: u64,
    trace: Option<TraceHook>,
    page: usize,
    buf: Vec<u8>,
    marker: [u8; 128],
}

impl Reader {
    fn run(&mut self, inst: &Instance, stop: &AtomicBool) {
        let mut next = self.t0 + READ_EVERY_NS;
        while !stop.load(Acquire) {
            rt::sleep_until(next);
            self.drain(inst);
            let now = rt::now_ns();
            if now >= self.end {
                break;
            }
            next = (next + READ_EVERY_NS).max(now + READ_EVERY_NS / 2);
        }
    }

    /// Copy and publish what every CPU's ring holds.
    fn drain(&mut self, inst: &Instance) {
        for i in 0..self.sinks.len() {
            self.buf.clear();
            let _ = crate::tracefs::read_pages_into(
                &self.sinks[i].raw,
                self.page,
                &mut self.buf,
                usize::MAX,
                || {},
            );
            let buf = std::mem::take(&mut self.buf);
            let _ = inst.decoder.samples(&buf, |s| self.publish(i, &s));
            self.buf = buf;
        }
    }

    fn publish(&mut self, i: usize, s: &TimerlatSample) {
        let intended = s.intended_ns();
        if intended < self.t0 || intended >= self.end {
            return;
        }
        let user = self.user;
        let sink = &mut self.sinks[i];
        let main = match s.context {
            TimerlatContext::Irq => {
                if let Some(h) = &sink.sh.mode.irq {
                    h.record(s.latency_ns);
                }
                sink.irq = Some((s.seqnum, s.latency_ns));
                false
            }
            TimerlatContext::Thread if user => {
                if let Some(h) = &sink.sh.mode.thread {
                    h.record(s.latency_ns);
                }
                sink.thread = Some((s.seqnum, s.latency_ns));
                false
            }
            TimerlatContext::Thread => true,
            TimerlatContext::User => user,
        };
        if !main {
            return;
        }
        let lat = s.latency_ns;
        let sh = &sink.sh;
        let missed = sink.missed.before(s, self.period);
        if missed > 0 {
            sh.missed.store(sh.missed.load(Relaxed) + missed, Relaxed);
        }
        sh.hist.record(lat);
        sh.last_ns.store(lat, Relaxed);
        sh.woke_ns.store(intended, Relaxed);
        sink.seconds
            .add(sh, (intended - self.t0) / 1_000_000_000, lat);
        if lat > sink.top_min {
            if let Some(m) = sink.top.iter_mut().min_by_key(|t| t.latency_ns) {
                *m = SampleSpike {
                    at_ns: intended,
                    latency_ns: lat,
                };
            }
            sink.top_min = sink.top.iter().map(|t| t.latency_ns).min().unwrap_or(0);
        }
        if lat >= self.spike_threshold {
            let mut wrote = false;
            if let Some(t) = self.trace.as_ref().filter(|t| lat >= t.threshold_ns) {
                let fd = match &t.marks {
                    Some(_) => t.armed_fd.load(Acquire),
                    None => t.armed_fd.swap(-1, AcqRel),
                };
                if fd >= 0 {
                    let n = format_marker(&mut self.marker, sh.cpu, intended, s.ts, lat, false);
                    // SAFETY: the marker fd stays open until the measurement is joined.
                    unsafe { libc::write(fd, self.marker.as_ptr().cast(), n) };
                    wrote = true;
                    if let Some(m) = t.marks.as_ref().and_then(|m| m.get(sh.cpu as usize)) {
                        m.fetch_add(1, Release);
                    }
                }
            }
            // The same activation's IRQ (and, for the return to user, thread) latency.
            let of = |c: Option<(u32, u64)>| c.filter(|c| c.0 == s.seqnum).map(|c| c.1);
            let thread = of(sink.thread).filter(|_| user);
            sh.spikes
                .push_contexts([intended, s.ts, lat], wrote, of(sink.irq), thread);
        }
    }

    /// The last seconds published, each CPU's thread marked done; the results.
    fn finish(&mut self) -> Vec<ThreadResult> {
        self.sinks
            .iter_mut()
            .map(|s| {
                let sh = &s.sh;
                s.seconds.finish(sh);
                sh.done.store(true, Release);
                let mut top: Vec<SampleSpike> =
                    s.top.iter().copied().filter(|t| t.latency_ns > 0).collect();
                top.sort_by(|a, b| b.latency_ns.cmp(&a.latency_ns).then(a.at_ns.cmp(&b.at_ns)));
                ThreadResult {
                    cpu: sh.cpu,
                    tid: s.tid.unwrap_or(0),
                    interval_ns: sh.interval_ns,
                    top,
                }
            })
            .collect()
    }
}

/// The tracefs root latlab measures with: mounted (ledger entry first when latlab mounts it).
pub fn tracefs_root(ledger: &mut Ledger) -> Result<PathBuf, String> {
    crate::tracefs::ensure_mounted(Path::new(crate::tracefs::DEFAULT_ROOT), ledger)
        .map(|t| t.root)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(user: bool) -> Reader {
        let layout = Layout::default();
        let sh = Arc::new(ThreadShared::new(
            1,
            layout,
            ModeShared::timerlat(layout, user),
            1_000_000,
            true,
        ));
        Reader {
            sinks: vec![Sink::new(sh, File::open("/dev/null").unwrap(), Some(7))],
            user,
            t0: 10_000_000_000,
            end: 13_000_000_000,
            period: 1_000_000,
            spike_threshold: 500_000,
            trace: None,
            page: 4096,
            buf: Vec::new(),
            marker: [0; 128],
        }
    }

    fn s(k: u64, seq: u32, context: TimerlatContext, lat: u64) -> TimerlatSample {
        let expiry = 10_000_000_000 + k * 1_000_000;
        TimerlatSample {
            ts: expiry + lat,
            seqnum: seq,
            context,
            latency_ns: lat,
        }
    }

    #[test]
    fn each_context_goes_to_its_series() {
        use TimerlatContext::*;
        let mut r = reader(true);
        // Period 1: all three contexts. Period 2: lost from the ring (no seqnum 2). Period 4:
        // skipped by the thread late in period 3 (the kernel re-armed on period 5; the
        // seqnum counts activations, so it moved by one). An IRQ at 1.1 s, a sample after
        // the end and one before the start.
        for x in [
            s(1, 1, Irq, 2_000),
            s(1, 1, Thread, 5_000),
            s(1, 1, User, 7_000),
            s(3, 3, Irq, 1_000),
            s(3, 3, Thread, 3_000),
            s(3, 3, User, 4_000),
            s(5, 4, Irq, 1_500),
            s(5, 4, Thread, 900_000),
            s(5, 4, User, 1_100_000),
            s(1_100, 5, Irq, 1_000),
            s(3_000, 6, User, 3_000),
        ] {
            r.publish(0, &x);
        }
        let mut before = s(0, 0, User, 5_000);
        before.ts -= 1_000_000;
        r.publish(0, &before);
        let sh = r.sinks[0].sh.clone();
        let main = sh.hist.snapshot();
        assert_eq!(main.count(), 3);
        assert_eq!(main.max(), Some(1_100_000));
        assert_eq!(sh.mode.irq.as_ref().unwrap().snapshot().count(), 4);
        let thread = sh.mode.thread.as_ref().unwrap().snapshot();
        assert_eq!((thread.count(), thread.max()), (3, Some(900_000)));
        // Activations 2 and 4 had no return to user.
        assert_eq!(sh.missed.load(Relaxed), 2);
        let mut spikes = Vec::new();
        sh.drain_spikes(&mut spikes);
        assert_eq!(spikes.len(), 1);
        assert_eq!(spikes[0].intended_ns, 10_005_000_000);
        assert_eq!(spikes[0].latency_ns, 1_100_000);
        // The same activation's IRQ and thread latencies (seqnum 4), not the last ones read.
        assert_eq!(
            (spikes[0].irq_ns, spikes[0].thread_ns),
            (Some(1_500), Some(900_000))
        );
        let res = r.finish();
        assert_eq!(res[0].tid, 7);
        assert_eq!(res[0].top[0].latency_ns, 1_100_000);
        assert!(sh.done.load(Acquire));
        let mut secs = Vec::new();
        sh.drain_seconds(&mut secs);
        assert_eq!(secs, vec![Some(1_100_000)]);
    }

    #[test]
    fn with_the_kernels_threads_the_thread_is_the_cpus_series() {
        use TimerlatContext::*;
        let mut r = reader(false);
        for x in [
            s(1, 1, Irq, 2_000),
            s(1, 1, Thread, 5_000),
            s(2, 2, Irq, 1_000),
        ] {
            r.publish(0, &x);
        }
        let sh = &r.sinks[0].sh;
        assert_eq!(sh.hist.snapshot().count(), 1);
        assert_eq!(sh.hist.snapshot().max(), Some(5_000));
        assert!(sh.mode.thread.is_none());
        assert_eq!(sh.mode.irq.as_ref().unwrap().snapshot().count(), 2);
        // A spike of the kernel's thread: its IRQ latency only (the thread is the spike), and
        // none when its activation's IRQ sample was not read (seqnum 9 after IRQ 3's).
        r.publish(0, &s(3, 3, Irq, 4_000));
        r.publish(0, &s(3, 3, Thread, 700_000));
        r.publish(0, &s(9, 9, Thread, 800_000));
        let mut spikes = Vec::new();
        r.sinks[0].sh.drain_spikes(&mut spikes);
        let got: Vec<_> = spikes.iter().map(|e| (e.irq_ns, e.thread_ns)).collect();
        assert_eq!(got, [(Some(4_000), None), (None, None)]);
    }
}
