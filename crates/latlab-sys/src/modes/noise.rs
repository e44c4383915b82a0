//! `--mode noise`: a thread spinning on CLOCK_MONOTONIC from the start of the run to its end
//! (oslat's method; what the kernel's osnoise tracer does in a kernel thread). Every gap of
//! at least the threshold between two consecutive reads is time the CPU gave to something
//! else: one sample, from the read before the gap (its "intended" time) to the read after.
//!
//! Hot path: the vDSO clock read, arithmetic, and Relaxed stores into the thread's own
//! [`NoiseShared`] on each interference. The stop flag is looked at every 1 024 reads.
//! The measurement loop's own work after a sample (histogram, spike list, a trace marker) is
//! not counted as noise: the next gap starts at the read taken when the loop comes back.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::hotloop::{self, Body, Clock, NoWork};
use crate::live::NoiseShared;
use crate::rt;

/// Reads between two looks at the stop flag and the end.
const CHECK_EVERY: u64 = 1024;

struct NoiseClock<'a> {
    sh: &'a NoiseShared,
    stop: &'a AtomicBool,
    first: u64,
    end: u64,
    /// The first read (0 before the loop started).
    started: u64,
    loops: u64,
    noise: u64,
}

impl NoiseClock<'_> {
    #[inline(always)]
    fn publish(&self, now: u64) {
        self.sh.runtime_ns.store(now - self.started, Relaxed);
        self.sh.noise_ns.store(self.noise, Relaxed);
        self.sh.loops.store(self.loops, Relaxed);
    }
}

impl Clock for NoiseClock<'_> {
    const SCHEDULED: bool = false;
    const NOISE: bool = true;

    #[inline(always)]
    fn wait_until(&mut self, _t: u64) -> Option<(u64, u64)> {
        if self.started == 0 {
            // The run's start, as every mode's first wake-up.
            rt::sleep_until(self.first);
            self.started = rt::now_ns();
            self.sh.started_ns.store(self.started, Relaxed);
        }
        let threshold = self.sh.threshold_ns;
        let mut prev = rt::now_ns();
        let mut n: u64 = 0;
        loop {
            let now = rt::now_ns();
            n += 1;
            let gap = now.saturating_sub(prev);
            if gap >= threshold {
                self.loops += n;
                self.noise += gap;
                self.publish(now);
                return Some((prev, now));
            }
            if n.is_multiple_of(CHECK_EVERY) && (now >= self.end || self.stop.load(Relaxed)) {
                self.loops += n;
                self.publish(now);
                return None;
            }
            prev = now;
        }
    }
}

/// The noise thread's loop.
pub(super) fn body() -> Body {
    Box::new(move |sh, stop, p, top| {
        let noise = sh
            .mode
            .noise
            .as_ref()
            .expect("a noise thread shares its loop's totals");
        let mut clock = NoiseClock {
            sh: noise,
            stop,
            first: p.first,
            end: p.end,
            started: 0,
            loops: 0,
            noise: 0,
        };
        hotloop::measure_loop(&mut clock, &mut NoWork, sh, stop, p, top);
    })
}
