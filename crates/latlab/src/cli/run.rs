//! `latlab run`'s flags (and `profile`'s, which are run's and more): the measurement, the
//! recorder, the loads, the modes, the actions. Typed by clap (`super::values`), planned by
//! `crate::plan`.

use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{Args, ValueEnum};
use latlab_engine::actions::{Action, Actions};
use latlab_engine::run::backend;

use super::results::RecordDb;
use super::values::{
    CpuList, CpuSel, DmaLatency, Duration, Latency, LatencyOf, Policy, RunFormat, Size,
};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// How long to measure: 10s, 5m, 2h, 1d
    #[arg(long, default_value = "60s")]
    pub duration: Duration,
    /// Wake-up period: 1ms, 488us, 250000ns (a bare number is µs); at least 10us [default: 1ms]
    #[arg(long, short = 'i', value_name = "T")]
    pub interval: Option<Latency>,
    /// CPUs to measure on, one thread each: `all` or a list such as 0-3,6
    #[arg(long, default_value = "all")]
    pub cpus: CpuSel,
    /// Real-time priority of the measurement threads (1..99 for fifo and rr)
    #[arg(long, short = 'p', default_value_t = 95)]
    pub priority: u32,
    /// Scheduling policy of the measurement threads [default: fifo; other with --mode noise]
    #[arg(long, value_enum)]
    pub policy: Option<Policy>,
    /// Add this much to the interval of each further thread (as cyclictest -d)
    #[arg(long, default_value = "0", value_name = "T")]
    pub distance: Latency,
    /// Wake all threads at the same instants (otherwise each starts on its own)
    #[arg(long)]
    pub aligned: bool,
    /// End of the 1 µs histogram buckets; a log-scaled tail covers everything above
    #[arg(long, default_value = "10ms", value_name = "T")]
    pub hist_limit: Latency,
    /// Load profile to run during the measurement (repeatable); see `latlab loads list`
    #[arg(long = "load", value_name = "PROFILE", value_parser = super::values::LoadProfile, hide_possible_values = true)]
    pub loads: Vec<String>,
    /// Trace every sample above this latency with the tracefs flight recorder
    #[arg(long, value_name = "T")]
    pub trace_threshold: Option<Latency>,
    /// Exit with code 2 if any sample exceeds this latency
    #[arg(long, value_name = "T")]
    pub max_latency: Option<Latency>,
    /// Hold /dev/cpu_dma_latency at this while measuring (µs; 0 keeps the CPUs out of deep
    /// C-states), or `off` to measure with the idle states as they are
    #[arg(long, default_value = "0", value_name = "US|off")]
    pub dma_latency: DmaLatency,
    /// With --backend timerlat: the latency --max-latency judges (default: thread)
    #[arg(long, value_enum, value_name = "CONTEXT", requires = "max_latency")]
    pub max_latency_of: Option<LatencyOf>,
    /// Measure until this statistic is known to ±PRECISION (its 95 % interval, on every CPU):
    /// p99.99:10%, tail:1e-9:20%; --duration stays the upper bound
    #[arg(long, value_name = "STAT:PRECISION")]
    pub until: Option<latlab_core::until::Until>,
    /// Name of the run (default: the kernel release)
    #[arg(long)]
    pub label: Option<String>,
    /// Where run directories go
    #[arg(long, default_value = "latlab-results")]
    pub results: PathBuf,
    /// `real` measures this machine (root); `timerlat`: the kernel's timerlat tracer measures (root, a kernel with CONFIG_TIMERLAT_TRACER); `osnoise` (with --mode noise): the kernel's osnoise tracer; `sim` feeds the same pipeline from a seeded generator
    #[arg(long, default_value = "real", value_parser = PossibleValuesParser::new(backend::names()))]
    pub backend: String,
    /// Seed of the simulated source
    #[arg(long, default_value_t = 1)]
    pub sim_seed: u64,
    /// Pace the simulated source at wall-clock speed (default: as fast as possible)
    #[arg(long, hide = true)]
    pub sim_realtime: bool,
    /// Summary format on stdout
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
    /// No live display; print only the final summary
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Serve /metrics for Prometheus on HOST:PORT while measuring (e.g. 127.0.0.1:9464);
    /// loopback addresses only unless --metrics-listen-any
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Allow --metrics-listen on a non-loopback address (the metrics become readable from the
    /// network)
    #[arg(long, requires = "metrics_listen")]
    pub metrics_listen_any: bool,
    /// Measure even on CPUs another latlab measures now (refused otherwise: the two distort
    /// each other); the overlap is recorded as a warning
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub ext: RunExtArgs,
    #[command(flatten)]
    pub mode: ModeArgs,
    #[command(flatten)]
    pub record_db: RecordDb,
    #[command(flatten)]
    pub actions: ActionArgs,
    #[command(flatten)]
    pub ct: RunFlags,
}

/// Flags added by later parts (loads, trace); each documented in README.md.
#[derive(Debug, Args)]
pub struct RunExtArgs {
    /// Per-CPU buffer of the tracefs flight recorder (with --trace-threshold)
    #[arg(long, default_value = "4MiB", value_name = "SIZE")]
    pub trace_buffer: Size,
    /// Spikes traced at most (further ones are counted as not traced)
    #[arg(long, default_value_t = 100)]
    pub trace_max_spikes: u32,
    /// Recorder instances (1-8), each holding --trace-buffer per CPU. One (the default) never
    /// stops: each spike's trace is its CPU's events from the previous spike's marker to its
    /// own. More take turns, a spike's marker stopping the armed one and a standby taking
    /// over (their events fire on every wake-up, armed or not)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub trace_instances: u32,
    /// Events the recorder enables: `lean` leaves out the timer interrupt's own (every event
    /// on a wake-up's path adds to every latency); `full` adds them, to time the timer
    /// interrupt as a cause
    #[arg(long, value_enum, default_value_t = TraceEvents::Lean)]
    pub trace_events: TraceEvents,
    /// End with an error when tracing is impossible (default: measure on without it)
    #[arg(long)]
    pub trace_required: bool,
    /// Write each spike's trace as text too (spikes/NNN/trace.txt, 2-3 times its trace.dat),
    /// not only as trace.dat; `latlab analyze spikes/NNN/trace.dat --print-trace` prints that
    /// text on demand
    #[arg(long)]
    pub trace_text: bool,
    /// Time loads run before measuring starts
    #[arg(long, default_value = "2s", value_name = "D")]
    pub warmup: Duration,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// How loads run (`run`, `loads run`).
#[derive(Debug, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    pub place: LoadPlace,
    /// End the run with an error when a load keeps crashing
    #[arg(long)]
    pub load_required: bool,
    /// Compile this source tree in the compile loads instead of a generated C tree
    #[arg(long, value_name = "DIR")]
    pub load_src: Option<PathBuf>,
}

/// Where loads run (`run`, `loads run`, `scenario`).
#[derive(Debug, Args)]
pub struct LoadPlace {
    /// Scratch space for the loads' files (default: a temp dir on the root filesystem)
    #[arg(long, value_name = "DIR")]
    pub load_dir: Option<PathBuf>,
    /// CPUs the loads may run on, e.g. 0-3,6 (default: all)
    #[arg(long, value_name = "LIST")]
    pub load_cpus: Option<CpuList>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceEvents {
    /// Scheduler, IRQ handler, softirq, NMI, other vectors, `hrtimer_start` (the default)
    Lean,
    /// `lean` and the timer interrupt's `local_timer_*` and `hrtimer_expire_*`
    Full,
}

#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Rows of `profile.wait[]` (tasks, largest p99 first)
    #[arg(long, default_value_t = 50)]
    pub profile_top: usize,
    /// Raw events kept for `latlab export` (profile/trace.dat, the first seconds), all CPUs
    #[arg(long, default_value = "32MiB", value_name = "SIZE")]
    pub profile_window: Size,
    /// Per-CPU buffer of the profile's tracefs instance
    #[arg(long, default_value = "8MiB", value_name = "SIZE")]
    pub profile_buffer: Size,
    /// Profile alone: no measuring threads (no real-time threads, no /dev/cpu_dma_latency
    /// hold, no mlockall); the run directory has the profile and no latency samples
    #[arg(long, conflicts_with_all = NO_MEASURE_CONFLICTS)]
    pub no_measure: bool,
}

/// `latlab run` flags about the measuring threads, refused with `profile --no-measure`.
const NO_MEASURE_CONFLICTS: [&str; 31] = [
    "interval",
    "dma_latency",
    "until",
    "cpus",
    "priority",
    "policy",
    "distance",
    "aligned",
    "hist_limit",
    "trace_threshold",
    "max_latency",
    "max_latency_of",
    "backend",
    "sim_seed",
    "sim_realtime",
    "metrics_listen",
    "trace_buffer",
    "trace_max_spikes",
    "trace_instances",
    "trace_events",
    "trace_required",
    "trace_text",
    "mode",
    "ipc",
    "cross_cpu",
    "work",
    "period",
    "buffers",
    "noise_threshold",
    "on_threshold",
    "priospread",
];

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
    /// Operating-system noise: a thread spinning on the clock, every gap an interference (oslat, rtla osnoise)
    Noise,
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
    /// noise: the smallest gap between two clock reads that counts as noise (rtla osnoise's default) [default: 1us]
    #[arg(long, value_name = "T")]
    pub noise_threshold: Option<Latency>,
}

/// The action flags of `latlab run`.
#[derive(Debug, Args)]
pub struct ActionArgs {
    /// Action when a sample exceeds --max-latency (repeatable, run in order): trace,
    /// signal,num=N,pid=PID|parent[,allow-init][,allow-foreign], shell,command=CMD, stop,
    /// continue (the default)
    #[arg(long, value_name = "ACTION", value_parser = latlab_engine::actions::parse_action)]
    pub on_threshold: Vec<Action>,
    /// Action when the run has ended (repeatable): signal,num=N,pid=PID|parent[,allow-init][,allow-foreign]
    /// or shell,command=CMD
    #[arg(long, value_name = "ACTION", value_parser = latlab_engine::actions::parse_action)]
    pub on_end: Vec<Action>,
    /// A shell action still running after this long is killed (and reported)
    #[arg(long, default_value = "10s", value_name = "D")]
    pub action_timeout: Duration,
}

impl ActionArgs {
    /// The engine's actions.
    pub fn actions(&self) -> Actions {
        Actions {
            on_threshold: self.on_threshold.clone(),
            on_end: self.on_end.clone(),
            timeout_ns: self.action_timeout.0,
        }
    }
}

/// What `latlab cyclictest` gives `latlab run` beyond its documented flags (hidden).
#[derive(Debug, Args)]
pub struct RunFlags {
    /// Thread i at --priority − i (cyclictest's --priospread)
    #[arg(long, hide = true)]
    pub priospread: bool,
}
