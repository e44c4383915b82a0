//! timerlat's contexts side by side: for a `--backend timerlat` run or an imported `rtla
//! timerlat hist`, each CPU's IRQ latency (timer expiry → its handler), thread latency
//! (→ the thread runs in the kernel) and, with user-space threads, return-to-user latency
//! (→ back in user space), one row each, so where the delay arises reads off the table.

use latlab_core::hist::Histogram;
use latlab_core::model::RunModel;
use latlab_core::stats::Stats;

use crate::figures::{opt, pbound};
use crate::tables::Table;

/// The contexts' table, or none when no CPU has a second context.
pub fn tables(m: &RunModel) -> Vec<Table> {
    let mut t = Table::new(
        "Latency by context (timerlat)",
        &[
            "CPU: context",
            "samples",
            "min",
            "avg",
            "p99",
            "p99.9",
            "max",
        ],
    );
    for c in &m.record.cpus {
        let (Some(mode), Some(model)) = (c.mode.as_ref(), m.cpus.iter().find(|x| x.cpu == c.cpu))
        else {
            continue;
        };
        if mode.irq.is_none() && mode.thread.is_none() {
            continue;
        }
        // The CPU's own histogram is the return to user with user-space threads (a thread
        // series beside it), else the thread latency.
        let own = if mode.thread.is_some() || mode.timerlat_threads.as_deref() == Some("user") {
            "user (return to user space)"
        } else {
            "thread"
        };
        let mut rows: Vec<(&str, Stats)> = Vec::new();
        for (what, h) in [("IRQ", &mode.irq), ("thread", &mode.thread)] {
            if let Some(h) = h.as_ref().and_then(|h| Histogram::from_record(h).ok()) {
                rows.push((what, Stats::of(&h, 0)));
            }
        }
        rows.push((own, model.stats.clone()));
        for (what, s) in rows {
            t.rows.push(vec![
                format!("CPU {}: {what}", c.cpu),
                s.samples.to_string(),
                opt(s.min_ns),
                opt(s.mean_ns),
                pbound("p99", s.p99_ns, &s),
                pbound("p99.9", s.p999_ns, &s),
                opt(s.max_ns),
            ]);
        }
    }
    if t.rows.is_empty() {
        return Vec::new();
    }
    t.note = Some(
        "IRQ: timer expiry to its interrupt handler; thread: to the measuring thread running in the kernel; user: back in user space. A delay in the IRQ context is interrupts held off or the hardware; one that appears only from the thread on is the scheduler's (a task, a non-preemptible section)."
            .into(),
    );
    vec![t]
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_core::import::{import, From};

    fn model(fixture: &str) -> RunModel {
        let path = format!(
            "{}/../latlab-core/tests/fixtures/import/{fixture}",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(path).unwrap();
        RunModel::new(import(&bytes, From::Rtla, fixture).unwrap()).unwrap()
    }

    /// An imported `rtla timerlat hist`: each CPU's IRQ latency beside its thread latency,
    /// with the figures of each series; a run without a second context has no table.
    #[test]
    fn an_rtla_import_shows_irq_and_thread_per_cpu() {
        let m = model("rtla-timerlat-hist.txt");
        let t = tables(&m);
        assert_eq!(t.len(), 1);
        let names: Vec<&str> = t[0].rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(
            names,
            ["CPU 0: IRQ", "CPU 0: thread", "CPU 1: IRQ", "CPU 1: thread"]
        );
        let irq = latlab_core::hist::Histogram::from_record(
            m.record.cpus[0]
                .mode
                .as_ref()
                .unwrap()
                .irq
                .as_ref()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(t[0].rows[0][1], irq.count().to_string());
        assert_eq!(t[0].rows[1][1], m.cpus[0].stats.samples.to_string());
        let mut plain = m.clone();
        for c in &mut plain.record.cpus {
            c.mode = None;
        }
        assert!(tables(&plain).is_empty());
    }
}
