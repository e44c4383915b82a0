//! `latlab analyze TRACE`'s reading and analysis: the recorder's attribution, offline, on a
//! saved trace: tracefs text (a run's `spikes/NNN/trace.txt`, an instance's `trace` file, or
//! `trace-cmd report` output) or a trace-cmd file (a run's `spikes/NNN/trace.dat`, or
//! `trace-cmd` version-6 files), recognised by its magic bytes. No root needed: it only reads
//! the file, mapped (`latlab_sys::mapfile`) where it can be.
//!
//! Samples: latlab markers when the trace holds any (exact intended and actual times); else
//! every wake-up of an RT task, from its hrtimer's expiry to its switch-in (a trace has no
//! user-space clock read, so the switch-in stands for it). Default threshold: every marked
//! sample, or 100 µs for wake-ups (most wake-ups are quick and not worth a breakdown).

use std::path::Path;

use anyhow::Context;
use latlab_core::trace::{
    analyze_bytes_parallel, analyze_text_parallel, has_markers, Analysis, AnalyzeOptions, Parallel,
    SampleMode,
};

const DEFAULT_WAKEUP_THRESHOLD_NS: u64 = 100_000;

/// Read and analyze a trace file as `latlab analyze` does (shared with `latlab bench analyze`).
pub fn analyze_file(path: &Path, threshold: Option<u64>) -> crate::Result<Analysis> {
    Ok(analyze(path, threshold)?)
}

fn analyze(path: &Path, threshold: Option<u64>) -> anyhow::Result<Analysis> {
    let bytes =
        trace_bytes(path).with_context(|| format!("cannot read trace file {}", path.display()))?;
    if bytes.starts_with(latlab_core::trace::tracedat::MAGIC) {
        return analyze_dat(&bytes, threshold)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    let opts_for = |m| analyze_options(m == SampleMode::Markers, threshold);
    // Valid UTF-8 (the usual case) is checked block by block by the parsing threads and
    // borrowed as it is; anything else is analyzed from a lossy copy.
    let r = match analyze_bytes_parallel(&bytes, Parallel::threads(threads()), opts_for) {
        Some(r) => r,
        None => {
            let text = String::from_utf8_lossy(&bytes);
            let opts = analyze_options(has_markers(text.as_bytes()), threshold);
            analyze_text_parallel(&text, &opts, Parallel::threads(threads()))
        }
    };
    r.map_err(|e| {
        anyhow::anyhow!(
            "{}:{}: {} (latlab analyze reads tracefs text traces)",
            path.display(),
            e.line,
            e.msg
        )
    })
}

/// A saved trace as the kernel's text, for `latlab analyze --print-trace`, each CPU's text
/// handed to `out` in turn: a trace-cmd file's pages rendered CPU by CPU, each in time order
/// with its header (a spike's `trace.dat` holds one CPU: the `trace.txt` `--trace-text`
/// writes, but for `%p` pointers, hashed with a key of each process as the kernel hashes
/// them); a text trace as it is.
pub fn trace_text(
    path: &Path,
    out: &mut dyn FnMut(&[u8]) -> anyhow::Result<()>,
) -> crate::Result<()> {
    use latlab_core::trace::raw::decoder_for;
    use latlab_core::trace::tracedat;
    let p = path.display().to_string();
    let bytes =
        trace_bytes(path).map_err(|e| anyhow::anyhow!("cannot read trace file {p}: {e}"))?;
    if !bytes.starts_with(tracedat::MAGIC) {
        return Ok(out(&bytes)?);
    }
    let dat = tracedat::read(&bytes).map_err(|e| anyhow::anyhow!("{p}: {e}"))?;
    let (dec, comms) = decoder_for(&dat).map_err(|e| {
        anyhow::anyhow!("{p}: {e} (latlab renders the layouts latlab records; trace-cmd report -i FILE prints any)")
    })?;
    for c in dat.cpus.iter().filter(|c| !c.pages.is_empty()) {
        let mut text = String::with_capacity(c.pages.len() * 2);
        let _ = dec.render_text(c.cpu, &c.pages, &comms, &mut text);
        out(text.as_bytes())?;
    }
    Ok(())
}

/// A trace-cmd file: its pages decoded with its own layout (header and format files), every
/// CPU merged in time order, and analyzed as the recorder does.
fn analyze_dat(bytes: &[u8], threshold: Option<u64>) -> anyhow::Result<Analysis> {
    use latlab_core::trace::raw::decoder_for;
    use latlab_core::trace::tracedat;
    let dat = tracedat::read(bytes).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (dec, comms) = decoder_for(&dat).map_err(|e| {
        anyhow::anyhow!("{e} (latlab analyze reads the layouts latlab records; trace-cmd report -i FILE gives text that it reads)")
    })?;
    // Streamed: each event decoded where it lies in the pages and fed to the analyzer at once.
    let opts_for = |m| analyze_options(m == SampleMode::Markers, threshold);
    let (mut a, (bad_pages, unknown)) =
        latlab_core::trace::raw::analyze_dat(&dec, &dat, comms, opts_for)
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .map_err(|e| anyhow::anyhow!("{}", e.msg))?;
    if bad_pages > 0 || unknown > 0 {
        a.warnings.push(format!(
            "binary trace: {bad_pages} inconsistent page(s) (their rest skipped), {unknown} event(s) of unknown ID"
        ));
    }
    Ok(a)
}

/// A trace's bytes, mapped where possible: copying a trace of hundreds of MB into fresh heap
/// pages was a third of `analyze`'s time (the kernel's copy plus a fault per page). Files that
/// cannot be mapped (a pipe, `/proc`, an empty file) are read. A mapped file that another
/// process truncates while it is read ends latlab with one error line (`mapfile`), not SIGBUS.
enum TraceBytes {
    Mapped(latlab_sys::mapfile::Mapped),
    Read(Vec<u8>),
}

impl std::ops::Deref for TraceBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            TraceBytes::Mapped(m) => m,
            TraceBytes::Read(v) => v,
        }
    }
}

fn trace_bytes(path: &Path) -> std::io::Result<TraceBytes> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    if meta.is_file() && meta.len() > 0 {
        let why = format!(
            "{}: the trace shrank while latlab read it (another process truncated or rewrote it); analyze a copy that nothing writes",
            latlab_core::escape::escape(&path.display().to_string())
        );
        if let Ok(m) = latlab_sys::mapfile::Mapped::open(&f, &why) {
            return Ok(TraceBytes::Mapped(m));
        }
    }
    let mut v = Vec::new();
    f.read_to_end(&mut v)?;
    Ok(TraceBytes::Read(v))
}

/// The CPUs latlab may use (its affinity and cgroup limits): the parsing threads.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The command's defaults: markers when the trace has them (threshold 0: every marked sample
/// is a spike the run already judged), else every RT wake-up above the default threshold.
fn analyze_options(has_markers: bool, threshold: Option<u64>) -> AnalyzeOptions {
    let mode = if has_markers {
        SampleMode::Markers
    } else {
        SampleMode::Wakeups
    };
    let threshold_ns = threshold.unwrap_or(if has_markers {
        0
    } else {
        DEFAULT_WAKEUP_THRESHOLD_NS
    });
    AnalyzeOptions {
        threshold_ns,
        mode: Some(mode),
        gaps: Vec::new(),
    }
}
