//! `latlab profile --no-measure`: the profile alone, on a real task the test pins to a CPU;
//! no measuring thread; the run directory works with every reader (report in every format,
//! compare, export, db push/pull); SIGTERM ends it cleanly. Privileged (tracefs): fails, not
//! skips, under LATLAB_REQUIRE_PRIVILEGED=1. The flags it refuses need no privilege.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_core::profile::Series;
use latlab_sys::rt;

/// The profile's instance of the latlab process `pid`, once it records.
fn wait_recording(child: &mut Child) -> PathBuf {
    let on = PathBuf::from(format!(
        "/sys/kernel/tracing/instances/latlab-{}-prof/tracing_on",
        child.id()
    ));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if std::fs::read_to_string(&on).is_ok_and(|s| s.trim() == "1") {
            return on;
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("latlab profile ended before recording: {st}");
        }
        assert!(Instant::now() < deadline, "the profile never started");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The comms of the threads of process `pid` now.
fn thread_comms(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The thread ids of process `pid` now.
fn thread_ids(pid: u32) -> Vec<i64> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn one_error_line(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("latlab: error: "), "{err}");
    err
}

#[test]
fn flags_about_the_measuring_threads_are_refused() {
    for flags in [
        &["--interval", "1ms"][..],
        &["--max-latency", "1ms"],
        &["--trace-threshold", "100us"],
        &["--cpus", "0"],
        &["--priority", "95"],
        &["--policy", "other"],
        &["--mode", "wakeup"],
        &["--backend", "sim"],
        &["--metrics-listen", "127.0.0.1:0"],
    ] {
        let o = support::command()
            .args(["profile", "--no-measure", "--duration", "1s", "--no-db"])
            .args(flags)
            .output()
            .unwrap();
        let err = one_error_line(&o);
        assert!(
            err.contains("--no-measure") && err.contains(flags[0]),
            "{flags:?}: {err}"
        );
    }
}

/// A SCHED_OTHER busy loop pinned to the last CPU during a `--no-measure` profile: runnable
/// all along on that CPU; latlab started no measuring thread (none in its process, none in the
/// wait rows); the run directory reads back everywhere.
#[test]
fn no_measure_profile_of_a_busy_loop() {
    let Some(_g) = support::privileged::guard("profile_no_measure") else {
        return;
    };
    let cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    let mut child = support::command()
        .args([
            "profile",
            "--no-measure",
            "--duration",
            "5s",
            "-q",
            "--no-db",
        ])
        .args(["--profile-top", "100000", "--results"])
        .arg(&results)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let on = wait_recording(&mut child);
    let pid = child.id();

    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let busy = std::thread::spawn(move || {
        // SAFETY: plain syscalls on the calling thread with valid arguments.
        let tid = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
            let c = std::ffi::CString::new("nm-busy").unwrap();
            libc::prctl(libc::PR_SET_NAME, c.as_ptr());
            libc::syscall(libc::SYS_gettid)
        };
        let t0 = rt::now_ns();
        while !s2.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
        (tid, t0, rt::now_ns())
    });
    // While the busy loop runs: latlab's threads, looked at a few times.
    let (mut comms, mut tids) = (Vec::new(), std::collections::BTreeSet::new());
    for _ in 0..20 {
        comms.extend(thread_comms(pid));
        tids.extend(thread_ids(pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let (_, t0, t1) = busy.join().unwrap();
    let still = std::fs::read_to_string(&on).is_ok_and(|s| s.trim() == "1");
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        still,
        "the profile ended before the busy loop: raise --duration"
    );
    assert!(
        !on.parent().unwrap().exists(),
        "the instance was left behind"
    );
    assert!(comms.iter().any(|c| c == "latlab-profile"), "{comms:?}");
    assert!(
        !comms.iter().any(|c| c.starts_with("latlab-cpu")),
        "a measuring thread ran: {comms:?}"
    );

    let dir = support::only_run_dir(&results);
    let run = support::read_json(&dir.join("run.json"));
    assert_eq!(run["config"]["mode"], "none", "{}", run["config"]);
    assert_eq!(run["config"]["cpus"], serde_json::json!([]));
    assert!(run["config"]["interval_ns"].is_null());
    assert!(run["config"]["priority"].is_null());
    assert_eq!(run["cpus"], serde_json::json!([]));
    assert_eq!(run["total"]["samples"], 0);
    assert_eq!(run["complete"], true);
    let p = &run["profile"];
    assert!(p["events"].as_u64().unwrap() > 0, "{p}");
    let rows = p["wait"].as_array().unwrap();
    // The profile watches the whole machine: another latlab measuring meanwhile (seen with
    // two test runs side by side) has rows of its own; this one's threads must have none.
    assert!(
        !rows.iter().any(|r| {
            r["comm"].as_str().unwrap().starts_with("latlab-cpu")
                && r["pid"].as_i64().is_some_and(|t| tids.contains(&t))
        }),
        "a measuring thread of this latlab in the wait rows: {rows:?}"
    );
    assert_eq!(p["measuring"], serde_json::json!([]), "{p}");
    assert!(
        rows.iter().any(|r| r["comm"] == "latlab-profile"),
        "the profile's own reader is seen (the rows are real): {p}"
    );

    // The busy loop's CPU over its stretch: ≥ 1 runnable all the time.
    let s = Series::from_bytes(&std::fs::read(dir.join(p["series"].as_str().unwrap())).unwrap())
        .unwrap();
    // A margin of 20 ms at each end (the loop's first and last pixels are partial); the loop
    // may start before the profile's own start (a new instance reads tracing_on 1 before
    // latlab has set it up).
    let (from, to) = (t0.max(s.start_ns) + 20_000_000, t1 - 20_000_000);
    assert!(
        to > from + 1_000_000_000,
        "busy loop too short: {from}..{to}"
    );
    let known = support::known_pixels(&s, cpu as u32, from, to);
    let runnable = known.iter().filter(|&&v| v >= 1).count() as f64 / known.len() as f64;
    assert!(runnable > 0.99, "busy loop runnable {runnable} of the time");

    readers_work_on(&dir, tmp.path());
}

/// Every reader of a run directory on a `--no-measure` run: works, or says in one line why not.
fn readers_work_on(dir: &Path, tmp: &Path) {
    let latlab = |args: &[&str]| -> Output {
        support::command()
            .args(args)
            .env("LATLAB_DB", tmp.join("db.sqlite"))
            .output()
            .unwrap()
    };
    let d = dir.to_str().unwrap();
    for f in ["text", "markdown", "json", "html"] {
        let o = latlab(&["report", d, "--format", f]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        match f {
            "text" | "markdown" => assert!(out.contains("no latency measured"), "{f}: {out}"),
            "json" => {
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                assert_eq!(v["total"]["samples"], 0, "{v}");
            }
            _ => assert!(out.contains("</html>"), "{f}"),
        }
    }
    let err = one_error_line(&latlab(&["report", d, "--format", "cyclictest"]));
    assert!(err.contains("no latency was measured"), "{err}");
    let err = one_error_line(&latlab(&["compare", d, d]));
    assert!(err.contains("no samples"), "{err}");

    let pf = tmp.join("p.pftrace");
    let o = latlab(&[
        "export",
        d,
        "--format",
        "perfetto",
        "-o",
        pf.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::metadata(&pf).unwrap().len() > 0);

    let o = latlab(&["db", "push", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = support::read_json(&dir.join("run.json"));
    let back = tmp.join("pulled");
    let o = latlab(&[
        "db",
        "pull",
        run["run_id"].as_str().unwrap(),
        "-o",
        back.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pulled = support::read_json(&back.join("run.json"));
    assert_eq!(pulled["config"], run["config"]);
    assert_eq!(pulled["profile"], run["profile"]);
}

/// SIGTERM ends a `--no-measure` profile like a run: a complete record that says it was
/// interrupted, the tracefs instance removed.
#[test]
fn no_measure_profile_ends_on_sigterm() {
    let Some(_g) = support::privileged::guard("profile_no_measure_sigterm") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut child = support::command()
        .args([
            "profile",
            "--no-measure",
            "--duration",
            "10m",
            "-q",
            "--no-db",
        ])
        .arg("--results")
        .arg(tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let on = wait_recording(&mut child);
    // SAFETY: plain syscall to our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "slow to stop");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !on.parent().unwrap().exists(),
        "the instance was left behind"
    );
    let run = support::read_json(&support::only_run_dir(tmp.path()).join("run.json"));
    assert_eq!(run["complete"], true);
    assert!(run["warnings"].to_string().contains("interrupted"), "{run}");
    assert!(run["profile"]["events"].as_u64().unwrap() > 0);
}

/// `latlab bench profile` with tiny settings: its JSON parses and the figures are plausible
/// (not a timing assertion).
#[test]
fn bench_profile_prints_plausible_figures() {
    let Some(_g) = support::privileged::guard("bench_profile") else {
        return;
    };
    let cpu = (std::thread::available_parallelism().map_or(1, |n| n.get()) - 1).to_string();
    let o = support::command()
        .args(["bench", "profile", "--pairs", "1", "--duration", "1s"])
        .args(["--cpu", &cpu, "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{v}");
    let (run, prof) = (&pairs[0]["run"], &pairs[0]["profile"]);
    for f in [run, prof] {
        // 1 s at 1 ms: about 1000 samples each.
        let n = f["samples"].as_u64().unwrap();
        assert!((500..=1100).contains(&n), "{f}");
        assert!(f["p50_ns"].as_u64().unwrap() > 0, "{f}");
        assert!(f["p99_ns"].as_u64().unwrap() >= f["p50_ns"].as_u64().unwrap());
        let hwm = f["vm_hwm_kib"].as_u64().unwrap();
        assert!(
            (1024..4 << 20).contains(&hwm),
            "latlab's peak RSS {hwm} KiB: {f}"
        );
        // wait4's figure covers latlab too (the kernel's RSS counters are approximate: a
        // little below VmHWM is seen).
        assert!(f["ru_maxrss_kib"].as_u64().unwrap() * 10 >= hwm * 9, "{f}");
    }
    assert!(prof["events"].as_u64().unwrap() > 0, "{prof}");
    let eps = prof["events_per_s"].as_f64().unwrap();
    assert!(eps > 0.0 && eps.is_finite(), "{prof}");
    assert!(prof["series_bytes"].as_u64().unwrap() > 0, "{prof}");
    assert!(prof["trace_dat_bytes"].as_u64().unwrap() > 0, "{prof}");
    assert_eq!(v["events_per_s"]["median"].as_f64().unwrap(), eps);
    let r = pairs[0]["ratio_p99"].as_f64().unwrap();
    assert!(r > 0.0 && r.is_finite(), "{v}");
    // No pairs: a one-line error.
    let o = support::command()
        .args(["bench", "profile", "--pairs", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--pairs 0"));
}
