//! `latlab loads`: `list` shows the profiles (what each models, the tools it needs and whether
//! they are installed); `run PROFILE` runs one load alone, for use with another tool, until the
//! duration ends or Ctrl-C/SIGTERM, and stops it completely either way.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use latlab_sys::loads::profiles::{which, PROFILES};

use crate::cli::{LoadsArgs, LoadsCommand};
use latlab_engine::loads::LoadSession;
use latlab_engine::session::{Begin, Session};

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
            ext,
        } => run(&profile, duration, json, &ext),
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
    duration: crate::args::Duration,
    json: bool,
    ext: &crate::cli::RunExtArgs,
) -> anyhow::Result<ExitCode> {
    let dur = duration.0;
    let opts = crate::plan::load_options(ext, dur);
    let session = LoadSession::prepare(&[profile.to_string()], &opts)?;
    let mut s = Session::begin(Begin {
        results: None,
        inventory: false,
        quiet: false,
    })?;
    let tmp = latlab_engine::rundir::private_temp_dir("latlab-loads-")?;
    let log_dir = tmp.path().join("logs");
    let mut failed = s.start_loads(session, &log_dir, 0).err();
    if failed.is_none() {
        eprintln!(
            "latlab: load {profile} running for {duration} (Ctrl-C stops it); logs in {}",
            log_dir.display()
        );
        let t0 = Instant::now();
        let end = Duration::from_nanos(dur);
        while !s.stopped() && t0.elapsed() < end {
            if let Err(e) = s.poll_loads() {
                failed = Some(e);
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let (records, activity) = s.stop_loads();
    // Profiles without parts (idle) leave no log: no empty directory either.
    let _ = std::fs::remove_dir(&log_dir);
    // Logs were written: the directory stays for the user (its path was printed).
    if log_dir.exists() {
        let _ = tmp.keep();
    }
    let leftovers = s.close();
    for r in &records {
        let d = &r.details;
        eprintln!(
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
        );
    }
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"loads": records, "activity": activity})
            )?
        )?;
    }
    if let Some(e) = failed {
        return Err(e.into());
    }
    if !leftovers.is_empty() {
        return Err(anyhow!(
            "some load resources could not be removed ({}); run `latlab cleanup` to retry",
            leftovers.join("; ")
        ));
    }
    Ok(ExitCode::SUCCESS)
}
