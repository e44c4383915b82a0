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
    if let Err(e) = rt::lock_memory() {
        if p.policy.is_rt() {
            bail!("mlockall failed ({e}): run as root, or use --backend sim");
        }
        warnings.push(format!(
            "mlockall failed ({e}): page faults may add latency"
        ));
    }
    Ok(match rt::DmaLatency::hold(0) {
        Ok(d) => Some(d),
        Err(e) => {
            warnings.push(format!(
                "cannot hold /dev/cpu_dma_latency at 0 ({e}): deep C-states may add exit latency"
            ));
            None
        }
    })
}

pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    // Plan: every flag checked and the loads resolved (a missing tool or no scratch space is
    // an error now), before anything is changed.
    let mut p = plan::plan(&a)?;
    let mp = modes::plan_mode(&a, &mut p, &crate::args::online_cpus()?)?;
    let loads = if a.loads.is_empty() {
        None
    } else {
        let opts = crate::load_session::options_from(&a.ext, p.duration_ns + p.warmup_ns)?;
        Some(crate::load_session::LoadSession::prepare(&a.loads, &opts)?)
    };
    let mut probe_warnings = Vec::new();
    let _dma = probe(&a, &p, &mut probe_warnings)?;

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
        Some(opts) => crate::trace_session::TraceSession::start(
            opts,
            &p.cpus,
            s.ledger.clone(),
            &mut s.warnings,
        )?,
        None => None,
    };
    let trace: Option<TraceHook> = match (&tracer, p.trace_threshold_ns) {
        (Some(t), Some(threshold_ns)) => Some(TraceHook {
            marker_fd: t.marker_fd(),
            threshold_ns,
            armed: t.armed(),
        }),
        _ => None,
    };

    let engine = Engine::start_mode(
        measure::Config {
            cpus: p.cpus.clone(),
            interval_ns: p.interval_ns,
            distance_ns: p.distance_ns,
            duration_ns: p.duration_ns,
            policy: p.policy,
            priority: p.priority,
            aligned: a.aligned,
            layout: p.layout,
            spike_threshold_ns: p
                .trace_threshold_ns
                .unwrap_or(u64::MAX)
                .min(p.max_latency_ns.map_or(u64::MAX, |m| m + 1)),
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
    )?;
    // The record's start is the measurement's, after the warm-up.
    s.started_at = rundir::utc_now().0;
    let started = Instant::now();
    let threads = engine.threads.clone();
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
    let mut intervals =
        (a.backend != Backend::Sim || a.sim_realtime).then(|| IntervalRecorder::new(every_ns));
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
            engine.stop.store(true, Ordering::Release);
        }
        let drained_at = Instant::now();
        for t in &threads {
            t.drain_spikes(&mut events);
        }
        trace_spikes(tracer.as_mut(), &mut events, &dir, &mut spikes);
        if let Some(tr) = tracer.as_mut() {
            // A recorder stopped by a spike whose record was dropped (ring full) is recycled.
            tr.reap(drained_at);
        }
        if let Err(e) = s.poll_loads() {
            if load_error.is_none() {
                s.warnings.push(format!("the run was ended early: {e:#}"));
                engine.stop.store(true, Ordering::Release);
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
                eprintln!("latlab: warning: checkpoint failed: {e:#}");
            }
        }
        if let Some(after) = inject_panic {
            if started.elapsed() >= after {
                panic!("LATLAB_INJECT_PANIC_MS: injected collector panic");
            }
        }
        collector_sleep(tracer.as_mut());
    }
    let measured_ns = if a.backend == Backend::Sim && !a.sim_realtime {
        p.duration_ns
    } else {
        (started.elapsed().as_nanos() as u64).min(p.duration_ns)
    };
    let results = engine.join();
    if let Some(tr) = tracer.as_mut() {
        // The last marker may have stopped the armed instance after the last poll.
        tr.poll();
    }
    for t in &threads {
        t.drain_spikes(&mut events);
    }
    trace_spikes(tracer.as_mut(), &mut events, &dir, &mut spikes);
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
    if interrupted {
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
    if let Some(e) = load_error {
        return Err(s.abandon(record, e));
    }
    let model = s.finish(record, a.format)?;
    if let (Some(limit), Some(max)) = (p.max_latency_ns, model.total.max_ns) {
        if max > limit {
            eprintln!(
                "latlab: maximum latency {} exceeds --max-latency {}",
                Human(max),
                Human(limit)
            );
            return Ok(ExitCode::from(2));
        }
    }
    Ok(ExitCode::SUCCESS)
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
fn collector_sleep(tracer: Option<&mut crate::trace_session::TraceSession>) {
    const SLICE: Duration = Duration::from_millis(1);
    let Some(tr) = tracer else {
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

/// Hand the drained spikes to the recorder (if tracing); keep the ones it traced.
fn trace_spikes(
    tracer: Option<&mut crate::trace_session::TraceSession>,
    events: &mut Vec<SpikeEvent>,
    dir: &std::path::Path,
    spikes: &mut Vec<SpikeRecord>,
) {
    if let Some(tr) = tracer {
        // In the order the markers were written (the rings are drained CPU by CPU): each
        // marked spike claims the oldest stopped recorder instance.
        events.sort_by_key(|e| e.actual_ns);
        for e in events.iter() {
            spikes.extend(tr.on_spike(
                e.cpu,
                e.intended_ns,
                e.actual_ns,
                e.latency_ns,
                e.marker_written,
                dir,
            ));
        }
    }
    events.clear();
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
