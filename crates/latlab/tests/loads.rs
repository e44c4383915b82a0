//! `latlab loads`: bad input fails before anything starts; every profile starts and stops
//! leaving no process (checked by process group), cgroup or scratch file; a load that ignores
//! SIGTERM is killed; a load that exits is restarted and counted; a SIGKILLed latlab takes its
//! loads with it.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use latlab_sys::loads::profiles::{which, PROFILES};
use latlab_sys::loads::supervisor::group_members;
use serde_json::Value;

mod support;
use support::latlab;

#[test]
fn unknown_profile_lists_the_known_ones() {
    let out = latlab()
        .args(["loads", "run", "nope"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown load profile 'nope'"), "{err}");
    assert!(
        err.contains("hackbench") && err.contains("cmd:<command>"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn missing_tool_names_the_package() {
    let empty = tempfile::tempdir().unwrap();
    let out = latlab()
        .env("PATH", empty.path())
        .args(["loads", "run", "hackbench"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hackbench not found: apt-get install rt-tests"),
        "{err}"
    );
    let out = latlab()
        .env("PATH", empty.path())
        .args(["loads", "run", "cmd:frobnicate --all"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("frobnicate") && err.contains("not found"),
        "{err}"
    );
}

#[test]
fn load_dir_must_exist_and_cpus_must_be_online() {
    let out = latlab()
        .args([
            "loads",
            "run",
            "io-write",
            "--load-dir",
            "/nonexistent/latlab",
        ])
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--load-dir /nonexistent/latlab"));
    let out = latlab()
        .args(["loads", "run", "idle", "--load-cpus", "4095"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&out.stderr).contains("CPU 4095 is not online"));
}

/// `loads run` takes the load flags only: no recorder runs and the load starts at once, so
/// `--trace-*` and `--warmup` are refused (they were accepted and ignored).
#[test]
fn loads_run_refuses_the_flags_it_would_ignore() {
    for flag in [
        ["--trace-buffer", "8MiB"],
        ["--trace-max-spikes", "5"],
        ["--trace-instances", "2"],
        ["--trace-events", "full"],
        ["--trace-required", "--json"],
        ["--warmup", "1s"],
    ] {
        let out = latlab()
            .args(["loads", "run", "idle", "--duration", "1s"])
            .args(flag)
            .assert()
            .code(1)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag[0]), "{flag:?}: {err}");
        assert!(
            !err.contains("running for"),
            "{flag:?} started the load: {err}"
        );
    }
}

#[test]
fn list_shows_every_profile() {
    let out = latlab()
        .args(["loads", "list"])
        .assert()
        .success()
        .get_output()
        .clone();
    let s = String::from_utf8_lossy(&out.stdout);
    for p in PROFILES {
        assert!(
            s.lines().any(|l| l.starts_with(p.name)),
            "{} missing:\n{s}",
            p.name
        );
    }
}

/// Live (non-zombie) members of a process group. Zombies are dead: some containers' PID 1
/// does not reap re-parented children.
fn live(pgid: i32) -> Vec<i32> {
    group_members(pgid)
        .into_iter()
        .filter(|m| !m.1)
        .map(|m| m.0)
        .collect()
}

/// The process groups a run's ledger names now (an unreadable or half-written ledger: none).
fn ledger_groups(ledger: &Path) -> Vec<i32> {
    std::fs::read(ledger)
        .ok()
        .and_then(|b| serde_json::from_slice::<latlab_sys::ledger::LedgerFile>(&b).ok())
        .map(|f| {
            f.entries
                .iter()
                .filter_map(|(_, en)| match en {
                    latlab_sys::ledger::Entry::ProcessGroup { pgid, .. } => Some(*pgid),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

struct Env {
    rt: tempfile::TempDir,
    dir: tempfile::TempDir,
}

fn env() -> Env {
    Env {
        rt: tempfile::tempdir().unwrap(),
        dir: tempfile::tempdir_in("/var/tmp").unwrap(),
    }
}

/// Run `latlab loads run` and return (exit code, records, stderr).
fn run_load(e: &Env, profile: &str, duration: &str, extra: &[&str]) -> (i32, Vec<Value>, String) {
    let out = latlab()
        .env("LATLAB_RUNTIME_DIR", e.rt.path())
        .args([
            "loads",
            "run",
            profile,
            "--duration",
            duration,
            "--json",
            "--load-dir",
        ])
        .arg(e.dir.path())
        .args(extra)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let v: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    let recs = v["loads"].as_array().cloned().unwrap_or_default();
    (
        out.status.code().unwrap_or(-1),
        recs,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The logs of a `loads run` (its `latlab-loads-<pid>` directory in the temp dir), read and
/// then removed, so tests leave no files behind.
fn take_logs(recs: &[Value]) -> String {
    let mut all = String::new();
    for r in recs {
        let Some(log) = r["log"].as_str().map(PathBuf::from) else {
            continue;
        };
        all.push_str(&std::fs::read_to_string(&log).unwrap_or_default());
        // The log is in `<temp>/latlab-loads-XXXXXX/logs/`: that directory goes (its
        // parent's parent; `logs` itself was tested here before, and matched nothing).
        if let Some(d) = log.parent().and_then(|l| l.parent()).filter(|d| {
            d.starts_with(std::env::temp_dir())
                && d.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("latlab-loads-"))
        }) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    all
}

/// Nothing of the load remains: no live process in any of its groups, no cgroup, nothing in
/// the scratch parent, no ledger left behind.
fn assert_clean(e: &Env, recs: &[Value]) {
    take_logs(recs);
    for r in recs {
        for pg in r["pgids"].as_array().into_iter().flatten() {
            let pg = pg.as_i64().unwrap() as i32;
            assert!(
                live(pg).is_empty(),
                "process group {pg} of {r} still has {:?}",
                live(pg)
            );
        }
        if let Some(cg) = r["cgroup"].as_str() {
            assert!(!Path::new(cg).exists(), "cgroup {cg} left behind");
        }
        if r["command"] != "" {
            assert_eq!(r["stop"]["survivors"], serde_json::json!([]), "{r}");
        }
    }
    let left: Vec<PathBuf> = std::fs::read_dir(e.dir.path())
        .unwrap()
        .map(|d| d.unwrap().path())
        .collect();
    assert!(left.is_empty(), "scratch left behind: {left:?}");
    let ledgers: Vec<PathBuf> = std::fs::read_dir(e.rt.path())
        .unwrap()
        .map(|d| d.unwrap().path())
        .collect();
    assert!(ledgers.is_empty(), "ledger left behind: {ledgers:?}");
}

#[test]
fn every_profile_starts_and_stops_cleanly() {
    let Some(_g) = latlab_sys::privileged::guard("every_profile_starts_and_stops_cleanly") else {
        return;
    };
    for p in PROFILES {
        if let Some(t) = p.tools.iter().find(|t| which(t.bin).is_none()) {
            eprintln!("skipping profile {}: {} not installed", p.name, t.bin);
            continue;
        }
        let e = env();
        let t0 = Instant::now();
        let (code, recs, err) = run_load(&e, p.name, "1s", &[]);
        let took = t0.elapsed();
        assert_eq!(code, 0, "{}: {err}", p.name);
        assert_eq!(recs.len(), p.parts.len().max(1), "{}: {recs:?}", p.name);
        // No wall-time bound: rcu-dentry took 15.8 s in a fresh clone (dbench's ~700 MB of
        // scratch removed beside the kernel lab and the fuzz build) and 5 s alone. What latlab
        // controls is bounded already: the stop's grace (SIGTERM, 10 s, then SIGKILL, nothing
        // surviving: `assert_clean`), and a run that hangs fails at `run_load`'s 60 s limit.
        for r in &recs {
            assert_eq!(r["profile"], p.name);
            if !p.parts.is_empty() {
                // It really ran: it used CPU, in its own cgroup where v2 exists.
                assert!(r["cpu_s"].as_f64().unwrap() > 0.0, "{}: {r}", p.name);
                assert!(r["starts"].as_u64().unwrap() >= 1);
                // It did not abort at once (stress-mix did, on an empty --temp-path).
                assert_eq!(r["failures"], 0, "{}: {r}", p.name);
                if latlab_sys::loads::supervisor::cgroup2_root().is_some() {
                    assert!(r["cgroup"].is_string(), "{r}");
                }
            }
        }
        assert_clean(&e, &recs);
        let stops: Vec<&Value> = recs.iter().map(|r| &r["stop"]).collect();
        eprintln!("{}: {took:?}, stop {stops:?}", p.name);
    }
}

#[test]
fn a_load_ignoring_sigterm_is_killed() {
    let Some(_g) = latlab_sys::privileged::guard("a_load_ignoring_sigterm_is_killed") else {
        return;
    };
    let e = env();
    let (code, recs, err) = run_load(
        &e,
        "cmd:sh -c 'trap \"\" TERM; while :; do sleep 0.1; done'",
        "1s",
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(recs[0]["stop"]["killed"], true, "{recs:?}");
    assert!(
        recs[0]["stop"]["term_s"].as_f64().unwrap() >= 2.9,
        "{recs:?}"
    );
    assert_clean(&e, &recs);
}

#[test]
fn a_load_that_exits_is_restarted_and_counted() {
    let Some(_g) = latlab_sys::privileged::guard("a_load_that_exits_is_restarted_and_counted")
    else {
        return;
    };
    let e = env();
    let (code, recs, err) = run_load(&e, "cmd:true", "2s", &[]);
    assert_eq!(code, 0, "{err}");
    let r = &recs[0];
    assert!(r["restarts"].as_u64().unwrap() >= 2, "{r}");
    assert_eq!(
        r["exits"]["exit 0"].as_u64().unwrap(),
        r["restarts"].as_u64().unwrap() + 1 - r["final_status"].is_string() as u64,
        "{r}"
    );
    assert_eq!(r["failures"], 0);
    assert_eq!(r["exit"], 0);
    assert_clean(&e, &recs);

    // A required load that keeps failing ends the run with an error naming it.
    let e = env();
    let (code, recs, err) = run_load(&e, "cmd:false", "20s", &["--load-required"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("keeps crashing") && err.contains("exit 1"),
        "{err}"
    );
    assert!(recs[0]["failures"].as_u64().unwrap() >= 3, "{recs:?}");
    assert_clean(&e, &recs);
}

/// A `latlab` child, killed and reaped when dropped (a failing test leaves no latlab behind).
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `latlab run` for 30 s on `cpus` with `load`, the recorder on (5 ms, small buffers), no
/// warm-up, no database; results in `results`.
fn traced_run_with_a_load(e: &Env, load: &str, cpus: &str, results: &Path) -> Reap {
    let child = StdCommand::new(assert_cmd::cargo::cargo_bin("latlab"))
        .env("LATLAB_RUNTIME_DIR", e.rt.path())
        .args(["run", "--load", load, "--warmup", "0s"])
        .args(["--trace-threshold", "5ms", "--trace-buffer", "512KiB"])
        .args(["--duration", "30s", "--quiet", "--no-db", "--cpus", cpus])
        .arg("--results")
        .arg(results)
        .arg("--load-dir")
        .arg(e.dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Reap(child)
}

/// A watchdog (latlab's executable, spawned): from the moment the ledger names it, it must
/// not hold latlab's descriptors (the recorder's tracefs files keep an instance from being
/// removed; /dev/cpu_dma_latency keeps the latency request alive). It used to hold them until
/// latlab's go-ahead. A load that exits at once is restarted every ~0.2 s, so watchdogs are
/// forked while the recorder and the cpu_dma_latency request are open.
#[test]
fn watchdogs_hold_none_of_latlabs_descriptors() {
    let Some(_g) = latlab_sys::privileged::guard("watchdogs_hold_none_of_latlabs_descriptors")
    else {
        return;
    };
    let e = env();
    let results = tempfile::tempdir().unwrap();
    let mut child = traced_run_with_a_load(&e, "cmd:sleep 0.2", "0", results.path());
    let pid = child.0.id();
    let instance = Path::new(latlab_sys::tracefs::DEFAULT_ROOT)
        .join("instances")
        .join(format!("latlab-{pid}"));
    let ledger = e.rt.path().join(format!("{pid}.json"));
    let groups = || ledger_groups(&ledger);
    // Wait for the recorder, then for three watchdogs forked after it (a restart forgets the
    // old group's ledger entry and adds the new one's: new pgids are new watchdogs).
    let deadline = Instant::now() + Duration::from_secs(20);
    while !instance.exists() {
        assert!(Instant::now() < deadline, "the recorder never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut seen: std::collections::BTreeSet<i32> = groups().into_iter().collect();
    let mut checked = 0;
    while checked < 3 {
        assert!(Instant::now() < deadline, "the load was not restarted");
        for pg in groups() {
            // The group leader is the watchdog; read its descriptors while it lives.
            let Ok(rd) = std::fs::read_dir(format!("/proc/{pg}/fd")) else {
                continue;
            };
            let links: Vec<String> = rd
                .flatten()
                .filter_map(|f| std::fs::read_link(f.path()).ok())
                .map(|l| l.display().to_string())
                .collect();
            if links.is_empty() || !seen.insert(pg) {
                continue;
            }
            let held: Vec<&String> = links
                .iter()
                .filter(|l| l.contains("tracing") || l.contains("cpu_dma_latency"))
                .collect();
            assert!(held.is_empty(), "watchdog {pg} holds {held:?}");
            // Spawned as latlab's executable (posix_spawn), not a fork of the running latlab:
            // a fork copies latlab's page tables and locked mappings with the CPU in the
            // kernel for hundreds of µs at every restart. A fork keeps latlab's command line
            // and address space; the spawned watchdog has its own, far smaller.
            let Ok(cmdline) = std::fs::read(format!("/proc/{pg}/cmdline")) else {
                continue;
            };
            let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            let shown = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            assert_eq!(argv[0], b"latlab-watchdog", "watchdog {pg}: {shown}");
            assert_eq!(argv[1], b"__load-watchdog", "watchdog {pg}: {shown}");
            let vm = |p: u32| {
                std::fs::read_to_string(format!("/proc/{p}/status"))
                    .ok()?
                    .lines()
                    .find_map(|l| l.strip_prefix("VmSize:"))?
                    .trim()
                    .trim_end_matches(" kB")
                    .parse::<u64>()
                    .ok()
            };
            if let (Some(w), Some(l)) = (vm(pg as u32), vm(pid)) {
                assert!(
                    w < l,
                    "watchdog {pg}: {w} kB mapped, as much as latlab's {l} kB"
                );
            }
            checked += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: plain syscall on our child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let st = child.0.wait().unwrap();
    assert!(st.success(), "{st}");
    assert!(!instance.exists(), "the run left its instance");
}

/// latlab's own threads (the collector, the recorder's re-arm thread, the load supervisor)
/// stay off the measured CPU when there is another one; the measuring thread is on its CPU,
/// and the load runs on every CPU (not confined with latlab's own threads).
#[test]
fn own_threads_stay_off_the_measured_cpu_and_loads_do_not() {
    let Some(_g) =
        latlab_sys::privileged::guard("own_threads_stay_off_the_measured_cpu_and_loads_do_not")
    else {
        return;
    };
    let all = latlab_sys::rt::allowed_cpus().unwrap();
    if all.len() < 2 {
        eprintln!("skipped: needs 2 CPUs, this test may use {all:?}");
        return;
    }
    let (measured, rest) = (*all.last().unwrap(), &all[..all.len() - 1]);
    let e = env();
    let results = tempfile::tempdir().unwrap();
    let mut child =
        traced_run_with_a_load(&e, "cmd:sleep 1000", &measured.to_string(), results.path());
    let pid = child.0.id();
    let allowed = |task: &str| -> Option<Vec<u32>> {
        let s = std::fs::read_to_string(format!("{task}/status")).ok()?;
        let l = s
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
        latlab_core::cpulist::parse_cpu_list(l.trim()).ok()
    };
    // Wait until the measuring thread, the recorder's copier and the load are all there.
    let ledger = e.rt.path().join(format!("{pid}.json"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let (threads, load) = loop {
        assert!(
            Instant::now() < deadline,
            "the run never started its threads and load"
        );
        let mut threads = Vec::new();
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let task = t.path().display().to_string();
            let comm = std::fs::read_to_string(format!("{task}/comm")).unwrap_or_default();
            if let Some(cpus) = allowed(&task) {
                threads.push((comm.trim().to_string(), cpus));
            }
        }
        let load = ledger_groups(&ledger)
            .into_iter()
            .flat_map(latlab_sys::loads::supervisor::group_members)
            .find_map(|(p, _)| {
                let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).ok()?;
                (comm.trim() == "sleep").then(|| allowed(&format!("/proc/{p}")))?
            });
        let has = |n: &str| threads.iter().any(|(c, _)| c == n);
        if let (true, true, Some(l)) = (
            has(&format!("latlab-cpu{measured}")),
            has("latlab-trace") && has("latlab-loads"),
            load,
        ) {
            break (threads, l);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for (comm, cpus) in &threads {
        if comm.starts_with("latlab-cpu") {
            assert_eq!(cpus, &vec![measured], "{comm}");
        } else {
            assert_eq!(
                cpus, rest,
                "{comm} may run on {cpus:?}, the measured CPU {measured} among them"
            );
        }
    }
    assert_eq!(load, all, "the load is confined with latlab's own threads");
    // SAFETY: plain syscall on our child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    assert!(child.0.wait().unwrap().success());
    let run = std::fs::read_dir(results.path())
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        v["config"]["housekeeping_cpus"],
        serde_json::json!(rest),
        "{}",
        v["config"]
    );
}

#[test]
fn sigkilled_latlab_takes_its_loads_along() {
    let Some(_g) = latlab_sys::privileged::guard("sigkilled_latlab_takes_its_loads_along") else {
        return;
    };
    let e = env();
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("latlab"))
        .env("LATLAB_RUNTIME_DIR", e.rt.path())
        .args([
            "loads",
            "run",
            "cmd:sleep 1000",
            "--duration",
            "60s",
            "--load-dir",
        ])
        .arg(e.dir.path())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the ledger names a process group with a live `sleep` in it.
    let ledger = e.rt.path().join(format!("{}.json", child.id()));
    let deadline = Instant::now() + Duration::from_secs(10);
    let pgid = loop {
        let pg = ledger_groups(&ledger).into_iter().find(|&pg| pg > 1);
        if let Some(pg) = pg {
            if live(pg).len() >= 3 {
                break pg; // watchdog, sh, sleep
            }
        }
        assert!(Instant::now() < deadline, "load never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live(pgid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "group {pgid} outlived latlab: {:?}",
            live(pgid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // What `latlab cleanup` does: undo the dead run's ledger (the cgroup, now empty).
    let orphans = latlab_sys::ledger::orphaned(e.rt.path()).unwrap();
    assert_eq!(orphans.len(), 1);
    for (path, file) in orphans {
        for (_, en) in file.entries.iter().rev() {
            latlab_sys::ledger::undo(en);
        }
        std::fs::remove_file(path).unwrap();
    }
    assert!(live(pgid).is_empty());
    let cgs: Vec<_> = latlab_sys::loads::supervisor::cgroup2_root()
        .and_then(|r| std::fs::read_dir(r).ok())
        .into_iter()
        .flatten()
        .filter_map(|d| d.ok())
        .filter(|d| {
            d.file_name()
                .to_string_lossy()
                .starts_with(&format!("latlab-{}-", child.id()))
        })
        .collect();
    assert!(cgs.is_empty(), "cgroups left: {cgs:?}");
    // The killed run could not remove its log directory.
    let _ =
        std::fs::remove_dir_all(std::env::temp_dir().join(format!("latlab-loads-{}", child.id())));
}

/// issue 4 §3: a full `latlab run --load io-write` records the load's write throughput, from
/// the kernel's accounting of the dd processes (dd itself is stopped with SIGTERM and prints
/// nothing), and leaves nothing behind.
#[test]
fn io_write_run_records_its_write_throughput() {
    let Some(_g) = latlab_sys::privileged::guard("io_write_run_records_its_write_throughput")
    else {
        return;
    };
    let e = env();
    let results = tempfile::tempdir().unwrap();
    let out = latlab()
        .env("LATLAB_RUNTIME_DIR", e.rt.path())
        .args(["run", "--quiet", "--format", "json", "--load", "io-write"])
        .args(["--duration", "3s", "--warmup", "1s", "--results"])
        .arg(results.path())
        .arg("--load-dir")
        .arg(e.dir.path())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let recs = v["loads"].as_array().cloned().unwrap_or_default();
    assert_eq!(recs.len(), 1, "{recs:?}");
    let r = &recs[0];
    assert_eq!(r["ops_unit"], "MB/s", "{r}");
    assert_eq!(r["ops_source"], "kernel-io-write", "{r}");
    let written = r["io_write_bytes"].as_u64().unwrap();
    let interval = r["io_interval_s"].as_f64().unwrap();
    // dd ran for ~4 s writing 1 MiB blocks: at least a few MB reached the page cache.
    assert!(written > 4 << 20, "{r}");
    assert!((3.5..30.0).contains(&interval), "{r}");
    // `ops` is exactly the recorded bytes over the recorded interval.
    let ops = r["ops"].as_f64().unwrap();
    assert!(
        (ops - written as f64 / 1e6 / interval).abs() < 1e-6 * ops.max(1.0),
        "{r}"
    );
    // dd wrote at least what was dirtied: the syscall count covers the storage count.
    assert!(r["io_wchar"].as_u64().unwrap() >= written / 2, "{r}");
    assert!(r["cpu_s"].as_f64().unwrap() > 0.0, "{r}");
    assert_clean(&e, &recs);
}

/// issue 4 §3: stress-ng's `--metrics-brief` table is printed when latlab stops it and its
/// bogo-ops land in the record; dbench, stopped before its own end, still reports MB/s.
#[test]
fn stress_ng_and_dbench_record_their_throughput() {
    let Some(_g) = latlab_sys::privileged::guard("stress_ng_and_dbench_record_their_throughput")
    else {
        return;
    };
    if which("stress-ng").is_none() {
        panic!("stress-ng is not installed (apt-get install stress-ng)");
    }
    let e = env();
    let (code, recs, err) = run_load(&e, "stress-cpu", "2s", &[]);
    assert_eq!(code, 0, "{err}");
    let r = &recs[0];
    assert_eq!(r["ops_unit"], "bogo-ops/s", "{r}");
    assert!(r["ops"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["bogo_ops"]["cpu"].as_f64().unwrap() > 0.0, "{r}");
    let log = take_logs(&recs);
    assert!(
        log.contains("bogo ops"),
        "no metrics table in the log:\n{log}"
    );
    assert_clean(&e, &recs);

    if which("dbench").is_none() {
        panic!("dbench is not installed (apt-get install dbench)");
    }
    let e = env();
    // dbench prints its first progress line a second after its 32 clients are ready.
    let (code, recs, err) = run_load(&e, "rcu-dentry", "6s", &[]);
    let log = take_logs(&recs);
    assert_eq!(code, 0, "{err}\n{log}");
    let db = recs.iter().find(|r| r["part"] == "dbench").unwrap();
    assert_eq!(db["ops_unit"], "MB/s", "{db}");
    assert!(db["ops"].as_f64().unwrap() > 0.0, "{db}");
    let sn = recs.iter().find(|r| r["part"] == "stress-ng").unwrap();
    eprintln!("stress-ng stopped in {} s", sn["stop"]["term_s"]);
    // stress-ng prints its metrics when it ends by itself. Its dentry stressors unlink
    // thousands of files on SIGTERM: 1.0-1.4 s here, but over the 10 s grace while other
    // processes wrote gigabytes to the same disk (a fresh-clone run beside three builds),
    // and then the load is killed and has no figure to give. What latlab controls: a
    // figure exactly when stress-ng ended within the grace, none (null, not 0) when killed.
    if sn["stop"]["killed"] == true {
        eprintln!("stress-ng outlived the grace and was killed: no figure expected");
        assert!(sn["ops"].is_null(), "{sn}\n{log}");
        assert!(sn["bogo_ops"]["dentry"].is_null(), "{sn}\n{log}");
    } else {
        assert!(sn["ops"].as_f64().is_some_and(|o| o > 0.0), "{sn}\n{log}");
        assert!(
            sn["bogo_ops"]["dentry"].as_f64().is_some_and(|o| o > 0.0),
            "{sn}\n{log}"
        );
    }
    assert_clean(&e, &recs);
}

/// A run that ends with an error during the load warm-up (a `--load-required` load that
/// crashes at once) still leaves a readable run.json, marked incomplete, saying why.
#[test]
fn a_run_that_fails_in_warm_up_leaves_a_readable_record() {
    let e = env();
    let results = tempfile::tempdir().unwrap();
    let out = latlab()
        .env("LATLAB_RUNTIME_DIR", e.rt.path())
        .args(["run", "--backend", "sim", "--quiet", "--load", "cmd:false"])
        .args(["--load-required", "--warmup", "20s", "--duration", "5s"])
        .arg("--results")
        .arg(results.path())
        .arg("--load-dir")
        .arg(e.dir.path())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("keeps crashing"), "{err}");
    let dirs: Vec<PathBuf> = std::fs::read_dir(results.path())
        .unwrap()
        .map(|d| d.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let run = dirs[0].join("run.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    assert_eq!(v["complete"], false, "{v}");
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("warm-up") && warnings.contains("keeps crashing"),
        "{warnings}"
    );
    assert_eq!(v["loads"][0]["profile"], "cmd:false", "{v}");
    assert!(v["loads"][0]["failures"].as_u64().unwrap() >= 3, "{v}");
    // `latlab report` reads it.
    let rep = latlab().args(["report"]).arg(&dirs[0]).output().unwrap();
    assert!(
        rep.status.success(),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let recs = v["loads"].as_array().cloned().unwrap_or_default();
    assert_clean(&e, &recs);
}

/// The compile part of a short run finishes no build (about 27 s here), so its iterations/s is
/// 0; the generated tree's per-file marks still show how far it got.
#[test]
fn compile_parts_record_files_compiled() {
    let Some(_g) = latlab_sys::privileged::guard("compile_parts_record_files_compiled") else {
        return;
    };
    if which("make").is_none() || which("cc").is_none() {
        panic!("make and cc are needed (apt-get install make gcc)");
    }
    let e = env();
    // mini-ll compiles alone first (stress-kernel's compile competes with stress-ng's hogs
    // and may not finish a file in a few seconds on 2 busy CPUs).
    let (code, recs, err) = run_load(&e, "mini-ll", "4s", &[]);
    let log = take_logs(&recs);
    assert_eq!(code, 0, "{err}");
    let c = recs.iter().find(|r| r["part"] == "script").unwrap();
    assert_eq!(c["ops_unit"], "iterations/s", "{c}");
    let files = c["compiled_files"].as_u64().unwrap();
    assert!(files > 0, "{c}");
    assert_eq!(
        files as usize,
        log.matches(latlab_sys::loads::gentree::COMPILED_MARK)
            .count(),
        "{c}"
    );
    assert!(c["compiled_files_per_s"].as_f64().unwrap() > 0.0, "{c}");
    assert_clean(&e, &recs);
}
