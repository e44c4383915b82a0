//! `latlab plan [RUN] --target p99.999<=50us [--rate HZ | --interval T --threads N]`: how
//! long a run must be to claim a percentile with 95 % confidence, from exact binomial order
//! statistics (latlab-core's `plan`). With a run: its rate of wake-ups and how often it
//! reached the limit; without: the best case at the given rate.

use std::process::ExitCode;

use anyhow::bail;
use latlab_core::plan::plan as make_plan;
use latlab_core::units::{format_measured, Human};

use crate::cli::{PlanArgs, RunFormat};

pub fn plan(a: PlanArgs) -> anyhow::Result<ExitCode> {
    let (rate, counts) = match &a.run {
        Some(p) => {
            let m = super::db::load_run_arg(p, &a.db)?;
            let n = m.total.samples;
            let Some(h) = m.total_hist.as_ref().filter(|_| n > 0) else {
                bail!("{}: the run has no samples to plan from", p.display());
            };
            let secs = m
                .record
                .config
                .measured_ns
                .filter(|&v| v > 0)
                .map(|v| v as f64 / 1e9);
            let rate = match (secs, m.record.config.interval_ns) {
                (Some(s), _) => n as f64 / s,
                (None, Some(i)) if i > 0 => m.cpus.len() as f64 * 1e9 / i as f64,
                _ => bail!(
                    "{}: the run records neither its length nor its interval: give --rate",
                    p.display()
                ),
            };
            // Samples at or above the limit, by whole buckets (a bucket that reaches it counts).
            let limit = a.target.limit_ns;
            let l = h.layout();
            let at_or_above = h
                .counts()
                .iter()
                .enumerate()
                .filter(|(i, _)| l.upper(*i) > limit)
                .map(|(_, &c)| c)
                .sum::<u64>()
                + h.unknown_above();
            (rate, Some((n, at_or_above)))
        }
        None => match (a.rate, a.interval) {
            (Some(r), _) if r.is_finite() && r > 0.0 => (r, None),
            (Some(r), _) => bail!("--rate {r}: wake-ups per second must be above 0"),
            (None, Some(i)) if i.0 > 0 => (a.threads as f64 * 1e9 / i.0 as f64, None),
            (None, Some(_)) => bail!("--interval: must be above 0"),
            (None, None) => bail!(
                "nothing to plan from: give a run (latlab plan RUN --target …) or a rate (--rate HZ, or --interval T [--threads N])"
            ),
        },
    };
    let p = make_plan(&a.target, rate, counts);
    if a.format == RunFormat::Json {
        let mut b = serde_json::to_vec_pretty(&p)?;
        b.push(b'\n');
        crate::stdout::write(&b)?;
        return Ok(ExitCode::SUCCESS);
    }
    let dur = |ns: u64| format_measured(ns);
    outln!(
        "target: {} ≤ {} with {:.0} % confidence (exact binomial order statistics)",
        a.target.label,
        Human(p.limit_ns),
        p.confidence * 100.0
    )?;
    outln!("rate: {:.1} wake-ups per second", p.wakeups_per_s)?;
    outln!(
        "best case (no wake-up ever at or above {}): {} samples = {}",
        Human(p.limit_ns),
        p.best_case_samples,
        dur(p.best_case_ns)
    )?;
    if let Some(o) = &p.observed {
        outln!(
            "this run: {} of {} samples at or above {}{}",
            o.at_or_above,
            o.samples,
            Human(p.limit_ns),
            o.allowed
                .map(|x| format!(" (a run of this length may have at most {x})"))
                .unwrap_or_default()
        )?;
    }
    outln!("{}", p.verdict)?;
    Ok(ExitCode::SUCCESS)
}
