//! Attribution: what delayed each sample, from plain tracepoints (sched, irq, irq_vectors, timer).
//!
//! In the spirit of rtla's timerlat auto-analysis, but without the timerlat tracer: a per-CPU
//! state machine fed one event at a time ([`Analyzer::feed`]). For every RT thread τ sleeping
//! on an `hrtimer_wakeup` timer (or on timerlat's `timerlat_irq`, which the kernel arms for the
//! thread timerlat measures) it keeps a *window* opened at the intended time E (the timer's
//! `expires=`, equal to latlab's own target). Each stretch of time between two events on that
//! CPU is charged, for every open window it overlaps, to exactly one cause:
//!
//! - the innermost open hardirq / irq-vector / softirq / NMI context (`irq`, `softirq`, `nmi`),
//!   so nested contexts count net of their children;
//! - before τ's wake-up (timer *delivery*): the CPU was idle or a task ran while the timer IRQ
//!   did not come. With evidence of IRQs off in task context that is `irq_off` (the task);
//!   otherwise tracepoints cannot tell a stall of the host from an SMI or an IRQ-off region
//!   left untraced, so it is `unknown`, named "silent gap" ("silent gap (idle)" from idle).
//!   Only evidence from outside the trace makes it `hypervisor`: the CPU's steal time around
//!   the spike ([`SpikeRecord::judge_silent`](crate::record::SpikeRecord::judge_silent));
//! - between wake-up and switch-in: the task on the CPU. A task of higher (or equal RT)
//!   priority is a legitimate `task`; one of lower priority kept the CPU although τ was
//!   runnable — a non-preemptible section — so `preempt_off`, named after it;
//! - after switch-in (only when the sample's end is known from a latlab marker): τ's own way
//!   back to user space up to its clock read, *switch to user*: kind `task` (τ's pid and prio),
//!   named `switch-to-user (<τ's comm>)` by
//!   [`switch_to_user`](crate::trace::classify::switch_to_user), so it is never mistaken for
//!   another task that kept the CPU.
//!
//! Causes therefore sum to the traced part of the latency; what the trace does not cover
//! (history overwritten, a window opened late) stays *unexplained* — reported, never spread
//! over the causes.
//!
//! Samples: a `LATLAB_STOP cpu=C intended=E actual=R latency=L` marker (written by latlab's
//! measurement thread; also the older `latlab seq=N target=E now=R lat_ns=L`) gives a sample's
//! exact E and R. Without markers every wake-up of an RT task (kernel prio < 100) is a sample
//! from E (its hrtimer's `expires`, or the timer's `now=` when the arming is not in the trace)
//! to its switch-in S: there is no user-space clock read in a trace, so S stands for R.

use std::borrow::Cow;

use crate::trace::classify::{irq_thread_number, Boost};
use crate::trace::event::{Event, EventKind, TaskRef};
use crate::trace::parser::Record;
use crate::trace::pid_map::{PidMap, PidTable};
use crate::units::Nanos;

mod cpu;
mod ending;
mod marker;
mod quiet;
mod sample;
mod window;

use cpu::CpuMap;
pub(super) use marker::is_latlab_marker;
pub use marker::{gaps_in, noise_gap, parse_marker, NoiseGap};
pub use sample::Sample;
use window::{MarkerEnd, Window};

/// How samples are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleMode {
    /// latlab markers give the samples (the trace must contain them).
    Markers,
    /// Every wake-up of an RT task is a sample.
    Wakeups,
}

#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    /// Samples at or above this latency are spikes (kept with their causes).
    pub threshold_ns: Nanos,
    /// None: markers if the trace has any, else wake-ups.
    pub mode: Option<SampleMode>,
    /// The noise mode's gaps (from its markers, found before the events are fed: a spinning
    /// thread arms no timer, so nothing in the trace opens its window at E).
    pub gaps: Vec<NoiseGap>,
}
/// The result of an analysis.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Samples at or above the threshold, in trace order.
    pub spikes: Vec<Sample>,
    /// Every sample seen.
    pub samples: u64,
    pub events: u64,
    /// `(cpu, events)` of `[LOST N EVENTS]` markers.
    pub lost: Vec<(u32, u64)>,
    pub mode: Option<SampleMode>,
    /// Lines of text that are not events (nor comments, headers, lost-events lines), left out.
    pub skipped_lines: u64,
    /// The first [`SKIPPED_KEPT`] texts skipped: (line, why).
    pub skipped: Vec<(usize, String)>,
    /// One line each: lines skipped, time going backwards on a CPU, a cut last line.
    pub warnings: Vec<String>,
}

/// How many skipped texts an [`Analysis`] names (the count covers all).
pub const SKIPPED_KEPT: usize = 5;

/// The state machine. Feed events in time order per CPU. Names are borrowed from the events
/// (so from the trace text) for as long as the analysis needs them: no string per event.
pub struct Analyzer<'a> {
    opts: AnalyzeOptions,
    mode: SampleMode,
    cpus: CpuMap<'a>,
    /// pid → (comm, prio) as the sched events name them (the TASK column can be stale).
    known: PidTable<(Cow<'a, str>, i64)>,
    /// Device IRQ number → its action name (`irq_handler_entry`), for naming its thread.
    irq_names: PidMap<Cow<'a, str>>,
    /// IRQ number → the pid of its handler thread (`irq/N-…`), when the trace shows one.
    irq_threads: PidMap<i64>,
    /// Owner pid → its last priority-inheritance boost (`sched_pi_setprio`).
    boosts: PidMap<Boost<'a>>,
    out: Analysis,
    /// Added to the line numbers of the events fed (those of a block count from its start).
    pub line_offset: usize,
    /// Steps back in time on a CPU: how many, and the first few (line, cpu, ns back).
    backwards: u64,
    backwards_first: Vec<(usize, u32, Nanos)>,
    /// The last line, when it has no newline (as the parser numbers it), and what to say.
    cut_line: Option<usize>,
    cut: Option<String>,
}
pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
impl<'a> Analyzer<'a> {
    pub fn new(opts: AnalyzeOptions, mode: SampleMode) -> Analyzer<'a> {
        let mut cpus = CpuMap::default();
        for g in &opts.gaps {
            cpus.entry(g.cpu).gaps.push((g.start_ns, g.end_ns));
        }
        for cpu in cpus.cpus() {
            // Latest first: the next one due is popped from the end.
            cpus.entry(cpu).gaps.sort_unstable_by(|a, b| b.cmp(a));
        }
        Analyzer {
            opts,
            mode,
            cpus,
            known: PidTable::default(),
            irq_names: PidMap::default(),
            irq_threads: PidMap::default(),
            boosts: PidMap::default(),
            out: Analysis {
                mode: Some(mode),
                ..Default::default()
            },
            line_offset: 0,
            backwards: 0,
            backwards_first: Vec::new(),
            cut_line: None,
            cut: None,
        }
    }

    /// Events fed so far.
    pub(super) fn events(&self) -> u64 {
        self.out.events
    }

    /// Feed one record of the parser.
    #[inline]
    pub fn record(&mut self, r: &Record<'a>) {
        match r {
            Record::Event(e) => self.feed(e),
            Record::Lost { cpu, events, .. } => self.lost(*cpu, *events),
            Record::Skipped { line, lines, msg } => self.skipped(*line, *lines, msg),
            Record::CutShort { line } => self.cut_short(*line),
        }
    }

    /// `lines` lines from `line` are not events: counted, the first few named.
    pub fn skipped(&mut self, line: usize, lines: usize, msg: &str) {
        self.out.skipped_lines += lines as u64;
        if self.out.skipped.len() < SKIPPED_KEPT {
            self.out
                .skipped
                .push((line + self.line_offset, msg.to_string()));
        }
    }

    /// The first text skipped, (line, why).
    pub fn first_skipped(&self) -> Option<(usize, &str)> {
        self.out.skipped.first().map(|(l, m)| (*l, m.as_str()))
    }

    /// The last line (`line`) has no newline: the record fed next holds it. A latlab marker
    /// there is read without its last field, which may have lost characters ([`Self::feed`]).
    pub fn cut_short(&mut self, line: usize) {
        self.cut_line = Some(line);
        let line = line + self.line_offset;
        self.cut = Some(format!(
            "line {line}: the last line is cut short (no newline at the end: a truncated file?)"
        ));
    }

    pub fn lost(&mut self, cpu: u32, events: u64) {
        self.out.lost.push((cpu, events));
        // History before this point is incomplete: forget open contexts.
        if let Some(st) = self.cpus.get_mut(cpu) {
            st.stack.clear();
            st.expiring = None;
        }
    }

    /// Feed one event: a scheduler event on a quiet CPU by the quiet path
    /// ([`Self::try_quiet`]: what the rest would do to it, in short), any other in full
    /// ([`Self::feed_event`]).
    #[inline]
    pub fn feed(&mut self, ev: &Event<'a>) {
        if !self.try_quiet(ev) {
            self.feed_event(ev);
        }
    }

    /// Feed one event in full: the time since the CPU's previous event is charged to the open
    /// windows (`CpuState::charge`), then the event's own handler updates the CPU's state.
    /// One handler per event, as rtla's timerlat auto-analysis has (each says what its event
    /// means); windows that end on this event become samples.
    pub(super) fn feed_event(&mut self, ev: &Event<'a>) {
        self.out.events += 1;
        match &ev.kind {
            EventKind::SchedSwitch { prev, next, .. } => {
                learn(&mut self.known, prev);
                learn(&mut self.known, next);
                self.irq_thread(next);
            }
            EventKind::SchedWaking { task, .. } => {
                learn(&mut self.known, task);
                self.irq_thread(task);
            }
            EventKind::IrqEntry { irq, name } if self.irq_names.get(irq) != Some(name) => {
                self.irq_names.insert(*irq, name.clone());
            }
            _ => {}
        }
        let st = self.cpus.entry(ev.cpu);
        st.follow_pid_column(ev, &self.known);
        if !st.gaps.is_empty() {
            // A gap begun before this event: its window opens, with the task current then
            // (this event's, when the trace missed a switch).
            st.open_gaps(ev.ts);
        }
        let t = match st.last_ts {
            // Out of order: no time passes (counted, and warned about).
            Some(l) if ev.ts < l => {
                self.backwards += 1;
                if self.backwards_first.len() < 3 {
                    self.backwards_first
                        .push((ev.line + self.line_offset, ev.cpu, l - ev.ts));
                }
                l
            }
            _ => ev.ts,
        };
        st.charge(ev, t, self.mode);

        let mut finished: Vec<(Window<'a>, Option<MarkerEnd>)> = Vec::new();
        if st
            .windows
            .iter()
            .any(|w| w.until.is_some_and(|end| end <= t))
        {
            st.close_gaps(t, &mut finished);
        }
        match &ev.kind {
            EventKind::SchedSwitch {
                prev,
                prev_state,
                next,
            } => st.sched_switch(
                t,
                (prev, prev_state),
                next,
                self.mode == SampleMode::Markers,
                &mut finished,
            ),
            EventKind::SchedWaking { task, .. } => st.sched_waking(t, task),
            EventKind::SchedWakeup { .. }
            | EventKind::SchedPiSetprio { .. }
            | EventKind::Other { .. } => {}
            EventKind::IrqEntry { irq, name } => st.irq_handler_entry(t, *irq, name.clone()),
            EventKind::IrqExit { irq } => st.irq_handler_exit(*irq),
            EventKind::VectorEntry { name, vector } => st.vector_entry(t, *vector, name.clone()),
            EventKind::VectorExit { vector, .. } => st.vector_exit(*vector),
            EventKind::SoftirqEntry { vec, name } => st.softirq_entry(t, *vec, name.clone()),
            EventKind::SoftirqExit { vec, .. } => st.softirq_exit(*vec),
            EventKind::HrtimerExpireEntry { now, .. } => st.hrtimer_expire_entry(*now),
            EventKind::HrtimerExpireExit { .. } => st.hrtimer_expire_exit(),
            EventKind::HrtimerStart {
                function, expires, ..
            } if function == "hrtimer_wakeup" || function == "timerlat_irq" => {
                st.hrtimer_start(ev, *expires, &mut finished)
            }
            EventKind::HrtimerStart { .. } => {}
            EventKind::Nmi { handler, delta_ns } => st.nmi_handler(t, handler.clone(), *delta_ns),
            EventKind::Marker { text } if self.mode == SampleMode::Markers => {
                self.trace_marker(ev, t, text, &mut finished)
            }
            EventKind::Marker { .. } => {}
        }
        let cpu = ev.cpu;
        for (w, m) in finished {
            self.finish_window(cpu, w, m);
        }
        // After the stretch before it was charged at the old priority.
        if let EventKind::SchedPiSetprio { task, newprio } = &ev.kind {
            self.pi_setprio(ev, task, *newprio);
        }
    }

    /// A task named `irq/N-…` is IRQ N's handler thread (the IRQ is threaded).
    #[inline]
    fn irq_thread(&mut self, t: &TaskRef<'a>) {
        if t.comm.starts_with("irq/") {
            if let Some(n) = irq_thread_number(&t.comm) {
                self.irq_threads.insert(n, t.pid);
            }
        }
    }

    /// `sched_pi_setprio`: priority inheritance moves `task` (a lock owner) from `task.prio`
    /// to `newprio`. A boost (a higher priority: a lower number) is written by the waiter
    /// that blocks on the lock (the event's TASK-PID column); kept, so the owner's time at
    /// the boosted priority is named as such when a sample ends ([`Lore::name`]).
    fn pi_setprio(&mut self, ev: &Event<'a>, task: &TaskRef<'a>, newprio: i64) {
        // From now on the task runs at `newprio` (a deboost lets a higher waiter in at once).
        if let Some(k) = self.known.get_mut(&task.pid) {
            k.1 = newprio;
        }
        for cpu in self.cpus.cpus() {
            if let Some(c) = self.cpus.entry(cpu).current.as_mut() {
                if c.pid == task.pid {
                    c.prio = newprio;
                    c.prio_known = true;
                }
            }
        }
        if newprio < task.prio {
            let waiter = match self.known.get(&ev.pid) {
                Some((c, _)) => c.clone(),
                None => ev.task_comm.clone(),
            };
            self.boosts.insert(
                task.pid,
                Boost {
                    from: task.prio,
                    to: newprio,
                    waiter: (ev.pid, waiter),
                },
            );
        }
    }

    /// End of the trace: windows already switched in are samples (wake-up mode).
    pub fn finish(mut self) -> Analysis {
        for cpu in self.cpus.cpus() {
            let ws = std::mem::take(&mut self.cpus.entry(cpu).windows);
            for w in ws {
                if w.switched.is_some() {
                    self.finish_window(cpu, w, None);
                }
            }
        }
        let o = &mut self.out;
        if o.skipped_lines > 0 {
            let (line, why) = &o.skipped[0];
            let also: Vec<String> = o.skipped[1..].iter().map(|(l, _)| l.to_string()).collect();
            o.warnings.push(format!(
                "{} line{} skipped: not trace events (first: line {line}: {why}{})",
                o.skipped_lines,
                plural(o.skipped_lines as usize),
                if also.is_empty() {
                    String::new()
                } else {
                    format!("; then line{} {}", plural(also.len()), also.join(", "))
                }
            ));
        }
        if let Some(&(line, cpu, back)) = self.backwards_first.first() {
            let also: Vec<String> = self.backwards_first[1..]
                .iter()
                .map(|(l, c, _)| format!("{l} (CPU {c})"))
                .collect();
            o.warnings.push(format!(
                "time goes backwards {} time{} (first: line {line}, CPU {cpu}, {:.1} us before the event before it on that CPU{}): no time is counted across such a step",
                self.backwards,
                plural(self.backwards as usize),
                back as f64 / 1000.0,
                if also.is_empty() {
                    String::new()
                } else {
                    format!("; then line{} {}", plural(also.len()), also.join(", "))
                }
            ));
        }
        o.warnings.extend(self.cut.take());
        self.out
    }
}

pub(super) fn learn<'a>(known: &mut PidTable<(Cow<'a, str>, i64)>, t: &TaskRef<'a>) {
    if t.pid <= 0 {
        return;
    }
    match known.get_mut(&t.pid) {
        // A borrowed name is stored as it comes, without a look at the one stored (it lies in
        // an older part of the trace, out of the cache by now): the same text either way.
        Some(k) if matches!(t.comm, Cow::Borrowed(_)) => *k = (t.comm.clone(), t.prio),
        Some(k) if k.1 == t.prio && super::bytes::eq_short(k.0.as_bytes(), t.comm.as_bytes()) => {}
        Some(k) => *k = (t.comm.clone(), t.prio),
        None => {
            known.insert(t.pid, (t.comm.clone(), t.prio));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
