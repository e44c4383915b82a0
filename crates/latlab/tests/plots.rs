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
