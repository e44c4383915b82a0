//! The action flags of `latlab run` (`--on-threshold`, `--on-end`, `--action-timeout`).

use clap::Args;
use latlab_engine::actions::{Action, Actions};

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
    pub action_timeout: crate::args::Duration,
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
