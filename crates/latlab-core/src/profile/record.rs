//! run.json's `profile`: what the reconstruction found, per CPU, per task and per watched
//! thread.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// Switches the kernel's record lacks though it said nothing was lost: switch-outs of a
    /// task other than the one the CPU's last recorded switch put on it (the sum of `cpus[]`).
    #[serde(default)]
    pub unrecorded_switches: u64,
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
    /// Times it was switched out still runnable (preempted: `prev_state` R), each followed by
    /// a switch-in without a wake-up, so switch-ins ≈ wake-ups + preemptions.
    #[serde(default)]
    pub preemptions: u64,
    /// The tasks switched to when it was preempted, most often first (at most 5).
    #[serde(default)]
    pub preempted_by: Vec<Preemptor>,
    /// Time from one wake-up (`sched_waking`, else `sched_wakeup`) to the next.
    pub wake_interval: MeasuringKind,
    /// Time from one switch-in to the next.
    pub switch_interval: MeasuringKind,
    /// Wake-up → switch-in: the time it waited in the run queue.
    pub rq_wait: MeasuringKind,
}

/// A task that preempted a measuring thread: the task switched to, and how often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Preemptor {
    pub pid: i64,
    /// Its name (`idle` for pid 0).
    pub comm: String,
    pub count: u64,
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
    /// Switch-outs of a task the CPU's last recorded switch did not put on it, outside gaps.
    #[serde(default)]
    pub unrecorded_switches: u64,
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
