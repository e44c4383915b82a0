//! `latlab report RUN --format lava` and `latlab compare … --format lava`: result lines
//! `NAME pass|fail|skip [VALUE UNITS]`, one per figure and verdict, for LAVA test definitions
//! (`contrib/lava/`: each line becomes `lava-test-case NAME --result R --measurement V
//! --units U`) and any CI that reads Linaro's result files.
//!
//! Per CPU (`cpuN-…`) and for all CPUs (`all-…`): `min-latency`, `avg-latency`,
//! `p99-latency`, `p99.9-latency`, `max-latency` (µs, three decimals; `skip` without a value
//! when there is none: no sample, or a percentile among imported samples above the histogram
//! limit) and `missed-periods` (periods). Measurements `pass`; verdicts: `max-latency-gate`
//! (`--max-latency`: pass or fail, the maximum judged as measurement), `until-STAT` (`--until`
//! converged or not) and, from `compare --fail-if`, `check-STAT-runN` (run N against the
//! first). Names hold only `[A-Za-z0-9_.-]` ([`safe_name`]): LAVA takes them as they are, and
//! a shell reads them without quoting surprises; nothing of the record's text (label, host)
//! goes into a line.

use std::fmt::Write as _;

use latlab_core::gates::Check;
use latlab_core::model::RunModel;
use latlab_core::stats::Stats;

/// One result line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub name: String,
    /// `pass`, `fail` or `skip`.
    pub result: &'static str,
    /// The measurement and its unit, when there is one.
    pub measurement: Option<(String, &'static str)>,
}

impl Line {
    fn text(&self) -> String {
        match &self.measurement {
            Some((v, u)) => format!("{} {} {v} {u}", self.name, self.result),
            None => format!("{} {}", self.name, self.result),
        }
    }
}

/// A name LAVA and a shell take as it is: every character outside `[A-Za-z0-9_.-]` becomes
/// `_`, at most 128 characters, never empty and never starting with `-` or `.`.
pub fn safe_name(s: &str) -> String {
    let mut n: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    if n.is_empty() || n.starts_with(['-', '.']) {
        n.insert(0, '_');
        n.truncate(128);
    }
    n
}

/// Nanoseconds as µs with three decimals.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

fn latency(name: String, v: Option<u64>) -> Line {
    match v {
        Some(ns) => Line {
            name,
            result: "pass",
            measurement: Some((us(ns), "us")),
        },
        None => Line {
            name,
            result: "skip",
            measurement: None,
        },
    }
}

fn figures(out: &mut Vec<Line>, who: &str, s: &Stats) {
    let stats = [
        ("min", s.min_ns),
        ("avg", s.mean_ns),
        ("p99", s.p99_ns),
        ("p99.9", s.p999_ns),
        ("max", s.max_ns),
    ];
    for (stat, v) in stats {
        out.push(latency(safe_name(&format!("{who}-{stat}-latency")), v));
    }
    out.push(Line {
        name: safe_name(&format!("{who}-missed-periods")),
        result: "pass",
        measurement: Some((s.missed_periods.to_string(), "periods")),
    });
}

/// The result lines of a run: each CPU's figures, all CPUs', then the verdicts.
pub fn lines(m: &RunModel) -> Vec<Line> {
    let mut out = Vec::new();
    for c in &m.cpus {
        figures(&mut out, &format!("cpu{}", c.cpu), &c.stats);
    }
    figures(&mut out, "all", &m.total);
    if let Some(v) = latlab_core::gates::limit::max_latency(&m.record) {
        out.push(Line {
            name: "max-latency-gate".into(),
            result: if v.passed { "pass" } else { "fail" },
            measurement: v.observed_ns.map(|ns| (us(ns), "us")),
        });
    }
    if let Some(u) = &m.record.until {
        out.push(Line {
            name: safe_name(&format!("until-{}", u.statistic)),
            result: if u.converged { "pass" } else { "fail" },
            measurement: None,
        });
    }
    out
}

fn join(lines: &[Line]) -> Vec<u8> {
    let mut s = String::new();
    for l in lines {
        let _ = writeln!(s, "{}", l.text());
    }
    s.into_bytes()
}

/// `report --format lava`.
pub fn render(m: &RunModel) -> Vec<u8> {
    join(&lines(m))
}

/// `compare --fail-if … --format lava`: one `check-STAT-runN` line per check, pass or fail,
/// with the value of B it judged (µs, or periods for `missed`).
pub fn checks(checks: &[Check]) -> Vec<u8> {
    let lines: Vec<Line> = checks
        .iter()
        .map(|c| Line {
            name: safe_name(&format!("check-{}-run{}", c.stat, c.run_index)),
            result: if c.passed { "pass" } else { "fail" },
            measurement: c.b.map(|b| {
                if c.unit == "ns" {
                    (us(b), "us")
                } else {
                    (b.to_string(), "periods")
                }
            }),
        })
        .collect();
    join(&lines)
}

#[cfg(test)]
mod tests {
    use latlab_core::hist::{Histogram, Layout};
    use latlab_core::record::*;

    use super::*;

    fn model(limit: Option<u64>) -> RunModel {
        let mut h = Histogram::new(Layout::default());
        for v in [1_500, 2_000, 250_000] {
            h.record(v);
        }
        let config = RunConfig {
            max_latency_ns: limit,
            ..RunConfig::default()
        };
        let mut r = RunRecord::new(
            "x; rm -rf / #",
            Source::Latlab,
            config,
            vec![CpuRecord::new(3, h.to_record())],
        );
        r.refresh().unwrap();
        RunModel::new(r).unwrap()
    }

    #[test]
    fn per_cpu_and_all_figures_then_the_gate() {
        let out = String::from_utf8(render(&model(Some(100_000)))).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 13, "{out}");
        assert_eq!(lines[0], "cpu3-min-latency pass 1.500 us");
        assert_eq!(lines[4], "cpu3-max-latency pass 250.000 us");
        assert_eq!(lines[5], "cpu3-missed-periods pass 0 periods");
        assert_eq!(lines[6], "all-min-latency pass 1.500 us");
        assert_eq!(lines[12], "max-latency-gate fail 250.000 us");
        assert!(!out.contains("rm"), "no text of the record in a line");
        for l in &lines {
            let name = l.split(' ').next().unwrap();
            assert_eq!(safe_name(name), name);
        }
        assert!(String::from_utf8(render(&model(None)))
            .unwrap()
            .lines()
            .all(|l| !l.contains("gate")));
    }

    #[test]
    fn names_are_safe() {
        assert_eq!(safe_name("check-tail:1e-9-run1"), "check-tail_1e-9-run1");
        assert_eq!(safe_name("a b;$(x)`\n"), "a_b___x___");
        assert_eq!(safe_name(""), "_");
        assert_eq!(safe_name("-rf"), "_-rf");
        assert_eq!(safe_name("é"), "_");
        assert_eq!(safe_name(&"x".repeat(300)).len(), 128);
    }
}
