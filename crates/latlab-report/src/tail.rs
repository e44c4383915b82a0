//! The tail estimates of a run ([`latlab_core::tail`]) as one table every format shows: a row
//! for all CPUs and one per CPU, with the threshold, the shape, the goodness of fit and the
//! latency exceeded once per 10⁶ and 10⁹ wake-ups (and once a day, once a year) with its 95 %
//! interval; an estimate that was refused shows no number and says why below the table.

use latlab_core::model::RunModel;
use latlab_core::tail::{of_run, TailEstimate, TailQuantile};
use latlab_core::units::Human;

/// The title of the section.
pub const TITLE: &str = "Tail estimates (peaks over a threshold, generalized Pareto; 95 % profile-likelihood intervals)";

/// `(name, estimate)`: all CPUs first when there are several, then each CPU.
pub fn estimates(m: &RunModel) -> Vec<(String, TailEstimate)> {
    let (total, cpus) = of_run(m);
    let mut v = Vec::new();
    if m.cpus.len() > 1 {
        if let Some(t) = total {
            v.push(("all CPUs".to_string(), t));
        }
    }
    for (c, e) in m.cpus.iter().zip(cpus) {
        v.push((format!("CPU {}", c.cpu), e));
    }
    v
}

/// A quantile with its interval: `180 µs (150 µs – 240 µs)`; `≥ 2407 µs (no upper bound)` when
/// the data bound it from below only.
pub fn quantile_cell(q: &TailQuantile) -> String {
    match q.ns {
        None => match q.lo_ns {
            Some(lo) => format!("≥ {} (no upper bound)", Human(lo)),
            None => "-".into(),
        },
        Some(v) => format!(
            "{} ({} – {})",
            Human(v),
            q.lo_ns.map_or("?".into(), |x| Human(x).to_string()),
            q.hi_ns.map_or("∞".into(), |x| Human(x).to_string())
        ),
    }
}

/// The column heading of a quantile.
pub fn quantile_heading(q: &TailQuantile) -> String {
    match q.label.as_str() {
        "1e-6" => "once per 10⁶".into(),
        "1e-9" => "once per 10⁹".into(),
        l => l.to_string(),
    }
}

/// The table: header, rows (text, unescaped: names are latlab's own), and the sentences to
/// print below it (reasons and notes, prefixed with the row's name; untrusted: escape them).
pub fn table(est: &[(String, TailEstimate)]) -> (Vec<String>, Vec<Vec<String>>, Vec<String>) {
    let mut header: Vec<String> = ["", "threshold", "exceedances", "shape ξ", "fit p"]
        .map(String::from)
        .to_vec();
    let widest = est
        .iter()
        .max_by_key(|(_, e)| e.quantiles.len())
        .map(|(_, e)| e.quantiles.clone())
        .unwrap_or_default();
    header.extend(widest.iter().map(quantile_heading));
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (name, e) in est {
        let mut r = vec![
            name.clone(),
            e.threshold_ns.map_or("-".into(), |u| Human(u).to_string()),
            if e.threshold_ns.is_some() {
                format!("{} of {}", e.exceedances, e.samples)
            } else {
                "-".into()
            },
            e.shape.map_or("-".into(), |x| format!("{x:.2}")),
            e.goodness_of_fit
                .as_ref()
                .filter(|_| e.threshold_ns.is_some())
                .map_or("-".into(), |g| format!("{:.2}", g.p_value)),
        ];
        for (i, _) in widest.iter().enumerate() {
            r.push(e.quantiles.get(i).map_or("-".into(), quantile_cell));
        }
        rows.push(r);
        if let Some(why) = &e.reason {
            notes.push(format!("{name}: no estimate: {why}"));
        }
        for n in &e.notes {
            notes.push(format!("{name}: {n}"));
        }
    }
    (header, rows, notes)
}

/// The one-paragraph explanation under the table.
pub const EXPLAIN: &str = "Each estimate is the latency a wake-up exceeds with that probability, extrapolated from the samples above the threshold (a generalized Pareto tail fitted by maximum likelihood to the histogram's buckets); the range is its 95 % interval. \"once a day\" and \"once a year\" are at the run's rate of wake-ups (all CPUs together for \"all CPUs\"). fit p is the Anderson-Darling test of the fit (small: the tail does not fit). No number where no honest one exists.";

/// The 95 % band of a fit: `(exceedance, lo ns, hi ns)` at exceedance probabilities from the
/// threshold's rate down to the rarest the estimate reports, four per decade.
pub fn band(e: &TailEstimate, fit: &latlab_core::tail::GpdFit) -> Vec<(f64, f64, Option<f64>)> {
    let zeta = fit.k as f64 / fit.n as f64;
    let rarest = e
        .quantiles
        .iter()
        .map(|q| q.exceedance)
        .fold(1e-9f64, f64::min);
    let mut out = Vec::new();
    let mut lp = zeta.log10() - 0.25;
    while lp >= rarest.log10() - 1e-9 {
        let p = 10f64.powf(lp);
        if let Some((lo, hi)) = fit.interval(p, 0.95) {
            out.push((p, lo, hi));
        }
        lp -= 0.25;
    }
    out
}
