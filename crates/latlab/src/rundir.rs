//! The run directory: `latlab-results/<UTC time>-<label>/` holding `run.json` (the record),
//! `histogram.txt` (cyclictest format), `summary.txt` (the text report), and what other parts
//! add (`loads/`, `spikes/NNN/`). The binary is the only writer of files; every file is
//! written atomically (temp file in the same directory, fsync, rename), so a reader — or a
//! run killed mid-write — sees the previous or the next version, never half of one.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use latlab_core::model::RunModel;
use latlab_core::record::{RecordError, RunRecord};

/// Write `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let mut f = fs::File::create(&tmp)?;
    // In short calls: checkpoints are written while the measurement runs (latlab_sys::shortio).
    latlab_sys::shortio::write_chunked(&mut f, bytes, latlab_sys::shortio::WRITE_CHUNK)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, path)
}

/// Current UTC time: (RFC 3339 for records, compact `20261122T041800Z` for directory names).
pub fn utc_now() -> (String, String) {
    let now = jiff::Timestamp::now();
    (
        now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        now.strftime("%Y%m%dT%H%M%SZ").to_string(),
    )
}

/// A label made safe for a directory name.
pub fn sanitize_label(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    if s.is_empty() {
        "run".into()
    } else {
        s
    }
}

/// Create a fresh run directory under `results`, checking that it can be written, before
/// anything is measured.
pub fn create_run_dir(results: &Path, label: &str) -> anyhow::Result<PathBuf> {
    fs::create_dir_all(results).with_context(|| {
        format!(
            "--results {}: cannot create the results directory; choose a writable one with --results DIR",
            results.display()
        )
    })?;
    let (_, compact) = utc_now();
    let base = format!("{compact}-{}", sanitize_label(label));
    let mut dir = results.join(&base);
    let mut n = 2;
    loop {
        match fs::create_dir(&dir) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                dir = results.join(format!("{base}-{n}"));
                n += 1;
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "--results {}: cannot create a run directory there; choose a writable one with --results DIR",
                        results.display()
                    )
                })
            }
        }
    }
    write_atomic(&dir.join(".probe"), b"")
        .and_then(|()| fs::remove_file(dir.join(".probe")))
        .with_context(|| {
            format!(
                "--results {}: the directory is not writable; choose another with --results DIR",
                results.display()
            )
        })?;
    Ok(dir)
}

/// Write the record (a checkpoint, or the final record with its companion files).
pub fn write_run(dir: &Path, record: &RunRecord, final_files: bool) -> anyhow::Result<()> {
    write_atomic(&dir.join("run.json"), &record.to_json())
        .with_context(|| format!("cannot write {}", dir.join("run.json").display()))?;
    if final_files {
        let model = RunModel::new(record.clone())?;
        for (name, fmt) in [
            ("histogram.txt", latlab_report::Format::Cyclictest),
            ("summary.txt", latlab_report::Format::Text),
            ("report.html", latlab_report::Format::Html),
        ] {
            write_atomic(&dir.join(name), &latlab_report::render(&model, fmt))
                .with_context(|| format!("cannot write {}", dir.join(name).display()))?;
        }
    }
    Ok(())
}

/// Path of the run.json a RUN argument names (a run directory or the file itself).
pub fn run_json_path(run: &Path) -> anyhow::Result<PathBuf> {
    if run.is_dir() {
        let p = run.join("run.json");
        if !p.is_file() {
            bail!(
                "{} is not a run directory (no run.json in it): give a directory written by `latlab run` or `latlab import`",
                run.display()
            );
        }
        Ok(p)
    } else if run.is_file() {
        Ok(run.to_path_buf())
    } else {
        bail!(
            "{}: no such run directory or file; give a directory written by `latlab run` or `latlab import`",
            run.display()
        )
    }
}

/// Read and validate a run.
pub fn load_record(run: &Path) -> anyhow::Result<RunRecord> {
    let p = run_json_path(run)?;
    let bytes = fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
    RunRecord::from_json(&bytes).map_err(|e| match e {
        RecordError::Schema { .. } => anyhow::anyhow!("{}: {e}", p.display()),
        e => anyhow::anyhow!("{}: {e}", p.display()),
    })
}

/// Read a run and derive its model.
pub fn load_run(run: &Path) -> anyhow::Result<RunModel> {
    let r = load_record(run)?;
    let p = run_json_path(run)?;
    RunModel::new(r).with_context(|| format!("{}", p.display()))
}

/// Where rendered bytes go: a file (atomically) or stdout.
pub fn emit(bytes: &[u8], output: Option<&Path>) -> anyhow::Result<()> {
    match output {
        Some(p) => {
            write_atomic(p, bytes).with_context(|| format!("-o {}: cannot write", p.display()))
        }
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(bytes).and_then(|()| out.flush()) {
                Ok(()) => Ok(()),
                // A closed pipe (`| head`) is not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
    }
}
