//! Privileged tests of the real backend: SCHED_FIFO threads on every CPU, for real. They skip
//! without root (LATLAB_REQUIRE_PRIVILEGED=1 makes that a failure) and run one at a time.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use latlab_sys::privileged;

mod support;
use support::{bin, only_run_dir, read_json};

/// Processes (pid) that hold /dev/cpu_dma_latency open.
fn dma_holders() -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        if fds.flatten().any(|f| {
            std::fs::read_link(f.path()).is_ok_and(|l| l == Path::new("/dev/cpu_dma_latency"))
        }) {
            out.push(pid);
        }
    }
    out
}

fn measurement_threads(pid: u32) -> Vec<(String, i32)> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    rd.flatten()
        .filter_map(|e| {
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            if !comm.starts_with("latlab-cpu") {
                return None;
            }
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 2..];
            // field 41 = policy (1 = SCHED_FIFO); rest starts at field 3.
            let policy: i32 = rest.split_whitespace().nth(38)?.parse().ok()?;
            Some((comm.trim().to_string(), policy))
        })
        .collect()
}

/// Kills the child if the test fails, so no latlab outlives it.
struct Reap(Child);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_threads(child: &mut Child, n: usize) -> Vec<(String, i32)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = measurement_threads(child.id());
        // Threads are named at spawn and made FIFO just after: wait for both.
        if t.len() == n && t.iter().all(|(_, p)| *p == libc::SCHED_FIFO) {
            return t;
        }
        assert!(child.try_wait().unwrap().is_none(), "latlab exited early");
        assert!(
            Instant::now() < deadline,
            "measurement threads never appeared"
        );
        std::thread::yield_now();
    }
}

#[test]
fn two_second_run_on_every_cpu() {
    let Some(_g) = privileged::guard("two_second_run_on_every_cpu") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let st = Command::new(bin())
        .args(["run", "--duration", "2s", "--quiet", "--results"])
        .arg(t.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let v = read_json(&only_run_dir(t.path()).join("run.json"));
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let n = latlab_core::cpulist::parse_cpu_list(&online).unwrap().len();
    assert_eq!(v["cpus"].as_array().unwrap().len(), n);
    for c in v["cpus"].as_array().unwrap() {
        // Every 1 ms period of the 2 s is a sample or a missed period (the VM's stalls miss
        // up to dozens of periods: samples alone went down to 1950 here).
        let samples = c["samples"].as_u64().unwrap();
        let missed = c["missed_periods"].as_u64().unwrap();
        assert!(
            (samples + missed).abs_diff(2000) <= 1,
            "cpu {}: {samples} samples, {missed} missed",
            c["cpu"]
        );
        assert!(samples > 1000, "cpu {}: {samples} samples", c["cpu"]);
        let min = c["min_ns"].as_u64().unwrap();
        let max = c["max_ns"].as_u64().unwrap();
        assert!(min > 0, "a wake-up cannot take 0 ns");
        assert!(max >= c["p99_ns"].as_u64().unwrap());
        assert_eq!(c["thread"]["policy"], "fifo");
    }
}

fn interrupted_run(sig: i32, name: &str) {
    let Some(_g) = privileged::guard(name) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let mut reap = Reap(
        Command::new(bin())
            .args(["run", "--duration", "60s", "--quiet", "--results"])
            .arg(t.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let child = &mut reap.0;
    let n = latlab_core::cpulist::parse_cpu_list(
        &std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap(),
    )
    .unwrap()
    .len();
    let threads = wait_for_threads(child, n);
    assert!(
        threads.iter().all(|(_, p)| *p == libc::SCHED_FIFO),
        "{threads:?}"
    );
    // While it runs, latlab holds /dev/cpu_dma_latency.
    assert!(
        dma_holders().contains(&child.id()),
        "cpu_dma_latency not held during the run"
    );
    // Signal once it has measured: 200 wake-ups on every CPU, however long the VM takes.
    support::wait_for_wakeups(child.id(), n, 200);
    // SAFETY: plain syscall.
    unsafe { libc::kill(child.id() as i32, sig) };
    let st = child.wait().unwrap();
    assert!(st.success(), "{st:?}");
    assert!(
        !Path::new(&format!("/proc/{}", child.id())).exists(),
        "process left behind"
    );
    assert!(!dma_holders().contains(&child.id()));
    let v = read_json(&only_run_dir(t.path()).join("run.json"));
    assert_eq!(v["complete"], true);
    // Everything measured up to the signal: at least the wake-ups seen, and every period of
    // the measured time a sample or a missed period.
    let periods =
        v["config"]["measured_ns"].as_u64().unwrap() / v["config"]["interval_ns"].as_u64().unwrap();
    for c in v["cpus"].as_array().unwrap() {
        let (samples, missed) = (
            c["samples"].as_u64().unwrap(),
            c["missed_periods"].as_u64().unwrap(),
        );
        assert!(samples >= 150, "cpu {}: {samples} samples", c["cpu"]);
        assert!(
            (samples + missed).abs_diff(periods) <= 2,
            "cpu {}: {samples} samples + {missed} missed for {periods} periods",
            c["cpu"]
        );
    }
    assert!(v["warnings"].to_string().contains("interrupted"));
    assert!(only_run_dir(t.path()).join("histogram.txt").exists());
    assert_eq!(v["config"]["dma_latency_us"], 0, "held at the default");
}

/// `--dma-latency off`: the run measures with the CPUs' idle states as they are (it never
/// opens /dev/cpu_dma_latency) and says so; `--dma-latency 20` is held and recorded.
#[test]
fn dma_latency_off_leaves_the_idle_states_alone() {
    let Some(_g) = privileged::guard("dma_latency_off_leaves_the_idle_states_alone") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let mut reap = Reap(
        Command::new(bin())
            .args([
                "run",
                "--cpus",
                "0",
                "--duration",
                "60s",
                "--dma-latency",
                "off",
            ])
            .args(["--no-db", "--quiet", "--results"])
            .arg(t.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let child = &mut reap.0;
    wait_for_threads(child, 1);
    support::wait_for_wakeups(child.id(), 1, 200);
    assert!(
        !dma_holders().contains(&child.id()),
        "--dma-latency off, yet /dev/cpu_dma_latency is held"
    );
    // SAFETY: plain syscall.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().unwrap().success());
    let v = read_json(&only_run_dir(t.path()).join("run.json"));
    assert!(v["config"]["dma_latency_us"].is_null(), "{}", v["config"]);

    let t = tempfile::tempdir().unwrap();
    let st = Command::new(bin())
        .args([
            "run",
            "--cpus",
            "0",
            "--duration",
            "1s",
            "--dma-latency",
            "20us",
        ])
        .args(["--no-db", "--quiet", "--results"])
        .arg(t.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "{st:?}");
    let v = read_json(&only_run_dir(t.path()).join("run.json"));
    assert_eq!(v["config"]["dma_latency_us"], 20);
}

#[test]
fn sigint_ends_the_run_and_restores() {
    interrupted_run(libc::SIGINT, "sigint_ends_the_run_and_restores");
}

#[test]
fn sigterm_ends_the_run_and_restores() {
    interrupted_run(libc::SIGTERM, "sigterm_ends_the_run_and_restores");
}

#[test]
fn max_latency_1ns_exits_2() {
    let Some(_g) = privileged::guard("max_latency_1ns_exits_2") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let st = Command::new(bin())
        .args([
            "run",
            "--duration",
            "1s",
            "--cpus",
            "0",
            "--max-latency",
            "1ns",
            "--quiet",
            "--results",
        ])
        .arg(t.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(2));
}

#[test]
fn sigkill_leaves_a_readable_checkpoint() {
    let Some(_g) = privileged::guard("sigkill_leaves_a_readable_checkpoint") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    // Its own runtime directory: the ledgers a SIGKILL leaves (the run's and its claim on CPU
    // 0) are this test's to clean, never /run/latlab's.
    let rt = tempfile::tempdir().unwrap();
    let mut reap = Reap(
        Command::new(bin())
            .args([
                "run",
                "--duration",
                "60s",
                "--cpus",
                "0",
                "--quiet",
                "--results",
            ])
            .arg(t.path())
            .env("LATLAB_RUNTIME_DIR", rt.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let child = &mut reap.0;
    wait_for_threads(child, 1);
    let dir = only_run_dir(t.path());
    // The first checkpoint is written when measurement starts, the next 10 s later: wait for
    // one that holds the first 10 s.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let samples = std::fs::read(dir.join("run.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["total"]["samples"].as_u64());
        if samples.is_some_and(|n| n >= 5_000) {
            break;
        }
        assert!(Instant::now() < deadline, "no 10 s checkpoint after 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let v = read_json(&dir.join("run.json"));
    assert_eq!(v["complete"], false);
    assert!(v["total"]["samples"].as_u64().unwrap() >= 5_000);
    // `latlab report` reads it and says it is incomplete.
    let out = Command::new(bin())
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("INCOMPLETE"));
    // The dead run's ledgers are left for `latlab cleanup`, as after any kill -9.
    assert!(std::fs::read_dir(rt.path()).unwrap().next().is_some());
    let out = Command::new(bin())
        .arg("cleanup")
        .env("LATLAB_RUNTIME_DIR", rt.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(rt.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left after cleanup: {left:?}");
}
