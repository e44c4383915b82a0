//! Per-interval histograms of a long run (all CPUs merged), kept in the record so a report can
//! draw latency over time (a heat map: time × latency, colour = samples) for a run of hours.
//!
//! Bounded: one histogram per [`DEFAULT_INTERVAL_NS`] (a minute) of measurement, at most
//! [`MAX_INTERVALS`] of them — a longer run merges neighbours pairwise and doubles the
//! interval, so any run length fits. Sparse: each histogram lists only its non-empty buckets,
//! as `[bucket index, count]` in the run's histogram layout, so the counts are exact.
//!
//! The collector closes an interval at its nominal end, so samples taken within one collector
//! tick (100 ms) of a boundary may land in the neighbouring interval.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Nanos;

/// One minute.
pub const DEFAULT_INTERVAL_NS: Nanos = 60_000_000_000;
/// At most this many intervals (a day of minutes) before they are merged pairwise.
pub const MAX_INTERVALS: usize = 1440;

/// The per-interval histograms of a run (the record's `intervals`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub struct IntervalHistograms {
    /// Length of each interval in ns (a minute, doubled each time the run outgrew
    /// [`MAX_INTERVALS`]). Interval `k` covers `[k·interval_ns, (k+1)·interval_ns)` from the
    /// start of the measurement; the last one may be cut short by the end of the run.
    pub interval_ns: Nanos,
    /// One sparse histogram per interval, in time order: `[bucket index, count]` pairs in
    /// increasing index, only non-empty buckets (an interval without samples is `[]`).
    pub intervals: Vec<Vec<[u64; 2]>>,
}

impl IntervalHistograms {
    /// Samples in interval `k`.
    pub fn samples(&self, k: usize) -> u64 {
        self.intervals
            .get(k)
            .map_or(0, |v| v.iter().map(|b| b[1]).sum())
    }
}

/// Builds [`IntervalHistograms`] from cumulative bucket counts taken at interval ends.
#[derive(Debug, Clone)]
pub struct IntervalRecorder {
    prev: Vec<u64>,
    out: IntervalHistograms,
}

fn add_sparse(into: &mut Vec<[u64; 2]>, add: &[[u64; 2]]) {
    let mut m: Vec<[u64; 2]> = Vec::with_capacity(into.len() + add.len());
    let (mut i, mut j) = (0, 0);
    while i < into.len() || j < add.len() {
        match (into.get(i), add.get(j)) {
            (Some(a), Some(b)) if a[0] == b[0] => {
                m.push([a[0], a[1] + b[1]]);
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a[0] < b[0] => {
                m.push(*a);
                i += 1;
            }
            (Some(a), None) => {
                m.push(*a);
                i += 1;
            }
            (_, Some(b)) => {
                m.push(*b);
                j += 1;
            }
            (None, None) => break,
        }
    }
    *into = m;
}

impl IntervalRecorder {
    /// A recorder of `interval_ns` intervals (0 is taken as a minute).
    pub fn new(interval_ns: Nanos) -> IntervalRecorder {
        IntervalRecorder {
            prev: Vec::new(),
            out: IntervalHistograms {
                interval_ns: if interval_ns == 0 {
                    DEFAULT_INTERVAL_NS
                } else {
                    interval_ns
                },
                intervals: Vec::new(),
            },
        }
    }

    /// Close the interval ending at `end_ns` (since the start of the measurement):
    /// `cumulative` are the bucket counts of all CPUs merged since the start. What was
    /// counted since the previous call goes into the interval holding `end_ns - 1`.
    /// Counts never go backwards; a bucket that seems to is taken as unchanged.
    pub fn record(&mut self, end_ns: Nanos, cumulative: &[u64]) {
        let mut delta: Vec<[u64; 2]> = Vec::new();
        for (i, &c) in cumulative.iter().enumerate() {
            let p = self.prev.get(i).copied().unwrap_or(0);
            if c > p {
                delta.push([i as u64, c - p]);
            }
        }
        if self.prev.len() < cumulative.len() {
            self.prev.resize(cumulative.len(), 0);
        }
        for (p, &c) in self.prev.iter_mut().zip(cumulative) {
            *p = (*p).max(c);
        }
        let mut slot = (end_ns.saturating_sub(1) / self.out.interval_ns) as usize;
        while slot >= MAX_INTERVALS {
            self.halve();
            slot = (end_ns.saturating_sub(1) / self.out.interval_ns) as usize;
        }
        if self.out.intervals.len() <= slot {
            self.out.intervals.resize(slot + 1, Vec::new());
        }
        add_sparse(&mut self.out.intervals[slot], &delta);
    }

    /// Merge neighbours pairwise and double the interval.
    fn halve(&mut self) {
        let old = std::mem::take(&mut self.out.intervals);
        for pair in old.chunks(2) {
            let mut m = pair[0].clone();
            if let Some(b) = pair.get(1) {
                add_sparse(&mut m, b);
            }
            self.out.intervals.push(m);
        }
        self.out.interval_ns = self.out.interval_ns.saturating_mul(2);
    }

    /// The histograms so far.
    pub fn histograms(&self) -> &IntervalHistograms {
        &self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_go_into_their_interval_sparse_and_exact() {
        let mut r = IntervalRecorder::new(60);
        r.record(60, &[0, 5, 0, 1]);
        r.record(120, &[0, 5, 0, 1]); // nothing new: an empty interval
        r.record(180, &[2, 9, 0, 1]);
        r.record(200, &[2, 9, 0, 4]); // the end of the run, mid-interval
        let h = r.histograms();
        assert_eq!(h.interval_ns, 60);
        assert_eq!(
            h.intervals,
            vec![
                vec![[1, 5], [3, 1]],
                vec![],
                vec![[0, 2], [1, 4]],
                vec![[3, 3]]
            ]
        );
        assert_eq!(h.samples(2), 6);
    }

    #[test]
    fn a_long_run_stays_bounded_and_keeps_every_sample() {
        let mut r = IntervalRecorder::new(60);
        let mut cum = vec![0u64; 3];
        // 3 days of minutes: 4320 intervals, one sample each.
        for k in 1..=3 * MAX_INTERVALS as u64 {
            cum[(k % 3) as usize] += 1;
            r.record(k * 60, &cum);
        }
        let h = r.histograms();
        assert!(h.intervals.len() <= MAX_INTERVALS);
        assert_eq!(h.interval_ns, 240, "doubled twice");
        assert_eq!(h.intervals.len(), 1080);
        let total: u64 = (0..h.intervals.len()).map(|k| h.samples(k)).sum();
        assert_eq!(total, 3 * MAX_INTERVALS as u64);
        assert!(h
            .intervals
            .iter()
            .all(|v| v.iter().map(|b| b[1]).sum::<u64>() == 4));
    }
}
