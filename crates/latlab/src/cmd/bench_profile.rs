//! `latlab bench profile`: what `latlab profile` costs (figures printed, never asserted).
//!
//! `latlab run` and `latlab profile` with the same flags (one CPU, FIFO 95, 1 ms, the same
//! `--duration` and `--load`), alternated (which goes first alternates, so the machine's drift
//! within a pair favours neither): latency p50/p99 of each and the per-pair ratios profile/run,
//! whose medians and spread close the table; the events per second the profile handled (from
//! its run.json `profile`: `events` over `duration_ns`) and the events the kernel dropped; and
//! memory: each run's peak RSS — latlab's own (`VmHWM` of `/proc/PID/status`, read until the
//! process exits) and wait4's `ru_maxrss` (the largest of latlab and the load processes it
//! waited for) — and the profile's side files (`profile/series.bin`, `profile/trace.dat`).
//! `--duration 10m --load hackbench --pairs 1` gives the ten-minute memory figure.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};
use latlab_core::units::format_duration;
use serde_json::{json, Value};

use crate::cli::RunFormat;

/// One run's figures.
#[derive(Debug, Clone, Default)]
struct Figures {
    samples: u64,
    p50_ns: u64,
    p99_ns: u64,
    /// Peak RSS (KiB): latlab's own `VmHWM`, and wait4's `ru_maxrss`.
    hwm_kib: u64,
    maxrss_kib: u64,
    /// The profile's (zero for `run`).
    events: u64,
    events_per_s: f64,
    lost_events: u64,
    series_bytes: u64,
    trace_dat_bytes: u64,
}

impl Figures {
    fn json(&self, profile: bool) -> Value {
        let mut v = json!({
            "samples": self.samples,
            "p50_ns": self.p50_ns,
            "p99_ns": self.p99_ns,
            "vm_hwm_kib": self.hwm_kib,
            "ru_maxrss_kib": self.maxrss_kib,
        });
        if profile {
            v["events"] = json!(self.events);
            v["events_per_s"] = json!(self.events_per_s);
            v["lost_events"] = json!(self.lost_events);
            v["series_bytes"] = json!(self.series_bytes);
            v["trace_dat_bytes"] = json!(self.trace_dat_bytes);
        }
        v
    }
}

pub struct Opts {
    pub cpu: u32,
    pub duration_ns: u64,
    pub pairs: u32,
    pub loads: Vec<String>,
    pub format: RunFormat,
}

/// `VmHWM` of a process (KiB), if it still has one.
fn vm_hwm(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Run a command to completion: its stdout, latlab's own peak RSS (the last `VmHWM` read, every
/// 50 ms: it only grows) and wait4's `ru_maxrss` (KiB).
fn run_watched(cmd: &mut Command) -> anyhow::Result<(Vec<u8>, u64, u64)> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    // The process is not reaped before `done` is set (wait4 below), so the pid stays ours.
    let watcher = std::thread::spawn(move || {
        let mut hwm = 0;
        while !d2.load(Ordering::Acquire) {
            if let Some(v) = vm_hwm(pid) {
                hwm = hwm.max(v);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        hwm
    });
    let mut out = Vec::new();
    let read = child.stdout.take().expect("piped").read_to_end(&mut out);
    let mut status = 0;
    // SAFETY: rusage is plain data written by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child, not yet reaped.
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
    done.store(true, Ordering::Release);
    let hwm = watcher.join().unwrap_or(0);
    if r < 0 {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    read?;
    let st = std::process::ExitStatus::from_raw(status);
    if !st.success() && st.code() != Some(2) {
        bail!("{:?} failed: {st}", cmd.get_program());
    }
    Ok((out, hwm, ru.ru_maxrss.max(0) as u64))
}

/// One `latlab run` or `latlab profile` with the bench's flags.
fn one(o: &Opts, profile: bool) -> anyhow::Result<Figures> {
    let tmp = latlab_engine::rundir::private_temp_dir("latlab-bench-profile-")?;
    let results = tmp.path();
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg(if profile { "profile" } else { "run" })
        .args(["--quiet", "--format", "json", "--no-db", "--priority", "95"])
        .args(["--interval", "1ms", "--cpus", &o.cpu.to_string()])
        .arg("--duration")
        .arg(format!("{}ns", o.duration_ns))
        .arg("--results")
        .arg(results);
    for l in &o.loads {
        cmd.args(["--load", l]);
    }
    let (out, hwm_kib, maxrss_kib) = run_watched(&mut cmd)?;
    let v: Value = serde_json::from_slice(&out).context("latlab's JSON summary")?;
    let t = &v["total"];
    let g = |k: &str| t[k].as_u64().unwrap_or(0);
    let mut f = Figures {
        samples: g("samples"),
        p50_ns: g("median_ns"),
        p99_ns: g("p99_ns"),
        hwm_kib,
        maxrss_kib,
        ..Figures::default()
    };
    if profile {
        let dir = std::fs::read_dir(results)?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("run.json").is_file())
            .context("latlab profile left no run directory")?;
        let run: Value = serde_json::from_slice(&std::fs::read(dir.join("run.json"))?)
            .context("the profile's run.json")?;
        let p = &run["profile"];
        anyhow::ensure!(p.is_object(), "the profile's run.json has no `profile`");
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

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// `latlab bench profile`.
pub fn bench_profile(o: Opts) -> anyhow::Result<ExitCode> {
    if o.pairs == 0 {
        bail!("--pairs 0: give at least 1 pair of runs");
    }
    let dur = format_duration(o.duration_ns);
    let loads = if o.loads.is_empty() {
        "no load".to_string()
    } else {
        format!("--load {}", o.loads.join(" --load "))
    };
    let text = o.format == RunFormat::Text;
    if text {
        outln!(
            "profile cost on CPU {}: FIFO 95, 1 ms interval, {dur} each, {loads}; run / profile alternated",
            o.cpu
        )?;
        outln!(
            "{:<5} {:<8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>11} {:>8} {:>10} {:>10}",
            "pair",
            "command",
            "samples",
            "p50 µs",
            "p99 µs",
            "HWM MiB",
            "RSS MiB",
            "events/s",
            "lost",
            "series MB",
            "dat MB"
        )?;
    }
    let mut ratios = latlab_core::bench::Ratios::<2>::default();
    let mut rows = Vec::new();
    let mut profiles = Vec::new();
    for i in 1..=o.pairs {
        let profile_first = i % 2 == 0;
        let (run, prof) = if profile_first {
            let p = one(&o, true)?;
            (one(&o, false)?, p)
        } else {
            let r = one(&o, false)?;
            (r, one(&o, true)?)
        };
        let r = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        let rr = [r(prof.p50_ns, run.p50_ns), r(prof.p99_ns, run.p99_ns)];
        if text {
            let order = if profile_first {
                [("profile", &prof), ("run", &run)]
            } else {
                [("run", &run), ("profile", &prof)]
            };
            for (name, f) in order {
                let p = name == "profile";
                let opt = |s: String| if p { s } else { "-".into() };
                outln!(
                    "{i:<5} {name:<8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>11} {:>8} {:>10} {:>10}",
                    f.samples,
                    us(f.p50_ns),
                    us(f.p99_ns),
                    mib(f.hwm_kib),
                    mib(f.maxrss_kib),
                    opt(format!("{:.0}", f.events_per_s)),
                    opt(f.lost_events.to_string()),
                    opt(format!("{:.2}", f.series_bytes as f64 / 1e6)),
                    opt(format!("{:.2}", f.trace_dat_bytes as f64 / 1e6)),
                )?;
            }
            outln!(
                "{i:<5} {:<8} profile/run: p50 {:.3}, p99 {:.3}",
                "ratio",
                rr[0],
                rr[1]
            )?;
        }
        rows.push(json!({
            "pair": i,
            "first": if profile_first { "profile" } else { "run" },
            "run": run.json(false),
            "profile": prof.json(true),
            "ratio_p50": rr[0],
            "ratio_p99": rr[1],
        }));
        ratios.push(rr);
        profiles.push(prof);
    }
    let [p50, p99] = ratios.summary().expect("at least one pair");
    let eps =
        latlab_core::bench::spread(&profiles.iter().map(|p| p.events_per_s).collect::<Vec<_>>())
            .expect("at least one pair");
    let hwm = profiles.iter().map(|p| p.hwm_kib).max().unwrap_or(0);
    let maxrss = profiles.iter().map(|p| p.maxrss_kib).max().unwrap_or(0);
    let series = profiles.iter().map(|p| p.series_bytes).max().unwrap_or(0);
    let dat = profiles
        .iter()
        .map(|p| p.trace_dat_bytes)
        .max()
        .unwrap_or(0);
    if text {
        outln!(
            "median ratios profile/run (per-pair spread) over {} pairs: p50 {p50}, p99 {p99}",
            o.pairs
        )?;
        outln!(
            "profile: {:.0} events/s median ({:.0}–{:.0}); peak RSS {} MiB (VmHWM; ru_maxrss {} MiB); series.bin {:.2} MB, trace.dat {:.2} MB (largest)",
            eps.median,
            eps.min,
            eps.max,
            mib(hwm),
            mib(maxrss),
            series as f64 / 1e6,
            dat as f64 / 1e6
        )?;
    } else {
        let v = json!({
            "cpu": o.cpu,
            "duration_ns": o.duration_ns,
            "loads": o.loads,
            "pairs": rows,
            "ratio_p50": p50,
            "ratio_p99": p99,
            "events_per_s": eps,
            "profile_vm_hwm_kib_max": hwm,
            "profile_ru_maxrss_kib_max": maxrss,
            "series_bytes_max": series,
            "trace_dat_bytes_max": dat,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn vm_hwm_of_this_process() {
        let kib = super::vm_hwm(std::process::id()).expect("VmHWM of a live process");
        assert!(kib > 0);
        assert_eq!(super::vm_hwm(u32::MAX), None);
    }
}
