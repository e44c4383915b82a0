//! A spike's other CPUs: their events over the spike's window, kept in its `trace.dat`
//! beside its own CPU's, and what they did while the spike's CPU was silent
//! ([`SpikeOthers`]): evidence for or against a stall of the whole machine.

use std::ops::Range;

use super::Spike;
use crate::record::{Lane, OtherCpu, SpikeOthers, SpikeRecord};
use crate::trace::event::EventKind;
use crate::trace::raw::{Comms, RawDecoder};

/// How far before a spike's intended wake-up the other CPUs' events are kept: enough to
/// see what each ran when the spike began, not the seconds of a whole session.
pub const OTHERS_LOOKBACK_NS: u64 = 10_000_000;

/// The span of the other CPUs' events a spike keeps: from [`OTHERS_LOOKBACK_NS`] before its
/// intended wake-up to its clock read.
pub fn others_window(s: Spike) -> Range<u64> {
    s.intended_ns.saturating_sub(OTHERS_LOOKBACK_NS)..s.actual_ns.saturating_add(1)
}

/// The spike's silent stretches on its CPU, as absolute CLOCK_MONOTONIC spans: its `silent
/// gap`s and the thread's own `switch-to-user` (the CPU logged no event in either; 30–50 µs
/// of switch-to-user is no path back to user space, but a stall of the same kind).
fn silent_spans(rec: &SpikeRecord) -> Vec<Range<u64>> {
    let Some(l) = rec.lanes.as_ref() else {
        return Vec::new();
    };
    let abs = |rel: i64| rec.at_ns.saturating_add_signed(rel);
    l.segments
        .iter()
        .filter(|g| g.cpu == rec.cpu && g.end_ns > g.start_ns)
        .filter(|g| g.is_silent() || g.lane == Lane::Measuring)
        .map(|g| abs(g.start_ns)..abs(g.end_ns))
        .collect()
}

/// What the other CPUs did in the spike's silent stretches, from their pages (each CPU's,
/// trimmed to [`others_window`]; `comms` names their tasks). None: the spike has no silent
/// stretch, or there is no other CPU.
pub fn others_evidence(
    dec: &RawDecoder,
    rec: &SpikeRecord,
    others: &[(u32, Vec<u8>)],
    comms: &Comms,
) -> Option<SpikeOthers> {
    let spans = silent_spans(rec);
    if spans.is_empty() || others.is_empty() {
        return None;
    }
    let first = spans[0].start;
    let mut cpus = Vec::with_capacity(others.len());
    let mut events = Vec::new();
    for (cpu, pages) in others {
        events.clear();
        let _ = dec.decode_cpu(*cpu, pages, comms, &mut events);
        let inside = events
            .iter()
            .filter(|e| spans.iter().any(|s| s.contains(&e.ts)))
            .count() as u64;
        // The task current when the first stretch began: the last event before it says (a
        // task switch names the next one; any other event its own task).
        let running = events.iter().rev().find(|e| e.ts <= first).map(|e| {
            let (pid, comm) = match &e.kind {
                EventKind::SchedSwitch { next, .. } => (next.pid, next.comm.as_ref()),
                _ => (e.pid, e.task_comm.as_ref()),
            };
            match pid {
                0 => "idle".to_string(),
                _ => comm.to_string(),
            }
        });
        cpus.push(OtherCpu {
            cpu: *cpu,
            events: inside,
            running,
        });
    }
    cpus.sort_by_key(|c| c.cpu);
    Some(SpikeOthers {
        silent_ns: spans.iter().map(|s| s.end - s.start).sum(),
        cpus,
    })
}
