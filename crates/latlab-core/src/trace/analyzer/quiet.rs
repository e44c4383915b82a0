//! The scheduler's two busiest events on a quiet CPU, fed without an [`Event`]: nine events
//! in ten of a busy trace are a `sched_switch` or a `sched_waking`, and on a CPU with no open
//! window (nearly always) each only updates a few fields of the analyzer's state. A reader
//! that has the fields where they lie (the binary decoder's records) asks [`Analyzer::quiet`]
//! and, when it says yes, hands over the tasks alone ([`Analyzer::quiet_switch`],
//! [`Analyzer::quiet_waking`]); otherwise it builds the event for [`Analyzer::feed`], which
//! takes the same path for the events it is given ([`Analyzer::try_quiet`]).
//!
//! Each updates exactly what the full path ([`Analyzer::feed_event`]) would for the same event
//! on such a CPU (a
//! unit test feeds both ways and compares): the pid's names and priorities, the IRQ threads,
//! the CPU's last time, its IRQs-off evidence (a sched event never shows any) and its current
//! task. Nothing else can change there: with no window, nothing is charged
//! ([`CpuState::charge`](super::cpu::CpuState::charge) only notes the time and the evidence),
//! no switch-in or wake-up is recorded, no sample ends.

use std::borrow::Cow;

use super::{learn, Analyzer};
use crate::trace::event::{Event, EventKind, TaskRef};
use crate::units::Nanos;

impl<'a> Analyzer<'a> {
    /// Whether a `sched_switch` or `sched_waking` on `cpu` at `ts` may be fed by
    /// [`Self::quiet_switch`] or [`Self::quiet_waking`]: the CPU has no open window, no noise
    /// gap of its begins by `ts` (it would open one), and its time does not go backwards at
    /// `ts` (counted and warned about, with the event's line).
    #[inline]
    pub fn quiet(&mut self, cpu: u32, ts: Nanos) -> bool {
        let st = self.cpus.entry(cpu);
        st.windows.is_empty()
            && st.gaps.last().is_none_or(|g| g.0 > ts)
            && st.last_ts.is_none_or(|l| l <= ts)
    }

    /// A `sched_switch` on `cpu` at `ts` from `prev` to `next`, recorded by the task of `pid`
    /// (the TASK-PID column), where [`Self::quiet`] said yes: what [`Self::feed_event`] does
    /// with it. The task the column would make current is replaced by `next` before anything
    /// reads it, but a column that disagrees with the current task (a switch missing from the
    /// trace) is remembered for the exit from idle, as [`CpuState::follow_pid`] does.
    #[inline]
    pub fn quiet_switch(
        &mut self,
        (cpu, ts): (u32, Nanos),
        pid: i64,
        prev: &TaskRef<'a>,
        next: &TaskRef<'a>,
    ) {
        self.out.events += 1;
        learn(&mut self.known, prev);
        learn(&mut self.known, next);
        self.irq_thread(next);
        let st = self.cpus.entry(cpu);
        st.follow_pid_of_switch(pid, ts);
        st.last_ts = Some(ts);
        st.task_irqs_off = false;
        st.switch_to(ts, next);
    }

    /// A `sched_waking` of `task` on `cpu` at `ts`, recorded by the task of `pid` (the
    /// TASK-PID column; its name from `task_comm`, asked for only when the sched events have
    /// not named it), where [`Self::quiet`] said yes: what [`Self::feed_event`] does with it.
    /// False, and nothing done, for an RT task (prio below 100): its wake-up opens a window
    /// (its arming was not in the trace), so the event goes to [`Self::feed_event`].
    #[inline]
    pub fn quiet_waking(
        &mut self,
        (cpu, ts): (u32, Nanos),
        pid: i64,
        task: &TaskRef<'a>,
        task_comm: impl FnOnce() -> Cow<'a, str>,
    ) -> bool {
        if task.prio < 100 {
            return false;
        }
        self.out.events += 1;
        learn(&mut self.known, task);
        self.irq_thread(task);
        let st = self.cpus.entry(cpu);
        st.follow_pid(pid, ts, task_comm, &self.known);
        st.last_ts = Some(ts);
        st.task_irqs_off = false;
        true
    }

    /// `ev` fed by the quiet path when it is a `sched_switch` or a `sched_waking` and its
    /// CPU is quiet ([`Self::quiet`]); whether it was ([`Self::feed`] feeds the others in
    /// full). The text parser's events come built: this spares them the rest of `feed`.
    #[inline]
    pub(super) fn try_quiet(&mut self, ev: &Event<'a>) -> bool {
        match &ev.kind {
            EventKind::SchedSwitch { prev, next, .. } if self.quiet(ev.cpu, ev.ts) => {
                self.quiet_switch((ev.cpu, ev.ts), ev.pid, prev, next);
                true
            }
            EventKind::SchedWaking { task, .. } if self.quiet(ev.cpu, ev.ts) => {
                self.quiet_waking((ev.cpu, ev.ts), ev.pid, task, || ev.task_comm.clone())
            }
            _ => false,
        }
    }
}
