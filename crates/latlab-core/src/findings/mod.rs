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

use crate::inventory::Inventory;

mod cpus;
mod irqs;
mod kernel;
mod memory;
mod tracing;
mod virt;

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
/// All findings for an inventory, worst first (rule order within a severity).
pub fn findings(inv: &Inventory) -> Vec<Finding> {
    let mut out = Vec::new();
    kernel::preemption(inv, &mut out);
    kernel::cgroup(inv, &mut out);
    virt::virt(inv, &mut out);
    cpus::cpufreq(inv, &mut out);
    cpus::idle(inv, &mut out);
    kernel::rt_throttling(inv, &mut out);
    memory::memory(inv, &mut out);
    let iso = inv.isolated_cpus();
    if iso.is_empty() {
        cpus::no_isolation(inv, &mut out);
    } else {
        irqs::on_isolated(inv, &iso, &mut out);
    }
    irqs::threads(inv, &mut out);
    cpus::rcu_and_tick(inv, &iso, &mut out);
    cpus::smt(inv, &mut out);
    kernel::clocksource(inv, &mut out);
    kernel::watchdogs(inv, &iso, &mut out);
    tracing::tracing(inv, &mut out);
    unknowns(inv, &mut out);
    out.sort_by_key(|f| f.severity);
    out
}

/// What could not be read or understood (`unknown:<path>`, `invalid:<path>`).
fn unknowns(inv: &Inventory, out: &mut Vec<Finding>) {
    use Severity::{Info, Warn};
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
