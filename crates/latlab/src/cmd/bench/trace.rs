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
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use latlab_core::bench::{median, Ratios};
use latlab_core::units::format_duration;
use latlab_engine::bench::trace::{self, Plan};

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// `latlab bench trace`: recorder on vs off, alternated.
pub fn overhead(
    cpu: u32,
    duration_ns: u64,
    pairs: u32,
    threshold_ns: u64,
    instances: u32,
) -> anyhow::Result<ExitCode> {
    if pairs == 0 {
        bail!("--pairs 0: give at least 1 pair of runs");
    }
    let p = Plan {
        cpu,
        duration: format_duration((duration_ns / 1_000_000_000).max(1) * 1_000_000_000),
        threshold: format!("{threshold_ns}ns"),
        instances,
    };
    outln!(
        "recorder overhead on CPU {cpu}: FIFO 95, 1 ms interval, {} each, \
         off / on (--trace-threshold {} --trace-instances {instances}) alternated",
        p.duration,
        p.threshold
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
    let mut ratios = Ratios::<3>::default();
    for i in 1..=pairs {
        let r = trace::pair(&p, i)?;
        let order = if r.off_first {
            [("off", r.off), ("on", r.on)]
        } else {
            [("on", r.on), ("off", r.off)]
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
        let q = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        let (on, off) = (r.on, r.off);
        let rr = ratios.push([q(on.p50, off.p50), q(on.p99, off.p99), q(on.p999, off.p999)]);
        outln!(
            "{i:<5} {:<9} on/off: p50 {:.3}, p99 {:.3}, p99.9 {:.3}",
            "ratio",
            rr[0],
            rr[1],
            rr[2]
        )?;
    }
    let [p50, p99, p999] = ratios.summary().expect("at least one pair");
    outln!(
        "median ratios on/off (per-pair spread) over {pairs} pairs: p50 {p50}, p99 {p99}, p99.9 {p999}"
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `latlab bench analyze`: with `--trace FILE` time that file (with two, a trace.dat and a
/// text trace, each, then the two alternated); else capture one of `size` and time both its
/// forms.
pub fn analyze(trace: Vec<PathBuf>, size: u64, keep: bool, pairs: u32) -> anyhow::Result<ExitCode> {
    if size == 0 {
        bail!("--size 0: give a trace size such as 200M");
    }
    if pairs == 0 {
        bail!("--pairs 0: give at least 1 pair of runs");
    }
    match trace.as_slice() {
        [] => capture_and_time(size, keep, pairs)?,
        [p] => analyze_throughput(p)?,
        [a, b] => {
            // Which is which, before anything is timed.
            let (dat, txt) = match (is_dat(a)?, is_dat(b)?) {
                (true, false) => (a, b),
                (false, true) => (b, a),
                _ => {
                    bail!("--trace twice: give one trace.dat and one text trace of the same events")
                }
            };
            analyze_throughput(txt)?;
            analyze_throughput(dat)?;
            binary_vs_text(dat, txt, pairs)?;
        }
        _ => bail!("--trace at most twice: a trace.dat and a text trace of the same events"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Capture a trace of `size` under hackbench (in a private temporary directory, kept with
/// `keep`) and time both its forms, then the two alternated.
fn capture_and_time(size: u64, keep: bool, pairs: u32) -> anyhow::Result<()> {
    let dir = latlab_engine::rundir::private_temp_dir("latlab-bench-analyze-")?;
    let path = dir.path().join("trace.txt");
    let dat = path.with_extension("dat");
    let r = latlab_engine::bench::capture::capture(&path, size)
        .context("cannot capture a trace (or give --trace FILE)")
        .and_then(|()| {
            analyze_throughput(&path)?;
            // The same events from the binary pages (trace-cmd's file).
            if dat.exists() {
                analyze_throughput(&dat)?;
                binary_vs_text(&dat, &path, pairs)?;
            }
            Ok(())
        });
    if keep && r.is_ok() {
        let kept = dir.keep();
        outln!("traces kept in {}", kept.display())?;
    }
    r
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
        let (secs, n) = latlab_engine::bench::capture::wc_lines(path)?;
        wc.push(secs);
        lines = n;
        // Timed as `latlab analyze` does it: read the file, analyze, (no output).
        let t = Instant::now();
        let r = latlab_engine::analyze::analyze_file(path, None)?;
        an.push(t.elapsed().as_secs_f64());
        a = Some(r);
    }
    let a = a.expect("at least one round");
    let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
    let (wc_s, an_s) = (median(&wc).expect("rounds"), median(&an).expect("rounds"));

    outln!(
        "trace {} ({mb:.1} MB, {lines} lines), median of {ROUNDS} interleaved rounds (min)",
        path.display()
    )?;
    outln!(
        "  wc -l            {:8.3} s  {:8.1} MB/s  ({:.3} s)",
        wc_s,
        mb / wc_s,
        min(&wc)
    )?;
    outln!(
        "  latlab analyze   {:8.3} s  {:8.1} MB/s  ({:.3} s; {} events, {} samples, {} spikes)",
        an_s,
        mb / an_s,
        min(&an),
        a.events,
        a.samples,
        a.spikes.len()
    )?;
    // `wc -l` of binary pages counts nothing: the ratio (and its goal) is the text's.
    if !is_dat(path)? {
        outln!(
            "  analyze / wc -l  {:8.1} %  (goal ≥ 25 %)",
            100.0 * wc_s / an_s
        )?;
    }
    outln!("  events per second {:7.2} M", a.events as f64 / an_s / 1e6)?;
    Ok(())
}

/// Whether `path` is a trace-cmd file (its magic), not text.
fn is_dat(path: &Path) -> anyhow::Result<bool> {
    let mut f = std::fs::File::open(path)
        .with_context(|| format!("cannot read trace {}", path.display()))?;
    let magic = latlab_core::trace::tracedat::MAGIC;
    let mut head = vec![0u8; magic.len()];
    let n = f.read(&mut head)?;
    Ok(n == magic.len() && head == magic)
}

/// `latlab analyze` of the same events as binary pages (`dat`) and as text (`txt`),
/// alternated `pairs` times (which goes first alternates too): each pair's ratio of events per
/// second, binary over text, and their median and spread (goal ≥ 4). Err when the two forms
/// do not hold the same number of events.
pub fn binary_vs_text(dat: &Path, txt: &Path, pairs: u32) -> anyhow::Result<()> {
    let time = |p: &Path| -> anyhow::Result<(f64, u64)> {
        let t = Instant::now();
        let a = latlab_engine::analyze::analyze_file(p, None)?;
        Ok((t.elapsed().as_secs_f64(), a.events))
    };
    outln!("binary / text, the same events, {pairs} alternated pairs (events per second)")?;
    outln!(
        "{:<5} {:>10} {:>10} {:>8}",
        "pair",
        "binary s",
        "text s",
        "ratio"
    )?;
    let mut ratios = Ratios::<1>::default();
    for i in 1..=pairs {
        let ((db, nb), (dt, nt)) = if i % 2 == 1 {
            let b = time(dat)?;
            (b, time(txt)?)
        } else {
            let t = time(txt)?;
            (time(dat)?, t)
        };
        if nb != nt {
            bail!(
                "{} holds {nb} events and {} {nt}: not the same events",
                dat.display(),
                txt.display()
            );
        }
        let [r] = ratios.push([dt / db.max(1e-9)]);
        outln!("{i:<5} {db:>10.3} {dt:>10.3} {r:>8.2}")?;
    }
    let [r] = ratios.summary().expect("at least one pair");
    outln!("  binary / text      {r}  (median of the per-pair ratios, their range; goal ≥ 4)")?;
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

    /// Both forms of the real capture, alternated: as many pairs as asked, each a ratio.
    #[test]
    fn binary_and_text_are_alternated() {
        let d = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../latlab-core/tests/fixtures/trace/hackbench");
        let (dat, txt) = (d.join("trace.dat"), d.join("trace.txt"));
        assert!(super::is_dat(&dat).unwrap() && !super::is_dat(&txt).unwrap());
        super::binary_vs_text(&dat, &txt, 2).unwrap();
        // Not the same events: refused, with both names.
        let other = d.join("../trace-events.txt");
        let e = super::binary_vs_text(&dat, &other, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not the same events"), "{e}");
    }
}
