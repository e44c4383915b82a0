//! jitterdebugger's `results.json`.
//!
//! ```text
//! {"version": 3, "sysinfo": {…, "resolution_in_ns": 1000},
//!  "cpu": {"0": {"histogram": {"17": 1, …}, "count": 2933, "min": 17, "max": 4079, "avg": 78.12}}}
//! ```
//! One series per CPU, values in `resolution_in_ns` units (1000: µs). The histogram has one
//! bucket per unit below jitterdebugger's histogram size (1000 entries); `count` also holds the
//! samples above it, which the file gives only through `max`: they are counted as unknown above
//! the limit. The raw samples (`samples.raw`, written with `-f`) are a separate binary file and
//! are not read here.

use serde_json::{Map, Value};

use super::cyclictest_json::{strict, Shape};
use super::{
    build_hist, check_threads, clip, mul, record, total, Ctx, ImportError, Imported, Printed,
    Thread,
};
use crate::record::{Machine, RunRecord, Source, ThreadInfo};

/// jitterdebugger's histogram size (HIST_MAX_ENTRIES): buckets 0..1000 units.
const HIST_ENTRIES: u64 = 1000;

/// What jitterdebugger writes: CPUs as latlab imports them (1024), and a CPU's histogram of at
/// most its 1000 entries (more is no file of jitterdebugger's: 3 million keys were taken,
/// and made a 188 MB run.json).
const SHAPE: Shape = Shape {
    per_depth: &[
        (1, 64, "top-level keys"),
        (
            2,
            super::MAX_THREADS,
            "entries in one object (latlab imports at most 1024 CPUs)",
        ),
        (3, 64, "keys in one CPU's object"),
        (
            4,
            HIST_ENTRIES as usize,
            "histogram entries in one CPU (jitterdebugger writes at most 1000)",
        ),
    ],
    total: 1 << 20,
};

pub(crate) fn parse(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let v = strict(bytes, ctx, &SHAPE)?;
    let obj = v
        .as_object()
        .ok_or_else(|| ctx.err(1, "expected a JSON object (jitterdebugger results.json)"))?;
    let cpus = obj.get("cpu").and_then(Value::as_object).ok_or_else(|| {
        ctx.err(
            0,
            "expected a \"cpu\" object: is this jitterdebugger's results.json?",
        )
    })?;
    let unit = resolution(ctx, obj.get("sysinfo").and_then(Value::as_object))?;
    check_threads(ctx, 0, cpus.len())?;
    struct Cpu {
        cpu: u32,
        buckets: Vec<(u64, u64)>,
        count: u64,
        min: u64,
        max: u64,
        avg: Option<f64>,
    }
    let mut parsed = Vec::new();
    let mut max_key = 0u64;
    let mut most = 0usize;
    for (name, c) in cpus {
        let cpu: u32 = name.parse().map_err(|_| {
            ctx.err(
                0,
                format!("cpu key '{}': expected a CPU number", clip(name)),
            )
        })?;
        let num = |k: &str| -> Result<u64, ImportError> {
            c.get(k).and_then(Value::as_u64).ok_or_else(|| {
                ctx.err(
                    0,
                    format!("CPU {cpu}: \"{k}\": expected a non-negative integer"),
                )
            })
        };
        let hist = c
            .get("histogram")
            .and_then(Value::as_object)
            .ok_or_else(|| ctx.err(0, format!("CPU {cpu}: expected a \"histogram\" object")))?;
        most = most.max(hist.len());
        let mut buckets = Vec::with_capacity(hist.len());
        for (k, n) in hist {
            let b: u64 = k.parse().map_err(|_| {
                ctx.err(
                    0,
                    format!("CPU {cpu}: histogram key '{}': expected a number", clip(k)),
                )
            })?;
            let n = n.as_u64().ok_or_else(|| {
                ctx.err(
                    0,
                    format!("CPU {cpu}: histogram bucket {b}: expected a count"),
                )
            })?;
            max_key = max_key.max(b);
            if n > 0 {
                buckets.push((b, n));
            }
        }
        buckets.sort_unstable();
        parsed.push(Cpu {
            cpu,
            buckets,
            count: num("count")?,
            min: num("min")?,
            max: num("max")?,
            avg: c.get("avg").and_then(Value::as_f64),
        });
    }
    parsed.sort_by_key(|c| c.cpu);
    let limit = u128::from(HIST_ENTRIES.max(max_key.saturating_add(1)));
    let (layout, cut) = super::layout(ctx, 0, unit, limit * u128::from(unit), most)?;
    let unit_name = if unit == 1_000 {
        "µs".to_string()
    } else {
        format!("× {unit} ns")
    };
    let mut notes = vec![
        format!("imported from jitterdebugger results.json: one series per CPU, buckets of 1 {unit_name} below {limit}; mean is jitterdebugger's avg, the standard deviation is estimated from bucket midpoints"),
        "jitterdebugger's raw samples (samples.raw, -f) are not in results.json: no time series, no spikes".into(),
    ];
    notes.extend(cut);
    let mut threads = Vec::new();
    let mut overs = 0u128;
    for c in parsed {
        let in_hist = total(ctx, 0, c.buckets.iter().map(|b| &b.1))?;
        let over = c.count.checked_sub(in_hist).ok_or_else(|| {
            ctx.err(
                0,
                format!(
                    "CPU {}: count {} but the histogram holds {in_hist} samples",
                    c.cpu, c.count
                ),
            )
        })?;
        if c.count == 0 {
            continue;
        }
        overs += u128::from(over);
        let mut b = Vec::with_capacity(c.buckets.len());
        for &(k, n) in &c.buckets {
            b.push((mul(ctx, 0, k, unit, "bucket")?, n));
        }
        let hist = build_hist(
            ctx,
            0,
            layout,
            Printed {
                buckets: &b,
                unknown_above: over,
                min_ns: mul(ctx, 0, c.min, unit, "min")?,
                max_ns: mul(ctx, 0, c.max, unit, "max")?,
                avg_ns: c.avg.map(|a| a * unit as f64),
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
    if overs > 0 {
        notes.push(format!("{overs} samples were above jitterdebugger's histogram (count minus the buckets): counted, value unknown above {limit} {unit_name}; each CPU's max is jitterdebugger's"));
    }
    Ok(record(Imported {
        source: Source::Jitterdebugger,
        label: ctx.name,
        threads,
        command_line: None,
        machine: Machine::default(),
        interval_ns: None,
        notes,
    }))
}

/// The unit of the values: `sysinfo.resolution_in_ns` (1000, µs, when absent).
fn resolution(ctx: &Ctx, sys: Option<&Map<String, Value>>) -> Result<u64, ImportError> {
    match sys.and_then(|s| s.get("resolution_in_ns")) {
        None => Ok(1_000),
        Some(u) => match u.as_u64() {
            Some(u) if u > 0 && u <= 1_000_000_000 => Ok(u),
            _ => Err(ctx.err(
                0,
                "\"resolution_in_ns\": expected a positive whole number of ns (1000 for µs)",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use crate::import::{import, From};

    const F: &[u8] = include_bytes!("../../tests/fixtures/import/jitterdebugger-results.json");

    #[test]
    fn values_are_the_files() {
        let r = import(F, From::Auto, "results.json").unwrap();
        assert_eq!(r.source, crate::record::Source::Jitterdebugger);
        assert_eq!(r.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(r.cpus[0].stats.samples, 2_933);
        assert_eq!(r.cpus[1].stats.samples, 2_880);
        assert_eq!(r.cpus[0].stats.max_ns, Some(4_079_000));
        assert_eq!(r.cpus[1].stats.max_ns, Some(9_101_000));
        assert_eq!(r.cpus[0].stats.min_ns, Some(17_000));
        // 2933 − 2904 in the histogram.
        assert_eq!(r.cpus[0].stats.unknown_above, 29);
        assert_eq!(r.cpus[0].stats.mean_ns, Some(78_120));
    }

    #[test]
    fn count_below_histogram_is_an_error() {
        let e = import(
            br#"{"cpu": {"0": {"histogram": {"5": 10}, "count": 3, "min": 5, "max": 5}}}"#,
            From::Jitterdebugger,
            "j",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "j: CPU 0: count 3 but the histogram holds 10 samples"
        );
    }
}
