//! `latlab run --until STAT:PRECISION`: measure until a statistic is known well enough.
//!
//! A claim such as "p99.99 = 42 µs" means little when the run was too short to pin the
//! 99.99th percentile down. `--until p99.99:10%` keeps measuring until the 95 % interval of
//! that percentile, on every measured CPU, lies within ±10 % of the estimate (`--duration`
//! stays the upper bound); `--until tail:1e-9:10%` does the same for the tail estimate of the
//! latency exceeded once per 10⁹ wake-ups ([`crate::tail`]).
//!
//! - A percentile's interval is distribution-free: the ranks around the p-quantile of n
//!   samples ([`crate::ranks::rank_interval`], exact Poisson ranks in a thin tail, the normal
//!   approximation beyond), read in the histogram as the lower end of the bucket holding the
//!   low rank and the upper end of the bucket holding the high rank. The histogram's bucket
//!   width is part of the interval, so a percentile a few buckets wide never reaches a tight
//!   precision (1 µs buckets: ±10 % needs an estimate of about 5 µs or more).
//! - There is no interval while the high rank is the largest sample (fewer than about four
//!   samples expected above the percentile): the data bound it from below only.
//! - A tail estimate's interval is its profile-likelihood interval; none when the tail cannot
//!   be fitted honestly ([`crate::tail::TailEstimate::reason`]).
//!
//! The precision is the interval's half-width relative to the estimate: `(hi − lo) / 2 / est`.
//! The collector checks it (never the measuring threads), every second for a percentile and
//! every ten seconds for a tail estimate.

use crate::hist::{Histogram, Quantile};
use crate::ranks::{bucket_at_rank, rank_interval};
use crate::tail::{self, TailContext};
use crate::units::Nanos;

/// run.json's `until` (in the record, which knows nothing of how it is checked).
pub use crate::record::UntilRecord;

/// The statistic `--until` waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum Statistic {
    /// A percentile (`p99.99`): its label as written and its quantile.
    Percentile { label: String, q: Quantile },
    /// The tail estimate of the latency exceeded with this probability (`tail:1e-9`).
    Tail(f64),
}

/// A parsed `--until STAT:PRECISION`.
#[derive(Debug, Clone, PartialEq)]
pub struct Until {
    pub statistic: Statistic,
    /// The relative half-width to reach (0.1 for `10%`).
    pub precision: f64,
}

impl std::str::FromStr for Until {
    type Err = String;
    fn from_str(s: &str) -> Result<Until, String> {
        let shown = crate::escape::escape(s);
        let err =
            |why: &str| format!("'{shown}' is not an --until: {why} (p99.99:10% or tail:1e-9:20%)");
        let (stat, precision) = s
            .trim()
            .rsplit_once(':')
            .ok_or_else(|| err("no ':' before the precision"))?;
        let precision = precision
            .trim()
            .strip_suffix('%')
            .ok_or_else(|| err("the precision is a percentage, such as 10%"))?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite() && *p > 0.0 && *p < 100.0)
            .ok_or_else(|| err("the precision must be above 0% and below 100%"))?
            / 100.0;
        let stat = stat.trim();
        let statistic = match stat.strip_prefix("tail:") {
            Some(p) => Statistic::Tail(
                p.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|p| p.is_finite() && *p > 0.0 && *p < 0.01)
                    .ok_or_else(|| {
                        err("the tail's exceedance probability must be above 0 and below 0.01")
                    })?,
            ),
            None => Statistic::Percentile {
                label: stat.to_string(),
                q: crate::plan::parse_percentile(stat).map_err(|why| err(&why))?,
            },
        };
        Ok(Until {
            statistic,
            precision,
        })
    }
}

/// Where a statistic stands on one histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub estimate_ns: Option<Nanos>,
    pub lo_ns: Option<Nanos>,
    pub hi_ns: Option<Nanos>,
    /// `(hi − lo) / 2 / estimate`; None with no two-sided interval.
    pub half_width: Option<f64>,
    /// Why there is no two-sided interval yet.
    pub reason: Option<String>,
}

impl Check {
    fn without(reason: String) -> Check {
        Check {
            estimate_ns: None,
            lo_ns: None,
            hi_ns: None,
            half_width: None,
            reason: Some(reason),
        }
    }

    fn of(est: Nanos, lo: Nanos, hi: Nanos) -> Check {
        Check {
            estimate_ns: Some(est),
            lo_ns: Some(lo),
            hi_ns: Some(hi),
            half_width: (est > 0).then(|| hi.saturating_sub(lo) as f64 / 2.0 / est as f64),
            reason: (est == 0).then(|| "the estimate is 0 ns".to_string()),
        }
    }
}

impl Until {
    /// The statistic as written (`p99.99`, `tail:1e-9`).
    pub fn name(&self) -> String {
        match &self.statistic {
            Statistic::Percentile { label, .. } => label.clone(),
            Statistic::Tail(p) => format!("tail:{p:e}"),
        }
    }

    /// As written on the command line: `p99.99:10%`.
    pub fn spec(&self) -> String {
        let pct = (self.precision * 100.0 * 1e9).round() / 1e9;
        format!("{}:{pct}%", self.name())
    }

    /// A tail estimate is a fit: checked less often than a percentile.
    pub fn is_tail(&self) -> bool {
        matches!(self.statistic, Statistic::Tail(_))
    }

    /// The statistic on `h` (one CPU's samples; `ctx` its per-second maxima, for the tail's
    /// independence check) with its 95 % interval.
    pub fn check(&self, h: &Histogram, ctx: &TailContext) -> Check {
        match &self.statistic {
            Statistic::Percentile { q, .. } => percentile(h, *q),
            Statistic::Tail(p) => match tail::estimate(h, ctx).at(*p, 0.95) {
                Ok((est, Some(lo), Some(hi))) => Check::of(est, lo, hi),
                Ok((est, _, _)) => Check {
                    estimate_ns: Some(est),
                    ..Check::without("the tail estimate has no upper bound yet".into())
                },
                Err(why) => Check::without(why),
            },
        }
    }

    /// `check` is within the precision asked for.
    pub fn reached(&self, c: &Check) -> bool {
        c.half_width.is_some_and(|w| w <= self.precision)
    }
}

/// A percentile's distribution-free 95 % interval (module docs).
fn percentile(h: &Histogram, q: Quantile) -> Check {
    let n = h.count();
    let Some(est) = h.quantile(q) else {
        return Check::without(match n {
            0 => "no samples yet".into(),
            _ => "the percentile lies among samples of unknown value".into(),
        });
    };
    let (lo_r, hi_r) = rank_interval(n, q);
    if hi_r >= n {
        return Check {
            estimate_ns: Some(est),
            ..Check::without(format!(
                "too few samples: {n} leave the interval open above (about 4 samples above the percentile are needed)"
            ))
        };
    }
    match (bucket_at_rank(h, lo_r), bucket_at_rank(h, hi_r)) {
        (Some((lo, _)), Some((_, hi))) => Check::of(est, lo, hi),
        _ => Check {
            estimate_ns: Some(est),
            ..Check::without("the interval reaches samples of unknown value".into())
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Layout;

    fn until(s: &str) -> Until {
        s.parse().unwrap()
    }

    fn ctx() -> TailContext<'static> {
        TailContext {
            per_second: vec![],
            intervals: None,
            wakeups_per_s: None,
        }
    }

    /// `n` samples at the evenly spaced quantiles of 10 µs + an exponential of mean 100 µs.
    fn spread(n: u64) -> Histogram {
        let mut h = Histogram::new(Layout::default());
        for i in 0..n {
            let u = (i as f64 + 0.5) / n as f64;
            h.record(10_000 + (-(1.0 - u).ln() * 100_000.0) as u64);
        }
        h
    }

    #[test]
    fn parses_percentiles_and_tails_and_refuses_the_rest() {
        let u = until("p99.99:10%");
        assert_eq!(u.precision, 0.1);
        assert_eq!(u.name(), "p99.99");
        assert_eq!(until("p99:5%").spec(), "p99:5%");
        assert_eq!(until("p99.9:2.5%").spec(), "p99.9:2.5%");
        assert_eq!(
            u.statistic,
            Statistic::Percentile {
                label: "p99.99".into(),
                q: Quantile {
                    num: 9999,
                    den: 10000
                }
            }
        );
        let t = until("tail:1e-9:20%");
        assert_eq!(t.statistic, Statistic::Tail(1e-9));
        assert!(t.is_tail());
        assert_eq!(t.name(), "tail:1e-9");
        for bad in [
            "p99.99",
            "p99.99:10",
            "p99.99:0%",
            "p99.99:100%",
            "x:10%",
            "p100:10%",
            "tail:0.5:10%",
            "tail:x:10%",
            "p99:nan%",
            "",
        ] {
            let e = bad.parse::<Until>().unwrap_err();
            assert!(e.contains("is not an --until"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_percentile_narrows_as_samples_come_and_reaches_the_precision() {
        let u = until("p99:5%");
        let few = u.check(&spread(50), &ctx());
        assert!(few.half_width.is_none(), "{few:?}");
        assert!(few.reason.as_deref().unwrap().contains("too few samples"));
        assert!(!u.reached(&few));
        let widths: Vec<f64> = [1_000, 10_000, 100_000, 1_000_000]
            .iter()
            .map(|&n| u.check(&spread(n), &ctx()).half_width.unwrap())
            .collect();
        assert!(widths.windows(2).all(|w| w[1] < w[0]), "{widths:?}");
        let c = u.check(&spread(1_000_000), &ctx());
        assert!(u.reached(&c), "{c:?}");
        // The interval holds the estimate.
        assert!(c.lo_ns.unwrap() <= c.estimate_ns.unwrap());
        assert!(c.estimate_ns.unwrap() <= c.hi_ns.unwrap());
        assert!(!u.reached(&u.check(&spread(1_000), &ctx())));
    }

    #[test]
    fn the_bucket_width_bounds_the_precision() {
        // Samples of 2.2 and 2.9 µs: p99 lies in the [2, 3) µs bucket (clamped to the
        // maximum), ±15 % at best, however many samples.
        let mut h = Histogram::new(Layout::default());
        for i in 0..1_000_000 {
            h.record(if i % 2 == 0 { 2_200 } else { 2_900 });
        }
        let u = until("p99:10%");
        let c = u.check(&h, &ctx());
        assert_eq!((c.lo_ns, c.hi_ns), (Some(2_000), Some(2_900)));
        assert!(!u.reached(&c), "{c:?}");
        assert!(until("p99:20%").reached(&c));
    }

    #[test]
    fn no_samples_and_an_unfittable_tail_say_why() {
        let empty = Histogram::new(Layout::default());
        let c = until("p99:10%").check(&empty, &ctx());
        assert_eq!(c.reason.as_deref(), Some("no samples yet"));
        let t = until("tail:1e-9:10%").check(&spread(100), &ctx());
        assert!(t.half_width.is_none());
        assert!(t.reason.unwrap().contains("too few samples"));
    }
}
