//! `latlab bench …`: benchmarks that print figures (never timed tests).
//!
//! `bench measure`: latlab and cyclictest alternately on the same CPU, priority and interval,
//! so the measuring thread's own cost shows as a ratio; then latlab's peak RSS for a short and a
//! six-times-longer run (memory must not grow with duration).

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context};
use latlab_core::hist::{Histogram, Layout, Quantile};
use latlab_core::units::format_duration;

use crate::cli::{BenchArgs, BenchCommand};

/// One tool's figures for one run, in ns.
#[derive(Debug, Clone, Copy)]
struct Figures {
    min: u64,
    mean: f64,
    p99: u64,
    max: u64,
    samples: u64,
}

/// Run a command to completion; its stdout and peak RSS (KiB) from wait4's rusage.
fn run_measured(cmd: &mut Command) -> anyhow::Result<(Vec<u8>, i64)> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out)?;
    let mut status = 0;
    // SAFETY: rusage is plain data written by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child, not yet reaped.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    if r < 0 {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let st = std::process::ExitStatus::from_raw(status);
    if !st.success() && st.code() != Some(2) {
        bail!("{:?} failed: {st}", cmd.get_program());
    }
    Ok((out, ru.ru_maxrss))
}

fn latlab_run(cpu: u32, duration: &str) -> anyhow::Result<(Figures, i64)> {
    let tmp = crate::rundir::private_temp_dir("latlab-bench-")?;
    let results = tmp.path().to_path_buf();
    let exe = std::env::current_exe()?;
    let (out, rss) = run_measured(
        Command::new(exe)
            .args([
                "run",
                "--quiet",
                "--format",
                "json",
                "--priority",
                "95",
                "--interval",
                "1ms",
            ])
            .args([
                "--cpus",
                &cpu.to_string(),
                "--duration",
                duration,
                "--results",
            ])
            .arg(&results),
    )?;
    let _ = std::fs::remove_dir_all(&results);
    let v: serde_json::Value = serde_json::from_slice(&out).context("latlab's JSON output")?;
    let t = &v["total"];
    let g = |k: &str| t[k].as_u64().unwrap_or(0);
    let samples = g("samples");
    Ok((
        Figures {
            min: g("min_ns"),
            mean: g("mean_ns") as f64,
            p99: g("p99_ns"),
            max: g("max_ns"),
            samples,
        },
        rss,
    ))
}

/// Parse cyclictest `-h` output (one thread) into figures. Latencies are whole µs there
/// (cyclictest truncates), so its mean is taken from bucket midpoints.
fn parse_cyclictest(text: &str) -> anyhow::Result<Figures> {
    let layout = Layout::new(1_000, 10_000_000)?;
    let mut counts = vec![0u64; layout.len()];
    let (mut min, mut max, mut overflow) = (None, None, 0u64);
    let mut sum = 0.0f64;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("# Min Latencies:") {
            min = v
                .split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok());
        } else if let Some(v) = line.strip_prefix("# Max Latencies:") {
            max = v
                .split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok());
        } else if let Some(v) = line.strip_prefix("# Histogram Overflows:") {
            overflow = v
                .split_whitespace()
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or(0);
        } else if !line.starts_with('#') {
            let mut it = line.split_whitespace();
            if let (Some(i), Some(c)) = (it.next(), it.next()) {
                if let (Ok(i), Ok(c)) = (i.parse::<usize>(), c.parse::<u64>()) {
                    if i < 10_000 {
                        counts[i] += c;
                        sum += c as f64 * (i as f64 + 0.5) * 1000.0;
                    }
                }
            }
        }
    }
    let (Some(min), Some(max)) = (min, max) else {
        bail!("cyclictest printed no Min/Max Latencies lines");
    };
    let h = Histogram::from_parts(
        layout,
        counts,
        min * 1000,
        max * 1000 + 999,
        0,
        0,
        overflow,
        false,
    )?;
    let samples = h.count();
    Ok(Figures {
        min: min * 1000,
        mean: if samples > overflow {
            sum / (samples - overflow) as f64
        } else {
            0.0
        },
        p99: h.quantile(Quantile::P99).unwrap_or(u64::MAX),
        max: max * 1000,
        samples,
    })
}

fn cyclictest_run(cpu: u32, duration_s: u64) -> anyhow::Result<Figures> {
    let (out, _) = run_measured(Command::new("cyclictest").args([
        "-m",
        "-p",
        "95",
        "-i",
        "1000",
        "-a",
        &cpu.to_string(),
        "-t",
        "1",
        "-q",
        "-h",
        "10000",
        "-D",
        &format!("{duration_s}s"),
    ]))
    .context("cyclictest (apt-get install rt-tests)")?;
    parse_cyclictest(&String::from_utf8_lossy(&out))
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1000.0)
}

pub fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        BenchCommand::Wakeup {
            cpu,
            duration,
            pairs,
        } => crate::cmd::bench_wakeup::bench_wakeup(cpu, duration.0, pairs),
        BenchCommand::Measure {
            cpu,
            duration,
            pairs,
        } => {
            let secs = (duration.0 / 1_000_000_000).max(1);
            let dur = format_duration(secs * 1_000_000_000);
            outln!(
                "latlab vs cyclictest on CPU {cpu}: FIFO 95, 1 ms interval, {dur} each, alternated"
            )?;
            outln!(
                "{:<5} {:<10} {:>8} {:>9} {:>9} {:>9} {:>9}",
                "pair",
                "tool",
                "samples",
                "min µs",
                "mean µs",
                "p99 µs",
                "max µs"
            )?;
            let (mut rm, mut rp) = (Vec::new(), Vec::new());
            for i in 1..=pairs {
                let (l, _) = latlab_run(cpu, &dur)?;
                let c = cyclictest_run(cpu, secs)?;
                for (name, f) in [("latlab", l), ("cyclictest", c)] {
                    outln!(
                        "{i:<5} {name:<10} {:>8} {:>9} {:>9} {:>9} {:>9}",
                        f.samples,
                        us(f.min as f64),
                        us(f.mean),
                        us(f.p99 as f64),
                        us(f.max as f64)
                    )?;
                }
                let (m, p) = (l.mean / c.mean, l.p99 as f64 / c.p99 as f64);
                outln!(
                    "{i:<5} {:<10} mean ratio {m:.3}, p99 ratio {p:.3} (goal ≤ 1.05)",
                    "ratio"
                )?;
                rm.push(m);
                rp.push(p);
            }
            let med = |v: &mut Vec<f64>| {
                v.sort_by(|a, b| a.total_cmp(b));
                v[v.len() / 2]
            };
            outln!(
                "median ratios latlab/cyclictest: mean {:.3}, p99 {:.3}",
                med(&mut rm),
                med(&mut rp)
            )?;
            let (_, rss_short) = latlab_run(cpu, &dur)?;
            let long = format_duration(6 * secs * 1_000_000_000);
            let (_, rss_long) = latlab_run(cpu, &long)?;
            outln!("latlab peak RSS: {rss_short} KiB for {dur}, {rss_long} KiB for {long}")?;
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Loads {
            profiles,
            duration,
            cpus,
            format,
            results,
            load_dir,
        } => super::bench_loads::bench_loads(super::bench_loads::Opts {
            profiles,
            duration,
            cpus,
            format,
            results,
            load_dir,
        }),
        BenchCommand::Trace {
            cpu,
            duration,
            pairs,
            threshold,
        } => super::bench_trace::trace_overhead(cpu, duration.0, pairs, threshold.0),
        BenchCommand::Analyze { trace, size, keep } => {
            super::bench_trace::analyze_bench(trace, size.0, keep)
        }
        BenchCommand::Report { reps } => super::bench_report::bench_report(reps),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cyclictest_histogram_output() {
        let text = "# /dev/cpu_dma_latency set to 0us\n# Histogram\n000000 000000\n000001 000003\n000002 000001\n# Total: 000000005\n# Min Latencies: 00001\n# Avg Latencies: 00001\n# Max Latencies: 12000\n# Histogram Overflows: 00001\n";
        let f = parse_cyclictest(text).unwrap();
        assert_eq!(f.samples, 5);
        assert_eq!(f.min, 1000);
        assert_eq!(f.max, 12_000_000);
        assert_eq!(f.p99, 12_000_999);
        assert!((f.mean - 1750.0).abs() < 1e-9);
        assert!(parse_cyclictest("garbage").is_err());
    }
}
