//! The generalized Pareto tail: its survival function and grouped likelihood, the cells of
//! the excesses above a threshold, the starting values and the maximum-likelihood fit, and what
//! a fit tells (quantiles, profile-likelihood intervals, Q-Q points).

use super::*;

#[inline]
pub(super) fn log_sf(y: f64, s: f64, xi: f64) -> f64 {
    if y <= 0.0 {
        return 0.0;
    }
    if y.is_infinite() {
        return f64::NEG_INFINITY;
    }
    let t = xi * y / s;
    if xi.abs() < 1e-12 {
        return -y / s;
    }
    if t <= -1.0 {
        return f64::NEG_INFINITY;
    }
    -t.ln_1p() / xi
}

/// Grouped log-likelihood of (σ, ξ).
pub(super) fn loglik(cells: &[Cell], s: f64, xi: f64) -> f64 {
    if !(s > 0.0 && s.is_finite() && (SHAPE_RANGE.0..=SHAPE_RANGE.1).contains(&xi)) {
        return f64::NEG_INFINITY;
    }
    let mut sum = 0.0;
    for c in cells {
        let la = log_sf(c.a, s, xi);
        if la == f64::NEG_INFINITY {
            return la;
        }
        let lb = log_sf(c.b, s, xi);
        // ln(S(a) − S(b)) = ln S(a) + ln(1 − e^(ln S(b) − ln S(a)))
        let t = la + (-(lb - la).exp_m1()).ln();
        if !t.is_finite() {
            return f64::NEG_INFINITY;
        }
        sum += c.c * t;
    }
    sum
}

/// The excess with survival `ratio` = p/ζ below 1: σ/ξ·(ratio^−ξ − 1), in units.
pub(super) fn quantile_excess(s: f64, xi: f64, r: f64) -> f64 {
    // r = ln(ζ/p) > 0
    if xi.abs() < 1e-12 {
        s * r
    } else {
        s / xi * (xi * r).exp_m1()
    }
}

/// σ for which the excess at ln(ζ/p) = r is z.
pub(super) fn scale_for(z: f64, r: f64, xi: f64) -> f64 {
    if xi.abs() < 1e-12 {
        z / r
    } else {
        xi * z / (xi * r).exp_m1()
    }
}

/// The exceedances of the bucket boundary `u` as cells (see the module docs), the number of
/// them (censored included), and the unit of the excesses.
pub(super) fn cells_above(h: &Histogram, u: Nanos) -> (Vec<Cell>, u64, f64) {
    let l = h.layout();
    let limit = l.limit_ns();
    let width = l.bucket_ns;
    let unknown = h.unknown_above();
    let start = l.index(u);
    // Edges of the groups, in ns of excess: 8 bucket widths one by one, then 4 per octave.
    let mut cells: Vec<(u64, u64, u64)> = Vec::new();
    let next_edge = |e: u64| -> u64 {
        let t = if e < 8 * width {
            e + width
        } else {
            (e as f64 * 2f64.powf(0.25)) as u64
        };
        // Snapped to the bucket boundary at or above u + t.
        let at = u.saturating_add(t);
        let i = l.index(at);
        let lo = l.lower(i);
        let b = if lo == at { lo } else { l.upper(i) };
        b.saturating_sub(u).max(e + 1)
    };
    let mut k = unknown;
    let mut sum_mid = 0f64;
    let mut group: Option<(u64, u64, u64)> = None; // (a, b, count) in excess ns
    for (i, &c) in h.counts().iter().enumerate().skip(start) {
        if c == 0 {
            continue;
        }
        let lo = l.lower(i);
        if unknown > 0 && lo >= limit {
            // Known values above the limit join the censored cell.
            k += c;
            continue;
        }
        let hi = l.upper(i);
        let x = lo - u;
        sum_mid += c as f64 * ((lo - u) as f64 + (hi.saturating_sub(lo)) as f64 / 2.0);
        k += c;
        match &mut group {
            Some(g) if x < g.1 => g.2 += c,
            _ => {
                if let Some(g) = group.take() {
                    cells.push(g);
                }
                // The group holding x: walk the edges up from 0 (cheap: ~60 edges at most).
                let mut a = 0u64;
                let mut b = next_edge(0);
                while b <= x {
                    a = b;
                    b = next_edge(b);
                }
                group = Some((a, b, c));
            }
        }
    }
    if let Some(g) = group {
        cells.push(g);
    }
    let known: u64 = cells.iter().map(|c| c.2).sum();
    let unit = if known > 0 {
        (sum_mid / known as f64).max(width as f64)
    } else {
        width as f64
    };
    let mut out: Vec<Cell> = cells
        .iter()
        .map(|&(a, b, c)| Cell {
            a: a as f64 / unit,
            b: b as f64 / unit,
            c: c as f64,
        })
        .collect();
    let censored = k - known;
    if censored > 0 {
        out.push(Cell {
            a: limit.saturating_sub(u) as f64 / unit,
            b: f64::INFINITY,
            c: censored as f64,
        });
    }
    (out, k, unit)
}

/// Probability-weighted-moment estimates (Hosking and Wallis 1987) from cell midpoints, as a
/// start: (σ, ξ) in units.
pub(super) fn pwm_start(cells: &[Cell]) -> (f64, f64) {
    let known: Vec<&Cell> = cells.iter().filter(|c| c.b.is_finite()).collect();
    let k: f64 = known.iter().map(|c| c.c).sum();
    if k < 2.0 {
        return (1.0, 0.1);
    }
    let (mut a0, mut a1, mut cum) = (0.0, 0.0, 0.0);
    for c in known {
        let m = (c.a + c.b) / 2.0;
        a0 += c.c * m;
        // Σ over ranks cum+1 … cum+c of (1 − (i − 0.35)/k)
        let ranks = c.c * cum + c.c * (c.c + 1.0) / 2.0;
        a1 += m * (c.c - (ranks - 0.35 * c.c) / k);
        cum += c.c;
    }
    a0 /= k;
    a1 /= k;
    let d = a0 - 2.0 * a1;
    if d <= 0.0 || a0 <= 0.0 {
        return (a0.max(0.1), 0.1);
    }
    let xi = (2.0 - a0 / d).clamp(-0.4, 1.5);
    let s = 2.0 * a0 * a1 / d;
    (if s > 0.0 && s.is_finite() { s } else { a0 }, xi)
}

/// The maximum-likelihood fit of cells: (σ, ξ, ℓ).
pub(super) fn mle(cells: &[Cell]) -> Option<(f64, f64, f64)> {
    let (s0, x0) = pwm_start(cells);
    let f = |p: [f64; 2]| loglik(cells, p[0].exp(), p[1]);
    let mut start = [s0.ln(), x0];
    if !f(start).is_finite() {
        // A bounded start below the largest excess: try heavier tails.
        start = [s0.ln(), 0.5];
        if !f(start).is_finite() {
            return None;
        }
    }
    let (p, _) = nelder_mead(&f, start, [0.3, 0.2]);
    let (p, v) = nelder_mead(&f, p, [0.05, 0.05]);
    v.is_finite().then(|| (p[0].exp(), p[1], v))
}

impl GpdFit {
    /// The latency exceeded with probability `p` per wake-up (ns), `None` when `p` is not
    /// below the exceedance rate of the threshold (the quantile is not in the tail).
    pub fn quantile(&self, p: f64) -> Option<f64> {
        let r = (self.k as f64 / self.n as f64 / p).ln();
        (r > 0.0).then(|| self.u_ns as f64 + quantile_excess(self.scale, self.shape, r) * self.unit)
    }

    /// σ in ns.
    pub fn scale_ns(&self) -> f64 {
        self.scale * self.unit
    }

    /// The profile log-likelihood of the quantile at `r` = ln(ζ/p) being the excess `z`
    /// (units): maximised over ξ.
    fn profile(&self, z: f64, r: f64) -> f64 {
        let f = |xi: f64| loglik(&self.cells, scale_for(z, r, xi), xi);
        max_1d(&f, SHAPE_RANGE.0, SHAPE_RANGE.1, 10).1
    }

    /// The `level` profile-likelihood interval of the quantile at `p`, in ns: `(lo, hi)`,
    /// `hi` `None` when unbounded. `None` when `p` is not in the tail.
    pub fn interval(&self, p: f64, level: f64) -> Option<(f64, Option<f64>)> {
        let r = (self.k as f64 / self.n as f64 / p).ln();
        if r <= 0.0 {
            return None;
        }
        let cut = ChiSquared::new(1.0)
            .map(|c| c.inverse_cdf(level.clamp(0.5, 0.9999)))
            .unwrap_or(3.841)
            / 2.0
            / self.theta;
        let target = self.ll_max - cut;
        let z0 = quantile_excess(self.scale, self.shape, r);
        let w0 = z0.ln();
        let h = |w: f64| self.profile(w.exp(), r) - target;
        // Walk out from the estimate until the profile drops below the cut, then Illinois.
        let side = |dir: f64| -> Option<f64> {
            let mut a = w0;
            let mut fa = cut.max(1e-9);
            let mut step = 0.05;
            let limit = (1e18 / self.unit).ln();
            loop {
                let b = a + dir * step;
                if dir > 0.0 && b > limit {
                    return None;
                }
                if dir < 0.0 && b < w0 - 40.0 {
                    return Some(b);
                }
                let fb = h(b);
                if fb < 0.0 || fb.is_nan() {
                    let fb = if fb.is_nan() { -1.0 } else { fb };
                    return Some(illinois(&h, a, fa, b, fb));
                }
                a = b;
                fa = fb;
                step *= 2.0;
            }
        };
        let lo = side(-1.0).map(|w| self.u_ns as f64 + w.exp() * self.unit)?;
        let hi = side(1.0).map(|w| self.u_ns as f64 + w.exp() * self.unit);
        Some((lo, hi))
    }

    /// Quantile-quantile points of the fit against the histogram's exceedances: `(model ns,
    /// observed ns)` at each non-empty bucket above the threshold (observed: the bucket's
    /// midpoint; model: the fitted quantile at the bucket's mid rank), at most `max` points.
    pub fn qq_points(&self, h: &Histogram, max: usize) -> Vec<(f64, f64)> {
        let l = h.layout();
        let kf = self.k as f64;
        let mut cum = 0.0;
        let mut pts = Vec::new();
        for (i, &c) in h.counts().iter().enumerate().skip(l.index(self.u_ns)) {
            if c == 0 {
                continue;
            }
            if h.unknown_above() > 0 && l.lower(i) >= l.limit_ns() {
                break;
            }
            let mid_rank = cum + c as f64 / 2.0;
            cum += c as f64;
            let surv = 1.0 - mid_rank / kf;
            if surv <= 0.0 {
                continue;
            }
            let model =
                self.u_ns as f64 + quantile_excess(self.scale, self.shape, -surv.ln()) * self.unit;
            let hi = if i + 1 >= l.len() {
                h.max().unwrap_or(l.lower(i)) as f64
            } else {
                l.upper(i)
                    .min(h.max().unwrap_or(u64::MAX).saturating_add(1)) as f64
            };
            let obs = (l.lower(i) as f64 + hi) / 2.0;
            pts.push((model, obs));
        }
        if pts.len() > max && max > 0 {
            // Keep every n-th and the last (the largest matter most).
            let step = pts.len().div_ceil(max);
            let last = *pts.last().unwrap();
            pts = pts.into_iter().step_by(step).collect();
            if pts.last() != Some(&last) {
                pts.push(last);
            }
        }
        pts
    }

    /// The share of samples at or above `x_ns` the fit predicts (`x ≥ u`).
    pub fn exceedance_at(&self, x_ns: f64) -> f64 {
        let y = ((x_ns - self.u_ns as f64) / self.unit).max(0.0);
        self.k as f64 / self.n as f64 * log_sf(y, self.scale, self.shape).exp()
    }
}
