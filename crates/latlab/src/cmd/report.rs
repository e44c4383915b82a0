//! `latlab report RUN [--format …] [-o FILE]`.

use std::process::ExitCode;

use crate::cli::{ReportArgs, ReportFormat};
use crate::rundir;

pub fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let model = super::db::load_run_arg(&args.run, &args.db)?;
    if args.format == ReportFormat::Cyclictest && model.cpus.is_empty() {
        anyhow::bail!(
            "{}: no latency was measured (a `latlab profile --no-measure` run has only the profile): the cyclictest format has no histogram to show; use --format text, markdown, json or html",
            args.run.display()
        );
    }
    let fmt = match args.format {
        ReportFormat::Text => latlab_report::Format::Text,
        ReportFormat::Markdown => latlab_report::Format::Markdown,
        ReportFormat::Json => latlab_report::Format::Json,
        ReportFormat::Html => latlab_report::Format::Html,
        ReportFormat::Cyclictest => latlab_report::Format::Cyclictest,
    };
    rundir::emit(&latlab_report::render(&model, fmt), args.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}
