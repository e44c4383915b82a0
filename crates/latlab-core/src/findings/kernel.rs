//! Rules on the kernel and the scheduler: the preemption model, cgroup limits on latlab, RT
//! throttling, the clocksource and the watchdogs.

use super::Severity::{Bad, Info, Warn};
use super::{f, Finding};
use crate::inventory::Inventory;

/// The preemption model (`preempt.model`, `preempt.lazy`).
pub(super) fn preemption(inv: &Inventory, out: &mut Vec<Finding>) {
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
}

/// Cgroup CPU limits on latlab itself (`cgroup.cpu-quota`, `cgroup.rt-runtime`).
pub(super) fn cgroup(inv: &Inventory, out: &mut Vec<Finding>) {
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
}

/// RT throttling (`sched.rt-throttling`).
pub(super) fn rt_throttling(inv: &Inventory, out: &mut Vec<Finding>) {
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
}

/// A slow clocksource (`clock.slow-clocksource`).
pub(super) fn clocksource(inv: &Inventory, out: &mut Vec<Finding>) {
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
}

/// Timer migration and watchdogs (`watchdog.nmi`, `timer.migration` when CPUs are isolated).
pub(super) fn watchdogs(inv: &Inventory, iso: &[u32], out: &mut Vec<Finding>) {
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
}
