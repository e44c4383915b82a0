//! `rtla timerlat hist` output.
//!
//! ```text
//! # RTLA timerlat histogram
//! # Time unit is microseconds (us)
//! Index   IRQ-000   Thr-000   IRQ-001   Thr-001
//! 0        276489         0    206089         0     <- lower bound of the bucket, in the unit
//! over:         0         0         0         0
//! count:   600002    600002    600002    600002
//! min:          0         1         0         1
//! avg:          0         5         0         5
//! max:         16        36        15        58
//! ```
//! One CPU per `Thr-NNN` column (the thread latency, what cyclictest measures). With
//! user-space threads (`rtla timerlat -u`: `IRQ-000 Thr-000 Usr-000`) the CPU's histogram is
//! the `Usr-NNN` column (return to user space: what the measuring thread itself sees) and the
//! `Thr-NNN` column is kept as `mode.thread`. Each `IRQ-NNN` column (timer expiry to its IRQ
//! handler) is a series of its own, kept in that CPU's `mode.irq` histogram (same layout); a
//! file with IRQ columns only (`--no-thread`) has them as the CPUs' histograms. A CPU's column
//! of one kind given twice is an error (two series for one CPU would be a guess). The bucket
//! width is the greatest common divisor of the printed indices (rtla `-b`; empty buckets are
//! not printed); `over:` samples are above `entries × width`, whose value is unknown. A
//! trailing `ALL` summary section (newer rtla) is ignored.
//!
//! `rtla osnoise hist` prints the same table with one `CPU-NNN` column per CPU: each sample
//! is one noise (a `sample_threshold` record: time the osnoise thread lost, of at least rtla's
//! `-T`), as a `--mode noise --backend osnoise` run's histogram, so the record's mode is
//! `noise`.

use std::collections::BTreeMap;

use super::{
    build_hist, check_threads, clip, int, lines, mul, record, total, Ctx, ImportError, Imported,
    Printed, Thread,
};
use crate::hist::{Histogram, Layout};
use crate::modes::CpuMode;
use crate::record::{Machine, RunRecord, Source, ThreadInfo};

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// An rtla timerlat hist output read: its time unit (ns per unit), its `Index` header (line,
/// columns), its bucket rows (line, index, counts), its summary rows by key (line, values;
/// None for rtla's '-'), and the number of its last line.
struct Table {
    unit: u64,
    header: Option<(usize, Vec<String>)>,
    rows: Vec<(usize, u64, Vec<u64>)>,
    tail: BTreeMap<&'static str, (usize, Vec<Option<u64>>)>,
    last: usize,
}

fn read_table(bytes: &[u8], ctx: &Ctx) -> Result<Table, ImportError> {
    let mut unit = 1_000u64;
    let mut header: Option<(usize, Vec<String>)> = None;
    let mut rows: Vec<(usize, u64, Vec<u64>)> = Vec::new();
    let mut tail: BTreeMap<&'static str, (usize, Vec<Option<u64>>)> = BTreeMap::new();
    let mut last = 0;
    for l in lines(bytes, ctx) {
        let (n, line) = l?;
        last = n;
        let s = line.trim();
        if s.is_empty() {
            continue;
        }
        if s.starts_with('#') {
            if s.contains("Time unit is nanoseconds") {
                unit = 1;
            }
            continue;
        }
        if s.starts_with("ALL") {
            break;
        }
        let mut toks = s.split_whitespace();
        let first = toks.next().unwrap_or_default();
        if first == "Index" {
            header = Some((n, toks.map(str::to_string).collect()));
            continue;
        }
        let Some((_, cols)) = &header else {
            return Err(ctx.err(
                n,
                format!(
                    "expected the 'Index IRQ-000 Thr-000 …' header before '{}'",
                    clip(s)
                ),
            ));
        };
        let key = match first {
            "over:" => Some("over"),
            "count:" => Some("count"),
            "min:" => Some("min"),
            "avg:" => Some("avg"),
            "max:" => Some("max"),
            _ => None,
        };
        let vals: Vec<&str> = toks.collect();
        if vals.len() != cols.len() {
            return Err(ctx.err(
                n,
                format!(
                    "{} values, expected one per header column ({})",
                    vals.len(),
                    cols.len()
                ),
            ));
        }
        if let Some(k) = key {
            // rtla prints '-' for min/avg/max of a column without samples.
            let v = vals
                .iter()
                .map(|t| {
                    if *t == "-" {
                        Ok(None)
                    } else {
                        int(ctx, n, t, k).map(Some)
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            tail.insert(k, (n, v));
        } else {
            let idx = int(ctx, n, first, "Index (bucket lower bound)")?;
            if let Some((pn, p, _)) = rows.last() {
                if idx <= *p {
                    return Err(ctx.err(
                        n,
                        format!("index {idx} does not follow index {p} of line {pn}"),
                    ));
                }
            }
            let v = vals
                .iter()
                .map(|t| int(ctx, n, t, "histogram count"))
                .collect::<Result<Vec<_>, _>>()?;
            rows.push((n, idx, v));
        }
    }
    Ok(Table {
        unit,
        header,
        rows,
        tail,
        last,
    })
}

/// One column's histogram and its samples above the histogram; None when the column has no
/// sample.
fn column(
    ctx: &Ctx,
    t: &Table,
    layout: Layout,
    col: usize,
    cpu: u32,
    kind: &str,
) -> Result<Option<(Histogram, u64)>, ImportError> {
    let (unit, last) = (t.unit, t.last);
    let get = |k: &str| t.tail.get(k).and_then(|(ln, v)| v[col].map(|x| (*ln, x)));
    let mut buckets: Vec<(u64, u64)> = Vec::new();
    for r in t.rows.iter().filter(|r| r.2[col] > 0) {
        buckets.push((mul(ctx, r.0, r.1, unit, "Index")?, r.2[col]));
    }
    let in_hist = total(ctx, last, buckets.iter().map(|b| &b.1))?;
    let over = get("over").map(|x| x.1).unwrap_or(0);
    let (cl, count) = get("count").unwrap_or((last, 0));
    let held = u128::from(in_hist) + u128::from(over);
    if u128::from(count) != held {
        return Err(ctx.err(
            cl,
            format!("{kind}-{cpu:03}: count {count}, but the buckets and 'over' hold {held}"),
        ));
    }
    if count == 0 {
        return Ok(None);
    }
    let (ml, max) = get("max").ok_or_else(|| ctx.err(last, format!("{kind}-{cpu:03}: no max")))?;
    let min = match get("min") {
        Some((l, m)) => mul(ctx, l, m, unit, "min")?,
        None => 0,
    };
    let avg = get("avg").map(|x| x.1 as f64 * unit as f64);
    let hist = build_hist(
        ctx,
        ml,
        layout,
        Printed {
            buckets: &buckets,
            unknown_above: over,
            min_ns: min,
            max_ns: mul(ctx, ml, max, unit, "max")?,
            avg_ns: avg,
        },
    )
    .map_err(|mut e| {
        e.msg = format!("{kind}-{cpu:03}: {}", e.msg);
        e
    })?;
    Ok(Some((hist, over)))
}

/// A CPU's columns, (column, CPU).
type Cols = Vec<(usize, u32)>;

/// The header's columns by kind: (kind of the CPUs' histograms, their columns, the IRQ
/// columns, the Thr columns kept beside a Usr histogram). A CPU's column of one kind given
/// twice is an error.
fn columns(
    ctx: &Ctx,
    hline: usize,
    cols: &[String],
) -> Result<(&'static str, Cols, Cols, Cols), ImportError> {
    let pick = |prefix: &str| -> Vec<(usize, u32)> {
        cols.iter()
            .enumerate()
            .filter_map(|(i, c)| {
                c.strip_prefix(prefix)
                    .and_then(|n| n.parse().ok())
                    .map(|cpu| (i, cpu))
            })
            .collect()
    };
    for prefix in ["IRQ-", "Thr-", "Usr-", "CPU-"] {
        let cols = pick(prefix);
        check_threads(ctx, hline, cols.len())?;
        let mut cpus: Vec<u32> = cols.iter().map(|c| c.1).collect();
        cpus.sort_unstable();
        if let Some(w) = cpus.windows(2).find(|w| w[0] == w[1]) {
            return Err(ctx.err(
                hline,
                format!(
                    "column {prefix}{:03} appears twice in the header: each CPU has one column of each kind",
                    w[0]
                ),
            ));
        }
    }
    let irq_cols = pick("IRQ-");
    Ok(match (pick("Thr-"), pick("Usr-")) {
        (t, u) if !u.is_empty() => ("Usr", u, irq_cols, t),
        (t, _) if !t.is_empty() => ("Thr", t, irq_cols, vec![]),
        _ if !irq_cols.is_empty() => ("IRQ", irq_cols, vec![], vec![]),
        _ if !pick("CPU-").is_empty() => ("CPU", pick("CPU-"), vec![], vec![]),
        _ => {
            return Err(ctx.err(
                hline,
                "expected Thr-NNN, Usr-NNN or IRQ-NNN columns (rtla timerlat hist) or CPU-NNN columns (rtla osnoise hist) in the Index header",
            ))
        }
    })
}

pub(crate) fn parse(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let mut t = read_table(bytes, ctx)?;
    let (unit, last) = (t.unit, t.last);
    let (hline, cols) = t.header.take().ok_or_else(|| {
        ctx.err(
            last,
            "expected an 'Index IRQ-000 Thr-000 …' header line (rtla timerlat hist output)",
        )
    })?;
    let (kind, sel, irq_cols, thr_cols) = columns(ctx, hline, &cols)?;
    for k in ["count", "min", "max"] {
        if !t.tail.contains_key(k) {
            return Err(ctx.err(
                last,
                format!("expected the '{k}:' row of rtla's summary (is the file truncated?)"),
            ));
        }
    }
    let width = t.rows.iter().fold(0, |g, r| gcd(g, r.1)).max(1);
    let limit = u128::from(t.rows.last().map_or(0, |r| r.1)) + u128::from(width);
    let width_ns = mul(ctx, hline, width, unit, "bucket width")?;
    let (layout, cut) =
        super::layout(ctx, hline, width_ns, limit * u128::from(unit), t.rows.len())?;
    let unit_name = if unit == 1 { "ns" } else { "µs" };
    let mut notes: Vec<String> = cut.into_iter().collect();
    let what = match (kind, irq_cols.is_empty()) {
        ("IRQ", _) => "IRQ latency per CPU (the file has no thread columns)".to_string(),
        ("CPU", _) => "the noises per CPU (each sample one noise of at least rtla's threshold, -T)".to_string(),
        ("Usr", irq_none) => format!(
            "user-space threads (-u): the Usr (return to user) latency per CPU as each CPU's histogram, the Thr (thread) latency as a separate series per CPU (mode.thread in run.json){}",
            if irq_none { "; the file has no IRQ columns" } else { ", the IRQ latency too (mode.irq)" }
        ),
        (k, true) => format!("{k} (thread) latency per CPU; the file has no IRQ columns"),
        (k, false) => format!("{k} (thread) latency per CPU as each CPU's histogram; the IRQ latency columns as a separate series per CPU (mode.irq in run.json)"),
    };
    notes.splice(0..0, [
        format!(
            "imported from rtla {} hist: {what}",
            if kind == "CPU" { "osnoise" } else { "timerlat" }
        ),
        format!("bucket width inferred as {width} {unit_name} from the printed indices; limit taken as {limit} {unit_name} (one past the last printed bucket); mean from rtla's avg, standard deviation estimated from bucket midpoints"),
    ]);
    let mut threads = Vec::new();
    let mut overs = 0u128;
    for (col, cpu) in sel {
        let Some((hist, over)) = column(ctx, &t, layout, col, cpu, kind)? else {
            continue;
        };
        overs += u128::from(over);
        threads.push(Thread {
            cpu,
            hist,
            info: ThreadInfo::default(),
        });
    }
    // The side series: (kind, per CPU).
    type PerCpu = Vec<(u32, Histogram)>;
    let mut sides: Vec<(&str, PerCpu)> = Vec::new();
    for (k, what, cols) in [
        ("IRQ", "timer IRQ latency", irq_cols),
        ("Thr", "thread latency", thr_cols),
    ] {
        let mut v = Vec::new();
        for (col, cpu) in cols {
            if let Some((hist, over)) = column(ctx, &t, layout, col, cpu, k)? {
                if over > 0 {
                    notes.push(format!("{k}-{cpu:03}: {over} samples above the histogram ('over:'): counted, value unknown above the limit"));
                }
                v.push((cpu, hist));
            }
        }
        for (cpu, h) in &v {
            if !threads.iter().any(|t| t.cpu == *cpu) {
                notes.push(format!("{k}-{cpu:03} has samples but its CPU has no {kind} samples: its {k} series is not kept"));
            } else {
                notes.push(format!(
                    "{k}-{cpu:03}: {} samples, max {} {unit_name} ({what})",
                    h.count(),
                    h.max().unwrap_or(0) / unit
                ));
            }
        }
        sides.push((k, v));
    }
    if overs > 0 {
        notes.push(format!("{overs} samples were above the histogram ('over:'): counted, value unknown above the limit, reported as \"> limit\""));
    }
    let mut r = record(Imported {
        source: Source::Rtla,
        label: ctx.name,
        threads,
        command_line: None,
        machine: Machine::default(),
        interval_ns: None,
        notes,
    });
    if kind == "CPU" {
        r.config.mode = "noise".into();
    }
    for c in &mut r.cpus {
        let of = |k: &str| {
            sides
                .iter()
                .find(|s| s.0 == k)
                .and_then(|s| s.1.iter().find(|(cpu, _)| *cpu == c.cpu))
                .map(|(_, h)| h.to_record())
        };
        let (irq, thread) = (of("IRQ"), of("Thr"));
        if irq.is_some() || thread.is_some() {
            c.mode = Some(CpuMode {
                irq,
                thread,
                ..CpuMode::default()
            });
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use crate::import::{import, From};

    /// The shared reconstructed layout, with its `count:` row made consistent with its rows.
    const F: &[u8] = include_bytes!("../../tests/fixtures/import/rtla-timerlat-hist.txt");
    /// As reconstructed: its counts do not add up (rows were elided).
    const RECONSTRUCTED: &[u8] = include_bytes!(
        "../../tests/fixtures/import/rtla-timerlat-hist-6.1-RECONSTRUCTED-from-source.txt"
    );

    #[test]
    fn thread_columns_per_cpu() {
        let r = import(F, From::Auto, "rtla.txt").unwrap();
        assert_eq!(r.source, crate::record::Source::Rtla);
        assert_eq!(r.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(r.cpus[0].stats.samples, 169_887);
        assert_eq!(r.cpus[1].stats.samples, 166_415);
        assert_eq!(r.cpus[0].stats.max_ns, Some(36_000));
        assert_eq!(r.cpus[1].stats.max_ns, Some(58_000));
        assert_eq!(r.cpus[0].stats.min_ns, Some(1_000));
        // 0 + 35487 + 122584 … the median of Thr-000 is in bucket 2 (≤ 3 µs).
        assert_eq!(r.cpus[0].stats.median_ns, Some(3_000));
    }

    #[test]
    fn irq_columns_are_a_series_of_their_own() {
        let r = import(F, From::Auto, "rtla.txt").unwrap();
        let irq = |i: usize| {
            crate::hist::Histogram::from_record(
                r.cpus[i].mode.as_ref().unwrap().irq.as_ref().unwrap(),
            )
            .unwrap()
        };
        assert_eq!(irq(0).count(), 599_039);
        assert_eq!(irq(0).max(), Some(16_000));
        assert_eq!(irq(0).min(), Some(0));
        assert_eq!(irq(1).count(), 599_095);
        assert_eq!(irq(1).max(), Some(15_000));
        // The thread series are untouched by the IRQ columns.
        assert_eq!(r.total.samples, 169_887 + 166_415);
        // Through run.json and back.
        let back = crate::record::RunRecord::from_json(&r.to_json()).unwrap();
        assert_eq!(back.cpus[1].mode, r.cpus[1].mode);
    }

    #[test]
    fn irq_only_file() {
        let f = b"# RTLA timerlat histogram\nIndex   IRQ-000\n0  5 \n3  1 \nover:  0 \ncount:  6 \nmin:  0 \navg:  0 \nmax:  3 \n";
        let r = import(f, From::Auto, "irq.txt").unwrap();
        assert_eq!(r.cpus[0].stats.samples, 6);
        assert_eq!(r.cpus[0].stats.max_ns, Some(3_000));
        assert!(r.notes[0].contains("IRQ latency per CPU"), "{:?}", r.notes);
    }

    /// `rtla timerlat hist -u`: IRQ, Thr and Usr columns. The Usr columns (what the
    /// user-space thread sees) were dropped without a note; now they are the CPUs'
    /// histograms, the Thr columns `mode.thread`, the IRQ columns `mode.irq`.
    #[test]
    fn user_space_columns_are_the_cpus_and_thread_latency_is_kept() {
        let f = b"# RTLA timerlat histogram\n# Time unit is microseconds (us)\nIndex   IRQ-000   Thr-000   Usr-000   IRQ-001   Thr-001   Usr-001\n1   4   0   0   5   0   0\n2   1   3   0   0   4   0\n3   0   2   4   0   1   3\n7   0   0   1   0   0   2\nover:  0  0  0  0  0  0\ncount:  5  5  5  5  5  5\nmin:  1  2  3  1  2  3\navg:  1  2  3  1  2  4\nmax:  2  3  7  1  3  7\n";
        let r = import(f, From::Auto, "u.txt").unwrap();
        assert_eq!(r.cpus.len(), 2);
        for c in &r.cpus {
            assert_eq!(c.stats.samples, 5);
            assert_eq!(c.stats.max_ns, Some(7_000), "the Usr column");
            assert_eq!(c.stats.min_ns, Some(3_000));
            let m = c.mode.as_ref().unwrap();
            let thr = crate::hist::Histogram::from_record(m.thread.as_ref().unwrap()).unwrap();
            assert_eq!((thr.count(), thr.max()), (5, Some(3_000)));
            let irq = crate::hist::Histogram::from_record(m.irq.as_ref().unwrap()).unwrap();
            assert_eq!(irq.count(), 5);
        }
        assert!(
            r.notes[0].contains("user-space threads (-u)"),
            "{:?}",
            r.notes
        );
        assert!(
            r.notes.iter().any(|n| n.starts_with("Thr-001: 5 samples")),
            "{:?}",
            r.notes
        );
        let back = crate::record::RunRecord::from_json(&r.to_json()).unwrap();
        assert_eq!(back.cpus[1].mode, r.cpus[1].mode);
    }

    /// A real `rtla osnoise hist -c 1-2 -d 3 -T 100` (rtla 6.1 on the kernel lab's 6.12-rt):
    /// one noise histogram per CPU, a noise-mode record, the `over:` row counted above it.
    #[test]
    fn osnoise_hist_is_a_noise_record_per_cpu() {
        const OSN: &[u8] = include_bytes!("../../tests/fixtures/import/rtla-osnoise-hist.txt");
        let r = import(OSN, From::Auto, "osn.txt").unwrap();
        assert_eq!(r.source, crate::record::Source::Rtla);
        assert_eq!(r.config.mode, "noise");
        assert_eq!(r.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(r.cpus[0].stats.samples, 279);
        assert_eq!(r.cpus[1].stats.samples, 274);
        assert_eq!(r.cpus[0].stats.min_ns, Some(103_000));
        assert_eq!(r.cpus[1].stats.max_ns, Some(15_404_000));
        assert!(r.cpus.iter().all(|c| c.mode.is_none()));
        assert!(
            r.notes[0].starts_with("imported from rtla osnoise hist"),
            "{:?}",
            r.notes
        );
        // A timerlat histogram stays a timer record.
        assert_eq!(import(F, From::Auto, "t").unwrap().config.mode, "timer");
    }

    /// Two `Thr-000` columns gave two "cpu 0" series.
    #[test]
    fn a_cpu_column_given_twice_is_an_error() {
        let f = b"# RTLA timerlat histogram\nIndex   Thr-000   Thr-000\n1   4   4\nover:  0  0\ncount:  4  4\nmin:  1  1\navg:  1  1\nmax:  1  1\n";
        let e = import(f, From::Auto, "d.txt").unwrap_err().to_string();
        assert!(e.contains("column Thr-000 appears twice"), "{e}");
    }

    #[test]
    fn inconsistent_count_is_reported() {
        let e = import(RECONSTRUCTED, From::Auto, "r").unwrap_err();
        assert_eq!(
            e.to_string(),
            "r:12: Thr-000: count 600002, but the buckets and 'over' hold 169887"
        );
    }
}
