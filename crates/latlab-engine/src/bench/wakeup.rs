//! `bench wakeup`'s runs: latlab's thread → thread wake-up latency (`run --mode wakeup`)
//! and rt-tests' tools on the same IPC — futex against ptsematest (a pthread mutex, futex
//! inside), mqueue against pmqtest (a POSIX message queue) — one pair on one CPU at the same
//! priority and interval.

use std::process::Command;

use anyhow::Context;
use latlab_core::bench::{parse_rt_tests, MinAvgMax};
use latlab_sys::child::Options;

use crate::bench::child::{self, LatlabRun};

/// The four runs of a round, in order: latlab's IPC or the rt-tests tool.
pub const TOOLS: [&str; 4] = ["latlab futex", "ptsematest", "latlab mqueue", "pmqtest"];

/// One run of `tool` (one of [`TOOLS`]) on `cpu` for `secs` seconds: min / avg / max.
pub fn run(tool: &str, cpu: u32, secs: u64) -> crate::Result<MinAvgMax> {
    match tool.strip_prefix("latlab ") {
        Some(ipc) => latlab(ipc, cpu, secs),
        None => rt_tests(tool, cpu, secs),
    }
}

fn latlab(ipc: &str, cpu: u32, secs: u64) -> crate::Result<MinAvgMax> {
    let r = LatlabRun::new("run", None)?
        .args(["--mode", "wakeup", "--ipc", ipc])
        .measuring(cpu, &format!("{secs}s"))
        .run()
        .map_err(|e| e.context(format!("--mode wakeup --ipc {ipc}")))?;
    let v = r.summary()?;
    let g = |k: &str| v["total"][k].as_f64().unwrap_or(0.0);
    Ok(MinAvgMax {
        min: g("min_ns"),
        avg: g("mean_ns"),
        max: g("max_ns"),
    })
}

fn rt_tests(tool: &str, cpu: u32, secs: u64) -> crate::Result<MinAvgMax> {
    let mut cmd = Command::new(tool);
    cmd.args(["-a", &cpu.to_string(), "-t", "1", "-p", "95", "-i", "1000"])
        .args(["-q", "-D", &secs.to_string()]);
    let f =
        child::tool(&mut cmd, &Options::default()).map_err(|e| e.context("install rt-tests"))?;
    let text = String::from_utf8_lossy(&f.stdout);
    Ok(parse_rt_tests(&text)
        .with_context(|| format!("{tool} printed no 'Min … Avg … Max' line: {text}"))?)
}
