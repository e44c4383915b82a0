//! Regression gates: `compare A B --fail-if EXPR … [--junit FILE]`. A worse run fails with
//! exit code 2, a better one passes, each EXPR form is judged, a malformed one is exit 1, and
//! the JUnit XML parses (roxmltree) with one test case per check.

use std::path::{Path, PathBuf};

mod support;
use support::latlab;

/// A cyclictest histogram (`-h` output) of one thread: a peak around `20 · scale` µs, a few
/// samples in a tail up to `60 · scale` µs, plus `extra` samples at `extra_us`.
fn cyclictest_hist(scale: f64, extra: u64, extra_us: u64) -> String {
    let mut rows = Vec::new();
    let (mut tot, mut sum, mut min, mut max) = (0u64, 0u64, None, 0u64);
    for us in 1..400u64 {
        let x = us as f64 / scale;
        let mut c = if x < 30.0 {
            (2000.0 - (x - 20.0).abs() * 200.0).max(0.0) as u64
        } else if x < 60.0 {
            3
        } else {
            0
        };
        if us == extra_us {
            c += extra;
        }
        if c > 0 {
            rows.push(format!("{us:06} {c:06}"));
            tot += c;
            sum += us * c;
            min.get_or_insert(us);
            max = us;
        }
    }
    format!(
        "# Histogram\n{}\n# Total: {tot:09}\n# Min Latencies: {:05}\n# Avg Latencies: {:05}\n# Max Latencies: {max:05}\n# Histogram Overflows: 00000\n",
        rows.join("\n"),
        min.unwrap(),
        sum / tot
    )
}

/// Import a histogram as a run directory labelled `label` under `dir`.
fn import(dir: &Path, label: &str, hist: &str) -> PathBuf {
    let f = dir.join(format!("{}.txt", label.len()));
    std::fs::write(&f, hist).unwrap();
    let results = dir.join(format!("r{}", label.len()));
    latlab()
        .arg("import")
        .arg(&f)
        .args(["--label", label, "--results"])
        .arg(&results)
        .assert()
        .success();
    support::only_run_dir(&results)
}

struct Runs {
    _t: tempfile::TempDir,
    dir: PathBuf,
    base: PathBuf,
    worse: PathBuf,
    better: PathBuf,
}

fn runs() -> Runs {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().to_path_buf();
    // Labels of different lengths (one results dir each); the worse one carries markup and a
    // terminal escape, untrusted text that must come out escaped.
    let base = import(&dir, "base", &cyclictest_hist(1.0, 0, 0));
    let worse = import(&dir, "worse<&\"'>\x1b[2J", &cyclictest_hist(1.5, 0, 0));
    let better = import(&dir, "better-kernel", &cyclictest_hist(0.8, 0, 0));
    Runs {
        _t: t,
        dir,
        base,
        worse,
        better,
    }
}

fn compare(r: &Runs, b: &Path, extra: &[&str]) -> std::process::Output {
    latlab()
        .arg("compare")
        .arg(&r.base)
        .arg(b)
        .args(extra)
        .output()
        .unwrap()
}

fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_worse_run_fails_with_exit_2_and_a_better_one_passes() {
    let r = runs();
    let gates = ["--fail-if", "p99>1.2x", "--fail-if", "max>+10%"];
    let o = compare(&r, &r.worse, &gates);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    // The table: stat, A, B, rule, observed, verdict; the run label escaped.
    let checks = out
        .split("\nChecks (--fail-if")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"));
    let row = checks
        .lines()
        .find(|l| l.trim_start().starts_with("p99 "))
        .unwrap_or_else(|| panic!("no p99 row in:\n{out}"));
    for want in ["30 µs", "44 µs", "> 1.2x", "1.467x", "FAIL"] {
        assert!(row.contains(want), "{want} not in {row}");
    }
    assert!(out.contains("worse<&\"'>\\u{1b}[2J"), "{out}");
    assert!(!out.contains('\x1b') && !err.contains('\x1b'));
    assert!(err.contains("latlab: 2 of 2 checks failed: worse"), "{err}");

    let o = compare(&r, &r.better, &gates);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let verdicts: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("better-kernel") && l.contains("> "))
        .collect();
    assert_eq!(verdicts.len(), 2, "{out}");
    assert!(
        verdicts.iter().all(|l| l.trim_end().ends_with("pass")),
        "{out}"
    );
}

#[test]
fn each_expr_form_is_judged_on_its_threshold() {
    let r = runs();
    // worse: p99 44 µs vs 30 µs (1.467x, +46.7 %), max 89 µs, no missed periods.
    let cases: [(&str, i32); 12] = [
        ("p99>1.4x", 2),
        ("p99>1.5x", 0),
        ("p99>+45%", 2),
        ("p99>+47%", 0),
        ("max>88us", 2),
        ("max>89us", 0),
        ("max>0.089ms", 0),
        ("max>88999ns", 2),
        ("missed>0", 0),
        ("missed>1x", 0),
        ("median>1x", 2),
        ("min>1000", 0),
    ];
    for (expr, code) in cases {
        let o = compare(&r, &r.worse, &["--fail-if", expr]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(code), "{expr}:\n{out}\n{err}");
    }
}

#[test]
fn malformed_expr_is_exit_1_naming_it_and_writes_nothing() {
    let r = runs();
    let junit = r.dir.join("junit.xml");
    for (expr, names) in [
        ("p99.8>1.2x", "unknown statistic 'p99.8'"),
        ("p99", "no '>'"),
        ("max>12 parsecs", "'12 parsecs' is not a rule"),
        ("max>10%", "+N%"),
        ("missed>1ms", "whole count"),
    ] {
        let o = latlab()
            .arg("compare")
            .arg(&r.base)
            .arg(&r.worse)
            .args(["--fail-if", "max>1ms", "--fail-if", expr, "--junit"])
            .arg(&junit)
            .output()
            .unwrap();
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{expr}: {err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("latlab: error: --fail-if: '"), "{err}");
        assert!(err.contains(names), "{expr}: {err}");
        assert!(!junit.exists());
    }
}

#[test]
fn json_has_a_checks_array_and_three_runs_check_against_the_first() {
    let r = runs();
    let o = latlab()
        .arg("compare")
        .args([&r.base, &r.worse, &r.better])
        .args(["--format", "json", "--fail-if", "p99>1.2x"])
        .args(["--fail-if", "missed>0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 4);
    let keys: Vec<&String> = checks[0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "a",
            "b",
            "baseline",
            "expr",
            "level",
            "note",
            "observed",
            "observed_hi",
            "observed_lo",
            "passed",
            "rule",
            "run",
            "run_index",
            "stat",
            "too_few_samples",
            "unit",
            "within_noise"
        ]
    );
    // p99 44 µs against 30 µs: far outside noise.
    assert!(checks.iter().all(|c| c["within_noise"] == false));
    for c in checks {
        assert_eq!(c["baseline"], "base");
        assert_eq!(c["a"], if c["stat"] == "p99" { 30_000 } else { 0 });
    }
    let p99: Vec<(&str, bool, i64)> = checks
        .iter()
        .filter(|c| c["stat"] == "p99")
        .map(|c| {
            (
                c["run"].as_str().unwrap(),
                c["passed"].as_bool().unwrap(),
                c["run_index"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        p99,
        [("worse<&\"'>\x1b[2J", false, 1), ("better-kernel", true, 2)]
    );
    // The comparison itself is all there as without gates.
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    assert!(v["ladder"].is_array());
}

#[test]
fn a_failure_within_noise_says_so() {
    let r = runs();
    // A run against itself: the same intervals, so any difference is noise; a rule that fails
    // anyway (p99 above half of itself) is kept failed, with the note.
    let o = latlab()
        .arg("compare")
        .args([&r.base, &r.base])
        .args(["--format", "json", "--fail-if", "p99>0.5x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["checks"][0];
    assert_eq!(c["within_noise"], true, "{c}");
    assert_eq!(c["passed"], false, "{c}");
    assert!(c["note"].as_str().unwrap().contains("within noise"), "{c}");
}

#[test]
fn junit_xml_parses_with_one_case_per_check() {
    let r = runs();
    let junit = r.dir.join("out").join("junit.xml");
    std::fs::create_dir(r.dir.join("out")).unwrap();
    let o = latlab()
        .arg("compare")
        .args([&r.base, &r.worse])
        .args(["--fail-if", "p99>1.2x", "--fail-if", "missed>0"])
        .args(["--fail-if", "p99.99>2x", "--junit"])
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    let suite = doc.root_element();
    assert_eq!(suite.tag_name().name(), "testsuite");
    assert_eq!(suite.attribute("tests"), Some("3"));
    assert_eq!(suite.attribute("failures"), Some("1"));
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 3);
    let names: Vec<&str> = cases.iter().map(|c| c.attribute("name").unwrap()).collect();
    assert_eq!(names, ["p99>1.2x", "missed>0", "p99.99>2x"]);
    // The label comes back as it was, markup and all (escaped in the file, not lost).
    assert_eq!(
        cases[0].attribute("classname"),
        Some("latlab.compare.worse<&\"'>\\u{1b}[2J")
    );
    let failed: Vec<bool> = cases
        .iter()
        .map(|c| c.children().any(|n| n.has_tag_name("failure")))
        .collect();
    assert_eq!(failed, [true, false, false]);
    let f = cases[0]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert!(f.attribute("message").unwrap().contains("1.467x"));
    // p99.99 of 24 k samples rests on 3: a warning on stderr and in the file.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("latlab: warning: --fail-if 'p99.99>2x'") && err.contains("too few samples"),
        "{err}"
    );
    assert!(cases[2]
        .children()
        .any(|n| n.has_tag_name("system-out") && n.text().unwrap().contains("too few samples")));
}

#[test]
fn junit_follows_a_symlink_and_refuses_a_directory() {
    let r = runs();
    // A symlink is followed (the link stays, its target gets the XML), as `-o` does.
    let target = r.dir.join("elsewhere.xml");
    std::fs::write(&target, "old").unwrap();
    let link = r.dir.join("junit.xml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = compare(&r, &r.worse, &["--fail-if", "p99>1.2x", "--junit"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "--junit without a file is a usage error"
    );
    let mut args = vec!["--fail-if", "p99>1.2x", "--junit"];
    args.push(link.to_str().unwrap());
    let o = compare(&r, &r.worse, &args);
    assert_eq!(o.status.code(), Some(2));
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(std::fs::read_to_string(&target)
        .unwrap()
        .contains("<testsuite"));
    // A directory is refused: one line, exit 1, nothing in it touched.
    let d = r.dir.join("adir");
    std::fs::create_dir(&d).unwrap();
    let o = compare(
        &r,
        &r.worse,
        &["--fail-if", "p99>1.2x", "--junit", d.to_str().unwrap()],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.starts_with("latlab: error: --junit "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(out.is_empty(), "nothing half-done on stdout: {out}");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
}
