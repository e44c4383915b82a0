//! `latlab run`'s record, built from the live measurement for each checkpoint and at the end.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use latlab_core::record::{CpuRecord, RunConfig, RunRecord, SpikeRecord, ThreadInfo};
use latlab_core::stats::Stats;
use latlab_core::units::Nanos;
use latlab_sys::measure;

use super::plan::{ModePlan, Plan, SessionPlan};
use crate::session::Session;

/// What the record is built from while the run goes on.
pub(super) struct Measured<'a> {
    pub threads: &'a [Arc<measure::ThreadShared>],
    pub seconds: &'a [Vec<Option<u64>>],
    /// The noise mode's noise per second, per thread.
    pub sums: &'a [Vec<u64>],
    /// The threads' results, once they have ended.
    pub results: Option<&'a [measure::ThreadResult]>,
    pub measured_ns: Nanos,
    pub spikes: &'a [SpikeRecord],
}

impl Measured<'_> {
    pub const NOTHING: Measured<'static> = Measured {
        threads: &[],
        seconds: &[],
        sums: &[],
        results: None,
        measured_ns: 0,
        spikes: &[],
    };
}

/// The run's configuration as the record keeps it.
fn run_config(a: &SessionPlan, p: &Plan, mp: &ModePlan, measured_ns: Nanos) -> RunConfig {
    // `profile --no-measure` (mode `none`): no thread, so no interval, priority or policy.
    let threads = mp.name != "none";
    RunConfig {
        mode: mp.name.into(),
        backend: a.backend.name().into(),
        // A noise thread spins: it has no period.
        interval_ns: (threads && mp.name != "noise").then_some(p.interval_ns),
        duration_ns: Some(p.duration_ns),
        cpus: p.cpus.clone(),
        housekeeping_cpus: p.housekeeping.clone(),
        priority: threads.then_some(p.priority),
        policy: threads.then(|| p.policy.as_str().into()),
        distance_ns: p.distance_ns,
        aligned: a.aligned,
        hist_limit_ns: Some(p.layout.limit_ns()),
        bucket_ns: Some(p.layout.bucket_ns),
        max_latency_ns: p.max_latency_ns,
        trace_threshold_ns: p.trace_threshold_ns,
        loads: a.loads.clone(),
        warmup_ns: if a.loads.is_empty() { 0 } else { p.warmup_ns },
        sim_seed: a.backend.generated().then_some(a.seed),
        measured_ns: Some(measured_ns),
        mode_params: mp.params.clone(),
        dma_latency_us: a.dma_latency_us.map(i64::from),
    }
}

/// The record as it stands (checkpoint or final).
pub(super) fn build_record(
    s: &Session,
    a: &SessionPlan,
    p: &Plan,
    mp: &ModePlan,
    m: &Measured,
    complete: bool,
) -> RunRecord {
    let cpus = m
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let h = t.hist.snapshot();
            let res = m.results.and_then(|r| r.iter().find(|r| r.cpu == t.cpu));
            CpuRecord {
                cpu: t.cpu,
                stats: Stats {
                    missed_periods: t.missed.load(Ordering::Relaxed)
                        + t.mode.coalesced.load(Ordering::Relaxed),
                    ..Stats::default()
                },
                histogram: h.to_record(),
                per_second_max_ns: m.seconds[i].clone(),
                top_spikes: res.map(|r| r.top.clone()).unwrap_or_default(),
                thread: ThreadInfo {
                    tid: res.map(|r| r.tid),
                    policy: Some(p.policy.as_str().into()),
                    priority: Some(p.priority.saturating_sub(i as u32 * p.priority_step)),
                    interval_ns: latlab_core::units::thread_interval(
                        p.interval_ns,
                        p.distance_ns,
                        i,
                    ),
                },
                mode: mp.cpu_mode(i, t, a.backend.generated()).map(|mut md| {
                    if let (Some(n), Some(sums)) = (md.noise.as_mut(), m.sums.get(i)) {
                        n.per_second_ns = sums.clone();
                    }
                    md
                }),
            }
        })
        .collect();
    let mut r = s.record(
        &p.label,
        run_config(a, p, mp, m.measured_ns),
        cpus,
        complete,
    );
    r.spikes = m.spikes.to_vec();
    r.refresh().expect("live histograms are consistent");
    r
}
