//! What a measuring thread measures: timer wake-ups (cyclictest), thread → thread wake-ups
//! through an IPC (`wakeup`), a calibrated compute kernel each period (`jitter`), and
//! Senoner's audio deadline model (`audio`), and the gaps of a thread spinning on the clock
//! (`noise`, oslat's method).
//!
//! **The extension point.** A mode is a variant of [`Mode`] and one arm in each of
//! [`Mode::shared`] (what its threads share with the collector), [`Mode::sender`] (a helper
//! thread per measured CPU, if it needs one) and [`Mode::body`] (its loop: a clock that says
//! when the thread wakes and the work it does after each wake-up, plugged into the one
//! measurement loop of [`crate::hotloop`]). The engine (the `measure` module) only spawns
//! threads. Everything is monomorphised, so the timer mode pays nothing for the others.
//!
//! Hot-path rules hold here too: everything is allocated and touched before the run. In the
//! wakeup mode the IPC's syscalls (futex, pipe read/write, eventfd read/write, the condvar's
//! mutex) *are* the measured mechanism; nothing else is called.

use std::sync::atomic::Ordering::*;
use std::sync::Arc;

use latlab_core::hist::Layout;
use latlab_core::modes::AudioTally;
use latlab_core::sim::{SimParams, SimSource, SplitMix64};

use crate::hotloop::{self, Backend, Body, NoWork, RealClock, SimClock, Work};
use crate::live::{ModeShared, ThreadShared};

mod noise;
mod wakeup;
mod work;

pub use wakeup::Channel;
use wakeup::WakeupClock;
pub(crate) use wakeup::{sender_loop, stop_receiver};
pub use work::Kernel;
use work::{PeriodWork, RealExec, SimExec};

/// The IPC a wakeup pair uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipc {
    /// FUTEX_WAIT / FUTEX_WAKE on a 32-bit word (what a pthread semaphore does inside).
    Futex,
    /// A 1-byte write / read on a pipe.
    Pipe,
    /// An eventfd write / read.
    Eventfd,
    /// std Mutex + Condvar (pthread mutex/condvar).
    Condvar,
    /// A POSIX message queue, `mq_send` / `mq_receive` of the 8-byte stamp (rt-tests' pmqtest).
    Mqueue,
}

impl Ipc {
    pub fn as_str(&self) -> &'static str {
        match self {
            Ipc::Futex => "futex",
            Ipc::Pipe => "pipe",
            Ipc::Eventfd => "eventfd",
            Ipc::Condvar => "condvar",
            Ipc::Mqueue => "mqueue",
        }
    }
}

/// What the engine runs on each thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Timer wake-ups (cyclictest).
    Timer,
    /// A sender thread per measured CPU wakes the receiver through `ipc`; `sender_cpus[i]`
    /// is the CPU of the sender of the i-th measured CPU.
    Wakeup {
        ipc: Ipc,
        sender_cpus: Vec<u32>,
        sender_priority: u32,
    },
    /// Each period, run the compute kernel calibrated to `work_ns` and record its execution
    /// time.
    Jitter { work_ns: u64 },
    /// As `Jitter`, and tally the fragment deadlines with `buffers` fragments of one period.
    Audio { work_ns: u64, buffers: u32 },
    /// Spin on the clock from the start to the end; every gap of at least `threshold_ns`
    /// between two reads is a sample (an interference).
    Noise { threshold_ns: u64 },
}

/// A measuring thread, as its mode sees it when building its loop.
pub(crate) struct ThreadEnv<'a> {
    pub cpu: u32,
    pub backend: Backend,
    /// This thread's period (interval + its share of `--distance`).
    pub interval_ns: u64,
    /// Pinned with its policy set (false: set-up failed and the run will not start: build
    /// the loop without calibrating).
    pub ready: bool,
    pub sh: &'a Arc<ThreadShared>,
    /// The channel of the thread's [`Sender`], when the mode has one.
    pub channel: Option<Arc<Channel>>,
}

/// A helper thread a mode runs beside a measured CPU: the sender of a wakeup pair.
pub(crate) struct Sender {
    pub cpu: u32,
    pub priority: u32,
    pub channel: Arc<Channel>,
}

impl Mode {
    /// What each of its threads shares with the collector beyond the latency histogram.
    pub(crate) fn shared(&self, layout: Layout, period_ns: u64) -> ModeShared {
        match self {
            Mode::Timer | Mode::Wakeup { .. } => ModeShared::new(layout, false, None),
            Mode::Jitter { .. } => ModeShared::new(layout, true, None),
            Mode::Audio { buffers, .. } => {
                ModeShared::new(layout, true, Some((period_ns, *buffers)))
            }
            Mode::Noise { threshold_ns } => ModeShared::noise(layout, *threshold_ns, "user-loop"),
        }
    }

    /// The helper thread of the `i`-th measured CPU (`cpu`), if the mode has one.
    pub(crate) fn sender(
        &self,
        backend: Backend,
        i: usize,
        cpu: u32,
    ) -> std::io::Result<Option<Sender>> {
        match (self, backend) {
            (
                Mode::Wakeup {
                    ipc,
                    sender_cpus,
                    sender_priority,
                },
                Backend::Real,
            ) => Ok(Some(Sender {
                cpu: sender_cpus.get(i).copied().unwrap_or(cpu),
                priority: *sender_priority,
                channel: Arc::new(Channel::new(*ipc)?),
            })),
            // The simulated backend draws wake-ups from its generator: no sender.
            _ => Ok(None),
        }
    }

    /// The thread's loop: its clock and its work.
    pub(crate) fn body(&self, env: ThreadEnv) -> Body {
        match self {
            Mode::Timer => with_clock(&env, NoWork),
            Mode::Wakeup { .. } => match &env.channel {
                Some(ch) => hotloop::body(
                    WakeupClock {
                        ch: ch.clone(),
                        last: 0,
                        shared: Some(env.sh.clone()),
                    },
                    NoWork,
                ),
                None => with_clock(&env, NoWork),
            },
            Mode::Jitter { work_ns } => period_work(&env, *work_ns, None),
            Mode::Audio { work_ns, buffers } => {
                let tally = AudioTally::new(env.interval_ns, *buffers);
                period_work(&env, *work_ns, Some(tally))
            }
            Mode::Noise { .. } => match env.backend {
                Backend::Real => noise::body(),
                // The plan refuses the simulated backend: it has no noise model.
                Backend::Sim { .. } => with_clock(&env, NoWork),
            },
        }
    }
}

/// `work` after each wake-up of the backend's clock (the timer, or the simulated source).
fn with_clock<W: Work + 'static>(env: &ThreadEnv, work: W) -> Body {
    match env.backend {
        Backend::Real => hotloop::body(RealClock, work),
        Backend::Sim { seed, realtime } => hotloop::body(
            SimClock {
                src: SimSource::new(seed, env.cpu, SimParams::default()),
                realtime,
            },
            work,
        ),
    }
}

/// Jitter and audio: the compute kernel (calibrated here, on the pinned thread with its
/// policy, so it calibrates as it will run) or its simulation, then the timer's clock.
fn period_work(env: &ThreadEnv, work_ns: u64, tally: Option<AudioTally>) -> Body {
    let inject_slow = crate::hooks::slow_iteration();
    match env.backend {
        Backend::Real => {
            let mut kernel = Kernel::new();
            let (iterations, min) = if env.ready {
                kernel.calibrate(work_ns)
            } else {
                (1, 0)
            };
            env.sh.mode.exec_iterations.store(iterations, Relaxed);
            env.sh.mode.exec_calibrated_ns.store(min, Relaxed);
            let exec = RealExec { kernel, iterations };
            with_clock(
                env,
                PeriodWork {
                    exec,
                    inject_slow,
                    tally,
                },
            )
        }
        Backend::Sim { seed, .. } => {
            env.sh.mode.exec_calibrated_ns.store(work_ns, Relaxed);
            let exec = SimExec {
                rng: SplitMix64::new(seed ^ 0x5157_4f52 ^ ((env.cpu as u64) << 32)),
                work_ns,
            };
            with_clock(
                env,
                PeriodWork {
                    exec,
                    inject_slow,
                    tally,
                },
            )
        }
    }
}
