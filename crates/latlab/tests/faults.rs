//! The fault suite (issue 7 §4): real runs with loads and the tracefs recorder on, hit by a
//! fault at a random moment — SIGINT, SIGTERM, SIGHUP, SIGKILL followed by `latlab cleanup`, a
//! panic injected in the collector, a load that keeps crashing, a load that ignores SIGTERM —
//! and afterwards the machine is checked by facts, not names: no process of the run is left (by
//! an environment token every load inherits, and by the process groups and sessions the ledger
//! recorded), no tracefs instance of the run and no tracefs mount it made, every knob
//! in the ledger at its original value, no ledger file, no scratch directory, no cgroup, and a
//! run directory that `latlab report` reads (complete, or `complete: false` from a checkpoint).
//!
//! 20 rounds by default, cycling through the fault kinds; the moments come from a seeded RNG
//! whose seed is printed. `LATLAB_FAULT_SEED=N` replays a seed, `LATLAB_FAULT_ROUNDS=N` changes
//! the number of rounds.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use latlab_sys::ledger::{knob_value, Entry, LedgerFile};
use serde_json::Value;

mod support;
use support::bin;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Sigint,
    Sigterm,
    Sighup,
    /// SIGKILL, then `latlab cleanup`.
    Sigkill,
    /// `LATLAB_INJECT_PANIC_MS`: the collector panics.
    Panic,
    /// A `cmd:` load that exits non-zero after a random time, again and again.
    LoadCrash,
    /// A `cmd:` load that traps SIGTERM; SIGINT to latlab at a random moment.
    LoadIgnoresTerm,
}

const KINDS: [Fault; 7] = [
    Fault::Sigint,
    Fault::Sigterm,
    Fault::Sighup,
    Fault::Sigkill,
    Fault::Panic,
    Fault::LoadCrash,
    Fault::LoadIgnoresTerm,
];

/// splitmix64: small, seedable, good enough to pick moments.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: expected a number"))
    })
}

/// Kills the child if the test fails, so no latlab outlives it.
/// A run's process and its runtime directory. When a round fails (the test panics) with latlab
/// still running, the run is stopped as a user would: SIGTERM, SIGKILL if it does not end, then
/// `latlab cleanup` — so a failed round leaves no tracefs instance, load or CPU claim to the tests
/// that run after it.
struct Reap(Child, PathBuf);
impl Drop for Reap {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = self.0.kill();
            let _ = self.0.wait();
            return;
        }
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: plain syscall on our own unreaped child.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(20);
            while matches!(self.0.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = Command::new(bin())
            .current_dir("/")
            .env("LATLAB_RUNTIME_DIR", &self.1)
            .arg("cleanup")
            .output();
    }
}

/// (pid, state, pgid, sid) of every process, from /proc/PID/stat.
fn processes() -> Vec<(i32, char, i32, i32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let state = f[0].chars().next().unwrap_or('?');
        let (Ok(pgid), Ok(sid)) = (f[2].parse(), f[3].parse()) else {
            continue;
        };
        out.push((pid, state, pgid, sid));
    }
    out
}

/// Live processes (not zombies) that belong to the run: its environment token, or a process
/// group / session it started.
fn leftovers(token: &str, groups: &BTreeSet<i32>) -> Vec<String> {
    let mut out = Vec::new();
    for (pid, state, pgid, sid) in processes() {
        if state == 'Z' || state == 'X' {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let has_token = env
            .split(|b| *b == 0)
            .any(|kv| kv == format!("LATLAB_FAULT_TOKEN={token}").as_bytes());
        if has_token || groups.contains(&pgid) || groups.contains(&sid) {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            out.push(format!(
                "pid {pid} ({}) pgid {pgid} sid {sid}{}",
                comm.trim(),
                if has_token {
                    " with the run's token"
                } else {
                    ""
                }
            ));
        }
    }
    out
}

/// Mount points of tracefs, from /proc/self/mountinfo.
fn tracefs_mounts() -> BTreeSet<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "tracefs")
                .then(|| left.split_whitespace().nth(4).map(str::to_string))?
        })
        .collect()
}

/// tracefs instances named after `pid` (`latlab-<pid>`, `latlab-<pid>-…`) under every mount
/// and the usual paths. Instances outlive an unmount: with tracefs mounted nowhere, it is
/// mounted for the look and unmounted again (an unmounted tracefs once hid a leftover).
fn instances_of(pid: u32) -> Vec<PathBuf> {
    if tracefs_mounts().is_empty() {
        let root = "/sys/kernel/tracing";
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", root])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            mounted,
            "cannot mount tracefs at {root} to look for instances"
        );
        let out = instances_under(pid, tracefs_mounts());
        let _ = std::process::Command::new("umount").arg(root).status();
        return out;
    }
    instances_under(pid, tracefs_mounts())
}

fn instances_under(pid: u32, mut roots: BTreeSet<String>) -> Vec<PathBuf> {
    roots.insert("/sys/kernel/tracing".into());
    roots.insert("/sys/kernel/debug/tracing".into());
    let mut out = Vec::new();
    for r in roots {
        let Ok(rd) = std::fs::read_dir(Path::new(&r).join("instances")) else {
            continue;
        };
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if n == format!("latlab-{pid}") || n.starts_with(&format!("latlab-{pid}-")) {
                out.push(e.path());
            }
        }
    }
    out
}

fn read_ledger(p: &Path) -> Option<LedgerFile> {
    serde_json::from_slice(&std::fs::read(p).ok()?).ok()
}

fn dir_entries(p: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn wait_exit(child: &mut Child, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "latlab did not end within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Round {
    n: usize,
    kind: Fault,
    rng: Rng,
    /// Crash rounds alternate between --load-required and not.
    required: bool,
}

/// A started run and what the round chose for it. The child comes first: it is killed (if the
/// round fails) before the temporary directory is removed.
struct Run {
    child: Reap,
    pid: u32,
    tmp: tempfile::TempDir,
    results: PathBuf,
    load_dir: PathBuf,
    rt: PathBuf,
    ledger_path: PathBuf,
    token: String,
    profile: &'static str,
    cmd: String,
    crash_ms: u64,
    panic_ms: u64,
    delay_ms: u64,
}

impl Run {
    fn stderr(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("stderr")).unwrap_or_default()
    }
}

/// What the run had changed, as its ledger said while it measured (the groups grow by the load
/// records' afterwards).
struct Changes {
    groups: BTreeSet<i32>,
    knobs: Vec<(PathBuf, String)>,
    cgroups: Vec<PathBuf>,
    instance: PathBuf,
    mounted: Option<PathBuf>,
}

/// How the run ended: the fault's signal (if it has one) and whether it was delivered, the exit
/// status, and what `latlab cleanup` printed (after a SIGKILL).
struct Exit {
    signal: Option<i32>,
    delivered: bool,
    status: std::process::ExitStatus,
    cleanup_out: String,
}

/// Start the run: a profile load and a `cmd:` load, the recorder on, the fault's moments drawn
/// from the round's RNG.
fn start(r: &mut Round, seed: u64) -> Run {
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let (results, load_dir, rt) = (
        tmp.path().join("results"),
        tmp.path().join("loads"),
        tmp.path().join("rt"),
    );
    for d in [&results, &load_dir, &rt] {
        std::fs::create_dir(d).unwrap();
    }
    let token = format!("{seed}-{}-{}", r.n, std::process::id());
    // Scratch-using and CPU loads alternate in blocks, so every kind meets both.
    let profile = if (r.n / KINDS.len()) % 2 == 1 {
        "io-write"
    } else {
        "stress-cpu"
    };
    // A required load must fail 3 times in a row within the run to end it: crash sooner.
    let crash_ms = 300 + r.rng.below(if r.required { 400 } else { 1200 });
    let cmd = match r.kind {
        Fault::LoadCrash => format!(
            "cmd:sh -c 'sleep {}.{:03}; exit 3'",
            crash_ms / 1000,
            crash_ms % 1000
        ),
        Fault::LoadIgnoresTerm => "cmd:sh -c 'trap \"\" TERM; while :; do sleep 0.1; done'".into(),
        _ => "cmd:sh -c 'while :; do sleep 0.1; done'".into(),
    };
    let panic_ms = r.rng.below(2500);
    let delay_ms = r.rng.below(2500);
    let mut c = Command::new(bin());
    // Relative --load-dir and --results: `cleanup` runs from another directory below.
    c.current_dir(tmp.path())
        .env("LATLAB_RUNTIME_DIR", &rt)
        .env("LATLAB_FAULT_TOKEN", &token)
        .env_remove("LATLAB_INJECT_PANIC_MS")
        .args([
            "run",
            "--duration",
            "3s",
            "--warmup",
            "300ms",
            "--trace-threshold",
            "50us",
            "--trace-max-spikes",
            "20",
            "--quiet",
            "--format",
            "json",
            "--results",
            "results",
            "--load-dir",
            "loads",
            "--label",
            &format!("fault-{}", r.n),
            "--load",
            profile,
            "--load",
            &cmd,
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(tmp.path().join("stdout")).unwrap())
        .stderr(std::fs::File::create(tmp.path().join("stderr")).unwrap());
    if r.kind == Fault::LoadCrash && r.required {
        c.arg("--load-required");
    }
    if r.kind == Fault::Panic {
        c.env("LATLAB_INJECT_PANIC_MS", panic_ms.to_string());
    }
    let child = Reap(c.spawn().unwrap(), rt.clone());
    let pid = child.0.id();
    let ledger_path = rt.join(format!("{pid}.json"));
    Run {
        child,
        pid,
        tmp,
        results,
        load_dir,
        rt,
        ledger_path,
        token,
        profile,
        cmd,
        crash_ms,
        panic_ms,
        delay_ms,
    }
}

/// Where each of the run's threads is blocked (`/proc/PID/task/*/{comm,wchan,stat}`), for a
/// run that does not reach its measurement.
fn threads_of(pid: u32) -> String {
    let mut out = String::new();
    for t in dir_entries(Path::new(&format!("/proc/{pid}/task"))) {
        let read = |f: &str| std::fs::read_to_string(t.join(f)).unwrap_or_default();
        let stat = read("stat");
        let state = stat
            .rfind(')')
            .and_then(|i| stat.get(i + 2..i + 3))
            .unwrap_or("?")
            .to_string();
        out.push_str(&format!(
            "\n  {} {} state {state} wchan {}",
            t.file_name().unwrap_or_default().to_string_lossy(),
            read("comm").trim(),
            read("wchan").trim()
        ));
    }
    out
}

/// Wait for the state to reach: measuring (the first checkpoint is written), recorder on.
/// Returns the run directory. The limit is a hang guard, not a speed test: with the kernel
/// lab's guest and stress-cpu's hogs beside it, a start took longer than 30 s once (CI).
fn wait_measuring(r: &Round, run: &mut Run) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let d = dir_entries(&run.results)
            .into_iter()
            .find(|d| d.join("run.json").is_file());
        if let Some(d) = d {
            break d;
        }
        if let Some(st) = run.child.0.try_wait().unwrap() {
            panic!(
                "round {} ({:?}): latlab ended ({st}) before measuring: {}",
                r.n,
                r.kind,
                run.stderr()
            );
        }
        assert!(
            Instant::now() < deadline,
            "round {} ({:?}, load {}): not measuring after 120 s; its threads:{}\nits stderr: {}",
            r.n,
            r.kind,
            run.profile,
            threads_of(run.pid),
            run.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What the run has changed so far, read from its ledger before the fault.
fn ledger_changes(r: &Round, run: &Run) -> Changes {
    let mut groups: BTreeSet<i32> = BTreeSet::new();
    // A load that exits is restarted (dd of `io-write` ends every few hundred ms, the crashing
    // `cmd:` load by design): between its exit and its restart it has no group and no ledger
    // entry. Read the ledger until both loads have been seen in it (at most 2 s).
    let seen_by = Instant::now() + Duration::from_secs(2);
    let mut cgroups: Vec<PathBuf> = vec![];
    let mut before =
        read_ledger(&run.ledger_path).expect("the ledger exists while the run measures");
    loop {
        for (_, e) in &before.entries {
            if let Entry::ProcessGroup { pgid, cgroup, .. } = e {
                if *pgid > 1 {
                    groups.insert(*pgid);
                }
                if let Some(c) = cgroup {
                    if !cgroups.contains(c) {
                        cgroups.push(c.clone());
                    }
                }
            }
        }
        if groups.len() >= 2 || Instant::now() >= seen_by {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        // A run whose required load failed may end meanwhile: keep the last ledger read.
        match read_ledger(&run.ledger_path) {
            Some(l) => before = l,
            None => break,
        }
    }
    let (mut knobs, mut scratch, mut instance) = (vec![], vec![], None);
    let mut mounted: Option<PathBuf> = None;
    for (_, e) in &before.entries {
        match e {
            Entry::Knob { path, original } => knobs.push((path.clone(), original.clone())),
            // Read above, every time the ledger was.
            Entry::ProcessGroup { .. } => {}
            Entry::ScratchDir { path } => scratch.push(path.clone()),
            Entry::TracefsInstance { path } => instance = Some(path.clone()),
            Entry::TracefsMount { path } => mounted = Some(path.clone()),
            // The measurement's claim on its CPUs: nothing to undo.
            Entry::Measuring { .. } => {}
        }
    }
    let instance = instance.expect("the tracefs recorder is on (an instance in the ledger)");
    assert!(
        instance.is_dir(),
        "the recorder's instance {} exists",
        instance.display()
    );
    // Each load runs in its own group: both were seen within 2 s, unless one comes and goes
    // (the crashing `cmd:` load, `io-write`'s dd) and was between exit and restart each time.
    let steady = usize::from(r.kind != Fault::LoadCrash) + usize::from(run.profile != "io-write");
    assert!(
        groups.len() >= steady.max(1),
        "the loads run in their own groups: {groups:?}"
    );
    if run.profile == "io-write" {
        assert!(
            scratch.iter().any(|s| s.is_absolute() && s.is_dir()),
            "scratch {scratch:?}"
        );
    }
    Changes {
        groups,
        knobs,
        cgroups,
        instance,
        mounted,
    }
}

/// The fault, at a random moment of the measurement, and how the run ends: its exit status as
/// the fault's kind wants it (after a SIGKILL, `latlab cleanup` as the user would run it).
fn fault_and_exit(r: &Round, run: &mut Run) -> Exit {
    let signal = match r.kind {
        Fault::Sigint | Fault::LoadIgnoresTerm => Some(libc::SIGINT),
        Fault::Sigterm => Some(libc::SIGTERM),
        Fault::Sighup => Some(libc::SIGHUP),
        Fault::Sigkill => Some(libc::SIGKILL),
        Fault::Panic | Fault::LoadCrash => None,
    };
    let mut delivered = false;
    if let Some(sig) = signal {
        std::thread::sleep(Duration::from_millis(run.delay_ms));
        // Not reaped yet: the pid is still ours (at worst a zombie), never someone else's.
        if run.child.0.try_wait().unwrap().is_none() {
            // SAFETY: plain syscall on our own unreaped child.
            assert_eq!(unsafe { libc::kill(run.pid as i32, sig) }, 0);
            delivered = true;
        }
    }
    let status = wait_exit(&mut run.child.0, 40);
    let err = run.stderr();
    let mut cleanup_out = String::new();
    match r.kind {
        Fault::Sigkill if delivered => {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
            // What the user does after a kill -9; from another working directory.
            let out = Command::new(bin())
                .current_dir("/")
                .env("LATLAB_RUNTIME_DIR", &run.rt)
                .arg("cleanup")
                .output()
                .unwrap();
            cleanup_out = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(
                out.status.success(),
                "cleanup failed: {cleanup_out}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                cleanup_out.contains(&format!("dead latlab pid {}", run.pid)),
                "cleanup found the dead run's ledger: {cleanup_out}"
            );
        }
        Fault::Panic => {
            assert!(
                !status.success() && status.code().is_some(),
                "a panic exits non-zero: {status}"
            );
            assert!(err.contains("injected collector panic"), "{err}");
        }
        Fault::LoadCrash if r.required => {
            // Ended by the crashing load (exit 1, naming it), or ran out first.
            match status.code() {
                Some(1) => assert!(err.contains("keeps crashing"), "{err}"),
                Some(0) => {}
                _ => panic!("round {}: {status}: {err}", r.n),
            }
        }
        _ => assert_eq!(
            status.code(),
            Some(0),
            "round {} ({:?}): {err}",
            r.n,
            r.kind
        ),
    }
    Exit {
        signal,
        delivered,
        status,
        cleanup_out,
    }
}

/// The run directory is readable: complete, or a checkpoint marked incomplete; `latlab report`
/// reads it; the load records say nothing survived. The groups the loads started (restarts
/// included) join `groups`. Returns run.json and whether it is complete.
fn check_run_dir(
    r: &Round,
    run: &Run,
    run_dir: &Path,
    groups: &mut BTreeSet<i32>,
) -> (Value, bool) {
    let rec: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("run.json")).unwrap()).unwrap();
    let complete = rec["complete"].as_bool().unwrap();
    if !complete {
        assert!(
            matches!(r.kind, Fault::Sigkill | Fault::Panic),
            "only a killed or panicking run leaves an incomplete record: {:?}",
            r.kind
        );
    }
    let rep = Command::new(bin())
        .args(["report", "--format", "json"])
        .arg(run_dir)
        .output()
        .unwrap();
    assert!(
        rep.status.success(),
        "report {}: {}",
        run_dir.display(),
        String::from_utf8_lossy(&rep.stderr)
    );
    let rep: Value = serde_json::from_slice(&rep.stdout).unwrap();
    assert_eq!(rep["schema_version"], 1);
    assert_eq!(rep["total"]["samples"], rec["total"]["samples"]);
    // Load records of a complete run: nothing survived its stop, and the groups it started
    // (restarts included) are checked below.
    let mut stubborn_killed = None;
    let mut crash_failures = None;
    for l in rec["loads"].as_array().into_iter().flatten() {
        for pg in l["pgids"].as_array().into_iter().flatten() {
            groups.insert(pg.as_i64().unwrap() as i32);
        }
        if l["command"] != "" {
            assert_eq!(l["stop"]["survivors"], serde_json::json!([]), "{l}");
        }
        if l["profile"] == run.cmd.as_str() {
            stubborn_killed = l["stop"]["killed"].as_bool();
            crash_failures = l["failures"].as_u64();
        }
    }
    if complete {
        assert!(
            !rec["loads"].as_array().unwrap().is_empty(),
            "a complete run records its loads"
        );
        if r.kind == Fault::LoadIgnoresTerm {
            assert_eq!(
                stubborn_killed,
                Some(true),
                "the TERM-ignoring load was killed"
            );
        }
        if r.kind == Fault::LoadCrash {
            assert!(crash_failures.unwrap() >= 1, "crashes counted: {rec}");
        }
    }
    (rec, complete)
}

/// Nothing left: processes (the watchdogs kill a SIGKILLed run's groups within ~100 ms;
/// wait for that, with a deadline), tracefs, knobs, ledger, scratch, cgroups.
fn nothing_left(r: &Round, run: &Run, changes: &Changes, cleanup_out: &str) {
    let pid = run.pid;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = leftovers(&run.token, &changes.groups);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "round {} ({:?}): processes left: {left:?}",
            r.n,
            r.kind
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert!(
        instances_of(pid).is_empty(),
        "tracefs instances left: {:?}",
        instances_of(pid)
    );
    let instance = &changes.instance;
    assert!(!instance.exists(), "{} left", instance.display());
    // A tracefs latlab mounted is unmounted again. (Compared with the run's own ledger
    // entry, not with the mount table before: other latlab runs on this machine may mount and
    // unmount tracefs meanwhile.)
    if let Some(m) = &changes.mounted {
        assert!(
            !tracefs_mounts().contains(&m.display().to_string()),
            "tracefs mounted by the run at {} is still mounted",
            m.display()
        );
    }
    for (path, original) in &changes.knobs {
        let now = knob_value(&std::fs::read_to_string(path).unwrap());
        assert_eq!(&now, original, "knob {} not restored", path.display());
    }
    assert!(
        dir_entries(&run.rt).is_empty(),
        "ledger left: {:?}",
        dir_entries(&run.rt)
    );
    assert!(
        dir_entries(&run.load_dir).is_empty(),
        "scratch left: {:?}",
        dir_entries(&run.load_dir)
    );
    for cg in &changes.cgroups {
        assert!(
            !cg.exists(),
            "round {} ({:?}): cgroup {} left; cleanup said: {cleanup_out}",
            r.n,
            r.kind,
            cg.display()
        );
    }
}

/// One round; returns a one-line summary.
fn round(r: &mut Round, seed: u64) -> String {
    let started = Instant::now();
    let mut run = start(r, seed);
    let run_dir = wait_measuring(r, &mut run);
    let to_measure = started.elapsed().as_millis();
    let mut changes = ledger_changes(r, &run);
    let exit = fault_and_exit(r, &mut run);
    let (rec, complete) = check_run_dir(r, &run, &run_dir, &mut changes.groups);
    nothing_left(r, &run, &changes, &exit.cleanup_out);
    format!(
        "round {:2} {:<16} {:<10} measuring after {to_measure} ms, fault at {:>4} ms{} → {}, run.json complete={complete}, samples {}, spikes {}, {} groups checked{}",
        r.n,
        format!("{:?}", r.kind),
        run.profile,
        match r.kind {
            Fault::Panic => run.panic_ms,
            Fault::LoadCrash => run.crash_ms,
            _ => run.delay_ms,
        },
        match (exit.signal, exit.delivered) {
            (Some(_), false) => " (run had ended)",
            _ => "",
        },
        exit.status,
        rec["total"]["samples"],
        rec["spikes"].as_array().map_or(0, |s| s.len()),
        changes.groups.len(),
        if exit.cleanup_out.is_empty() {
            String::new()
        } else {
            format!("; cleanup: {}", exit.cleanup_out.trim().replace('\n', " | "))
        }
    )
}

#[test]
fn faults_at_random_moments_leave_nothing_behind() {
    let Some(_g) = latlab_sys::privileged::guard("faults_at_random_moments_leave_nothing_behind")
    else {
        return;
    };
    let seed = env_u64("LATLAB_FAULT_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let rounds = env_u64("LATLAB_FAULT_ROUNDS").unwrap_or(20) as usize;
    eprintln!("fault suite: seed {seed}, {rounds} rounds (replay: LATLAB_FAULT_SEED={seed})");
    let mut rng = Rng(seed);
    let mut crash_rounds = 0;
    let t0 = Instant::now();
    for n in 0..rounds {
        let kind = KINDS[n % KINDS.len()];
        let required = kind == Fault::LoadCrash && {
            crash_rounds += 1;
            crash_rounds % 2 == 0
        };
        let mut r = Round {
            n,
            kind,
            rng: Rng(rng.next()),
            required,
        };
        let line = round(&mut r, seed);
        eprintln!("{line}");
    }
    eprintln!(
        "fault suite: {rounds} rounds in {:.1} s, seed {seed}",
        t0.elapsed().as_secs_f64()
    );
}
