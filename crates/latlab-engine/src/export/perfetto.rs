//! A run's traces as Perfetto's protobuf trace (`latlab_report::perfetto`, which decodes them):
//! every traced spike's window (`spikes/NNN/trace.dat`, else its `trace.txt`) with the spike as
//! a slice, and a profile's raw window (`profile/trace.dat`); `sched_migrate_task` events
//! included, and where the kernel lost events as slices "events lost" on a track per CPU (a
//! window's marks between the events around them; the profile's per-CPU totals from run.json
//! over the profile's span), the counts as args.

use std::path::{Component, Path};

use latlab_report::perfetto::{self, Builder};

/// What [`export`] made.
pub struct Export {
    /// The protobuf trace.
    pub bytes: Vec<u8>,
    /// Windows exported (spikes and the profile's).
    pub windows: usize,
    /// Events written, and events of other kinds left out.
    pub written: u64,
    pub skipped: u64,
    /// Windows that could not be read, one line each (warnings: the others were exported).
    pub problems: Vec<String>,
}

/// The run directory of `run` (a directory, or its run.json: its parent, `.` for a bare name).
pub fn run_dir(run: &Path) -> std::path::PathBuf {
    match run.parent() {
        _ if run.is_dir() => run.to_path_buf(),
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => ".".into(),
    }
}

/// The run at `run` as a Perfetto trace; an error when it has no window to export.
pub fn export(run: &Path) -> crate::Result<Export> {
    let rec = crate::rundir::load_record(run)?;
    let dir = run_dir(run);
    let mut b = Builder::default();
    let mut windows = 0usize;
    let mut problems = Vec::new();
    for (i, s) in rec.spikes.iter().enumerate() {
        let Some(rel) = s.trace_file.as_deref() else {
            continue;
        };
        let rel = Path::new(rel);
        // run.json is input: only a path inside the run directory is read.
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            problems.push(format!(
                "spike {}: trace path outside the run directory",
                i + 1
            ));
            continue;
        }
        let p = dir.join(rel);
        let dat = p.with_file_name("trace.dat");
        let r = if dat.is_file() {
            window_dat(&dat, MAX_SPIKE_TRACE, &mut b)
        } else {
            window_text(&p, &mut b)
        };
        match r {
            Ok(()) => {
                windows += 1;
                perfetto::spike(&mut b, i, s);
            }
            Err(e) => problems.push(format!("spike {}: {e:#}", i + 1)),
        }
    }
    let prof = dir.join("profile/trace.dat");
    if prof.is_file() {
        match window_dat(&prof, crate::profile::MAX_WINDOW + (1 << 20), &mut b) {
            Ok(()) => windows += 1,
            Err(e) => problems.push(format!("profile: {e:#}")),
        }
    }
    if let Some(p) = &rec.profile {
        perfetto::profile_losses(&mut b, p);
    }
    if windows == 0 {
        let why = problems
            .first()
            .map_or(String::new(), |p| format!(" ({p})"));
        bail!(
            "{}: no traces to export{why}: record spikes with `latlab run --trace-threshold T` or a profile with `latlab profile`",
            latlab_core::escape::escape(&run.display().to_string())
        );
    }
    let (written, skipped) = (b.written, b.skipped);
    Ok(Export {
        bytes: b.finish(),
        windows,
        written,
        skipped,
        problems,
    })
}

/// The largest spike trace file exported: 256 MiB. latlab keeps at most 128 MiB of spike files
/// in a run; a larger one is not a spike's (a 1 GB trace.dat was read whole). A profile's
/// window may be as large as `--profile-window` allows.
const MAX_SPIKE_TRACE: u64 = 256 << 20;

/// A trace file of the run, at most `max` bytes.
fn read_trace_file(p: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    latlab_sys::safefile::read_regular(p, max).map_err(|e| {
        if e.kind() == std::io::ErrorKind::FileTooLarge {
            anyhow::anyhow!("{}: {e}: not a trace latlab writes for a spike or a profile (export the spikes of a run latlab wrote; `latlab analyze` reads large traces)", p.display())
        } else {
            anyhow::anyhow!("{}: {e}", p.display())
        }
    })
}

/// A trace-cmd file of the run (at most `max` bytes) as a window.
fn window_dat(p: &Path, max: u64, b: &mut Builder) -> anyhow::Result<()> {
    let bytes = read_trace_file(p, max)?;
    perfetto::window_dat(&bytes, b).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}

/// A text trace of the run as a window.
fn window_text(p: &Path, b: &mut Builder) -> anyhow::Result<()> {
    let text = read_trace_file(p, MAX_SPIKE_TRACE)?;
    perfetto::window_text(&String::from_utf8_lossy(&text), b)
        .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}
