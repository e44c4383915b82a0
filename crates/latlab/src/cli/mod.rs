//! The command line: defined once here (the reference: docs/cli.md), parsed by clap.

use clap::{Parser, Subcommand};

pub mod cyclictest;
pub mod machine;
pub mod man;
pub mod results;
pub mod run;
pub mod scenario;
pub mod values;

pub use cyclictest::CyclictestArgs;
pub use machine::*;
pub use man::{CompletionsArgs, ManArgs};
pub use results::*;
pub use run::*;
pub use scenario::ScenarioArgs;
pub use values::{LatencyOf, RunFormat};

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
    Scenario(ScenarioArgs),
    /// Runs in the results database with p99, p99.9, max and missed; long-term plots
    History(HistoryArgs),
    /// The results database: push run directories, pull a run back, list runs
    Db(DbArgs),
    /// `run` with a scheduler profile of the same seconds: run queues, waits (run.json `profile`)
    Profile(ProfileArgs),
    /// Write a run's traces (spike windows, profile) for other tools: Perfetto
    Export(ExportArgs),
    /// cyclictest's command line (-t -a -p -i -D -h -q -v --json= ...) on latlab's engine
    Cyclictest(CyclictestArgs),
    /// How long a run must be to claim a percentile (p99.999<=50us) with 95 % confidence
    Plan(PlanArgs),
    /// Print the manual page (roff) of latlab or of one of its commands: latlab man run | man -l -
    Man(ManArgs),
    /// Print a shell completion script: latlab completions bash > /etc/bash_completion.d/latlab
    Completions(CompletionsArgs),
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
