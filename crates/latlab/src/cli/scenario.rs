//! Flags of `latlab scenario` (Love, OLS 2003: what users feel). See README.md.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::results::RecordDb;
use super::run::LoadPlace;
use super::values::{CpuList, Duration, Latency, Policy, RunFormat, Size};

#[derive(Debug, Args)]
pub struct ScenarioArgs {
    #[command(subcommand)]
    pub command: ScenarioCommand,
}

#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// Read a big file and a tree of small files, alone and under loads (Love 2003, §4.3)
    IoRead(IoReadArgs),
    /// N identical CPU-bound tasks: CPU shares, Jain's index, a sleeper's wake-ups (§2.1)
    Fairness(FairnessArgs),
}

/// Flags every scenario shares.
#[derive(Debug, Args)]
#[command(mut_arg("load_dir", |a| a.help(
    "Scratch space for the loads' files (io-read: default its --dir, so they share a disk)"
)))]
pub struct ScenarioCommon {
    /// Name of the run (default: the scenario's name)
    #[arg(long)]
    pub label: Option<String>,
    /// Where run directories go
    #[arg(long, default_value = "latlab-results")]
    pub results: PathBuf,
    /// Summary format on stdout
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
    /// Time loads run before measuring starts
    #[arg(long, default_value = "2s", value_name = "D")]
    pub warmup: Duration,
    #[command(flatten)]
    pub place: LoadPlace,
    #[command(flatten)]
    pub record_db: RecordDb,
}

#[derive(Debug, Args)]
pub struct IoReadArgs {
    /// Size of the file read sequentially: 200M, 1G, 8MiB
    #[arg(long, default_value = "200M", value_name = "SIZE")]
    pub file_size: Size,
    /// Small files read one after another (open+read+close each, the `find | cat` pattern)
    #[arg(long, default_value_t = 500)]
    pub small_files: usize,
    /// Parent of the per-run scratch directory (default: /var/tmp, on the root filesystem)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// I/O scheduler of the disk behind --dir for the run (saved and restored; root)
    #[arg(long, value_name = "NAME")]
    pub iosched: Option<String>,
    /// Load profile of a loaded phase (repeatable: one phase each, after the phase alone);
    /// default io-write; `none` measures alone only
    #[arg(long = "load", value_name = "PROFILE", value_parser = super::values::LoadProfile, hide_possible_values = true)]
    pub loads: Vec<String>,
    /// Measurements of each phase (big file, then small files, cache dropped before each)
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    #[command(flatten)]
    pub common: ScenarioCommon,
}

#[derive(Debug, Args)]
pub struct FairnessArgs {
    /// Identical CPU-bound tasks (threads)
    #[arg(long, default_value_t = 4)]
    pub tasks: usize,
    /// How long they compete: 10s, 5m
    #[arg(long, default_value = "30s")]
    pub duration: Duration,
    /// Scheduling policy of the tasks (rr and fifo need root)
    #[arg(long, value_enum, default_value_t = Policy::Other)]
    pub policy: Policy,
    /// Real-time priority of the tasks for rr and fifo (1..99), all equal
    #[arg(long, short = 'p', default_value_t = 10)]
    pub priority: u32,
    /// Add an interactive task that sleeps --sleeper-interval and records how late it wakes
    #[arg(long)]
    pub sleeper: bool,
    /// Period of the sleeper
    #[arg(long, default_value = "10ms", value_name = "T")]
    pub sleeper_interval: Latency,
    /// CPUs every task may run on (default: the last online CPU, so they compete)
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<CpuList>,
    /// Run even on CPUs another latlab measures now (refused otherwise: the two distort each
    /// other); the overlap is recorded as a warning
    #[arg(long)]
    pub force: bool,
    /// Load profile to run during the measurement (repeatable); see `latlab loads list`
    #[arg(long = "load", value_name = "PROFILE", value_parser = super::values::LoadProfile, hide_possible_values = true)]
    pub loads: Vec<String>,
    #[command(flatten)]
    pub common: ScenarioCommon,
}
