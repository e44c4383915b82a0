//! `latlab bench tail`: the time to fit and bootstrap a 24-hour, 8-CPU record — the record
//! `bench report` synthesizes (86.4 M samples per CPU, 1 440 per-minute histograms added
//! here) — as `report` and `compare` do it: the tail estimate of every CPU and of all CPUs
//! (threshold tests, fit, profile-likelihood intervals) and the block bootstrap of the
//! percentile ladder. Prints figures; asserts nothing. Goal: under 1 s.

use std::process::ExitCode;
use std::time::Instant;

use latlab_core::hist::Quantile;
use latlab_core::model::RunModel;
use latlab_core::stats::LADDER;

fn median(v: &[f64]) -> f64 {
    latlab_core::bench::median(v).expect("at least one repetition")
}

pub fn bench(reps: u32) -> anyhow::Result<ExitCode> {
    let t = Instant::now();
    let m = RunModel::new(latlab_core::bench::day::day_record_by_minute()?)?;
    outln!(
        "24-hour-equivalent record: {} CPUs, {} samples, {} per-minute histograms; built in {:.2} s",
        m.cpus.len(),
        m.total.samples,
        m.record.intervals.as_ref().map_or(0, |i| i.intervals.len()),
        t.elapsed().as_secs_f64()
    )?;
    let (mut fit, mut boot, mut both, mut report) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    let qs: Vec<Quantile> = LADDER.iter().map(|x| x.1).collect();
    // The record's tail (a power law with sparse samples out to the limit) is a mixture the
    // estimates refuse; the fits are also timed the whole way (threshold tests, fit, four
    // profile-likelihood intervals) on eight day-long CPUs drawn from a body with a Pareto
    // tail.
    let pareto = latlab_core::tail::synth::Spliced {
        floor_ns: 3_000.0,
        body_mean_ns: 9_000.0,
        u0_ns: 40_000.0,
        tail_mass: 1e-2,
        shape: 0.2,
        scale_ns: 15_000.0,
    };
    let mut rng = latlab_core::sim::SplitMix64::new(29);
    let layout = m.cpus[0].hist.layout();
    let days: Vec<latlab_core::hist::Histogram> = (0..m.cpus.len())
        .map(|_| pareto.histogram(layout, 86_400_000.0, &mut rng))
        .collect();
    let mut day_total = days[0].clone();
    for h in &days[1..] {
        day_total.merge(h)?;
    }
    let full = |h: &latlab_core::hist::Histogram, threads: f64| {
        latlab_core::tail::estimate(
            h,
            &latlab_core::tail::TailContext {
                wakeups_per_s: Some(threads * 1000.0),
                ..Default::default()
            },
        )
    };
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        let _ = latlab_core::tail::of_run(&m);
        report.push(t.elapsed().as_secs_f64());
        let t0 = Instant::now();
        let total = Some(full(&day_total, days.len() as f64));
        let cpus: Vec<_> = days.iter().map(|h| full(h, 1.0)).collect();
        let t1 = Instant::now();
        let h = m.total_hist.as_ref().expect("the day record has CPUs");
        let r = latlab_core::bootstrap::replicates(
            m.record.intervals.as_ref().expect("built above"),
            h.layout(),
            &qs,
            latlab_core::bootstrap::REPLICATES,
            1,
        );
        let t2 = Instant::now();
        fit.push((t1 - t0).as_secs_f64());
        boot.push((t2 - t1).as_secs_f64());
        both.push((t2 - t0).as_secs_f64());
        last = Some((total, cpus, r.is_some()));
    }
    let (fit, boot, both, report) = (median(&fit), median(&boot), median(&both), median(&report));
    outln!(
        "median of {} runs: tail fits of 8 day-long CPUs with a Pareto tail and of all of them (the whole way: fit and intervals) {fit:.3} s, block bootstrap of the record ({} replicates × {} percentiles) {boot:.3} s, together {both:.3} s  (goal < 1 s)",
        reps.max(1),
        latlab_core::bootstrap::REPLICATES,
        qs.len()
    )?;
    outln!("  the record's own estimates, as report computes them: {report:.3} s")?;
    if let Some((Some(t), _, _)) = &last {
        let q: Vec<String> = t
            .quantiles
            .iter()
            .map(|q| format!("{} {}", q.label, latlab_report::tail::quantile_cell(q)))
            .collect();
        outln!(
            "Pareto day, all CPUs: fit {}, threshold {}, {}",
            if t.fit_ok { "ok" } else { "refused" },
            t.threshold_ns
                .map_or("-".into(), |u| latlab_core::units::Human(u).to_string()),
            if t.fit_ok {
                q.join(", ")
            } else {
                t.reason.clone().unwrap_or_default()
            }
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
