//! `latlab scenario io-read|fairness`: the responsiveness scenarios of Love's OLS 2003 paper,
//! driven by their plans ([`IoReadPlan`], [`FairnessPlan`], built and checked by the CLI).
//! Same session as `latlab run` (ledger → loads with warm-up → measure → stop → write →
//! restore on every exit path), and a normal run directory whose histograms are the
//! scenario's latency distributions and whose `scenario` key holds the rest.

use std::path::PathBuf;

use latlab_core::activity::ActivityRecord;
use latlab_core::hist::Histogram;
use latlab_core::model::RunModel;
use latlab_core::record::{CpuRecord, LoadRecord, RunConfig, RunRecord, ThreadInfo};
use latlab_core::scenario_record::ScenarioRecord;
use latlab_core::stats::Stats;
use latlab_core::units::Nanos;

use crate::loads::LoadOptions;
use crate::rundir;
use crate::session::{Begin, Session};
use crate::store::DbTarget;

pub mod fairness;
pub mod io_read;

pub use fairness::FairnessPlan;
pub use io_read::IoReadPlan;

/// Longest run of real-time CPU hogs allowed.
pub const RT_MAX_NS: Nanos = 600 * 1_000_000_000;

/// What every scenario's plan has.
pub struct ScenarioPlan {
    /// The run's name (`--label`, else the scenario's name).
    pub label: String,
    /// Where the run directory goes.
    pub results: PathBuf,
    pub warmup_ns: Nanos,
    pub load_options: LoadOptions,
    pub db: DbTarget,
}

/// A scenario that ended: its run (written, recorded) and its run directory.
pub struct Finished {
    pub model: RunModel,
    pub dir: PathBuf,
}

/// The session of a scenario: its run directory with the room its record needs (per-task or
/// per-file figures, not per-second maxima: an hour of them), the inventory, the ledger.
fn begin(c: &ScenarioPlan) -> anyhow::Result<Session> {
    let cpus = latlab_sys::rt::online_cpus()?.len();
    let need = rundir::estimate_run_bytes(cpus, 3_600_000_000_000, 10_000_000, 0);
    let mut s = Session::begin(Begin {
        results: Some((&c.results, &c.label, need)),
        inventory: true,
        // Scenario warnings go to the record only (pushed, not `warn`ed); the summary's
        // `results:` line is printed as `run` prints it.
        quiet: false,
    })?;
    s.record_db = Some(c.db.clone());
    Ok(s)
}

/// One latency series of a scenario's record: its number (the report's "CPU" column), its
/// histogram, its thread and its missed periods.
type Series<'a> = (u32, &'a Histogram, ThreadInfo, u64);

/// The scenario's record: its histogram series, its results under `scenario`, the session's
/// warnings, the loads' records; written, the machine restored, the run recorded.
fn finish(
    s: Session,
    c: &ScenarioPlan,
    config: RunConfig,
    series: Vec<Series>,
    scenario: ScenarioRecord,
    loads: (Vec<LoadRecord>, Option<ActivityRecord>),
) -> anyhow::Result<Finished> {
    let cpus = series
        .into_iter()
        .map(|(cpu, h, thread, missed)| CpuRecord {
            cpu,
            stats: Stats {
                missed_periods: missed,
                ..Stats::default()
            },
            histogram: h.to_record(),
            per_second_max_ns: vec![],
            top_spikes: vec![],
            thread,
            mode: None,
        })
        .collect();
    let mut r: RunRecord = s.record(&c.label, config, cpus, true);
    r.scenario = Some(scenario);
    r.refresh()?;
    (r.loads, r.activity) = loads;
    let dir = s.dir().to_path_buf();
    let model = s.finish(r)?;
    Ok(Finished { model, dir })
}
