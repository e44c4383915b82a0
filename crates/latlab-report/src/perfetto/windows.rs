//! A run's traces as windows of the Perfetto trace: a spike's or a profile's `trace.dat`
//! decoded with its own layout, a spike's `trace.txt` parsed, each with its lost events as
//! marks; the spike itself and a profile's per-CPU losses as marks.

use std::collections::BTreeMap;

use latlab_core::profile::ProfileRecord;
use latlab_core::record::SpikeRecord;
use latlab_core::trace::raw::{decode_all, decoder_for, migrations_and_gaps, LostGap};
use latlab_core::trace::{tracedat, Event, Record};
use latlab_core::units::Human;

use super::{Arg, Builder, Mark, SpikeMark};

/// A trace-cmd file's events (with its migrations and its lost events) as a window.
pub fn window_dat(bytes: &[u8], b: &mut Builder) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let dat = tracedat::read(bytes).map_err(|x| e(&x))?;
    let (dec, mut comms) = decoder_for(&dat).map_err(|x| e(&x))?;
    let (events, _lost, _) = decode_all(&dec, &dat, &mut comms).map_err(|x| e(&x))?;
    let (migrations, gaps) = migrations_and_gaps(&dat).map_err(|x| e(&x))?;
    b.window_with(&events, &migrations);
    for g in gaps {
        lost_mark(b, g);
    }
    Ok(())
}

/// A tracefs text trace's events (with its `[LOST N EVENTS]` lines) as a window.
pub fn window_text(text: &str, b: &mut Builder) -> Result<(), String> {
    let recs = latlab_core::trace::parse(text).map_err(|e| format!("{e:?}"))?;
    // `CPU:N [LOST M EVENTS]` lines: gaps between that CPU's events around them.
    let mut events: Vec<Event> = Vec::new();
    let mut last: BTreeMap<u32, u64> = BTreeMap::new();
    let mut pending: BTreeMap<u32, u64> = BTreeMap::new();
    let mut gaps = Vec::new();
    for r in recs {
        match r {
            Record::Event(e) => {
                if let Some(n) = pending.remove(&e.cpu) {
                    gaps.push(LostGap {
                        cpu: e.cpu,
                        after_ns: last.get(&e.cpu).copied(),
                        before_ns: Some(e.ts),
                        events: Some(n),
                    });
                }
                last.insert(e.cpu, e.ts);
                events.push(e);
            }
            Record::Lost { cpu, events: n, .. } => {
                let p = pending.entry(cpu).or_default();
                *p = p.saturating_add(n);
            }
            _ => {}
        }
    }
    for (cpu, n) in pending {
        gaps.push(LostGap {
            cpu,
            after_ns: last.get(&cpu).copied(),
            before_ns: None,
            events: Some(n),
        });
    }
    b.window(&events);
    for g in gaps {
        lost_mark(b, g);
    }
    Ok(())
}

/// A loss as a slice "events lost" on its CPU's track: from the last event before the loss to
/// the first after it (an instant where only one of them is in the window; nothing where
/// neither is), the count as an arg.
fn lost_mark(b: &mut Builder, g: LostGap) {
    let (Some(begin), Some(end)) = (g.after_ns.or(g.before_ns), g.before_ns.or(g.after_ns)) else {
        return;
    };
    b.mark(Mark {
        track: format!("CPU {}: events lost", g.cpu),
        begin_ns: begin,
        end_ns: end,
        name: match g.events {
            Some(n) => format!("events lost: {n}"),
            None => "events lost (how many: not recorded)".into(),
        },
        args: vec![
            ("cpu".into(), Arg::Uint(g.cpu as u64)),
            (
                "lost_events".into(),
                match g.events {
                    Some(n) => Arg::Uint(n),
                    None => Arg::Str("unknown".into()),
                },
            ),
        ],
    });
}

/// Spike `i` (0-based) of a run as a slice on its CPU, from its intended to its actual time.
pub fn spike(b: &mut Builder, i: usize, s: &SpikeRecord) {
    b.spike(SpikeMark {
        name: format!(
            "spike {}: CPU {} latency {}",
            i + 1,
            s.cpu,
            Human(s.latency_ns)
        ),
        cpu: s.cpu,
        intended_ns: s.at_ns,
        actual_ns: s.at_ns.saturating_add(s.latency_ns),
    });
}

/// A profile's losses over its whole span (where in it: not recorded), a mark per CPU that
/// lost events.
pub fn profile_losses(b: &mut Builder, p: &ProfileRecord) {
    let end = p.start_ns.saturating_add(p.duration_ns);
    for c in p.cpus.iter().filter(|c| c.lost_events > 0 || c.gap_ns > 0) {
        b.mark(Mark {
            track: format!("CPU {}: events lost (profile totals)", c.cpu),
            begin_ns: p.start_ns,
            end_ns: end,
            name: format!(
                "profile: {} events lost, {} in gaps",
                c.lost_events,
                Human(c.gap_ns)
            ),
            args: vec![
                ("cpu".into(), Arg::Uint(c.cpu as u64)),
                ("lost_events".into(), Arg::Uint(c.lost_events)),
                ("gap_ns".into(), Arg::Uint(c.gap_ns)),
                ("known_ns".into(), Arg::Uint(c.known_ns)),
            ],
        });
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::super::Trace;
    use super::*;

    /// The track events' (track name, event name) of a finished trace.
    fn slices(b: Builder) -> Vec<(String, String)> {
        let t = Trace::decode(b.finish().as_slice()).unwrap();
        let names: BTreeMap<u64, String> = t
            .packet
            .iter()
            .filter_map(|p| p.track_descriptor.as_ref())
            .map(|d| (d.uuid.unwrap(), d.name.clone().unwrap_or_default()))
            .collect();
        t.packet
            .iter()
            .filter_map(|p| p.track_event.as_ref())
            .filter(|e| e.name.is_some())
            .map(|e| {
                (
                    names[&e.track_uuid.unwrap()].clone(),
                    e.name.clone().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_text_window_marks_its_lost_events_between_the_events_around_them() {
        let text = "\
  a-1 [000] d..1.  1.000000: hrtimer_start: hrtimer=h function=hrtimer_wakeup expires=1000100000 softexpires=1000100000 mode=ABS
CPU:0 [LOST 5 EVENTS]
  a-1 [000] d..2.  1.000900: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=b next_pid=2 next_prio=120
";
        let mut b = Builder::default();
        window_text(text, &mut b).unwrap();
        assert_eq!(
            b.written, 1,
            "the switch is written, the timer start is not a kind kept"
        );
        let s = slices(b);
        assert!(
            s.contains(&("CPU 0: events lost".into(), "events lost: 5".into())),
            "{s:?}"
        );
    }

    #[test]
    fn a_spike_and_a_profiles_losses_are_marks() {
        let mut b = Builder::default();
        let s: SpikeRecord =
            serde_json::from_str(r#"{"cpu": 3, "at_ns": 1000, "latency_ns": 250000}"#).unwrap();
        spike(&mut b, 1, &s);
        let cpu = |n: u32, lost: u64| {
            serde_json::json!({"cpu": n, "rq_share": [], "switches": 0, "migrations": 0,
                "known_ns": 0, "gap_ns": 0, "lost_events": lost})
        };
        let p: ProfileRecord = serde_json::from_value(serde_json::json!({
            "start_ns": 5, "duration_ns": 10, "events": 0, "lost_events": 7, "lost_unknown": 0,
            "seeded_tasks": 0, "tasks_seen": 0, "tasks_untracked": 0, "pixel_ns": 1,
            "cpus": [cpu(0, 0), cpu(1, 7)], "wait": [], "wait_top": 0, "wait_dropped": 0
        }))
        .unwrap();
        profile_losses(&mut b, &p);
        let s = slices(b);
        assert!(
            s.contains(&(
                "latlab spikes".into(),
                "spike 2: CPU 3 latency 250 µs".into()
            )),
            "{s:?}"
        );
        assert!(
            s.contains(&(
                "CPU 1: events lost (profile totals)".into(),
                "profile: 7 events lost, 0 ns in gaps".into()
            )),
            "{s:?}"
        );
        assert_eq!(s.len(), 2, "CPU 0 lost nothing: {s:?}");
    }

    #[test]
    fn garbage_is_an_error_not_a_window() {
        let mut b = Builder::default();
        assert!(window_dat(b"not a trace", &mut b).is_err());
    }
}
