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
        let mut senders = Vec::new();
        for (i, &cpu) in cfg.cpus.iter().enumerate() {
            let s = mode
                .sender(cfg.backend, i, cpu)
                .map_err(|err| EngineError::Channel {
                    ipc: match &mode {
                        Mode::Wakeup { ipc, .. } => ipc.as_str(),
                        _ => "mode",
                    },
                    err,
                })?;
            senders.push(s);
        }
        let helpers = senders.iter().flatten().count();
        let line = StartLine {
            stop: Arc::new(AtomicBool::new(false)),
            ready: Arc::new(Barrier::new(n + helpers + 1)),
            go: Arc::new(Barrier::new(n + helpers + 1)),
            t0: Arc::new(AtomicU64::new(0)),
            setup_err: Arc::default(),
        };
        let mode = Arc::new(mode);
        let mut threads = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        let mut aux = Vec::with_capacity(helpers);
        for (i, (&cpu, sender)) in cfg.cpus.iter().zip(senders).enumerate() {
            let interval = intervals[i];
            let sh = Arc::new(ThreadShared::new(
                cpu,
                cfg.layout,
                mode.shared(cfg.layout, interval),
            ));
            threads.push(sh.clone());
            let stagger = if cfg.aligned {
                0
            } else {
                (cfg.interval_ns / n as u64) * i as u64
            };
            let duration = cfg.duration_ns;
            let channel = sender.as_ref().map(|s| s.channel.clone());
            if let Some(s) = sender {
                let (line_s, sh, policy) = (line.clone(), sh.clone(), cfg.policy);
                let h = std::thread::Builder::new()
                    .name(format!("latlab-send{}", s.cpu))
                    .stack_size(256 * 1024)
                    .spawn(move || {
                        rt::block_signals();
                        let line = line_s;
                        let ok = line.setup(s.cpu, policy, s.priority);
                        let Some(base) = line.wait(ok) else {
                            modes::stop_receiver(&s.channel);
                            return;
                        };
                        modes::sender_loop(
                            &s.channel,
                            &sh,
                            &line.stop,
                            base + stagger,
                            base + duration,
                            interval,
                        );
                    });
                match h {
                    Ok(h) => aux.push(h),
                    Err(e) => {
                        line.stop.store(true, Release);
                        return Err(EngineError::Spawn(e));
                    }
                }
            }
            let (line_t, mode, backend) = (line.clone(), mode.clone(), cfg.backend);
            let (policy, prio) = (cfg.policy, cfg.priority);
            let (spike_threshold, trace) = (cfg.spike_threshold_ns, cfg.trace.clone());
            let h = std::thread::Builder::new()
                .name(format!("latlab-cpu{cpu}"))
                .stack_size(256 * 1024)
                .spawn(move || {
                    rt::block_signals();
                    let line = line_t;
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
                        first: base + stagger,
                        end: base + duration,
                        interval,
                        spike_threshold,
                        trace,
                    };
                    body(&sh, &line.stop, &p, &mut top);
                    sh.done.store(true, Release);
                    let mut top: Vec<SampleSpike> =
                        top.into_iter().filter(|s| s.latency_ns > 0).collect();
                    top.sort_by(|a, b| b.latency_ns.cmp(&a.latency_ns).then(a.at_ns.cmp(&b.at_ns)));
                    Ok(result(top))
                });
            match h {
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
        // Start 10 ms from now, on a whole millisecond, so threads begin together.
        let start = (rt::now_ns() / 1_000_000 + 10) * 1_000_000;
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

#[cfg(test)]
mod tests {
    use super::*;

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
