//! The jitter and audio modes' work: a compute kernel calibrated to a period's work, run
//! (or simulated) after each wake-up, its execution time recorded and its deadline tallied.

use latlab_core::modes::AudioTally;
use latlab_core::sim::SplitMix64;

use crate::hotloop::Work;
use crate::live::ThreadShared;
use crate::rt;

const FIR_TAPS: usize = 32;
const FIR_BLOCK: usize = 64;

/// A small FIR filter over buffers allocated before the run: one iteration filters a block
/// of 64 samples with 32 taps (2048 multiply-adds). The work is the same every time, so any
/// variation of its execution time comes from the machine (caches, interrupts, preemption,
/// the hypervisor), not from the data.
pub struct Kernel {
    input: Box<[f32]>,
    taps: [f32; FIR_TAPS],
    out: Box<[f32]>,
}

impl Default for Kernel {
    fn default() -> Self {
        Self::new()
    }
}

impl Kernel {
    pub fn new() -> Kernel {
        let input: Box<[f32]> = (0..FIR_BLOCK + FIR_TAPS)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        let mut taps = [0f32; FIR_TAPS];
        for (i, t) in taps.iter_mut().enumerate() {
            *t = 1.0 / (1.0 + i as f32);
        }
        Kernel {
            input,
            taps,
            out: vec![0f32; FIR_BLOCK].into_boxed_slice(),
        }
    }

    /// Run `n` iterations.
    #[inline(never)]
    pub fn run(&mut self, n: u64) {
        for _ in 0..n {
            let input = std::hint::black_box(&self.input[..]);
            for i in 0..FIR_BLOCK {
                let mut acc = 0f32;
                for j in 0..FIR_TAPS {
                    acc += input[i + j] * self.taps[j];
                }
                self.out[i] = acc;
            }
            std::hint::black_box(&mut self.out[..]);
        }
    }

    fn time(&mut self, n: u64) -> u64 {
        let t = rt::now_ns();
        self.run(n);
        rt::now_ns() - t
    }

    fn min_time(&mut self, n: u64, tries: u32) -> u64 {
        (0..tries).map(|_| self.time(n)).min().unwrap_or(0)
    }

    /// Iterations such that the fastest of a few runs takes about `work_ns` on this CPU
    /// (call after pinning and setting the policy, before the run). Returns the iteration
    /// count and that fastest time.
    pub fn calibrate(&mut self, work_ns: u64) -> (u64, u64) {
        let mut n = 1u64;
        while n < 1 << 30 && self.time(n) < 50_000.min(work_ns.max(1)) {
            n *= 2;
        }
        let per = self.min_time(n, 5).max(1) as f64 / n as f64;
        let mut iters = ((work_ns as f64 / per).round() as u64).max(1);
        // One proportional correction against the real cost at that size.
        let m = self.min_time(iters, 5).max(1);
        iters = ((iters as f64 * work_ns as f64 / m as f64).round() as u64).max(1);
        let m = self.min_time(iters, 5);
        (iters, m)
    }
}

/// Where the work's start and end times come from.
pub(crate) trait Exec {
    /// Run one period's work (`slow`: twice as much); return (start, end) ns.
    fn exec(&mut self, woke: u64, slow: bool) -> (u64, u64);
}

/// The real kernel, timed with CLOCK_MONOTONIC before and after.
pub(crate) struct RealExec {
    pub kernel: Kernel,
    pub iterations: u64,
}

impl Exec for RealExec {
    #[inline(always)]
    fn exec(&mut self, _woke: u64, slow: bool) -> (u64, u64) {
        let n = if slow {
            self.iterations * 2
        } else {
            self.iterations
        };
        let s = rt::now_ns();
        self.kernel.run(n);
        (s, rt::now_ns())
    }
}

/// A simulated kernel: `work_ns` plus a small seeded jitter and rare interruptions.
pub(crate) struct SimExec {
    pub rng: SplitMix64,
    pub work_ns: u64,
}

impl Exec for SimExec {
    #[inline(always)]
    fn exec(&mut self, woke: u64, slow: bool) -> (u64, u64) {
        let base = if slow { 2 * self.work_ns } else { self.work_ns };
        let u = self.rng.next_f64();
        let noise = -(1.0 - self.rng.next_f64()).ln() * self.work_ns as f64 * 0.01;
        let extra = if u < 1e-3 {
            self.work_ns as f64 * 0.3
        } else {
            0.0
        };
        (woke, woke + base + (noise + extra) as u64)
    }
}

/// The jitter/audio work: run the kernel, record its execution time, tally the deadline.
/// `inject_slow`: that period (0-based) does twice the work (a test hook, see [`crate::hooks`]).
pub(crate) struct PeriodWork<E: Exec> {
    pub exec: E,
    pub inject_slow: Option<u64>,
    pub tally: Option<AudioTally>,
}

impl<E: Exec> Work for PeriodWork<E> {
    const ACTIVE: bool = true;
    #[inline(always)]
    fn run(&mut self, k: u64, intended: u64, woke: u64, sh: &ThreadShared) {
        let (s, e) = self.exec.exec(woke, self.inject_slow == Some(k));
        if let Some(h) = &sh.mode.exec {
            h.record(e.saturating_sub(s));
        }
        if let (Some(t), Some(a)) = (self.tally.as_mut(), &sh.mode.audio) {
            // Response time of this fragment: finished − nominal start.
            t.record(e.saturating_sub(intended));
            a.publish(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_calibrates_near_the_target() {
        let mut k = Kernel::new();
        let (iters, min) = k.calibrate(200_000);
        assert!(iters >= 1);
        // On a busy machine the minimum is still close; allow a wide band, as the test
        // asserts sanity, not speed.
        assert!(
            (100_000..=400_000).contains(&min),
            "{iters} iterations took {min} ns"
        );
    }
}
