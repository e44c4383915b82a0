//! Latency histograms: linear buckets up to a limit, a log-scaled tail beyond it.
//!
//! Input is nanoseconds. Below `limit` buckets are `bucket_ns` wide (1 µs by default, so a
//! 10 ms limit is 10 000 buckets); at and above `limit` the tail has [`TAIL_SUB`] buckets per
//! power of two (≤ 3.2 % relative width) up to `u64::MAX` ns, so no sample is ever lost as
//! "overflow". Count, min, max, sum and sum of squares are exact (u128), and merging two
//! histograms of the same layout is exact.
//!
//! Percentiles follow the order-statistic definition: the p-quantile of n samples is the
//! sample of rank ⌈p·n⌉ in sorted order. A histogram cannot know that sample, only its bucket,
//! so [`Histogram::quantile`] returns the bucket's upper bound, clamped to the exact maximum:
//! a bound that is never below the true value ("p99 ≤ 57 µs").
//!
//! ```
//! use latlab_core::hist::{Histogram, Layout, Quantile};
//! let mut h = Histogram::new(Layout::default());
//! for v in [10_000, 20_500, 57_300, 9_000_000] { h.record(v); }
//! assert_eq!(h.count(), 4);
//! assert_eq!(h.quantile(Quantile::P50), Some(21_000)); // "≤ 21 µs"
//! assert_eq!(h.quantile(Quantile::MAX), Some(9_000_000));
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Nanos;

/// log2 of the number of tail buckets per power of two.
pub const TAIL_SUB_BITS: u32 = 5;
/// Tail buckets per power of two.
pub const TAIL_SUB: u64 = 1 << TAIL_SUB_BITS;

/// Global log index of `v` (v ≥ TAIL_SUB): octave·TAIL_SUB + sub-bucket. Monotonic in v.
#[inline(always)]
fn log_index(v: u64) -> u64 {
    let octave = 63 - v.leading_zeros() as u64;
    let sub = (v >> (octave - TAIL_SUB_BITS as u64)) & (TAIL_SUB - 1);
    octave * TAIL_SUB + sub
}

/// Smallest value with the given global log index.
fn log_lower(g: u64) -> u64 {
    let octave = g / TAIL_SUB;
    let sub = g % TAIL_SUB;
    (1u64 << octave) + (sub << (octave - TAIL_SUB_BITS as u64))
}

const LOG_INDEX_MAX: u64 = 63 * TAIL_SUB + (TAIL_SUB - 1);

/// Where the buckets are: linear width and limit. Two histograms merge only if equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Width of the linear buckets in ns (1000 = 1 µs).
    pub bucket_ns: u64,
    /// Number of linear buckets; the linear part covers `[0, bucket_ns · linear_buckets)`.
    pub linear_buckets: u64,
}

impl Default for Layout {
    /// 1 µs buckets to 10 ms.
    fn default() -> Self {
        Layout {
            bucket_ns: 1_000,
            linear_buckets: 10_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistError {
    #[error("histogram layouts differ ({a_bucket} ns × {a_n} vs {b_bucket} ns × {b_n}): they cannot be merged")]
    LayoutMismatch {
        a_bucket: u64,
        a_n: u64,
        b_bucket: u64,
        b_n: u64,
    },
    #[error("invalid histogram layout: bucket width {bucket_ns} ns × {linear_buckets} buckets (need width ≥ 1 ns, 1..=10 000 000 buckets, limit ≥ 64 ns)")]
    BadLayout { bucket_ns: u64, linear_buckets: u64 },
    #[error("histogram bucket at {lower_ns} ns does not start a bucket of this layout")]
    BadBucket { lower_ns: u64 },
    #[error("histogram totals are inconsistent: {0}")]
    Inconsistent(String),
}

impl Layout {
    /// A layout with `bucket_ns` buckets up to (at least) `limit_ns`.
    pub fn new(bucket_ns: u64, limit_ns: u64) -> Result<Layout, HistError> {
        let linear_buckets = if bucket_ns == 0 {
            0
        } else {
            limit_ns.div_ceil(bucket_ns)
        };
        let l = Layout {
            bucket_ns,
            linear_buckets,
        };
        l.validate()?;
        Ok(l)
    }

    pub fn validate(&self) -> Result<(), HistError> {
        let ok = self.bucket_ns >= 1
            && (1..=10_000_000).contains(&self.linear_buckets)
            && self
                .bucket_ns
                .checked_mul(self.linear_buckets)
                .is_some_and(|l| (64..=u64::MAX / 4).contains(&l));
        if ok {
            Ok(())
        } else {
            Err(HistError::BadLayout {
                bucket_ns: self.bucket_ns,
                linear_buckets: self.linear_buckets,
            })
        }
    }

    /// End of the linear part, in ns.
    #[inline(always)]
    pub fn limit_ns(&self) -> u64 {
        self.bucket_ns * self.linear_buckets
    }

    fn first_log(&self) -> u64 {
        log_index(self.limit_ns())
    }

    /// Total number of buckets (linear + tail).
    pub fn len(&self) -> usize {
        (self.linear_buckets + (LOG_INDEX_MAX - self.first_log() + 1)) as usize
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Bucket index of a value. O(1), no branches but one: the hot path.
    #[inline(always)]
    pub fn index(&self, v: u64) -> usize {
        if v < self.limit_ns() {
            (v / self.bucket_ns) as usize
        } else {
            (self.linear_buckets + log_index(v) - self.first_log()) as usize
        }
    }

    /// Inclusive lower bound of bucket `i` in ns.
    pub fn lower(&self, i: usize) -> u64 {
        let i = i as u64;
        if i < self.linear_buckets {
            i * self.bucket_ns
        } else {
            let g = self.first_log() + (i - self.linear_buckets);
            log_lower(g).max(self.limit_ns())
        }
    }

    /// Exclusive upper bound of bucket `i` in ns (`u64::MAX` for the last bucket).
    pub fn upper(&self, i: usize) -> u64 {
        if i + 1 >= self.len() {
            u64::MAX
        } else {
            self.lower(i + 1)
        }
    }

    /// Bucket index whose lower bound is exactly `lower_ns`, if any.
    pub fn index_of_lower(&self, lower_ns: u64) -> Option<usize> {
        let i = self.index(lower_ns);
        (self.lower(i) == lower_ns).then_some(i)
    }
}

/// A quantile as an exact fraction, so 99.999 % is exactly 99 999 / 100 000.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantile {
    pub num: u64,
    pub den: u64,
}

impl Quantile {
    pub const P50: Quantile = Quantile { num: 1, den: 2 };
    pub const P90: Quantile = Quantile { num: 9, den: 10 };
    pub const P99: Quantile = Quantile { num: 99, den: 100 };
    pub const P999: Quantile = Quantile {
        num: 999,
        den: 1000,
    };
    pub const P9999: Quantile = Quantile {
        num: 9_999,
        den: 10_000,
    };
    pub const P99999: Quantile = Quantile {
        num: 99_999,
        den: 100_000,
    };
    pub const MAX: Quantile = Quantile { num: 1, den: 1 };

    /// Rank (1-based) of the sample this quantile names among `n`: ⌈n·num/den⌉, at least 1.
    pub fn rank(&self, n: u64) -> u64 {
        let r = (n as u128 * self.num as u128).div_ceil(self.den as u128) as u64;
        r.max(1)
    }
}

/// A histogram's parts for [`Histogram::from_parts`]: the layout and its bucket counts, min
/// and max (ns), the sums of the values and of their squares, the samples at or above the
/// limit whose value is unknown (in no bucket), and whether the sums are exact (false when
/// reconstructed, as by an import).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistParts {
    pub layout: Layout,
    pub counts: Vec<u64>,
    pub min: u64,
    pub max: u64,
    pub sum: u128,
    pub sumsq: u128,
    pub unknown_above: u64,
    pub exact_moments: bool,
}

/// A latency histogram. See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    layout: Layout,
    counts: Vec<u64>,
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
    sumsq: u128,
    /// Samples known to be at or above the limit whose value is unknown (imported
    /// cyclictest overflows). Included in `count`; in no bucket.
    unknown_above: u64,
    /// False when sum/sumsq were reconstructed (imports), so mean/stddev are estimates.
    exact_moments: bool,
}

impl Histogram {
    pub fn new(layout: Layout) -> Histogram {
        Histogram {
            layout,
            counts: vec![0; layout.len()],
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            sumsq: 0,
            unknown_above: 0,
            exact_moments: true,
        }
    }

    #[inline]
    pub fn record(&mut self, v: Nanos) {
        let i = self.layout.index(v);
        self.counts[i] += 1;
        self.count += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        // Saturating: only absurd values (hours², summed) could reach u128::MAX.
        self.sum = self.sum.saturating_add(v as u128);
        self.sumsq = self.sumsq.saturating_add(v as u128 * v as u128);
    }

    /// Build from parts (a stored record, a live snapshot or an import), checking consistency.
    pub fn from_parts(parts: HistParts) -> Result<Histogram, HistError> {
        let HistParts {
            layout,
            counts,
            min,
            max,
            sum,
            sumsq,
            unknown_above,
            exact_moments,
        } = parts;
        layout.validate()?;
        if counts.len() != layout.len() {
            return Err(HistError::Inconsistent(format!(
                "{} buckets for a layout of {}",
                counts.len(),
                layout.len()
            )));
        }
        let count = counts
            .iter()
            .try_fold(unknown_above, |a, &c| a.checked_add(c))
            .ok_or_else(|| HistError::Inconsistent("counts overflow".into()))?;
        let h = Histogram {
            layout,
            counts,
            count,
            min: if count == 0 { u64::MAX } else { min },
            max: if count == 0 { 0 } else { max },
            sum,
            sumsq,
            unknown_above,
            exact_moments,
        };
        if count > 0 {
            if min > max {
                return Err(HistError::Inconsistent(format!("min {min} > max {max}")));
            }
            // min and max must lie in the first and last non-empty buckets.
            let first = h.counts.iter().position(|&c| c > 0);
            let last = h.counts.iter().rposition(|&c| c > 0);
            if let (Some(f), Some(l)) = (first, last) {
                if min < layout.lower(f) || min >= layout.upper(f) {
                    return Err(HistError::Inconsistent(format!(
                        "min {min} ns is not in the first non-empty bucket [{}, {})",
                        layout.lower(f),
                        layout.upper(f)
                    )));
                }
                if unknown_above == 0 && (max < layout.lower(l) || max >= layout.upper(l)) {
                    return Err(HistError::Inconsistent(format!(
                        "max {max} ns is not in the last non-empty bucket [{}, {})",
                        layout.lower(l),
                        layout.upper(l)
                    )));
                }
            }
        }
        Ok(h)
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }
    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn min(&self) -> Option<Nanos> {
        (self.count > 0).then_some(self.min)
    }
    pub fn max(&self) -> Option<Nanos> {
        (self.count > 0).then_some(self.max)
    }
    pub fn sum(&self) -> u128 {
        self.sum
    }
    pub fn sumsq(&self) -> u128 {
        self.sumsq
    }
    pub fn unknown_above(&self) -> u64 {
        self.unknown_above
    }
    pub fn exact_moments(&self) -> bool {
        self.exact_moments
    }

    /// Merge `other` into `self` exactly. Layouts must match.
    pub fn merge(&mut self, other: &Histogram) -> Result<(), HistError> {
        if self.layout != other.layout {
            return Err(HistError::LayoutMismatch {
                a_bucket: self.layout.bucket_ns,
                a_n: self.layout.linear_buckets,
                b_bucket: other.layout.bucket_ns,
                b_n: other.layout.linear_buckets,
            });
        }
        // Checked first, so a merge that does not fit leaves `self` as it was. Every bucket
        // is at most the total, so a total that fits means every bucket fits.
        let overflow = || HistError::Inconsistent("merged sample counts overflow 64 bits".into());
        let count = self.count.checked_add(other.count).ok_or_else(overflow)?;
        let unknown_above = self
            .unknown_above
            .checked_add(other.unknown_above)
            .ok_or_else(overflow)?;
        // Sums saturate as in `record` (merge = concatenation): only samples of centuries
        // (Σx² past u128) reach the bound.
        let sum = self.sum.saturating_add(other.sum);
        let sumsq = self.sumsq.saturating_add(other.sumsq);
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count = count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum = sum;
        self.sumsq = sumsq;
        self.unknown_above = unknown_above;
        self.exact_moments &= other.exact_moments;
        Ok(())
    }

    /// Upper bound of the q-quantile (see module docs). `None` when empty, or when the rank
    /// falls among samples whose value is unknown (imported overflows: "> limit").
    pub fn quantile(&self, q: Quantile) -> Option<Nanos> {
        if self.count == 0 {
            return None;
        }
        let rank = q.rank(self.count);
        if rank >= self.count {
            return Some(self.max);
        }
        let mut cum = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            cum += c;
            if cum >= rank {
                return Some(self.layout.upper(i).min(self.max));
            }
        }
        None
    }

    /// Fraction of samples strictly below `threshold_ns`. Exact when the threshold is a bucket
    /// boundary (every decimal threshold below the limit with 1 µs buckets) or above the
    /// maximum; otherwise a lower bound.
    pub fn fraction_below(&self, threshold_ns: Nanos) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        if self.max < threshold_ns {
            return 1.0;
        }
        let mut below = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if self.layout.upper(i) <= threshold_ns {
                below += c;
            } else {
                break;
            }
        }
        below as f64 / self.count as f64
    }

    /// Number of samples strictly below `threshold_ns` (same rules as [`Self::fraction_below`]).
    pub fn count_below(&self, threshold_ns: Nanos) -> u64 {
        if self.count == 0 {
            return 0;
        }
        if self.max < threshold_ns {
            return self.count;
        }
        let mut below = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if self.layout.upper(i) <= threshold_ns {
                below += c;
            } else {
                break;
            }
        }
        below
    }

    /// Mean in ns (exact division of the exact sum).
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }

    /// Population variance in ns², computed from exact integer sums when they fit in u128.
    pub fn variance(&self) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as u128;
        // n²·var = n·Σx² − (Σx)²: exact when it fits.
        if let (Some(a), Some(b)) = (n.checked_mul(self.sumsq), self.sum.checked_mul(self.sum)) {
            let num = a.saturating_sub(b);
            return Some(num as f64 / (n as f64 * n as f64));
        }
        let mean = self.sum as f64 / n as f64;
        Some((self.sumsq as f64 / n as f64 - mean * mean).max(0.0))
    }

    /// Non-empty buckets: `(lower_ns, upper_ns, count)`.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (self.layout.lower(i), self.layout.upper(i), c))
    }

    /// Bucket with the most samples (the first on ties): `(lower_ns, count)`.
    pub fn mode(&self) -> Option<(u64, u64)> {
        let (i, &c) = self
            .counts
            .iter()
            .enumerate()
            .rev()
            .max_by_key(|(_, &c)| c)?;
        (c > 0).then(|| (self.layout.lower(i), c))
    }

    /// Serializable sparse form.
    pub fn to_record(&self) -> HistogramRecord {
        HistogramRecord {
            bucket_ns: self.layout.bucket_ns,
            limit_ns: self.layout.limit_ns(),
            count: self.count,
            min_ns: self.min().unwrap_or(0),
            max_ns: self.max().unwrap_or(0),
            sum_ns: self.sum,
            sumsq_ns2: self.sumsq,
            unknown_above: self.unknown_above,
            exact_moments: self.exact_moments,
            buckets: self.buckets().map(|(lo, _, c)| [lo, c]).collect(),
        }
    }

    /// Rebuild from the sparse form, checking every bucket and total.
    pub fn from_record(r: &HistogramRecord) -> Result<Histogram, HistError> {
        let layout = Layout::new(r.bucket_ns, r.limit_ns)?;
        if layout.limit_ns() != r.limit_ns {
            return Err(HistError::Inconsistent(format!(
                "limit {} ns is not a multiple of the bucket width {} ns",
                r.limit_ns, r.bucket_ns
            )));
        }
        let mut counts = vec![0u64; layout.len()];
        for &[lo, c] in &r.buckets {
            let i = layout
                .index_of_lower(lo)
                .ok_or(HistError::BadBucket { lower_ns: lo })?;
            counts[i] = counts[i]
                .checked_add(c)
                .ok_or_else(|| HistError::Inconsistent("bucket count overflow".into()))?;
        }
        let h = Histogram::from_parts(HistParts {
            layout,
            counts,
            min: r.min_ns,
            max: r.max_ns,
            sum: r.sum_ns,
            sumsq: r.sumsq_ns2,
            unknown_above: r.unknown_above,
            exact_moments: r.exact_moments,
        })?;
        if h.count != r.count {
            return Err(HistError::Inconsistent(format!(
                "count {} but the buckets hold {}",
                r.count, h.count
            )));
        }
        Ok(h)
    }
}

/// The stored, sparse form of a histogram: non-empty buckets as `[lower_ns, count]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HistogramRecord {
    pub bucket_ns: u64,
    pub limit_ns: u64,
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub sum_ns: u128,
    pub sumsq_ns2: u128,
    #[serde(default)]
    pub unknown_above: u64,
    #[serde(default = "yes")]
    pub exact_moments: bool,
    pub buckets: Vec<[u64; 2]>,
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_bounds_are_contiguous() {
        for layout in [
            Layout::default(),
            Layout::new(100_000, 20_000_000).unwrap(),
            Layout::new(1_000, 1_000_000).unwrap(),
            Layout::new(7, 1_003).unwrap(),
        ] {
            let n = layout.len();
            for i in 0..n - 1 {
                assert!(layout.lower(i) < layout.upper(i), "{layout:?} bucket {i}");
                assert_eq!(layout.upper(i), layout.lower(i + 1));
                assert_eq!(layout.index(layout.lower(i)), i, "{layout:?} bucket {i}");
                assert_eq!(layout.index(layout.upper(i) - 1), i);
            }
            assert_eq!(layout.index(u64::MAX), n - 1);
            // tail resolution is at most 1/32 relative.
            for i in layout.linear_buckets as usize..n - 1 {
                let (lo, hi) = (layout.lower(i), layout.upper(i));
                assert!((hi - lo) as f64 / lo as f64 <= 1.0 / 32.0 + 1e-12);
            }
        }
        assert_eq!(
            Layout::default().len(),
            10_000 + (LOG_INDEX_MAX - log_index(10_000_000) + 1) as usize
        );
    }

    #[test]
    fn williams_numbers() {
        let mut h = Histogram::new(Layout::default());
        for v in 1..=100u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 100);
        assert_eq!(h.min(), Some(1000));
        assert_eq!(h.max(), Some(100_000));
        assert_eq!(h.mean(), Some(50_500.0));
        assert_eq!(h.quantile(Quantile::P50), Some(51_000));
        assert_eq!(h.quantile(Quantile::P99), Some(100_000));
        assert_eq!(h.fraction_below(50_000), 0.49);
        // population variance of 1..=100 µs: (100²−1)/12 µs²
        let var = h.variance().unwrap();
        assert!((var - 833.25e6).abs() < 1e-3, "{var}");
    }

    #[test]
    fn tail_keeps_hour_long_samples() {
        let mut h = Histogram::new(Layout::default());
        h.record(3_600 * 1_000_000_000);
        h.record(u64::MAX);
        assert_eq!(h.count(), 2);
        assert_eq!(
            h.quantile(Quantile::P50),
            Some(h.layout().upper(h.layout().index(3_600_000_000_000)))
        );
        assert_eq!(h.max(), Some(u64::MAX));
    }

    #[test]
    fn unknown_overflow_gives_no_quantile() {
        let layout = Layout::new(1000, 100_000).unwrap();
        let mut counts = vec![0; layout.len()];
        counts[10] = 90;
        let h = Histogram::from_parts(HistParts {
            layout,
            counts,
            min: 10_000,
            max: 5_000_000,
            sum: 0,
            sumsq: 0,
            unknown_above: 10,
            exact_moments: false,
        })
        .unwrap();
        assert_eq!(h.count(), 100);
        assert_eq!(h.quantile(Quantile::P50), Some(11_000));
        assert_eq!(h.quantile(Quantile::P99), None);
        assert_eq!(h.quantile(Quantile::MAX), Some(5_000_000));
    }

    #[test]
    fn record_roundtrip_and_validation() {
        let mut h = Histogram::new(Layout::default());
        for v in [0, 999, 1000, 57_300, 10_000_000, 12_345_678_901] {
            h.record(v);
        }
        let r = h.to_record();
        let json = serde_json::to_string(&r).unwrap();
        let back: HistogramRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(Histogram::from_record(&back).unwrap(), h);
        let mut bad = r.clone();
        bad.buckets[0][0] = 1;
        assert!(Histogram::from_record(&bad).is_err());
        let mut bad = r.clone();
        bad.count += 1;
        assert!(Histogram::from_record(&bad).is_err());
        let mut bad = r;
        bad.max_ns = 5;
        assert!(Histogram::from_record(&bad).is_err());
    }

    /// Counts near u64::MAX: the merge is an error (it used to wrap in release builds) and
    /// leaves the histogram as it was.
    #[test]
    fn merge_overflow_is_an_error() {
        let layout = Layout::new(1_000, 100_000).unwrap();
        let big = |n: u64| {
            let mut counts = vec![0; layout.len()];
            counts[5] = n;
            Histogram::from_parts(HistParts {
                layout,
                counts,
                min: 5_000,
                max: 5_000,
                sum: 0,
                sumsq: 0,
                unknown_above: 0,
                exact_moments: false,
            })
            .unwrap()
        };
        let mut a = big(u64::MAX - 1);
        let before = a.clone();
        let e = a.merge(&big(2)).unwrap_err();
        assert!(e.to_string().contains("overflow"), "{e}");
        assert_eq!(a, before);
        a.merge(&big(1)).unwrap();
        assert_eq!(a.count(), u64::MAX);
        // The unknown-above count too.
        let mut counts = vec![0; layout.len()];
        counts[5] = 1;
        let u = |n| {
            Histogram::from_parts(HistParts {
                layout,
                counts: counts.clone(),
                min: 5_000,
                max: 9_000_000,
                sum: 0,
                sumsq: 0,
                unknown_above: n,
                exact_moments: false,
            })
            .unwrap()
        };
        let mut x = u(u64::MAX / 2);
        assert!(x.merge(&u(u64::MAX / 2 + 1)).is_err());
    }

    fn samples() -> impl Strategy<Value = Vec<u64>> {
        prop::collection::vec(
            prop_oneof![
                8 => 0u64..200_000,
                2 => 0u64..50_000_000,
                1 => any::<u64>(),
            ],
            0..400,
        )
    }

    proptest! {
        #[test]
        fn merge_equals_concatenation(a in samples(), b in samples()) {
            let layout = Layout::default();
            let mut ha = Histogram::new(layout);
            let mut hb = Histogram::new(layout);
            let mut hab = Histogram::new(layout);
            for &v in &a { ha.record(v); hab.record(v); }
            for &v in &b { hb.record(v); hab.record(v); }
            ha.merge(&hb).unwrap();
            prop_assert_eq!(&ha, &hab);
            prop_assert_eq!(ha.count(), (a.len() + b.len()) as u64);
            prop_assert_eq!(ha.counts().iter().sum::<u64>(), ha.count());
        }

        #[test]
        fn quantiles_are_ordered_bounds(mut v in samples(), bucket in prop_oneof![Just(1_000u64), Just(100_000), 1u64..5_000]) {
            let layout = Layout::new(bucket, 1_000_000).unwrap();
            let mut h = Histogram::new(layout);
            for &x in &v { h.record(x); }
            v.sort_unstable();
            if v.is_empty() {
                prop_assert_eq!(h.quantile(Quantile::P50), None);
                return Ok(());
            }
            let qs = [Quantile::P50, Quantile::P90, Quantile::P99, Quantile::P999, Quantile::P9999, Quantile::P99999, Quantile::MAX];
            let mut prev = h.min().unwrap();
            for q in qs {
                let b = h.quantile(q).unwrap();
                let truth = v[(q.rank(v.len() as u64) - 1) as usize];
                prop_assert!(b >= truth, "bound {} below true value {}", b, truth);
                prop_assert!(b >= prev, "not monotonic");
                prop_assert!(b <= h.max().unwrap());
                prev = b;
            }
            prop_assert_eq!(h.quantile(Quantile::MAX), Some(*v.last().unwrap()));
            // fraction_below is never above the truth
            for t in [100_000u64, 500_000, 1_000_000, 5_000_000] {
                let truth = v.iter().filter(|&&x| x < t).count() as u64;
                prop_assert!(h.count_below(t) <= truth);
                if t % bucket == 0 && t <= layout.limit_ns() { prop_assert_eq!(h.count_below(t), truth); }
            }
        }

        #[test]
        fn merge_is_associative(a in samples(), b in samples(), c in samples()) {
            let layout = Layout::default();
            let mk = |s: &Vec<u64>| { let mut h = Histogram::new(layout); for &x in s { h.record(x); } h };
            let (ha, hb, hc) = (mk(&a), mk(&b), mk(&c));
            let mut left = ha.clone(); left.merge(&hb).unwrap(); left.merge(&hc).unwrap();
            let mut bc = hb.clone(); bc.merge(&hc).unwrap();
            let mut right = ha; right.merge(&bc).unwrap();
            prop_assert_eq!(left, right);
        }

        #[test]
        fn sparse_roundtrip(v in samples()) {
            let mut h = Histogram::new(Layout::default());
            for &x in &v { h.record(x); }
            prop_assert_eq!(Histogram::from_record(&h.to_record()).unwrap(), h);
        }
    }
}
