//! `latlab check` and `latlab cleanup` through the CLI.
//!
//! Golden files (insta snapshots, as every report format's): `latlab check --root <fixture
//! tree>` must print exactly `tests/snapshots/check__check_<tree>_{txt,json}.snap`. After an
//! intended change of the output, regenerate them and review the diff:
//! `INSTA_UPDATE=always cargo test -p latlab --test check golden`.

use std::fs;
use std::path::{Path, PathBuf};

use latlab_sys::ledger::{Entry, LedgerFile};

mod support;
use support::latlab;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../latlab-sys/tests/fixtures/inventory")
}

fn golden(tree: &str, format: &str, ext: &str) {
    let out = latlab()
        .args(["check", "--format", format, "--root"])
        .arg(fixtures().join(tree))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!(
        format!("check_{}_{ext}", tree.replace(['-', '.'], "_")),
        String::from_utf8(out.stdout).expect("check prints UTF-8")
    );
}

#[test]
fn golden_outputs() {
    for tree in [
        "rt-tuned",
        "desktop",
        "this-vm",
        "garbage",
        "debian-6.12-rt",
    ] {
        golden(tree, "text", "txt");
        golden(tree, "json", "json");
    }
}

#[test]
fn garbage_tree_text_has_no_control_characters_and_names_the_files() {
    let out = latlab()
        .args(["check", "--root"])
        .arg(fixtures().join("garbage"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(
        text.contains("unknown: /proc/stat holds an unexpected value"),
        "{text}"
    );
    assert!(
        text.contains("unknown: /proc/sys/kernel/sched_rt_period_us not readable"),
        "{text}"
    );
    let json = latlab()
        .args(["check", "--format", "json", "--root"])
        .arg(fixtures().join("garbage"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"invalid:/proc/sys/kernel/sched_rt_runtime_us"),
        "{ids:?}"
    );
}

#[test]
fn check_root_that_is_not_a_directory_is_an_error_naming_the_flag() {
    latlab()
        .args(["check", "--root", "/nonexistent/latlab-tree"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("--root /nonexistent/latlab-tree"));
}

#[test]
fn check_on_this_machine_reports_its_kernel() {
    let out = latlab()
        .args(["check", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(v["inventory"]["kernel"]["release"], release.trim());
    assert_eq!(
        v["inventory"]["virt"]["steal_sample_ms"], 1000,
        "live check samples steal"
    );
    assert!(!v["findings"].as_array().unwrap().is_empty());
}

/// `latlab cleanup` with its ledgers in `rt`: its output and its stdout as text.
fn cleanup(rt: &Path) -> (std::process::Output, String) {
    let out = latlab()
        .env("LATLAB_RUNTIME_DIR", rt)
        .arg("cleanup")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    (out, text)
}

/// A dead run's ledger in `rt`: a knob to restore to "original", then a scratch directory.
fn knob_and_scratch_ledger(rt: &Path, knob: &Path, scratch: &Path) -> PathBuf {
    write_ledger(
        rt,
        dead_pid(),
        Some(1),
        vec![
            Entry::Knob {
                path: knob.to_path_buf(),
                original: "original".into(),
            },
            Entry::ScratchDir {
                path: scratch.to_path_buf(),
            },
        ],
    )
}

/// A pid that existed and is now gone (the child was reaped).
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn write_ledger(dir: &Path, pid: u32, starttime: Option<u64>, entries: Vec<Entry>) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let file = LedgerFile {
        pid,
        starttime,
        entries: entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| (i as u64 + 1, e))
            .collect(),
    };
    let p = dir.join(format!("{pid}.json"));
    fs::write(&p, serde_json::to_vec(&file).unwrap()).unwrap();
    p
}

#[test]
fn cleanup_undoes_a_dead_runs_ledger_and_spares_a_live_one() {
    // Not privileged, but `cleanup` as root also sweeps machine-wide leftovers (tracefs
    // instances and cgroups of dead pids), which privileged tests plant: not meanwhile.
    let _g = latlab_sys::privileged::lock();
    let tmp = tempfile::tempdir().unwrap();
    let rt = tmp.path().join("run");
    let knob = tmp.path().join("knob");
    fs::write(&knob, "changed-by-latlab").unwrap();
    let scratch = tmp.path().join("scratch");
    fs::create_dir_all(scratch.join("deep/er")).unwrap();
    let dead = knob_and_scratch_ledger(&rt, &knob, &scratch);
    // A ledger of a live process (this test) must not be touched.
    let me = std::process::id();
    let live_scratch = tmp.path().join("live-scratch");
    fs::create_dir_all(&live_scratch).unwrap();
    let live = write_ledger(
        &rt,
        me,
        latlab_sys::ledger::process_starttime(me),
        vec![Entry::ScratchDir {
            path: live_scratch.clone(),
        }],
    );

    let (out, text) = cleanup(&rt);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read_to_string(&knob).unwrap(), "original");
    assert!(!scratch.exists());
    assert!(!dead.exists(), "the dead run's ledger is removed");
    assert!(
        text.contains(&format!("restored {}", knob.display())),
        "{text}"
    );
    assert!(text.contains("removed scratch directory"), "{text}");
    assert!(
        live.exists() && live_scratch.exists(),
        "a live ledger is never touched"
    );

    // Second time: nothing of ours is left to do.
    fs::remove_file(&live).unwrap();
    let (_, text) = cleanup(&rt);
    assert!(!text.contains(&tmp.path().display().to_string()), "{text}");
    if !text.contains("tracefs instance") {
        assert_eq!(text.trim(), "nothing to clean up");
    }
}

/// What cleanup cannot undo stays in the dead run's ledger (for the next cleanup) and makes
/// the exit code 1; what it can undo is undone and dropped from the file.
#[test]
fn cleanup_keeps_what_it_could_not_undo() {
    // Not privileged, but `cleanup` as root also sweeps machine-wide leftovers (tracefs
    // instances and cgroups of dead pids), which privileged tests plant: not meanwhile.
    let _g = latlab_sys::privileged::lock();
    let tmp = tempfile::tempdir().unwrap();
    let rt = tmp.path().join("run");
    let scratch = tmp.path().join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    // A knob in a directory that does not exist: writing it back fails, even as root.
    let knob = tmp.path().join("missing-dir/knob");
    let ledger = knob_and_scratch_ledger(&rt, &knob, &scratch);
    let (out, text) = cleanup(&rt);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(!scratch.exists(), "{text}");
    assert!(
        text.contains(&format!(
            "could not finish: could not restore {}",
            knob.display()
        )),
        "{text}"
    );
    let left: LedgerFile = serde_json::from_slice(&fs::read(&ledger).unwrap()).unwrap();
    assert_eq!(
        left.entries,
        vec![(
            1,
            Entry::Knob {
                path: knob.clone(),
                original: "original".into()
            }
        )],
        "only the failed entry is kept"
    );
    // Once the knob can be written, the next cleanup finishes and removes the ledger.
    fs::create_dir_all(knob.parent().unwrap()).unwrap();
    let (out, text) = cleanup(&rt);
    assert!(out.status.success(), "{text}");
    assert_eq!(fs::read_to_string(&knob).unwrap(), "original");
    assert!(!ledger.exists(), "{text}");
}

/// A load cgroup `latlab-<pid>-…` of a dead pid (its ledger gone, or its removal given up) is
/// killed and removed, processes and all; one of a live pid stays.
#[test]
fn cleanup_removes_a_dead_pids_load_cgroup() {
    let Some(_g) = latlab_sys::privileged::guard("cleanup_removes_a_dead_pids_load_cgroup") else {
        return;
    };
    let Some(root) = latlab_sys::loads::supervisor::cgroup2_root() else {
        panic!("no cgroup v2 hierarchy on this machine (latlab's loads need one for this test)");
    };
    let dead = root.join(format!("latlab-{}-0-test", dead_pid()));
    let live = root.join(format!("latlab-{}-0-test", std::process::id()));
    fs::create_dir(&dead).unwrap();
    fs::create_dir(&live).unwrap();
    // A process inside the dead run's cgroup, as a killed load would leave.
    let mut sleeper = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    fs::write(dead.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    let rt = tempfile::tempdir().unwrap();
    let (out, text) = cleanup(rt.path());
    // Reaped here: the kill came from cleanup (cgroup.kill), not from this test.
    let status = sleeper.try_wait();
    let dead_left = dead.exists();
    let live_left = live.exists();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let _ = fs::remove_dir(&dead);
    let _ = fs::remove_dir(&live);
    assert!(out.status.success(), "{text}");
    assert!(!dead_left, "{text}");
    assert!(
        text.contains(&format!("removed cgroup {}", dead.display())),
        "{text}"
    );
    assert!(
        matches!(status, Ok(Some(s)) if std::os::unix::process::ExitStatusExt::signal(&s) == Some(9)),
        "the process in the cgroup was killed: {status:?}"
    );
    assert!(live_left, "the live pid's cgroup was removed: {text}");
}

/// Mounts tracefs for the test when it is not mounted, and unmounts it on drop.
struct Tracefs {
    path: PathBuf,
    mounted_here: bool,
}

impl Tracefs {
    fn get() -> Tracefs {
        for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
            if Path::new(p).join("instances").is_dir() {
                return Tracefs {
                    path: p.into(),
                    mounted_here: false,
                };
            }
        }
        let path = PathBuf::from("/sys/kernel/tracing");
        let ok = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev"])
            .arg(&path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount tracefs at {}", path.display());
        Tracefs {
            path,
            mounted_here: true,
        }
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_here {
            let _ = std::process::Command::new("umount")
                .arg(&self.path)
                .status();
        }
    }
}

#[test]
fn cleanup_removes_a_dead_pids_tracefs_instance() {
    let Some(_g) = latlab_sys::privileged::guard("cleanup_removes_a_dead_pids_tracefs_instance")
    else {
        return;
    };
    let t = Tracefs::get();
    let pid = dead_pid();
    let inst = t.path.join("instances").join(format!("latlab-{pid}"));
    fs::create_dir(&inst).unwrap();
    // An instance of a live pid (this test) must stay.
    let mine = t
        .path
        .join("instances")
        .join(format!("latlab-{}", std::process::id()));
    fs::create_dir(&mine).unwrap();
    let rt = tempfile::tempdir().unwrap();
    let (out, text) = cleanup(rt.path());
    let mine_left = mine.exists();
    let _ = fs::remove_dir(&mine);
    let inst_left = inst.exists();
    let _ = fs::remove_dir(&inst);
    assert!(out.status.success(), "{text}");
    assert!(!inst_left, "instance of dead pid {pid} still there: {text}");
    assert!(
        text.contains(&format!("removed tracefs instance {}", inst.display())),
        "{text}"
    );
    assert!(mine_left, "the live pid's instance was removed: {text}");
}

/// Instances outlive an unmount: a killed run's instance must be found even when tracefs is
/// mounted nowhere (a later run mounted and unmounted it). Run in a private mount namespace
/// where tracefs is unmounted, whatever the host has mounted; instances are kernel-global, so
/// the one planted here is what cleanup must remove there. Afterwards tracefs is unmounted
/// again in that namespace (cleanup mounts only to look).
#[test]
fn cleanup_finds_instances_when_tracefs_is_not_mounted() {
    let Some(_g) =
        latlab_sys::privileged::guard("cleanup_finds_instances_when_tracefs_is_not_mounted")
    else {
        return;
    };
    let t = Tracefs::get();
    let pid = dead_pid();
    let inst = t.path.join("instances").join(format!("latlab-{pid}-b"));
    fs::create_dir(&inst).unwrap();
    let rt = tempfile::tempdir().unwrap();
    let bin = assert_cmd::cargo::cargo_bin("latlab");
    let script = format!(
        "umount /sys/kernel/debug/tracing 2>/dev/null; umount /sys/kernel/tracing 2>/dev/null; \
         test -d /sys/kernel/tracing/instances && exit 99; \
         {} cleanup; rc=$?; \
         if test -d /sys/kernel/tracing/instances; then echo STILL-MOUNTED; fi; exit $rc",
        bin.display()
    );
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("LATLAB_RUNTIME_DIR", rt.path())
        .output()
        .expect("unshare (util-linux)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let left = inst.exists();
    let _ = fs::remove_dir(&inst);
    assert_ne!(
        out.status.code(),
        Some(99),
        "could not unmount tracefs in the namespace"
    );
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!left, "instance of dead pid {pid} still there: {text}");
    assert!(
        text.contains(&format!("latlab-{pid}-b (pid {pid} is dead)"))
            && text.contains("tracefs was not mounted"),
        "{text}"
    );
    assert!(
        !text.contains("STILL-MOUNTED"),
        "cleanup left its mount: {text}"
    );
}
