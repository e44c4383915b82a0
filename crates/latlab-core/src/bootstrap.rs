//! Block bootstrap of a run's percentiles over its per-interval histograms (run.json
//! `intervals`, a minute each): consecutive wake-ups are not independent (a busy second makes
//! many late ones), so the unit resampled is a whole interval, not a sample (Künsch 1989;
//! for quantiles of dependent data, the block bootstrap is consistent where the iid one is
//! not). Each replicate draws as many intervals as the run has, with replacement, adds their
//! histograms and reads the percentiles of the sum as the ladder does (the upper bound of the
//! bucket holding the sample of rank ⌈p·n⌉). Deterministic: the generator is seeded.

use crate::hist::{Layout, Quantile};
use crate::intervals::IntervalHistograms;
use crate::sim::SplitMix64;

/// Replicates per run.
pub const REPLICATES: usize = 400;
/// Fewest intervals with samples a bootstrap is made from.
pub const MIN_BLOCKS: usize = 5;

/// Replicates of the quantiles `qs` (`[quantile][replicate]`, ns), or `None` when the run has
/// fewer than [`MIN_BLOCKS`] intervals with samples. Buckets beyond the layout (a damaged
/// record) are ignored.
pub fn replicates(
    iv: &IntervalHistograms,
    layout: Layout,
    qs: &[Quantile],
    reps: usize,
    seed: u64,
) -> Option<Vec<Vec<f64>>> {
    let nb = layout.len() as u64;
    // Compact bucket positions: every bucket any interval uses, ascending.
    let mut used: Vec<u64> = iv
        .intervals
        .iter()
        .flatten()
        .filter(|b| b[0] < nb && b[1] > 0)
        .map(|b| b[0])
        .collect();
    used.sort_unstable();
    used.dedup();
    let blocks: Vec<(Vec<(u32, u64)>, u64)> = iv
        .intervals
        .iter()
        .map(|h| {
            let v: Vec<(u32, u64)> = h
                .iter()
                .filter(|b| b[0] < nb && b[1] > 0)
                .filter_map(|b| Some((used.binary_search(&b[0]).ok()? as u32, b[1])))
                .collect();
            let n = v.iter().fold(0u64, |a, x| a.saturating_add(x.1));
            (v, n)
        })
        .filter(|b| b.1 > 0)
        .collect();
    if blocks.len() < MIN_BLOCKS {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut acc = vec![0u64; used.len()];
    let mut out = vec![Vec::with_capacity(reps); qs.len()];
    // Quantiles from the highest down, so one pass from the top finds them all.
    let mut order: Vec<usize> = (0..qs.len()).collect();
    order.sort_by(|&a, &b| {
        (qs[b].num as u128 * qs[a].den as u128).cmp(&(qs[a].num as u128 * qs[b].den as u128))
    });
    for _ in 0..reps {
        acc.iter_mut().for_each(|c| *c = 0);
        let mut n = 0u64;
        for _ in 0..blocks.len() {
            let (b, bn) = &blocks[(rng.next_u64() % blocks.len() as u64) as usize];
            for &(i, c) in b {
                acc[i as usize] = acc[i as usize].saturating_add(c);
            }
            n = n.saturating_add(*bn);
        }
        let mut above = 0u64; // samples in the buckets scanned so far (from the top)
        let mut pos = acc.len();
        for &qi in &order {
            // The sample of rank r has n − r + 1 samples at or above it.
            let need = n - qs[qi].rank(n) + 1;
            while above < need && pos > 0 {
                pos -= 1;
                above += acc[pos];
            }
            let idx = used[pos.min(used.len() - 1)] as usize;
            out[qi].push(layout.upper(idx) as f64);
        }
    }
    Some(out)
}

/// The `level` percentile interval of `v` (sorted in place, non-finite values dropped).
pub fn percentile_interval(v: &mut Vec<f64>, level: f64) -> Option<(f64, f64)> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let a = (1.0 - level) / 2.0;
    let at = |p: f64| {
        let i = (p * (v.len() - 1) as f64).round() as usize;
        v[i.min(v.len() - 1)]
    };
    Some((at(a), at(1.0 - a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Histogram;

    fn minutes(k: usize, f: impl Fn(usize, u64) -> u64) -> (IntervalHistograms, Layout) {
        let l = Layout::default();
        let mut iv = IntervalHistograms {
            interval_ns: 60_000_000_000,
            intervals: vec![],
        };
        for m in 0..k {
            let mut h = Histogram::new(l);
            for i in 0..1000u64 {
                h.record(f(m, i));
            }
            iv.intervals.push(
                h.counts()
                    .iter()
                    .enumerate()
                    .filter(|(_, &c)| c > 0)
                    .map(|(i, &c)| [i as u64, c])
                    .collect(),
            );
        }
        (iv, l)
    }

    #[test]
    fn identical_minutes_give_no_spread_and_the_ladder_value() {
        let (iv, l) = minutes(10, |_, i| 10_000 + i * 10);
        let r = replicates(&iv, l, &[Quantile::P50, Quantile::P99], 50, 1).unwrap();
        // p50 of 1000 × {10 000 … 19 990}: rank 500 → 14 990 → bucket [14 000, 15 000).
        assert!(r[0].iter().all(|&v| v == 15_000.0), "{:?}", &r[0][..3]);
        assert!(r[1].iter().all(|&v| v == 20_000.0));
    }

    #[test]
    fn a_bad_minute_widens_the_interval() {
        // Nine quiet minutes and one whose tail is ten times longer.
        let (iv, l) = minutes(10, |m, i| {
            if m == 3 && i >= 990 {
                500_000
            } else {
                10_000 + i
            }
        });
        let mut r = replicates(&iv, l, &[Quantile::P999], REPLICATES, 7).unwrap();
        let (lo, hi) = percentile_interval(&mut r[0], 0.95).unwrap();
        assert!(lo < 20_000.0 && hi > 400_000.0, "{lo}..{hi}");
        assert!(replicates(&minutes(4, |_, i| i).0, l, &[Quantile::P50], 10, 1).is_none());
    }
}
