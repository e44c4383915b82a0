//! `bench measure`'s runs: latlab and cyclictest alternately on the same CPU, priority and
//! interval, both tools' main threads on another CPU (cyclictest `--mainaffinity`, latlab's
//! process pinned there), because a main thread that wakes on the measured CPU hands the
//! measuring thread "lucky" samples that find the CPU awake (lower minimum, no better mean);
//! cyclictest's default invocation (its main thread on the measured CPU) after each pair, for
//! reference. Both tools' figures come from their 1 µs histograms (cyclictest `-h`, latlab's
//! `histogram.txt`), read by one function ([`us_hist::parse`]).

use std::process::Command;

use anyhow::Context;
use latlab_core::bench::us_hist::{self, Figures, BUCKETS};
use latlab_core::units::format_duration;
use latlab_sys::child::Options;

use crate::bench::child::{self, LatlabRun};

/// What `bench measure` runs.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// The measured CPU.
    pub cpu: u32,
    /// Where both tools' main threads run.
    pub main_cpu: u32,
    /// Whole seconds of each run.
    pub secs: u64,
}

impl Plan {
    /// Each run's length, as `--duration` takes it (`10s`).
    pub fn duration(&self) -> String {
        format_duration(self.secs * 1_000_000_000)
    }
}

/// One pair: latlab and cyclictest (which went first), then cyclictest's default invocation.
pub struct Pair {
    pub latlab_first: bool,
    pub latlab: Figures,
    pub cyclictest: Figures,
    pub default: Figures,
}

/// Pair `i` (from 1; latlab first in odd pairs).
pub fn pair(p: &Plan, i: u32) -> crate::Result<Pair> {
    let d = p.duration();
    let (latlab, cyclictest) = child::alternated(
        i,
        || latlab(p, &d).map(|(f, _)| f),
        || run_cyclictest(p, Some(p.main_cpu)),
    )?;
    Ok(Pair {
        latlab_first: child::a_first(i),
        latlab,
        cyclictest,
        default: run_cyclictest(p, None)?,
    })
}

/// `latlab run` on the plan's CPU for `duration`, its process on the main CPU: its figures and
/// its peak RSS (KiB, wait4's).
pub fn latlab(p: &Plan, duration: &str) -> crate::Result<(Figures, u64)> {
    let r = LatlabRun::new("run", None)?
        .measuring(p.cpu, duration)
        .args(["--hist-limit", "10ms"])
        .pinned(p.main_cpu)
        .run()?;
    let hist = r.dir()?.join("histogram.txt");
    let text = std::fs::read_to_string(&hist).with_context(|| format!("{}", hist.display()))?;
    let f = us_hist::parse(&text)
        .map_err(anyhow::Error::msg)
        .context("latlab's histogram.txt")?;
    Ok((f, r.f.maxrss_kib))
}

/// cyclictest on the plan's CPU, its main thread on `main_cpu` (None: its default, the
/// measured CPU).
fn run_cyclictest(p: &Plan, main_cpu: Option<u32>) -> crate::Result<Figures> {
    let mut cmd = Command::new("cyclictest");
    cmd.args(["-m", "-p", "95", "-i", "1000", "-a", &p.cpu.to_string()])
        .args(["-t", "1", "-q", "-h", &BUCKETS.to_string()])
        .args(["-D", &format!("{}s", p.secs)]);
    if let Some(m) = main_cpu {
        cmd.arg(format!("--mainaffinity={m}"));
    }
    let f = child::tool(&mut cmd, &Options::default())
        .and_then(|f| child::ran(&f, "cyclictest").map(|()| f))
        .map_err(|e| e.context("cyclictest (apt-get install rt-tests)"))?;
    Ok(us_hist::parse(&String::from_utf8_lossy(&f.stdout))
        .map_err(anyhow::Error::msg)
        .context("cyclictest's -h output")?)
}
