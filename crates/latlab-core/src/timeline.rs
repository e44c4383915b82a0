//! A traced spike's timeline as text lines, rendered from its data (`timeline_events`, built by
//! the analyzer): for the text report, `latlab analyze`, a spike's `analysis.txt` and the
//! `timeline` lines run.json keeps for outside readers. Records written before the data
//! existed keep only their lines, which are shown as they are.

use crate::escape::escape;
use crate::record::{Cause, Moment, SpikeRecord, TimelineEvent};
use crate::trace::classify::kind_str;
use crate::units::Nanos;

/// The lines of a spike's timeline: from its `timeline_events`, else (an older record, or a
/// spike that could not be analyzed) its stored `timeline` lines.
pub fn lines(s: &SpikeRecord) -> Vec<String> {
    if s.timeline_events.is_empty() {
        return s.timeline.clone();
    }
    render(s.cpu, s.latency_ns, &s.causes, &s.timeline_events)
}

/// A timeline relative to the intended wake-up E (µs with one decimal): the moments, the
/// latency and how much of it the causes explain, then each cause with its share. Names from
/// the trace are untrusted text: escaped.
pub fn render(
    cpu: u32,
    latency_ns: Nanos,
    causes: &[Cause],
    events: &[TimelineEvent],
) -> Vec<String> {
    let rel = |d: i64| format!("{:+10.1} us", d as f64 / 1000.0);
    let mut v = Vec::with_capacity(events.len() + 1 + causes.len());
    let mut cascade = false;
    for e in events {
        let at = rel(e.offset_ns);
        v.push(match e.what {
            Moment::TimerDue | Moment::GapStart => {
                cascade |= e.cascade;
                let (what, by) = match e.what {
                    Moment::GapStart => ("last clock read before the gap", "by"),
                    _ => ("timer due", "for"),
                };
                match &e.task {
                    Some(t) => format!(
                        "{at}  {what} {by} {} (pid {}, prio {}) on CPU {cpu}",
                        escape(&t.comm),
                        t.pid,
                        t.prio
                    ),
                    None => format!("{at}  {what} on CPU {cpu}"),
                }
            }
            Moment::TimerIrq => format!("{at}  timer interrupt entry"),
            Moment::Woken => format!("{at}  thread woken (sched_waking)"),
            Moment::SwitchedIn => format!("{at}  switched in"),
            Moment::ClockRead => format!("{at}  thread read its clock"),
            Moment::Other => format!("{at}  (an event this latlab does not name)"),
        });
    }
    let explained: Nanos = causes.iter().map(|c| c.ns).sum();
    v.push(format!(
        "latency {:.1} us; explained {:.1} us; unexplained {:.1} us{}",
        latency_ns as f64 / 1000.0,
        explained as f64 / 1000.0,
        latency_ns.saturating_sub(explained) as f64 / 1000.0,
        if cascade {
            " (cascade of the previous stall)"
        } else {
            ""
        }
    ));
    for c in causes {
        v.push(format!(
            "  {:>10.1} us {:>5.1}%  {:<11} {}{}",
            c.ns as f64 / 1000.0,
            100.0 * c.ns as f64 / latency_ns.max(1) as f64,
            kind_str(c.kind),
            escape(&c.name),
            if c.pid > 0 {
                format!(" (pid {}, prio {})", c.pid, c.prio)
            } else {
                String::new()
            }
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{CauseKind, TimelineTask};

    fn spike(events: Vec<TimelineEvent>, timeline: Vec<String>) -> SpikeRecord {
        SpikeRecord {
            cpu: 1,
            at_ns: 5_000,
            latency_ns: 12_000,
            causes: vec![Cause {
                kind: CauseKind::PreemptOff,
                name: "hog\x1b[31m".into(),
                pid: 42,
                prio: 120,
                ns: 9_000,
                context: None,
            }],
            trace_file: None,
            timeline,
            timeline_events: events,
            lanes: None,
            steal: None,
            others: None,
            timerlat: None,
        }
    }

    fn at(offset_ns: i64, what: Moment) -> TimelineEvent {
        TimelineEvent {
            offset_ns,
            what,
            task: None,
            cascade: false,
            from_idle: false,
        }
    }

    /// The lines come from the data (every moment, the sums, each cause, names escaped), and
    /// a record without data (run.json from before it) shows its stored lines.
    #[test]
    fn lines_from_the_data_else_the_stored_lines() {
        let due = TimelineEvent {
            task: Some(TimelineTask {
                comm: "lat\nx".into(),
                pid: 7,
                prio: 19,
            }),
            cascade: true,
            from_idle: false,
            ..at(0, Moment::TimerDue)
        };
        let s = spike(
            vec![
                due,
                at(-1_500, Moment::TimerIrq),
                at(2_000, Moment::Woken),
                at(11_000, Moment::SwitchedIn),
                at(12_000, Moment::ClockRead),
            ],
            vec!["stale".into()],
        );
        assert_eq!(
            lines(&s),
            [
                "      +0.0 us  timer due for lat\\u{a}x (pid 7, prio 19) on CPU 1",
                "      -1.5 us  timer interrupt entry",
                "      +2.0 us  thread woken (sched_waking)",
                "     +11.0 us  switched in",
                "     +12.0 us  thread read its clock",
                "latency 12.0 us; explained 9.0 us; unexplained 3.0 us (cascade of the previous stall)",
                "         9.0 us  75.0%  preempt_off hog\\u{1b}[31m (pid 42, prio 120)",
            ]
        );
        let old = spike(vec![], vec!["line one".into(), "line two".into()]);
        assert_eq!(lines(&old), ["line one", "line two"]);
    }

    /// run.json keeps the data: a record written and read back renders the same lines, and
    /// one from before `timeline_events` (only `timeline`) loads with its lines.
    #[test]
    fn timeline_events_round_trip_and_old_records_load() {
        let s = spike(vec![at(0, Moment::TimerDue), at(3, Moment::Woken)], vec![]);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["timeline_events"][1]["what"], "woken");
        assert_eq!(json["timeline_events"][1]["offset_ns"], 3);
        let back: SpikeRecord = serde_json::from_value(json).unwrap();
        assert_eq!(lines(&back), lines(&s));
        let old: SpikeRecord = serde_json::from_str(
            r#"{"cpu": 0, "at_ns": 1, "latency_ns": 2, "timeline": ["as it was"]}"#,
        )
        .unwrap();
        assert!(old.timeline_events.is_empty());
        assert_eq!(lines(&old), ["as it was"]);
        // A moment a later latlab names loads, shown without a name.
        let later: TimelineEvent =
            serde_json::from_str(r#"{"offset_ns": 5, "what": "migrated"}"#).unwrap();
        assert_eq!(later.what, Moment::Other);
    }
}
