//! The scheduler profile as plain tables for the text and markdown reports (the HTML page
//! draws it: [`crate::profile`]).

use latlab_core::profile::ProfileRecord;
use latlab_core::units::Human;

use crate::profile::MEASURING_KINDS;

/// Task rows of the waits table in the text and markdown reports (the HTML shows 20).
pub const TEXT_WAITS: usize = 10;

/// The profile as plain tables for the text and markdown reports: the run-queue shares per
/// CPU (with the events and what was lost), the worst run-queue waits (at most `waits` tasks)
/// and latlab's measuring threads' cycles and waits. Cells are plain text, escaped by each
/// renderer.
pub fn tables(p: &ProfileRecord, waits: usize) -> Vec<crate::tables::Table> {
    use crate::tables::Table;
    let h = |v: Option<u64>| v.map_or("-".to_string(), |v| Human(v).to_string());
    let mut out = Vec::new();
    let mut rq = Table::new(
        "Scheduler profile: run-queue length per CPU (share of the known time)",
        &[
            "CPU",
            "idle",
            "1",
            "2",
            "3",
            "4",
            "≥ 5",
            "switches",
            "migrations in",
            "gaps",
        ],
    );
    for c in &p.cpus {
        let mut row = vec![c.cpu.to_string()];
        for k in 0..6 {
            let v = c.rq_share.get(k).copied().unwrap_or(0.0);
            row.push(format!("{:.1} %", 100.0 * v));
        }
        row.push(c.switches.to_string());
        row.push(c.migrations.to_string());
        row.push(Human(c.gap_ns).to_string());
        rq.rows.push(row);
    }
    rq.note = Some(format!(
        "{} scheduler events over {}; {} lost by the kernel{}; {} tasks seen, {} seeded runnable from /proc at the start. Tasks on the run queue include the running one.",
        p.events,
        Human(p.duration_ns),
        p.lost_events,
        if p.lost_unknown > 0 {
            format!(" (and {} pages with an unknown loss)", p.lost_unknown)
        } else {
            String::new()
        },
        p.tasks_seen,
        p.seeded_tasks
    ));
    out.push(rq);
    for g in crate::profile::wait_groups(p, waits) {
        let mut t = Table::new(
            g.title,
            &[
                "task",
                "pid",
                "prio",
                "wake-ups",
                "wait p50",
                "wait p99",
                "wait max",
                "preemptions",
                "preempted p99",
                "preempted max",
            ],
        );
        t.rows = g.rows;
        t.note = Some("wait: wake-up to switch-in; preempted: switched out while runnable, to switched in again.".into());
        out.push(t);
    }
    if !p.measuring.is_empty() {
        let mut t = Table::new(
            "latlab's measuring threads, as the scheduler saw them",
            &["thread: what", "count", "p50", "p99", "max"],
        );
        for m in &p.measuring {
            for (what, pick) in MEASURING_KINDS {
                let k = pick(m);
                t.rows.push(vec![
                    format!("CPU {} (tid {}): {what}", m.cpu, m.tid),
                    k.count.to_string(),
                    h(k.p50_ns),
                    h(k.p99_ns),
                    h(k.max_ns),
                ]);
            }
        }
        t.note = Some(format!(
            "Wake-ups: {}. The run-queue wait is the scheduling part of each sample's latency. {}",
            p.measuring
                .iter()
                .map(|m| format!("CPU {} {}", m.cpu, m.wakeups))
                .collect::<Vec<_>>()
                .join(", "),
            crate::profile::preemption_note(p)
        ));
        out.push(t);
    }
    out
}
