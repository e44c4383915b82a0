//! The events: how each scheduler event moves tasks on and off the run queues and what it
//! measures.

use super::watched::{K_RQ, K_SWITCH, K_WAKE};
use super::{Ev, PEvent, Profiler, WaitKind};
use super::{MAX_MIGRATION_POINTS, MAX_SWITCH_POINTS};

impl Profiler {
    /// One event; events must come in time order (ties: any order within a CPU's own order).
    pub fn event(&mut self, e: &PEvent) {
        self.apply(e);
        if e.lost_after {
            if let Some(&ci) = self.by_cpu.get(&e.cpu) {
                let c = &mut self.cpus[ci];
                c.lost += 1;
                // Unknown from here to this CPU's next own event: other CPUs' events that
                // move tasks on or off its run queue meanwhile advance it as a gap.
                c.in_gap = true;
            }
        }
    }

    fn apply(&mut self, e: &PEvent) {
        self.events += 1;
        // An event of a CPU outside the profile still moves tasks (wake-ups, migrations).
        if let Some(&ci) = self.by_cpu.get(&e.cpu) {
            if e.lost_before {
                let c = &mut self.cpus[ci];
                c.lost += 1;
                // The time since this CPU's last event is unknown.
                c.in_gap = true;
            }
            if self.cpus[ci].in_gap {
                // Whatever ran meanwhile is unknown.
                self.cpus[ci].current = None;
            }
            self.advance(ci, e.ts);
            self.cpus[ci].in_gap = false;
        }
        self.end_ns = self.end_ns.max(e.ts);
        match e.ev {
            Ev::Switch {
                prev_pid,
                prev_prio,
                prev_runnable,
                prev_dead,
                next_pid,
                next_prio,
            } => {
                if let Some(&ci) = self.by_cpu.get(&e.cpu) {
                    let c = &mut self.cpus[ci];
                    c.switches += 1;
                    // A task switched out that the record never switched in: the kernel
                    // recorded its switch-out, not the switch before it (with no loss said).
                    if c.current.is_some_and(|p| p != prev_pid) {
                        c.unrecorded += 1;
                    }
                    c.current = Some(next_pid);
                }
                if prev_pid > 0 {
                    let t = self.task(prev_pid, prev_prio);
                    t.prio = prev_prio;
                    t.running = false;
                    if prev_runnable {
                        t.since = Some((e.ts, WaitKind::Preempt));
                        self.place(prev_pid, Some(e.cpu), e.ts);
                        if let Some(&w) = self.watch_of.get(&prev_pid) {
                            let w = &mut self.watched[w];
                            w.preemptions += 1;
                            *w.preemptors.entry(next_pid.max(0)).or_default() += 1;
                        }
                    } else {
                        t.since = None;
                        self.place(prev_pid, None, e.ts);
                        if prev_dead {
                            // Gone: a later task with this pid starts afresh (new stats row).
                            self.tasks.remove(&prev_pid);
                            self.watch_of.remove(&prev_pid);
                        }
                    }
                }
                if next_pid > 0 {
                    let t = self.task(next_pid, next_prio);
                    t.prio = next_prio;
                    t.running = true;
                    t.waking = None;
                    let since = t.since.take();
                    let stats = t.stats;
                    if let Some(si) = stats {
                        self.stats[si].prio = next_prio;
                    }
                    if let (Some((s, kind)), Some(si)) = (since, stats) {
                        let d = e.ts.saturating_sub(s);
                        match kind {
                            WaitKind::Wakeup => self.stats[si].wake.add(d),
                            WaitKind::Preempt => self.stats[si].preempt.add(d),
                        }
                    }
                    if let Some(&w) = self.watch_of.get(&next_pid) {
                        self.watched[w].switch_ins += 1;
                        if let Some(last) = self.watched[w].last_in.replace(e.ts) {
                            self.watch_add(w, K_SWITCH, e.ts, e.ts.saturating_sub(last));
                        }
                        if let Some((s, WaitKind::Wakeup)) = since {
                            self.watch_add(w, K_RQ, e.ts, e.ts.saturating_sub(s));
                        }
                    }
                    self.place(next_pid, Some(e.cpu), e.ts);
                }
                if self.switch_points.len() < MAX_SWITCH_POINTS {
                    self.switch_points.push((e.ts, e.cpu, next_pid));
                } else {
                    self.switches_dropped += 1;
                }
            }
            Ev::Waking { pid } => {
                if pid > 0 {
                    let t = self.task(pid, 0);
                    if t.cpu.is_none() {
                        t.waking = Some(e.ts);
                    }
                }
            }
            Ev::Wakeup {
                pid,
                prio,
                target_cpu,
                new,
            } => {
                if pid <= 0 {
                    return;
                }
                if new {
                    // A new task: whatever an earlier holder of the pid left is not its state.
                    self.place(pid, None, e.ts);
                    if let Some(t) = self.tasks.get_mut(&pid) {
                        t.since = None;
                        t.running = false;
                    }
                }
                let t = self.task(pid, prio);
                t.prio = prio;
                let waking = t.waking.take();
                if t.cpu.is_some() {
                    // Already queued (woken before it slept, or seeded): no wait starts.
                    return;
                }
                t.since = if new {
                    None
                } else {
                    Some((waking.unwrap_or(e.ts), WaitKind::Wakeup))
                };
                self.place(pid, Some(target_cpu.unwrap_or(e.cpu)), e.ts);
                if let (false, Some(&w)) = (new, self.watch_of.get(&pid)) {
                    let at = waking.unwrap_or(e.ts);
                    self.watched[w].wakeups += 1;
                    if let Some(last) = self.watched[w].last_wake.replace(at) {
                        self.watch_add(w, K_WAKE, at, at.saturating_sub(last));
                    }
                }
            }
            Ev::Migrate { pid, orig, dest } => {
                if let Some(&di) = self.by_cpu.get(&dest) {
                    self.cpus[di].migrations += 1;
                    if self.migration_points.len() < MAX_MIGRATION_POINTS {
                        self.migration_points.push((e.ts, pid, orig, dest));
                    } else {
                        self.migrations_dropped += 1;
                    }
                }
                if pid <= 0 {
                    return;
                }
                let t = self.task(pid, 0);
                if t.cpu.is_some() || t.running {
                    let _ = orig;
                    self.place(pid, Some(dest), e.ts);
                }
            }
        }
    }
}
