//! Cause kinds and their names (the one table), which cause a stretch of time is charged to,
//! and the run-level summary over spikes.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::record::{Cause, CauseKind, SpikeRecord};
use crate::units::Nanos;

/// The contract's name of a cause kind: [`CauseKind::as_str`], the one table of names (run.json
/// reads and writes it too).
pub fn kind_str(k: CauseKind) -> &'static str {
    k.as_str()
}

/// Name of the *switch to user* part (switch-in → the thread's own clock read): a `task`
/// cause with the thread's pid and prio, labelled so it cannot be read as another task.
pub fn switch_to_user(comm: &str) -> String {
    format!("switch-to-user ({comm})")
}

pub(super) type Key<'a> = (CauseKind, Cow<'a, str>, i64, i64);

/// An open interrupt context on a CPU (hardirq, softirq, NMI).
#[derive(Debug, Clone)]
pub(super) struct Ctx<'a> {
    pub(super) kind: CauseKind,
    pub(super) name: Cow<'a, str>,
    /// irq number / vector / softirq vec, to match the exit.
    pub(super) id: i64,
    pub(super) start: Nanos,
}

/// The task current on a CPU.
#[derive(Debug, Clone)]
pub(super) struct Cur<'a> {
    pub(super) pid: i64,
    pub(super) comm: Cow<'a, str>,
    /// 120 (CFS default) when not known yet.
    pub(super) prio: i64,
    pub(super) prio_known: bool,
}

/// The measured thread of an open window, as [`classify`] needs it.
pub(super) struct Waiter<'w, 'a> {
    pub(super) pid: i64,
    pub(super) comm: &'w Cow<'a, str>,
    pub(super) prio: Option<i64>,
    /// It was woken already (`sched_waking` seen).
    pub(super) woken: bool,
}

/// The cause a stretch of time on the CPU is charged to, for one open window: the innermost
/// interrupt context; else, before the thread's wake-up, timer delivery (IRQs off in a task,
/// or a silent gap: hypervisor on a VM, else unknown); after it, the task that kept the CPU
/// (`task` when it had the right to, `preempt_off` when it had a lower priority); the thread
/// itself after its switch-in (its way back to user space).
pub(super) fn classify<'a>(
    w: &Waiter<'_, 'a>,
    stack: &[Ctx<'a>],
    current: &Option<Cur<'a>>,
    irqs_off: bool,
    virtualized: bool,
) -> Key<'a> {
    if let Some(c) = stack.last() {
        return (c.kind, c.name.clone(), 0, 0);
    }
    let silent = if virtualized {
        CauseKind::Hypervisor
    } else {
        CauseKind::Unknown
    };
    let Some(cur) = current else {
        return (CauseKind::Unknown, Cow::Borrowed("unknown task"), 0, 0);
    };
    if cur.pid == w.pid {
        // τ itself: after switch-in, its way back to user space.
        return (
            CauseKind::Task,
            Cow::Owned(switch_to_user(w.comm)),
            w.pid,
            w.prio.unwrap_or(cur.prio),
        );
    }
    if !w.woken {
        if cur.pid == 0 {
            return (silent, Cow::Borrowed("timer delivery (idle)"), 0, 0);
        }
        if irqs_off {
            return (CauseKind::IrqOff, cur.comm.clone(), cur.pid, cur.prio);
        }
        return (silent, Cow::Borrowed("timer delivery"), 0, 0);
    }
    if cur.pid == 0 {
        return (
            CauseKind::Unknown,
            Cow::Borrowed("idle while runnable"),
            0,
            0,
        );
    }
    let tp = w.prio.unwrap_or(0);
    if cur.prio < tp || (cur.prio == tp && tp < 100) {
        (CauseKind::Task, cur.comm.clone(), cur.pid, cur.prio)
    } else {
        (CauseKind::PreemptOff, cur.comm.clone(), cur.pid, cur.prio)
    }
}

/// Largest first; ties by kind and name, so output is deterministic.
pub fn sort_causes(c: &mut [Cause]) {
    c.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then(a.kind.cmp(&b.kind))
            .then(a.name.cmp(&b.name))
            .then(a.pid.cmp(&b.pid))
    });
}

/// One row of "what delays this machine" (also the report JSON's `delays[]`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct SummaryRow {
    pub kind: CauseKind,
    pub name: String,
    /// Spikes this cause appeared in.
    pub spikes: u64,
    pub total_ns: Nanos,
    pub worst_ns: Nanos,
    /// total_ns / the summed latency of all spikes.
    pub share: f64,
}

/// The run-level table: per (kind, name), over all spikes; largest total first.
pub fn summarize(spikes: &[SpikeRecord]) -> Vec<SummaryRow> {
    // Sums saturate: a record read from disk may hold any u64.
    let total: Nanos = spikes
        .iter()
        .fold(0, |a: Nanos, s| a.saturating_add(s.latency_ns));
    let mut m: BTreeMap<(CauseKind, String), (u64, Nanos, Nanos)> = BTreeMap::new();
    for s in spikes {
        let mut per: BTreeMap<(CauseKind, String), Nanos> = BTreeMap::new();
        for c in &s.causes {
            let e = per.entry((c.kind, c.name.clone())).or_default();
            *e = e.saturating_add(c.ns);
        }
        for (k, ns) in per {
            let e = m.entry(k).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(ns);
            e.2 = e.2.max(ns);
        }
    }
    let mut rows: Vec<SummaryRow> = m
        .into_iter()
        .map(|((kind, name), (n, tot, worst))| SummaryRow {
            kind,
            name,
            spikes: n,
            total_ns: tot,
            worst_ns: worst,
            share: if total == 0 {
                0.0
            } else {
                tot as f64 / total as f64
            },
        })
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one table of kind names is the one run.json reads and writes, every kind with its
    /// own name, and a name it does not hold is refused with the names it does.
    #[test]
    fn kind_names_are_the_table_in_json_and_back() {
        let mut seen = std::collections::BTreeSet::new();
        for k in CauseKind::ALL {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(kind_str(k), k.as_str());
            assert_eq!(serde_json::from_str::<CauseKind>(&json).unwrap(), k);
            assert!(seen.insert(k.as_str()), "{k:?}");
        }
        assert_eq!(CauseKind::PreemptOff.as_str(), "preempt_off");
        let e = serde_json::from_str::<CauseKind>("\"preempt-off\"").unwrap_err();
        assert!(e.to_string().contains("preempt_off, irq_off"), "{e}");
    }

    #[test]
    fn summary_table() {
        let c = |kind, name: &str, ns| Cause {
            kind,
            name: name.into(),
            pid: 1,
            prio: 120,
            ns,
        };
        let sp = |lat, causes| SpikeRecord {
            cpu: 0,
            at_ns: 0,
            latency_ns: lat,
            causes,
            trace_file: None,
            timeline: vec![],
            timeline_events: vec![],
            lanes: None,
        };
        let rows = summarize(&[
            sp(
                1000,
                vec![
                    c(CauseKind::PreemptOff, "a", 800),
                    c(CauseKind::Irq, "t", 100),
                ],
            ),
            sp(
                3000,
                vec![
                    c(CauseKind::PreemptOff, "a", 2000),
                    c(CauseKind::Softirq, "RCU", 500),
                ],
            ),
        ]);
        assert_eq!(rows[0].name, "a");
        assert_eq!(
            (rows[0].spikes, rows[0].total_ns, rows[0].worst_ns),
            (2, 2800, 2000)
        );
        assert!((rows[0].share - 0.7).abs() < 1e-9);
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().map(|r| r.share).sum::<f64>() <= 1.0);
    }
}
