//! `latlab report RUN --format rt-tests-json`: cyclictest's `--json` file from runs of every
//! back end and mode and from imports; read back by `latlab import --from cyclictest-json`
//! (the same figures) and by the logic of Linaro's `parse_rt_tests_results.py` (a rewrite in
//! `tests/fixtures/linaro/`, run with python3); and the runs it refuses, in one line.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod support;
use support::{edit_run_json, import_dir, import_fixture, latlab, read_json, sim_run_dir};

/// `report RUN --format rt-tests-json -o OUT`, parsed and checked against
/// docs/schema/rt-tests.schema.json.
fn rt_json(run: &Path, out: &Path) -> Value {
    latlab()
        .args(["report", "--format", "rt-tests-json", "-o"])
        .arg(out)
        .arg(run)
        .assert()
        .success();
    let v = read_json(out);
    let schema =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema/rt-tests.schema.json");
    let mut schemas = boon::Schemas::new();
    let mut c = boon::Compiler::new();
    let url = "file:///latlab/docs/schema/rt-tests.schema.json";
    c.add_resource(url, read_json(&schema)).unwrap();
    let idx = c.compile(url, &mut schemas).unwrap();
    if let Err(e) = schemas.validate(&v, idx) {
        panic!(
            "{}: not valid against rt-tests.schema.json:\n{e:#}",
            out.display()
        );
    }
    v
}

/// What the thread objects must say of run.json's CPUs: cycles, min, max (whole µs), avg
/// (µs, two decimals), cpu and the µs histogram below the limit.
fn check_threads(rec: &Value, j: &Value) {
    let cpus = rec["cpus"].as_array().unwrap();
    assert_eq!(j["num_threads"], cpus.len());
    for (i, c) in cpus.iter().enumerate() {
        let t = &j["thread"][i.to_string()];
        let h = &c["histogram"];
        assert_eq!(t["cycles"], h["count"], "thread {i}");
        assert_eq!(t["cpu"], c["cpu"]);
        assert_eq!(
            t["min"].as_u64().unwrap(),
            h["min_ns"].as_u64().unwrap() / 1000
        );
        assert_eq!(
            t["max"].as_u64().unwrap(),
            h["max_ns"].as_u64().unwrap() / 1000
        );
        let mean = c["mean_ns"].as_f64().unwrap() / 1000.0;
        assert!(
            (t["avg"].as_f64().unwrap() - mean).abs() < 0.01,
            "{t} {mean}"
        );
        let mut want = std::collections::BTreeMap::<u64, u64>::new();
        let limit = h["limit_ns"].as_u64().unwrap();
        for b in h["buckets"].as_array().unwrap() {
            let (lo, n) = (b[0].as_u64().unwrap(), b[1].as_u64().unwrap());
            if lo < limit {
                *want.entry(lo / 1000).or_default() += n;
            }
        }
        let got: std::collections::BTreeMap<u64, u64> = t["histogram"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.as_u64().unwrap()))
            .collect();
        assert_eq!(got, want, "thread {i}");
    }
}

fn linaro_parser() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/linaro/parse_rt_tests_results.py")
}

/// The lines Linaro's parser prints for FILE, or None without python3.
fn linaro_lines(file: &Path) -> Option<Vec<String>> {
    let out = match Command::new("python3")
        .arg(linaro_parser())
        .arg("latlab")
        .arg(file)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            support::cannot_run("rt_tests_json", &format!("python3 cannot run: {e}"));
            return None;
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect(),
    )
}

/// A sim run in each mode, one with a `--max-latency` it exceeds, a timerlat-style run (the
/// IRQ series of `--backend timerlat`, written into a sim record: that back end needs root)
/// and imports: the figures are run.json's, and Linaro's parser reads every file, passing the
/// test unless `--max-latency` failed.
#[test]
fn every_back_end_and_mode_reads_as_rt_tests_json() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("r");
    let mut runs = vec![
        (sim_run_dir(&r, "timer", &[]), "pass"),
        (sim_run_dir(&r, "wakeup", &["--mode", "wakeup"]), "pass"),
        (
            sim_run_dir(&r, "jitter", &["--mode", "jitter", "--cpus", "0"]),
            "pass",
        ),
        (
            sim_run_dir(&r, "audio", &["--mode", "audio", "--cpus", "0"]),
            "pass",
        ),
        (sim_run_dir(&r, "gated", &["--max-latency", "1us"]), "fail"),
    ];
    let tl = sim_run_dir(&r, "timerlat", &[]);
    edit_run_json(&tl, |v| {
        v["config"]["backend"] = "timerlat".into();
        for c in v["cpus"].as_array_mut().unwrap() {
            let h = c["histogram"].clone();
            c["mode"] = serde_json::json!({"irq": h, "timerlat_threads": "kernel"});
        }
    });
    runs.push((tl.clone(), "pass"));
    for f in [
        "cyclictest-h2000-2cpu.json",
        "rtla-timerlat-hist.txt",
        "pmqtest-S-q.txt",
    ] {
        runs.push((import_dir(&r, &import_fixture(f), f), "pass"));
    }
    for (i, (run, verdict)) in runs.iter().enumerate() {
        let rec = read_json(&run.join("run.json"));
        let out = t.path().join(format!("{i}.json"));
        let j = rt_json(run, &out);
        check_threads(&rec, &j);
        assert_eq!(
            j["return_code"],
            if *verdict == "pass" { 0 } else { 2 },
            "{run:?}"
        );
        let Some(lines) = linaro_lines(&out) else {
            return;
        };
        let n = rec["cpus"].as_array().unwrap().len();
        let irqs = j["num_irqs"].as_u64().unwrap_or(0) as usize;
        assert_eq!(lines.len(), 3 * n + 3 * irqs + 1, "{lines:?}");
        let t0 = &j["thread"]["0"];
        assert_eq!(lines[0], format!("t0-min-latency pass {} us", t0["min"]));
        assert_eq!(lines[2], format!("t0-max-latency pass {} us", t0["max"]));
        assert_eq!(lines.last().unwrap(), &format!("latlab {verdict}"));
    }
    let j = read_json(&t.path().join(format!("{}.json", 5)));
    assert_eq!(
        j["num_irqs"], j["num_threads"],
        "the timerlat run's IRQ series"
    );
}

/// latlab's file imported back (`import --from cyclictest-json`) gives the same figures: every
/// thread's cycles, min, max, avg and histogram, so the file rendered again is the same.
#[test]
fn round_trip_through_import() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("r");
    let run = sim_run_dir(&r, "rt", &["--sim-seed", "7"]);
    let a = rt_json(&run, &t.path().join("a.json"));
    let back = import_dir(&r, &t.path().join("a.json"), "back");
    let rec = read_json(&back.join("run.json"));
    assert_eq!(rec["source"], "cyclictest");
    let b = rt_json(&back, &t.path().join("b.json"));
    assert_eq!(a["thread"], b["thread"]);
    assert_eq!(a["num_threads"], b["num_threads"]);
    let orig = read_json(&run.join("run.json"));
    assert_eq!(rec["total"]["samples"], orig["total"]["samples"]);
    for (x, y) in orig["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .zip(rec["cpus"].as_array().unwrap())
    {
        assert_eq!(x["cpu"], y["cpu"]);
        let us = |v: &Value| v.as_u64().unwrap() / 1000;
        assert_eq!(us(&x["max_ns"]), us(&y["max_ns"]));
        assert_eq!(us(&x["min_ns"]), us(&y["min_ns"]));
    }
}

/// A run without per-CPU data (an import whose cpus[] is empty; `profile --no-measure`,
/// written here as its record is: mode `none`, no CPUs) and an output that cannot be written
/// (a read-only directory, a full device): one line, exit 1, nothing written, no panic.
#[test]
fn bad_input_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("r");
    let imp = import_dir(&r, &import_fixture("cyclictest-h2000-2cpu.json"), "nocpus");
    edit_run_json(&imp, |v| v["cpus"] = serde_json::json!([]));
    let prof = sim_run_dir(&r, "prof", &[]);
    edit_run_json(&prof, |v| {
        v["cpus"] = serde_json::json!([]);
        v["config"]["mode"] = "none".into();
    });
    for run in [&imp, &prof] {
        let out = t.path().join("x.json");
        let o = latlab()
            .args(["report", "--format", "rt-tests-json", "-o"])
            .arg(&out)
            .arg(run)
            .output()
            .unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("no per-CPU latency"), "{err}");
        assert!(!out.exists());
    }
    let run = sim_run_dir(&r, "ok", &[]);
    support::unwritable_outputs(&["report", "--format", "rt-tests-json"], &run, t.path());
}
