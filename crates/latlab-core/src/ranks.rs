//! Where a quantile lies in a histogram, with its confidence: the ranks around the p-quantile of
//! n samples (exact Poisson ranks for a thin tail, the normal approximation beyond) and the
//! bucket that holds a rank. Used by the comparisons and by the tail estimates.

use crate::hist::{Histogram, Quantile};
use crate::units::Nanos;

/// The histogram bucket holding the sample of rank `r` (1-based): `(lower, upper)` with the
/// upper bound clamped to the maximum; `None` among unknown overflows.
pub fn bucket_at_rank(h: &Histogram, r: u64) -> Option<(Nanos, Nanos)> {
    let max = h.max()?;
    if r >= h.count() {
        return Some((max, max));
    }
    let l = h.layout();
    let mut cum = 0;
    for (i, &c) in h.counts().iter().enumerate() {
        cum += c;
        if cum >= r {
            return Some((l.lower(i), l.upper(i).min(max)));
        }
    }
    None
}

/// 95 % ranks (1-based, inclusive) around the p-quantile of n samples.
pub fn rank_interval(n: u64, q: Quantile) -> (u64, u64) {
    rank_interval_at(n, q, 0.95)
}

/// [`rank_interval`] at another confidence `level` (0.5 … 0.999).
pub fn rank_interval_at(n: u64, q: Quantile, level: f64) -> (u64, u64) {
    if q.num >= q.den {
        return (n, n);
    }
    let a = (1.0 - level.clamp(0.5, 0.999)) / 2.0;
    let p = q.num as f64 / q.den as f64;
    let lambda = n as f64 * (1.0 - p);
    // k = number of samples above the true quantile; rank = n − k.
    let (k_lo, k_hi) = if lambda < 500.0 {
        (
            poisson_quantile(lambda, a),
            poisson_quantile(lambda, 1.0 - a),
        )
    } else {
        use statrs::distribution::{ContinuousCDF, Normal};
        let z = Normal::standard().inverse_cdf(1.0 - a);
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        (
            (lambda - z * sd).floor().max(0.0) as u64,
            (lambda + z * sd).ceil() as u64,
        )
    };
    let lo = n.saturating_sub(k_hi + 1).max(1);
    let hi = n.saturating_sub(k_lo).clamp(1, n);
    (lo.min(hi), hi)
}

/// Smallest k with P(Poisson(λ) ≤ k) ≥ c.
fn poisson_quantile(lambda: f64, c: f64) -> u64 {
    let mut term = (-lambda).exp();
    let mut cdf = term;
    let mut k = 0u64;
    while cdf < c && k < 10_000 {
        k += 1;
        term *= lambda / k as f64;
        cdf += term;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LADDER;

    #[test]
    fn rank_interval_brackets_the_rank() {
        for n in [10u64, 100, 1_000, 100_000, 10_000_000] {
            for (_, q) in LADDER {
                let (lo, hi) = rank_interval(n, q);
                let r = q.rank(n);
                assert!(lo <= r && r <= hi, "n={n} q={q:?}: {lo}..{hi} vs {r}");
                assert!(hi <= n && lo >= 1);
            }
        }
        // p99 of 10⁶: λ = 10⁴, sd ≈ 99.5 → about ±195 ranks.
        let (lo, hi) = rank_interval(1_000_000, Quantile::P99);
        assert!((hi - lo) > 350 && (hi - lo) < 420, "{lo}..{hi}");
        // Poisson: λ = 10 → 2.5 % at 4, 97.5 % at 17.
        assert_eq!(poisson_quantile(10.0, 0.025), 4);
        assert_eq!(poisson_quantile(10.0, 0.975), 17);
    }
}
