//! `bench db`'s pushes: the 24-hour, 8-CPU run of `bench report` inserted into a results
//! database (timed), and many small runs cut from it stored for the history timing.

use std::time::Instant;

use anyhow::anyhow;
use latlab_core::record::RunRecord;
use latlab_store::Store;

fn bytes_with_id(rec: &mut RunRecord, id: String) -> crate::Result<Vec<u8>> {
    rec.run_id = Some(id);
    Ok(serde_json::to_vec(rec).map_err(|e| anyhow!("{e}"))?)
}

/// The median time (s) of `reps` inserts of `rec` into `s`, each with a new run id.
pub fn insert_day(s: &mut dyn Store, rec: &mut RunRecord, reps: u32) -> crate::Result<f64> {
    let mut t = Vec::new();
    for _ in 0..reps.max(1) {
        let b = bytes_with_id(rec, latlab_store::new_run_id())?;
        let t0 = Instant::now();
        let p = s.push(&b).map_err(|e| anyhow!("{e}"))?;
        t.push(t0.elapsed().as_secs_f64());
        if !p.added {
            bail!("the run was not added");
        }
    }
    Ok(latlab_core::bench::median(&t).expect("at least one insert"))
}

/// A small run (2 CPUs, no per-second maxima, no spikes), cut from the day run: the size of a
/// short `latlab run`'s record, with its own label, kernel (one of 12) and start.
fn small_record(day: &RunRecord, k: usize) -> crate::Result<RunRecord> {
    let mut r = day.clone();
    r.cpus.truncate(2);
    for c in &mut r.cpus {
        c.per_second_max_ns.clear();
        c.top_spikes.clear();
    }
    r.spikes.clear();
    r.label = format!("bench-{}", k % 7);
    let start = jiff::Timestamp::from_second(1_750_000_000 + k as i64 * 3_600)
        .map_err(|e| anyhow!("{e}"))?;
    r.started_at = Some(start.to_string());
    r.machine.kernel_release = Some(format!("6.{}.0-bench", k % 12));
    Ok(r)
}

/// Store `runs` small runs cut from `day` into `s`: the time it took (s).
pub fn fill(s: &mut dyn Store, day: &RunRecord, runs: usize) -> crate::Result<f64> {
    let t0 = Instant::now();
    for k in 0..runs {
        let mut r = small_record(day, k)?;
        let b = bytes_with_id(&mut r, latlab_store::new_run_id())?;
        s.push(&b).map_err(|e| anyhow!("{e}"))?;
    }
    Ok(t0.elapsed().as_secs_f64())
}
