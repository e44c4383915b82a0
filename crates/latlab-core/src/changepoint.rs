//! A change point in a series of runs (`latlab history`): the run after which a machine's
//! latency moved (the day a kernel got worse), told apart from the run-to-run noise.
//!
//! The series is one statistic of one machine's runs in time order (p99.9 by default), on a
//! log scale (latencies move by factors). At each split with at least [`MIN_SIDE`] runs on
//! both sides, Welch's t statistic compares the runs before with the runs after; the split
//! with the largest |t| is the candidate. Its significance comes from the runs themselves: the
//! same maximum over all splits computed on [`PERMUTATIONS`] seeded shuffles of the series
//! (under "no change" every order is as likely), the p-value the share of shuffles whose
//! maximum reaches the observed one. This accounts for having looked at every split, assumes
//! nothing about the distribution, and takes the noise model from the runs: a series whose
//! runs scatter by ±30 % needs a larger step than one that repeats within ±2 %.
//!
//! One change point at most (the largest); the runs on each side are summarised by their
//! medians. Deterministic: the shuffles are seeded.

use serde::Serialize;

use crate::sim::SplitMix64;

/// Runs needed on each side of a split.
pub const MIN_SIDE: usize = 3;
/// Shuffles for the p-value.
pub const PERMUTATIONS: usize = 999;
/// A change point is reported at this p-value or below.
pub const ALPHA: f64 = 0.05;

/// The change point of a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangePoint {
    /// Index of the first run after the change.
    pub index: usize,
    /// Median of the runs before and after (the series' unit).
    pub before: f64,
    pub after: f64,
    /// Share of the shuffled series whose largest split statistic reached this one.
    pub p_value: f64,
}

/// The change point of `values` (in time order, all positive), if one is significant at
/// [`ALPHA`]; None with fewer than 2 × [`MIN_SIDE`] runs.
pub fn detect(values: &[f64]) -> Option<ChangePoint> {
    let (cp, p) = candidate(values)?;
    (p <= ALPHA).then_some(cp)
}

/// The largest split and its p-value, significant or not.
pub fn candidate(values: &[f64]) -> Option<(ChangePoint, f64)> {
    let n = values.len();
    if n < 2 * MIN_SIDE || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let (index, observed) = best_split(&logs)?;
    let mut rng = SplitMix64::new(0x6c61_746c_6162);
    let mut shuffled = logs.clone();
    let mut reached = 0usize;
    for _ in 0..PERMUTATIONS {
        for i in (1..n).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            shuffled.swap(i, j);
        }
        if best_split(&shuffled).is_some_and(|(_, t)| t >= observed) {
            reached += 1;
        }
    }
    let p = (reached + 1) as f64 / (PERMUTATIONS + 1) as f64;
    let cp = ChangePoint {
        index,
        before: median(&values[..index]),
        after: median(&values[index..]),
        p_value: p,
    };
    Some((cp, p))
}

/// The split (first index after it) with the largest Welch |t|, and that |t|. A split whose
/// two sides have no spread at all and differ is infinitely clear.
fn best_split(x: &[f64]) -> Option<(usize, f64)> {
    let n = x.len();
    // Prefix sums of x and x².
    let mut s = vec![0.0; n + 1];
    let mut q = vec![0.0; n + 1];
    for (i, v) in x.iter().enumerate() {
        s[i + 1] = s[i] + v;
        q[i + 1] = q[i] + v * v;
    }
    let side = |a: usize, b: usize| {
        let m = (b - a) as f64;
        let mean = (s[b] - s[a]) / m;
        let var = ((q[b] - q[a]) - m * mean * mean).max(0.0) / (m - 1.0);
        (mean, var / m)
    };
    let mut best: Option<(usize, f64)> = None;
    for k in MIN_SIDE..=n - MIN_SIDE {
        let ((m1, v1), (m2, v2)) = (side(0, k), side(k, n));
        let d = (m1 - m2).abs();
        let se = (v1 + v2).sqrt();
        let t = if se > 1e-12 {
            d / se
        } else if d > 1e-12 {
            f64::INFINITY
        } else {
            0.0
        };
        if best.is_none_or(|(_, b)| t > b) {
            best = Some((k, t));
        }
    }
    best
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` values scattered ±`spread` (relative) around `level`, seeded.
    fn noisy(rng: &mut SplitMix64, n: usize, level: f64, spread: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let u = rng.next_f64();
                level * (1.0 + spread * (2.0 * u - 1.0))
            })
            .collect()
    }

    #[test]
    fn a_step_is_found_where_it_is() {
        let mut rng = SplitMix64::new(7);
        let mut v = noisy(&mut rng, 12, 45_000.0, 0.1);
        v.extend(noisy(&mut rng, 8, 80_000.0, 0.1));
        let cp = detect(&v).expect("a change point");
        assert_eq!(cp.index, 12);
        assert!(cp.p_value <= 0.01, "{cp:?}");
        assert!((40_000.0..50_000.0).contains(&cp.before), "{cp:?}");
        assert!((72_000.0..88_000.0).contains(&cp.after), "{cp:?}");
    }

    #[test]
    fn noise_alone_is_not_a_change() {
        // Over many seeded series of pure noise, about ALPHA of them may show a "change":
        // far fewer than half, and never the same series twice (deterministic).
        let mut found = 0;
        for seed in 0..100 {
            let mut rng = SplitMix64::new(seed);
            let v = noisy(&mut rng, 20, 45_000.0, 0.3);
            if detect(&v).is_some() {
                found += 1;
            }
            assert_eq!(detect(&v), detect(&v));
        }
        assert!(found <= 12, "{found} of 100 noise series showed a change");
    }

    #[test]
    fn a_step_within_the_noise_is_not_claimed() {
        let mut rng = SplitMix64::new(3);
        let mut v = noisy(&mut rng, 10, 45_000.0, 0.5);
        v.extend(noisy(&mut rng, 10, 47_000.0, 0.5));
        assert!(detect(&v).is_none());
    }

    #[test]
    fn too_few_runs_or_bad_values_give_none() {
        assert!(candidate(&[1.0, 2.0, 3.0, 4.0, 5.0]).is_none());
        assert!(candidate(&[1.0, 2.0, 3.0, 4.0, 5.0, 0.0]).is_none());
        assert!(candidate(&[1.0, 2.0, 3.0, 4.0, 5.0, f64::NAN]).is_none());
        let (cp, p) = candidate(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]).unwrap();
        assert!(p > ALPHA, "{cp:?}");
    }

    #[test]
    fn a_clean_step_without_spread_is_certain() {
        let v = [10.0, 10.0, 10.0, 10.0, 20.0, 20.0, 20.0, 20.0];
        let cp = detect(&v).unwrap();
        assert_eq!((cp.index, cp.before, cp.after), (4, 10.0, 20.0));
    }
}
