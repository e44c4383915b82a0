//! `latlab cyclictest [cyclictest flags]`: cyclictest 2.x's command line, parsed as its
//! getopt_long does ([`parse`]) into the options of the run and of cyclictest's output; the
//! run's arguments built from them ([`Opts::run_args`]), so the run goes through `run`'s plan
//! and lifecycle unchanged and leaves a normal run directory.

use std::path::PathBuf;
use std::str::FromStr;

use clap::{Args, FromArgMatches};
use latlab_engine::actions::Action;

use super::run::RunArgs;
use super::values::{CpuList, CpuSel, Duration, Latency, Policy};

pub use latlab_engine::cyclictest_cli::{parse, Opts};

/// `latlab cyclictest`'s arguments: cyclictest's, taken raw (cyclictest's `-h` is its
/// histogram, not help; `--help` prints this command's help).
#[derive(Debug, Args)]
#[command(disable_help_flag = true, after_long_help = HELP)]
pub struct CyclictestArgs {
    /// cyclictest 2.x flags (see below); `--help` prints this help
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        num_args = 0..,
        value_name = "CYCLICTEST_FLAGS"
    )]
    pub args: Vec<String>,
}

const HELP: &str = "\
Supported cyclictest flags (values as cyclictest takes them: -t4, -a1, -h100, --json=x.json):
  -a/--affinity [CPUSET]  -t/--threads [N]  -p/--priority PRIO  --policy fifo|rr|other|normal
  -i/--interval US  -d/--distance US  -D/--duration TIME (bare = s; m, h, d)  -l/--loops N
  -m/--mlockall  -n/--nanosleep  -N/--nsecs  -q/--quiet  -v/--verbose
  -h/--histogram US  -H/--histofall US  --histfile PATH  -b/--breaktrace US  --spike US
  -S/--smp  --json=FILE  --latency PM_QOS  --mainaffinity CPUSET  --secaligned [USEC]
  --priospread
latlab's own: --results DIR  --label L  --backend real|sim  --sim-seed N  --db URL  --no-db
Any other flag is an error naming it. The mapping to `latlab run` is in docs/cli.md.";

/// `latlab cyclictest --help` (the command's own long help: cyclictest's `-h` is its
/// histogram).
pub fn long_help() -> String {
    let mut cmd = <super::Cli as clap::CommandFactory>::command();
    cmd.build();
    let sub = cmd
        .find_subcommand_mut("cyclictest")
        .expect("the cyclictest subcommand");
    sub.render_long_help().to_string()
}

/// What the CLI does with cyclictest's parsed options (the parser is the engine's:
/// `latlab_engine::cyclictest_cli`): `latlab run`'s arguments, refusals in cyclictest's terms.
pub trait OptsExt {
    fn typed<'a>(&'a self, flag: &'a str) -> &'a str;
    fn value<T: FromStr<Err = String>>(&self, flag: &str, given: String) -> anyhow::Result<T>;
    fn run_args(&self) -> anyhow::Result<RunArgs>;
    fn duration(&self) -> anyhow::Result<Option<Duration>>;
    fn in_cyclictest_terms(&self, msg: &str) -> String;
}

impl OptsExt for Opts {
    /// How the user typed the cyclictest flag that gave `latlab run`'s `flag` (`-h 100`).
    fn typed<'a>(&'a self, flag: &'a str) -> &'a str {
        self.origins
            .iter()
            .rev()
            .find(|(f, _)| *f == flag)
            .map_or(flag, |(_, t)| t.as_str())
    }

    /// `given` as `flag`'s type; a refusal in the terms the user typed (`-b 99999999999999999:
    /// not a latency: …`).
    fn value<T: FromStr<Err = String>>(&self, flag: &str, given: String) -> anyhow::Result<T> {
        given.parse().map_err(|e: String| {
            let why = e.strip_prefix(&format!("'{given}' is ")).unwrap_or(&e);
            anyhow::anyhow!("{}: {why}", self.typed(flag))
        })
    }

    /// `latlab run`'s arguments for this run: run's defaults (as its flags define them), with
    /// what these options set.
    fn run_args(&self) -> anyhow::Result<RunArgs> {
        let defaults = RunArgs::augment_args(clap::Command::new("run")).get_matches_from(["run"]);
        let mut a = RunArgs::from_arg_matches(&defaults).expect("run's defaults");
        let us = |flag: &str, us: u64| self.value::<Latency>(flag, format!("{us}us"));
        a.quiet = true;
        // cyclictest's command line has no --force: another latlab measuring the same CPUs
        // is a warning here, not a refusal.
        a.force = true;
        a.cpus = CpuSel::List(CpuList(self.out.cpus.clone()));
        a.interval = Some(us("--interval", self.out.interval_us)?);
        a.distance = us("--distance", self.out.distance_us)?;
        a.policy = Some(match self.policy {
            "fifo" => Policy::Fifo,
            "rr" => Policy::Rr,
            _ => Policy::Other,
        });
        if a.policy != Some(Policy::Other) {
            a.priority = self.out.priority;
        }
        a.duration = self.duration()?.unwrap_or(a.duration);
        a.hist_limit = us(
            "--hist-limit",
            self.out.histogram_us.map_or(10_000, |h| h.max(100)),
        )?;
        if let Some(b) = self.breaktrace_us {
            a.max_latency = Some(us("--max-latency", b)?);
            a.trace_threshold = Some(us("--trace-threshold", b)?);
            a.actions.on_threshold = vec![Action::Stop];
        }
        a.aligned = self.secaligned;
        // --latency PM_QOS (cyclictest's default 0).
        a.dma_latency = super::values::DmaLatency(Some(self.latency_us));
        a.ct.priospread = self.out.priospread;
        if let Some(r) = &self.results {
            a.results = PathBuf::from(r);
        }
        a.label.clone_from(&self.label);
        if let Some(b) = &self.backend {
            let names = latlab_engine::run::backend::names();
            if !names.contains(&b.as_str()) {
                anyhow::bail!(
                    "{}: not a back end; use {}",
                    self.typed("--backend"),
                    names.join(", ")
                );
            }
            a.backend.clone_from(b);
        }
        if let Some(s) = &self.sim_seed {
            a.sim_seed = s
                .parse()
                .map_err(|e| anyhow::anyhow!("{}: {e}", self.typed("--sim-seed")))?;
        }
        a.record_db.db.clone_from(&self.db);
        a.record_db.no_db = self.no_db;
        Ok(a)
    }

    /// The run's length: `-D`'s, or `-l` loops of `-i`, the shorter of the two when both are
    /// given.
    fn duration(&self) -> anyhow::Result<Option<Duration>> {
        let loops_ns = self
            .loops
            .map(|l| l.saturating_mul(self.out.interval_us).saturating_mul(1000));
        let given = match &self.duration {
            Some(d) => Some(self.value::<Duration>("--duration", d.clone())?.0),
            None => None,
        };
        Ok(match (given, loops_ns) {
            (Some(d), Some(l)) => Some(Duration(d.min(l))),
            (d, l) => d.or(l).map(Duration),
        })
    }

    /// A refusal of `latlab run`'s plan in the terms the user typed: `--hist-limit 1m40s: must
    /// be …` → `-h 100000000: must be …`; a message about no flag these options gave is
    /// returned as it is.
    fn in_cyclictest_terms(&self, msg: &str) -> String {
        for (flag, typed) in self.origins.iter().rev() {
            if let Some(rest) = msg.strip_prefix(flag) {
                if rest.starts_with(' ') || rest.starts_with(':') {
                    if let Some((_, why)) = rest.split_once(": ") {
                        return format!("{typed}: {why}");
                    }
                }
            }
        }
        msg.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(s: &str) -> RunArgs {
        let args: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse(&args, &[0, 1]).unwrap().run_args().unwrap()
    }

    #[test]
    fn loops_and_breaktrace_become_run_flags() {
        let a = run_args("-t1 -a1 -mq -l100 -i 200");
        assert_eq!(a.duration, Duration(20_000_000));
        let a = run_args("-a 0-1 -D1 -b 50 --latency 7");
        assert_eq!(a.max_latency, Some(Latency(50_000)));
        assert_eq!(a.dma_latency, super::super::values::DmaLatency(Some(7)));
    }
}
