//! `latlab import FILE [--from …] [--label L] [--results DIR]`: another tool's output becomes
//! a run directory (`run.json`, `histogram.txt`, `summary.txt`), so `report` and `compare`
//! work on it like on latlab's own runs. Parsing is latlab-core's (pure); this only reads the
//! file and writes the directory.

use std::process::ExitCode;

use anyhow::Context;
use latlab_core::import::{self, From};

use crate::cli::{ImportArgs, ImportFrom};
use crate::rundir;

pub fn import(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&args.file).with_context(|| {
        format!(
            "{}: cannot read the file to import; check the path",
            args.file.display()
        )
    })?;
    let from = match args.from {
        ImportFrom::Auto => From::Auto,
        ImportFrom::Cyclictest => From::Cyclictest,
        ImportFrom::CyclictestJson => From::CyclictestJson,
        ImportFrom::CyclictestVerbose => From::CyclictestVerbose,
        ImportFrom::Rtla => From::Rtla,
        ImportFrom::Realfeel => From::Realfeel,
    };
    let name = args.file.display().to_string();
    let mut record = import::import(&bytes, from, &name)?;
    record.label = match &args.label {
        Some(l) => l.clone(),
        None => args
            .file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "import".into()),
    };
    let (now, _) = rundir::utc_now();
    record
        .notes
        .push(format!("imported by latlab from {name} at {now}"));
    let need = record.to_json().len() as u64 * 4
        + rundir::estimate_run_bytes(record.cpus.len(), 0, 10_000_000, 0);
    let dir = rundir::create_run_dir_for(&args.results, &record.label, need)?;
    rundir::write_run(&dir, &record, true)?;
    println!("{}", dir.display());
    Ok(ExitCode::SUCCESS)
}
