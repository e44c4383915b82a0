//! `latlab bench db [--runs N] [--postgres URL]`: what the results database costs. The insert
//! of a 24-hour, 8-CPU run (the one `bench report` builds) into a fresh SQLite file (and into
//! PostgreSQL when a URL is given), then `history` over N small runs: the query and its text
//! and HTML rendering. Figures are medians of `--reps` repetitions.

use std::process::ExitCode;
use std::time::Instant;

use latlab_core::record::RunRecord;
use latlab_store::{Filter, Store};

fn median(v: Vec<f64>) -> f64 {
    latlab_core::bench::median(&v).expect("at least one repetition")
}

fn bytes_with_id(rec: &mut RunRecord, id: String) -> anyhow::Result<Vec<u8>> {
    rec.run_id = Some(id);
    Ok(serde_json::to_vec(rec)?)
}

/// A small run (2 CPUs, no per-second maxima, no spikes), cut from the day run: the size of a
/// short `latlab run`'s record, with its own label, kernel and start.
fn small_record(day: &RunRecord, k: usize) -> anyhow::Result<RunRecord> {
    let mut r = day.clone();
    r.cpus.truncate(2);
    for c in &mut r.cpus {
        c.per_second_max_ns.clear();
        c.top_spikes.clear();
    }
    r.spikes.clear();
    r.label = format!("bench-{}", k % 7);
    r.started_at =
        Some(jiff::Timestamp::from_second(1_750_000_000 + k as i64 * 3_600)?.to_string());
    r.machine.kernel_release = Some(format!("6.{}.0-bench", k % 12));
    Ok(r)
}

fn insert_day(s: &mut dyn Store, rec: &mut RunRecord, reps: u32) -> anyhow::Result<f64> {
    let mut t = Vec::new();
    for _ in 0..reps.max(1) {
        let b = bytes_with_id(rec, latlab_store::new_run_id())?;
        let t0 = Instant::now();
        let p = s.push(&b).map_err(|e| anyhow::anyhow!("{e}"))?;
        t.push(t0.elapsed().as_secs_f64());
        anyhow::ensure!(p.added, "the run was not added");
    }
    Ok(median(t))
}

pub fn bench_db(runs: usize, reps: u32, postgres: Option<String>) -> anyhow::Result<ExitCode> {
    let tmp = latlab_engine::rundir::private_temp_dir("latlab-bench-db-")?;
    let mut rec = latlab_core::bench::day::day_record()?;
    let json = serde_json::to_vec(&rec)?.len();
    outln!(
        "24-hour run: {} CPUs, run.json {:.1} MB; median of {} inserts each",
        rec.cpus.len(),
        json as f64 / 1e6,
        reps.max(1)
    )?;
    let path = tmp.path().join("day.sqlite");
    let mut sq =
        latlab_store::open(Some(&path.to_string_lossy())).map_err(|e| anyhow::anyhow!("{e}"))?;
    let t = insert_day(sq.as_mut(), &mut rec, reps)?;
    outln!(
        "  SQLite:     {:.3} s per run ({:.1} MB file after {} runs)",
        t,
        std::fs::metadata(&path)?.len() as f64 / 1e6,
        reps.max(1)
    )?;
    drop(sq);
    if let Some(url) = &postgres {
        let mut pg = latlab_store::open(Some(url)).map_err(|e| anyhow::anyhow!("{e}"))?;
        let t = insert_day(pg.as_mut(), &mut rec, reps)?;
        outln!("  PostgreSQL: {t:.3} s per run ({})", pg.shown())?;
    } else {
        outln!("  PostgreSQL: skipped (give --postgres postgres://…)")?;
    }

    // history over `runs` small runs
    let path = tmp.path().join("history.sqlite");
    let mut s =
        latlab_store::open(Some(&path.to_string_lossy())).map_err(|e| anyhow::anyhow!("{e}"))?;
    let day = latlab_core::bench::day::day_record()?;
    let t0 = Instant::now();
    for k in 0..runs {
        let mut r = small_record(&day, k)?;
        let b = bytes_with_id(&mut r, latlab_store::new_run_id())?;
        s.push(&b).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let fill = t0.elapsed().as_secs_f64();
    outln!(
        "history over {runs} runs (SQLite, {:.1} MB; stored in {:.1} s, {:.2} ms per run):",
        std::fs::metadata(&path)?.len() as f64 / 1e6,
        fill,
        fill * 1e3 / runs.max(1) as f64
    )?;
    let mut q = Vec::new();
    let mut txt = Vec::new();
    let mut htm = Vec::new();
    let mut filtered = Vec::new();
    let mut shown = (0, 0);
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        let rows = s
            .list(&Filter::default())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        q.push(t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let a = super::history::text(&rows);
        txt.push(t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let h = super::history::html(&s.shown(), &rows);
        htm.push(t0.elapsed().as_secs_f64());
        shown = (rows.len(), a.len().max(h.len()));
        let f = Filter {
            kernel: Some("6.3.0-bench".into()),
            ..Filter::default()
        };
        let t0 = Instant::now();
        let rows = s.list(&f).map_err(|e| anyhow::anyhow!("{e}"))?;
        filtered.push(t0.elapsed().as_secs_f64());
        anyhow::ensure!(!rows.is_empty(), "the kernel filter found nothing");
    }
    anyhow::ensure!(shown.0 == runs, "history listed {} of {runs} runs", shown.0);
    outln!("  query (all runs):         {:.3} s", median(q))?;
    outln!("  query (--kernel, 1/12):   {:.3} s", median(filtered))?;
    outln!("  render text:              {:.3} s", median(txt))?;
    outln!("  render html:              {:.3} s", median(htm))?;
    Ok(ExitCode::SUCCESS)
}
