//! A traced spike: its causes, the lanes of what ran on its CPU, and its timeline.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Nanos;

/// What delayed a traced spike (the contract's `causes`). Its names are [`CauseKind::as_str`],
/// the one table of them (run.json reads and writes them through it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum CauseKind {
    Irq,
    Softirq,
    Task,
    Nmi,
    PreemptOff,
    IrqOff,
    Hypervisor,
    Unknown,
}

impl CauseKind {
    pub const ALL: [CauseKind; 8] = [
        CauseKind::Irq,
        CauseKind::Softirq,
        CauseKind::Task,
        CauseKind::Nmi,
        CauseKind::PreemptOff,
        CauseKind::IrqOff,
        CauseKind::Hypervisor,
        CauseKind::Unknown,
    ];

    /// The contract's name of the kind.
    pub const fn as_str(self) -> &'static str {
        match self {
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
}

impl From<CauseKind> for &'static str {
    fn from(k: CauseKind) -> &'static str {
        k.as_str()
    }
}

impl TryFrom<String> for CauseKind {
    type Error = String;
    fn try_from(s: String) -> Result<CauseKind, String> {
        CauseKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = CauseKind::ALL.iter().map(|k| k.as_str()).collect();
                format!(
                    "unknown cause kind `{s}`, expected one of {}",
                    names.join(", ")
                )
            })
    }
}

impl JsonSchema for CauseKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CauseKind".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = CauseKind::ALL.iter().map(|k| k.as_str()).collect();
        schemars::json_schema!({
            "description": "What delayed a traced spike (the contract's `causes`).",
            "type": "string",
            "enum": names,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Cause {
    pub kind: CauseKind,
    pub name: String,
    #[serde(default)]
    pub pid: i64,
    #[serde(default)]
    pub prio: i64,
    pub ns: Nanos,
    /// What the trace's flags said of the culprit's context while it was charged (a task, a
    /// non-preemptible section, IRQs off, a softirq); absent for the other kinds, when no
    /// event showed it, and in files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<CauseContext>,
}

/// The culprit's context as the trace's flags report it (run.json `causes[].context`):
/// counted over the events that ended its stretches in its context (on its CPU, the same
/// task) and carry that context's flags: IRQ and vector entries and exits, softirqs, hrtimer
/// expiries; not the events traced under a lock of their own (the scheduler's,
/// `hrtimer_start`), whose flags are the lock's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CauseContext {
    /// Events seen.
    pub events: u32,
    /// Of them, with preemption disabled (preempt depth above 0).
    pub preempt_off: u32,
    /// With migration disabled (the flags' migrate-disable column above 0: PREEMPT_RT's
    /// sleeping spinlocks and BH sections, `migrate_disable()`).
    pub migrate_disabled: u32,
    /// In task context with IRQs off.
    pub irqs_off: u32,
    /// In a preempt-lazy section (PREEMPT_RT kernels before 6.12: preempt-lazy depth above 0).
    pub lazy_off: u32,
}

impl CauseContext {
    /// Count one event's flags.
    pub fn see(&mut self, f: &crate::trace::Flags) {
        self.events += 1;
        self.preempt_off += u32::from(f.preempt_depth > 0);
        self.migrate_disabled += u32::from(f.migrate_disable > 0);
        self.irqs_off += u32::from(f.irqs_off && !f.hardirq && !f.softirq && !f.nmi);
        self.lazy_off += u32::from(f.lazy_depth > 0);
    }

    /// Both counts together.
    pub fn add(&mut self, o: &CauseContext) {
        self.events += o.events;
        self.preempt_off += o.preempt_off;
        self.migrate_disabled += o.migrate_disabled;
        self.irqs_off += o.irqs_off;
        self.lazy_off += o.lazy_off;
    }

    /// In words, for reports: `preempt off in 3 of 4 events, migrate disabled in 2 of 4`;
    /// `preemptible in all 4 events` when no count is above 0.
    pub fn describe(&self) -> String {
        let events = if self.events == 1 { "event" } else { "events" };
        let mut parts = Vec::new();
        for (n, what) in [
            (self.preempt_off, "preempt off"),
            (self.migrate_disabled, "migrate disabled"),
            (self.irqs_off, "IRQs off"),
            (self.lazy_off, "preempt-lazy off"),
        ] {
            if n == 0 {
                continue;
            }
            // The first part names the unit: `preempt off in 3 of 4 events, migrate
            // disabled in 2 of 4`.
            parts.push(if parts.is_empty() {
                format!("{what} in {n} of {} {events}", self.events)
            } else {
                format!("{what} in {n} of {}", self.events)
            });
        }
        if parts.is_empty() {
            format!("preemptible in all {} {events}", self.events)
        } else {
            parts.join(", ")
        }
    }
}

/// A spike the recorder traced (or tried to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpikeRecord {
    pub cpu: u32,
    /// Intended wake-up time, CLOCK_MONOTONIC ns.
    pub at_ns: Nanos,
    pub latency_ns: Nanos,
    /// Sorted by `ns`, largest first; they add up to the part of `latency_ns` the trace explains.
    #[serde(default)]
    pub causes: Vec<Cause>,
    /// Relative path of the saved trace in the run directory: `spikes/NNN/trace.dat` when the
    /// recorder read binary pages (`trace.txt` beside it only with `--trace-text`), else
    /// `spikes/NNN/trace.txt`. Runs written before 2026-11-29 name `trace.txt`.
    #[serde(default)]
    pub trace_file: Option<String>,
    /// A short text timeline of the spike, as text lines: rendered from `timeline_events` when
    /// the record is written (for readers of run.json that want text); files written before
    /// `timeline_events` existed have only these.
    #[serde(default)]
    pub timeline: Vec<String>,
    /// The timeline as data: the moments of the spike relative to its intended wake-up, in
    /// order (empty in files written before it existed). Reports render it
    /// (`latlab_report::timeline`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline_events: Vec<TimelineEvent>,
    /// What ran on the spike's CPU from its intended wake-up to its clock read, as lanes
    /// (IRQ, softirq, tasks, the measuring thread): the stretches the analyzer charged to the
    /// causes. Absent in files written before it existed (reports say "no lane data").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<SpikeLanes>,
    /// The evidence for or against a stall of the host: the time the hypervisor says it
    /// stole from the spike's CPU around the spike (`/proc/stat`). Absent when latlab had no
    /// reading of it (files written before it existed, a kernel without the column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal: Option<SpikeSteal>,
    /// The other measured CPUs during the spike's silent stretches (their events are in the
    /// spike's `trace.dat` too): whether the machine stalled as a whole. Absent when the spike
    /// has no silent stretch, no other CPU was measured, or the recorder did not read them
    /// (files written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others: Option<super::SpikeOthers>,
    /// timerlat's own figures of the spike's activation (the timerlat back end only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timerlat: Option<super::SpikeTimerlat>,
}

/// Steal time of a spike's CPU between two readings of `/proc/stat` that hold the spike
/// (run.json `spikes[].steal`): the last one before its intended wake-up and one after it
/// ended. The kernel counts steal in ticks of 1/USER_HZ (10 ms): a stall shorter than that
/// may show as 0 or as one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SpikeSteal {
    /// The first reading, CLOCK_MONOTONIC ns (at or before the spike's `at_ns`).
    pub from_ns: Nanos,
    /// From the first reading to the second (which is at or after the spike's end).
    pub window_ns: Nanos,
    /// The CPU's steal time in the window.
    pub steal_ns: Nanos,
}

impl SpikeSteal {
    /// `steal 10 ms on CPU 1 in the 130 ms around it`, or `no steal on CPU 1 …`.
    pub fn describe(&self, cpu: u32) -> String {
        // Seconds for the window (readings a second apart), whole ms for the ticks.
        let short = |ns: Nanos| match ns {
            1_000_000_000.. => format!("{:.2} s", ns as f64 / 1e9),
            _ if ns.is_multiple_of(1_000_000) => format!("{} ms", ns / 1_000_000),
            _ => crate::units::Human(ns).to_string(),
        };
        let window = short(self.window_ns);
        if self.steal_ns == 0 {
            format!("no steal on CPU {cpu} in the {window} around it")
        } else {
            format!(
                "steal {} on CPU {cpu} in the {window} around it",
                short(self.steal_ns)
            )
        }
    }
}

/// The name of a stretch before the thread's wake-up in which the trace shows nothing on the
/// CPU while a task ran (no event, IRQs not seen off): the host, an SMI, or something the
/// events do not cover. [`SILENT_GAP_IDLE`] when the CPU was idle.
pub const SILENT_GAP: &str = "silent gap";
/// [`SILENT_GAP`] from idle: the timer's interrupt did not come while the CPU idled.
pub const SILENT_GAP_IDLE: &str = "silent gap (idle)";
/// `/proc/stat` counts steal in ticks of 1/USER_HZ: 10 ms.
pub const STEAL_TICK_NS: Nanos = 10_000_000;

/// A silent stretch, as a cause or a lane segment names it: [`SILENT_GAP`] or
/// [`SILENT_GAP_IDLE`], or `timer delivery` in records written before those names.
fn is_silent(kind: CauseKind, name: &str) -> bool {
    matches!(kind, CauseKind::Unknown | CauseKind::Hypervisor)
        && (name.starts_with(SILENT_GAP) || name.starts_with("timer delivery"))
}

impl Cause {
    /// A silent stretch (see [`SpikeRecord::judge_silent`]).
    pub fn is_silent(&self) -> bool {
        is_silent(self.kind, &self.name)
    }
}

impl LaneSegment {
    /// A silent stretch (see [`SpikeRecord::judge_silent`]).
    pub fn is_silent(&self) -> bool {
        is_silent(self.cause, &self.name)
    }
}

impl SpikeRecord {
    /// The verdict on its silent stretches from the evidence outside the trace: `hypervisor`
    /// when the host stole time from the spike's CPU around the spike, enough to hold all of
    /// them (within the counter's 10 ms tick); else `unknown`, a silent gap. The trace alone
    /// never says `hypervisor`. The causes and the lanes change together; a record without
    /// the evidence is left as it is.
    pub fn judge_silent(&mut self) {
        let Some(e) = self.steal else { return };
        let silent: Nanos = self
            .causes
            .iter()
            .filter(|c| c.is_silent())
            .map(|c| c.ns)
            .sum();
        if silent == 0 {
            return;
        }
        let kind = if e.steal_ns > 0 && e.steal_ns.saturating_add(STEAL_TICK_NS) >= silent {
            CauseKind::Hypervisor
        } else {
            CauseKind::Unknown
        };
        for c in self.causes.iter_mut().filter(|c| c.is_silent()) {
            c.kind = kind;
        }
        if let Some(l) = self.lanes.as_mut() {
            for g in l
                .segments
                .iter_mut()
                .filter(|g| is_silent(g.cause, &g.name))
            {
                g.cause = kind;
            }
        }
    }
}

/// The most lane segments a spike keeps ([`SpikeLanes::dropped`] counts the shortest left out).
pub const MAX_LANE_SEGMENTS: usize = 256;

/// A spike's lanes (run.json `spikes[].lanes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub struct SpikeLanes {
    /// In time order, disjoint; at most [`MAX_LANE_SEGMENTS`].
    #[serde(default)]
    pub segments: Vec<LaneSegment>,
    /// Segments left out to stay within the cap (the shortest ones).
    #[serde(default)]
    pub dropped: u64,
}

/// One stretch of time on a CPU and what it was charged to (run.json
/// `spikes[].lanes.segments[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LaneSegment {
    pub cpu: u32,
    pub lane: Lane,
    /// The cause it was charged to (`causes[].kind`).
    pub cause: CauseKind,
    /// The cause's name (`causes[].name`): the IRQ, softirq or task, `switch-to-user (…)` for
    /// the measuring thread, `silent gap` for a stall (`timer delivery` in files written
    /// before that name).
    pub name: String,
    /// The task's pid (0 for interrupt contexts and stalls).
    #[serde(default)]
    pub pid: i64,
    /// Nanoseconds from the intended wake-up E.
    pub start_ns: i64,
    pub end_ns: i64,
}

/// The lane a [`LaneSegment`] is drawn in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// A hardirq or CPU vector handler.
    Irq,
    Softirq,
    Nmi,
    /// A task other than the measuring thread (`cause` says whether it had the right).
    Task,
    /// The measuring thread itself, from its switch-in.
    Measuring,
    /// Nothing in the trace explains the time (a silent gap before the wake-up that the steal
    /// time does not show to be the host's, idle while runnable).
    Stall,
    /// A lane a later latlab knows (kept, drawn without a name).
    #[serde(other)]
    Other,
}

impl Lane {
    pub const ALL: [Lane; 6] = [
        Lane::Irq,
        Lane::Softirq,
        Lane::Nmi,
        Lane::Task,
        Lane::Measuring,
        Lane::Stall,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Lane::Irq => "irq",
            Lane::Softirq => "softirq",
            Lane::Nmi => "nmi",
            Lane::Task => "task",
            Lane::Measuring => "measuring",
            Lane::Stall => "stall",
            Lane::Other => "other",
        }
    }
}

/// One moment of a spike's timeline (run.json `spikes[].timeline_events[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TimelineEvent {
    /// Nanoseconds from the intended wake-up E (negative: before it).
    pub offset_ns: i64,
    pub what: Moment,
    /// `timer_due`: the thread the timer is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TimelineTask>,
    /// `timer_due`: E lies before the previous sample's switch-in on that CPU, so this spike is
    /// a consequence of that one's stall (a cascade).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cascade: bool,
    /// `timer_due`: the CPU was in its idle task at E, so the timer's interrupt had to wake it
    /// from idle first (rtla timerlat --aa's "exit from idle"); absent when it ran a task or
    /// the trace does not cover E.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_idle: bool,
}

/// What happened at a [`TimelineEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Moment {
    /// The thread's timer is due (E, offset 0).
    TimerDue,
    /// A spinning thread's last clock read before a gap (the noise mode's E, offset 0).
    GapStart,
    /// The timer interrupt that woke the thread entered.
    TimerIrq,
    /// The thread was woken (`sched_waking`).
    Woken,
    /// The thread was switched in.
    SwitchedIn,
    /// The thread read its clock (the sample's end, from latlab's marker).
    ClockRead,
    /// A moment a later latlab knows (kept, shown without a name).
    #[serde(other)]
    Other,
}

/// The thread of a spike's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TimelineTask {
    pub comm: String,
    pub pid: i64,
    pub prio: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause(kind: CauseKind, name: &str, ns: Nanos) -> Cause {
        Cause {
            kind,
            name: name.into(),
            pid: 0,
            prio: 0,
            ns,
            context: None,
        }
    }

    /// A 30 ms spike: a 25 ms silent gap from idle, 3 ms of another silent gap, 2 ms of a hog;
    /// its lanes the same stretches.
    fn spike(steal_ns: Option<Nanos>) -> SpikeRecord {
        let seg = |cause, name: &str, start_ns, end_ns| LaneSegment {
            cpu: 1,
            lane: Lane::Stall,
            cause,
            name: name.into(),
            pid: 0,
            start_ns,
            end_ns,
        };
        SpikeRecord {
            cpu: 1,
            at_ns: 1_000_000_000,
            latency_ns: 30_000_000,
            causes: vec![
                cause(CauseKind::Unknown, SILENT_GAP_IDLE, 25_000_000),
                cause(CauseKind::Unknown, SILENT_GAP, 3_000_000),
                cause(CauseKind::Task, "hog", 2_000_000),
            ],
            trace_file: None,
            timeline: vec![],
            timeline_events: vec![],
            lanes: Some(SpikeLanes {
                segments: vec![
                    seg(CauseKind::Unknown, SILENT_GAP_IDLE, 0, 25_000_000),
                    seg(CauseKind::Unknown, SILENT_GAP, 25_000_000, 28_000_000),
                    seg(CauseKind::Task, "hog", 28_000_000, 30_000_000),
                ],
                dropped: 0,
            }),
            steal: steal_ns.map(|steal_ns| SpikeSteal {
                from_ns: 500_000_000,
                window_ns: 1_000_000_000,
                steal_ns,
            }),
            others: None,
            timerlat: None,
        }
    }

    fn kinds(s: &SpikeRecord) -> (Vec<CauseKind>, Vec<CauseKind>) {
        let lanes = s.lanes.as_ref().unwrap();
        (
            s.causes.iter().map(|c| c.kind).collect(),
            lanes.segments.iter().map(|g| g.cause).collect(),
        )
    }

    #[test]
    fn silent_gaps_are_the_hosts_only_when_its_steal_can_hold_them() {
        use CauseKind::{Hypervisor as H, Task as T, Unknown as U};
        // 28 ms silent: 20 ms of steal holds it within the 10 ms tick, 10 ms does not; no
        // steal, or no reading, never makes it the host's.
        for (steal, want) in [
            (Some(20_000_000), H),
            (Some(30_000_000), H),
            (Some(10_000_000), U),
            (Some(0), U),
            (None, U),
        ] {
            let mut s = spike(steal);
            s.judge_silent();
            assert_eq!(
                kinds(&s),
                (vec![want, want, T], vec![want, want, T]),
                "{steal:?}"
            );
        }
    }

    #[test]
    fn an_older_records_hypervisor_verdict_is_judged_too_and_no_evidence_leaves_it() {
        let older = |steal| {
            let mut s = spike(steal);
            s.causes[0] = cause(CauseKind::Hypervisor, "timer delivery (idle)", 25_000_000);
            s.causes[1] = cause(CauseKind::Hypervisor, "timer delivery", 3_000_000);
            s
        };
        let mut s = older(Some(0));
        s.judge_silent();
        assert_eq!(s.causes[0].kind, CauseKind::Unknown);
        assert_eq!(s.causes[1].kind, CauseKind::Unknown);
        let mut s = older(None);
        s.judge_silent();
        assert_eq!(s.causes[0].kind, CauseKind::Hypervisor);
        // Other unknowns (idle while runnable) are not silent stretches.
        assert!(!cause(CauseKind::Unknown, "idle while runnable", 1).is_silent());
        assert!(!cause(CauseKind::Task, SILENT_GAP, 1).is_silent());
    }
}
