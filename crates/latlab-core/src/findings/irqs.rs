//! Rules on interrupts: irqbalance and device IRQs on the isolated CPUs, IRQ handler threads.

use super::Severity::{Info, Warn};
use super::{f, Finding, MEASURING_PRIORITY};
use crate::cpulist::format_cpu_list;
use crate::inventory::{Inventory, IrqThread};

/// `irq/4-ttyS0 (pid 151, FIFO 96)`.
fn irq_thread_text(t: &IrqThread) -> String {
    let p = match (t.policy.as_deref(), t.rt_priority) {
        (Some(p @ ("fifo" | "rr")), Some(r)) => format!("{} {r}", p.to_uppercase()),
        (Some(p), _) => p.to_string(),
        (None, _) => "policy unknown".into(),
    };
    format!("{} (pid {}, {p})", t.comm, t.pid)
}

/// With CPUs isolated (`iso`): irqbalance running, busy device IRQs delivered to them
/// (`irq.irqbalance`, `irq.on-isolated`).
pub(super) fn on_isolated(inv: &Inventory, iso: &[u32], out: &mut Vec<Finding>) {
    if inv.irqs.irqbalance_running == Some(true) {
        out.push(f(
            "irq.irqbalance",
            Warn,
            "irqbalance is running with isolated CPUs".into(),
            format!(
                "an irqbalance process; isolated CPUs {}",
                format_cpu_list(iso)
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

/// IRQ threads (PREEMPT_RT, threadirqs): which run above latlab's measuring threads
/// (`irq.threads-above-measuring`, `irq.threads`).
pub(super) fn threads(inv: &Inventory, out: &mut Vec<Finding>) {
    let threads = &inv.irqs.threads;
    if !threads.is_empty() {
        let rt = |t: &&IrqThread| matches!(t.policy.as_deref(), Some("fifo" | "rr"));
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
}
