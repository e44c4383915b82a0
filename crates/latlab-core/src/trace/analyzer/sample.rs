//! One analyzed sample: its moments, its causes, its lanes, and its spike record.

use crate::record::{Cause, Moment, SpikeLanes, SpikeRecord, TimelineEvent, TimelineTask};
use crate::units::Nanos;

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
    /// The CPU was in its idle task at E: the timer's IRQ woke it from idle.
    pub from_idle: bool,
    /// A spinning thread's gap (the noise mode): E is its last clock read before the gap.
    pub noise: bool,
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
    /// What ran on the CPU from E to the sample's end, the stretches the causes were charged
    /// with (run.json `spikes[].lanes`).
    pub lanes: SpikeLanes,
}

impl Sample {
    pub fn explained_ns(&self) -> Nanos {
        self.causes.iter().map(|c| c.ns).sum()
    }

    /// The timeline as data: E, then the timer IRQ, the wake-up, the switch-in and the clock
    /// read where known, relative to E (rendered by `latlab_report::timeline`).
    pub fn timeline_events(&self) -> Vec<TimelineEvent> {
        let e = self.intended_ns;
        let at = |t: Nanos, what: Moment| TimelineEvent {
            offset_ns: (t as i128 - e as i128) as i64,
            what,
            task: None,
            cascade: false,
            from_idle: false,
        };
        let mut v = vec![TimelineEvent {
            task: Some(TimelineTask {
                comm: self.comm.clone(),
                pid: self.pid,
                prio: self.prio,
            }),
            cascade: self.cascade,
            from_idle: self.from_idle,
            ..at(
                e,
                if self.noise {
                    Moment::GapStart
                } else {
                    Moment::TimerDue
                },
            )
        }];
        let moments = [
            (self.timer_irq_ns, Moment::TimerIrq),
            (self.wakeup_ns, Moment::Woken),
            (self.switch_in_ns, Moment::SwitchedIn),
            (self.actual_ns, Moment::ClockRead),
        ];
        v.extend(moments.into_iter().filter_map(|(t, m)| Some(at(t?, m))));
        v
    }

    /// The spike's record: its causes and timeline as data (`timeline`, the text lines, is
    /// left to the writer of the record to render).
    pub fn to_spike(&self) -> SpikeRecord {
        SpikeRecord {
            cpu: self.cpu,
            at_ns: self.intended_ns,
            latency_ns: self.latency_ns,
            causes: self.causes.clone(),
            trace_file: None,
            timeline: Vec::new(),
            timeline_events: self.timeline_events(),
            lanes: Some(self.lanes.clone()),
            steal: None,
            others: None,
            timerlat: None,
        }
    }
}
