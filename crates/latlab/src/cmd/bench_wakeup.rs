//! `latlab bench wakeup`: latlab's thread → thread wake-up latency (`--mode wakeup`) against
//! rt-tests' tools on the same IPC: futex against ptsematest (a pthread mutex, futex inside)
//! and mqueue against pmqtest (a POSIX message queue), alternated, one pair on one CPU at the
//! same priority and interval.
//! Prints each run's min/avg/max and the ratios of the means; never asserts a speed.

use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context};

use latlab_core::bench::{parse_rt_tests, MinAvgMax as Fig};

fn latlab(ipc: &str, cpu: u32, secs: u64) -> anyhow::Result<Fig> {
    let tmp = latlab_engine::rundir::private_temp_dir("latlab-bench-wakeup-")?;
    let results = tmp.path().to_path_buf();
    let out = Command::new(std::env::current_exe()?)
        .args([
            "run", "--quiet", "--format", "json", "--mode", "wakeup", "--ipc", ipc,
        ])
        .args([
            "--priority",
            "95",
            "--interval",
            "1ms",
            "--cpus",
            &cpu.to_string(),
        ])
        .args(["--duration", &format!("{secs}s"), "--results"])
        .arg(&results)
        .stderr(Stdio::inherit())
        .output()
        .context("cannot start latlab")?;
    let _ = std::fs::remove_dir_all(&results);
    if !out.status.success() {
        bail!(
            "latlab run --mode wakeup --ipc {ipc} failed: {}",
            out.status
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("latlab's JSON")?;
    let g = |k: &str| v["total"][k].as_f64().unwrap_or(0.0);
    Ok(Fig {
        min: g("min_ns"),
        avg: g("mean_ns"),
        max: g("max_ns"),
    })
}

fn rt_tests(tool: &str, cpu: u32, secs: u64) -> anyhow::Result<Fig> {
    let out = Command::new(tool)
        .args([
            "-a",
            &cpu.to_string(),
            "-t",
            "1",
            "-p",
            "95",
            "-i",
            "1000",
            "-q",
        ])
        .args(["-D", &secs.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start {tool} (install rt-tests)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_rt_tests(&text)
        .with_context(|| format!("{tool} printed no 'Min … Avg … Max' line: {text}"))
}

pub fn bench_wakeup(cpu: u32, duration_ns: u64, pairs: u32) -> anyhow::Result<ExitCode> {
    let secs = duration_ns / 1_000_000_000;
    if secs == 0 {
        bail!("--duration: at least 1s (ptsematest and pmqtest count whole seconds)");
    }
    let tools = ["latlab futex", "ptsematest", "latlab mqueue", "pmqtest"];
    let mut figs: Vec<Vec<Fig>> = vec![Vec::new(); tools.len()];
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
        for (i, t) in tools.iter().enumerate() {
            let f = match *t {
                "latlab futex" => latlab("futex", cpu, secs)?,
                "latlab mqueue" => latlab("mqueue", cpu, secs)?,
                tool => rt_tests(tool, cpu, secs)?,
            };
            outln!(
                "{t:<14} {run:>4} {:>10.2} {:>10.2} {:>10.2}",
                f.min / 1e3,
                f.avg / 1e3,
                f.max / 1e3
            )?;
            figs[i].push(f);
        }
    }
    let mean = |v: &[Fig], k: fn(&Fig) -> f64| v.iter().map(k).sum::<f64>() / v.len().max(1) as f64;
    outln!("\nmeans over {pairs} runs")?;
    for (t, v) in tools.iter().zip(&figs) {
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
            tools[a],
            tools[b],
            mean(&figs[a], |f| f.min) / mean(&figs[b], |f| f.min).max(1.0),
            mean(&figs[a], |f| f.avg) / mean(&figs[b], |f| f.avg).max(1.0),
            mean(&figs[a], |f| f.max) / mean(&figs[b], |f| f.max).max(1.0),
        )?;
    }
    outln!("(latlab's sender runs at priority 94, as ptsematest's receiver preempts its sender; rt-tests report whole µs)")?;
    Ok(ExitCode::SUCCESS)
}
