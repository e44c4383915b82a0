//! `latlab bench noise`: latlab's user-space noise mode against oslat on one CPU
//! (`latlab_engine::bench::noise`), alternated in pairs; prints each run's figures and the
//! medians of the per-pair ratios (latlab / oslat) with their spread; never asserts a speed.

use std::process::ExitCode;

use anyhow::bail;
use latlab_core::bench::Ratios;
use latlab_engine::bench::child::alternated;
use latlab_engine::bench::noise::{self, NoiseFigures};

fn row(pair: u32, tool: &str, f: &NoiseFigures) -> String {
    format!(
        "{pair:<5} {tool:<7} {:>12.1} {:>12.1} {:>10.1}",
        f.per_s,
        f.us_per_s,
        f.max_ns / 1e3
    )
}

pub fn bench(cpu: u32, duration_ns: u64, pairs: u32) -> anyhow::Result<ExitCode> {
    let secs = duration_ns / 1_000_000_000;
    if secs == 0 {
        bail!("--duration: at least 1s (oslat counts whole seconds)");
    }
    if pairs == 0 {
        bail!("--pairs 0: at least one pair is needed (6 or more for a median worth reading)");
    }
    outln!("noise on CPU {cpu}: latlab run --mode noise --noise-threshold 10us against oslat -b 1024, both SCHED_OTHER, {secs}s each, {pairs} pairs, alternated")?;
    outln!("  gaps of at least 10 µs in a thread spinning on the clock (oslat: its loops of more than 10 µs, each at its rounded-up µs)")?;
    outln!(
        "{:<5} {:<7} {:>12} {:>12} {:>10}",
        "pair",
        "tool",
        "gaps/s",
        "µs/s",
        "max µs"
    )?;
    let mut ratios: Ratios<3> = Ratios::default();
    for i in 1..=pairs {
        let (l, o) = alternated(i, || noise::latlab(cpu, secs), || noise::oslat(cpu, secs))?;
        outln!("{}", row(i, "latlab", &l))?;
        outln!("{}", row(i, "oslat", &o))?;
        let r = |a: f64, b: f64| a / b.max(1e-9);
        ratios.push([
            r(l.per_s, o.per_s),
            r(l.us_per_s, o.us_per_s),
            r(l.max_ns, o.max_ns),
        ]);
    }
    if let Some([n, t, m]) = ratios.summary() {
        outln!("\nlatlab / oslat, median (min–max) of the per-pair ratios over {pairs} pairs:")?;
        outln!("  gaps/s {n}; time/s {t}; max {m}")?;
    }
    Ok(ExitCode::SUCCESS)
}
