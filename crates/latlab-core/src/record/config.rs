//! How a run was asked for and where it ran: its source, configuration and machine basics.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Nanos;

/// Where a run's numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Latlab,
    Cyclictest,
    Rtla,
    Realfeel,
    Oslat,
    #[serde(rename = "stress-ng")]
    StressNg,
    Jitterdebugger,
    Pmqtest,
    Ptsematest,
    Sigwaittest,
    Svsematest,
}

impl Source {
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::Latlab => "latlab",
            Source::Cyclictest => "cyclictest",
            Source::Rtla => "rtla",
            Source::Realfeel => "realfeel",
            Source::Oslat => "oslat",
            Source::StressNg => "stress-ng",
            Source::Jitterdebugger => "jitterdebugger",
            Source::Pmqtest => "pmqtest",
            Source::Ptsematest => "ptsematest",
            Source::Sigwaittest => "sigwaittest",
            Source::Svsematest => "svsematest",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct RunConfig {
    /// `timer` (cyclictest-style wake-ups); other modes come with their issues.
    #[serde(default = "timer")]
    pub mode: String,
    /// `real`, `sim`, `timerlat` (the kernel's timerlat tracer), or `import`.
    pub backend: String,
    pub interval_ns: Option<Nanos>,
    pub duration_ns: Option<Nanos>,
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// The CPUs latlab's own threads (collector, recorder re-arm, load supervisor, metrics,
    /// profile reader) were confined to: the CPUs it could use minus the measured ones (and a
    /// wake-up mode's senders). Absent when every CPU was measured (not confined), in
    /// imports and in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub housekeeping_cpus: Vec<u32>,
    pub priority: Option<u32>,
    pub policy: Option<String>,
    #[serde(default)]
    pub distance_ns: Nanos,
    #[serde(default)]
    pub aligned: bool,
    pub hist_limit_ns: Option<Nanos>,
    pub bucket_ns: Option<Nanos>,
    pub max_latency_ns: Option<Nanos>,
    pub trace_threshold_ns: Option<Nanos>,
    #[serde(default)]
    pub loads: Vec<String>,
    #[serde(default)]
    pub warmup_ns: Nanos,
    pub sim_seed: Option<u64>,
    /// Time actually measured (ends early on Ctrl-C).
    pub measured_ns: Option<Nanos>,
    /// Parameters of the `wakeup`, `jitter` and `audio` modes (absent for `timer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_params: Option<crate::modes::ModeParams>,
    /// The value (µs) `/dev/cpu_dma_latency` was held at while measuring; null when it was
    /// not held (`--dma-latency off`, no measuring thread on the machine, the device could
    /// not be opened), absent in runs before the key.
    #[serde(default)]
    pub dma_latency_us: Option<i64>,
}

fn timer() -> String {
    "timer".into()
}

/// Machine basics recorded by every run (the full inventory is `RunRecord::inventory`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct Machine {
    pub hostname: Option<String>,
    pub kernel_release: Option<String>,
    pub kernel_version: Option<String>,
    pub arch: Option<String>,
    #[serde(default)]
    pub cpus_online: Vec<u32>,
    pub cpu_model: Option<String>,
    /// `none`, `voluntary`, `full`, `rt`, `lazy` when known.
    pub preemption: Option<String>,
    pub cmdline: Option<String>,
    pub virtualized: Option<bool>,
}
