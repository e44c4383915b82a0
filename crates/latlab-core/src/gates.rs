//! Regression gates: `compare A B --fail-if EXPR`, each run after the first checked against
//! the first.
//!
//! EXPR is `STAT>RULE` with STAT one of [`STATS`] and RULE one of
//! - `FACTORx` — B/A above the factor fails (`p99.9>1.2x`);
//! - `+N%` — B more than N % above A fails (`p99>+10%`);
//! - `VALUE` — B above the value fails: a latency with a unit for the latency statistics
//!   (`max>500us`; a bare number is µs, as everywhere in latlab), a count for `missed`.
//!
//! A ratio against a baseline of 0 is infinite when B > 0 (any rise from nothing fails a factor
//! or percentage rule) and 1 when both are 0. A value that is unknown (a percentile among
//! imported samples above the histogram limit) cannot be shown to be within the rule: the
//! check fails, with a note saying why.

use std::fmt;

use serde::Serialize;

use crate::compare::{Comparison, MIN_TAIL};
use crate::units::{parse_latency, Human};

/// The statistics a gate can name, in the order the help lists them.
pub const STATS: [&str; 9] = [
    "min", "mean", "median", "p99", "p99.9", "p99.99", "p99.999", "max", "missed",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

impl Stat {
    pub fn name(self) -> &'static str {
        STATS[self as usize]
    }

    fn parse(s: &str) -> Option<Stat> {
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
    "expected STAT>FACTORx (p99.9>1.2x), STAT>+N% (p99>+10%) or STAT>VALUE (max>500us, missed>0)";

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
        let Some((stat_s, rule_s)) = expr.split_once('>') else {
            return Err(err(format!("no '>' ({FORMS})")));
        };
        let (stat_s, rule_s) = (stat_s.trim(), rule_s.trim());
        let stat = Stat::parse(stat_s).ok_or_else(|| {
            err(format!(
                "unknown statistic '{}' (one of {})",
                crate::escape::escape(stat_s),
                STATS.join(", ")
            ))
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
        })
    }
}

/// The outcome of one gate on one run against the baseline. Serializes as an element of
/// `checks` in `compare --format json` (keys: docs/contract.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// The `--fail-if` expression as given.
    pub expr: String,
    pub stat: &'static str,
    /// The rule, normalized: `> 1.2x`, `> +10%`, `> 500 µs`, `> 0`.
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

    /// What was observed, in the rule's terms (`1.35x`, `+35.0%`, `612 µs`).
    pub fn show_observed(&self) -> String {
        match (self.observed, self.rule_kind()) {
            (None, _) if self.b.is_some() && self.a == Some(0) => "from 0".into(),
            (None, _) => "-".into(),
            (Some(r), 'x') => format!("{r:.3}x"),
            (Some(p), '%') => format!("{p:+.1}%"),
            (Some(v), _) => self.show(Some(v as u64)),
        }
    }

    fn rule_kind(&self) -> char {
        if self.rule.ends_with('x') {
            'x'
        } else if self.rule.ends_with('%') {
            '%'
        } else {
            'v'
        }
    }
}

fn rule_text(stat: Stat, r: Rule) -> String {
    match r {
        Rule::Factor(f) => format!("> {f}x"),
        Rule::Percent(p) => format!("> +{p}%"),
        Rule::Above(v) if stat == Stat::Missed => format!("> {v}"),
        Rule::Above(v) => format!("> {}", Human(v)),
    }
}

/// Every gate on every run after the first, against the first. `c` is the comparison of the
/// same runs (its ladder says which percentiles rest on too few samples).
pub fn evaluate(c: &Comparison, gates: &[Gate]) -> Vec<Check> {
    let mut out = Vec::new();
    let Some(base) = c.runs.first() else {
        return out;
    };
    for (i, run) in c.runs.iter().enumerate().skip(1) {
        for g in gates {
            let a = g.stat.value(&base.stats);
            let b = g.stat.value(&run.stats);
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
            let (observed, passed) = match g.rule {
                Rule::Above(v) => (b.map(|b| b as f64), b.is_some_and(|b| b <= v)),
                Rule::Factor(f) => (ratio, ratio.is_some_and(|r| r <= f)),
                Rule::Percent(p) => (
                    ratio.map(|r| (r - 1.0) * 100.0),
                    ratio.is_some_and(|r| (r - 1.0) * 100.0 <= p),
                ),
            };
            let unknown = match g.rule {
                // An absolute rule does not read A.
                Rule::Above(_) => b.is_none(),
                _ => a.is_none() || b.is_none(),
            };
            let mut note = if unknown {
                Some("a value is unknown (among samples above the histogram limit): the check cannot pass".to_string())
            } else if observed.is_none() {
                Some("the baseline is 0 and the run is not: an infinite rise".to_string())
            } else {
                None
            };
            if within_noise && !passed {
                let s = "the difference is within noise (the 95 % intervals overlap)";
                note = Some(match note {
                    Some(n) => format!("{n}; {s}"),
                    None => s.to_string(),
                });
            }
            if !short.is_empty() {
                let need = needed(g.stat);
                let s = format!(
                    "too few samples for {}: {} (fewer than {MIN_TAIL} above it; needs ≥ {need} samples)",
                    g.stat.name(),
                    short.join(", ")
                );
                note = Some(match note {
                    Some(n) => format!("{n}; {s}"),
                    None => s,
                });
            }
            out.push(Check {
                expr: g.expr.clone(),
                stat: g.stat.name(),
                rule: rule_text(g.stat, g.rule),
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
                passed,
                too_few_samples: !short.is_empty(),
                within_noise,
                note,
            });
        }
    }
    out
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

/// Text safe inside XML 1.0 content and attribute values: markup characters as entities,
/// characters XML 1.0 cannot hold (controls other than tab/newline/CR, U+FFFE/U+FFFF) as
/// visible `\u{…}` escapes.
pub fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' | '\n' | '\r' => {
                let _ = fmt::Write::write_fmt(&mut o, format_args!("&#{};", c as u32));
            }
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' || c == '\u{7f}' => {
                let _ = fmt::Write::write_fmt(&mut o, format_args!("\\u{{{:x}}}", c as u32));
            }
            c => o.push(c),
        }
    }
    o
}

/// The checks as one JUnit XML test suite: one test case per check, a `<failure>` for each
/// failed one (Jenkins, GitLab).
pub fn junit(checks: &[Check]) -> String {
    use std::fmt::Write;
    let failures = checks.iter().filter(|c| !c.passed).count();
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuite name=\"latlab compare\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        checks.len()
    );
    for c in checks {
        let detail = format!(
            "{}: {} (baseline {}) → {} ({}), rule {}: observed {}{}",
            c.stat,
            c.show(c.a),
            c.baseline,
            c.show(c.b),
            c.run,
            c.rule,
            c.show_observed(),
            c.note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
        );
        let _ = write!(
            o,
            "  <testcase classname=\"latlab.compare.{}\" name=\"{}\">",
            xml_escape(&c.run),
            xml_escape(&c.expr)
        );
        if c.passed {
            if c.too_few_samples {
                let _ = write!(o, "<system-out>{}</system-out>", xml_escape(&detail));
            }
        } else {
            let _ = write!(
                o,
                "<failure type=\"regression\" message=\"{}\">{}</failure>",
                xml_escape(&format!(
                    "{} {} {}: observed {}",
                    c.run,
                    c.stat,
                    c.rule,
                    c.show_observed()
                )),
                xml_escape(&detail)
            );
        }
        o.push_str("</testcase>\n");
    }
    o.push_str("</testsuite>\n");
    o
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
        for s in STATS {
            assert_eq!(g(&format!("{s}>1x")).unwrap().stat.name(), s);
        }
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
        // Untrusted text is escaped in the message.
        let e = g("\x1b[2Jmax>1x").unwrap_err().0;
        assert!(!e.contains('\x1b'), "{e}");
    }

    #[test]
    fn xml_escape_leaves_no_markup() {
        let s = xml_escape("a<b>&\"'\x1b\u{0}c\td");
        assert_eq!(s, "a&lt;b&gt;&amp;&quot;&apos;\\u{1b}\\u{0}c&#9;d");
    }
}
