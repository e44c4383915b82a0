//! `latlab bench profile`: what `latlab profile` costs (figures printed, never asserted).
//!
//! `latlab run` and `latlab profile` with the same flags, alternated
//! (`latlab_engine::bench::profile`): latency p50/p99 of each and the per-pair ratios
//! profile/run, whose medians and spread close the table; the events per second the profile
//! handled and the events the kernel dropped; each run's peak RSS (latlab's own `VmHWM`, and
//! wait4's `ru_maxrss`) and the profile's side files. `--duration 10m --load hackbench
//! --pairs 1` gives the ten-minute memory figure.

use std::process::ExitCode;

use anyhow::bail;
use latlab_core::bench::{spread, Ratios};
use latlab_core::units::format_duration;
use latlab_engine::bench::profile::{self, Figures, Plan};
use serde_json::{json, Value};

use crate::cli::RunFormat;

fn figures_json(f: &Figures, profile: bool) -> Value {
    let mut v = json!({
        "samples": f.samples,
        "p50_ns": f.p50_ns,
        "p99_ns": f.p99_ns,
        "vm_hwm_kib": f.hwm_kib,
        "ru_maxrss_kib": f.maxrss_kib,
    });
    if profile {
        v["events"] = json!(f.events);
        v["events_per_s"] = json!(f.events_per_s);
        v["lost_events"] = json!(f.lost_events);
        v["series_bytes"] = json!(f.series_bytes);
        v["trace_dat_bytes"] = json!(f.trace_dat_bytes);
    }
    v
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

fn header(p: &Plan) -> anyhow::Result<()> {
    let loads = if p.loads.is_empty() {
        "no load".to_string()
    } else {
        format!("--load {}", p.loads.join(" --load "))
    };
    outln!(
        "profile cost on CPU {}: FIFO 95, 1 ms interval, {} each, {loads}; run / profile alternated",
        p.cpu,
        format_duration(p.duration_ns)
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
    )
}

fn pair_lines(i: u32, r: &profile::Pair, rr: [f64; 2]) -> anyhow::Result<()> {
    let order = if r.profile_first {
        [("profile", &r.profile), ("run", &r.run)]
    } else {
        [("run", &r.run), ("profile", &r.profile)]
    };
    for (name, f) in order {
        let opt = |s: String| if name == "profile" { s } else { "-".into() };
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
    )
}

/// `latlab bench profile`.
pub fn bench(p: Plan, pairs: u32, format: RunFormat) -> anyhow::Result<ExitCode> {
    if pairs == 0 {
        bail!("--pairs 0: give at least 1 pair of runs");
    }
    let text = format == RunFormat::Text;
    if text {
        header(&p)?;
    }
    let mut ratios = Ratios::<2>::default();
    let mut rows = Vec::new();
    let mut profiles = Vec::new();
    for i in 1..=pairs {
        let r = profile::pair(&p, i)?;
        let q = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        let (run, prof) = (&r.run, &r.profile);
        let rr = ratios.push([q(prof.p50_ns, run.p50_ns), q(prof.p99_ns, run.p99_ns)]);
        if text {
            pair_lines(i, &r, rr)?;
        }
        rows.push(json!({
            "pair": i,
            "first": if r.profile_first { "profile" } else { "run" },
            "run": figures_json(run, false),
            "profile": figures_json(prof, true),
            "ratio_p50": rr[0],
            "ratio_p99": rr[1],
        }));
        profiles.push(r.profile);
    }
    let [p50, p99] = ratios.summary().expect("at least one pair");
    let eps: Vec<f64> = profiles.iter().map(|p| p.events_per_s).collect();
    let eps = spread(&eps).expect("at least one pair");
    let largest = |k: fn(&Figures) -> u64| profiles.iter().map(k).max().unwrap_or(0);
    let (hwm, maxrss) = (largest(|p| p.hwm_kib), largest(|p| p.maxrss_kib));
    let (series, dat) = (largest(|p| p.series_bytes), largest(|p| p.trace_dat_bytes));
    if text {
        outln!(
            "median ratios profile/run (per-pair spread) over {pairs} pairs: p50 {p50}, p99 {p99}"
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
            "cpu": p.cpu,
            "duration_ns": p.duration_ns,
            "loads": p.loads,
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
