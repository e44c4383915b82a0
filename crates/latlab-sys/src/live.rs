//! What a measuring thread shares with the collector, written by one thread and read by
//! others through atomics only: a histogram under a seqlock, a ring of per-second maxima, a
//! single-producer ring of spikes, and what a mode adds (an execution-time histogram, an
//! audio deadline tally). Allocated and touched before the run; the measuring thread only
//! loads and stores.

use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU64, Ordering::*};

use latlab_core::hist::{HistParts, Histogram, Layout};
use latlab_core::modes::{AudioTally, VERDICT_BUFFERS};

/// Per-second maxima kept in the ring before the collector must have read them.
pub const SECOND_RING: usize = 64;
/// Spikes queued for the collector before further ones are only counted.
pub const SPIKE_RING: usize = 1024;

/// A histogram written by one thread and read, racily but safely, by others.
///
/// Totals are under a seqlock, so a reader sees a consistent (count, min, max, sum, sumsq);
/// bucket counters are relaxed atomics, so a mid-run snapshot may lag the totals by a few
/// samples. After the writer has finished, a snapshot is exact.
pub struct LiveHistogram {
    layout: Layout,
    counts: Box<[AtomicU64]>,
    seq: AtomicU64,
    count: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
    sum_lo: AtomicU64,
    sum_hi: AtomicU64,
    sq_lo: AtomicU64,
    sq_hi: AtomicU64,
}

/// Consistent totals read from a [`LiveHistogram`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub sum: u128,
    pub sumsq: u128,
}

impl LiveHistogram {
    pub fn new(layout: Layout) -> LiveHistogram {
        LiveHistogram {
            layout,
            counts: (0..layout.len()).map(|_| AtomicU64::new(0)).collect(),
            seq: AtomicU64::new(0),
            count: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            sum_lo: AtomicU64::new(0),
            sum_hi: AtomicU64::new(0),
            sq_lo: AtomicU64::new(0),
            sq_hi: AtomicU64::new(0),
        }
    }

    /// Record one sample. Single writer only (the owning thread). No RMW instructions: plain
    /// loads and stores, so the cost is a few cycles.
    #[inline(always)]
    pub fn record(&self, v: u64) {
        let i = self.layout.index(v);
        let c = &self.counts[i];
        c.store(c.load(Relaxed) + 1, Relaxed);
        let s = self.seq.load(Relaxed);
        self.seq.store(s + 1, Relaxed);
        fence(Release);
        self.count.store(self.count.load(Relaxed) + 1, Relaxed);
        if v < self.min.load(Relaxed) {
            self.min.store(v, Relaxed);
        }
        if v > self.max.load(Relaxed) {
            self.max.store(v, Relaxed);
        }
        let sum = (self.sum_lo.load(Relaxed) as u128 | (self.sum_hi.load(Relaxed) as u128) << 64)
            .saturating_add(v as u128);
        self.sum_lo.store(sum as u64, Relaxed);
        self.sum_hi.store((sum >> 64) as u64, Relaxed);
        let sq = (self.sq_lo.load(Relaxed) as u128 | (self.sq_hi.load(Relaxed) as u128) << 64)
            .saturating_add(v as u128 * v as u128);
        self.sq_lo.store(sq as u64, Relaxed);
        self.sq_hi.store((sq >> 64) as u64, Relaxed);
        self.seq.store(s + 2, Release);
    }

    /// Consistent totals (retries while the writer is mid-update).
    pub fn totals(&self) -> Totals {
        loop {
            let s1 = self.seq.load(Acquire);
            if s1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let t = Totals {
                count: self.count.load(Relaxed),
                min: self.min.load(Relaxed),
                max: self.max.load(Relaxed),
                sum: self.sum_lo.load(Relaxed) as u128 | (self.sum_hi.load(Relaxed) as u128) << 64,
                sumsq: self.sq_lo.load(Relaxed) as u128 | (self.sq_hi.load(Relaxed) as u128) << 64,
            };
            fence(Acquire);
            if self.seq.load(Relaxed) == s1 {
                return t;
            }
        }
    }

    /// A plain histogram. Exact once the writer has stopped; mid-run, buckets are made to
    /// agree with the totals' count by trusting the buckets (checkpoints only).
    pub fn snapshot(&self) -> Histogram {
        let t = self.totals();
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let n: u64 = counts.iter().sum();
        let exact = n == t.count;
        let (min, max, sum, sumsq) = if exact {
            (t.min, t.max, t.sum, t.sumsq)
        } else {
            // Mid-run: derive min/max from the buckets so the histogram stays consistent.
            let f = counts.iter().position(|&c| c > 0);
            let l = counts.iter().rposition(|&c| c > 0);
            match (f, l) {
                (Some(f), Some(l)) => (
                    t.min
                        .max(self.layout.lower(f))
                        .min(self.layout.upper(f) - 1),
                    t.max
                        .min(self.layout.upper(l) - 1)
                        .max(self.layout.lower(l)),
                    t.sum,
                    t.sumsq,
                ),
                _ => (0, 0, 0, 0),
            }
        };
        // A bucket may hold a sample the totals do not have yet (the writer bumps the bucket
        // before opening its sequence): with one non-empty bucket and totals still empty, the
        // clamps above give min = upper - 1 > max = lower. Both lie in the bucket either way.
        let min = min.min(max);
        Histogram::from_parts(HistParts {
            layout: self.layout,
            counts,
            min,
            max,
            sum,
            sumsq,
            unknown_above: 0,
            exact_moments: true,
        })
        .expect("a live histogram snapshot is consistent")
    }
}

/// A spike handed to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpikeEvent {
    pub cpu: u32,
    pub intended_ns: u64,
    pub actual_ns: u64,
    pub latency_ns: u64,
    /// This thread wrote the trace marker that stopped the recorder.
    pub marker_written: bool,
    /// timerlat's other latencies of the same activation (its back end only): the IRQ's, and
    /// the thread's when the sample is the return to user space.
    pub irq_ns: Option<u64>,
    pub thread_ns: Option<u64>,
}

/// Single-producer single-consumer ring of spikes. A slot: intended, actual, latency, flags
/// (bit 0 the marker, bit 1 the two context slots written), then the IRQ's and the thread's
/// latency plus one (0: none).
pub(crate) struct SpikeRing {
    slots: Box<[[AtomicU64; 6]]>,
    head: AtomicU64, // written by producer
    tail: AtomicU64, // written by consumer
    dropped: AtomicU64,
}

impl SpikeRing {
    fn new() -> SpikeRing {
        SpikeRing {
            slots: (0..SPIKE_RING)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    #[inline]
    pub(crate) fn push(&self, intended: u64, actual: u64, latency: u64, marker: bool) {
        self.push_flags(intended, actual, latency, marker as u64, None);
    }

    /// [`SpikeRing::push`] with timerlat's IRQ and thread latencies of the activation.
    pub(crate) fn push_contexts(
        &self,
        spike: [u64; 3],
        marker: bool,
        irq: Option<u64>,
        thread: Option<u64>,
    ) {
        let [intended, actual, latency] = spike;
        self.push_flags(
            intended,
            actual,
            latency,
            marker as u64 | 2,
            Some((irq, thread)),
        );
    }

    #[inline]
    fn push_flags(
        &self,
        intended: u64,
        actual: u64,
        latency: u64,
        flags: u64,
        contexts: Option<(Option<u64>, Option<u64>)>,
    ) {
        let h = self.head.load(Relaxed);
        if h - self.tail.load(Acquire) >= SPIKE_RING as u64 {
            self.dropped.store(self.dropped.load(Relaxed) + 1, Relaxed);
            return;
        }
        let s = &self.slots[(h % SPIKE_RING as u64) as usize];
        s[0].store(intended, Relaxed);
        s[1].store(actual, Relaxed);
        s[2].store(latency, Relaxed);
        s[3].store(flags, Relaxed);
        if let Some((irq, thread)) = contexts {
            let plus_one = |v: Option<u64>| v.map_or(0, |v| v.saturating_add(1));
            s[4].store(plus_one(irq), Relaxed);
            s[5].store(plus_one(thread), Relaxed);
        }
        self.head.store(h + 1, Release);
    }

    fn drain(&self, cpu: u32, out: &mut Vec<SpikeEvent>) {
        let h = self.head.load(Acquire);
        let mut t = self.tail.load(Relaxed);
        while t < h {
            let s = &self.slots[(t % SPIKE_RING as u64) as usize];
            let flags = s[3].load(Relaxed);
            let context = |k: usize| match flags & 2 {
                0 => None,
                _ => s[k].load(Relaxed).checked_sub(1),
            };
            out.push(SpikeEvent {
                cpu,
                intended_ns: s[0].load(Relaxed),
                actual_ns: s[1].load(Relaxed),
                latency_ns: s[2].load(Relaxed),
                marker_written: flags & 1 != 0,
                irq_ns: context(4),
                thread_ns: context(5),
            });
            t += 1;
        }
        self.tail.store(t, Release);
    }
}

/// A measuring thread's (or a tracer reader's) tally of the current second: its maximum and
/// sum, published into [`ThreadShared`]'s rings when the second is over. Owned by the one
/// thread that records the samples; no allocation, Relaxed stores.
pub(crate) struct Seconds {
    /// The second being tallied, from the measurement's start.
    sec: u64,
    /// u64::MAX: no sample yet this second.
    max: u64,
    sum: u64,
}

impl Seconds {
    pub(crate) const fn new() -> Seconds {
        Seconds {
            sec: 0,
            max: u64::MAX,
            sum: 0,
        }
    }

    /// A sample of `lat` in second `s` of the measurement: the seconds before it are over.
    #[inline(always)]
    pub(crate) fn add(&mut self, sh: &ThreadShared, s: u64, lat: u64) {
        while self.sec < s {
            self.publish(sh);
            self.sec += 1;
            sh.seconds_done.store(self.sec, Release);
            self.max = u64::MAX;
            self.sum = 0;
        }
        self.max = if self.max == u64::MAX {
            lat
        } else {
            self.max.max(lat)
        };
        self.sum = self.sum.saturating_add(lat);
    }

    #[inline(always)]
    fn publish(&self, sh: &ThreadShared) {
        let slot = (self.sec % SECOND_RING as u64) as usize;
        sh.seconds[slot].store(self.max, Relaxed);
        sh.seconds_sum[slot].store(self.sum, Relaxed);
    }

    /// The measurement is over: the last (partial) second is published.
    pub(crate) fn finish(&self, sh: &ThreadShared) {
        self.publish(sh);
        sh.seconds_done.store(self.sec + 1, Release);
    }
}

/// What one measurement thread shares with the collector.
pub struct ThreadShared {
    pub cpu: u32,
    pub hist: LiveHistogram,
    pub last_ns: AtomicU64,
    pub missed: AtomicU64,
    pub(crate) seconds: [AtomicU64; SECOND_RING],
    /// The sum of each second's samples (the noise mode's noise per second), beside `seconds`.
    pub(crate) seconds_sum: [AtomicU64; SECOND_RING],
    /// Number of whole seconds whose maximum is in the ring (second k at slot k % 64).
    pub(crate) seconds_done: AtomicU64,
    pub(crate) spikes: SpikeRing,
    pub done: AtomicBool,
    /// What the wakeup, jitter and audio modes add (empty for the timer).
    pub mode: ModeShared,
    /// The thread's schedule: its first intended wake-up (CLOCK_MONOTONIC ns, 0 until the
    /// engine has started) and its period; every later one is `first_ns + k × interval_ns`.
    pub first_ns: AtomicU64,
    pub interval_ns: u64,
    /// The timer mode: the thread sleeps between wake-ups and does nothing else (the others
    /// work, or are woken by another thread).
    pub sleeps_between: bool,
    /// The intended time of the last wake-up the thread has recorded (for the `quiet` module).
    pub woke_ns: AtomicU64,
    /// The thread's kernel tid, once it has started (0 before): a front end's live lines
    /// show it, as cyclictest's do.
    pub tid: AtomicI64,
}

impl ThreadShared {
    pub(crate) fn new(
        cpu: u32,
        layout: Layout,
        mode: ModeShared,
        interval_ns: u64,
        sleeps_between: bool,
    ) -> ThreadShared {
        ThreadShared {
            cpu,
            hist: LiveHistogram::new(layout),
            last_ns: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            seconds: std::array::from_fn(|_| AtomicU64::new(0)),
            seconds_sum: std::array::from_fn(|_| AtomicU64::new(0)),
            seconds_done: AtomicU64::new(0),
            spikes: SpikeRing::new(),
            done: AtomicBool::new(false),
            mode,
            first_ns: AtomicU64::new(0),
            interval_ns,
            sleeps_between,
            woke_ns: AtomicU64::new(0),
            tid: AtomicI64::new(0),
        }
    }

    /// Move completed per-second maxima into `out` (index = second of the measurement;
    /// `None` for a second with no sample). Call at least every 60 s.
    pub fn drain_seconds(&self, out: &mut Vec<Option<u64>>) {
        let done = self.seconds_done.load(Acquire) as usize;
        while out.len() < done {
            let v = self.seconds[out.len() % SECOND_RING].load(Relaxed);
            out.push(if v == u64::MAX { None } else { Some(v) });
        }
    }

    /// Move completed per-second sums of the samples into `out` (index = second of the
    /// measurement, 0 for a second with none): the noise mode's noise per second. Call at
    /// least every 60 s.
    pub fn drain_second_sums(&self, out: &mut Vec<u64>) {
        let done = self.seconds_done.load(Acquire) as usize;
        while out.len() < done {
            out.push(self.seconds_sum[out.len() % SECOND_RING].load(Relaxed));
        }
    }

    pub fn drain_spikes(&self, out: &mut Vec<SpikeEvent>) {
        self.spikes.drain(self.cpu, out)
    }

    pub fn dropped_spikes(&self) -> u64 {
        self.spikes.dropped.load(Relaxed)
    }
}

/// Per-thread state of a mode, shared with the collector (atomics only).
pub struct ModeShared {
    /// Execution time of the compute kernel (jitter, audio).
    pub exec: Option<LiveHistogram>,
    pub exec_iterations: AtomicU64,
    pub exec_calibrated_ns: AtomicU64,
    pub audio: Option<AudioShared>,
    /// Wakeup: signals the receiver never saw on their own (two or more arrived while it
    /// was not running; it measured the newest). Counted as missed periods.
    pub coalesced: AtomicU64,
    /// `--backend timerlat`: the IRQ latency of each activation (timer expiry → handler).
    pub irq: Option<LiveHistogram>,
    /// `--backend timerlat` with user-space threads: the thread latency (→ the thread runs
    /// in the kernel), beside the return-to-user latency that is the thread's histogram.
    pub thread: Option<LiveHistogram>,
    /// `--mode noise`: the spinning loop's totals.
    pub noise: Option<NoiseShared>,
}

/// What a noise thread's loop publishes (Relaxed stores on each interference and at its end).
#[derive(Debug, Default)]
pub struct NoiseShared {
    /// `user-loop` (latlab's spinning thread) or `osnoise` (the kernel's tracer).
    pub method: &'static str,
    pub threshold_ns: u64,
    /// The loop's first clock read (0 before).
    pub started_ns: AtomicU64,
    /// From the loop's first clock read to its latest.
    pub runtime_ns: AtomicU64,
    /// The sum of the gaps at or above the threshold.
    pub noise_ns: AtomicU64,
    /// Clock reads (the user loop's; 0 for the kernel's tracer, which does not say).
    pub loops: AtomicU64,
    /// Records the osnoise tracer's ring dropped (at the end).
    pub dropped: AtomicU64,
    /// The interferences by source with their times (the osnoise tracer's, at the end).
    pub sources: std::sync::Mutex<Vec<latlab_core::modes::NoiseSource>>,
}

impl ModeShared {
    /// `exec`: an execution-time histogram (jitter, audio); `audio`: a deadline tally of
    /// `(period_ns, buffers)`.
    pub(crate) fn new(layout: Layout, exec: bool, audio: Option<(u64, u32)>) -> ModeShared {
        ModeShared {
            exec: exec.then(|| LiveHistogram::new(layout)),
            exec_iterations: AtomicU64::new(0),
            exec_calibrated_ns: AtomicU64::new(0),
            audio: audio.map(|(period_ns, buffers)| AudioShared::new(period_ns, buffers)),
            coalesced: AtomicU64::new(0),
            irq: None,
            thread: None,
            noise: None,
        }
    }

    /// A noise thread's: its loop's totals.
    pub(crate) fn noise(layout: Layout, threshold_ns: u64, method: &'static str) -> ModeShared {
        ModeShared {
            noise: Some(NoiseShared {
                method,
                threshold_ns,
                ..NoiseShared::default()
            }),
            ..ModeShared::new(layout, false, None)
        }
    }

    /// A timerlat CPU's: its IRQ series, and its thread series when the thread's own
    /// histogram is the return to user.
    pub(crate) fn timerlat(layout: Layout, thread: bool) -> ModeShared {
        ModeShared {
            irq: Some(LiveHistogram::new(layout)),
            thread: thread.then(|| LiveHistogram::new(layout)),
            ..ModeShared::new(layout, false, None)
        }
    }
}

/// An [`AudioTally`] published through atomics (single writer: the measuring thread).
pub struct AudioShared {
    period_ns: u64,
    buffers: u32,
    fragments: AtomicU64,
    xruns: AtomicU64,
    worst: AtomicU64,
    late: [AtomicU64; VERDICT_BUFFERS],
}

impl AudioShared {
    fn new(period_ns: u64, buffers: u32) -> AudioShared {
        AudioShared {
            period_ns,
            buffers,
            fragments: AtomicU64::new(0),
            xruns: AtomicU64::new(0),
            worst: AtomicU64::new(0),
            late: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    #[inline(always)]
    pub(crate) fn publish(&self, t: &AudioTally) {
        for (a, v) in self.late.iter().zip(t.late_by_buffers) {
            a.store(v, Relaxed);
        }
        self.worst.store(t.worst_response_ns, Relaxed);
        self.xruns.store(t.xruns, Relaxed);
        self.fragments.store(t.fragments, Release);
    }

    /// The tally as last published.
    pub fn tally(&self) -> AudioTally {
        let mut t = AudioTally::new(self.period_ns, self.buffers);
        t.fragments = self.fragments.load(Acquire);
        t.xruns = self.xruns.load(Relaxed);
        t.worst_response_ns = self.worst.load(Relaxed);
        for (v, a) in t.late_by_buffers.iter_mut().zip(&self.late) {
            *v = a.load(Relaxed);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_histogram_matches_plain() {
        let layout = Layout::default();
        let live = LiveHistogram::new(layout);
        let mut plain = Histogram::new(layout);
        for v in [0u64, 5, 999, 1000, 57_300, 10_000_000, 1 << 40] {
            live.record(v);
            plain.record(v);
        }
        assert_eq!(live.snapshot(), plain);
        assert_eq!(live.totals().count, 7);
    }

    #[test]
    fn snapshot_between_bucket_and_totals_is_consistent() {
        // The state a checkpoint can see while the writer is inside `record`: the bucket is
        // bumped, the totals are not. First sample (totals empty), then a later one.
        let layout = Layout::default();
        let live = LiveHistogram::new(layout);
        let i = layout.index(28_500);
        live.counts[i].store(1, Relaxed);
        let h = live.snapshot();
        assert_eq!(h.count(), 1);
        let (mn, mx) = (h.min().unwrap(), h.max().unwrap());
        assert!(mn <= mx);
        assert!(mn >= layout.lower(i) && mx < layout.upper(i));
        live.counts[i].store(0, Relaxed);
        live.record(28_700);
        live.counts[layout.index(5_000)].store(1, Relaxed);
        let h = live.snapshot();
        assert_eq!(h.count(), 2);
        assert!(h.min().unwrap() < layout.upper(layout.index(5_000)));
        assert_eq!(h.max(), Some(28_700));
    }
}
