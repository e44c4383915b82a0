//! The statistics the field reads: Williams' block (2002) and the contract's JSON keys.
//!
//! Williams printed, for a realfeel run: buckets used, samples, min, max, mean, median, mode,
//! variance, standard deviation, the share of samples below 0.1, 0.2, 0.5, 0.7, 1, 5, 10, 50,
//! 100 ms, "100% < max+bucket", and the five-nines point. Every latency here is a bound taken
//! from the histogram (see [`crate::hist`]); mean, variance and stddev come from exact sums.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hist::{Histogram, Quantile};
use crate::units::Nanos;

/// Thresholds of the "% of samples below" lines, with the contract's key names.
pub const BELOW: [(&str, Nanos); 9] = [
    ("100us", 100_000),
    ("200us", 200_000),
    ("500us", 500_000),
    ("700us", 700_000),
    ("1ms", 1_000_000),
    ("5ms", 5_000_000),
    ("10ms", 10_000_000),
    ("50ms", 50_000_000),
    ("100ms", 100_000_000),
];

/// The percentile ladder, with labels and JSON key suffixes.
pub const LADDER: [(&str, Quantile); 6] = [
    ("p50", Quantile::P50),
    ("p90", Quantile::P90),
    ("p99", Quantile::P99),
    ("p99.9", Quantile::P999),
    ("p99.99", Quantile::P9999),
    ("p99.999", Quantile::P99999),
];

/// Statistics of one histogram. Keys are the interface contract (docs/contract.md); all times are
/// integer nanoseconds. A percentile is `null` only when it falls among imported overflow
/// samples whose value is unknown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct Stats {
    pub samples: u64,
    pub min_ns: Option<Nanos>,
    pub max_ns: Option<Nanos>,
    pub mean_ns: Option<Nanos>,
    pub median_ns: Option<Nanos>,
    pub stddev_ns: Option<Nanos>,
    pub p90_ns: Option<Nanos>,
    pub p99_ns: Option<Nanos>,
    pub p999_ns: Option<Nanos>,
    pub p9999_ns: Option<Nanos>,
    pub p99999_ns: Option<Nanos>,
    pub missed_periods: u64,
    /// Fraction of samples below each threshold (0..=1).
    pub below: BTreeMap<String, f64>,
    /// Williams' extras.
    pub buckets_used: u64,
    pub bucket_ns: Nanos,
    pub mode_ns: Option<Nanos>,
    pub mode_count: u64,
    pub variance_ns2: Option<f64>,
    /// Samples at or above the histogram limit whose value is unknown (imports only).
    pub unknown_above: u64,
    /// The histogram's linear limit.
    pub limit_ns: Nanos,
    /// False when mean/stddev are estimates (imports).
    pub exact_moments: bool,
}

impl Stats {
    pub fn of(h: &Histogram, missed_periods: u64) -> Stats {
        let q = |q| h.quantile(q);
        let variance = h.variance();
        let (mode_ns, mode_count) = match h.mode() {
            Some((lo, c)) => (Some(lo), c),
            None => (None, 0),
        };
        Stats {
            samples: h.count(),
            min_ns: h.min(),
            max_ns: h.max(),
            mean_ns: h.mean().map(|m| m.round() as u64),
            median_ns: q(Quantile::P50),
            stddev_ns: variance.map(|v| v.sqrt().round() as u64),
            p90_ns: q(Quantile::P90),
            p99_ns: q(Quantile::P99),
            p999_ns: q(Quantile::P999),
            p9999_ns: q(Quantile::P9999),
            p99999_ns: q(Quantile::P99999),
            missed_periods,
            below: BELOW
                .iter()
                .map(|&(k, t)| (k.to_string(), h.fraction_below(t)))
                .collect(),
            buckets_used: h.counts().iter().filter(|&&c| c > 0).count() as u64,
            bucket_ns: h.layout().bucket_ns,
            mode_ns,
            mode_count,
            variance_ns2: variance,
            unknown_above: h.unknown_above(),
            limit_ns: h.layout().limit_ns(),
            exact_moments: h.exact_moments(),
        }
    }

    /// The ladder's value by label (`p50` … `p99.999`).
    pub fn ladder(&self) -> [(&'static str, Option<Nanos>); 6] {
        [
            ("p50", self.median_ns),
            ("p90", self.p90_ns),
            ("p99", self.p99_ns),
            ("p99.9", self.p999_ns),
            ("p99.99", self.p9999_ns),
            ("p99.999", self.p99999_ns),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Layout;

    #[test]
    fn stats_of_known_samples() {
        let mut h = Histogram::new(Layout::default());
        for v in [20_000u64, 20_400, 21_000, 40_000, 150_000] {
            h.record(v);
        }
        let s = Stats::of(&h, 3);
        assert_eq!(s.samples, 5);
        assert_eq!(s.min_ns, Some(20_000));
        assert_eq!(s.max_ns, Some(150_000));
        assert_eq!(s.mean_ns, Some(50_280));
        assert_eq!(s.median_ns, Some(22_000));
        assert_eq!(s.mode_ns, Some(20_000));
        assert_eq!(s.mode_count, 2);
        assert_eq!(s.buckets_used, 4);
        assert_eq!(s.missed_periods, 3);
        assert_eq!(s.below["100us"], 0.8);
        assert_eq!(s.below["200us"], 1.0);
        assert_eq!(s.p99999_ns, Some(150_000));
        // population stddev of the five samples
        let mean = 50_280.0f64;
        let var = [20_000.0f64, 20_400.0, 21_000.0, 40_000.0, 150_000.0]
            .iter()
            .map(|x| (x - mean) * (x - mean))
            .sum::<f64>()
            / 5.0;
        assert_eq!(s.stddev_ns, Some(var.sqrt().round() as u64));
    }

    #[test]
    fn empty() {
        let s = Stats::of(&Histogram::new(Layout::default()), 0);
        assert_eq!(s.samples, 0);
        assert_eq!(s.min_ns, None);
        assert_eq!(s.below["1ms"], 0.0);
    }
}
