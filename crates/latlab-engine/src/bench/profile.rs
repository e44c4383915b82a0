//! `bench profile`'s runs: `latlab run` and `latlab profile` with the same flags (one CPU,
//! FIFO 95, 1 ms, `--no-db`, the same `--duration` and `--load`), alternated; each one's
//! latency, memory — latlab's own peak RSS (`VmHWM`) and wait4's `ru_maxrss` (the largest of
//! latlab and the load processes it waited for) — and the profile's events, dropped events
//! and side files (`profile/series.bin`, `profile/trace.dat`).

use crate::bench::child::{self, total, LatlabRun};

/// What `bench profile` runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub cpu: u32,
    pub duration_ns: u64,
    /// `--load` of both runs.
    pub loads: Vec<String>,
}

/// One run's figures.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub samples: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Peak RSS (KiB): latlab's own `VmHWM`, and wait4's `ru_maxrss`.
    pub hwm_kib: u64,
    pub maxrss_kib: u64,
    /// The profile's (zero for `run`).
    pub events: u64,
    pub events_per_s: f64,
    pub lost_events: u64,
    pub series_bytes: u64,
    pub trace_dat_bytes: u64,
}

/// One pair: `run` and `profile` (`run` first in odd pairs).
pub struct Pair {
    pub profile_first: bool,
    pub run: Figures,
    pub profile: Figures,
}

/// Pair `i` (from 1).
pub fn pair(p: &Plan, i: u32) -> crate::Result<Pair> {
    let (run, profile) = child::alternated(i, || one(p, false), || one(p, true))?;
    Ok(Pair {
        profile_first: !child::a_first(i),
        run,
        profile,
    })
}

/// One `latlab run` or `latlab profile` with the plan's flags.
fn one(p: &Plan, profile: bool) -> crate::Result<Figures> {
    let mut l = LatlabRun::new(if profile { "profile" } else { "run" }, None)?
        .args(["--no-db"])
        .measuring(p.cpu, &format!("{}ns", p.duration_ns))
        .watch_hwm();
    for load in &p.loads {
        l = l.args(["--load", load]);
    }
    let r = l.run()?;
    let v = r.summary()?;
    let mut f = Figures {
        samples: total(&v, "samples"),
        p50_ns: total(&v, "median_ns"),
        p99_ns: total(&v, "p99_ns"),
        hwm_kib: r.f.hwm_kib,
        maxrss_kib: r.f.maxrss_kib,
        ..Figures::default()
    };
    if profile {
        let dir = r.dir()?;
        let run: serde_json::Value =
            serde_json::from_slice(&crate::rundir::read_run_json(&dir.join("run.json"))?)
                .map_err(|e| anyhow::anyhow!("the profile's run.json: {e}"))?;
        let p = &run["profile"];
        if !p.is_object() {
            bail!("the profile's run.json has no `profile`");
        }
        let pu = |k: &str| p[k].as_u64().unwrap_or(0);
        f.events = pu("events");
        f.lost_events = pu("lost_events");
        f.events_per_s = f.events as f64 / (pu("duration_ns").max(1) as f64 / 1e9);
        let size = |rel: &str| std::fs::metadata(dir.join(rel)).map_or(0, |m| m.len());
        f.series_bytes = size("profile/series.bin");
        f.trace_dat_bytes = size("profile/trace.dat");
    }
    Ok(f)
}
