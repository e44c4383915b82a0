//! The run record: what a run directory's `run.json` holds. Raw data (histograms, per-second
//! maxima, spikes, loads) plus, for readers that only want numbers, the derived statistics
//! under the contract's keys (`total`, `cpus[].…`), which [`RunRecord::refresh`] recomputes
//! from the raw data whenever a record is read.
//!
//! `schema_version` changes only when a field changes meaning; new optional fields keep it.

use serde::{Deserialize, Serialize};

use crate::hist::{HistError, Histogram, HistogramRecord};
use crate::stats::Stats;
use crate::units::Nanos;

pub const SCHEMA_VERSION: u32 = 1;

/// Where a run's numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Latlab,
    Cyclictest,
    Rtla,
    Realfeel,
}

impl Source {
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::Latlab => "latlab",
            Source::Cyclictest => "cyclictest",
            Source::Rtla => "rtla",
            Source::Realfeel => "realfeel",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunConfig {
    /// `timer` (cyclictest-style wake-ups); other modes come with their issues.
    #[serde(default = "timer")]
    pub mode: String,
    /// `real`, `sim`, or `import`.
    pub backend: String,
    pub interval_ns: Option<Nanos>,
    pub duration_ns: Option<Nanos>,
    #[serde(default)]
    pub cpus: Vec<u32>,
    pub priority: Option<u32>,
    pub policy: Option<String>,
    #[serde(default)]
    pub distance_ns: Nanos,
    #[serde(default)]
    pub aligned: bool,
    pub hist_limit_ns: Option<Nanos>,
    pub bucket_ns: Option<Nanos>,
    pub max_latency_ns: Option<Nanos>,
    pub trace_threshold_ns: Option<Nanos>,
    #[serde(default)]
    pub loads: Vec<String>,
    #[serde(default)]
    pub warmup_ns: Nanos,
    pub sim_seed: Option<u64>,
    /// Time actually measured (ends early on Ctrl-C).
    pub measured_ns: Option<Nanos>,
    /// Parameters of the `wakeup`, `jitter` and `audio` modes (absent for `timer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_params: Option<crate::modes::ModeParams>,
}

fn timer() -> String {
    "timer".into()
}

/// Machine basics recorded by every run (the full inventory is `RunRecord::inventory`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Machine {
    pub hostname: Option<String>,
    pub kernel_release: Option<String>,
    pub kernel_version: Option<String>,
    pub arch: Option<String>,
    #[serde(default)]
    pub cpus_online: Vec<u32>,
    pub cpu_model: Option<String>,
    /// `none`, `voluntary`, `full`, `rt`, `lazy` when known.
    pub preemption: Option<String>,
    pub cmdline: Option<String>,
    pub virtualized: Option<bool>,
}

/// Who ran the measurement thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ThreadInfo {
    pub tid: Option<i64>,
    pub policy: Option<String>,
    pub priority: Option<u32>,
    pub interval_ns: Option<Nanos>,
}

/// One of the largest samples of a thread, kept by the measurement thread itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleSpike {
    /// Intended wake-up time, CLOCK_MONOTONIC ns.
    pub at_ns: Nanos,
    pub latency_ns: Nanos,
}

/// One measured CPU (or thread, for imports).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuRecord {
    pub cpu: u32,
    /// Derived, contract keys (`samples`, `min_ns`, … `missed_periods`, `below`).
    /// `missed_periods` is raw data kept here.
    #[serde(flatten)]
    pub stats: Stats,
    pub histogram: HistogramRecord,
    /// Largest latency in each second of the measurement (`null`: no sample that second).
    #[serde(default)]
    pub per_second_max_ns: Vec<Option<Nanos>>,
    /// The largest samples, largest first.
    #[serde(default)]
    pub top_spikes: Vec<SampleSpike>,
    #[serde(default)]
    pub thread: ThreadInfo,
    /// What the `wakeup`, `jitter` and `audio` modes add per thread (absent for `timer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<crate::modes::CpuMode>,
}

/// What delayed a traced spike (the contract's `causes`). Its names are [`CauseKind::as_str`],
/// the one table of them (run.json reads and writes them through it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum CauseKind {
    Irq,
    Softirq,
    Task,
    Nmi,
    PreemptOff,
    IrqOff,
    Hypervisor,
    Unknown,
}

impl CauseKind {
    pub const ALL: [CauseKind; 8] = [
        CauseKind::Irq,
        CauseKind::Softirq,
        CauseKind::Task,
        CauseKind::Nmi,
        CauseKind::PreemptOff,
        CauseKind::IrqOff,
        CauseKind::Hypervisor,
        CauseKind::Unknown,
    ];

    /// The contract's name of the kind.
    pub const fn as_str(self) -> &'static str {
        match self {
            CauseKind::Irq => "irq",
            CauseKind::Softirq => "softirq",
            CauseKind::Task => "task",
            CauseKind::Nmi => "nmi",
            CauseKind::PreemptOff => "preempt_off",
            CauseKind::IrqOff => "irq_off",
            CauseKind::Hypervisor => "hypervisor",
            CauseKind::Unknown => "unknown",
        }
    }
}

impl From<CauseKind> for &'static str {
    fn from(k: CauseKind) -> &'static str {
        k.as_str()
    }
}

impl TryFrom<String> for CauseKind {
    type Error = String;
    fn try_from(s: String) -> Result<CauseKind, String> {
        CauseKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = CauseKind::ALL.iter().map(|k| k.as_str()).collect();
                format!(
                    "unknown cause kind `{s}`, expected one of {}",
                    names.join(", ")
                )
            })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub kind: CauseKind,
    pub name: String,
    #[serde(default)]
    pub pid: i64,
    #[serde(default)]
    pub prio: i64,
    pub ns: Nanos,
}

/// A spike the recorder traced (or tried to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpikeRecord {
    pub cpu: u32,
    /// Intended wake-up time, CLOCK_MONOTONIC ns.
    pub at_ns: Nanos,
    pub latency_ns: Nanos,
    /// Sorted by `ns`, largest first; they add up to the part of `latency_ns` the trace explains.
    #[serde(default)]
    pub causes: Vec<Cause>,
    /// Relative path of the saved trace in the run directory.
    #[serde(default)]
    pub trace_file: Option<String>,
    /// A short text timeline of the spike, as text lines: rendered from `timeline_events` when
    /// the record is written (for readers of run.json that want text); files written before
    /// `timeline_events` existed have only these.
    #[serde(default)]
    pub timeline: Vec<String>,
    /// The timeline as data: the moments of the spike relative to its intended wake-up, in
    /// order (empty in files written before it existed). Reports render it
    /// (`latlab_report::timeline`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline_events: Vec<TimelineEvent>,
}

/// One moment of a spike's timeline (run.json `spikes[].timeline_events[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// Nanoseconds from the intended wake-up E (negative: before it).
    pub offset_ns: i64,
    pub what: Moment,
    /// `timer_due`: the thread the timer is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TimelineTask>,
    /// `timer_due`: E lies before the previous sample's switch-in on that CPU, so this spike is
    /// a consequence of that one's stall (a cascade).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cascade: bool,
}

/// What happened at a [`TimelineEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Moment {
    /// The thread's timer is due (E, offset 0).
    TimerDue,
    /// The timer interrupt that woke the thread entered.
    TimerIrq,
    /// The thread was woken (`sched_waking`).
    Woken,
    /// The thread was switched in.
    SwitchedIn,
    /// The thread read its clock (the sample's end, from latlab's marker).
    ClockRead,
    /// A moment a later latlab knows (kept, shown without a name).
    #[serde(other)]
    Other,
}

/// The thread of a spike's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineTask {
    pub comm: String,
    pub pid: i64,
    pub prio: i64,
}

/// A load that ran during the measurement (the contract's `loads`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LoadRecord {
    pub profile: String,
    pub command: String,
    /// Last exit status (`null` while running or when killed by a signal).
    pub exit: Option<i32>,
    /// The load's own throughput where it reports one (bogo-ops/s, MB/s, …).
    pub ops: Option<f64>,
    /// Everything else the supervisor records (start/stop, restarts, rusage, …).
    #[serde(default, flatten)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

/// The whole stored record of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema_version: u32,
    pub label: String,
    pub source: Source,
    /// False in checkpoints and in runs that died before writing their final record.
    pub complete: bool,
    #[serde(default)]
    pub tool_version: Option<String>,
    /// The command line that produced the data (latlab's, or the imported tool's).
    #[serde(default)]
    pub command_line: Option<String>,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub ended_at: Option<String>,
    pub config: RunConfig,
    #[serde(default)]
    pub machine: Machine,
    /// The full machine inventory (`latlab check`), when recorded.
    #[serde(default)]
    pub inventory: Option<serde_json::Value>,
    /// Derived: all CPUs merged.
    #[serde(default)]
    pub total: Stats,
    pub cpus: Vec<CpuRecord>,
    #[serde(default)]
    pub spikes: Vec<SpikeRecord>,
    /// Recorder details (instance, events, overruns, spikes not traced), when tracing.
    #[serde(default)]
    pub trace: Option<serde_json::Value>,
    #[serde(default)]
    pub loads: Vec<LoadRecord>,
    /// System activity over the measurement: /proc/softirqs and /proc/interrupts deltas,
    /// load average (recorded with loads).
    #[serde(default)]
    pub activity: Option<crate::activity::ActivityRecord>,
    /// Results of `latlab scenario` (io-read, fairness) beyond the histograms; absent otherwise.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub scenario: serde_json::Value,
    /// What the run could not do as asked, or what the reader should know.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// What this record cannot know (imports): e.g. overflow values above the limit.
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("schema_version {found} is not supported (this latlab reads version {SCHEMA_VERSION}); use a newer latlab")]
    Schema { found: u64 },
    #[error("not a latlab run record: {0}")]
    Json(#[from] serde_json::Error),
    #[error("CPU {cpu}: {err}")]
    Histogram { cpu: u32, err: HistError },
    #[error("histograms of CPU {a} and CPU {b} have different layouts")]
    Layouts { a: u32, b: u32 },
}

impl RunRecord {
    /// A record of the current schema with these parts and nothing else (no machine, spikes,
    /// loads, trace or scenario; incomplete until the caller says otherwise). Call
    /// [`RunRecord::refresh`] once the CPUs' histograms are final.
    pub fn new(label: &str, source: Source, config: RunConfig, cpus: Vec<CpuRecord>) -> RunRecord {
        RunRecord {
            schema_version: SCHEMA_VERSION,
            label: label.into(),
            source,
            complete: false,
            tool_version: None,
            command_line: None,
            started_at: None,
            ended_at: None,
            config,
            machine: Machine::default(),
            inventory: None,
            total: Stats::default(),
            cpus,
            spikes: vec![],
            trace: None,
            loads: vec![],
            activity: None,
            scenario: serde_json::Value::Null,
            warnings: vec![],
            notes: vec![],
        }
    }

    /// Parse `run.json` bytes: checks the schema version first, then every histogram, and
    /// recomputes the derived statistics.
    pub fn from_json(bytes: &[u8]) -> Result<RunRecord, RecordError> {
        // Only the version first, then the record straight from the bytes: going through a
        // serde_json::Value would turn the u128 sums above 2^64 into floats.
        #[derive(Deserialize)]
        struct Version {
            schema_version: Option<u64>,
        }
        let v: Version = serde_json::from_slice(bytes)?;
        match v.schema_version {
            Some(n) if n == SCHEMA_VERSION as u64 => {}
            Some(n) => return Err(RecordError::Schema { found: n }),
            None => {
                return Err(RecordError::Json(serde::de::Error::custom(
                    "no schema_version key",
                )))
            }
        }
        let mut r: RunRecord = serde_json::from_slice(bytes)?;
        r.refresh()?;
        Ok(r)
    }

    pub fn to_json(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("a run record always serializes");
        v.push(b'\n');
        v
    }

    /// The histograms of every CPU, validated.
    pub fn histograms(&self) -> Result<Vec<Histogram>, RecordError> {
        self.cpus
            .iter()
            .map(|c| {
                Histogram::from_record(&c.histogram)
                    .map_err(|err| RecordError::Histogram { cpu: c.cpu, err })
            })
            .collect()
    }

    /// All CPUs merged.
    pub fn merged(&self) -> Result<Option<Histogram>, RecordError> {
        let hs = self.histograms()?;
        let mut it = hs.into_iter().zip(self.cpus.iter().map(|c| c.cpu));
        let Some((mut total, first)) = it.next() else {
            return Ok(None);
        };
        for (h, cpu) in it {
            total
                .merge(&h)
                .map_err(|_| RecordError::Layouts { a: first, b: cpu })?;
        }
        Ok(Some(total))
    }

    /// Recompute every derived statistic from the raw data.
    pub fn refresh(&mut self) -> Result<(), RecordError> {
        let hs = self.histograms()?;
        for (c, h) in self.cpus.iter_mut().zip(&hs) {
            c.stats = Stats::of(h, c.stats.missed_periods);
        }
        let missed = self.cpus.iter().map(|c| c.stats.missed_periods).sum();
        self.total = match self.merged()? {
            Some(h) => Stats::of(&h, missed),
            None => Stats::default(),
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Layout;

    fn record() -> RunRecord {
        let mut h = Histogram::new(Layout::default());
        for v in [10_000u64, 20_000, 30_000] {
            h.record(v);
        }
        let mut r = RunRecord {
            schema_version: SCHEMA_VERSION,
            label: "t".into(),
            source: Source::Latlab,
            complete: true,
            tool_version: None,
            command_line: None,
            started_at: None,
            ended_at: None,
            config: RunConfig::default(),
            machine: Machine::default(),
            inventory: None,
            total: Stats::default(),
            cpus: vec![CpuRecord {
                cpu: 0,
                stats: Stats {
                    missed_periods: 2,
                    ..Stats::default()
                },
                histogram: h.to_record(),
                per_second_max_ns: vec![Some(30_000)],
                top_spikes: vec![],
                thread: ThreadInfo::default(),
                mode: None,
            }],
            spikes: vec![],
            trace: None,
            loads: vec![],
            activity: None,
            scenario: serde_json::Value::Null,
            warnings: vec![],
            notes: vec![],
        };
        r.refresh().unwrap();
        r
    }

    #[test]
    fn roundtrip_and_contract_keys() {
        let r = record();
        let json = r.to_json();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        for k in [
            "schema_version",
            "label",
            "source",
            "total",
            "cpus",
            "spikes",
            "loads",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["cpus"][0]["missed_periods"], 2);
        assert_eq!(v["cpus"][0]["samples"], 3);
        assert_eq!(v["total"]["max_ns"], 30_000);
        assert_eq!(v["source"], "latlab");
        let back = RunRecord::from_json(&json).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn sums_above_2_pow_64_roundtrip() {
        // 10^6 samples of 10 ms: a sum of squares of 10^20 ns² (> 2^64).
        let mut h = Histogram::new(Layout::default());
        for _ in 0..1_000_000 {
            h.record(10_000_000);
        }
        let mut r = record();
        r.cpus[0].histogram = h.to_record();
        r.refresh().unwrap();
        assert!(r.cpus[0].histogram.sumsq_ns2 > u64::MAX as u128);
        let back = RunRecord::from_json(&r.to_json()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn rejects_other_schema_versions_and_garbage() {
        let mut v: serde_json::Value = serde_json::from_slice(&record().to_json()).unwrap();
        v["schema_version"] = 99.into();
        let e = RunRecord::from_json(v.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("schema_version 99"), "{e}");
        assert!(RunRecord::from_json(b"{}").is_err());
        assert!(RunRecord::from_json(b"\x00garbage").is_err());
    }
}
