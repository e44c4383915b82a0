//! `latlab bench loads`: what each load does to this machine. For every profile (idle first, as
//! the baseline) one real `latlab run --load P` (`latlab_engine::bench::loads`: this very
//! binary as a child process, so the figures come from the same lifecycle a user runs), then
//! one table: samples, p99, p99.9, max, missed periods, the load's own throughput (from the
//! run record's `loads[]`) and restarts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use latlab_core::units::format_duration;
use latlab_engine::bench::loads::{self, Plan};
use latlab_sys::loads::profiles::{self, which, PROFILES};
use serde_json::json;

use crate::cli::RunFormat;

/// The flags of `bench loads`.
pub struct Opts {
    pub profiles: Option<String>,
    pub duration: crate::cli::values::Duration,
    pub cpus: crate::cli::values::CpuSel,
    pub format: RunFormat,
    pub results: Option<PathBuf>,
    pub load_dir: Option<PathBuf>,
}

/// The profiles to run: `--profiles a,b` (each checked now, before anything runs), or every
/// profile whose tools are installed; `idle` always first, as the baseline.
fn select(list: Option<&str>) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let mut skipped = Vec::new();
    let mut names: Vec<String> = match list {
        Some(s) => {
            let mut v = Vec::new();
            for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let r = profiles::resolve(p).map_err(|e| anyhow!("--profiles: {e}"))?;
                profiles::check_tools(&r).map_err(|e| anyhow!("--profiles {p}: {e}"))?;
                v.push(p.to_string());
            }
            if v.is_empty() {
                bail!("--profiles: the list is empty; give profiles such as stress-cpu,hackbench");
            }
            v
        }
        None => PROFILES
            .iter()
            .filter(|p| {
                let missing: Vec<&str> = p
                    .tools
                    .iter()
                    .filter(|t| which(t.bin).is_none())
                    .map(|t| t.bin)
                    .collect();
                if !missing.is_empty() {
                    skipped.push(format!("{} (needs {})", p.name, missing.join(", ")));
                }
                missing.is_empty()
            })
            .map(|p| p.name.to_string())
            .collect(),
    };
    names.retain(|n| n != "idle");
    names.insert(0, "idle".into());
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    Ok((names, skipped))
}

pub fn bench(o: Opts) -> anyhow::Result<ExitCode> {
    let d = o.duration.0;
    if d < 1_000_000_000 {
        bail!("--duration {}: use at least 1s (e.g. 20s)", o.duration);
    }
    let duration = format_duration(d);
    let (names, skipped) = select(o.profiles.as_deref())?;
    let tmp = match &o.results {
        Some(_) => None,
        None => Some(latlab_engine::rundir::private_temp_dir(
            "latlab-bench-loads-",
        )?),
    };
    let (results, keep) = match (&o.results, &tmp) {
        (Some(r), _) => (r.clone(), true),
        (None, Some(t)) => (t.path().to_path_buf(), false),
        (None, None) => unreachable!("a temp dir without --results"),
    };
    std::fs::create_dir_all(&results)
        .with_context(|| format!("--results {}: cannot create it", results.display()))?;
    if o.format == RunFormat::Text {
        outln!(
            "latlab bench loads: {duration} per profile on CPUs {}, {} profiles",
            o.cpus,
            names.len()
        )?;
        if !skipped.is_empty() {
            outln!("not installed, skipped: {}", skipped.join(", "))?;
        }
    }
    let plan = Plan {
        duration: duration.clone(),
        cpus: o.cpus.to_string(),
        results: results.clone(),
        load_dir: o.load_dir.clone(),
    };
    let mut rows = Vec::new();
    for n in &names {
        if o.format == RunFormat::Text {
            eprintln!("running {n} for {duration} …");
        }
        rows.push(loads::run(n, &plan)?);
    }
    if !keep {
        let _ = std::fs::remove_dir_all(&results);
    }
    match o.format {
        RunFormat::Text => out!("{}", latlab_report::loads::bench_table(&rows))?,
        RunFormat::Json => {
            let v = json!({
                "duration_ns": d,
                "cpus": o.cpus.to_string(),
                "skipped": skipped,
                "rows": rows.iter().map(|r| json!({
                    "profile": r.profile,
                    "samples": r.samples,
                    "p99_ns": r.p99_ns,
                    "p999_ns": r.p999_ns,
                    "max_ns": r.max_ns,
                    "missed_periods": r.missed,
                    "throughput": r.throughput.iter().map(|(part, ops, unit)| json!({
                        "part": part, "ops": ops, "unit": unit
                    })).collect::<Vec<_>>(),
                    "restarts": r.restarts,
                    "error": r.error,
                    "run_dir": if keep { r.run_dir.clone() } else { None },
                })).collect::<Vec<_>>(),
            });
            outln!("{}", serde_json::to_string_pretty(&v)?)?;
        }
    }
    if let Some(r) = rows.iter().find(|r| r.error.is_some()) {
        bail!(
            "bench loads: profile {} failed: {}",
            r.profile,
            r.error.as_deref().unwrap_or("")
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_is_the_first_row_once() {
        let (n, _) = select(Some("idle,idle")).unwrap();
        assert_eq!(n, vec!["idle".to_string()]);
        let e = select(Some("idle,nope")).unwrap_err().to_string();
        assert!(e.contains("--profiles") && e.contains("'nope'"), "{e}");
    }
}
