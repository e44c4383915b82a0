//! The live display of `latlab run` (issue 19 part 5): on stderr when stderr is a terminal,
//! with elapsed time and time left, so stdout carries only the report and `--format json`
//! stays parseable. The terminal is a real pseudo-terminal from util-linux's `script`.

use std::process::{Command, Stdio};

mod support;
use support::{bin, latlab};

#[test]
fn live_display_goes_to_a_terminal_stderr_and_json_stdout_stays_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.json");
    let results = tmp.path().join("results");
    let cmd = format!(
        "'{}' run --backend sim --sim-realtime --duration 3s --cpus 0 --no-db --results '{}' --format json > '{}'",
        bin().display(),
        results.display(),
        out.display()
    );
    // script gives the command a pseudo-terminal for stdin, stdout and stderr and copies
    // what reaches it to its own stdout; the command's stdout goes to a file.
    let tty = Command::new("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("util-linux script (bsdutils) runs");
    let screen = String::from_utf8_lossy(&tty.stdout).to_string();
    assert!(
        tty.status.success(),
        "{:?}: {screen}{}",
        tty.status,
        String::from_utf8_lossy(&tty.stderr)
    );
    let json = std::fs::read(&out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&json)
        )
    });
    assert_eq!(v["total"]["samples"], 3000, "{v}");
    assert!(!json.contains(&0x1b), "an escape sequence reached stdout");
    // The terminal saw the live display: a status line each second, then the final one.
    assert!(
        screen.contains("elapsed 0:0")
            && screen.contains(" of 0:03, 0:0")
            && screen.contains(" left"),
        "{screen}"
    );
    assert!(screen.contains("measured 0:03 of 0:03, done"), "{screen}");
    assert!(screen.contains("CPU0   cur "), "{screen}");

    // stderr not a terminal (piped): no live display, no escape sequences.
    let o = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "2s",
            "--cpus",
            "0",
            "--no-db",
        ])
        .arg("--results")
        .arg(&results)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success());
    serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("elapsed") && !err.contains('\x1b'), "{err}");
}

/// A timed run keeps per-interval histograms in run.json (every sample in exactly one
/// interval) and its report draws them as a heat map; a fast simulation has no time axis and
/// keeps none. `LATLAB_INTERVAL_MS` (a test hook) makes the intervals 1 s instead of a minute.
#[test]
fn a_timed_run_keeps_per_interval_histograms_and_draws_the_heat_map() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    latlab()
        .env("LATLAB_INTERVAL_MS", "1000")
        .args([
            "run",
            "--backend",
            "sim",
            "--sim-realtime",
            "--duration",
            "3s",
        ])
        .args(["--cpus", "0", "--no-db", "-q", "--results"])
        .arg(&results)
        .assert()
        .success();
    let dir = support::only_run_dir(&results);
    let v = support::read_json(&dir.join("run.json"));
    let iv = &v["intervals"];
    assert_eq!(iv["interval_ns"], 1_000_000_000u64, "{iv}");
    let ivs = iv["intervals"].as_array().unwrap();
    assert_eq!(ivs.len(), 3, "{iv}");
    let per: Vec<u64> = ivs
        .iter()
        .map(|i| {
            i.as_array()
                .unwrap()
                .iter()
                .map(|b| b[1].as_u64().unwrap())
                .sum()
        })
        .collect();
    assert_eq!(per.iter().sum::<u64>(), 3000, "{per:?}");
    // Each second holds about its 1000 wake-ups (a boundary may move a tick's worth).
    assert!(per.iter().all(|&n| (800..=1200).contains(&n)), "{per:?}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("<h2 id=\"latency-over-time\">Latency over time</h2>")
            && html.contains("latency over time, all CPUs")
    );

    let fast = tmp.path().join("fast");
    latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "3s",
            "--cpus",
            "0",
            "--no-db",
            "-q",
        ])
        .arg("--results")
        .arg(&fast)
        .assert()
        .success();
    let v = support::read_json(&support::only_run_dir(&fast).join("run.json"));
    assert!(
        v.get("intervals").is_none(),
        "a fast simulation has no time axis"
    );
}
