//! `latlab bench …`: benchmarks that print figures (never timed tests).
//!
//! `bench measure`: latlab and cyclictest alternately on the same CPU, priority and interval,
//! so the measuring thread's own cost shows as a ratio; then latlab's peak RSS for a short and a
//! six-times-longer run (memory must not grow with duration).
//!
//! Like for like: both tools' main threads run on another CPU than the measured one
//! (cyclictest `--mainaffinity`, latlab's process affinity), because a main thread that wakes on
//! the measured CPU hands the measuring thread "lucky" samples that find the CPU awake (lower
//! minimum, no better mean). cyclictest's default invocation (its main thread on the measured
//! CPU, waking every 10 ms) runs after each pair too, for reference. Both tools' figures come
//! from their 1 µs histograms (cyclictest `-h`, latlab's `histogram.txt`, the same format),
//! read by one function: min = the lowest non-empty bucket, mean = buckets at their
//! midpoints, p99 = the upper bound of the bucket holding the ⌈0.99 n⌉-th sample.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context};
use latlab_core::units::format_duration;

use crate::cli::{BenchArgs, BenchCommand};

use latlab_core::bench::us_hist::{self, Figures, BUCKETS as HIST_BUCKETS};
use latlab_core::bench::{Ratios, Spread};

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

/// Run latlab on `cpu` with its process (main thread, collector) on `main_cpu`; the measuring
/// thread pins itself to `cpu`.
fn latlab_run(cpu: u32, main_cpu: u32, duration: &str) -> anyhow::Result<(Figures, i64)> {
    let tmp = latlab_engine::rundir::private_temp_dir("latlab-bench-")?;
    let results = tmp.path().to_path_buf();
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "run",
        "--quiet",
        "--format",
        "json",
        "--priority",
        "95",
        "--interval",
        "1ms",
        "--hist-limit",
        "10ms",
    ])
    .args([
        "--cpus",
        &cpu.to_string(),
        "--duration",
        duration,
        "--results",
    ])
    .arg(&results);
    // SAFETY: between fork and exec only sched_setaffinity (async-signal-safe) runs, on
    // memory prepared before the fork.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: main_cpu is below CPU_SETSIZE (it came from sched_getaffinity's set).
    unsafe { libc::CPU_SET(main_cpu as usize, &mut set) };
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (_, rss) = run_measured(&mut cmd)?;
    let hist = std::fs::read_dir(&results)?
        .flatten()
        .map(|e| e.path().join("histogram.txt"))
        .find(|p| p.is_file())
        .context("latlab's run left no histogram.txt")?;
    let text = std::fs::read_to_string(&hist).with_context(|| format!("{}", hist.display()))?;
    let _ = std::fs::remove_dir_all(&results);
    let f = us_hist::parse(&text)
        .map_err(anyhow::Error::msg)
        .context("latlab's histogram.txt")?;
    Ok((f, rss))
}

/// cyclictest on `cpu`, its main thread on `main_cpu` (None: its default, the measured CPU).
fn cyclictest_run(cpu: u32, main_cpu: Option<u32>, duration_s: u64) -> anyhow::Result<Figures> {
    let mut cmd = Command::new("cyclictest");
    cmd.args([
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
        &HIST_BUCKETS.to_string(),
        "-D",
        &format!("{duration_s}s"),
    ]);
    if let Some(m) = main_cpu {
        cmd.arg(format!("--mainaffinity={m}"));
    }
    let (out, _) = run_measured(&mut cmd).context("cyclictest (apt-get install rt-tests)")?;
    us_hist::parse(&String::from_utf8_lossy(&out))
        .map_err(anyhow::Error::msg)
        .context("cyclictest's -h output")
}

/// Goals of the like-for-like comparison: median ratio of mean ≤ 1.00, p99 ≤ 1.00, min ≤ 1.05.
const GOALS: [(&str, f64); 3] = [("mean", 1.00), ("p99", 1.00), ("min", 1.05)];

/// "median 0.98 (0.91–1.07 over 8 pairs)" lines and whether each goal is met.
fn summary_lines(s: &[Spread; 3], pairs: usize) -> (String, Vec<(String, bool)>) {
    let line = GOALS
        .iter()
        .zip(s)
        .map(|((name, _), s)| format!("{name} {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    let goals = GOALS
        .iter()
        .zip(s)
        .map(|((name, g), s)| (format!("{name} ≤ {g:.2}"), s.median <= *g))
        .collect();
    (format!("{line} over {pairs} pairs"), goals)
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1000.0)
}

fn row(pair: &str, name: &str, f: &Figures) -> String {
    format!(
        "{pair:<5} {name:<14} {:>8} {:>8} {:>8} {:>8} {:>8} {:>5}",
        f.samples,
        us(f.min as f64),
        us(f.mean),
        us(f.p99 as f64),
        us(f.max as f64),
        f.overflows
    )
}

fn bench_measure(cpu: u32, duration_ns: u64, pairs: u32) -> anyhow::Result<ExitCode> {
    if pairs == 0 {
        bail!("--pairs 0: at least one pair is needed (8 or more for a median worth reading)");
    }
    let allowed = latlab_sys::rt::allowed_cpus().context("sched_getaffinity")?;
    if !allowed.contains(&cpu) {
        bail!("--cpu {cpu}: this process may not run on CPU {cpu} (allowed: {allowed:?}); pick one of those");
    }
    let Some(main_cpu) = allowed.iter().copied().find(|&c| c != cpu) else {
        bail!("bench measure needs a second CPU for both tools' main threads (only CPU {cpu} is allowed)");
    };
    let secs = (duration_ns / 1_000_000_000).max(1);
    let dur = format_duration(secs * 1_000_000_000);
    outln!("latlab vs cyclictest on CPU {cpu}: FIFO 95, 1 ms interval, {dur} each, {pairs} pairs, alternated")?;
    outln!("  cyclictest -m -p 95 -i 1000 -a {cpu} -t 1 -q -h {HIST_BUCKETS} --mainaffinity={main_cpu}; latlab run --cpus {cpu} (its process on CPU {main_cpu})")?;
    outln!("  both main threads off the measured CPU (like for like); cyclictest's default (main thread on CPU {cpu}) runs after each pair for reference")?;
    outln!("  figures from each tool's 1 µs histogram: min = lowest bucket, mean = bucket midpoints, p99 = upper bound of its bucket")?;
    outln!(
        "{:<5} {:<14} {:>8} {:>8} {:>8} {:>8} {:>8} {:>5}",
        "pair",
        "tool",
        "samples",
        "min µs",
        "mean µs",
        "p99 µs",
        "max µs",
        "ovfl"
    )?;
    let (mut like, mut dflt) = (Ratios::<3>::default(), Ratios::<3>::default());
    for i in 1..=pairs {
        // Which tool goes first alternates.
        let latlab_first = i % 2 == 1;
        let run_l = || latlab_run(cpu, main_cpu, &dur).map(|(f, _)| f);
        let run_c = || cyclictest_run(cpu, Some(main_cpu), secs);
        let (l, c) = if latlab_first {
            let l = run_l()?;
            (l, run_c()?)
        } else {
            let c = run_c()?;
            (run_l()?, c)
        };
        let d = cyclictest_run(cpu, None, secs)?;
        let p = i.to_string();
        let lines = [("latlab", &l), ("cyclictest", &c)];
        let ordered = if latlab_first {
            [lines[0], lines[1]]
        } else {
            [lines[1], lines[0]]
        };
        for (name, f) in ordered {
            outln!("{}", row(&p, name, f))?;
        }
        outln!("{}", row(&p, "cyclictest-def", &d))?;
        let [m, q, n] = like.push(l.ratios(&c));
        let [dm, dq, dn] = dflt.push(l.ratios(&d));
        outln!("{p:<5} {:<14} latlab/cyclictest mean {m:.3}, p99 {q:.3}, min {n:.3}; latlab/default mean {dm:.3}, p99 {dq:.3}, min {dn:.3}", "ratio")?;
    }
    let s = like.summary().expect("pairs > 0");
    let (line, goals) = summary_lines(&s, pairs as usize);
    outln!("median ratios latlab/cyclictest (per-pair spread): {line}")?;
    let verdict = goals
        .iter()
        .map(|(g, ok)| format!("{g} {}", if *ok { "met" } else { "NOT met" }))
        .collect::<Vec<_>>()
        .join(", ");
    outln!("goal: {verdict}")?;
    let d = dflt.summary().expect("pairs > 0");
    let (dline, _) = summary_lines(&d, pairs as usize);
    outln!("against cyclictest's default invocation (main thread on CPU {cpu}): {dline}")?;
    outln!("  (its main thread wakes every 10 ms on the measured CPU: some wake-ups find the CPU awake, which lowers its minimum, not its mean)")?;
    let (_, rss_short) = latlab_run(cpu, main_cpu, &dur)?;
    let long = format_duration(6 * secs * 1_000_000_000);
    let (_, rss_long) = latlab_run(cpu, main_cpu, &long)?;
    outln!("latlab peak RSS: {rss_short} KiB for {dur}, {rss_long} KiB for {long}")?;
    Ok(ExitCode::SUCCESS)
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
        } => bench_measure(cpu, duration.0, pairs),
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
            trace_instances,
        } => {
            super::bench_trace::trace_overhead(cpu, duration.0, pairs, threshold.0, trace_instances)
        }
        BenchCommand::Profile {
            cpu,
            duration,
            pairs,
            loads,
            format,
        } => super::bench_profile::bench_profile(super::bench_profile::Opts {
            cpu,
            duration_ns: duration.0,
            pairs,
            loads,
            format,
        }),
        BenchCommand::Analyze { trace, size, keep } => {
            super::bench_trace::analyze_bench(trace, size.0, keep)
        }
        BenchCommand::Report { reps } => super::bench_report::bench_report(reps),
        BenchCommand::Db {
            runs,
            reps,
            postgres,
        } => super::bench_db::bench_db(runs, reps, postgres),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_goals() {
        let f = |min, mean, p99| Figures {
            min,
            mean,
            p99,
            max: 0,
            samples: 1,
            overflows: 0,
        };
        let mut r = Ratios::<3>::default();
        // latlab / cyclictest per pair: mean 0.9, 1.0, 1.2; p99 1.0, 0.5, 2.0; min 1.0, 1.1, 1.25.
        assert_eq!(
            r.push(f(8_000, 9.0, 20_000).ratios(&f(8_000, 10.0, 20_000))),
            [0.9, 1.0, 1.0]
        );
        r.push(f(11_000, 10.0, 10_000).ratios(&f(10_000, 10.0, 20_000)));
        r.push(f(10_000, 12.0, 40_000).ratios(&f(8_000, 10.0, 20_000)));
        let s = r.summary().unwrap();
        assert_eq!((s[0].median, s[0].min, s[0].max), (1.0, 0.9, 1.2));
        assert_eq!((s[1].median, s[1].min, s[1].max), (1.0, 0.5, 2.0));
        assert!((s[2].median - 1.1).abs() < 1e-12 && s[2].min == 1.0 && s[2].max == 1.25);
        let (line, goals) = summary_lines(&s, 3);
        assert!(line.starts_with("mean 1.000 (0.900–1.200), p99 1.000 (0.500–2.000), min 1.100 (1.000–1.250) over 3 pairs"), "{line}");
        // mean ≤ 1.00 and p99 ≤ 1.00 are met at exactly 1.00; min 1.10 > 1.05 is not.
        assert_eq!(
            goals.iter().map(|(_, ok)| *ok).collect::<Vec<_>>(),
            [true, true, false]
        );
    }
}
