//! Every peer's files (issue 19 §3): oslat, stress-ng --cyclic, jitterdebugger, pmqtest /
//! ptsematest / sigwaittest / svsematest and rtla's IRQ columns, imported through the CLI.
//!
//! The fixtures are the shared samples; the `real_*` tests run the tool itself briefly (root,
//! for RT priorities: the privileged lock, skip or fail under LATLAB_REQUIRE_PRIVILEGED=1) and
//! check that the imported numbers are the ones the tool printed.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::Duration;

use serde_json::Value;

mod support;
use support::{cannot_run, only_run_dir, privileged, read_json, run_dirs};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-core/tests/fixtures/import")
        .join(name)
}

/// `latlab import FILE [EXTRA…]` into a fresh results dir: the run.json, or the failed output.
fn import(file: &Path, extra: &[&str]) -> Result<Value, std::process::Output> {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r");
    let out = assert_cmd::Command::cargo_bin("latlab")
        .unwrap()
        .timeout(Duration::from_secs(60))
        .arg("import")
        .arg(file)
        .args(extra)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    if !out.status.success() {
        assert!(run_dirs(&results).is_empty(), "a failed import left a run");
        return Err(out);
    }
    Ok(read_json(&only_run_dir(&results).join("run.json")))
}

fn ok(file: &Path, extra: &[&str]) -> Value {
    import(file, extra).unwrap_or_else(|o| panic!("{file:?}: {o:?}"))
}

fn one_error_line(out: &std::process::Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("latlab: error: "), "{err}");
    err
}

fn cpu(r: &Value, i: usize, k: &str) -> Value {
    r["cpus"][i][k].clone()
}

#[test]
fn auto_recognises_every_fixture() {
    for (f, source) in [
        ("oslat-c1-D5.txt", "oslat"),
        ("oslat-c01.json", "oslat"),
        ("stress-ng-cyclic.txt", "stress-ng"),
        ("jitterdebugger-results.json", "jitterdebugger"),
        ("pmqtest-S-q.txt", "pmqtest"),
        ("ptsematest.json", "ptsematest"),
        ("rtla-timerlat-hist.txt", "rtla"),
        ("rtla-osnoise-hist.txt", "rtla"),
    ] {
        let r = ok(&fixture(f), &[]);
        assert_eq!(r["source"], source, "{f}");
        assert!(!r["notes"].as_array().unwrap().is_empty(), "{f}: notes");
        assert_eq!(r["config"]["backend"], "import", "{f}");
    }
}

#[test]
fn fixture_values_are_the_files() {
    // oslat: the max per CPU is the file's ("Maximum: 4108 (us)"; JSON 6801 and 6973).
    let r = ok(&fixture("oslat-c1-D5.txt"), &[]);
    assert_eq!(cpu(&r, 0, "cpu"), 1);
    assert_eq!(cpu(&r, 0, "max_ns"), 4_108_000);
    let r = ok(&fixture("oslat-c01.json"), &["--from", "oslat-json"]);
    assert_eq!(cpu(&r, 0, "max_ns"), 6_801_000);
    assert_eq!(cpu(&r, 1, "max_ns"), 6_973_000);
    assert_eq!(r["total"]["max_ns"], 6_973_000);
    // stress-ng: 10000 samples, min 12049, max 3602455 ns.
    let r = ok(&fixture("stress-ng-cyclic.txt"), &["--from", "stress-ng"]);
    assert_eq!(cpu(&r, 0, "samples"), 10_000);
    assert_eq!(cpu(&r, 0, "min_ns"), 12_049);
    assert_eq!(cpu(&r, 0, "max_ns"), 3_602_455);
    // jitterdebugger: count and max of each CPU.
    let r = ok(&fixture("jitterdebugger-results.json"), &[]);
    assert_eq!(cpu(&r, 0, "samples"), 2_933);
    assert_eq!(cpu(&r, 1, "max_ns"), 9_101_000);
    // pmqtest: a wakeup-mode run, pairs as latlab's wakeup mode writes them.
    let r = ok(&fixture("pmqtest-S-q.txt"), &[]);
    assert_eq!(r["config"]["mode"], "wakeup");
    assert_eq!(r["config"]["mode_params"]["ipc"], "mqueue");
    assert_eq!(cpu(&r, 1, "samples"), 1_761);
    assert_eq!(cpu(&r, 1, "max_ns"), 56_000);
    assert_eq!(
        r["cpus"][1]["mode"]["pair"],
        "mqueue: sender CPU 1 (fifo 95) → receiver CPU 1 (fifo 95)"
    );
    // rtla: the IRQ columns are a series of their own.
    let r = ok(&fixture("rtla-timerlat-hist.txt"), &[]);
    assert_eq!(r["cpus"][0]["mode"]["irq"]["max_ns"], 16_000);
    assert_eq!(r["cpus"][0]["mode"]["irq"]["count"], 599_039);
    assert_eq!(cpu(&r, 0, "max_ns"), 36_000);
}

#[test]
fn the_report_reads_every_import() {
    for f in [
        "oslat-c01.json",
        "pmqtest-S-q.txt",
        "stress-ng-cyclic.txt",
        "rtla-timerlat-hist.txt",
        "rtla-osnoise-hist.txt",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("r");
        let out = assert_cmd::Command::cargo_bin("latlab")
            .unwrap()
            .arg("import")
            .arg(fixture(f))
            .arg("--results")
            .arg(&results)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        for fmt in ["text", "json", "html"] {
            let rep = assert_cmd::Command::cargo_bin("latlab")
                .unwrap()
                .args(["report", "--format", fmt])
                .arg(only_run_dir(&results))
                .output()
                .unwrap();
            assert!(rep.status.success(), "{f} {fmt}: {rep:?}");
            // rtla's IRQ latency is drawn as series of its own beside the threads'.
            if f.starts_with("rtla-timerlat") && fmt == "html" {
                let h = String::from_utf8_lossy(&rep.stdout);
                assert!(h.contains("CPU 0 IRQ (max 16 µs)"), "no IRQ series");
                assert!(h.contains("CPU 0 (max 36 µs)"), "no thread series");
            }
            // rtla osnoise's noises are read as such.
            if f.starts_with("rtla-osnoise") && fmt == "text" {
                let t = String::from_utf8_lossy(&rep.stdout);
                assert!(t.contains("imported from rtla osnoise hist"), "{t}");
            }
        }
    }
}

#[test]
fn bad_input_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str); 6] = [
        (
            "o.txt",
            "        Core:\t 0 1\n    001 (us):\t 5\n",
            "1 values, expected one per CPU",
        ),
        (
            "x.txt",
            "#0: ID1, P95, CPU0, I1000; #1: ID2, P95, CPU0, Cycles 5\n#1 -> #0, Min 3, Cur 5, Avg 5, Max 81\n",
            "--from ptsematest",
        ),
        (
            "j.json",
            r#"{"cpu": {"0": {"histogram": {"5": 10}, "count": 3, "min": 5, "max": 5}}}"#,
            "count 3 but the histogram holds 10",
        ),
        (
            "s.txt",
            "stress-ng: info:  [7] cyclic:   min: 99999999999999999999999 ns, max: 1 ns\n",
            "min: expected a non-negative integer",
        ),
        (
            "p.json",
            r#"{"cmdline:": "pmqtest -q", "thread": {"0": {"sender": {"samples": 5}, "receiver": {"min": 3, "avg": 4, "max": 18446744073709551615}}}}"#,
            "is too large",
        ),
        (
            "w.txt",
            "#0: ID1, P95, CPU0, I1000; #1: ID2, P95, CPU0, Cycles 5\n#1 -> #0, Min 9, Cur 5, Avg 5, Max 3\n",
            "min 9000 ns is above max 3000 ns",
        ),
    ];
    for (name, text, want) in cases {
        let f = dir.path().join(name);
        std::fs::write(&f, text).unwrap();
        let extra: &[&str] = if name == "w.txt" {
            &["--from", "svsematest"]
        } else {
            &[]
        };
        let out = import(&f, extra).expect_err(name);
        let err = one_error_line(&out);
        assert!(err.contains(want), "{name}: {err}");
    }
}

// ------------------------------------------------------------------ real tools

/// The tool's path, or None (skipped, or failed under LATLAB_REQUIRE_PRIVILEGED=1).
fn have(test: &str, tool: &str) -> bool {
    let found = StdCommand::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        cannot_run(
            test,
            &format!("{tool} is not installed (scripts/deps.sh installs it)"),
        );
    }
    found
}

/// Run `cmd` in `dir` (bounded by `timeout`), its stdout; panics with its output on failure.
fn run_tool(dir: &Path, cmd: &[&str]) -> String {
    let out = StdCommand::new("timeout")
        .arg("30")
        .args(cmd)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn real_oslat_text_and_json() {
    const T: &str = "real_oslat_text_and_json";
    let Some(_g) = privileged::guard(T) else {
        return;
    };
    if !have(T, "oslat") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = run_tool(
        dir.path(),
        &["oslat", "-D", "1", "-c", "0", "--json=o.json"],
    );
    std::fs::write(dir.path().join("o.txt"), &text).unwrap();
    let j = read_json(&dir.path().join("o.json"));
    let t0 = &j["thread"]["0"];
    let from_json = ok(&dir.path().join("o.json"), &[]);
    let from_text = ok(&dir.path().join("o.txt"), &[]);
    for r in [&from_json, &from_text] {
        assert_eq!(r["source"], "oslat");
        assert_eq!(cpu(r, 0, "cpu"), t0["cpu"]);
        assert_eq!(cpu(r, 0, "max_ns"), t0["max"].as_u64().unwrap() * 1000);
        assert_eq!(cpu(r, 0, "min_ns"), t0["min"].as_u64().unwrap() * 1000);
        let n: u64 = t0["histogram"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert!(n > 100_000, "a busy loop for 1 s: {n}");
        assert_eq!(cpu(r, 0, "samples"), n);
    }
}

#[test]
fn real_stress_ng_cyclic() {
    const T: &str = "real_stress_ng_cyclic";
    let Some(_g) = privileged::guard(T) else {
        return;
    };
    if !have(T, "stress-ng") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = run_tool(
        dir.path(),
        &[
            "stress-ng",
            "--cyclic",
            "1",
            "--cyclic-policy",
            "fifo",
            "--cyclic-dist",
            "1000",
            "-t",
            "2",
        ],
    );
    std::fs::write(dir.path().join("sng.log"), &log).unwrap();
    let r = ok(&dir.path().join("sng.log"), &[]);
    assert_eq!(r["source"], "stress-ng");
    // The numbers stress-ng printed.
    let field = |k: &str| -> u64 {
        let l = log
            .lines()
            .find(|l| l.contains(&format!("cyclic:   {k}")))
            .unwrap();
        let v = l.split(&format!("{k}:")).nth(1).unwrap();
        v.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert_eq!(cpu(&r, 0, "min_ns"), field("min"));
    let max: u64 = log
        .lines()
        .find(|l| l.contains(", max: "))
        .and_then(|l| l.split(", max: ").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(cpu(&r, 0, "max_ns"), max);
    let samples: u64 = log
        .lines()
        .find(|l| l.contains(" samples"))
        .and_then(|l| l.rsplit(", ").next())
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(cpu(&r, 0, "samples"), samples);
    assert!(samples > 1_000, "{samples}");
}

/// pmqtest, ptsematest, svsematest (`-S`) and sigwaittest (`-t 2 -a`): text and JSON of the
/// same run import to the same numbers, which are the JSON's.
#[test]
fn real_rt_tests_wakeup_tools() {
    const T: &str = "real_rt_tests_wakeup_tools";
    let Some(_g) = privileged::guard(T) else {
        return;
    };
    for tool in ["pmqtest", "ptsematest", "sigwaittest", "svsematest"] {
        if !have(T, tool) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let smp: &[&str] = if tool == "sigwaittest" {
            &["-t", "2", "-a"]
        } else {
            &["-S"]
        };
        let mut cmd = vec![tool];
        cmd.extend_from_slice(smp);
        cmd.extend_from_slice(&["-p", "90", "-i", "1000", "-D", "1", "-q", "--json=w.json"]);
        let text = run_tool(dir.path(), &cmd);
        let txt = dir.path().join(format!("{tool}.txt"));
        std::fs::write(&txt, &text).unwrap();
        let j = read_json(&dir.path().join("w.json"));
        let from_json = ok(&dir.path().join("w.json"), &[]);
        let from_text = ok(&txt, &[]);
        // The text's receivers' `Cycles N`, in order (the JSON has the senders' count, which
        // can be one more: a wake-up sent as the run ended).
        let cycles: Vec<u64> = text
            .lines()
            .filter_map(|l| l.split("Cycles ").nth(1))
            .map(|v| v.trim().parse().unwrap())
            .collect();
        for r in [&from_json, &from_text] {
            let text_import = std::ptr::eq(r, &from_text);
            assert_eq!(r["source"], tool, "{tool}");
            assert_eq!(r["config"]["mode"], "wakeup", "{tool}");
            let threads = j["thread"].as_object().unwrap();
            assert_eq!(r["cpus"].as_array().unwrap().len(), threads.len(), "{tool}");
            for (i, t) in threads.values().enumerate() {
                let rc = &t["receiver"];
                if text_import {
                    assert_eq!(cpu(r, i, "samples"), cycles[i], "{tool}");
                } else {
                    assert_eq!(cpu(r, i, "samples"), t["sender"]["samples"], "{tool}");
                }
                assert_eq!(
                    cpu(r, i, "max_ns"),
                    rc["max"].as_u64().unwrap() * 1000,
                    "{tool}"
                );
                assert_eq!(
                    cpu(r, i, "min_ns"),
                    rc["min"].as_u64().unwrap() * 1000,
                    "{tool}"
                );
                assert_eq!(cpu(r, i, "cpu"), rc["cpu"], "{tool}");
            }
        }
    }
}

/// Huge numbers in a few bytes cost no memory: far buckets go to the log-scaled tail (the
/// dense part stays latlab's 10 ms default) and the max stays exact; wrapping values are errors.
#[test]
fn far_values_are_bounded_and_exact() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("far.json");
    std::fs::write(
        &f,
        r#"{"sysinfo": {"resolution_in_ns": 1000}, "cpu": {"0": {"histogram": {"9999999999": 1}, "count": 1, "min": 9999999999, "max": 9999999999, "avg": 9999999999}}}"#,
    )
    .unwrap();
    let r = ok(&f, &["--from", "jitterdebugger"]);
    assert_eq!(cpu(&r, 0, "max_ns"), 9_999_999_999_000u64);
    assert_eq!(r["cpus"][0]["histogram"]["limit_ns"], 10_000_000);
    let f = dir.path().join("far.log");
    std::fs::write(
        &f,
        "stress-ng: info:  [1] cyclic: sched SCHED_FIFO: 100000 ns delay, 1 samples\n\
         stress-ng: info:  [1] cyclic:   mean: 900000000000000.00 ns, mode: 1 ns\n\
         stress-ng: info:  [1] cyclic:   min: 900000000000000 ns, max: 900000000000000 ns, std.dev. 0.00\n\
         stress-ng: info:  [1] cyclic: latency distribution (1 ns intervals):\n\
         stress-ng: info:  [1] cyclic:   900000000000000          1\n",
    )
    .unwrap();
    let r = ok(&f, &[]);
    assert_eq!(cpu(&r, 0, "max_ns"), 900_000_000_000_000u64);
    let f = dir.path().join("wrap.json");
    std::fs::write(
        &f,
        r#"{"cpu": {"0": {"histogram": {"18446744073709551615": 1}, "count": 1, "min": 1, "max": 1}}}"#,
    )
    .unwrap();
    let err = one_error_line(&import(&f, &["--from", "jitterdebugger"]).unwrap_err());
    assert!(err.contains("too large"), "{err}");
}
