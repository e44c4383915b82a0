//! `latlab history` names the run from which a machine's p99.9 moved beyond its run-to-run
//! noise (issue 29 §3): cyclictest results of known p99.9 imported into a results database,
//! one a day, the kernel changing in the middle; text, JSON and HTML.

use std::path::Path;

use serde_json::Value;

mod support;
use support::latlab;

/// A cyclictest `--json` file of one thread: 1 000 wake-ups, 998 at 20 µs and 2 at `tail_us`
/// (so p99.9 is `tail_us`), started on day `day` of November 2026, on `release`.
fn cyclictest_json(day: u32, release: &str, tail_us: u32) -> String {
    // 1 November 2026 is a Sunday (RFC 2822 dates name their weekday, and it is checked).
    let wd = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][(day as usize - 1) % 7];
    format!(
        r##"{{
  "file_version": 1,
  "cmdline:": "cyclictest -m -t1 -p 95 -i 1000 -l 1000 -q -h 200 --json=x.json",
  "rt_test_version:": "2.40",
  "start_time": "{wd}, {day:02} Nov 2026 03:52:17 +0000",
  "end_time": "{wd}, {day:02} Nov 2026 03:52:18 +0000",
  "return_code": 0,
  "sysinfo": {{"sysname": "Linux", "nodename": "lab-board", "release": "{release}",
    "version": "#1 SMP PREEMPT_RT", "machine": "x86_64", "realtime": 1}},
  "num_threads": 1,
  "resolution_in_ns": 0,
  "thread": {{
    "0": {{"histogram": {{"20": 998, "{tail_us}": 2}}, "cycles": 1000, "min": 20,
      "max": {tail_us}, "avg": 20.1, "cpu": 0, "node": 0}}
  }}
}}
"##
    )
}

/// Imports one file per (release, p99.9) into `db`, a day apart, and returns `history`'s
/// JSON and the run ids in import order.
fn imported(dir: &Path, db: &str, runs: &[(&str, u32)]) -> (Value, Vec<String>) {
    let mut ids = Vec::new();
    for (i, (release, tail)) in runs.iter().enumerate() {
        let f = dir.join(format!("ct-{i:02}.json"));
        std::fs::write(&f, cyclictest_json(i as u32 + 1, release, *tail)).unwrap();
        let res = dir.join(format!("res-{i:02}"));
        let out = latlab()
            .args(["import", "--db", db])
            .arg(&f)
            .arg("--results")
            .arg(&res)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d = support::only_run_dir(&res);
        let rec = support::read_json(&d.join("run.json"));
        ids.push(rec["run_id"].as_str().unwrap().to_string());
    }
    let out = latlab()
        .args(["history", "--format", "json", "--db", db])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (serde_json::from_slice(&out.stdout).unwrap(), ids)
}

fn stdout(args: &[&str]) -> String {
    let out = latlab().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_run_where_a_kernel_got_worse_is_named() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("runs.sqlite");
    let db = db.to_str().unwrap();
    // Ten runs of 6.1.2 at 43-47 µs, then six of 6.1.5 at 78-82 µs.
    let before = [45, 44, 46, 45, 43, 47, 45, 46, 44, 45];
    let after = [80, 78, 82, 79, 81, 80];
    let runs: Vec<(&str, u32)> = before
        .iter()
        .map(|&v| ("6.1.2-rt", v))
        .chain(after.iter().map(|&v| ("6.1.5-rt", v)))
        .collect();
    let (h, ids) = imported(t.path(), db, &runs);
    assert_eq!(h["runs"].as_array().unwrap().len(), 16);
    let cps = h["change_points"].as_array().unwrap();
    assert_eq!(cps.len(), 1, "{cps:#?}");
    let c = &cps[0];
    assert_eq!(c["run_id"], ids[10].as_str(), "the first run of 6.1.5");
    assert_eq!(
        (c["runs_before"].as_u64(), c["runs_after"].as_u64()),
        (Some(10), Some(6))
    );
    assert_eq!(c["kernel_before"], "6.1.2-rt");
    assert_eq!(c["kernel_after"], "6.1.5-rt");
    assert_eq!(c["statistic"], "p99.9");
    assert_eq!(c["machine"], "lab-board");
    assert_eq!(c["before_ns"], 45_000);
    assert_eq!(c["after_ns"], 80_000);
    assert!(c["p_value"].as_f64().unwrap() <= 0.05);

    let text = stdout(&["history", "--db", db]);
    assert!(text.contains("Change points"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("lab-board: p99.9"))
        .unwrap();
    assert!(line.contains("45 µs → 80 µs"), "{line}");
    assert!(line.contains(&ids[10][..8]), "{line}");
    assert!(line.contains("kernel 6.1.5-rt; before: 6.1.2-rt"), "{line}");
    let html = stdout(&["history", "--format", "html", "--db", db]);
    assert!(html.contains("<h2>Change points</h2>"));
}

#[test]
fn runs_that_only_scatter_have_no_change_point() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("runs.sqlite");
    let db = db.to_str().unwrap();
    // The same kernel, p99.9 between 40 and 60 µs in no order.
    let vals = [
        45, 58, 41, 52, 60, 44, 49, 55, 40, 57, 47, 51, 43, 59, 46, 53,
    ];
    let runs: Vec<(&str, u32)> = vals.iter().map(|&v| ("6.1.2-rt", v)).collect();
    let (h, _) = imported(t.path(), db, &runs);
    assert_eq!(h["runs"].as_array().unwrap().len(), 16);
    assert_eq!(h["change_points"], serde_json::json!([]));
    let text = stdout(&["history", "--db", db]);
    assert!(!text.contains("Change points"), "{text}");
}
