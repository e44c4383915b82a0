//! A window: the time from a thread's intended wake-up (E) to its sample's end, charged cause
//! by cause, with the stretches it was charged in (its lanes).

use std::borrow::Cow;

use crate::record::{CauseContext, CauseKind, Lane, LaneSegment, SpikeLanes, MAX_LANE_SEGMENTS};
use crate::trace::classify::Key;
use crate::units::Nanos;

/// A sample's end from its marker: (intended, actual, latency, marker timestamp).
pub(super) type MarkerEnd = (Nanos, Nanos, Option<Nanos>, Nanos);

#[derive(Debug, Clone)]
pub(super) struct Window<'a> {
    pub(super) pid: i64,
    pub(super) comm: Cow<'a, str>,
    pub(super) prio: Option<i64>,
    pub(super) e: Nanos,
    /// Time from which the trace covered this window (E, or later when history is missing).
    pub(super) covered_from: Option<Nanos>,
    /// The CPU was in its idle task at E (known only when the trace covers E).
    pub(super) idle_at_e: bool,
    /// A spinning thread's gap (the noise mode): E is its last clock read before the gap, it
    /// was running then, and what ran meanwhile interrupted it (no timer, no wake-up).
    pub(super) noise: bool,
    /// A noise gap's end (the spinning thread's first clock read after it): its window is
    /// charged up to it and ends there as a sample, whoever writes its marker and when (the
    /// osnoise tracer's reader writes it from another CPU, many events later).
    pub(super) until: Option<Nanos>,
    pub(super) timer_irq: Option<Nanos>,
    pub(super) woken: Option<Nanos>,
    pub(super) switched: Option<Nanos>,
    pub(super) acc: Vec<(Key<'a>, Nanos)>,
    /// The context each cause of `acc` was seen in (same index).
    pub(super) ctx: Vec<CauseContext>,
    /// `acc` at the switch-in.
    pub(super) at_switch: Vec<(Key<'a>, Nanos)>,
    pub(super) last_key: Option<usize>,
    /// The previous switch-in of this thread on this CPU (for cascades).
    pub(super) prev_switch: Option<Nanos>,
    /// The stretches charged, in time order: (cause as an index into `acc`, start, end),
    /// trace clock ns; pruned to the longest [`MAX_LANE_SEGMENTS`] whenever twice that many
    /// pile up.
    pub(super) segs: Vec<(usize, Nanos, Nanos)>,
    /// Segments pruned so far.
    pub(super) segs_dropped: u64,
    /// Marker mode: each time the thread was preempted after its switch-in and before its
    /// marker, (the switch-out, `acc` then). Its clock read may come before a preemption,
    /// and what ran after the read is not part of its latency.
    pub(super) preempted: Vec<(Nanos, Vec<(Key<'a>, Nanos)>)>,
}

/// Keep the `keep` longest segments (in time order), counting the others in `dropped`.
pub(super) fn prune_segments<K>(segs: &mut Vec<(K, Nanos, Nanos)>, keep: usize, dropped: &mut u64) {
    if segs.len() <= keep {
        return;
    }
    let mut lens: Vec<Nanos> = segs.iter().map(|(_, a, b)| b - a).collect();
    let cut = lens.len() - keep;
    let (_, &mut nth, _) = lens.select_nth_unstable(cut);
    // Shorter than the keep-th longest go; among equals, the earliest go first.
    let mut equal_out = cut - segs.iter().filter(|(_, a, b)| b - a < nth).count();
    segs.retain(|(_, a, b)| {
        let len = b - a;
        if len < nth {
            false
        } else if len == nth && equal_out > 0 {
            equal_out -= 1;
            false
        } else {
            true
        }
    });
    *dropped += cut as u64;
}

impl<'a> Window<'a> {
    /// A window of `pid` from E, nothing charged yet; `prev_switch` its last switch-in on the
    /// CPU (for cascades).
    pub(super) fn new(
        pid: i64,
        comm: Cow<'a, str>,
        prio: Option<i64>,
        e: Nanos,
        prev_switch: Option<Nanos>,
    ) -> Window<'a> {
        Window {
            pid,
            comm,
            prio,
            e,
            covered_from: None,
            idle_at_e: false,
            noise: false,
            until: None,
            timer_irq: None,
            woken: None,
            switched: None,
            acc: Vec::new(),
            ctx: Vec::new(),
            at_switch: Vec::new(),
            last_key: None,
            prev_switch,
            segs: Vec::new(),
            segs_dropped: 0,
            preempted: Vec::new(),
        }
    }

    /// The stretch `[from, to)` was charged to the cause `acc[i]`: extends the last segment
    /// when it is the same cause and contiguous.
    pub(super) fn segment(&mut self, i: usize, from: Nanos, to: Nanos) {
        if let Some(last) = self.segs.last_mut() {
            if last.2 == from && last.0 == i {
                last.2 = to;
                return;
            }
        }
        if self.segs.len() >= 2 * MAX_LANE_SEGMENTS {
            prune_segments(&mut self.segs, MAX_LANE_SEGMENTS, &mut self.segs_dropped);
        }
        self.segs.push((i, from, to));
    }

    /// The segments as lanes, clipped to `[E, end)`, relative to E.
    pub(super) fn lanes(&self, cpu: u32, e: Nanos, end: Nanos) -> SpikeLanes {
        let mut dropped = self.segs_dropped;
        let mut segs: Vec<(&Key<'a>, Nanos, Nanos)> = self
            .segs
            .iter()
            .map(|(i, a, b)| (&self.acc[*i].0, (*a).max(e), (*b).min(end)))
            .filter(|(_, a, b)| a < b)
            .collect();
        prune_segments(&mut segs, MAX_LANE_SEGMENTS, &mut dropped);
        let rel = |t: Nanos| (t as i128 - e as i128) as i64;
        let segments = segs
            .into_iter()
            .map(|((kind, name, pid, _), a, b)| LaneSegment {
                cpu,
                lane: match kind {
                    CauseKind::Irq => Lane::Irq,
                    CauseKind::Softirq => Lane::Softirq,
                    CauseKind::Nmi => Lane::Nmi,
                    CauseKind::Hypervisor | CauseKind::Unknown => Lane::Stall,
                    CauseKind::Task if *pid == self.pid => Lane::Measuring,
                    CauseKind::Task | CauseKind::PreemptOff | CauseKind::IrqOff => Lane::Task,
                },
                cause: *kind,
                name: name.to_string(),
                pid: *pid,
                start_ns: rel(a),
                end_ns: rel(b),
            })
            .collect();
        SpikeLanes { segments, dropped }
    }

    /// Charge `ns` to `key`; its index in `acc` (None when `ns` is 0).
    pub(super) fn add(&mut self, key: Key<'a>, ns: Nanos) -> Option<usize> {
        if ns == 0 {
            return None;
        }
        let i = match self.acc.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                self.acc[i].1 += ns;
                i
            }
            None => {
                self.acc.push((key, ns));
                self.ctx.push(CauseContext::default());
                self.acc.len() - 1
            }
        };
        self.last_key = Some(i);
        Some(i)
    }
}
