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

/// `stress-ng: metrc: [pid] cpu 2126 1.45 1.45 0.00 1461.32 1461.73` (0.15 says `metrc:`,
/// older ones `info:`): the real-time bogo-ops/s column, summed over stressors per run.
pub fn stress_ng(log: &str) -> Option<Throughput> {
    let mut runs: Vec<f64> = Vec::new();
    let mut per: Map<String, Value> = Map::new();
    let mut per_sum: std::collections::BTreeMap<String, (f64, usize)> = Default::default();
    let mut in_table = false;
    let mut cur = 0.0;
    for line in log.lines() {
        if !line.starts_with("stress-ng:") {
            continue;
        }
        let Some(rest) = line.split_once(']').map(|x| x.1) else {
            continue;
        };
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.first() == Some(&"stressor") && rest.contains("bogo ops") {
            if in_table {
                runs.push(cur);
            }
            in_table = true;
            cur = 0.0;
            continue;
        }
        if !in_table {
            continue;
        }
        if w.len() == 7 && w[1..].iter().all(|x| x.parse::<f64>().is_ok()) {
            let ops: f64 = w[5].parse().unwrap_or(0.0);
            cur += ops;
            let e = per_sum.entry(w[0].to_string()).or_default();
            e.0 += ops;
            e.1 += 1;
        } else if !rest.contains("(secs)") {
            runs.push(cur);
            in_table = false;
        }
    }
    if in_table {
        runs.push(cur);
    }
    for (k, (s, n)) in per_sum {
        per.insert(k, json!(s / n as f64));
    }
    let mut details = Map::new();
    details.insert("bogo_ops_per_s".into(), Value::Object(per));
    Some(Throughput {
        value: mean(&runs)?,
        unit: "bogo-ops/s",
        iterations: runs.len(),
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

/// `Throughput 246.3 MB/sec  40 clients  40 procs  max_latency=497.000 ms`.
pub fn dbench(log: &str) -> Option<Throughput> {
    let mut mbs = Vec::new();
    let mut maxlat: Vec<f64> = Vec::new();
    for l in log.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() == Some(&"Throughput") && w.get(2) == Some(&"MB/sec") {
            if let Ok(v) = w[1].parse::<f64>() {
                mbs.push(v);
            }
            if let Some(m) = w.iter().find_map(|x| x.strip_prefix("max_latency=")) {
                if let Ok(v) = m.parse() {
                    maxlat.push(v);
                }
            }
        }
    }
    let mut details = Map::new();
    if let Some(m) = maxlat.iter().cloned().reduce(f64::max) {
        details.insert("max_latency_ms".into(), json!(m));
    }
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

    #[test]
    fn stress_ng_two_runs() {
        let log = "stress-ng: info:  [9070] dispatching hogs: 1 cpu
stress-ng: metrc: [9070] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [9070]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [9070] cpu                2126      1.45      1.45      0.00      1461.32        1461.73
stress-ng: metrc: [9070] sock                 10      1.45      1.45      0.00        38.68          1.00
stress-ng: info:  [9070] successful run completed in 1.46s
stress-ng: metrc: [9080] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [9080]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [9080] cpu                2126      1.45      1.45      0.00      1300.00        1461.73
stress-ng: metrc: [9080] sock                 10      1.45      1.45      0.00        0.00          1.00
";
        let t = parse("stress-ng --cpu 1", log).unwrap();
        assert_eq!(t.iterations, 2);
        assert!((t.value - (1500.0 + 1300.0) / 2.0).abs() < 1e-6, "{t:?}");
        let cpu = t.details["bogo_ops_per_s"]["cpu"].as_f64().unwrap();
        assert!((cpu - 1380.66).abs() < 1e-9, "{cpu}");
    }

    #[test]
    fn hackbench_dbench_dd() {
        let h = parse(
            "hackbench -P",
            "Running in process mode\nTime: 9.5\nTime: 10.5\n",
        )
        .unwrap();
        assert_eq!((h.value, h.iterations, h.unit), (10.0, 2, "s/iteration"));
        let d = parse(
            "dbench 40",
            "Throughput 246.3 MB/sec  40 clients  40 procs  max_latency=497.000 ms\n",
        )
        .unwrap();
        assert_eq!(d.value, 246.3);
        assert_eq!(d.details["max_latency_ms"], json!(497.0));
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
