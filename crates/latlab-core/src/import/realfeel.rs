//! realfeel / amlat histograms as Morton (2002) and Williams (2002) published them:
//! `<latency in ms> <count>` per line, the latency being the lower bound of its bucket.
//!
//! ```text
//! 0.0 1271218
//! 0.1 4554
//! 3.2 1
//! ```
//! The bucket width is inferred as the greatest common divisor of the bucket bounds (0.1 ms
//! here). The file has no min, max or mean: min is the first bucket's lower bound, max the
//! last bucket's upper bound less 1 ns (a bound, as every latlab percentile), and the mean
//! comes from bucket midpoints. Blank lines and `#` comments are skipped.

use super::{build_hist, clip, lines, record, Ctx, ImportError, Imported, Printed, Thread};
use crate::record::{Machine, RunRecord, Source, ThreadInfo};

/// A decimal number of milliseconds, exactly, in ns (up to 6 decimals).
fn ms_to_ns(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() || frac.len() > 6 {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let i: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut f: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..6 {
        f *= 10;
    }
    i.checked_mul(1_000_000)?.checked_add(f)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

pub(crate) fn parse(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let mut rows: Vec<(usize, u64, u64)> = Vec::new();
    for l in lines(bytes, ctx) {
        let (n, line) = l?;
        let s = line.trim();
        if s.is_empty() || s.starts_with('#') {
            continue;
        }
        let toks: Vec<&str> = s.split_whitespace().collect();
        if toks.len() != 2 {
            return Err(ctx.err(
                n,
                format!("expected '<latency ms> <count>', found '{}'", clip(s)),
            ));
        }
        let lo = ms_to_ns(toks[0]).ok_or_else(|| {
            ctx.err(
                n,
                format!(
                    "latency: expected milliseconds such as 0.1, found '{}'",
                    clip(toks[0])
                ),
            )
        })?;
        let c = super::int(ctx, n, toks[1], "count")?;
        if let Some(&(pn, p, _)) = rows.last() {
            if lo <= p {
                return Err(ctx.err(
                    n,
                    format!(
                        "latency {} ms does not follow line {pn}: buckets must increase",
                        toks[0]
                    ),
                ));
            }
        }
        rows.push((n, lo, c));
    }
    let (last_line, last_lo, _) = *rows
        .last()
        .ok_or_else(|| ctx.err(0, "no '<latency ms> <count>' line"))?;
    // The width divides every bound; with a single bucket at 0 nothing tells it: assume 0.1 ms.
    let g = rows.iter().fold(0, |g, r| gcd(g, r.1));
    let mut width = if g == 0 { 100_000 } else { g };
    // Bounds like 0.0, 0.1, 0.2 … give 0.1 ms; a lone "1.0 5" gives 1 ms (the bound itself).
    if rows.len() >= 2 {
        let min_step = rows
            .windows(2)
            .map(|w| w[1].1 - w[0].1)
            .min()
            .unwrap_or(width);
        width = gcd(width, min_step);
    }
    let limit = last_lo
        .checked_add(width)
        .ok_or_else(|| ctx.err(last_line, "latency too large"))?;
    let (layout, cut) = super::layout(ctx, last_line, width, u128::from(limit), rows.len())?;
    let buckets: Vec<(u64, u64)> = rows
        .iter()
        .filter(|r| r.2 > 0)
        .map(|r| (r.1, r.2))
        .collect();
    let Some(&(first_lo, _)) = buckets.first() else {
        return Err(ctx.err(0, "every bucket count is 0: no samples"));
    };
    let &(top_lo, _) = buckets.last().expect("non-empty");
    // The top bucket's end, in the file's width (or the tail bucket's, when that is lower).
    let top_hi = top_lo
        .saturating_add(width)
        .min(layout.upper(layout.index(top_lo)));
    let hist = build_hist(
        ctx,
        last_line,
        layout,
        Printed {
            buckets: &buckets,
            unknown_above: 0,
            min_ns: first_lo,
            max_ns: top_hi - 1,
            avg_ns: None,
        },
    )?;
    let mut notes = vec![
        format!("imported from a realfeel-style histogram: bucket width inferred as {} ms", width as f64 / 1e6),
        "the file has no min, max or mean: min and max are bucket bounds, the mean and standard deviation are estimated from bucket midpoints".into(),
        "the file does not say which CPU was measured: 'cpu' is 0".into(),
    ];
    notes.extend(cut);
    Ok(record(Imported {
        source: Source::Realfeel,
        label: ctx.name,
        threads: vec![Thread {
            cpu: 0,
            hist,
            info: ThreadInfo::default(),
        }],
        command_line: None,
        machine: Machine::default(),
        interval_ns: None,
        notes,
    }))
}

#[cfg(test)]
mod tests {
    use super::ms_to_ns;
    use crate::import::{import, From};

    #[test]
    fn decimal_ms() {
        assert_eq!(ms_to_ns("0.1"), Some(100_000));
        assert_eq!(ms_to_ns("3.25"), Some(3_250_000));
        assert_eq!(ms_to_ns("12"), Some(12_000_000));
        assert_eq!(ms_to_ns("."), None);
        assert_eq!(ms_to_ns("-1"), None);
        assert_eq!(ms_to_ns("1e3"), None);
    }

    #[test]
    fn morton_low_latency_patch() {
        let r = import(
            include_bytes!("../../tests/fixtures/import/morton-lowlatency.hist"),
            From::Auto,
            "morton",
        )
        .unwrap();
        let s = &r.cpus[0].stats;
        let n: u64 = 1271218 + 4554 + 472 + 78 + 10 + 5 + 24 + 27 + 20 + 10 + 15 + 1 + 1 + 1 + 1;
        assert_eq!(s.samples, n);
        assert_eq!(s.bucket_ns, 100_000);
        assert_eq!(s.max_ns, Some(3_299_999));
        assert_eq!(s.min_ns, Some(0));
        // Williams' "% below 0.1 ms" = the 0.0 bucket's share.
        assert_eq!(s.below["100us"], 1271218.0 / n as f64);
        assert_eq!(s.median_ns, Some(100_000));
    }

    /// Two lines, 1 µs apart and 9999 ms away, asked for 10 million 1 µs buckets (80 MB).
    #[test]
    fn far_bucket_goes_to_the_tail() {
        let r = import(b"0.001 1\n0.002 1\n9999.0 1\n", From::Realfeel, "m").unwrap();
        let s = &r.cpus[0].stats;
        assert_eq!(s.bucket_ns, 1_000);
        assert_eq!(r.cpus[0].histogram.limit_ns, 10_000_000);
        assert_eq!(s.samples, 3);
        assert_eq!(s.min_ns, Some(1_000));
        assert_eq!(s.max_ns, Some(9_999_000_999));
        assert!(r.notes.iter().any(|n| n.contains("log-scaled tail")));
    }

    #[test]
    fn errors() {
        let e = import(b"0.0 5\n0.1 x\n", From::Realfeel, "m").unwrap_err();
        assert_eq!(
            e.to_string(),
            "m:2: count: expected a non-negative integer, found 'x'"
        );
        let e = import(b"0.2 5\n0.1 1\n", From::Realfeel, "m").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("m:2: latency 0.1 ms does not follow"),
            "{e}"
        );
        let e = import(b"0.0 0\n", From::Realfeel, "m").unwrap_err();
        assert!(e.to_string().contains("no samples"), "{e}");
    }
}
