//! `latlab bench measure`: latlab and cyclictest alternately on the same CPU, priority and
//! interval, so the measuring thread's own cost shows as a ratio; then latlab's peak RSS for a
//! short and a six-times-longer run (memory must not grow with duration). How the runs are
//! made like for like: `latlab_engine::bench::measure`.

use std::process::ExitCode;

use anyhow::{bail, Context};
use latlab_core::bench::us_hist::{Figures, BUCKETS};
use latlab_core::bench::{Ratios, Spread};
use latlab_core::units::format_duration;
use latlab_engine::bench::measure::{self, Plan};

/// Goals of the like-for-like comparison: median ratio of mean ≤ 1.00, p99 ≤ 1.00, min ≤ 1.05.
const GOALS: [(&str, f64); 3] = [("mean", 1.00), ("p99", 1.00), ("min", 1.05)];

/// "mean 0.980 (0.910–1.070), … over 8 pairs" and whether each goal is met.
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

/// The plan: the CPU may be used, and another one is there for both tools' main threads.
fn plan(cpu: u32, duration_ns: u64, pairs: u32) -> anyhow::Result<Plan> {
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
    Ok(Plan {
        cpu,
        main_cpu,
        secs: (duration_ns / 1_000_000_000).max(1),
    })
}

fn header(p: &Plan, pairs: u32) -> anyhow::Result<()> {
    let (cpu, main_cpu, dur) = (p.cpu, p.main_cpu, p.duration());
    outln!("latlab vs cyclictest on CPU {cpu}: FIFO 95, 1 ms interval, {dur} each, {pairs} pairs, alternated")?;
    outln!("  cyclictest -m -p 95 -i 1000 -a {cpu} -t 1 -q -h {BUCKETS} --mainaffinity={main_cpu}; latlab run --cpus {cpu} (its process on CPU {main_cpu})")?;
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
    )
}

pub fn bench(cpu: u32, duration_ns: u64, pairs: u32) -> anyhow::Result<ExitCode> {
    let p = plan(cpu, duration_ns, pairs)?;
    header(&p, pairs)?;
    let (mut like, mut dflt) = (Ratios::<3>::default(), Ratios::<3>::default());
    for i in 1..=pairs {
        let r = measure::pair(&p, i)?;
        let n = i.to_string();
        let lines = [("latlab", &r.latlab), ("cyclictest", &r.cyclictest)];
        let ordered = if r.latlab_first {
            [lines[0], lines[1]]
        } else {
            [lines[1], lines[0]]
        };
        for (name, f) in ordered {
            outln!("{}", row(&n, name, f))?;
        }
        outln!("{}", row(&n, "cyclictest-def", &r.default))?;
        let [m, q, l] = like.push(r.latlab.ratios(&r.cyclictest));
        let [dm, dq, dl] = dflt.push(r.latlab.ratios(&r.default));
        outln!("{n:<5} {:<14} latlab/cyclictest mean {m:.3}, p99 {q:.3}, min {l:.3}; latlab/default mean {dm:.3}, p99 {dq:.3}, min {dl:.3}", "ratio")?;
    }
    let (line, goals) = summary_lines(&like.summary().expect("pairs > 0"), pairs as usize);
    outln!("median ratios latlab/cyclictest (per-pair spread): {line}")?;
    let verdict = goals
        .iter()
        .map(|(g, ok)| format!("{g} {}", if *ok { "met" } else { "NOT met" }))
        .collect::<Vec<_>>()
        .join(", ");
    outln!("goal: {verdict}")?;
    let (dline, _) = summary_lines(&dflt.summary().expect("pairs > 0"), pairs as usize);
    outln!("against cyclictest's default invocation (main thread on CPU {cpu}): {dline}")?;
    outln!("  (its main thread wakes every 10 ms on the measured CPU: some wake-ups find the CPU awake, which lowers its minimum, not its mean)")?;
    let (dur, long) = (p.duration(), format_duration(6 * p.secs * 1_000_000_000));
    let (_, rss_short) = measure::latlab(&p, &dur)?;
    let (_, rss_long) = measure::latlab(&p, &long)?;
    outln!("latlab peak RSS: {rss_short} KiB for {dur}, {rss_long} KiB for {long}")?;
    Ok(ExitCode::SUCCESS)
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

    #[test]
    fn pairs_and_cpus_are_checked_first() {
        let e = plan(0, 1_000_000_000, 0).unwrap_err().to_string();
        assert!(e.starts_with("--pairs 0:"), "{e}");
        let e = plan(100_000, 1_000_000_000, 1).unwrap_err().to_string();
        assert!(
            e.starts_with("--cpu 100000: this process may not run on"),
            "{e}"
        );
        // Less than a second: one.
        let allowed = latlab_sys::rt::allowed_cpus().unwrap();
        if allowed.len() > 1 {
            let p = plan(allowed[0], 10, 1).unwrap();
            assert_eq!((p.secs, p.duration()), (1, "1s".to_string()));
            assert_ne!(p.main_cpu, p.cpu);
        }
    }
}
