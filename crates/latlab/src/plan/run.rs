//! `latlab run`'s plan: every flag typed (by clap, through `crate::cli::values`) and checked here,
//! before anything touches the machine or the disk.

use anyhow::bail;
use latlab_core::cpulist::format_cpu_list;
use latlab_core::trace::raw::TimerlatContext;

/// The smallest `--trace-threshold`: every wake-up takes longer (a clock read, the return from
/// clock_nanosleep), so a lower one traces every period.
const MIN_TRACE_THRESHOLD_NS: u64 = 1_000;

use latlab_core::hist::Layout;
use latlab_core::units::{format_duration, Nanos};
use latlab_engine::run::plan::Plan;
use latlab_sys::rt::{self, Policy};

use crate::cli::values::CpuSel;
use crate::cli::RunArgs;
use latlab_engine::recorder::TraceOptions;

fn flag<T, E: std::fmt::Display>(name: &str, r: Result<T, E>) -> anyhow::Result<T> {
    r.map_err(|e| anyhow::anyhow!("--{name}: {e}"))
}

/// The longest wake-up period of a measurement thread (`--interval`, `+ i·--distance`).
pub const MAX_INTERVAL_NS: Nanos = 3_600 * 1_000_000_000;

/// A time as given, in the largest unit that keeps it exact (`10us`, `18446744073709546615ns`).
fn exact(ns: Nanos) -> String {
    crate::cli::values::Latency(ns).to_string()
}

pub fn plan(a: &RunArgs) -> anyhow::Result<Plan> {
    let duration_ns = a.duration.0;
    if duration_ns == 0 {
        bail!("--duration: must be more than 0 (e.g. 10s)");
    }
    let interval_ns = a.interval.map_or(1_000_000, |i| i.0);
    if interval_ns < 10_000 {
        bail!(
            "--interval {}: below the 10us minimum; use 10us or more (cyclictest's 50us is a common floor)",
            exact(interval_ns)
        );
    }
    let distance_ns = a.distance.0;
    if interval_ns > MAX_INTERVAL_NS {
        bail!(
            "--interval {}: above the 1h maximum; use a shorter interval",
            exact(interval_ns)
        );
    }
    let limit = a.hist_limit.0;
    if limit < 100_000 || !limit.is_multiple_of(1_000) || limit > 10_000_000_000 {
        bail!(
            "--hist-limit {}: must be whole microseconds from 100us to 10s (the log-scaled tail covers everything above)",
            format_duration(limit)
        );
    }
    let layout = flag("hist-limit", Layout::new(1_000, limit))?;
    // A spinning thread (noise) runs beside ordinary tasks unless asked (rtla osnoise's and
    // oslat's default): a real-time one takes the CPU from everything below it.
    let noise = a.mode.mode == crate::cli::RunMode::Noise;
    let policy = Policy::from(a.policy.unwrap_or(if noise {
        crate::cli::values::Policy::Other
    } else {
        crate::cli::values::Policy::Fifo
    }));
    if policy.is_rt() && !(1..=99).contains(&a.priority) {
        bail!(
            "--priority {}: must be 1..99 for --policy {}",
            a.priority,
            policy.as_str()
        );
    }
    let online = rt::online_cpus()?;
    let cpus = match &a.cpus {
        CpuSel::All => {
            let cpus = rt::usable_cpus()?;
            if cpus.is_empty() {
                bail!("--cpus all: no CPU is available to this process");
            }
            cpus
        }
        CpuSel::List(list) => {
            for c in &list.0 {
                if !online.contains(c) {
                    bail!(
                        "--cpus {list}: CPU {c} is not online (online: {}); choose online CPUs",
                        format_cpu_list(&online)
                    );
                }
            }
            list.0.clone()
        }
    };
    // Thread i wakes every interval + i·distance (cyclictest -d): each must fit, and stay a
    // sane period (the schedule adds it to CLOCK_MONOTONIC times).
    let last = cpus.len() - 1;
    match latlab_core::units::thread_interval(interval_ns, distance_ns, last) {
        Some(t) if t <= MAX_INTERVAL_NS => {}
        _ => bail!(
            "--distance {}: the interval of thread {last} (--interval {} + {last} × --distance) is above the 1h maximum; use a smaller --distance",
            exact(distance_ns),
            exact(interval_ns)
        ),
    }
    // What `report` can read back: the record's dense histograms are bounded (a run.json is
    // untrusted input), so a run that would exceed the bound is refused before it starts.
    let buckets = (layout.len() as u64).saturating_mul(cpus.len() as u64);
    if buckets > latlab_core::record::MAX_BUCKETS {
        bail!(
            "--hist-limit {}: {} CPUs × {} buckets of 1 µs exceed the {} buckets a run record may hold; use a smaller --hist-limit (the log-scaled tail covers everything above) or fewer --cpus",
            exact(limit),
            cpus.len(),
            layout.len(),
            latlab_core::record::MAX_BUCKETS
        );
    }
    let priority_step = u32::from(a.ct.priospread && policy.is_rt());
    if priority_step > 0 && (a.priority as usize) <= last {
        bail!(
            "--priospread: {} threads from priority {} would go below 1; use a higher --priority",
            cpus.len(),
            a.priority
        );
    }
    let trace_threshold_ns = a.trace_threshold.map(|t| t.0);
    if let Some(t) = trace_threshold_ns.filter(|t| *t < MIN_TRACE_THRESHOLD_NS) {
        bail!(
            "--trace-threshold {}: below 1 µs every wake-up is a spike (no wake-up is quicker than a clock read and the return from clock_nanosleep), so the recorder would stop at every period and its own work would become the latency; give the latency worth a trace, e.g. --trace-threshold 100us",
            latlab_core::units::Human(t)
        );
    }
    let max_latency_ns = a.max_latency.map(|t| t.0);
    if a.max_latency_of.is_some() && a.backend != "timerlat" {
        bail!(
            "--max-latency-of names one of timerlat's latencies: give it with --backend timerlat"
        );
    }
    let max_latency_of = a.max_latency_of.map(|c| match c {
        crate::cli::LatencyOf::Irq => TimerlatContext::Irq,
        crate::cli::LatencyOf::Thread => TimerlatContext::Thread,
        crate::cli::LatencyOf::User => TimerlatContext::User,
    });
    let buffer = a.ext.trace_buffer.0;
    if buffer == 0 || !buffer.is_multiple_of(1024) || buffer > (1 << 30) {
        bail!("--trace-buffer {buffer}: give whole KiB up to 1GiB per CPU, such as 4MiB or 512KiB");
    }
    let trace = trace_threshold_ns.map(|threshold_ns| TraceOptions {
        threshold_ns,
        buffer_kb: buffer / 1024,
        max_spikes: a.ext.trace_max_spikes,
        instances: a.ext.trace_instances,
        timer_irq: a.ext.trace_events == crate::cli::TraceEvents::Full,
        required: a.ext.trace_required,
        text_files: a.ext.trace_text,
        // A `trace` action must find the spike's files saved before the actions after it.
        defer_files: !a
            .actions
            .on_threshold
            .contains(&latlab_engine::actions::Action::Trace),
        // timerlat's samples are read, and its markers written, on a housekeeping CPU.
        // So are the osnoise tracer's noises (their markers: gaps placed at their ends).
        markers_off_cpu: ["timerlat", "osnoise", "hwnoise"].contains(&a.backend.as_str()),
        noise,
    });
    let warmup_ns = a.ext.warmup.0;
    let label = a.label.clone().unwrap_or_else(|| match a.backend.as_str() {
        "sim" => "sim".into(),
        _ => latlab_sys::rt::kernel_release().unwrap_or_else(|| "run".into()),
    });
    Ok(Plan {
        duration_ns,
        interval_ns,
        interval_given: a.interval.is_some(),
        distance_ns,
        layout,
        cpus,
        policy,
        priority: if policy.is_rt() { a.priority } else { 0 },
        priority_step,
        trace_threshold_ns,
        max_latency_ns,
        max_latency_of,
        trace,
        warmup_ns,
        until: a.until.clone(),
        label,
        housekeeping: Vec::new(),
    })
}
