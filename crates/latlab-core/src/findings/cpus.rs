//! Rules on the CPUs: frequency, idle states, isolation, RCU callbacks and the tick on the
//! isolated CPUs, SMT.

use super::Severity::{Bad, Info, Warn};
use super::{f, Finding, DEEP_IDLE_US};
use crate::cpulist::format_cpu_list;
use crate::inventory::Inventory;

/// The frequency governor and boost (`cpufreq.governor`, `cpufreq.boost`).
pub(super) fn cpufreq(inv: &Inventory, out: &mut Vec<Finding>) {
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
}

/// Deep idle states (`cpuidle.deep-states`).
pub(super) fn idle(inv: &Inventory, out: &mut Vec<Finding>) {
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
}

/// No CPU isolated (`cpus.no-isolation`).
pub(super) fn no_isolation(inv: &Inventory, out: &mut Vec<Finding>) {
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
}

/// RCU callbacks and the tick on the isolated CPUs `iso` (`rcu.callbacks-on-isolated`,
/// `cpus.tick-on-isolated`).
pub(super) fn rcu_and_tick(inv: &Inventory, iso: &[u32], out: &mut Vec<Finding>) {
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
}

/// SMT (`cpus.smt`).
pub(super) fn smt(inv: &Inventory, out: &mut Vec<Finding>) {
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
}
