//! The end of a profile: every CPU accounted up to it, the record and the series made.

use std::collections::HashMap;

use super::record::{MeasuringThread, Preemptor, ProfileCpu, ProfileRecord, WaitRow};
use super::series::{cut, Series};
use super::watched::{K_RQ, K_SWITCH, K_WAKE};
use super::{Profiler, SERIES_NAMES, SERIES_NAME_BYTES};

impl Profiler {
    /// Close the profile at `end_ns` (every CPU accounted up to it): the record (top `top`
    /// wait rows, named by `comm`) and the series.
    pub fn finish(
        mut self,
        end_ns: u64,
        top: usize,
        comm: impl Fn(i64) -> String,
        lost_events: u64,
        lost_unknown: u64,
    ) -> (ProfileRecord, Series) {
        let end = end_ns.max(self.end_ns);
        for i in 0..self.cpus.len() {
            self.advance(i, end);
        }
        let cpus = self
            .cpus
            .iter()
            .map(|c| {
                let known: u64 = c.share_ns.iter().sum();
                ProfileCpu {
                    cpu: c.cpu,
                    rq_share: c
                        .share_ns
                        .iter()
                        .map(|&s| {
                            if known == 0 {
                                0.0
                            } else {
                                s as f64 / known as f64
                            }
                        })
                        .collect(),
                    switches: c.switches,
                    migrations: c.migrations,
                    known_ns: known,
                    gap_ns: c.gap_ns,
                    lost_events: c.lost,
                    unrecorded_switches: c.unrecorded,
                }
            })
            .collect();
        let mut rows: Vec<WaitRow> = self
            .stats
            .iter()
            .filter(|s| s.wake.n > 0 || s.preempt.n > 0)
            .map(|s| WaitRow {
                comm: comm(s.pid),
                pid: s.pid,
                prio: s.prio,
                wakeups: s.wake.n,
                p50_ns: s.wake.quantile(0.5),
                p99_ns: s.wake.quantile(0.99),
                max_ns: (s.wake.n > 0).then_some(s.wake.max),
                preemptions: s.preempt.n,
                preempt_p50_ns: s.preempt.quantile(0.5),
                preempt_p99_ns: s.preempt.quantile(0.99),
                preempt_max_ns: (s.preempt.n > 0).then_some(s.preempt.max),
            })
            .collect();
        rows.sort_by(|a, b| {
            (b.p99_ns, b.preempt_p99_ns, a.pid).cmp(&(a.p99_ns, a.preempt_p99_ns, b.pid))
        });
        let dropped = rows.len().saturating_sub(top) as u64;
        rows.truncate(top);
        for w in &mut self.watched {
            for k in &mut w.kinds {
                k.flush();
            }
        }
        let mut measuring: Vec<MeasuringThread> = self
            .watched
            .iter()
            .map(|w| MeasuringThread {
                cpu: w.cpu,
                tid: w.tid,
                bucket_ns: self.bucket_ns,
                wakeups: w.wakeups,
                switch_ins: w.switch_ins,
                preemptions: w.preemptions,
                preempted_by: preemptors(&w.preemptors, &comm),
                wake_interval: w.kinds[K_WAKE].record(),
                switch_interval: w.kinds[K_SWITCH].record(),
                rq_wait: w.kinds[K_RQ].record(),
            })
            .collect();
        // In CPU order, not in the order the trace first showed them (threads start at once).
        measuring.sort_by_key(|m| (m.cpu, m.tid));
        // The names of the tasks switched to most often (the switch map's legend).
        let mut counts: HashMap<i64, u64> = HashMap::new();
        for &(_, _, pid) in &self.switch_points {
            if pid > 0 {
                *counts.entry(pid).or_default() += 1;
            }
        }
        let mut by_count: Vec<(i64, u64)> = counts.into_iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let names = by_count
            .iter()
            .take(SERIES_NAMES)
            .map(|&(pid, _)| (pid, cut(comm(pid), SERIES_NAME_BYTES)))
            .collect();
        let record = ProfileRecord {
            start_ns: self.start_ns,
            duration_ns: end - self.start_ns,
            events: self.events,
            lost_events,
            lost_unknown,
            unrecorded_switches: self.cpus.iter().map(|c| c.unrecorded).sum(),
            seeded_tasks: self.seeded,
            // Every task got a stats row or was counted as untracked; rows outlive exits.
            tasks_seen: (self.stats.len() as u64) + self.untracked,
            tasks_untracked: self.untracked,
            pixel_ns: self.pixel_ns,
            series: None,
            cpus,
            wait: rows,
            wait_top: top,
            wait_dropped: dropped,
            measuring,
        };
        let series = Series {
            start_ns: self.start_ns,
            pixel_ns: self.pixel_ns,
            cpus: self.cpus.into_iter().map(|c| (c.cpu, c.pixels)).collect(),
            switches: self.switch_points,
            switches_dropped: self.switches_dropped,
            migrations: self.migration_points,
            migrations_dropped: self.migrations_dropped,
            names,
        };
        (record, series)
    }
}

/// The tasks that preempted a measuring thread, most often first (ties by pid), at most 5.
fn preemptors(by: &HashMap<i64, u64>, comm: &impl Fn(i64) -> String) -> Vec<Preemptor> {
    let mut v: Vec<(i64, u64)> = by.iter().map(|(&p, &n)| (p, n)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter()
        .take(5)
        .map(|(pid, count)| Preemptor {
            pid,
            comm: if pid == 0 { "idle".into() } else { comm(pid) },
            count,
        })
        .collect()
}
