//! `latlab scenario io-read|fairness`: the responsiveness scenarios of Love's OLS 2003 paper.
//! Same lifecycle as `latlab run` (validate everything → ledger → loads with warm-up →
//! measure → stop → write → restore on every exit path), and a normal run directory whose
//! histograms are the scenario's latency distributions and whose `scenario` key holds the rest.

use std::path::PathBuf;
use std::process::ExitCode;

use latlab_core::hist::Histogram;
use latlab_core::record::{CpuRecord, RunConfig, RunRecord, ThreadInfo};
use latlab_core::scenario_record::ScenarioRecord;
use latlab_core::stats::Stats;
use latlab_core::units::Nanos;

use crate::args::online_cpus;
use crate::cli_scenario::{ScenarioArgs, ScenarioCommand, ScenarioCommon};
use latlab_engine::loads::LoadOptions;
use latlab_engine::rundir;
use latlab_engine::session::Session;

/// Longest run of real-time CPU hogs allowed.
mod fairness;
mod io_read;

const RT_MAX_NS: Nanos = 600 * 1_000_000_000;

pub fn scenario(a: ScenarioArgs) -> anyhow::Result<ExitCode> {
    match a.command {
        ScenarioCommand::Fairness(f) => fairness::run(f),
        ScenarioCommand::IoRead(i) => io_read::run(i),
    }
}

fn load_options(c: &ScenarioCommon, default_dir: Option<PathBuf>) -> anyhow::Result<LoadOptions> {
    let cpus = c.load_cpus.as_ref().map(|l| l.0.clone());
    Ok(LoadOptions {
        dir: c.load_dir.clone().or(default_dir),
        cpus,
        required: false,
        src: None,
        duration_ns: 0,
    })
}

/// Free space a scenario's record needs: per-task or per-file figures, not per-second maxima;
/// an hour of it.
fn scenario_need() -> anyhow::Result<u64> {
    Ok(rundir::estimate_run_bytes(
        online_cpus()?.len(),
        3_600_000_000_000,
        10_000_000,
        0,
    ))
}

/// The scenario's record: its histogram series (the report's "CPU" column), its results
/// under `scenario`, the session's warnings.
fn record(
    s: &Session,
    label: &str,
    config: RunConfig,
    series: Vec<(u32, &Histogram, ThreadInfo, u64)>,
    scenario: ScenarioRecord,
) -> anyhow::Result<RunRecord> {
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
    let mut r = s.record(label, config, cpus, true);
    r.scenario = Some(scenario);
    r.refresh()?;
    Ok(r)
}
