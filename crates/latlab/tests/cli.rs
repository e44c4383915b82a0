//! CLI tests of `latlab run` (sim backend) and `latlab report`: every bad-input error with its
//! exit code and message, and the run directory a run leaves.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

mod support;
use support::{latlab, only_run_dir};

fn sim_run(results: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "5s",
            "--cpus",
            "0",
            "--results",
        ])
        .arg(results)
        .args(extra)
        .assert()
}

#[test]
fn sim_run_writes_a_complete_run_directory() {
    let t = tempfile::tempdir().unwrap();
    sim_run(t.path(), &["--label", "simple"])
        .success()
        .stdout(predicate::str::contains("99.999% (five nines) below"))
        .stdout(predicate::str::contains("results: "));
    let dir = only_run_dir(t.path());
    assert!(dir
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .ends_with("-simple"));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(v["complete"], true);
    assert_eq!(v["source"], "latlab");
    let samples = v["total"]["samples"].as_u64().unwrap();
    let missed = v["total"]["missed_periods"].as_u64().unwrap();
    assert_eq!(
        samples + missed,
        5000,
        "every period is a sample or a counted miss"
    );
    assert_eq!(
        v["cpus"][0]["per_second_max_ns"].as_array().unwrap().len(),
        5
    );
    let hist = std::fs::read_to_string(dir.join("histogram.txt")).unwrap();
    assert!(hist.contains("# Max Latencies:"));
    assert_eq!(hist.lines().filter(|l| !l.starts_with('#')).count(), 10_000);
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(summary.contains("standard deviation"));
    // The run directory holds report.html (README): the same bytes `report --format html` gives.
    let html = std::fs::read(dir.join("report.html")).unwrap();
    let out = latlab()
        .arg("report")
        .arg(&dir)
        .args(["--format", "html"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(html.starts_with(b"<!DOCTYPE html>") || html.starts_with(b"<!doctype html>"));
    assert_eq!(html, out.stdout);
}

#[test]
fn sim_runs_are_deterministic_per_seed() {
    let stats = |seed: &str| {
        let t = tempfile::tempdir().unwrap();
        let out = latlab()
            .args([
                "run",
                "--backend",
                "sim",
                "--duration",
                "3s",
                "--format",
                "json",
                "--sim-seed",
                seed,
                "--results",
            ])
            .arg(t.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["total"].clone()
    };
    assert_eq!(stats("7"), stats("7"));
    assert_ne!(stats("7"), stats("8"));
}

#[test]
fn json_output_has_the_contract_keys() {
    let t = tempfile::tempdir().unwrap();
    let out = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "2s",
            "--format",
            "json",
            "--results",
        ])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in [
        "schema_version",
        "label",
        "source",
        "total",
        "cpus",
        "spikes",
        "loads",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    for k in [
        "samples",
        "min_ns",
        "max_ns",
        "mean_ns",
        "median_ns",
        "stddev_ns",
        "p99_ns",
        "p999_ns",
        "p9999_ns",
        "p99999_ns",
        "missed_periods",
        "below",
    ] {
        assert!(v["total"].get(k).is_some(), "total.{k}");
        assert!(v["cpus"][0].get(k).is_some(), "cpus[0].{k}");
    }
    for k in [
        "100us", "200us", "500us", "700us", "1ms", "5ms", "10ms", "50ms", "100ms",
    ] {
        assert!(v["total"]["below"][k].is_f64(), "below.{k}");
    }
    assert!(v["cpus"][0]["cpu"].is_u64());
    // report --format json of the same directory agrees.
    let dir = only_run_dir(t.path());
    let out2 = latlab()
        .args(["report", "--format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    let v2: serde_json::Value = serde_json::from_slice(&out2.stdout).unwrap();
    assert_eq!(v["total"], v2["total"]);
}

#[test]
fn max_latency_exceeded_exits_2() {
    let t = tempfile::tempdir().unwrap();
    sim_run(t.path(), &["--max-latency", "1ns", "--quiet"])
        .code(2)
        .stderr(predicate::str::contains("exceeds --max-latency"));
    let t = tempfile::tempdir().unwrap();
    sim_run(t.path(), &["--max-latency", "10s", "--quiet"]).code(0);
}

#[test]
fn report_formats() {
    let t = tempfile::tempdir().unwrap();
    sim_run(t.path(), &[]).success();
    let dir = only_run_dir(t.path());
    latlab()
        .arg("report")
        .arg(&dir)
        .assert()
        .success()
        .stdout(predicate::str::contains("minimum"));
    latlab()
        .args(["report", "--format", "cyclictest"])
        .arg(dir.join("run.json"))
        .assert()
        .success()
        .stdout(predicate::str::contains("# Histogram Overflows:"));
    let out = t.path().join("r.json");
    latlab()
        .args(["report", "--format", "json", "-o"])
        .arg(&out)
        .arg(&dir)
        .assert()
        .success();
    assert!(std::fs::read_to_string(out)
        .unwrap()
        .contains("\"p99999_ns\""));
}

fn fails_with(args: &[&str], msg: &str) {
    let t = tempfile::tempdir().unwrap();
    latlab()
        .args(args)
        .arg("--results")
        .arg(t.path())
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with("latlab: error: "))
        .stderr(predicate::str::contains(msg));
    // Nothing was written for a run that never started.
    assert!(std::fs::read_dir(t.path()).unwrap().next().is_none());
}

#[test]
fn bad_run_flags_are_one_line_errors() {
    let sim = ["run", "--backend", "sim"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        sim.iter().chain(extra).copied().collect()
    };
    fails_with(
        &with(&["--interval", "5us"]),
        "--interval 5us: below the 10us minimum",
    );
    fails_with(
        &with(&["--interval", "soon"]),
        "--interval: 'soon' is not a latency",
    );
    fails_with(
        &with(&["--duration", "forever"]),
        "--duration: 'forever' is not a duration",
    );
    fails_with(&with(&["--priority", "0"]), "--priority 0: must be 1..99");
    fails_with(
        &with(&["--priority", "150", "--policy", "rr"]),
        "--priority 150: must be 1..99 for --policy rr",
    );
    fails_with(&with(&["--cpus", "4095"]), "CPU 4095 is not online");
    fails_with(&with(&["--cpus", "x"]), "--cpus: 'x' is not a CPU list");
    fails_with(
        &with(&["--max-latency", "big"]),
        "--max-latency: 'big' is not a latency",
    );
    fails_with(&with(&["--hist-limit", "10ns"]), "--hist-limit");
    // Every flag is checked before the machine or the disk is touched: a bad recorder size,
    // a wrapping --distance, an --interval the audio mode replaces by --period (given even at
    // its default value), loads that cannot run.
    fails_with(
        &with(&["--trace-threshold", "100us", "--trace-buffer", "4XB"]),
        "--trace-buffer: '4XB' is not a size",
    );
    fails_with(
        &with(&["--interval", "10us", "--distance", "18446744073709546615ns"]),
        "--distance",
    );
    fails_with(
        &with(&["--mode", "audio", "--interval", "1ms"]),
        "--interval: --mode audio",
    );
    fails_with(
        &with(&["--warmup", "later"]),
        "--warmup: 'later' is not a duration",
    );
    fails_with(
        &with(&["--load-cpus", "x"]),
        "--load-cpus: 'x' is not a CPU list",
    );
    fails_with(
        &with(&["--load", "no-such-profile", "--warmup", "5s"]),
        "no-such-profile",
    );
}

#[test]
fn unwritable_results_directory_is_refused_before_measuring() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    latlab()
        .args(["run", "--backend", "sim", "--duration", "1s", "--results"])
        .arg(file.join("sub"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--results"))
        .stderr(predicate::str::contains("choose a writable one"));
}

#[test]
fn real_backend_without_root_says_what_to_do() {
    if latlab_sys::rt::can_use_rt() {
        eprintln!("skipping real_backend_without_root_says_what_to_do: running as root");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    latlab()
        .args(["run", "--duration", "1s", "--results"])
        .arg(t.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "run as root, or use --backend sim",
        ));
}

#[test]
fn report_of_something_else_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    latlab()
        .arg("report")
        .arg(t.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is not a run directory"));
    let f = t.path().join("run.json");
    std::fs::write(&f, r#"{"schema_version": 42}"#).unwrap();
    latlab()
        .arg("report")
        .arg(&f)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "schema_version 42 is not supported",
        ));
    std::fs::write(&f, "garbage").unwrap();
    latlab()
        .arg("report")
        .arg(&f)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not a latlab run record"));
    latlab()
        .args(["report", "/nonexistent/run"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no such run directory"));
}

#[test]
fn sigterm_of_a_sim_run_still_writes_results() {
    use std::time::{Duration, Instant};
    let t = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab"))
        .args([
            "run",
            "--backend",
            "sim",
            "--sim-realtime",
            "--duration",
            "60s",
            "--quiet",
            "--cpus",
            "0",
            "--results",
        ])
        .arg(t.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the measurement thread exists, then interrupt.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap();
        if tasks
            .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("comm")).ok())
            .any(|c| c.starts_with("latlab-cpu"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "measurement thread never started"
        );
        std::thread::yield_now();
    }
    // Interrupt once it has measured: 200 wake-ups, however long the VM takes for them.
    support::wait_for_wakeups(child.id(), 1, 200);
    // SAFETY: plain syscall.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let dir = only_run_dir(t.path());
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(v["complete"], true);
    // What it measured up to the signal, all of it: at least the wake-ups seen, and every
    // period of the measured time a sample or a missed period.
    let c = &v["cpus"][0];
    let (samples, missed) = (
        c["samples"].as_u64().unwrap(),
        c["missed_periods"].as_u64().unwrap(),
    );
    assert!(samples >= 150, "{samples} samples");
    let periods =
        v["config"]["measured_ns"].as_u64().unwrap() / v["config"]["interval_ns"].as_u64().unwrap();
    assert!(
        (samples + missed).abs_diff(periods) <= 2,
        "{samples} samples + {missed} missed for {periods} periods"
    );
    assert!(v["warnings"].to_string().contains("interrupted"));
}

#[test]
fn bench_loads_help_and_unknown_profile() {
    let out = Command::cargo_bin("latlab")
        .unwrap()
        .args(["bench", "loads", "--help"])
        .assert()
        .success()
        .get_output()
        .clone();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("--profiles") && help.contains("--duration"),
        "{help}"
    );
    let out = Command::cargo_bin("latlab")
        .unwrap()
        .args([
            "bench",
            "loads",
            "--profiles",
            "idle,no-such-load",
            "--duration",
            "1s",
        ])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("latlab: error: --profiles: unknown load profile 'no-such-load'"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // Nothing ran: no table on stdout.
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Usage errors exit 1, never 2 (reserved for a sample above --max-latency): a typo in a CI job
/// must not read as a latency failure. Help and version exit 0.
#[test]
fn usage_errors_exit_1_not_2() {
    for args in [
        &["run", "--no-such-flag"][..],
        &["frobnicate"],
        &[],
        &["run", "--policy", "nope"],
        &["compare", "--format", "pdf", "a", "b"],
        &["bench", "nothing"],
    ] {
        latlab().args(args).assert().code(1).stderr(
            predicate::str::contains("error").or(predicate::str::contains("Usage: latlab")),
        );
    }
    for args in [
        &["--help"][..],
        &["--version"],
        &["run", "--help"],
        &["help", "run"],
    ] {
        latlab().args(args).assert().code(0);
    }
}

/// Usage errors in the house form: one line, `latlab: error: …`, with the name a typo was
/// meant to be (clap found none for `rnu`: its similarity measure misses transpositions).
#[test]
fn usage_errors_are_one_line_with_a_suggestion() {
    let one_line = |args: &[&str], needle: &str| {
        let out = latlab().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("latlab: error: "), "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    one_line(&["rnu"], "unknown command 'rnu'; did you mean 'run'?");
    one_line(&["comapre", "a", "b"], "did you mean 'compare'?");
    one_line(&["xyzzy"], "unknown command 'xyzzy' (latlab --help");
    one_line(&["run", "--durtion", "1s"], "'--duration'");
    one_line(&["run", "--format", "yaml"], "possible values");
    one_line(&["compare", "a"], "2 values required");
    let t = tempfile::tempdir().unwrap();
    let out = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--load",
            "hackbnech",
            "--results",
        ])
        .arg(t.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("(did you mean 'hackbench'?)"), "{err}");
}

/// `--trace-threshold` below 1 µs traced every period (p99 went to 36.7 ms with 0): refused
/// before anything starts, with the reason.
#[test]
fn a_trace_threshold_below_any_wake_up_is_refused() {
    for t in ["0", "500ns"] {
        fails_with(
            &["run", "--backend", "sim", "--trace-threshold", t],
            "below 1 µs every wake-up is a spike",
        );
    }
}

/// `latlab report` without RUN reports the latest run of `--results` (by the start time in
/// the directory's name), saying which on stderr; with none there, one line saying what to give.
#[test]
fn report_without_a_run_reports_the_latest() {
    let t = tempfile::tempdir().unwrap();
    let none = latlab()
        .current_dir(t.path())
        .arg("report")
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(1));
    let err = String::from_utf8(none.stderr).unwrap();
    assert!(
        err.contains("no RUN given") && err.contains("--results DIR"),
        "{err}"
    );
    let res = t.path().join("latlab-results");
    for label in ["first", "second"] {
        latlab()
            .args([
                "run",
                "--backend",
                "sim",
                "--duration",
                "1s",
                "-q",
                "--no-db",
            ])
            .args(["--label", label, "--results"])
            .arg(&res)
            .assert()
            .success();
    }
    let mut dirs: Vec<_> = std::fs::read_dir(&res)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 2);
    // Two runs in one second would share the time prefix: name them so the order is known.
    let (a, b) = (
        res.join("20260101T000000Z-first"),
        res.join("20260101T000001Z-second"),
    );
    let first_is_first = dirs[0].to_string_lossy().ends_with("-first");
    let (older, newer) = if first_is_first {
        (&dirs[0], &dirs[1])
    } else {
        (&dirs[1], &dirs[0])
    };
    std::fs::rename(older, &a).unwrap();
    std::fs::rename(newer, &b).unwrap();
    let out = latlab()
        .current_dir(t.path())
        .arg("report")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("latlab report: second"), "{stdout}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("20260101T000001Z-second"), "{err}");
}

/// Output that is lost is an error for every command that prints on stdout: a full disk
/// (`> /dev/full`) or a stdout closed at start (`>&-`) exits 1 with one line, never a panic
/// (101) and never a silent success.
#[test]
fn lost_output_is_an_error_for_every_command() {
    let t = tempfile::tempdir().unwrap();
    sim_run(t.path(), &[]).success();
    let dir = only_run_dir(t.path());
    let dir = dir.to_str().unwrap();
    let results = t.path().join("more");
    let results = results.to_str().unwrap();
    let bin = assert_cmd::cargo::cargo_bin("latlab");
    let commands: Vec<Vec<&str>> = vec![
        vec!["report", dir],
        vec!["report", dir, "--format", "json"],
        vec!["compare", dir, dir],
        vec!["check"],
        vec!["loads", "list"],
        vec![
            "run",
            "--backend",
            "sim",
            "--duration",
            "1s",
            "--quiet",
            "--results",
            results,
        ],
    ];
    for args in &commands {
        let full = std::process::Command::new(&bin)
            .args(args)
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&full.stderr);
        assert_eq!(full.status.code(), Some(1), "{args:?} > /dev/full: {err}");
        assert!(err.starts_with("latlab: error: "), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        let closed = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$@\" >&-")
            .arg(&bin)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&closed.stderr);
        assert_eq!(closed.status.code(), Some(1), "{args:?} >&-: {err}");
        assert!(err.contains("stdout"), "{args:?}: {err}");
    }
}
