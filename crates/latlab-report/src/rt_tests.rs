//! `latlab report RUN --format rt-tests-json`: the JSON file rt-tests' `--json` writes, in
//! cyclictest's layout (rt-tests 2.x, `file_version` 1), from a run of any back end and mode
//! or an import, so scripts that read rt-tests JSON (Linaro's `parse_rt_tests_results.py`,
//! LKFT's, SQUAD's) read latlab's runs unchanged.
//!
//! One `thread` per measured CPU (series, for imports), in the record's order: `cycles` (its
//! samples), `min`, `max` (µs, whole, as cyclictest truncates), `avg` (µs, two decimals),
//! `cpu`, `node` (0: the record does not keep NUMA nodes) and `histogram`: the samples below
//! the run's histogram limit by whole µs (`"17": 4`, the non-empty ones), the rest overflows
//! (`cycles` minus the histogram's samples, as cyclictest's `-h`). The keys `"cmdline:"` and
//! `"rt_test_version:"` end with a colon as cyclictest's do. `return_code` is what
//! `latlab run` exited with: 2 when a sample exceeded `--max-latency`, else 0. A timerlat run
//! adds rtla's `num_irqs` and `irq` (the IRQ latency per CPU, as Linaro's `parse_rtla.py`
//! writes them).

use std::fmt::Write as _;

use latlab_core::hist::HistogramRecord;
use latlab_core::model::RunModel;

/// cyclictest's minimum before any sample (`stats->min = 1000000`).
const NO_MIN: u64 = 1_000_000;

/// Why a run has nothing for `format` (a lab format: `rt-tests-json`, `lava`, `kcidb`), or
/// None when it has. A run without a measured CPU (`latlab profile --no-measure`, a record
/// whose `cpus` is empty) has no figures to give.
pub fn refusal(m: &RunModel, format: &str) -> Option<String> {
    if m.record.cpus.is_empty() {
        return Some(format!(
            "no per-CPU latency in this run (a `latlab profile --no-measure` run, or a record whose cpus[] is empty): the {format} format gives each CPU's figures; use --format text, markdown, json or html"
        ));
    }
    None
}

/// A JSON string.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// An RFC 3339 time as cyclictest writes its times (`Mon, 02 Jan 2006 15:04:05 +0000`); any
/// other text (an import's own) as it is.
fn rt_time(t: Option<&str>) -> String {
    match t {
        Some(s) => s
            .parse::<jiff::Timestamp>()
            .map(|ts| ts.strftime("%a, %d %b %Y %H:%M:%S +0000").to_string())
            .unwrap_or_else(|_| s.to_string()),
        None => String::new(),
    }
}

/// A thread's (or IRQ's) object: histogram, cycles, min, max, avg, cpu, node.
fn series(s: &mut String, key: usize, cpu: u32, h: &HistogramRecord, last: bool) {
    let _ = writeln!(s, "    \"{key}\": {{");
    // Samples below the histogram's limit, by whole µs (a finer bucket adds to its µs).
    let mut rows: Vec<(u64, u64)> = Vec::new();
    for &[lower, n] in &h.buckets {
        if lower >= h.limit_ns || n == 0 {
            continue;
        }
        let us = lower / 1000;
        match rows.last_mut() {
            Some((u, c)) if *u == us => *c += n,
            _ => rows.push((us, n)),
        }
    }
    if rows.is_empty() {
        let _ = writeln!(s, "      \"histogram\": {{      }},");
    } else {
        let _ = writeln!(s, "      \"histogram\": {{");
        for (k, (us, n)) in rows.iter().enumerate() {
            let comma = if k + 1 < rows.len() { "," } else { "" };
            let _ = writeln!(s, "        \"{us}\": {n}{comma}");
        }
        let _ = writeln!(s, "      }},");
    }
    let (min, max, avg) = if h.count == 0 {
        (NO_MIN, 0, 0.0)
    } else {
        let avg = h.sum_ns as f64 / h.count as f64 / 1000.0;
        (h.min_ns / 1000, h.max_ns / 1000, avg)
    };
    let _ = writeln!(s, "      \"cycles\": {},", h.count);
    let _ = writeln!(s, "      \"min\": {min},");
    let _ = writeln!(s, "      \"max\": {max},");
    let _ = writeln!(s, "      \"avg\": {avg:.2},");
    let _ = writeln!(s, "      \"cpu\": {cpu},");
    let _ = writeln!(s, "      \"node\": 0");
    let _ = writeln!(s, "    }}{}", if last { "" } else { "," });
}

/// The rt-tests JSON file of a run (see the module doc). A run without CPUs gives threads
/// `{}`: callers refuse it first ([`refusal`]).
pub fn render(m: &RunModel) -> Vec<u8> {
    let r = &m.record;
    let mc = &r.machine;
    let code = match latlab_core::gates::limit::max_latency(r) {
        Some(v) if !v.passed => 2,
        _ => 0,
    };
    let opt = |o: &Option<String>| js(o.as_deref().unwrap_or(""));
    let mut s = String::new();
    let _ = writeln!(s, "{{");
    let _ = writeln!(s, "  \"file_version\": 1,");
    let _ = writeln!(s, "  \"cmdline:\": {},", opt(&r.command_line));
    let version = r
        .tool_version
        .clone()
        .unwrap_or_else(|| format!("latlab {}", env!("CARGO_PKG_VERSION")));
    let _ = writeln!(s, "  \"rt_test_version:\": {},", js(&version));
    let _ = writeln!(
        s,
        "  \"start_time\": {},",
        js(&rt_time(r.started_at.as_deref()))
    );
    let _ = writeln!(
        s,
        "  \"end_time\": {},",
        js(&rt_time(r.ended_at.as_deref()))
    );
    let _ = writeln!(s, "  \"return_code\": {code},");
    let _ = writeln!(s, "  \"sysinfo\": {{");
    let _ = writeln!(s, "    \"sysname\": \"Linux\",");
    let _ = writeln!(s, "    \"nodename\": {},", opt(&mc.hostname));
    let _ = writeln!(s, "    \"release\": {},", opt(&mc.kernel_release));
    let _ = writeln!(s, "    \"version\": {},", opt(&mc.kernel_version));
    let _ = writeln!(s, "    \"machine\": {},", opt(&mc.arch));
    let rt = u8::from(mc.preemption.as_deref() == Some("rt"));
    let _ = writeln!(s, "    \"realtime\": {rt}");
    let _ = writeln!(s, "  }},");
    let irqs: Vec<(u32, &HistogramRecord)> = r
        .cpus
        .iter()
        .filter_map(|c| Some((c.cpu, c.mode.as_ref()?.irq.as_ref()?)))
        .collect();
    let _ = writeln!(s, "  \"num_threads\": {},", r.cpus.len());
    if !irqs.is_empty() {
        let _ = writeln!(s, "  \"num_irqs\": {},", irqs.len());
    }
    let _ = writeln!(s, "  \"resolution_in_ns\": 0,");
    let _ = writeln!(s, "  \"thread\": {{");
    for (i, c) in r.cpus.iter().enumerate() {
        series(&mut s, i, c.cpu, &c.histogram, i + 1 == r.cpus.len());
    }
    if irqs.is_empty() {
        let _ = writeln!(s, "  }}");
    } else {
        let _ = writeln!(s, "  }},");
        let _ = writeln!(s, "  \"irq\": {{");
        for (i, (cpu, h)) in irqs.iter().enumerate() {
            series(&mut s, i, *cpu, h, i + 1 == irqs.len());
        }
        let _ = writeln!(s, "  }}");
    }
    let _ = writeln!(s, "}}");
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use latlab_core::hist::{Histogram, Layout};
    use latlab_core::modes::CpuMode;
    use latlab_core::record::*;

    use super::*;

    fn model(limit: Option<u64>) -> RunModel {
        let mut h = Histogram::new(Layout::new(1_000, 100_000).unwrap());
        for v in [1_500, 2_000, 2_999, 250_000] {
            h.record(v);
        }
        let mut irq = Histogram::new(Layout::new(1_000, 100_000).unwrap());
        irq.record(3_000);
        let mut c = CpuRecord::new(3, h.to_record());
        c.mode = Some(CpuMode {
            irq: Some(irq.to_record()),
            ..CpuMode::default()
        });
        let config = RunConfig {
            max_latency_ns: limit,
            ..RunConfig::default()
        };
        let mut r = RunRecord::new("t", Source::Latlab, config, vec![c]);
        r.started_at = Some("2026-01-02T15:04:05Z".into());
        r.machine.preemption = Some("rt".into());
        r.machine.hostname = Some("box \"7\"".into());
        r.refresh().unwrap();
        RunModel::new(r).unwrap()
    }

    #[test]
    fn cyclictests_layout_with_overflows_and_irqs() {
        let j = String::from_utf8(render(&model(None))).unwrap();
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["file_version"], 1);
        assert_eq!(v["start_time"], "Fri, 02 Jan 2026 15:04:05 +0000");
        assert_eq!(v["return_code"], 0);
        assert_eq!(v["sysinfo"]["realtime"], 1);
        assert_eq!(v["sysinfo"]["nodename"], "box \"7\"");
        let t = &v["thread"]["0"];
        assert_eq!(t["cycles"], 4);
        assert_eq!((t["min"].as_u64(), t["max"].as_u64()), (Some(1), Some(250)));
        assert_eq!(t["avg"], 64.12);
        assert_eq!(t["cpu"], 3);
        // 1.5 µs in bucket 1, 2 and 2.999 µs in bucket 2; 250 µs is an overflow.
        assert_eq!(t["histogram"], serde_json::json!({"1": 1, "2": 2}));
        assert_eq!(v["num_irqs"], 1);
        assert_eq!(v["irq"]["0"]["max"], 3);
        assert!(j.contains("  \"cmdline:\": \"\",\n  \"rt_test_version:\": \"latlab "));
    }

    #[test]
    fn return_code_is_the_max_latency_verdict() {
        let v = |l| {
            let b = render(&model(l));
            serde_json::from_slice::<serde_json::Value>(&b).unwrap()["return_code"].clone()
        };
        assert_eq!(v(Some(250_000)), 0);
        assert_eq!(v(Some(249_999)), 2);
    }

    #[test]
    fn a_run_without_cpus_is_refused() {
        let mut r = RunRecord::new("t", Source::Latlab, RunConfig::default(), vec![]);
        r.refresh().unwrap();
        let m = RunModel::new(r).unwrap();
        assert!(refusal(&m, "lava").unwrap().contains("lava format"));
        assert!(refusal(&model(None), "lava").is_none());
    }
}
