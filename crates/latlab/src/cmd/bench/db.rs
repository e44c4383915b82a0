//! `latlab bench db [--runs N] [--postgres URL]`: what the results database costs. The insert
//! of a 24-hour, 8-CPU run (the one `bench report` builds) into a fresh SQLite file (and into
//! PostgreSQL when a URL is given), then `history` over N small runs: the query and its text
//! and HTML rendering. Figures are medians of `--reps` repetitions.

use std::process::ExitCode;
use std::time::Instant;

use latlab_core::bench::day::day_record;
use latlab_core::bench::median;
use latlab_engine::bench::db::{fill, insert_day};
use latlab_store::Filter;

pub fn bench(runs: usize, reps: u32, postgres: Option<String>) -> anyhow::Result<ExitCode> {
    let tmp = latlab_engine::rundir::private_temp_dir("latlab-bench-db-")?;
    let mut rec = day_record()?;
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
    let fill = fill(s.as_mut(), &day_record()?, runs)?;
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
        let a = latlab_report::history::text(&rows);
        txt.push(t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let h = latlab_report::history::html(&s.shown(), &rows);
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
    let m = |v: &[f64]| median(v).expect("at least one repetition");
    anyhow::ensure!(shown.0 == runs, "history listed {} of {runs} runs", shown.0);
    outln!("  query (all runs):         {:.3} s", m(&q))?;
    outln!("  query (--kernel, 1/12):   {:.3} s", m(&filtered))?;
    outln!("  render text:              {:.3} s", m(&txt))?;
    outln!("  render html:              {:.3} s", m(&htm))?;
    Ok(ExitCode::SUCCESS)
}
