//! `latlab run --backend timerlat` proven in the kernel lab (issue 28 §3): Debian's 6.12-rt
//! booted under QEMU (support/lab.rs), 2 CPUs, CPU 1 measured at FIFO 95 every 5 ms, one boot
//! for all of it:
//!
//! - latlab's threads on `timerlat_fd`: every activation accounted for (samples + missed ≈
//!   duration / period), the IRQ, thread and return-to-user series all there, the `osnoise/`
//!   settings as they were once it ends and no instance left;
//! - `rtla timerlat hist` on the same CPU, period and priority (imported): its IRQ and thread
//!   series overlap latlab's;
//! - a FIFO 97 hog in 25 ms bursts on CPU 1 (support/lab_inject.c) delays the thread, not the
//!   timer's IRQ: the thread series gets the bursts, the IRQ series does not, and the periods
//!   the late thread skipped are counted as missed;
//! - the same hog with `--trace-threshold 15ms`: the spikes are traced and name the hog;
//! - the reverse injector: the kernel's hwlat tracer holding interrupts off on CPU 1 (20 ms
//!   of every 100 ms, in the lab's own instance) delays the timer's IRQ: the IRQ series gets
//!   the stalls, and the thread's, which waits for its IRQ, at least as many; latlab runs
//!   beside it, warning;
//! - the kernel's own `timerlat/1` thread (`LATLAB_TIMERLAT_THREADS=kernel`, the path of a
//!   kernel without `timerlat_fd`): IRQ and thread series, `timerlat_threads` `kernel`;
//! - rtla running: refused in one line naming its instance, nothing changed;
//! - latlab SIGKILLed mid-run: its instance and settings stay, `latlab cleanup` restores them.
//!
//! TCG emulates the CPUs: the assertions are structure and direction, never latencies.

use serde_json::Value;

mod support;
use support::lab::{hist, Guest, Lab};

const SCRIPT: &str = r#"
up() { cut -d' ' -f1 /proc/uptime; }
step() { n=$1; shift; a=$(up); "$@" >"$n.out" 2>"$n.err"; echo $? >"$n.rc"; echo "$n $a $(up)" >>times; }
T=/sys/kernel/tracing
osn() { for f in cpus timerlat_period_us stop_tracing_us stop_tracing_total_us print_stack options; do echo "$f $(cat $T/osnoise/$f 2>&1)"; done; }
ours() { ls -A $T/instances | grep '^latlab-'; true; }
tl() { latlab run --backend timerlat --cpus 1 -p 95 --interval 5ms --no-db -q "$@"; }
osn >osnoise-before
# 1. latlab's threads on timerlat_fd.
step base tl --duration 3s --results /lab/base
osn >osnoise-after-base; ours >instances-after-base
# 2. rtla, same CPU, period, priority.
# 10 us buckets up to 300 ms: TCG's latencies are milliseconds (rtla's default ends at 256 us),
# and beside a loaded host its stalls passed 100 ms (5 of 488 samples over a 30 ms limit).
step rtla rtla timerlat hist -c 1 -P f:95 -p 5000 -d 3 -b 10 -E 30000
# 3. A FIFO 97 hog on CPU 1: 25 ms bursts every 60 ms, running until killed (TCG's set-up
# takes seconds).
lab_inject hog 1 97 25000 60 120 /lab/hog.log & h=$!
step hog tl --duration 3s --results /lab/hog
# 3b. The same hog, the run traced: timerlat's thread latency over 15 ms marks latlab's
# flight recorder, and the spike is explained.
step hogtr tl --duration 3s --trace-threshold 15ms --trace-max-spikes 4 --results /lab/hogtr
kill $h 2>/dev/null; wait $h 2>/dev/null
osn >osnoise-after-hogtr; ours >instances-after-hogtr
# 3c. The reverse: the kernel's hwlat tracer (in the lab's own instance, on CPU 1) holds
# interrupts off for 20 ms of every 100 ms: the timer's IRQ waits, and the thread with it.
# latlab runs beside it, warning.
H=$T/hwlat_detector; hw0="$(cat $H/window) $(cat $H/width) $(sed 's/.*\[\(.*\)\].*/\1/' $H/mode)"
mkdir $T/instances/lab-hwlat; echo 2 > $T/instances/lab-hwlat/tracing_cpumask
echo 20000 > $H/width; echo 100000 > $H/window; echo none > $H/mode
echo hwlat > $T/instances/lab-hwlat/current_tracer
step hw tl --duration 3s --results /lab/hw
echo nop > $T/instances/lab-hwlat/current_tracer; rmdir $T/instances/lab-hwlat
set -- $hw0; echo $1 > $H/window; echo $2 > $H/width; echo $3 > $H/mode
osn >osnoise-after-hw; ours >instances-after-hw
# 4. The kernel's timerlat/1 thread.
step kthreads env LATLAB_TIMERLAT_THREADS=kernel latlab run --backend timerlat --cpus 1 -p 95 --interval 5ms --no-db -q --duration 2s --results /lab/kthreads
osn >osnoise-after-kthreads
# 5. rtla running: refused, nothing changed.
rtla timerlat hist -c 1 -p 5000 -d 120 >/dev/null 2>&1 & r=$!
i=0; while ! grep -qs timerlat $T/instances/*/current_tracer && [ $i -lt 600 ]; do usleep 100000; i=$((i+1)); done
osn >osnoise-with-rtla
step busy tl --duration 1s --results /lab/busy
osn >osnoise-after-busy
kill -INT $r 2>/dev/null; wait $r 2>/dev/null
i=0; while grep -qs timerlat $T/instances/*/current_tracer && [ $i -lt 600 ]; do usleep 100000; i=$((i+1)); done
# 6. SIGKILL mid-run, then cleanup.
# latlab itself in the background (not the shell function: its subshell would be killed).
latlab run --backend timerlat --cpus 1 -p 95 --interval 5ms --no-db -q --duration 60s --results /lab/killed >killed.out 2>killed.err & l=$!
i=0; while ! grep -qsx 'latlab-tl/1' /proc/[0-9]*/comm && [ $i -lt 600 ]; do usleep 100000; i=$((i+1)); done
kill -9 $l; wait $l 2>/dev/null
usleep 300000
osn >osnoise-killed; ours >instances-killed
step cleanup latlab cleanup
osn >osnoise-after-cleanup; ours >instances-after-cleanup
true
"#;

fn guest() -> Option<&'static Guest> {
    static G: support::lab::Once = support::lab::Once::new();
    let test = "lab_timerlat";
    let make = || {
        let mut l = Lab::new("rt-6.12", 2, 600);
        let ok = l.tools(test, &["rtla"]) && l.injector(test);
        ok.then_some(l)
    };
    Lab::once(&G, test, make, SCRIPT)
}

/// Step `n`'s run directory's run.json, its exit status checked.
fn run_of(g: &Guest, n: &str) -> Value {
    let rc = g.read(&format!("{n}.rc"));
    assert_eq!(rc.trim(), "0", "{n}: {}", g.read(&format!("{n}.err")));
    support::read_json(&support::only_run_dir(&g.path(n)).join("run.json"))
}

fn count_at_or_above(v: &Value, ns: u64) -> u64 {
    let h = hist(v);
    h.count() - h.count_below(ns)
}

/// A timerlat run's CPU 1: its series, and every activation accounted for.
fn timerlat_cpu(run: &Value, threads: &str) -> Value {
    assert_eq!(run["config"]["backend"], "timerlat");
    assert_eq!(run["config"]["cpus"], serde_json::json!([1]));
    let c = run["cpus"][0].clone();
    assert_eq!(c["cpu"], 1);
    let m = &c["mode"];
    assert_eq!(m["timerlat_threads"], threads, "{m}");
    assert_eq!(m["thread"].is_object(), threads == "user", "{m}");
    let expected = run["config"]["measured_ns"].as_f64().unwrap() / 5e6;
    let samples = c["samples"].as_f64().unwrap();
    let missed = c["missed_periods"].as_f64().unwrap();
    assert!(
        (samples + missed - expected).abs() <= expected * 0.05 + 2.0,
        "{samples} samples + {missed} missed of {expected} periods"
    );
    // Every activation has its IRQ sample, and the thread's series as many (but the last).
    let irq = m["irq"]["count"].as_f64().unwrap();
    assert!((irq - samples).abs() <= 2.0, "IRQ {irq}, thread {samples}");
    if threads == "user" {
        let thr = m["thread"]["count"].as_f64().unwrap();
        assert!((thr - samples).abs() <= 2.0, "thread {thr}, user {samples}");
    }
    c
}

#[test]
fn user_threads_account_for_every_activation_and_restore_the_settings() {
    let Some(g) = guest() else { return };
    let run = run_of(g, "base");
    let c = timerlat_cpu(&run, "user");
    assert!(c["samples"].as_u64().unwrap() >= 300, "{}", c["samples"]);
    // Return to user comes after the thread ran: its series lies above the thread's.
    let (user, thread) = (hist(&c["histogram"]), hist(&c["mode"]["thread"]));
    assert!(
        user.min() >= thread.min(),
        "{:?} {:?}",
        user.min(),
        thread.min()
    );
    assert_eq!(g.read("osnoise-after-base"), g.read("osnoise-before"));
    assert_eq!(g.read("instances-after-base"), "");
}

#[test]
fn latlabs_irq_and_thread_series_overlap_rtlas() {
    let Some(g) = guest() else { return };
    let run = run_of(g, "base");
    let c = timerlat_cpu(&run, "user");
    let rc = g.read("rtla.rc");
    assert_eq!(rc.trim(), "0", "rtla: {}", g.read("rtla.err"));
    let tmp = tempfile::tempdir().unwrap();
    let dir = support::import_dir(tmp.path(), &g.path("rtla.out"), "rtla");
    let imp = support::read_json(&dir.join("run.json"));
    assert_eq!(imp["cpus"][0]["cpu"], 1);
    // rtla 6.1 measures with the kernel's thread: its histogram is the thread latency.
    for (what, ours, theirs) in [
        ("IRQ", &c["mode"]["irq"], &imp["cpus"][0]["mode"]["irq"]),
        ("thread", &c["mode"]["thread"], &imp["cpus"][0]["histogram"]),
    ] {
        support::lab::medians_overlap(what, &hist(ours), &hist(theirs));
    }
}

#[test]
fn a_hog_above_the_thread_delays_the_thread_not_the_irq() {
    let Some(g) = guest() else { return };
    let base = timerlat_cpu(&run_of(g, "base"), "user");
    let hog = timerlat_cpu(&run_of(g, "hog"), "user");
    let over = |c: &Value, k: &str| {
        let v = if k == "irq" {
            &c["mode"]["irq"]
        } else {
            &c["mode"]["thread"]
        };
        count_at_or_above(v, 15_000_000)
    };
    // No count of the hog's bursts: it is killed, and it writes them only when it ends.
    eprintln!(
        "over 15 ms: thread {} (base {}), IRQ {} (base {}); missed {} (base {})",
        over(&hog, "thread"),
        over(&base, "thread"),
        over(&hog, "irq"),
        over(&base, "irq"),
        hog["missed_periods"],
        base["missed_periods"]
    );
    // About one activation per 25 ms burst waits for its end (20-25 ms): the thread series.
    assert!(over(&hog, "thread") >= 10, "thread");
    assert!(
        over(&hog, "thread") >= 3 * over(&base, "thread") + 5,
        "thread vs base"
    );
    // The timer's IRQ is not the hog's: what it has over 15 ms is TCG's own stalls.
    assert!(
        over(&hog, "irq") <= over(&base, "irq") + over(&hog, "thread") / 4,
        "IRQ"
    );
    // The late thread skipped the periods of the burst: missed, not lost.
    assert!(
        hog["missed_periods"].as_u64() > base["missed_periods"].as_u64().map(|m| m + 20),
        "missed"
    );
}

/// The reverse of the hog: hwlat holds interrupts off on CPU 1 (20 ms of every 100 ms), so the
/// timer's IRQ waits: the IRQ series gets the stalls (about one activation per window), and
/// the thread series, whose latency includes its IRQ's, holds at least as many. latlab ran
/// beside hwlat (another tracer, not an osnoise user) and said so.
#[test]
fn interrupts_held_off_delay_the_irq_and_the_thread_with_it() {
    let Some(g) = guest() else { return };
    let base = timerlat_cpu(&run_of(g, "base"), "user");
    let hw = timerlat_cpu(&run_of(g, "hw"), "user");
    let over = |c: &Value, k: &str| count_at_or_above(&c["mode"][k], 10_000_000);
    eprintln!(
        "over 10 ms: IRQ {} (base {}), thread {} (base {})",
        over(&hw, "irq"),
        over(&base, "irq"),
        over(&hw, "thread"),
        over(&base, "thread")
    );
    assert!(over(&hw, "irq") >= 10, "IRQ");
    assert!(
        over(&hw, "irq") >= 3 * over(&base, "irq") + 5,
        "IRQ vs base"
    );
    assert!(over(&hw, "thread") + 2 >= over(&hw, "irq"), "thread vs IRQ");
    // Run with -q: the warning is the record's, where a later reader of the run sees it.
    let warned = run_of(g, "hw")["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .any(|w| {
            w.contains("'lab-hwlat' runs the hwlat tracer")
                && w.contains("20000 µs of every 100000 µs")
        });
    assert!(warned, "{}", run_of(g, "hw")["warnings"]);
    let base = run_of(g, "base")["warnings"].to_string();
    assert!(!base.contains("hwlat"), "{base}");
    assert_eq!(g.read("osnoise-after-hw"), g.read("osnoise-before"));
    assert_eq!(g.read("instances-after-hw"), "");
}

/// `--trace-threshold` on the timerlat back end: a thread latency over it (read from the
/// tracer's pages) marks latlab's flight recorder, the spike is traced and explained, and
/// the hog that delayed the thread is named with its pid, as on the cyclic back end; the
/// settings and instances are as they were afterwards.
#[test]
fn a_traced_timerlat_run_names_the_hog() {
    let Some(g) = guest() else { return };
    let run = run_of(g, "hogtr");
    timerlat_cpu(&run, "user");
    let pid = g
        .read("hog.log")
        .lines()
        .find_map(|l| l.strip_prefix("pid ")?.trim().parse::<i64>().ok())
        .expect("the hog's pid in hog.log");
    let spikes = run["spikes"].as_array().unwrap();
    assert!(!spikes.is_empty(), "no spike traced: {}", run["trace"]);
    let names: Vec<String> = spikes
        .iter()
        .flat_map(|s| s["causes"].as_array().unwrap())
        .map(|c| format!("{} {} {}", c["kind"], c["name"], c["pid"]))
        .collect();
    eprintln!("causes of {} traced spikes: {names:#?}", spikes.len());
    let hog = spikes
        .iter()
        .flat_map(|s| s["causes"].as_array().unwrap())
        .filter(|c| c["kind"] == "task" && c["name"] == "lab-hog")
        .collect::<Vec<_>>();
    assert!(!hog.is_empty(), "no spike names lab-hog: {names:#?}");
    assert!(
        hog.iter().all(|c| c["pid"].as_i64() == Some(pid)),
        "{hog:?}"
    );
    // timerlat's own figures of each spike's activation: its IRQ and thread latencies, parts
    // of the return to user space it was measured by. The hog delays the thread, after the
    // IRQ: the IRQ's share is the smaller.
    let facts: Vec<(u64, u64, u64)> = spikes
        .iter()
        .filter_map(|s| {
            let t = &s["timerlat"];
            Some((
                t["irq_ns"].as_u64()?,
                t["thread_ns"].as_u64()?,
                s["latency_ns"].as_u64()?,
            ))
        })
        .collect();
    eprintln!("timerlat (IRQ, thread, user) of the traced spikes: {facts:?}");
    assert!(
        !facts.is_empty(),
        "no spike with timerlat's figures: {spikes:#?}"
    );
    for &(irq, thread, user) in &facts {
        assert!(irq <= thread && thread <= user, "{facts:?}");
    }
    assert!(
        facts.iter().any(|&(irq, _, user)| irq * 2 < user),
        "{facts:?}"
    );
    assert_eq!(g.read("osnoise-after-hogtr"), g.read("osnoise-before"));
    assert_eq!(g.read("instances-after-hogtr").trim(), "");
}

#[test]
fn the_kernels_threads_measure_where_latlab_does_not_wait_on_timerlat_fd() {
    let Some(g) = guest() else { return };
    let c = timerlat_cpu(&run_of(g, "kthreads"), "kernel");
    assert!(c["samples"].as_u64().unwrap() >= 200, "{}", c["samples"]);
    assert_eq!(g.read("osnoise-after-kthreads"), g.read("osnoise-before"));
}

#[test]
fn rtla_running_is_refused_and_nothing_changes() {
    let Some(g) = guest() else { return };
    assert_eq!(g.read("busy.rc").trim(), "1");
    let err = g.read("busy.err");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("latlab: error: tracefs instance '") && err.contains("rtla"),
        "{err}"
    );
    assert_eq!(g.read("osnoise-after-busy"), g.read("osnoise-with-rtla"));
    assert!(!g.path("busy").exists() || support::run_dirs(&g.path("busy")).is_empty());
}

#[test]
fn a_sigkilled_run_is_restored_by_cleanup() {
    let Some(g) = guest() else { return };
    let left = g.read("instances-killed");
    assert!(left.trim().ends_with("-timerlat"), "{left:?}");
    assert!(
        g.read("osnoise-killed").contains("timerlat_period_us 5000"),
        "{}",
        g.read("osnoise-killed")
    );
    assert_eq!(
        g.read("cleanup.rc").trim(),
        "0",
        "{}",
        g.read("cleanup.err")
    );
    assert_eq!(g.read("instances-after-cleanup"), "");
    assert_eq!(g.read("osnoise-after-cleanup"), g.read("osnoise-before"));
}
