//! LAVA: `latlab report RUN --format lava` (result lines `NAME pass|fail|skip [VALUE UNITS]`),
//! `compare --fail-if … --format lava`, and contrib/lava/latlab-lava.sh, the helper the test
//! definition contrib/lava/latlab.yaml runs, run here for real with `latlab run --backend
//! sim` (no root) and without LAVA's `lava-test-case` on PATH, so it prints the test cases as
//! LAVA's console signals. (Under LAVA's own test-shell scripts in the kernel lab: lab_lava.rs.)

use std::path::{Path, PathBuf};
use std::process::Command;

mod support;
use support::{edit_run_json, latlab, sim_run_dir};

fn lava_lines(args: &[&str]) -> (Option<i32>, Vec<String>) {
    let o = latlab().args(args).output().unwrap();
    let out = String::from_utf8(o.stdout).unwrap();
    (o.status.code(), out.lines().map(String::from).collect())
}

/// A result line's parts, checked: a safe name, a result, a number and a unit or nothing.
fn parts(l: &str) -> (String, String, Option<(f64, String)>) {
    let p: Vec<&str> = l.split(' ').collect();
    assert!(p.len() == 2 || p.len() == 4, "{l}");
    assert!(
        p[0].chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)),
        "{l}"
    );
    assert!(["pass", "fail", "skip"].contains(&p[1]), "{l}");
    let m = (p.len() == 4).then(|| (p[2].parse::<f64>().unwrap(), p[3].to_string()));
    (p[0].to_string(), p[1].to_string(), m)
}

#[test]
fn report_and_compare_lines() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("r");
    let run = sim_run_dir(&r, "gated", &["--max-latency", "1us"]);
    let rec = support::read_json(&run.join("run.json"));
    let (code, lines) = lava_lines(&["report", "--format", "lava", run.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    let cpus = rec["cpus"].as_array().unwrap();
    assert_eq!(lines.len(), 6 * (cpus.len() + 1) + 1, "{lines:?}");
    for l in &lines {
        parts(l);
    }
    let (n, res, m) = parts(&lines[4]);
    assert_eq!(n, format!("cpu{}-max-latency", cpus[0]["cpu"]));
    assert_eq!(res, "pass");
    let (v, u) = m.unwrap();
    assert_eq!(u, "us");
    assert!((v * 1000.0 - cpus[0]["max_ns"].as_f64().unwrap()).abs() < 0.5);
    assert!(lines.contains(&format!(
        "all-missed-periods pass {} periods",
        rec["total"]["missed_periods"]
    )));
    assert!(
        lines.last().unwrap().starts_with("max-latency-gate fail "),
        "{lines:?}"
    );
    // compare --fail-if: one line per check.
    let base = sim_run_dir(&r, "base", &["--sim-seed", "2"]);
    let (code, lines) = lava_lines(&[
        "compare",
        base.to_str().unwrap(),
        run.to_str().unwrap(),
        "--format",
        "lava",
        "--fail-if",
        "max>10s",
        "--fail-if",
        "tail:1e-6>0.0001x",
        "--fail-if",
        "mean>1us",
    ]);
    assert_eq!(code, Some(2), "{lines:?}");
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[2].starts_with("check-mean-run1 fail "), "{lines:?}");
    assert!(lines[0].starts_with("check-max-run1 pass "), "{lines:?}");
    assert!(lines[1].starts_with("check-tail_1e-6-run1 "), "{lines:?}");
}

fn helper() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/lava/latlab-lava.sh")
}

/// PATH with the latlab under test first and without any `lava-test-case`.
fn path_with_latlab() -> String {
    let dir = support::bin().parent().unwrap().to_path_buf();
    let rest = std::env::var("PATH").unwrap_or_default();
    let kept: Vec<&str> = rest
        .split(':')
        .filter(|d| !Path::new(d).join("lava-test-case").exists())
        .collect();
    format!("{}:{}", dir.display(), kept.join(":"))
}

#[test]
fn the_helper_reports_every_line_as_a_test_case() {
    let t = tempfile::tempdir().unwrap();
    let base = sim_run_dir(&t.path().join("b"), "base", &["--cpus", "0"]);
    let out = t.path().join("output");
    let o = Command::new("sh")
        .arg(helper())
        .args([
            "-k", "sim", "-D", "1s", "-i", "1ms", "-p", "90", "-c", "0", "-m", "1us",
        ])
        .args(["-f", "max>10s p99>1000x", "-b"])
        .arg(&base)
        .arg("-o")
        .arg(&out)
        .env("PATH", path_with_latlab())
        .output()
        .unwrap();
    let stdout = String::from_utf8(o.stdout).unwrap();
    let stderr = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    let results = std::fs::read_to_string(out.join("result.txt")).unwrap();
    let mut want = vec!["<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=latlab-run RESULT=pass>".to_string()];
    for l in results.lines() {
        let (n, r, m) = parts(l);
        let p: Vec<&str> = l.split(' ').collect();
        want.push(match m {
            Some(_) => format!(
                "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID={n} RESULT={r} MEASUREMENT={} UNITS={}>",
                p[2], p[3]
            ),
            None => format!("<LAVA_SIGNAL_TESTCASE TEST_CASE_ID={n} RESULT={r}>"),
        });
    }
    let got: Vec<&str> = stdout.lines().collect();
    assert_eq!(got, want, "{stderr}");
    // CPU 0's and all CPUs' six figures, the gate, the two checks.
    assert_eq!(results.lines().count(), 6 + 6 + 1 + 2, "{results}");
    assert!(results.contains("max-latency-gate fail "), "{results}");
    assert!(results.contains("check-max-run1 pass "), "{results}");
    assert!(results.contains("check-p99-run1 pass "), "{results}");
}

/// Without latlab, the run's test case fails (exit 1); a line that is not a result line
/// (written by hand here) is left out, said on stderr; a run without CPUs and unwritable
/// outputs are one-line errors of `report --format lava`.
#[test]
fn bad_input() {
    let t = tempfile::tempdir().unwrap();
    let o = Command::new("sh")
        .arg(helper())
        .args(["-l", "/nonexistent/latlab", "-o"])
        .arg(t.path().join("o"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=latlab-run RESULT=fail>\n"
    );
    assert!(String::from_utf8(o.stderr).unwrap().contains("no latlab"));
    let r = t.path().join("r");
    let prof = sim_run_dir(&r, "prof", &[]);
    edit_run_json(&prof, |v| {
        v["cpus"] = serde_json::json!([]);
        v["config"]["mode"] = "none".into();
    });
    let o = latlab()
        .args(["report", "--format", "lava"])
        .arg(&prof)
        .output()
        .unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(
        (o.status.code(), err.lines().count()),
        (Some(1), 1),
        "{err}"
    );
    assert!(err.contains("no per-CPU latency"), "{err}");
    assert!(o.stdout.is_empty());
    let run = sim_run_dir(&r, "ok", &[]);
    support::unwritable_outputs(&["report", "--format", "lava"], &run, t.path());
}
