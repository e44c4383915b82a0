//! `latlab compare RUN RUN… [--format text|markdown|json|html] [-o FILE] [--fail-if EXPR]…
//! [--junit FILE]`: the first run is the baseline. The comparison itself is latlab-core's;
//! rendering is latlab-report's; the gates are latlab-core's `gates`.
//!
//! With `--fail-if`, the checks go with the comparison: a table after the text, a `checks`
//! array in the JSON, a table on stderr for markdown and html (their files stay as they
//! were); `--junit FILE` gets them as JUnit XML. One failed check: exit code 2.

use std::process::ExitCode;

use latlab_core::gates;
use latlab_report::compare::CompareFormat as F;

use crate::cli::{CompareArgs, CompareFormat};
use latlab_engine::rundir;

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
        CompareFormat::Lava => F::Lava,
    };
    if args.fail_if.is_empty() {
        crate::stdout::emit(
            &latlab_report::compare::render(&runs, fmt),
            args.output.as_deref(),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let c = latlab_core::compare::compare(&runs);
    let checks = gates::evaluate(&c, &args.fail_if);
    let table = latlab_report::gates::table(&checks);
    let out = match fmt {
        F::Json => latlab_report::gates::json(&c, &checks),
        F::Text => {
            let mut b = latlab_report::compare::render(&runs, fmt);
            b.extend_from_slice(table.as_bytes());
            b
        }
        F::Markdown | F::Html => latlab_report::compare::render(&runs, fmt),
        F::Lava => latlab_report::lava::checks(&checks),
    };
    // The JUnit file first: a CI job reads it even when stdout is gone.
    if let Some(p) = &args.junit {
        rundir::write_atomic(p, gates::junit(&checks).as_bytes())
            .map_err(|e| anyhow::anyhow!("--junit {}: cannot write: {e}", p.display()))?;
    }
    crate::stdout::emit(&out, args.output.as_deref())?;
    if matches!(fmt, F::Markdown | F::Html) {
        eprint!("{table}");
    }
    for ch in checks.iter().filter(|c| c.too_few_samples) {
        warnln!(
            "--fail-if '{}' on '{}': {}",
            ch.expr,
            ch.run,
            ch.note.as_deref().unwrap_or("too few samples")
        );
    }
    match latlab_report::gates::failed(&checks) {
        None => Ok(ExitCode::SUCCESS),
        Some(line) => {
            eprintln!("latlab: {line}");
            Ok(ExitCode::from(2))
        }
    }
}
