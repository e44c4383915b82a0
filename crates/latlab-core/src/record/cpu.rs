//! One measured CPU (or thread, for imports): its histogram, per-second maxima, largest
//! samples and the thread that measured.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hist::HistogramRecord;
use crate::stats::Stats;
use crate::units::Nanos;

/// Who ran the measurement thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct ThreadInfo {
    pub tid: Option<i64>,
    pub policy: Option<String>,
    pub priority: Option<u32>,
    pub interval_ns: Option<Nanos>,
}

/// One of the largest samples of a thread, kept by the measurement thread itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SampleSpike {
    /// Intended wake-up time, CLOCK_MONOTONIC ns.
    pub at_ns: Nanos,
    pub latency_ns: Nanos,
}

/// One measured CPU (or thread, for imports).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuRecord {
    pub cpu: u32,
    /// Derived, contract keys (`samples`, `min_ns`, … `missed_periods`, `below`).
    /// `missed_periods` is raw data kept here.
    #[serde(flatten)]
    pub stats: Stats,
    pub histogram: HistogramRecord,
    /// Largest latency in each second of the measurement (`null`: no sample that second).
    #[serde(default)]
    pub per_second_max_ns: Vec<Option<Nanos>>,
    /// The largest samples, largest first.
    #[serde(default)]
    pub top_spikes: Vec<SampleSpike>,
    #[serde(default)]
    pub thread: ThreadInfo,
    /// What the `wakeup`, `jitter` and `audio` modes add per thread (absent for `timer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<crate::modes::CpuMode>,
}

impl CpuRecord {
    /// CPU `cpu` with this histogram and nothing else yet (statistics come from
    /// [`super::RunRecord::refresh`]).
    pub fn new(cpu: u32, histogram: HistogramRecord) -> CpuRecord {
        CpuRecord {
            cpu,
            stats: Stats::default(),
            histogram,
            per_second_max_ns: vec![],
            top_spikes: vec![],
            thread: ThreadInfo::default(),
            mode: None,
        }
    }
}
