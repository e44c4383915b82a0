//! Findings: pure rules that read an [`Inventory`] and say what limits latency on the machine,
//! each with the evidence it read, why it matters and the fix (a command-line parameter or a
//! sysfs write). [`findings`] returns them ranked worst first.
//!
//! Ids are stable (`preempt.model`, `cpufreq.governor`, …; `unknown:<path>` and
//! `invalid:<path>` for what could not be read or understood), so scripts and `compare` can
//! rely on them.
//!
//! ```
//! use latlab_core::{findings::{findings, Severity}, inventory::Inventory};
//! let mut inv = Inventory::default();
//! inv.sched.rt_runtime_us = Some(950000);
//! let f = findings(&inv);
//! assert!(f.iter().any(|f| f.id == "sched.rt-throttling" && f.severity == Severity::Warn));
//! ```

use serde::{Deserialize, Serialize};

use crate::cpulist::format_cpu_list;
use crate::inventory::Inventory;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Limits latency badly: fix before trusting worst cases.
    Bad,
    /// Costs latency or predictability.
    Warn,
    /// Worth knowing when reading results.
    Info,
}

impl Severity {
    pub fn as_str(&self) -> &'static str {
        match self {
            Severity::Bad => "bad",
            Severity::Warn => "warn",
            Severity::Info => "info",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    pub severity: Severity,
    pub title: String,
    /// What was read, with the file it came from.
    pub evidence: String,
    pub why: String,
    pub fix: String,
}

/// The measuring threads' priority `latlab run` uses by default (FIFO), which `check` judges
/// IRQ threads against.
pub const MEASURING_PRIORITY: u32 = 95;

/// `irq/4-ttyS0 (pid 151, FIFO 96)`.
fn irq_thread_text(t: &crate::inventory::IrqThread) -> String {
    let p = match (t.policy.as_deref(), t.rt_priority) {
        (Some(p @ ("fifo" | "rr")), Some(r)) => format!("{} {r}", p.to_uppercase()),
        (Some(p), _) => p.to_string(),
        (None, _) => "policy unknown".into(),
    };
    format!("{} (pid {}, {p})", t.comm, t.pid)
}

/// Exit latency (µs) above which an enabled idle state counts as deep.
pub const DEEP_IDLE_US: u64 = 10;
/// Steal fraction above which a VM is said to lose time to its host.
pub const STEAL_BAD: f64 = 0.01;

fn f(
    id: &str,
    severity: Severity,
    title: String,
    evidence: String,
    why: &str,
    fix: &str,
) -> Finding {
    Finding {
        id: id.into(),
        severity,
        title,
        evidence,
        why: why.into(),
        fix: fix.into(),
    }
}

/// All findings for an inventory, worst first (rule order within a severity).
pub fn findings(inv: &Inventory) -> Vec<Finding> {
    use Severity::*;
    let mut out = Vec::new();

    // Preemption model.
    let p = &inv.preemption;
    let src = p
        .source
        .clone()
        .unwrap_or_else(|| "kernel version string".into());
    match p.model.as_deref() {
        Some("rt") => {
            if let Some(m @ ("lazy" | "laziest")) = p.dynamic_mode.as_deref() {
                out.push(f(
                    "preempt.lazy",
                    Info,
                    format!("PREEMPT_RT with lazy preemption of normal tasks ({m})"),
                    format!(
                        "/sys/kernel/debug/sched/preempt marks {m} as current; model rt from {src}"
                    ),
                    "RT tasks preempt at once; a normal task woken for a normal task waits for the next tick or its return to user space. latlab's measuring threads are RT: their latency is not lazy, normal tasks' wake-ups are.",
                    "nothing for RT threads; echo full > /sys/kernel/debug/sched/preempt (or preempt=full) when normal tasks' wake-up latency matters",
                ));
            }
        }
        Some(m @ ("none" | "voluntary")) => out.push(f(
            "preempt.model",
            Bad,
            format!("kernel is not preemptible (preempt={m})"),
            format!("model {m} from {src}"),
            "A task in a long kernel path keeps the CPU until it returns or reaches a preemption \
             point, so an RT thread can wait for milliseconds behind any system call.",
            if p.dynamic {
                "boot with preempt=full on the kernel command line, or better a PREEMPT_RT kernel"
            } else {
                "boot a PREEMPT_RT kernel (or one built with CONFIG_PREEMPT)"
            },
        )),
        Some(m) => out.push(f(
            "preempt.model",
            Warn,
            format!("kernel is preemptible but not PREEMPT_RT (preempt={m})"),
            format!("model {m} from {src}"),
            "Without PREEMPT_RT, spinlocks and interrupt handlers still run non-preemptibly, so \
             worst cases stay in the hundreds of microseconds under load.",
            "boot a PREEMPT_RT kernel for hard bounds",
        )),
        None => out.push(f(
            "preempt.model",
            Warn,
            "preemption model unknown".into(),
            match (&inv.kernel.version, p.dynamic) {
                (Some(v), true) => format!(
                    "version {v:?} says PREEMPT_DYNAMIC; /sys/kernel/debug/sched/preempt, \
                     preempt= and the kernel config are not available"
                ),
                (Some(v), false) => format!("version {v:?} names no preemption model"),
                (None, _) => "kernel version not readable".into(),
            },
            "The preemption model bounds how long a kernel path can delay an RT thread.",
            "mount debugfs (mount -t debugfs none /sys/kernel/debug) and read \
             /sys/kernel/debug/sched/preempt, or boot with an explicit preempt=full",
        )),
    }

    // Cgroup CPU limits on latlab itself.
    for c in &inv.cgroup {
        let v = c.value.trim();
        let limited = if c.path.ends_with("cpu.max") {
            !v.starts_with("max")
        } else if c.path.ends_with("cpu.cfs_quota_us") {
            v != "-1"
        } else if c.path.ends_with("cpu.rt_runtime_us") {
            v == "0"
        } else {
            false
        };
        if limited {
            let rt = c.path.ends_with("rt_runtime_us");
            out.push(f(
                if rt {
                    "cgroup.rt-runtime"
                } else {
                    "cgroup.cpu-quota"
                },
                Bad,
                if rt {
                    "latlab's cgroup gives RT tasks no runtime".into()
                } else {
                    "latlab's cgroup has a CPU quota".into()
                },
                format!("{} = {v}", c.path),
                if rt {
                    "With cpu.rt_runtime_us=0, SCHED_FIFO cannot be set inside this cgroup."
                } else {
                    "CFS bandwidth control throttles the whole group for the rest of a period \
                     once its quota is used: stalls of up to the period length."
                },
                if rt {
                    "run latlab in a cgroup with RT runtime (or in the root cgroup)"
                } else {
                    "run latlab outside the limited cgroup, or write max to cpu.max \
                     (-1 to cpu.cfs_quota_us)"
                },
            ));
        }
    }

    // Virtualization and steal time.
    let steal = inv.virt.steal_sampled.or(inv.virt.steal_since_boot);
    if let Some(s) = steal.filter(|s| *s >= STEAL_BAD) {
        out.push(f(
            "virt.steal",
            Bad,
            format!("the host steals {:.1} % of CPU time", s * 100.0),
            steal_evidence(inv),
            "While the hypervisor runs something else, a vCPU does not run at all: every \
             latency includes the host's scheduling, which the guest cannot see or fix.",
            "pin the vCPUs to dedicated host cores, or measure on bare metal",
        ));
    } else if inv.virt.hypervisor == Some(true) {
        out.push(f(
            "virt.guest",
            Warn,
            "running in a virtual machine".into(),
            format!(
                "hypervisor flag in /proc/cpuinfo{}; {}",
                inv.virt
                    .vendor
                    .as_ref()
                    .map(|v| format!(", vendor {v}"))
                    .unwrap_or_default(),
                steal_evidence(inv)
            ),
            "The host can stall a vCPU at any moment (exits, host interrupts, other guests); \
             such stalls show up as latency with no kernel event in the guest.",
            "read worst cases as bounds of this VM and its host, not of the kernel; use \
             dedicated host cores for guests that need low latency",
        ));
    }

    if inv.virt.page_reporting == Some(true) {
        let order = inv.virt.page_reporting_order;
        out.push(f(
            "virt.page_reporting",
            Warn,
            "the guest gives its free memory back to the host (free page reporting)".into(),
            format!(
                "a virtio balloon negotiated VIRTIO_BALLOON_F_REPORTING \
                 (/sys/bus/virtio/devices/*/features bit 5){}",
                order
                    .map(|o| format!(
                        "; page_reporting_order {o}: free blocks of {} KiB are reported",
                        4u64 << o.min(40)
                    ))
                    .unwrap_or_default()
            ),
            "The host drops the memory it is given back, and the next use of it makes the \
             host fault it in while the vCPU waits: any allocation in the guest (a fork, a \
             growing heap, the page cache) can stall its CPU. Measured on such a VM: a first \
             touch costs 6 µs a page against 2 µs on reuse, single pages 3–45 ms; the stalls \
             show as latency with no kernel event (hypervisor).",
            "turn free page reporting off in the VMM (QEMU: -device \
             virtio-balloon,free-page-reporting=off; Firecracker: the balloon's \
             free_page_reporting false) for latency work; latlab keeps its own memory \
             allocated and locked while it measures",
        ));
    }

    // CPU frequency.
    let not_perf: Vec<u32> = inv
        .cpufreq
        .iter()
        .filter(|(_, c)| c.governor.as_deref().is_some_and(|g| g != "performance"))
        .map(|(cpu, _)| *cpu)
        .collect();
    if !not_perf.is_empty() {
        let govs: std::collections::BTreeSet<&str> = not_perf
            .iter()
            .filter_map(|c| inv.cpufreq[c].governor.as_deref())
            .collect();
        out.push(f(
            "cpufreq.governor",
            Warn,
            "frequency governor is not performance".into(),
            format!(
                "scaling_governor {} on CPUs {}",
                govs.into_iter().collect::<Vec<_>>().join(", "),
                format_cpu_list(&not_perf)
            ),
            "A CPU that clocks down when idle wakes slowly and runs the wake-up path slower; \
             frequency changes themselves take tens of microseconds.",
            "echo performance | tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor \
             (or cpupower frequency-set -g performance)",
        ));
    }
    if inv.boost == Some(true) {
        out.push(f(
            "cpufreq.boost",
            Info,
            "turbo/boost is on".into(),
            "/sys/devices/system/cpu/cpufreq/boost = 1".into(),
            "Boost frequency depends on temperature and on how many cores are busy, so \
             execution times vary with the load on other cores.",
            "echo 0 > /sys/devices/system/cpu/cpufreq/boost for repeatable timings",
        ));
    }

    // Idle states.
    let deep = inv.deep_idle_states(DEEP_IDLE_US);
    if !deep.is_empty() && inv.cmdline_params.get("idle").map(String::as_str) != Some("poll") {
        let worst = deep[0].1;
        let held = !inv.dma_latency_holders.is_empty();
        out.push(f(
            "cpuidle.deep-states",
            if held {
                Info
            } else if worst >= 100 {
                Bad
            } else {
                Warn
            },
            format!("deep idle states enabled (exit latency up to {worst} µs)"),
            format!(
                "{}; {}",
                deep.iter()
                    .map(|(n, l, c)| format!("{n} {l} µs on CPUs {}", format_cpu_list(c)))
                    .collect::<Vec<_>>()
                    .join(", "),
                if held {
                    format!(
                        "/dev/cpu_dma_latency held by {}",
                        inv.dma_latency_holders
                            .iter()
                            .map(|h| format!("{} ({})", h.comm, h.pid))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    "no process holds /dev/cpu_dma_latency".into()
                }
            ),
            "A CPU in a deep C-state needs its exit latency before it runs the woken task; \
             the first sample after idle pays it every time.",
            "latlab run holds /dev/cpu_dma_latency at 0 while it measures; for other \
             workloads boot with processor.max_cstate=1 intel_idle.max_cstate=0, or write 1 \
             to /sys/devices/system/cpu/cpu*/cpuidle/stateN/disable",
        ));
    }

    // RT throttling.
    if let Some(rt) = inv.sched.rt_runtime_us.filter(|v| *v >= 0) {
        let period = inv.sched.rt_period_us.unwrap_or(1_000_000);
        out.push(f(
            "sched.rt-throttling",
            Warn,
            "RT throttling is on".into(),
            format!(
                "/proc/sys/kernel/sched_rt_runtime_us = {rt} (of sched_rt_period_us = {period})"
            ),
            "RT tasks that together use more than the runtime in a period are stopped for the \
             rest of it; a busy RT thread then sees a stall of tens of milliseconds that is not \
             latency of the kernel.",
            "sysctl kernel.sched_rt_runtime_us=-1 (then a runaway RT task can hang a CPU)",
        ));
    }

    // Memory.
    if inv.memory.thp_enabled.as_deref() == Some("always") {
        out.push(f(
            "mm.thp-always",
            Warn,
            "transparent huge pages: always".into(),
            format!(
                "/sys/kernel/mm/transparent_hugepage/enabled = always (defrag {})",
                inv.memory.thp_defrag.as_deref().unwrap_or("unknown")
            ),
            "Page faults may compact memory to build a huge page, and khugepaged collapses \
             pages in the background: both add millisecond stalls.",
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or \
             transparent_hugepage=madvise on the command line)",
        ));
    }
    if !inv.memory.swaps.is_empty() || inv.memory.swap_total_kb.is_some_and(|s| s > 0) {
        out.push(f(
            "mm.swap",
            Warn,
            "swap is on".into(),
            format!(
                "{} ({} kB total, {} kB free)",
                if inv.memory.swaps.is_empty() {
                    "SwapTotal in /proc/meminfo".to_string()
                } else {
                    format!("/proc/swaps: {}", inv.memory.swaps.join(", "))
                },
                opt(inv.memory.swap_total_kb),
                opt(inv.memory.swap_free_kb)
            ),
            "A page of a latency-critical task that was swapped out costs a disk read on its \
             next touch. latlab locks its own memory (mlockall); other tasks are not locked.",
            "swapoff -a, or mlockall() in every latency-critical program",
        ));
    }
    if inv.memory.ksm_run == Some(1) {
        out.push(f(
            "mm.ksm",
            Info,
            "KSM is merging pages".into(),
            "/sys/kernel/mm/ksm/run = 1".into(),
            "ksmd scans memory in the background, and a write to a merged page takes a \
             copy-on-write fault.",
            "echo 0 > /sys/kernel/mm/ksm/run",
        ));
    }

    // CPU isolation.
    let iso = inv.isolated_cpus();
    if iso.is_empty() {
        out.push(f(
            "cpus.no-isolation",
            Warn,
            "no CPU is isolated for the measurement".into(),
            format!(
                "/sys/devices/system/cpu/isolated is empty, no isolcpus= or nohz_full= on the \
                 command line; online CPUs {}",
                if inv.cpus.online.is_empty() {
                    "unknown".into()
                } else {
                    format_cpu_list(&inv.cpus.online)
                }
            ),
            "Every CPU runs housekeeping: timers, RCU callbacks, kworkers and device IRQs that \
             preempt or delay the measured thread.",
            "boot with isolcpus=managed_irq,domain,N nohz_full=N rcu_nocbs=N irqaffinity=0 \
             (N: the CPUs to measure on) and run latlab --cpus N",
        ));
    } else {
        if inv.irqs.irqbalance_running == Some(true) {
            out.push(f(
                "irq.irqbalance",
                Warn,
                "irqbalance is running with isolated CPUs".into(),
                format!(
                    "an irqbalance process; isolated CPUs {}",
                    format_cpu_list(&iso)
                ),
                "irqbalance moves device interrupts every few seconds, possibly onto the \
                 CPUs meant to be quiet.",
                "stop irqbalance, or set IRQBALANCE_BANNED_CPULIST to the isolated CPUs",
            ));
        }
        let on_iso: Vec<String> = inv
            .irqs
            .busiest
            .iter()
            .filter(|i| {
                i.effective_affinity
                    .as_deref()
                    .and_then(crate::inventory::param_cpus)
                    .is_some_and(|c| c.iter().any(|c| iso.contains(c)))
            })
            .map(|i| format!("IRQ {} {} ({})", i.irq, i.name, i.count))
            .collect();
        if !on_iso.is_empty() {
            out.push(f(
                "irq.on-isolated",
                Warn,
                "busy device interrupts are delivered to isolated CPUs".into(),
                on_iso.join(", "),
                "An interrupt handler preempts whatever runs on its CPU, RT threads included.",
                "echo HOUSEKEEPING_CPUS > /proc/irq/N/smp_affinity_list, or boot with \
                 irqaffinity= and isolcpus=managed_irq,…",
            ));
        }
    }

    // IRQ threads (PREEMPT_RT, threadirqs): which run above latlab's measuring threads.
    let threads = &inv.irqs.threads;
    if !threads.is_empty() {
        let rt =
            |t: &&crate::inventory::IrqThread| matches!(t.policy.as_deref(), Some("fifo" | "rr"));
        let above: Vec<String> = threads
            .iter()
            .filter(|t| rt(t) && t.rt_priority.is_some_and(|p| p >= MEASURING_PRIORITY))
            .map(irq_thread_text)
            .collect();
        if !above.is_empty() {
            out.push(f(
                "irq.threads-above-measuring",
                Warn,
                format!(
                    "{} IRQ thread{} at or above the measuring priority (FIFO {MEASURING_PRIORITY})",
                    above.len(),
                    if above.len() == 1 { "" } else { "s" }
                ),
                above.join(", "),
                "A threaded IRQ handler at or above the measuring threads' priority runs before them on their CPU: its time is in every latency it overlaps (latlab names it `IRQ N (name) thread …, above the measuring thread`).",
                "chrt -f -p 50 PID to put it back below (50 is the kernel's default), or measure above it (latlab run -p 97); move it off the measured CPUs with /proc/irq/N/smp_affinity_list",
            ));
        }
        let mut prios: std::collections::BTreeMap<String, usize> = Default::default();
        for t in threads {
            let k = match (t.policy.as_deref(), t.rt_priority) {
                (Some(p @ ("fifo" | "rr")), Some(r)) => format!("{} {r}", p.to_uppercase()),
                (Some(p), _) => p.to_string(),
                (None, _) => "unknown".into(),
            };
            *prios.entry(k).or_default() += 1;
        }
        out.push(f(
            "irq.threads",
            Info,
            format!(
                "{} IRQ handler{} run as threads",
                threads.len(),
                if threads.len() == 1 { "" } else { "s" }
            ),
            format!(
                "{} (/proc/*/comm irq/N-*); {}",
                prios
                    .iter()
                    .map(|(p, n)| format!("{n} at {p}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                threads
                    .iter()
                    .take(8)
                    .map(irq_thread_text)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "A threaded handler's work runs in a kernel thread scheduled by its priority: below the measuring threads it waits, above them it preempts them.",
            "keep IRQ threads below the measuring priority, except the ones the measured workload needs",
        ));
    }

    // RCU callbacks and the tick on isolated CPUs.
    if !iso.is_empty() {
        let nocbs = inv
            .cmdline_params
            .get("rcu_nocbs")
            .and_then(|v| crate::inventory::param_cpus(v))
            .unwrap_or_default();
        let with_cbs: Vec<u32> = iso.iter().copied().filter(|c| !nocbs.contains(c)).collect();
        if !with_cbs.is_empty() {
            out.push(f(
                "rcu.callbacks-on-isolated",
                Warn,
                "RCU callbacks run on isolated CPUs".into(),
                format!(
                    "isolated CPUs {} not in rcu_nocbs= ({})",
                    format_cpu_list(&with_cbs),
                    inv.cmdline_params
                        .get("rcu_nocbs")
                        .map(|v| format!("rcu_nocbs={v}"))
                        .unwrap_or_else(|| "not on the command line".into())
                ),
                "Without offloading, each CPU runs its own RCU callbacks (in softirq, or in rcuc/N on PREEMPT_RT) after grace periods: bursts of work on the CPUs meant to be quiet.",
                "boot with rcu_nocbs= covering the isolated CPUs (and rcu_nocb_poll)",
            ));
        }
        let ticking: Vec<u32> = iso
            .iter()
            .copied()
            .filter(|c| !inv.cpus.nohz_full.contains(c))
            .collect();
        if !ticking.is_empty() {
            out.push(f(
                "cpus.tick-on-isolated",
                Info,
                "isolated CPUs keep their scheduler tick".into(),
                format!(
                    "isolated CPUs {} not in /sys/devices/system/cpu/nohz_full ({})",
                    format_cpu_list(&ticking),
                    if inv.cpus.nohz_full.is_empty() {
                        "empty".into()
                    } else {
                        format_cpu_list(&inv.cpus.nohz_full)
                    }
                ),
                "The tick interrupts the measured thread HZ times a second even when it is the only task on its CPU.",
                "boot with nohz_full= covering the isolated CPUs",
            ));
        }
    }

    // SMT.
    if inv.cpus.smt_active == Some(true) {
        out.push(f(
            "cpus.smt",
            Info,
            "SMT (hyper-threading) is active".into(),
            format!(
                "/sys/devices/system/cpu/smt/active = 1 (control {})",
                inv.cpus.smt_control.as_deref().unwrap_or("unknown")
            ),
            "Sibling threads share one core's execution units and caches, so the load on a \
             sibling slows the measured thread.",
            "boot with nosmt, or echo off > /sys/devices/system/cpu/smt/control",
        ));
    }

    // Clocksource.
    if let Some(cs) = inv.clocksource.current.as_deref() {
        if matches!(cs, "hpet" | "acpi_pm" | "jiffies" | "pit") {
            out.push(f(
                "clock.slow-clocksource",
                Warn,
                format!("clocksource is {cs}"),
                format!(
                    "current_clocksource {cs}; available {}",
                    inv.clocksource.available.join(" ")
                ),
                "Reading this clocksource takes a slow device access (microseconds) on every \
                 clock_gettime, and jiffies has only tick resolution.",
                "use tsc (clocksource=tsc tsc=reliable, or echo tsc > \
                 /sys/devices/system/clocksource/clocksource0/current_clocksource)",
            ));
        }
    }

    // Timer migration and watchdogs.
    if inv.sched.nmi_watchdog == Some(true) {
        out.push(f(
            "watchdog.nmi",
            Info,
            "NMI watchdog is on".into(),
            "/proc/sys/kernel/nmi_watchdog = 1".into(),
            "The hard-lockup detector raises a perf NMI on every CPU periodically; NMIs cannot \
             be masked.",
            "sysctl kernel.nmi_watchdog=0 (or nmi_watchdog=0 on the command line)",
        ));
    }
    if inv.sched.timer_migration == Some(true) && !iso.is_empty() {
        out.push(f(
            "timer.migration",
            Info,
            "timer migration is on".into(),
            "/proc/sys/kernel/timer_migration = 1".into(),
            "Timers armed on idle CPUs may be moved to busy ones; with isolated CPUs it is \
             usually turned off so timers stay where they were armed.",
            "sysctl kernel.timer_migration=0",
        ));
    }

    // Tracing support.
    let t = &inv.tracing;
    if t.tracefs.is_none() {
        out.push(f(
            "trace.not-mounted",
            Info,
            "tracefs is not mounted".into(),
            format!(
                "no tracefs at /sys/kernel/tracing or /sys/kernel/debug/tracing (kernel \
                 support: {})",
                match t.supported {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "unknown",
                }
            ),
            "latlab explains spikes from trace events; without tracefs it can only measure.",
            "mount -t tracefs nodev /sys/kernel/tracing (latlab run does this itself as root)",
        ));
    } else {
        let missing: Vec<&str> = t
            .events
            .iter()
            .filter(|(_, p)| !**p)
            .map(|(e, _)| e.as_str())
            .collect();
        if !missing.is_empty() {
            out.push(f(
                "trace.events-missing",
                Warn,
                "trace events latlab needs are missing".into(),
                format!(
                    "not in {}/events: {}",
                    t.tracefs.as_deref().unwrap_or(""),
                    missing.join(", ")
                ),
                "Spike attribution reads these events; without them causes stay unknown.",
                "use a kernel built with CONFIG_FTRACE and the scheduler/IRQ tracepoints",
            ));
        }
        let rt_tracers: Vec<&str> = ["timerlat", "osnoise", "hwlat"]
            .into_iter()
            .filter(|n| t.tracers.iter().any(|x| x == n))
            .collect();
        if !rt_tracers.is_empty() {
            out.push(f(
                "trace.rt-tracers",
                Info,
                format!("the kernel offers the {} tracer{}", rt_tracers.join(", "), if rt_tracers.len() == 1 { "" } else { "s" }),
                format!("available_tracers: {}", t.tracers.join(" ")),
                "In-kernel latency measurements (rtla timerlat/osnoise/hwlat) can run beside or instead of latlab's threads on this kernel.",
                "rtla timerlat top -a … (or latlab's timerlat back end) to cross-check",
            ));
        }
        if t.timerlat == Some(false) || t.osnoise == Some(false) {
            out.push(f(
                "trace.no-timerlat",
                Info,
                "timerlat/osnoise tracers are not built in".into(),
                format!("available_tracers: {}", t.tracers.join(" ")),
                "rtla's in-kernel measurements are not possible here; latlab attributes spikes \
                 from plain events instead.",
                "build the kernel with CONFIG_TIMERLAT_TRACER and CONFIG_OSNOISE_TRACER to \
                 cross-check with rtla",
            ));
        }
    }

    // What could not be known.
    for p in &inv.unreadable {
        out.push(f(
            &format!("unknown:{p}"),
            Info,
            format!("unknown: {p} not readable"),
            format!("{p} could not be read"),
            "What depends on it is not checked.",
            "run latlab check as root, or check that the file exists on this kernel",
        ));
    }
    for i in &inv.invalid {
        out.push(f(
            &format!("invalid:{}", i.path),
            Warn,
            format!("unknown: {} holds an unexpected value", i.path),
            format!("{} = {:?}, expected {}", i.path, i.value, i.expected),
            "What depends on it is not checked.",
            "check the file by hand; a kernel change may have altered its format",
        ));
    }

    out.sort_by_key(|f| f.severity);
    out
}

fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "?".into())
}

fn steal_evidence(inv: &Inventory) -> String {
    let mut parts = Vec::new();
    if let (Some(s), Some(ms)) = (inv.virt.steal_sampled, inv.virt.steal_sample_ms) {
        parts.push(format!("steal {:.2} % over {ms} ms", s * 100.0));
    }
    if let Some(s) = inv.virt.steal_since_boot {
        parts.push(format!("steal {:.2} % since boot", s * 100.0));
    }
    if parts.is_empty() {
        "steal time unknown (/proc/stat)".into()
    } else {
        format!("{} (/proc/stat)", parts.join(", "))
    }
}

#[cfg(test)]
#[allow(clippy::field_reassign_with_default)] // fixtures are built field by field
mod tests {
    use super::*;
    use crate::inventory::{CpuFreq, IdleState};

    fn ids(inv: &Inventory) -> Vec<String> {
        findings(inv).into_iter().map(|f| f.id).collect()
    }

    #[test]
    fn tuned_rt_box_has_no_bad_or_warn() {
        let mut inv = Inventory::default();
        inv.preemption.model = Some("rt".into());
        inv.sched.rt_runtime_us = Some(-1);
        inv.cpus.isolated = vec![2, 3];
        inv.cpus.nohz_full = vec![2, 3];
        inv.cmdline_params.insert("rcu_nocbs".into(), "2-3".into());
        inv.cpufreq.insert(
            2,
            CpuFreq {
                governor: Some("performance".into()),
                ..Default::default()
            },
        );
        inv.memory.thp_enabled = Some("never".into());
        inv.tracing.tracefs = Some("/sys/kernel/tracing".into());
        let f = findings(&inv);
        assert!(f.iter().all(|f| f.severity == Severity::Info), "{f:#?}");
    }

    /// Issue 27: what `check` says of a PREEMPT_RT kernel: its lazy mode, its IRQ threads and
    /// which run above the measuring threads, RCU callbacks and the tick on isolated CPUs,
    /// the RT tracers it offers.
    #[test]
    fn preempt_rt_kernel_findings() {
        let thread = |pid, comm: &str, policy: &str, prio| crate::inventory::IrqThread {
            pid,
            comm: comm.into(),
            irq: None,
            policy: Some(policy.into()),
            rt_priority: Some(prio),
        };
        let mut inv = Inventory::default();
        inv.preemption.model = Some("rt".into());
        inv.preemption.dynamic_mode = Some("lazy".into());
        inv.irqs.threads = vec![
            thread(151, "irq/4-ttyS0", "fifo", 96),
            thread(52, "irq/9-acpi", "fifo", 50),
            thread(77, "irq/8-rtc0", "fifo", 95),
        ];
        inv.cmdline_params.insert("isolcpus".into(), "2-5".into());
        inv.cmdline_params.insert("rcu_nocbs".into(), "2-3".into());
        inv.cpus.nohz_full = vec![2, 3, 4];
        inv.tracing.tracefs = Some("/sys/kernel/tracing".into());
        inv.tracing.tracers = ["timerlat", "osnoise", "hwlat", "nop"]
            .map(String::from)
            .to_vec();
        let f = findings(&inv);
        let get = |id: &str| {
            f.iter()
                .find(|x| x.id == id)
                .unwrap_or_else(|| panic!("no {id}: {f:#?}"))
        };
        assert_eq!(get("preempt.lazy").severity, Severity::Info);
        let above = get("irq.threads-above-measuring");
        assert_eq!(above.severity, Severity::Warn);
        assert_eq!(
            above.evidence,
            "irq/4-ttyS0 (pid 151, FIFO 96), irq/8-rtc0 (pid 77, FIFO 95)"
        );
        let all = get("irq.threads");
        assert!(
            all.evidence
                .starts_with("1 at FIFO 50, 1 at FIFO 95, 1 at FIFO 96"),
            "{}",
            all.evidence
        );
        assert!(all.evidence.contains("1 at FIFO 96"), "{}", all.evidence);
        let rcu = get("rcu.callbacks-on-isolated");
        assert!(
            rcu.evidence
                .starts_with("isolated CPUs 4-5 not in rcu_nocbs= (rcu_nocbs=2-3)"),
            "{}",
            rcu.evidence
        );
        let tick = get("cpus.tick-on-isolated");
        assert!(
            tick.evidence.starts_with("isolated CPUs 5 "),
            "{}",
            tick.evidence
        );
        assert_eq!(
            get("trace.rt-tracers").title,
            "the kernel offers the timerlat, osnoise, hwlat tracers"
        );
        // Full: none of the RT-only findings.
        inv.preemption.dynamic_mode = Some("full".into());
        inv.irqs.threads.clear();
        inv.cmdline_params.insert("rcu_nocbs".into(), "2-5".into());
        inv.cpus.nohz_full = vec![2, 3, 4, 5];
        let ids = ids(&inv);
        for id in [
            "preempt.lazy",
            "irq.threads",
            "irq.threads-above-measuring",
            "rcu.callbacks-on-isolated",
            "cpus.tick-on-isolated",
        ] {
            assert!(!ids.iter().any(|x| x == id), "{id}: {ids:?}");
        }
    }

    #[test]
    fn desktop_problems_ranked_worst_first() {
        let mut inv = Inventory::default();
        inv.preemption = crate::inventory::Preemption {
            model: Some("voluntary".into()),
            dynamic: true,
            source: Some("x".into()),
            dynamic_mode: None,
        };
        inv.sched.rt_runtime_us = Some(950000);
        inv.memory.thp_enabled = Some("always".into());
        inv.cpufreq.insert(
            0,
            CpuFreq {
                governor: Some("powersave".into()),
                ..Default::default()
            },
        );
        let st = |l| IdleState {
            index: 1,
            name: "C10".into(),
            latency_us: Some(l),
            residency_us: None,
            enabled: true,
        };
        inv.cpuidle.states.insert(0, vec![st(890)]);
        let f = findings(&inv);
        let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        for want in [
            "preempt.model",
            "cpuidle.deep-states",
            "cpufreq.governor",
            "sched.rt-throttling",
            "mm.thp-always",
            "cpus.no-isolation",
        ] {
            assert!(ids.contains(&want), "{want} missing from {ids:?}");
        }
        assert!(f.windows(2).all(|w| w[0].severity <= w[1].severity));
        assert!(f[0].fix.contains("preempt=full"));
        // A holder of /dev/cpu_dma_latency makes deep states harmless.
        inv.dma_latency_holders.push(crate::inventory::Holder {
            pid: 1,
            comm: "tuned".into(),
        });
        let d = findings(&inv)
            .into_iter()
            .find(|f| f.id == "cpuidle.deep-states")
            .unwrap();
        assert_eq!(d.severity, Severity::Info);
    }

    #[test]
    fn unknowns_and_steal() {
        let mut inv = Inventory::default();
        inv.unreadable.push("/proc/cmdline".into());
        inv.virt.hypervisor = Some(true);
        assert!(ids(&inv).contains(&"unknown:/proc/cmdline".to_string()));
        assert!(ids(&inv).contains(&"virt.guest".to_string()));
        inv.virt.steal_sampled = Some(0.05);
        inv.virt.steal_sample_ms = Some(1000);
        let s = findings(&inv)
            .into_iter()
            .find(|f| f.id == "virt.steal")
            .unwrap();
        assert_eq!(s.severity, Severity::Bad);
        assert!(s.title.contains("5.0 %"), "{}", s.title);
        assert!(!ids(&inv).contains(&"virt.guest".to_string()));
    }
}
