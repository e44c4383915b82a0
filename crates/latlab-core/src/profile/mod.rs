//! `latlab profile`'s reconstruction: the run queue of every CPU over time, rebuilt from the
//! standard scheduler events (no kernel patch), and how long each task waited in it.
//!
//! Pure: the caller feeds [`Profiler::event`] the events of every CPU **in time order** (the
//! profile command merges the per-CPU streams up to a watermark), and takes a
//! [`ProfileRecord`] (run.json's `profile`) and a [`Series`] (the side file for the heat maps)
//! at the end. Memory is bounded whatever the duration: per CPU a fixed number of pixels
//! (coarser pixels for a longer profile), per task two fixed-size histograms (at most
//! [`MAX_TASKS`] tasks), at most [`MAX_SWITCH_POINTS`] switch points and
//! [`MAX_MIGRATION_POINTS`] migrations, and for each watched thread (latlab's measuring
//! threads, [`Profiler::watch`]) three fixed-size histograms and at most
//! [`MAX_TIME_BUCKETS`] buckets over time.
//!
//! The runnable set: a task is *on* CPU c's run queue (running or waiting) from its
//! `sched_wakeup`/`sched_wakeup_new` (target CPU) or from being switched in on c, until a
//! `sched_switch` switches it out of c with a sleeping `prev_state` (`S`, `D`, …; `R`/`R+` keep
//! it queued: preempted or yielded); `sched_migrate_task` moves a queued task between CPUs.
//! The count of a CPU is the number of tasks on it, the running one included (0 = idle).
//!
//! Seeding and uncertainty: before the first event the state of a task is not known. The
//! caller may seed tasks found runnable (`R` in `/proc/PID/task/TID/stat`, on its CPU) just
//! before tracing starts ([`Profiler::seed_runnable`]). A task neither seeded nor seen yet is
//! not counted: a CPU's count is a lower bound until every task queued on it has had an event
//! (a task queued at the start is seen at its switch-in at the latest, a running one at its
//! switch-out). A seeded task that went to sleep between the scan and the start is counted
//! until its next event. Waits are only measured from an event (never from a seed).
//!
//! Lost events: when the kernel's buffer of a CPU overflowed, the time from that CPU's last
//! event before the loss to its first event after it is a *gap*: not in `rq_share` (which is
//! a share of the known time) and 255 in the series; the state is kept as it was.

use std::collections::HashMap;

pub mod decode;
mod events;
mod finish;
mod record;
mod series;
mod wait_hist;
mod watched;

pub use record::{MeasuringKind, MeasuringThread, Preemptor, ProfileCpu, ProfileRecord, WaitRow};
pub use series::Series;
use wait_hist::WaitHist;
use watched::Watched;

/// Tasks with their own wait statistics; later ones are counted in `tasks_untracked`.
pub const MAX_TASKS: usize = 8192;
/// Switch points kept for the heat map (later ones are counted, not kept).
pub const MAX_SWITCH_POINTS: usize = 1 << 18;
/// Pixels per CPU at most: the pixel doubles (two pixels merged into one) past it.
pub const MAX_PIXELS: usize = 1 << 20;
/// CPUs a series may hold at most: the kernel's largest `NR_CPUS`.
pub const MAX_SERIES_CPUS: usize = 8192;
/// The finest pixel: 10 µs, as the ELC 2017 heat maps.
pub const BASE_PIXEL_NS: u64 = 10_000;
/// Rows of `wait[]` (largest p99 first).
pub const DEFAULT_TOP: usize = 50;
/// A series pixel with no known state (before the start of a CPU, in a gap).
pub const PIXEL_UNKNOWN: u8 = 255;
/// Migrations (into a profiled CPU) kept for the heat map (later ones are counted, not kept).
pub const MAX_MIGRATION_POINTS: usize = 1 << 18;
/// Task names the series keeps (the tasks switched to most often).
pub const SERIES_NAMES: usize = 64;
/// A name in the series is cut to this many bytes.
pub const SERIES_NAME_BYTES: usize = 64;
/// Threads watched at most ([`Profiler::watch`]).
pub const MAX_WATCHED: usize = 1024;
/// Buckets of the watched threads' values over time at most: the bucket (1 s) doubles, up
/// front for the expected duration and again (pairs merged) for a longer profile.
pub const MAX_TIME_BUCKETS: usize = 1024;
/// The finest bucket over time.
pub const BASE_TIME_BUCKET_NS: u64 = 1_000_000_000;

/// One scheduler event, as the reconstruction needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    Switch {
        prev_pid: i64,
        prev_prio: i64,
        /// `prev_state` is `R` or `R+`: the task stays queued.
        prev_runnable: bool,
        /// `prev_state` is `X` or `Z`: the task exited.
        prev_dead: bool,
        next_pid: i64,
        next_prio: i64,
    },
    /// `sched_waking` (the start of the wake-up; the wait is measured from here when seen).
    Waking {
        pid: i64,
    },
    /// `sched_wakeup` (`new` = `sched_wakeup_new`): queued on `target_cpu` (else this CPU).
    Wakeup {
        pid: i64,
        prio: i64,
        target_cpu: Option<u32>,
        new: bool,
    },
    Migrate {
        pid: i64,
        orig: u32,
        dest: u32,
    },
}

/// An event of `cpu` at `ts` (ns); `lost_before`: the kernel lost events of this CPU just
/// before it (the time since the CPU's previous event is unknown); `lost_after`: just after
/// it (the CPU's state is unknown from this event to its next own event, whatever other
/// CPUs' events say of its run queue meanwhile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PEvent {
    pub ts: u64,
    pub cpu: u32,
    pub lost_before: bool,
    pub lost_after: bool,
    pub ev: Ev,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitKind {
    Wakeup,
    Preempt,
}

#[derive(Debug, Clone)]
struct Task {
    /// The CPU whose run queue holds it (None: not queued, or not known).
    cpu: Option<u32>,
    running: bool,
    prio: i64,
    /// Queued since (and why), when known from an event.
    since: Option<(u64, WaitKind)>,
    /// `sched_waking` seen, its wake-up not yet.
    waking: Option<u64>,
    /// Index into `stats` (None: over MAX_TASKS).
    stats: Option<usize>,
}

struct TaskStats {
    pid: i64,
    /// The latest priority seen (the task may be gone at the end).
    prio: i64,
    wake: WaitHist,
    preempt: WaitHist,
}

#[derive(Debug, Clone)]
struct CpuAcc {
    cpu: u32,
    count: u32,
    /// The state is known from here on (None: nothing yet).
    last: Option<u64>,
    in_gap: bool,
    share_ns: [u64; 6],
    gap_ns: u64,
    switches: u64,
    migrations: u64,
    lost: u64,
    /// The task the last recorded switch put on this CPU (None: none recorded yet, or a
    /// gap since).
    current: Option<i64>,
    /// Switch-outs of a task other than `current` outside gaps: switches the record lacks.
    unrecorded: u64,
    pixels: Vec<u8>,
}

/// The online reconstruction.
pub struct Profiler {
    start_ns: u64,
    end_ns: u64,
    pixel_ns: u64,
    cpus: Vec<CpuAcc>,
    by_cpu: HashMap<u32, usize>,
    tasks: HashMap<i64, Task>,
    stats: Vec<TaskStats>,
    untracked: u64,
    switch_points: Vec<(u64, u32, i64)>,
    switches_dropped: u64,
    migration_points: Vec<(u64, i64, u32, u32)>,
    migrations_dropped: u64,
    events: u64,
    seeded: u64,
    watched: Vec<Watched>,
    /// Watched tid → index into `watched` (removed when the thread exits).
    watch_of: HashMap<i64, usize>,
    bucket_ns: u64,
}

impl Profiler {
    /// A profile of `cpus` from `start_ns`, expected to last `duration_hint_ns` (which picks
    /// the pixel: 10 µs, or coarser so the expected duration fits [`MAX_PIXELS`]).
    pub fn new(cpus: &[u32], start_ns: u64, duration_hint_ns: u64) -> Profiler {
        let mut pixel_ns = BASE_PIXEL_NS;
        while duration_hint_ns / pixel_ns >= MAX_PIXELS as u64 {
            pixel_ns *= 2;
        }
        let cpus: Vec<CpuAcc> = cpus
            .iter()
            .map(|&cpu| CpuAcc {
                cpu,
                count: 0,
                last: Some(start_ns),
                in_gap: false,
                share_ns: [0; 6],
                gap_ns: 0,
                switches: 0,
                migrations: 0,
                lost: 0,
                current: None,
                unrecorded: 0,
                pixels: Vec::new(),
            })
            .collect();
        let by_cpu = cpus.iter().enumerate().map(|(i, c)| (c.cpu, i)).collect();
        Profiler {
            start_ns,
            end_ns: start_ns,
            pixel_ns,
            cpus,
            by_cpu,
            tasks: HashMap::new(),
            stats: Vec::new(),
            untracked: 0,
            switch_points: Vec::new(),
            switches_dropped: 0,
            migration_points: Vec::new(),
            migrations_dropped: 0,
            events: 0,
            seeded: 0,
            watched: Vec::new(),
            watch_of: HashMap::new(),
            bucket_ns: {
                let mut b = BASE_TIME_BUCKET_NS;
                while duration_hint_ns / b >= MAX_TIME_BUCKETS as u64 {
                    b *= 2;
                }
                b
            },
        }
    }

    pub fn pixel_ns(&self) -> u64 {
        self.pixel_ns
    }

    /// `pid` was runnable on `cpu` when the profile started (from /proc).
    pub fn seed_runnable(&mut self, pid: i64, cpu: u32, prio: i64) {
        if pid <= 0 || !self.by_cpu.contains_key(&cpu) || self.tasks.contains_key(&pid) {
            return;
        }
        let t = self.task(pid, prio);
        t.cpu = Some(cpu);
        self.seeded += 1;
        let i = self.by_cpu[&cpu];
        self.cpus[i].count += 1;
    }

    fn task(&mut self, pid: i64, prio: i64) -> &mut Task {
        let stats = &mut self.stats;
        let untracked = &mut self.untracked;
        self.tasks.entry(pid).or_insert_with(|| {
            let idx = if stats.len() < MAX_TASKS {
                stats.push(TaskStats {
                    pid,
                    prio,
                    wake: WaitHist::new(),
                    preempt: WaitHist::new(),
                });
                Some(stats.len() - 1)
            } else {
                *untracked += 1;
                None
            };
            Task {
                cpu: None,
                running: false,
                prio,
                since: None,
                waking: None,
                stats: idx,
            }
        })
    }

    /// Account CPU `i`'s time up to `ts` at its current count.
    fn advance(&mut self, i: usize, ts: u64) {
        let pixel_ns = self.pixel_ns;
        let start = self.start_ns;
        let c = &mut self.cpus[i];
        let Some(last) = c.last else {
            c.last = Some(ts);
            return;
        };
        if ts <= last {
            return;
        }
        if c.in_gap {
            c.gap_ns += ts - last;
            c.last = Some(ts);
            return;
        }
        let n = c.count.min(5) as usize;
        c.share_ns[n] += ts - last;
        let v = c.count.min(254) as u8;
        // Pixels overlapping [last, ts): the largest count seen in each.
        let (a, b) = ((last - start) / pixel_ns, (ts - 1 - start) / pixel_ns);
        if b as usize >= MAX_PIXELS {
            self.coarsen_to(b);
            return self.advance(i, ts);
        }
        let c = &mut self.cpus[i];
        if c.pixels.len() <= b as usize {
            c.pixels.resize(b as usize + 1, PIXEL_UNKNOWN);
        }
        for p in &mut c.pixels[a as usize..=b as usize] {
            *p = if *p == PIXEL_UNKNOWN { v } else { (*p).max(v) };
        }
        c.last = Some(ts);
    }

    /// Double the pixel until pixel index `b` fits (two pixels become one: the larger).
    fn coarsen_to(&mut self, mut b: u64) {
        while b as usize >= MAX_PIXELS {
            self.pixel_ns *= 2;
            b /= 2;
            for c in &mut self.cpus {
                let merged: Vec<u8> = c
                    .pixels
                    .chunks(2)
                    .map(|p| match p {
                        [x, y] if *x == PIXEL_UNKNOWN => *y,
                        [x, y] if *y == PIXEL_UNKNOWN => *x,
                        [x, y] => (*x).max(*y),
                        [x] => *x,
                        _ => PIXEL_UNKNOWN,
                    })
                    .collect();
                c.pixels = merged;
            }
        }
    }

    /// Move `pid` onto (Some) or off (None) a run queue at `ts`.
    fn place(&mut self, pid: i64, to: Option<u32>, ts: u64) {
        let from = self.tasks.get(&pid).and_then(|t| t.cpu);
        if from == to {
            return;
        }
        for c in [from, to].into_iter().flatten() {
            if let Some(&i) = self.by_cpu.get(&c) {
                self.advance(i, ts);
            }
        }
        if let Some(i) = from.and_then(|c| self.by_cpu.get(&c).copied()) {
            self.cpus[i].count = self.cpus[i].count.saturating_sub(1);
        }
        if let Some(i) = to.and_then(|c| self.by_cpu.get(&c).copied()) {
            self.cpus[i].count += 1;
        }
        if let Some(t) = self.tasks.get_mut(&pid) {
            t.cpu = to;
        }
    }
}

#[cfg(test)]
mod tests;
