//! `latlab cyclictest [cyclictest flags]`: cyclictest 2.x's command line, parsed as its
//! getopt_long does ([`parse`]) into the options of the run and of cyclictest's output.

use clap::Args;

mod parse;

pub use parse::{parse, Opts};

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
