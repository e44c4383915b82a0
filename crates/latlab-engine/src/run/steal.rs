//! Steal time around the traced spikes (run.json `spikes[].steal`): the evidence for or
//! against a stall of the host, which the trace cannot show (a silent stretch is the same
//! whether the host took the CPU or something held interrupts off untraced). While it traces,
//! the collector reads every CPU's steal time from `/proc/stat` once a second; a spike's
//! evidence is its CPU's steal between the last reading before the spike and one taken when
//! the recorder hands its record over (after the spike ended). Once a second, not every tick:
//! `/proc/stat` sums every IRQ over every CPU, which costs on a machine of many of both.

use std::collections::VecDeque;

use latlab_core::record::{SpikeRecord, SpikeSteal};

/// Readings kept: a spike's record can come this many seconds after the spike at most.
const KEEP: usize = 120;

/// A reading: its CLOCK_MONOTONIC instant and every CPU's steal in ns, as (cpu, steal).
pub(super) type Reading = Option<(u64, Vec<(u32, u64)>)>;

/// The readings of every CPU's steal time.
pub(super) struct StealWatch {
    /// Each reading's instant and its (cpu, steal) sorted by CPU.
    readings: VecDeque<(u64, Vec<(u32, u64)>)>,
    source: fn() -> Reading,
}

impl StealWatch {
    /// A watch with its first reading: taken before the measurement starts, so that the
    /// first spikes have one before them.
    pub fn new() -> StealWatch {
        StealWatch::with_source(latlab_sys::procstat::steal_now)
    }

    fn with_source(source: fn() -> Reading) -> StealWatch {
        let mut w = StealWatch {
            readings: VecDeque::with_capacity(KEEP),
            source,
        };
        w.read();
        w
    }

    /// One more reading (the oldest dropped past [`KEEP`]); a failed one is skipped.
    pub fn read(&mut self) {
        let Some((at, mut all)) = (self.source)() else {
            return;
        };
        all.sort_unstable();
        if self.readings.len() == KEEP {
            self.readings.pop_front();
        }
        self.readings.push_back((at, all));
    }

    /// Sets each record's `steal` from a fresh reading (None where no reading holds it), and
    /// judges its silent stretches by it ([`SpikeRecord::judge_silent`]).
    pub fn attach(&mut self, spikes: &mut [SpikeRecord]) {
        if spikes.is_empty() {
            return;
        }
        self.read();
        for s in spikes {
            s.steal = self.evidence(s);
            s.judge_silent();
        }
    }

    fn evidence(&self, s: &SpikeRecord) -> Option<SpikeSteal> {
        let of = |row: &[(u32, u64)]| {
            row.binary_search_by_key(&s.cpu, |&(c, _)| c)
                .ok()
                .map(|i| row[i].1)
        };
        let (end_at, end) = self.readings.back()?;
        let (from, start) = self.readings.iter().rev().find(|(t, _)| *t <= s.at_ns)?;
        if *end_at < s.at_ns.saturating_add(s.latency_ns) {
            return None;
        }
        let (a, b) = (of(start)?, of(end)?);
        Some(SpikeSteal {
            from_ns: *from,
            window_ns: end_at - from,
            steal_ns: b.saturating_sub(a),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_core::record::CauseKind;
    use std::cell::Cell;

    thread_local! {
        /// The fake clock and CPU 1's steal, moved by the tests between readings.
        static NOW: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }

    fn fake() -> Reading {
        let (at, steal) = NOW.with(Cell::get);
        Some((at, vec![(1, steal), (0, 999)]))
    }

    fn spike(cpu: u32, at_ns: u64, latency_ns: u64) -> SpikeRecord {
        SpikeRecord {
            cpu,
            at_ns,
            latency_ns,
            causes: vec![],
            trace_file: None,
            timeline: vec![],
            timeline_events: vec![],
            lanes: None,
            steal: None,
            others: None,
            timerlat: None,
        }
    }

    #[test]
    fn a_spike_gets_the_steal_of_its_cpu_between_the_readings_around_it() {
        NOW.with(|n| n.set((1_000, 50)));
        let mut w = StealWatch::with_source(fake);
        NOW.with(|n| n.set((2_000, 60)));
        w.read();
        // The spike starts after the second reading: the window starts there.
        NOW.with(|n| n.set((3_500, 80)));
        let mut s = [spike(1, 2_500, 900), spike(1, 500, 10), spike(7, 2_500, 10)];
        let gap = |ns| latlab_core::record::Cause {
            kind: CauseKind::Unknown,
            name: latlab_core::record::SILENT_GAP.into(),
            pid: 0,
            prio: 0,
            ns,
            context: None,
        };
        s[0].causes = vec![gap(900)];
        s[1].causes = vec![gap(10)];
        w.attach(&mut s);
        // Each spike is judged by its evidence: steal that holds its silent gap makes it the
        // host's; without evidence it stays a silent gap.
        assert_eq!(s[0].causes[0].kind, CauseKind::Hypervisor);
        assert_eq!(s[1].causes[0].kind, CauseKind::Unknown);
        assert_eq!(
            s[0].steal,
            Some(SpikeSteal {
                from_ns: 2_000,
                window_ns: 1_500,
                steal_ns: 20
            })
        );
        // Before the first reading, or a CPU /proc/stat does not list: no evidence rather than
        // a wrong one.
        assert_eq!((s[1].steal, s[2].steal), (None, None));
    }

    #[test]
    fn readings_are_bounded_and_a_counter_going_back_is_no_steal() {
        NOW.with(|n| n.set((0, 100)));
        let mut w = StealWatch::with_source(fake);
        for t in 1..(KEEP as u64 + 10) {
            NOW.with(|n| n.set((t * 1_000, 100)));
            w.read();
        }
        assert_eq!(w.readings.len(), KEEP);
        // The oldest readings are gone: a spike older than them has none.
        let mut s = [spike(1, 5_000, 10), spike(1, 100_000, 10)];
        NOW.with(|n| n.set(((KEEP as u64 + 20) * 1_000, 40)));
        w.attach(&mut s);
        assert_eq!(s[0].steal, None);
        assert_eq!(s[1].steal.map(|e| e.steal_ns), Some(0));
    }
}
