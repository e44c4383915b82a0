//! `latlab bench report`: how long `report` and `compare` take on a 24-hour-equivalent run,
//! and how fast `import` reads cyclictest `-v` output. Prints figures; asserts nothing.
//!
//! The run is built in memory (a 10 ms histogram limit, 8 CPUs at 1 kHz for a day — 86.4 M
//! samples and 86 400 per-second maxima each, 100 traced spikes with causes and timelines,
//! an exponential body with a power-law tail and a few samples in the log tail above 10 ms),
//! written as a run directory under a temp dir, then loaded and rendered the way the
//! commands do it (read `run.json` → model → render → write the file). Each figure is the
//! median of `--reps` repetitions. Goals: HTML < 1 s, import ≥ 100 MB/s.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use latlab_core::hist::{HistParts, Histogram, Layout};
use latlab_core::import::{self, From};
use latlab_core::record::*;
use latlab_core::stats::Stats;

use latlab_engine::rundir;

const CPUS: u32 = 8;
const SECONDS: usize = 86_400;
const RATE_HZ: u64 = 1_000;
const SPIKES: usize = 100;
const VERBOSE_LINES: usize = 100_000;

/// SplitMix64: a tiny deterministic generator, so every bench run builds the same record.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One CPU's histogram for a day at 1 kHz: ~86.4 M samples, every sample placed at its
/// bucket's midpoint (so the exact sums are the sums of those values).
fn day_histogram(layout: Layout, rng: &mut Mix) -> anyhow::Result<Histogram> {
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
        if *c == 0 && us >= 200.0 && rng.below(us as u64 / 40) == 0 {
            *c = 1 + rng.below(3);
        }
    }
    // A few samples in the log-scaled tail above the limit (12–40 ms).
    for _ in 0..4 {
        let v = 12_000_000 + rng.below(28_000_000);
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
    Ok(Histogram::from_parts(HistParts {
        layout,
        counts,
        min: min.unwrap_or(0),
        max,
        sum,
        sumsq,
        unknown_above: 0,
        exact_moments: true,
    })?)
}

pub(crate) fn day_record() -> anyhow::Result<RunRecord> {
    let layout = Layout::new(1_000, 10_000_000)?;
    let mut rng = Mix(24);
    let mut cpus = Vec::new();
    for cpu in 0..CPUS {
        let h = day_histogram(layout, &mut rng)?;
        let per_second = (0..SECONDS)
            .map(|_| {
                let base = 40_000 + rng.below(60_000);
                Some(if rng.below(500) == 0 {
                    base + rng.below(9_000_000)
                } else {
                    base
                })
            })
            .collect();
        cpus.push(CpuRecord {
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
        });
    }
    let kinds = [
        CauseKind::Irq,
        CauseKind::Softirq,
        CauseKind::Task,
        CauseKind::PreemptOff,
        CauseKind::Hypervisor,
    ];
    let spikes = (0..SPIKES)
        .map(|i| {
            let latency = 500_000 + rng.below(9_000_000);
            let mut causes: Vec<Cause> = (0..4)
                .map(|k| Cause {
                    kind: kinds[(i + k) % kinds.len()],
                    name: format!("task-{}/{}", rng.below(40), k),
                    pid: 1000 + rng.below(30_000) as i64,
                    prio: 120,
                    ns: latency / (2 << k),
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
            }
        })
        .collect();
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

/// Median wall time of `reps` calls of `f`, in seconds.
fn median_secs(reps: u32, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let mut v = Vec::new();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64());
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Ok(v[v.len() / 2])
}

/// A cyclictest `-v` file of `lines` samples from two threads, in cyclictest's layout
/// (`%8d:%8d:%8d`, µs), after its usual header.
fn verbose_file(lines: usize) -> Vec<u8> {
    use std::fmt::Write;
    let mut rng = Mix(7);
    let mut s = String::from(
        "Max CPUs = 2\nOnline CPUs = 2\n# /dev/cpu_dma_latency set to 0us\nThread 0 Interval: 1500\nThread 1 Interval: 2000\n",
    );
    for i in 0..lines {
        let th = i % 2;
        let lat = 20
            + rng.below(40)
            + if rng.below(1000) == 0 {
                rng.below(5000)
            } else {
                0
            };
        let _ = writeln!(s, "{th:8}:{:8}:{lat:8}", i / 2);
    }
    s.into_bytes()
}

fn report_once(run: &Path, fmt: latlab_report::Format, out: &Path) -> anyhow::Result<()> {
    let m = rundir::load_run(run)?;
    rundir::write_atomic(out, &latlab_report::render(&m, fmt))?;
    Ok(())
}

pub fn bench_report(reps: u32) -> anyhow::Result<ExitCode> {
    // Removed on every exit path (dropped).
    let tmp = rundir::private_temp_dir("latlab-bench-report-")?;
    let tmp_dir = tmp.path().to_path_buf();

    let t = Instant::now();
    let rec = day_record()?;
    let a = rundir::create_run_dir(&tmp_dir, "a")?;
    rundir::write_run(&a, &rec, true)?;
    let b = rundir::create_run_dir(&tmp_dir, "b")?;
    rundir::write_run(&b, &rec, true)?;
    let json_len = std::fs::metadata(a.join("run.json"))?.len();
    outln!(
        "24-hour-equivalent run: {CPUS} CPUs × {} samples, {SECONDS} per-second maxima each, {SPIKES} spikes, 10 ms limit, {} buckets used (all CPUs); built and written in {:.2} s",
        rec.cpus[0].histogram.count,
        rec.total.buckets_used,
        t.elapsed().as_secs_f64()
    )?;
    outln!(
        "run.json {:.2} MB; median of {} runs each (load run.json + render + write)",
        json_len as f64 / 1e6,
        reps.max(1)
    )?;

    use latlab_report::Format as F;
    for (name, f, ext) in [
        ("text", F::Text, "txt"),
        ("json", F::Json, "json"),
        ("markdown", F::Markdown, "md"),
        ("html", F::Html, "html"),
    ] {
        let out = tmp_dir.join(format!("report.{ext}"));
        let s = median_secs(reps, || report_once(&a, f, &out))?;
        let size = std::fs::metadata(&out)?.len();
        let goal = if name == "html" { "  (goal < 1 s)" } else { "" };
        outln!(
            "  report --format {name:<9} {s:7.3} s  {:8.1} KB out{goal}",
            size as f64 / 1e3
        )?;
    }
    let out = tmp_dir.join("compare.html");
    let s = median_secs(reps, || {
        let runs = vec![rundir::load_run(&a)?, rundir::load_run(&b)?];
        let bytes =
            latlab_report::compare::render(&runs, latlab_report::compare::CompareFormat::Html);
        rundir::write_atomic(&out, &bytes)?;
        Ok(())
    })?;
    outln!(
        "  compare (2 runs) --format html {s:7.3} s  {:8.1} KB out  (goal < 1 s)",
        std::fs::metadata(&out)?.len() as f64 / 1e3
    )?;

    let v = verbose_file(VERBOSE_LINES);
    let vpath = tmp_dir.join("cyclictest-v.txt");
    std::fs::write(&vpath, &v)?;
    let mb = v.len() as f64 / 1e6;
    let mut samples = 0;
    let s = median_secs(reps, || {
        let bytes = std::fs::read(&vpath)?;
        let r = import::import(&bytes, From::CyclictestVerbose, "bench")?;
        samples = r.total.samples;
        Ok(())
    })?;
    anyhow::ensure!(
        samples == VERBOSE_LINES as u64,
        "the import read {samples} samples of {VERBOSE_LINES}"
    );
    outln!(
        "import --from cyclictest-verbose: {VERBOSE_LINES} lines, {mb:.2} MB: read + parse {s:.4} s = {:.0} MB/s  (goal ≥ 100 MB/s)",
        mb / s
    )?;
    let s = median_secs(reps, || {
        let bytes = std::fs::read(&vpath)?;
        let mut r = import::import(&bytes, From::CyclictestVerbose, "bench")?;
        r.label = "v".into();
        let d = rundir::create_run_dir(&tmp_dir, "v")?;
        rundir::write_run(&d, &r, true)?;
        std::fs::remove_dir_all(&d)?;
        Ok(())
    })?;
    outln!(
        "  with the run directory written (run.json, histogram.txt, summary.txt): {s:.4} s = {:.0} MB/s",
        mb / s
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_histogram_is_a_day_at_one_kilohertz() {
        let layout = Layout::new(1_000, 10_000_000).unwrap();
        let h = day_histogram(layout, &mut Mix(1)).unwrap();
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
