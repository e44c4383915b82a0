//! The benchmarks' pure parts (`latlab bench …`): the statistics of their figures — medians
//! and the per-pair ratios of alternated runs with their spread —, the figures of a 1 µs
//! histogram as latlab and cyclictest print it ([`us_hist`]), rt-tests' summary line, and the
//! synthetic 24-hour run the report and database benchmarks time ([`day`]). What the
//! benchmarks run on the machine is in `latlab-engine`'s `bench`.

use std::time::Instant;

use serde::Serialize;

pub mod day;
pub mod us_hist;

/// The median of a set of figures and their range.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl std::fmt::Display for Spread {
    /// `1.030 (0.988–1.077)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.3} ({:.3}–{:.3})", self.median, self.min, self.max)
    }
}

/// The median of `v` (the mean of the two middle values for an even count); None when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    spread(v).map(|s| s.median)
}

/// The median and range of `v`; None when empty.
pub fn spread(v: &[f64]) -> Option<Spread> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: s[0],
        max: s[n - 1],
    })
}

/// The per-pair ratios of `N` figures of alternated runs (B / A of each pair), and their
/// medians with the per-pair spread.
#[derive(Debug, Clone)]
pub struct Ratios<const N: usize> {
    pairs: Vec<[f64; N]>,
}

impl<const N: usize> Default for Ratios<N> {
    fn default() -> Self {
        Ratios { pairs: Vec::new() }
    }
}

impl<const N: usize> Ratios<N> {
    /// One pair's ratios; returned, for the pair's own line.
    pub fn push(&mut self, r: [f64; N]) -> [f64; N] {
        self.pairs.push(r);
        r
    }

    /// The median and spread of each figure's ratios over the pairs; None before a pair.
    pub fn summary(&self) -> Option<[Spread; N]> {
        if self.pairs.is_empty() {
            return None;
        }
        Some(std::array::from_fn(|k| {
            let v: Vec<f64> = self.pairs.iter().map(|p| p[k]).collect();
            spread(&v).expect("at least one pair")
        }))
    }
}

/// The median wall time, in seconds, of `reps` calls of `f` (at least one).
pub fn median_secs<E>(reps: u32, mut f: impl FnMut() -> Result<(), E>) -> Result<f64, E> {
    let mut v = Vec::new();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64());
    }
    Ok(median(&v).expect("at least one repetition"))
}

/// min / avg / max of a run, in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MinAvgMax {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
}

/// The last `#1 -> #0, Min 3, Cur 5, Avg 5, Max 81` line of ptsematest/pmqtest (µs), in ns.
pub fn parse_rt_tests(text: &str) -> Option<MinAvgMax> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("->") && l.contains("Min"))?;
    let field = |name: &str| -> Option<f64> {
        let rest = &line[line.find(name)? + name.len()..];
        rest.split(',').next()?.trim().parse::<f64>().ok()
    };
    Some(MinAvgMax {
        min: field("Min")? * 1e3,
        avg: field("Avg")? * 1e3,
        max: field("Max")? * 1e3,
    })
}

/// One profile's row of `latlab bench loads`: its run's latency and its load's throughput.
#[derive(Debug, Default)]
pub struct LoadRow {
    pub profile: String,
    pub samples: u64,
    pub p99_ns: Option<u64>,
    pub p999_ns: Option<u64>,
    pub max_ns: Option<u64>,
    pub missed: u64,
    /// (part, ops, unit) of every part that reported a throughput.
    pub throughput: Vec<(String, f64, String)>,
    pub restarts: u64,
    /// Why the run failed (its last `latlab: error` line).
    pub error: Option<String>,
    pub run_dir: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread_of_ratios() {
        assert_eq!(spread(&[]), None);
        assert_eq!(median(&[]), None);
        let s = |median, min, max| Spread { median, min, max };
        assert_eq!(spread(&[1.2]), Some(s(1.2, 1.2, 1.2)));
        // Odd count: the middle one, whatever the order.
        assert_eq!(spread(&[1.3, 0.9, 1.1]), Some(s(1.1, 0.9, 1.3)));
        // Even count: the mean of the two middle ones (not the upper one, 1.10, nor the
        // lower one, 0.96).
        let m = spread(&[1.10, 0.90, 2.33, 0.96]).unwrap();
        assert!((m.median - 1.03).abs() < 1e-12, "{m:?}");
        assert_eq!((m.min, m.max), (0.90, 2.33));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(s(1.0304, 0.5, 2.0).to_string(), "1.030 (0.500–2.000)");
    }

    #[test]
    fn ratios_summarize_each_figure_over_the_pairs() {
        let mut r = Ratios::<3>::default();
        assert!(r.summary().is_none());
        assert_eq!(r.push([0.9, 1.0, 1.0]), [0.9, 1.0, 1.0]);
        r.push([1.0, 0.5, 1.1]);
        r.push([1.2, 2.0, 1.25]);
        let s = r.summary().unwrap();
        assert_eq!((s[0].median, s[0].min, s[0].max), (1.0, 0.9, 1.2));
        assert_eq!((s[1].median, s[1].min, s[1].max), (1.0, 0.5, 2.0));
        assert_eq!((s[2].median, s[2].min, s[2].max), (1.1, 1.0, 1.25));
    }

    #[test]
    fn median_secs_times_every_repetition() {
        let mut n = 0;
        let s = median_secs(4, || {
            n += 1;
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(n, 4);
        assert!(s >= 0.0);
        // At least once; an error ends it.
        let mut n = 0;
        assert!(median_secs(0, || {
            n += 1;
            Err("boom")
        })
        .is_err());
        assert_eq!(n, 1);
    }

    #[test]
    fn parses_pmqtest_quiet_output() {
        let text = "#0: ID25799, P95, CPU0, I1000; #1: ID25830, P95, CPU0, TO 0, Cycles 2635\n\
                    #1 -> #0, Min    3, Cur    5, Avg    5, Max   81\n";
        let f = parse_rt_tests(text).unwrap();
        assert_eq!((f.min, f.avg, f.max), (3000.0, 5000.0, 81000.0));
        assert!(parse_rt_tests("nothing").is_none());
    }
}
