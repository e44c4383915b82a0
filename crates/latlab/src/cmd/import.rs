//! `latlab import FILE [--from …] [--label L] [--results DIR]`: another tool's output becomes
//! a run directory (`run.json`, `histogram.txt`, `summary.txt`), so `report` and `compare`
//! work on it like on latlab's own runs. Parsing is latlab-core's (pure); this only reads the
//! file and writes the directory.
//!
//! Input is bounded: FILE must be a regular file (a FIFO, a device or a socket is refused at
//! once, before any read: `-` reads standard input, where the user can redirect anything),
//! and it is read whole only up to `--max-input-size` (1 GiB).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use latlab_core::import;

use crate::cli::ImportArgs;
use latlab_engine::rundir;

/// Was stdout closed when latlab started (or is it closed now)?
fn stdout_closed() -> bool {
    // SAFETY: F_GETFD only reads the descriptor's flags.
    crate::stdout::was_closed() || unsafe { libc::fcntl(1, libc::F_GETFD) } < 0
}

/// The file's path for messages (control characters escaped: it is the user's text).
fn shown(p: &Path) -> String {
    p.display().to_string().escape_debug().to_string()
}

/// Read at most `max` bytes from `r`; more is an error naming the limit and the flag.
fn read_bounded(r: impl Read, max: u64, name: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    r.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("{name}: cannot read the input to import"))?;
    if bytes.len() as u64 > max {
        bail!("{name}: larger than the --max-input-size limit of {max} bytes; raise it (e.g. --max-input-size 4G) or import a smaller file");
    }
    Ok(bytes)
}

/// The input: standard input for `-`, else a regular file, opened without blocking (a FIFO
/// without a writer would hang an open) and refused unless regular.
fn read_input(path: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        return read_bounded(std::io::stdin().lock(), max, "standard input");
    }
    let name = shown(path);
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .with_context(|| format!("{name}: cannot open the file to import; check the path"))?;
    let meta = f
        .metadata()
        .with_context(|| format!("{name}: cannot stat the file to import"))?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let kind = if ft.is_dir() {
            "a directory"
        } else if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_char_device() {
            "a character device"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        if ft.is_dir() {
            bail!("{name}: is {kind}; give the file to import");
        }
        bail!("{name}: is {kind}, not a regular file; to import from it, use '-' and redirect (latlab import - < {name})");
    }
    if meta.len() > max {
        bail!(
            "{name}: {} bytes, larger than the --max-input-size limit of {max} bytes; raise it (e.g. --max-input-size 4G) or import a smaller file",
            meta.len()
        );
    }
    // A regular file never blocks, so O_NONBLOCK changes nothing from here on.
    read_bounded(f, max, &name)
}

pub fn import(args: ImportArgs) -> anyhow::Result<ExitCode> {
    // The run directory's path goes to stdout: with stdout closed, fail before anything is
    // written (and before a file we open takes descriptor 1).
    if stdout_closed() {
        bail!("stdout is closed: latlab import prints the new run directory there; run it with stdout open (e.g. > dir.txt)");
    }
    let max = args.max_input_size.0;
    let bytes = read_input(&args.file, max)?;
    let from = args.from.0;
    let name = if args.file.as_os_str() == "-" {
        "stdin".to_string()
    } else {
        shown(&args.file)
    };
    let mut record = import::import(&bytes, from, &name)?;
    drop(bytes);
    record.label = match &args.label {
        Some(l) => l.clone(),
        None if args.file.as_os_str() == "-" => "stdin".into(),
        None => args
            .file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "import".into()),
    };
    // The tool's command line as recorded, minus any password in it.
    if let Some(c) = &record.command_line {
        record.command_line = Some(latlab_core::secrets::mask(c).into_owned());
    }
    let (now, _) = rundir::utc_now();
    record
        .notes
        .push(format!("imported by latlab from {name} at {now}"));
    // Its id: derived from the record's content (the same input, label and time give the
    // same id).
    record.run_id = Some(latlab_store::derived_run_id(&record.to_json()));
    let need = record.to_json().len() as u64 * 4
        + rundir::estimate_run_bytes(record.cpus.len(), 0, 10_000_000, 0);
    let dir = rundir::create_run_dir_for(&args.results, &record.label, need)?;
    rundir::write_run(&dir, &record, true)?;
    super::db::record_dir(&args.record_db, &dir, None);
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{}", dir.display()).and_then(|()| out.flush()) {
        bail!(
            "cannot write to stdout ({e}); the run directory was written: {}",
            shown(&dir)
        );
    }
    Ok(ExitCode::SUCCESS)
}
