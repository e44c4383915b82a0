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
use latlab_core::hist::Quantile;
use latlab_core::units::format_duration;

use crate::cli::{BenchArgs, BenchCommand};

/// One tool's figures for one run, in ns, from its 1 µs histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Figures {
    min: u64,
    mean: f64,
    p99: u64,
    max: u64,
    samples: u64,
    /// Samples beyond the histogram (10 ms): counted at 10 ms in the mean and p99.
    overflows: u64,
}

/// Buckets of the `-h` histograms (1 µs each, to 10 ms): cyclictest `-h 10000`, latlab's default.
const HIST_BUCKETS: usize = 10_000;

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
    let f = parse_us_histogram(&text).context("latlab's histogram.txt")?;
    Ok((f, rss))
}

/// Figures from a 1 µs histogram in cyclictest's `-h` format (one thread: `INDEX COUNT` lines,
/// `# Max Latencies:` and `# Histogram Overflows:`): min = lower bound of the lowest non-empty
/// bucket, mean = every sample at its bucket's midpoint (overflows at the limit), p99 = upper
/// bound of the bucket holding the ⌈0.99 n⌉-th sample (the limit if it is an overflow).
/// cyclictest truncates each latency to whole µs and latlab's buckets are [i µs, i+1 µs), so a
/// sample lands in the same bucket in both.
fn parse_us_histogram(text: &str) -> anyhow::Result<Figures> {
    let mut counts = vec![0u64; HIST_BUCKETS];
    let (mut max, mut overflow) = (None, None);
    let field = |v: &str| {
        v.split_whitespace()
            .next()
            .and_then(|x| x.parse::<u64>().ok())
    };
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("# Max Latencies:") {
            max = field(v);
        } else if let Some(v) = line.strip_prefix("# Histogram Overflows:") {
            overflow = field(v);
        } else if !line.starts_with('#') {
            let mut it = line.split_whitespace();
            if let (Some(i), Some(c)) = (it.next(), it.next()) {
                if let (Ok(i), Ok(c)) = (i.parse::<usize>(), c.parse::<u64>()) {
                    if i < HIST_BUCKETS {
                        counts[i] += c;
                    }
                }
            }
        }
    }
    let (Some(max), Some(overflows)) = (max, overflow) else {
        bail!("no '# Max Latencies' or '# Histogram Overflows' line: not a -h histogram");
    };
    Ok(figures(&counts, overflows, max * 1000))
}

/// The statistics of [`parse_us_histogram`] from 1 µs bucket counts.
fn figures(counts: &[u64], overflows: u64, max: u64) -> Figures {
    let limit = counts.len() as u64 * 1000;
    let samples = counts.iter().sum::<u64>() + overflows;
    let min = counts
        .iter()
        .position(|&c| c > 0)
        .map_or(limit, |i| i as u64 * 1000);
    let sum: f64 = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| c as f64 * (i as f64 + 0.5) * 1000.0)
        .sum::<f64>()
        + overflows as f64 * limit as f64;
    let rank = Quantile::P99.rank(samples);
    let mut cum = 0;
    let p99 = counts
        .iter()
        .enumerate()
        .find_map(|(i, &c)| {
            cum += c;
            (cum >= rank).then_some((i as u64 + 1) * 1000)
        })
        .unwrap_or(limit);
    Figures {
        min,
        mean: if samples > 0 {
            sum / samples as f64
        } else {
            0.0
        },
        p99,
        max,
        samples,
        overflows,
    }
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
    parse_us_histogram(&String::from_utf8_lossy(&out)).context("cyclictest's -h output")
}

/// Median (mean of the two middle values for an even count) and range of `v`.
pub(crate) fn median_spread(v: &[f64]) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    let med = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Some((med, s[0], s[n - 1]))
}

/// Per-pair ratios latlab / cyclictest of mean, p99 and min.
#[derive(Debug, Default)]
struct Ratios {
    mean: Vec<f64>,
    p99: Vec<f64>,
    min: Vec<f64>,
}

impl Ratios {
    fn push(&mut self, l: &Figures, c: &Figures) -> [f64; 3] {
        let r = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
        let v = [
            r(l.mean, c.mean),
            r(l.p99 as f64, c.p99 as f64),
            r(l.min as f64, c.min as f64),
        ];
        self.mean.push(v[0]);
        self.p99.push(v[1]);
        self.min.push(v[2]);
        v
    }

    /// Median and spread of mean, p99 and min ratios.
    fn summary(&self) -> Option<[(f64, f64, f64); 3]> {
        Some([
            median_spread(&self.mean)?,
            median_spread(&self.p99)?,
            median_spread(&self.min)?,
        ])
    }
}

/// Goals of the like-for-like comparison: median ratio of mean ≤ 1.00, p99 ≤ 1.00, min ≤ 1.05.
const GOALS: [(&str, f64); 3] = [("mean", 1.00), ("p99", 1.00), ("min", 1.05)];

/// "median 0.98 (0.91–1.07 over 8 pairs)" lines and whether each goal is met.
fn summary_lines(s: &[(f64, f64, f64); 3], pairs: usize) -> (String, Vec<(String, bool)>) {
    let line = GOALS
        .iter()
        .zip(s)
        .map(|((name, _), (m, lo, hi))| format!("{name} {m:.3} ({lo:.3}–{hi:.3})"))
        .collect::<Vec<_>>()
        .join(", ");
    let goals = GOALS
        .iter()
        .zip(s)
        .map(|((name, g), (m, _, _))| (format!("{name} ≤ {g:.2}"), *m <= *g))
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
    let (mut like, mut dflt) = (Ratios::default(), Ratios::default());
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
        let [m, q, n] = like.push(&l, &c);
        let [dm, dq, dn] = dflt.push(&l, &d);
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
        BenchCommand::Tail { reps } => super::bench_tail::bench_tail(reps),
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
    fn parses_cyclictest_histogram_output() {
        // 5 samples: 1, 1, 1, 2 µs and one overflow (12 ms).
        let text = "# /dev/cpu_dma_latency set to 0us\n# Histogram\n000000 000000\n000001 000003\n000002 000001\n# Total: 000000004\n# Min Latencies: 00001\n# Avg Latencies: 00001\n# Max Latencies: 12000\n# Histogram Overflows: 00001\n";
        let f = parse_us_histogram(text).unwrap();
        assert_eq!(f.samples, 5);
        assert_eq!(f.overflows, 1);
        assert_eq!(f.min, 1000);
        assert_eq!(f.max, 12_000_000);
        // ⌈0.99 × 5⌉ = 5th sample: the overflow, counted at the 10 ms limit.
        assert_eq!(f.p99, 10_000_000);
        // (3 × 1.5 + 2.5 + 10 000) µs / 5
        assert!((f.mean - 2_001_400.0).abs() < 1e-6, "{}", f.mean);
        assert!(parse_us_histogram("garbage").is_err());
    }

    #[test]
    fn latlab_and_cyclictest_histograms_read_alike() {
        // latlab's histogram.txt header, same buckets: the same figures.
        let body = "# Histogram\n000007 000002\n000008 000095\n000030 000003\n# Total: 000000100\n# Min Latencies: 00007\n# Avg Latencies: 00008\n# Max Latencies: 00030\n# Histogram Overflows: 00000\n";
        let c = parse_us_histogram(&format!("# /dev/cpu_dma_latency set to 0us\n{body}")).unwrap();
        let l =
            parse_us_histogram(&format!("# latlab 6.18 (cyclictest -h format)\n{body}")).unwrap();
        assert_eq!(c, l);
        assert_eq!(l.min, 7_000);
        // 99th of 100 samples is in the 30 µs bucket: its upper bound.
        assert_eq!(l.p99, 31_000);
        assert!((l.mean - (2.0 * 7.5 + 95.0 * 8.5 + 3.0 * 30.5) * 10.0).abs() < 1e-6);
    }

    #[test]
    fn p99_is_the_upper_bound_of_its_bucket() {
        // 98 samples at 10 µs, 2 at 20 µs: ⌈99⌉-th sample is at 20 µs.
        let mut counts = vec![0u64; HIST_BUCKETS];
        counts[10] = 98;
        counts[20] = 2;
        assert_eq!(figures(&counts, 0, 20_000).p99, 21_000);
        counts[10] = 99;
        counts[20] = 1;
        assert_eq!(figures(&counts, 0, 20_000).p99, 11_000);
    }

    #[test]
    fn median_and_spread_of_ratios() {
        assert_eq!(median_spread(&[]), None);
        assert_eq!(median_spread(&[1.2]), Some((1.2, 1.2, 1.2)));
        // Odd count: the middle one, whatever the order.
        assert_eq!(median_spread(&[1.3, 0.9, 1.1]), Some((1.1, 0.9, 1.3)));
        // Even count: the mean of the two middle ones (not the upper one, 1.10).
        let (m, lo, hi) = median_spread(&[1.10, 0.90, 2.33, 0.96]).unwrap();
        assert!((m - 1.03).abs() < 1e-12, "{m}");
        assert_eq!((lo, hi), (0.90, 2.33));
    }

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
        let mut r = Ratios::default();
        // latlab / cyclictest per pair: mean 0.9, 1.0, 1.2; p99 1.0, 0.5, 2.0; min 1.0, 1.1, 1.25.
        assert_eq!(
            r.push(&f(8_000, 9.0, 20_000), &f(8_000, 10.0, 20_000)),
            [0.9, 1.0, 1.0]
        );
        r.push(&f(11_000, 10.0, 10_000), &f(10_000, 10.0, 20_000));
        r.push(&f(10_000, 12.0, 40_000), &f(8_000, 10.0, 20_000));
        let s = r.summary().unwrap();
        assert_eq!(s[0], (1.0, 0.9, 1.2));
        assert_eq!(s[1], (1.0, 0.5, 2.0));
        assert!((s[2].0 - 1.1).abs() < 1e-12 && s[2].1 == 1.0 && s[2].2 == 1.25);
        let (line, goals) = summary_lines(&s, 3);
        assert!(line.starts_with("mean 1.000 (0.900–1.200), p99 1.000 (0.500–2.000), min 1.100 (1.000–1.250) over 3 pairs"), "{line}");
        // mean ≤ 1.00 and p99 ≤ 1.00 are met at exactly 1.00; min 1.10 > 1.05 is not.
        assert_eq!(
            goals.iter().map(|(_, ok)| *ok).collect::<Vec<_>>(),
            [true, true, false]
        );
        assert!(Ratios::default().summary().is_none());
    }
}
