//! Attribution on PREEMPT_RT, proven in the kernel lab (issue 27 §2 and §3): Debian's
//! 6.12-rt booted under QEMU (support/lab.rs) with ground-truth injectors
//! (support/lab_inject.c, built static by the test), each beside a traced `latlab run` that
//! measures CPU 1 while CPU 0 keeps latlab's own threads:
//!
//! - IRQ 4's thread (`irq/4-ttyS0`) raised to FIFO 96, above the measuring thread (FIFO 95),
//!   the serial port driven: the cause names the IRQ, its hard part and its thread, and says
//!   the thread runs at FIFO 96 above the measuring thread;
//! - a SCHED_FIFO 97 hog in bursts of known length: named by comm and pid, within 20 % of
//!   the time it took (or a proven silent gap);
//! - priority inheritance: a normal task holding a PI mutex that a FIFO 97 task blocks on is
//!   named as the lock owner boosted, from what to what, with its waiter;
//! - a UDP flood over loopback at FIFO 97: its NET_RX softirq named with the task it ran in,
//!   and its context as the kernel's flags report it (migration disabled, PREEMPT_RT's BH lock).
//!
//! And the peers on the same kernel, one after the other on the same CPU and priority:
//! cyclictest, `rtla timerlat hist` and `latlab run` agree in structure (the CPU, the periods
//! accounted for), and rtla 6.12's auto-analysis (`timerlat top --aa-only`; Debian's own rtla
//! is 6.1, which has none, so scripts/rtla-build builds it from Debian's linux-source-6.12)
//! beside the hog, the flood and the PI holder names the culprits latlab names.
//!
//! TCG emulates the CPUs: every assertion is structural (names, pids, counts, shares of a
//! known burst), never a latency. One boot for all of it (about 2–4 minutes here).

use serde_json::Value;

mod support;
use support::lab::{self, Guest, Lab};

const SCRIPT: &str = r#"
up() { cut -d' ' -f1 /proc/uptime; }
step() { n=$1; shift; a=$(up); "$@" >"$n.out" 2>"$n.err"; echo $? >"$n.rc"; echo "$n $a $(up)" >>times; }
comm_pid() { for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = "$1" ] && echo ${p#/proc/}; done; }
# A traced run measuring CPU 1 (CPU 0 keeps latlab's own threads); the injector "$@" starts
# with the measurement (its threads, latlab-cpuN: seconds after the run starts under TCG) and
# runs beside it.
traced() {
    n=$1 th=$2 max=$3; shift 3
    a=$(up)
    latlab run --cpus 1 --duration 2s --interval 5ms --trace-threshold "$th" --trace-max-spikes "$max" --no-db -q --results "/lab/$n" >"$n.out" 2>"$n.err" &
    r=$!
    while ! grep -qs '^latlab-cpu1$' /proc/$r/task/*/comm && kill -0 $r 2>/dev/null; do usleep 10000; done
    "$@" & i=$!
    wait $r; echo $? >"$n.rc"
    kill $i 2>/dev/null; wait $i 2>/dev/null
    echo "$n $a $(up)" >>times
}
serial() { while :; do echo "lab: ................................................................" >/dev/ttyS0; usleep 20000; done; }
# 1. IRQ 4's thread above the measuring thread (FIFO 95), the serial port driven.
# IRQ 4 is routed to the measured CPU: left to the kernel, its vector went to CPU 0 or CPU 1
# from one boot to the next, and on CPU 0 its thread never delays CPU 1 (0 of 30 spikes).
echo 2 >/proc/irq/4/smp_affinity; cat /proc/irq/4/effective_affinity_list >irq-cpu
irq=$(comm_pid irq/4-ttyS0); echo "$irq" >irq-pid
chrt -f -p 96 "$irq"
# The port is driven from before the run: its first 30 spikes over 1 ms (TCG's stalls among
# them) came in its first 190 ms, while the run was still waited for, so a writer started
# with the measurement was seen by none of them (CI). 60 spikes: 6 of 60 named its thread here.
serial & sp=$!
traced irq 1ms 60 true
kill $sp 2>/dev/null; wait $sp 2>/dev/null
chrt -f -p 50 "$irq"
# The injectors below delay the measuring thread by 20-30 ms, above most of TCG's own stalls
# (seen up to 17 ms under a loaded host). Every spike of the 2 s over 15 ms is traced (at most
# 400/3 fit): CI's host, loaded, stalled the guest's CPU over 15 ms often enough that a budget
# of 8 spikes went to those stalls alone (`silent gap (idle)`) and no burst was traced.
# 2. A FIFO 97 hog on the measured CPU, 25 ms bursts.
traced hog 15ms 140 lab_inject hog 1 97 25000 60 3 /lab/hog.log
# 3. Priority inheritance: held 25 ms.
traced pi 15ms 140 lab_inject pi 1 3 /lab/pi.log
# 4. NET_RX in the task that raised it: 20 ms floods.
traced udp 15ms 140 lab_inject udp 1 97 20000 60 3 /lab/udp.log
# 5. The peers, one after the other on CPU 1 at FIFO 95, every 5 ms for 2 s.
step cyclictest cyclictest -m -q -t1 -a 1 -p 95 -i 5000 -D 2 -h 20000 --json=/lab/cyclictest.json
step rtla rtla timerlat hist -c 1 -P f:95 -p 5000 -d 2
step peer latlab run --cpus 1 -p 95 --interval 5ms --duration 2s --no-db -q --results /lab/peer
# 6. rtla 6.12's auto-analysis (scripts/rtla-build) beside the same injectors, each running
# until killed, whatever time rtla takes to set up under TCG (seen over 2 s): `--aa-only US`
# stops at the first thread latency over US and prints what rtla blames. The hog's and the
# flood's bursts are longer here (50 ms every 120 ms) and the stop at 30 ms, above most of
# TCG's own stalls; the PI holder's hold is the injector's 25 ms, its stop 15 ms. rtla stops
# at the first latency over its limit, whatever caused it: beside a loaded host a stall of
# the guest's CPU (98 ms, `IRQ latency from idle`) was it. So each is tried up to 3 times
# until rtla's stop names the injector's task (each try's output kept in aa-NAME.tries).
aa() {
    local name=aa-$1 us=$2 who=$3 try; shift 3
    for try in 1 2 3; do
        "$@" & i=$!
        step "$name" rtla-6.12 timerlat top --aa-only "$us" -c 1 -P f:95 -p 5000 -d 30
        kill $i 2>/dev/null; wait $i 2>/dev/null
        { echo "== try $try"; cat "$name.out"; } >>"$name.tries"
        grep -q "$who:" "$name.out" && break
    done
}
aa hog 30000 lab-hog lab_inject hog 1 97 50000 120 120 /lab/aa-hog.log
aa udp 30000 lab-udp lab_inject udp 1 97 50000 120 120 /lab/aa-udp.log
aa pi 15000 pi-low lab_inject pi 1 120 /lab/aa-pi.log
# The injectors ended by SIGTERM are expected: the script's own status is 0.
true
"#;

/// The one boot all tests of this file read (None: the lab cannot run here, skipped).
fn guest() -> Option<&'static Guest> {
    static G: lab::Once = lab::Once::new();
    let test = "lab_rt_attribution";
    let make = || {
        let mut l = Lab::new("rt-6.12", 2, 600);
        let ok = l.tools(test, &["chrt", "taskset", "cyclictest", "rtla"]) && l.injector(test);
        let ok = ok && l.bin(test, lab::rtla_6_12());
        ok.then_some(l)
    };
    Lab::once(&G, test, make, SCRIPT)
}

/// The run directory of step `n`, its exit status checked, and its run.json.
fn run_of(g: &Guest, n: &str) -> (std::path::PathBuf, Value) {
    let rc = g.read(&format!("{n}.rc"));
    assert_eq!(rc.trim(), "0", "{n}: {}", g.read(&format!("{n}.err")));
    let dir = support::only_run_dir(&g.path(n));
    let v = support::read_json(&dir.join("run.json"));
    (dir, v)
}

/// Every traced spike's causes, as (kind, name, pid, prio, ns), with the spike.
fn causes(run: &Value) -> Vec<(&Value, &Value)> {
    run["spikes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["causes"].as_array().unwrap().iter().map(move |c| (s, c)))
        .collect()
}

/// Lines `key A B …` of an injector's log, as numbers.
fn log_lines(g: &Guest, file: &str, key: &str) -> Vec<Vec<u64>> {
    g.read(file)
        .lines()
        .filter_map(|l| l.strip_prefix(key))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect()
        })
        .collect()
}

/// A summary of the causes for a failure message.
fn named_causes(run: &Value) -> String {
    let mut v: Vec<String> = causes(run)
        .iter()
        .map(|(_, c)| format!("{} {}", c["kind"], c["name"]))
        .collect();
    v.sort();
    v.dedup();
    v.join("\n")
}

#[test]
fn a_threaded_irq_above_the_measuring_thread_is_named_with_both_parts() {
    let Some(g) = guest() else { return };
    let (_, run) = run_of(g, "irq");
    assert_eq!(
        g.read("irq-cpu").trim(),
        "1",
        "IRQ 4 routed to the measured CPU"
    );
    let pid: i64 = g.read("irq-pid").trim().parse().unwrap();
    let thread = "IRQ 4 (ttyS0) thread irq/4-ttyS0, FIFO 96, above the measuring thread (FIFO 95)";
    let all = causes(&run);
    // As `task` while it runs above the measuring thread; the same thread with its IRQs off
    // before the wake-up is `irq_off`, under the same name.
    let t: Vec<_> = all
        .iter()
        .filter(|(_, c)| c["name"] == thread && c["kind"] == "task")
        .collect();
    assert!(
        !t.is_empty(),
        "no spike names {thread}:\n{}",
        named_causes(&run)
    );
    for (_, c) in all.iter().filter(|(_, c)| c["name"] == thread) {
        assert_eq!(c["pid"], pid);
        assert_eq!(c["prio"], 3);
        assert!(c["ns"].as_u64().unwrap() > 0);
        assert!(c["kind"] == "task" || c["kind"] == "irq_off", "{c}");
    }
    let hard = all
        .iter()
        .filter(|(_, c)| c["name"] == "IRQ 4 (ttyS0) hard part" && c["kind"] == "irq")
        .count();
    assert!(hard > 0, "no hard part of IRQ 4:\n{}", named_causes(&run));
    // The old names are gone.
    assert!(
        !all.iter()
            .any(|(_, c)| c["name"] == "irq/4-ttyS0" || c["name"] == "ttyS0"),
        "{}",
        named_causes(&run)
    );
}

#[test]
fn a_fifo_hog_above_the_measuring_thread_is_named_by_comm_and_pid_and_sized() {
    let Some(g) = guest() else { return };
    let (_, run) = run_of(g, "hog");
    let pid = log_lines(g, "hog.log", "pid ")[0][0] as i64;
    let bursts = log_lines(g, "hog.log", "burst ");
    let mut sized = 0;
    let mut seen = 0;
    for s in run["spikes"].as_array().unwrap() {
        let cs = s["causes"].as_array().unwrap();
        let Some(c) = cs.iter().find(|c| c["name"] == "lab-hog") else {
            continue;
        };
        seen += 1;
        assert_eq!(
            (c["kind"].as_str(), c["pid"].as_i64()),
            (Some("task"), Some(pid))
        );
        assert_eq!(c["prio"], 2, "FIFO 97");
        // The truth: the bursts that overlap the spike [E, E + latency], for as long as they
        // overlap it (the hog wakes on the same 5 ms grid as the measuring thread: a burst
        // may begin a few hundred µs after E, before the thread got the CPU; the thread
        // cannot run before a burst ends). The hog holds the CPU from some instant between
        // its timer's expiry (WAKE) and the first instant it saw (START) until END: at most
        // END − WAKE, at least END − START of it inside the spike. A spike may span two
        // bursts: beside a loaded host a burst that a stall stretched to 60 ms was followed
        // 3 ms later by the next one, both inside one 88 ms spike. What the hog is not
        // charged of the least may only be a silent gap.
        let e = s["at_ns"].as_u64().unwrap();
        let end = e + s["latency_ns"].as_u64().unwrap();
        let overlap = |from: u64, to: u64| to.min(end).saturating_sub(from.max(e));
        let (most, least) = bursts.iter().fold((0, 0), |(m, l), b| {
            (m + overlap(b[0], b[2]), l + overlap(b[1], b[2]))
        });
        if least == 0 {
            continue; // no burst in the spike: its share is not known from the log
        }
        let (most, least) = (most as f64, least as f64);
        let ns = c["ns"].as_f64().unwrap();
        let silent: f64 = cs
            .iter()
            .filter(|c| c["kind"] == "hypervisor" || c["kind"] == "unknown")
            .map(|c| c["ns"].as_f64().unwrap())
            .sum();
        assert!(
            ns <= most * 1.2 && ns + silent >= least * 0.8,
            "lab-hog charged {ns} ns (+{silent} silent) of bursts of {least}-{most} ns: {s:#}"
        );
        sized += 1;
    }
    assert!(seen > 0, "no spike names lab-hog:\n{}", named_causes(&run));
    assert!(sized > 0, "no spike overlaps a burst");
}

#[test]
fn a_lock_owner_boosted_by_priority_inheritance_is_named_with_its_waiter() {
    let Some(g) = guest() else { return };
    let (_, run) = run_of(g, "pi");
    let pids = &log_lines(g, "pi.log", "pids ")[0];
    let (low, high) = (pids[0] as i64, pids[1] as i64);
    let name = format!(
        "pi-low (lock owner boosted by priority inheritance from normal prio 120 to FIFO 97, waiter pi-high {high})"
    );
    let all = causes(&run);
    let boosted: Vec<_> = all.iter().filter(|(_, c)| c["name"] == name).collect();
    assert!(
        !boosted.is_empty(),
        "no spike names {name}:\n{}",
        named_causes(&run)
    );
    for (_, c) in boosted {
        assert_eq!(c["kind"], "task");
        assert_eq!(
            (c["pid"].as_i64(), c["prio"].as_i64()),
            (Some(low), Some(2))
        );
    }
}

#[test]
fn net_rx_is_named_with_the_task_it_ran_in() {
    let Some(g) = guest() else { return };
    let (_, run) = run_of(g, "udp");
    let pid = log_lines(g, "udp.log", "pid ")[0][0] as i64;
    let all = causes(&run);
    let net: Vec<_> = all
        .iter()
        .filter(|(_, c)| c["kind"] == "softirq" && c["name"] == "NET_RX (in lab-udp)")
        .collect();
    // Every NET_RX cause with its pid and prio, and what the injector sent: what a failure
    // needs to be understood from CI's log alone.
    let seen = || {
        let rx: Vec<String> = all
            .iter()
            .filter(|(_, c)| c["name"].as_str().is_some_and(|n| n.starts_with("NET_RX")))
            .map(|(s, c)| {
                format!(
                    "spike at {}: {} pid {} prio {}",
                    s["at_ns"], c["name"], c["pid"], c["prio"]
                )
            })
            .collect();
        let spikes: Vec<String> = run["spikes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| format!("spike at {} for {} ns", s["at_ns"], s["latency_ns"]))
            .collect();
        let t = &run["trace"];
        format!(
            "lab-udp is pid {pid}; NET_RX causes:\n{}\ninjector:\n{}\nspikes (traced {}, over --trace-max-spikes {}):\n{}\nall causes:\n{}",
            rx.join("\n"),
            g.read("udp.log"),
            t["traced"],
            t["over_max_spikes"],
            spikes.join("\n"),
            named_causes(&run)
        )
    };
    assert!(!net.is_empty(), "no NET_RX (in lab-udp). {}", seen());
    for (_, c) in &net {
        assert_eq!(
            (c["pid"].as_i64(), c["prio"].as_i64()),
            (Some(pid), Some(2)),
            "{}",
            seen()
        );
        // PREEMPT_RT runs a softirq in the task that raised it with migration disabled (its
        // BH local lock), and the flags of its events say so (`..s.2`): the cause's context.
        let ctx = &c["context"];
        let (events, md) = (ctx["events"].as_u64(), ctx["migrate_disabled"].as_u64());
        assert!(
            events.is_some_and(|e| e > 0) && md.is_some_and(|m| m > 0),
            "NET_RX (in lab-udp) without migrate-disabled events: {c}"
        );
    }
    // The report says it after the cause.
    let (dir, _) = run_of(g, "udp");
    let out = support::latlab().arg("report").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines()
            .any(|l| l.contains("NET_RX (in lab-udp)") && l.contains("migrate disabled in")),
        "{text}"
    );
}

/// cyclictest, `rtla timerlat hist` and latlab on the same CPU at the same priority and
/// period, one after the other: each measured CPU 1 only, and each accounts for the periods
/// of its 2 s (latlab: samples + missed periods, within 5 % of the time it measured; the
/// peers: their samples, which TCG may thin out, never more than the 400 periods).
#[test]
fn peers_on_the_same_kernel_agree_in_structure() {
    let Some(g) = guest() else { return };
    let (_, run) = run_of(g, "peer");
    assert_eq!(run["config"]["cpus"], serde_json::json!([1]));
    // Every period of the time latlab measured is a sample or a missed period. Not a fixed
    // 400: the time is the collector's (2 s from its start), the periods the thread's, from
    // its own start, which TCG can hold back under a loaded host (this failed once here, and
    // passed again on a rerun: `lab_timerlat` counts the same way).
    let c = &run["cpus"][0];
    let expected = run["config"]["measured_ns"].as_f64().unwrap() / 5e6;
    let n = (c["samples"].as_u64().unwrap() + c["missed_periods"].as_u64().unwrap()) as f64;
    assert!(
        (n - expected).abs() <= expected * 0.05 + 2.0,
        "latlab: {n} periods (samples + missed) of {expected}"
    );
    for (step, file) in [("cyclictest", "cyclictest.json"), ("rtla", "rtla.out")] {
        let rc = g.read(&format!("{step}.rc"));
        assert_eq!(rc.trim(), "0", "{step}: {}", g.read(&format!("{step}.err")));
        let tmp = tempfile::tempdir().unwrap();
        let out = support::latlab()
            .arg("import")
            .arg(g.path(file))
            .args(["--no-db", "--results"])
            .arg(tmp.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{step}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let imp = support::read_json(&support::only_run_dir(tmp.path()).join("run.json"));
        let cpus: Vec<u64> = imp["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["cpu"].as_u64().unwrap())
            .collect();
        if step == "rtla" {
            assert_eq!(cpus, vec![1], "{step}");
        } else {
            assert_eq!(cpus.len(), 1, "{step}: one thread");
        }
        let samples = imp["cpus"][0]["samples"].as_u64().unwrap();
        assert!(
            (40..=402).contains(&samples),
            "{step}: {samples} samples of 400 periods"
        );
    }
}

/// What rtla's auto-analysis blames, as (section, name): each `comm:pid` (or softirq/IRQ
/// `name:vector`) it lists under "Blocking thread", "Thread interference", "Softirq
/// interference", "IRQ interference" and "Previous IRQ interference".
fn rtla_blames(out: &str) -> Vec<(&'static str, String)> {
    const SECTIONS: [&str; 5] = [
        "Blocking thread",
        "Thread interference",
        "Softirq interference",
        "IRQ interference",
        "Previous IRQ interference",
    ];
    let mut section = None;
    let mut v = vec![];
    for line in out.lines() {
        let t = line.trim();
        if let Some(h) = SECTIONS.iter().find(|h| t.starts_with(**h)) {
            section = Some(*h);
            continue;
        }
        if t.starts_with("---") || t.starts_with("IRQ latency") || t.starts_with("Timerlat IRQ") {
            section = None;
            continue;
        }
        let Some(sec) = section else { continue };
        let Some(first) = t.split_whitespace().next() else {
            continue;
        };
        if let Some((name, id)) = first.rsplit_once(':') {
            if !name.is_empty() && !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
                v.push((sec, name.to_string()));
            }
        }
    }
    v
}

/// rtla 6.12's auto-analysis (`timerlat top --aa-only`, built by scripts/rtla-build) beside
/// the hog, the UDP flood and the PI holder on the same kernel, CPU and priority: it stops at
/// a thread latency over its limit and names what blocked the thread. The injected culprits
/// it names (the hog's and the flood's always: their 50 ms bursts are far above the 30 ms
/// stop and TCG's stalls) must be named by latlab's traced runs beside the same injectors
/// too; the table of both is printed (issue 27's closing note).
#[test]
fn rtlas_auto_analysis_and_latlab_name_the_same_culprits() {
    let Some(g) = guest() else { return };
    // (rtla's step, latlab's step, the injector's culprits: a thread's comm or a softirq)
    let cases = [
        ("aa-hog", "hog", &["lab-hog"][..]),
        ("aa-udp", "udp", &["lab-udp", "NET_RX"][..]),
        ("aa-pi", "pi", &["pi-low"][..]),
    ];
    let mut table = vec![];
    for (aa, ours, culprits) in cases {
        let rc = g.read(&format!("{aa}.rc"));
        let out = g.read(&format!("{aa}.out"));
        // rtla 6.12.117 crashed once (SIGSEGV, status 139) in its teardown, after it had
        // printed its whole analysis (CI, stop 40): rtla's own defect, not latlab's (upstream
        // rtla has fixed NULL dereferences on its stop-tracing path since). Its analysis is
        // read when it is complete (its closing `Thread latency:` line); a crash before
        // that, or any other status, fails.
        let complete = out.contains("Thread latency:");
        let rc = rc.trim();
        assert!(
            rc == "0" || (rc == "139" && complete),
            "{aa}: rtla's status {rc}, its analysis {}:\n{out}{}",
            if complete { "complete" } else { "incomplete" },
            g.read(&format!("{aa}.err"))
        );
        let crashed = if rc == "139" {
            ", rtla crashed at exit"
        } else {
            ""
        };
        assert!(
            out.contains("## CPU 1 hit stop tracing, analyzing it ##"),
            "{aa}: rtla did not stop on CPU 1:\n{out}"
        );
        let blames = rtla_blames(&out);
        let named: Vec<&String> = blames
            .iter()
            .map(|(_, n)| n)
            .filter(|n| culprits.contains(&n.as_str()))
            .collect();
        if ours != "pi" {
            assert!(
                !named.is_empty(),
                "{aa}: rtla names none of {culprits:?} in any try:\n{}",
                g.read(&format!("{aa}.tries"))
            );
        }
        let (_, run) = run_of(g, ours);
        let latlab: Vec<String> = causes(&run)
            .iter()
            .map(|(_, c)| c["name"].as_str().unwrap_or("").to_string())
            .collect();
        for n in &named {
            // latlab: `lab-hog`, `NET_RX (in lab-udp)`, `pi-low (lock owner boosted …)`.
            assert!(
                latlab
                    .iter()
                    .any(|c| c == *n || c.starts_with(&format!("{n} "))),
                "{aa}: rtla names {n}, latlab's {ours} run does not:\n{}",
                named_causes(&run)
            );
        }
        let mut ll: Vec<&String> = latlab
            .iter()
            .filter(|c| culprits.iter().any(|k| c.starts_with(k)))
            .collect();
        ll.sort();
        ll.dedup();
        let mut theirs: Vec<String> = blames.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        theirs.dedup();
        let tries = g.read(&format!("{aa}.tries")).matches("== try").count();
        table.push(format!(
            "| {ours} | {} (try {tries}{crashed}) | {} |",
            theirs.join("; "),
            ll.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")
        ));
    }
    eprintln!(
        "| injector | rtla 6.12 --aa-only blames | latlab names |\n|---|---|---|\n{}",
        table.join("\n")
    );
}
