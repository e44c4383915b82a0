//! What `latlab scenario` keeps under the record's `scenario` key, typed: one variant per
//! scenario, tagged by `kind` (`fairness`, `io-read`) as the JSON has always been. A scenario
//! whose kind this latlab does not know loads as [`ScenarioRecord::Unknown`] (its details are
//! not shown), so a newer run.json still opens.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Nanos;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ScenarioRecord {
    Fairness(FairnessRecord),
    IoRead(IoReadRecord),
    #[serde(other)]
    Unknown,
}

impl ScenarioRecord {
    /// The `kind` key.
    pub fn kind(&self) -> &'static str {
        match self {
            ScenarioRecord::Fairness(_) => "fairness",
            ScenarioRecord::IoRead(_) => "io-read",
            ScenarioRecord::Unknown => "unknown",
        }
    }
}

/// `latlab scenario fairness` (Love, OLS 2003, §2.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FairnessRecord {
    pub tasks: usize,
    pub policy: String,
    pub priority: u32,
    /// The CPU list the tasks shared (`0-1`).
    pub cpus: String,
    pub duration_ns: Nanos,
    pub interrupted: bool,
    /// How each task's CPU time was read.
    pub cpu_time_source: String,
    /// What one unit of `work` is.
    pub work_unit: String,
    pub per_task: Vec<TaskShare>,
    /// Absent when the tasks never ran (a signal during the loads' warm-up).
    #[serde(flatten)]
    pub result: Option<FairnessResult>,
}

/// One task of the fairness scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskShare {
    pub task: usize,
    pub tid: i64,
    pub cpu_ns: Nanos,
    pub work: u64,
    pub wall_ns: Nanos,
    pub cpu_share: f64,
    pub work_share: f64,
}

/// The fairness figures over all tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FairnessResult {
    /// Jain's index over CPU time (1 = perfectly fair, 1/n = one task got everything).
    pub jain_index: Option<f64>,
    /// Jain's index over work done.
    pub jain_index_work: Option<f64>,
    /// Largest CPU time over the smallest (null when a task got nothing).
    pub max_min_ratio: Option<f64>,
    pub elapsed_ns: Nanos,
    /// CPU time of all tasks over the time × CPUs they had.
    pub utilisation: Option<f64>,
    /// The interactive sleeper's wake-ups (`--sleeper`).
    pub sleeper: Option<SleeperSummary>,
}

/// How late the fairness scenario's sleeper woke.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SleeperSummary {
    pub count: u64,
    pub p50_ns: Option<Nanos>,
    pub p99_ns: Option<Nanos>,
    pub max_ns: Option<Nanos>,
    pub interval_ns: Nanos,
    pub wakeups: u64,
    pub missed: u64,
    pub tid: i64,
}

/// `latlab scenario io-read` (Love, OLS 2003, §4.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IoReadRecord {
    pub file_size: u64,
    pub small_files: usize,
    pub small_bytes: Option<u64>,
    pub read_size: usize,
    pub repeat: u32,
    pub dir: String,
    pub scratch: String,
    /// How the page cache of the files was dropped before each pass.
    pub cache_drop: String,
    pub walk_order: String,
    pub device: DeviceRecord,
    pub iosched: IoSchedRecord,
    pub interrupted: bool,
    /// The histogram series' names, by series number (the record's `cpus[].cpu`).
    pub series: Vec<String>,
    pub phases: Vec<PhaseRecord>,
    /// Each loaded phase against the phase alone.
    pub ratios: Vec<RatioRecord>,
}

/// The block device behind `--dir`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct DeviceRecord {
    pub dev: Option<String>,
    pub name: Option<String>,
    pub disk: Option<String>,
    #[serde(default)]
    pub slaves: Vec<String>,
    pub scheduler_path: Option<String>,
    #[serde(default)]
    pub available: Vec<String>,
    pub note: Option<String>,
}

/// The disk's I/O scheduler: asked for, before, during the run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct IoSchedRecord {
    pub requested: Option<String>,
    pub before: Option<String>,
    pub during: Option<String>,
}

/// One phase: alone, or under one load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PhaseRecord {
    pub name: String,
    /// The load's profile (null: alone).
    pub load: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub big: Option<PassSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small: Option<PassSummary>,
}

/// The passes of one reader (big file or small files) in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PassSummary {
    /// Timed operations over all passes.
    pub count: u64,
    pub p50_ns: Option<Nanos>,
    pub p99_ns: Option<Nanos>,
    pub max_ns: Option<Nanos>,
    /// Its histogram series.
    pub series: u32,
    pub totals_ns: Vec<Nanos>,
    pub median_total_ns: Option<Nanos>,
    pub ops_per_pass: u64,
    pub bytes_per_pass: u64,
}

/// A loaded phase over the phase alone (null when either is missing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RatioRecord {
    pub phase: String,
    pub big_total: Option<f64>,
    pub big_p99: Option<f64>,
    pub small_total: Option<f64>,
    pub small_p99: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_unknown_kinds_load() {
        let f = ScenarioRecord::Fairness(FairnessRecord {
            tasks: 2,
            policy: "other".into(),
            priority: 0,
            cpus: "1".into(),
            duration_ns: 1,
            interrupted: true,
            cpu_time_source: "x".into(),
            work_unit: "y".into(),
            per_task: vec![],
            result: None,
        });
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["kind"], "fairness");
        assert!(v.get("jain_index").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<ScenarioRecord>(v).unwrap(), f);
        let u: ScenarioRecord =
            serde_json::from_str(r#"{"kind": "from-the-future", "x": 1}"#).unwrap();
        assert_eq!(u, ScenarioRecord::Unknown);
    }
}
