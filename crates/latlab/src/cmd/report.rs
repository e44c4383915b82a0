//! `latlab report RUN [--format …] [-o FILE]`.

use std::process::ExitCode;

use crate::cli::{ReportArgs, ReportFormat};

pub fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let run = match &args.run {
        Some(r) => r.clone(),
        None => {
            let r = latlab_engine::rundir::latest_run(&args.results)?;
            // Said on stderr: stdout is the report (a file or a pipe).
            eprintln!(
                "latlab: no RUN given: reporting the latest run in {}, {}",
                latlab_core::escape::escape(&args.results.display().to_string()),
                latlab_core::escape::escape(&r.display().to_string())
            );
            r
        }
    };
    let model = super::db::load_run_arg(&run, &args.db)?;
    let fmt = match args.format {
        ReportFormat::Text => latlab_report::Format::Text,
        ReportFormat::Markdown => latlab_report::Format::Markdown,
        ReportFormat::Json => latlab_report::Format::Json,
        ReportFormat::Html => latlab_report::Format::Html,
        ReportFormat::Cyclictest => latlab_report::Format::Cyclictest,
        ReportFormat::RtTestsJson => latlab_report::Format::RtTestsJson,
        ReportFormat::Lava => latlab_report::Format::Lava,
    };
    if let Some(why) = latlab_report::refusal(&model, fmt) {
        anyhow::bail!("{}: {why}", run.display());
    }
    let bytes = if fmt == latlab_report::Format::Html {
        let series = latlab_engine::rundir::profile_series(&run, &model);
        if let Some(Err(e)) = &series {
            warnln!("{}: no heat maps: {e}", run.display());
        }
        latlab_report::html::render_with(
            &model,
            series.as_ref().map(|r| r.as_ref().map_err(Clone::clone)),
        )
    } else {
        latlab_report::render(&model, fmt)
    };
    crate::stdout::emit(&bytes, args.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}
