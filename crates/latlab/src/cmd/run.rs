//! `latlab run`: the run lifecycle, as rtla's tools have it — parse → probe → apply (saving
//! every original value in the ledger) → start loads → warm up → measure → stop → collect →
//! write → restore. Restore runs on every exit path: normal end, Ctrl-C/SIGTERM/SIGHUP (a
//! flag the measurement threads see within one period), an error, and a panic (drop guards).

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use latlab_core::cpulist::{format_cpu_list, parse_cpu_list};
use latlab_core::hist::Layout;
use latlab_core::model::RunModel;
use latlab_core::record::{
    CpuRecord, Machine, RunConfig, RunRecord, Source, SpikeRecord, ThreadInfo, SCHEMA_VERSION,
};
use latlab_core::stats::Stats;
use latlab_core::units::{format_duration, parse_duration, parse_latency, Human, Nanos};
use latlab_sys::ledger::Ledger;
use latlab_sys::measure::{self, Engine, SpikeEvent, TraceHook};
use latlab_sys::rt::{self, Policy};

use crate::cli::{Backend, Policy as CliPolicy, RunArgs, RunFormat};
use crate::rundir;

/// Checkpoint period: a SIGKILLed run loses at most this much.
const CHECKPOINT: Duration = Duration::from_secs(10);
/// Collector period: spikes, loads and signals are looked at this often.
const TICK: Duration = Duration::from_millis(100);

/// Everything `run` needs, validated.
pub struct Plan {
    pub duration_ns: Nanos,
    pub interval_ns: Nanos,
    pub distance_ns: Nanos,
    pub layout: Layout,
    pub cpus: Vec<u32>,
    pub policy: Policy,
    pub priority: u32,
    pub trace_threshold_ns: Option<Nanos>,
    pub max_latency_ns: Option<Nanos>,
    pub warmup_ns: Nanos,
    pub label: String,
}

fn flag<T, E: std::fmt::Display>(name: &str, r: Result<T, E>) -> anyhow::Result<T> {
    r.map_err(|e| anyhow::anyhow!("--{name}: {e}"))
}

/// Online CPUs from sysfs (`0-3,6`).
pub fn online_cpus() -> anyhow::Result<Vec<u32>> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .context("cannot read /sys/devices/system/cpu/online")?;
    Ok(parse_cpu_list(&s)?)
}

pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
}

/// The longest wake-up period of a measurement thread (`--interval`, `+ i·--distance`).
pub const MAX_INTERVAL_NS: Nanos = 3_600 * 1_000_000_000;

pub fn plan(a: &RunArgs) -> anyhow::Result<Plan> {
    let duration_ns = flag("duration", parse_duration(&a.duration))?;
    if duration_ns == 0 {
        bail!("--duration: must be more than 0 (e.g. 10s)");
    }
    let interval_ns = flag("interval", parse_latency(&a.interval))?;
    if interval_ns < 10_000 {
        bail!(
            "--interval {}: below the 10us minimum; use 10us or more (cyclictest's 50us is a common floor)",
            a.interval
        );
    }
    let distance_ns = flag("distance", parse_latency(&a.distance))?;
    if interval_ns > MAX_INTERVAL_NS {
        bail!(
            "--interval {}: above the 1h maximum; use a shorter interval",
            a.interval
        );
    }
    let limit = flag("hist-limit", parse_latency(&a.hist_limit))?;
    if limit < 100_000 || limit % 1_000 != 0 || limit > 10_000_000_000 {
        bail!(
            "--hist-limit {}: must be whole microseconds from 100us to 10s (the log-scaled tail covers everything above)",
            a.hist_limit
        );
    }
    let layout = flag("hist-limit", Layout::new(1_000, limit))?;
    let policy = match a.policy {
        CliPolicy::Fifo => Policy::Fifo,
        CliPolicy::Rr => Policy::Rr,
        CliPolicy::Other => Policy::Other,
    };
    if policy.is_rt() && !(1..=99).contains(&a.priority) {
        bail!(
            "--priority {}: must be 1..99 for --policy {}",
            a.priority,
            policy.as_str()
        );
    }
    let online = online_cpus()?;
    let cpus = if a.cpus == "all" {
        let allowed = rt::allowed_cpus().unwrap_or_else(|_| online.clone());
        online
            .iter()
            .copied()
            .filter(|c| allowed.contains(c))
            .collect()
    } else {
        let cpus = flag("cpus", parse_cpu_list(&a.cpus))?;
        if cpus.is_empty() {
            bail!("--cpus: the list is empty; give CPUs such as 0-1, or all");
        }
        for c in &cpus {
            if !online.contains(c) {
                bail!(
                    "--cpus {}: CPU {c} is not online (online: {}); choose online CPUs",
                    a.cpus,
                    format_cpu_list(&online)
                );
            }
        }
        cpus
    };
    if cpus.is_empty() {
        bail!("--cpus all: no CPU is available to this process");
    }
    // Thread i wakes every interval + i·distance (cyclictest -d): each must fit, and stay a
    // sane period (the schedule adds it to CLOCK_MONOTONIC times).
    let last = cpus.len() - 1;
    match latlab_core::units::thread_interval(interval_ns, distance_ns, last) {
        Some(t) if t <= MAX_INTERVAL_NS => {}
        _ => bail!(
            "--distance {}: the interval of thread {last} (--interval {} + {last} × --distance) is above the 1h maximum; use a smaller --distance",
            a.distance,
            a.interval
        ),
    }
    let trace_threshold_ns = a
        .trace_threshold
        .as_deref()
        .map(|t| flag("trace-threshold", parse_latency(t)))
        .transpose()?;
    let max_latency_ns = a
        .max_latency
        .as_deref()
        .map(|t| flag("max-latency", parse_latency(t)))
        .transpose()?;
    let warmup_ns = flag("warmup", parse_duration(&a.ext.warmup))?;
    let label = a.label.clone().unwrap_or_else(|| match a.backend {
        Backend::Sim => "sim".into(),
        Backend::Real => kernel_release().unwrap_or_else(|| "run".into()),
    });
    Ok(Plan {
        duration_ns,
        interval_ns,
        distance_ns,
        layout,
        cpus,
        policy,
        priority: if policy.is_rt() { a.priority } else { 0 },
        trace_threshold_ns,
        max_latency_ns,
        warmup_ns,
        label,
    })
}

/// Restores the machine when dropped: every ledger entry, newest first.
pub(crate) struct Restore {
    pub(crate) ledger: Arc<Mutex<Ledger>>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        for line in l.restore_all() {
            if line.starts_with("could not") {
                eprintln!("latlab: warning: {line}");
            }
        }
        if l.is_empty() {
            let _ = std::fs::remove_file(l.path());
        } else {
            eprintln!(
                "latlab: warning: what could not be undone stays in {}; run `latlab cleanup` to retry",
                l.path().display()
            );
        }
    }
}

pub(crate) fn open_ledger() -> anyhow::Result<Ledger> {
    match Ledger::open() {
        Ok(l) => Ok(l),
        // Not root: keep the ledger where this user can write.
        Err(_) => {
            // SAFETY: plain syscall.
            let uid = unsafe { libc::getuid() };
            let dir = std::env::temp_dir().join(format!("latlab-{uid}"));
            Ledger::open_in(&dir).with_context(|| {
                format!(
                    "cannot write latlab's ledger in /run/latlab or {}",
                    dir.display()
                )
            })
        }
    }
}

struct Live {
    enabled: bool,
    lines: usize,
}

impl Live {
    fn show(&mut self, threads: &[Arc<measure::ThreadShared>]) {
        if !self.enabled {
            return;
        }
        use std::fmt::Write;
        let mut s = String::new();
        if self.lines > 0 {
            let _ = write!(s, "\x1b[{}A", self.lines);
        }
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
        self.lines = threads.len();
        print!("{s}");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
    }
}

/// The record as it stands (checkpoint or final).
#[allow(clippy::too_many_arguments)]
fn build_record(
    a: &RunArgs,
    p: &Plan,
    mp: &crate::cmd::run_modes::ModePlan,
    engine_threads: &[Arc<measure::ThreadShared>],
    seconds: &[Vec<Option<u64>>],
    results: Option<&[measure::ThreadResult]>,
    started_at: &str,
    machine: &Machine,
    measured_ns: Nanos,
    spikes: &[SpikeRecord],
    warnings: &[String],
    complete: bool,
) -> RunRecord {
    let cpus = engine_threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let h = t.hist.snapshot();
            let res = results.and_then(|r| r.iter().find(|r| r.cpu == t.cpu));
            CpuRecord {
                cpu: t.cpu,
                stats: Stats {
                    missed_periods: t.missed.load(Ordering::Relaxed)
                        + t.mode.coalesced.load(Ordering::Relaxed),
                    ..Stats::default()
                },
                histogram: h.to_record(),
                per_second_max_ns: seconds[i].clone(),
                top_spikes: res.map(|r| r.top.clone()).unwrap_or_default(),
                thread: ThreadInfo {
                    tid: res.map(|r| r.tid),
                    policy: Some(p.policy.as_str().into()),
                    priority: Some(p.priority),
                    interval_ns: latlab_core::units::thread_interval(
                        p.interval_ns,
                        p.distance_ns,
                        i,
                    ),
                },
                mode: mp.cpu_mode(i, t, a.backend == Backend::Sim),
            }
        })
        .collect();
    let mut r = RunRecord {
        schema_version: SCHEMA_VERSION,
        label: p.label.clone(),
        source: Source::Latlab,
        complete,
        tool_version: Some(env!("CARGO_PKG_VERSION").into()),
        command_line: Some(
            std::env::args()
                .map(|a| {
                    if a.contains(char::is_whitespace) {
                        format!("'{a}'")
                    } else {
                        a
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
        ),
        started_at: Some(started_at.into()),
        ended_at: complete.then(|| rundir::utc_now().0),
        config: RunConfig {
            mode: mp.name.into(),
            backend: match a.backend {
                Backend::Real => "real".into(),
                Backend::Sim => "sim".into(),
            },
            interval_ns: Some(p.interval_ns),
            duration_ns: Some(p.duration_ns),
            cpus: p.cpus.clone(),
            priority: Some(p.priority),
            policy: Some(p.policy.as_str().into()),
            distance_ns: p.distance_ns,
            aligned: a.aligned,
            hist_limit_ns: Some(p.layout.limit_ns()),
            bucket_ns: Some(p.layout.bucket_ns),
            max_latency_ns: p.max_latency_ns,
            trace_threshold_ns: p.trace_threshold_ns,
            loads: a.loads.clone(),
            warmup_ns: if a.loads.is_empty() { 0 } else { p.warmup_ns },
            sim_seed: (a.backend == Backend::Sim).then_some(a.sim_seed),
            measured_ns: Some(measured_ns),
            mode_params: mp.params.clone(),
        },
        machine: machine.clone(),
        inventory: None,
        total: Stats::default(),
        cpus,
        spikes: spikes.to_vec(),
        trace: None,
        loads: vec![],
        activity: None,
        scenario: serde_json::Value::Null,
        warnings: warnings.to_vec(),
        notes: vec![],
    };
    r.refresh().expect("live histograms are consistent");
    r
}

pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let mut p = plan(&a)?;
    let mp = crate::cmd::run_modes::plan_mode(&a, &mut p, &online_cpus()?)?;
    // Loads are resolved before anything starts: a missing tool or no scratch space is an
    // error now, not after the machine was changed.
    let loads = if a.loads.is_empty() {
        None
    } else {
        let opts = crate::load_session::options_from(&a.ext, p.duration_ns + p.warmup_ns)?;
        Some(crate::load_session::LoadSession::prepare(&a.loads, &opts)?)
    };
    let mut warnings: Vec<String> = Vec::new();
    let quiet = a.quiet;
    let warn = |w: &mut Vec<String>, msg: String| {
        if !quiet {
            eprintln!("latlab: warning: {msg}");
        }
        w.push(msg);
    };

    // Probe: what this machine allows, before anything is changed.
    let _dma = if a.backend == Backend::Real {
        if p.policy.is_rt() && !rt::can_use_rt() {
            bail!(
                "--backend real with --policy {} needs root (or CAP_SYS_NICE): run as root, or use --backend sim",
                p.policy.as_str()
            );
        }
        if let Ok(rt_runtime) = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us") {
            let rt_runtime = rt_runtime.trim();
            if rt_runtime != "-1" && p.policy.is_rt() {
                warn(&mut warnings, format!(
                    "RT throttling is on (sched_rt_runtime_us={rt_runtime}): real-time tasks that use more than that share of a second are stopped for the rest of it; \
                     latlab's sleepers do not, but RT loads may (disable: echo -1 > /proc/sys/kernel/sched_rt_runtime_us)"
                ));
            }
        }
        if let Err(e) = rt::lock_memory() {
            if p.policy.is_rt() {
                bail!("mlockall failed ({e}): run as root, or use --backend sim");
            }
            warn(
                &mut warnings,
                format!("mlockall failed ({e}): page faults may add latency"),
            );
        }
        match rt::DmaLatency::hold(0) {
            Ok(d) => Some(d),
            Err(e) => {
                warn(&mut warnings, format!(
                    "cannot hold /dev/cpu_dma_latency at 0 ({e}): deep C-states may add exit latency"
                ));
                None
            }
        }
    } else {
        None
    };

    // The run directory, checked writable before measuring.
    let dir = rundir::create_run_dir(&a.results, &p.label)?;
    // The machine inventory (`latlab check`'s), recorded so `compare` can say what changed.
    // Steal time is not sampled here: it would delay the start by a second.
    let inventory = latlab_sys::inventory::collect_with(
        Path::new("/"),
        &latlab_sys::inventory::Options { steal_sample: None },
    );
    let machine = latlab_sys::inventory::machine(&inventory);
    let inventory = serde_json::to_value(&inventory).ok();

    // Signals end the run early; results are still written and everything restored.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }

    let ledger = Arc::new(Mutex::new(open_ledger()?));
    let _restore = Restore {
        ledger: ledger.clone(),
    };
    // Re-bound after `_restore`, so on a panic or early error the loads are stopped (their
    // ledger entries forgotten) *before* the ledger is restored and its file removed; in the
    // other order the stopping supervisor wrote the ledger file again, and it was left behind.
    let mut loads = loads;

    // Loads start first; measurement starts after the warm-up, so the histogram holds the
    // loaded state only.
    if let Some(l) = loads.as_mut() {
        // Orphans of the loads (children of a killed group leader) are re-parented to latlab,
        // which reaps them, instead of to a PID 1 that may never reap them.
        // SAFETY: plain prctl.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        let warm_up = (|| -> anyhow::Result<()> {
            l.start(ledger.clone(), &dir.join("loads"))?;
            let warm = Instant::now();
            while warm.elapsed() < Duration::from_nanos(p.warmup_ns)
                && !stop.load(Ordering::Relaxed)
            {
                l.poll()?;
                std::thread::sleep(TICK);
            }
            Ok(())
        })();
        if let Err(e) = warm_up {
            // Nothing was measured, but the run directory says why (and holds the loads'
            // records and logs): a run.json marked incomplete, with the reason as a warning.
            warnings.push(format!(
                "the run ended during the load warm-up, before measuring: {e:#}"
            ));
            let mut record = build_record(
                &a,
                &p,
                &mp,
                &[],
                &[],
                None,
                &rundir::utc_now().0,
                &machine,
                0,
                &[],
                &warnings,
                false,
            );
            record.inventory = inventory;
            if let Some(l) = loads.take() {
                let (recs, activity) = l.stop();
                reap_orphans();
                record.loads = recs;
                record.activity = Some(activity);
            }
            if let Err(w) = rundir::write_run(&dir, &record, false) {
                eprintln!("latlab: warning: {w:#}");
            }
            drop(_restore);
            return Err(e.context(format!("results so far: {}", dir.display())));
        }
        l.measurement_started();
    }

    // The flight recorder, started last so its buffer holds the measured period only.
    let mut tracer = match p.trace_threshold_ns {
        Some(threshold_ns) => crate::trace_session::TraceSession::start(
            &crate::trace_session::TraceOptions {
                threshold_ns,
                buffer_kb: parse_kib(&a.ext.trace_buffer)?,
                max_spikes: a.ext.trace_max_spikes,
                instances: a.ext.trace_instances,
                required: a.ext.trace_required,
            },
            &p.cpus,
            ledger.clone(),
            &mut warnings,
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
    let (started_at, _) = rundir::utc_now();
    let started = Instant::now();
    let threads = engine.threads.clone();
    let mut seconds: Vec<Vec<Option<u64>>> = vec![Vec::new(); threads.len()];
    let mut live = Live {
        enabled: !a.quiet && std::io::stdout().is_terminal(),
        lines: 0,
    };
    let inject_panic = std::env::var("LATLAB_INJECT_PANIC_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis);
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
        if stop.load(Ordering::Relaxed) && !interrupted {
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
        if let Some(l) = loads.as_mut() {
            if let Err(e) = l.poll() {
                if load_error.is_none() {
                    warnings.push(format!("the run was ended early: {e:#}"));
                    engine.stop.store(true, Ordering::Release);
                    load_error = Some(e);
                }
            }
        }
        if last_second.elapsed() >= Duration::from_secs(1) {
            last_second = Instant::now();
            for (t, s) in threads.iter().zip(seconds.iter_mut()) {
                t.drain_seconds(s);
            }
            live.show(&threads);
        }
        if last_checkpoint.is_none_or(|t| t.elapsed() >= CHECKPOINT) {
            last_checkpoint = Some(Instant::now());
            let rec = build_record(
                &a,
                &p,
                &mp,
                &threads,
                &seconds,
                None,
                &started_at,
                &machine,
                started.elapsed().as_nanos() as u64,
                &spikes,
                &warnings,
                false,
            );
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
    for (t, s) in threads.iter().zip(seconds.iter_mut()) {
        t.drain_seconds(s);
        let dropped = t.dropped_spikes();
        if dropped > 0 {
            warnings.push(format!(
                "CPU {}: {dropped} spikes were not handed to the collector (queue full); they are in the histogram",
                t.cpu
            ));
        }
    }
    if interrupted {
        warnings.push(format!(
            "the run was interrupted after {} of {}",
            format_duration(measured_ns / 1_000_000_000 * 1_000_000_000),
            format_duration(p.duration_ns)
        ));
    }
    live.show(&threads);
    let mut record = build_record(
        &a,
        &p,
        &mp,
        &threads,
        &seconds,
        Some(&results),
        &started_at,
        &machine,
        measured_ns,
        &spikes,
        &warnings,
        true,
    );
    record.inventory = inventory;
    if let Some(tr) = tracer.take() {
        record.trace = Some(tr.finish());
    }
    if let Some(l) = loads.take() {
        let (recs, activity) = l.stop();
        reap_orphans();
        record.loads = recs;
        record.activity = Some(activity);
    }
    rundir::write_run(&dir, &record, true)?;
    if let Some(e) = load_error {
        drop(_restore);
        return Err(e.context(format!("results so far: {}", dir.display())));
    }
    drop(_restore);

    let model = RunModel::new(record)?;
    let out = match a.format {
        RunFormat::Text => {
            let mut s = latlab_report::render(&model, latlab_report::Format::Text);
            s.extend_from_slice(format!("\nresults: {}\n", dir.display()).as_bytes());
            s
        }
        RunFormat::Json => latlab_report::render(&model, latlab_report::Format::Json),
    };
    rundir::emit(&out, None)?;
    if a.format == RunFormat::Json && !a.quiet {
        eprintln!("results: {}", dir.display());
    }
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

/// Reap every child left (orphaned load processes re-parented to latlab as subreaper).
fn reap_orphans() {
    loop {
        let mut status = 0;
        // SAFETY: plain syscall; WNOHANG never blocks.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r <= 0 {
            break;
        }
    }
}

/// `4MiB`, `512KiB`, `4096` (KiB) → KiB.
fn parse_kib(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("MiB").or_else(|| t.strip_suffix('M')) {
        (n, 1024)
    } else if let Some(n) = t.strip_suffix("KiB").or_else(|| t.strip_suffix('K')) {
        (n, 1)
    } else {
        (t, 1)
    };
    match num.trim().parse::<u64>() {
        Ok(v) if v > 0 => Ok(v * mult),
        _ => bail!("--trace-buffer {s}: expected a size such as 4MiB or 512KiB"),
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
