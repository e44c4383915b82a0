//! `latlab bench report`: how long `report` and `compare` take on a 24-hour-equivalent run,
//! and how fast `import` reads cyclictest `-v` output. Prints figures; asserts nothing.
//!
//! The run is built in memory (a 10 ms histogram limit, 8 CPUs at 1 kHz for a day — 86.4 M
//! samples and 86 400 per-second maxima each, 100 traced spikes with causes and timelines,
//! an exponential body with a power-law tail and a few samples in the log tail above 10 ms),
//! written as a run directory under a temp dir, then loaded and rendered the way the
//! commands do it (read `run.json` → model → render → write the file). Each figure is the
//! median of `--reps` repetitions. Goals: HTML < 1 s, import ≥ 100 MB/s.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use latlab_core::bench::day::{day_record, verbose_file, CPUS, SECONDS, SPIKES};
use latlab_core::bench::median_secs;
use latlab_core::import::{self, From};

use latlab_engine::rundir;

const VERBOSE_LINES: usize = 100_000;

fn report_once(run: &Path, fmt: latlab_report::Format, out: &Path) -> anyhow::Result<()> {
    let m = rundir::load_run(run)?;
    rundir::write_atomic(out, &latlab_report::render(&m, fmt))?;
    Ok(())
}

pub fn bench(reps: u32) -> anyhow::Result<ExitCode> {
    // Removed on every exit path (dropped).
    let tmp = rundir::private_temp_dir("latlab-bench-report-")?;
    let tmp_dir = tmp.path().to_path_buf();

    let t = Instant::now();
    let rec = day_record()?;
    let a = rundir::create_run_dir(&tmp_dir, "a")?;
    rundir::write_run(&a, &rec, true)?;
    let b = rundir::create_run_dir(&tmp_dir, "b")?;
    rundir::write_run(&b, &rec, true)?;
    let json_len = std::fs::metadata(a.join("run.json"))?.len();
    outln!(
        "24-hour-equivalent run: {CPUS} CPUs × {} samples, {SECONDS} per-second maxima each, {SPIKES} spikes, 10 ms limit, {} buckets used (all CPUs); built and written in {:.2} s",
        rec.cpus[0].histogram.count,
        rec.total.buckets_used,
        t.elapsed().as_secs_f64()
    )?;
    outln!(
        "run.json {:.2} MB; median of {} runs each (load run.json + render + write)",
        json_len as f64 / 1e6,
        reps.max(1)
    )?;

    use latlab_report::Format as F;
    for (name, f, ext) in [
        ("text", F::Text, "txt"),
        ("json", F::Json, "json"),
        ("markdown", F::Markdown, "md"),
        ("html", F::Html, "html"),
    ] {
        let out = tmp_dir.join(format!("report.{ext}"));
        let s = median_secs(reps, || report_once(&a, f, &out))?;
        let size = std::fs::metadata(&out)?.len();
        let goal = if name == "html" { "  (goal < 1 s)" } else { "" };
        outln!(
            "  report --format {name:<9} {s:7.3} s  {:8.1} KB out{goal}",
            size as f64 / 1e3
        )?;
    }
    let out = tmp_dir.join("compare.html");
    let s = median_secs(reps, || {
        let runs = vec![rundir::load_run(&a)?, rundir::load_run(&b)?];
        let bytes =
            latlab_report::compare::render(&runs, latlab_report::compare::CompareFormat::Html);
        rundir::write_atomic(&out, &bytes)?;
        anyhow::Ok(())
    })?;
    outln!(
        "  compare (2 runs) --format html {s:7.3} s  {:8.1} KB out  (goal < 1 s)",
        std::fs::metadata(&out)?.len() as f64 / 1e3
    )?;

    let v = verbose_file(VERBOSE_LINES);
    let vpath = tmp_dir.join("cyclictest-v.txt");
    std::fs::write(&vpath, &v)?;
    let mb = v.len() as f64 / 1e6;
    let mut samples = 0;
    let s = median_secs(reps, || {
        let bytes = std::fs::read(&vpath)?;
        let r = import::import(&bytes, From::CyclictestVerbose, "bench")?;
        samples = r.total.samples;
        anyhow::Ok(())
    })?;
    anyhow::ensure!(
        samples == VERBOSE_LINES as u64,
        "the import read {samples} samples of {VERBOSE_LINES}"
    );
    outln!(
        "import --from cyclictest-verbose: {VERBOSE_LINES} lines, {mb:.2} MB: read + parse {s:.4} s = {:.0} MB/s  (goal ≥ 100 MB/s)",
        mb / s
    )?;
    let s = median_secs(reps, || {
        let bytes = std::fs::read(&vpath)?;
        let mut r = import::import(&bytes, From::CyclictestVerbose, "bench")?;
        r.label = "v".into();
        let d = rundir::create_run_dir(&tmp_dir, "v")?;
        rundir::write_run(&d, &r, true)?;
        std::fs::remove_dir_all(&d)?;
        anyhow::Ok(())
    })?;
    outln!(
        "  with the run directory written (run.json, histogram.txt, summary.txt): {s:.4} s = {:.0} MB/s",
        mb / s
    )?;
    Ok(ExitCode::SUCCESS)
}
