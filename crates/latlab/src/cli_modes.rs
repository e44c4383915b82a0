//! The flags of `latlab run --mode …` (flattened into `RunArgs`): what the thread measures
//! besides timer wake-ups. Validated in `cmd::run_modes::plan_mode`.

use clap::{Args, ValueEnum};

use crate::args::Latency;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum RunMode {
    /// Timer wake-ups (cyclictest)
    #[default]
    Timer,
    /// Thread → thread wake-ups through an IPC (ptsematest, pmqtest)
    Wakeup,
    /// Execution time of a calibrated compute kernel each period (mctest)
    Jitter,
    /// An audio pipeline's fragment deadlines (Senoner's latencytest)
    Audio,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IpcKind {
    Futex,
    Pipe,
    Eventfd,
    Condvar,
    /// POSIX message queue (as rt-tests' pmqtest)
    Mqueue,
}

#[derive(Debug, Args, Default)]
pub struct ModeArgs {
    /// What to measure: timer wake-ups, thread-to-thread wake-ups, execution-time jitter, audio deadlines
    #[arg(long, value_enum, default_value_t = RunMode::Timer)]
    pub mode: RunMode,
    /// wakeup: the IPC the sender wakes the receiver with [default: futex]
    #[arg(long, value_enum)]
    pub ipc: Option<IpcKind>,
    /// wakeup: put each sender on another CPU than its receiver
    #[arg(long)]
    pub cross_cpu: bool,
    /// jitter, audio: compute time per period, e.g. 200us [jitter: 200us; audio: 25% of the period]
    #[arg(long, value_name = "T")]
    pub work: Option<Latency>,
    /// audio: the fragment period, e.g. 1.45ms [default: 64 frames at 44.1 kHz = 1451247ns]
    #[arg(long, value_name = "T")]
    pub period: Option<Latency>,
    /// audio: fragments in the ring buffer (deadline = (buffers − 1) periods) [default: 2]
    #[arg(long, value_name = "N")]
    pub buffers: Option<u32>,
}
