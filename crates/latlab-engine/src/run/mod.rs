//! `latlab run`: the run lifecycle, as rtla's tools have it — plan (the CLI's) → prepare
//! (checks and holds: nothing is written yet) → begin (the session: signals, the ledger, the run
//! directory) → start the loads and warm up → start the recorder, the profiler and the
//! measurement → collect (ticks) → stop → write → restore → record. Restore runs on every exit
//! path: normal end, Ctrl-C/SIGTERM/SIGHUP (a flag the measurement threads see within one
//! period), an error, and a panic (drop guards).
//!
//! What the measuring threads are is a back end ([`backend`]): the run sees only the
//! [`backend::Measurement`] it starts.

use std::io::IsTerminal;
use std::process::ExitCode;

use latlab_core::model::RunModel;
use latlab_core::units::Human;
use latlab_sys::measure::{SpikeEvent, TraceHook};
use latlab_sys::procstat::Snapshot;

use crate::profile::ProfileSession;
use crate::rundir;
use crate::session::{Begin, Session};

pub mod backend;
mod collector;
mod live;
pub mod plan;
mod prepare;
mod record;
mod steal;
mod until;

use collector::{Collector, Ctx};
pub use plan::{ModePlan, Plan, RunPlan, SessionPlan};
use record::{build_record, Measured};

/// What another front end (`latlab cyclictest`) adds to a run: its own view of the samples
/// and its own output. Called on the collector thread only.
pub trait Hooks {
    /// Samples at or above this reach [`Hooks::on_events`] (0: every sample).
    fn event_threshold_ns(&self) -> u64 {
        u64::MAX
    }
    /// Measuring has started at `t0_ns` (CLOCK_MONOTONIC); `dma` is the value held, if any.
    fn on_start(&mut self, _t0_ns: u64, _dma: Option<i32>) {}
    /// Samples drained from the threads (in CPU order, each CPU's in time order).
    fn on_events(&mut self, _events: &[SpikeEvent]) {}
    /// Whether [`Hooks::on_tick`] is wanted.
    fn ticks(&self) -> bool {
        false
    }
    /// Every collector tick (100 ms) while measuring: the threads as they stand (their live
    /// histograms, last samples and tids), for a front end's live lines.
    fn on_tick(&mut self, _threads: &[std::sync::Arc<latlab_sys::live::ThreadShared>]) {}
    /// Whether latlab's own summary is printed (a front end prints its own).
    fn summary(&self) -> bool {
        true
    }
    /// The run is written and the machine restored (before `--on-end` runs): a front end
    /// prints its summary here.
    fn on_finished(
        &mut self,
        _model: &latlab_core::model::RunModel,
        _dir: &std::path::Path,
    ) -> crate::Result<()> {
        Ok(())
    }
}

/// No hooks: `latlab run` itself.
pub struct NoHooks;
impl Hooks for NoHooks {}

/// How a run ended, for a front end's own output.
pub struct Outcome {
    pub code: ExitCode,
    pub model: latlab_core::model::RunModel,
    /// Per thread (in CPU order): its tid and its last sample.
    pub tids: Vec<i64>,
    pub last_ns: Vec<u64>,
    /// The sample that fired `--on-threshold stop`.
    pub stopped_by: Option<crate::actions::Firing>,
    /// The run directory.
    pub dir: std::path::PathBuf,
}

/// `latlab run` as `plan` asks: measure (with `plan.profile`, the scheduler profile recorded
/// over the same seconds: started after the recorder, stopped after the threads); `hooks`:
/// what a front end (`latlab cyclictest`) prints along the way. The run directory is written,
/// the machine restored, the run recorded; [`Hooks::on_finished`] prints the summary.
pub fn run(plan: RunPlan, hooks: &mut dyn Hooks) -> crate::Result<Outcome> {
    run_with(plan, hooks).map_err(crate::Error::from)
}

fn run_with(plan: RunPlan, hooks: &mut dyn Hooks) -> anyhow::Result<Outcome> {
    let RunPlan {
        measure: mut p,
        mode: mut mp,
        session: mut rp,
    } = plan;
    // `profile --no-measure`: no measuring thread (its flags were refused by the parser).
    let no_measure = rp.profile.as_ref().is_some_and(|o| o.no_measure);
    if no_measure {
        p.cpus.clear();
        mp.name = "none";
    }
    let mut prep = prepare::prepare(&rp, &mut p, &mp, no_measure)?;
    // The record keeps what was held, not what was asked.
    rp.dma_latency_us = rp.dma_latency_us.filter(|_| prep.dma.is_some());
    let mut s = begin(&rp, &p, std::mem::take(&mut prep.warnings))?;
    let dir = s.dir().to_path_buf();
    let cx = Ctx {
        rp: &rp,
        p: &p,
        mp: &mp,
        dir: &dir,
    };
    // Loads start first; measurement starts after the warm-up, so the histogram holds the
    // loaded state only.
    if let Some(l) = prep.loads.take() {
        if p.warmup_ns > 0 && !rp.quiet && std::io::stderr().is_terminal() {
            eprintln!(
                "latlab: the loads warm up for {} before measuring",
                latlab_core::units::format_duration(p.warmup_ns)
            );
        }
        if let Err(e) = s.start_loads(l, &dir.join("loads"), p.warmup_ns) {
            // Nothing was measured, but the run directory says why (and holds the loads'
            // records and logs): a run.json marked incomplete, with the reason as a warning.
            s.warnings.push(format!(
                "the run ended during the load warm-up, before measuring: {e:#}"
            ));
            let record = build_record(&s, &rp, &p, &mp, &Measured::NOTHING, false);
            return Err(s.abandon(record, e).into());
        }
    }
    let (c, profiler) = start(&mut s, &cx, hooks, no_measure, prep.metrics.take())?;
    hooks.on_start(c.m.t0_ns(), rp.dma_latency_us);
    end(s, &cx, hooks, c, profiler)
}

/// The session: the run directory (with room for the record), the inventory, the ledger.
fn begin(rp: &SessionPlan, p: &Plan, warnings: Vec<String>) -> anyhow::Result<Session> {
    let need = rundir::estimate_run_bytes(
        p.cpus.len(),
        p.duration_ns,
        p.layout.limit_ns(),
        p.trace.as_ref().map_or(0, |t| t.max_spikes),
    );
    let mut s = Session::begin(Begin {
        results: Some((&rp.results, &p.label, need)),
        inventory: true,
        quiet: rp.quiet,
    })?;
    for w in warnings {
        s.warn(w);
    }
    s.record_db = Some(rp.db.clone());
    Ok(s)
}

/// Start what records (the flight recorder, last before the threads so its buffer holds the
/// measured period only; the profiler) and the measurement.
fn start(
    s: &mut Session,
    cx: &Ctx,
    hooks: &mut dyn Hooks,
    no_measure: bool,
    metrics: Option<std::net::TcpListener>,
) -> anyhow::Result<(Collector, Option<ProfileSession>)> {
    let p = cx.p;
    let tracer = match &p.trace {
        Some(opts) => crate::recorder::start(opts, &p.cpus, s.ledger.clone(), &mut s.warnings)?,
        None => None,
    };
    let profiler = match &cx.rp.profile {
        Some(o) => Some(ProfileSession::start(o, s.ledger.clone(), &mut s.warnings)?),
        None => None,
    };
    let trace: Option<TraceHook> = match (&tracer, p.trace_threshold_ns) {
        (Some(t), Some(threshold_ns)) => Some(TraceHook {
            armed_fd: t.armed_fd(),
            threshold_ns,
            marks: t.marks(),
        }),
        _ => None,
    };
    // While tracing real samples, the steal time around each spike: read from before the
    // measurement starts (a simulation's spikes are not the machine's).
    let steal = (tracer.is_some() && !no_measure && !cx.rp.backend.generated())
        .then(steal::StealWatch::new);
    let m = if no_measure {
        backend::idle::Idle::start(p.duration_ns)
    } else {
        cx.rp.backend.start(backend::Start {
            plan: p,
            mode: cx.mp,
            aligned: cx.rp.aligned,
            spike_threshold_ns: p
                .trace_threshold_ns
                .unwrap_or(u64::MAX)
                .min(p.max_latency_ns.map_or(u64::MAX, |m| m + 1))
                .min(hooks.event_threshold_ns()),
            trace,
            ledger: s.ledger.clone(),
            seed: cx.rp.seed,
            realtime: cx.rp.realtime,
        })?
    };
    if let Some(pr) = &profiler {
        pr.measuring_started();
    }
    // The record's start is the measurement's, after the warm-up.
    s.started_at = rundir::utc_now().0;
    let intervals = !no_measure && !cx.rp.backend.simulated_time(cx.rp.realtime);
    let mut c = Collector::new(cx, m, tracer, steal, metrics, intervals)?;
    if matches!(cx.mp.mode, latlab_sys::modes::Mode::Noise { .. }) {
        c.noise_from = latlab_sys::procstat::Snapshot::read(std::path::Path::new("/")).ok();
    }
    Ok((c, profiler))
}

/// Collect until the threads end, then write the record, restore, record the run, and run
/// the `--on-end` actions.
fn end(
    mut s: Session,
    cx: &Ctx,
    hooks: &mut dyn Hooks,
    mut c: Collector,
    profiler: Option<ProfileSession>,
) -> anyhow::Result<Outcome> {
    c.collect(&mut s, cx, hooks);
    let wall_ns = c.started.elapsed().as_nanos() as u64;
    let m = std::mem::replace(&mut c.m, backend::idle::Idle::start(0));
    let mut ending = Vec::new();
    let results = m.join(&mut ending);
    for w in ending {
        s.warn(w);
    }
    let measured_ns = measured_ns(&c, cx, wall_ns);
    c.finish(&mut s, cx, hooks, measured_ns);
    collector::close_intervals(&mut c, measured_ns);
    let mut record = c.record(&s, cx, measured_ns, Some(&results), true);
    noise_sources(&mut record, c.noise_from.take());
    if let Some(tr) = c.tracer.take() {
        c.live.say(&format!(
            "writing the spikes' captures and their analyses ({} spikes)",
            c.spikes.len()
        ));
        record.trace = Some(tr.finish());
    }
    if let Some(pr) = profiler {
        c.live.say("writing the scheduler profile");
        record.profile = pr.finish(cx.dir, &mut record.warnings);
    }
    if let Some(e) = c.load_error.take() {
        return Err(s.abandon(record, e).into());
    }
    let (tids, last_ns) = c.tids_and_last(&results);
    let model = s.finish(record)?;
    hooks.on_finished(&model, cx.dir)?;
    on_end(cx, &model);
    Ok(Outcome {
        code: verdict(cx.p, &model),
        model,
        tids,
        last_ns,
        stopped_by: c.stopped_by,
        dir: cx.dir.to_path_buf(),
    })
}

/// `--mode noise`: each CPU's interrupts and softirqs between the threads' start and now.
fn noise_sources(record: &mut latlab_core::record::RunRecord, from: Option<Snapshot>) {
    let Some(from) = from else { return };
    let Ok(now) = Snapshot::read(std::path::Path::new("/")) else {
        return;
    };
    let delta = from.delta(&now);
    for c in &mut record.cpus {
        let cpu = c.cpu;
        // The osnoise tracer's own sources (timed) when it measured.
        if let Some(n) = c
            .mode
            .as_mut()
            .and_then(|m| m.noise.as_mut())
            .filter(|n| n.sources.is_empty())
        {
            n.sources = latlab_core::modes::NoiseSource::counted(&delta, cpu);
        }
    }
}

/// What the threads measured. A run to its end: its duration. An ended-early run measured
/// the periods its threads went through, each a sample or a missed period: not the wall time
/// from the start to the collector's next tick, which also holds the threads' start and the
/// tick's wait (an interrupted real run recorded 466 periods of time for 306 samples and no
/// missed period). Simulated time too, whose run to its end is its duration.
fn measured_ns(c: &Collector, cx: &Ctx, wall_ns: u64) -> u64 {
    let p = cx.p;
    let early =
        c.interrupted || c.stopped_by.is_some() || c.load_error.is_some() || c.until_reached();
    if early {
        collector::periods_ns(&c.threads, p)
    } else if cx.rp.backend.simulated_time(cx.rp.realtime) {
        p.duration_ns
    } else {
        wall_ns.min(p.duration_ns)
    }
}

/// `--on-end`: after the record is written (the actions may read the run directory), with
/// the run's maximum and its CPU.
fn on_end(cx: &Ctx, model: &RunModel) {
    if cx.rp.actions.on_end.is_empty() {
        return;
    }
    let (cpu, latency_ns) = model
        .cpus
        .iter()
        .filter_map(|c| Some((c.cpu, c.hist.max()?)))
        .max_by_key(|&(_, m)| m)
        .unwrap_or((0, 0));
    let mut end = crate::actions::Runner::new(
        &cx.rp.actions.on_end,
        "--on-end",
        cx.rp.actions.timeout_ns,
        cx.dir,
    );
    let mut warnings = Vec::new();
    end.fire(crate::actions::Firing { cpu, latency_ns }, &mut warnings);
    end.wait(&mut warnings);
    for w in warnings {
        crate::warn(&w);
    }
}

/// The maximum `--max-latency` judges, and the name of its series (` IRQ` …; empty for the
/// CPUs' histograms). A timerlat run's default is the thread latency (`cpus[].mode.thread`
/// with user-space threads, else the CPU's histogram); `--max-latency-of` names another.
fn judged_max(p: &Plan, model: &RunModel) -> (Option<u64>, &'static str) {
    use latlab_core::trace::raw::TimerlatContext as C;
    let modes = || model.record.cpus.iter().filter_map(|c| c.mode.as_ref());
    let timerlat = modes().any(|m| m.timerlat_threads.is_some());
    let series_max =
        |f: fn(&latlab_core::modes::CpuMode) -> Option<u64>| modes().filter_map(f).max();
    let user = modes().any(|m| m.timerlat_threads.as_deref() == Some("user"));
    match (p.max_latency_of, timerlat) {
        (Some(C::Irq), true) => (series_max(|m| Some(m.irq.as_ref()?.max_ns)), " IRQ"),
        (Some(C::Thread) | None, true) if user => {
            (series_max(|m| Some(m.thread.as_ref()?.max_ns)), " thread")
        }
        (Some(C::User), true) if user => (model.total.max_ns, " return-to-user"),
        _ => (model.total.max_ns, ""),
    }
}

/// Exit code 2 (and a line saying so) when a sample exceeded `--max-latency`.
fn verdict(p: &Plan, model: &RunModel) -> ExitCode {
    let (max, of) = judged_max(p, model);
    if let (Some(limit), Some(max)) = (p.max_latency_ns, max) {
        if max > limit {
            eprintln!(
                "latlab: maximum{of} latency {} exceeds --max-latency {}",
                Human(max),
                Human(limit)
            );
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
