//! oslat (rt-tests) results: its text summary and its `--json=FILE`.
//!
//! ```text
//!         Core: <TAB> 0 1
//! Counter Freq: <TAB> 2595 2597 (Mhz)
//!     001 (us): <TAB> 4208286 281415
//!     032 (us): <TAB> 146 9 (including overflows)
//!      Minimum: <TAB> 1 1 (us)
//!      Average: <TAB> 1.217 4.227 (us)
//!      Maximum: <TAB> 56526 62136 (us)
//!     Duration: <TAB> 0.994 1.082 (sec)
//! ```
//! One column per CPU. oslat rounds each latency *up* to whole µs: row `NNN (us)` holds the
//! loops that took (NNN−1, NNN] µs, and its minimum and maximum are in the same rounded unit.
//! latlab keeps oslat's numbers as oslat prints them (a row NNN is the bucket starting at NNN
//! µs), so the max of a CPU is the file's. The last row (`-b`, 32 by default) also holds every
//! longer loop ("including overflows"): those samples are counted as unknown above the limit.
//! The JSON (`"thread": {"0": {"cpu", "min", "avg", "max", "histogram": {"1": n, …}}}`) has
//! the same buckets; its last bucket number is `-b` from `"cmdline:"` (32 by default).

use serde_json::Value;

use super::cyclictest_json::strict;
use super::{
    build_hist, check_threads, clip, cmdline_opt, int, lines, mul, record, total, Ctx, ImportError,
    Imported, Printed, Thread,
};
use crate::record::{Machine, RunRecord, Source, ThreadInfo};

const DEFAULT_BUCKETS: u64 = 32;

/// One CPU's column: (label µs, count) rows, min, max (µs) and the average.
struct Col {
    cpu: u32,
    rows: Vec<(u64, u64)>,
    min: Option<u64>,
    max: Option<u64>,
    avg: Option<f64>,
}

/// Shared by text and JSON: the histograms of `cols`, whose last bucket `last` (µs) holds
/// the overflows too.
fn build(
    ctx: &Ctx,
    line: usize,
    cols: Vec<Col>,
    last: u64,
    mut notes: Vec<String>,
    cmd: Option<String>,
) -> Result<RunRecord, ImportError> {
    check_threads(ctx, line, cols.len())?;
    let rows = cols.iter().map(|c| c.rows.len()).max().unwrap_or(0);
    let (layout, cut) = super::layout(ctx, line, 1_000, u128::from(last) * 1_000, rows)?;
    notes.extend(cut);
    let mut threads = Vec::new();
    let mut overs = 0u128;
    for c in cols {
        let mut buckets = Vec::new();
        let mut over = 0u64;
        for &(us, n) in &c.rows {
            if n == 0 {
                continue;
            }
            if us >= last {
                over = over
                    .checked_add(n)
                    .ok_or_else(|| ctx.err(line, "bucket count overflows"))?;
            } else {
                buckets.push((mul(ctx, line, us, 1_000, "bucket")?, n));
            }
        }
        let held = total(ctx, line, buckets.iter().map(|b| &b.1))?;
        if held.checked_add(over).is_none() {
            return Err(ctx.err(line, "sample counts add up to more than 2^64"));
        }
        if held == 0 && over == 0 {
            continue;
        }
        overs += u128::from(over);
        let min = c
            .min
            .ok_or_else(|| ctx.err(line, format!("CPU {}: no Minimum / \"min\" value", c.cpu)))?;
        let max = c
            .max
            .ok_or_else(|| ctx.err(line, format!("CPU {}: no Maximum / \"max\" value", c.cpu)))?;
        let hist = build_hist(
            ctx,
            line,
            layout,
            Printed {
                buckets: &buckets,
                unknown_above: over,
                min_ns: mul(ctx, line, min, 1_000, "min")?,
                max_ns: mul(ctx, line, max, 1_000, "max")?,
                avg_ns: c.avg.map(|a| a * 1_000.0),
            },
        )
        .map_err(|mut e| {
            e.msg = format!("CPU {}: {}", c.cpu, e.msg);
            e
        })?;
        threads.push(Thread {
            cpu: c.cpu,
            hist,
            info: ThreadInfo::default(),
        });
    }
    notes.push(format!(
        "oslat rounds each latency up to whole µs and its histogram has 1 µs rows up to {last} µs; values are as oslat prints them (a loop of 3.2 µs counts as 4 µs); mean is oslat's average, the standard deviation is estimated from bucket midpoints"
    ));
    notes.push(
        "oslat measures the gaps in a busy loop (OS noise on an isolated CPU), not timer wake-ups: every loop iteration is a sample, so counts are in the millions per second and percentiles below p99.99 are usually the loop's own 1 µs".into(),
    );
    if overs > 0 {
        notes.push(format!(
            "{overs} samples were in oslat's last row ({last} µs, \"including overflows\"): counted, value unknown at or above {last} µs; the max is oslat's"
        ));
    }
    let mut r = record(Imported {
        source: Source::Oslat,
        label: ctx.name,
        threads,
        command_line: cmd,
        machine: Machine::default(),
        interval_ns: None,
        notes,
    });
    r.config.mode = "noise".into();
    Ok(r)
}

/// Tokens after the `Label:` of a text row, without a trailing `(us)`-style unit.
fn values(s: &str) -> Vec<&str> {
    s.split_whitespace()
        .filter(|t| !(t.starts_with('(') && t.ends_with(')')))
        .collect()
}

/// The CPUs of the `Core:` row (after its label), one per column.
fn core_cpus(ctx: &Ctx, n: usize, rest: &str) -> Result<Vec<u32>, ImportError> {
    let v = values(rest);
    check_threads(ctx, n, v.len())?;
    v.iter()
        .map(|t| {
            int(ctx, n, t, "Core (CPU number)")
                .and_then(|c| u32::try_from(c).map_err(|_| ctx.err(n, "CPU number too large")))
        })
        .collect()
}

/// The values of the `Average:` row: non-negative numbers.
fn averages(ctx: &Ctx, n: usize, v: &[&str]) -> Result<Vec<f64>, ImportError> {
    v.iter()
        .map(|t| {
            t.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    ctx.err(
                        n,
                        format!("Average: expected a number, found '{}'", clip(t)),
                    )
                })
        })
        .collect()
}

pub(crate) fn parse_text(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let mut cpus: Option<(usize, Vec<u32>)> = None;
    let mut rows: Vec<(usize, u64, Vec<u64>)> = Vec::new();
    let mut over_row: Option<u64> = None;
    let mut mins: Option<Vec<u64>> = None;
    let mut maxs: Option<Vec<u64>> = None;
    let mut avgs: Option<Vec<f64>> = None;
    let mut version = None;
    let mut last_line = 0;
    for l in lines(bytes, ctx) {
        let (n, line) = l?;
        last_line = n;
        let s = line.trim();
        if let Some(v) = s.strip_prefix("oslat V ") {
            version = Some(clip(v.trim()));
            continue;
        }
        let Some((label, rest)) = s.split_once(':') else {
            continue;
        };
        let label = label.trim();
        let width = |v: &Vec<&str>| -> Result<(), ImportError> {
            let want = cpus.as_ref().map_or(0, |c| c.1.len());
            if v.len() != want {
                return Err(ctx.err(
                    n,
                    format!(
                        "{label}: {} values, expected one per CPU of the 'Core:' line ({want})",
                        v.len()
                    ),
                ));
            }
            Ok(())
        };
        match label {
            "Core" => {
                if let Some((pn, _)) = &cpus {
                    return Err(ctx.err(
                        n,
                        format!("a second 'Core:' line (the first is line {pn}): one oslat run per file"),
                    ));
                }
                cpus = Some((n, core_cpus(ctx, n, rest)?));
            }
            "Minimum" | "Maximum" | "Average" => {
                if cpus.is_none() {
                    return Err(ctx.err(n, format!("'{label}:' before the 'Core:' line")));
                }
                let v = values(rest);
                width(&v)?;
                if label == "Average" {
                    avgs = Some(averages(ctx, n, &v)?);
                } else {
                    let x = v
                        .iter()
                        .map(|t| int(ctx, n, t, label))
                        .collect::<Result<Vec<_>, _>>()?;
                    if label == "Minimum" {
                        mins = Some(x);
                    } else {
                        maxs = Some(x);
                    }
                }
            }
            _ => {
                // A bucket row: `NNN (us)`.
                let Some(num) = label.strip_suffix("(us)").map(str::trim) else {
                    continue;
                };
                if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
                    continue;
                }
                if cpus.is_none() {
                    return Err(ctx.err(n, "a histogram row before the 'Core:' line"));
                }
                let us = int(ctx, n, num, "bucket (µs)")?;
                if let Some((pn, p, _)) = rows.last() {
                    if us <= *p {
                        return Err(ctx.err(
                            n,
                            format!("bucket {us} µs does not follow bucket {p} µs of line {pn}"),
                        ));
                    }
                }
                if over_row.is_some() {
                    return Err(ctx.err(n, "a histogram row after the overflow row"));
                }
                let overflow = rest.contains("including overflows");
                let body = rest.replace("(including overflows)", "");
                let v = values(&body);
                width(&v)?;
                let counts = v
                    .iter()
                    .map(|t| int(ctx, n, t, "histogram count"))
                    .collect::<Result<Vec<_>, _>>()?;
                if overflow {
                    over_row = Some(us);
                }
                rows.push((n, us, counts));
            }
        }
    }
    let (cline, cpus) = cpus.ok_or_else(|| {
        ctx.err(
            last_line,
            "expected oslat's 'Core:' line and histogram rows 'NNN (us):' (oslat output)",
        )
    })?;
    if rows.is_empty() {
        return Err(ctx.err(
            last_line,
            "no histogram rows 'NNN (us):' (is the file cut?)",
        ));
    }
    // Without the overflow marker (rows omitted with -z), nothing overflowed: the limit is
    // one past the last row.
    let last = match over_row {
        Some(l) => l,
        None => rows.last().map_or(1, |r| r.1.saturating_add(1)),
    };
    let cols = cpus
        .iter()
        .enumerate()
        .map(|(i, &cpu)| Col {
            cpu,
            rows: rows.iter().map(|r| (r.1, r.2[i])).collect(),
            min: mins.as_ref().map(|m| m[i]),
            max: maxs.as_ref().map(|m| m[i]),
            avg: avgs.as_ref().map(|m| m[i]),
        })
        .collect();
    let mut notes = vec![format!(
        "imported from oslat{} text output: one series per CPU of the 'Core:' line",
        version.map(|v| format!(" {v}")).unwrap_or_default()
    )];
    if over_row.is_none() {
        notes.push(format!(
            "no row says \"including overflows\": the histogram is taken to end at {last} µs with no sample above it"
        ));
    }
    build(ctx, cline, cols, last, notes, None)
}

pub(crate) fn parse_json(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let v = strict(bytes, ctx, &super::cyclictest_json::RT_TESTS_SHAPE)?;
    let (_, threads, cmd) = super::cyclictest_json::top_level(&v, ctx, "oslat")?;
    let buckets = cmd
        .as_deref()
        .and_then(|c| cmdline_opt(c, "-b", "--bucket-size"))
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(DEFAULT_BUCKETS);
    check_threads(ctx, 0, threads.len())?;
    let mut cols = Vec::new();
    let mut max_key = 0u64;
    for (name, t) in threads {
        let tnum: u32 = name
            .parse()
            .map_err(|_| ctx.err(0, format!("thread key '{}': expected a number", clip(name))))?;
        let num = |k: &str| -> Result<Option<u64>, ImportError> {
            match t.get(k) {
                None => Ok(None),
                Some(x) => x.as_u64().map(Some).ok_or_else(|| {
                    ctx.err(
                        0,
                        format!("thread {tnum}: \"{k}\": expected a non-negative integer"),
                    )
                }),
            }
        };
        let cpu = match num("cpu")? {
            Some(c) => u32::try_from(c)
                .map_err(|_| ctx.err(0, format!("thread {tnum}: \"cpu\" {c} is too large")))?,
            None => tnum,
        };
        let avg = t.get("avg").and_then(Value::as_f64);
        let hist = t
            .get("histogram")
            .and_then(Value::as_object)
            .ok_or_else(|| ctx.err(0, format!("thread {tnum}: expected a \"histogram\" object")))?;
        let rows = super::cyclictest_json::histogram_rows(ctx, 0, tnum, hist)?;
        if let Some(&(b, _)) = rows.iter().max() {
            max_key = max_key.max(b);
        }
        let mut rows = rows;
        rows.sort_unstable();
        cols.push(Col {
            cpu,
            rows,
            min: num("min")?,
            max: num("max")?,
            avg,
        });
    }
    cols.sort_by_key(|c| c.cpu);
    if max_key > buckets {
        return Err(ctx.err(
            0,
            format!("histogram bucket {max_key} is beyond the {buckets} buckets of the command line (-b)"),
        ));
    }
    let notes = vec![format!(
        "imported from oslat --json: {buckets} buckets of 1 µs (-b), the last one holding the overflows"
    )];
    build(ctx, 0, cols, buckets, notes, cmd)
}

#[cfg(test)]
mod tests {
    use crate::import::{import, From};

    const TXT: &[u8] = include_bytes!("../../tests/fixtures/import/oslat-c1-D5.txt");
    const JSON: &[u8] = include_bytes!("../../tests/fixtures/import/oslat-c01.json");

    #[test]
    fn text_values_are_the_files() {
        let r = import(TXT, From::Auto, "oslat.txt").unwrap();
        assert_eq!(r.source, crate::record::Source::Oslat);
        assert_eq!(r.cpus.len(), 1);
        let c = &r.cpus[0];
        assert_eq!(c.cpu, 1);
        assert_eq!(c.stats.max_ns, Some(4_108_000));
        assert_eq!(c.stats.min_ns, Some(1_000));
        // 170811075 + 1768 + … + 1993 in the rows.
        assert_eq!(c.stats.samples, 170_822_022);
        assert_eq!(c.stats.unknown_above, 1_993);
        // Row 001 is the bucket [1, 2) µs: latlab's quantiles are bucket tops.
        assert_eq!(c.stats.median_ns, Some(2_000));
        // Mean is oslat's 1.001 µs.
        assert_eq!(c.stats.mean_ns, Some(1_001));
    }

    #[test]
    fn json_values_are_the_files() {
        let r = import(JSON, From::Auto, "oslat.json").unwrap();
        assert_eq!(r.source, crate::record::Source::Oslat);
        assert_eq!(r.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(r.cpus[0].stats.max_ns, Some(6_801_000));
        assert_eq!(r.cpus[1].stats.max_ns, Some(6_973_000));
        assert_eq!(r.cpus[0].stats.samples, 62_408_235);
        assert_eq!(r.cpus[1].stats.samples, 60_884_713);
        assert_eq!(r.cpus[0].stats.unknown_above, 3_985);
        assert!(r.command_line.as_deref().unwrap().starts_with("oslat -D 3"));
    }

    #[test]
    fn a_second_core_line_is_an_error() {
        let e = import(
            b"        Core:\t 0\n    001 (us):\t 5\n        Core:\t 0 1\n     Minimum:\t 1 1 (us)\n",
            From::Oslat,
            "o",
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("o:3: a second 'Core:' line"),
            "{e}"
        );
    }

    #[test]
    fn bad_rows_are_named() {
        let e = import(
            b"        Core:\t 0 1\n    001 (us):\t 5\n",
            From::Oslat,
            "o",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "o:2: 001 (us): 1 values, expected one per CPU of the 'Core:' line (2)"
        );
        let e = import(
            b"        Core:\t 0\n    001 (us):\t 99999999999999999999\n",
            From::Oslat,
            "o",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("o:2: histogram count"), "{e}");
    }
}
