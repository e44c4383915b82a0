//! The flags of `check`, `loads`, `cleanup` and `bench`: the commands about the machine.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::run::LoadArgs;
use super::values::{CpuSel, Duration, Latency, RunFormat, Size};

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
        #[arg(value_parser = super::values::LoadProfile, hide_possible_values = true)]
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
    /// latlab --mode noise against oslat, alternated on one CPU: gaps of 10 µs or more
    Noise {
        /// CPU to measure on
        #[arg(long, default_value_t = 1)]
        cpu: u32,
        /// Length of each run (whole seconds)
        #[arg(long, default_value = "5s")]
        duration: Duration,
        /// Pairs of runs (latlab and oslat, which goes first alternating)
        #[arg(long, default_value_t = 6)]
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
        #[arg(long = "load", value_name = "PROFILE", value_parser = super::values::LoadProfile, hide_possible_values = true)]
        loads: Vec<String>,
        #[arg(long, value_enum, default_value_t = RunFormat::Text)]
        format: RunFormat,
    },
    /// `latlab analyze` throughput against `wc -l` on a large trace
    Analyze {
        /// Trace to time, text or trace.dat (default: capture one with the recorder under hackbench, timed in both formats); twice, a trace.dat and a text trace of the same events: each timed, then the two alternated (--pairs)
        #[arg(long, value_name = "FILE")]
        trace: Vec<PathBuf>,
        /// Alternated pairs of the binary and the text form, when both are timed: the median of the per-pair ratios of their events per second (goal ≥ 4)
        #[arg(long, default_value_t = 6)]
        pairs: u32,
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
