//! Statistics of the responsiveness scenarios of Love's OLS 2003 paper (`latlab scenario`):
//! CPU shares and Jain's fairness index of N identical tasks (§2.1), and the slow-down of a
//! reader under a load relative to the same reader alone (§4.3). Pure functions over numbers.
//!
//! Jain's fairness index (R. Jain, D. Chiu, W. Hawe, "A Quantitative Measure of Fairness and
//! Discrimination for Resource Allocation in Shared Computer Systems", DEC-TR-301, 1984):
//! `J = (Σx)² / (n·Σx²)`; 1 when every task got the same, `1/n` when one task got everything.
//!
//! ```
//! use latlab_core::scenario::{jain_index, shares};
//! assert_eq!(jain_index(&[2.0, 2.0, 2.0]), Some(1.0));
//! assert_eq!(shares(&[1.0, 3.0]), vec![0.25, 0.75]);
//! ```

use crate::units::Nanos;

/// Jain's fairness index of the allocations `xs` (CPU time, work done …). None when there is
/// nothing to judge: no task, a negative or non-finite value, or all zero.
pub fn jain_index(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite() || *x < 0.0) {
        return None;
    }
    let sum: f64 = xs.iter().sum();
    let sumsq: f64 = xs.iter().map(|x| x * x).sum();
    if sumsq == 0.0 {
        return None;
    }
    // Rounding can put an exactly fair set a hair above 1.
    Some((sum * sum / (xs.len() as f64 * sumsq)).min(1.0))
}

/// Each value's share of the total (they add up to 1). All zero → all zero.
pub fn shares(xs: &[f64]) -> Vec<f64> {
    let sum: f64 = xs.iter().sum();
    if sum <= 0.0 || !sum.is_finite() {
        return vec![0.0; xs.len()];
    }
    xs.iter().map(|x| x / sum).collect()
}

/// Largest over smallest value; None when the smallest is 0 (a task that got nothing: the
/// ratio is infinite, which JSON cannot hold) or there is no value.
pub fn max_min_ratio(xs: &[f64]) -> Option<f64> {
    let max = xs.iter().copied().fold(f64::NAN, f64::max);
    let min = xs.iter().copied().fold(f64::NAN, f64::min);
    if xs.is_empty() || min <= 0.0 || !min.is_finite() {
        return None;
    }
    Some(max / min)
}

/// `loaded / alone` (how many times slower under the load); None when `alone` is 0.
pub fn slowdown(loaded: Nanos, alone: Nanos) -> Option<f64> {
    (alone > 0).then(|| loaded as f64 / alone as f64)
}

/// Median of durations (the middle one; the lower of the two middle ones for an even count).
pub fn median(xs: &[Nanos]) -> Option<Nanos> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_unstable();
    Some(v[(v.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_bounds_and_known_values() {
        assert_eq!(jain_index(&[5.0; 4]), Some(1.0));
        // One task got everything: 1/n.
        let j = jain_index(&[0.0, 0.0, 0.0, 7.0]).unwrap();
        assert!((j - 0.25).abs() < 1e-12, "{j}");
        // (1+3)² / (2·(1+9)) = 16/20.
        let j = jain_index(&[1.0, 3.0]).unwrap();
        assert!((j - 0.8).abs() < 1e-12, "{j}");
        // Scale-free.
        assert_eq!(jain_index(&[1.0, 3.0]), jain_index(&[1e9, 3e9]));
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
        assert_eq!(jain_index(&[1.0, -1.0]), None);
        assert_eq!(jain_index(&[1.0, f64::NAN]), None);
        for xs in [[1.0, 2.0, 3.0], [0.1, 100.0, 7.0], [3.0, 3.0, 3.0000001]] {
            let j = jain_index(&xs).unwrap();
            assert!(j > 1.0 / 3.0 - 1e-12 && j <= 1.0, "{xs:?} → {j}");
        }
    }

    #[test]
    fn shares_sum_to_one() {
        let s = shares(&[1.0, 2.0, 5.0]);
        assert_eq!(s, vec![0.125, 0.25, 0.625]);
        assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(shares(&[0.0, 0.0]), vec![0.0, 0.0]);
        assert!(shares(&[]).is_empty());
    }

    #[test]
    fn ratios() {
        assert_eq!(max_min_ratio(&[2.0, 1.0, 4.0]), Some(4.0));
        assert_eq!(max_min_ratio(&[2.0, 0.0]), None);
        assert_eq!(max_min_ratio(&[]), None);
        assert_eq!(slowdown(300, 100), Some(3.0));
        assert_eq!(slowdown(300, 0), None);
        assert_eq!(median(&[5, 1, 3]), Some(3));
        assert_eq!(median(&[4, 1, 3, 2]), Some(2));
        assert_eq!(median(&[]), None);
    }
}
