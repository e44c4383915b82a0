//! The run record: what a run directory's `run.json` holds. Raw data (histograms, per-second
//! maxima, spikes, loads) plus, for readers that only want numbers, the derived statistics
//! under the contract's keys (`total`, `cpus[].…`), which [`RunRecord::refresh`] recomputes
//! from the raw data whenever a record is read.
//!
//! `schema_version` changes only when a field changes meaning; new optional fields keep it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hist::{HistError, Histogram, Layout};
use crate::stats::Stats;
use crate::units::Nanos;

mod config;
mod cpu;
mod others;
mod spike;

pub use config::{Machine, RunConfig, Source};
pub use cpu::{CpuRecord, SampleSpike, ThreadInfo};
pub use others::{OtherCpu, SpikeOthers, SpikeTimerlat};
pub use spike::{
    Cause, CauseContext, CauseKind, Lane, LaneSegment, Moment, SpikeLanes, SpikeRecord, SpikeSteal,
    TimelineEvent, TimelineTask, MAX_LANE_SEGMENTS, SILENT_GAP, SILENT_GAP_IDLE, STEAL_TICK_NS,
};

pub const SCHEMA_VERSION: u32 = 1;

/// The most histogram buckets (one u64 each, all CPUs together) a run.json may ask for when it
/// is read: 2^26, 512 MiB — `--hist-limit 10s` (10 M buckets) on 6 CPUs, the default 10 ms on
/// 6 700. Histograms are dense in memory while a run.json is sparse, so without a bound a few
/// KB of JSON could ask for gigabytes.
pub const MAX_BUCKETS: u64 = 1 << 26;
/// A load that ran during the measurement (the contract's `loads`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
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

/// run.json's `until`: what `--until` asked for and whether the run got there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UntilRecord {
    /// The statistic as written: `p99.99`, `tail:1e-9`.
    pub statistic: String,
    /// The relative half-width asked for (0.1 for `10%`).
    pub precision: f64,
    /// Every measured CPU's 95 % interval was within the precision when the run ended (the
    /// histograms the record holds).
    pub converged: bool,
    /// Measured time (ns) when the collector first saw every CPU within the precision and
    /// ended the run (the run's measured time when that was only seen at its end); null when
    /// not converged.
    pub after_ns: Option<Nanos>,
    /// The widest relative half-width among the CPUs at the last check; null while some CPU
    /// had no two-sided interval.
    #[serde(default)]
    pub half_width: Option<f64>,
}

/// The whole stored record of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunRecord {
    pub schema_version: u32,
    /// The run's id: random (a UUID) made at run start; imports get one derived from their
    /// content. Absent in records of older latlabs (the results database then derives one
    /// from the file's bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
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
    pub trace: Option<crate::trace_summary::TraceSummary>,
    #[serde(default)]
    pub loads: Vec<LoadRecord>,
    /// System activity over the measurement: /proc/softirqs and /proc/interrupts deltas,
    /// load average (recorded with loads).
    #[serde(default)]
    pub activity: Option<crate::activity::ActivityRecord>,
    /// Results of `latlab scenario` (io-read, fairness) beyond the histograms; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<crate::scenario_record::ScenarioRecord>,
    /// `latlab profile`: the run queues and the tasks' waits (docs/contract.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::profile::ProfileRecord>,
    /// Per-interval histograms (a minute each, all CPUs merged, sparse and bounded) for
    /// latency over time; absent in imports, fast simulations and older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intervals: Option<crate::intervals::IntervalHistograms>,
    /// `--until STAT:PRECISION`: what was asked and whether the run got there; absent
    /// without `--until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<UntilRecord>,
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
    #[error("the histograms of its {cpus} CPUs would need {buckets} buckets in memory ({} MiB); latlab reads records of up to {MAX_BUCKETS} buckets ({} MiB): use a smaller --hist-limit or fewer CPUs", buckets / (1 << 17), MAX_BUCKETS / (1 << 17))]
    TooLarge { cpus: usize, buckets: u64 },
    #[error(
        "the traced spikes' {what} add up past 64 bits (spike {index}): not a record latlab writes"
    )]
    SpikeOverflow { what: &'static str, index: usize },
    #[error("the sample or missed-period counts of all CPUs together do not fit in 64 bits (CPU {cpu} makes them overflow)")]
    CountOverflow { cpu: u32 },
}

impl RunRecord {
    /// A record of the current schema with these parts and nothing else (no machine, spikes,
    /// loads, trace or scenario; incomplete until the caller says otherwise). Call
    /// [`RunRecord::refresh`] once the CPUs' histograms are final.
    pub fn new(label: &str, source: Source, config: RunConfig, cpus: Vec<CpuRecord>) -> RunRecord {
        RunRecord {
            schema_version: SCHEMA_VERSION,
            run_id: None,
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
            scenario: None,
            profile: None,
            intervals: None,
            until: None,
            warnings: vec![],
            notes: vec![],
        }
    }

    /// Parse `run.json` bytes: checks the schema version first, then every histogram, and
    /// recomputes the derived statistics. A secret in any string (a database password an older
    /// latlab recorded in `command_line`) is masked ([`crate::secrets`]): a record read never
    /// holds one.
    pub fn from_json(bytes: &[u8]) -> Result<RunRecord, RecordError> {
        let masked = crate::secrets::mask_json(bytes);
        let bytes: &[u8] = &masked;
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
        r.check_size()?;
        r.check_spikes()?;
        r.refresh()?;
        Ok(r)
    }

    /// The spikes' latencies, and their causes' times, must add up within u64: reports sum
    /// them (the "what delays this machine" table).
    fn check_spikes(&self) -> Result<(), RecordError> {
        let (mut lat, mut causes) = (0u64, 0u64);
        for (index, sp) in self.spikes.iter().enumerate() {
            lat = lat
                .checked_add(sp.latency_ns)
                .ok_or(RecordError::SpikeOverflow {
                    what: "latencies",
                    index,
                })?;
            for c in &sp.causes {
                causes = causes.checked_add(c.ns).ok_or(RecordError::SpikeOverflow {
                    what: "causes' times",
                    index,
                })?;
            }
        }
        Ok(())
    }

    /// Refuse a record whose dense histograms would exceed [`MAX_BUCKETS`], before allocating
    /// them. Layouts that are invalid are left to [`RunRecord::histograms`] to report.
    fn check_size(&self) -> Result<(), RecordError> {
        let mut buckets = 0u64;
        for c in &self.cpus {
            let Ok(l) = Layout::new(c.histogram.bucket_ns, c.histogram.limit_ns) else {
                continue;
            };
            buckets = buckets.saturating_add(l.len() as u64);
        }
        if buckets > MAX_BUCKETS {
            return Err(RecordError::TooLarge {
                cpus: self.cpus.len(),
                buckets,
            });
        }
        Ok(())
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
        self.merge_all(&self.histograms()?)
    }

    /// `hs` (the histograms of `self.cpus`, in order) merged; their counts must fit in u64
    /// together.
    fn merge_all(&self, hs: &[Histogram]) -> Result<Option<Histogram>, RecordError> {
        let mut it = hs.iter().zip(self.cpus.iter().map(|c| c.cpu));
        let Some((first, first_cpu)) = it.next() else {
            return Ok(None);
        };
        let mut total = first.clone();
        for (h, cpu) in it {
            if total.layout() != h.layout() {
                return Err(RecordError::Layouts {
                    a: first_cpu,
                    b: cpu,
                });
            }
            if total.count().checked_add(h.count()).is_none() {
                return Err(RecordError::CountOverflow { cpu });
            }
            total.merge(h).map_err(|_| RecordError::Layouts {
                a: first_cpu,
                b: cpu,
            })?;
        }
        Ok(Some(total))
    }

    /// Recompute every derived statistic from the raw data.
    pub fn refresh(&mut self) -> Result<(), RecordError> {
        self.derive().map(|_| ())
    }

    /// [`RunRecord::refresh`], returning what it derived from: the histograms of every CPU
    /// and all CPUs merged (each built once).
    pub fn derive(&mut self) -> Result<(Vec<Histogram>, Option<Histogram>), RecordError> {
        let hs = self.histograms()?;
        let merged = self.merge_all(&hs)?;
        for (c, h) in self.cpus.iter_mut().zip(&hs) {
            c.stats = Stats::of(h, c.stats.missed_periods);
        }
        let mut missed = 0u64;
        for c in &self.cpus {
            missed = missed
                .checked_add(c.stats.missed_periods)
                .ok_or(RecordError::CountOverflow { cpu: c.cpu })?;
        }
        self.total = match &merged {
            Some(h) => Stats::of(h, missed),
            None => Stats::default(),
        };
        Ok((hs, merged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::{HistogramRecord, Layout};

    fn record() -> RunRecord {
        let mut h = Histogram::new(Layout::default());
        for v in [10_000u64, 20_000, 30_000] {
            h.record(v);
        }
        let mut r = RunRecord {
            schema_version: SCHEMA_VERSION,
            run_id: None,
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
            scenario: None,
            profile: None,
            intervals: None,
            until: None,
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

    /// Two CPUs whose sample counts (or missed periods) add up past u64: an error naming the
    /// CPU, not a panic (overflow checks) or a wrapped total (release).
    #[test]
    fn counts_that_overflow_together_are_an_error() {
        let mut r = record();
        let mut h = Histogram::new(Layout::default());
        h.record(10_000);
        let mut big = h.to_record();
        big.buckets = vec![[10_000, u64::MAX - 1]];
        big.count = u64::MAX - 1;
        r.cpus[0].histogram = big.clone();
        let mut c1 = r.cpus[0].clone();
        c1.cpu = 1;
        r.cpus.push(c1);
        let e = RunRecord::from_json(&serde_json::to_vec(&r).unwrap()).unwrap_err();
        assert!(matches!(e, RecordError::CountOverflow { cpu: 1 }), "{e}");
        assert!(e.to_string().contains("do not fit in 64 bits"), "{e}");

        let mut r = record();
        r.cpus[0].stats.missed_periods = u64::MAX;
        let mut c1 = r.cpus[0].clone();
        c1.cpu = 1;
        r.cpus.push(c1);
        let e = RunRecord::from_json(&serde_json::to_vec(&r).unwrap()).unwrap_err();
        assert!(matches!(e, RecordError::CountOverflow { cpu: 1 }), "{e}");
    }

    /// A few KB of JSON asking for 64 CPUs of 10 M dense buckets (5 GiB) is refused before
    /// anything is allocated; the largest layout `latlab run` makes loads on a few CPUs.
    #[test]
    fn records_needing_gigabytes_are_refused_before_allocating() {
        let mut r = record();
        let empty = HistogramRecord {
            bucket_ns: 1_000,
            limit_ns: 10_000_000_000,
            count: 0,
            min_ns: 0,
            max_ns: 0,
            sum_ns: 0,
            sumsq_ns2: 0,
            unknown_above: 0,
            exact_moments: true,
            buckets: vec![],
        };
        let cpu = |i| CpuRecord {
            cpu: i,
            histogram: empty.clone(),
            ..r.cpus[0].clone()
        };
        let cpus: Vec<CpuRecord> = (0..64).map(cpu).collect();
        r.cpus = cpus;
        let json = serde_json::to_vec(&r).unwrap();
        assert!(json.len() < 64 * 1024, "{}", json.len());
        // Refused from the declared layouts, before any histogram is built (the memory bound
        // is checked where it can fail: bounded_input.rs runs under an address-space limit).
        let e = RunRecord::from_json(&json).unwrap_err();
        assert!(matches!(e, RecordError::TooLarge { cpus: 64, .. }), "{e}");
        assert!(e.to_string().contains("use a smaller --hist-limit"), "{e}");
        r.cpus.truncate(4);
        let back = RunRecord::from_json(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back.cpus.len(), 4);
    }

    /// Spikes whose latencies or causes add up past u64 (the reports sum them) are refused
    /// with an error, not a panic (overflow checks) or a wrapped share (release).
    #[test]
    fn spike_times_that_overflow_together_are_an_error() {
        let spike = |latency_ns, ns| SpikeRecord {
            cpu: 0,
            at_ns: 1,
            latency_ns,
            causes: vec![Cause {
                kind: CauseKind::Irq,
                name: "x".into(),
                pid: 0,
                prio: 0,
                ns,
                context: None,
            }],
            trace_file: None,
            timeline: vec![],
            timeline_events: vec![],
            lanes: None,
            steal: None,
            others: None,
            timerlat: None,
        };
        let mut r = record();
        r.spikes = vec![spike(u64::MAX, 1), spike(1, 1)];
        let e = RunRecord::from_json(&r.to_json()).unwrap_err();
        assert!(
            e.to_string()
                .contains("latencies add up past 64 bits (spike 1)"),
            "{e}"
        );
        r.spikes = vec![spike(10, u64::MAX), spike(10, 1)];
        let e = RunRecord::from_json(&r.to_json()).unwrap_err();
        assert!(
            e.to_string().contains("causes' times add up past 64 bits"),
            "{e}"
        );
        r.spikes = vec![spike(u64::MAX - 1, u64::MAX - 1), spike(1, 1)];
        assert!(RunRecord::from_json(&r.to_json()).is_ok());
    }
}
