//! `bench analyze`'s trace: captured by the recorder's tracefs set-up ([`Instances`], a
//! ledgered `latlab-<pid>` instance) under the `hackbench` load, on the session every command
//! shares (signals, the ledger, supervised loads, its tick loop: Ctrl-C or an error leaves
//! nothing behind); and `wc -l` on it, the floor `latlab analyze` is timed against.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use latlab_sys::child::Options;
use latlab_sys::tracefs::InstanceSpec;

use crate::instances::Instances;
use crate::loads::{LoadOptions, LoadSession};
use crate::session::{Begin, Session, Ticked};

/// How long the load may take to fill every CPU's ring.
const FILL_LIMIT: Duration = Duration::from_secs(120);

/// Capture a text trace of at least `size` bytes to `out` (in a private directory), and the
/// same events as binary pages in trace-cmd's file beside it (`.dat`, when the pages can be
/// read). Text is ~2.8× the ring's binary size, so the per-CPU buffer is sized to give ≥
/// `size` of text once full; the load runs until every CPU's ring overwrote (at most two
/// minutes).
pub fn capture(out: &Path, size: u64) -> crate::Result<()> {
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let buffer_kb = (size / ncpu / 2 / 1024).max(1024);
    // Plan first: the load's tools are checked before anything changes.
    let load = LoadSession::prepare(
        &["hackbench".to_string()],
        &LoadOptions {
            dir: None,
            cpus: None,
            required: true,
            src: None,
            duration_ns: 0,
        },
    )
    .map_err(|e| e.context("the trace is captured under hackbench"))?;
    let mut s = Session::begin(Begin {
        results: None,
        inventory: false,
        quiet: true,
    })
    .map_err(|e| e.context("the trace is captured as root"))?;
    let mut set = Instances::open(&Instances::default_root(), s.ledger.clone())
        .map_err(|e| anyhow!("cannot trace: {e}"))?;
    let r = record(&mut s, &mut set, load, out, (ncpu as u32, buffer_kb, size));
    // The instance goes now (its fds closed), then the mount if it was ours.
    let removed = set.remove();
    let leftovers = s.close();
    r?;
    removed.map_err(|e| anyhow!("cannot remove the instance: {e}"))?;
    if !leftovers.is_empty() {
        bail!(
            "could not undo: {} (latlab cleanup retries)",
            leftovers.join("; ")
        );
    }
    Ok(())
}

/// The capture itself, on the session and the set-up that [`capture`] removes on every path.
fn record(
    s: &mut Session,
    set: &mut Instances,
    load: LoadSession,
    out: &Path,
    (ncpu, buffer_kb, size): (u32, u64, u64),
) -> crate::Result<()> {
    let rec = set
        .create("", buffer_kb, &InstanceSpec::RECORDER)
        .map_err(|e| anyhow!("cannot create the recorder: {e}"))?;
    rec.clear()?;
    rec.start()?;
    eprintln!(
        "capturing ≥ {} MB of trace under hackbench ({buffer_kb} KiB per CPU) …",
        size / 1_000_000
    );
    let logs = crate::rundir::private_temp_dir("latlab-bench-capture-")?;
    if !s.start_loads(load, logs.path(), 0)? {
        bail!("interrupted");
    }
    let full = || (0..ncpu).all(|c| rec.overruns(c).is_some_and(|o| o > 0));
    match s.tick(FILL_LIMIT, full)? {
        Ticked::Done => {}
        Ticked::Stopped => bail!("interrupted"),
        Ticked::Elapsed => bail!("the recorder's buffers did not fill in 2 minutes of hackbench"),
    }
    rec.stop()?;
    let _ = s.stop_loads();
    let mut src = std::fs::File::open(rec.dir().join("trace"))?;
    // `out` is in a private directory (0700, unpredictable name) the caller created.
    let mut dst =
        std::fs::File::create(out).with_context(|| format!("cannot write {}", out.display()))?;
    std::io::copy(&mut src, &mut dst)?;
    // The same events as binary pages (reading them consumes them: after the text), in
    // trace-cmd's file beside it, so both formats are timed.
    let cpus: Vec<u32> = (0..ncpu).collect();
    let dat = out.with_extension("dat");
    match crate::recorder::instance_trace_dat(rec, &cpus) {
        Ok(bytes) => std::fs::write(&dat, bytes)
            .with_context(|| format!("cannot write {}", dat.display()))?,
        Err(e) => crate::warn(&format!("no trace.dat to time: {e}")),
    }
    Ok(())
}

/// `wc -l path`, timed (seconds, from its start to its end): the lines it counted.
pub fn wc_lines(path: &Path) -> crate::Result<(f64, u64)> {
    let t = Instant::now();
    let f = crate::bench::child::tool(Command::new("wc").arg("-l").arg(path), &Options::default())
        .map_err(|e| e.context("wc -l (coreutils)"))?;
    let secs = t.elapsed().as_secs_f64();
    if !f.status.success() {
        bail!("wc -l failed on {}", path.display());
    }
    let lines = String::from_utf8_lossy(&f.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Ok((secs, lines))
}
