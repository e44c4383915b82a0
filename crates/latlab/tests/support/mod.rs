//! What latlab's integration tests share: the binary under test, the run directories it
//! writes, the privileged-test guard (`latlab_sys::privileged`, in test builds only), and the
//! kernel lab (`lab`: Debian kernels booted under QEMU).
//! Each test file takes it with `mod support;`; not every file uses every helper.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub mod pg;

#[allow(unused_imports)]
pub use latlab_sys::privileged;

pub mod lab;

/// The latlab binary under test (built with the `test-hooks` feature).
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("latlab")
}

/// An `assert_cmd` command of the binary under test.
pub fn latlab() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("latlab").unwrap()
}

/// A plain `std::process::Command` of the binary under test (for spawning and signalling).
pub fn command() -> std::process::Command {
    std::process::Command::new(bin())
}

/// The run directories under `results`, sorted (none when it does not exist).
pub fn run_dirs(results: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(results) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => vec![],
    };
    v.sort();
    v
}

/// The one run directory under `results`.
pub fn only_run_dir(results: &Path) -> PathBuf {
    let dirs = run_dirs(results);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// A JSON file, parsed.
pub fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// A privileged test that cannot run on this machine for a reason found at run time (no
/// changeable I/O scheduler, ...): skips with the reason, or fails under
/// `LATLAB_REQUIRE_PRIVILEGED=1`, where a skip would hide a test that did not run.
pub fn cannot_run(test: &str, why: &str) {
    if std::env::var("LATLAB_REQUIRE_PRIVILEGED").is_ok_and(|v| v == "1") {
        panic!("{test}: LATLAB_REQUIRE_PRIVILEGED=1 but {why}");
    }
    eprintln!("skipping {test}: {why}");
}

/// The known pixels (run-queue lengths) of `cpu` in a profile's series from `from` to `to`
/// (CLOCK_MONOTONIC ns), checking that the series covers the stretch and that at least 95 %
/// of it is known.
pub fn known_pixels(s: &latlab_core::profile::Series, cpu: u32, from: u64, to: u64) -> Vec<u8> {
    let px = &s
        .cpus
        .iter()
        .find(|(c, _)| *c == cpu)
        .expect("the CPU's pixels")
        .1;
    let (a, z) = (
        ((from - s.start_ns) / s.pixel_ns) as usize,
        ((to - s.start_ns) / s.pixel_ns) as usize,
    );
    let window = &px[a..z.min(px.len())];
    assert!(window.len() as u64 >= (to - from) / s.pixel_ns - 1);
    let known: Vec<u8> = window
        .iter()
        .copied()
        .filter(|&v| v != latlab_core::profile::PIXEL_UNKNOWN)
        .collect();
    assert!(known.len() * 100 >= window.len() * 95, "too much unknown");
    known
}

/// Wait until each of `pid`'s measuring threads (`latlab-cpu*`, `n` of them) has slept and
/// woken `wakeups` times (its `voluntary_ctxt_switches`: one per period it waited), so a
/// test that interrupts a run does so after it has measured, whatever the VM's stalls.
/// Panics if that takes more than 60 s or the process ends.
pub fn wait_for_wakeups(pid: u32, n: usize, wakeups: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let counts: Vec<u64> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.flatten()
                    .filter(|t| {
                        std::fs::read_to_string(t.path().join("comm"))
                            .is_ok_and(|c| c.starts_with("latlab-cpu"))
                    })
                    .filter_map(|t| {
                        let s = std::fs::read_to_string(t.path().join("status")).ok()?;
                        s.lines()
                            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                            .and_then(|v| v.trim().parse().ok())
                    })
                    .collect()
            })
            .unwrap_or_default();
        if counts.len() == n && counts.iter().all(|&c| c >= wakeups) {
            return;
        }
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "latlab ({pid}) ended before its threads woke {wakeups} times"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "after 60 s latlab's measuring threads had woken {counts:?} times, not {wakeups}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A simulated run (`run --backend sim --duration 1s -q --no-db`, labelled `label`, plus
/// `extra`) under `results`: its directory.
pub fn sim_run_dir(results: &Path, label: &str, extra: &[&str]) -> PathBuf {
    let o = latlab()
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
        .arg(results)
        .args(extra)
        .output()
        .unwrap();
    let code = o.status.code();
    assert!(
        matches!(code, Some(0 | 2)),
        "{code:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dirs: Vec<PathBuf> = run_dirs(results)
        .into_iter()
        .filter(|d| d.to_string_lossy().ends_with(&format!("-{label}")))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// An import fixture of latlab-core (`crates/latlab-core/tests/fixtures/import/NAME`).
pub fn import_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-core/tests/fixtures/import")
        .join(name)
}

/// `latlab import FILE --results RESULTS --no-db --label LABEL`: the run directory.
pub fn import_dir(results: &Path, file: &Path, label: &str) -> PathBuf {
    let out = latlab()
        .arg("import")
        .arg(file)
        .args(["--no-db", "--label", label, "--results"])
        .arg(results)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Rewrite a run directory's run.json with `f`.
pub fn edit_run_json(dir: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join("run.json");
    let mut v = read_json(&p);
    f(&mut v);
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// `latlab ARGS -o OUT RUN` with an OUT that cannot be written: on a full device
/// (`/dev/full`) and in a read-only directory (unless this user writes there anyway: root).
/// Each is one `latlab: error:` line, exit 1, no panic, and the run directory is as it was.
pub fn unwritable_outputs(args: &[&str], run: &Path, tmp: &Path) {
    let before = std::fs::read(run.join("run.json")).unwrap();
    let ro = tmp.join("read-only");
    std::fs::create_dir_all(&ro).unwrap();
    let mut outs = vec![PathBuf::from("/dev/full")];
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        if std::fs::write(ro.join("probe"), b"x").is_err() {
            outs.push(ro.join("out"));
        } else {
            eprintln!("a read-only directory is writable here (root): only /dev/full checked");
        }
    }
    for out in &outs {
        let o = latlab()
            .args(args)
            .arg("-o")
            .arg(out)
            .arg(run)
            .output()
            .unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(1), "{out:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{out:?}: {err}");
        assert!(err.starts_with("latlab: error: "), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(std::fs::read(run.join("run.json")).unwrap(), before);
}

/// Runs `cmd` (a [`latlab`] command), which must succeed (its stderr in the failure): its
/// stdout.
pub fn stdout_ok(cmd: &mut assert_cmd::Command) -> Vec<u8> {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A run record's traced spikes (those with a `trace_file`), in record order.
pub fn traced_spikes(rec: &serde_json::Value) -> Vec<&serde_json::Value> {
    rec["spikes"]
        .as_array()
        .map(|a| a.iter().filter(|s| s["trace_file"].is_string()).collect())
        .unwrap_or_default()
}
