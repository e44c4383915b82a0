//! The fairness scenario (Love, OLS 2003, §2.1): N identical CPU-bound tasks compete for a
//! set of CPUs (one by default) for a fixed time; each task reads its own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) at its start and end and counts its iterations. An optional
//! interactive sleeper wakes every interval on the same CPUs and records how late it woke.
//!
//! Safety of real-time policies: the caller keeps at least one online CPU free of the tasks
//! (checked in the binary), every task ends at its deadline (it checks the clock after each
//! chunk of work), and the sleeper runs at the tasks' own policy and priority, so it cannot
//! hog anything: it sleeps.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use latlab_core::hist::{Histogram, Layout};
use latlab_core::units::Nanos;

use crate::rt::{self, Policy};

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub tasks: usize,
    pub duration_ns: Nanos,
    pub policy: Policy,
    /// RT priority (ignored for `Other`).
    pub priority: u32,
    /// CPUs every task (and the sleeper) may run on.
    pub cpus: Vec<u32>,
    /// The interactive sleeper's period, if any.
    pub sleeper_interval_ns: Option<Nanos>,
    /// Layout of the sleeper's wake-up latency histogram.
    pub layout: Layout,
}

/// One CPU-bound task, as it measured itself.
#[derive(Debug, Clone)]
pub struct TaskResult {
    pub index: usize,
    pub tid: i64,
    /// CPU time the task got between its start and its end.
    pub cpu_ns: Nanos,
    /// Units of identical work done (one unit = [`CHUNK`] rounds of a xorshift generator).
    pub work: u64,
    /// From the common start to the task's end.
    pub wall_ns: Nanos,
}

/// The sleeper's wake-ups.
#[derive(Debug, Clone)]
pub struct SleeperResult {
    pub tid: i64,
    pub hist: Histogram,
    /// Periods the sleeper missed entirely (it woke more than one interval late).
    pub missed: u64,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub tasks: Vec<TaskResult>,
    pub sleeper: Option<SleeperResult>,
    /// From the common start to the end of the last task.
    pub elapsed_ns: Nanos,
    /// Ended early by the stop flag.
    pub interrupted: bool,
}

/// Rounds of work between two looks at the clock (a few µs).
pub const CHUNK: u64 = 2_000;

fn thread_cpu_ns() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Allow the calling thread on a set of CPUs.
pub fn set_affinity(cpus: &[u32]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET indexes are checked against its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c as usize >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            libc::CPU_SET(c as usize, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// One chunk of deterministic integer work (xorshift64), hard for the compiler to elide.
#[inline(never)]
fn work_chunk(mut x: u64) -> u64 {
    for _ in 0..CHUNK {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

fn setup(cfg: &Config) -> io::Result<()> {
    set_affinity(&cfg.cpus)?;
    rt::set_policy(cfg.policy, cfg.priority)
}

/// Run the scenario. `stop` ends it early (signals). Errors in a thread's setup (affinity,
/// policy) are returned after every thread has ended.
pub fn run(cfg: &Config, stop: Arc<AtomicBool>) -> io::Result<Outcome> {
    if cfg.tasks == 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no task"));
    }
    let parties = cfg.tasks + usize::from(cfg.sleeper_interval_ns.is_some()) + 1;
    let barrier = Arc::new(Barrier::new(parties));
    // The common start (CLOCK_MONOTONIC ns), set by the main thread before its barrier wait.
    let start = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let setup_failed = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for index in 0..cfg.tasks {
        let cfg = cfg.clone();
        let (barrier, start, stop, failed) = (
            barrier.clone(),
            start.clone(),
            stop.clone(),
            setup_failed.clone(),
        );
        let h = std::thread::Builder::new()
            .name(format!("latlab-fair{index}"))
            .spawn(move || -> io::Result<TaskResult> {
                rt::block_signals();
                let s = setup(&cfg);
                if s.is_err() {
                    failed.store(true, Ordering::SeqCst);
                }
                barrier.wait();
                s?;
                // Stored by the main thread before its barrier wait: no spinning (an RT task
                // spinning for it could starve the main thread on a shared CPU).
                let t0 = start.load(Ordering::Acquire);
                let deadline = t0 + cfg.duration_ns;
                let cpu0 = thread_cpu_ns();
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ index as u64;
                let mut work = 0u64;
                let mut now = rt::now_ns();
                while now < deadline
                    && !stop.load(Ordering::Relaxed)
                    && !failed.load(Ordering::Relaxed)
                {
                    x = work_chunk(x);
                    work += 1;
                    now = rt::now_ns();
                }
                std::hint::black_box(x);
                Ok(TaskResult {
                    index,
                    tid: rt::gettid(),
                    cpu_ns: thread_cpu_ns() - cpu0,
                    work,
                    wall_ns: now.saturating_sub(t0),
                })
            })?;
        handles.push(h);
    }
    let sleeper = match cfg.sleeper_interval_ns {
        None => None,
        Some(interval) => {
            let cfg = cfg.clone();
            let (barrier, start, stop, failed) = (
                barrier.clone(),
                start.clone(),
                stop.clone(),
                setup_failed.clone(),
            );
            // The histogram is allocated here, before the run; the loop only records into it.
            let mut hist = Histogram::new(cfg.layout);
            Some(
                std::thread::Builder::new()
                    .name("latlab-sleeper".into())
                    .spawn(move || -> io::Result<SleeperResult> {
                        rt::block_signals();
                        let s = setup(&cfg);
                        if s.is_err() {
                            failed.store(true, Ordering::SeqCst);
                        }
                        barrier.wait();
                        s?;
                        let t0 = start.load(Ordering::Acquire);
                        let deadline = t0 + cfg.duration_ns;
                        let mut missed = 0u64;
                        let mut next = t0 + interval;
                        while next <= deadline
                            && !stop.load(Ordering::Relaxed)
                            && !failed.load(Ordering::Relaxed)
                        {
                            rt::sleep_until(next);
                            let now = rt::now_ns();
                            hist.record(now.saturating_sub(next));
                            next += interval;
                            // Woke more than a period late: those periods were missed, not
                            // measured; count those up to the deadline (a late wake-up across
                            // it skips periods the run never had) and aim at the next one in
                            // the future.
                            if next <= now {
                                let (skip, m) = crate::hotloop::periods_missed(
                                    next,
                                    now,
                                    interval,
                                    deadline + 1,
                                );
                                missed += m;
                                next += skip * interval;
                            }
                        }
                        Ok(SleeperResult {
                            tid: rt::gettid(),
                            hist,
                            missed,
                        })
                    })?,
            )
        }
    };
    // The common start, published to every thread by the barrier.
    start.store(rt::now_ns(), Ordering::Release);
    barrier.wait();
    let mut first_err: Option<io::Error> = None;
    let mut tasks = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(r)) => tasks.push(r),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(io::Error::other("a fairness task panicked"));
            }
        }
    }
    let sleeper = match sleeper.map(|h| h.join()) {
        None => None,
        Some(Ok(Ok(s))) => Some(s),
        Some(Ok(Err(e))) => {
            first_err.get_or_insert(e);
            None
        }
        Some(Err(_)) => {
            first_err.get_or_insert(io::Error::other("the sleeper panicked"));
            None
        }
    };
    if let Some(e) = first_err {
        return Err(e);
    }
    let elapsed_ns = tasks.iter().map(|t| t.wall_ns).max().unwrap_or(0);
    Ok(Outcome {
        tasks,
        sleeper,
        elapsed_ns,
        interrupted: stop.load(Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_policy_tasks_all_run_and_report_cpu_time() {
        let cpu = rt::allowed_cpus().unwrap()[0];
        let cfg = Config {
            tasks: 2,
            duration_ns: 300_000_000,
            policy: Policy::Other,
            priority: 0,
            cpus: vec![cpu],
            sleeper_interval_ns: Some(10_000_000),
            layout: Layout::default(),
        };
        let out = run(&cfg, Arc::new(AtomicBool::new(false))).unwrap();
        assert_eq!(out.tasks.len(), 2);
        for t in &out.tasks {
            assert!(t.cpu_ns > 0 && t.work > 0, "{t:?}");
            // A task cannot get more CPU than the wall time it ran (one CPU).
            assert!(t.cpu_ns <= t.wall_ns + 20_000_000, "{t:?}");
        }
        // 30 periods (10 ms … 300 ms): each measured or missed, never one past the end (a
        // wake-up late across it once counted the periods after it: 31 and more, under load).
        let s = out.sleeper.unwrap();
        assert!(s.hist.count() > 0);
        assert!(
            s.hist.count() + s.missed <= 30,
            "{} + {}",
            s.hist.count(),
            s.missed
        );
    }

    #[test]
    fn a_stop_ends_it_early() {
        let cfg = Config {
            tasks: 1,
            duration_ns: 60_000_000_000,
            policy: Policy::Other,
            priority: 0,
            cpus: rt::allowed_cpus().unwrap(),
            sleeper_interval_ns: None,
            layout: Layout::default(),
        };
        let stop = Arc::new(AtomicBool::new(true));
        let out = run(&cfg, stop).unwrap();
        assert!(out.interrupted);
        assert_eq!(out.tasks[0].work, 0);
    }
}
