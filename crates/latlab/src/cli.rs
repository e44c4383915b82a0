//! The command line: defined once here (the reference: docs/cli.md), parsed by clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use crate::args::{Backend, LatencyOf, Policy, RunFormat};
use crate::args::{CpuList, CpuSel, Duration, Latency, Size};

#[derive(Debug, Parser)]
#[command(
    name = "latlab",
    version,
    about = "A Linux latency lab: measure how late real-time threads wake up, and why",
    long_about = None,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process; boxing buys nothing
pub enum Command {
    /// Measure wake-up latency on every selected CPU and write a run directory
    Run(RunArgs),
    /// Render a run directory (or its run.json)
    Report(ReportArgs),
    /// Compare runs side by side
    Compare(CompareArgs),
    /// Turn another tool's output (cyclictest, rtla, realfeel, oslat, stress-ng, jitterdebugger, pmqtest, …) into a run directory
    Import(ImportArgs),
    /// Attribute the spikes of a saved tracefs text trace
    Analyze(AnalyzeArgs),
    /// Check this machine for everything that affects latency
    Check(CheckArgs),
    /// List or run the load profiles
    Loads(LoadsArgs),
    /// Undo what a killed latlab run left behind
    Cleanup(CleanupArgs),
    /// Benchmarks that print figures (latlab against cyclictest, …)
    Bench(BenchArgs),
    /// Responsiveness scenarios of Love's OLS 2003 paper: io-read, fairness
    Scenario(crate::cli_scenario::ScenarioArgs),
    /// Runs in the results database with p99, p99.9, max and missed; long-term plots
    History(HistoryArgs),
    /// The results database: push run directories, pull a run back, list runs
    Db(DbArgs),
    /// `run` with a scheduler profile of the same seconds: run queues, waits (run.json `profile`)
    Profile(ProfileArgs),
    /// Write a run's traces (spike windows, profile) for other tools: Perfetto
    Export(ExportArgs),
    /// cyclictest's command line (-t -a -p -i -D -h -q -v --json= ...) on latlab's engine
    Cyclictest(crate::cmd::cyclictest::CyclictestArgs),
    /// How long a run must be to claim a percentile (p99.999<=50us) with 95 % confidence
    Plan(crate::cmd::plan::PlanArgs),
    /// Print the manual page (roff) of latlab or of one of its commands: latlab man run | man -l -
    Man(ManArgs),
    /// Print a shell completion script: latlab completions bash > /etc/bash_completion.d/latlab
    Completions(CompletionsArgs),
}

/// Where runs are recorded (`run`, `import`, `scenario`).
#[derive(Debug, Clone, Args)]
pub struct RecordDb {
    /// Results database: a SQLite file (PATH or sqlite:PATH) or postgres://user@host/db [default: ~/.local/share/latlab/runs.sqlite]
    #[arg(long, value_name = "URL", env = "LATLAB_DB", hide_env_values = true)]
    pub db: Option<String>,
    /// Do not record the run in the results database
    #[arg(long)]
    pub no_db: bool,
}

impl RecordDb {
    /// Where the engine records the run.
    pub fn target(&self) -> latlab_engine::store::DbTarget {
        latlab_engine::store::DbTarget {
            none: self.no_db,
            url: self.db.clone(),
        }
    }
}

/// Which results database to read (`report`, `compare`, `history`, `db`).
#[derive(Debug, Clone, Args)]
pub struct DbUrl {
    /// Results database: a SQLite file (PATH or sqlite:PATH) or postgres://user@host/db [default: ~/.local/share/latlab/runs.sqlite]
    #[arg(long, value_name = "URL", env = "LATLAB_DB", hide_env_values = true)]
    pub db: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HistoryFormat {
    Text,
    Json,
    Html,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only runs of this machine: its host name or a prefix of its machine id
    #[arg(long, value_name = "M")]
    pub machine: Option<String>,
    /// Only runs of this kernel release (as `uname -r`)
    #[arg(long, value_name = "K")]
    pub kernel: Option<String>,
    /// Only runs with this label
    #[arg(long, value_name = "L")]
    pub label: Option<String>,
    /// Only runs started within this time: 30d, 12h, 90m
    #[arg(long, value_name = "D")]
    pub since: Option<Duration>,
    #[arg(long, value_enum, default_value_t = HistoryFormat::Text)]
    pub format: HistoryFormat,
    /// Write to this file instead of stdout
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbUrl,
}

#[derive(Debug, Args)]
pub struct DbArgs {
    #[command(subcommand)]
    pub command: DbCommand,
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Add run directories to the database (a run already there is not added twice)
    Push {
        /// Run directories (or their run.json files)
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        #[command(flatten)]
        db: DbUrl,
    },
    /// Write a stored run back as a run directory
    Pull {
        /// The run id (or a unique prefix of it, at least 4 characters)
        id: String,
        /// The run directory to create (must not exist)
        #[arg(short = 'o', long, value_name = "DIR")]
        output: PathBuf,
        #[command(flatten)]
        db: DbUrl,
    },
    /// The runs in the database (as `latlab history`)
    List(HistoryArgs),
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
const NO_MEASURE_CONFLICTS: [&str; 27] = [
    "interval",
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
    "mode",
    "ipc",
    "cross_cpu",
    "work",
    "period",
    "buffers",
    "on_threshold",
    "priospread",
];

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A run directory (with spikes/NNN/trace.dat or trace.txt, or profile/trace.dat)
    pub run: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value_t = ExportFormat::Perfetto)]
    pub format: ExportFormat,
    /// Where to write (refused if it exists and is not a regular file)
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceEvents {
    /// Scheduler, IRQ handler, softirq, NMI, other vectors, `hrtimer_start` (the default)
    Lean,
    /// `lean` and the timer interrupt's `local_timer_*` and `hrtimer_expire_*`
    Full,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Perfetto's protobuf trace (ui.perfetto.dev)
    Perfetto,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The command whose page to print (`run`, `loads list`); none: latlab's own page
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
    /// List every command that has a page, one per line
    #[arg(long, conflicts_with = "command")]
    pub list: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    pub shell: Shell,
}

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
    /// Scheduling policy of the measurement threads
    #[arg(long, value_enum, default_value_t = Policy::Fifo)]
    pub policy: Policy,
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
    #[arg(long = "load", value_name = "PROFILE")]
    pub loads: Vec<String>,
    /// Trace every sample above this latency with the tracefs flight recorder
    #[arg(long, value_name = "T")]
    pub trace_threshold: Option<Latency>,
    /// Exit with code 2 if any sample exceeds this latency
    #[arg(long, value_name = "T")]
    pub max_latency: Option<Latency>,
    /// With --backend timerlat: the latency --max-latency judges (default: thread)
    #[arg(long, value_enum, value_name = "CONTEXT", requires = "max_latency")]
    pub max_latency_of: Option<LatencyOf>,
    /// Name of the run (default: the kernel release)
    #[arg(long)]
    pub label: Option<String>,
    /// Where run directories go
    #[arg(long, default_value = "latlab-results")]
    pub results: PathBuf,
    /// `real` measures this machine (root); `timerlat`: the kernel's timerlat tracer measures (root, a kernel with CONFIG_TIMERLAT_TRACER); `sim` feeds the same pipeline from a seeded generator
    #[arg(long, value_enum, default_value_t = Backend::Real)]
    pub backend: Backend,
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
    pub mode: crate::cli_modes::ModeArgs,
    #[command(flatten)]
    pub record_db: RecordDb,
    #[command(flatten)]
    pub actions: crate::cli_actions::ActionArgs,
    #[command(flatten)]
    pub ct: crate::cmd::cyclictest::RunFlags,
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
    /// Time loads run before measuring starts
    #[arg(long, default_value = "2s", value_name = "D")]
    pub warmup: Duration,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// How loads run (`run`, `loads run`).
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Scratch space for the loads' files (default: a temp dir on the root filesystem)
    #[arg(long, value_name = "DIR")]
    pub load_dir: Option<PathBuf>,
    /// CPUs the loads may run on, e.g. 0-3,6 (default: all)
    #[arg(long, value_name = "LIST")]
    pub load_cpus: Option<CpuList>,
    /// End the run with an error when a load keeps crashing
    #[arg(long)]
    pub load_required: bool,
    /// Compile this source tree in the compile loads instead of a generated C tree
    #[arg(long, value_name = "DIR")]
    pub load_src: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Markdown,
    Json,
    Html,
    Cyclictest,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run directory or its run.json, or a run id from the results database
    pub run: PathBuf,
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write to this file instead of stdout
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbUrl,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    Text,
    Markdown,
    Json,
    Html,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Two or more run directories (or run.json files, or run ids from the results database); the first is the baseline
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbUrl,
    /// Regression gate (repeatable), each run after the first against the first: STAT>FACTORx
    /// (B/A), STAT>+N% or STAT>VALUE (on B, e.g. max>500us, missed>0); STAT: min, mean, median,
    /// p99, p99.9, p99.99, p99.999, max, missed, tail:P (the tail estimate at P, tail:1e-9).
    /// @L% (p99.9>1.2x@95%) fails only when the L% interval lies wholly above the limit. Exit
    /// code 2 when one fails
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<latlab_core::gates::Gate>,
    /// Write the --fail-if checks as JUnit XML (one test case per check) to this file
    #[arg(long, value_name = "FILE", requires = "fail_if")]
    pub junit: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportFrom {
    Auto,
    Cyclictest,
    CyclictestJson,
    CyclictestVerbose,
    Rtla,
    Realfeel,
    Oslat,
    OslatJson,
    StressNg,
    Jitterdebugger,
    Pmqtest,
    Ptsematest,
    Sigwaittest,
    Svsematest,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file to import (a regular file; `-` reads standard input)
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = ImportFrom::Auto)]
    pub from: ImportFrom,
    #[arg(long)]
    pub label: Option<String>,
    #[arg(long, default_value = "latlab-results")]
    pub results: PathBuf,
    /// Refuse input larger than this (it is read whole): 1G, 200M, 4096
    #[arg(long, default_value = "1G", value_name = "SIZE")]
    pub max_input_size: Size,
    #[command(flatten)]
    pub record_db: RecordDb,
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// A saved trace: tracefs text (a spike's trace.txt, an instance's `trace`, `trace-cmd report` output) or a trace-cmd file (a spike's trace.dat)
    pub trace: PathBuf,
    /// Samples above this latency are spikes to explain
    #[arg(long, value_name = "T")]
    pub threshold: Option<Latency>,
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
    /// Read /proc and /sys below this directory instead of / (for tests and saved trees)
    #[arg(long, hide = true)]
    pub root: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LoadsArgs {
    #[command(subcommand)]
    pub command: LoadsCommand,
}

#[derive(Debug, Subcommand)]
pub enum LoadsCommand {
    /// The profiles, what each models, the tools it needs and whether they are installed
    List,
    /// Run a load alone (for use with another tool)
    Run {
        profile: String,
        #[arg(long, default_value = "60s")]
        duration: Duration,
        /// Print the load records as JSON on stdout at the end
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        load: LoadArgs,
    },
}

#[derive(Debug, Args)]
pub struct CleanupArgs {}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// latlab against cyclictest, alternated on one CPU; and latlab's peak RSS
    Measure {
        /// CPU to measure on
        #[arg(long, default_value_t = 1)]
        cpu: u32,
        /// Length of each run
        #[arg(long, default_value = "10s")]
        duration: Duration,
        /// Pairs of runs (latlab and cyclictest, which goes first alternating)
        #[arg(long, default_value_t = 8)]
        pairs: u32,
    },
    /// latlab --mode wakeup (futex, mqueue) against ptsematest and pmqtest, alternated on one CPU
    Wakeup {
        /// CPU of the pair
        #[arg(long, default_value_t = 1)]
        cpu: u32,
        /// Length of each run (whole seconds)
        #[arg(long, default_value = "5s")]
        duration: Duration,
        /// Rounds of the four runs
        #[arg(long, default_value_t = 2)]
        pairs: u32,
    },
    /// What each load does to latency: one run per profile (idle first), one table
    Loads {
        /// Profiles to run, comma-separated (default: every profile whose tools are installed)
        #[arg(long, value_name = "A,B")]
        profiles: Option<String>,
        /// Length of each run
        #[arg(long, default_value = "20s")]
        duration: Duration,
        /// CPUs to measure on: `all` or a list such as 0-3,6
        #[arg(long, default_value = "all")]
        cpus: CpuSel,
        #[arg(long, value_enum, default_value_t = RunFormat::Text)]
        format: RunFormat,
        /// Keep the run directories here (default: a temp dir, removed at the end)
        #[arg(long, value_name = "DIR")]
        results: Option<PathBuf>,
        /// Scratch space for the loads' files (as `run --load-dir`)
        #[arg(long, value_name = "DIR")]
        load_dir: Option<PathBuf>,
    },
    /// The flight recorder's overhead: `latlab run` with and without tracing, alternated
    Trace {
        /// CPU to measure on
        #[arg(long, default_value_t = 1)]
        cpu: u32,
        /// Length of each run
        #[arg(long, default_value = "10s")]
        duration: Duration,
        /// Pairs of runs (off and on, which goes first alternating)
        #[arg(long, default_value_t = 6)]
        pairs: u32,
        /// --trace-threshold of the traced runs
        #[arg(long, default_value = "150us")]
        threshold: Latency,
        /// --trace-instances of the traced runs (each instance's events fire on every
        /// wake-up, armed or not)
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
        trace_instances: u32,
    },
    /// What `latlab profile` costs: `run` and `profile` alternated (latency ratios), events/s, memory
    Profile {
        /// CPU to measure on
        #[arg(long, default_value_t = 1)]
        cpu: u32,
        /// Length of each run
        #[arg(long, default_value = "10s")]
        duration: Duration,
        /// Pairs of runs (run and profile, which goes first alternating)
        #[arg(long, default_value_t = 6)]
        pairs: u32,
        /// Load profile to run during both (repeatable); see `latlab loads list`
        #[arg(long = "load", value_name = "PROFILE")]
        loads: Vec<String>,
        #[arg(long, value_enum, default_value_t = RunFormat::Text)]
        format: RunFormat,
    },
    /// `latlab analyze` throughput against `wc -l` on a large trace
    Analyze {
        /// Trace to time, text or trace.dat (default: capture one with the recorder under hackbench, timed in both formats)
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Size of the captured trace (binary multiples: 200M = 200 MiB)
        #[arg(long, default_value = "200M")]
        size: Size,
        /// Keep the captured traces (their directory is printed)
        #[arg(long)]
        keep: bool,
    },
    /// The results database: inserting a 24-hour 8-CPU run (SQLite, PostgreSQL), history over many runs
    Db {
        /// Small runs stored for the history timing
        #[arg(long, default_value_t = 10_000)]
        runs: usize,
        /// Repetitions of each timing (the median is printed)
        #[arg(long, default_value_t = 3)]
        reps: u32,
        /// Also insert into this PostgreSQL database (postgres://…)
        #[arg(long, value_name = "URL")]
        postgres: Option<String>,
    },
    /// Time to fit the tail estimates and bootstrap the percentiles of a 24-hour, 8-CPU record
    Tail {
        /// Repetitions (the median is printed)
        #[arg(long, default_value_t = 3)]
        reps: u32,
    },
    /// `report` and `compare` time on a 24-hour-equivalent run; `import` speed of cyclictest -v
    Report {
        /// Repetitions of each timing (the median is printed)
        #[arg(long, default_value_t = 5)]
        reps: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }
}
