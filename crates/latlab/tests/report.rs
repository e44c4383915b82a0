//! CLI tests of `latlab import` (every fixture format, errors with file:line, round trip
//! through latlab's own histogram.txt) and `latlab compare`.

use std::path::{Path, PathBuf};

mod support;
use support::latlab;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-core/tests/fixtures/import")
        .join(name)
}

/// Import a file, return the run directory the command printed.
fn import(results: &Path, file: &Path, extra: &[&str]) -> PathBuf {
    let out = latlab()
        .arg("import")
        .arg(file)
        .arg("--results")
        .arg(results)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

#[test]
fn imports_every_fixture_format() {
    let t = tempfile::tempdir().unwrap();
    for (f, source, samples) in [
        ("cyclictest-h100.txt", "cyclictest", 5983),
        ("cyclictest-H50-histfile.txt", "cyclictest", 0),
        ("cyclictest-h2000-2cpu.json", "cyclictest", 19984),
        ("cyclictest-v.txt", "cyclictest", 40),
        ("rtla-timerlat-hist.txt", "rtla", 169_887 + 166_415),
        ("morton-lowlatency.hist", "realfeel", 1_276_437),
    ] {
        let d = import(t.path(), &fixture(f), &["--label", "x"]);
        let v = run_json(&d);
        assert_eq!(v["source"], source, "{f}");
        assert_eq!(v["config"]["backend"], "import");
        if samples > 0 {
            assert_eq!(v["total"]["samples"], samples, "{f}");
        }
        assert!(d.join("summary.txt").is_file() && d.join("histogram.txt").is_file());
        let name = d.file_name().unwrap().to_str().unwrap();
        // <UTC YYYYmmddTHHMMSSZ>-<label>, a -N suffix when two land in the same second.
        assert_eq!(&name[8..9], "T", "{name}");
        assert!(name[15..].starts_with("Z-x"), "{name}");
    }
}

#[test]
fn errors_name_file_and_line() {
    let t = tempfile::tempdir().unwrap();
    let bad = t.path().join("bad.hist");
    std::fs::write(&bad, "0.0 10\n0.1 oops\n").unwrap();
    latlab()
        .args(["import", "--from", "realfeel"])
        .arg(&bad)
        .arg("--results")
        .arg(t.path())
        .assert()
        .code(1)
        .stderr(predicates::str::contains(format!(
            "latlab: error: {}:2: count: expected a non-negative integer, found 'oops'",
            bad.display()
        )));
    latlab()
        .arg("import")
        .arg(fixture("cyclictest-json-nohist.json"))
        .arg("--results")
        .arg(t.path())
        .assert()
        .code(1)
        .stderr(predicates::str::contains("without -h"));
}

#[test]
fn round_trip_through_histogram_txt() {
    // latlab's own histogram.txt (cyclictest -h format) imported back: same statistics.
    let t = tempfile::tempdir().unwrap();
    let a = import(
        t.path(),
        &fixture("cyclictest-h2000-2cpu.txt"),
        &["--label", "a"],
    );
    let b = import(t.path(), &a.join("histogram.txt"), &["--label", "b"]);
    let (va, vb) = (run_json(&a), run_json(&b));
    for k in [
        "samples",
        "min_ns",
        "max_ns",
        "median_ns",
        "p90_ns",
        "p99_ns",
        "p999_ns",
        "p9999_ns",
        "p99999_ns",
        "below",
    ] {
        assert_eq!(va["total"][k], vb["total"][k], "{k}");
        assert_eq!(va["cpus"][1][k], vb["cpus"][1][k], "cpu 1 {k}");
    }
    assert_eq!(
        va["cpus"][0]["histogram"]["buckets"],
        vb["cpus"][0]["histogram"]["buckets"]
    );
    // The trailer means what cyclictest's means: `# Total:` sums the bucket rows (overflows
    // excluded), overflows on their own line — the same lines as the original file.
    let trailer = |p: &Path, k: &str| {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .find(|l| l.starts_with(k))
            .map(str::to_string)
    };
    let orig = fixture("cyclictest-h2000-2cpu.txt");
    let ours = a.join("histogram.txt");
    for k in ["# Total:", "# Histogram Overflows:", "# Max Latencies:"] {
        assert_eq!(trailer(&orig, k), trailer(&ours, k), "{k}");
        assert!(trailer(&ours, k).is_some(), "{k}");
    }
}

#[test]
fn compare_formats() {
    let t = tempfile::tempdir().unwrap();
    let a = import(
        t.path(),
        &fixture("cyclictest-h2000-2cpu.txt"),
        &["--label", "idle"],
    );
    let b = import(
        t.path(),
        &fixture("cyclictest-h100.txt"),
        &["--label", "busy"],
    );
    let out = latlab()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runs"][0]["label"], "idle");
    assert_eq!(v["ladder"][0]["label"], "p50");
    assert_eq!(v["buckets_ms"]["counts"][1][0], 5902);
    assert!(v["flags"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f.as_str().unwrap().starts_with("too short")));
    for fmt in ["text", "markdown", "html"] {
        let out = latlab()
            .arg("compare")
            .arg(&a)
            .arg(&b)
            .args(["--format", fmt])
            .output()
            .unwrap();
        assert!(out.status.success(), "{fmt}");
        let s = String::from_utf8(out.stdout).unwrap();
        assert!(s.contains("idle") && s.contains("busy"), "{fmt}");
    }
    latlab()
        .arg("compare")
        .arg(&a)
        .arg(t.path().join("nope"))
        .assert()
        .code(1)
        .stderr(predicates::str::starts_with("latlab: error: "));
}
