//! The kernel lab's first tests (issue 27): latlab on Debian's 6.12 PREEMPT_RT, 6.1 stock and
//! 6.1 PREEMPT_RT kernels, booted under QEMU by `scripts/kernel-lab` (support/lab.rs), one
//! boot per kernel doing several things, and the lab's own bad input. TCG emulates the CPUs:
//! the assertions are structural (exit codes, files, CPUs, counts, names), never latencies.
//! Without qemu, busybox or the fetched kernels they skip (fail under
//! `LATLAB_REQUIRE_PRIVILEGED=1`); the bad-input tests that need no guest always run.

use std::path::Path;

use serde_json::Value;

mod support;
use support::lab::{self, Guest, Lab};

/// One traced run (the recorder reads the kernel's binary pages and writes trace.dat), then
/// `check`, then `cleanup`; each step's stdout, stderr and status in the share, its start and
/// end (guest uptime) in `times`; the script's own status is 0 (grep -v finding no other
/// instance exits 1, which is the expected case, hence `left`'s `true`). The interval
/// is long for TCG, where many periods are missed; 500 µs is crossed by TCG's stalls every
/// second, 3 spikes keep the analysis (a debug build, emulated) short.
const SMOKE: &str = r#"
up() { cut -d' ' -f1 /proc/uptime; }
step() { n=$1; shift; a=$(up); "$@" >"$n.out" 2>"$n.err"; echo $? >"$n.rc"; echo "$n $a $(up)" >>times; }
uname -r >uname-r
step run latlab run --duration 3s --interval 5ms --trace-threshold 500us --trace-max-spikes 3 --results /lab/results --no-db -q
left() { ls -A /sys/kernel/tracing/instances | grep -v "^kernel-lab-"; true; }
left >instances-after-run
# 6.1 (no timerlat_fd): the timerlat back end on the kernel's own threads, and the osnoise one.
osn() { for f in cpus timerlat_period_us stop_tracing_us stop_tracing_total_us print_stack; do echo "$f $(cat /sys/kernel/tracing/osnoise/$f 2>&1)"; done; }
cat /sys/kernel/tracing/available_tracers >tracers
cat /sys/kernel/tracing/osnoise/options >osnoise-options 2>&1
case $(uname -r) in 6.1.*)
  osn >osnoise-before
  step timerlat latlab run --backend timerlat --cpus 1 -p 95 --interval 5ms --duration 2s --results /lab/timerlat --no-db -q
  osn >osnoise-after-timerlat; left >instances-after-timerlat
  step noise latlab run --mode noise --backend osnoise --cpus 1 --duration 2s --noise-threshold 100us --results /lab/noise --no-db -q
  osn >osnoise-after-noise; left >instances-after-noise
  step hw latlab run --mode noise --backend hwnoise --cpus 1 --duration 2s --noise-threshold 100us --results /lab/hw --no-db -q
  osn >osnoise-after-hw; left >instances-after-hw
esac
step check latlab check --format json
step cleanup latlab cleanup
left >instances-after-cleanup
"#;

/// A step of the guest script exited 0.
fn step_ok(g: &Guest, step: &str) {
    let rc = g.read(&format!("{step}.rc"));
    assert_eq!(
        rc.trim(),
        "0",
        "{step} exited {}: {}",
        rc.trim(),
        g.read(&format!("{step}.err"))
    );
}

/// The one run directory under the share's `results`.
fn run_json(g: &Guest) -> (std::path::PathBuf, Value) {
    let dir = support::only_run_dir(&g.path("results"));
    let v = support::read_json(&dir.join("run.json"));
    (dir, v)
}

/// Every measured CPU accounts for every period of the measured time (samples + missed
/// periods, within 5 % and a period or two of the expected count) and has samples at all.
fn counts_consistent(run: &Value) {
    let c = &run["config"];
    let expected = c["measured_ns"].as_f64().unwrap() / c["interval_ns"].as_f64().unwrap();
    assert!(expected >= 100.0, "{c}");
    for cpu in run["cpus"].as_array().unwrap() {
        let samples = cpu["samples"].as_f64().unwrap();
        let missed = cpu["missed_periods"].as_f64().unwrap();
        let n = samples + missed;
        assert!(
            n >= expected * 0.95 - 2.0 && n <= expected * 1.05 + 2.0,
            "CPU {}: {samples} samples + {missed} missed, {expected} periods expected",
            cpu["cpu"]
        );
        assert!(
            samples >= expected * 0.05,
            "CPU {}: {samples} samples of {expected}",
            cpu["cpu"]
        );
    }
}

fn cpus_of(run: &Value) -> Vec<u64> {
    run["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cpu"].as_u64().unwrap())
        .collect()
}

fn smoke(test: &str, kernel: &str, model: &str) {
    let Some(g) = lab::run(test, kernel, 2, SMOKE, 300) else {
        return;
    };
    assert_eq!(g.exit, 0, "{}", g.job_log);
    eprintln!("{test}: steps (guest uptime, s):\n{}", g.read("times"));
    let release = g.read("uname-r").trim().to_string();
    assert_eq!(
        Some(release.clone()),
        lab::release(kernel),
        "the booted kernel"
    );

    // The run: exit 0, run.json of this kernel, 2 CPUs, every period accounted for.
    step_ok(&g, "run");
    let (dir, run) = run_json(&g);
    assert_eq!(run["machine"]["kernel_release"], release.as_str());
    assert_eq!(run["machine"]["preemption"], model);
    assert_eq!(run["config"]["cpus"], serde_json::json!([0, 1]));
    assert_eq!(cpus_of(&run), vec![0, 1]);
    counts_consistent(&run);

    // The recorder read the kernel's binary pages: every spike has its trace.dat (its
    // trace_file) and analysis.txt, and no trace.txt (only with --trace-text).
    let trace = &run["trace"];
    assert_eq!(trace["read_as"], "binary", "{trace}");
    let spikes = run["spikes"].as_array().unwrap();
    assert!(
        !spikes.is_empty(),
        "no spike above 500us under TCG: {trace}"
    );
    assert_eq!(trace["traced"].as_u64(), Some(spikes.len() as u64));
    for s in spikes {
        let file = dir.join(s["trace_file"].as_str().expect("a trace file"));
        assert!(file.ends_with("trace.dat"), "{}", file.display());
        let sd = file.parent().unwrap();
        for f in ["trace.dat", "analysis.txt"] {
            assert!(sd.join(f).is_file(), "{} missing", sd.join(f).display());
        }
        assert!(!sd.join("trace.txt").exists(), "{}", sd.display());
        assert!(!s["causes"].as_array().unwrap().is_empty(), "{s}");
        // The steal time around it, read from this kernel's /proc/stat (0 under TCG, which
        // gives the guest no steal clock): the window holds the spike.
        let e = &s["steal"];
        let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("no {k}: {s}"));
        let (from, window) = (n(e, "from_ns"), n(e, "window_ns"));
        assert!(
            from <= n(s, "at_ns") && from + window >= n(s, "at_ns") + n(s, "latency_ns"),
            "{s}"
        );
        assert_eq!(n(e, "steal_ns"), 0, "steal under TCG: {s}");
    }
    assert_eq!(
        g.read("instances-after-run"),
        "",
        "the run left an instance"
    );

    // check: the preemption model, and no finding of an unreadable or unexpected value.
    step_ok(&g, "check");
    let check = g.json("check.out");
    assert_eq!(check["inventory"]["preemption"]["model"], model);
    let odd: Vec<&Value> = check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            let id = f["id"].as_str().unwrap();
            id.starts_with("invalid:") || id.starts_with("unknown:")
        })
        .collect();
    assert!(odd.is_empty(), "{odd:#?}");
    // The back ends check lists are the ones this kernel has: its tracers, and hwnoise where
    // osnoise can disable interrupts.
    let tracers = g.read("tracers");
    let mut expected = String::from("latlab run's back ends here: real, sim");
    for (on, name) in [
        (tracers.contains("timerlat"), "timerlat"),
        (tracers.contains("osnoise"), "osnoise"),
        (
            g.read("osnoise-options").contains("OSNOISE_IRQ_DISABLE"),
            "hwnoise",
        ),
    ] {
        if on {
            expected.push_str(", ");
            expected.push_str(name);
        }
    }
    let backends = check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "run.backends")
        .expect("a run.backends finding");
    assert_eq!(backends["title"], expected.as_str(), "{backends}");

    match kernel {
        // Debian's stock 6.1 is built without the tracers, its RT 6.1 with them.
        "stock-6.1" => no_timerlat_or_osnoise(&g),
        "rt-6.1" => timerlat_and_osnoise_on_6_1(&g),
        _ => {}
    }

    step_ok(&g, "cleanup");
    assert_eq!(g.read("instances-after-cleanup"), "");
}

/// A kernel built without the timerlat and osnoise tracers (Debian's stock 6.1): each back
/// end is refused in one line naming the kernel option, exit 1, no run directory, nothing
/// changed.
fn no_timerlat_or_osnoise(g: &Guest) {
    let tracers = g.read("tracers");
    assert!(
        !tracers.contains("timerlat") && !tracers.contains("osnoise"),
        "{tracers}"
    );
    for (step, option) in [
        ("timerlat", "CONFIG_TIMERLAT_TRACER"),
        ("noise", "CONFIG_OSNOISE_TRACER"),
        ("hw", "CONFIG_OSNOISE_TRACER"),
    ] {
        let err = g.read(&format!("{step}.err"));
        assert_eq!(g.read(&format!("{step}.rc")).trim(), "1", "{step}: {err}");
        assert_eq!(err.lines().count(), 1, "{step}: {err}");
        assert!(
            err.starts_with("latlab: error: this kernel has no ") && err.contains(option),
            "{step}: {err}"
        );
        assert!(
            !g.path(step).exists() || support::run_dirs(&g.path(step)).is_empty(),
            "{step} wrote a run directory"
        );
    }
    assert_eq!(g.read("osnoise-after-timerlat"), g.read("osnoise-before"));
    assert_eq!(g.read("osnoise-after-noise"), g.read("osnoise-before"));
    assert_eq!(g.read("osnoise-after-hw"), g.read("osnoise-before"));
    assert_eq!(g.read("instances-after-noise"), "");
}

/// On RT 6.1, which has the timerlat and osnoise tracers but no `timerlat_fd` (6.8): the
/// timerlat back end measures with the kernel's own `timerlat/1` thread and says so, every
/// activation is a sample or a missed period, each sample has its IRQ latency, and the
/// tracer's settings and instances are as before. The osnoise back end measures the CPU's
/// noise; hwnoise measures where this kernel's osnoise can disable interrupts (its
/// `OSNOISE_IRQ_DISABLE` option), else it is refused in one line; the settings are as before.
fn timerlat_and_osnoise_on_6_1(g: &Guest) {
    let tracers = g.read("tracers");
    assert!(
        tracers.contains("timerlat") && tracers.contains("osnoise"),
        "{tracers}"
    );
    step_ok(g, "timerlat");
    let run = support::read_json(&support::only_run_dir(&g.path("timerlat")).join("run.json"));
    assert_eq!(run["config"]["backend"], "timerlat");
    let c = &run["cpus"][0];
    assert_eq!(c["cpu"], 1);
    let m = &c["mode"];
    assert_eq!(m["timerlat_threads"], "kernel", "{m}");
    assert!(!m["thread"].is_object(), "{m}");
    let expected = run["config"]["measured_ns"].as_f64().unwrap() / 5e6;
    let samples = c["samples"].as_f64().unwrap();
    let missed = c["missed_periods"].as_f64().unwrap();
    assert!(
        (samples + missed - expected).abs() <= expected * 0.05 + 2.0 && samples >= 3.0,
        "{samples} samples + {missed} missed of {expected} periods"
    );
    let irq = m["irq"]["count"].as_f64().unwrap();
    assert!((irq - samples).abs() <= 2.0, "IRQ {irq}, thread {samples}");
    assert_eq!(g.read("osnoise-after-timerlat"), g.read("osnoise-before"));
    assert_eq!(g.read("instances-after-timerlat"), "");

    step_ok(g, "noise");
    let run = support::read_json(&support::only_run_dir(&g.path("noise")).join("run.json"));
    let n = &run["cpus"][0]["mode"]["noise"];
    eprintln!("osnoise on {}: {n}", g.read("uname-r").trim());
    assert_eq!(n["method"], "osnoise", "{n}");
    assert_eq!(n["threshold_ns"], 100_000, "{n}");
    let (runtime, noise) = (
        n["runtime_ns"].as_u64().unwrap(),
        n["noise_ns"].as_u64().unwrap(),
    );
    assert!(runtime > 0 && noise <= runtime, "{n}");
    assert_eq!(
        run["cpus"][0]["histogram"]["sum_ns"].as_u64(),
        Some(noise),
        "{n}"
    );
    assert_eq!(g.read("osnoise-after-noise"), g.read("osnoise-before"));
    assert_eq!(g.read("instances-after-noise"), "");
    // hwnoise where this kernel's osnoise can disable interrupts, else one line saying so.
    let options = g.read("osnoise-options");
    let err = g.read("hw.err");
    eprintln!("osnoise/options on {}: {options}", g.read("uname-r").trim());
    if options.contains("OSNOISE_IRQ_DISABLE") {
        step_ok(g, "hw");
        let run = support::read_json(&support::only_run_dir(&g.path("hw")).join("run.json"));
        let n = &run["cpus"][0]["mode"]["noise"];
        assert_eq!(n["method"], "hwnoise", "{n}");
        for s in n["sources"].as_array().unwrap() {
            assert!(
                ["nmi", "hardware"].contains(&s["kind"].as_str().unwrap()),
                "{s}"
            );
        }
    } else {
        assert_eq!(g.read("hw.rc").trim(), "1", "hwnoise on 6.1: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("latlab: error: ") && err.contains("OSNOISE_IRQ_DISABLE"),
            "{err}"
        );
    }
    assert_eq!(g.read("osnoise-after-hw"), g.read("osnoise-before"));
    assert_eq!(g.read("instances-after-hw"), "");
}

#[test]
fn rt_6_12_runs_traces_checks_and_cleans_up() {
    smoke("rt_6_12_runs_traces_checks_and_cleans_up", "rt-6.12", "rt");
}

#[test]
fn stock_6_1_runs_traces_checks_and_cleans_up() {
    smoke(
        "stock_6_1_runs_traces_checks_and_cleans_up",
        "stock-6.1",
        "voluntary",
    );
}

#[test]
fn rt_6_1_runs_traces_checks_and_cleans_up() {
    smoke("rt_6_1_runs_traces_checks_and_cleans_up", "rt-6.1", "rt");
}

/// `scripts/kernel-lab` with the given cache directory.
fn kernel_lab(cache: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(lab::script())
        .env("LATLAB_LAB_CACHE", cache)
        .args(args)
        .output()
        .unwrap()
}

/// One line `kernel-lab: ...` on stderr, nothing on stdout.
fn one_line(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.starts_with("kernel-lab: "), "{err:?}");
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    err
}

#[test]
fn an_unknown_kernel_is_one_clear_line() {
    let cache = tempfile::tempdir().unwrap();
    let share = tempfile::tempdir().unwrap();
    let job = share.path().join("job.sh");
    std::fs::write(&job, "true\n").unwrap();
    for args in [
        vec!["check", "rt-5.4"],
        vec!["fetch", "rt-5.4"],
        vec![
            "run",
            "--kernel",
            "rt-5.4",
            "--smp",
            "2",
            "--share",
            share.path().to_str().unwrap(),
            job.to_str().unwrap(),
        ],
    ] {
        let out = kernel_lab(cache.path(), &args);
        assert_eq!(out.status.code(), Some(lab::EXIT_USAGE), "{args:?}");
        let err = one_line(&out);
        assert!(
            err.contains("unknown kernel 'rt-5.4': one of rt-6.12 stock-6.1 rt-6.1"),
            "{err}"
        );
    }
    let why = Lab::available("rt-5.4").unwrap_err();
    assert!(why.contains("unknown kernel 'rt-5.4'"), "{why}");
}

#[test]
fn a_kernel_not_fetched_is_its_own_status() {
    // Nothing is fetched in an empty cache: the status the tests skip on, and what to run.
    let cache = tempfile::tempdir().unwrap();
    for k in lab::KERNELS {
        let out = kernel_lab(cache.path(), &["check", k]);
        assert_eq!(out.status.code(), Some(lab::EXIT_NO_KERNEL), "{k}");
        let err = one_line(&out);
        assert!(
            err.contains(&format!("kernel {k} is not in"))
                && err.contains(&format!("scripts/kernel-lab fetch {k}")),
            "{err}"
        );
    }
}

/// `job` launched on rt-6.12 with one CPU, `append` on the kernel's command line and a limit
/// of `timeout_s`, for a test of what the lab does when the launch fails; None (skipped,
/// saying why) where the lab cannot boot.
fn launch_to_fail(
    test: &str,
    append: Option<&str>,
    timeout_s: u32,
    job: &str,
) -> Option<lab::Launch> {
    let mut lab = Lab::new("rt-6.12", 1, timeout_s);
    if let Err(why) = Lab::available(&lab.kernel) {
        support::cannot_run(test, &format!("the kernel lab cannot boot here: {why}"));
        return None;
    }
    lab.append = append.map(str::to_string);
    Some(lab.launch(test, job))
}

/// A failed launch: its status, its one line on stderr starting with `start`, and nothing
/// left (no QEMU with its share, no initramfs in its temp directory, no exit status).
fn failed_cleanly(l: &lab::Launch, status: i32, start: &str) {
    assert_eq!(l.status, Some(status), "{}", l.stderr);
    assert_eq!(l.stderr.lines().count(), 1, "{}", l.stderr);
    assert!(l.stderr.starts_with(start), "{}", l.stderr);
    let left = lab::processes_mentioning(l.dir.to_str().unwrap());
    assert!(left.is_empty(), "{left:?}");
    let tmp: Vec<_> = std::fs::read_dir(&l.tmpdir).unwrap().collect();
    assert!(tmp.is_empty(), "{tmp:?}");
    assert!(!l.dir.join("exit").exists());
}

/// A guest kernel without tracefs (the init's path for it, taken on rt-6.12 with
/// `lab.hide_tracefs=1`): the job is not run and the lab says why in one line, its own
/// status, which the lab tests turn into a skip (a failure under
/// LATLAB_REQUIRE_PRIVILEGED=1) as for a missing tool or kernel.
#[test]
fn a_guest_without_tracefs_is_one_line_and_no_job() {
    let test = "a_guest_without_tracefs_is_one_line_and_no_job";
    let Some(l) = launch_to_fail(test, Some("lab.hide_tracefs=1"), 120, "echo ran >ran\n") else {
        return;
    };
    failed_cleanly(
        &l,
        lab::EXIT_NO_TRACEFS,
        "kernel-lab: rt-6.12 has no tracefs in its guest (",
    );
    assert!(l.stderr.contains("job.sh not run"), "{}", l.stderr);
    assert!(!l.dir.join("ran").exists(), "the job ran");
}

#[test]
fn a_hung_guest_is_killed_at_the_limit() {
    let test = "a_hung_guest_is_killed_at_the_limit";
    // 10 s: the limit may strike while the kernel boots or while the script sleeps; either
    // way the guest has not ended in time.
    let Some(l) = launch_to_fail(test, None, 10, "echo started\nsleep 3600\n") else {
        return;
    };
    failed_cleanly(
        &l,
        lab::EXIT_HUNG,
        "kernel-lab: guest hung after 10 s (killed), see ",
    );
    assert!(l.stderr.contains("console.log"), "{}", l.stderr);
    eprintln!(
        "{test}: killed after {:.1} s (the script {} started)",
        l.wall.as_secs_f64(),
        if l.dir.join("job.log").exists() {
            "had"
        } else {
            "had not"
        }
    );
}
