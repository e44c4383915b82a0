//! `latlab scenario fairness` (Love, OLS 2003, §2.1): N identical CPU-bound tasks, their CPU
//! shares and Jain's index, and an interactive sleeper's wake-ups.

use anyhow::Context;
use latlab_core::cpulist::format_cpu_list;
use latlab_core::hist::{Histogram, Layout, Quantile};
use latlab_core::record::{RunConfig, ThreadInfo};
use latlab_core::scenario as stats;
use latlab_core::scenario_record::{
    FairnessRecord, FairnessResult, ScenarioRecord, SleeperSummary, TaskShare,
};
use latlab_core::units::Nanos;
use latlab_sys::rt::Policy;
use latlab_sys::scenario::fairness;

use super::{Finished, ScenarioPlan, Series};
use crate::loads::LoadSession;

/// `latlab scenario fairness`, checked: the tasks, their policy and CPUs, the sleeper.
pub struct FairnessPlan {
    /// Identical CPU-bound tasks (1..1024).
    pub tasks: usize,
    pub duration_ns: Nanos,
    pub policy: Policy,
    /// Their real-time priority (0 for `other`).
    pub priority: u32,
    /// CPUs every task may run on.
    pub cpus: Vec<u32>,
    /// The sleeper's period, when there is one.
    pub sleeper_interval_ns: Option<Nanos>,
    /// Another latlab measuring these CPUs is a warning, not a refusal.
    pub force: bool,
    /// Load profiles during the measurement.
    pub loads: Vec<String>,
    pub common: ScenarioPlan,
}

/// Run the scenario: the run directory written, the machine restored, the run recorded.
pub fn run(p: FairnessPlan) -> crate::Result<Finished> {
    run_with(p).map_err(crate::Error::from)
}

fn run_with(p: FairnessPlan) -> anyhow::Result<Finished> {
    let mut loads = if p.loads.is_empty() {
        None
    } else {
        Some(LoadSession::prepare(&p.loads, &p.common.load_options)?)
    };
    // Another latlab measuring any of these CPUs now: refused (or, with --force, a warning),
    // before anything is changed or written.
    let overlap = if p.force {
        crate::claim::Overlap::Warn
    } else {
        crate::claim::Overlap::Refuse
    };
    let (_claim, claim_warning) =
        crate::claim::claim("latlab scenario fairness", &p.cpus, overlap)?;
    let layout = Layout::new(1_000, 10_000_000).expect("a valid layout");
    let mut s = super::begin(&p.common)?;
    if let (true, Some(v)) = (p.policy.is_rt(), latlab_sys::rt::rt_throttling_us()) {
        s.warnings.push(format!(
            "RT throttling is on (sched_rt_runtime_us={v}): the tasks get at most that share of each second of their CPUs"
        ));
    }
    s.warnings.extend(claim_warning);
    let mut ran = true;
    if let Some(l) = loads.take() {
        let log = s.dir().join("loads");
        ran = s.start_loads(l, &log, p.common.warmup_ns)?;
    }
    let cfg = fairness::Config {
        tasks: p.tasks,
        duration_ns: p.duration_ns,
        policy: p.policy,
        priority: p.priority,
        cpus: p.cpus.clone(),
        sleeper_interval_ns: p.sleeper_interval_ns,
        layout,
    };
    let out = if ran {
        Some(fairness::run(&cfg, s.stop.clone()).with_context(|| {
            format!(
                "cannot run the fairness tasks (--policy {} --cpus {})",
                p.policy.as_str(),
                format_cpu_list(&p.cpus)
            )
        })?)
    } else {
        None
    };
    let loads = s.stop_loads();
    let interrupted = out.as_ref().is_none_or(|o| o.interrupted);
    if interrupted {
        s.warnings.push(
            "the run was interrupted by a signal: the figures cover part of --duration".into(),
        );
    }
    let scenario = record(&p, out.as_ref(), interrupted);
    let empty = Histogram::new(layout);
    let series: Vec<Series> = match out.as_ref().and_then(|o| o.sleeper.as_ref()) {
        Some(sl) => vec![(
            p.cpus[0],
            &sl.hist,
            ThreadInfo {
                tid: Some(sl.tid),
                policy: Some(p.policy.as_str().into()),
                priority: Some(p.priority),
                interval_ns: p.sleeper_interval_ns,
            },
            sl.missed,
        )],
        None if p.sleeper_interval_ns.is_some() => {
            vec![(p.cpus[0], &empty, ThreadInfo::default(), 0)]
        }
        None => vec![],
    };
    let config = RunConfig {
        mode: "fairness".into(),
        backend: "real".into(),
        interval_ns: p.sleeper_interval_ns,
        duration_ns: Some(p.duration_ns),
        cpus: p.cpus.clone(),
        priority: Some(p.priority),
        policy: Some(p.policy.as_str().into()),
        hist_limit_ns: Some(layout.limit_ns()),
        bucket_ns: Some(layout.bucket_ns),
        loads: p.loads.clone(),
        warmup_ns: if p.loads.is_empty() {
            0
        } else {
            p.common.warmup_ns
        },
        measured_ns: out.as_ref().map(|o| o.elapsed_ns),
        ..RunConfig::default()
    };
    super::finish(s, &p.common, config, series, scenario, loads)
}

/// The record's `scenario`: the tasks' shares, Jain's index, the sleeper's wake-ups.
fn record(p: &FairnessPlan, out: Option<&fairness::Outcome>, interrupted: bool) -> ScenarioRecord {
    let mut per_task = Vec::new();
    let mut result = None;
    if let Some(o) = out {
        let cpu: Vec<f64> = o.tasks.iter().map(|t| t.cpu_ns as f64).collect();
        let work: Vec<f64> = o.tasks.iter().map(|t| t.work as f64).collect();
        let cs = stats::shares(&cpu);
        let ws = stats::shares(&work);
        per_task = o
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskShare {
                task: t.index,
                tid: t.tid,
                cpu_ns: t.cpu_ns,
                work: t.work,
                wall_ns: t.wall_ns,
                cpu_share: cs[i],
                work_share: ws[i],
            })
            .collect();
        let total_cpu: u64 = o.tasks.iter().map(|t| t.cpu_ns).sum();
        result = Some(FairnessResult {
            jain_index: stats::jain_index(&cpu),
            jain_index_work: stats::jain_index(&work),
            max_min_ratio: stats::max_min_ratio(&cpu),
            elapsed_ns: o.elapsed_ns,
            utilisation: (o.elapsed_ns > 0)
                .then(|| total_cpu as f64 / (o.elapsed_ns as f64 * p.cpus.len() as f64)),
            sleeper: o
                .sleeper
                .as_ref()
                .zip(p.sleeper_interval_ns)
                .map(|(sl, i)| SleeperSummary {
                    count: sl.hist.count(),
                    p50_ns: sl.hist.quantile(Quantile::P50),
                    p99_ns: sl.hist.quantile(Quantile::P99),
                    max_ns: sl.hist.max(),
                    interval_ns: i,
                    wakeups: sl.hist.count(),
                    missed: sl.missed,
                    tid: sl.tid,
                }),
        });
    }
    ScenarioRecord::Fairness(FairnessRecord {
        tasks: p.tasks,
        policy: p.policy.as_str().into(),
        priority: p.priority,
        cpus: format_cpu_list(&p.cpus),
        duration_ns: p.duration_ns,
        interrupted,
        cpu_time_source: "CLOCK_THREAD_CPUTIME_ID read by each task at its start and end".into(),
        work_unit: format!("{} rounds of xorshift64", fairness::CHUNK),
        per_task,
        result,
    })
}
