//! cyclictest `-h N` / `-H N` histograms, from stdout or `--histfile`.
//!
//! ```text
//! # Histogram
//! 000000 000000 000000          <- bucket (µs, %06d), one count per thread [, all threads with -H]
//! …
//! # Total: 000002946 000002956     <- absent before some versions; rt-tests ≥ 2.7 also omits empty buckets
//! # Min Latencies: 00016 00015
//! # Avg Latencies: 00048 00044
//! # Max Latencies: 04596 03130     <- one more value (all threads) with -H
//! # Histogram Overflows: 00044 00037
//! ```
//! Buckets are 1 µs. The histogram limit is the number of bucket lines when every bucket is
//! printed; when empty buckets are omitted it is only known to be above the last printed one.
//! Overflows (samples ≥ the limit) are counted but their values are lost, except the largest
//! (Max Latencies). `T:` summary lines (without `-q`) give each thread's interval and priority.

use super::{
    build_hist, check_threads, clip, cmdline_opt, int, lines, mul, record, total, Ctx, ImportError,
    Imported, Printed, Thread,
};
use crate::record::{Machine, RunRecord, Source, ThreadInfo};

#[derive(Default)]
struct Trailer {
    total: Option<(usize, Vec<u64>)>,
    min: Option<(usize, Vec<u64>)>,
    avg: Option<(usize, Vec<u64>)>,
    max: Option<(usize, Vec<u64>)>,
    over: Option<(usize, Vec<u64>)>,
}

/// What a cyclictest -h text holds: its histogram rows (line, bucket in µs, counts), its
/// trailer, its `T:` lines (thread, interval, priority), and the number of its last line.
struct Text {
    rows: Vec<(usize, u64, Vec<u64>)>,
    trailer: Trailer,
    t_lines: Vec<(u32, Option<u64>, Option<u32>)>,
    last_line: usize,
}

/// The lines of the text, read and checked one by one.
fn read_text(bytes: &[u8], ctx: &Ctx) -> Result<Text, ImportError> {
    let mut rows: Vec<(usize, u64, Vec<u64>)> = Vec::new();
    let mut t = Trailer::default();
    let mut t_lines: Vec<(u32, Option<u64>, Option<u32>)> = Vec::new();
    let mut last_line = 0;
    for l in lines(bytes, ctx) {
        let (n, line) = l?;
        last_line = n;
        let s = line.trim();
        if s.is_empty() {
            continue;
        }
        if let Some(rest) = s.strip_prefix('#') {
            let rest = rest.trim();
            let field = |key: &str| -> Option<&str> { rest.strip_prefix(key) };
            let slot = if let Some(v) = field("Total:") {
                Some((&mut t.total, v, "Total"))
            } else if let Some(v) = field("Min Latencies:") {
                Some((&mut t.min, v, "Min Latencies"))
            } else if let Some(v) = field("Avg Latencies:") {
                Some((&mut t.avg, v, "Avg Latencies"))
            } else if let Some(v) = field("Max Latencies:") {
                Some((&mut t.max, v, "Max Latencies"))
            } else if let Some(v) = field("Histogram Overflows:") {
                Some((&mut t.over, v, "Histogram Overflows"))
            } else {
                None
            };
            if let Some((slot, v, what)) = slot {
                check_threads(ctx, n, v.split_whitespace().count())?;
                let vals = v
                    .split_whitespace()
                    .map(|tok| int(ctx, n, tok, what))
                    .collect::<Result<Vec<_>, _>>()?;
                *slot = Some((n, vals));
            }
            continue;
        }
        if let Some(rest) = s.strip_prefix("T:") {
            // T: 0 ( 4699) P:95 I:1000 C:   2976 Min: …
            let toks: Vec<&str> = rest.split_whitespace().collect();
            let thread = toks.first().and_then(|x| x.parse::<u32>().ok());
            let val = |key: &str| {
                toks.iter()
                    .find_map(|x| x.strip_prefix(key))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            if let Some(th) = thread {
                let prio = val("P:").and_then(|p| u32::try_from(p).ok());
                let interval = match val("I:") {
                    Some(i) => Some(mul(ctx, n, i, 1_000, "interval (µs)")?),
                    None => None,
                };
                if t_lines.len() < super::MAX_THREADS {
                    t_lines.push((th, interval, prio));
                }
            }
            continue;
        }
        if s.starts_with("policy:") || s.starts_with("Policy") {
            continue;
        }
        let mut toks = s.split_whitespace();
        let b = toks.next().unwrap_or_default();
        let bucket = int(ctx, n, b, "histogram bucket (µs)")?;
        let counts = toks
            .map(|tok| int(ctx, n, tok, "histogram count"))
            .collect::<Result<Vec<_>, _>>()?;
        check_threads(ctx, n, counts.len())?;
        if counts.is_empty() {
            return Err(ctx.err(
                n,
                format!(
                    "expected a bucket and one count per thread, found only '{}'",
                    clip(s)
                ),
            ));
        }
        if let Some((pn, prev, pc)) = rows.last() {
            if bucket <= *prev {
                return Err(ctx.err(
                    n,
                    format!("bucket {bucket} µs does not follow bucket {prev} µs of line {pn}"),
                ));
            }
            if counts.len() != pc.len() {
                return Err(ctx.err(
                    n,
                    format!(
                        "{} count columns, but line {pn} has {}",
                        counts.len(),
                        pc.len()
                    ),
                ));
            }
        }
        rows.push((n, bucket, counts));
    }
    Ok(Text {
        rows,
        trailer: t,
        t_lines,
        last_line,
    })
}

pub(crate) fn parse(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let Text {
        rows,
        trailer: t,
        t_lines,
        last_line,
    } = read_text(bytes, ctx)?;
    let (max_line, max) = t.max.ok_or_else(|| {
        ctx.err(
            last_line,
            "expected the '# Max Latencies:' trailer of cyclictest -h (is the file truncated?)",
        )
    })?;
    // Threads: the Min line never has the -H all-threads column.
    let threads = match &t.min {
        Some((_, m)) => m.len(),
        None => max.len(),
    };
    if threads == 0 {
        return Err(ctx.err(max_line, "no thread in '# Max Latencies:'"));
    }
    let cols = rows.first().map(|r| r.2.len()).unwrap_or(threads);
    if cols != threads && cols != threads + 1 {
        return Err(ctx.err(
            rows.first().map(|r| r.0).unwrap_or(max_line),
            format!(
                "{cols} count columns for {threads} threads (expected {threads}, or {} with -H)",
                threads + 1
            ),
        ));
    }
    let check_len = |slot: &Option<(usize, Vec<u64>)>, what: &str| -> Result<(), ImportError> {
        if let Some((ln, v)) = slot {
            if v.len() < threads {
                return Err(ctx.err(
                    *ln,
                    format!(
                        "'{what}' has {} values, expected one per thread ({threads})",
                        v.len()
                    ),
                ));
            }
        }
        Ok(())
    };
    check_len(&t.total, "# Total")?;
    check_len(&t.min, "# Min Latencies")?;
    check_len(&t.avg, "# Avg Latencies")?;
    check_len(&Some((max_line, max.clone())), "# Max Latencies")?;
    check_len(&t.over, "# Histogram Overflows")?;

    let mut notes = vec![
        "imported from cyclictest -h: 1 µs buckets; mean is cyclictest's Avg (rounded to 1 µs) and the standard deviation is estimated from bucket midpoints".to_string(),
    ];
    let dense = rows.iter().enumerate().all(|(i, r)| r.1 == i as u64);
    let limit_us = rows.last().map(|r| u128::from(r.1) + 1).unwrap_or(1);
    if !dense {
        notes.push(format!(
            "empty buckets are omitted in this file, so the histogram limit is unknown: taken as {limit_us} µs (one past the last bucket printed)"
        ));
    }
    let (layout, cut) = super::layout(ctx, max_line, 1_000, limit_us * 1_000, rows.len())?;
    notes.extend(cut);
    let mut out = Vec::with_capacity(threads);
    let mut any_over = 0u128;
    for th in 0..threads {
        let mut buckets: Vec<(u64, u64)> = Vec::new();
        for r in rows.iter().filter(|r| r.2[th] > 0) {
            buckets.push((mul(ctx, r.0, r.1, 1_000, "bucket (µs)")?, r.2[th]));
        }
        let in_hist = total(ctx, max_line, buckets.iter().map(|b| &b.1))?;
        let over = t.over.as_ref().map(|o| o.1[th]).unwrap_or(0);
        any_over += u128::from(over);
        if let Some((ln, tot)) = &t.total {
            // cyclictest's Total counts the bucketed samples (overflows excluded).
            if tot[th] != in_hist && Some(tot[th]) != in_hist.checked_add(over) {
                return Err(ctx.err(
                    *ln,
                    format!(
                        "thread {th}: Total {} but the buckets hold {in_hist} samples",
                        tot[th]
                    ),
                ));
            }
        }
        let min_us = t.min.as_ref().map(|m| m.1[th]);
        let max_us = max[th];
        let first = buckets.first().map(|b| b.0 / 1_000);
        let min_ns = match (min_us, first) {
            (Some(m), _) => mul(ctx, t.min.as_ref().map_or(0, |m| m.0), m, 1_000, "Min (µs)")?,
            (None, Some(f)) => f * 1_000,
            (None, None) => layout.limit_ns(),
        };
        let max_ns = mul(ctx, max_line, max_us, 1_000, "Max (µs)")?;
        let avg = t.avg.as_ref().map(|a| a.1[th] as f64 * 1_000.0);
        let hist = build_hist(
            ctx,
            max_line,
            layout,
            Printed {
                buckets: &buckets,
                unknown_above: over,
                min_ns,
                max_ns,
                avg_ns: avg,
            },
        )
        .map_err(|mut e| {
            e.msg = format!("thread {th}: {}", e.msg);
            e
        })?;
        let (interval, prio) = t_lines
            .iter()
            .find(|x| x.0 == th as u32)
            .map(|x| (x.1, x.2))
            .unwrap_or((None, None));
        out.push(Thread {
            cpu: th as u32,
            hist,
            info: ThreadInfo {
                tid: None,
                policy: None,
                priority: prio,
                interval_ns: interval,
            },
        });
    }
    if any_over > 0 {
        notes.push(format!(
            "{any_over} samples overflowed the {limit_us} µs histogram: counted, value unknown above the limit (percentiles among them are reported as \"> limit\"); only each thread's maximum is known"
        ));
    }
    notes.push(
        "cyclictest -h does not say which CPU each thread ran on: 'cpu' is the thread number"
            .into(),
    );
    let interval = out.first().and_then(|t| t.info.interval_ns);
    let _ = cmdline_opt; // the -h output carries no command line
    Ok(record(Imported {
        source: Source::Cyclictest,
        label: ctx.name,
        threads: out,
        command_line: None,
        machine: Machine::default(),
        interval_ns: interval,
        notes,
    }))
}

#[cfg(test)]
mod tests {
    use crate::hist::Quantile;
    use crate::import::{import, From};

    const H100: &[u8] = include_bytes!("../../tests/fixtures/import/cyclictest-h100.txt");
    const H2000: &[u8] = include_bytes!("../../tests/fixtures/import/cyclictest-h2000-2cpu.txt");
    const H50: &[u8] = include_bytes!("../../tests/fixtures/import/cyclictest-H50-histfile.txt");

    #[test]
    fn h100_with_overflows() {
        let r = import(H100, From::Auto, "h100").unwrap();
        assert_eq!(r.cpus.len(), 2);
        let c0 = &r.cpus[0];
        // Total 2946 in buckets + 44 overflows.
        assert_eq!(c0.stats.samples, 2946 + 44);
        assert_eq!(c0.stats.unknown_above, 44);
        assert_eq!(c0.stats.min_ns, Some(16_000));
        assert_eq!(c0.stats.max_ns, Some(4_596_000));
        assert_eq!(c0.stats.mean_ns, Some(48_000));
        assert!(!c0.stats.exact_moments);
        // 44 of 2990 samples are above 100 µs: p99 (rank 2961) is among them → unknown.
        assert_eq!(c0.stats.p99_ns, None);
        assert!(c0.stats.median_ns.is_some());
        assert_eq!(r.cpus[1].stats.samples, 2956 + 37);
        assert_eq!(c0.histogram.limit_ns, 100_000);
        assert!(r.notes.iter().any(|n| n.contains("81 samples overflowed")));
    }

    #[test]
    fn h2000_matches_its_json_twin() {
        // The .txt and the .json are the same cyclictest run: same counts and bounds.
        let t = import(H2000, From::Cyclictest, "h2000.txt").unwrap();
        let j = import(
            include_bytes!("../../tests/fixtures/import/cyclictest-h2000-2cpu.json"),
            From::CyclictestJson,
            "h2000.json",
        )
        .unwrap();
        for (a, b) in t.cpus.iter().zip(&j.cpus) {
            assert_eq!(a.histogram.buckets, b.histogram.buckets);
            assert_eq!(a.stats.samples, b.stats.samples);
            assert_eq!(a.stats.max_ns, b.stats.max_ns);
            assert_eq!(a.stats.p999_ns, b.stats.p999_ns);
        }
        assert_eq!(t.cpus[0].stats.samples, 9990);
    }

    #[test]
    fn histfile_with_all_threads_column() {
        let r = import(H50, From::Auto, "h50").unwrap();
        assert_eq!(r.cpus.len(), 2, "the -H total column is not a thread");
        assert_eq!(r.cpus[0].stats.unknown_above, 790);
        assert_eq!(r.cpus[1].stats.unknown_above, 487);
        assert_eq!(r.total.unknown_above, 1277);
        assert_eq!(r.total.max_ns, Some(4_140_000));
    }

    #[test]
    fn sparse_rt_tests_27_without_total() {
        let f = b"# Histogram\n000003 000001\t000000\n000007 000002\t000001\n# Min Latencies: 00003 00007\n# Avg Latencies: 00005 00007\n# Max Latencies: 00007 00150\n# Histogram Overflows: 00000 00001\n";
        let r = import(f, From::Auto, "sparse").unwrap();
        assert_eq!(r.cpus[0].stats.samples, 3);
        assert_eq!(r.cpus[0].stats.max_ns, Some(7_000));
        assert_eq!(r.cpus[0].stats.median_ns, Some(7_000)); // rank 2 is in the 7 µs bucket (≤ 8 µs, clamped to max)
        assert_eq!(r.cpus[1].stats.samples, 2);
        assert_eq!(r.cpus[1].stats.max_ns, Some(150_000));
        let h = crate::hist::Histogram::from_record(&r.cpus[1].histogram).unwrap();
        assert_eq!(h.quantile(Quantile::MAX), Some(150_000));
        assert!(r.notes.iter().any(|n| n.contains("omitted")));
    }

    /// A row at 9 999 999 µs made a dense histogram to 10 s (80 MB per thread). The linear
    /// part now stops at 10 ms (the file prints 3 rows); the far row is in the log tail, and
    /// min, max, mean and the quantile bounds stay right.
    #[test]
    fn far_sparse_rows_go_to_the_tail() {
        let f = b"# Histogram\n000003 000001\n000007 000002\n9999999 000001\n# Min Latencies: 00003\n# Avg Latencies: 2500004\n# Max Latencies: 9999999\n# Histogram Overflows: 00000\n";
        let r = import(f, From::Auto, "far").unwrap();
        let c = &r.cpus[0];
        assert_eq!(c.histogram.limit_ns, 10_000_000);
        assert_eq!(c.stats.samples, 4);
        assert_eq!(c.stats.min_ns, Some(3_000));
        assert_eq!(c.stats.max_ns, Some(9_999_999_000));
        assert_eq!(c.stats.mean_ns, Some(2_500_004_000));
        assert_eq!(c.stats.median_ns, Some(8_000));
        assert_eq!(c.stats.p99_ns, Some(9_999_999_000));
        assert!(c.histogram.buckets.len() == 3, "{:?}", c.histogram.buckets);
        assert!(
            r.notes.iter().any(|n| n.contains("log-scaled tail")),
            "{:?}",
            r.notes
        );
        // Dense files keep one linear bucket per printed row, as before.
        let h = import(H2000, From::Cyclictest, "h2000.txt").unwrap();
        assert_eq!(h.cpus[0].histogram.limit_ns, 2_000_000);
        assert!(!h.notes.iter().any(|n| n.contains("log-scaled tail")));
    }

    /// Bucket numbers and trailer values past 2^64 ns are errors, not wrapped or saturated.
    #[test]
    fn huge_values_are_errors() {
        let f = b"# Histogram\n000003 000001\n# Max Latencies: 18446744073709552\n";
        let e = import(f, From::Cyclictest, "x").unwrap_err();
        assert!(
            e.to_string()
                .contains("Max (µs) 18446744073709552 is too large"),
            "{e}"
        );
        let f = b"# Histogram\n18446744073709552 000001\n# Max Latencies: 3\n";
        let e = import(f, From::Cyclictest, "x").unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        let f = b"# Histogram\n000003 18446744073709551615\n000004 1\n# Max Latencies: 4\n";
        let e = import(f, From::Cyclictest, "x").unwrap_err();
        assert!(e.to_string().contains("more than 2^64"), "{e}");
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = import(
            b"# Histogram\n000000 000001\n000001 x\n",
            From::Cyclictest,
            "f.txt",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.txt:3: histogram count: expected a non-negative integer, found 'x'"
        );
        let e = import(b"# Histogram\n000000 000001\n", From::Cyclictest, "t.txt").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t.txt:3: expected the '# Max Latencies:'"),
            "{e}"
        );
        let e = import(
            b"# Histogram\n000000 1 2\n000001 1\n# Max Latencies: 1 1\n",
            From::Cyclictest,
            "c.txt",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("c.txt:3: 1 count columns"), "{e}");
        // A max that does not fit the buckets.
        let e = import(
            b"# Histogram\n000000 000001\n000001 000001\n# Min Latencies: 0\n# Max Latencies: 00009\n# Histogram Overflows: 0\n",
            From::Cyclictest,
            "m.txt",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("m.txt:5: thread 0: inconsistent histogram"),
            "{e}"
        );
        let e = import(b"# Histogram\n\xff\xfe\n", From::Cyclictest, "u.txt").unwrap_err();
        assert_eq!(e.to_string(), "u.txt:2: not UTF-8 text");
    }
}
