//! latlab on 8 CPUs of a PREEMPT_RT kernel booted for isolation, in the kernel lab (issue 27
//! §2): Debian's 6.12-rt under QEMU with 8 emulated CPUs and `isolcpus=2-5 nohz_full=2-5
//! rcu_nocbs=2-5`, one boot for:
//!
//! - `latlab check`: the RT model and its lazy mode, the isolated, tickless and RCU-offloaded
//!   CPUs (no finding against them), the IRQ threads, the RT tracers;
//! - a traced `latlab run --cpus 2-5` under a small hackbench (`cmd:`, 9 processes): 4 CPUs
//!   measured (every period a sample or a missed period, at least 1 % samples), 4 for
//!   housekeeping, the recorder on every measured CPU (spikes traced on
//!   several), the load on every housekeeping CPU;
//! - `latlab profile --cpus 2-5` under the same hackbench: heat maps for all 8 CPUs (16 in the
//!   page), per-CPU tables, and the measuring threads' switch-ins where the kernel traces
//!   switches out of idle;
//! - a traced run under stress-ng (`cmd:`, 2 CPU hogs) killed with SIGKILL, then `latlab
//!   cleanup`;
//! - the kernel's tracers on CPUs 2-5 (issue 28 §3): latlab's timerlat back end and `rtla
//!   timerlat hist` on the same CPUs, period and priority (their IRQ and thread series
//!   overlap on each CPU), then the osnoise back end and `rtla osnoise hist` (both count
//!   noises on each CPU, their ranges meet, and `latlab compare` reads both);
//! - after each: nothing left behind (no latlab or load process, no tracefs instance, no
//!   cgroup, no ledger, the knobs as they were).
//!
//! 8 emulated CPUs on the test machine's 2 cores miss most 1 ms periods: 10 ms here. TCG
//! emulates the CPUs: the assertions are structural, never latencies.
//!
//! Where the time goes: the lab runs TCG single-threaded, so every busy guest CPU takes its
//! turn on one host thread, and latlab's own steps (set-up, the recorder's start, decoding,
//! writing: SCHED_OTHER, a debug build) share the housekeeping CPUs with the load. Under the
//! built-in hackbench profile (400 processes) the traced run took 572 s for 3 s of
//! measurement (307 s from the load's start to the measurement's, 180 s from there to the
//! record, 80 s more to the load's stop), the profile ran into the 600 s limit. With the
//! small loads (guest uptimes in the share's `times`): run 42–61 s, profile 53–83 s, the
//! killed run 40–45 s, cleanup 1 s; 168–231 s for the boot (231 s with builds beside it), so
//! it runs in CI.

use std::collections::BTreeSet;

use serde_json::Value;

mod support;
use support::lab::{self, Guest, Lab};

const SCRIPT: &str = r#"
up() { cut -d' ' -f1 /proc/uptime; }
step() { n=$1; shift; a=$(up); "$@" >"$n.out" 2>"$n.err"; echo $? >"$n.rc"; echo "$n $a $(up)" >>times; }
# What the fault suite compares, as text: latlab's and the loads' processes, tracefs instances
# (the lab's own kernel-lab-* apart), cgroups, ledgers, the knobs latlab may touch.
state() {
    for p in /proc/[0-9]*; do
        c=$(tr '\0' ' ' <$p/cmdline 2>/dev/null)
        case $c in *latlab\ run* | *latlab\ profile* | *hackbench* | *stress-ng* | *__load-watchdog*) echo "process ${p#/proc/} $c" ;; esac
    done
    ls -A /sys/kernel/tracing/instances | grep -v '^kernel-lab-' | sed 's/^/instance /'
    find /sys/fs/cgroup -mindepth 1 -type d | sed 's/^/cgroup /'
    ls -A /run/latlab 2>/dev/null | sed 's/^/ledger /'
    for k in /proc/sys/kernel/sched_rt_runtime_us /proc/sys/kernel/timer_migration \
        /sys/kernel/tracing/tracing_on /sys/kernel/tracing/current_tracer /sys/kernel/tracing/trace_clock \
        /sys/kernel/tracing/buffer_size_kb; do
        echo "knob $k $(cat $k)"
    done
}
# hackbench with one group of 4 senders and 4 receivers (9 processes) instead of the built-in
# profile's 10 groups (400 processes): those left latlab's own steps (SCHED_OTHER) a sliver of
# the 4 housekeeping CPUs, and the run took 572 s for 3 s of measurement.
HACKBENCH='hackbench -g 1 -f 4 -s 512 -l 100000000 -P'
# stress-ng with 2 CPU hogs, not stress-cpu's N+1 = 9: every busy emulated CPU costs host time.
STRESS='stress-ng --cpu 2 --timeout 600s'
cpu_busy() { awk '/^cpu[0-9]/ { print $1, $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
state >state-before
step check latlab check --format json
cpu_busy >busy-before
step run latlab run --cpus 2-5 --duration 3s --interval 10ms --trace-threshold 3ms --trace-max-spikes 8 --load "cmd:$HACKBENCH" --results /lab/run --no-db -q
cpu_busy >busy-after
state >state-after-run
step profile latlab profile --cpus 2-5 --duration 2s --interval 10ms --load "cmd:$HACKBENCH" --results /lab/profile --no-db -q
state >state-after-profile
# The kernel's tracers on the 4 isolated CPUs (issue 28 §3 on 8 CPUs): latlab's timerlat back end,
# then rtla timerlat hist on the same CPUs, period and priority (100 us buckets to 300 ms: TCG
# with 8 CPUs on 2 cores); then the osnoise back end and rtla osnoise hist on the same CPUs,
# threshold, period and runtime (1 s of 1 s, both tools' default; 1 ms buckets to 1 s: on 8
# emulated CPUs a noise lasts up to 300 ms, most beyond 30 ms). Each alone on the machine.
step tl latlab run --backend timerlat --cpus 2-5 -p 95 --interval 10ms --duration 3s --results /lab/tl --no-db -q
step rtla rtla timerlat hist -c 2-5 -P f:95 -p 10000 -d 3 -b 100 -E 3000
step osn latlab run --mode noise --backend osnoise --cpus 2-5 --duration 2s --noise-threshold 100us --results /lab/osn --no-db -q
step rtlaosn rtla osnoise hist -c 2-5 -d 2 -T 100 -b 1000 -E 1000
state >state-after-tracers
# Killed with SIGKILL while it measures, traced, under a load; then cleanup.
a=$(up)
latlab run --cpus 2-5 --duration 60s --warmup 200ms --interval 10ms --trace-threshold 3ms --load "cmd:$STRESS" --results /lab/killed --no-db -q >killed.out 2>killed.err &
r=$!
while ! grep -qs '^latlab-cpu2$' /proc/$r/task/*/comm && kill -0 $r 2>/dev/null; do usleep 20000; done
sleep 1
state >state-killed
kill -KILL $r; wait $r; echo $? >killed.rc
echo "killed $a $(up)" >>times
step cleanup latlab cleanup
state >state-after-cleanup
"#;

fn guest() -> Option<&'static Guest> {
    static G: lab::Once = lab::Once::new();
    let test = "lab_rt_eight_cpus";
    let make = || {
        let mut l = Lab::new("rt-6.12", 8, 600);
        l.append = Some("isolcpus=2-5 nohz_full=2-5 rcu_nocbs=2-5".into());
        l.tools(test, &["hackbench", "stress-ng", "rtla"])
            .then_some(l)
    };
    Lab::once(&G, test, make, SCRIPT)
}

fn step_ok(g: &Guest, step: &str) {
    let rc = g.read(&format!("{step}.rc"));
    assert_eq!(rc.trim(), "0", "{step}: {}", g.read(&format!("{step}.err")));
}

/// rtla's output of `step` imported on the host (labelled as the step): its directory (in the
/// temporary directory returned) and record, whose CPUs must be `cpus`.
fn rtla_imported(
    g: &Guest,
    step: &str,
    cpus: &Value,
) -> (tempfile::TempDir, std::path::PathBuf, Value) {
    step_ok(g, step);
    let tmp = tempfile::tempdir().unwrap();
    let dir = support::import_dir(tmp.path(), &g.path(&format!("{step}.out")), step);
    let imp = support::read_json(&dir.join("run.json"));
    let got: Vec<&Value> = imp["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["cpu"])
        .collect();
    assert_eq!(&serde_json::json!(got), cpus, "{step}'s CPUs");
    (tmp, dir, imp)
}

fn run_json(g: &Guest, dir: &str) -> (std::path::PathBuf, Value) {
    let d = support::only_run_dir(&g.path(dir));
    let v = support::read_json(&d.join("run.json"));
    (d, v)
}

#[test]
fn check_sees_the_rt_kernel_and_its_isolated_cpus() {
    let Some(g) = guest() else { return };
    step_ok(g, "check");
    let c = g.json("check.out");
    let inv = &c["inventory"];
    assert_eq!(inv["preemption"]["model"], "rt");
    assert_eq!(inv["preemption"]["dynamic_mode"], "lazy");
    assert_eq!(inv["cpus"]["isolated"], serde_json::json!([2, 3, 4, 5]));
    assert_eq!(inv["cpus"]["nohz_full"], serde_json::json!([2, 3, 4, 5]));
    assert_eq!(inv["cmdline_params"]["rcu_nocbs"], "2-5");
    let threads = inv["irqs"]["threads"].as_array().unwrap();
    assert!(
        threads
            .iter()
            .any(|t| t["comm"] == "irq/4-ttyS0" && t["irq"] == 4 && t["policy"] == "fifo"),
        "{threads:#?}"
    );
    let ids: Vec<&str> = c["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    for id in ["preempt.lazy", "irq.threads", "trace.rt-tracers"] {
        assert!(ids.contains(&id), "{id} missing: {ids:?}");
    }
    // Isolated, tickless, offloaded: nothing to say against it; the IRQ threads are at the
    // kernel's FIFO 50, below the measuring threads.
    for id in [
        "cpus.no-isolation",
        "rcu.callbacks-on-isolated",
        "cpus.tick-on-isolated",
        "irq.threads-above-measuring",
        "preempt.model",
    ] {
        assert!(!ids.contains(&id), "{id}: {ids:?}");
    }
    assert!(
        !ids.iter()
            .any(|i| i.starts_with("unknown:") || i.starts_with("invalid:")),
        "{ids:?}"
    );
}

#[test]
fn a_traced_run_on_four_of_eight_cpus_under_hackbench() {
    let Some(g) = guest() else { return };
    step_ok(g, "run");
    let (dir, run) = run_json(g, "run");
    assert_eq!(
        run["machine"]["cpus_online"],
        serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7])
    );
    assert_eq!(run["config"]["cpus"], serde_json::json!([2, 3, 4, 5]));
    assert_eq!(
        run["config"]["housekeeping_cpus"],
        serde_json::json!([0, 1, 6, 7])
    );
    // Per CPU: every period accounted for.
    let c = &run["config"];
    let periods = c["measured_ns"].as_f64().unwrap() / c["interval_ns"].as_f64().unwrap();
    let cpus: Vec<u64> = run["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let n = c["samples"].as_f64().unwrap() + c["missed_periods"].as_f64().unwrap();
            assert!(
                (periods * 0.95 - 2.0..=periods * 1.05 + 2.0).contains(&n),
                "CPU {}: {n} of {periods}",
                c["cpu"]
            );
            // Every CPU measured. How many periods it missed is the host's to say: 8
            // emulated CPUs take turns on one host thread, and a fresh clone with builds
            // beside it got 14 samples of 300 on CPU 2 (4.7 %; 2026-11-29).
            assert!(
                c["samples"].as_f64().unwrap() >= (periods * 0.01).max(3.0),
                "CPU {}: {} samples of {periods}",
                c["cpu"],
                c["samples"]
            );
            c["cpu"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(cpus, vec![2, 3, 4, 5]);
    // The recorder traces every measured CPU: spikes on several of them, each with its files.
    let spikes = run["spikes"].as_array().unwrap();
    let traced: BTreeSet<u64> = spikes
        .iter()
        .filter(|s| s["trace_file"].is_string())
        .map(|s| s["cpu"].as_u64().unwrap())
        .collect();
    assert!(traced.len() >= 2, "spikes traced on {traced:?} only");
    assert!(traced.iter().all(|c| (2..=5).contains(c)), "{traced:?}");
    for s in spikes.iter().filter(|s| s["trace_file"].is_string()) {
        let t = dir.join(s["trace_file"].as_str().unwrap());
        assert!(t.with_file_name("trace.dat").is_file(), "{}", t.display());
    }
    // The load ran, on every CPU (it was not confined): each CPU busier during the run.
    let loads = run["loads"].as_array().unwrap();
    assert!(
        loads
            .iter()
            .any(|l| l["profile"].as_str().unwrap().starts_with("cmd:hackbench ")),
        "{loads:#?}"
    );
    let busy = |f: &str| -> Vec<(String, u64)> {
        g.read(f)
            .lines()
            .map(|l| {
                let (c, n) = l.split_once(' ').unwrap();
                (c.to_string(), n.parse().unwrap())
            })
            .collect()
    };
    let (a, b) = (busy("busy-before"), busy("busy-after"));
    assert_eq!(a.len(), 8);
    for ((c, x), (_, y)) in a.iter().zip(&b) {
        assert!(y > x, "{c}: no busy time during the run ({x} → {y})");
    }
    // Per-CPU tables: a section per measured CPU in the summary, and only those.
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    let sections: Vec<&str> = summary.lines().filter(|l| l.starts_with("CPU ")).collect();
    assert_eq!(sections, ["CPU 2", "CPU 3", "CPU 4", "CPU 5"], "{summary}");
}

#[test]
fn a_profile_of_eight_cpus_draws_sixteen_maps() {
    let Some(g) = guest() else { return };
    step_ok(g, "profile");
    let (dir, run) = run_json(g, "profile");
    let p = &run["profile"];
    let cpus: Vec<u64> = p["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, (0..8).collect::<Vec<u64>>());
    // The report of the run directory (it reads profile/series.bin there; the run's own
    // report.html is rendered without it).
    let out = support::stdout_ok(
        support::latlab()
            .arg("report")
            .arg(&dir)
            .args(["--format", "html"]),
    );
    let html = String::from_utf8_lossy(&out);
    assert_eq!(
        html.matches("<img class=\"map\"").count(),
        16,
        "two maps a CPU"
    );
    // The measuring threads, one per measured CPU. This kernel traces switches out of idle,
    // so every wake-up of a measuring thread has its switch-in and a run-queue wait. The other
    // switch-ins are its preemptions (switched out runnable, back without a wake-up) and its
    // first run: a boot gave 141 wake-ups + 6 preemptions + 1 = 148 switch-ins, the
    // preemptions at the thread's start, before it is pinned and raised (rcuc/0, migration/0,
    // latlab-loads, hackbench on CPU 0). One either way for a wake-up or a first run at an end.
    let m = p["measuring"].as_array().unwrap();
    let on: Vec<u64> = m.iter().map(|r| r["cpu"].as_u64().unwrap()).collect();
    assert_eq!(on, vec![2, 3, 4, 5]);
    for r in m {
        let (w, s) = (
            r["wakeups"].as_u64().unwrap(),
            r["switch_ins"].as_u64().unwrap(),
        );
        // Every sample the run kept is a wake-up the profile saw (the profile's seconds also
        // hold the thread's first wake-ups, before it measures). How many periods TCG lets the
        // thread take is not the code's: a CI clone's 8 vCPUs on 2 host cores under the host's
        // tests got 33-40 samples of 200 periods (a fixed `w >= 50` failed there).
        let cpu = r["cpu"].as_u64().unwrap();
        let samples = run["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cpu"] == cpu)
            .and_then(|c| c["samples"].as_u64())
            .unwrap();
        assert!(
            samples >= 10 && w + 1 >= samples,
            "{samples} samples; {r:#}"
        );
        let pre = r["preemptions"].as_u64().unwrap();
        assert!(
            s + 1 >= w + pre && s <= w + pre + 1,
            "CPU {}: {w} wake-ups, {s} switch-ins, {pre} preemptions by {}",
            r["cpu"],
            r["preempted_by"]
        );
        let waits = r["rq_wait"]["count"].as_u64().unwrap();
        assert!(
            waits + 2 >= w,
            "CPU {}: {waits} waits of {w} wake-ups",
            r["cpu"]
        );
    }
}

/// The fault suite's facts in the guest: after each run, the profile, and a SIGKILLed run
/// followed by `latlab cleanup`, the state is what it was before.
/// The timerlat back end on the 4 isolated CPUs of 8: each accounts for every activation (a
/// sample or a missed period) with its IRQ, thread and return-to-user series; `rtla timerlat
/// hist` on the same CPUs, period and priority, imported, has the same 4 CPUs, and on each
/// the medians of latlab's IRQ and thread series lie within rtla's range and the reverse.
/// The osnoise back end measures the same 4 CPUs, each noise per second adding up to its noise;
/// `rtla osnoise hist` beside it (same CPUs, threshold, period and runtime), imported, is a
/// noise record of the same 4 CPUs whose noises meet latlab's on each (both count noises of
/// at least the threshold, their ranges intersect), and `latlab compare` puts the two side by
/// side.
#[test]
fn timerlat_and_osnoise_on_four_of_eight_cpus_beside_rtla() {
    let Some(g) = guest() else { return };
    step_ok(g, "tl");
    let (_, run) = run_json(g, "tl");
    assert_eq!(run["config"]["backend"], "timerlat");
    let four = serde_json::json!([2, 3, 4, 5]);
    assert_eq!(run["config"]["cpus"], four);
    let periods = run["config"]["measured_ns"].as_f64().unwrap() / 10e6;
    let (_tmp, _, imp) = rtla_imported(g, "rtla", &four);
    for (c, theirs) in run["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .zip(imp["cpus"].as_array().unwrap())
    {
        let m = &c["mode"];
        assert_eq!(m["timerlat_threads"], "user", "{m}");
        let samples = c["samples"].as_f64().unwrap();
        let missed = c["missed_periods"].as_f64().unwrap();
        assert!(
            (samples + missed - periods).abs() <= periods * 0.05 + 2.0,
            "CPU {}: {samples} samples + {missed} missed of {periods} periods",
            c["cpu"]
        );
        for k in ["irq", "thread"] {
            let n = m[k]["count"].as_f64().unwrap();
            assert!(
                (n - samples).abs() <= 2.0,
                "CPU {}: {k} {n}, {samples}",
                c["cpu"]
            );
        }
        for (what, ours, rtla) in [
            ("IRQ", &m["irq"], &theirs["mode"]["irq"]),
            ("thread", &m["thread"], &theirs["histogram"]),
        ] {
            let what = format!("CPU {} {what}", c["cpu"]);
            lab::medians_overlap(&what, &lab::hist(ours), &lab::hist(rtla));
        }
    }
    step_ok(g, "osn");
    let (_, run) = run_json(g, "osn");
    assert_eq!(run["config"]["cpus"], four);
    for c in run["cpus"].as_array().unwrap() {
        let n = &c["mode"]["noise"];
        assert_eq!(n["method"], "osnoise", "{n}");
        let (runtime, noise) = (
            n["runtime_ns"].as_u64().unwrap(),
            n["noise_ns"].as_u64().unwrap(),
        );
        assert!(runtime > 0 && noise <= runtime, "{n}");
        let sums: u64 = n["per_second_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(sums, noise, "{n}");
    }
    let (_tmp, theirs, imp) = rtla_imported(g, "rtlaosn", &four);
    assert_eq!(imp["config"]["mode"], "noise");
    for (c, t) in run["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .zip(imp["cpus"].as_array().unwrap())
    {
        // A few noises each, of what TCG's time slices of 8 emulated CPUs make them (4 ms in
        // one boot, 200 ms in another; bimodal: latlab's median 183 µs where rtla's was
        // 103 ms), and the tracer's threads may start sampling up to a second late under TCG:
        // neither their medians nor their totals compare. Both count noises of at least the
        // threshold on each CPU, in the same unit: their ranges meet.
        let range = |v: &Value| {
            let h = lab::hist(v);
            (h.count(), h.min().unwrap_or(0), h.max().unwrap_or(0))
        };
        let (ours, rtla) = (range(&c["histogram"]), range(&t["histogram"]));
        eprintln!(
            "CPU {} noises (count, min, max ns): latlab {ours:?}, rtla {rtla:?}",
            c["cpu"]
        );
        assert!(
            ours.0 > 0 && rtla.0 > 0,
            "CPU {}: {ours:?} {rtla:?}",
            c["cpu"]
        );
        assert!(
            ours.1 >= 100_000,
            "CPU {}: below the threshold: {ours:?}",
            c["cpu"]
        );
        assert!(
            ours.2 >= rtla.1 && rtla.2 >= ours.1,
            "CPU {}: latlab's noises {ours:?}, rtla's {rtla:?} do not meet",
            c["cpu"]
        );
    }
    let (ours, _) = run_json(g, "osn");
    let out = support::stdout_ok(
        support::latlab()
            .arg("compare")
            .arg(&ours)
            .arg(&theirs)
            .args(["--format", "json"]),
    );
    let cmp: Value = serde_json::from_slice(&out).unwrap();
    let labels: Vec<&Value> = cmp["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["label"])
        .collect();
    assert_eq!(labels.len(), 2, "{labels:?}");
    assert!(
        labels[1].as_str().unwrap().contains("rtlaosn"),
        "{labels:?}"
    );
}

#[test]
fn nothing_is_left_behind_on_rt() {
    let Some(g) = guest() else { return };
    let before = g.read("state-before");
    assert!(before.contains("knob /proc/sys/kernel/sched_rt_runtime_us"));
    for f in [
        "state-after-run",
        "state-after-profile",
        "state-after-tracers",
        "state-after-cleanup",
    ] {
        assert_eq!(g.read(f), before, "{f} differs from the state before");
    }
    // The SIGKILL did leave something (the run was measuring, traced, under its load), and
    // cleanup exited 0.
    let killed = g.read("state-killed");
    assert!(killed.contains("instance latlab-"), "{killed}");
    assert!(killed.contains("stress-ng"), "{killed}");
    assert_eq!(g.read("killed.rc").trim(), "137");
    step_ok(g, "cleanup");
}
