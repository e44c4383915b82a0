//! `latlab report RUN [--format …] [-o FILE]`.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path};
use std::process::ExitCode;

use crate::cli::{ReportArgs, ReportFormat};

pub fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let run = match &args.run {
        Some(r) => r.clone(),
        None => {
            let r = latest_run(&args.results)?;
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
    if args.format == ReportFormat::Cyclictest && model.cpus.is_empty() {
        anyhow::bail!(
            "{}: no latency was measured (a `latlab profile --no-measure` run has only the profile): the cyclictest format has no histogram to show; use --format text, markdown, json or html",
            run.display()
        );
    }
    let fmt = match args.format {
        ReportFormat::Text => latlab_report::Format::Text,
        ReportFormat::Markdown => latlab_report::Format::Markdown,
        ReportFormat::Json => latlab_report::Format::Json,
        ReportFormat::Html => latlab_report::Format::Html,
        ReportFormat::Cyclictest => latlab_report::Format::Cyclictest,
    };
    let bytes = if fmt == latlab_report::Format::Html {
        let series = profile_series(&run, &model);
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

/// The latest run in `results` (RUN not given), or what to give instead.
fn latest_run(results: &Path) -> anyhow::Result<std::path::PathBuf> {
    let what = "give a run directory, its run.json or a run id, or --results DIR";
    match latlab_engine::rundir::latest_run_dir(results) {
        Ok(Some(d)) => Ok(d),
        Ok(None) => anyhow::bail!("no RUN given and no run in {}: {what}", results.display()),
        Err(e) => anyhow::bail!(
            "no RUN given and {} cannot be read ({e}): {what}",
            results.display()
        ),
    }
}

/// The largest `profile/series.bin` read (256 CPUs of 2²⁰ pixels and the switch points fit).
const MAX_SERIES_BYTES: u64 = 512 << 20;

/// A profile run's heat-map series (run.json `profile.series`, a file inside the run
/// directory): None when the run has none or is not a directory here (a database id).
fn profile_series(
    run: &Path,
    model: &latlab_core::model::RunModel,
) -> Option<Result<latlab_core::profile::Series, String>> {
    let rel = model.record.profile.as_ref()?.series.as_deref()?;
    let meta = std::fs::symlink_metadata(run).ok()?;
    let dir = if meta.is_dir() {
        run.to_path_buf()
    } else {
        run.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    // run.json is input: only a path inside the run directory is read.
    if rel.is_empty()
        || !Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
    {
        return Some(Err(format!("{rel}: not a path inside the run directory")));
    }
    let p = dir.join(rel);
    let read = || -> std::io::Result<Vec<u8>> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&p)?;
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut b = Vec::new();
        f.take(MAX_SERIES_BYTES + 1).read_to_end(&mut b)?;
        if b.len() as u64 > MAX_SERIES_BYTES {
            return Err(std::io::Error::other(format!(
                "larger than {} MiB",
                MAX_SERIES_BYTES >> 20
            )));
        }
        Ok(b)
    };
    Some(match read() {
        Ok(b) => latlab_core::profile::Series::from_bytes(&b).ok_or_else(|| {
            format!("{rel}: not a series file this latlab reads (damaged, or from a newer latlab)")
        }),
        Err(e) => Err(format!("{rel}: {e}")),
    })
}
