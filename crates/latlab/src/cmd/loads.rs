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
    latlab_report::loads::profiles_table(&rows)
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
        eprintln!("{}", latlab_report::loads::record_line(r));
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
