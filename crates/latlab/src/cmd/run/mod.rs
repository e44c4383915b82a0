//! `latlab run`: the run lifecycle, as rtla's tools have it — parse → probe → apply (saving
//! every original value in the ledger) → start loads → warm up → measure → stop → collect →
//! write → restore. Restore runs on every exit path: normal end, Ctrl-C/SIGTERM/SIGHUP (a
//! flag the measurement threads see within one period), an error, and a panic (drop guards).

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use latlab_core::intervals::{IntervalRecorder, DEFAULT_INTERVAL_NS};
use latlab_core::record::SpikeRecord;
use latlab_core::units::{format_duration, Human};
use latlab_sys::measure::{self, Engine, SpikeEvent, TraceHook};
use latlab_sys::rt::{self};

use crate::cli::{Backend, RunArgs};
use crate::lifecycle::{Begin, Session};
use crate::rundir;

pub mod modes;
pub mod plan;
mod record;

pub use plan::Plan;
use record::{build_record, Measured};

/// Checkpoint period: a SIGKILLed run loses at most this much.
const CHECKPOINT: Duration = Duration::from_secs(10);
/// Collector period: spikes, loads and signals are looked at this often.
const TICK: Duration = Duration::from_millis(100);

/// The live display: a status line (elapsed, time left) and a line per CPU, redrawn every
/// second on stderr when stderr is a terminal, so stdout carries only the report (`--format
/// json` stays parseable) and a redirected stderr gets no escape sequences.
struct Live {
    enabled: bool,
    lines: usize,
    total_ns: u64,
}

/// The first drained sample over `--max-latency`, as `--on-threshold` fires for it.
fn first_over(
    events: &[SpikeEvent],
    max_latency_ns: Option<u64>,
) -> Option<crate::actions::Firing> {
    let max = max_latency_ns?;
    events
        .iter()
        .find(|e| e.latency_ns > max)
        .map(|e| crate::actions::Firing {
            cpu: e.cpu,
            latency_ns: e.latency_ns,
        })
}

/// `m:ss`, or `h:mm:ss` from an hour on (whole seconds).
fn clock(s: u64) -> String {
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

const NS: u64 = 1_000_000_000;

/// The status line: while measuring, elapsed and left; at the end, what was measured.
fn status_line(elapsed_ns: u64, total_ns: u64, done: bool) -> String {
    let elapsed_ns = elapsed_ns.min(total_ns);
    if done {
        format!(
            "measured {} of {}, done",
            clock(elapsed_ns / NS),
            clock(total_ns.div_ceil(NS))
        )
    } else {
        // Elapsed rounds down and the time left up, so "0:00 left" only when it is over.
        format!(
            "elapsed {} of {}, {} left",
            clock(elapsed_ns / NS),
            clock(total_ns.div_ceil(NS)),
            clock((total_ns - elapsed_ns).div_ceil(NS))
        )
    }
}

impl Live {
    fn show(&mut self, threads: &[Arc<measure::ThreadShared>], elapsed_ns: u64, done: bool) {
        if !self.enabled {
            return;
        }
        use std::fmt::Write;
        let mut s = String::new();
        if self.lines > 0 {
            let _ = write!(s, "\x1b[{}A", self.lines);
        }
        let _ = writeln!(s, "\x1b[2K{}", status_line(elapsed_ns, self.total_ns, done));
        for t in threads {
            let tot = t.hist.totals();
            let avg = if tot.count > 0 {
                (tot.sum / tot.count as u128) as u64
            } else {
                0
            };
            let _ = writeln!(
                s,
                "\x1b[2KCPU{:<3} cur {:>9}  min {:>9}  avg {:>9}  max {:>9}  samples {:>10}  missed {}",
                t.cpu,
                Human(t.last_ns.load(Ordering::Relaxed)).to_string(),
                Human(if tot.count > 0 { tot.min } else { 0 }).to_string(),
                Human(avg).to_string(),
                Human(tot.max).to_string(),
                tot.count,
                t.missed.load(Ordering::Relaxed)
            );
        }
        self.lines = threads.len() + 1;
        // Cosmetic: a terminal that went away does not end the run (the record is what counts).
        use std::io::Write as _;
        let mut o = std::io::stderr().lock();
        let _ = o.write_all(s.as_bytes()).and_then(|()| o.flush());
    }
}

/// Probe what this machine allows before anything is changed, and hold what the measurement
/// needs (memory locked, `/dev/cpu_dma_latency` at 0); warnings for what it cannot have.
fn probe(
    a: &RunArgs,
    p: &Plan,
    dma_us: i32,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Option<rt::DmaLatency>> {
    if a.backend != Backend::Real {
        return Ok(None);
    }
    if p.policy.is_rt() && !rt::can_use_rt() {
        bail!(
            "--backend real with --policy {} needs root (or CAP_SYS_NICE): run as root, or use --backend sim",
            p.policy.as_str()
        );
    }
    if let Ok(rt_runtime) = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us") {
        let rt_runtime = rt_runtime.trim();
        if rt_runtime != "-1" && p.policy.is_rt() {
            warnings.push(format!(
                "RT throttling is on (sched_rt_runtime_us={rt_runtime}): real-time tasks that use more than that share of a second are stopped for the rest of it; \
                 latlab's sleepers do not, but RT loads may (disable: echo -1 > /proc/sys/kernel/sched_rt_runtime_us)"
            ));
        }
    }
    // The recorder keeps each spike's pages until the run ends (and reads whole rings): a
    // heap that starts that large and is kept allocates nothing from the kernel meanwhile.
    // Growing it during the run populated fresh memory inside `brk` on a measured CPU: 6
    // calls in 15 s under hackbench, up to 46 ms each, and this VM stalls a vCPU for up to
    // milliseconds on the first touch of guest memory (docs/performance.md).
    if let Some(t) = &p.trace {
        let ring = (t.buffer_kb as usize * 1024).saturating_mul(p.cpus.len());
        let want = ring
            .saturating_mul(4)
            .saturating_add(64 << 20)
            .saturating_add(latlab_engine::recorder::defer_budget());
        let cap = rt::mem_available().map_or(want, |m| (m / 8) as usize);
        rt::keep_heap(want.min(cap));
    }
    if let Err(e) = rt::lock_memory() {
        if p.policy.is_rt() {
            bail!("mlockall failed ({e}): run as root, or use --backend sim");
        }
        warnings.push(format!(
            "mlockall failed ({e}): page faults may add latency"
        ));
    }
    Ok(match rt::DmaLatency::hold(dma_us) {
        Ok(d) => Some(d),
        Err(e) => {
            warnings.push(format!(
                "cannot hold /dev/cpu_dma_latency at {dma_us} ({e}): deep C-states may add exit latency"
            ));
            None
        }
    })
}

/// What another front end (`latlab cyclictest`) adds to a run: its own view of the samples
/// and its own output. Called on the collector thread only.
pub trait Hooks {
    /// Samples at or above this reach [`Hooks::on_events`] (0: every sample).
    fn event_threshold_ns(&self) -> u64 {
        u64::MAX
    }
    /// The value `/dev/cpu_dma_latency` is held at (µs).
    fn dma_latency_us(&self) -> i32 {
        0
    }
    /// Measuring has started at `t0_ns` (CLOCK_MONOTONIC); `dma` is the value held, if any.
    fn on_start(&mut self, _t0_ns: u64, _dma: Option<i32>) {}
    /// Samples drained from the threads (in CPU order, each CPU's in time order).
    fn on_events(&mut self, _events: &[SpikeEvent]) {}
    /// The run prints latlab's summary on stdout (otherwise the hooks print their own).
    fn summary(&self) -> bool {
        true
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
}

pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    run_with(a, None, &mut NoHooks).map(|o| o.code)
}

/// `latlab run`; with `profile`, `latlab profile` (the profile recorded over the same seconds
/// as the measurement: started after the recorder, stopped after the threads); `hooks`: what
/// `latlab cyclictest` prints along the way.
pub fn run_with(
    a: RunArgs,
    profile: Option<crate::cmd::profile::ProfileOpts>,
    hooks: &mut dyn Hooks,
) -> anyhow::Result<Outcome> {
    // Plan: every flag checked and the loads resolved (a missing tool or no scratch space is
    // an error now), before anything is changed.
    let mut p = plan::plan(&a)?;
    let mut mp = modes::plan_mode(&a, &mut p, &crate::args::online_cpus()?)?;
    // `profile --no-measure`: no measuring thread (its flags were refused by the parser).
    let no_measure = profile.as_ref().is_some_and(|o| o.no_measure);
    if no_measure {
        p.cpus.clear();
        mp.name = "none";
    }
    crate::actions::check(&a.actions, p.max_latency_ns, p.trace_threshold_ns)?;
    // latlab's own threads, all created from here on, stay off the CPUs it measures (and the
    // senders' CPUs) when there is one to spare; the measuring threads pin themselves.
    if matches!(a.backend, Backend::Real) {
        let mut busy = p.cpus.clone();
        if let latlab_sys::modes::Mode::Wakeup { sender_cpus, .. } = &mp.mode {
            busy.extend(sender_cpus);
        }
        p.housekeeping = latlab_sys::rt::confine_calling_thread(&busy).map_err(|e| {
            anyhow::anyhow!("cannot keep latlab's own threads off the measured CPUs: {e}")
        })?;
    }
    // Another latlab measuring any of these CPUs now: refused (or, with --force, a warning),
    // before anything is changed or written. Held until the run has ended.
    let mut claim_warning = None;
    let _claim = if matches!(a.backend, Backend::Real) && !no_measure {
        let mut busy = p.cpus.clone();
        if let latlab_sys::modes::Mode::Wakeup { sender_cpus, .. } = &mp.mode {
            busy.extend(sender_cpus);
        }
        let command = format!(
            "latlab {}",
            std::env::args().nth(1).unwrap_or_else(|| "run".into())
        );
        let overlap = if a.force {
            crate::claim::Overlap::Warn
        } else {
            crate::claim::Overlap::Refuse
        };
        let (c, w) = crate::claim::claim(&command, &busy, overlap)?;
        claim_warning = w;
        Some(c)
    } else {
        None
    };
    let loads = if a.loads.is_empty() {
        None
    } else {
        let opts = crate::load_session::options_from(&a.ext, p.duration_ns + p.warmup_ns)?;
        Some(crate::load_session::LoadSession::prepare(&a.loads, &opts)?)
    };
    // Before anything is changed or measured: a port in use is an error now.
    let metrics_listener = match &a.metrics_listen {
        Some(addr) => Some(crate::metrics::bind(addr, a.metrics_listen_any)?),
        None => None,
    };
    let mut probe_warnings: Vec<String> = claim_warning.into_iter().collect();
    let dma_us = hooks.dma_latency_us();
    // Nothing to protect without measuring threads: no mlockall, no /dev/cpu_dma_latency
    // hold (the profile sees the machine's own C-states).
    let _dma = if no_measure {
        None
    } else {
        probe(&a, &p, dma_us, &mut probe_warnings)?
    };

    let need = rundir::estimate_run_bytes(
        p.cpus.len(),
        p.duration_ns,
        p.layout.limit_ns(),
        p.trace_threshold_ns.map_or(0, |_| a.ext.trace_max_spikes),
    );
    let mut s = Session::begin(Begin {
        results: Some((&a.results, &p.label, need)),
        inventory: true,
        quiet: a.quiet,
    })?;
    for w in probe_warnings {
        s.warn(w);
    }
    s.record_db = Some(a.record_db.clone());
    let dir = s.dir().to_path_buf();

    // Loads start first; measurement starts after the warm-up, so the histogram holds the
    // loaded state only.
    if let Some(l) = loads {
        if let Err(e) = s.start_loads(l, &dir.join("loads"), p.warmup_ns) {
            // Nothing was measured, but the run directory says why (and holds the loads'
            // records and logs): a run.json marked incomplete, with the reason as a warning.
            s.warnings.push(format!(
                "the run ended during the load warm-up, before measuring: {e:#}"
            ));
            let record = build_record(&s, &a, &p, &mp, &Measured::NOTHING, false);
            return Err(s.abandon(record, e));
        }
    }

    // The flight recorder, started last so its buffer holds the measured period only.
    let mut tracer = match &p.trace {
        Some(opts) => {
            latlab_engine::recorder::start(opts, &p.cpus, s.ledger.clone(), &mut s.warnings)?
        }
        None => None,
    };
    let mut profiler = match &profile {
        Some(o) => Some(crate::cmd::profile::ProfileSession::start(
            o,
            s.ledger.clone(),
            &mut s.warnings,
        )?),
        None => None,
    };
    let trace: Option<TraceHook> = match (&tracer, p.trace_threshold_ns) {
        (Some(t), Some(threshold_ns)) => Some(TraceHook {
            marker_fd: t.marker_fd(),
            threshold_ns,
            armed: t.armed(),
            marks: t.marks(),
        }),
        _ => None,
    };

    let engine = Measuring::start(no_measure.then_some(p.duration_ns), || {
        Engine::start_mode(
            measure::Config {
                cpus: p.cpus.clone(),
                interval_ns: p.interval_ns,
                distance_ns: p.distance_ns,
                duration_ns: p.duration_ns,
                policy: p.policy,
                priority: p.priority,
                priority_step: p.priority_step,
                aligned: a.aligned,
                layout: p.layout,
                spike_threshold_ns: p
                    .trace_threshold_ns
                    .unwrap_or(u64::MAX)
                    .min(p.max_latency_ns.map_or(u64::MAX, |m| m + 1))
                    .min(hooks.event_threshold_ns()),
                trace,
                backend: match a.backend {
                    Backend::Real => measure::Backend::Real,
                    Backend::Sim => measure::Backend::Sim {
                        seed: a.sim_seed,
                        realtime: a.sim_realtime,
                    },
                },
            },
            mp.mode.clone(),
        )
    })?;
    // The record's start is the measurement's, after the warm-up.
    s.started_at = rundir::utc_now().0;
    let started = Instant::now();
    hooks.on_start(engine.t0_ns, _dma.as_ref().map(|_| dma_us));
    let threads = engine.threads.clone();
    if let Some(t) = &tracer {
        t.attach(&threads, &p.housekeeping);
    }
    let mut on_threshold = crate::actions::Runner::new(
        &a.actions.on_threshold,
        "--on-threshold",
        a.actions.action_timeout.0,
        &dir,
    );
    let mut stopped_by: Option<crate::actions::Firing> = None;
    let mut loads_read = std::time::Instant::now();
    // Its own thread, reading what the measuring threads publish (never one of them).
    let metrics = match metrics_listener {
        Some(l) => Some(crate::metrics::Server::start(l, threads.clone())?),
        None => None,
    };
    if let Some(m) = &metrics {
        // On stderr: stdout may be the JSON summary.
        eprintln!("latlab: metrics on http://{}/metrics", m.addr);
    }
    let mut seconds: Vec<Vec<Option<u64>>> = vec![Vec::new(); threads.len()];
    let mut live = Live {
        enabled: !a.quiet && std::io::stderr().is_terminal(),
        lines: 0,
        total_ns: p.duration_ns,
    };
    let inject_panic = latlab_sys::hooks::collector_panic_ms().map(Duration::from_millis);
    // Per-interval histograms (a minute each) for latency over time, closed by the wall
    // clock; a fast simulation has no time axis, so it has none.
    let every_ns =
        latlab_sys::hooks::interval_ms().map_or(DEFAULT_INTERVAL_NS, |ms| ms.max(1) * 1_000_000);
    let mut intervals = (!no_measure && (a.backend != Backend::Sim || a.sim_realtime))
        .then(|| IntervalRecorder::new(every_ns));
    let mut next_close = every_ns;
    let mut last_second = Instant::now();
    // A first checkpoint as soon as measurement starts, so a run killed within its first
    // CHECKPOINT still leaves a readable run.json (`complete: false`).
    let mut last_checkpoint: Option<Instant> = None;
    let mut events: Vec<SpikeEvent> = Vec::new();
    let mut spikes: Vec<SpikeRecord> = Vec::new();
    let mut interrupted = false;
    let mut load_error: Option<anyhow::Error> = None;

    // The collector loop (this thread is not real-time).
    while !engine.all_done() {
        if s.stopped() && !interrupted {
            interrupted = true;
            engine.stop();
        }
        let drained_at = Instant::now();
        for t in &threads {
            t.drain_spikes(&mut events);
        }
        // Actions fire before the recorder takes the spikes (copying a window takes a while,
        // and `stop` must not wait for it), except when a `trace` action must find its window
        // saved before the actions after it run.
        let trace_first = on_threshold.traces();
        if trace_first {
            trace_spikes(
                tracer.as_mut(),
                p.trace_threshold_ns,
                &mut events,
                &dir,
                &mut spikes,
            );
        }
        hooks.on_events(&events);
        if let Some(f) = first_over(&events, p.max_latency_ns).filter(|_| stopped_by.is_none()) {
            on_threshold.fire(f, &mut s.warnings);
            if let Some(f) = on_threshold.stop {
                stopped_by = Some(f);
                engine.stop();
            }
        }
        if !trace_first {
            trace_spikes(
                tracer.as_mut(),
                p.trace_threshold_ns,
                &mut events,
                &dir,
                &mut spikes,
            );
        }
        events.clear();
        on_threshold.poll(&mut s.warnings);
        if let (Some(f), None) = (on_threshold.stop, stopped_by) {
            stopped_by = Some(f);
            engine.stop();
        }
        if let Some(tr) = tracer.as_mut() {
            // A recorder stopped by a spike whose record was dropped (ring full) is recycled.
            tr.reap(drained_at);
        }
        if let Some(m) = &metrics {
            m.set_spikes(
                spikes.len() as u64,
                tracer.as_ref().map_or(0, |t| t.not_traced()),
            );
            // The loads' logs are read every 2 s, not every tick.
            if loads_read.elapsed() >= std::time::Duration::from_secs(2) {
                m.set_loads(s.live_loads());
                loads_read = std::time::Instant::now();
            }
        }
        if let Err(e) = s.poll_loads() {
            if load_error.is_none() {
                s.warnings.push(format!("the run was ended early: {e:#}"));
                engine.stop();
                load_error = Some(e);
            }
        }
        if last_second.elapsed() >= Duration::from_secs(1) {
            last_second = Instant::now();
            for (t, secs) in threads.iter().zip(seconds.iter_mut()) {
                t.drain_seconds(secs);
            }
            live.show(&threads, started.elapsed().as_nanos() as u64, false);
        }
        if let Some(rec) = intervals.as_mut() {
            if started.elapsed().as_nanos() as u64 >= next_close {
                rec.record(next_close, &cumulative_counts(&threads));
                next_close += every_ns;
            }
        }
        if last_checkpoint.is_none_or(|t| t.elapsed() >= CHECKPOINT) {
            last_checkpoint = Some(Instant::now());
            let m = Measured {
                threads: &threads,
                seconds: &seconds,
                results: None,
                measured_ns: started.elapsed().as_nanos() as u64,
                spikes: &spikes,
            };
            let mut rec = build_record(&s, &a, &p, &mp, &m, false);
            rec.intervals = intervals.as_ref().map(|r| r.histograms().clone());
            if let Err(e) = rundir::write_run(&dir, &rec, false) {
                warnln!("checkpoint failed: {e:#}");
            }
        }
        if let Some(after) = inject_panic {
            if started.elapsed() >= after {
                panic!("LATLAB_INJECT_PANIC_MS: injected collector panic");
            }
        }
        collector_sleep(tracer.as_mut());
    }
    let wall_ns = started.elapsed().as_nanos() as u64;
    let results = engine.join();
    // An ended-early run measured the periods its threads went through, each a sample or a
    // missed period: not the wall time from the start to the collector's next tick, which
    // also holds the threads' start and the tick's wait (an interrupted real run recorded
    // 466 periods of time for 306 samples and no missed period). Simulated time, too.
    let measured_ns = if a.backend == Backend::Sim && !a.sim_realtime
        || interrupted
        || stopped_by.is_some()
        || load_error.is_some()
    {
        if interrupted || stopped_by.is_some() || load_error.is_some() {
            threads
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let periods = t.hist.totals().count + t.missed.load(Ordering::Relaxed);
                    latlab_core::units::thread_interval(p.interval_ns, p.distance_ns, i)
                        .unwrap_or(p.interval_ns)
                        .saturating_mul(periods)
                })
                .max()
                .unwrap_or(0)
                .min(p.duration_ns)
        } else {
            p.duration_ns
        }
    } else {
        wall_ns.min(p.duration_ns)
    };
    if let Some(m) = metrics {
        m.stop();
    }
    if let Some(tr) = tracer.as_mut() {
        // The last marker may have stopped the armed instance after the last poll.
        tr.poll();
    }
    for t in &threads {
        t.drain_spikes(&mut events);
    }
    trace_spikes(
        tracer.as_mut(),
        p.trace_threshold_ns,
        &mut events,
        &dir,
        &mut spikes,
    );
    hooks.on_events(&events);
    // A crossing in the last tick fires too (a `stop` then has nothing left to end).
    if let Some(f) = first_over(&events, p.max_latency_ns).filter(|_| stopped_by.is_none()) {
        on_threshold.fire(f, &mut s.warnings);
    }
    events.clear();
    // The firing in progress ends before the record is written (its warnings go in it).
    on_threshold.wait(&mut s.warnings);
    s.warnings.extend(on_threshold.summary());
    if let Some(e) = &stopped_by {
        s.warnings.push(format!(
            "--on-threshold stop: the run was ended after {} of {}, by a sample of {} on CPU {}",
            format_duration(measured_ns / 1_000_000 * 1_000_000),
            format_duration(p.duration_ns),
            Human(e.latency_ns),
            e.cpu
        ));
    }
    for (t, secs) in threads.iter().zip(seconds.iter_mut()) {
        t.drain_seconds(secs);
        let dropped = t.dropped_spikes();
        if dropped > 0 {
            s.warnings.push(format!(
                "CPU {}: {dropped} spikes were not handed to the collector (queue full); they are in the histogram",
                t.cpu
            ));
        }
    }
    if interrupted && stopped_by.is_none() {
        s.warnings.push(format!(
            "the run was interrupted after {} of {}",
            format_duration(measured_ns / 1_000_000_000 * 1_000_000_000),
            format_duration(p.duration_ns)
        ));
    }
    live.show(&threads, measured_ns, true);
    let m = Measured {
        threads: &threads,
        seconds: &seconds,
        results: Some(&results),
        measured_ns,
        spikes: &spikes,
    };
    let mut record = build_record(&s, &a, &p, &mp, &m, true);
    if let Some(rec) = intervals.as_mut() {
        rec.record(measured_ns.max(1), &cumulative_counts(&threads));
        record.intervals = Some(rec.histograms().clone());
    }
    if let Some(tr) = tracer.take() {
        record.trace = Some(tr.finish());
    }
    if let Some(pr) = profiler.take() {
        record.profile = pr.finish(&dir, &mut record.warnings);
    }
    if let Some(e) = load_error {
        return Err(s.abandon(record, e));
    }
    let tids: Vec<i64> = threads
        .iter()
        .map(|t| results.iter().find(|r| r.cpu == t.cpu).map_or(0, |r| r.tid))
        .collect();
    let last_ns: Vec<u64> = threads
        .iter()
        .map(|t| t.last_ns.load(Ordering::Relaxed))
        .collect();
    let model = s.finish_with(record, hooks.summary().then_some(a.format))?;
    if !a.actions.on_end.is_empty() {
        // After the record is written: the actions may read the run directory.
        let (cpu, latency_ns) = model
            .cpus
            .iter()
            .filter_map(|c| Some((c.cpu, c.hist.max()?)))
            .max_by_key(|&(_, m)| m)
            .unwrap_or((0, 0));
        let mut end = crate::actions::Runner::new(
            &a.actions.on_end,
            "--on-end",
            a.actions.action_timeout.0,
            &dir,
        );
        let mut warnings = Vec::new();
        end.fire(crate::actions::Firing { cpu, latency_ns }, &mut warnings);
        end.wait(&mut warnings);
        for w in warnings {
            warnln!("{w}");
        }
    }
    let mut code = ExitCode::SUCCESS;
    if let (Some(limit), Some(max)) = (p.max_latency_ns, model.total.max_ns) {
        if max > limit {
            eprintln!(
                "latlab: maximum latency {} exceeds --max-latency {}",
                Human(max),
                Human(limit)
            );
            code = ExitCode::from(2);
        }
    }
    Ok(Outcome {
        code,
        model,
        tids,
        last_ns,
        stopped_by,
    })
}

/// The measuring threads, or none (`latlab profile --no-measure`: the run lasts its duration,
/// or until it is stopped, and measures nothing).
struct Measuring {
    engine: Option<Engine>,
    pub threads: Vec<Arc<measure::ThreadShared>>,
    pub t0_ns: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// Without threads: the end.
    until: Option<Instant>,
}

impl Measuring {
    /// `alone_ns`: no threads, `alone_ns` long; otherwise the engine `start` starts.
    fn start(
        alone_ns: Option<u64>,
        start: impl FnOnce() -> Result<Engine, measure::EngineError>,
    ) -> Result<Measuring, measure::EngineError> {
        Ok(match alone_ns {
            Some(ns) => Measuring {
                engine: None,
                threads: Vec::new(),
                t0_ns: rt::now_ns(),
                stop: Arc::default(),
                until: Some(Instant::now() + Duration::from_nanos(ns)),
            },
            None => {
                let e = start()?;
                Measuring {
                    threads: e.threads.clone(),
                    t0_ns: e.t0_ns,
                    stop: e.stop.clone(),
                    engine: Some(e),
                    until: None,
                }
            }
        })
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    fn all_done(&self) -> bool {
        match (&self.engine, self.until) {
            (Some(e), _) => e.all_done(),
            (None, Some(t)) => self.stop.load(Ordering::Acquire) || Instant::now() >= t,
            (None, None) => true,
        }
    }

    fn join(self) -> Vec<measure::ThreadResult> {
        self.engine.map(Engine::join).unwrap_or_default()
    }
}

/// The bucket counts of all measuring threads merged (the collector's, once per interval).
fn cumulative_counts(threads: &[Arc<measure::ThreadShared>]) -> Vec<u64> {
    let mut sum: Vec<u64> = Vec::new();
    for t in threads {
        let h = t.hist.snapshot();
        if sum.len() < h.counts().len() {
            sum.resize(h.counts().len(), 0);
        }
        for (s, c) in sum.iter_mut().zip(h.counts()) {
            *s += c;
        }
    }
    sum
}

/// Wait one collector tick; with a recorder, in short slices: each slice re-arms the recorder
/// (the standby instance takes over) as soon as a marker has stopped it, and the wait ends so
/// the stopped instance's spike is collected and its trace saved (spikes while the recorder is
/// disarmed would go untraced).
fn collector_sleep(tracer: Option<&mut latlab_engine::recorder::TraceSession>) {
    const SLICE: Duration = Duration::from_millis(1);
    // The recorder that never stops needs no re-arming: a plain tick.
    let Some(tr) = tracer.filter(|t| t.stops()) else {
        std::thread::sleep(TICK);
        return;
    };
    // At least one slice per call: the collector never spins, even if the spike that cleared
    // `armed` has not reached the spike ring yet.
    let t0 = Instant::now();
    loop {
        std::thread::sleep(SLICE);
        tr.poll();
        if t0.elapsed() >= TICK || tr.wants_collector() {
            break;
        }
    }
}

/// Hand the drained spikes at or above the trace threshold to the recorder (if tracing);
/// keep the ones it traced. The events stay (a front end's hooks and the actions see them).
fn trace_spikes(
    tracer: Option<&mut latlab_engine::recorder::TraceSession>,
    threshold_ns: Option<u64>,
    events: &mut [SpikeEvent],
    dir: &std::path::Path,
    spikes: &mut Vec<SpikeRecord>,
) {
    if let Some(tr) = tracer {
        // In the order the markers were written (the rings are drained CPU by CPU): each
        // marked spike claims the oldest stopped recorder instance.
        events.sort_by_key(|e| e.actual_ns);
        let threshold = threshold_ns.unwrap_or(u64::MAX);
        for e in events.iter().filter(|e| e.latency_ns >= threshold) {
            spikes.extend(tr.on_spike(e, dir));
        }
    }
}

#[cfg(test)]
mod live_tests {
    use super::status_line;

    #[test]
    fn status_line_shows_elapsed_and_time_left() {
        let s = 1_000_000_000;
        assert_eq!(
            status_line(12 * s, 60 * s, false),
            "elapsed 0:12 of 1:00, 0:48 left"
        );
        // Left rounds up: 0.01 s left is not "0:00 left".
        assert_eq!(
            status_line(3 * s - 10_000_000, 3 * s, false),
            "elapsed 0:02 of 0:03, 0:01 left"
        );
        assert_eq!(
            status_line(3_725 * s, 6 * 3600 * s, false),
            "elapsed 1:02:05 of 6:00:00, 4:57:55 left"
        );
        assert_eq!(
            status_line(70 * s, 60 * s, true),
            "measured 1:00 of 1:00, done"
        );
    }
}
