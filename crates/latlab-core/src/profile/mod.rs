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

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// Wait times of one kind: log-linear buckets (8 per power of two: a quantile is the upper
/// edge of its bucket, at most 12.5 % above the true value, never above the max).
#[derive(Debug, Clone)]
struct WaitHist {
    n: u64,
    max: u64,
    buckets: Box<[u32; HIST_BUCKETS]>,
}

const SUB: u32 = 8;
const HIST_BUCKETS: usize = 64 * SUB as usize;

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // v >= 8: e >= 3
    let sub = ((v >> (e - 3)) & (SUB as u64 - 1)) as u32;
    ((e - 2) * SUB + sub) as usize
}

/// The largest value of bucket `b`.
fn bucket_top(b: usize) -> u64 {
    if b < SUB as usize {
        return b as u64;
    }
    let e = b as u32 / SUB + 2;
    let sub = b as u64 % SUB as u64;
    let lo = (1u64 << e) + (sub << (e - 3));
    lo.saturating_add((1u64 << (e - 3)) - 1)
}

impl WaitHist {
    fn new() -> WaitHist {
        WaitHist {
            n: 0,
            max: 0,
            buckets: Box::new([0; HIST_BUCKETS]),
        }
    }

    fn add(&mut self, v: u64) {
        self.n += 1;
        self.max = self.max.max(v);
        let b = &mut self.buckets[bucket_of(v)];
        *b = b.saturating_add(1);
    }

    fn clear(&mut self) {
        if self.n > 0 {
            self.n = 0;
            self.max = 0;
            self.buckets.fill(0);
        }
    }

    /// The non-empty buckets: `[lowest, highest, count]` (the highest capped at the max).
    fn nonempty(&self) -> Vec<[u64; 3]> {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(b, &c)| {
                let lo = if b == 0 { 0 } else { bucket_top(b - 1) + 1 };
                [lo, bucket_top(b).min(self.max), c as u64]
            })
            .collect()
    }

    fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0u64;
        for (b, &c) in self.buckets.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return Some(bucket_top(b).min(self.max));
            }
        }
        Some(self.max)
    }
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

/// One kind of a watched thread's values: all of them, the current time bucket's, and the
/// finished buckets' max and p99.
struct KindAcc {
    all: WaitHist,
    cur: WaitHist,
    cur_bucket: u64,
    max: Vec<Option<u64>>,
    p99: Vec<Option<u64>>,
}

impl KindAcc {
    fn new() -> KindAcc {
        KindAcc {
            all: WaitHist::new(),
            cur: WaitHist::new(),
            cur_bucket: 0,
            max: Vec::new(),
            p99: Vec::new(),
        }
    }

    /// Close the current bucket (its values go to position `cur_bucket`).
    fn flush(&mut self) {
        if self.cur.n == 0 {
            return;
        }
        let i = self.cur_bucket as usize;
        if self.max.len() <= i {
            self.max.resize(i + 1, None);
            self.p99.resize(i + 1, None);
        }
        // The slot may hold a merged bucket's values already (after a halving).
        self.max[i] = self.max[i].max(Some(self.cur.max));
        self.p99[i] = self.p99[i].max(self.cur.quantile(0.99));
        self.cur.clear();
    }

    /// Two buckets become one (the larger max and p99).
    fn halve(&mut self) {
        fn pairs(v: &[Option<u64>]) -> Vec<Option<u64>> {
            v.chunks(2)
                .map(|p| p.iter().flatten().copied().max())
                .collect()
        }
        self.max = pairs(&self.max);
        self.p99 = pairs(&self.p99);
        self.cur_bucket /= 2;
    }

    fn record(&self) -> MeasuringKind {
        MeasuringKind {
            count: self.all.n,
            p50_ns: self.all.quantile(0.5),
            p99_ns: self.all.quantile(0.99),
            max_ns: (self.all.n > 0).then_some(self.all.max),
            hist: self.all.nonempty(),
            max_over_time: self.max.clone(),
            p99_over_time: self.p99.clone(),
        }
    }
}

const K_WAKE: usize = 0;
const K_SWITCH: usize = 1;
const K_RQ: usize = 2;

struct Watched {
    cpu: u32,
    tid: i64,
    last_wake: Option<u64>,
    last_in: Option<u64>,
    wakeups: u64,
    switch_ins: u64,
    kinds: [KindAcc; 3],
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
    pixels: Vec<u8>,
}

/// The heat maps' data: per CPU, the largest run-queue length in each pixel of `pixel_ns`
/// from `start_ns` ([`PIXEL_UNKNOWN`]: no known state), the switch points (time, CPU, the
/// task switched to), the migrations into profiled CPUs (time, pid, from, to) and the names of
/// the tasks switched to most often (untrusted text).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Series {
    pub start_ns: u64,
    pub pixel_ns: u64,
    pub cpus: Vec<(u32, Vec<u8>)>,
    pub switches: Vec<(u64, u32, i64)>,
    pub switches_dropped: u64,
    pub migrations: Vec<(u64, i64, u32, u32)>,
    pub migrations_dropped: u64,
    pub names: Vec<(i64, String)>,
}

/// run.json's `profile`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProfileRecord {
    /// CLOCK_MONOTONIC (ns) at the start, and how long the events cover.
    pub start_ns: u64,
    pub duration_ns: u64,
    /// Events handled, and lost by the kernel (buffer full: the profile reader fell behind).
    pub events: u64,
    pub lost_events: u64,
    /// Pages that said "events lost" without a count.
    pub lost_unknown: u64,
    /// Tasks found runnable in /proc at the start (the seed).
    pub seeded_tasks: u64,
    /// Every task the events showed (those that exited before the end too).
    pub tasks_seen: u64,
    /// Tasks beyond the tracked maximum (their waits are not in `wait[]`).
    pub tasks_untracked: u64,
    /// Pixel of the series in the side file (10 µs, coarser for long profiles).
    pub pixel_ns: u64,
    /// The side file in the run directory (docs/design.md, "Profile"), if written.
    #[serde(default)]
    pub series: Option<String>,
    pub cpus: Vec<ProfileCpu>,
    /// One row per task seen (at most `wait_top`), largest `p99_ns` first.
    pub wait: Vec<WaitRow>,
    pub wait_top: usize,
    /// Task rows left out past `wait_top`.
    pub wait_dropped: u64,
    /// latlab's measuring threads: their wake-ups, switch-ins and run-queue waits.
    #[serde(default)]
    pub measuring: Vec<MeasuringThread>,
}

/// One of latlab's measuring threads (`latlab-cpuN` in latlab's own process), as the
/// scheduler saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeasuringThread {
    /// The CPU it measures (N of its name) and its thread id.
    pub cpu: u32,
    pub tid: i64,
    /// The bucket of the `*_over_time` series (1 s, coarser for long profiles).
    pub bucket_ns: u64,
    /// Wake-ups seen (`sched_wakeup` while not queued; a new thread's first is not one), and
    /// switch-ins.
    pub wakeups: u64,
    pub switch_ins: u64,
    /// Time from one wake-up (`sched_waking`, else `sched_wakeup`) to the next.
    pub wake_interval: MeasuringKind,
    /// Time from one switch-in to the next.
    pub switch_interval: MeasuringKind,
    /// Wake-up → switch-in: the time it waited in the run queue.
    pub rq_wait: MeasuringKind,
}

/// The values of one kind: count, quantiles, the histogram and the values over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeasuringKind {
    pub count: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// The non-empty buckets: `[lowest_ns, highest_ns, count]` (8 per power of two).
    pub hist: Vec<[u64; 3]>,
    /// Per bucket of `bucket_ns` from the profile's start: the largest value, and the p99
    /// (null: none in it). A bucket merged from two keeps the larger of each.
    pub max_over_time: Vec<Option<u64>>,
    pub p99_over_time: Vec<Option<u64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProfileCpu {
    pub cpu: u32,
    /// Share of the known time with 0, 1, 2, 3, 4, ≥ 5 tasks on the run queue (index =
    /// count); sums to 1 (all zero when nothing is known).
    pub rq_share: Vec<f64>,
    pub switches: u64,
    /// Migrations to this CPU.
    pub migrations: u64,
    /// Time with a known state, and in gaps after lost events.
    pub known_ns: u64,
    pub gap_ns: u64,
    pub lost_events: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WaitRow {
    pub comm: String,
    pub pid: i64,
    pub prio: i64,
    /// Wake-ups (`sched_wakeup`) followed by a switch-in: wake-up → switch-in waits.
    pub wakeups: u64,
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Switched out while runnable (preempted or yielded), then switched in again.
    pub preemptions: u64,
    pub preempt_p50_ns: Option<u64>,
    pub preempt_p99_ns: Option<u64>,
    pub preempt_max_ns: Option<u64>,
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

    /// Watch thread `tid` (latlab's measuring thread of `cpu`) from its next event on: the
    /// time between its wake-ups, between its switch-ins, and its run-queue waits. Ignored
    /// past [`MAX_WATCHED`] or when already watched.
    pub fn watch(&mut self, tid: i64, cpu: u32) {
        if tid <= 0 || self.watch_of.contains_key(&tid) || self.watched.len() >= MAX_WATCHED {
            return;
        }
        self.watch_of.insert(tid, self.watched.len());
        self.watched.push(Watched {
            cpu,
            tid,
            last_wake: None,
            last_in: None,
            wakeups: 0,
            switch_ins: 0,
            kinds: [KindAcc::new(), KindAcc::new(), KindAcc::new()],
        });
    }

    /// Add `v` at time `ts` to kind `k` of watched thread `w`.
    fn watch_add(&mut self, w: usize, k: usize, ts: u64, v: u64) {
        let mut b = ts.saturating_sub(self.start_ns) / self.bucket_ns;
        while b >= MAX_TIME_BUCKETS as u64 {
            self.bucket_ns *= 2;
            b /= 2;
            for x in &mut self.watched {
                for k in &mut x.kinds {
                    k.flush();
                    k.halve();
                }
            }
        }
        let k = &mut self.watched[w].kinds[k];
        if b != k.cur_bucket {
            k.flush();
            k.cur_bucket = b;
        }
        k.all.add(v);
        k.cur.add(v);
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

    /// One event; events must come in time order (ties: any order within a CPU's own order).
    pub fn event(&mut self, e: &PEvent) {
        self.apply(e);
        if e.lost_after {
            if let Some(&ci) = self.by_cpu.get(&e.cpu) {
                let c = &mut self.cpus[ci];
                c.lost += 1;
                // Unknown from here to this CPU's next own event: other CPUs' events that
                // move tasks on or off its run queue meanwhile advance it as a gap.
                c.in_gap = true;
            }
        }
    }

    fn apply(&mut self, e: &PEvent) {
        self.events += 1;
        // An event of a CPU outside the profile still moves tasks (wake-ups, migrations).
        if let Some(&ci) = self.by_cpu.get(&e.cpu) {
            if e.lost_before {
                let c = &mut self.cpus[ci];
                c.lost += 1;
                // The time since this CPU's last event is unknown.
                c.in_gap = true;
            }
            self.advance(ci, e.ts);
            self.cpus[ci].in_gap = false;
        }
        self.end_ns = self.end_ns.max(e.ts);
        match e.ev {
            Ev::Switch {
                prev_pid,
                prev_prio,
                prev_runnable,
                prev_dead,
                next_pid,
                next_prio,
            } => {
                if let Some(&ci) = self.by_cpu.get(&e.cpu) {
                    self.cpus[ci].switches += 1;
                }
                if prev_pid > 0 {
                    let t = self.task(prev_pid, prev_prio);
                    t.prio = prev_prio;
                    t.running = false;
                    if prev_runnable {
                        t.since = Some((e.ts, WaitKind::Preempt));
                        self.place(prev_pid, Some(e.cpu), e.ts);
                    } else {
                        t.since = None;
                        self.place(prev_pid, None, e.ts);
                        if prev_dead {
                            // Gone: a later task with this pid starts afresh (new stats row).
                            self.tasks.remove(&prev_pid);
                            self.watch_of.remove(&prev_pid);
                        }
                    }
                }
                if next_pid > 0 {
                    let t = self.task(next_pid, next_prio);
                    t.prio = next_prio;
                    t.running = true;
                    t.waking = None;
                    let since = t.since.take();
                    let stats = t.stats;
                    if let Some(si) = stats {
                        self.stats[si].prio = next_prio;
                    }
                    if let (Some((s, kind)), Some(si)) = (since, stats) {
                        let d = e.ts.saturating_sub(s);
                        match kind {
                            WaitKind::Wakeup => self.stats[si].wake.add(d),
                            WaitKind::Preempt => self.stats[si].preempt.add(d),
                        }
                    }
                    if let Some(&w) = self.watch_of.get(&next_pid) {
                        self.watched[w].switch_ins += 1;
                        if let Some(last) = self.watched[w].last_in.replace(e.ts) {
                            self.watch_add(w, K_SWITCH, e.ts, e.ts.saturating_sub(last));
                        }
                        if let Some((s, WaitKind::Wakeup)) = since {
                            self.watch_add(w, K_RQ, e.ts, e.ts.saturating_sub(s));
                        }
                    }
                    self.place(next_pid, Some(e.cpu), e.ts);
                }
                if self.switch_points.len() < MAX_SWITCH_POINTS {
                    self.switch_points.push((e.ts, e.cpu, next_pid));
                } else {
                    self.switches_dropped += 1;
                }
            }
            Ev::Waking { pid } => {
                if pid > 0 {
                    let t = self.task(pid, 0);
                    if t.cpu.is_none() {
                        t.waking = Some(e.ts);
                    }
                }
            }
            Ev::Wakeup {
                pid,
                prio,
                target_cpu,
                new,
            } => {
                if pid <= 0 {
                    return;
                }
                if new {
                    // A new task: whatever an earlier holder of the pid left is not its state.
                    self.place(pid, None, e.ts);
                    if let Some(t) = self.tasks.get_mut(&pid) {
                        t.since = None;
                        t.running = false;
                    }
                }
                let t = self.task(pid, prio);
                t.prio = prio;
                let waking = t.waking.take();
                if t.cpu.is_some() {
                    // Already queued (woken before it slept, or seeded): no wait starts.
                    return;
                }
                t.since = if new {
                    None
                } else {
                    Some((waking.unwrap_or(e.ts), WaitKind::Wakeup))
                };
                self.place(pid, Some(target_cpu.unwrap_or(e.cpu)), e.ts);
                if let (false, Some(&w)) = (new, self.watch_of.get(&pid)) {
                    let at = waking.unwrap_or(e.ts);
                    self.watched[w].wakeups += 1;
                    if let Some(last) = self.watched[w].last_wake.replace(at) {
                        self.watch_add(w, K_WAKE, at, at.saturating_sub(last));
                    }
                }
            }
            Ev::Migrate { pid, orig, dest } => {
                if let Some(&di) = self.by_cpu.get(&dest) {
                    self.cpus[di].migrations += 1;
                    if self.migration_points.len() < MAX_MIGRATION_POINTS {
                        self.migration_points.push((e.ts, pid, orig, dest));
                    } else {
                        self.migrations_dropped += 1;
                    }
                }
                if pid <= 0 {
                    return;
                }
                let t = self.task(pid, 0);
                if t.cpu.is_some() || t.running {
                    let _ = orig;
                    self.place(pid, Some(dest), e.ts);
                }
            }
        }
    }

    /// Close the profile at `end_ns` (every CPU accounted up to it): the record (top `top`
    /// wait rows, named by `comm`) and the series.
    pub fn finish(
        mut self,
        end_ns: u64,
        top: usize,
        comm: impl Fn(i64) -> String,
        lost_events: u64,
        lost_unknown: u64,
    ) -> (ProfileRecord, Series) {
        let end = end_ns.max(self.end_ns);
        for i in 0..self.cpus.len() {
            self.advance(i, end);
        }
        let cpus = self
            .cpus
            .iter()
            .map(|c| {
                let known: u64 = c.share_ns.iter().sum();
                ProfileCpu {
                    cpu: c.cpu,
                    rq_share: c
                        .share_ns
                        .iter()
                        .map(|&s| {
                            if known == 0 {
                                0.0
                            } else {
                                s as f64 / known as f64
                            }
                        })
                        .collect(),
                    switches: c.switches,
                    migrations: c.migrations,
                    known_ns: known,
                    gap_ns: c.gap_ns,
                    lost_events: c.lost,
                }
            })
            .collect();
        let mut rows: Vec<WaitRow> = self
            .stats
            .iter()
            .filter(|s| s.wake.n > 0 || s.preempt.n > 0)
            .map(|s| WaitRow {
                comm: comm(s.pid),
                pid: s.pid,
                prio: s.prio,
                wakeups: s.wake.n,
                p50_ns: s.wake.quantile(0.5),
                p99_ns: s.wake.quantile(0.99),
                max_ns: (s.wake.n > 0).then_some(s.wake.max),
                preemptions: s.preempt.n,
                preempt_p50_ns: s.preempt.quantile(0.5),
                preempt_p99_ns: s.preempt.quantile(0.99),
                preempt_max_ns: (s.preempt.n > 0).then_some(s.preempt.max),
            })
            .collect();
        rows.sort_by(|a, b| {
            (b.p99_ns, b.preempt_p99_ns, a.pid).cmp(&(a.p99_ns, a.preempt_p99_ns, b.pid))
        });
        let dropped = rows.len().saturating_sub(top) as u64;
        rows.truncate(top);
        for w in &mut self.watched {
            for k in &mut w.kinds {
                k.flush();
            }
        }
        let measuring = self
            .watched
            .iter()
            .map(|w| MeasuringThread {
                cpu: w.cpu,
                tid: w.tid,
                bucket_ns: self.bucket_ns,
                wakeups: w.wakeups,
                switch_ins: w.switch_ins,
                wake_interval: w.kinds[K_WAKE].record(),
                switch_interval: w.kinds[K_SWITCH].record(),
                rq_wait: w.kinds[K_RQ].record(),
            })
            .collect();
        // The names of the tasks switched to most often (the switch map's legend).
        let mut counts: HashMap<i64, u64> = HashMap::new();
        for &(_, _, pid) in &self.switch_points {
            if pid > 0 {
                *counts.entry(pid).or_default() += 1;
            }
        }
        let mut by_count: Vec<(i64, u64)> = counts.into_iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let names = by_count
            .iter()
            .take(SERIES_NAMES)
            .map(|&(pid, _)| (pid, cut(comm(pid), SERIES_NAME_BYTES)))
            .collect();
        let record = ProfileRecord {
            start_ns: self.start_ns,
            duration_ns: end - self.start_ns,
            events: self.events,
            lost_events,
            lost_unknown,
            seeded_tasks: self.seeded,
            // Every task got a stats row or was counted as untracked; rows outlive exits.
            tasks_seen: (self.stats.len() as u64) + self.untracked,
            tasks_untracked: self.untracked,
            pixel_ns: self.pixel_ns,
            series: None,
            cpus,
            wait: rows,
            wait_top: top,
            wait_dropped: dropped,
            measuring,
        };
        let series = Series {
            start_ns: self.start_ns,
            pixel_ns: self.pixel_ns,
            cpus: self.cpus.into_iter().map(|c| (c.cpu, c.pixels)).collect(),
            switches: self.switch_points,
            switches_dropped: self.switches_dropped,
            migrations: self.migration_points,
            migrations_dropped: self.migrations_dropped,
            names,
        };
        (record, series)
    }
}

/// `s` cut to at most `n` bytes, on a character boundary.
fn cut(mut s: String, n: usize) -> String {
    if s.len() > n {
        let mut i = n;
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        s.truncate(i);
    }
    s
}

/// Names kept in a series file at most (a file saying more is not one of latlab's).
const MAX_SERIES_NAMES: usize = 4096;

impl Series {
    /// The side file `profile/series.bin` (docs/design.md, "Profile"): little-endian,
    /// `LATLABRQ` magic, u32 version (2), u64 start_ns, u64 pixel_ns, u32 CPUs; per CPU u32
    /// cpu, u32 pixel count, the pixels (u8 each); u64 switch points, each u64 ts, u32 cpu,
    /// i32 pid; u64 switch points dropped; (version 2:) u64 migrations, each u64 ts, i32 pid,
    /// u32 orig, u32 dest; u64 migrations dropped; u32 names, each i32 pid, u8 length, the
    /// name's bytes (UTF-8).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"LATLABRQ");
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&self.start_ns.to_le_bytes());
        b.extend_from_slice(&self.pixel_ns.to_le_bytes());
        b.extend_from_slice(&(self.cpus.len() as u32).to_le_bytes());
        for (cpu, px) in &self.cpus {
            b.extend_from_slice(&cpu.to_le_bytes());
            b.extend_from_slice(&(px.len() as u32).to_le_bytes());
            b.extend_from_slice(px);
        }
        let pid32 = |pid: i64| (pid.clamp(i32::MIN as i64, i32::MAX as i64) as i32).to_le_bytes();
        b.extend_from_slice(&(self.switches.len() as u64).to_le_bytes());
        for &(ts, cpu, pid) in &self.switches {
            b.extend_from_slice(&ts.to_le_bytes());
            b.extend_from_slice(&cpu.to_le_bytes());
            b.extend_from_slice(&pid32(pid));
        }
        b.extend_from_slice(&self.switches_dropped.to_le_bytes());
        b.extend_from_slice(&(self.migrations.len() as u64).to_le_bytes());
        for &(ts, pid, orig, dest) in &self.migrations {
            b.extend_from_slice(&ts.to_le_bytes());
            b.extend_from_slice(&pid32(pid));
            b.extend_from_slice(&orig.to_le_bytes());
            b.extend_from_slice(&dest.to_le_bytes());
        }
        b.extend_from_slice(&self.migrations_dropped.to_le_bytes());
        let names = &self.names[..self.names.len().min(MAX_SERIES_NAMES)];
        b.extend_from_slice(&(names.len() as u32).to_le_bytes());
        for (pid, name) in names {
            let name = cut(name.clone(), 255);
            b.extend_from_slice(&pid32(*pid));
            b.push(name.len() as u8);
            b.extend_from_slice(name.as_bytes());
        }
        b
    }

    /// Read [`Series::to_bytes`]'s format back (version 2, or 1: no migrations or names);
    /// None when the bytes are not one (untrusted).
    pub fn from_bytes(b: &[u8]) -> Option<Series> {
        let mut r = Reader { b, at: 0 };
        if r.take(8)? != b"LATLABRQ" {
            return None;
        }
        let version = r.u32()?;
        if !(1..=2).contains(&version) {
            return None;
        }
        let (start_ns, pixel_ns, n) = (r.u64()?, r.u64()?, r.u32()?);
        if pixel_ns == 0 {
            return None;
        }
        // No kernel has more CPUs (NR_CPUS is at most 8192): more is no series of latlab's.
        if n as usize > MAX_SERIES_CPUS {
            return None;
        }
        let mut cpus: Vec<(u32, Vec<u8>)> = Vec::new();
        for _ in 0..n {
            let cpu = r.u32()?;
            if cpus.iter().any(|c| c.0 == cpu) {
                return None;
            }
            let len = r.u32()? as usize;
            if len > MAX_PIXELS {
                return None;
            }
            cpus.push((cpu, r.take(len)?.to_vec()));
        }
        let k = r.u64()?;
        if k > MAX_SWITCH_POINTS as u64 {
            return None;
        }
        let mut switches = Vec::with_capacity(k as usize);
        for _ in 0..k {
            switches.push((r.u64()?, r.u32()?, r.u32()? as i32 as i64));
        }
        let switches_dropped = r.u64()?;
        let mut s = Series {
            start_ns,
            pixel_ns,
            cpus,
            switches,
            switches_dropped,
            ..Series::default()
        };
        if version >= 2 {
            let k = r.u64()?;
            if k > MAX_MIGRATION_POINTS as u64 {
                return None;
            }
            s.migrations.reserve(k as usize);
            for _ in 0..k {
                s.migrations
                    .push((r.u64()?, r.u32()? as i32 as i64, r.u32()?, r.u32()?));
            }
            s.migrations_dropped = r.u64()?;
            let k = r.u32()? as usize;
            if k > MAX_SERIES_NAMES {
                return None;
            }
            for _ in 0..k {
                let pid = r.u32()? as i32 as i64;
                let len = r.take(1)?[0] as usize;
                let name = String::from_utf8_lossy(r.take(len)?).into_owned();
                s.names.push((pid, name));
            }
        }
        (r.at == b.len()).then_some(s)
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests;
