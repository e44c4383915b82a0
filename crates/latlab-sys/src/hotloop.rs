//! The measurement loop: the hot path of every measuring thread (realfeel, Williams 2002;
//! cyclictest), generic over where its wake-ups come from ([`Clock`]) and what it does after
//! each one ([`Work`]), monomorphised so a mode or the simulated backend costs nothing on a
//! path that does not use it.
//!
//! The hot path is sacred: `clock_nanosleep(TIMER_ABSTIME)`, `clock_gettime`, arithmetic and
//! stores into memory the thread owns, prepared before the run starts; on a spike above the
//! trace threshold one marker written to a pre-opened tracefs fd.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::*};
use std::sync::Arc;

use latlab_core::record::SampleSpike;
use latlab_core::sim::SimSource;

use crate::live::{Seconds, ThreadShared};
use crate::rt;

/// Where a measuring thread's wake-ups come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Real,
    Sim { seed: u64, realtime: bool },
}

/// Largest samples each thread keeps.
pub const TOP_N: usize = 16;

/// The tracefs hook: on a sample at or above `threshold_ns`, a thread writes one marker to
/// the fd in `armed_fd` (the armed instance's `trace_marker`; -1 while none is armed).
///
/// - With `marks` (the default recorder, which never stops), every such sample writes its
///   marker while an fd is there (the recorder sets -1 at `--trace-max-spikes`), then counts
///   it in `marks[cpu]` (Release), which tells the recorder's copier that the CPU's ring holds
///   a marker to read.
/// - Without (instances taking turns), the first thread to swap the fd out (leaving -1)
///   writes the marker, which stops that instance in the kernel. Disarming and taking the fd
///   are one atomic step: with two atomics (a flag taken, then the fd loaded), the recorder's
///   re-arm thread could see the flag down and switch to the next instance between the two,
///   and the marker went to the instance just armed, stopping it, while the one the spike
///   was due to kept recording (seen under load: a spike's capture without its marker).
#[derive(Clone)]
pub struct TraceHook {
    pub armed_fd: Arc<AtomicI32>,
    pub threshold_ns: u64,
    /// Markers written, by CPU number (the recorder that never stops).
    pub marks: Option<Arc<[AtomicU64]>>,
}

/// Where the loop gets its time from.
pub(crate) trait Clock {
    /// The loop keeps the schedule (false: the wake-ups come from elsewhere, a sender).
    const SCHEDULED: bool = true;
    /// A sample is a gap in a spinning thread's clock reads (the noise mode): its marker says
    /// so (` noise`), for the analyzer has no timer to open its window.
    const NOISE: bool = false;
    /// Wait for the wake-up due at `t`; return (intended time, time at wake-up), or None
    /// when the source has ended.
    fn wait_until(&mut self, t: u64) -> Option<(u64, u64)>;
}

pub(crate) struct RealClock;
impl Clock for RealClock {
    #[inline(always)]
    fn wait_until(&mut self, t: u64) -> Option<(u64, u64)> {
        rt::sleep_until(t);
        Some((t, rt::now_ns()))
    }
}

pub(crate) struct SimClock {
    pub(crate) src: SimSource,
    /// Pace at wall-clock speed (`Some(offset)` maps sim time to real time).
    pub(crate) realtime: bool,
}
impl Clock for SimClock {
    #[inline(always)]
    fn wait_until(&mut self, t: u64) -> Option<(u64, u64)> {
        if self.realtime {
            rt::sleep_until(t);
        }
        Some((t, t + self.src.next_latency()))
    }
}

/// Format `LATLAB_STOP cpu=C intended=N actual=N latency=N\n` into `buf` without allocating;
/// a noise gap's ends in ` noise` (its intended time is the read before the gap).
#[inline]
pub fn format_marker(
    buf: &mut [u8; 128],
    cpu: u32,
    intended: u64,
    actual: u64,
    lat: u64,
    noise: bool,
) -> usize {
    fn put(buf: &mut [u8; 128], mut at: usize, s: &[u8]) -> usize {
        buf[at..at + s.len()].copy_from_slice(s);
        at += s.len();
        at
    }
    fn num(buf: &mut [u8; 128], at: usize, mut v: u64) -> usize {
        let mut tmp = [0u8; 20];
        let mut i = 20;
        loop {
            i -= 1;
            tmp[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        put(buf, at, &tmp[i..])
    }
    let mut at = put(buf, 0, b"LATLAB_STOP cpu=");
    at = num(buf, at, cpu as u64);
    at = put(buf, at, b" intended=");
    at = num(buf, at, intended);
    at = put(buf, at, b" actual=");
    at = num(buf, at, actual);
    at = put(buf, at, b" latency=");
    at = num(buf, at, lat);
    if noise {
        at = put(buf, at, b" noise");
    }
    put(buf, at, b"\n")
}

pub(crate) struct LoopParams {
    pub(crate) t0: u64,
    pub(crate) first: u64,
    pub(crate) end: u64,
    pub(crate) interval: u64,
    pub(crate) spike_threshold: u64,
    pub(crate) trace: Option<TraceHook>,
}

/// The measurement loop. Everything it touches was allocated and touched before it starts.
#[inline(never)]
pub(crate) fn measure_loop<C: Clock, W: Work>(
    clock: &mut C,
    work: &mut W,
    sh: &ThreadShared,
    stop: &AtomicBool,
    p: &LoopParams,
    top: &mut [SampleSpike; TOP_N],
) {
    let mut next = p.first;
    let mut seconds = Seconds::new();
    let mut top_min: u64 = 0;
    let mut marker = [0u8; 128];
    let trace_thr = p.trace.as_ref().map_or(u64::MAX, |t| t.threshold_ns);
    let mut k: u64 = 0;
    while next < p.end && !stop.load(Relaxed) {
        // `intended` is `next` for the timer; for wakeup pairs, the sender's stamp.
        let Some((intended, now)) = clock.wait_until(next) else {
            break;
        };
        let lat = now.saturating_sub(intended);
        sh.hist.record(lat);
        sh.last_ns.store(lat, Relaxed);
        sh.woke_ns.store(intended, Relaxed);

        // Per-second maximum and sum, published when the second is over.
        seconds.add(sh, intended.saturating_sub(p.t0) / 1_000_000_000, lat);

        if lat > top_min {
            // Replace the smallest of the kept spikes (rare after warm-up).
            let (i, _) = top
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.latency_ns)
                .expect("TOP_N > 0");
            top[i] = SampleSpike {
                at_ns: intended,
                latency_ns: lat,
            };
            top_min = top.iter().map(|s| s.latency_ns).min().unwrap_or(0);
        }

        if lat >= p.spike_threshold {
            let mut wrote = false;
            if lat >= trace_thr {
                if let Some(t) = &p.trace {
                    let fd = match &t.marks {
                        Some(_) => t.armed_fd.load(Acquire),
                        None => t.armed_fd.swap(-1, AcqRel),
                    };
                    if fd >= 0 {
                        let n = format_marker(&mut marker, sh.cpu, intended, now, lat, C::NOISE);
                        // SAFETY: fd was opened before the run and stays open until the
                        // engine is joined; buffer is valid for n bytes.
                        unsafe { libc::write(fd, marker.as_ptr().cast(), n) };
                        wrote = true;
                        if let Some(m) = t.marks.as_ref().and_then(|m| m.get(sh.cpu as usize)) {
                            m.fetch_add(1, Release);
                        }
                    }
                }
            }
            sh.spikes.push(intended, now, lat, wrote);
        }

        if W::ACTIVE {
            work.run(k, intended, now, sh);
        }
        k += 1;

        if !C::SCHEDULED {
            continue;
        }
        next += p.interval;
        if now >= next {
            // Woke more than one period late: those periods are missed, counted, and the
            // schedule realigned to the next period in the future.
            let (skip, missed) = periods_missed(next, now, p.interval, p.end);
            sh.missed.store(sh.missed.load(Relaxed) + missed, Relaxed);
            next += skip * p.interval;
        }
    }
    // Publish the last (partial) second.
    seconds.finish(sh);
}

/// A thread that should have woken at `next` (and every `interval` after) woke at `now ≥ next`:
/// the periods `next, next + interval, … ≤ now` are skipped (`.0`, to realign the schedule),
/// and those of them before the run's `end` are missed (`.1`): a late wake-up across the end
/// of the run does not count periods the run never had.
#[inline(always)]
pub(crate) fn periods_missed(next: u64, now: u64, interval: u64, end: u64) -> (u64, u64) {
    let skip = (now - next) / interval + 1;
    let missed = if next < end {
        skip.min((end - 1 - next) / interval + 1)
    } else {
        0
    };
    (skip, missed)
}

/// What the loop does after each wake-up.
pub(crate) trait Work {
    const ACTIVE: bool;
    fn run(&mut self, k: u64, intended: u64, woke: u64, sh: &ThreadShared);
}

/// Nothing (timer, wakeup).
pub(crate) struct NoWork;
impl Work for NoWork {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn run(&mut self, _: u64, _: u64, _: u64, _: &ThreadShared) {}
}

/// A measuring thread's loop, built by its mode on the thread (after pinning and policy, so
/// calibration runs as the measurement will) and called after the start barrier: the one
/// dynamic call per run, which enters a monomorphised [`measure_loop`].
pub(crate) type Body =
    Box<dyn FnOnce(&ThreadShared, &AtomicBool, &LoopParams, &mut [SampleSpike; TOP_N])>;

/// The [`Body`] running `measure_loop` with this clock and work.
pub(crate) fn body<C: Clock + 'static, W: Work + 'static>(mut clock: C, mut work: W) -> Body {
    Box::new(move |sh, stop, p, top| measure_loop(&mut clock, &mut work, sh, stop, p, top))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Periods skipped by a late wake-up count as missed only up to the run's end.
    #[test]
    fn missed_periods_stop_at_the_end_of_the_run() {
        // Due at 1000 (interval 1000), woke at 3500: 1000, 2000, 3000 skipped and missed.
        assert_eq!(periods_missed(1000, 3500, 1000, 100_000), (3, 3));
        // Woke exactly at the next period: that one is skipped.
        assert_eq!(periods_missed(1000, 1000, 1000, 100_000), (1, 1));
        // The run ends at 2500: only 1000 and 2000 were periods of the run.
        assert_eq!(periods_missed(1000, 80_000, 1000, 2500), (80, 2));
        // Ends exactly at a period: that period is not part of the run.
        assert_eq!(periods_missed(1000, 80_000, 1000, 3000), (80, 2));
        // Next already at or past the end: nothing missed.
        assert_eq!(periods_missed(5000, 9000, 1000, 5000), (5, 0));
    }

    #[test]
    fn marker_format() {
        let mut b = [0u8; 128];
        let n = format_marker(&mut b, 1, 123, 456_789, 0, false);
        assert_eq!(
            std::str::from_utf8(&b[..n]).unwrap(),
            "LATLAB_STOP cpu=1 intended=123 actual=456789 latency=0\n"
        );
        let n = format_marker(&mut b, 1, 123, 456_789, 456_666, true);
        assert_eq!(
            std::str::from_utf8(&b[..n]).unwrap(),
            "LATLAB_STOP cpu=1 intended=123 actual=456789 latency=456666 noise\n"
        );
        let n = format_marker(&mut b, u32::MAX, u64::MAX, u64::MAX, u64::MAX, true);
        assert!(n < 128);
    }
}
