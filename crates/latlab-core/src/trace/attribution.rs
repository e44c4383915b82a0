//! Attribution: what delayed each sample, from plain tracepoints (sched, irq, irq_vectors, timer).
//!
//! In the spirit of rtla's timerlat auto-analysis, but without the timerlat tracer: a per-CPU
//! state machine fed one event at a time ([`Analyzer::feed`]). For every RT thread τ sleeping
//! on an `hrtimer_wakeup` timer it keeps a *window* opened at the intended time E (the timer's
//! `expires=`, equal to latlab's own target). Each stretch of time between two events on that
//! CPU is charged, for every open window it overlaps, to exactly one cause:
//!
//! - the innermost open hardirq / irq-vector / softirq / NMI context (`irq`, `softirq`, `nmi`),
//!   so nested contexts count net of their children;
//! - before τ's wake-up (timer *delivery*): the CPU was idle or a task ran while the timer IRQ
//!   did not come. With evidence of IRQs off in task context that is `irq_off` (the task);
//!   otherwise tracepoints cannot tell a hypervisor stall from an IRQ-off region, so it is
//!   `hypervisor` on a virtual machine, else `unknown`, named "timer delivery";
//! - between wake-up and switch-in: the task on the CPU. A task of higher (or equal RT)
//!   priority is a legitimate `task`; one of lower priority kept the CPU although τ was
//!   runnable — a non-preemptible section — so `preempt_off`, named after it;
//! - after switch-in (only when the sample's end is known from a latlab marker): τ's own way
//!   back to user space up to its clock read, *switch to user*: kind `task` (τ's pid and prio),
//!   named `switch-to-user (<τ's comm>)` by [`switch_to_user`], so it is never mistaken for
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
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

use super::event::{Event, EventKind, TaskRef};
use super::parser::{no_events, ParseError, Parser, Record};
use crate::record::{Cause, CauseKind, SpikeRecord};
use crate::units::Nanos;

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
    /// The machine is a VM: silent gaps in timer delivery are hypervisor stalls.
    pub virtualized: bool,
    /// None: markers if the trace has any, else wake-ups.
    pub mode: Option<SampleMode>,
}

/// One analyzed sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub cpu: u32,
    pub pid: i64,
    pub comm: String,
    pub prio: i64,
    /// Intended wake-up (E), trace clock ns.
    pub intended_ns: Nanos,
    /// Timer IRQ entry (L) of the wake-up, if traced.
    pub timer_irq_ns: Option<Nanos>,
    /// `sched_waking` of the thread (W).
    pub wakeup_ns: Option<Nanos>,
    /// Switch-in (S).
    pub switch_in_ns: Option<Nanos>,
    /// The thread's own clock read (R), from a marker.
    pub actual_ns: Option<Nanos>,
    pub latency_ns: Nanos,
    /// Largest first; they sum to `latency_ns - unexplained_ns`.
    pub causes: Vec<Cause>,
    pub unexplained_ns: Nanos,
    /// E lies before the previous sample's switch-in: a consequence of that one's stall.
    pub cascade: bool,
    pub from_marker: bool,
}

impl Sample {
    pub fn explained_ns(&self) -> Nanos {
        self.causes.iter().map(|c| c.ns).sum()
    }

    /// A short text timeline relative to E (µs with one decimal).
    pub fn timeline(&self) -> Vec<String> {
        let e = self.intended_ns;
        let rel = |t: Nanos| {
            let d = t as i128 - e as i128;
            format!("{:+10.1} us", d as f64 / 1000.0)
        };
        let mut v = vec![format!(
            "{}  timer due for {} (pid {}, prio {}) on CPU {}",
            rel(e),
            printable(&self.comm),
            self.pid,
            self.prio,
            self.cpu
        )];
        if let Some(l) = self.timer_irq_ns {
            v.push(format!("{}  timer interrupt entry", rel(l)));
        }
        if let Some(w) = self.wakeup_ns {
            v.push(format!("{}  thread woken (sched_waking)", rel(w)));
        }
        if let Some(s) = self.switch_in_ns {
            v.push(format!("{}  switched in", rel(s)));
        }
        if let Some(r) = self.actual_ns {
            v.push(format!("{}  thread read its clock", rel(r)));
        }
        v.push(format!(
            "latency {:.1} us; explained {:.1} us; unexplained {:.1} us{}",
            self.latency_ns as f64 / 1000.0,
            self.explained_ns() as f64 / 1000.0,
            self.unexplained_ns as f64 / 1000.0,
            if self.cascade {
                " (cascade of the previous stall)"
            } else {
                ""
            }
        ));
        for c in &self.causes {
            v.push(format!(
                "  {:>10.1} us {:>5.1}%  {:<11} {}{}",
                c.ns as f64 / 1000.0,
                100.0 * c.ns as f64 / self.latency_ns.max(1) as f64,
                kind_str(c.kind),
                printable(&c.name),
                if c.pid > 0 {
                    format!(" (pid {}, prio {})", c.pid, c.prio)
                } else {
                    String::new()
                }
            ));
        }
        v
    }

    pub fn to_spike(&self) -> SpikeRecord {
        SpikeRecord {
            cpu: self.cpu,
            at_ns: self.intended_ns,
            latency_ns: self.latency_ns,
            causes: self.causes.clone(),
            trace_file: None,
            timeline: self.timeline(),
        }
    }
}

/// Name of the *switch to user* part (switch-in → the thread's own clock read): a `task`
/// cause with the thread's pid and prio, labelled so it cannot be read as another task.
pub fn switch_to_user(comm: &str) -> String {
    format!("switch-to-user ({comm})")
}

/// The contract's name of a cause kind.
pub fn kind_str(k: CauseKind) -> &'static str {
    match k {
        CauseKind::Irq => "irq",
        CauseKind::Softirq => "softirq",
        CauseKind::Task => "task",
        CauseKind::Nmi => "nmi",
        CauseKind::PreemptOff => "preempt_off",
        CauseKind::IrqOff => "irq_off",
        CauseKind::Hypervisor => "hypervisor",
        CauseKind::Unknown => "unknown",
    }
}

/// Task names are untrusted text: show control characters escaped (no terminal escapes).
pub fn printable(s: &str) -> String {
    s.chars()
        .flat_map(|c| c.escape_debug_if_control())
        .collect()
}

trait EscapeControl {
    fn escape_debug_if_control(self) -> Vec<char>;
}

impl EscapeControl for char {
    fn escape_debug_if_control(self) -> Vec<char> {
        if self.is_control() {
            self.escape_default().collect()
        } else {
            vec![self]
        }
    }
}

type Key<'a> = (CauseKind, Cow<'a, str>, i64, i64);

/// Multiplicative hash for pid keys: the analyzer looks a pid up for almost every event, and
/// SipHash's DoS resistance buys nothing for a trace file.
#[derive(Default)]
struct PidHasher(u64);

impl std::hash::Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_i64(&mut self, n: i64) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type PidMap<V> = HashMap<i64, V, BuildHasherDefault<PidHasher>>;

/// A sample's end from its marker: (intended, actual, latency, marker timestamp).
type MarkerEnd = (Nanos, Nanos, Option<Nanos>, Nanos);

#[derive(Debug, Clone)]
struct Ctx<'a> {
    kind: CauseKind,
    name: Cow<'a, str>,
    /// irq number / vector / softirq vec, to match the exit.
    id: i64,
    start: Nanos,
}

#[derive(Debug, Clone)]
struct Cur<'a> {
    pid: i64,
    comm: Cow<'a, str>,
    /// 120 (CFS default) when not known yet.
    prio: i64,
    prio_known: bool,
}

#[derive(Debug, Clone)]
struct Window<'a> {
    pid: i64,
    comm: Cow<'a, str>,
    prio: Option<i64>,
    e: Nanos,
    /// Time from which the trace covered this window (E, or later when history is missing).
    covered_from: Option<Nanos>,
    timer_irq: Option<Nanos>,
    woken: Option<Nanos>,
    switched: Option<Nanos>,
    acc: Vec<(Key<'a>, Nanos)>,
    /// `acc` at the switch-in.
    at_switch: Vec<(Key<'a>, Nanos)>,
    last_key: Option<usize>,
    /// The previous switch-in of this thread on this CPU (for cascades).
    prev_switch: Option<Nanos>,
}

impl<'a> Window<'a> {
    fn add(&mut self, key: Key<'a>, ns: Nanos) {
        if ns == 0 {
            return;
        }
        match self.acc.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                self.acc[i].1 += ns;
                self.last_key = Some(i);
            }
            None => {
                self.acc.push((key, ns));
                self.last_key = Some(self.acc.len() - 1);
            }
        }
    }
}

#[derive(Debug, Default)]
struct CpuState<'a> {
    last_ts: Option<Nanos>,
    current: Option<Cur<'a>>,
    stack: Vec<Ctx<'a>>,
    /// The previous event was in task context with IRQs off (not a sched_* event, which
    /// always runs under the runqueue lock).
    task_irqs_off: bool,
    /// `now=` of the hrtimer being expired, if inside one.
    expiring: Option<Nanos>,
    windows: Vec<Window<'a>>,
    /// Last switch-in per pid, for cascades.
    last_switch: PidMap<Nanos>,
}

/// Per-CPU states: a CPU number indexes a vector (looked up for every event; a BTreeMap was 3 %
/// of the analysis), numbers beyond [`CpuMap::NEAR`] (a garbage trace) go to a map.
#[derive(Default)]
struct CpuMap<'a> {
    near: Vec<Option<CpuState<'a>>>,
    far: BTreeMap<u32, CpuState<'a>>,
}

impl<'a> CpuMap<'a> {
    const NEAR: u32 = 4096;

    /// The CPU's state, created empty on first use.
    #[inline]
    fn entry(&mut self, cpu: u32) -> &mut CpuState<'a> {
        if cpu >= Self::NEAR {
            return self.far.entry(cpu).or_default();
        }
        let i = cpu as usize;
        if i >= self.near.len() {
            self.near.resize_with(i + 1, || None);
        }
        self.near[i].get_or_insert_with(CpuState::default)
    }

    fn get_mut(&mut self, cpu: u32) -> Option<&mut CpuState<'a>> {
        if cpu >= Self::NEAR {
            return self.far.get_mut(&cpu);
        }
        self.near.get_mut(cpu as usize)?.as_mut()
    }

    /// The CPUs seen, in increasing order.
    fn cpus(&self) -> Vec<u32> {
        let near = self.near.iter().enumerate().filter(|(_, s)| s.is_some());
        near.map(|(i, _)| i as u32)
            .chain(self.far.keys().copied())
            .collect()
    }
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
    known: PidMap<(Cow<'a, str>, i64)>,
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

fn is_sched(k: &EventKind) -> bool {
    matches!(
        k,
        EventKind::SchedSwitch { .. }
            | EventKind::SchedWaking { .. }
            | EventKind::SchedWakeup { .. }
    )
}

/// Parse a latlab marker: `(intended, actual, latency)`.
pub fn parse_marker(text: &str) -> Option<(Nanos, Nanos, Option<Nanos>)> {
    let field = |k: &str| -> Option<Nanos> {
        text.split_whitespace()
            .find_map(|t| t.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
    };
    if text.contains("LATLAB_STOP") {
        Some((field("intended")?, field("actual")?, field("latency")))
    } else if text.starts_with("latlab seq=") {
        Some((field("target")?, field("now")?, field("lat_ns")))
    } else {
        None
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A trace_marker text that is latlab's (whether or not its fields can be read).
fn is_latlab_marker(text: &str) -> bool {
    text.contains("LATLAB_STOP") || text.starts_with("latlab seq=")
}

impl<'a> Analyzer<'a> {
    pub fn new(opts: AnalyzeOptions, mode: SampleMode) -> Analyzer<'a> {
        Analyzer {
            opts,
            mode,
            cpus: CpuMap::default(),
            known: PidMap::default(),
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

    /// Feed one event.
    pub fn feed(&mut self, ev: &Event<'a>) {
        self.out.events += 1;
        let virtualized = self.opts.virtualized;
        let mode = self.mode;
        match &ev.kind {
            EventKind::SchedSwitch { prev, next, .. } => {
                learn(&mut self.known, prev);
                learn(&mut self.known, next);
            }
            EventKind::SchedWaking { task, .. } => learn(&mut self.known, task),
            _ => {}
        }
        let st = self.cpus.entry(ev.cpu);
        // The PID column is exact: the task on this CPU at this event. When it disagrees with
        // the last sched_switch (a switch missing from the trace, or the trace's start), it
        // wins — for the gap before this event too, since the switch happened somewhere in it.
        if ev.pid >= 0 && st.current.as_ref().is_none_or(|c| c.pid != ev.pid) {
            let (comm, prio, prio_known) = match self.known.get(&ev.pid) {
                Some((c, p)) => (c.clone(), *p, true),
                None if ev.pid == 0 => (Cow::Borrowed("swapper"), 120, true),
                None => (ev.task_comm.clone(), 120, false),
            };
            st.current = Some(Cur {
                pid: ev.pid,
                comm,
                prio,
                prio_known,
            });
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
        // 1. Charge the time since the previous event.
        let evidence = st.task_irqs_off
            || (ev.flags.irqs_off
                && !ev.flags.hardirq
                && !ev.flags.softirq
                && !ev.flags.nmi
                && !is_sched(&ev.kind));
        if let Some(a) = st.last_ts {
            let (stack, current) = (&st.stack, &st.current);
            for w in st.windows.iter_mut() {
                if mode == SampleMode::Wakeups && w.switched.is_some() {
                    continue;
                }
                let from = a.max(w.e);
                if t <= from {
                    continue;
                }
                if w.covered_from.is_none() {
                    w.covered_from = Some(from);
                }
                let key = classify(w, stack, current, evidence, virtualized);
                w.add(key, t - from);
            }
        }
        for w in st.windows.iter_mut() {
            if w.covered_from.is_none() && t >= w.e {
                w.covered_from = Some(t);
            }
        }
        st.last_ts = Some(t);
        st.task_irqs_off = ev.flags.irqs_off
            && !ev.flags.hardirq
            && !ev.flags.softirq
            && !ev.flags.nmi
            && !is_sched(&ev.kind);

        // 2. Update the state.
        let mut finished: Vec<(Window<'a>, Option<MarkerEnd>)> = Vec::new();
        match &ev.kind {
            EventKind::SchedSwitch { prev, next, .. } => {
                st.stack.clear();
                st.expiring = None;
                st.current = Some(Cur {
                    pid: next.pid,
                    comm: next.comm.clone(),
                    prio: next.prio,
                    prio_known: true,
                });
                let mut switched_in = false;
                let mut i = 0;
                while i < st.windows.len() {
                    let w = &mut st.windows[i];
                    if w.pid == next.pid && w.switched.is_none() && t >= w.e {
                        w.switched = Some(t);
                        w.prio = Some(next.prio);
                        w.comm = next.comm.clone();
                        w.at_switch = w.acc.clone();
                        switched_in = true;
                    }
                    if w.pid == prev.pid {
                        w.prio.get_or_insert(prev.prio);
                        if w.switched.is_some() {
                            finished.push((st.windows.remove(i), None));
                            continue;
                        }
                    }
                    i += 1;
                }
                if switched_in {
                    st.last_switch.insert(next.pid, t);
                }
            }
            EventKind::SchedWaking { task, .. } => {
                let l = st.stack.first().map(|c| c.start).unwrap_or(t);
                match st.windows.iter_mut().find(|w| w.pid == task.pid) {
                    Some(w) => {
                        if w.woken.is_none() && t >= w.e {
                            w.woken = Some(t);
                            w.timer_irq = Some(l);
                        }
                        w.prio = Some(task.prio);
                    }
                    None if task.prio < 100 => {
                        // Armed before the trace began: E is the expiry's `now` at best.
                        let e = st.expiring.unwrap_or(t).min(t);
                        st.windows.push(Window {
                            pid: task.pid,
                            comm: task.comm.clone(),
                            prio: Some(task.prio),
                            e,
                            covered_from: Some(e),
                            timer_irq: Some(l),
                            woken: Some(t),
                            switched: None,
                            acc: Vec::new(),
                            at_switch: Vec::new(),
                            last_key: None,
                            prev_switch: st.last_switch.get(&task.pid).copied(),
                        });
                    }
                    None => {}
                }
            }
            EventKind::SchedWakeup { .. } | EventKind::Other { .. } => {}
            EventKind::IrqEntry { irq, name } => st.stack.push(Ctx {
                kind: CauseKind::Irq,
                name: name.clone(),
                id: *irq,
                start: t,
            }),
            EventKind::VectorEntry { name, vector } => st.stack.push(Ctx {
                kind: CauseKind::Irq,
                name: name.clone(),
                id: *vector,
                start: t,
            }),
            EventKind::SoftirqEntry { vec, name } => st.stack.push(Ctx {
                kind: CauseKind::Softirq,
                name: name.clone(),
                id: *vec,
                start: t,
            }),
            EventKind::IrqExit { irq } => pop(&mut st.stack, CauseKind::Irq, *irq),
            EventKind::VectorExit { vector, .. } => pop(&mut st.stack, CauseKind::Irq, *vector),
            EventKind::SoftirqExit { vec, .. } => pop(&mut st.stack, CauseKind::Softirq, *vec),
            EventKind::HrtimerExpireEntry { now, .. } => st.expiring = Some(*now),
            EventKind::HrtimerExpireExit { .. } => st.expiring = None,
            EventKind::HrtimerStart {
                function, expires, ..
            } if function == "hrtimer_wakeup" => {
                let prio = st
                    .current
                    .as_ref()
                    .filter(|c| c.pid == ev.pid && c.prio_known)
                    .map(|c| c.prio);
                if prio.is_none_or(|p| p < 100) {
                    if let Some(i) = st.windows.iter().position(|w| w.pid == ev.pid) {
                        let w = st.windows.remove(i);
                        if w.switched.is_some() {
                            finished.push((w, None));
                        }
                    }
                    st.windows.push(Window {
                        pid: ev.pid,
                        comm: ev.task_comm.clone(),
                        prio,
                        e: *expires,
                        covered_from: None,
                        timer_irq: None,
                        woken: None,
                        switched: None,
                        acc: Vec::new(),
                        at_switch: Vec::new(),
                        last_key: None,
                        prev_switch: st.last_switch.get(&ev.pid).copied(),
                    });
                }
            }
            EventKind::HrtimerStart { .. } => {}
            EventKind::Nmi { handler, delta_ns } => {
                // Recorded at the end of the NMI: move its time from what we charged to it.
                for w in st.windows.iter_mut() {
                    if let Some(i) = w.last_key {
                        let take = (*delta_ns).min(w.acc[i].1);
                        if take > 0 {
                            w.acc[i].1 -= take;
                            w.add((CauseKind::Nmi, handler.clone(), 0, 0), take);
                        }
                    }
                }
            }
            EventKind::Marker { text } if mode == SampleMode::Markers => {
                // On a cut last line the last field may have lost digits (`latency=13351`
                // for 13351484): it is not read (the latency is then actual − intended).
                let cut = self.cut_line == Some(ev.line) && is_latlab_marker(text);
                let m = if cut {
                    text.trim_end()
                        .rsplit_once(' ')
                        .and_then(|(h, _)| parse_marker(h))
                } else {
                    parse_marker(text)
                };
                if cut {
                    let what = if m.is_some() {
                        "the last latlab marker is cut short: its last field is not read"
                    } else {
                        "the last latlab marker is cut short: its sample is lost"
                    };
                    let line = ev.line + self.line_offset;
                    self.cut = Some(format!(
                        "line {line}: {what} (no newline at the end: a truncated file?)"
                    ));
                }
                if let Some((e, r, l)) = m {
                    let w = match st.windows.iter().position(|w| w.pid == ev.pid) {
                        Some(i) => st.windows.remove(i),
                        None => Window {
                            pid: ev.pid,
                            comm: ev.task_comm.clone(),
                            prio: st.current.as_ref().filter(|c| c.prio_known).map(|c| c.prio),
                            e,
                            covered_from: None,
                            timer_irq: None,
                            woken: None,
                            switched: None,
                            acc: Vec::new(),
                            at_switch: Vec::new(),
                            last_key: None,
                            prev_switch: None,
                        },
                    };
                    finished.push((w, Some((e, r, l, t))));
                }
            }
            EventKind::Marker { .. } => {}
        }
        let cpu = ev.cpu;
        for (w, m) in finished {
            self.finish_window(cpu, w, m);
        }
    }

    fn finish_window(&mut self, cpu: u32, w: Window<'a>, marker: Option<MarkerEnd>) {
        let st = self.cpus.entry(cpu);
        let (e, r, latency, mut acc) = match marker {
            Some((e, r, l, _)) => (e, Some(r), l.unwrap_or(r.saturating_sub(e)), w.acc.clone()),
            None => {
                if self.mode == SampleMode::Markers {
                    return;
                }
                let Some(s) = w.switched else { return };
                if w.prio.is_none_or(|p| p >= 100) {
                    return;
                }
                (w.e, None, s.saturating_sub(w.e), w.at_switch.clone())
            }
        };
        // The marker is written after the clock read: that time is τ's own, not the sample's.
        if let Some((_, r, _, m)) = marker {
            let mut extra = m.saturating_sub(r);
            let own = (
                CauseKind::Task,
                Cow::Owned(switch_to_user(&w.comm)),
                w.pid,
                w.prio.unwrap_or(0),
            );
            if let Some(x) = acc.iter_mut().find(|(k, _)| *k == own) {
                let take = extra.min(x.1);
                x.1 -= take;
                extra -= take;
            }
            let _ = extra;
        }
        acc.retain(|(_, ns)| *ns > 0);
        let mut sum: Nanos = acc.iter().map(|(_, n)| n).sum();
        if sum > latency {
            // Clocks disagree (trace_clock not mono?): never claim more than the latency.
            let scale = latency as f64 / sum as f64;
            for (_, n) in acc.iter_mut() {
                *n = (*n as f64 * scale).floor() as Nanos;
            }
            sum = acc.iter().map(|(_, n)| n).sum();
        }
        let mut causes: Vec<Cause> = acc
            .into_iter()
            .filter(|(_, ns)| *ns > 0)
            .map(|((kind, name, pid, prio), ns)| Cause {
                kind,
                name: name.into_owned(),
                pid,
                prio,
                ns,
            })
            .collect();
        sort_causes(&mut causes);
        let cascade = w.prev_switch.is_some_and(|s| e < s);
        if let Some(sw) = w.switched {
            st.last_switch.insert(w.pid, sw);
        }
        let sample = Sample {
            cpu,
            pid: w.pid,
            comm: w.comm.into_owned(),
            prio: w.prio.unwrap_or(0),
            intended_ns: e,
            timer_irq_ns: w.timer_irq,
            wakeup_ns: w.woken,
            switch_in_ns: w.switched,
            actual_ns: r,
            latency_ns: latency,
            unexplained_ns: latency - sum,
            causes,
            cascade,
            from_marker: marker.is_some(),
        };
        self.out.samples += 1;
        if sample.latency_ns >= self.opts.threshold_ns {
            self.out.spikes.push(sample);
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

fn learn<'a>(known: &mut PidMap<(Cow<'a, str>, i64)>, t: &TaskRef<'a>) {
    if t.pid <= 0 {
        return;
    }
    match known.get_mut(&t.pid) {
        Some(k) if k.1 == t.prio && super::bytes::eq_short(k.0.as_bytes(), t.comm.as_bytes()) => {}
        Some(k) => *k = (t.comm.clone(), t.prio),
        None => {
            known.insert(t.pid, (t.comm.clone(), t.prio));
        }
    }
}

fn pop(stack: &mut Vec<Ctx<'_>>, kind: CauseKind, id: i64) {
    if let Some(i) = stack.iter().rposition(|c| c.kind == kind && c.id == id) {
        stack.truncate(i);
    }
}

fn classify<'a>(
    w: &Window<'a>,
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
            Cow::Owned(switch_to_user(&w.comm)),
            w.pid,
            w.prio.unwrap_or(cur.prio),
        );
    }
    if w.woken.is_none() {
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

/// `opts.mode`, or when None: markers if the trace holds a latlab marker, else wake-ups.
fn mode_of(text: &str, opts: &AnalyzeOptions) -> SampleMode {
    opts.mode.unwrap_or_else(|| {
        if has_markers(text) {
            SampleMode::Markers
        } else {
            SampleMode::Wakeups
        }
    })
}

/// Analyze a whole text trace. With `opts.mode == None` the mode is markers if the trace holds
/// a latlab marker, else wake-ups.
pub fn analyze_text(text: &str, opts: &AnalyzeOptions) -> Result<Analysis, ParseError> {
    let mode = mode_of(text, opts);
    let mut a = Analyzer::new(opts.clone(), mode);
    for r in Parser::new(text) {
        a.record(&r);
    }
    if a.out.events == 0 {
        return Err(no_events(text, a.first_skipped()));
    }
    Ok(a.finish())
}

/// [`analyze_text`] with the parsing spread over `threads` threads (the attribution stays one
/// state machine fed in trace order). Same result, same first error, for any block size: text
/// is cut only where the streaming parser holds no state ([`super::blocks::blocks`]). Memory
/// stays bounded: each worker runs at most four blocks ahead of the feeder.
pub fn analyze_text_parallel(
    text: &str,
    opts: &AnalyzeOptions,
    threads: usize,
) -> Result<Analysis, ParseError> {
    analyze_blocks(text, opts, threads, PARALLEL_BLOCK)
}

/// [`analyze_text_parallel`] on bytes as read from a file, with the options of the mode the
/// trace calls for (markers when it holds a latlab marker, else wake-ups). None when the bytes
/// are not UTF-8: the caller analyzes a lossy copy.
///
/// No pass over the whole file comes first. Each worker checks its own block for UTF-8 just
/// before parsing it (the block is then in its cache). The mode: the recorder's marker ends
/// its trace, so the last MiB is looked at first; without a marker there, the analysis runs as
/// wake-ups while each worker also looks for a marker in its block, and one found anywhere
/// starts the analysis over as markers (the result is always the mode's own).
pub fn analyze_bytes_parallel(
    bytes: &[u8],
    threads: usize,
    opts_for: impl Fn(SampleMode) -> AnalyzeOptions,
) -> Option<Result<Analysis, ParseError>> {
    auto_blocks(bytes, threads, PARALLEL_BLOCK, &opts_for)
}

/// Bytes per parsed block: its records (~168 bytes per ~135-byte line) stay in a core's cache
/// between the worker that writes them and the feeder that reads them.
const PARALLEL_BLOCK: usize = 256 << 10;

/// [`analyze_text_parallel`] with a chosen block size (tests and the fuzz target use tiny
/// blocks to cut small inputs many times).
#[doc(hidden)]
pub fn analyze_blocks(
    text: &str,
    opts: &AnalyzeOptions,
    threads: usize,
    block: usize,
) -> Result<Analysis, ParseError> {
    if threads <= 1 || text.len() < 2 * block {
        return analyze_text(text, opts);
    }
    let mut opts = opts.clone();
    opts.mode = Some(mode_of(text, &opts));
    analyze_byte_blocks(text.as_bytes(), &opts, threads, block).expect("a str is UTF-8")
}

/// [`analyze_bytes_parallel`] with a chosen block size (tests and the fuzz target); with
/// `opts.mode == None` the mode is found as there, with the same options for either.
#[doc(hidden)]
pub fn analyze_byte_blocks(
    bytes: &[u8],
    opts: &AnalyzeOptions,
    threads: usize,
    block: usize,
) -> Option<Result<Analysis, ParseError>> {
    match opts.mode {
        Some(_) => run_blocks(bytes, opts, threads, block, false).done(),
        None => auto_blocks(bytes, threads, block, &|m| AnalyzeOptions {
            mode: Some(m),
            ..opts.clone()
        }),
    }
}

/// A block as text: ASCII (a kernel trace, nearly always) is checked a word at a time, anything
/// else by the full UTF-8 check.
fn block_str(b: &[u8]) -> Option<&str> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(b) });
    }
    std::str::from_utf8(b).ok()
}

/// How a run over blocks ended.
enum Outcome {
    NotUtf8,
    /// A block holds a latlab marker (only when watching for one).
    MarkerSeen,
    Done(Result<Analysis, ParseError>),
}

impl Outcome {
    fn done(self) -> Option<Result<Analysis, ParseError>> {
        match self {
            Outcome::Done(r) => Some(r),
            Outcome::NotUtf8 => None,
            Outcome::MarkerSeen => unreachable!("markers are watched for by auto_blocks only"),
        }
    }
}

fn auto_blocks(
    bytes: &[u8],
    threads: usize,
    block: usize,
    opts_for: &dyn Fn(SampleMode) -> AnalyzeOptions,
) -> Option<Result<Analysis, ParseError>> {
    let markers = |yes| {
        if yes {
            SampleMode::Markers
        } else {
            SampleMode::Wakeups
        }
    };
    if threads <= 1 || bytes.len() < 2 * block {
        let mode = markers(has_markers_bytes(bytes));
        return run_blocks(bytes, &opts_for(mode), threads, block, false).done();
    }
    if tail_has_markers(bytes) {
        return run_blocks(bytes, &opts_for(SampleMode::Markers), threads, block, false).done();
    }
    match run_blocks(bytes, &opts_for(SampleMode::Wakeups), threads, block, true) {
        Outcome::MarkerSeen => {
            run_blocks(bytes, &opts_for(SampleMode::Markers), threads, block, false).done()
        }
        o => o.done(),
    }
}

/// The parallel analysis with `opts.mode` set. `watch`: stop with [`Outcome::MarkerSeen`] at
/// the first block that holds a latlab marker (each block is line-aligned, so a marker line is
/// whole in one block).
fn run_blocks(
    bytes: &[u8],
    opts: &AnalyzeOptions,
    threads: usize,
    block: usize,
    watch: bool,
) -> Outcome {
    let mode = opts.mode.expect("run_blocks: the mode is set");
    if threads <= 1 || bytes.len() < 2 * block {
        return match std::str::from_utf8(bytes) {
            Ok(text) => Outcome::Done(analyze_text(text, opts)),
            Err(_) => Outcome::NotUtf8,
        };
    }
    let mut a = Analyzer::new(opts.clone(), mode);
    let mut offset = 0usize;
    let mut stopped = None;
    let blocks = super::blocks::byte_blocks_on(bytes, block, threads);
    let n = threads.min(blocks.len());
    std::thread::scope(|s| {
        // Worker w checks and parses blocks w, w+n, w+2n, … and hands them over in that order
        // through its own bounded channel (at most 4 blocks ahead: with 2 the feeder waited at
        // times), and the fed buffers go back to it for reuse.
        let mut ways = Vec::with_capacity(n);
        for w in 0..n {
            type Buf<'t> = Vec<Record<'t>>;
            let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(Buf<'_>, usize), Outcome>>(4);
            let (back, recycled) = std::sync::mpsc::channel::<Buf<'_>>();
            let mine = blocks.iter().skip(w).step_by(n);
            s.spawn(move || {
                for b in mine {
                    let Some(text) = block_str(b) else {
                        let _ = tx.send(Err(Outcome::NotUtf8));
                        return;
                    };
                    if watch && has_markers_bytes(b) {
                        let _ = tx.send(Err(Outcome::MarkerSeen));
                        return;
                    }
                    let mut buf = recycled.try_recv().unwrap_or_default();
                    let lines = super::blocks::parse_block(text, &mut buf);
                    // A closed channel: the feeder stopped (another block was not UTF-8).
                    if tx.send(Ok((buf, lines))).is_err() {
                        return;
                    }
                }
            });
            ways.push((rx, back));
        }
        for i in 0..blocks.len() {
            let (rx, back) = &ways[i % n];
            // A worker that panicked closed its channel: the scope re-raises its panic.
            let Ok(msg) = rx.recv() else {
                break;
            };
            let (recs, lines) = match msg {
                Ok(m) => m,
                Err(o) => {
                    stopped = Some(o);
                    break;
                }
            };
            feed_block(&recs, &mut a, offset);
            offset += lines;
            let _ = back.send(recs);
        }
    });
    if let Some(o) = stopped {
        return o;
    }
    Outcome::Done(if a.out.events == 0 {
        let text = std::str::from_utf8(bytes).expect("every block was UTF-8");
        Err(no_events(text, a.first_skipped()))
    } else {
        Ok(a.finish())
    })
}

/// Feed one parsed block whose lines start at line `offset` of the text.
fn feed_block<'t>(recs: &[Record<'t>], a: &mut Analyzer<'t>, offset: usize) {
    // By reference: a record is 168 bytes, and moving each one out was a memcpy per event.
    // Read only: the records (written by another core) are not shifted to whole-text line
    // numbers; the analyzer adds the offset to the few lines it keeps (warnings, skips).
    a.line_offset = offset;
    for r in recs.iter() {
        a.record(r);
    }
}

/// A latlab marker in the last MiB of `bytes` (from a line start), where the recorder's marker
/// ends its trace.
fn tail_has_markers(bytes: &[u8]) -> bool {
    const TAIL: usize = 1 << 20;
    let mut tail = bytes.len().saturating_sub(TAIL);
    if tail > 0 {
        tail = memchr::memrchr(b'\n', &bytes[..tail]).map_or(0, |p| p + 1);
    }
    has_markers_bytes(&bytes[tail..])
}

/// The trace holds a latlab marker (`LATLAB_STOP …` or the older `latlab seq=…`).
pub fn has_markers(text: &str) -> bool {
    has_markers_bytes(text.as_bytes())
}

/// [`has_markers`] on bytes (the markers are ASCII: a lossy copy of the bytes answers the
/// same).
pub fn has_markers_bytes(b: &[u8]) -> bool {
    // Both forms are trace_marker writes (`tracing_mark_write: …`, `print: tracing_mark_write:
    // …`): one pass for those, then a look at the rest of each such line.
    memchr::memmem::find_iter(b, b"tracing_mark_write").any(|at| {
        let end = memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |p| at + p);
        let l = &b[at..end];
        memchr::memmem::find(l, b"LATLAB_STOP").is_some()
            || memchr::memmem::find(l, b"latlab seq=").is_some()
    })
}

/// One row of "what delays this machine".
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
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
    let total: Nanos = spikes.iter().map(|s| s.latency_ns).sum();
    let mut m: BTreeMap<(CauseKind, String), (u64, Nanos, Nanos)> = BTreeMap::new();
    for s in spikes {
        let mut per: BTreeMap<(CauseKind, String), Nanos> = BTreeMap::new();
        for c in &s.causes {
            *per.entry((c.kind, c.name.clone())).or_default() += c.ns;
        }
        for (k, ns) in per {
            let e = m.entry(k).or_default();
            e.0 += 1;
            e.1 += ns;
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
    use crate::trace::{Flags, TaskRef};

    const WORST: &str = include_str!("../../tests/fixtures/trace/trace-worst-window-cpu1.txt");

    /// The bytes path finds the mode as `analyze_text` does, with the marker anywhere: in the
    /// tail it looks at first, or earlier (found by a worker while analyzing as wake-ups, then
    /// analyzed over as markers), and refuses exactly the inputs that are not UTF-8, wherever
    /// the bad byte is.
    #[test]
    fn the_bytes_path_finds_the_mode_and_refuses_what_is_not_utf8() {
        // Over 1 MiB, so that the tail looked at first is not the whole.
        let base = include_str!("../../tests/fixtures/trace/trace-events.txt");
        let base = base.repeat((3 << 20) / base.len());
        assert!(
            !has_markers(&base),
            "the base must have no marker of its own"
        );
        let marker = "  latlab-cpu1-7 [001] ..... 1471.6: tracing_mark_write: LATLAB_STOP cpu=1 intended=1 actual=2 latency=1\n";
        assert!(has_markers(marker));
        let lines: Vec<&str> = base.split_inclusive('\n').collect();
        let opts = AnalyzeOptions {
            threshold_ns: 0,
            virtualized: true,
            mode: None,
        };
        let whole = |t: &str| format!("{:?}", analyze_text(t, &opts));
        for at in [0, 1, lines.len() / 3, lines.len() - 1, lines.len()] {
            let mut with = lines[..at].concat();
            with.push_str(marker);
            with.push_str(&lines[at..].concat());
            let mut bad = lines[..at].concat().into_bytes();
            bad.extend_from_slice(b"\xff\xfe\n");
            bad.extend_from_slice(lines[at..].concat().as_bytes());
            let want = whole(&with);
            assert!(want.contains("Markers"), "{at}");
            for threads in [2, 3] {
                let got =
                    analyze_byte_blocks(with.as_bytes(), &opts, threads, 64 << 10).expect("UTF-8");
                assert_eq!(format!("{got:?}"), want, "{at} {threads}");
                assert!(
                    analyze_byte_blocks(&bad, &opts, threads, 64 << 10).is_none(),
                    "{at} {threads}"
                );
            }
        }
        let got = analyze_byte_blocks(base.as_bytes(), &opts, 2, 64 << 10).expect("UTF-8");
        assert_eq!(format!("{got:?}"), whole(&base));
        assert!(format!("{got:?}").contains("Wakeups"));
    }

    /// Every fixture, parsed in blocks of many sizes on 2 and 3 threads, gives the analysis of
    /// the one streaming parser; so does each fixture with a garbage line at any of several
    /// places (same first error, same line number) — the cuts land next to multi-line events
    /// (comms holding a newline), `[LOST]` markers and comments.
    #[test]
    fn parallel_blocks_give_the_sequential_analysis_and_errors() {
        const FIXTURES: [&str; 6] = [
            WORST,
            include_str!("../../tests/fixtures/trace/trace-events.txt"),
            include_str!("../../tests/fixtures/trace/trace-oddcomm.txt"),
            include_str!("../../tests/fixtures/trace/trace-lost-events.txt"),
            include_str!("../../tests/fixtures/trace/trace-missing-switch-cpu1.txt"),
            include_str!("../../tests/fixtures/trace/trace-header.txt"),
        ];
        let opts = AnalyzeOptions {
            threshold_ns: 0,
            virtualized: true,
            mode: None,
        };
        // Comms with raw newlines (the oddcomm fixture shows them through `cat -A`), names
        // that cost lines, a text cut inside its last marker.
        let odd = crate::trace::fixtures::un_cat_a(FIXTURES[2]);
        let cut = kernel_trace("a\nb\nc\nd");
        let more = [
            odd,
            kernel_trace("a\nb\nc"),
            cut.clone(),
            cut[..cut.len() - 3].to_string(),
        ];
        let mut split = 0;
        for fixture in FIXTURES
            .iter()
            .copied()
            .chain(more.iter().map(|s| s.as_str()))
        {
            let text = fixture.repeat(3);
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let mut texts = vec![text.clone()];
            for at in [1, lines.len() / 3, lines.len() / 2, lines.len() - 2] {
                let mut t = lines[..at].concat();
                t.push_str("this is not a trace line\n");
                t.push_str(&lines[at..].concat());
                texts.push(t);
            }
            for t in &texts {
                let want = format!("{:?}", analyze_text(t, &opts));
                for block in [1, 40, 200, 1000, 3000] {
                    let bl = crate::trace::blocks::blocks(t, block);
                    assert_eq!(bl.concat(), *t);
                    split += bl.len() - 1;
                    for threads in [2, 3] {
                        let got = format!("{:?}", analyze_blocks(t, &opts, threads, block));
                        assert_eq!(got, want, "block {block}, {threads} threads");
                    }
                }
            }
        }
        // The cuts happened (a test of blocks that were never split would prove nothing).
        assert!(split > 1000, "{split}");
    }

    /// A synthetic trace on CPU 1, one event at a time, times in ns from an origin.
    struct B {
        ev: Vec<Event<'static>>,
    }

    const TAU: i64 = 100; // the measured RT thread, FIFO 80 → prio 19
    const E: u64 = 1_000_000;

    fn task(comm: &str, pid: i64, prio: i64) -> TaskRef<'static> {
        TaskRef {
            comm: comm.to_string().into(),
            pid,
            prio,
        }
    }

    impl B {
        fn new() -> B {
            B { ev: vec![] }
        }
        fn push(&mut self, ts: u64, pid: i64, flags: &str, kind: EventKind<'static>) -> &mut Self {
            self.ev.push(Event {
                line: self.ev.len() + 1,
                cpu: 1,
                ts,
                task_comm: "?".into(),
                pid,
                flags: Flags::parse(flags).unwrap(),
                kind,
            });
            self
        }
        fn switch(&mut self, ts: u64, from: TaskRef<'static>, to: TaskRef<'static>) -> &mut Self {
            let pid = from.pid;
            self.push(
                ts,
                pid,
                "d..2.",
                EventKind::SchedSwitch {
                    prev: from,
                    prev_state: "S".into(),
                    next: to,
                },
            )
        }
        /// τ arms its timer for E at t=0 and sleeps; `other` takes the CPU.
        fn sleep(&mut self, other: TaskRef<'static>) -> &mut Self {
            self.push(
                0,
                TAU,
                "d..1.",
                EventKind::HrtimerStart {
                    hrtimer: "h".into(),
                    function: "hrtimer_wakeup".into(),
                    expires: E,
                },
            );
            self.switch(10, task("tau", TAU, 19), other)
        }
        /// Timer IRQ [a, b) that wakes τ in the middle.
        fn timer_irq(&mut self, a: u64, b: u64, pid: i64) -> &mut Self {
            self.push(
                a,
                pid,
                "d.h..",
                EventKind::VectorEntry {
                    name: "local_timer".into(),
                    vector: 236,
                },
            );
            self.push(
                a + 1,
                pid,
                "d.h..",
                EventKind::HrtimerExpireEntry {
                    hrtimer: "h".into(),
                    function: "hrtimer_wakeup".into(),
                    now: a,
                },
            );
            self.push(
                a + 2,
                pid,
                "d.h2.",
                EventKind::SchedWaking {
                    task: task("tau", TAU, 19),
                    target_cpu: Some(1),
                },
            );
            self.push(
                b,
                pid,
                "dNh..",
                EventKind::VectorExit {
                    name: "local_timer".into(),
                    vector: 236,
                },
            )
        }
        fn marker(&mut self, ts: u64, actual: u64) -> &mut Self {
            let text = format!(
                "LATLAB_STOP cpu=1 intended={E} actual={actual} latency={}",
                actual - E
            );
            self.push(ts, TAU, "....1", EventKind::Marker { text: text.into() })
        }
        fn run(&self, virtualized: bool, mode: SampleMode) -> Analysis {
            let mut a = Analyzer::new(
                AnalyzeOptions {
                    threshold_ns: 0,
                    virtualized,
                    mode: Some(mode),
                },
                mode,
            );
            for e in &self.ev {
                a.feed(e);
            }
            a.finish()
        }
    }

    fn find(s: &Sample, kind: CauseKind, name: &str) -> Nanos {
        s.causes
            .iter()
            .filter(|c| c.kind == kind && c.name == name)
            .map(|c| c.ns)
            .sum()
    }

    #[test]
    fn preempt_off_irq_delivery_and_return() {
        let x = task("x", 200, 120);
        let mut b = B::new();
        b.sleep(x.clone())
            .timer_irq(E + 5_000, E + 8_000, 200)
            .switch(E + 508_000, x.clone(), task("tau", TAU, 19))
            .marker(E + 510_000, E + 509_000);
        let a = b.run(false, SampleMode::Markers);
        assert_eq!(a.spikes.len(), 1);
        let s = &a.spikes[0];
        assert_eq!(s.latency_ns, 509_000);
        assert_eq!(find(s, CauseKind::Unknown, "timer delivery"), 5_000);
        assert_eq!(find(s, CauseKind::Irq, "local_timer"), 3_000);
        assert_eq!(find(s, CauseKind::PreemptOff, "x"), 500_000);
        // Switch-in → clock read, with the marker's own 1 µs removed.
        assert_eq!(find(s, CauseKind::Task, "switch-to-user (tau)"), 1_000);
        assert_eq!(
            find(s, CauseKind::Task, "tau"),
            0,
            "τ's own time is not a task cause"
        );
        let own = s
            .causes
            .iter()
            .find(|c| c.name == "switch-to-user (tau)")
            .unwrap();
        assert_eq!((own.pid, own.prio), (TAU, 19));
        assert_eq!(s.unexplained_ns, 0);
        assert_eq!(s.causes[0].kind, CauseKind::PreemptOff);
        assert_eq!((s.causes[0].pid, s.causes[0].prio), (200, 120));
        assert_eq!(s.timer_irq_ns, Some(E + 5_000));
        assert_eq!(s.wakeup_ns, Some(E + 5_002));
        assert_eq!(s.switch_in_ns, Some(E + 508_000));
    }

    #[test]
    fn higher_priority_task_is_a_task_cause() {
        let x = task("x", 200, 120);
        let y = task("rt-hog", 300, 9);
        let mut b = B::new();
        b.sleep(y.clone())
            .timer_irq(E, E + 2_000, 300)
            .switch(E + 302_000, y, task("tau", TAU, 19))
            .switch(E + 310_000, task("tau", TAU, 19), x);
        let a = b.run(false, SampleMode::Wakeups);
        let s = &a.spikes[0];
        assert_eq!(s.latency_ns, 302_000);
        assert_eq!(find(s, CauseKind::Task, "rt-hog"), 300_000);
        assert_eq!(find(s, CauseKind::Irq, "local_timer"), 2_000);
        assert_eq!(s.explained_ns(), 302_000);
        assert!(!s.from_marker);
    }

    #[test]
    fn softirq_with_nested_hardirq_is_net_of_children() {
        let x = task("x", 200, 120);
        let mut b = B::new();
        b.sleep(x.clone()).timer_irq(E, E + 1_000, 200);
        b.push(
            E + 1_000,
            200,
            "..s..",
            EventKind::SoftirqEntry {
                vec: 3,
                name: "NET_RX".into(),
            },
        )
        .push(
            E + 11_000,
            200,
            "d.H..",
            EventKind::IrqEntry {
                irq: 36,
                name: "virtio1".into(),
            },
        )
        .push(E + 15_000, 200, "d.H..", EventKind::IrqExit { irq: 36 })
        .push(
            E + 41_000,
            200,
            "..s..",
            EventKind::SoftirqExit {
                vec: 3,
                name: "NET_RX".into(),
            },
        )
        .switch(E + 41_000, x, task("tau", TAU, 19));
        let a = b.run(false, SampleMode::Wakeups);
        let s = &a.spikes[0];
        assert_eq!(find(s, CauseKind::Softirq, "NET_RX"), 36_000);
        assert_eq!(find(s, CauseKind::Irq, "virtio1"), 4_000);
        assert_eq!(find(s, CauseKind::Irq, "local_timer"), 1_000);
        assert_eq!(s.latency_ns, 41_000);
        assert_eq!(s.unexplained_ns, 0);
    }

    #[test]
    fn nmi_time_is_taken_from_what_it_interrupted() {
        let x = task("x", 200, 120);
        let mut b = B::new();
        b.sleep(x.clone()).timer_irq(E, E + 1_000, 200);
        b.push(
            E + 50_000,
            200,
            "d.Z..",
            EventKind::Nmi {
                handler: "perf_event_nmi_handler".into(),
                delta_ns: 20_000,
            },
        )
        .switch(E + 60_000, x, task("tau", TAU, 19));
        let s = &b.run(false, SampleMode::Wakeups).spikes[0];
        assert_eq!(find(s, CauseKind::Nmi, "perf_event_nmi_handler"), 20_000);
        assert_eq!(find(s, CauseKind::PreemptOff, "x"), 39_000);
        assert_eq!(s.explained_ns(), 60_000);
    }

    #[test]
    fn irq_off_task_delays_delivery() {
        let x = task("x", 200, 120);
        let mut b = B::new();
        b.sleep(x.clone());
        // x shows IRQs off in task context after E: the timer could not fire.
        b.push(
            E + 40_000,
            200,
            "d..1.",
            EventKind::Other {
                name: "rcu_utilization".into(),
            },
        )
        .timer_irq(E + 40_000, E + 41_000, 200)
        .switch(E + 41_000, x, task("tau", TAU, 19));
        let s = &b.run(true, SampleMode::Wakeups).spikes[0];
        assert_eq!(find(s, CauseKind::IrqOff, "x"), 40_000);
        assert_eq!(s.causes[0].pid, 200);
    }

    #[test]
    fn silent_gap_is_hypervisor_on_a_vm_and_unknown_elsewhere() {
        for (virt, kind) in [(true, CauseKind::Hypervisor), (false, CauseKind::Unknown)] {
            let idle = task("swapper/1", 0, 120);
            let mut b = B::new();
            b.sleep(idle.clone())
                .timer_irq(E + 2_000_000, E + 2_001_000, 0)
                .switch(E + 2_002_000, idle, task("tau", TAU, 19));
            let s = &b.run(virt, SampleMode::Wakeups).spikes[0];
            assert_eq!(find(s, kind, "timer delivery (idle)"), 2_000_000, "{virt}");
            assert_eq!(s.causes[0].kind, kind);
            assert_eq!(find(s, CauseKind::Unknown, "idle while runnable"), 1_000);
        }
    }

    #[test]
    fn untraced_history_stays_unexplained() {
        // The trace starts after E: the marker says 1 ms, the trace covers 100 µs.
        let x = task("x", 200, 120);
        let mut b = B::new();
        b.push(
            E + 900_000,
            200,
            "d.h..",
            EventKind::VectorEntry {
                name: "local_timer".into(),
                vector: 236,
            },
        )
        .push(
            E + 900_002,
            200,
            "d.h..",
            EventKind::SchedWaking {
                task: task("tau", TAU, 19),
                target_cpu: Some(1),
            },
        )
        .push(
            E + 901_000,
            200,
            "dNh..",
            EventKind::VectorExit {
                name: "local_timer".into(),
                vector: 236,
            },
        )
        .switch(E + 999_000, x, task("tau", TAU, 19))
        .marker(E + 1_000_500, E + 1_000_000);
        let s = &b.run(false, SampleMode::Markers).spikes[0];
        assert_eq!(s.latency_ns, 1_000_000);
        assert!(s.unexplained_ns >= 900_000, "{s:?}");
        assert!(s.explained_ns() <= 100_000);
    }

    #[test]
    fn cascade_after_a_long_stall() {
        let x = task("x", 200, 120);
        let tau = task("tau", TAU, 19);
        let mut b = B::new();
        b.sleep(x.clone()).timer_irq(E, E + 1_000, 200).switch(
            E + 5_000_000,
            x.clone(),
            tau.clone(),
        );
        // τ re-arms for E + 1 ms, already in the past: it fires at once.
        b.push(
            E + 5_000_100,
            TAU,
            "d..1.",
            EventKind::HrtimerStart {
                hrtimer: "h".into(),
                function: "hrtimer_wakeup".into(),
                expires: E + 1_000_000,
            },
        )
        .switch(E + 5_000_200, tau.clone(), x.clone())
        .timer_irq(E + 5_000_300, E + 5_000_400, 200)
        .switch(E + 5_000_500, x, tau);
        let a = b.run(false, SampleMode::Wakeups);
        assert_eq!(a.spikes.len(), 2);
        assert!(!a.spikes[0].cascade);
        assert!(a.spikes[1].cascade);
    }

    fn worst() -> String {
        WORST.to_string()
    }

    #[test]
    fn real_13ms_spike_is_rust_lld() {
        let opts = AnalyzeOptions {
            threshold_ns: 1_000_000,
            virtualized: true,
            mode: None,
        };
        let a = analyze_text(&worst(), &opts).unwrap();
        assert_eq!(a.mode, Some(SampleMode::Markers));
        assert_eq!(a.samples, 2);
        assert_eq!(a.spikes.len(), 1);
        let s = &a.spikes[0];
        assert_eq!(s.latency_ns, 13_351_484);
        assert_eq!(s.intended_ns, 1_549_930_731_883);
        let top = &s.causes[0];
        assert_eq!(
            (top.kind, top.name.as_str(), top.pid, top.prio),
            (CauseKind::PreemptOff, "rust-lld", 15780, 120)
        );
        let share = top.ns as f64 / s.latency_ns as f64;
        assert!((0.98..0.995).contains(&share), "share {share}");
        // The notes' hand analysis: delivery ≈ 30 µs, timer IRQ ≈ 12 µs, SCHED softirq 16 µs.
        let delivery = find(s, CauseKind::Hypervisor, "timer delivery");
        assert!((29_000..32_000).contains(&delivery), "{delivery}");
        assert_eq!(find(s, CauseKind::Softirq, "SCHED"), 16_130);
        assert!(s.explained_ns() <= s.latency_ns);
        assert!(s.unexplained_ns < 1_000, "{}", s.unexplained_ns);

        // Without markers: the RT wake-up gives the same answer, ending at the switch-in.
        let opts = AnalyzeOptions {
            mode: Some(SampleMode::Wakeups),
            ..opts
        };
        let a = analyze_text(&worst(), &opts).unwrap();
        assert_eq!(a.spikes.len(), 1);
        let s = &a.spikes[0];
        assert_eq!(s.latency_ns, 1_549_944_045_246 - 1_549_930_731_883);
        assert_eq!(s.causes[0].name, "rust-lld");
        assert!(s.causes[0].ns as f64 / s.latency_ns as f64 > 0.98);
    }

    /// Regression: a real capture in which the switch idle → burst task is missing; the
    /// PID column of the following events says who runs, and wins.
    #[test]
    fn missing_switch_is_recovered_from_the_pid_column() {
        let x = task("burst", 300, 9);
        let mut b = B::new();
        b.sleep(task("swapper/1", 0, 120));
        b.push(
            E - 500_000,
            0,
            "d.h3.",
            EventKind::SchedWaking {
                task: x.clone(),
                target_cpu: Some(1),
            },
        );
        // No sched_switch to `burst`: its events simply appear.
        b.timer_irq(E, E + 1_000, 300)
            .switch(E + 2_000_000, x, task("tau", TAU, 19));
        let s = &b.run(true, SampleMode::Wakeups).spikes[0];
        assert_eq!(find(s, CauseKind::Task, "burst"), 1_999_000);
        assert_eq!(s.causes[0].prio, 9);
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

    /// A trace in the kernel's own layout (that of trace-events.txt, `%16s-%-7d [CPU] FLAGS
    /// TS: event: body`) on CPU 0: τ (`tau`, pid 7, FIFO 80) arms its timer for 1.000100 and
    /// sleeps, `odd` (pid 9, its name given) runs and switches to `hog` (pid 8, CFS), which
    /// keeps the CPU past the timer; τ's marker ends an 840 µs sample. 10 lines, the marker
    /// last.
    pub(crate) fn kernel_trace(odd: &str) -> String {
        let l = |task: &str, pid: i64, flags: &str, ts: &str, body: &str| {
            format!("{task:>16}-{pid:<7} [000] {flags} {ts:>12}: {body}\n")
        };
        [
            l("tau", 7, "d..1.", "1.000000", "hrtimer_start: hrtimer=h function=hrtimer_wakeup expires=1000100000 softexpires=1000100000 mode=ABS"),
            l("tau", 7, "d..2.", "1.000001", &format!("sched_switch: prev_comm=tau prev_pid=7 prev_prio=19 prev_state=S ==> next_comm={odd} next_pid=9 next_prio=120")),
            l(odd, 9, "d.h..", "1.000010", "local_timer_entry: vector=236"),
            l(odd, 9, "d.h..", "1.000012", "local_timer_exit: vector=236"),
            l(odd, 9, "d..2.", "1.000020", &format!("sched_switch: prev_comm={odd} prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=hog next_pid=8 next_prio=120")),
            l("hog", 8, "d.h..", "1.000100", "local_timer_entry: vector=236"),
            l("hog", 8, "d.h2.", "1.000101", "sched_waking: comm=tau pid=7 prio=19 target_cpu=000"),
            l("hog", 8, "dNh..", "1.000102", "local_timer_exit: vector=236"),
            l("hog", 8, "d..2.", "1.000900", "sched_switch: prev_comm=hog prev_pid=8 prev_prio=120 prev_state=R ==> next_comm=tau next_pid=7 next_prio=19"),
            l("tau", 7, "....1", "1.000950", "tracing_mark_write: LATLAB_STOP cpu=0 intended=1000100000 actual=1000940000 latency=840000"),
        ]
        .concat()
    }

    fn markers_opts() -> AnalyzeOptions {
        AnalyzeOptions {
            threshold_ns: 0,
            virtualized: false,
            mode: None,
        }
    }

    /// The one spike of [`kernel_trace`], whatever odd task ran before it: 840 µs, the hog
    /// named as the non-preemptible section for most of it.
    fn assert_the_hog_spike(a: &Analysis) {
        assert_the_hog_spike_with(a, 798_000)
    }

    fn assert_the_hog_spike_with(a: &Analysis, hog_ns: Nanos) {
        assert_eq!(a.mode, Some(SampleMode::Markers));
        assert_eq!(a.spikes.len(), 1, "{a:#?}");
        let s = &a.spikes[0];
        assert_eq!(
            (s.pid, s.intended_ns, s.latency_ns),
            (7, 1_000_100_000, 840_000)
        );
        assert_eq!(find(s, CauseKind::PreemptOff, "hog"), hog_ns, "{s:#?}");
    }

    /// Regression (issue 14): a task named with newlines (any user can: prctl(PR_SET_NAME))
    /// switched in and out on the measured CPU made its lines unparseable, and `analyze` rejected
    /// the whole trace. Names with up to two newlines now parse; three (`a\nb\nc\nd`, 7 bytes)
    /// still cost lines, which are skipped, counted and named, and the spike is analyzed; the
    /// block parser gives the same (the skips and warnings too).
    #[test]
    fn regression_a_task_named_with_newlines_costs_lines_not_the_trace() {
        for (odd, skipped) in [("nl\nx", 0), ("a\nb\nc", 0), ("a\nb\nc\nd", 1)] {
            let t = kernel_trace(odd);
            let a = analyze_text(&t, &markers_opts()).unwrap();
            assert_the_hog_spike(&a);
            if skipped == 0 {
                assert_eq!((a.skipped_lines, a.events), (0, 10), "{odd:?}: {a:#?}");
                assert!(a.warnings.is_empty(), "{:?}", a.warnings);
            } else {
                assert!(a.skipped_lines >= 1, "{a:#?}");
                assert!(a.events < 10 && a.events >= 6, "{a:#?}");
                let (line, why) = &a.skipped[0];
                // The switch to it, its `next_comm` cut over four lines, is the first.
                assert_eq!(
                    (*line, why.as_str()),
                    (2, "sched_switch: no next_pid=field")
                );
                assert!(
                    a.warnings[0].starts_with(&format!(
                        "{} line{} skipped: not trace events (first: line {line}: ",
                        a.skipped_lines,
                        if a.skipped_lines == 1 { "" } else { "s" }
                    )),
                    "{:?}",
                    a.warnings
                );
            }
            for block in [1, 40, 200] {
                for threads in [2, 3] {
                    assert_eq!(
                        format!("{:?}", analyze_blocks(&t, &markers_opts(), threads, block)),
                        format!("{:?}", Ok::<_, ParseError>(&a)),
                        "{odd:?} block {block}"
                    );
                }
            }
        }
    }

    /// A trace cut inside its last marker (`latency=8400` for 840000): the sample is read
    /// without that last field (latency = actual − intended), and a warning names the line.
    /// Cut before `actual=` is whole, the sample cannot be read: said so too.
    #[test]
    fn a_cut_last_marker_is_read_without_its_last_field_and_warned_about() {
        let full = kernel_trace("odd");
        let t = &full[..full.len() - 3];
        assert!(t.ends_with("latency=8400"));
        let a = analyze_text(t, &markers_opts()).unwrap();
        assert_the_hog_spike(&a);
        assert_eq!(
            a.warnings,
            ["line 10: the last latlab marker is cut short: its last field is not read (no newline at the end: a truncated file?)"]
        );
        let t = &full[..full.find("actual=").unwrap() + 10];
        let a = analyze_text(t, &markers_opts()).unwrap();
        assert!(a.spikes.is_empty(), "{a:#?}");
        assert_eq!(
            a.warnings,
            ["line 10: the last latlab marker is cut short: its sample is lost (no newline at the end: a truncated file?)"]
        );
        // Any other last line without its newline.
        let t = full[..full.find("LATLAB_STOP").unwrap()].trim_end();
        let t = &t[..t.rfind('\n').unwrap()];
        let a = analyze_text(t, &markers_opts()).unwrap();
        assert_eq!(
            a.warnings,
            ["line 9: the last line is cut short (no newline at the end: a truncated file?)"]
        );
        for block in [1, 40, 200] {
            for t in [&full[..full.len() - 3], t] {
                assert_eq!(
                    format!("{:?}", analyze_blocks(t, &markers_opts(), 2, block)),
                    format!("{:?}", analyze_text(t, &markers_opts())),
                );
            }
        }
    }

    /// Time going backwards on a CPU (an event stamped before the one before it): warned
    /// about with its line, CPU and step, no time counted across it, and the spike kept, in
    /// both modes.
    #[test]
    fn time_going_backwards_is_warned_about_and_the_spike_kept() {
        // The timer IRQ's exit stamped 60 µs before its entry.
        let t =
            kernel_trace("odd").replace("1.000102: local_timer_exit", "1.000040: local_timer_exit");
        let a = analyze_text(&t, &markers_opts()).unwrap();
        // The IRQ's last µs is now the hog's: its exit came "before" the waking.
        assert_the_hog_spike_with(&a, 799_000);
        assert_eq!(
            a.warnings,
            ["time goes backwards 1 time (first: line 8, CPU 0, 61.0 us before the event before it on that CPU): no time is counted across such a step"]
        );
        for block in [1, 40, 200] {
            assert_eq!(
                format!("{:?}", analyze_blocks(&t, &markers_opts(), 2, block)),
                format!("{:?}", Ok::<_, ParseError>(&a)),
            );
        }
        // Without the marker: the RT wake-up is the sample, up to τ's switch-in.
        let t = t.split_inclusive('\n').take(9).collect::<String>();
        let a = analyze_text(&t, &markers_opts()).unwrap();
        assert_eq!(a.mode, Some(SampleMode::Wakeups));
        assert_eq!(a.spikes.len(), 1, "{a:#?}");
        assert_eq!(a.spikes[0].latency_ns, 800_000);
        assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    }

    #[test]
    fn markers() {
        assert_eq!(
            parse_marker("LATLAB_STOP cpu=1 intended=5 actual=9 latency=4"),
            Some((5, 9, Some(4)))
        );
        assert_eq!(
            parse_marker("latlab seq=3 target=5 now=9 lat_ns=4"),
            Some((5, 9, Some(4)))
        );
        assert_eq!(parse_marker("latlab: start"), None);
        assert_eq!(printable("a\x1b[1mb\n"), "a\\u{1b}[1mb\\n");
    }

    proptest::proptest! {
        /// Whatever the event soup, causes never exceed the latency.
        #[test]
        fn causes_never_exceed_latency(seq in proptest::collection::vec((0u8..12, 0u64..400_000, 0i64..4), 1..120), virt: bool, markers: bool) {
            let pids = [0i64, TAU, 200, 300];
            let prios = [120i64, 19, 120, 9];
            let mut b = B::new();
            let mut ts = 0u64;
            for (k, dt, who) in seq {
                ts += dt;
                let w = who as usize;
                let t = task("t", pids[w], prios[w]);
                let kind = match k {
                    0 => EventKind::SchedSwitch { prev: task("p", pids[(w + 1) % 4], prios[(w + 1) % 4]), prev_state: "S".into(), next: t },
                    1 => EventKind::SchedWaking { task: t, target_cpu: Some(1) },
                    2 => EventKind::VectorEntry { name: "local_timer".into(), vector: 236 },
                    3 => EventKind::VectorExit { name: "local_timer".into(), vector: 236 },
                    4 => EventKind::SoftirqEntry { vec: 7, name: "SCHED".into() },
                    5 => EventKind::SoftirqExit { vec: 7, name: "SCHED".into() },
                    6 => EventKind::HrtimerStart { hrtimer: "h".into(), function: "hrtimer_wakeup".into(), expires: ts + dt / 2 },
                    7 => EventKind::IrqEntry { irq: 5, name: "eth".into() },
                    8 => EventKind::IrqExit { irq: 5 },
                    9 => EventKind::Nmi { handler: "n".into(), delta_ns: dt },
                    10 => EventKind::Marker { text: format!("LATLAB_STOP cpu=1 intended={} actual={} latency={}", ts.saturating_sub(dt), ts, dt).into() },
                    _ => EventKind::HrtimerExpireEntry { hrtimer: "h".into(), function: "hrtimer_wakeup".into(), now: ts },
                };
                b.push(ts, pids[w], if k % 3 == 0 { "d..1." } else { "....." }, kind);
            }
            let a = b.run(virt, if markers { SampleMode::Markers } else { SampleMode::Wakeups });
            for s in &a.spikes {
                proptest::prop_assert!(s.explained_ns() <= s.latency_ns, "{:?}", s);
                proptest::prop_assert_eq!(s.explained_ns() + s.unexplained_ns, s.latency_ns);
                proptest::prop_assert!(s.causes.windows(2).all(|w| w[0].ns >= w[1].ns));
            }
        }
    }
}
