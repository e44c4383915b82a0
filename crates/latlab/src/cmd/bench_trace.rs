//! The trace benchmarks of `latlab bench` (figures printed, never asserted):
//!
//! - `bench trace`: the flight recorder's overhead — `latlab run` with and without
//!   `--trace-threshold`, alternated on one CPU with the same settings; p50/p99/p99.9/max and
//!   the on/off ratios per pair.
//! - `bench analyze`: `latlab analyze` throughput on a large trace (≥ 200 MB by default, captured
//!   by the recorder under hackbench when no `--trace` is given), against `wc -l` on the same
//!   file in the same run (the I/O + line-splitting floor). The file is read once before timing
//!   so both run from the page cache.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use latlab_core::units::format_duration;

/// One traced or untraced run's figures, in ns.
#[derive(Debug, Clone, Copy)]
struct RunFigures {
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
    samples: u64,
    spikes: u64,
}

/// `latlab run` on `cpu`; traced when `threshold` is given, with `instances` recorder instances.
fn latlab_run(
    cpu: u32,
    duration: &str,
    threshold: Option<&str>,
    instances: u32,
) -> anyhow::Result<RunFigures> {
    let tmp = latlab_engine::rundir::private_temp_dir("latlab-bench-trace-")?;
    let results = tmp.path().to_path_buf();
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["run", "--quiet", "--format", "json", "--priority", "95"])
        .args(["--interval", "1ms", "--cpus", &cpu.to_string()])
        .args(["--duration", duration, "--results"])
        .arg(&results);
    if let Some(t) = threshold {
        cmd.args(["--trace-threshold", t, "--trace-required"])
            .args(["--trace-instances", &instances.to_string()]);
    }
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .context("cannot start latlab run")?;
    let _ = std::fs::remove_dir_all(&results);
    if !out.status.success() && out.status.code() != Some(2) {
        bail!("latlab run failed: {}", out.status);
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("latlab's JSON")?;
    let t = &v["total"];
    let g = |k: &str| t[k].as_u64().unwrap_or(0);
    Ok(RunFigures {
        p50: g("median_ns"),
        p99: g("p99_ns"),
        p999: g("p999_ns"),
        max: g("max_ns"),
        samples: g("samples"),
        spikes: v["spikes"].as_array().map_or(0, |a| a.len() as u64),
    })
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// `latlab bench trace`: recorder on vs off, alternated.
pub fn trace_overhead(
    cpu: u32,
    duration_ns: u64,
    pairs: u32,
    threshold_ns: u64,
    instances: u32,
) -> anyhow::Result<ExitCode> {
    let d = duration_ns;
    let threshold = format!("{threshold_ns}ns");
    if pairs == 0 {
        bail!("--pairs 0: give at least 1 pair of runs");
    }
    let dur = format_duration((d / 1_000_000_000).max(1) * 1_000_000_000);
    outln!(
        "recorder overhead on CPU {cpu}: FIFO 95, 1 ms interval, {dur} each, \
         off / on (--trace-threshold {threshold} --trace-instances {instances}) alternated"
    )?;
    outln!(
        "{:<5} {:<9} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10}",
        "pair",
        "recorder",
        "samples",
        "spikes",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs"
    )?;
    let mut ratios = latlab_core::bench::Ratios::<3>::default();
    for i in 1..=pairs {
        // Which goes first alternates, so the VM's drift within a pair favours neither.
        let (off, on) = if i % 2 == 1 {
            let off = latlab_run(cpu, &dur, None, instances)?;
            (off, latlab_run(cpu, &dur, Some(&threshold), instances)?)
        } else {
            let on = latlab_run(cpu, &dur, Some(&threshold), instances)?;
            (latlab_run(cpu, &dur, None, instances)?, on)
        };
        let order = if i % 2 == 1 {
            [("off", off), ("on", on)]
        } else {
            [("on", on), ("off", off)]
        };
        for (name, f) in order {
            outln!(
                "{i:<5} {name:<9} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10}",
                f.samples,
                f.spikes,
                us(f.p50),
                us(f.p99),
                us(f.p999),
                us(f.max)
            )?;
        }
        let r = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        let rr = [r(on.p50, off.p50), r(on.p99, off.p99), r(on.p999, off.p999)];
        outln!(
            "{i:<5} {:<9} on/off: p50 {:.3}, p99 {:.3}, p99.9 {:.3}",
            "ratio",
            rr[0],
            rr[1],
            rr[2]
        )?;
        ratios.push(rr);
    }
    let [p50, p99, p999] = ratios.summary().expect("at least one pair");
    outln!(
        "median ratios on/off (per-pair spread) over {pairs} pairs: p50 {p50}, p99 {p99}, p99.9 {p999}"
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `latlab bench analyze`: with `--trace FILE` time that file; else capture one of `size`.
pub fn analyze_bench(trace: Option<PathBuf>, size: u64, keep: bool) -> anyhow::Result<ExitCode> {
    if size == 0 {
        bail!("--size 0: give a trace size such as 200M");
    }
    match trace {
        Some(p) => analyze_throughput(&p)?,
        None => {
            let dir = latlab_engine::rundir::private_temp_dir("latlab-bench-analyze-")?;
            let path = dir.path().join("trace.txt");
            let dat = path.with_extension("dat");
            let r = capture(&path, size).and_then(|()| {
                analyze_throughput(&path)?;
                // The same events from the binary pages (trace-cmd's file).
                if dat.exists() {
                    analyze_throughput(&dat)?;
                }
                Ok(())
            });
            if keep && r.is_ok() {
                let kept = dir.keep();
                outln!("traces kept in {}", kept.display())?;
            }
            r?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Capture a text trace of at least `size` bytes with the recorder (a ledgered `latlab-<pid>`
/// instance) under the `hackbench` load, on the lifecycle every command shares (signals, the
/// ledger, supervised loads: Ctrl-C or an error leaves nothing behind). Text is ~2.8× the ring's
/// binary size, so the per-CPU buffer is sized to give ≥ `size` of text once full; the load runs
/// until every CPU's ring overwrote (at most two minutes).
fn capture(out: &Path, size: u64) -> anyhow::Result<()> {
    use latlab_engine::instances::Instances;
    use latlab_engine::loads::{LoadOptions, LoadSession};
    use latlab_engine::session::{Begin, Session};
    use latlab_sys::tracefs::{self, InstanceSpec};
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
    .context("bench analyze produces its trace under hackbench (or give --trace FILE)")?;
    let mut s = Session::begin(Begin {
        results: None,
        inventory: false,
        quiet: true,
    })
    .context("bench analyze captures as root (or give --trace FILE)")?;
    let mut set = Instances::open(Path::new(tracefs::DEFAULT_ROOT), s.ledger.clone())
        .map_err(|e| anyhow!("cannot trace: {e} (or give --trace FILE)"))?;
    let rec = set
        .create("", buffer_kb, &InstanceSpec::RECORDER)
        .map_err(|e| anyhow!("cannot create the recorder: {e}"))?;
    let r = (|| -> anyhow::Result<()> {
        rec.clear()?;
        rec.start()?;
        eprintln!(
            "capturing ≥ {} MB of trace under hackbench ({buffer_kb} KiB per CPU) …",
            size / 1_000_000
        );
        let logs = latlab_engine::rundir::private_temp_dir("latlab-bench-capture-")?;
        if !s.start_loads(load, logs.path(), 0)? {
            bail!("interrupted");
        }
        let t0 = std::time::Instant::now();
        while !(0..ncpu as u32).all(|c| rec.overruns(c).is_some_and(|o| o > 0)) {
            if s.stopped() {
                bail!("interrupted");
            }
            if t0.elapsed() > std::time::Duration::from_secs(120) {
                bail!("the recorder's buffers did not fill in 2 minutes of hackbench");
            }
            s.poll_loads()?;
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        rec.stop()?;
        let _ = s.stop_loads();
        let mut src = std::fs::File::open(rec.dir().join("trace"))?;
        // `out` is in a private directory (0700, unpredictable name) this command created.
        let mut dst = std::fs::File::create(out)
            .with_context(|| format!("cannot write {}", out.display()))?;
        std::io::copy(&mut src, &mut dst)?;
        // The same events as binary pages (reading them consumes them: after the text), in
        // trace-cmd's file beside it, so both formats are timed.
        let cpus: Vec<u32> = (0..ncpu as u32).collect();
        match latlab_engine::recorder::instance_trace_dat(rec, &cpus) {
            Ok(dat) => std::fs::write(out.with_extension("dat"), dat)
                .with_context(|| format!("cannot write {}", out.with_extension("dat").display()))?,
            Err(e) => warnln!("no trace.dat to time: {e:#}"),
        }
        Ok(())
    })();
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

/// Print MB/s of `latlab analyze` (parse + attribution, no output) vs `wc -l` on `path`.
pub fn analyze_throughput(path: &Path) -> anyhow::Result<()> {
    // Warm the page cache (and check the file is readable) before timing anything.
    let mut f = std::fs::File::open(path)
        .with_context(|| format!("cannot read trace {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        len += n as u64;
    }
    let mb = len as f64 / 1e6;

    // Interleaved rounds, medians: this VM's speed drifts by tens of percent within a minute,
    // so one timing of each said more about the moment than about the two programs.
    const ROUNDS: usize = 5;
    let mut wc = Vec::with_capacity(ROUNDS);
    let mut an = Vec::with_capacity(ROUNDS);
    let mut lines = 0u64;
    let mut a = None;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let out = Command::new("wc")
            .arg("-l")
            .arg(path)
            .output()
            .context("cannot run wc -l (coreutils)")?;
        wc.push(t.elapsed().as_secs_f64());
        anyhow::ensure!(out.status.success(), "wc -l failed on {}", path.display());
        lines = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        // Timed as `latlab analyze` does it: read the file, analyze, (no output).
        let t = Instant::now();
        let r = super::analyze::analyze_file(path, None)?;
        an.push(t.elapsed().as_secs_f64());
        a = Some(r);
    }
    let a = a.expect("at least one round");
    let median = |v: &[f64]| latlab_core::bench::median(v).expect("at least one round");
    let (wc_min, an_min) = (
        wc.iter().copied().fold(f64::MAX, f64::min),
        an.iter().copied().fold(f64::MAX, f64::min),
    );
    let (wc_s, an_s) = (median(&wc), median(&an));

    outln!(
        "trace {} ({mb:.1} MB, {lines} lines), median of {ROUNDS} interleaved rounds (min)",
        path.display()
    )?;
    outln!(
        "  wc -l            {:8.3} s  {:8.1} MB/s  ({:.3} s)",
        wc_s,
        mb / wc_s,
        wc_min
    )?;
    outln!(
        "  latlab analyze   {:8.3} s  {:8.1} MB/s  ({:.3} s; {} events, {} samples, {} spikes)",
        an_s,
        mb / an_s,
        an_min,
        a.events,
        a.samples,
        a.spikes.len()
    )?;
    outln!(
        "  analyze / wc -l  {:8.1} %  (goal ≥ 25 %, for text)",
        100.0 * wc_s / an_s
    )?;
    outln!("  events per second {:7.2} M", a.events as f64 / an_s / 1e6)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn throughput_runs_on_a_fixture() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../latlab-core/tests/fixtures/trace/trace-worst-window-cpu1.txt");
        super::analyze_throughput(&p).unwrap();
        assert!(super::analyze_throughput(std::path::Path::new("/nonexistent")).is_err());
    }
}
