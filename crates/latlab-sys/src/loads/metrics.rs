//! The loads' own throughput, parsed from their logs, so two runs can be compared "at the same
//! load": stress-ng `--metrics-brief` bogo-ops/s, hackbench seconds per iteration, dbench MB/s,
//! dd MB/s. A log holds every iteration of a part (the supervisor appends across restarts);
//! figures are averaged over the iterations that reported one.

use serde_json::{json, Map, Value};

/// A load's throughput: the headline figure, its unit, and per-tool details.
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    pub value: f64,
    pub unit: &'static str,
    pub iterations: usize,
    pub details: Map<String, Value>,
}

/// Pick the parser from the command, then parse the log.
pub fn parse(command: &str, log: &str) -> Option<Throughput> {
    if command.contains("stress-ng") {
        stress_ng(log)
    } else if command.contains("hackbench") {
        hackbench(log)
    } else if command.contains("dbench") {
        dbench(log)
    } else if command.contains("dd ") {
        dd(log)
    } else {
        None
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Every `--metrics-brief` table in the log (one per stress-ng run; the supervisor appends
/// restarts to the same log), e.g.
/// `stress-ng: metrc: [pid] cpu  2126  1.45  1.45  0.00  1461.32  1461.73` (0.15 says
/// `metrc:`, older ones `info:`): per stressor, its bogo ops (all instances) and real time
/// (the instances' mean run time) are summed over the runs, and bogo-ops/s = Σ ops / Σ real
/// time — each run weighted by how long it ran. The headline is the sum over stressors.
pub fn stress_ng(log: &str) -> Option<Throughput> {
    let mut tables = 0usize;
    let mut per: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    let mut in_table = false;
    for line in log.lines() {
        let Some(rest) = line
            .strip_prefix("stress-ng:")
            .and_then(|l| l.split_once(']'))
            .map(|x| x.1)
        else {
            in_table = false;
            continue;
        };
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.first() == Some(&"stressor") && rest.contains("bogo ops") {
            in_table = true;
            tables += 1;
            continue;
        }
        if !in_table || rest.contains("(secs)") {
            continue;
        }
        let nums: Option<Vec<f64>> = w
            .get(1..)
            .and_then(|x| x.iter().map(|v| v.parse().ok()).collect());
        match nums {
            Some(n) if n.len() >= 6 => {
                let e = per.entry(w[0].to_string()).or_default();
                e.0 += n[0];
                e.1 += n[1];
            }
            _ => in_table = false,
        }
    }
    if tables == 0 || per.is_empty() {
        return None;
    }
    let mut rates = Map::new();
    let mut ops = Map::new();
    let mut total = 0.0;
    for (k, (o, t)) in &per {
        let r = if *t > 0.0 { o / t } else { 0.0 };
        total += r;
        rates.insert(k.clone(), json!(r));
        ops.insert(k.clone(), json!(o));
    }
    let mut details = Map::new();
    details.insert("bogo_ops_per_s".into(), Value::Object(rates));
    details.insert("bogo_ops".into(), Value::Object(ops));
    Some(Throughput {
        value: total,
        unit: "bogo-ops/s",
        iterations: tables,
        details,
    })
}

/// `Time: 9.700` per hackbench iteration: seconds per iteration (lower is busier).
pub fn hackbench(log: &str) -> Option<Throughput> {
    let t: Vec<f64> = log
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Time:")?.trim().parse().ok())
        .collect();
    Some(Throughput {
        value: mean(&t)?,
        unit: "s/iteration",
        iterations: t.len(),
        details: Map::new(),
    })
}

/// dbench's figure per run: the final `Throughput 246.3 MB/sec  40 clients  40 procs
/// max_latency=497.000 ms` when it ran to its end; when latlab stopped it first (it prints
/// nothing on SIGTERM), its last progress line, `   4     60521   263.32 MB/sec  execute   2 sec
/// latency 85.207 ms`, whose MB/sec is dbench's own running average over the phase — the
/// execute phase, or the warm-up when it never got that far. A run starts at
/// `dbench version`; `dbench_runs` in the details says which figure each run gave.
pub fn dbench(log: &str) -> Option<Throughput> {
    #[derive(Default)]
    struct Run {
        last: Option<(f64, &'static str)>,
        fin: Option<f64>,
    }
    let mut runs: Vec<Run> = Vec::new();
    let mut maxlat: Vec<f64> = Vec::new();
    for l in log.lines() {
        if l.starts_with("dbench version") || runs.is_empty() {
            runs.push(Run::default());
            if l.starts_with("dbench version") {
                continue;
            }
        }
        let run = runs.last_mut().expect("pushed above");
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() == Some(&"Throughput") && w.get(2) == Some(&"MB/sec") {
            if let Ok(v) = w[1].parse::<f64>() {
                run.fin = Some(v);
            }
            if let Some(m) = w.iter().find_map(|x| x.strip_prefix("max_latency=")) {
                if let Ok(v) = m.parse() {
                    maxlat.push(v);
                }
            }
        } else if w.len() >= 6 && w[3] == "MB/sec" && w[0].parse::<u32>().is_ok() {
            let phase = match w[4] {
                "execute" => "execute",
                "warmup" => "warmup",
                _ => continue,
            };
            if let Ok(v) = w[2].parse::<f64>() {
                // A warm-up figure never replaces one of the execute phase.
                if phase == "execute" || run.last.is_none_or(|x| x.1 == "warmup") {
                    run.last = Some((v, phase));
                }
            }
        }
    }
    let mut mbs = Vec::new();
    let mut from = Vec::new();
    for r in &runs {
        if let Some(v) = r.fin {
            mbs.push(v);
            from.push("final");
        } else if let Some((v, phase)) = r.last {
            mbs.push(v);
            from.push(phase);
        }
    }
    let mut details = Map::new();
    if let Some(m) = maxlat.iter().cloned().reduce(f64::max) {
        details.insert("max_latency_ms".into(), json!(m));
    }
    details.insert("dbench_runs".into(), json!(from));
    Some(Throughput {
        value: mean(&mbs)?,
        unit: "MB/s",
        iterations: mbs.len(),
        details,
    })
}

/// `1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.5 s, 2.1 GB/s` → MB/s.
pub fn dd(log: &str) -> Option<Throughput> {
    let mut v = Vec::new();
    for l in log.lines() {
        if !l.contains(" copied, ") {
            continue;
        }
        let last = l.rsplit(", ").next().unwrap_or("");
        let mut w = last.split_whitespace();
        let (Some(n), Some(u)) = (w.next(), w.next()) else {
            continue;
        };
        let Ok(n) = n.replace(',', ".").parse::<f64>() else {
            continue;
        };
        let f = match u {
            "B/s" => 1e-6,
            "kB/s" => 1e-3,
            "MB/s" => 1.0,
            "GB/s" => 1e3,
            "TB/s" => 1e6,
            _ => continue,
        };
        v.push(n * f);
    }
    Some(Throughput {
        value: mean(&v)?,
        unit: "MB/s",
        iterations: v.len(),
        details: Map::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real logs captured on the 2-vCPU VM (stress-ng 0.15.06, dbench 4.00).
    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/loads")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Three restarts of `stress-ng --cpu 1 --udp 1 --timeout 1s` appended to one log: every
    /// table counts, each stressor's rate is Σ bogo ops / Σ real time.
    #[test]
    fn stress_ng_restarts_are_summed_per_stressor() {
        let t = parse("stress-ng --cpu 1", &fixture("stress-ng-restarts.log")).unwrap();
        assert_eq!(t.iterations, 3);
        assert_eq!(t.unit, "bogo-ops/s");
        assert_eq!(t.details["bogo_ops"]["cpu"], json!(222.0 + 850.0 + 492.0));
        assert_eq!(
            t.details["bogo_ops"]["udp"],
            json!(22045.0 + 90413.0 + 144927.0)
        );
        let cpu = t.details["bogo_ops_per_s"]["cpu"].as_f64().unwrap();
        assert!((cpu - 1564.0 / 2.55).abs() < 1e-9, "{cpu}");
        let udp = t.details["bogo_ops_per_s"]["udp"].as_f64().unwrap();
        assert!((udp - 257385.0 / 3.02).abs() < 1e-6, "{udp}");
        assert!((t.value - (cpu + udp)).abs() < 1e-6, "{t:?}");
    }

    /// stress-mix stopped by latlab's SIGTERM: stress-ng still prints its table (the last
    /// line has no newline), with four stressors.
    #[test]
    fn stress_ng_stopped_by_sigterm() {
        let t = parse("stress-ng --cpu 4", &fixture("stress-ng-mix-sigterm.log")).unwrap();
        assert_eq!(t.iterations, 1);
        let per = t.details["bogo_ops_per_s"].as_object().unwrap();
        assert_eq!(
            per.keys().collect::<Vec<_>>(),
            vec!["cpu", "io", "sock", "vm"]
        );
        // 2129 ops in 3.01 s: the log's own 708.23 bogo-ops/s, within the rounding of the
        // printed real time (±0.005 s of 3.01 s).
        let cpu = per["cpu"].as_f64().unwrap();
        assert!((cpu - 708.23).abs() < 708.23 * 0.002, "{per:?}");
        let sum: f64 = per.values().map(|v| v.as_f64().unwrap()).sum();
        assert!((t.value - sum).abs() < 1e-9);
        // No table: no figure (not a zero).
        assert!(stress_ng("stress-ng: info:  [1] dispatching hogs: 1 cpu\n").is_none());
    }

    #[test]
    fn dbench_final_and_stopped_runs() {
        let t = parse("dbench -t 3 4", &fixture("dbench-complete.log")).unwrap();
        assert_eq!(t.value, 574.175);
        assert_eq!(t.details["max_latency_ms"], json!(20.044));
        assert_eq!(t.details["dbench_runs"], json!(["final"]));
        // Stopped in the execute phase: its last running average, not the warm-up's.
        let t = parse("dbench", &fixture("dbench-sigterm-execute.log")).unwrap();
        assert_eq!(t.value, 263.32);
        assert_eq!(t.details["dbench_runs"], json!(["execute"]));
        // Stopped during the warm-up: the warm-up figure, and the record says so.
        let t = parse("dbench", &fixture("dbench-sigterm-warmup.log")).unwrap();
        assert_eq!(t.value, 261.76);
        assert_eq!(t.details["dbench_runs"], json!(["warmup"]));
        // Three runs in one log (the supervisor appends restarts).
        let log = fixture("dbench-complete.log")
            + &fixture("dbench-sigterm-warmup.log")
            + &fixture("dbench-sigterm-execute.log");
        let t = parse("dbench", &log).unwrap();
        assert_eq!(t.iterations, 3);
        assert!((t.value - (574.175 + 261.76 + 263.32) / 3.0).abs() < 1e-9);
        assert!(parse("dbench", "dbench version 4.00\nreleasing clients\n").is_none());
    }

    #[test]
    fn hackbench_and_dd() {
        let h = parse(
            "hackbench -P",
            "Running in process mode\nTime: 9.5\nTime: 10.5\n",
        )
        .unwrap();
        assert_eq!((h.value, h.iterations, h.unit), (10.0, 2, "s/iteration"));
        let x = parse(
            "dd if=/dev/zero",
            "4096+0 records out\n4294967296 bytes (4.3 GB, 4.0 GiB) copied, 2 s, 2.1 GB/s\n1 bytes copied, 1 s, 500 MB/s\n",
        )
        .unwrap();
        assert_eq!(x.value, 1300.0);
        assert!(parse("sleep 1", "Time: 1").is_none());
        assert!(parse("hackbench", "killed").is_none());
    }
}
