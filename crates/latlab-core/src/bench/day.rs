//! The synthetic inputs the report, database and import benchmarks time, the same on every
//! run (seeded [`SplitMix64`]): a 24-hour-equivalent run — a 10 ms histogram limit, 8 CPUs at
//! 1 kHz for a day (86.4 M samples and 86 400 per-second maxima each), 100 traced spikes with
//! causes and timelines, an exponential body with a power-law tail and a few samples in the
//! log tail above 10 ms — and a cyclictest `-v` file.

use crate::hist::{HistParts, Histogram, Layout};
use crate::intervals::IntervalHistograms;
use crate::record::*;
use crate::sim::SplitMix64;
use crate::stats::Stats;

pub const CPUS: u32 = 8;
pub const SECONDS: usize = 86_400;
pub const RATE_HZ: u64 = 1_000;
pub const SPIKES: usize = 100;

/// Uniform below `n` (below 1 when `n` is 0).
fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    rng.next_u64() % n.max(1)
}

/// One CPU's histogram for a day at 1 kHz: ~86.4 M samples, every sample placed at its
/// bucket's midpoint (so the exact sums are the sums of those values).
fn day_histogram(
    layout: Layout,
    rng: &mut SplitMix64,
) -> Result<Histogram, crate::hist::HistError> {
    let n = SECONDS as u64 * RATE_HZ;
    let mut counts = vec![0u64; layout.len()];
    let linear = layout.linear_buckets as usize;
    for (i, c) in counts.iter_mut().enumerate().take(linear) {
        let us = (layout.lower(i) / 1_000) as f64;
        if us < 3.0 {
            continue;
        }
        // Body: exponential above a 3 µs floor; tail: a power law (softirq bursts …).
        let body = n as f64 * 0.0945 * (-(us - 3.0) / 9.0).exp();
        let tail = n as f64 * 2.0 * us.powf(-3.2);
        *c = (body + tail) as u64;
        // Sparse single samples out to the limit, thinning with latency.
        if *c == 0 && us >= 200.0 && below(rng, us as u64 / 40) == 0 {
            *c = 1 + below(rng, 3);
        }
    }
    // A few samples in the log-scaled tail above the limit (12–40 ms).
    for _ in 0..4 {
        let v = 12_000_000 + below(rng, 28_000_000);
        counts[layout.index(v)] += 1;
    }
    let (mut sum, mut sumsq) = (0u128, 0u128);
    let (mut min, mut max) = (None, 0u64);
    for (i, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let mid = (layout.lower(i) + layout.upper(i)) / 2;
        min.get_or_insert(mid);
        max = mid;
        sum += c as u128 * mid as u128;
        sumsq += c as u128 * mid as u128 * mid as u128;
    }
    Histogram::from_parts(HistParts {
        layout,
        counts,
        min: min.unwrap_or(0),
        max,
        sum,
        sumsq,
        unknown_above: 0,
        exact_moments: true,
    })
}

/// One CPU's record of the day: its histogram, per-second maxima and top spikes.
fn day_cpu(cpu: u32, layout: Layout, rng: &mut SplitMix64) -> Result<CpuRecord, RecordError> {
    let h = day_histogram(layout, rng).map_err(|err| RecordError::Histogram { cpu, err })?;
    let per_second = (0..SECONDS)
        .map(|_| {
            let base = 40_000 + below(rng, 60_000);
            Some(if below(rng, 500) == 0 {
                base + below(rng, 9_000_000)
            } else {
                base
            })
        })
        .collect();
    Ok(CpuRecord {
        cpu,
        stats: Stats::default(),
        histogram: h.to_record(),
        per_second_max_ns: per_second,
        top_spikes: (0..10)
            .map(|k| SampleSpike {
                at_ns: k * 8_000_000_000_000,
                latency_ns: 5_000_000 + k * 100_000,
            })
            .collect(),
        thread: ThreadInfo::default(),
        mode: None,
    })
}

/// The traced spikes of the day, with causes and timelines.
fn day_spikes(rng: &mut SplitMix64) -> Vec<SpikeRecord> {
    let kinds = [
        CauseKind::Irq,
        CauseKind::Softirq,
        CauseKind::Task,
        CauseKind::PreemptOff,
        CauseKind::Hypervisor,
    ];
    (0..SPIKES)
        .map(|i| {
            let latency = 500_000 + below(rng, 9_000_000);
            let mut causes: Vec<Cause> = (0..4)
                .map(|k| Cause {
                    kind: kinds[(i + k) % kinds.len()],
                    name: format!("task-{}/{}", below(rng, 40), k),
                    pid: 1000 + below(rng, 30_000) as i64,
                    prio: 120,
                    ns: latency / (2 << k),
                    context: None,
                })
                .collect();
            causes.sort_by_key(|c| std::cmp::Reverse(c.ns));
            SpikeRecord {
                cpu: (i as u32) % CPUS,
                at_ns: (i as u64 + 1) * 860_000_000_000,
                latency_ns: latency,
                causes,
                trace_file: Some(format!("spikes/{:03}/trace.txt", i + 1)),
                timeline: (0..20)
                    .map(|k| format!("+{k:>4} µs  irq_handler_entry irq=11 name=virtio{k}"))
                    .collect(),
                timeline_events: vec![],
                lanes: None,
                steal: None,
                others: None,
                timerlat: None,
            }
        })
        .collect()
}

/// The 24-hour-equivalent run (see the module documentation), complete and refreshed.
pub fn day_record() -> Result<RunRecord, RecordError> {
    let layout = Layout::new(1_000, 10_000_000).expect("a valid layout");
    let mut rng = SplitMix64::new(24);
    let cpus = (0..CPUS)
        .map(|cpu| day_cpu(cpu, layout, &mut rng))
        .collect::<Result<Vec<_>, _>>()?;
    let spikes = day_spikes(&mut rng);
    let day = SECONDS as u64 * 1_000_000_000;
    let mut r = RunRecord::new(
        "bench-24h",
        Source::Latlab,
        RunConfig {
            mode: "timer".into(),
            backend: "sim".into(),
            interval_ns: Some(1_000_000),
            duration_ns: Some(day),
            cpus: (0..CPUS).collect(),
            priority: Some(95),
            policy: Some("fifo".into()),
            hist_limit_ns: Some(10_000_000),
            measured_ns: Some(day),
            ..RunConfig::default()
        },
        cpus,
    );
    r.complete = true;
    r.tool_version = Some(env!("CARGO_PKG_VERSION").into());
    r.command_line = Some("latlab run --duration 1d (synthetic, latlab bench report)".into());
    r.started_at = Some("2026-01-01T00:00:00Z".into());
    r.ended_at = Some("2026-01-02T00:00:00Z".into());
    r.machine = Machine {
        kernel_release: Some("6.1.0-bench".into()),
        ..Machine::default()
    };
    r.spikes = spikes;
    r.refresh()?;
    Ok(r)
}

/// A cyclictest `-v` file of `lines` samples from two threads, in cyclictest's layout
/// The day record with per-minute histograms (`bench tail`): each CPU's day split into 1 440 minutes
/// (every bucket's count spread evenly, the remainder in the first minutes), all CPUs merged.
pub fn day_record_by_minute() -> Result<RunRecord, RecordError> {
    let mut rec = day_record()?;
    let hs = rec.histograms()?;
    let minutes = 1_440u64;
    let mut intervals: Vec<Vec<[u64; 2]>> = vec![Vec::new(); minutes as usize];
    let mut total = vec![0u64; hs[0].counts().len()];
    for h in &hs {
        for (t, c) in total.iter_mut().zip(h.counts()) {
            *t += c;
        }
    }
    for (i, &c) in total.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let (q, r) = (c / minutes, c % minutes);
        for (m, iv) in intervals.iter_mut().enumerate() {
            let v = q + u64::from((m as u64) < r);
            if v > 0 {
                iv.push([i as u64, v]);
            }
        }
    }
    rec.intervals = Some(IntervalHistograms {
        interval_ns: 60_000_000_000,
        intervals,
    });
    Ok(rec)
}

/// (`%8d:%8d:%8d`, µs), after its usual header.
pub fn verbose_file(lines: usize) -> Vec<u8> {
    use std::fmt::Write;
    let mut rng = SplitMix64::new(7);
    let mut s = String::from(
        "Max CPUs = 2\nOnline CPUs = 2\n# /dev/cpu_dma_latency set to 0us\nThread 0 Interval: 1500\nThread 1 Interval: 2000\n",
    );
    for i in 0..lines {
        let th = i % 2;
        let lat = 20
            + below(&mut rng, 40)
            + if below(&mut rng, 1000) == 0 {
                below(&mut rng, 5000)
            } else {
                0
            };
        let _ = writeln!(s, "{th:8}:{:8}:{lat:8}", i / 2);
    }
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::{self, From};

    #[test]
    fn day_histogram_is_a_day_at_one_kilohertz() {
        let layout = Layout::new(1_000, 10_000_000).unwrap();
        let h = day_histogram(layout, &mut SplitMix64::new(1)).unwrap();
        let n = h.count() as f64;
        let day = (SECONDS as u64 * RATE_HZ) as f64;
        assert!((n / day - 1.0).abs() < 0.05, "{n} samples for {day}");
        // Samples beyond the limit exist (in the log tail), and the spread is wide.
        assert!(h.count() > h.count_below(layout.limit_ns()));
        assert!(h.buckets().count() > 300);
    }

    #[test]
    fn verbose_file_imports_every_line() {
        let v = verbose_file(1000);
        let r = import::import(&v, From::CyclictestVerbose, "t").unwrap();
        assert_eq!(r.total.samples, 1000);
        assert_eq!(r.cpus.len(), 2);
    }
}
