//! The flags of the commands that read results: `report`, `compare`, `history`, `db`,
//! `import`, `analyze`, `export`, `plan`; where runs are recorded and read.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, Subcommand, ValueEnum};
use latlab_core::import::From;

use latlab_core::plan::Target;

use super::values::{Duration, Latency, RunFormat, Size};

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
pub struct ExportArgs {
    /// A run directory (with spikes/NNN/trace.dat or trace.txt, or profile/trace.dat)
    pub run: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value_t = ExportFormat::Perfetto)]
    pub format: ExportFormat,
    /// Where to write (refused if it exists and is not a regular file)
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// --format kcidb: the submitting CI system, the prefix of every id ([a-z0-9_]+)
    #[arg(long, value_name = "ORIGIN", default_value = "latlab")]
    pub kcidb_origin: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Perfetto's protobuf trace (ui.perfetto.dev)
    Perfetto,
    /// KCIDB I/O JSON (schema 5.3): checkout, build and tests for KernelCI's database
    Kcidb,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Text,
    Markdown,
    Json,
    Html,
    Cyclictest,
    RtTestsJson,
    Lava,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run directory or its run.json, or a run id from the results database; without it, the
    /// latest run in --results
    pub run: Option<PathBuf>,
    /// Where to look for the latest run when RUN is not given
    #[arg(long, default_value = "latlab-results", value_name = "DIR")]
    pub results: PathBuf,
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
    Lava,
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

/// `--from`: latlab-core's formats (`import::From`), named as `From::name` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportFrom(pub From);

impl ValueEnum for ImportFrom {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [ImportFrom; From::ALL.len()] = {
            let mut all = [ImportFrom(From::Auto); From::ALL.len()];
            let mut i = 0;
            while i < all.len() {
                all[i] = ImportFrom(From::ALL[i]);
                i += 1;
            }
            all
        };
        &ALL
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()))
    }
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The file to import (a regular file; `-` reads standard input)
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = ImportFrom(From::Auto))]
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
    /// Print the trace's events as the kernel's text instead of the analysis: a trace.dat
    /// rendered CPU by CPU (a spike's is what its trace.txt held with --trace-text)
    #[arg(long, conflicts_with_all = ["threshold", "format"])]
    pub print_trace: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// A run directory (or its run.json, or a run id): its wake-up rate and how often it reached the limit
    pub run: Option<PathBuf>,
    /// The claim: pNN[.NNN]<=LATENCY (p99.999<=50us)
    #[arg(long, value_name = "pQ<=T")]
    pub target: Target,
    /// Wake-ups per second of all measured threads together (without a run)
    #[arg(long, value_name = "HZ", conflicts_with_all = ["interval", "run"])]
    pub rate: Option<f64>,
    /// Wake-up interval of each thread (without a run; with --threads)
    #[arg(long, value_name = "T", conflicts_with = "run")]
    pub interval: Option<Latency>,
    /// Threads measured at --interval
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub threads: u32,
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
    #[command(flatten)]
    pub db: DbUrl,
}
