//! Goodness of fit: the grouped Anderson–Darling statistic, its p-value from the simulated
//! table, and ForwardStop over the thresholds tested.

use super::*;

/// The grouped Anderson–Darling statistic of the fitted GPD on the histogram's own buckets
/// above `u` (module docs).
pub(super) fn anderson_darling(h: &Histogram, u: Nanos, unit: f64, s: f64, xi: f64, k: u64) -> f64 {
    let l = h.layout();
    let limit = l.limit_ns();
    let unknown = h.unknown_above();
    let kf = k as f64;
    let mut a2 = 0.0;
    let mut cum = 0.0f64;
    // The model's ln S at the end of the previous cell (H = 1 − S).
    let mut ls_prev = 0.0f64;
    // K · ∫ (s − H)² / (H (1 − H)) dH over an empty stretch from H(ls_a) to H(ls_b).
    let empty = |cum: f64, ls_a: f64, ls_b: f64| -> f64 {
        if ls_b >= ls_a {
            return 0.0;
        }
        let s = cum / kf;
        let ha = -ls_a.exp_m1();
        let hb = -ls_b.exp_m1();
        let mut v = -(hb - ha);
        if s > 0.0 && ha > 0.0 {
            v += s * s * (hb / ha).ln();
        }
        if s < 1.0 && ls_b.is_finite() {
            v += (1.0 - s) * (1.0 - s) * (ls_a - ls_b);
        }
        kf * v.max(0.0)
    };
    for (i, &c) in h.counts().iter().enumerate().skip(l.index(u)) {
        if c == 0 {
            continue;
        }
        let lo = l.lower(i);
        if unknown > 0 && lo >= limit {
            break;
        }
        let ls_a = log_sf((lo - u) as f64 / unit, s, xi);
        a2 += empty(cum, ls_prev, ls_a);
        let ls_b = if i + 1 >= l.len() {
            f64::NEG_INFINITY
        } else {
            log_sf((l.upper(i) - u) as f64 / unit, s, xi)
        };
        cum += c as f64;
        let hb = -ls_b.exp_m1();
        let sb = ls_b.exp();
        let p = (-(ls_b - ls_a).exp_m1()) * ls_a.exp();
        if hb * sb > 1e-300 {
            let z = cum - kf * hb;
            a2 += z * z * p / (kf * hb * sb);
        }
        ls_prev = ls_b;
    }
    if unknown > 0 {
        // The censored cell [limit, ∞): the stretch up to it is empty; after it H = 1.
        let ls_c = log_sf(limit.saturating_sub(u) as f64 / unit, s, xi);
        a2 += empty(cum, ls_prev, ls_c);
    } else {
        a2 += empty(cum, ls_prev, f64::NEG_INFINITY);
    }
    a2
}

/// Upper percentage points of the grouped Anderson–Darling statistic of a GPD with both
/// parameters estimated by maximum likelihood, by ξ (rows) and by level
/// ([`AD_LEVELS`]): 4000 simulated samples of 200 exceedances per row, in 1 ns buckets for
/// σ = 1 µs (ignored test `ad_table`, release build). Choulakian and Stephens (2001) give such a table for the
/// ungrouped statistic; the dependence on ξ is mild and on the sample size small.
pub const AD_TABLE: [(f64, [f64; 6]); 7] = [
    (-0.4, [0.444, 0.644, 0.921, 1.130, 1.311, 1.644]),
    (-0.2, [0.417, 0.602, 0.835, 1.008, 1.232, 1.481]),
    (0.0, [0.394, 0.568, 0.809, 0.970, 1.148, 1.429]),
    (0.2, [0.379, 0.537, 0.745, 0.898, 1.050, 1.272]),
    (0.5, [0.361, 0.508, 0.700, 0.853, 0.996, 1.199]),
    (1.0, [0.336, 0.470, 0.647, 0.780, 0.904, 1.098]),
    (1.5, [0.331, 0.451, 0.620, 0.736, 0.850, 0.984]),
];

/// The upper-tail probabilities of [`AD_TABLE`]'s columns.
pub const AD_LEVELS: [f64; 6] = [0.5, 0.25, 0.1, 0.05, 0.025, 0.01];

/// p-value of the grouped A² for shape ξ: log-linear interpolation in [`AD_TABLE`]
/// (linear in ξ between rows), extrapolated along the last two columns beyond 0.01, at most
/// 0.9 below the first.
pub fn ad_p_value(a2: f64, xi: f64) -> f64 {
    let xi = xi.clamp(AD_TABLE[0].0, AD_TABLE[AD_TABLE.len() - 1].0);
    let j = AD_TABLE
        .windows(2)
        .position(|w| xi <= w[1].0)
        .unwrap_or(AD_TABLE.len() - 2);
    let (x0, r0) = AD_TABLE[j];
    let (x1, r1) = AD_TABLE[j + 1];
    let t = ((xi - x0) / (x1 - x0)).clamp(0.0, 1.0);
    let row: Vec<f64> = r0.iter().zip(r1).map(|(a, b)| a + t * (b - a)).collect();
    let lp: Vec<f64> = AD_LEVELS.iter().map(|p| p.ln()).collect();
    let n = row.len();
    let seg = if a2 <= row[0] {
        // Below the median: along the first segment, capped at 0.9.
        0
    } else if a2 >= row[n - 1] {
        n - 2
    } else {
        row.windows(2).position(|w| a2 <= w[1]).unwrap_or(n - 2)
    };
    let f = (a2 - row[seg]) / (row[seg + 1] - row[seg]);
    (lp[seg] + f * (lp[seg + 1] - lp[seg]))
        .exp()
        .clamp(1e-300, 0.9)
}

/// ForwardStop (G'Sell et al. 2016): the number of leading hypotheses rejected.
pub fn forward_stop(p: &[f64], alpha: f64) -> usize {
    let mut sum = 0.0;
    let mut last = 0;
    for (i, &pi) in p.iter().enumerate() {
        sum += -(1.0 - pi.min(1.0 - 1e-12)).ln();
        if sum / (i + 1) as f64 <= alpha {
            last = i + 1;
        }
    }
    last
}
