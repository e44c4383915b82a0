//! `latlab compare RUN RUN… [--format text|markdown|json|html] [-o FILE]`: the first run is
//! the baseline. The comparison itself is latlab-core's; rendering is latlab-report's.

use std::process::ExitCode;

use latlab_report::compare::CompareFormat as F;

use crate::cli::{CompareArgs, CompareFormat};
use crate::rundir;

pub fn compare(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let runs = args
        .runs
        .iter()
        .map(|r| super::db::load_run_arg(r, &args.db))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (m, p) in runs.iter().zip(&args.runs) {
        if m.total.samples == 0 {
            anyhow::bail!(
                "{}: the run has no samples, there is nothing to compare",
                p.display()
            );
        }
    }
    let fmt = match args.format {
        CompareFormat::Text => F::Text,
        CompareFormat::Markdown => F::Markdown,
        CompareFormat::Json => F::Json,
        CompareFormat::Html => F::Html,
    };
    rundir::emit(
        &latlab_report::compare::render(&runs, fmt),
        args.output.as_deref(),
    )?;
    Ok(ExitCode::SUCCESS)
}
