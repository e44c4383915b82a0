//! `latlab scenario fairness` (Love, OLS 2003, §2.1): N identical CPU-bound tasks, their CPU
//! shares and Jain's index, and an interactive sleeper's wake-ups.

use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use latlab_core::cpulist::format_cpu_list;
use latlab_core::hist::{Histogram, Layout, Quantile};
use latlab_core::record::{RunConfig, ThreadInfo};
use latlab_core::scenario as stats;
use latlab_core::scenario_record::{
    FairnessRecord, FairnessResult, ScenarioRecord, SleeperSummary, TaskShare,
};
use latlab_sys::rt::{self, Policy};
use latlab_sys::scenario::fairness;

use crate::args::online_cpus;
use crate::cli_scenario::FairnessArgs;
use latlab_engine::loads::LoadSession;
use latlab_engine::session::{Begin, Session};

/// Longest run of real-time CPU hogs allowed.
use super::{load_options, record, scenario_need, RT_MAX_NS};

pub(super) fn run(a: FairnessArgs) -> anyhow::Result<ExitCode> {
    // Validate everything before anything starts.
    if a.tasks == 0 || a.tasks > 1024 {
        bail!(
            "--tasks {}: give 1 to 1024 tasks (2 or more to judge fairness)",
            a.tasks
        );
    }
    let duration_ns = a.duration.0;
    if duration_ns == 0 {
        bail!("--duration: must be more than 0 (e.g. 10s)");
    }
    let policy = Policy::from(a.policy);
    let online = online_cpus()?;
    let cpus = match &a.cpus {
        None => {
            let allowed = rt::allowed_cpus().unwrap_or_else(|_| online.clone());
            let last = online
                .iter()
                .rev()
                .find(|c| allowed.contains(c))
                .copied()
                .ok_or_else(|| anyhow!("no online CPU is available to this process"))?;
            vec![last]
        }
        Some(l) => {
            let v = l.0.clone();
            if let Some(c) = v.iter().find(|c| !online.contains(c)) {
                bail!(
                    "--cpus {l}: CPU {c} is not online (online: {}); choose online CPUs",
                    format_cpu_list(&online)
                );
            }
            v
        }
    };
    if policy.is_rt() {
        if !(1..=99).contains(&a.priority) {
            bail!(
                "--priority {}: must be 1..99 for --policy {}",
                a.priority,
                policy.as_str()
            );
        }
        if !rt::can_use_rt() {
            bail!(
                "--policy {} needs root (or CAP_SYS_NICE): run as root, or use --policy other",
                policy.as_str()
            );
        }
        if online.iter().all(|c| cpus.contains(c)) {
            bail!(
                "--cpus {}: real-time CPU hogs on every online CPU could lock the machine; leave at least one CPU out (e.g. --cpus {})",
                format_cpu_list(&cpus),
                online.last().copied().unwrap_or(0)
            );
        }
        if duration_ns > RT_MAX_NS {
            bail!(
                "--duration {}: real-time hogs run at most 10m; give a shorter --duration",
                a.duration
            );
        }
    }
    let sleeper_interval_ns = if a.sleeper {
        let i = a.sleeper_interval.0;
        if i < 100_000 || i > duration_ns {
            bail!(
                "--sleeper-interval {}: give 100us up to the --duration",
                a.sleeper_interval
            );
        }
        Some(i)
    } else {
        None
    };
    let warmup_ns = a.common.warmup.0;
    let mut loads = if a.loads.is_empty() {
        None
    } else {
        Some(LoadSession::prepare(
            &a.loads,
            &load_options(&a.common, None)?,
        )?)
    };
    // Another latlab measuring any of these CPUs now: refused (or, with --force, a warning),
    // before anything is changed or written.
    let overlap = if a.force {
        latlab_engine::claim::Overlap::Warn
    } else {
        latlab_engine::claim::Overlap::Refuse
    };
    let (_claim, claim_warning) =
        latlab_engine::claim::claim("latlab scenario fairness", &cpus, overlap)?;
    let layout = Layout::new(1_000, 10_000_000).expect("a valid layout");
    let label = a.common.label.clone().unwrap_or_else(|| "fairness".into());
    let mut s = Session::begin(Begin {
        results: Some((&a.common.results, &label, scenario_need()?)),
        inventory: true,
        // Scenario warnings go to the record only (pushed, not `warn`ed); the summary's
        // `results:` line is printed as `run` prints it.
        quiet: false,
    })?;
    if policy.is_rt() {
        if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us") {
            if v.trim() != "-1" {
                s.warnings.push(format!(
                    "RT throttling is on (sched_rt_runtime_us={}): the tasks get at most that share of each second of their CPUs",
                    v.trim()
                ));
            }
        }
    }
    s.warnings.extend(claim_warning);
    let mut ran = true;
    if let Some(l) = loads.take() {
        let log = s.dir().join("loads");
        ran = s.start_loads(l, &log, warmup_ns)?;
    }
    let cfg = fairness::Config {
        tasks: a.tasks,
        duration_ns,
        policy,
        priority: if policy.is_rt() { a.priority } else { 0 },
        cpus: cpus.clone(),
        sleeper_interval_ns,
        layout,
    };
    let out = if ran {
        Some(fairness::run(&cfg, s.stop.clone()).with_context(|| {
            format!(
                "cannot run the fairness tasks (--policy {} --cpus {})",
                policy.as_str(),
                format_cpu_list(&cpus)
            )
        })?)
    } else {
        None
    };
    let (load_recs, activity) = s.stop_loads();
    let interrupted = out.as_ref().is_none_or(|o| o.interrupted);
    if interrupted {
        s.warnings.push(
            "the run was interrupted by a signal: the figures cover part of --duration".into(),
        );
    }
    let empty = Histogram::new(layout);
    let mut per_task = Vec::new();
    let mut result = None;
    if let Some(o) = &out {
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
        result =
            Some(FairnessResult {
                jain_index: stats::jain_index(&cpu),
                jain_index_work: stats::jain_index(&work),
                max_min_ratio: stats::max_min_ratio(&cpu),
                elapsed_ns: o.elapsed_ns,
                utilisation: (o.elapsed_ns > 0)
                    .then(|| total_cpu as f64 / (o.elapsed_ns as f64 * cpus.len() as f64)),
                sleeper: o.sleeper.as_ref().zip(sleeper_interval_ns).map(|(sl, i)| {
                    SleeperSummary {
                        count: sl.hist.count(),
                        p50_ns: sl.hist.quantile(Quantile::P50),
                        p99_ns: sl.hist.quantile(Quantile::P99),
                        max_ns: sl.hist.max(),
                        interval_ns: i,
                        wakeups: sl.hist.count(),
                        missed: sl.missed,
                        tid: sl.tid,
                    }
                }),
            });
    }
    let scenario = ScenarioRecord::Fairness(FairnessRecord {
        tasks: a.tasks,
        policy: policy.as_str().into(),
        priority: cfg.priority,
        cpus: format_cpu_list(&cpus),
        duration_ns,
        interrupted,
        cpu_time_source: "CLOCK_THREAD_CPUTIME_ID read by each task at its start and end".into(),
        work_unit: format!("{} rounds of xorshift64", fairness::CHUNK),
        per_task,
        result,
    });
    let series: Vec<(u32, &Histogram, ThreadInfo, u64)> =
        match out.as_ref().and_then(|o| o.sleeper.as_ref()) {
            Some(sl) => vec![(
                cpus[0],
                &sl.hist,
                ThreadInfo {
                    tid: Some(sl.tid),
                    policy: Some(policy.as_str().into()),
                    priority: Some(cfg.priority),
                    interval_ns: sleeper_interval_ns,
                },
                sl.missed,
            )],
            None if a.sleeper => vec![(cpus[0], &empty, ThreadInfo::default(), 0)],
            None => vec![],
        };
    let config = RunConfig {
        mode: "fairness".into(),
        backend: "real".into(),
        interval_ns: sleeper_interval_ns,
        duration_ns: Some(duration_ns),
        cpus: cpus.clone(),
        priority: Some(cfg.priority),
        policy: Some(policy.as_str().into()),
        hist_limit_ns: Some(layout.limit_ns()),
        bucket_ns: Some(layout.bucket_ns),
        loads: a.loads.clone(),
        warmup_ns: if a.loads.is_empty() { 0 } else { warmup_ns },
        measured_ns: out.as_ref().map(|o| o.elapsed_ns),
        ..RunConfig::default()
    };
    let mut rec = record(&s, &label, config, series, scenario)?;
    rec.loads = load_recs;
    rec.activity = activity;
    s.record_db = Some(a.common.record_db.target());
    let dir = s.dir().to_path_buf();
    let quiet = false;
    let model = s.finish(rec)?;
    crate::cmd::run::print_summary(&model, &dir, a.common.format, quiet)?;
    Ok(ExitCode::SUCCESS)
}
