//! cyclictest `--json=FILE` (rt-tests ≥ 2.0).
//!
//! Quirks (see `/work/shared/formats/README.md`): the keys `"cmdline:"` and
//! `"rt_test_version:"` end with a colon; `resolution_in_ns` is the `-N` flag (values in ns),
//! not a resolution; there is no overflow count, so overflows are `cycles` minus the samples in
//! the histogram; the histogram limit is the `-h`/`-H` value of the command line.
//! A file written without `-h` has empty histograms: it has no distribution to import, and
//! that is an error rather than a histogram made up from min/avg/max.

use serde_json::Value;

use super::{build_hist, cmdline_opt, record, Ctx, ImportError, Thread};
use crate::hist::Layout;
use crate::record::{Machine, RunRecord, Source, ThreadInfo};

pub(crate) fn parse(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| ctx.err(e.line(), format!("not valid JSON: {e}")))?;
    let text = String::from_utf8_lossy(bytes);
    let line_of = |key: &str| -> usize {
        // Best effort: the line where a key first appears, for messages about its value.
        let pat = format!("\"{key}\"");
        text.lines()
            .position(|l| l.contains(&pat))
            .map(|p| p + 1)
            .unwrap_or(0)
    };
    let obj = v
        .as_object()
        .ok_or_else(|| ctx.err(1, "expected a JSON object (cyclictest --json output)"))?;
    let threads = obj
        .get("thread")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ctx.err(
                0,
                "expected a \"thread\" object: is this cyclictest --json output?",
            )
        })?;
    let cmd = obj
        .get("cmdline:")
        .or_else(|| obj.get("cmdline"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let unit: u64 = match obj.get("resolution_in_ns").and_then(Value::as_u64) {
        Some(1) => 1,
        _ => 1_000,
    };
    let unit_name = if unit == 1 { "ns" } else { "µs" };
    let limit_from_cmd = cmd.as_deref().and_then(|c| {
        cmdline_opt(c, "-h", "--histogram")
            .or_else(|| cmdline_opt(c, "-H", "--histofall"))
            .and_then(|s| s.parse::<u64>().ok())
    });
    let interval = cmd
        .as_deref()
        .and_then(|c| cmdline_opt(c, "-i", "--interval"))
        .and_then(|s| s.parse::<u64>().ok())
        .map(|i| i * 1_000);
    let prio = cmd
        .as_deref()
        .and_then(|c| cmdline_opt(c, "-p", "--priority"))
        .and_then(|s| s.parse::<u32>().ok());

    let mut parsed = Vec::new();
    let mut max_key = 0u64;
    for (name, t) in threads {
        let ln = line_of(name);
        let tnum: u32 = name.parse().map_err(|_| {
            ctx.err(
                ln,
                format!("thread key '{}': expected a number", super::clip(name)),
            )
        })?;
        let field = |k: &str| -> Result<&Value, ImportError> {
            t.get(k)
                .ok_or_else(|| ctx.err(ln, format!("thread {tnum}: missing \"{k}\"")))
        };
        let num = |k: &str| -> Result<u64, ImportError> {
            field(k)?.as_u64().ok_or_else(|| {
                ctx.err(
                    ln,
                    format!("thread {tnum}: \"{k}\": expected a non-negative integer"),
                )
            })
        };
        let cycles = num("cycles")?;
        let min = num("min")?;
        let max = num("max")?;
        let avg = field("avg")?
            .as_f64()
            .ok_or_else(|| ctx.err(ln, format!("thread {tnum}: \"avg\": expected a number")))?;
        let cpu = t
            .get("cpu")
            .and_then(Value::as_i64)
            .filter(|&c| c >= 0 && c <= u32::MAX as i64)
            .map(|c| c as u32)
            .unwrap_or(tnum);
        let hist = field("histogram")?.as_object().ok_or_else(|| {
            ctx.err(
                ln,
                format!("thread {tnum}: \"histogram\": expected an object"),
            )
        })?;
        let mut buckets = Vec::with_capacity(hist.len());
        for (k, c) in hist {
            let b: u64 = k.parse().map_err(|_| {
                ctx.err(
                    ln,
                    format!(
                        "thread {tnum}: histogram key '{}': expected a bucket number",
                        super::clip(k)
                    ),
                )
            })?;
            let c = c.as_u64().ok_or_else(|| {
                ctx.err(
                    ln,
                    format!("thread {tnum}: histogram bucket {b}: expected a count"),
                )
            })?;
            max_key = max_key.max(b);
            if c > 0 {
                buckets.push((b, c));
            }
        }
        if cycles > 0 && buckets.is_empty() {
            return Err(ctx.err(
                ln,
                format!("thread {tnum} has {cycles} cycles but an empty histogram: cyclictest ran without -h/-H, so there is no distribution to import (rerun with -h 1000 or more)"),
            ));
        }
        buckets.sort_unstable();
        parsed.push((ln, tnum, cpu, cycles, min, max, avg, buckets));
    }
    parsed.sort_by_key(|p| p.1);
    let limit = limit_from_cmd.unwrap_or(max_key + 1).max(max_key + 1);
    let layout = Layout::new(unit, (limit * unit).max(64))
        .map_err(|e| ctx.err(0, format!("histogram limit {limit} {unit_name}: {e}")))?;
    let mut notes = vec![format!(
        "imported from cyclictest --json: 1 {unit_name} buckets to {limit} {unit_name}; mean is cyclictest's avg and the standard deviation is estimated from bucket midpoints"
    )];
    if limit_from_cmd.is_none() {
        notes.push(format!(
            "the command line does not give the histogram size: the limit is taken as {limit} {unit_name}, one past the last bucket"
        ));
    }
    let mut out = Vec::new();
    let mut overs = 0u64;
    for (ln, tnum, cpu, cycles, min, max, avg, buckets) in parsed {
        let in_hist: u64 = buckets.iter().map(|b| b.1).sum();
        let over = cycles.checked_sub(in_hist).ok_or_else(|| {
            ctx.err(
                ln,
                format!("thread {tnum}: {cycles} cycles but the histogram holds {in_hist} samples"),
            )
        })?;
        overs += over;
        let b_ns: Vec<(u64, u64)> = buckets.iter().map(|&(b, c)| (b * unit, c)).collect();
        let hist = build_hist(
            ctx,
            ln,
            layout,
            &b_ns,
            over,
            min.saturating_mul(unit),
            max.saturating_mul(unit),
            Some(avg * unit as f64),
        )
        .map_err(|mut e| {
            e.msg = format!("thread {tnum}: {}", e.msg);
            e
        })?;
        out.push(Thread {
            cpu,
            hist,
            info: ThreadInfo {
                tid: None,
                policy: None,
                priority: prio,
                interval_ns: interval,
            },
        });
    }
    if overs > 0 {
        notes.push(format!(
            "{overs} samples were above the {limit} {unit_name} histogram (cycles minus the histogram's samples): counted, value unknown above the limit, reported as \"> limit\""
        ));
    }
    let sys = obj.get("sysinfo");
    let s = |k: &str| {
        sys.and_then(|x| x.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let machine = Machine {
        hostname: s("nodename"),
        kernel_release: s("release"),
        kernel_version: s("version"),
        arch: s("machine"),
        ..Machine::default()
    };
    let mut r = record(
        Source::Cyclictest,
        ctx.name,
        out,
        cmd,
        machine,
        interval,
        notes,
    );
    r.tool_version = obj
        .get("rt_test_version:")
        .and_then(Value::as_str)
        .map(|v| format!("rt-tests {v}"));
    r.started_at = obj
        .get("start_time")
        .and_then(Value::as_str)
        .map(str::to_string);
    r.ended_at = obj
        .get("end_time")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use crate::import::{import, From};

    #[test]
    fn h30_overflows_from_cycles() {
        let r = import(
            include_bytes!("../../tests/fixtures/import/cyclictest-json-h30.json"),
            From::Auto,
            "h30.json",
        )
        .unwrap();
        assert_eq!(r.cpus.len(), 2);
        assert_eq!(r.cpus[0].stats.samples, 2000);
        assert_eq!(r.cpus[0].histogram.limit_ns, 30_000);
        assert_eq!(r.cpus[0].stats.max_ns, Some(368_000));
        assert!(r.cpus[0].stats.unknown_above > 0);
        assert_eq!(r.machine.kernel_release.as_deref(), Some("6.18.44-fc-v595"));
        assert!(r.command_line.as_deref().unwrap().contains("-h 30"));
        assert_eq!(r.config.interval_ns, Some(1_000_000));
    }

    #[test]
    fn no_histogram_is_refused_with_the_fix() {
        let e = import(
            include_bytes!("../../tests/fixtures/import/cyclictest-json-nohist.json"),
            From::CyclictestJson,
            "nohist.json",
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("nohist.json:"), "{s}");
        assert!(s.contains("without -h"), "{s}");
    }

    #[test]
    fn bad_json_names_the_line() {
        let e = import(b"{\n\"thread\": {\n}\n,,", From::CyclictestJson, "b.json").unwrap_err();
        assert!(e.to_string().starts_with("b.json:4: not valid JSON"), "{e}");
        let e = import(b"{\"thread\": {\"0\": {\"histogram\": {\"1\": 2}, \"cycles\": 1, \"min\": 1, \"max\": 1, \"avg\": 1}}}", From::CyclictestJson, "c.json").unwrap_err();
        assert!(
            e.to_string().contains("1 cycles but the histogram holds 2"),
            "{e}"
        );
    }
}
