//! `latlab db push|pull|list` and `latlab history`, and what every command shares with the results database
//! (latlab-store): recording a run directory once it is written (`run`, `import`, `scenario`),
//! and reading a run by id (`report`, `compare`).
//!
//! A database failure never loses a run: the run directory is written first, and a failure to
//! record it is a warning that says how to push it later.

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use latlab_core::escape::escape;
use latlab_core::model::RunModel;
use latlab_core::record::RunRecord;
use latlab_store::{Filter, Store};

use crate::cli::{DbArgs, DbCommand, DbUrl, HistoryArgs, HistoryFormat, RecordDb};
use latlab_engine::rundir;

/// Open the database `url` (None: the default SQLite file).
pub fn open(url: Option<&str>) -> anyhow::Result<Box<dyn Store>> {
    latlab_store::open(url).map_err(|e| anyhow!("{e}"))
}

/// Record the run directory `dir` (its run.json as written) unless `--no-db`; a failure is a
/// warning (see [`latlab_engine::store::record_dir`]).
pub fn record_dir(db: &RecordDb, dir: &Path, cancel: Option<Arc<AtomicBool>>) {
    latlab_engine::store::record_dir(&db.target(), dir, cancel)
}

/// Does `s` look like a run id (or a prefix of one)?
fn looks_like_id(s: &str) -> bool {
    s.len() >= 4 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// A RUN argument: a run directory or run.json when that path exists, else a run id in the
/// database.
pub fn load_run_arg(run: &Path, db: &DbUrl) -> anyhow::Result<RunModel> {
    if std::fs::symlink_metadata(run).is_ok() {
        return Ok(rundir::load_run(run)?);
    }
    let Some(id) = run.to_str().filter(|s| looks_like_id(s)) else {
        return Ok(rundir::load_run(run)?);
    };
    let mut s = open(db.db.as_deref()).with_context(|| {
        format!("{id}: no such run directory; looking it up as a run id failed")
    })?;
    let (full, bytes) = s.get(id).map_err(|e| match e {
        latlab_store::StoreError::NotFound(..) => anyhow!(
            "{id}: no such run directory or file, and no run with that id in the results database {}; give a run directory, or an id `latlab history` lists",
            s.shown()
        ),
        e => anyhow!("{e}"),
    })?;
    let r = RunRecord::from_json(&bytes).map_err(|e| anyhow!("run {full} in the database: {e}"))?;
    RunModel::new(r).with_context(|| format!("run {full} in the database"))
}

pub fn db(a: DbArgs) -> anyhow::Result<ExitCode> {
    match a.command {
        DbCommand::Push { runs, db } => push(&runs, &db),
        DbCommand::Pull { id, output, db } => pull(&id, &output, &db),
        DbCommand::List(h) => history(h),
    }
}

/// `latlab history` (and `db list`): the runs in the database, oldest first, with p99 /
/// p99.9 / max / missed; the HTML page draws long-term plots (`latlab_report::history`).
pub fn history(a: HistoryArgs) -> anyhow::Result<ExitCode> {
    let since_unix = a
        .since
        .map(|d| jiff::Timestamp::now().as_second() - (d.0 / 1_000_000_000) as i64);
    let f = Filter {
        machine: a.machine.clone(),
        kernel: a.kernel.clone(),
        label: a.label.clone(),
        since_unix,
    };
    let mut s = open(a.db.db.as_deref())?;
    let rows = s.list(&f).map_err(|e| anyhow::anyhow!("{e}"))?;
    let out = match a.format {
        HistoryFormat::Text => latlab_report::history::text(&rows),
        HistoryFormat::Json => latlab_report::history::json(&s.shown(), &rows),
        HistoryFormat::Html => latlab_report::history::html(&s.shown(), &rows),
    };
    crate::stdout::emit(&out, a.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

fn push(runs: &[std::path::PathBuf], db: &DbUrl) -> anyhow::Result<ExitCode> {
    // Every argument is read and checked whole — its rows built, as the database will store
    // them — before the database is touched.
    let mut all = Vec::new();
    for r in runs {
        let p = rundir::run_json_path(r)?;
        let bytes = rundir::read_run_json(&p)?;
        let prepared = latlab_store::prepare(&bytes)
            .map_err(|e| anyhow!("{}: {e}", escape(&p.display().to_string())))?;
        all.push((p, prepared));
    }
    let mut s = open(db.db.as_deref())?;
    let (mut added, mut present) = (0, 0);
    for (p, prepared) in &all {
        let r = s
            .store(prepared)
            .map_err(|e| anyhow!("{}: {e}", escape(&p.display().to_string())))?;
        if r.added {
            added += 1;
        } else {
            present += 1;
        }
    }
    outln!("{added} added, {present} already present ({})", s.shown())?;
    Ok(ExitCode::SUCCESS)
}

fn pull(id: &str, out: &Path, db: &DbUrl) -> anyhow::Result<ExitCode> {
    let mut s = open(db.db.as_deref())?;
    let (full, bytes) = s.get(id).map_err(|e| anyhow!("{e}"))?;
    // A run an older latlab stored with a password in it comes back without.
    let bytes = latlab_core::secrets::mask_json(&bytes).into_owned();
    let record =
        RunRecord::from_json(&bytes).map_err(|e| anyhow!("run {full} in the database: {e}"))?;
    let model = RunModel::new(record).with_context(|| format!("run {full} in the database"))?;
    let shown = escape(&out.display().to_string());
    std::fs::create_dir(out).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            anyhow!("-o {shown}: already exists; give a new directory to write the run to")
        } else {
            anyhow!("-o {shown}: cannot create the run directory: {e}")
        }
    })?;
    // run.json exactly as stored; the companion files rendered from it, as `run` writes them.
    rundir::write_atomic(&out.join("run.json"), &bytes)
        .with_context(|| format!("cannot write {}", out.join("run.json").display()))?;
    for (name, fmt) in [
        ("histogram.txt", latlab_report::Format::Cyclictest),
        ("summary.txt", latlab_report::Format::Text),
        ("report.html", latlab_report::Format::Html),
    ] {
        rundir::write_atomic(&out.join(name), &latlab_report::render(&model, fmt))
            .with_context(|| format!("cannot write {}", out.join(name).display()))?;
    }
    outln!("{}", out.display())?;
    Ok(ExitCode::SUCCESS)
}
