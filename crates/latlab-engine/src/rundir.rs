//! The run directory: `latlab-results/<UTC time>-<label>/` holding `run.json` (the record),
//! `histogram.txt` (cyclictest format), `summary.txt` (the text report), and what other parts
//! add (`loads/`, `spikes/NNN/`). The binary is the only writer of files; every file is
//! written atomically (temp file with an unpredictable name in the same directory, opened
//! O_EXCL|O_NOFOLLOW, fsync, rename: [`latlab_sys::safefile`]), so a reader — or a run killed
//! mid-write — sees the previous or the next version, never half of one. What is not a regular
//! file (`-o /dev/null`, a FIFO, a symlink) is never replaced.
//!
//! Before anything is measured, the results filesystem is checked to hold the record
//! ([`estimate_run_bytes`], twice over); if the final write still fails, the record is kept in
//! the runtime directory and the error says where.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use latlab_core::model::RunModel;
use latlab_core::record::RunRecord;

/// Write `bytes` to `path`: a regular file atomically, a device/FIFO/symlink written through,
/// never replaced (see [`latlab_sys::safefile::write_atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    latlab_sys::safefile::write_atomic(path, bytes)
}

/// Bytes a run's files may take (run.json, histogram.txt, summary.txt, report.html), an upper
/// estimate: per CPU, every linear histogram bucket used (a histogram.txt row share, a sparse
/// `[lower_ns, count]` pair and its HTML), per CPU-second a maximum (JSON, HTML plot), per
/// traced spike its record; plus a fixed part (inventory, summary, HTML skeleton). The
/// `spikes/NNN/trace.txt` copies are not counted: they are best-effort and never hold the
/// measurement.
pub fn estimate_run_bytes(cpus: usize, duration_ns: u64, hist_limit_ns: u64, spikes: u32) -> u64 {
    let cpus = cpus.max(1) as u64;
    let buckets = hist_limit_ns / 1000 + 200;
    let secs = duration_ns / 1_000_000_000 + 1;
    256 * 1024 + cpus * buckets * 48 + cpus * secs * 256 + spikes as u64 * 8 * 1024
}

/// Free bytes and inodes for an unprivileged writer on the filesystem of `dir`.
fn free_space(dir: &Path) -> std::io::Result<(u64, Option<u64>)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("path holds a NUL byte"))?;
    // SAFETY: statvfs fills the struct; c is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let bytes = st.f_bavail as u64 * st.f_frsize as u64;
    // Filesystems without an inode limit report 0 files.
    let inodes = (st.f_files != 0).then_some(st.f_favail as u64);
    Ok((bytes, inodes))
}

/// Error (before anything is measured) when `results` cannot hold `need` bytes twice over (a
/// file and its replacement coexist while it is rewritten).
pub fn check_space(results: &Path, need: u64) -> crate::Result<()> {
    let (free, inodes) = free_space(results).with_context(|| {
        format!(
            "--results {}: cannot read the free space there; choose another directory with --results DIR",
            results.display()
        )
    })?;
    let want = need.saturating_mul(2);
    if free < want || inodes.is_some_and(|i| i < 16) {
        bail!(
            "--results {}: not enough free space for the run's record (needs about {} KiB, {} KiB free); free some space or choose another directory with --results DIR",
            results.display(),
            want.div_ceil(1024),
            free / 1024
        );
    }
    Ok(())
}

/// A private scratch directory under the temp directory (mode 0700, an unpredictable name
/// made with O_EXCL semantics), removed when dropped unless kept: nothing planted in /tmp
/// beforehand is ever written through.
pub fn private_temp_dir(prefix: &str) -> crate::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    // tempfile's default is 0777 less the umask (0755 here): the mode is asked for.
    Ok(tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .with_context(|| {
            format!(
                "cannot create a private directory in {}",
                std::env::temp_dir().display()
            )
        })?)
}

/// Current UTC time: (RFC 3339 for records, compact `20261122T041800Z` for directory names).
pub fn utc_now() -> (String, String) {
    let now = jiff::Timestamp::now();
    (
        now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        now.strftime("%Y%m%dT%H%M%SZ").to_string(),
    )
}

/// The latest run directory in `results`: run directories are named by their start time in UTC
/// ([`utc_now`]'s `20261128T010258Z`, then `-label`), so the greatest such name holding a
/// run.json. None when there is none (or `results` cannot be read: the caller says so).
pub fn latest_run_dir(results: &Path) -> std::io::Result<Option<PathBuf>> {
    let latest = std::fs::read_dir(results)?
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.as_encoded_bytes();
            n.len() > 16
                && n[..8].iter().all(u8::is_ascii_digit)
                && n[8] == b'T'
                && n[9..15].iter().all(u8::is_ascii_digit)
                && n[15] == b'Z'
                && e.file_type().is_ok_and(|t| t.is_dir())
                && e.path().join("run.json").is_file()
        })
        .map(|e| e.path())
        .max();
    Ok(latest)
}

/// The latest run in `results` (`report` without RUN), or what to give instead.
pub fn latest_run(results: &Path) -> crate::Result<PathBuf> {
    let what = "give a run directory, its run.json or a run id, or --results DIR";
    match latest_run_dir(results) {
        Ok(Some(d)) => Ok(d),
        Ok(None) => Err(crate::Error::msg(format!(
            "no RUN given and no run in {}: {what}",
            results.display()
        ))),
        Err(e) => Err(crate::Error::msg(format!(
            "no RUN given and {} cannot be read ({e}): {what}",
            results.display()
        ))),
    }
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
pub fn create_run_dir(results: &Path, label: &str) -> crate::Result<PathBuf> {
    create_run_dir_for(results, label, estimate_run_bytes(1, 0, 10_000_000, 0))
}

/// [`create_run_dir`] for a record of about `need` bytes ([`estimate_run_bytes`]): refused,
/// before anything is created, when the filesystem cannot hold it.
pub fn create_run_dir_for(results: &Path, label: &str, need: u64) -> crate::Result<PathBuf> {
    fs::create_dir_all(results).with_context(|| {
        format!(
            "--results {}: cannot create the results directory; choose a writable one with --results DIR",
            results.display()
        )
    })?;
    check_space(results, need)?;
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
                return Err(e)
                    .with_context(|| {
                        format!(
                            "--results {}: cannot create a run directory there; choose a writable one with --results DIR",
                            results.display()
                        )
                    })
                    .map_err(Into::into)
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

/// Write the record (a checkpoint, or the final record with its companion files). When the
/// final run.json cannot be written (a full disk), the record is kept in the runtime directory
/// ([`keep_elsewhere`]) and the error says where.
pub fn write_run(dir: &Path, record: &RunRecord, final_files: bool) -> crate::Result<()> {
    let json = record.to_json();
    // A checkpoint must outlive latlab's process (a SIGKILL), which the page cache does; its
    // fsync put the collector in the kernel for ~0.8 ms every 10 s, on a measured CPU when
    // every CPU is measured. The final record is synced.
    let written = if final_files {
        write_atomic(&dir.join("run.json"), &json)
    } else {
        latlab_sys::safefile::write_atomic_unsynced(&dir.join("run.json"), &json)
    };
    if let Err(e) = written {
        let what = format!("cannot write {}: {e}", dir.join("run.json").display());
        if !final_files {
            bail!(what);
        }
        match keep_elsewhere(dir, &json) {
            Ok(kept) => bail!(
                "{what}; the record was kept in {} (move it into a run directory, e.g. `mkdir R && mv {} R/run.json`, then `latlab report R`)",
                kept.display(),
                kept.display()
            ),
            Err(e2) => bail!("{what}; keeping it elsewhere failed too: {e2}"),
        }
    }
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

/// Keep a record that could not be written to its run directory: in the runtime directory
/// (`/run/latlab`, `$TMPDIR/latlab-<uid>`, or `LATLAB_RUNTIME_DIR`; private, 0700), else in
/// `$TMPDIR`, as `<run dir name>.run.json`.
pub fn keep_elsewhere(dir: &Path, json: &[u8]) -> std::io::Result<PathBuf> {
    let name = format!(
        "{}.run.json",
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into())
    );
    let rt = latlab_sys::ledger::runtime_dir();
    let first = latlab_sys::safefile::ensure_private_dir(&rt).and_then(|()| {
        let p = rt.join(&name);
        latlab_sys::safefile::write_atomic_mode(&p, json, 0o600).map(|()| p)
    });
    first.or_else(|_| {
        let p = std::env::temp_dir().join(&name);
        // A fresh name only: $TMPDIR is shared, never write into what someone put there.
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&p)?;
        if let Err(e) = f.write_all(json).and_then(|()| f.sync_all()) {
            let _ = fs::remove_file(&p);
            return Err(e);
        }
        Ok(p)
    })
}

/// Path of the run.json a RUN argument names (a run directory or the file itself).
pub fn run_json_path(run: &Path) -> crate::Result<PathBuf> {
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

/// The largest run.json read by default: 512 MiB. A day on 128 CPUs writes ~90 MB; a bigger
/// file is not latlab's (`truncate -s 3G run.json` took 3 GB and 15 s to refuse).
/// `LATLAB_MAX_RUN_JSON` (a size: `2G`) raises it.
const MAX_RUN_JSON: u64 = 512 << 20;

fn max_run_json() -> anyhow::Result<u64> {
    match std::env::var("LATLAB_MAX_RUN_JSON") {
        Ok(v) => latlab_core::units::parse_size(&v)
            .map_err(|e| anyhow::anyhow!("LATLAB_MAX_RUN_JSON: {e}")),
        Err(_) => Ok(MAX_RUN_JSON),
    }
}

/// A run.json's bytes, bounded: a regular file of at most [`MAX_RUN_JSON`] that starts as a
/// JSON object does (its first 4 KiB are looked at before the rest is read, so a file of
/// zeros is refused at once whatever its size).
pub fn read_run_json(p: &Path) -> crate::Result<Vec<u8>> {
    use std::io::Read;
    let max = max_run_json()?;
    let mut head = [0u8; 4096];
    let n = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(p)
        .and_then(|f| {
            if !f.metadata()?.is_file() {
                return Ok(0);
            }
            (&f).read(&mut head)
        })
        .with_context(|| format!("cannot read {}", p.display()))?;
    if let Some(&c) = head[..n].iter().find(|c| !c.is_ascii_whitespace()) {
        if c != b'{' {
            bail!(
                "{}: not a latlab run record (it does not start with a JSON object); give a run.json written by latlab",
                p.display()
            );
        }
    }
    latlab_sys::safefile::read_regular(p, max).map_err(|e| {
        if e.kind() == std::io::ErrorKind::FileTooLarge {
            crate::Error::msg(format_args!(
                "{}: {e}: no run.json latlab writes is that large; if it is one, raise the limit with LATLAB_MAX_RUN_JSON=2G",
                p.display()
            ))
        } else {
            crate::Error::msg(format_args!("cannot read {}: {e}", p.display()))
        }
    })
}

/// Read and validate a run.
pub fn load_record(run: &Path) -> crate::Result<RunRecord> {
    let p = run_json_path(run)?;
    let bytes = read_run_json(&p)?;
    RunRecord::from_json(&bytes)
        .map_err(|e| crate::Error::msg(format_args!("{}: {e}", p.display())))
}

/// Read a run and derive its model.
pub fn load_run(run: &Path) -> crate::Result<RunModel> {
    let r = load_record(run)?;
    let p = run_json_path(run)?;
    Ok(RunModel::new(r).with_context(|| format!("{}", p.display()))?)
}

/// The largest `profile/series.bin` read (256 CPUs of 2²⁰ pixels and the switch points fit).
const MAX_SERIES_BYTES: u64 = 512 << 20;

/// A profile run's heat-map series (run.json `profile.series`, a file inside the run
/// directory): None when the run has none or is not a directory here (a database id).
pub fn profile_series(
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
            .all(|c| matches!(c, std::path::Component::Normal(_)))
    {
        return Some(Err(format!("{rel}: not a path inside the run directory")));
    }
    let p = dir.join(rel);
    let read = || -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&p)?;
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_SERIES_BYTES + 1), &mut b)?;
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

#[cfg(test)]
mod private_temp_dir_tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_temp_dir_is_0700_whatever_the_umask() {
        let d = super::private_temp_dir("latlab-test-").unwrap();
        let mode = std::fs::metadata(d.path()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "{mode:o}");
    }
}
