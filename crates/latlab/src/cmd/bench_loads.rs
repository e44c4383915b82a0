//! `latlab bench loads`: what each load does to this machine. For every profile (idle first, as
//! the baseline) one real `latlab run --load P` — this very binary as a child process, so the
//! figures come from the same lifecycle a user runs — then one table: samples, p99, p99.9, max,
//! missed periods, the load's own throughput (from the run record's `loads[]`) and restarts.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{anyhow, bail, Context};
use latlab_core::units::{format_duration, Human};
use latlab_sys::loads::profiles::{self, which, PROFILES};
use serde_json::{json, Value};

use crate::cli::RunFormat;

/// The flags of `bench loads`.
pub struct Opts {
    pub profiles: Option<String>,
    pub duration: crate::args::Duration,
    pub cpus: crate::args::CpuSel,
    pub format: RunFormat,
    pub results: Option<PathBuf>,
    pub load_dir: Option<PathBuf>,
}

/// One row of the table.
#[derive(Debug, Default)]
struct Row {
    profile: String,
    samples: u64,
    p99_ns: Option<u64>,
    p999_ns: Option<u64>,
    max_ns: Option<u64>,
    missed: u64,
    /// (part, ops, unit) of every part that reported a throughput.
    throughput: Vec<(String, f64, String)>,
    restarts: u64,
    error: Option<String>,
    run_dir: Option<String>,
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

/// One `latlab run --load P`; the row from its JSON summary and run.json.
fn run_one(
    profile: &str,
    o: &Opts,
    duration: &str,
    results: &std::path::Path,
) -> anyhow::Result<Row> {
    let exe = std::env::current_exe().context("cannot find latlab's own executable")?;
    let mut cmd = Command::new(exe);
    cmd.args(["run", "--quiet", "--format", "json", "--load", profile])
        .args([
            "--duration",
            duration,
            "--cpus",
            &o.cpus.to_string(),
            "--label",
        ])
        .arg(
            format!("bench-{profile}")
                .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_"),
        )
        .arg("--results")
        .arg(results);
    if let Some(d) = &o.load_dir {
        cmd.arg("--load-dir").arg(d);
    }
    let dirs = |p: &std::path::Path| -> std::collections::BTreeSet<PathBuf> {
        std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let before = dirs(results);
    let out = cmd.output().context("cannot start latlab run")?;
    let run_dir = dirs(results)
        .difference(&before)
        .next()
        .map(|p| p.display().to_string());
    let mut row = Row {
        profile: profile.to_string(),
        ..Row::default()
    };
    if !(out.status.success() || out.status.code() == Some(2)) {
        let err = String::from_utf8_lossy(&out.stderr);
        row.error = Some(
            err.lines()
                .rev()
                .find(|l| l.starts_with("latlab: error"))
                .unwrap_or(&format!("latlab run failed: {}", out.status))
                .to_string(),
        );
        return Ok(row);
    }
    let v: Value = serde_json::from_slice(&out.stdout).context("latlab run's JSON summary")?;
    let t = &v["total"];
    row.samples = t["samples"].as_u64().unwrap_or(0);
    row.p99_ns = t["p99_ns"].as_u64();
    row.p999_ns = t["p999_ns"].as_u64();
    row.max_ns = t["max_ns"].as_u64();
    row.missed = t["missed_periods"].as_u64().unwrap_or(0);
    for l in v["loads"].as_array().into_iter().flatten() {
        row.restarts += l["restarts"].as_u64().unwrap_or(0);
        row.throughput.extend(load_throughput(l));
    }
    row.run_dir = run_dir;
    Ok(row)
}

/// A load record's throughput items: its `ops`, the files a compile part got through, and the
/// kernel-accounted MB/s it wrote and read (except the direction `ops` already is).
fn load_throughput(l: &Value) -> Vec<(String, f64, String)> {
    let part = l["part"].as_str().unwrap_or("").to_string();
    let mut v = Vec::new();
    if let Some(ops) = l["ops"].as_f64() {
        v.push((
            part.clone(),
            ops,
            l["ops_unit"].as_str().unwrap_or("").to_string(),
        ));
    }
    if let Some(x) = l["compiled_files_per_s"].as_f64() {
        v.push((part.clone(), x, "files compiled/s".to_string()));
    }
    // The direction `ops` already is, once; the other one too (io-read writes its file first).
    let source = l["ops_source"].as_str().unwrap_or("");
    for (key, unit, same) in [
        ("io_write_mb_per_s", "MB/s written", "kernel-io-write"),
        ("io_read_mb_per_s", "MB/s read", "kernel-io-read"),
    ] {
        if source == same {
            continue;
        }
        if let Some(x) = l[key].as_f64().filter(|x| *x > 0.0) {
            v.push((part.clone(), x, unit.to_string()));
        }
    }
    v
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

pub fn bench_loads(o: Opts) -> anyhow::Result<ExitCode> {
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
    let mut rows = Vec::new();
    for n in &names {
        if o.format == RunFormat::Text {
            eprintln!("running {n} for {duration} …");
        }
        rows.push(run_one(n, &o, &duration, &results)?);
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

    /// The throughput column shows every source a load record carries: its own figure and the
    /// kernel-accounted I/O of parts whose figure is something else (not twice for dd).
    #[test]
    fn throughput_items_from_load_records() {
        let dd = json!({"part": "dd", "ops": 512.5, "ops_unit": "MB/s",
            "ops_source": "kernel-io-write", "io_write_mb_per_s": 512.5, "io_read_mb_per_s": 0.0});
        assert_eq!(
            load_throughput(&dd),
            vec![("dd".to_string(), 512.5, "MB/s".to_string())]
        );
        // io-read's first iteration writes the file it then reads.
        let rd = json!({"part": "dd", "ops": 0.01, "ops_unit": "MB/s",
            "ops_source": "kernel-io-read", "io_write_mb_per_s": 700.0, "io_read_mb_per_s": 0.01});
        assert_eq!(
            load_throughput(&rd),
            vec![
                ("dd".to_string(), 0.01, "MB/s".to_string()),
                ("dd".to_string(), 700.0, "MB/s written".to_string())
            ]
        );
        let script = json!({"part": "script", "ops": 0.0, "ops_unit": "iterations/s",
            "ops_source": "iterations", "io_write_mb_per_s": 80.0, "io_read_mb_per_s": 1.5});
        let v = load_throughput(&script);
        assert_eq!(v.len(), 3, "{v:?}");
        assert_eq!(
            v[1],
            ("script".to_string(), 80.0, "MB/s written".to_string())
        );
        assert_eq!(v[2].1, 1.5);
        let none = json!({"part": "cmd", "ops": null});
        assert!(load_throughput(&none).is_empty());
    }

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
