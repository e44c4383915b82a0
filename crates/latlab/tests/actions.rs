//! rtla's actions on `latlab run` (sim backend, at wall-clock pace): `--on-threshold` fires
//! when a sample exceeds `--max-latency` (the sim's spikes go far above 50 µs), `--on-end`
//! once the run is written; a hanging shell is killed; malformed actions are usage errors.

use std::path::Path;
use std::time::{Duration, Instant};

mod support;
use support::{latlab, only_run_dir, read_json};

/// A sim run at wall-clock pace on CPUs 0-1 with `--max-latency 50us`.
fn sim(results: &Path, duration: &str, extra: &[&str]) -> std::process::Output {
    latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--sim-realtime",
            "--cpus",
            "0-1",
            "--max-latency",
            "50us",
            "-q",
            "--format",
            "json",
            "--duration",
            duration,
            "--results",
        ])
        .arg(results)
        .args(extra)
        .output()
        .unwrap()
}

fn env_file(p: &Path) -> std::collections::HashMap<String, String> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn shell_action_sees_the_sample_and_the_run_dir() {
    let t = tempfile::tempdir().unwrap();
    let envf = t.path().join("env.txt");
    let cmd = format!(
        "shell,command=env | grep ^LATLAB_ > {} ; echo done >> {}",
        envf.display(),
        envf.display()
    );
    let out = sim(&t.path().join("r"), "1s", &["--on-threshold", &cmd]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let env = env_file(&envf);
    let dir = only_run_dir(&t.path().join("r"));
    assert_eq!(
        Path::new(&env["LATLAB_RUN_DIR"]),
        std::path::absolute(&dir).unwrap()
    );
    let cpu: u32 = env["LATLAB_CPU"].parse().unwrap();
    assert!(cpu <= 1, "{env:?}");
    let lat: u64 = env["LATLAB_LATENCY_NS"].parse().unwrap();
    let run = read_json(&dir.join("run.json"));
    let max = run["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cpu"] == cpu)
        .unwrap()["histogram"]["max_ns"]
        .as_u64()
        .unwrap();
    assert!(lat > 50_000 && lat <= max, "{lat} vs max {max}");
}

#[test]
fn signal_action_reaches_a_process() {
    let t = tempfile::tempdir().unwrap();
    let got = t.path().join("got");
    // A child that records SIGUSR1 and exits; without the signal it would run 30 s.
    let mut child = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "trap 'echo usr1 > {}; exit 0' USR1; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exit 7",
            got.display()
        ))
        .spawn()
        .unwrap();
    let action = format!("signal,num=10,pid={}", child.id());
    let out = sim(&t.path().join("r"), "1s", &["--on-threshold", &action]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0), "the child did not get SIGUSR1");
    assert_eq!(std::fs::read_to_string(&got).unwrap(), "usr1\n");
}

#[test]
fn stop_action_ends_the_run_early_with_exit_2() {
    let t = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = sim(&t.path().join("r"), "20s", &["--on-threshold", "stop"]);
    let elapsed = t0.elapsed();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let run = read_json(&only_run_dir(&t.path().join("r")).join("run.json"));
    assert_eq!(run["complete"], true);
    let measured = run["config"]["measured_ns"].as_u64().unwrap();
    assert!(measured < 10_000_000_000, "{measured}");
    let w = run["warnings"].to_string();
    assert!(
        w.contains("--on-threshold stop: the run was ended after"),
        "{w}"
    );
}

#[test]
fn hanging_shell_is_killed_and_the_run_goes_on() {
    let t = tempfile::tempdir().unwrap();
    let pidf = t.path().join("pid");
    let cmd = format!("shell,command=echo $$ > {}; exec sleep 300", pidf.display());
    let t0 = Instant::now();
    let out = sim(
        &t.path().join("r"),
        "3s",
        &["--action-timeout", "1s", "--on-threshold", &cmd],
    );
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let run = read_json(&only_run_dir(&t.path().join("r")).join("run.json"));
    assert_eq!(run["complete"], true);
    // The run went on to its end.
    assert_eq!(run["config"]["measured_ns"].as_u64(), Some(3_000_000_000));
    let w = run["warnings"].to_string();
    assert!(
        w.contains("still running after --action-timeout 1s; killed"),
        "{w}"
    );
    // Dead: gone, or a zombie. It is the child of the action's watchdog, killed with it, so
    // init (not latlab) reaps it, whenever it does.
    let pid = std::fs::read_to_string(&pidf).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let state = stat.rfind(')').map(|i| stat[i + 1..].trim_start());
    assert!(
        state.is_none_or(|s| s.starts_with('Z')),
        "the hanging command {pid} is still there: {stat}"
    );
}

#[test]
fn on_end_runs_once_after_the_record_is_written() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("end");
    let cmd = format!(
        "shell,command=test -f \"$LATLAB_RUN_DIR/run.json\" && echo \"$LATLAB_LATENCY_NS\" >> {}",
        f.display()
    );
    let out = sim(&t.path().join("r"), "1s", &["--on-end", &cmd]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let lines: Vec<u64> = std::fs::read_to_string(&f)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let run = read_json(&only_run_dir(&t.path().join("r")).join("run.json"));
    // Once, with the run's maximum.
    assert_eq!(lines, vec![run["total"]["max_ns"].as_u64().unwrap()]);
}

#[test]
fn malformed_actions_exit_1_naming_the_part() {
    let t = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["--on-threshold", "signal,num=x,pid=1"], "num=x"),
        (vec!["--on-threshold", "signal,num=10"], "pid="),
        (vec!["--on-threshold", "shell,cmd=ls"], "command="),
        (vec!["--on-threshold", "explode"], "'explode'"),
        (vec!["--on-threshold", "trace"], "--trace-threshold"),
        (vec!["--on-end", "stop"], "--on-end stop"),
    ] {
        let out = sim(&t.path().join("r"), "1s", &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("latlab: error: "), "{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // pid 1 without allow-init and a key given twice are refused while parsing. Without
    // --max-latency nothing could fire, even where the refusal is missing: no test signals init.
    for (action, want) in [
        ("signal,num=10,pid=1", "allow-init"),
        ("signal,num=10,pid=parent,pid=999999", "pid is given twice"),
    ] {
        let out = latlab()
            .args(["run", "--backend", "sim", "--on-threshold", action])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{action}: {err}");
        assert!(err.starts_with("latlab: error: --on-threshold"), "{err}");
        assert!(err.contains(want), "{action}: {err}");
    }
    // Without --max-latency nothing could fire.
    let out = latlab()
        .args(["run", "--backend", "sim", "--on-threshold", "stop"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give --max-latency"));
    assert!(
        !t.path().join("r").exists(),
        "nothing is written on bad input"
    );
}

/// A real run with a ground-truth injector: a FIFO 99 thread on the measured CPU spins 3 ms
/// every 300 ms, so latlab's FIFO 80 sleeper there wakes ≥ 1.5 ms late. The actions run in
/// order: `trace` (the recorder's window is saved before the next action), `shell` (which
/// sees it and the sample), `stop` (the run ends early, exit 2).
#[test]
fn real_run_actions_fire_on_an_injected_delay() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let Some(_g) = support::privileged::guard("real_run_actions_fire_on_an_injected_delay") else {
        return;
    };
    let cpus = latlab_sys::rt::online_cpus().unwrap();
    let cpu = *cpus.last().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let injector = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            latlab_sys::rt::pin_to_cpu(cpu).unwrap();
            latlab_sys::rt::set_policy(latlab_sys::rt::Policy::Fifo, 99).unwrap();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(300));
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(3) {
                    std::hint::spin_loop();
                }
            }
        })
    };
    let t = tempfile::tempdir().unwrap();
    let envf = t.path().join("env.txt");
    let shell = format!(
        "shell,command=env | grep ^LATLAB_ > {f}; ls \"$LATLAB_RUN_DIR/spikes\" | wc -l | sed 's/^/SPIKES=/' >> {f}",
        f = envf.display()
    );
    let t0 = Instant::now();
    let out = latlab()
        .args(["run", "--cpus", &cpu.to_string(), "-p", "80", "-q"])
        .args(["--duration", "20s", "--max-latency", "1500us"])
        .args(["--trace-threshold", "1500us", "--trace-required"])
        .args(["--on-threshold", "trace", "--on-threshold", &shell])
        .args(["--on-threshold", "stop", "--results"])
        .arg(t.path().join("r"))
        .output()
        .unwrap();
    let elapsed = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    injector.join().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let env = env_file(&envf);
    assert_eq!(env["LATLAB_CPU"], cpu.to_string());
    // The sample that fired: over the limit, and one the run recorded (the injector's 3 ms, or
    // a stall of this VM's that came first: its size is the VM's, not the test's to bound).
    let lat: u64 = env["LATLAB_LATENCY_NS"].parse().unwrap();
    assert!(lat > 1_500_000, "{lat}");
    assert!(env["SPIKES"].trim().parse::<u32>().unwrap() >= 1, "{env:?}");
    let run = read_json(&only_run_dir(&t.path().join("r")).join("run.json"));
    let spikes = run["spikes"].as_array().expect("spikes");
    assert!(
        spikes.iter().any(|s| s["latency_ns"] == lat),
        "the firing sample {lat} is not among the spikes: {spikes:?}"
    );
    assert!(lat <= run["total"]["max_ns"].as_u64().unwrap());
    // `stop` ended it before its 20 s (the threads' periods, not the wall clock).
    assert!(run["config"]["measured_ns"].as_u64().unwrap() < 20_000_000_000);
    assert!(
        run["warnings"].to_string().contains("--on-threshold stop"),
        "{}",
        run["warnings"]
    );
    eprintln!("stopped after {elapsed:?}");
}

/// `stop` in a sim run at full speed: the record's measured time is the simulated time the
/// threads went through, not the duration asked for.
#[test]
fn stop_in_a_fast_sim_records_the_simulated_time() {
    let t = tempfile::tempdir().unwrap();
    let out = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--cpus",
            "0",
            "-q",
            "--format",
            "json",
        ])
        .args([
            "--duration",
            "1d",
            "--max-latency",
            "50us",
            "--on-threshold",
            "stop",
        ])
        .arg("--results")
        .arg(t.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let run = read_json(&only_run_dir(t.path()).join("run.json"));
    let measured = run["config"]["measured_ns"].as_u64().unwrap();
    let periods = run["cpus"][0]["histogram"]["count"].as_u64().unwrap()
        + run["cpus"][0]["missed_periods"].as_u64().unwrap();
    assert!(measured < 86_400_000_000_000, "{measured}");
    assert_eq!(measured, periods * 1_000_000);
}

/// A process of another user is not signalled without `allow-foreign`: refused before the run
/// when it is foreign then (exit 1, the process untouched), and at the signal when it has
/// become foreign since (a warning; root could have signalled any process). With
/// `allow-foreign` the signal is sent.
#[test]
fn signal_to_another_users_process_needs_allow_foreign() {
    use std::os::unix::process::ExitStatusExt;
    let Some(_g) =
        support::privileged::guard("signal_to_another_users_process_needs_allow_foreign")
    else {
        return;
    };
    let nobody = || {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        c
    };
    let t = tempfile::tempdir().unwrap();
    // Foreign from the start: once setpriv has changed its uid (it starts as root).
    let mut child = nobody().args(["sleep", "60"]).spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let t0 = Instant::now();
    while !std::fs::read_to_string(&status)
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("65534"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "setpriv never became nobody"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let action = format!("signal,num=10,pid={}", child.id());
    let out = sim(&t.path().join("r1"), "1s", &["--on-threshold", &action]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("latlab: error: --on-threshold signal: pid ")
            && err.contains("belongs to another user (uid 65534; latlab runs as uid 0)")
            && err.contains("allow-foreign"),
        "{err}"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "the process was signalled"
    );
    let out = sim(
        &t.path().join("r2"),
        "1s",
        &["--on-threshold", &format!("{action},allow-foreign")],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(child.wait().unwrap().signal(), Some(10));

    // Root's when the run starts, nobody's when the signal is due: an --on-end shell action
    // (actions run in order) lets it change and waits until it has.
    let fifo = t.path().join("go");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "read x < {}; exec setpriv --reuid=65534 --regid=65534 --clear-groups sleep 60",
            fifo.display()
        ))
        .spawn()
        .unwrap();
    let pid = child.id();
    let shell = format!(
        "shell,command=echo go > {}; i=0; until grep -q '^Uid:[[:space:]]*65534' /proc/{pid}/status; do i=$((i+1)); [ $i -lt 3000 ] || exit 1; sleep 0.01; done",
        fifo.display()
    );
    let out = sim(
        &t.path().join("r3"),
        "1s",
        &[
            "--on-end",
            &shell,
            "--on-end",
            &format!("signal,num=10,pid={pid}"),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--on-end signal,num=10,pid={pid}: not sent: pid {pid} belongs to another user (uid 65534"
        )),
        "{err}"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "the process was signalled"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `pid=parent` is resolved when the signal is due: a run orphaned since it started has init
/// as its parent, and is refused. Never init itself: latlab runs in a PID namespace whose init
/// is a shell that records the signal. Its parent leaves once the run has passed its checks
/// (an --on-threshold shell action lets it go, and waits until latlab is init's child).
#[test]
fn signal_to_a_parent_that_became_init_is_refused() {
    let Some(_g) = support::privileged::guard("signal_to_a_parent_that_became_init_is_refused")
    else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let p = |n: &str| t.path().join(n).display().to_string();
    let (fifo, lpid, sig, done, out, err) =
        (p("go"), p("lpid"), p("sig"), p("done"), p("out"), p("err"));
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let go = format!(
        "shell,command=echo go > {fifo}; i=0; until grep -q '^PPid:[[:space:]]*1$' /proc/$(cat {lpid})/status; do i=$((i+1)); [ $i -lt 3000 ] || exit 1; sleep 0.01; done"
    );
    let latlab = format!(
        "LATLAB_RUNTIME_DIR={rt} {bin} run --backend sim --sim-realtime --cpus 0 --max-latency 50us -q --no-db --duration 1s --results {res} --on-threshold '{go}' --on-end signal,num=10,pid=parent --on-end 'shell,command=touch {done}' > {out} 2> {err}",
        rt = p("rt"),
        bin = support::bin().display(),
        res = p("r"),
    );
    // The namespace's init: records SIGUSR1, starts latlab's parent, waits for latlab's end.
    let init = format!(
        "trap 'echo got >> {sig}' USR1
sh -c '{latlab_q} & echo $! > {lpid}; read x < {fifo}'
i=0; until [ -f {done} ]; do i=$((i+1)); [ $i -lt 1200 ] || exit 1; sleep 0.05; done
l=$(cat {lpid}); until [ ! -e /proc/$l ] || grep -q '^State:[[:space:]]*Z' /proc/$l/status; do sleep 0.05; done",
        latlab_q = latlab.replace('\'', "'\\''"),
    );
    let st = match std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c", &init])
        .status()
    {
        Ok(st) => st,
        Err(e) => {
            return support::cannot_run(
                "signal_to_a_parent_that_became_init_is_refused",
                &format!("unshare: {e}"),
            )
        }
    };
    let err = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(st.success(), "{st:?}: {err}");
    assert!(
        !Path::new(&sig).exists(),
        "the namespace's init got the signal: {err}"
    );
    assert!(
        err.contains("--on-end signal,num=10,pid=1: not sent: latlab's parent (pid 1) is init (latlab was orphaned, or runs as a service)")
            && err.contains("allow-init"),
        "{err}"
    );
    assert!(Path::new(&done).exists());
}

/// Live processes whose environment holds `token` (`KEY=VALUE`), with their command lines.
fn processes_with(token: &str) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == token.as_bytes()) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            out.push((pid, cmd.trim().to_string()));
        }
    }
    out
}

/// An action ends with its command: `sleep 301 &` (still in its process group) and `setsid
/// sleep 302 &` (out of it) are killed when their `--on-end` shell ends, and a command killed
/// at `--action-timeout` takes its `setsid sleep 303 &` along. After latlab exits, no process
/// of theirs is left (found by an environment token only they and latlab have), nor a cgroup,
/// nor a ledger.
#[test]
fn an_actions_background_processes_do_not_outlive_it() {
    let Some(_g) = support::privileged::guard("an_actions_background_processes_do_not_outlive_it")
    else {
        return;
    };
    let Some(cg_root) = latlab_sys::loads::supervisor::cgroup2_root() else {
        return support::cannot_run(
            "an_actions_background_processes_do_not_outlive_it",
            "no cgroup-v2 hierarchy is mounted",
        );
    };
    let t = tempfile::tempdir().unwrap();
    let token = format!("LATLAB_TEST_TOKEN={}", t.path().display());
    let rt = t.path().join("rt");
    let mut child = support::command()
        .args(["run", "--backend", "sim", "--sim-realtime", "--cpus", "0"])
        .args(["--max-latency", "50us", "-q", "--format", "json"])
        .args(["--duration", "2s", "--action-timeout", "1s", "--results"])
        .arg(t.path().join("r"))
        .args([
            "--on-threshold",
            "shell,command=setsid sleep 303 & exec sleep 304",
        ])
        .args(["--on-end", "shell,command=sleep 301 &"])
        .args(["--on-end", "shell,command=setsid sleep 302 &"])
        .env("LATLAB_TEST_TOKEN", t.path())
        .env("LATLAB_RUNTIME_DIR", &rt)
        // Files, not pipes: a survivor holding a pipe would delay its end-of-file.
        .stdout(std::fs::File::create(t.path().join("out")).unwrap())
        .stderr(std::fs::File::create(t.path().join("err")).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let st = child.wait().unwrap();
    let left = processes_with(&token);
    for (p, _) in &left {
        // SAFETY: plain syscall; the test's own leftovers.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    let err = std::fs::read_to_string(t.path().join("err")).unwrap();
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(
        left.is_empty(),
        "left running after latlab: {left:?}\n{err}"
    );
    let cgroups: Vec<String> = std::fs::read_dir(&cg_root)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("latlab-{pid}-")))
        .collect();
    assert!(cgroups.is_empty(), "{cgroups:?}");
    let ledgers: Vec<_> = support::run_dirs(&rt);
    assert!(ledgers.is_empty(), "{ledgers:?}");
    // Each said what it did.
    assert!(
        err.contains("--on-end shell,command=sleep 301 &: left 1 process running when it ended (")
            && err.contains(
                "--on-end shell,command=setsid sleep 302 &: left 1 process running when it ended ("
            ),
        "{err}"
    );
    let run = read_json(&only_run_dir(&t.path().join("r")).join("run.json"));
    let w = run["warnings"].to_string();
    assert!(
        w.contains("still running after --action-timeout 1s; killed"),
        "{w}"
    );
}

/// Without a cgroup (a user who may not create one) an action's process group is killed when
/// it ends, and a warning says once that `setsid` escapes it.
#[test]
fn without_a_cgroup_the_process_group_is_killed_and_that_is_said_once() {
    let Some(_g) = support::privileged::guard(
        "without_a_cgroup_the_process_group_is_killed_and_that_is_said_once",
    ) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        t.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let token = format!("LATLAB_TEST_TOKEN={}", t.path().display());
    let mut child = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(support::bin())
        .args(["run", "--backend", "sim", "--sim-realtime", "--cpus", "0"])
        .args(["--max-latency", "50us", "-q", "--format", "json"])
        .args(["--duration", "1s", "--results"])
        .arg(t.path().join("r"))
        .args(["--on-end", "shell,command=sleep 301 &"])
        .args(["--on-end", "shell,command=sleep 305 &"])
        .env("LATLAB_TEST_TOKEN", t.path())
        .env("LATLAB_RUNTIME_DIR", t.path().join("rt"))
        .env("LATLAB_DB", t.path().join("db.sqlite"))
        .stdout(std::fs::File::create(t.path().join("out")).unwrap())
        .stderr(std::fs::File::create(t.path().join("err")).unwrap())
        .spawn()
        .unwrap();
    let st = child.wait().unwrap();
    let left = processes_with(&token);
    for (p, _) in &left {
        // SAFETY: plain syscall; the test's own leftovers.
        unsafe { libc::kill(*p, libc::SIGKILL) };
    }
    let err = std::fs::read_to_string(t.path().join("err")).unwrap();
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(
        left.is_empty(),
        "left running after latlab: {left:?}\n{err}"
    );
    assert_eq!(
        err.matches("actions run in a process group, not a cgroup")
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("(setsid) survives the action"), "{err}");
}
