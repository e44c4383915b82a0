//! The measurement engine: one thread per CPU, each waking on an absolute schedule and
//! recording how late it woke (realfeel, Williams 2002; cyclictest).
//!
//! The hot path is sacred: `clock_nanosleep(TIMER_ABSTIME)`, `clock_gettime`, arithmetic and
//! stores into memory the thread owns, prepared before the run starts. The collector (a plain
//! thread) reads progress through atomics only: a seqlock over the totals, relaxed per-bucket
//! counters, a 64-slot ring of per-second maxima, and a single-producer ring of spikes. On a
//! spike above the trace threshold the thread may write one marker to a pre-opened tracefs fd.
//!
//! The same loop runs on a simulated clock (`--backend sim`), monomorphised, so the real
//! backend pays nothing for it.

use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicU64, Ordering::*};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;

use latlab_core::hist::{Histogram, Layout};
use latlab_core::record::SampleSpike;
use latlab_core::sim::{SimParams, SimSource};

use crate::modes::{self, Mode, ModeShared, NoWork, PeriodWork, Work};
use crate::rt::{self, Policy};

/// Per-second maxima kept in the ring before the collector must have read them.
pub const SECOND_RING: usize = 64;
/// Spikes queued for the collector before further ones are only counted.
pub const SPIKE_RING: usize = 1024;
/// Largest samples each thread keeps.
pub const TOP_N: usize = 16;

/// A histogram written by one thread and read, racily but safely, by others.
///
/// Totals are under a seqlock, so a reader sees a consistent (count, min, max, sum, sumsq);
/// bucket counters are relaxed atomics, so a mid-run snapshot may lag the totals by a few
/// samples. After the writer has finished, a snapshot is exact.
pub struct LiveHistogram {
    layout: Layout,
    counts: Box<[AtomicU64]>,
    seq: AtomicU64,
    count: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
    sum_lo: AtomicU64,
    sum_hi: AtomicU64,
    sq_lo: AtomicU64,
    sq_hi: AtomicU64,
}

/// Consistent totals read from a [`LiveHistogram`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub sum: u128,
    pub sumsq: u128,
}

impl LiveHistogram {
    pub fn new(layout: Layout) -> LiveHistogram {
        LiveHistogram {
            layout,
            counts: (0..layout.len()).map(|_| AtomicU64::new(0)).collect(),
            seq: AtomicU64::new(0),
            count: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            sum_lo: AtomicU64::new(0),
            sum_hi: AtomicU64::new(0),
            sq_lo: AtomicU64::new(0),
            sq_hi: AtomicU64::new(0),
        }
    }

    /// Record one sample. Single writer only (the owning thread). No RMW instructions: plain
    /// loads and stores, so the cost is a few cycles.
    #[inline(always)]
    pub fn record(&self, v: u64) {
        let i = self.layout.index(v);
        let c = &self.counts[i];
        c.store(c.load(Relaxed) + 1, Relaxed);
        let s = self.seq.load(Relaxed);
        self.seq.store(s + 1, Relaxed);
        fence(Release);
        self.count.store(self.count.load(Relaxed) + 1, Relaxed);
        if v < self.min.load(Relaxed) {
            self.min.store(v, Relaxed);
        }
        if v > self.max.load(Relaxed) {
            self.max.store(v, Relaxed);
        }
        let sum = (self.sum_lo.load(Relaxed) as u128 | (self.sum_hi.load(Relaxed) as u128) << 64)
            .saturating_add(v as u128);
        self.sum_lo.store(sum as u64, Relaxed);
        self.sum_hi.store((sum >> 64) as u64, Relaxed);
        let sq = (self.sq_lo.load(Relaxed) as u128 | (self.sq_hi.load(Relaxed) as u128) << 64)
            .saturating_add(v as u128 * v as u128);
        self.sq_lo.store(sq as u64, Relaxed);
        self.sq_hi.store((sq >> 64) as u64, Relaxed);
        self.seq.store(s + 2, Release);
    }

    /// Consistent totals (retries while the writer is mid-update).
    pub fn totals(&self) -> Totals {
        loop {
            let s1 = self.seq.load(Acquire);
            if s1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let t = Totals {
                count: self.count.load(Relaxed),
                min: self.min.load(Relaxed),
                max: self.max.load(Relaxed),
                sum: self.sum_lo.load(Relaxed) as u128 | (self.sum_hi.load(Relaxed) as u128) << 64,
                sumsq: self.sq_lo.load(Relaxed) as u128 | (self.sq_hi.load(Relaxed) as u128) << 64,
            };
            fence(Acquire);
            if self.seq.load(Relaxed) == s1 {
                return t;
            }
        }
    }

    /// A plain histogram. Exact once the writer has stopped; mid-run, buckets are made to
    /// agree with the totals' count by trusting the buckets (checkpoints only).
    pub fn snapshot(&self) -> Histogram {
        let t = self.totals();
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let n: u64 = counts.iter().sum();
        let exact = n == t.count;
        let (min, max, sum, sumsq) = if exact {
            (t.min, t.max, t.sum, t.sumsq)
        } else {
            // Mid-run: derive min/max from the buckets so the histogram stays consistent.
            let f = counts.iter().position(|&c| c > 0);
            let l = counts.iter().rposition(|&c| c > 0);
            match (f, l) {
                (Some(f), Some(l)) => (
                    t.min
                        .max(self.layout.lower(f))
                        .min(self.layout.upper(f) - 1),
                    t.max
                        .min(self.layout.upper(l) - 1)
                        .max(self.layout.lower(l)),
                    t.sum,
                    t.sumsq,
                ),
                _ => (0, 0, 0, 0),
            }
        };
        // A bucket may hold a sample the totals do not have yet (the writer bumps the bucket
        // before opening its sequence): with one non-empty bucket and totals still empty, the
        // clamps above give min = upper - 1 > max = lower. Both lie in the bucket either way.
        let min = min.min(max);
        Histogram::from_parts(self.layout, counts, min, max, sum, sumsq, 0, true)
            .expect("a live histogram snapshot is consistent")
    }
}

/// A spike handed to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpikeEvent {
    pub cpu: u32,
    pub intended_ns: u64,
    pub actual_ns: u64,
    pub latency_ns: u64,
    /// This thread wrote the trace marker that stopped the recorder.
    pub marker_written: bool,
}

/// Single-producer single-consumer ring of spikes.
struct SpikeRing {
    slots: Box<[[AtomicU64; 4]]>,
    head: AtomicU64, // written by producer
    tail: AtomicU64, // written by consumer
    dropped: AtomicU64,
}

impl SpikeRing {
    fn new() -> SpikeRing {
        SpikeRing {
            slots: (0..SPIKE_RING)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    #[inline]
    fn push(&self, intended: u64, actual: u64, latency: u64, marker: bool) {
        let h = self.head.load(Relaxed);
        if h - self.tail.load(Acquire) >= SPIKE_RING as u64 {
            self.dropped.store(self.dropped.load(Relaxed) + 1, Relaxed);
            return;
        }
        let s = &self.slots[(h % SPIKE_RING as u64) as usize];
        s[0].store(intended, Relaxed);
        s[1].store(actual, Relaxed);
        s[2].store(latency, Relaxed);
        s[3].store(marker as u64, Relaxed);
        self.head.store(h + 1, Release);
    }

    fn drain(&self, cpu: u32, out: &mut Vec<SpikeEvent>) {
        let h = self.head.load(Acquire);
        let mut t = self.tail.load(Relaxed);
        while t < h {
            let s = &self.slots[(t % SPIKE_RING as u64) as usize];
            out.push(SpikeEvent {
                cpu,
                intended_ns: s[0].load(Relaxed),
                actual_ns: s[1].load(Relaxed),
                latency_ns: s[2].load(Relaxed),
                marker_written: s[3].load(Relaxed) != 0,
            });
            t += 1;
        }
        self.tail.store(t, Release);
    }
}

/// What one measurement thread shares with the collector.
pub struct ThreadShared {
    pub cpu: u32,
    pub hist: LiveHistogram,
    pub last_ns: AtomicU64,
    pub missed: AtomicU64,
    seconds: [AtomicU64; SECOND_RING],
    /// Number of whole seconds whose maximum is in the ring (second k at slot k % 64).
    seconds_done: AtomicU64,
    spikes: SpikeRing,
    pub done: AtomicBool,
    /// What the wakeup, jitter and audio modes add (empty for the timer).
    pub mode: ModeShared,
}

impl ThreadShared {
    fn new(cpu: u32, layout: Layout, mode: &Mode, interval_ns: u64) -> ThreadShared {
        ThreadShared {
            cpu,
            hist: LiveHistogram::new(layout),
            last_ns: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            seconds: std::array::from_fn(|_| AtomicU64::new(0)),
            seconds_done: AtomicU64::new(0),
            spikes: SpikeRing::new(),
            done: AtomicBool::new(false),
            mode: ModeShared::new(mode, layout, interval_ns),
        }
    }

    /// Move completed per-second maxima into `out` (index = second of the measurement;
    /// `None` for a second with no sample). Call at least every 60 s.
    pub fn drain_seconds(&self, out: &mut Vec<Option<u64>>) {
        let done = self.seconds_done.load(Acquire) as usize;
        while out.len() < done {
            let v = self.seconds[out.len() % SECOND_RING].load(Relaxed);
            out.push(if v == u64::MAX { None } else { Some(v) });
        }
    }

    pub fn drain_spikes(&self, out: &mut Vec<SpikeEvent>) {
        self.spikes.drain(self.cpu, out)
    }

    pub fn dropped_spikes(&self) -> u64 {
        self.spikes.dropped.load(Relaxed)
    }
}

/// The tracefs hook: on a sample at or above `threshold_ns`, the first thread to take
/// `armed` writes one marker to the fd in `marker_fd` (which stops the recorder in the
/// kernel). The fd is an atomic because the collector ping-pongs between two recorder
/// instances: it stores the standby's fd, then sets `armed` (Release), so a thread that takes
/// `armed` (Acquire) always writes to the instance that is running.
#[derive(Clone)]
pub struct TraceHook {
    pub marker_fd: Arc<AtomicI32>,
    pub threshold_ns: u64,
    pub armed: Arc<AtomicBool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Real,
    Sim { seed: u64, realtime: bool },
}

pub struct Config {
    pub cpus: Vec<u32>,
    pub interval_ns: u64,
    pub distance_ns: u64,
    pub duration_ns: u64,
    pub policy: Policy,
    pub priority: u32,
    pub aligned: bool,
    pub layout: Layout,
    /// Samples at or above this go to the spike ring (the collector's view of spikes).
    pub spike_threshold_ns: u64,
    pub trace: Option<TraceHook>,
    pub backend: Backend,
}

/// What a thread hands back when it ends.
#[derive(Debug, Clone)]
pub struct ThreadResult {
    pub cpu: u32,
    pub tid: i64,
    pub interval_ns: u64,
    pub top: Vec<SampleSpike>,
}

/// A running measurement.
pub struct Engine {
    pub threads: Vec<Arc<ThreadShared>>,
    handles: Vec<JoinHandle<std::io::Result<ThreadResult>>>,
    /// Helper threads of a mode (wakeup senders).
    aux: Vec<JoinHandle<()>>,
    pub stop: Arc<AtomicBool>,
    /// CLOCK_MONOTONIC ns of the first intended wake-up.
    pub t0_ns: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("CPU {cpu}: cannot pin the measurement thread: {err}")]
    Pin { cpu: u32, err: std::io::Error },
    #[error("CPU {cpu}: cannot set {policy} priority {priority}: {err} (run as root, or use --backend sim)")]
    Policy {
        cpu: u32,
        policy: &'static str,
        priority: u32,
        err: std::io::Error,
    },
    #[error("the interval of thread {index} (interval + {index} × distance) does not fit in 64-bit ns; use a smaller distance")]
    Interval { index: usize },
    #[error("cannot start a measurement thread: {0}")]
    Spawn(std::io::Error),
    #[error("cannot create the {ipc} channel of a wakeup pair: {err}")]
    Channel {
        ipc: &'static str,
        err: std::io::Error,
    },
}

/// Where the loop gets its time from.
trait Clock {
    /// The loop keeps the schedule (false: the wake-ups come from elsewhere, a sender).
    const SCHEDULED: bool = true;
    /// Wait for the wake-up due at `t`; return (intended time, time at wake-up), or None
    /// when the source has ended.
    fn wait_until(&mut self, t: u64) -> Option<(u64, u64)>;
}

struct RealClock;
impl Clock for RealClock {
    #[inline(always)]
    fn wait_until(&mut self, t: u64) -> Option<(u64, u64)> {
        rt::sleep_until(t);
        Some((t, rt::now_ns()))
    }
}

impl Clock for modes::WakeupClock<'_> {
    const SCHEDULED: bool = false;
    #[inline(always)]
    fn wait_until(&mut self, _t: u64) -> Option<(u64, u64)> {
        self.next()
    }
}

struct SimClock {
    src: SimSource,
    /// Pace at wall-clock speed (`Some(offset)` maps sim time to real time).
    realtime: bool,
}
impl Clock for SimClock {
    #[inline(always)]
    fn wait_until(&mut self, t: u64) -> Option<(u64, u64)> {
        if self.realtime {
            rt::sleep_until(t);
        }
        Some((t, t + self.src.next_latency()))
    }
}

/// Format `LATLAB_STOP cpu=C intended=N actual=N latency=N\n` into `buf` without allocating.
#[inline]
pub fn format_marker(buf: &mut [u8; 128], cpu: u32, intended: u64, actual: u64, lat: u64) -> usize {
    fn put(buf: &mut [u8; 128], mut at: usize, s: &[u8]) -> usize {
        buf[at..at + s.len()].copy_from_slice(s);
        at += s.len();
        at
    }
    fn num(buf: &mut [u8; 128], at: usize, mut v: u64) -> usize {
        let mut tmp = [0u8; 20];
        let mut i = 20;
        loop {
            i -= 1;
            tmp[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        put(buf, at, &tmp[i..])
    }
    let mut at = put(buf, 0, b"LATLAB_STOP cpu=");
    at = num(buf, at, cpu as u64);
    at = put(buf, at, b" intended=");
    at = num(buf, at, intended);
    at = put(buf, at, b" actual=");
    at = num(buf, at, actual);
    at = put(buf, at, b" latency=");
    at = num(buf, at, lat);
    put(buf, at, b"\n")
}

struct LoopParams {
    t0: u64,
    first: u64,
    end: u64,
    interval: u64,
    spike_threshold: u64,
    trace: Option<TraceHook>,
}

/// The measurement loop. Everything it touches was allocated and touched before it starts.
#[inline(never)]
fn measure_loop<C: Clock, W: Work>(
    clock: &mut C,
    work: &mut W,
    sh: &ThreadShared,
    stop: &AtomicBool,
    p: &LoopParams,
    top: &mut [SampleSpike; TOP_N],
) {
    let mut next = p.first;
    let mut sec: u64 = 0;
    let mut sec_max: u64 = u64::MAX; // MAX = no sample yet this second
    let mut top_min: u64 = 0;
    let mut marker = [0u8; 128];
    let trace_thr = p.trace.as_ref().map_or(u64::MAX, |t| t.threshold_ns);
    let mut k: u64 = 0;
    while next < p.end && !stop.load(Relaxed) {
        // `intended` is `next` for the timer; for wakeup pairs, the sender's stamp.
        let Some((intended, now)) = clock.wait_until(next) else {
            break;
        };
        let lat = now.saturating_sub(intended);
        sh.hist.record(lat);
        sh.last_ns.store(lat, Relaxed);

        // Per-second maximum, published when the second is over.
        let s = intended.saturating_sub(p.t0) / 1_000_000_000;
        if s != sec {
            while sec < s {
                sh.seconds[(sec % SECOND_RING as u64) as usize].store(sec_max, Relaxed);
                sec += 1;
                sh.seconds_done.store(sec, Release);
                sec_max = u64::MAX;
            }
        }
        sec_max = if sec_max == u64::MAX {
            lat
        } else {
            sec_max.max(lat)
        };

        if lat > top_min {
            // Replace the smallest of the kept spikes (rare after warm-up).
            let (i, _) = top
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.latency_ns)
                .expect("TOP_N > 0");
            top[i] = SampleSpike {
                at_ns: intended,
                latency_ns: lat,
            };
            top_min = top.iter().map(|s| s.latency_ns).min().unwrap_or(0);
        }

        if lat >= p.spike_threshold {
            let mut wrote = false;
            if lat >= trace_thr {
                if let Some(t) = &p.trace {
                    if t.armed.swap(false, AcqRel) {
                        let n = format_marker(&mut marker, sh.cpu, intended, now, lat);
                        let fd = t.marker_fd.load(Acquire);
                        // SAFETY: fd was opened before the run and stays open until the
                        // engine is joined; buffer is valid for n bytes.
                        unsafe { libc::write(fd, marker.as_ptr().cast(), n) };
                        wrote = true;
                    }
                }
            }
            sh.spikes.push(intended, now, lat, wrote);
        }

        if W::ACTIVE {
            work.run(k, intended, now, sh);
        }
        k += 1;

        if !C::SCHEDULED {
            continue;
        }
        next += p.interval;
        if now >= next {
            // Woke more than one period late: those periods are missed, counted, and the
            // schedule realigned to the next period in the future.
            let k = (now - next) / p.interval + 1;
            sh.missed.store(sh.missed.load(Relaxed) + k, Relaxed);
            next += k * p.interval;
        }
    }
    // Publish the last (partial) second.
    sh.seconds[(sec % SECOND_RING as u64) as usize].store(sec_max, Relaxed);
    sh.seconds_done.store(sec + 1, Release);
}

impl Engine {
    /// Set up every thread (pin, policy, prefault), wait until all are ready, then start
    /// them on a common time base. Fails before measuring if any thread cannot be set up.
    pub fn start(cfg: Config) -> Result<Engine, EngineError> {
        Engine::start_mode(cfg, Mode::Timer)
    }

    /// As [`Engine::start`], in one of the [`Mode`]s.
    pub fn start_mode(cfg: Config, mode: Mode) -> Result<Engine, EngineError> {
        let n = cfg.cpus.len();
        let senders = match (&mode, cfg.backend) {
            (Mode::Wakeup { .. }, Backend::Real) => n,
            _ => 0,
        };
        // Checked before any thread starts (a thread waiting at the barrier would never end).
        let intervals = (0..n)
            .map(|i| {
                latlab_core::units::thread_interval(cfg.interval_ns, cfg.distance_ns, i)
                    .ok_or(EngineError::Interval { index: i })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(Barrier::new(n + senders + 1));
        let go = Arc::new(Barrier::new(n + senders + 1));
        let t0 = Arc::new(AtomicU64::new(0));
        let setup_err: Arc<std::sync::Mutex<Option<EngineError>>> = Arc::default();
        let mut threads = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        let mut aux = Vec::with_capacity(senders);
        for (i, &cpu) in cfg.cpus.iter().enumerate() {
            let interval = intervals[i];
            let sh = Arc::new(ThreadShared::new(cpu, cfg.layout, &mode, interval));
            threads.push(sh.clone());
            // Wakeup: the pair's channel, and its sender thread.
            let channel = match (&mode, cfg.backend) {
                (Mode::Wakeup { ipc, .. }, Backend::Real) => {
                    Some(Arc::new(modes::Channel::new(*ipc).map_err(|err| {
                        stop.store(true, Release);
                        EngineError::Channel {
                            ipc: ipc.as_str(),
                            err,
                        }
                    })?))
                }
                _ => None,
            };
            let (stop_t, ready, go, t0, setup_err) = (
                stop.clone(),
                ready.clone(),
                go.clone(),
                t0.clone(),
                setup_err.clone(),
            );
            let (policy, prio, backend, aligned) =
                (cfg.policy, cfg.priority, cfg.backend, cfg.aligned);
            let duration = cfg.duration_ns;
            let spike_threshold = cfg.spike_threshold_ns;
            let trace = cfg.trace.clone();
            let stagger = if aligned {
                0
            } else {
                (cfg.interval_ns / n as u64) * i as u64
            };
            if let (
                Some(ch),
                Mode::Wakeup {
                    sender_cpus,
                    sender_priority,
                    ..
                },
            ) = (&channel, &mode)
            {
                let (ch, sh, stop_t, ready, go, t0, setup_err) = (
                    ch.clone(),
                    sh.clone(),
                    stop.clone(),
                    ready.clone(),
                    go.clone(),
                    t0.clone(),
                    setup_err.clone(),
                );
                let scpu = sender_cpus.get(i).copied().unwrap_or(cpu);
                let sprio = *sender_priority;
                let h = std::thread::Builder::new()
                    .name(format!("latlab-send{scpu}"))
                    .stack_size(256 * 1024)
                    .spawn(move || {
                        rt::block_signals();
                        let mut ok = true;
                        if let Err(err) = rt::pin_to_cpu(scpu) {
                            *setup_err.lock().unwrap() = Some(EngineError::Pin { cpu: scpu, err });
                            ok = false;
                        } else if let Err(err) = rt::set_policy(policy, sprio) {
                            *setup_err.lock().unwrap() = Some(EngineError::Policy {
                                cpu: scpu,
                                policy: policy.as_str(),
                                priority: sprio,
                                err,
                            });
                            ok = false;
                        }
                        rt::prefault_stack(64 * 1024);
                        ready.wait();
                        go.wait();
                        if !ok || stop_t.load(Relaxed) {
                            modes::stop_receiver(&ch);
                            return;
                        }
                        let base = t0.load(Acquire);
                        modes::sender_loop(
                            &ch,
                            &sh,
                            &stop_t,
                            base + stagger,
                            base + duration,
                            interval,
                        );
                    });
                match h {
                    Ok(h) => aux.push(h),
                    Err(e) => {
                        stop.store(true, Release);
                        return Err(EngineError::Spawn(e));
                    }
                }
            }
            let mode_t = mode.clone();
            let h = std::thread::Builder::new()
                .name(format!("latlab-cpu{cpu}"))
                .stack_size(256 * 1024)
                .spawn(move || {
                    rt::block_signals();
                    let mut ok = true;
                    if backend == Backend::Real {
                        if let Err(err) = rt::pin_to_cpu(cpu) {
                            *setup_err.lock().unwrap() = Some(EngineError::Pin { cpu, err });
                            ok = false;
                        } else if let Err(err) = rt::set_policy(policy, prio) {
                            *setup_err.lock().unwrap() = Some(EngineError::Policy {
                                cpu,
                                policy: policy.as_str(),
                                priority: prio,
                                err,
                            });
                            ok = false;
                        }
                        rt::prefault_stack(64 * 1024);
                    }
                    // Jitter/audio: the kernel's buffers and its calibration, before the run
                    // (and after the policy is set, so it calibrates as it will run).
                    let (work_ns, inject_slow, buffers) = match mode_t {
                        Mode::Jitter {
                            work_ns,
                            inject_slow,
                        } => (Some(work_ns), inject_slow, None),
                        Mode::Audio {
                            work_ns,
                            buffers,
                            inject_slow,
                        } => (Some(work_ns), inject_slow, Some(buffers)),
                        _ => (None, None, None),
                    };
                    let tally = buffers.map(|b| latlab_core::modes::AudioTally::new(interval, b));
                    let mut real_work = None;
                    let mut sim_work = None;
                    if let Some(work_ns) = work_ns {
                        match backend {
                            Backend::Real => {
                                let mut kernel = modes::Kernel::new();
                                let (iterations, min) = if ok {
                                    kernel.calibrate(work_ns)
                                } else {
                                    (1, 0)
                                };
                                sh.mode.exec_iterations.store(iterations, Relaxed);
                                sh.mode.exec_calibrated_ns.store(min, Relaxed);
                                real_work = Some(PeriodWork {
                                    exec: modes::RealExec { kernel, iterations },
                                    inject_slow,
                                    tally,
                                });
                            }
                            Backend::Sim { seed, .. } => {
                                sh.mode.exec_calibrated_ns.store(work_ns, Relaxed);
                                sim_work = Some(PeriodWork {
                                    exec: modes::SimExec {
                                        rng: latlab_core::sim::SplitMix64::new(
                                            seed ^ 0x5157_4f52 ^ ((cpu as u64) << 32),
                                        ),
                                        work_ns,
                                    },
                                    inject_slow,
                                    tally,
                                });
                            }
                        }
                    }
                    let tid = rt::gettid();
                    let mut top = [SampleSpike {
                        at_ns: 0,
                        latency_ns: 0,
                    }; TOP_N];
                    ready.wait();
                    go.wait();
                    let stop = stop_t;
                    if !ok || stop.load(Relaxed) {
                        sh.done.store(true, Release);
                        return Ok(ThreadResult {
                            cpu,
                            tid,
                            interval_ns: interval,
                            top: vec![],
                        });
                    }
                    let base = t0.load(Acquire);
                    let p = LoopParams {
                        t0: base,
                        first: base + stagger,
                        end: base + duration,
                        interval,
                        spike_threshold,
                        trace,
                    };
                    match backend {
                        Backend::Real => {
                            if let Some(ch) = &channel {
                                let mut c = modes::WakeupClock {
                                    ch,
                                    last: 0,
                                    coalesced: Some(&sh.mode.coalesced),
                                };
                                measure_loop(&mut c, &mut NoWork, &sh, &stop, &p, &mut top)
                            } else if let Some(w) = real_work.as_mut() {
                                measure_loop(&mut RealClock, w, &sh, &stop, &p, &mut top)
                            } else {
                                measure_loop(&mut RealClock, &mut NoWork, &sh, &stop, &p, &mut top)
                            }
                        }
                        Backend::Sim { seed, realtime } => {
                            let mut c = SimClock {
                                src: SimSource::new(seed, cpu, SimParams::default()),
                                realtime,
                            };
                            if let Some(w) = sim_work.as_mut() {
                                measure_loop(&mut c, w, &sh, &stop, &p, &mut top)
                            } else {
                                measure_loop(&mut c, &mut NoWork, &sh, &stop, &p, &mut top)
                            }
                        }
                    }
                    sh.done.store(true, Release);
                    let mut top: Vec<SampleSpike> =
                        top.into_iter().filter(|s| s.latency_ns > 0).collect();
                    top.sort_by(|a, b| b.latency_ns.cmp(&a.latency_ns).then(a.at_ns.cmp(&b.at_ns)));
                    Ok(ThreadResult {
                        cpu,
                        tid,
                        interval_ns: interval,
                        top,
                    })
                });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The threads already spawned wait on the barrier for ever; spawn
                    // failure ends the process with this error, which takes them along.
                    stop.store(true, Release);
                    return Err(EngineError::Spawn(e));
                }
            }
        }
        ready.wait();
        let err = setup_err.lock().unwrap().take();
        if err.is_some() {
            stop.store(true, Release);
        }
        // Start 10 ms from now, on a whole millisecond, so threads begin together.
        let start = (rt::now_ns() / 1_000_000 + 10) * 1_000_000;
        t0.store(start, Release);
        go.wait();
        let engine = Engine {
            threads,
            handles,
            aux,
            stop,
            t0_ns: start,
        };
        if let Some(e) = err {
            let _ = engine.join();
            return Err(e);
        }
        Ok(engine)
    }

    pub fn all_done(&self) -> bool {
        self.threads.iter().all(|t| t.done.load(Acquire))
    }

    /// Wait for every thread; their results in CPU order.
    pub fn join(self) -> Vec<ThreadResult> {
        let res = self
            .handles
            .into_iter()
            .filter_map(|h| h.join().ok().and_then(|r| r.ok()))
            .collect();
        for h in self.aux {
            let _ = h.join();
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_format() {
        let mut b = [0u8; 128];
        let n = format_marker(&mut b, 1, 123, 456_789, 0);
        assert_eq!(
            std::str::from_utf8(&b[..n]).unwrap(),
            "LATLAB_STOP cpu=1 intended=123 actual=456789 latency=0\n"
        );
        let n = format_marker(&mut b, u32::MAX, u64::MAX, u64::MAX, u64::MAX);
        assert!(n < 128);
    }

    #[test]
    fn live_histogram_matches_plain() {
        let layout = Layout::default();
        let live = LiveHistogram::new(layout);
        let mut plain = Histogram::new(layout);
        for v in [0u64, 5, 999, 1000, 57_300, 10_000_000, 1 << 40] {
            live.record(v);
            plain.record(v);
        }
        assert_eq!(live.snapshot(), plain);
        assert_eq!(live.totals().count, 7);
    }

    #[test]
    fn snapshot_between_bucket_and_totals_is_consistent() {
        // The state a checkpoint can see while the writer is inside `record`: the bucket is
        // bumped, the totals are not. First sample (totals empty), then a later one.
        let layout = Layout::default();
        let live = LiveHistogram::new(layout);
        let i = layout.index(28_500);
        live.counts[i].store(1, Relaxed);
        let h = live.snapshot();
        assert_eq!(h.count(), 1);
        let (mn, mx) = (h.min().unwrap(), h.max().unwrap());
        assert!(mn <= mx);
        assert!(mn >= layout.lower(i) && mx < layout.upper(i));
        live.counts[i].store(0, Relaxed);
        live.record(28_700);
        live.counts[layout.index(5_000)].store(1, Relaxed);
        let h = live.snapshot();
        assert_eq!(h.count(), 2);
        assert!(h.min().unwrap() < layout.upper(layout.index(5_000)));
        assert_eq!(h.max(), Some(28_700));
    }

    #[test]
    fn sim_engine_counts_every_period() {
        let cfg = Config {
            cpus: vec![0, 1],
            interval_ns: 1_000_000,
            distance_ns: 0,
            duration_ns: 50_000_000_000,
            policy: Policy::Other,
            priority: 0,
            aligned: false,
            layout: Layout::default(),
            spike_threshold_ns: 1_000_000,
            trace: None,
            backend: Backend::Sim {
                seed: 3,
                realtime: false,
            },
        };
        let e = Engine::start(cfg).unwrap();
        let threads = e.threads.clone();
        let res = e.join();
        assert_eq!(res.len(), 2);
        for (t, r) in threads.iter().zip(&res) {
            let h = t.hist.snapshot();
            let missed = t.missed.load(Relaxed);
            // Every period is either a sample or a counted miss.
            let periods = h.count() + missed;
            assert!((49_999..=50_000).contains(&periods), "{periods} periods");
            assert!(
                missed > 0,
                "the sim has ms spikes, so some periods are missed"
            );
            let mut secs = Vec::new();
            t.drain_seconds(&mut secs);
            assert_eq!(secs.len(), 50, "{secs:?}");
            assert_eq!(secs.iter().flatten().max().copied(), h.max());
            assert_eq!(r.top[0].latency_ns, h.max().unwrap());
            let mut spikes = Vec::new();
            t.drain_spikes(&mut spikes);
            assert_eq!(spikes.len() as u64, h.count() - h.count_below(1_000_000));
        }
    }
}
