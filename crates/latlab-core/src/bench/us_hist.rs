//! Figures from a 1 µs histogram in cyclictest's `-h` format, which latlab's `histogram.txt`
//! also is, read by one function so both tools' figures are made alike (`bench measure`):
//! min = the lower bound of the lowest non-empty bucket, mean = every sample at its bucket's
//! midpoint (overflows at the limit), p99 = the upper bound of the bucket holding the
//! ⌈0.99 n⌉-th sample (the limit if it is an overflow). cyclictest truncates each latency to
//! whole µs and latlab's buckets are [i µs, i+1 µs), so a sample lands in the same bucket in
//! both.

use crate::hist::Quantile;

/// Buckets of the histograms (1 µs each, to 10 ms): cyclictest `-h 10000`, latlab's
/// `--hist-limit 10ms`.
pub const BUCKETS: usize = 10_000;

/// One tool's figures for one run, in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub min: u64,
    pub mean: f64,
    pub p99: u64,
    pub max: u64,
    pub samples: u64,
    /// Samples beyond the histogram (10 ms): counted at 10 ms in the mean and p99.
    pub overflows: u64,
}

impl Figures {
    /// The ratios self / `other` of mean, p99 and min (infinite over a zero).
    pub fn ratios(&self, other: &Figures) -> [f64; 3] {
        let r = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
        [
            r(self.mean, other.mean),
            r(self.p99 as f64, other.p99 as f64),
            r(self.min as f64, other.min as f64),
        ]
    }
}

/// The figures of a `-h` histogram (one thread: `INDEX COUNT` lines, `# Max Latencies:` and
/// `# Histogram Overflows:`); an error when those lines are missing.
pub fn parse(text: &str) -> Result<Figures, String> {
    let mut counts = vec![0u64; BUCKETS];
    let (mut max, mut overflow) = (None, None);
    let field = |v: &str| {
        v.split_whitespace()
            .next()
            .and_then(|x| x.parse::<u64>().ok())
    };
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("# Max Latencies:") {
            max = field(v);
        } else if let Some(v) = line.strip_prefix("# Histogram Overflows:") {
            overflow = field(v);
        } else if !line.starts_with('#') {
            let mut it = line.split_whitespace();
            if let (Some(i), Some(c)) = (it.next(), it.next()) {
                if let (Ok(i), Ok(c)) = (i.parse::<usize>(), c.parse::<u64>()) {
                    if i < BUCKETS {
                        counts[i] += c;
                    }
                }
            }
        }
    }
    let (Some(max), Some(overflows)) = (max, overflow) else {
        return Err(
            "no '# Max Latencies' or '# Histogram Overflows' line: not a -h histogram".into(),
        );
    };
    Ok(figures(&counts, overflows, max * 1000))
}

/// The figures of [`parse`] from 1 µs bucket counts.
pub fn figures(counts: &[u64], overflows: u64, max: u64) -> Figures {
    let limit = counts.len() as u64 * 1000;
    let samples = counts.iter().sum::<u64>() + overflows;
    let min = counts
        .iter()
        .position(|&c| c > 0)
        .map_or(limit, |i| i as u64 * 1000);
    let sum: f64 = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| c as f64 * (i as f64 + 0.5) * 1000.0)
        .sum::<f64>()
        + overflows as f64 * limit as f64;
    let rank = Quantile::P99.rank(samples);
    let mut cum = 0;
    let p99 = counts
        .iter()
        .enumerate()
        .find_map(|(i, &c)| {
            cum += c;
            (cum >= rank).then_some((i as u64 + 1) * 1000)
        })
        .unwrap_or(limit);
    Figures {
        min,
        mean: if samples > 0 {
            sum / samples as f64
        } else {
            0.0
        },
        p99,
        max,
        samples,
        overflows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cyclictest_histogram_output() {
        // 5 samples: 1, 1, 1, 2 µs and one overflow (12 ms).
        let text = "# /dev/cpu_dma_latency set to 0us\n# Histogram\n000000 000000\n000001 000003\n000002 000001\n# Total: 000000004\n# Min Latencies: 00001\n# Avg Latencies: 00001\n# Max Latencies: 12000\n# Histogram Overflows: 00001\n";
        let f = parse(text).unwrap();
        assert_eq!(f.samples, 5);
        assert_eq!(f.overflows, 1);
        assert_eq!(f.min, 1000);
        assert_eq!(f.max, 12_000_000);
        // ⌈0.99 × 5⌉ = 5th sample: the overflow, counted at the 10 ms limit.
        assert_eq!(f.p99, 10_000_000);
        // (3 × 1.5 + 2.5 + 10 000) µs / 5
        assert!((f.mean - 2_001_400.0).abs() < 1e-6, "{}", f.mean);
        assert!(parse("garbage").is_err());
    }

    #[test]
    fn latlab_and_cyclictest_histograms_read_alike() {
        // latlab's histogram.txt header, same buckets: the same figures.
        let body = "# Histogram\n000007 000002\n000008 000095\n000030 000003\n# Total: 000000100\n# Min Latencies: 00007\n# Avg Latencies: 00008\n# Max Latencies: 00030\n# Histogram Overflows: 00000\n";
        let c = parse(&format!("# /dev/cpu_dma_latency set to 0us\n{body}")).unwrap();
        let l = parse(&format!("# latlab 6.18 (cyclictest -h format)\n{body}")).unwrap();
        assert_eq!(c, l);
        assert_eq!(l.min, 7_000);
        // 99th of 100 samples is in the 30 µs bucket: its upper bound.
        assert_eq!(l.p99, 31_000);
        assert!((l.mean - (2.0 * 7.5 + 95.0 * 8.5 + 3.0 * 30.5) * 10.0).abs() < 1e-6);
    }

    #[test]
    fn p99_is_the_upper_bound_of_its_bucket() {
        // 98 samples at 10 µs, 2 at 20 µs: ⌈99⌉-th sample is at 20 µs.
        let mut counts = vec![0u64; BUCKETS];
        counts[10] = 98;
        counts[20] = 2;
        assert_eq!(figures(&counts, 0, 20_000).p99, 21_000);
        counts[10] = 99;
        counts[20] = 1;
        assert_eq!(figures(&counts, 0, 20_000).p99, 11_000);
    }

    #[test]
    fn ratios_of_mean_p99_and_min() {
        let f = |min, mean, p99| Figures {
            min,
            mean,
            p99,
            max: 0,
            samples: 1,
            overflows: 0,
        };
        assert_eq!(
            f(8_000, 9.0, 20_000).ratios(&f(8_000, 10.0, 20_000)),
            [0.9, 1.0, 1.0]
        );
        assert_eq!(
            f(11_000, 10.0, 10_000).ratios(&f(10_000, 10.0, 20_000))[1],
            0.5
        );
        // Over a zero: infinite, not a division by zero.
        assert_eq!(f(1, 1.0, 1).ratios(&f(0, 0.0, 0)), [f64::INFINITY; 3]);
    }
}
