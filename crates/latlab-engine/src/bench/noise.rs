//! `bench noise`'s runs: latlab's user-space noise mode (`run --mode noise`) and rt-tests'
//! oslat on one CPU, both SCHED_OTHER (each tool's default), the same length, counting the
//! same thing: gaps of at least 10 µs in a thread spinning on the clock. oslat histograms
//! every loop in 1 µs rows rounded up (a 10.2 µs loop is its 11 µs row), so its loops of more
//! than 10 µs are the rows from 11 µs; latlab keeps each gap of at least `--noise-threshold
//! 10us`. Per run: such gaps per second, the time they took per second (oslat's at their
//! rounded-up value), the longest.

use std::process::Command;

use latlab_core::import::{self, From};
use latlab_sys::child::Options;

use crate::bench::child::{self, LatlabRun};

/// The gaps counted: at least this long.
pub const THRESHOLD_NS: u64 = 10_000;

/// One run's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseFigures {
    /// Gaps of at least [`THRESHOLD_NS`] per second.
    pub per_s: f64,
    /// Their time per second (µs/s; oslat's loops at their rounded-up value).
    pub us_per_s: f64,
    /// The longest gap (ns).
    pub max_ns: f64,
}

/// latlab's noise mode on `cpu` for `secs`.
pub fn latlab(cpu: u32, secs: u64) -> crate::Result<NoiseFigures> {
    let r = LatlabRun::new("run", None)?
        .args(["--mode", "noise", "--noise-threshold", "10us", "--cpus"])
        .args([cpu.to_string(), "--duration".into(), format!("{secs}s")])
        .run()
        .map_err(|e| e.context("--mode noise"))?;
    let v = r.summary()?;
    let c = &v["cpus"][0];
    let n = &c["noise"];
    let runtime_s = n["runtime_ns"].as_f64().unwrap_or(0.0) / 1e9;
    if runtime_s <= 0.0 {
        return Err(crate::Error::msg(format!(
            "latlab's noise run did not run: {n}"
        )));
    }
    Ok(NoiseFigures {
        per_s: c["samples"].as_f64().unwrap_or(0.0) / runtime_s,
        us_per_s: n["noise_ns"].as_f64().unwrap_or(0.0) / 1e3 / runtime_s,
        max_ns: c["max_ns"].as_f64().unwrap_or(0.0),
    })
}

/// oslat on `cpu` for `secs`, 1024 rows of 1 µs (its largest histogram).
pub fn oslat(cpu: u32, secs: u64) -> crate::Result<NoiseFigures> {
    let mut cmd = Command::new("oslat");
    cmd.args([
        "-c",
        &cpu.to_string(),
        "-D",
        &secs.to_string(),
        "-b",
        "1024",
        "-q",
    ]);
    let f =
        child::tool(&mut cmd, &Options::default()).map_err(|e| e.context("install rt-tests"))?;
    child::ran(&f, "oslat")?;
    let r = import::import(&f.stdout, From::Oslat, "oslat's output")
        .map_err(|e| crate::Error::msg(format!("oslat's output: {e}")))?;
    let c = r
        .cpus
        .first()
        .ok_or_else(|| crate::Error::msg("oslat measured no CPU"))?;
    let h = latlab_core::hist::Histogram::from_record(&c.histogram)
        .map_err(|e| crate::Error::msg(format!("oslat's histogram: {e}")))?;
    // Rows from 11 µs (values rounded up: more than 10 µs), each at its row's value (the
    // import's bucket starts there); the last row's overflows at that row.
    let (mut n, mut us) = (0u64, 0f64);
    for (lo, _, count) in h.buckets() {
        if lo > THRESHOLD_NS {
            n += count;
            us += count as f64 * lo as f64 / 1e3;
        }
    }
    let over = h.unknown_above();
    n += over;
    us += over as f64 * h.layout().limit_ns() as f64 / 1e3;
    let runtime_s = secs as f64;
    Ok(NoiseFigures {
        per_s: n as f64 / runtime_s,
        us_per_s: us / runtime_s,
        max_ns: h.max().unwrap_or(0) as f64,
    })
}
