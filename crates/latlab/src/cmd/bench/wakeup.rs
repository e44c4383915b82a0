//! `latlab bench wakeup`: latlab's thread → thread wake-up latency (`--mode wakeup`) against
//! rt-tests' tools on the same IPC (`latlab_engine::bench::wakeup`), alternated, one pair on
//! one CPU at the same priority and interval. Prints each run's min/avg/max and the ratios of
//! the means; never asserts a speed.

use std::process::ExitCode;

use anyhow::bail;
use latlab_core::bench::MinAvgMax;
use latlab_engine::bench::wakeup::{self, TOOLS};

pub fn bench(cpu: u32, duration_ns: u64, pairs: u32) -> anyhow::Result<ExitCode> {
    let secs = duration_ns / 1_000_000_000;
    if secs == 0 {
        bail!("--duration: at least 1s (ptsematest and pmqtest count whole seconds)");
    }
    let mut figs: Vec<Vec<MinAvgMax>> = vec![Vec::new(); TOOLS.len()];
    outln!("wake-up latency, one pair on CPU {cpu}, fifo 95, interval 1 ms, {secs}s per run, alternated")?;
    outln!(
        "{:<14} {:>4} {:>10} {:>10} {:>10}",
        "tool",
        "run",
        "min µs",
        "avg µs",
        "max µs"
    )?;
    for run in 1..=pairs {
        for (i, t) in TOOLS.iter().enumerate() {
            let f = wakeup::run(t, cpu, secs)?;
            outln!(
                "{t:<14} {run:>4} {:>10.2} {:>10.2} {:>10.2}",
                f.min / 1e3,
                f.avg / 1e3,
                f.max / 1e3
            )?;
            figs[i].push(f);
        }
    }
    let mean = |v: &[MinAvgMax], k: fn(&MinAvgMax) -> f64| {
        v.iter().map(k).sum::<f64>() / v.len().max(1) as f64
    };
    outln!("\nmeans over {pairs} runs")?;
    for (t, v) in TOOLS.iter().zip(&figs) {
        outln!(
            "{t:<14}      {:>10.2} {:>10.2} {:>10.2}",
            mean(v, |f| f.min) / 1e3,
            mean(v, |f| f.avg) / 1e3,
            mean(v, |f| f.max) / 1e3
        )?;
    }
    for (a, b) in [(0, 1), (2, 3)] {
        outln!(
            "{} / {}: min {:.2}×  avg {:.2}×  max {:.2}×",
            TOOLS[a],
            TOOLS[b],
            mean(&figs[a], |f| f.min) / mean(&figs[b], |f| f.min).max(1.0),
            mean(&figs[a], |f| f.avg) / mean(&figs[b], |f| f.avg).max(1.0),
            mean(&figs[a], |f| f.max) / mean(&figs[b], |f| f.max).max(1.0),
        )?;
    }
    outln!("(latlab's sender runs at priority 94, as ptsematest's receiver preempts its sender; rt-tests report whole µs)")?;
    Ok(ExitCode::SUCCESS)
}
