//! `bench trace`'s runs: the flight recorder's overhead — `latlab run` without and with
//! `--trace-threshold`, alternated on one CPU with the same settings.

use crate::bench::child::{self, total, LatlabRun};

/// What `bench trace` runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub cpu: u32,
    /// Each run's length, as `--duration` takes it.
    pub duration: String,
    /// `--trace-threshold` of the traced runs, as it takes it.
    pub threshold: String,
    /// `--trace-instances` of the traced runs.
    pub instances: u32,
}

/// One run's figures, in ns.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub samples: u64,
    pub spikes: u64,
}

/// One pair: untraced and traced (the untraced run first in odd pairs).
pub struct Pair {
    pub off_first: bool,
    pub off: Figures,
    pub on: Figures,
}

/// Pair `i` (from 1).
pub fn pair(p: &Plan, i: u32) -> crate::Result<Pair> {
    let (off, on) = child::alternated(i, || run(p, false), || run(p, true))?;
    Ok(Pair {
        off_first: child::a_first(i),
        off,
        on,
    })
}

/// `latlab run` as the plan says, traced or not.
fn run(p: &Plan, traced: bool) -> crate::Result<Figures> {
    let mut l = LatlabRun::new("run", None)?.measuring(p.cpu, &p.duration);
    if traced {
        l = l
            .args(["--trace-threshold", &p.threshold, "--trace-required"])
            .args(["--trace-instances", &p.instances.to_string()]);
    }
    let v = l.run()?.summary()?;
    Ok(Figures {
        p50: total(&v, "median_ns"),
        p99: total(&v, "p99_ns"),
        p999: total(&v, "p999_ns"),
        max: total(&v, "max_ns"),
        samples: total(&v, "samples"),
        spikes: v["spikes"].as_array().map_or(0, |a| a.len() as u64),
    })
}
