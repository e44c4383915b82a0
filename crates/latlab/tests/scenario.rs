//! `latlab scenario fairness|io-read` end to end: run directories, sane figures (never a
//! speed), scratch files gone on every exit path, errors before anything starts. The
//! privileged ones (SCHED_RR, --iosched) run as root through the guard.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::prelude::*;
use latlab_sys::privileged;
use predicates::prelude::*;

mod support;
use support::command as latlab;

fn only_run_json(results: &Path) -> serde_json::Value {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    serde_json::from_slice(&std::fs::read(dirs[0].join("run.json")).unwrap()).unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn last_online_cpu() -> u32 {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    latlab_core::cpulist::parse_cpu_list(&s)
        .unwrap()
        .into_iter()
        .max()
        .unwrap()
}

fn check_shares(v: &serde_json::Value, tasks: usize) {
    let sc = &v["scenario"];
    assert_eq!(sc["kind"], "fairness");
    let per = sc["per_task"].as_array().unwrap();
    assert_eq!(per.len(), tasks);
    let sum: f64 = per.iter().map(|t| t["cpu_share"].as_f64().unwrap()).sum();
    assert!((sum - 1.0).abs() < 1e-9, "shares sum to {sum}");
    for t in per {
        assert!(
            t["cpu_ns"].as_u64().unwrap() > 0 || sc["policy"] != "other",
            "{t}"
        );
    }
    let j = sc["jain_index"].as_f64().unwrap();
    assert!(j > 0.0 && j <= 1.0, "J = {j}");
    assert!(j >= 1.0 / tasks as f64 - 1e-9, "J = {j} below 1/n");
}

#[test]
fn fairness_other_writes_shares_and_jain_index() {
    // It measures a CPU (the last one, as fairness_rr_equal_priority_privileged does): two
    // measurements on one CPU are refused (the CPU claim), so it takes the measuring lock
    // too rather than race the privileged one.
    let _lock = latlab_sys::privileged::lock();
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    latlab()
        .args(["scenario", "fairness", "--policy", "other", "--tasks", "3"])
        .args([
            "--duration",
            "2s",
            "--sleeper",
            "--format",
            "json",
            "--results",
        ])
        .arg(&results)
        .assert()
        .success();
    let v = only_run_json(&results);
    check_shares(&v, 3);
    assert_eq!(v["config"]["mode"], "fairness");
    // The sleeper's wake-ups are the run's histogram: `report` and `compare` read it.
    let s = v["scenario"]["sleeper"]["wakeups"].as_u64().unwrap();
    assert!(s > 0 && s <= 200, "{s}");
    assert_eq!(v["total"]["samples"].as_u64().unwrap(), s);
    let dir = std::fs::read_dir(&results)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    latlab()
        .arg("report")
        .arg(&dir)
        .assert()
        .success()
        .stdout(predicate::str::contains("Jain's index"));
}

#[test]
fn io_read_alone_and_under_io_write_then_scratch_is_gone() {
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    let scratch = t.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    latlab()
        .args([
            "scenario",
            "io-read",
            "--file-size",
            "8M",
            "--small-files",
            "50",
        ])
        .args([
            "--repeat", "2", "--warmup", "500ms", "--load", "io-write", "--dir",
        ])
        .arg(&scratch)
        .arg("--results")
        .arg(&results)
        .assert()
        .success()
        .stdout(predicate::str::contains("io-write / alone"));
    let v = only_run_json(&results);
    let sc = &v["scenario"];
    let phases = sc["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 2, "{phases:?}");
    assert_eq!(phases[0]["name"], "alone");
    assert_eq!(phases[1]["name"], "io-write");
    for p in phases {
        let big = &p["big"];
        assert_eq!(big["bytes_per_pass"], 8 << 20);
        assert_eq!(big["ops_per_pass"], (8 << 20) / (128 << 10));
        assert_eq!(big["count"], 2 * 64);
        let small = &p["small"];
        assert_eq!(small["ops_per_pass"], 50);
        assert_eq!(small["count"], 100);
        for m in [big, small] {
            let totals = m["totals_ns"].as_array().unwrap();
            assert_eq!(totals.len(), 2);
            assert!(totals.iter().all(|t| t.as_u64().unwrap() > 0));
            assert!(m["max_ns"].as_u64().unwrap() >= m["p50_ns"].as_u64().unwrap());
        }
    }
    let r = &sc["ratios"][0];
    assert_eq!(r["phase"], "io-write");
    assert!(r["big_total"].as_f64().unwrap() > 0.0);
    assert!(r["small_total"].as_f64().unwrap() > 0.0);
    // Four series (2 readers × 2 phases) as the record's histograms.
    assert_eq!(v["cpus"].as_array().unwrap().len(), 4);
    assert_eq!(v["loads"][0]["profile"], "io-write");
    // Nothing left: neither the test files nor the load's.
    assert!(entries(&scratch).is_empty(), "{:?}", entries(&scratch));
}

#[test]
fn io_read_sigterm_mid_run_removes_the_scratch_directory() {
    let t = tempfile::tempdir().unwrap();
    let scratch = t.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let mut child = latlab()
        .args([
            "scenario",
            "io-read",
            "--file-size",
            "16M",
            "--small-files",
            "20",
        ])
        .args(["--repeat", "1000", "--load", "none", "--dir"])
        .arg(&scratch)
        .arg("--results")
        .arg(t.path().join("r"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the measurement is under way: the small-file tree exists once the files
    // are written (the repeats then take much longer than this test waits).
    let t0 = Instant::now();
    let ready = loop {
        let found = std::fs::read_dir(&scratch)
            .unwrap()
            .flatten()
            .any(|e| e.path().join("small").is_dir());
        if found {
            break true;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            break false;
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("latlab ended before the signal: {st}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(ready, "the scratch directory never appeared");
    // SAFETY: plain syscall on our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert!(st.success(), "{st}");
    assert!(entries(&scratch).is_empty(), "{:?}", entries(&scratch));
    let v = only_run_json(&t.path().join("r"));
    assert_eq!(v["scenario"]["interrupted"], true);
}

#[test]
fn bad_input_fails_before_anything_starts() {
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    latlab()
        .args(["scenario", "io-read", "--file-size", "100T", "--dir"])
        .arg(t.path())
        .arg("--results")
        .arg(&results)
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "latlab: error: --file-size 100T:",
        ))
        .stderr(predicate::str::contains("free"));
    latlab()
        .args([
            "scenario",
            "io-read",
            "--file-size",
            "1M",
            "--iosched",
            "no-such-sched",
        ])
        .arg("--dir")
        .arg(t.path())
        .arg("--results")
        .arg(&results)
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "latlab: error: --iosched no-such-sched:",
        ));
    latlab()
        .args(["scenario", "fairness", "--tasks", "0", "--results"])
        .arg(&results)
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with("latlab: error: --tasks 0:"));
    latlab()
        .args(["scenario", "io-read", "--file-size", "12Q", "--results"])
        .arg(&results)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--file-size"));
    // Nothing was created.
    assert!(!results.exists());
    assert_eq!(entries(t.path()), Vec::<String>::new());
}

#[test]
fn fairness_rr_equal_priority_privileged() {
    let Some(_g) = privileged::guard("fairness_rr_equal_priority_privileged") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    let cpu = last_online_cpu();
    // RT hogs on every CPU are refused.
    latlab()
        .args([
            "scenario",
            "fairness",
            "--policy",
            "rr",
            "--cpus",
            "0-1023",
            "--results",
        ])
        .arg(&results)
        .assert()
        .code(1);
    latlab()
        .args([
            "scenario",
            "fairness",
            "--policy",
            "rr",
            "--priority",
            "5",
            "--tasks",
            "2",
        ])
        .args([
            "--duration",
            "1s",
            "--sleeper",
            "--cpus",
            &cpu.to_string(),
            "--results",
        ])
        .arg(&results)
        .assert()
        .success();
    let v = only_run_json(&results);
    check_shares(&v, 2);
    assert_eq!(v["scenario"]["policy"], "rr");
    assert_eq!(v["scenario"]["priority"], 5);
}

#[test]
fn io_read_iosched_set_and_restored_privileged() {
    let Some(_g) = privileged::guard("io_read_iosched_set_and_restored_privileged") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let dev = latlab_sys::scenario::io_read::block_device(t.path());
    let (Some(path), Some(before)) = (dev.scheduler_path.clone(), dev.scheduler.clone()) else {
        support::cannot_run(
            "io_read_iosched_set_and_restored_privileged",
            &format!(
                "{} has no changeable I/O scheduler ({dev:?})",
                t.path().display()
            ),
        );
        return;
    };
    let Some(other) = dev.available.iter().find(|s| **s != before).cloned() else {
        support::cannot_run(
            "io_read_iosched_set_and_restored_privileged",
            &format!("{path:?} offers only {before}"),
        );
        return;
    };
    let results = t.path().join("r");
    let scratch = t.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    latlab()
        .args([
            "scenario",
            "io-read",
            "--file-size",
            "4M",
            "--small-files",
            "10",
        ])
        .args([
            "--repeat",
            "1",
            "--load",
            "none",
            "--iosched",
            &other,
            "--dir",
        ])
        .arg(&scratch)
        .arg("--results")
        .arg(&results)
        .assert()
        .success();
    let v = only_run_json(&results);
    assert_eq!(v["scenario"]["iosched"]["during"], other.as_str());
    assert_eq!(v["scenario"]["iosched"]["before"], before.as_str());
    let after = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        latlab_sys::scenario::io_read::parse_scheduler(&after).0,
        Some(before),
        "{after}"
    );
    assert!(entries(&scratch).is_empty());
}
