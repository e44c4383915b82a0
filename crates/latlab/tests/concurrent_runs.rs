//! Two latlab measurements on one CPU distort each other: a run sees the other live runs'
//! ledgers (the CPUs they measure) and refuses to measure on any of the same CPUs without
//! `--force` (naming the other run); on other CPUs it says nothing; with `--force`, and in
//! `latlab cyclictest`, the overlap is a warning in the record; `scenario fairness` too.

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{only_run_dir, read_json, run_dirs};

/// Ends the first run (SIGTERM: it writes its record and restores) when the test ends.
struct Bg(Child);

impl Drop for Bg {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: a signal to our own child, not yet reaped.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        }
        let _ = self.0.wait();
    }
}

fn latlab(rt: &Path, args: &[&str], results: &Path) -> Output {
    support::command()
        .args(args)
        .arg("--results")
        .arg(results)
        .env("LATLAB_RUNTIME_DIR", rt)
        .output()
        .unwrap()
}

#[test]
fn a_second_run_on_a_measured_cpu_is_refused_and_on_another_says_nothing() {
    const TEST: &str = "a_second_run_on_a_measured_cpu_is_refused_and_on_another_says_nothing";
    let Some(_g) = support::privileged::guard(TEST) else {
        return;
    };
    let online = latlab_sys::rt::online_cpus().unwrap();
    if !(online.contains(&0) && online.contains(&1)) {
        return support::cannot_run(TEST, "needs CPUs 0 and 1 online");
    }
    let t = tempfile::tempdir().unwrap();
    // The runs' own runtime directory: what other tests on this machine run is not in it.
    let rt = t.path().join("rt");
    let first = Bg(support::command()
        .args(["run", "--cpus", "1", "--duration", "60s", "-q", "--results"])
        .arg(t.path().join("first"))
        .env("LATLAB_RUNTIME_DIR", &rt)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(t.path().join("first.err")).unwrap())
        .spawn()
        .unwrap());
    let pid = first.0.id();
    // Until the first run has begun: its ledger exists (once it has changed the machine).
    let ledger = rt.join(format!("{pid}.json"));
    let t0 = Instant::now();
    while !ledger.exists() {
        let err = std::fs::read_to_string(t.path().join("first.err")).unwrap_or_default();
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the first run never began: {err}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // The same CPU: refused, one line naming the other run, nothing written.
    let out = latlab(
        &rt,
        &["run", "--cpus", "1", "--duration", "1s", "-q"],
        &t.path().join("same"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a second run measured CPU 1: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "latlab: error: CPU 1 already measured by another latlab: pid {pid} (latlab run on CPUs 1); "
        )) && err.contains("add --force"),
        "{err}"
    );
    assert!(run_dirs(&t.path().join("same")).is_empty());
    // So is a fairness scenario on it.
    let out = latlab(
        &rt,
        &["scenario", "fairness", "--cpus", "1", "--duration", "1s"],
        &t.path().join("fair"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&format!(
            "latlab: error: CPU 1 already measured by another latlab: pid {pid} (latlab run on CPUs 1)"
        )),
        "{err}"
    );
    assert!(run_dirs(&t.path().join("fair")).is_empty());

    // Another CPU: no word.
    let out = latlab(
        &rt,
        &["run", "--cpus", "0", "--duration", "1s", "-q"],
        &t.path().join("other"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("another latlab"), "{err}");
    let run = read_json(&only_run_dir(&t.path().join("other")).join("run.json"));
    assert!(!run["warnings"].to_string().contains("another latlab"));

    // --force, and cyclictest (no such flag): measured, with a warning in the record.
    let want = format!(
        "CPU 1 also measured by another latlab when this one started: pid {pid} (latlab run on CPUs 1)"
    );
    let out = latlab(
        &rt,
        &["run", "--cpus", "1", "--duration", "1s", "-q", "--force"],
        &t.path().join("forced"),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let run = read_json(&only_run_dir(&t.path().join("forced")).join("run.json"));
    assert!(
        run["warnings"].to_string().contains(&want),
        "{}",
        run["warnings"]
    );
    let out = latlab(
        &rt,
        &[
            "cyclictest",
            "-a",
            "1",
            "-t",
            "1",
            "-p",
            "95",
            "-D",
            "1",
            "-q",
        ],
        &t.path().join("ct"),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let run = read_json(&only_run_dir(&t.path().join("ct")).join("run.json"));
    assert!(
        run["warnings"].to_string().contains(&want),
        "{}",
        run["warnings"]
    );

    // The first run was live through all of it (its claim was there for every check).
    let mut first = first;
    assert!(
        first.0.try_wait().unwrap().is_none(),
        "the first run ended early"
    );
}
