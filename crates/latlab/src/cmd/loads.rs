//! `latlab loads`: `list` shows the profiles (what each models, the tools it needs and whether
//! they are installed); `run PROFILE` runs one load alone, for use with another tool, until the
//! duration ends or Ctrl-C/SIGTERM, and stops it completely either way.

use std::process::ExitCode;

use anyhow::anyhow;
use latlab_sys::loads::profiles::{which, PROFILES};

use crate::cli::{LoadsArgs, LoadsCommand};
use latlab_engine::loads_alone;

pub fn loads(args: LoadsArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        LoadsCommand::List => {
            out!("{}", list())?;
            Ok(ExitCode::SUCCESS)
        }
        LoadsCommand::Run {
            profile,
            duration,
            json,
            load,
        } => run(&profile, duration, json, &load),
    }
}

/// The `loads list` table.
fn list() -> String {
    let mut rows: Vec<[String; 4]> = vec![[
        "profile".into(),
        "installed".into(),
        "tools (Debian package)".into(),
        "models".into(),
    ]];
    for p in PROFILES {
        let missing: Vec<&str> = p
            .tools
            .iter()
            .filter(|t| which(t.bin).is_none())
            .map(|t| t.bin)
            .collect();
        let tools = if p.tools.is_empty() {
            "-".to_string()
        } else {
            p.tools
                .iter()
                .map(|t| {
                    if t.bin == t.package {
                        t.bin.to_string()
                    } else {
                        format!("{} ({})", t.bin, t.package)
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let installed = if missing.is_empty() {
            "yes".to_string()
        } else {
            format!("no: {}", missing.join(", "))
        };
        rows.push([p.name.into(), installed, tools, p.models.into()]);
    }
    rows.push([
        "cmd:<command>".into(),
        "-".into(),
        "the command's own".into(),
        "any command, supervised like the others".into(),
    ]);
    let w: Vec<usize> = (0..3)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        out.push_str(&format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {}\n",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2]
        ));
    }
    out
}

fn run(
    profile: &str,
    duration: crate::cli::values::Duration,
    json: bool,
    load: &crate::cli::LoadArgs,
) -> anyhow::Result<ExitCode> {
    let alone = loads_alone::start(profile, &crate::plan::load_options(load, duration.0))?;
    if alone.started() {
        eprintln!(
            "latlab: load {profile} running for {duration} (Ctrl-C stops it); logs in {}",
            alone.log_dir().display()
        );
    }
    let end = alone.run(duration.0);
    for r in &end.records {
        eprintln!("{}", record_line(r));
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"loads": end.records, "activity": end.activity})
            )?
        )?;
    }
    if let Some(e) = end.failed {
        return Err(e.into());
    }
    if !end.leftovers.is_empty() {
        return Err(anyhow!(
            "some load resources could not be removed ({}); run `latlab cleanup` to retry",
            end.leftovers.join("; ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// A load's record in one line: restarts, failures, CPU time, throughput, how it stopped.
fn record_line(r: &latlab_core::record::LoadRecord) -> String {
    let d = &r.details;
    format!(
        "{} ({}): restarts {}, failures {}, cpu {:.2} s, {}, stopped in {:.2} s{}",
        r.profile,
        d.get("part").and_then(|v| v.as_str()).unwrap_or("-"),
        d.get("restarts").unwrap_or(&serde_json::Value::Null),
        d.get("failures").unwrap_or(&serde_json::Value::Null),
        d.get("cpu_s").and_then(|v| v.as_f64()).unwrap_or(0.0),
        match r.ops {
            Some(o) => format!(
                "{o:.2} {}",
                d.get("ops_unit").and_then(|v| v.as_str()).unwrap_or("")
            ),
            None => "no throughput reported".into(),
        },
        d.get("stop")
            .and_then(|s| s.get("term_s"))
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0),
        if d.get("stop")
            .and_then(|s| s.get("killed"))
            .and_then(|v| v.as_bool())
            == Some(true)
        {
            " (needed SIGKILL)"
        } else {
            ""
        }
    )
}
