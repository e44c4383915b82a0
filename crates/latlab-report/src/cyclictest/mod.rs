//! `histogram.txt` in cyclictest's `-h` format, so existing scripts and gnuplot files keep
//! working: one row per 1 µs bucket (`%06d` index, then a `%06lu` count per thread, the first
//! after a space, the others after tabs), then the `# Total/Min/Avg/Max/Histogram Overflows`
//! trailer in µs. Samples at or above the histogram limit are cyclictest's overflows.
//! latlab does not record overflow cycle numbers, so that section is left out (as rt-tests
//! ≥ 2.7 may do).
//!
//! The trailer means what cyclictest's `print_hist` means: `# Total:` is the sum of the
//! bucket rows above it (overflows excluded), `# Histogram Overflows:` the samples at or above
//! the limit, and Min/Avg/Max cover every sample (overflows included).

use std::fmt::Write;

use latlab_core::model::RunModel;

pub mod front;

pub fn render(m: &RunModel) -> Vec<u8> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# latlab {} (cyclictest -h format)",
        crate::escape::escape(&m.record.label)
    );
    let _ = writeln!(out, "# Histogram");
    let Some(first) = m.cpus.first() else {
        return out.into_bytes();
    };
    let layout = first.hist.layout();
    let rows = layout.linear_buckets as usize;
    for i in 0..rows {
        let _ = write!(out, "{:06}", layout.lower(i) / 1000);
        for (j, c) in m.cpus.iter().enumerate() {
            let n = c.hist.counts().get(i).copied().unwrap_or(0);
            let _ = write!(out, "{}{n:06}", if j == 0 { ' ' } else { '\t' });
        }
        out.push('\n');
    }
    let trailer = |out: &mut String,
                   name: &str,
                   w: usize,
                   f: &dyn Fn(&latlab_core::model::CpuModel) -> u64| {
        let _ = write!(out, "# {name}:");
        for c in &m.cpus {
            let _ = write!(out, " {:0w$}", f(c));
        }
        out.push('\n');
    };
    // cyclictest sums its bucket rows: overflows are not in the Total.
    trailer(&mut out, "Total", 9, &|c| {
        c.hist.count_below(c.hist.layout().limit_ns())
    });
    trailer(&mut out, "Min Latencies", 5, &|c| {
        c.hist.min().unwrap_or(0) / 1000
    });
    trailer(&mut out, "Avg Latencies", 5, &|c| {
        c.hist.mean().map(|v| (v / 1000.0) as u64).unwrap_or(0)
    });
    trailer(&mut out, "Max Latencies", 5, &|c| {
        c.hist.max().unwrap_or(0) / 1000
    });
    trailer(&mut out, "Histogram Overflows", 5, &|c| {
        c.hist.count() - c.hist.count_below(c.hist.layout().limit_ns())
    });
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use latlab_core::hist::{Histogram, Layout};
    use latlab_core::model::RunModel;
    use latlab_core::record::*;

    /// cyclictest's `# Total:` is the sum of the rows printed above it; overflows are counted
    /// on their own line and only there.
    #[test]
    fn total_counts_only_the_bucketed_samples() {
        let layout = Layout::new(1_000, 10_000).unwrap();
        let mut h = Histogram::new(layout);
        for v in [1_500, 2_000, 9_999, 10_000, 50_000] {
            h.record(v);
        }
        let cpus = vec![CpuRecord::new(0, h.to_record())];
        let mut r = RunRecord::new("t", Source::Latlab, RunConfig::default(), cpus);
        r.complete = true;
        r.refresh().unwrap();
        let out = String::from_utf8(super::render(&RunModel::new(r).unwrap())).unwrap();
        let rows: u64 = out
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(rows, 3);
        assert!(out.contains("# Total: 000000003\n"), "{out}");
        assert!(out.contains("# Histogram Overflows: 00002\n"), "{out}");
        assert!(out.contains("# Max Latencies: 00050\n"), "{out}");
    }
}
