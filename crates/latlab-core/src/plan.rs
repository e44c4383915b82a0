//! How long a run must be to claim a percentile (`latlab plan`): "p99.999 ≤ 50 µs with 95 %
//! confidence" from exact binomial order statistics, no distribution assumed.
//!
//! The claim holds when the sample of rank u(n) lies at or below X, u(n) the smallest rank
//! with P(X₍ᵤ₎ ≥ the true quantile) ≥ 95 %; equivalently when the number E of samples at or
//! above X is at most e_max(n), the largest count whose one-sided 95 % Clopper–Pearson upper
//! bound on the exceedance probability stays at or below 1 − q. With no sample ever at or
//! above X, that is n ≥ ln 0.05 / ln q (about 3/(1 − q): 299 572 wake-ups for p99.999). With
//! a true exceedance probability π (a run's own share, or none), E is Binomial(n, π), and the
//! run shows the claim with probability P(E ≤ e_max(n)): the lengths where that reaches one
//! half and nine in ten are the "expected" and "safe" lengths. π ≥ 1 − q: never.

use serde::Serialize;
use statrs::function::beta::beta_reg;

use crate::hist::Quantile;
use crate::units::{parse_latency, Human, Nanos};

/// Confidence of the claim.
pub const CONFIDENCE: f64 = 0.95;

/// A target `pNN.NNN<=X`.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub label: String,
    pub q: Quantile,
    pub limit_ns: Nanos,
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Target, String> {
        let shown = crate::escape::escape(s);
        let err = |why: &str| format!("'{shown}' is not a target: {why} (p99.999<=50us)");
        let (stat, limit) = s
            .split_once("<=")
            .or_else(|| s.split_once('<'))
            .ok_or_else(|| err("no '<='"))?;
        let stat = stat.trim();
        let q = parse_percentile(stat).map_err(|why| err(&why))?;
        let limit_ns = parse_latency(limit.trim()).map_err(|e| err(&e.to_string()))?;
        Ok(Target {
            label: stat.to_string(),
            q,
            limit_ns,
        })
    }
}

/// A percentile written `pNN` or `pNN.NNN` (up to 12 decimals): its quantile; why not.
pub fn parse_percentile(stat: &str) -> Result<Quantile, String> {
    let pct = stat
        .strip_prefix('p')
        .filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .ok_or("the percentile is written pNN or pNN.NNN")?;
    let (int, frac) = pct.split_once('.').unwrap_or((pct, ""));
    if int.is_empty() || frac.contains('.') || frac.len() > 12 {
        return Err("the percentile is written pNN or pNN.NNN".into());
    }
    let den = 10u64.pow(2 + frac.len() as u32);
    let num: u64 = format!("{int}{frac}")
        .parse()
        .map_err(|_| "the percentile is not a number")?;
    if num == 0 || num >= den {
        return Err("the percentile must be above 0 and below 100".into());
    }
    Ok(Quantile { num, den })
}

/// One-sided `CONFIDENCE` Clopper–Pearson upper bound on a probability after `e` events in
/// `n` trials: the π with P(Binomial(n, π) ≤ e) = 1 − CONFIDENCE, by bisection on the
/// regularized incomplete beta function (statrs' own inverse loses digits for large n).
pub fn upper_bound(e: u64, n: u64) -> f64 {
    if e >= n {
        return 1.0;
    }
    if e == 0 {
        return -((1.0 - CONFIDENCE).ln() / n as f64).exp_m1();
    }
    let (a, b) = ((e + 1) as f64, (n - e) as f64);
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if beta_reg(a, b, mid) < CONFIDENCE {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= hi * 1e-13 {
            break;
        }
    }
    hi
}

/// Whether `e` samples at or above X among `n` show the claim: the upper bound on the
/// exceedance probability is within `tail`, i.e. P(Binomial(n, tail) ≤ e) ≤ 1 − CONFIDENCE.
fn shows(e: u64, n: u64, tail: f64) -> bool {
    if e >= n {
        return false;
    }
    if e == 0 {
        // (1 − tail)^n ≤ 0.05, exactly.
        return n as f64 * (-tail).ln_1p() <= (1.0 - CONFIDENCE).ln();
    }
    beta_reg((e + 1) as f64, (n - e) as f64, tail) >= CONFIDENCE
}

/// The most samples at or above X that still show the claim in `n` samples (`None`: none do).
pub fn max_exceedances(n: u64, tail: f64) -> Option<u64> {
    if !shows(0, n, tail) {
        return None;
    }
    // `shows` holds up to some e and not beyond: the largest e, by bisection.
    let (mut lo, mut hi) = (0u64, ((n as f64 * tail) as u64).saturating_add(1).min(n));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if shows(mid, n, tail) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// The probability that `n` samples show the claim when each exceeds X with probability `pi`.
pub fn p_shown(n: u64, pi: f64, tail: f64) -> f64 {
    let Some(e) = max_exceedances(n, tail) else {
        return 0.0;
    };
    if pi <= 0.0 {
        return 1.0;
    }
    if e >= n {
        return 1.0;
    }
    // P(Binomial(n, π) ≤ e) = 1 − I_π(e + 1, n − e)
    1.0 - beta_reg((e + 1) as f64, (n - e) as f64, pi.min(1.0))
}

/// The fewest samples that show the claim with probability `prob` (`None`: not within 10¹⁵).
pub fn samples_needed(pi: f64, tail: f64, prob: f64) -> Option<u64> {
    if pi >= tail {
        return None;
    }
    // The best case first (no exceedance at all): ln(0.05)/ln(1 − tail).
    let n0 = ((1.0 - CONFIDENCE).ln() / (-tail).ln_1p()).ceil().max(1.0) as u64;
    let ok = |n: u64| p_shown(n, pi, tail) >= prob;
    let mut hi = n0;
    while !ok(hi) {
        hi = hi.checked_mul(2)?;
        if hi > 1_000_000_000_000_000 {
            return None;
        }
    }
    let mut lo = n0.max(hi / 2);
    if ok(lo) {
        return Some(lo);
    }
    // ok(lo) false, ok(hi) true: bisect (P(shown) is nearly monotone in n; the answer is the
    // first length found, to the sample).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// What a run says about the target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observed {
    pub samples: u64,
    /// Samples at or above the limit (whole buckets: a bucket that reaches the limit counts).
    pub at_or_above: u64,
    /// Whether this run already shows the claim.
    pub shown: bool,
    /// Most samples at or above the limit a run of this length may have to show it.
    pub allowed: Option<u64>,
}

/// The plan (`latlab plan --format json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub target: String,
    pub limit_ns: Nanos,
    pub confidence: f64,
    pub wakeups_per_s: f64,
    /// No sample ever at or above the limit: the shortest run that can show the claim.
    pub best_case_samples: u64,
    pub best_case_ns: Nanos,
    pub observed: Option<Observed>,
    /// The share of wake-ups at or above the limit the lengths below assume.
    pub exceedance_rate: Option<f64>,
    /// Lengths at which a run shows the claim in half and in nine of ten runs (`null`: never).
    pub median_samples: Option<u64>,
    pub median_ns: Option<Nanos>,
    pub safe_samples: Option<u64>,
    pub safe_ns: Option<Nanos>,
    pub verdict: String,
}

fn to_ns(samples: u64, rate: f64) -> Nanos {
    (samples as f64 / rate * 1e9).min(u64::MAX as f64) as Nanos
}

/// The plan for `target` at `wakeups_per_s`, with a run's counts when there is one.
pub fn plan(target: &Target, wakeups_per_s: f64, run: Option<(u64, u64)>) -> Plan {
    let tail = (target.q.den - target.q.num) as f64 / target.q.den as f64;
    let best = samples_needed(0.0, tail, 1.0).unwrap_or(u64::MAX);
    let observed = run.map(|(n, e)| {
        let allowed = max_exceedances(n, tail);
        Observed {
            samples: n,
            at_or_above: e,
            shown: allowed.is_some_and(|a| e <= a),
            allowed,
        }
    });
    let pi = run.map(|(n, e)| if n == 0 { 0.0 } else { e as f64 / n as f64 });
    let (median, safe) = match pi {
        Some(p) => (samples_needed(p, tail, 0.5), samples_needed(p, tail, 0.9)),
        None => (Some(best), Some(best)),
    };
    let lim = Human(target.limit_ns);
    let dur = |n: u64| crate::units::format_measured(to_ns(n, wakeups_per_s));
    let verdict = match (&observed, pi) {
        (Some(o), _) if o.shown => format!(
            "this run already shows {} ≤ {lim} with 95 % confidence ({} of {} samples at or above {lim}; up to {} allowed)",
            target.label,
            o.at_or_above,
            o.samples,
            o.allowed.unwrap_or(0)
        ),
        (Some(o), Some(p)) if p >= tail => format!(
            "no run length shows it: {} of {} samples ({p:.2e}) are at or above {lim}, more than the {tail:e} {} allows; {} is above {lim} on this machine",
            o.at_or_above, o.samples, target.label, target.label
        ),
        (Some(_), Some(p)) => match (median, safe) {
            (Some(m), Some(s)) => format!(
                "at this run's rate of {p:.2e} at or above {lim}: about {} ({m} samples) shows it in half of such runs, {} ({s} samples) in nine of ten",
                dur(m),
                dur(s)
            ),
            _ => "no run length shorter than 10¹⁵ samples shows it".into(),
        },
        _ => format!(
            "at least {} ({best} samples), and only if no wake-up ever reaches {lim}; a run of this machine tells how much longer it needs (latlab plan RUN --target …)",
            dur(best)
        ),
    };
    Plan {
        target: format!("{}<={}", target.label, lim),
        limit_ns: target.limit_ns,
        confidence: CONFIDENCE,
        wakeups_per_s,
        best_case_samples: best,
        best_case_ns: to_ns(best, wakeups_per_s),
        observed,
        exceedance_rate: pi,
        median_samples: median,
        median_ns: median.map(|n| to_ns(n, wakeups_per_s)),
        safe_samples: safe,
        safe_ns: safe.map(|n| to_ns(n, wakeups_per_s)),
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_refuse() {
        let t: Target = "p99.999<=50us".parse().unwrap();
        assert_eq!(t.q, Quantile::P99999);
        assert_eq!(t.limit_ns, 50_000);
        let t: Target = "p99 < 1ms".parse().unwrap();
        assert_eq!(t.q, Quantile::P99);
        for bad in [
            "p99.999",
            "99<=1ms",
            "p100<=1ms",
            "p0<=1ms",
            "p9x<=1ms",
            "p99<=fast",
        ] {
            assert!(bad.parse::<Target>().is_err(), "{bad}");
        }
    }

    /// The rule of three, exactly: with no exceedance, n ≥ ln 0.05 / ln q.
    #[test]
    fn best_case_is_the_rule_of_three() {
        let tail = 1e-5;
        let n = samples_needed(0.0, tail, 1.0).unwrap();
        assert_eq!(n, ((0.05f64).ln() / (-tail).ln_1p()).ceil() as u64);
        assert!((299_000..300_000).contains(&n), "{n}");
        assert!(max_exceedances(n, tail) == Some(0));
        assert!(max_exceedances(n - 1, tail).is_none());
        // The bound agrees with the binomial: P(0 events | π = bound) = 5 %.
        let b = upper_bound(0, n);
        assert!(((1.0 - b).powf(n as f64) - 0.05).abs() < 1e-6);
    }

    #[test]
    fn a_run_with_exceedances_needs_longer() {
        let t: Target = "p99.99<=100us".parse().unwrap();
        // Half the allowed share, in a run too short to show it: longer runs will.
        let p = plan(&t, 1000.0, Some((100_000, 5)));
        assert!(!p.observed.as_ref().unwrap().shown);
        let m = p.median_samples.unwrap();
        let s = p.safe_samples.unwrap();
        assert!(m > p.best_case_samples && s > m, "{p:?}");
        assert!((p_shown(m, 5e-5, 1e-4) - 0.5).abs() < 0.1);
        assert!(p_shown(m - 1, 5e-5, 1e-4) < 0.5 + 0.1);
        // Too many exceedances: never.
        let p = plan(&t, 1000.0, Some((1_000_000, 200)));
        assert!(
            p.median_samples.is_none() && p.verdict.contains("no run length"),
            "{p:?}"
        );
        // Already shown.
        let p = plan(&t, 1000.0, Some((10_000_000, 900)));
        assert!(p.observed.unwrap().shown, "{}", p.verdict);
    }
}
