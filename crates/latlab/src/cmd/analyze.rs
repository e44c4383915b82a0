//! `latlab analyze TRACE`: a saved trace read and analyzed by the engine
//! (`latlab_engine::analyze`), rendered by `latlab_report::analyze`.

use std::process::ExitCode;

use crate::cli::{AnalyzeArgs, RunFormat};

pub fn analyze(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    if args.print_trace {
        latlab_engine::analyze::trace_text(&args.trace, &mut |b| {
            crate::stdout::write(b).map_err(|e| {
                anyhow::anyhow!(
                    "cannot write the trace to stdout: {}",
                    format!("{e:#}").trim_start_matches("cannot write to stdout: ")
                )
            })
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let threshold = args.threshold.map(|t| t.0);
    let a = latlab_engine::analyze::analyze_file(&args.trace, threshold)?;
    let out = match args.format {
        RunFormat::Json => {
            let mut v = serde_json::to_vec_pretty(&latlab_report::analyze::json(&a)).expect("json");
            v.push(b'\n');
            v
        }
        RunFormat::Text => latlab_report::analyze::text(&a).into_bytes(),
    };
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Write the analysis to stdout, all of it or an error (see `crate::stdout`).
fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    crate::stdout::write(bytes).map_err(|e| {
        anyhow::anyhow!(
            "cannot write the analysis to stdout: {}",
            format!("{e:#}").trim_start_matches("cannot write to stdout: ")
        )
    })
}
