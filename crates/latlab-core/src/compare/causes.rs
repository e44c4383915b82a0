//! The causes of traced runs side by side: for each cause (kind and name) that delayed a
//! spike of any run, in how many of each run's traced spikes it appeared, for how long in all,
//! at worst, and its share of that run's summed spike latency ("softirq RCU: 3.0 ms → 0.4 ms").
//! Shares compare runs that traced different numbers of spikes; totals say how much time.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::RunModel;
use crate::record::CauseKind;
use crate::trace::kind_str;
use crate::trace::summarize;
use crate::units::Nanos;

/// At most this many causes, the largest first (by their largest share in any run).
pub const MAX_CAUSES: usize = 20;

/// One cause in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CauseIn {
    /// Traced spikes of the run this cause appeared in.
    pub spikes: u64,
    pub total_ns: Nanos,
    pub worst_ns: Nanos,
    /// total_ns / the run's summed spike latency.
    pub share: f64,
}

/// One cause across the runs (`runs[i]`: `None` when run i's traced spikes never had it; for
/// a run that traced no spike at all, every cause is `None`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CauseChange {
    pub kind: &'static str,
    pub name: String,
    pub runs: Vec<Option<CauseIn>>,
}

/// The causes of the runs' traced spikes, side by side; empty when no run traced a spike.
pub fn causes(runs: &[RunModel]) -> Vec<CauseChange> {
    let mut m: BTreeMap<(CauseKind, String), Vec<Option<CauseIn>>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        for row in summarize(&r.record.spikes) {
            m.entry((row.kind, row.name))
                .or_insert_with(|| vec![None; runs.len()])[i] = Some(CauseIn {
                spikes: row.spikes,
                total_ns: row.total_ns,
                worst_ns: row.worst_ns,
                share: row.share,
            });
        }
    }
    let largest =
        |v: &[Option<CauseIn>]| v.iter().flatten().map(|c| c.share).fold(0.0_f64, f64::max);
    let mut out: Vec<CauseChange> = m
        .into_iter()
        .map(|((kind, name), runs)| CauseChange {
            kind: kind_str(kind),
            name,
            runs,
        })
        .collect();
    out.sort_by(|a, b| {
        largest(&b.runs)
            .total_cmp(&largest(&a.runs))
            .then_with(|| a.kind.cmp(b.kind))
            .then_with(|| a.name.cmp(&b.name))
    });
    out.truncate(MAX_CAUSES);
    out
}
