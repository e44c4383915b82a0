//! The results database's runs as `latlab history` lists them: one row per run, the numbers
//! a long-term plot needs (stored by latlab-store, rendered by latlab-report).

/// One row of `history`: a run and the numbers a long-term plot needs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunRow {
    pub run_id: String,
    pub label: String,
    pub machine_id: String,
    pub hostname: Option<String>,
    pub kernel_release: Option<String>,
    pub kernel_version: Option<String>,
    pub preemption: Option<String>,
    pub source: String,
    pub started_at: Option<String>,
    /// Seconds since the epoch of `started_at` (else of when it was stored).
    pub time_unix: i64,
    pub duration_ns: Option<i64>,
    pub complete: bool,
    pub cpus: i64,
    pub samples: i64,
    pub p99_ns: Option<i64>,
    pub p999_ns: Option<i64>,
    pub max_ns: Option<i64>,
    pub missed: i64,
}
