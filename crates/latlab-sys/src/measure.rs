//! The measurement engine: one measuring thread per CPU (and a mode's helper threads), set
//! up (pinned, policy, prefaulted stack, the mode's loop built) before a common start, then
//! left alone; the collector reads their progress through [`crate::live`].
//!
//! The engine only spawns threads: what a thread measures is its [`Mode`]'s
//! ([`crate::modes`]), and the loop it runs is [`crate::hotloop`]'s.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;

use latlab_core::hist::Layout;
use latlab_core::record::SampleSpike;

use crate::hotloop::LoopParams;
pub use crate::hotloop::{format_marker, Backend, TraceHook, TOP_N};
pub use crate::live::{LiveHistogram, SpikeEvent, ThreadShared, Totals, SECOND_RING, SPIKE_RING};
use crate::modes::{self, Mode, ThreadEnv};
use crate::rt::{self, Policy};

pub struct Config {
    pub cpus: Vec<u32>,
    pub interval_ns: u64,
    pub distance_ns: u64,
    pub duration_ns: u64,
    pub policy: Policy,
    pub priority: u32,
    /// Thread i runs at `priority − i × priority_step` (at least 1): cyclictest's
    /// `--priospread` is 1.
    pub priority_step: u32,
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
    /// CLOCK_MONOTONIC ns of the common start (a whole millisecond); each thread's first
    /// intended wake-up is [`first_offset`] after it.
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

/// What every thread of the engine waits on and reports to during set-up.
#[derive(Clone)]
struct StartLine {
    stop: Arc<AtomicBool>,
    ready: Arc<Barrier>,
    go: Arc<Barrier>,
    /// CLOCK_MONOTONIC ns of the common start, published between the two barriers.
    t0: Arc<AtomicU64>,
    setup_err: Arc<Mutex<Option<EngineError>>>,
}

impl StartLine {
    /// Pin the calling thread and set its policy; a failure is kept for `start` to return.
    fn setup(&self, cpu: u32, policy: Policy, priority: u32) -> bool {
        let err = match rt::pin_to_cpu(cpu) {
            Err(err) => Some(EngineError::Pin { cpu, err }),
            Ok(()) => rt::set_policy(policy, priority)
                .err()
                .map(|err| EngineError::Policy {
                    cpu,
                    policy: policy.as_str(),
                    priority,
                    err,
                }),
        };
        rt::prefault_stack(64 * 1024);
        match err {
            Some(e) => {
                *self.setup_err.lock().unwrap() = Some(e);
                false
            }
            None => true,
        }
    }

    /// Wait for every thread to be set up and for the start; the start time, or None when
    /// the run ends before it begins (a set-up failed somewhere).
    fn wait(&self, ok: bool) -> Option<u64> {
        self.ready.wait();
        self.go.wait();
        (ok && !self.stop.load(Relaxed)).then(|| self.t0.load(Acquire))
    }
}

/// Nanoseconds from the common start (a whole millisecond) to the first intended wake-up of
/// thread `i` of `n`, whose period is `period` (`interval` plus its share of `--distance`);
/// `seed` is any number that differs from run to run (the clock's nanoseconds at start).
///
/// The periodic tick fires on whole milliseconds (HZ 100, 250 and 1000: every 10, 4 or 1 ms,
/// counted from boot). A schedule started on a whole millisecond with a period that divides
/// the tick's puts every 4th wake-up (HZ 250, 1 ms) in the same timer interrupt as the tick,
/// after its handler: those samples paid 3–10 µs more here. cyclictest starts at whatever time
/// it is, so it almost never meets the tick. So every thread keeps off the millisecond grid:
/// with `g` = gcd(period, 1 ms), the times a schedule can reach modulo 1 ms are multiples of
/// `g`; each thread owns a slot of `g / n` (one slot of `g` when `aligned`) after its share of
/// the interval (`interval / n × i`) and wakes in the middle half of it, at least a quarter
/// slot from a whole millisecond (one thread at 1 ms: between x.25 and x.75 ms). Where in the
/// middle half comes from `seed`, the same for every thread of a run (they stay evenly spread),
/// so two runs on one CPU (two latlabs, a latlab and a test's) do not share every interrupt.
pub fn first_offset(
    interval: u64,
    period: u64,
    n: usize,
    i: usize,
    aligned: bool,
    seed: u64,
) -> u64 {
    fn gcd(mut a: u64, mut b: u64) -> u64 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    let n = n.max(1) as u64;
    let g = gcd(period, 1_000_000);
    let (share, slot) = if aligned {
        (0, g)
    } else {
        ((interval / n) * i as u64, g / n)
    };
    share + slot / 4 + seed.checked_rem(slot / 2).unwrap_or(0)
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
        // Checked before any thread starts (a thread waiting at the barrier would never end).
        let intervals = (0..n)
            .map(|i| {
                latlab_core::units::thread_interval(cfg.interval_ns, cfg.distance_ns, i)
                    .ok_or(EngineError::Interval { index: i })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let senders = senders(&cfg, &mode)?;
        let helpers = senders.iter().flatten().count();
        // Where in its slot each thread wakes differs from run to run (see `first_offset`).
        let seed = rt::now_ns();
        let line = StartLine {
            stop: Arc::new(AtomicBool::new(false)),
            ready: Arc::new(Barrier::new(n + helpers + 1)),
            go: Arc::new(Barrier::new(n + helpers + 1)),
            t0: Arc::new(AtomicU64::new(0)),
            setup_err: Arc::default(),
        };
        let mode = Arc::new(mode);
        let mut threads = Vec::with_capacity(n);
        let mut staggers = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        let mut aux = Vec::with_capacity(helpers);
        for (i, (&cpu, sender)) in cfg.cpus.iter().zip(senders).enumerate() {
            let interval = intervals[i];
            let sh = Arc::new(ThreadShared::new(
                cpu,
                cfg.layout,
                mode.shared(cfg.layout, interval),
                interval,
                matches!(*mode, Mode::Timer),
            ));
            threads.push(sh.clone());
            let stagger = first_offset(cfg.interval_ns, interval, n, i, cfg.aligned, seed);
            staggers.push(stagger);
            let sched = Schedule {
                interval,
                stagger,
                duration: cfg.duration_ns,
            };
            let channel = sender.as_ref().map(|s| s.channel.clone());
            if let Some(s) = sender {
                match spawn_sender(&line, s, sh.clone(), cfg.policy, sched) {
                    Ok(h) => aux.push(h),
                    Err(e) => {
                        line.stop.store(true, Release);
                        return Err(EngineError::Spawn(e));
                    }
                }
            }
            let prio = cfg
                .priority
                .saturating_sub((i as u32).saturating_mul(cfg.priority_step))
                .max(1);
            let t = Measuring {
                cpu,
                prio,
                sh,
                channel,
                sched,
            };
            match spawn_measuring(&line, &cfg, &mode, t) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The threads already spawned wait on the barrier for ever; spawn
                    // failure ends the process with this error, which takes them along.
                    line.stop.store(true, Release);
                    return Err(EngineError::Spawn(e));
                }
            }
        }
        line.ready.wait();
        let err = line.setup_err.lock().unwrap().take();
        if err.is_some() {
            line.stop.store(true, Release);
        }
        // Start 10 ms from now, on a whole millisecond, so threads begin together; each
        // thread's first wake-up is `first_offset` after it (never on the millisecond itself).
        let start = (rt::now_ns() / 1_000_000 + 10) * 1_000_000;
        for (t, s) in threads.iter().zip(&staggers) {
            t.first_ns.store(start + s, Release);
        }
        line.t0.store(start, Release);
        line.go.wait();
        let engine = Engine {
            threads,
            handles,
            aux,
            stop: line.stop,
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

/// One thread's schedule: its period, its first wake-up after the common start, the run's
/// length.
#[derive(Clone, Copy)]
struct Schedule {
    interval: u64,
    stagger: u64,
    duration: u64,
}

/// A measuring thread to spawn: its CPU and priority, what it shares with the collector, the
/// channel of its mode's sender (if any) and its schedule.
struct Measuring {
    cpu: u32,
    prio: u32,
    sh: Arc<ThreadShared>,
    channel: Option<Arc<modes::Channel>>,
    sched: Schedule,
}

/// Each measured CPU's helper thread, if its mode has one (before any thread starts).
fn senders(cfg: &Config, mode: &Mode) -> Result<Vec<Option<modes::Sender>>, EngineError> {
    let mut senders = Vec::new();
    for (i, &cpu) in cfg.cpus.iter().enumerate() {
        let s = mode
            .sender(cfg.backend, i, cpu)
            .map_err(|err| EngineError::Channel {
                ipc: match mode {
                    Mode::Wakeup { ipc, .. } => ipc.as_str(),
                    _ => "mode",
                },
                err,
            })?;
        senders.push(s);
    }
    Ok(senders)
}

/// A wakeup pair's sender: set up, then signals its receiver on the schedule until the end.
fn spawn_sender(
    line: &StartLine,
    s: modes::Sender,
    sh: Arc<ThreadShared>,
    policy: Policy,
    sched: Schedule,
) -> std::io::Result<JoinHandle<()>> {
    let line = line.clone();
    std::thread::Builder::new()
        .name(format!("latlab-send{}", s.cpu))
        .stack_size(256 * 1024)
        .spawn(move || {
            rt::block_signals();
            let ok = line.setup(s.cpu, policy, s.priority);
            let Some(base) = line.wait(ok) else {
                modes::stop_receiver(&s.channel);
                return;
            };
            modes::sender_loop(
                &s.channel,
                &sh,
                &line.stop,
                base + sched.stagger,
                base + sched.duration,
                sched.interval,
            );
        })
}

/// A measuring thread: set up, its mode's loop built, then measuring from the common start
/// until the end; its result holds its worst samples.
fn spawn_measuring(
    line: &StartLine,
    cfg: &Config,
    mode: &Arc<Mode>,
    t: Measuring,
) -> std::io::Result<JoinHandle<std::io::Result<ThreadResult>>> {
    let (line, mode, backend) = (line.clone(), mode.clone(), cfg.backend);
    let policy = cfg.policy;
    let (spike_threshold, trace) = (cfg.spike_threshold_ns, cfg.trace.clone());
    let Measuring {
        cpu,
        prio,
        sh,
        channel,
        sched,
    } = t;
    let interval = sched.interval;
    std::thread::Builder::new()
        .name(format!("latlab-cpu{cpu}"))
        .stack_size(256 * 1024)
        .spawn(move || {
            rt::block_signals();
            let ok = backend != Backend::Real || line.setup(cpu, policy, prio);
            let body = mode.body(ThreadEnv {
                cpu,
                backend,
                interval_ns: interval,
                ready: ok,
                sh: &sh,
                channel,
            });
            let tid = rt::gettid();
            sh.tid.store(tid, Release);
            let mut top = [SampleSpike {
                at_ns: 0,
                latency_ns: 0,
            }; TOP_N];
            let result = |top: Vec<SampleSpike>| ThreadResult {
                cpu,
                tid,
                interval_ns: interval,
                top,
            };
            let Some(base) = line.wait(ok) else {
                sh.done.store(true, Release);
                return Ok(result(vec![]));
            };
            let p = LoopParams {
                t0: base,
                first: base + sched.stagger,
                end: base + sched.duration,
                interval,
                spike_threshold,
                trace,
            };
            body(&sh, &line.stop, &p, &mut top);
            sh.done.store(true, Release);
            let mut top: Vec<SampleSpike> = top.into_iter().filter(|s| s.latency_ns > 0).collect();
            top.sort_by(|a, b| b.latency_ns.cmp(&a.latency_ns).then(a.at_ns.cmp(&b.at_ns)));
            Ok(result(top))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance (ns) from `t` to the nearest whole millisecond.
    fn off_ms(t: u64) -> u64 {
        let r = t % 1_000_000;
        r.min(1_000_000 - r)
    }

    #[test]
    fn no_wake_up_falls_on_a_whole_millisecond() {
        // The tick fires on whole milliseconds; a schedule locked to them shares every 4th
        // timer interrupt with it (HZ 250, 1 ms). Every wake-up of every thread, for the
        // intervals people use and any seed, stays a quarter slot (g/4n) away.
        for interval in [
            50_000u64, 100_000, 125_000, 200_000, 250_000, 500_000, 1_000_000, 1_500_000,
            2_000_000, 3_000_000, 4_000_000, 10_000_000,
        ] {
            for n in 1..=4usize {
                for aligned in [false, true] {
                    for seed in [0, 1, 6_249, 123_456_789, 987_654_321_012, u64::MAX] {
                        let g = gcd_ms(interval);
                        let slot = if aligned { g } else { g / n as u64 };
                        let mut firsts = Vec::new();
                        for i in 0..n {
                            let first = first_offset(interval, interval, n, i, aligned, seed);
                            assert!(first < interval, "{interval} {n} {i}: first {first}");
                            firsts.push(first);
                            for k in 0..2_000u64 {
                                // A start on a whole millisecond, as the engine's.
                                let t = 7_000_000_000 + first + k * interval;
                                assert!(
                                    off_ms(t) + 2 >= slot / 4 && off_ms(t) > 0,
                                    "interval {interval} n {n} thread {i} aligned {aligned} seed {seed}: wake-up {k} is {} ns from a whole ms",
                                    off_ms(t)
                                );
                            }
                        }
                        // The threads stay spread over one interval (together when aligned).
                        let step = if aligned { 0 } else { interval / n as u64 };
                        for w in firsts.windows(2) {
                            assert_eq!(w[1] - w[0], step, "interval {interval} n {n}");
                        }
                    }
                }
            }
        }
        // 1 ms, one thread: in the middle half of the millisecond, where depends on the seed.
        assert_eq!(first_offset(1_000_000, 1_000_000, 1, 0, false, 0), 250_000);
        assert_eq!(
            first_offset(1_000_000, 1_000_000, 1, 0, false, 499_999),
            749_999
        );
        assert_eq!(
            first_offset(1_000_000, 1_000_000, 1, 0, false, 500_123),
            250_123
        );
        // Two threads: a quarter of their half-millisecond slot in, a slot apart.
        assert_eq!(first_offset(1_000_000, 1_000_000, 2, 0, false, 10), 125_010);
        assert_eq!(first_offset(1_000_000, 1_000_000, 2, 1, false, 10), 625_010);
    }

    fn gcd_ms(mut a: u64) -> u64 {
        let mut b = 1_000_000;
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
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
            priority_step: 0,
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
        let e_t0 = e.t0_ns;
        assert_eq!(e_t0 % 1_000_000, 0);
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
            // Intended times keep off the tick's whole milliseconds (1 ms, 2 threads: in the
            // middle half of each one's half millisecond), at one phase per thread.
            let phase = (r.top[0].at_ns - e_t0) % 1_000_000;
            let slot = [125_000..375_000, 625_000..875_000][t.cpu as usize].clone();
            assert!(slot.contains(&phase), "thread {}: phase {phase}", t.cpu);
            for s in &r.top {
                assert_eq!((s.at_ns - e_t0) % 1_000_000, phase, "{s:?}");
            }
            let mut spikes = Vec::new();
            t.drain_spikes(&mut spikes);
            assert_eq!(spikes.len() as u64, h.count() - h.count_below(1_000_000));
        }
    }

    #[test]
    fn real_wake_ups_are_off_the_tick() {
        // The real backend: the intended times of the samples kept (the largest ones, where a
        // tick would show) lie in the middle half of a millisecond, at one phase.
        let Some(_g) = crate::privileged::guard("real_wake_ups_are_off_the_tick") else {
            return;
        };
        let cpu = *rt::allowed_cpus().unwrap().last().unwrap();
        let e = Engine::start(Config {
            cpus: vec![cpu],
            interval_ns: 1_000_000,
            distance_ns: 0,
            duration_ns: 300_000_000,
            policy: Policy::Fifo,
            priority: 80,
            priority_step: 0,
            aligned: false,
            layout: Layout::default(),
            spike_threshold_ns: u64::MAX,
            trace: None,
            backend: Backend::Real,
        })
        .unwrap();
        let t0 = e.t0_ns;
        let res = e.join();
        assert_eq!(res.len(), 1);
        assert_eq!(res[0].top.len(), TOP_N, "{:?}", res[0].top);
        let phase = (res[0].top[0].at_ns - t0) % 1_000_000;
        assert!((250_000..750_000).contains(&phase), "phase {phase}");
        for s in &res[0].top {
            assert_eq!((s.at_ns - t0) % 1_000_000, phase, "{s:?}");
            assert!(off_ms(s.at_ns) >= 250_000, "{s:?}");
        }
    }
}
