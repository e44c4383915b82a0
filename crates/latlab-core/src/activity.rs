//! What the machine did over a measurement with loads (the record's `activity`): the deltas of
//! `/proc/softirqs` and `/proc/interrupts` and the load average before and after, so a reader
//! sees which interrupts a load raised.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ActivityRecord {
    /// Seconds between the two readings.
    pub interval_s: f64,
    /// Per softirq vector (`RCU`, `TIMER`, `NET_RX` …), every vector.
    #[serde(default)]
    pub softirqs: BTreeMap<String, CounterDelta>,
    /// Per interrupt line (`LOC`, `24` …), the lines that changed.
    #[serde(default)]
    pub interrupts: BTreeMap<String, CounterDelta>,
    pub loadavg_start: Option<LoadAvg>,
    pub loadavg_end: Option<LoadAvg>,
    /// Where the deltas start: `measurement start`, or `load start` when the run ended in
    /// its warm-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The loads' scratch directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_dir: Option<String>,
}

/// How much one counter moved.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CounterDelta {
    pub total: u64,
    pub per_s: f64,
    pub per_cpu: Vec<u64>,
    /// The line's description (`Local timer interrupts`), for interrupts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub desc: String,
}

/// `/proc/loadavg`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct LoadAvg {
    #[serde(rename = "1m")]
    pub one: f64,
    #[serde(rename = "5m")]
    pub five: f64,
    #[serde(rename = "15m")]
    pub fifteen: f64,
    /// Runnable / total tasks (`3/120`).
    pub tasks: String,
}
