//! The per-CPU state and its handlers: what each event means for the CPU it ran on.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::window::{MarkerEnd, Window};
use super::SampleMode;
use crate::record::CauseKind;
use crate::trace::classify::{classify, Ctx, Cur, Waiter};
use crate::trace::event::{Event, EventKind, TaskRef};
use crate::trace::pid_map::{PidMap, PidTable};
use crate::units::Nanos;

#[derive(Debug, Default)]
pub(super) struct CpuState<'a> {
    pub(super) last_ts: Option<Nanos>,
    pub(super) current: Option<Cur<'a>>,
    pub(super) stack: Vec<Ctx<'a>>,
    /// The previous event was in task context with IRQs off (not a sched_* event, which
    /// always runs under the runqueue lock).
    pub(super) task_irqs_off: bool,
    /// `now=` of the hrtimer being expired, if inside one.
    pub(super) expiring: Option<Nanos>,
    pub(super) windows: Vec<Window<'a>>,
    /// Last switch-in per pid, for cascades.
    pub(super) last_switch: PidMap<Nanos>,
    /// The noise mode's gaps not open yet, (start, end), latest first.
    pub(super) gaps: Vec<(Nanos, Nanos)>,
    /// The last [`SWITCHES_KEPT`] changes of the current task (time, to the idle task), oldest
    /// overwritten: what ran at a window's E when the window opens after it (its arming not in
    /// the trace, or late). A switch, or a TASK-PID column that disagrees with the last one
    /// (a switch missing from the trace), dated as [`CpuState::follow_pid`] charges it.
    switches: [(Nanos, bool); SWITCHES_KEPT],
    switches_seen: usize,
}

/// Switches a CPU remembers for [`CpuState::idle_at`].
const SWITCHES_KEPT: usize = 8;

/// The per-CPU handlers: what each event means for the CPU's state.
impl<'a> CpuState<'a> {
    /// The TASK-PID column is exact: the task on this CPU at this event. When it disagrees
    /// with the last sched_switch (a switch missing from the trace, or the trace's start), it
    /// wins — for the gap before this event too, since the switch happened somewhere in it.
    #[inline]
    pub(super) fn follow_pid_column(
        &mut self,
        ev: &Event<'a>,
        known: &PidTable<(Cow<'a, str>, i64)>,
    ) {
        self.follow_pid(ev.pid, ev.ts, || ev.task_comm.clone(), known);
    }

    /// [`Self::follow_pid_column`] for the event of `pid` at `ts`, whose TASK column
    /// `task_comm` gives (asked for only when the sched events have not named the pid). The
    /// change is remembered for [`Self::idle_at`] from the CPU's previous event on (the
    /// stretch [`Self::charge`] gives the new task), or from `ts` at the CPU's first event.
    #[inline]
    pub(super) fn follow_pid(
        &mut self,
        pid: i64,
        ts: Nanos,
        task_comm: impl FnOnce() -> Cow<'a, str>,
        known: &PidTable<(Cow<'a, str>, i64)>,
    ) {
        if self.column_differs(pid) {
            self.remember_switch(self.last_ts.unwrap_or(ts), pid == 0);
            let (comm, prio, prio_known) = match known.get(&pid) {
                Some((c, p)) => (c.clone(), *p, true),
                None if pid == 0 => (Cow::Borrowed("swapper"), 120, true),
                None => (task_comm(), 120, false),
            };
            self.current = Some(Cur {
                pid,
                comm,
                prio,
                prio_known,
            });
        }
    }

    /// Charge the time from the CPU's previous event to `t` (this event's time) to one cause
    /// per open window ([`classify`]), and note whether this event shows IRQs off in task
    /// context (evidence for the next stretch).
    #[inline]
    pub(super) fn charge(&mut self, ev: &Event<'a>, t: Nanos, mode: SampleMode) {
        let evidence = self.task_irqs_off
            || (ev.flags.irqs_off
                && !ev.flags.hardirq
                && !ev.flags.softirq
                && !ev.flags.nmi
                && !is_sched(&ev.kind));
        // The event shows the context charged for the stretch it ends: the same task, and an
        // event whose flags are that context's (see [`shows_context`]).
        let in_context =
            shows_context(&ev.kind) && self.current.as_ref().is_some_and(|c| c.pid == ev.pid);
        if let Some(a) = self.last_ts {
            let (stack, current) = (&self.stack, &self.current);
            for w in self.windows.iter_mut() {
                if mode == SampleMode::Wakeups && w.switched.is_some() {
                    continue;
                }
                let from = a.max(w.e);
                // A noise gap's window is charged up to the gap's end only.
                let to = w.until.map_or(t, |u| t.min(u));
                if to <= from {
                    continue;
                }
                if w.covered_from.is_none() {
                    w.covered_from = Some(from);
                    // The stretch from E: the task on the CPU then (pid 0: idle).
                    w.idle_at_e = from == w.e && current.as_ref().is_some_and(|c| c.pid == 0);
                }
                let waiter = Waiter {
                    pid: w.pid,
                    comm: &w.comm,
                    prio: w.prio,
                    woken: w.woken.is_some(),
                    noise: w.noise,
                };
                let key = classify(&waiter, stack, current, evidence);
                // The measuring thread's own way back to user space is no culprit: an IRQ
                // right after its switch-in finds the scheduler's preempt-off tail.
                let culprit = in_context && key.2 != w.pid;
                let kind = key.0;
                if let Some(i) = w.add(key, to - from) {
                    w.segment(i, from, to);
                    // This event ends the stretch: its flags are the culprit's context then.
                    if culprit {
                        if let CauseKind::Task
                        | CauseKind::PreemptOff
                        | CauseKind::IrqOff
                        | CauseKind::Softirq = kind
                        {
                            w.ctx[i].see(&ev.flags);
                        }
                    }
                }
            }
        }
        for i in 0..self.windows.len() {
            let w = &self.windows[i];
            if w.covered_from.is_none() && t >= w.e {
                // This event is at E (no stretch before it was charged): the switches say.
                let idle = t == w.e && self.idle_at(w.e);
                let w = &mut self.windows[i];
                w.covered_from = Some(t);
                w.idle_at_e = idle;
            }
        }
        self.last_ts = Some(t);
        self.task_irqs_off = ev.flags.irqs_off
            && !ev.flags.hardirq
            && !ev.flags.softirq
            && !ev.flags.nmi
            && !is_sched(&ev.kind);
    }

    /// The CPU was in its idle task at `e`: the last change of its current task at or before
    /// `e` (a switch, or a TASK-PID column that showed another task) was to pid 0 (false when
    /// the changes it remembers all came later, or there were none).
    pub(super) fn idle_at(&self, e: Nanos) -> bool {
        let n = self.switches_seen.min(SWITCHES_KEPT);
        (0..n)
            .map(|k| self.switches[(self.switches_seen - 1 - k) % SWITCHES_KEPT])
            .find(|&(t, _)| t <= e)
            .is_some_and(|(_, idle)| idle)
    }

    /// The noise mode: each gap that began by `t` opens a window for the task current then,
    /// the spinning thread (it read its clock at the gap's start): running, so what ran until
    /// its next read interrupted it. A window of its for an earlier gap whose marker never
    /// came is dropped.
    #[cold]
    pub(super) fn open_gaps(&mut self, t: Nanos) {
        while let Some(&(e, end)) = self.gaps.last().filter(|g| g.0 <= t) {
            self.gaps.pop();
            let Some(c) = self.current.as_ref() else {
                continue;
            };
            self.windows.retain(|w| w.pid != c.pid);
            let prio = c.prio_known.then_some(c.prio);
            let prev = self.last_switch.get(&c.pid).copied();
            let mut w = Window::new(c.pid, c.comm.clone(), prio, e, prev);
            w.noise = true;
            w.until = Some(end);
            w.woken = Some(e);
            w.switched = Some(e);
            self.windows.push(w);
        }
    }

    /// The noise mode: each gap's window whose end has come (at or before `t`, this event's
    /// time, after the stretch before it was charged) ends as a sample with the gap's own
    /// times, as its marker gives them.
    #[cold]
    pub(super) fn close_gaps(
        &mut self,
        t: Nanos,
        finished: &mut Vec<(Window<'a>, Option<MarkerEnd>)>,
    ) {
        let mut i = 0;
        while i < self.windows.len() {
            match self.windows[i].until {
                Some(end) if end <= t => {
                    let w = self.windows.remove(i);
                    let e = w.e;
                    finished.push((w, Some((e, end, Some(end - e), end))));
                }
                _ => i += 1,
            }
        }
    }

    /// `sched_switch`: `prev` leaves the CPU, `next` runs from now. No interrupt context is
    /// open across a switch. A waiting thread switched in has its switch-in (S); a thread
    /// switched out after its switch-in has finished its sample (wake-up mode). In marker
    /// mode a thread preempted (`R`, `R+`) before its marker keeps its window: the marker
    /// ends it (a FIFO 97 thread taking the CPU between the clock read and the marker left
    /// a 21 ms spike with no cause at all).
    pub(super) fn sched_switch(
        &mut self,
        t: Nanos,
        (prev, prev_state): (&TaskRef<'a>, &str),
        next: &TaskRef<'a>,
        markers: bool,
        finished: &mut Vec<(Window<'a>, Option<MarkerEnd>)>,
    ) {
        self.switch_to(t, next);
        let mut switched_in = false;
        let mut i = 0;
        while i < self.windows.len() {
            let w = &mut self.windows[i];
            if w.pid == next.pid && w.switched.is_none() && t >= w.e {
                w.switched = Some(t);
                w.prio = Some(next.prio);
                w.comm = next.comm.clone();
                w.at_switch = w.acc.clone();
                switched_in = true;
            }
            if w.pid == prev.pid {
                w.prio.get_or_insert(prev.prio);
                if w.switched.is_some() && markers && prev_state.starts_with('R') {
                    w.preempted.push((t, w.acc.clone()));
                } else if w.switched.is_some() {
                    finished.push((self.windows.remove(i), None));
                    continue;
                }
            }
            i += 1;
        }
        if switched_in {
            self.last_switch.insert(next.pid, t);
        }
    }

    /// What a switch to `next` at `t` does to the CPU whatever its windows: no interrupt
    /// context open, `next` current, the switch remembered ([`Self::idle_at`]).
    #[inline]
    pub(super) fn switch_to(&mut self, t: Nanos, next: &TaskRef<'a>) {
        self.stack.clear();
        self.expiring = None;
        self.current = Some(Cur {
            pid: next.pid,
            comm: next.comm.clone(),
            prio: next.prio,
            prio_known: true,
        });
        self.remember_switch(t, next.pid == 0);
    }

    /// [`Self::follow_pid`] for a `sched_switch` of `pid` at `ts` whose next task is made
    /// current at once: only the change it remembers (the current task itself is replaced).
    #[inline]
    pub(super) fn follow_pid_of_switch(&mut self, pid: i64, ts: Nanos) {
        if self.column_differs(pid) {
            self.remember_switch(self.last_ts.unwrap_or(ts), pid == 0);
        }
    }

    /// A TASK-PID column of `pid` names another task than the current one (or there is none).
    #[inline]
    fn column_differs(&self, pid: i64) -> bool {
        pid >= 0 && self.current.as_ref().is_none_or(|c| c.pid != pid)
    }

    /// A change of the current task at `t` for [`Self::idle_at`] (to the idle task: `idle`).
    #[inline]
    fn remember_switch(&mut self, t: Nanos, idle: bool) {
        self.switches[self.switches_seen % SWITCHES_KEPT] = (t, idle);
        self.switches_seen += 1;
    }

    /// `sched_waking`: `task` is made runnable (W), from the timer interrupt that expired its
    /// timer (L) for a sleeping RT thread. L is the start of the open interrupt context (the
    /// timer vector), else the expiring hrtimer's `now` (a kernel without `irq_vectors`), else
    /// W — never a softirq or other context the interrupt came inside of, which may have begun
    /// long before the timer was due. An RT thread woken without a window (its arming is not
    /// in the trace) gets one from E = the expiring timer's `now` at best.
    pub(super) fn sched_waking(&mut self, t: Nanos, task: &TaskRef<'a>) {
        let l = self
            .stack
            .iter()
            .find(|c| c.kind == CauseKind::Irq)
            .map(|c| c.start)
            .or(self.expiring)
            .unwrap_or(t)
            .min(t);
        match self.windows.iter_mut().find(|w| w.pid == task.pid) {
            Some(w) => {
                if w.woken.is_none() && t >= w.e {
                    w.woken = Some(t);
                    w.timer_irq = Some(l);
                }
                w.prio = Some(task.prio);
            }
            None if task.prio < 100 => {
                // Armed before the trace began: E is the expiry's `now` at best.
                let e = self.expiring.unwrap_or(t).min(t);
                let prev = self.last_switch.get(&task.pid).copied();
                let mut w = Window::new(task.pid, task.comm.clone(), Some(task.prio), e, prev);
                w.idle_at_e = self.idle_at(e);
                w.covered_from = Some(e);
                w.timer_irq = Some(l);
                w.woken = Some(t);
                self.windows.push(w);
            }
            None => {}
        }
    }

    /// `irq_handler_entry`: a device interrupt's handler starts; its time is the `irq`
    /// cause `name` until its exit.
    pub(super) fn irq_handler_entry(&mut self, t: Nanos, irq: i64, name: Cow<'a, str>) {
        self.enter(CauseKind::Irq, name, irq, t);
    }

    /// `irq_handler_exit`: the device interrupt's handler returned.
    pub(super) fn irq_handler_exit(&mut self, irq: i64) {
        pop(&mut self.stack, CauseKind::Irq, irq);
    }

    /// `irq_vectors:*_entry` (x86 `local_timer_entry`, `call_function_single_entry`, …): a
    /// CPU vector's handler starts (the timer interrupt itself is one); an `irq` cause.
    pub(super) fn vector_entry(&mut self, t: Nanos, vector: i64, name: Cow<'a, str>) {
        self.enter(CauseKind::Irq, name, vector, t);
    }

    /// `irq_vectors:*_exit`: the vector's handler returned.
    pub(super) fn vector_exit(&mut self, vector: i64) {
        pop(&mut self.stack, CauseKind::Irq, vector);
    }

    /// `softirq_entry`: a softirq (`TIMER`, `NET_RX`, `RCU`, …) runs; a `softirq` cause, net
    /// of the hardirqs nested in it, with the task it runs in (the TASK-PID column: on
    /// PREEMPT_RT a softirq runs in `ksoftirqd` or in the task that raised it, elsewhere in
    /// the task an interrupt's exit found) as its pid and prio; in the idle task, 0 and 0.
    pub(super) fn softirq_entry(&mut self, t: Nanos, vec: i64, name: Cow<'a, str>) {
        let task = match &self.current {
            Some(c) if c.pid > 0 => (c.pid, c.prio),
            _ => (0, 0),
        };
        self.enter(CauseKind::Softirq, name, vec, t);
        if let Some(c) = self.stack.last_mut() {
            c.task = task;
        }
    }

    /// `softirq_exit`: the softirq is done.
    pub(super) fn softirq_exit(&mut self, vec: i64) {
        pop(&mut self.stack, CauseKind::Softirq, vec);
    }

    /// `hrtimer_expire_entry`: an hrtimer's callback runs; `now` is the interrupt's notion
    /// of the time, E at best for a thread whose arming is not in the trace.
    pub(super) fn hrtimer_expire_entry(&mut self, now: Nanos) {
        self.expiring = Some(now);
    }

    /// `hrtimer_expire_exit`: the callback returned.
    pub(super) fn hrtimer_expire_exit(&mut self) {
        self.expiring = None;
    }

    /// `hrtimer_start` of `hrtimer_wakeup` (or of `timerlat_irq`, the timer timerlat arms for
    /// the thread it measures) by the task on the CPU: an RT thread (or one of unknown
    /// priority) goes to sleep until `expires` (E): its window opens, replacing its previous
    /// one (a sample if it was switched in).
    pub(super) fn hrtimer_start(
        &mut self,
        ev: &Event<'a>,
        expires: Nanos,
        finished: &mut Vec<(Window<'a>, Option<MarkerEnd>)>,
    ) {
        let prio = self
            .current
            .as_ref()
            .filter(|c| c.pid == ev.pid && c.prio_known)
            .map(|c| c.prio);
        if prio.is_none_or(|p| p < 100) {
            if let Some(i) = self.windows.iter().position(|w| w.pid == ev.pid) {
                let w = self.windows.remove(i);
                if w.switched.is_some() {
                    finished.push((w, None));
                }
            }
            let prev = self.last_switch.get(&ev.pid).copied();
            let mut w = Window::new(ev.pid, ev.task_comm.clone(), prio, expires, prev);
            if expires < ev.ts {
                // Armed for a time already past (the thread ran late beyond its next period):
                // covered from the arming; the switches say what ran at E.
                w.covered_from = Some(ev.ts);
                w.idle_at_e = self.idle_at(expires);
            }
            self.windows.push(w);
        }
    }

    /// `nmi_handler`: an NMI ran for `delta_ns`. It is recorded at its end, so its time is
    /// moved from the cause last charged (what it interrupted) to an `nmi` cause.
    pub(super) fn nmi_handler(&mut self, t: Nanos, handler: Cow<'a, str>, delta_ns: Nanos) {
        for w in self.windows.iter_mut() {
            if let Some(i) = w.last_key {
                let take = delta_ns.min(w.acc[i].1);
                if take > 0 {
                    w.acc[i].1 -= take;
                    let Some(nmi) = w.add((CauseKind::Nmi, handler.clone(), 0, 0), take) else {
                        continue;
                    };
                    // The lanes: the NMI's time is cut from the end of the last stretch (up
                    // to `t`, this event).
                    if let Some(&(_, a, b)) = w.segs.last() {
                        let cut = take.min(b - a);
                        if b == t && cut > 0 {
                            let last = w.segs.len() - 1;
                            w.segs[last].2 = b - cut;
                            if w.segs[last].2 == a {
                                w.segs.pop();
                            }
                            w.segs.push((nmi, b - cut, b));
                        }
                    }
                }
            }
        }
    }

    /// An interrupt context opens: the innermost one is charged until it closes.
    fn enter(&mut self, kind: CauseKind, name: Cow<'a, str>, id: i64, start: Nanos) {
        self.stack.push(Ctx {
            kind,
            name,
            id,
            start,
            task: (0, 0),
        });
    }
}

/// Per-CPU states: a CPU number indexes a vector (looked up for every event; a BTreeMap was 3 %
/// of the analysis), numbers beyond [`CpuMap::NEAR`] (a garbage trace) go to a map.
#[derive(Default)]
pub(super) struct CpuMap<'a> {
    near: Vec<Option<CpuState<'a>>>,
    far: BTreeMap<u32, CpuState<'a>>,
}

impl<'a> CpuMap<'a> {
    const NEAR: u32 = 4096;

    /// The CPU's state, created empty on first use.
    #[inline]
    pub(super) fn entry(&mut self, cpu: u32) -> &mut CpuState<'a> {
        if cpu >= Self::NEAR {
            return self.far.entry(cpu).or_default();
        }
        let i = cpu as usize;
        if i >= self.near.len() {
            self.near.resize_with(i + 1, || None);
        }
        self.near[i].get_or_insert_with(CpuState::default)
    }

    pub(super) fn get_mut(&mut self, cpu: u32) -> Option<&mut CpuState<'a>> {
        if cpu >= Self::NEAR {
            return self.far.get_mut(&cpu);
        }
        self.near.get_mut(cpu as usize)?.as_mut()
    }

    /// The CPUs seen, in increasing order.
    pub(super) fn cpus(&self) -> Vec<u32> {
        let near = self.near.iter().enumerate().filter(|(_, s)| s.is_some());
        near.map(|(i, _)| i as u32)
            .chain(self.far.keys().copied())
            .collect()
    }
}

/// Events whose flags are those of the context they ran in or interrupted: IRQ and vector
/// entries and exits, softirqs, hrtimer expiries (called outside the timer base's lock). Not
/// those traced under a lock of their own, whose preempt depth and IRQs-off are the lock's:
/// the scheduler's (runqueue and pi locks) and `hrtimer_start` (the base's lock: `d.h1.` in
/// every tick of a user-space loop on 6.12-rt).
fn shows_context(k: &EventKind) -> bool {
    matches!(
        k,
        EventKind::IrqEntry { .. }
            | EventKind::IrqExit { .. }
            | EventKind::SoftirqEntry { .. }
            | EventKind::SoftirqExit { .. }
            | EventKind::VectorEntry { .. }
            | EventKind::VectorExit { .. }
            | EventKind::HrtimerExpireEntry { .. }
            | EventKind::HrtimerExpireExit { .. }
    )
}

fn is_sched(k: &EventKind) -> bool {
    matches!(
        k,
        EventKind::SchedSwitch { .. }
            | EventKind::SchedWaking { .. }
            | EventKind::SchedWakeup { .. }
    )
}

pub(super) fn pop(stack: &mut Vec<Ctx<'_>>, kind: CauseKind, id: i64) {
    if let Some(i) = stack.iter().rposition(|c| c.kind == kind && c.id == id) {
        stack.truncate(i);
    }
}
