//! The other CPUs during a spike's silent stretches (run.json `spikes[].others`): evidence
//! for or against a stall of the whole machine, beside the steal time of the spike's CPU.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::{Human, Nanos};

/// What the other traced CPUs did while the spike's CPU was silent (its `silent gap` and
/// `switch-to-user` stretches: no event on the CPU in either). Another CPU's events in those stretches show that the stall was the spike's
/// CPU's alone (its vCPU descheduled by the host, or a region the events do not cover); none
/// on a CPU that was running a task is what a stall of the whole machine looks like (the
/// host pausing the VM, an SMI). An idle CPU is silent anyway, and a task in user space logs
/// nothing between ticks: silence alone is weak evidence, events are strong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SpikeOthers {
    /// The spike's silent stretches (`silent gap`, `switch-to-user`), in total.
    pub silent_ns: Nanos,
    /// The other CPUs whose events of the spike's window were read (the other measured
    /// CPUs), in CPU order.
    pub cpus: Vec<OtherCpu>,
}

/// One other CPU over the spike's silent stretches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OtherCpu {
    pub cpu: u32,
    /// Its events inside the silent stretches.
    pub events: u64,
    /// What it ran when the first silent stretch began: `idle`, a task's name, or null when
    /// its trace does not say (no task switch on it in the window read).
    #[serde(default)]
    pub running: Option<String>,
}

impl SpikeOthers {
    /// `other CPUs in its 120 µs of silent stretches: CPU 0 (hackbench) 37 events, CPU 2
    /// (idle) none`.
    pub fn describe(&self) -> String {
        let cpus: Vec<String> = self
            .cpus
            .iter()
            .map(|c| {
                let what = c
                    .running
                    .as_deref()
                    .map(|r| format!(" ({})", crate::escape::escape(r)))
                    .unwrap_or_default();
                let n = match c.events {
                    0 => "none".to_string(),
                    1 => "1 event".to_string(),
                    n => format!("{n} events"),
                };
                format!("CPU {}{what} {n}", c.cpu)
            })
            .collect();
        format!(
            "other CPUs in its {} of silent stretches: {}",
            Human(self.silent_ns),
            cpus.join(", ")
        )
    }

    /// Every other CPU logged events while the spike's CPU was silent.
    pub fn others_active(&self) -> bool {
        !self.cpus.is_empty() && self.cpus.iter().all(|c| c.events > 0)
    }
}

/// timerlat's own figures of a spike's activation (run.json `spikes[].timerlat`, the
/// timerlat back end only), as `rtla timerlat --aa` begins its analysis: how much of the
/// latency the timer's IRQ already had, and how much came after it, on the thread's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SpikeTimerlat {
    /// The activation's IRQ latency (the timer's expiry → its handler), null when the IRQ
    /// sample was not read before the spike's.
    #[serde(default)]
    pub irq_ns: Option<Nanos>,
    /// Its thread latency (→ the thread runs in the kernel), with latlab's threads on
    /// `timerlat_fd`, whose spike is the return to user space; null with the kernel's threads
    /// (the spike is the thread latency then).
    #[serde(default)]
    pub thread_ns: Option<Nanos>,
}

impl SpikeTimerlat {
    /// `IRQ 120 µs, thread 15.3 ms of 15.4 ms`: the parts of the spike's `latency`.
    pub fn describe(&self, latency: Nanos) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(i) = self.irq_ns {
            parts.push(format!("IRQ {}", Human(i)));
        }
        if let Some(t) = self.thread_ns {
            parts.push(format!("thread {}", Human(t)));
        }
        (!parts.is_empty()).then(|| format!("timerlat: {} of {}", parts.join(", "), Human(latency)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn described_with_names_escaped_and_counts() {
        let o = SpikeOthers {
            silent_ns: 120_000,
            cpus: vec![
                OtherCpu {
                    cpu: 0,
                    events: 37,
                    running: Some("hack\nbench".into()),
                },
                OtherCpu {
                    cpu: 2,
                    events: 0,
                    running: Some("idle".into()),
                },
                OtherCpu {
                    cpu: 3,
                    events: 1,
                    running: None,
                },
            ],
        };
        assert_eq!(
            o.describe(),
            "other CPUs in its 120 µs of silent stretches: CPU 0 (hack\\u{a}bench) 37 events, CPU 2 (idle) none, CPU 3 1 event"
        );
        assert!(!o.others_active());
    }

    #[test]
    fn timerlat_figures_described_when_there_are_any() {
        let t = SpikeTimerlat {
            irq_ns: Some(120_000),
            thread_ns: Some(15_300_000),
        };
        assert_eq!(
            t.describe(15_400_000).as_deref(),
            Some("timerlat: IRQ 120 µs, thread 15.30 ms of 15.40 ms")
        );
        let k = SpikeTimerlat {
            irq_ns: Some(120_000),
            thread_ns: None,
        };
        assert_eq!(
            k.describe(15_400_000).as_deref(),
            Some("timerlat: IRQ 120 µs of 15.40 ms")
        );
        let none = SpikeTimerlat {
            irq_ns: None,
            thread_ns: None,
        };
        assert_eq!(none.describe(1), None);
    }
}
