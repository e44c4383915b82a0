//! The results of `latlab scenario` (io-read, fairness) in the text report, read from the
//! record's `scenario` value. Every string in it came from the system or the user: cleaned.

use std::fmt::Write;

use latlab_core::units::Human;
use serde_json::Value;

use crate::text::clean;

fn ns(v: &Value) -> String {
    v.as_u64()
        .map(|n| Human(n).to_string())
        .unwrap_or_else(|| "-".into())
}

fn ratio(v: &Value) -> String {
    v.as_f64()
        .map(|r| format!("{r:.2}×"))
        .unwrap_or_else(|| "-".into())
}

fn s(v: &Value) -> String {
    match v {
        Value::String(t) => clean(t),
        Value::Null => "-".into(),
        v => clean(&v.to_string()),
    }
}

/// The text block, or nothing when the run is no scenario.
pub fn block(v: &Value) -> String {
    match v.get("kind").and_then(Value::as_str) {
        Some("fairness") => fairness(v),
        Some("io-read") => io_read(v),
        Some(k) => format!("\nScenario {}\n", clean(k)),
        None => String::new(),
    }
}

fn fairness(v: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nFairness: {} tasks, policy {} {}, CPUs {}, {}",
        s(&v["tasks"]),
        s(&v["policy"]),
        s(&v["priority"]),
        s(&v["cpus"]),
        ns(&v["elapsed_ns"])
    );
    let _ = writeln!(
        out,
        "  {:>4} {:>9} {:>12} {:>10} {:>14} {:>10}",
        "task", "tid", "CPU time", "CPU share", "work", "work share"
    );
    for t in v["per_task"].as_array().into_iter().flatten() {
        let pct = |k: &str| {
            t[k].as_f64()
                .map(|x| format!("{:.1} %", 100.0 * x))
                .unwrap_or_else(|| "-".into())
        };
        let _ = writeln!(
            out,
            "  {:>4} {:>9} {:>12} {:>10} {:>14} {:>10}",
            s(&t["task"]),
            s(&t["tid"]),
            ns(&t["cpu_ns"]),
            pct("cpu_share"),
            s(&t["work"]),
            pct("work_share")
        );
    }
    let f = |k: &str| {
        v[k].as_f64()
            .map(|x| format!("{x:.4}"))
            .unwrap_or_else(|| "-".into())
    };
    let _ = writeln!(
        out,
        "  Jain's index {} (CPU time), {} (work); max/min share {}",
        f("jain_index"),
        f("jain_index_work"),
        ratio(&v["max_min_ratio"])
    );
    if let Some(sl) = v.get("sleeper").filter(|s| !s.is_null()) {
        let _ = writeln!(
            out,
            "  sleeper every {}: {} wake-ups, {} missed, latency p50 {}, p99 {}, max {}",
            ns(&sl["interval_ns"]),
            s(&sl["wakeups"]),
            s(&sl["missed"]),
            ns(&sl["p50_ns"]),
            ns(&sl["p99_ns"]),
            ns(&sl["max_ns"])
        );
    }
    out
}

fn io_read(v: &Value) -> String {
    let mut out = String::new();
    let d = &v["device"];
    let _ = writeln!(
        out,
        "\nI/O read latency: {} file in {}-byte reads, {} small files; {} repeats",
        v["file_size"]
            .as_u64()
            .map(|b| format!("{} MiB", b >> 20))
            .unwrap_or_else(|| "-".into()),
        s(&v["read_size"]),
        s(&v["small_files"]),
        s(&v["repeat"])
    );
    let _ = writeln!(
        out,
        "  device {} (disk {}), I/O scheduler {}{}",
        s(&d["name"]),
        s(&d["disk"]),
        s(&v["iosched"]["during"]),
        match v["iosched"]["requested"].as_str() {
            Some(_) => format!(" (set for the run; was {})", s(&v["iosched"]["before"])),
            None => String::new(),
        }
    );
    if let Some(n) = d["note"].as_str() {
        let _ = writeln!(out, "  note: {}", clean(n));
    }
    let _ = writeln!(out, "  cache dropped by {}", s(&v["cache_drop"]));
    let _ = writeln!(
        out,
        "  {:<10} {:<12} {:>7} {:>11} {:>10} {:>10} {:>10}",
        "phase", "reader", "series", "total (med)", "p50", "p99", "max"
    );
    for p in v["phases"].as_array().into_iter().flatten() {
        for (k, what) in [("big", "big file"), ("small", "small files")] {
            let m = &p[k];
            if m.is_null() {
                continue;
            }
            let _ = writeln!(
                out,
                "  {:<10} {:<12} {:>7} {:>11} {:>10} {:>10} {:>10}",
                s(&p["name"]),
                what,
                s(&m["series"]),
                ns(&m["median_total_ns"]),
                ns(&m["p50_ns"]),
                ns(&m["p99_ns"]),
                ns(&m["max_ns"])
            );
        }
    }
    for r in v["ratios"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  {} / alone: big file total {}, p99 read {}; small files total {}, p99 file {}",
            s(&r["phase"]),
            ratio(&r["big_total"]),
            ratio(&r["big_p99"]),
            ratio(&r["small_total"]),
            ratio(&r["small_p99"])
        );
    }
    let _ = writeln!(
        out,
        "  (the table's CPU column above is the series number: the histograms are per reader and phase)"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_scenario_no_block_and_escaped_text() {
        assert_eq!(block(&Value::Null), "");
        let b = block(
            &json!({"kind": "fairness", "tasks": 2, "policy": "other\u{1b}[31m",
            "per_task": [{"task": 0, "cpu_share": 0.5}], "jain_index": 0.99}),
        );
        assert!(b.contains("0.9900") && b.contains("50.0 %"), "{b}");
        assert!(!b.contains('\u{1b}'), "{b}");
        let b =
            block(&json!({"kind": "io-read", "ratios": [{"phase": "io-write", "big_total": 2.5}]}));
        assert!(b.contains("io-write / alone: big file total 2.50×"), "{b}");
    }
}
