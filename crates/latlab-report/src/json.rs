//! The JSON report (`latlab report --format json`, `latlab run --format json`): the interface
//! contract's keys (docs/contract.md), all times integer ns. Typed here, so that
//! docs/schema/report.schema.json is generated from the same structs that write the bytes.

use latlab_core::activity::ActivityRecord;
use latlab_core::hist::Histogram;
use latlab_core::model::RunModel;
use latlab_core::modes::{AudioRecord, ExecSummary, ModeParams};
use latlab_core::profile::ProfileRecord;
use latlab_core::record::{LoadRecord, Machine, RunConfig, SampleSpike, Source, SpikeRecord};
use latlab_core::scenario_record::ScenarioRecord;
use latlab_core::stats::Stats;
use latlab_core::tail::TailEstimate;
use latlab_core::trace_summary::TraceSummary;
use latlab_core::units::Nanos;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// The whole report. Keys come out sorted (it is written through a `serde_json::Value`).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(title = "latlab report JSON (report --format json, run --format json)")]
pub struct Report<'a> {
    /// 1; changes only when a key changes meaning.
    pub schema_version: u32,
    pub label: &'a str,
    pub source: Source,
    /// False for checkpoints and runs that died before their final record.
    pub complete: bool,
    pub started_at: Option<&'a str>,
    pub ended_at: Option<&'a str>,
    pub command_line: Option<&'a str>,
    pub config: &'a RunConfig,
    pub machine: &'a Machine,
    /// All CPUs merged.
    pub total: ReportTotal<'a>,
    pub cpus: Vec<ReportCpu<'a>>,
    pub spikes: &'a [SpikeRecord],
    /// Recorder details when tracing (instances, re-arm times, spikes not traced).
    pub trace: Option<&'a TraceSummary>,
    pub loads: &'a [LoadRecord],
    pub activity: Option<&'a ActivityRecord>,
    pub inventory: Option<&'a Value>,
    pub warnings: &'a [String],
    pub notes: &'a [String],
    /// Extension: only for `--mode wakeup|jitter|audio` runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<ReportMode<'a>>,
    /// Extension: "what delays this machine", only when a spike has causes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delays: Option<Vec<Delay>>,
    /// Extension: only for `latlab scenario` runs (see docs/contract.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<&'a ScenarioRecord>,
    /// Extension: only for `latlab profile` runs, the same object as run.json's (see
    /// docs/contract.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<&'a ProfileRecord>,
}

/// All CPUs merged: the contract's statistics and the tail estimate.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReportTotal<'a> {
    #[serde(flatten)]
    pub stats: &'a Stats,
    /// Extension: the tail estimate (`null`: the run has no CPU).
    pub tail: Option<TailEstimate>,
}

/// One measured CPU (thread): the contract's statistics plus the per-second maxima.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReportCpu<'a> {
    pub cpu: u32,
    #[serde(flatten)]
    pub stats: &'a Stats,
    /// Extension: the tail estimate of this CPU.
    pub tail: TailEstimate,
    /// Largest latency in each second (`null`: no sample that second).
    pub per_second_max_ns: &'a [Option<Nanos>],
    /// The largest samples, largest first.
    pub top_spikes: &'a [SampleSpike],
    /// Extension (wakeup): who wakes whom.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair: Option<&'a str>,
    /// Extension (jitter, audio): the compute kernel's execution time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecJson>,
    /// Extension (audio): the deadline tally of this thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio: Option<AudioJson>,
    /// Extension (noise): the run record's `mode.noise`, with the share of the CPU the
    /// spinning thread had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<NoiseJson<'a>>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct NoiseJson<'a> {
    #[serde(flatten)]
    pub record: &'a latlab_core::modes::NoiseRecord,
    /// `100 × (runtime − noise) / runtime` (rtla's `%CPU_AVAIL`); null before the loop ran.
    pub available_pct: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecJson {
    #[serde(flatten)]
    pub summary: ExecSummary,
    pub iterations: u64,
    pub calibrated_ns: Nanos,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AudioJson {
    pub period_ns: Nanos,
    pub buffers: u32,
    /// Frames per fragment at 44.1 kHz.
    pub frames: u64,
    pub fragments: u64,
    pub xruns: u64,
    pub xruns_per_minute: f64,
    pub worst_response_ns: Nanos,
    /// Worst response past the deadline (0: none late).
    pub worst_lateness_ns: Nanos,
    pub late_by_buffers: Vec<LateBy>,
    pub verdict: String,
}

/// Fragments that would have been late with `buffers` fragments in the ring.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LateBy {
    pub buffers: u32,
    pub late: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReportMode<'a> {
    /// `wakeup`, `jitter`, `audio` or `noise`.
    pub name: &'a str,
    pub params: Option<&'a ModeParams>,
    /// Audio: all threads merged.
    pub audio: Option<AudioJson>,
}

/// One row of "what delays this machine": the summary rows themselves.
pub type Delay = latlab_core::trace::SummaryRow;

fn audio_json(a: &AudioRecord, measured: Nanos) -> AudioJson {
    AudioJson {
        period_ns: a.period_ns,
        buffers: a.buffers,
        frames: a.frames(),
        fragments: a.fragments,
        xruns: a.xruns,
        xruns_per_minute: a.xruns_per_minute(measured),
        worst_response_ns: a.worst_response_ns,
        worst_lateness_ns: a.worst_lateness_ns().unwrap_or(0),
        late_by_buffers: a
            .verdict()
            .iter()
            .map(|&(buffers, late)| LateBy { buffers, late })
            .collect(),
        verdict: a.verdict_sentence(),
    }
}

/// The typed report of a run.
pub fn report(m: &RunModel) -> Report<'_> {
    let r = &m.record;
    let measured = r.config.measured_ns.unwrap_or(0);
    let (total_tail, cpu_tails) = latlab_core::tail::of_run(m);
    let cpus = r
        .cpus
        .iter()
        .zip(cpu_tails)
        .map(|(c, tail)| {
            let x = c.mode.as_ref();
            ReportCpu {
                cpu: c.cpu,
                stats: &c.stats,
                tail,
                per_second_max_ns: &c.per_second_max_ns,
                top_spikes: &c.top_spikes,
                pair: x.and_then(|x| x.pair.as_deref()),
                exec: x.and_then(|x| x.exec.as_ref()).and_then(|e| {
                    let h = Histogram::from_record(&e.histogram).ok()?;
                    Some(ExecJson {
                        summary: ExecSummary::of(&h)?,
                        iterations: e.iterations,
                        calibrated_ns: e.calibrated_ns,
                    })
                }),
                audio: x
                    .and_then(|x| x.audio.as_ref())
                    .map(|a| audio_json(a, measured)),
                noise: x.and_then(|x| x.noise.as_ref()).map(|n| NoiseJson {
                    record: n,
                    available_pct: n.available_pct(),
                }),
            }
        })
        .collect();
    let mode = (r.config.mode != "timer" || r.config.mode_params.is_some()).then(|| {
        let merged = AudioRecord::merged(
            r.cpus
                .iter()
                .filter_map(|c| c.mode.as_ref().and_then(|x| x.audio.as_ref())),
        );
        ReportMode {
            name: &r.config.mode,
            params: r.config.mode_params.as_ref(),
            audio: merged.as_ref().map(|a| audio_json(a, measured)),
        }
    });
    let rows = latlab_core::trace::summarize(&r.spikes);
    let delays = (!rows.is_empty()).then_some(rows);
    Report {
        schema_version: r.schema_version,
        label: &r.label,
        source: r.source,
        complete: r.complete,
        started_at: r.started_at.as_deref(),
        ended_at: r.ended_at.as_deref(),
        command_line: r.command_line.as_deref(),
        config: &r.config,
        machine: &r.machine,
        total: ReportTotal {
            stats: &r.total,
            tail: total_tail,
        },
        cpus,
        spikes: &r.spikes,
        trace: r.trace.as_ref(),
        loads: &r.loads,
        activity: r.activity.as_ref(),
        inventory: r.inventory.as_ref(),
        warnings: &r.warnings,
        notes: &r.notes,
        mode,
        delays,
        scenario: r.scenario.as_ref(),
        profile: r.profile.as_ref(),
    }
}

/// The report as a JSON value (keys sorted).
pub fn value(m: &RunModel) -> Value {
    serde_json::to_value(report(m)).expect("the report serializes")
}

pub fn render(m: &RunModel) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(&value(m)).expect("json serializes");
    v.push(b'\n');
    v
}
