//! `latlab bench loads`: what each load does to this machine. For every profile (idle first, as
//! the baseline) one real `latlab run --load P` (`latlab_engine::bench::loads`: this very
//! binary as a child process, so the figures come from the same lifecycle a user runs), then
//! one table: samples, p99, p99.9, max, missed periods, the load's own throughput (from the
//! run record's `loads[]`) and restarts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use latlab_core::units::{format_duration, Human};
use latlab_engine::bench::loads::{self, Plan, Row};
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

/// Three significant digits at least: 0.037 iterations/s must not print as 0.0.
fn num(x: f64) -> String {
    if x == 0.0 || x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn lat(v: Option<u64>) -> String {
    v.map_or("-".into(), |ns| Human(ns).to_string())
}

fn throughput(r: &Row) -> String {
    if r.throughput.is_empty() {
        return "-".into();
    }
    r.throughput
        .iter()
        .map(|(part, ops, unit)| {
            if r.throughput.len() > 1 && !part.is_empty() {
                format!("{part}: {} {unit}", num(*ops))
            } else {
                format!("{} {unit}", num(*ops))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn table(rows: &[Row]) -> String {
    let mut cells: Vec<[String; 8]> = vec![[
        "profile".into(),
        "samples".into(),
        "p99".into(),
        "p99.9".into(),
        "max".into(),
        "missed".into(),
        "load throughput".into(),
        "restarts".into(),
    ]];
    for r in rows {
        if let Some(e) = &r.error {
            cells.push([
                r.profile.clone(),
                "failed".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                e.clone(),
                String::new(),
            ]);
            continue;
        }
        cells.push([
            r.profile.clone(),
            r.samples.to_string(),
            lat(r.p99_ns),
            lat(r.p999_ns),
            lat(r.max_ns),
            r.missed.to_string(),
            throughput(r),
            r.restarts.to_string(),
        ]);
    }
    let w: Vec<usize> = (0..8)
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for c in cells {
        let mut line = String::new();
        for (i, cell) in c.iter().enumerate() {
            let pad = w[i] - cell.chars().count();
            // Text columns left-aligned, numbers right-aligned.
            if i == 0 || i == 6 {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
            line.push_str("  ");
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
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
        RunFormat::Text => out!("{}", table(&rows))?,
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

    #[test]
    fn table_shows_throughput_and_failures() {
        let rows = vec![
            Row {
                profile: "idle".into(),
                samples: 1000,
                p99_ns: Some(57_000),
                p999_ns: Some(120_000),
                max_ns: Some(2_500_000),
                missed: 3,
                ..Row::default()
            },
            Row {
                profile: "stress-cpu".into(),
                samples: 999,
                throughput: vec![("stress-ng".into(), 1380.5, "bogo-ops/s".into())],
                restarts: 1,
                ..Row::default()
            },
            Row {
                profile: "hackbench".into(),
                error: Some("latlab: error: boom".into()),
                ..Row::default()
            },
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("profile") && lines[0].ends_with("restarts"),
            "{t}"
        );
        assert!(
            lines[1].contains("57 µs") && lines[1].contains("2500 µs"),
            "{t}"
        );
        assert!(
            lines[2].contains("1380.5 bogo-ops/s") && lines[2].ends_with('1'),
            "{t}"
        );
        assert_eq!(num(0.0371), "0.037");
        assert_eq!(num(9.71), "9.71");
        assert!(
            lines[3].contains("failed") && lines[3].contains("boom"),
            "{t}"
        );
    }
}
