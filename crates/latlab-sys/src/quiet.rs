//! Quiet windows: when latlab's own threads may enter the kernel on a CPU it measures.
//!
//! On a kernel without full preemption, a measuring thread woken while another task is in a
//! system call waits until that call returns (or reaches a `cond_resched`). When every CPU is
//! measured, latlab's recorder has to run on one of them; it then times its system calls to
//! the measuring thread's schedule, which is known: the thread sleeps to absolute times
//! `first + k × interval`. A call may start once the thread has recorded its wake-up `k`
//! (and had [`SETTLE_NS`] to go back to sleep), and only if it has `need` before wake-up
//! `k + 1`. A call that takes longer than announced, or a thread woken late (a spike), can
//! still meet; what this removes is every ordinary meeting.
//!
//! Pinned to the CPU it waits on ([`Quiet::pin`]): a thread that moved between the check
//! and the call would have checked the wrong schedule.

use std::sync::atomic::Ordering::*;
use std::sync::Arc;

use crate::live::ThreadShared;
use crate::rt;

/// After a wake-up: the measuring thread's clock read, its bookkeeping and its return to
/// sleep (5–20 µs on this project's VMs).
pub const SETTLE_NS: u64 = 40_000;

/// Gating needs room: periods shorter than this are not gated (a window of at most a few
/// tens of µs per period would starve the caller).
pub const MIN_INTERVAL_NS: u64 = 500_000;

/// The schedule of one measuring thread, to wait on.
#[derive(Clone)]
pub struct Quiet {
    sh: Arc<ThreadShared>,
    first: u64,
    interval: u64,
}

impl Quiet {
    /// The quiet windows of a measuring thread that sleeps to a schedule (the timer mode),
    /// once the engine has started it; None otherwise (or when its period is too short).
    pub fn of(sh: &Arc<ThreadShared>) -> Option<Quiet> {
        let first = sh.first_ns.load(Acquire);
        let interval = sh.interval_ns;
        (sh.sleeps_between && first > 0 && interval >= MIN_INTERVAL_NS).then(|| Quiet {
            sh: sh.clone(),
            first,
            interval,
        })
    }

    /// The measured CPU this schedule is on.
    pub fn cpu(&self) -> u32 {
        self.sh.cpu
    }

    /// Pin the calling thread to that CPU.
    pub fn pin(&self) -> std::io::Result<()> {
        rt::set_affinity(&[self.sh.cpu])
    }

    /// The wake-up due at or before `now` (None before the first).
    fn last_due(&self, now: u64) -> Option<u64> {
        let since = now.checked_sub(self.first)?;
        Some(self.first + since / self.interval * self.interval)
    }

    /// How long to wait at `now` before a call of up to `need_ns` may start (0: now), given
    /// that the thread recorded its wake-up due at `woke`.
    pub fn wait_ns(&self, now: u64, woke: u64, need_ns: u64) -> u64 {
        let Some(due) = self.last_due(now) else {
            return 0; // not started: nothing to meet yet
        };
        if self.sh.done.load(Relaxed) {
            return 0;
        }
        let next = due + self.interval;
        // Not woken yet for `due` (late: a spike in progress) or just woken: after it settled.
        let open = if woke >= due {
            due + SETTLE_NS
        } else {
            now + SETTLE_NS
        };
        if now >= open && now + need_ns <= next {
            return 0;
        }
        if now < open {
            open - now
        } else {
            // Too close to the next wake-up: just after it.
            next + SETTLE_NS - now
        }
    }

    /// The start of the first quiet window at or after `t` (a wake-up due then, plus
    /// [`SETTLE_NS`]): where a thread that wakes on its own clock should set its timer, so
    /// its own wake-up never meets the measuring thread's.
    pub fn window_after(&self, t: u64) -> u64 {
        match self.last_due(t) {
            Some(due) if t <= due + SETTLE_NS => due + SETTLE_NS,
            Some(due) => due + self.interval + SETTLE_NS,
            None => self.first + SETTLE_NS,
        }
    }

    /// Sleep until a call of up to `need_ns` may start on this CPU.
    pub fn wait(&self, need_ns: u64) {
        // Bounded (three periods): a thread that stopped waking (the run ended, or a stall
        // far longer than a period) does not hold the caller for ever.
        let until = rt::now_ns() + 3 * self.interval;
        loop {
            let now = rt::now_ns();
            let w = self.wait_ns(now, self.sh.woke_ns.load(Relaxed), need_ns);
            if w == 0 || now + w > until {
                return;
            }
            rt::sleep_until(now + w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_core::hist::Layout;

    fn quiet(first: u64, interval: u64) -> Quiet {
        let sh = Arc::new(ThreadShared::new(
            1,
            Layout::new(1_000, 10_000_000).unwrap(),
            crate::live::ModeShared::new(Layout::new(1_000, 10_000_000).unwrap(), false, None),
            interval,
            true,
        ));
        sh.first_ns.store(first, Release);
        Quiet::of(&sh).expect("a schedule")
    }

    /// A call may start once the thread has woken and settled, with room before the next
    /// wake-up; otherwise it waits for the window, never across a wake-up.
    #[test]
    fn calls_start_in_the_quiet_part_of_the_period() {
        let q = quiet(1_000_000, 1_000_000);
        let us = 1_000;
        // Before the first wake-up: nothing to meet.
        assert_eq!(q.wait_ns(500_000, 0, 100 * us), 0);
        // Woken at 1 ms (recorded), 10 µs later: wait until it settled (40 µs after the due).
        assert_eq!(q.wait_ns(1_010_000, 1_000_000, 100 * us), 30 * us);
        // In the window, room for the call: now.
        assert_eq!(q.wait_ns(1_300_000, 1_000_000, 100 * us), 0);
        // Too close to the next wake-up (2 ms): until it settled.
        assert_eq!(q.wait_ns(1_950_000, 1_000_000, 100 * us), 90 * us);
        // Late: due at 2 ms, not recorded yet at 2.1 ms (a spike in progress): wait.
        assert!(q.wait_ns(2_100_000, 1_000_000, 100 * us) >= SETTLE_NS);
        // A call as long as the window never fits: it waits for the next one (bounded).
        assert!(q.wait_ns(1_300_000, 1_000_000, 2_000 * us) > 0);
        // A timer set for 1.3 ms goes off at the next window's start, 2.04 ms.
        assert_eq!(q.window_after(1_300_000), 2_040_000);
        assert_eq!(q.window_after(2_020_000), 2_040_000);
        assert_eq!(q.window_after(0), 1_040_000);
    }

    /// Schedules that cannot be gated: not started, not the timer, too short a period.
    #[test]
    fn only_started_timer_threads_with_room_are_gated() {
        let mk = |first, interval, timer| {
            let sh = Arc::new(ThreadShared::new(
                0,
                Layout::new(1_000, 10_000_000).unwrap(),
                crate::live::ModeShared::new(Layout::new(1_000, 10_000_000).unwrap(), false, None),
                interval,
                timer,
            ));
            sh.first_ns.store(first, Release);
            Quiet::of(&sh).is_some()
        };
        assert!(mk(1, 1_000_000, true));
        assert!(!mk(0, 1_000_000, true));
        assert!(!mk(1, 1_000_000, false));
        assert!(!mk(1, 100_000, true));
    }
}
