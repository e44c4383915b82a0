//! Cause kinds and their names (the one table), which cause a stretch of time is charged to,
//! and the run-level summary over spikes.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::pid_map::{PidMap, PidTable};
use crate::record::{Cause, CauseKind, SpikeRecord, SILENT_GAP, SILENT_GAP_IDLE};
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
    /// A softirq: the task it runs in (pid, prio), as its cause's pid and prio (0, 0 in the
    /// idle task and for hardirqs, vectors and NMIs).
    pub(super) task: (i64, i64),
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
    /// A spinning thread's gap (the noise mode): every other task that ran interrupted it,
    /// whatever its priority (osnoise's thread noise).
    pub(super) noise: bool,
}

/// The cause a stretch of time on the CPU is charged to, for one open window: the innermost
/// interrupt context; else, before the thread's wake-up, timer delivery (IRQs off in a task,
/// or a silent gap: `unknown`, which only the steal time around the spike turns into
/// `hypervisor`, never the trace alone); after it, the task that kept the CPU
/// (`task` when it had the right to, `preempt_off` when it had a lower priority); the thread
/// itself after its switch-in (its way back to user space).
pub(super) fn classify<'a>(
    w: &Waiter<'_, 'a>,
    stack: &[Ctx<'a>],
    current: &Option<Cur<'a>>,
    irqs_off: bool,
) -> Key<'a> {
    if let Some(c) = stack.last() {
        return (c.kind, c.name.clone(), c.task.0, c.task.1);
    }
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
            return (CauseKind::Unknown, Cow::Borrowed(SILENT_GAP_IDLE), 0, 0);
        }
        if irqs_off {
            return (CauseKind::IrqOff, cur.comm.clone(), cur.pid, cur.prio);
        }
        return (CauseKind::Unknown, Cow::Borrowed(SILENT_GAP), 0, 0);
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
    if w.noise || cur.prio < tp || (cur.prio == tp && tp < 100) {
        (CauseKind::Task, cur.comm.clone(), cur.pid, cur.prio)
    } else {
        (CauseKind::PreemptOff, cur.comm.clone(), cur.pid, cur.prio)
    }
}

/// A kernel priority as people set it: `FIFO 96` for an RT priority (the trace's prio 3; the
/// trace does not tell FIFO from RR, and IRQ threads and latlab's threads are FIFO),
/// `deadline` below 0, `normal prio 120` (nice 0) from 100 on.
pub fn prio_text(prio: i64) -> String {
    if prio < 0 {
        "deadline".into()
    } else if prio < 100 {
        format!("FIFO {}", 99 - prio)
    } else {
        format!("normal prio {prio}")
    }
}

/// `above` / `at the priority of` / `below`: a task's place against the measuring thread's.
fn against(prio: i64, measuring: i64) -> &'static str {
    match prio.cmp(&measuring) {
        std::cmp::Ordering::Less => "above",
        std::cmp::Ordering::Equal => "at the priority of",
        std::cmp::Ordering::Greater => "below",
    }
}

/// The IRQ number of a threaded handler's thread (`irq/4-ttyS0` → 4; also the kernel's
/// secondary threads `irq/4-s-ttyS0`).
pub fn irq_thread_number(comm: &str) -> Option<i64> {
    let rest = comm.strip_prefix("irq/")?;
    let end = rest.find('-')?;
    rest[..end].parse().ok().filter(|n: &i64| *n >= 0)
}

/// A priority-inheritance boost seen in the trace (`sched_pi_setprio`).
#[derive(Debug, Clone)]
pub(super) struct Boost<'a> {
    /// The owner's priority before it (its own).
    pub(super) from: i64,
    /// The priority it was boosted to (a waiter's).
    pub(super) to: i64,
    /// The task whose wait boosted it (the event's TASK-PID column: the waiter blocks there).
    pub(super) waiter: (i64, Cow<'a, str>),
}

/// What the trace taught the analyzer for naming causes when a sample ends: the device IRQs'
/// action names, which IRQs run threaded, the priority-inheritance boosts, and every task's
/// latest comm and prio.
pub(super) struct Lore<'l, 'a> {
    pub(super) known: &'l PidTable<(Cow<'a, str>, i64)>,
    pub(super) irq_names: &'l PidMap<Cow<'a, str>>,
    pub(super) irq_threads: &'l PidMap<i64>,
    pub(super) boosts: &'l PidMap<Boost<'a>>,
}

/// The measuring thread of a finished window, as [`Lore::name`] needs it.
pub(super) struct Measuring<'w> {
    pub(super) pid: i64,
    pub(super) comm: &'w str,
    pub(super) prio: i64,
}

impl<'a> Lore<'_, 'a> {
    /// The cause's name as reports show it, when the trace says more than the key's raw name
    /// (None: the key stays as it is). Kinds never change (the contract's):
    ///
    /// - the measuring thread's own time: one `switch-to-user (<comm>)` with its final comm
    ///   and prio (its first events may carry the process's name, or no known prio);
    /// - a softirq run in a task: `NET_RX (in ksoftirqd/1)`;
    /// - a threaded IRQ handler's thread: `IRQ 4 (ttyS0) thread irq/4-ttyS0, FIFO 96, above
    ///   the measuring thread (FIFO 95)`, as `task` (it had the right), `preempt_off` (it
    ///   kept the CPU from a higher thread) or `irq_off` (its IRQs off held the timer back);
    /// - the hard part of an IRQ whose thread the trace shows: `IRQ 4 (ttyS0) hard part`;
    /// - a lock owner boosted by priority inheritance, while boosted: `holder (lock owner
    ///   boosted by priority inheritance from normal prio 120 to FIFO 97, waiter pi-high 812)`.
    pub(super) fn name(&self, key: &Key<'a>, m: &Measuring<'_>) -> Option<Key<'a>> {
        let (kind, name, pid, prio) = key;
        match kind {
            CauseKind::Task if *pid == m.pid => {
                let own = switch_to_user(m.comm);
                (*name != own || *prio != m.prio).then_some((
                    CauseKind::Task,
                    Cow::Owned(own),
                    m.pid,
                    m.prio,
                ))
            }
            CauseKind::Softirq if *pid > 0 => {
                let comm = match self.known.get(pid) {
                    Some((c, _)) => c.to_string(),
                    None => format!("pid {pid}"),
                };
                Some((
                    *kind,
                    Cow::Owned(format!("{name} (in {comm})")),
                    *pid,
                    *prio,
                ))
            }
            CauseKind::Task | CauseKind::PreemptOff | CauseKind::IrqOff => {
                if let Some(n) = irq_thread_number(name) {
                    let action = match self.irq_names.get(&n) {
                        Some(a) => a.to_string(),
                        None => name[name.find('-').map_or(0, |i| i + 1)..].to_string(),
                    };
                    return Some((
                        *kind,
                        Cow::Owned(format!(
                            "IRQ {n} ({action}) thread {name}, {}, {} the measuring thread ({})",
                            prio_text(*prio),
                            against(*prio, m.prio),
                            prio_text(m.prio)
                        )),
                        *pid,
                        *prio,
                    ));
                }
                let b = self.boosts.get(pid).filter(|b| b.to == *prio)?;
                // The waiter as the scheduler's events name it last (a thread that named
                // itself after the boost was seen under its process's name then).
                let waiter = self.known.get(&b.waiter.0).map_or(&b.waiter.1, |(c, _)| c);
                Some((
                    *kind,
                    Cow::Owned(format!(
                        "{name} (lock owner boosted by priority inheritance from {} to {}, waiter {} {})",
                        prio_text(b.from),
                        prio_text(b.to),
                        waiter,
                        b.waiter.0
                    )),
                    *pid,
                    *prio,
                ))
            }
            CauseKind::Irq => {
                let (&n, _) = self
                    .irq_names
                    .iter()
                    .filter(|(n, a)| **a == *name && self.irq_threads.contains_key(n))
                    .min_by_key(|(n, _)| **n)?;
                Some((
                    *kind,
                    Cow::Owned(format!("IRQ {n} ({name}) hard part")),
                    *pid,
                    *prio,
                ))
            }
            _ => None,
        }
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
            context: None,
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
            steal: None,
            others: None,
            timerlat: None,
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
