//! `--backend timerlat` where it cannot run, and its flag with another back end: one line,
//! exit 1, nothing written or changed. (The back end itself is proven in the kernel lab:
//! lab_timerlat.rs.)

mod support;

#[test]
fn max_latency_of_needs_the_timerlat_back_end() {
    let t = tempfile::tempdir().unwrap();
    let out = support::latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "1s",
            "--no-db",
            "--results",
        ])
        .arg(t.path().join("r"))
        .args(["--max-latency", "1ms", "--max-latency-of", "irq"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--max-latency-of") && err.contains("--backend timerlat"),
        "{err}"
    );
    assert!(!t.path().join("r").exists());
}

/// The kernel's tracers, tracefs mounted for the look when it is mounted nowhere (and
/// unmounted again, as it was).
fn available_tracers() -> std::io::Result<String> {
    let root = std::path::Path::new("/sys/kernel/tracing");
    if root.join("available_tracers").is_file() {
        return std::fs::read_to_string(root.join("available_tracers"));
    }
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev"])
        .arg(root)
        .status()?
        .success();
    let text = std::fs::read_to_string(root.join("available_tracers"));
    if mounted {
        let _ = std::process::Command::new("umount").arg(root).status();
    }
    text
}

#[test]
fn a_kernel_without_timerlat_is_one_line_and_nothing_changes() {
    let test = "a_kernel_without_timerlat_is_one_line_and_nothing_changes";
    // The guard first: another privileged test may have tracefs mounted only while it runs
    // (a fresh clone's run read available_tracers between two of them and found no file).
    let Some(_g) = latlab_sys::privileged::guard(test) else {
        return;
    };
    let tracers = match available_tracers() {
        Ok(s) => s,
        Err(e) => {
            return support::cannot_run(test, &format!("cannot read available_tracers: {e}"));
        }
    };
    if tracers.split_whitespace().any(|t| t == "timerlat") {
        // Not a failure: this kernel has the tracer (the lab proves what then happens).
        eprintln!("skipping {test}: this kernel has the timerlat tracer");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let rt = t.path().join("runtime");
    let out = support::latlab()
        .env("LATLAB_RUNTIME_DIR", &rt)
        .args([
            "run",
            "--backend",
            "timerlat",
            "--duration",
            "1s",
            "--no-db",
            "--results",
        ])
        .arg(t.path().join("r"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("latlab: error: this kernel has no timerlat tracer")
            && err.contains("CONFIG_TIMERLAT_TRACER"),
        "{err}"
    );
    assert!(!t.path().join("r").exists(), "a run directory was written");
    let ledgers: Vec<_> = std::fs::read_dir(&rt).into_iter().flatten().collect();
    assert!(ledgers.is_empty(), "{ledgers:?}");
}
