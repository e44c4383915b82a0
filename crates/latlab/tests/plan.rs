//! `latlab plan`: the best case without a run (the rule of three, exactly), a run's own rate
//! and exceedances (already shown; never shown), JSON, and bad input as one-line errors.

use predicates::prelude::*;

mod support;
use support::latlab;

fn json(args: &[&str]) -> serde_json::Value {
    let out = latlab().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn best_case_without_a_run_is_the_rule_of_three() {
    let v = json(&[
        "plan",
        "--target",
        "p99.999<=50us",
        "--rate",
        "2000",
        "--format",
        "json",
    ]);
    let n = v["best_case_samples"].as_u64().unwrap();
    // (1 − 10⁻⁵)ⁿ ≤ 0.05 first at n = ⌈ln 0.05 / ln(1 − 10⁻⁵)⌉.
    assert_eq!(n, (0.05f64.ln() / (-1e-5f64).ln_1p()).ceil() as u64);
    assert_eq!(v["best_case_ns"].as_u64().unwrap(), n * 500_000);
    assert!(v["observed"].is_null());
    // --interval with --threads: the same rate.
    let w = json(&[
        "plan",
        "--target",
        "p99.999<=50us",
        "--interval",
        "1ms",
        "--threads",
        "2",
        "--format",
        "json",
    ]);
    assert_eq!(w["wakeups_per_s"], 2000.0);
    latlab()
        .args(["plan", "--target", "p99.999<=50us", "--interval", "1ms"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "best case (no wake-up ever at or above 50 µs): {n} samples"
        )));
}

#[test]
fn a_run_shows_a_claim_or_never_will() {
    let t = tempfile::tempdir().unwrap();
    latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "20s",
            "--cpus",
            "0",
            "--quiet",
            "--no-db",
            "--results",
        ])
        .arg(t.path())
        .assert()
        .success();
    let run = support::only_run_dir(t.path());
    let run = run.to_str().unwrap();
    // The simulated machine never reaches 10 ms: 20 000 samples show p99 ≤ 10 ms.
    let v = json(&["plan", run, "--target", "p99<=10ms", "--format", "json"]);
    assert_eq!(v["observed"]["shown"], true, "{v}");
    assert_eq!(v["observed"]["at_or_above"], 0);
    assert!(
        (v["wakeups_per_s"].as_f64().unwrap() - 1000.0).abs() < 50.0,
        "{v}"
    );
    // Its softirq-like bursts (0.2 % of wake-ups, 100-400 µs) put p99.9 above 50 µs for good.
    latlab()
        .args(["plan", run, "--target", "p99.9<=50us"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no run length shows it"));
}

#[test]
fn bad_input_is_one_line() {
    for (args, msg) in [
        (
            &["plan", "--target", "p99.999", "--rate", "1000"][..],
            "is not a target",
        ),
        (
            &["plan", "--target", "p99<=1ms"][..],
            "nothing to plan from",
        ),
        (
            &["plan", "--target", "p99<=1ms", "--rate", "0"][..],
            "must be above 0",
        ),
        (
            &["plan", "/nonexistent/run", "--target", "p99<=1ms"][..],
            "/nonexistent/run",
        ),
    ] {
        latlab()
            .args(args)
            .assert()
            .failure()
            .stderr(predicate::str::starts_with("latlab: error: "))
            .stderr(predicate::str::contains(msg));
    }
}
