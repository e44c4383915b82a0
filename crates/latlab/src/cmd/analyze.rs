//! `latlab analyze TRACE`: the recorder's attribution, offline, on a saved trace: tracefs text
//! (a run's `spikes/NNN/trace.txt`, an instance's `trace` file, or `trace-cmd report` output)
//! or a trace-cmd file (a run's `spikes/NNN/trace.dat`, or `trace-cmd` version-6 files),
//! recognised by its magic bytes. No root needed: it only reads the file.
//!
//! Samples: latlab markers when the trace holds any (exact intended and actual times); else
//! every wake-up of an RT task, from its hrtimer's expiry to its switch-in (a trace has no
//! user-space clock read, so the switch-in stands for it). Default threshold: every marked
//! sample, or 100 µs for wake-ups (most wake-ups are quick and not worth a breakdown).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use latlab_core::escape::escape;
use latlab_core::record::SpikeRecord;
use latlab_core::trace::{
    analyze_bytes_parallel, analyze_text_parallel, has_markers, kind_str, summarize, Analysis,
    AnalyzeOptions, Parallel, SampleMode,
};

use crate::cli::{AnalyzeArgs, RunFormat};

const DEFAULT_WAKEUP_THRESHOLD_NS: u64 = 100_000;

pub fn analyze(args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let threshold = args.threshold.map(|t| t.0);
    let a = analyze_file(&args.trace, threshold)?;
    let out = match args.format {
        RunFormat::Json => {
            let mut v = serde_json::to_vec_pretty(&to_json(&a)).expect("json");
            v.push(b'\n');
            v
        }
        RunFormat::Text => render_text(&a).into_bytes(),
    };
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Write the analysis to stdout, all of it or an error (see `crate::stdout`).
fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    crate::stdout::write(bytes).map_err(|e| {
        anyhow::anyhow!(
            "cannot write the analysis to stdout: {}",
            format!("{e:#}").trim_start_matches("cannot write to stdout: ")
        )
    })
}

/// Read and analyze a trace file as `latlab analyze` does (shared with `latlab bench analyze`).
pub fn analyze_file(path: &Path, threshold: Option<u64>) -> anyhow::Result<Analysis> {
    let bytes =
        trace_bytes(path).with_context(|| format!("cannot read trace file {}", path.display()))?;
    let virtualized = run_is_virtualized(path);
    if bytes.starts_with(latlab_core::trace::tracedat::MAGIC) {
        return analyze_dat(&bytes, threshold, virtualized)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    let opts_for = |m| analyze_options(m == SampleMode::Markers, threshold, virtualized);
    // Valid UTF-8 (the usual case) is checked block by block by the parsing threads and
    // borrowed as it is; anything else is analyzed from a lossy copy.
    let r = match analyze_bytes_parallel(&bytes, Parallel::threads(threads()), opts_for) {
        Some(r) => r,
        None => {
            let text = String::from_utf8_lossy(&bytes);
            let opts = analyze_options(has_markers(text.as_bytes()), threshold, virtualized);
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

/// A trace-cmd file: its pages decoded with its own layout (header and format files), every
/// CPU merged in time order, and analyzed as the recorder does.
fn analyze_dat(
    bytes: &[u8],
    threshold: Option<u64>,
    virtualized: bool,
) -> anyhow::Result<Analysis> {
    use latlab_core::trace::raw::{decode_all, decoder_for};
    use latlab_core::trace::tracedat;
    let dat = tracedat::read(bytes).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (dec, mut comms) = decoder_for(&dat).map_err(|e| {
        anyhow::anyhow!("{e} (latlab analyze reads the layouts latlab records; trace-cmd report -i FILE gives text that it reads)")
    })?;
    let (events, lost, (bad_pages, unknown)) =
        decode_all(&dec, &dat, &mut comms).map_err(|e| anyhow::anyhow!("{e}"))?;
    let markers = events.iter().any(|e| {
        matches!(&e.kind, latlab_core::trace::EventKind::Marker { text } if latlab_core::trace::parse_marker(text).is_some())
    });
    let opts = analyze_options(markers, threshold, virtualized);
    let mut a = latlab_core::trace::analyze_events(&events, &lost, &opts)
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
fn analyze_options(has_markers: bool, threshold: Option<u64>, virtualized: bool) -> AnalyzeOptions {
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
        virtualized,
        mode: Some(mode),
    }
}

/// A trace inside a run directory (`RUN/spikes/NNN/trace.txt`) knows whether its machine was
/// virtual; anywhere else we do not, and silent gaps stay `unknown`.
fn run_is_virtualized(trace: &Path) -> bool {
    let Some(run) = trace
        .parent()
        .and_then(|p| p.parent())
        .and_then(|p| p.parent())
    else {
        return false;
    };
    let Ok(b) = latlab_engine::rundir::read_run_json(&run.join("run.json")) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&b)
        .ok()
        .and_then(|v| v["machine"]["virtualized"].as_bool())
        .unwrap_or(false)
}

fn spikes_for_summary(a: &Analysis) -> Vec<SpikeRecord> {
    a.spikes
        .iter()
        .filter(|s| !s.cascade)
        .map(|s| s.to_spike())
        .collect()
}

fn to_json(a: &Analysis) -> serde_json::Value {
    let spikes: Vec<serde_json::Value> = a
        .spikes
        .iter()
        .map(|s| {
            serde_json::json!({
                "cpu": s.cpu,
                "at_ns": s.intended_ns,
                "latency_ns": s.latency_ns,
                "causes": s.causes,
                "pid": s.pid,
                "comm": s.comm,
                "prio": s.prio,
                "unexplained_ns": s.unexplained_ns,
                "cascade": s.cascade,
                "switch_in_ns": s.switch_in_ns,
                "timeline_events": s.timeline_events(),
                "lanes": s.lanes,
            })
        })
        .collect();
    serde_json::json!({
        "mode": match a.mode { Some(SampleMode::Markers) => "markers", _ => "wakeups" },
        "events": a.events,
        "samples": a.samples,
        "lost_events": a.lost.iter().map(|(c, n)| serde_json::json!({"cpu": c, "events": n})).collect::<Vec<_>>(),
        "skipped_lines": a.skipped_lines,
        "skipped": a.skipped.iter().map(|(l, why)| serde_json::json!({"line": l, "error": why})).collect::<Vec<_>>(),
        "warnings": a.warnings,
        "spikes": spikes,
        "summary": summarize(&spikes_for_summary(a)),
    })
}

fn render_text(a: &Analysis) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let mode = match a.mode {
        Some(SampleMode::Markers) => "latlab markers",
        _ => "RT task wake-ups (no latlab markers in this trace)",
    };
    let _ = writeln!(
        s,
        "{} events; samples from {mode}: {}; spikes: {}",
        a.events,
        a.samples,
        a.spikes.len()
    );
    for (cpu, n) in &a.lost {
        let _ = writeln!(
            s,
            "warning: CPU {cpu} lost {n} events: history before that point is incomplete"
        );
    }
    // Text from the trace (a skipped line's start) is untrusted: escaped.
    for w in &a.warnings {
        let _ = writeln!(s, "warning: {}", escape(w));
    }
    for (i, sp) in a.spikes.iter().enumerate() {
        let _ = writeln!(
            s,
            "\nspike {}: CPU {}, {} (pid {}), latency {:.1} us",
            i + 1,
            sp.cpu,
            escape(&sp.comm),
            sp.pid,
            sp.latency_ns as f64 / 1000.0
        );
        for l in latlab_report::timeline::lines(&sp.to_spike()) {
            let _ = writeln!(s, "  {l}");
        }
    }
    let rows = summarize(&spikes_for_summary(a));
    if !rows.is_empty() {
        let _ = writeln!(
            s,
            "\nwhat delays this machine (over {} spikes, cascades excluded):",
            spikes_for_summary(a).len()
        );
        let _ = writeln!(
            s,
            "  {:<11} {:<28} {:>6} {:>12} {:>12} {:>7}",
            "kind", "name", "spikes", "total us", "worst us", "share"
        );
        for r in rows {
            let _ = writeln!(
                s,
                "  {:<11} {:<28} {:>6} {:>12.1} {:>12.1} {:>6.1}%",
                kind_str(r.kind),
                escape(&r.name),
                r.spikes,
                r.total_ns as f64 / 1000.0,
                r.worst_ns as f64 / 1000.0,
                100.0 * r.share
            );
        }
    }
    s
}
