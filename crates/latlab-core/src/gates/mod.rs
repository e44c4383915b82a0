//! Regression gates: `compare A B --fail-if EXPR`, each run after the first checked against
//! the first.
//!
//! EXPR is `STAT>RULE[@L%]` with STAT one of [`STATS`] (`tail:P` is the tail estimate at
//! exceedance probability P per wake-up, e.g. `tail:1e-9`) and RULE one of
//! - `FACTORx` — B/A above the factor fails (`p99.9>1.2x`);
//! - `+N%` — B more than N % above A fails (`p99>+10%`);
//! - `VALUE` — B above the value fails: a latency with a unit for the latency statistics
//!   (`max>500us`; a bare number is µs, as everywhere in latlab), a count for `missed`.
//!
//! Without `@L%` (or with `@50%`) the rule is judged on the values themselves, as it always
//! was. With `@95%` it is judged on the 95 % interval of what it compares (the ratio's
//! interval from the comparison's block bootstrap, a run's own interval for a value, the
//! profile-likelihood interval of a tail estimate): the check fails only when the interval
//! lies wholly above the limit, so noise alone never fails it. Statistics without an interval
//! (`min`, `mean`, `max`, `missed`) are judged on their values, with a note.
//!
//! A ratio against a baseline of 0 is infinite when B > 0 (any rise from nothing fails a factor
//! or percentage rule) and 1 when both are 0. A value that is unknown (a percentile among
//! imported samples above the histogram limit) cannot be shown to be within the rule: the
//! check fails, with a note saying why.

use std::fmt;

use serde::Serialize;

use crate::compare::{ratio_interval, value_interval, Comparison, MIN_TAIL};
use crate::units::{parse_latency, Human};

mod junit;
pub mod limit;

pub use junit::{junit, xml_escape};

/// The statistics a gate can name, in the order the help lists them.
pub const STATS: [&str; 10] = [
    "min", "mean", "median", "p99", "p99.9", "p99.99", "p99.999", "max", "missed", "tail:P",
];

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    Min,
    Mean,
    Median,
    P99,
    P999,
    P9999,
    P99999,
    Max,
    Missed,
    /// The tail estimate at this exceedance probability per wake-up.
    Tail(f64),
}

/// A probability written as a decimal or with an exponent (`1e-9`, `0.000001`), in (0, 0.5).
fn probability(s: &str) -> Option<f64> {
    if s.is_empty()
        || !s
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
    {
        return None;
    }
    s.parse::<f64>()
        .ok()
        .filter(|p| p.is_finite() && *p > 0.0 && *p < 0.5)
}

impl Stat {
    pub fn name(self) -> String {
        match self {
            Stat::Tail(p) => format!("tail:{p:e}"),
            s => STATS[s.index()].to_string(),
        }
    }

    fn index(self) -> usize {
        match self {
            Stat::Min => 0,
            Stat::Mean => 1,
            Stat::Median => 2,
            Stat::P99 => 3,
            Stat::P999 => 4,
            Stat::P9999 => 5,
            Stat::P99999 => 6,
            Stat::Max => 7,
            Stat::Missed => 8,
            Stat::Tail(_) => 9,
        }
    }

    /// The row of [`crate::stats::LADDER`] (and of the comparison's ladder) of a percentile.
    fn ladder_row(self) -> Option<usize> {
        Some(match self {
            Stat::Median => 0,
            Stat::P99 => 2,
            Stat::P999 => 3,
            Stat::P9999 => 4,
            Stat::P99999 => 5,
            _ => return None,
        })
    }

    fn parse(s: &str) -> Option<Stat> {
        if let Some(p) = s.strip_prefix("tail:") {
            return probability(p).map(Stat::Tail);
        }
        Some(match s {
            "min" => Stat::Min,
            "mean" => Stat::Mean,
            "median" => Stat::Median,
            "p99" => Stat::P99,
            "p99.9" => Stat::P999,
            "p99.99" => Stat::P9999,
            "p99.999" => Stat::P99999,
            "max" => Stat::Max,
            "missed" => Stat::Missed,
            _ => return None,
        })
    }

    /// The comparison ladder row that holds this percentile (for its sample count).
    fn ladder_label(self) -> Option<&'static str> {
        Some(match self {
            Stat::Median => "p50",
            Stat::P99 => "p99",
            Stat::P999 => "p99.9",
            Stat::P9999 => "p99.99",
            Stat::P99999 => "p99.999",
            _ => return None,
        })
    }

    /// The run's value: ns for latencies, periods for `missed`.
    fn value(self, s: &crate::stats::Stats) -> Option<u64> {
        match self {
            Stat::Min => s.min_ns,
            Stat::Mean => s.mean_ns,
            Stat::Median => s.median_ns,
            Stat::P99 => s.p99_ns,
            Stat::P999 => s.p999_ns,
            Stat::P9999 => s.p9999_ns,
            Stat::P99999 => s.p99999_ns,
            Stat::Max => s.max_ns,
            Stat::Missed => Some(s.missed_periods),
            Stat::Tail(_) => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// B/A above this fails.
    Factor(f64),
    /// B more than this many % above A fails.
    Percent(f64),
    /// B above this fails (ns, or periods for `missed`).
    Above(u64),
}

/// One parsed `--fail-if`.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// The expression as given.
    pub expr: String,
    pub stat: Stat,
    pub rule: Rule,
    /// `@L%`: judged on the interval at this confidence (`None`, or 0.5: on the values).
    pub level: Option<f64>,
}

/// A malformed `--fail-if`: what is wrong, naming the bad part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateError(pub String);

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GateError {}

const FORMS: &str =
    "expected STAT>FACTORx (p99.9>1.2x), STAT>+N% (p99>+10%) or STAT>VALUE (max>500us, missed>0, tail:1e-9>100us), each optionally @L% (p99.9>1.2x@95%)";

fn finite_number(s: &str) -> Option<f64> {
    // Plain decimals only: no `inf`, `nan` or exponents.
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

impl std::str::FromStr for Gate {
    type Err = GateError;

    fn from_str(expr: &str) -> Result<Gate, GateError> {
        let shown = crate::escape::escape(expr);
        let err = |what: String| GateError(format!("'{shown}': {what}"));
        let (body, level) = match expr.rsplit_once('@') {
            Some((body, l)) => {
                let l = l.trim();
                let v = l
                    .strip_suffix('%')
                    .and_then(finite_number)
                    .filter(|v| (50.0..100.0).contains(v))
                    .ok_or_else(|| {
                        err(format!(
                            "'@{}' is not a confidence level: write @N% with N from 50 to below 100 (@95%)",
                            crate::escape::escape(l)
                        ))
                    })?;
                (body, Some(v / 100.0))
            }
            None => (expr, None),
        };
        let Some((stat_s, rule_s)) = body.split_once('>') else {
            return Err(err(format!("no '>' ({FORMS})")));
        };
        let (stat_s, rule_s) = (stat_s.trim(), rule_s.trim());
        let stat = Stat::parse(stat_s).ok_or_else(|| {
            if stat_s.starts_with("tail:") {
                err(format!(
                    "'{}' is not a tail statistic: tail:P with P a probability per wake-up below 0.5 (tail:1e-9)",
                    crate::escape::escape(stat_s)
                ))
            } else {
                err(format!(
                    "unknown statistic '{}' (one of {})",
                    crate::escape::escape(stat_s),
                    STATS.join(", ")
                ))
            }
        })?;
        let bad_rule = |why: &str| {
            err(format!(
                "'{}' is not a rule: {why} ({FORMS})",
                crate::escape::escape(rule_s)
            ))
        };
        let rule = if let Some(f) = rule_s.strip_suffix('x') {
            let v = finite_number(f).ok_or_else(|| bad_rule("the factor is not a number"))?;
            if v <= 0.0 {
                return Err(bad_rule("the factor must be above 0"));
            }
            Rule::Factor(v)
        } else if let Some(p) = rule_s.strip_suffix('%') {
            let Some(n) = p.strip_prefix('+') else {
                return Err(bad_rule("a change is written with its sign, +N%"));
            };
            Rule::Percent(finite_number(n).ok_or_else(|| bad_rule("N is not a number"))?)
        } else if stat == Stat::Missed {
            Rule::Above(
                rule_s
                    .parse::<u64>()
                    .map_err(|_| bad_rule("missed periods are a whole count"))?,
            )
        } else {
            Rule::Above(parse_latency(rule_s).map_err(|e| bad_rule(&e.to_string()))?)
        };
        Ok(Gate {
            expr: expr.to_string(),
            stat,
            rule,
            level,
        })
    }
}

/// The outcome of one gate on one run against the baseline. Serializes as an element of
/// `checks` in `compare --format json` (keys: docs/contract.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// The `--fail-if` expression as given.
    pub expr: String,
    pub stat: String,
    /// The rule, normalized: `> 1.2x`, `> +10%`, `> 500 µs`, `> 0` (and ` @95%`).
    pub rule: String,
    /// Baseline and checked run labels; `run_index` is the checked run's place among the
    /// compared runs (0 is the baseline, so ≥ 1).
    pub baseline: String,
    pub run: String,
    pub run_index: usize,
    /// `ns` for latencies, `periods` for `missed`.
    pub unit: &'static str,
    /// The two values (`null`: unknown, among samples above the histogram limit).
    pub a: Option<u64>,
    pub b: Option<u64>,
    /// What the rule compares: B/A (factor), the change in % (percentage) or B (value);
    /// `null` when it cannot be computed (an unknown value, or a rise from a baseline of 0:
    /// then `passed` is false and `note` says why).
    pub observed: Option<f64>,
    /// `@L%`: the confidence level the check was judged at (`null`: on the values).
    pub level: Option<f64>,
    /// The interval of `observed` at `level`, in its unit (`observed_hi` `null`: unbounded);
    /// both `null` without `@L%` or when the statistic has none.
    pub observed_lo: Option<f64>,
    pub observed_hi: Option<f64>,
    pub passed: bool,
    /// A compared percentile rests on fewer than MIN_TAIL samples above it in A or B.
    pub too_few_samples: bool,
    /// A percentile whose 95 % interval in B overlaps A's (the comparison's "within noise").
    pub within_noise: bool,
    /// Why a value could not be judged, or which run is too short.
    pub note: Option<String>,
}

impl Check {
    /// A value in this check's unit, for tables.
    pub fn show(&self, v: Option<u64>) -> String {
        match (v, self.unit) {
            (None, _) => "unknown".into(),
            (Some(v), "ns") => Human(v).to_string(),
            (Some(v), _) => v.to_string(),
        }
    }

    /// What was observed, in the rule's terms (`1.35x`, `+35.0%`, `612 µs`), with its
    /// interval when judged at a level (`1.35x [1.10x–1.62x @95%]`).
    pub fn show_observed(&self) -> String {
        let one = |v: f64| match self.rule_kind() {
            'x' => format!("{v:.3}x"),
            '%' => format!("{v:+.1}%"),
            _ if v.is_finite() && v >= 0.0 => self.show(Some(v.round() as u64)),
            _ => "∞".into(),
        };
        let point = match self.observed {
            None if self.b.is_some() && self.a == Some(0) => "from 0".into(),
            None => "-".into(),
            Some(v) => one(v),
        };
        match (self.observed_lo, self.level) {
            (Some(lo), Some(l)) => format!(
                "{point} [{}–{} @{}%]",
                one(lo),
                self.observed_hi.map_or("∞".into(), one),
                l * 100.0
            ),
            _ => point,
        }
    }

    fn rule_kind(&self) -> char {
        let r = self.rule.split(" @").next().unwrap_or("");
        if r.ends_with('x') {
            'x'
        } else if r.ends_with('%') {
            '%'
        } else {
            'v'
        }
    }
}

fn rule_text(g: &Gate) -> String {
    let r = match g.rule {
        Rule::Factor(f) => format!("> {f}x"),
        Rule::Percent(p) => format!("> +{p}%"),
        Rule::Above(v) if g.stat == Stat::Missed => format!("> {v}"),
        Rule::Above(v) => format!("> {}", Human(v)),
    };
    match g.level {
        Some(l) => format!("{r} @{}%", l * 100.0),
        None => r,
    }
}

/// A tail estimate of run `i` at `p`: (value, interval at `level`) or why there is none.
fn tail_value(c: &Comparison, i: usize, p: f64, level: f64) -> Result<(u64, (f64, f64)), String> {
    let t = c
        .tails
        .get(i)
        .and_then(|t| t.as_ref())
        .ok_or_else(|| "the run has no samples".to_string())?;
    let (v, lo, hi) = t.at(p, level)?;
    Ok((
        v,
        (
            lo.map_or(0.0, |x| x as f64),
            hi.map_or(f64::INFINITY, |x| x as f64),
        ),
    ))
}

/// Every gate on every run after the first, against the first. `c` is the comparison of the
/// same runs (its ladder says which percentiles rest on too few samples; its noise and tail
/// estimates give the intervals of `@L%` gates).
pub fn evaluate(c: &Comparison, gates: &[Gate]) -> Vec<Check> {
    let mut out = Vec::new();
    let Some(base) = c.runs.first() else {
        return out;
    };
    for (i, run) in c.runs.iter().enumerate().skip(1) {
        for g in gates {
            let level = g.level.filter(|l| *l > 0.5);
            let mut notes: Vec<String> = Vec::new();
            let (a, b, tails) = match g.stat {
                Stat::Tail(p) => {
                    let l = level.unwrap_or(0.95);
                    let ta = tail_value(c, 0, p, l);
                    let tb = tail_value(c, i, p, l);
                    if let Err(e) = &tb {
                        notes.push(format!("no tail estimate for '{}': {e}", run.label));
                    }
                    if !matches!(g.rule, Rule::Above(_)) {
                        if let Err(e) = &ta {
                            notes.push(format!("no tail estimate for '{}': {e}", base.label));
                        }
                    }
                    let (a, ia) = ta.map_or((None, None), |(v, i)| (Some(v), Some(i)));
                    let (b, ib) = tb.map_or((None, None), |(v, i)| (Some(v), Some(i)));
                    (a, b, Some((ia, ib)))
                }
                s => (s.value(&base.stats), s.value(&run.stats), None),
            };
            let row = g
                .stat
                .ladder_label()
                .and_then(|l| c.ladder.iter().find(|r| r.label == l));
            let within_noise = row
                .and_then(|r| r.cells.get(i))
                .is_some_and(|x| x.within_noise);
            let short: Vec<&str> = row
                .map(|row| {
                    [(0, base), (i, run)]
                        .into_iter()
                        .filter(|(k, r)| {
                            row.cells.get(*k).is_some_and(|x| x.too_short) && r.stats.samples > 0
                        })
                        .map(|(_, r)| r.label.as_str())
                        .collect()
                })
                .unwrap_or_default();
            let ratio = match (a, b) {
                (Some(0), Some(0)) => Some(1.0),
                (Some(0), Some(_)) => None,
                (Some(a), Some(b)) => Some(b as f64 / a as f64),
                _ => None,
            };
            let (observed, point_passed, limit) = match g.rule {
                Rule::Above(v) => (b.map(|b| b as f64), b.is_some_and(|b| b <= v), v as f64),
                Rule::Factor(f) => (ratio, ratio.is_some_and(|r| r <= f), f),
                Rule::Percent(p) => (
                    ratio.map(|r| (r - 1.0) * 100.0),
                    ratio.is_some_and(|r| (r - 1.0) * 100.0 <= p),
                    p,
                ),
            };
            // The interval of what the rule compares, at the gate's level.
            let interval = level.and_then(|l| rule_interval(c, g, i, l, tails));
            let unknown = match g.rule {
                // An absolute rule does not read A.
                Rule::Above(_) => b.is_none(),
                _ => a.is_none() || b.is_none(),
            };
            let passed = match (interval, level) {
                (Some((lo, _)), Some(_)) if observed.is_some() && !unknown => lo <= limit,
                _ => point_passed,
            };
            if let (Some(l), None) = (level, interval) {
                if !unknown {
                    notes.push(format!(
                        "no {}% interval for {}: judged on its value",
                        l * 100.0,
                        g.stat.name()
                    ));
                }
            }
            if unknown && !matches!(g.stat, Stat::Tail(_)) {
                notes.insert(0, "a value is unknown (among samples above the histogram limit): the check cannot pass".to_string());
            } else if unknown {
                notes.push("the check cannot pass without the estimate".to_string());
            } else if observed.is_none() {
                notes.insert(
                    0,
                    "the baseline is 0 and the run is not: an infinite rise".to_string(),
                );
            }
            if passed && !point_passed && interval.is_some() {
                notes.push(format!(
                    "the value exceeds the rule but its {}% interval reaches below the limit: not a proven regression",
                    level.unwrap_or(0.95) * 100.0
                ));
            }
            if within_noise && !passed {
                notes.push(
                    "the difference is within noise (the ratio's 95 % interval holds 1)"
                        .to_string(),
                );
            }
            if !short.is_empty() {
                let need = needed(g.stat);
                notes.push(format!(
                    "too few samples for {}: {} (fewer than {MIN_TAIL} above it; needs ≥ {need} samples)",
                    g.stat.name(),
                    short.join(", ")
                ));
            }
            out.push(Check {
                expr: g.expr.clone(),
                stat: g.stat.name(),
                rule: rule_text(g),
                baseline: base.label.clone(),
                run: run.label.clone(),
                run_index: i,
                unit: if g.stat == Stat::Missed {
                    "periods"
                } else {
                    "ns"
                },
                a,
                b,
                observed,
                level,
                observed_lo: interval.map(|x| x.0),
                observed_hi: interval.and_then(|x| x.1.is_finite().then_some(x.1)),
                passed,
                too_few_samples: !short.is_empty(),
                within_noise,
                note: (!notes.is_empty()).then(|| notes.join("; ")),
            });
        }
    }
    out
}

/// The tail estimates' intervals of the baseline and of a run (None: no estimate).
type TailIntervals = (Option<(f64, f64)>, Option<(f64, f64)>);
/// The interval of what gate `g`'s rule compares for run `i`, at level `l`: from the noise
/// of the comparison's ladder, or for a tail gate from the estimates' intervals (`tails`: the
/// baseline's and run `i`'s).
fn rule_interval(
    c: &Comparison,
    g: &Gate,
    i: usize,
    l: f64,
    tails: Option<TailIntervals>,
) -> Option<(f64, f64)> {
    let ratio_iv = match (g.stat.ladder_row(), tails) {
        (Some(r), _) => ratio_interval(&c.noise, i, r, l),
        (None, Some((Some(ia), Some(ib)))) if ia.0 > 0.0 => Some((ib.0 / ia.1, ib.1 / ia.0)),
        _ => None,
    };
    match g.rule {
        Rule::Above(_) => match (g.stat.ladder_row(), tails) {
            (Some(r), _) => value_interval(&c.noise, i, r, l),
            (None, Some((_, ib))) => ib,
            _ => None,
        },
        Rule::Factor(_) => ratio_iv,
        Rule::Percent(_) => ratio_iv.map(|(lo, hi)| ((lo - 1.0) * 100.0, (hi - 1.0) * 100.0)),
    }
}

fn needed(s: Stat) -> u64 {
    use crate::hist::Quantile;
    let q = match s {
        Stat::Median => Quantile::P50,
        Stat::P99 => Quantile::P99,
        Stat::P999 => Quantile::P999,
        Stat::P9999 => Quantile::P9999,
        Stat::P99999 => Quantile::P99999,
        _ => return 0,
    };
    MIN_TAIL * q.den / (q.den - q.num).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(s: &str) -> Result<Gate, GateError> {
        s.parse()
    }

    #[test]
    fn each_form_parses() {
        assert_eq!(g("p99.9>1.2x").unwrap().rule, Rule::Factor(1.2));
        assert_eq!(g("p99.9>1.2x").unwrap().stat, Stat::P999);
        assert_eq!(g("p99>+10%").unwrap().rule, Rule::Percent(10.0));
        assert_eq!(g("max>500us").unwrap().rule, Rule::Above(500_000));
        assert_eq!(g("max>1.5ms").unwrap().rule, Rule::Above(1_500_000));
        assert_eq!(g("mean>40").unwrap().rule, Rule::Above(40_000));
        assert_eq!(g("missed>0").unwrap().rule, Rule::Above(0));
        assert_eq!(g("missed>2x").unwrap().rule, Rule::Factor(2.0));
        assert_eq!(g(" median > 1x ").unwrap().stat, Stat::Median);
        for s in &STATS[..9] {
            assert_eq!(g(&format!("{s}>1x")).unwrap().stat.name(), *s);
        }
        assert_eq!(g("p99.9>1.2x").unwrap().level, None);
        let t = g("tail:1e-9>100us@95%").unwrap();
        assert_eq!(t.stat, Stat::Tail(1e-9));
        assert_eq!(t.rule, Rule::Above(100_000));
        assert_eq!(t.level, Some(0.95));
        assert_eq!(t.stat.name(), "tail:1e-9");
        assert_eq!(g("p99.9>1.2x@50%").unwrap().level, Some(0.5));
        assert_eq!(g("tail:0.000001>2x").unwrap().stat, Stat::Tail(1e-6));
    }

    #[test]
    fn malformed_names_the_bad_part() {
        let e = g("p99.8>1.2x").unwrap_err().0;
        assert!(e.contains("unknown statistic 'p99.8'"), "{e}");
        let e = g("p99").unwrap_err().0;
        assert!(e.contains("no '>'"), "{e}");
        let e = g("max>fastx").unwrap_err().0;
        assert!(e.contains("'fastx' is not a rule"), "{e}");
        let e = g("max>10%").unwrap_err().0;
        assert!(e.contains("+N%"), "{e}");
        let e = g("max>500parsecs").unwrap_err().0;
        assert!(e.contains("'500parsecs' is not a rule"), "{e}");
        let e = g("missed>3ms").unwrap_err().0;
        assert!(e.contains("whole count"), "{e}");
        let e = g("max>0x").unwrap_err().0;
        assert!(e.contains("above 0"), "{e}");
        let e = g("max>infx").unwrap_err().0;
        assert!(e.contains("not a number"), "{e}");
        let e = g("p99>1.2x@95").unwrap_err().0;
        assert!(e.contains("not a confidence level"), "{e}");
        let e = g("p99>1.2x@100%").unwrap_err().0;
        assert!(e.contains("not a confidence level"), "{e}");
        let e = g("tail:2>1x").unwrap_err().0;
        assert!(e.contains("not a tail statistic"), "{e}");
        let e = g("tail:nan>1x").unwrap_err().0;
        assert!(e.contains("not a tail statistic"), "{e}");
        // Untrusted text is escaped in the message.
        let e = g("\x1b[2Jmax>1x").unwrap_err().0;
        assert!(!e.contains('\x1b'), "{e}");
    }

    /// A run of ten minutes of 10 000 samples (10–20 µs), with `tail[m]` samples of `at` ns
    /// in minute m, and its per-minute histograms.
    fn minutes_run(label: &str, tail: [u64; 10], at: u64) -> crate::model::RunModel {
        use crate::hist::{Histogram, Layout};
        use crate::record::*;
        let l = Layout::default();
        let mut total = Histogram::new(l);
        let mut intervals = Vec::new();
        for (m, &t) in tail.iter().enumerate() {
            let mut h = Histogram::new(l);
            for i in 0..10_000u64 {
                h.record(10_000 + (i * 7919 + m as u64) % 10_000);
            }
            for _ in 0..t {
                h.record(at);
            }
            total.merge(&h).unwrap();
            intervals.push(
                h.counts()
                    .iter()
                    .enumerate()
                    .filter(|(_, &c)| c > 0)
                    .map(|(i, &c)| [i as u64, c])
                    .collect(),
            );
        }
        let mut r = RunRecord::new(
            label,
            Source::Latlab,
            RunConfig {
                backend: "sim".into(),
                interval_ns: Some(1_000_000),
                measured_ns: Some(600_000_000_000),
                ..RunConfig::default()
            },
            vec![CpuRecord::new(0, total.to_record())],
        );
        r.complete = true;
        r.intervals = Some(crate::intervals::IntervalHistograms {
            interval_ns: 60_000_000_000,
            intervals,
        });
        crate::model::RunModel::new(r).unwrap()
    }

    fn check(runs: &[crate::model::RunModel], expr: &str) -> Check {
        let c = crate::compare::compare(runs);
        evaluate(&c, &[g(expr).unwrap()]).remove(0)
    }

    /// p99.9 1.3× the baseline's, but all of both runs' tails came in one minute: the point
    /// rule fails, the 95 % rule sees an interval reaching far below 1.2 and passes.
    #[test]
    fn a_noisy_rise_fails_on_the_value_but_not_at_95_percent() {
        let burst = [0, 0, 0, 0, 0, 0, 0, 0, 0, 200];
        let a = minutes_run("a", burst, 100_000);
        let b = minutes_run("b", burst, 130_000);
        let point = check(&[a.clone(), b.clone()], "p99.9>1.2x");
        assert!(!point.passed, "{point:?}");
        assert_eq!(point.level, None);
        assert_eq!(point.observed_lo, None);
        let at95 = check(&[a, b], "p99.9>1.2x@95%");
        assert!(at95.passed, "{at95:?}");
        assert_eq!(at95.level, Some(0.95));
        let (lo, hi) = (at95.observed_lo.unwrap(), at95.observed_hi.unwrap());
        assert!(lo < 1.2 && hi > 1.3, "{lo}..{hi}");
        assert!(at95
            .note
            .as_deref()
            .unwrap()
            .contains("not a proven regression"));
        assert!(
            at95.show_observed().contains("@95%"),
            "{}",
            at95.show_observed()
        );
        let x = junit(std::slice::from_ref(&at95));
        assert!(x.contains("@95%"), "{x}");
    }

    /// Doubled in every minute: the interval lies wholly above 1.2, and the 95 % rule fails.
    #[test]
    fn a_steady_rise_fails_at_95_percent() {
        let steady = [20; 10];
        let a = minutes_run("a", steady, 100_000);
        let b = minutes_run("b", steady, 200_000);
        let at95 = check(&[a.clone(), b.clone()], "p99.9>1.2x@95%");
        assert!(!at95.passed, "{at95:?}");
        assert!(at95.observed_lo.unwrap() > 1.2);
        // A value rule at 95 %: B's own interval, in ns.
        let v = check(&[a.clone(), b.clone()], "p99.9>150us@95%");
        assert!(!v.passed && v.observed_lo.unwrap() > 150_000.0, "{v:?}");
        let v = check(&[a.clone(), b.clone()], "p99.9>250us@95%");
        assert!(v.passed, "{v:?}");
        // No interval for max: judged on its value, said in the note.
        let m = check(&[a.clone(), b.clone()], "max>1.5x@95%");
        assert!(!m.passed && m.note.as_deref().unwrap().contains("judged on its value"));
        // The comparison's verdict agrees.
        let c = crate::compare::compare(&[a, b]);
        assert_eq!(c.ladder[3].cells[1].verdict, Some("worse"));
    }

    /// A tail gate on runs whose tails cannot be estimated (two values only): it fails, and
    /// says why.
    #[test]
    fn a_tail_gate_without_an_estimate_fails_with_the_reason() {
        let a = minutes_run("a", [20; 10], 100_000);
        let t = check(&[a.clone(), a], "tail:1e-9>10ms");
        assert!(!t.passed, "{t:?}");
        assert_eq!(t.stat, "tail:1e-9");
        assert!(
            t.note.as_deref().unwrap().contains("no tail estimate"),
            "{t:?}"
        );
    }

    #[test]
    fn xml_escape_leaves_no_markup() {
        let s = xml_escape("a<b>&\"'\x1b\u{0}c\td");
        assert_eq!(s, "a&lt;b&gt;&amp;&quot;&apos;\\u{1b}\\u{0}c&#9;d");
    }
}
