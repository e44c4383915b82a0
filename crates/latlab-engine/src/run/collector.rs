//! The collector: the run's own thread (never a measuring one, never real-time), which every
//! tick (100 ms) drains the spikes the threads published, fires the threshold actions, hands
//! spikes to the recorder, looks after the loads and the signals, keeps the per-second maxima
//! and the per-minute histograms, and writes a checkpoint every 10 s; then, once the threads
//! have ended, collects the rest.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_core::intervals::{IntervalRecorder, DEFAULT_INTERVAL_NS};
use latlab_core::record::{RunRecord, SpikeRecord};
use latlab_core::units::{format_duration, Human};
use latlab_sys::measure::{self, SpikeEvent};

use super::backend::Measurement;
use super::live::Live;
use super::plan::{ModePlan, Plan, SessionPlan};
use super::record::{build_record, Measured};
use super::steal::StealWatch;
use super::until::Watch;
use super::Hooks;
use crate::actions::{Firing, Runner};
use crate::recorder::TraceSession;
use crate::rundir;
use crate::session::Session;

/// Checkpoint period: a SIGKILLed run loses at most this much.
const CHECKPOINT: Duration = Duration::from_secs(10);
/// Collector period: spikes, loads and signals are looked at this often.
const TICK: Duration = Duration::from_millis(100);

/// What the run is, for the collector.
pub(super) struct Ctx<'a> {
    pub rp: &'a SessionPlan,
    pub p: &'a Plan,
    pub mp: &'a ModePlan,
    pub dir: &'a Path,
}

/// The collector's state over the run.
pub(super) struct Collector {
    pub m: Box<dyn Measurement>,
    pub threads: Vec<Arc<measure::ThreadShared>>,
    pub tracer: Option<TraceSession>,
    /// While tracing: the steal time around each traced spike.
    steal: Option<StealWatch>,
    pub on_threshold: Runner,
    pub stopped_by: Option<Firing>,
    pub metrics: Option<crate::metrics::Server>,
    pub seconds: Vec<Vec<Option<u64>>>,
    /// The noise mode's noise per second, per thread (empty for other modes).
    pub sums: Vec<Vec<u64>>,
    pub spikes: Vec<SpikeRecord>,
    pub interrupted: bool,
    pub load_error: Option<anyhow::Error>,
    pub intervals: Option<IntervalRecorder>,
    pub started: Instant,
    /// `--until`: the watch, and its record once the threads have ended.
    until: Option<Watch>,
    until_record: Option<latlab_core::until::UntilRecord>,
    pub(super) live: Live,
    events: Vec<SpikeEvent>,
    loads_read: Instant,
    last_second: Instant,
    last_checkpoint: Option<Instant>,
    every_ns: u64,
    next_close: u64,
    inject_panic: Option<Duration>,
    /// `--mode noise`: the kernel's interrupt and softirq counters when the threads started.
    pub noise_from: Option<latlab_sys::procstat::Snapshot>,
}

impl Collector {
    /// The collector of a measurement that has just started (`m`), with the recorder and its
    /// steal readings, the actions and the metrics server (its own thread, reading what the threads publish).
    pub fn new(
        cx: &Ctx,
        m: Box<dyn Measurement>,
        tracer: Option<TraceSession>,
        steal: Option<StealWatch>,
        metrics: Option<std::net::TcpListener>,
        intervals: bool,
    ) -> anyhow::Result<Collector> {
        let threads = m.threads().to_vec();
        if let Some(t) = &tracer {
            t.attach(&threads, &cx.p.housekeeping);
        }
        let metrics = match metrics {
            Some(l) => Some(crate::metrics::Server::start(l, threads.clone())?),
            None => None,
        };
        if let Some(m) = &metrics {
            // On stderr: stdout may be the JSON summary.
            eprintln!("latlab: metrics on http://{}/metrics", m.addr);
        }
        // Per-interval histograms (a minute each) for latency over time, closed by the wall
        // clock; a fast simulation has no time axis, so it has none.
        let every_ns = latlab_sys::hooks::interval_ms()
            .map_or(DEFAULT_INTERVAL_NS, |ms| ms.max(1) * 1_000_000);
        Ok(Collector {
            seconds: vec![Vec::new(); threads.len()],
            sums: vec![Vec::new(); threads.len()],
            on_threshold: Runner::new(
                &cx.rp.actions.on_threshold,
                "--on-threshold",
                cx.rp.actions.timeout_ns,
                cx.dir,
            ),
            live: Live {
                enabled: !cx.rp.quiet && std::io::stderr().is_terminal(),
                lines: 0,
                total_ns: cx.p.duration_ns,
                extra: String::new(),
            },
            steal,
            m,
            threads,
            tracer,
            stopped_by: None,
            metrics,
            spikes: Vec::new(),
            interrupted: false,
            load_error: None,
            intervals: intervals.then(|| IntervalRecorder::new(every_ns)),
            started: Instant::now(),
            until: cx
                .p
                .until
                .clone()
                .map(|u| Watch::new(u, cx.rp.backend.simulated_time(cx.rp.realtime))),
            until_record: None,
            events: Vec::new(),
            loads_read: Instant::now(),
            last_second: Instant::now(),
            // A first checkpoint as soon as measurement starts, so a run killed within its
            // first CHECKPOINT still leaves a readable run.json (`complete: false`).
            last_checkpoint: None,
            every_ns,
            next_close: every_ns,
            inject_panic: latlab_sys::hooks::collector_panic_ms().map(Duration::from_millis),
            noise_from: None,
        })
    }

    /// Tick until every thread has ended.
    pub fn collect(&mut self, s: &mut Session, cx: &Ctx, hooks: &mut dyn Hooks) {
        while !self.m.all_done() {
            self.tick(s, cx, hooks);
            self.sleep();
        }
    }

    /// One tick (see the module documentation).
    fn tick(&mut self, s: &mut Session, cx: &Ctx, hooks: &mut dyn Hooks) {
        if s.stopped() && !self.interrupted {
            self.interrupted = true;
            self.m.stop();
        }
        let drained_at = Instant::now();
        self.spikes_and_actions(s, cx, hooks);
        if hooks.ticks() {
            hooks.on_tick(&self.threads);
        }
        if let Some(tr) = self.tracer.as_mut() {
            // A recorder stopped by a spike whose record was dropped (ring full) is recycled.
            tr.reap(drained_at);
        }
        self.loads(s);
        if let Some(w) = self.until.as_mut() {
            if w.tick(
                &self.threads,
                &self.seconds,
                periods_ns(&self.threads, cx.p),
            ) {
                self.m.stop();
            }
        }
        if self.last_second.elapsed() >= Duration::from_secs(1) {
            self.last_second = Instant::now();
            if let Some(w) = self.steal.as_mut() {
                w.read();
            }
            self.drain_seconds();
            self.live.show(
                &self.threads,
                self.started.elapsed().as_nanos() as u64,
                false,
            );
        }
        if let Some(rec) = self.intervals.as_mut() {
            if self.started.elapsed().as_nanos() as u64 >= self.next_close {
                rec.record(self.next_close, &cumulative_counts(&self.threads));
                self.next_close += self.every_ns;
            }
        }
        if self
            .last_checkpoint
            .is_none_or(|t| t.elapsed() >= CHECKPOINT)
        {
            self.last_checkpoint = Some(Instant::now());
            let rec = self.record(s, cx, self.started.elapsed().as_nanos() as u64, None, false);
            if let Err(e) = rundir::write_run(cx.dir, &rec, false) {
                crate::warn(&format!("checkpoint failed: {e:#}"));
            }
        }
        if let Some(after) = self.inject_panic {
            if self.started.elapsed() >= after {
                panic!("LATLAB_INJECT_PANIC_MS: injected collector panic");
            }
        }
    }

    /// The tick's spikes: drained, shown to the hooks, over `--max-latency` fired as actions,
    /// handed to the recorder.
    fn spikes_and_actions(&mut self, s: &mut Session, cx: &Ctx, hooks: &mut dyn Hooks) {
        for t in &self.threads {
            t.drain_spikes(&mut self.events);
        }
        // Actions fire before the recorder takes the spikes (copying a window takes a while,
        // and `stop` must not wait for it), except when a `trace` action must find its window
        // saved before the actions after it run.
        let trace_first = self.on_threshold.traces();
        if trace_first {
            self.trace_spikes(cx);
        }
        hooks.on_events(&self.events);
        if let Some(f) =
            first_over(&self.events, cx.p.max_latency_ns).filter(|_| self.stopped_by.is_none())
        {
            self.on_threshold.fire(f, &mut s.warnings);
            if let Some(f) = self.on_threshold.stop {
                self.stopped_by = Some(f);
                self.m.stop();
            }
        }
        if !trace_first {
            self.trace_spikes(cx);
        }
        self.events.clear();
        self.on_threshold.poll(&mut s.warnings);
        if let (Some(f), None) = (self.on_threshold.stop, self.stopped_by) {
            self.stopped_by = Some(f);
            self.m.stop();
        }
    }

    /// The loads: a required one that keeps crashing ends the run; their figures for the
    /// metrics every 2 s.
    fn loads(&mut self, s: &mut Session) {
        let spikes = self
            .tracer
            .as_ref()
            .map(|t| (self.spikes.len() as u64, t.not_traced()));
        if let Some(m) = &self.metrics {
            m.set_spikes(self.spikes.len() as u64, spikes.map_or(0, |(_, n)| n));
        }
        // The loads' logs are read every 2 s, not every tick, for the metrics and the live
        // display.
        if (self.metrics.is_some() || self.live.enabled)
            && self.loads_read.elapsed() >= Duration::from_secs(2)
        {
            let loads = s.live_loads();
            self.live.extra = super::live::extra_line(spikes, &loads);
            if let Some(m) = &self.metrics {
                m.set_loads(loads);
            }
            self.loads_read = Instant::now();
        }
        if let Err(e) = s.poll_loads() {
            if self.load_error.is_none() {
                s.warnings.push(format!("the run was ended early: {e:#}"));
                self.m.stop();
                self.load_error = Some(e.into());
            }
        }
    }

    /// Hand the drained spikes at or above the trace threshold to the recorder (if tracing);
    /// keep the ones it traced. The events stay (a front end's hooks and the actions see
    /// them).
    fn trace_spikes(&mut self, cx: &Ctx) {
        let Some(tr) = self.tracer.as_mut() else {
            return;
        };
        // In the order the markers were written (the rings are drained CPU by CPU): each
        // marked spike claims the oldest stopped recorder instance.
        self.events.sort_by_key(|e| e.actual_ns);
        let threshold = cx.p.trace_threshold_ns.unwrap_or(u64::MAX);
        let before = self.spikes.len();
        for e in self.events.iter().filter(|e| e.latency_ns >= threshold) {
            let mut sp = tr.on_spike(e, cx.dir);
            // timerlat's figures of the same activation, as the back end read them.
            if let Some(s) = sp
                .as_mut()
                .filter(|_| e.irq_ns.is_some() || e.thread_ns.is_some())
            {
                s.timerlat = Some(latlab_core::record::SpikeTimerlat {
                    irq_ns: e.irq_ns,
                    thread_ns: e.thread_ns,
                });
            }
            self.spikes.extend(sp);
        }
        if let Some(w) = self.steal.as_mut() {
            w.attach(&mut self.spikes[before..]);
        }
    }

    /// Wait one collector tick; with a recorder whose instances take turns, in short slices:
    /// each slice re-arms the recorder (the standby instance takes over) as soon as a marker
    /// has stopped it, and the wait ends so the stopped instance's spike is collected and its
    /// trace saved (spikes while the recorder is disarmed would go untraced).
    fn sleep(&mut self) {
        const SLICE: Duration = Duration::from_millis(1);
        // The recorder that never stops needs no re-arming: a plain tick.
        let Some(tr) = self.tracer.as_mut().filter(|t| t.stops()) else {
            std::thread::sleep(TICK);
            return;
        };
        // At least one slice per call: the collector never spins, even if the spike that
        // cleared `armed` has not reached the spike ring yet.
        let t0 = Instant::now();
        loop {
            std::thread::sleep(SLICE);
            tr.poll();
            if t0.elapsed() >= TICK || tr.wants_collector() {
                break;
            }
        }
    }

    /// After the threads have ended: the last spikes, the last firing, the warnings of how
    /// the run ended. `measured_ns`: what the threads measured.
    pub fn finish(&mut self, s: &mut Session, cx: &Ctx, hooks: &mut dyn Hooks, measured_ns: u64) {
        if let Some(m) = self.metrics.take() {
            m.stop();
        }
        if let Some(tr) = self.tracer.as_mut() {
            // The last marker may have stopped the armed instance after the last poll.
            tr.poll();
        }
        for t in &self.threads {
            t.drain_spikes(&mut self.events);
        }
        self.trace_spikes(cx);
        hooks.on_events(&self.events);
        // A crossing in the last tick fires too (a `stop` then has nothing left to end).
        if let Some(f) =
            first_over(&self.events, cx.p.max_latency_ns).filter(|_| self.stopped_by.is_none())
        {
            self.on_threshold.fire(f, &mut s.warnings);
        }
        self.events.clear();
        // The firing in progress ends before the record is written (its warnings go in it).
        self.on_threshold.wait(&mut s.warnings);
        s.warnings.extend(self.on_threshold.summary());
        let duration_ns = cx.p.duration_ns;
        if let Some(e) = &self.stopped_by {
            s.warnings.push(format!(
                "--on-threshold stop: the run was ended after {} of {}, by a sample of {} on CPU {}",
                format_duration(measured_ns / 1_000_000 * 1_000_000),
                format_duration(duration_ns),
                Human(e.latency_ns),
                e.cpu
            ));
        }
        self.drain_seconds();
        for t in &self.threads {
            let dropped = t.dropped_spikes();
            if dropped > 0 {
                s.warnings.push(format!(
                    "CPU {}: {dropped} spikes were not handed to the collector (queue full); they are in the histogram",
                    t.cpu
                ));
            }
        }
        if let Some(w) = self.until.as_mut() {
            self.until_record = Some(w.finish(
                &self.threads,
                &self.seconds,
                measured_ns,
                duration_ns,
                &mut s.warnings,
            ));
        }
        if self.interrupted && self.stopped_by.is_none() {
            s.warnings.push(format!(
                "the run was interrupted after {} of {}",
                format_duration(measured_ns / 1_000_000_000 * 1_000_000_000),
                format_duration(duration_ns)
            ));
        }
        self.live.show(&self.threads, measured_ns, true);
    }

    /// Move the threads' completed seconds (maxima; the noise mode's sums too) into the
    /// record's series.
    fn drain_seconds(&mut self) {
        for (i, t) in self.threads.iter().enumerate() {
            t.drain_seconds(&mut self.seconds[i]);
            if t.mode.noise.is_some() {
                t.drain_second_sums(&mut self.sums[i]);
            }
        }
    }

    /// The run's record as it stands: a checkpoint while the threads run, the final record
    /// (`results`: what the threads handed back) after.
    pub fn record(
        &self,
        s: &Session,
        cx: &Ctx,
        measured_ns: u64,
        results: Option<&[measure::ThreadResult]>,
        complete: bool,
    ) -> RunRecord {
        let m = Measured {
            threads: &self.threads,
            seconds: &self.seconds,
            sums: &self.sums,
            results,
            measured_ns,
            spikes: &self.spikes,
        };
        let mut rec = build_record(s, cx.rp, cx.p, cx.mp, &m, complete);
        rec.intervals = self.intervals.as_ref().map(|r| r.histograms().clone());
        rec.until = match (&self.until_record, &self.until) {
            (Some(r), _) => Some(r.clone()),
            (None, Some(w)) => Some(w.interim()),
            (None, None) => None,
        };
        rec
    }

    /// `--until` ended the run (its precision reached before `--duration`).
    pub fn until_reached(&self) -> bool {
        self.until
            .as_ref()
            .is_some_and(|w| w.reached_at_ns.is_some())
    }

    /// The threads' tids (in CPU order) and last samples, once they have ended.
    pub fn tids_and_last(&self, results: &[measure::ThreadResult]) -> (Vec<i64>, Vec<u64>) {
        let tids = self
            .threads
            .iter()
            .map(|t| results.iter().find(|r| r.cpu == t.cpu).map_or(0, |r| r.tid))
            .collect();
        let last = self
            .threads
            .iter()
            .map(|t| t.last_ns.load(Ordering::Relaxed))
            .collect();
        (tids, last)
    }
}

/// The first drained sample over `--max-latency`, as `--on-threshold` fires for it.
fn first_over(events: &[SpikeEvent], max_latency_ns: Option<u64>) -> Option<Firing> {
    let max = max_latency_ns?;
    events.iter().find(|e| e.latency_ns > max).map(|e| Firing {
        cpu: e.cpu,
        latency_ns: e.latency_ns,
    })
}

/// The time the threads went through so far: the periods of the thread that went through the
/// most, each a sample or a missed period, capped at the duration (real or simulated time).
pub(super) fn periods_ns(threads: &[Arc<measure::ThreadShared>], p: &Plan) -> u64 {
    threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if let Some(n) = &t.mode.noise {
                // A spinning thread has no periods: the time its loop ran.
                return n.runtime_ns.load(Ordering::Relaxed);
            }
            let periods = t.hist.totals().count + t.missed.load(Ordering::Relaxed);
            latlab_core::units::thread_interval(p.interval_ns, p.distance_ns, i)
                .unwrap_or(p.interval_ns)
                .saturating_mul(periods)
        })
        .max()
        .unwrap_or(0)
        .min(p.duration_ns)
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

/// The final per-minute histogram, closed at `measured_ns`.
pub(super) fn close_intervals(c: &mut Collector, measured_ns: u64) {
    if let Some(rec) = c.intervals.as_mut() {
        rec.record(measured_ns.max(1), &cumulative_counts(&c.threads));
    }
}
