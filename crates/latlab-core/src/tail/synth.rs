//! Deterministic generators for tests, benchmarks and the fuzz target: histograms drawn
//! bucket by bucket (Poisson counts) from a body and a tail of known parameters.

use crate::hist::{HistParts, Histogram, Layout};
use crate::sim::SplitMix64;

/// A standard normal variate (Box–Muller).
pub fn normal(rng: &mut SplitMix64) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A Poisson variate: by inversion below a mean of 50, a rounded normal above.
pub fn poisson(rng: &mut SplitMix64, mean: f64) -> u64 {
    if mean <= 0.0 {
        return 0;
    }
    if mean < 50.0 {
        let mut k = 0u64;
        let mut p = (-mean).exp();
        let mut cdf = p;
        let u = rng.next_f64();
        while u > cdf && k < 1000 {
            k += 1;
            p *= mean / k as f64;
            cdf += p;
        }
        k
    } else {
        (mean + mean.sqrt() * normal(rng)).round().max(0.0) as u64
    }
}

/// A spliced distribution: an exponential body from `floor_ns` (mean `body_mean_ns`
/// above the floor, truncated at `u0_ns`) with mass 1 − `tail_mass`, and above `u0_ns`
/// a generalized Pareto tail (`shape`, `scale_ns`) with mass `tail_mass`.
#[derive(Debug, Clone, Copy)]
pub struct Spliced {
    pub floor_ns: f64,
    pub body_mean_ns: f64,
    pub u0_ns: f64,
    pub tail_mass: f64,
    pub shape: f64,
    pub scale_ns: f64,
}

impl Spliced {
    /// P(X ≥ x).
    pub fn sf(&self, x: f64) -> f64 {
        if x <= self.floor_ns {
            return 1.0;
        }
        if x >= self.u0_ns {
            let y = x - self.u0_ns;
            let s = if self.shape.abs() < 1e-12 {
                (-y / self.scale_ns).exp()
            } else {
                let t = 1.0 + self.shape * y / self.scale_ns;
                if t <= 0.0 {
                    0.0
                } else {
                    t.powf(-1.0 / self.shape)
                }
            };
            return self.tail_mass * s;
        }
        // Truncated exponential body.
        let e = |v: f64| (-(v - self.floor_ns) / self.body_mean_ns).exp();
        let (eu, ex) = (e(self.u0_ns), e(x));
        self.tail_mass + (1.0 - self.tail_mass) * (ex - eu) / (1.0 - eu)
    }

    /// The latency exceeded with probability `p` (p < tail mass).
    pub fn quantile(&self, p: f64) -> f64 {
        let r = (self.tail_mass / p).ln();
        if self.shape.abs() < 1e-12 {
            self.u0_ns + self.scale_ns * r
        } else {
            self.u0_ns + self.scale_ns / self.shape * ((self.shape * r).exp() - 1.0)
        }
    }

    /// A histogram of about `n` samples: each bucket's count is Poisson with the
    /// bucket's expected count (Poisson sampling, not a fixed total).
    pub fn histogram(&self, layout: Layout, n: f64, rng: &mut SplitMix64) -> Histogram {
        let mut counts = vec![0u64; layout.len()];
        let (mut min, mut max) = (None, 0u64);
        for (i, c) in counts.iter_mut().enumerate() {
            let (lo, hi) = (layout.lower(i) as f64, layout.upper(i) as f64);
            let mass = self.sf(lo) - self.sf(hi);
            if lo > self.floor_ns && self.sf(lo) * n < 1e-9 {
                break;
            }
            *c = poisson(rng, n * mass);
            if *c > 0 {
                min.get_or_insert(layout.lower(i));
                max = layout.lower(i);
            }
        }
        let min = min.unwrap_or(0);
        Histogram::from_parts(HistParts {
            layout,
            counts,
            min,
            max,
            sum: 0,
            sumsq: 0,
            unknown_above: 0,
            exact_moments: false,
        })
        .expect("a synthetic histogram is consistent")
    }
}
