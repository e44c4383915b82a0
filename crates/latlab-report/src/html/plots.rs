//! The plots: the share of samples at or above each latency (CCDF) and Williams' histogram,
//! the largest latency of each second, and latency over time (the heat map of the record's
//! per-interval histograms, and each interval's p99 and maximum).

use std::fmt::Write;

use latlab_core::model::RunModel;
use latlab_core::record::RunRecord;
use latlab_core::units::Human;

use crate::svg;

/// Every plot of the run that has the data for it.
pub(super) fn section(o: &mut String, m: &RunModel) {
    distribution(o, m);
    per_second(o, &m.record);
    noise_per_second(o, &m.record);
    over_time(o, m);
}

/// `--mode noise`: the noise in each second, per CPU (rtla osnoise's noise per period; a
/// second without noise leaves a gap on the log scale).
fn noise_per_second(o: &mut String, r: &RunRecord) {
    let series: Vec<(String, Vec<Option<u64>>)> = r
        .cpus
        .iter()
        .filter_map(|c| {
            let n = c.mode.as_ref()?.noise.as_ref()?;
            let v = n.per_second_ns.iter().map(|&x| (x > 0).then_some(x));
            Some((format!("CPU {}", c.cpu), v.collect::<Vec<_>>()))
        })
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if series.is_empty() {
        return;
    }
    o.push_str("<h2>Noise per second</h2>\n");
    let ts: Vec<(String, &[Option<u64>])> = series
        .iter()
        .map(|(n, v)| (n.clone(), v.as_slice()))
        .collect();
    o.push_str(&svg::over_time(
        &format!("{}: noise in each second, per CPU", r.label),
        "noise in the second (log scale)",
        &ts,
        1.0,
    ));
    o.push_str("<p class=\"meta\">The sum of each second's interferences (the CPU's samples): 10 ms is 1 % of the second taken from the spinning thread.</p>\n");
}

/// The CCDF of every CPU, of all CPUs and of an import's IRQ and thread latencies, then
/// Williams' histogram of every CPU.
fn distribution(o: &mut String, m: &RunModel) {
    let r = &m.record;
    let mut series: Vec<(String, &latlab_core::hist::Histogram)> = m
        .cpus
        .iter()
        .map(|c| (format!("CPU {}", c.cpu), &c.hist))
        .collect();
    o.push_str("<h2>Share of samples at or above each latency</h2>\n");
    let mut ccdf_series = series.clone();
    if let (true, Some(t)) = (m.cpus.len() > 1, &m.total_hist) {
        ccdf_series.push(("all CPUs".into(), t));
    }
    // An imported `rtla timerlat hist` keeps each CPU's IRQ latency (and, with user-space
    // threads, its thread latency) as series of their own.
    let irq: Vec<(String, latlab_core::hist::Histogram)> = r
        .cpus
        .iter()
        .flat_map(|c| {
            let m = c.mode.as_ref();
            [
                ("IRQ", m.and_then(|m| m.irq.as_ref())),
                ("thread", m.and_then(|m| m.thread.as_ref())),
            ]
            .into_iter()
            .filter_map(move |(what, h)| {
                Some((
                    format!("CPU {} {what}", c.cpu),
                    latlab_core::hist::Histogram::from_record(h?).ok()?,
                ))
            })
        })
        .collect();
    ccdf_series.extend(irq.iter().map(|(n, h)| (n.clone(), h)));
    let limits: Vec<u64> = r.config.max_latency_ns.into_iter().collect();
    o.push_str(&svg::ccdf(
        &format!("{}: share of samples ≥ latency (CCDF)", r.label),
        &ccdf_series,
        &limits,
    ));
    o.push_str("<p class=\"meta\">Read across: at a latency, the share of samples that took at least that long; runs and CPUs with different sample counts compare directly. Drawn from the exact bucket counts (each point is a bucket's lower bound).</p>\n");
    o.push_str("<h2>Latency histogram</h2>\n");
    series.truncate(m.cpus.len());
    o.push_str(&svg::loglog_histogram(
        &format!("{}: samples per bucket against latency", r.label),
        &series,
    ));
    if m.total.unknown_above > 0 {
        let _ = writeln!(
            o,
            "<p class=\"meta\">{} samples above {} are counted but not plotted: their values are unknown.</p>",
            m.total.unknown_above,
            Human(m.total.limit_ns)
        );
    }
}

/// The largest latency of each second, per CPU (a run that kept them).
fn per_second(o: &mut String, r: &RunRecord) {
    if r.cpus.iter().any(|c| !c.per_second_max_ns.is_empty()) {
        o.push_str("<h2>Largest latency per second</h2>\n");
        let ts: Vec<(String, &[Option<u64>])> = r
            .cpus
            .iter()
            .map(|c| (format!("CPU {}", c.cpu), c.per_second_max_ns.as_slice()))
            .collect();
        o.push_str(&svg::per_second_max(
            &format!("{}: largest latency in each second", r.label),
            &ts,
        ));
    }
}

/// Latency over time from the record's per-interval histograms (two intervals at least).
fn over_time(o: &mut String, m: &RunModel) {
    let r = &m.record;
    if let (Some(iv), Some(c)) = (&r.intervals, m.cpus.first()) {
        if iv.intervals.len() >= 2 {
            o.push_str("<h2>Latency over time</h2>\n");
            o.push_str(&svg::heatmap(
                &format!("{}: latency over time, all CPUs", r.label),
                iv,
                c.hist.layout(),
            ));
            let _ = writeln!(
                o,
                "<p class=\"meta\">The record keeps a histogram of every {} (all CPUs merged); each cell is the samples at that latency at that time, so a band that rises or darkens shows when the machine got worse.</p>",
                latlab_core::units::format_duration(iv.interval_ns)
            );
            let (p99, max) = interval_bands(iv, c.hist.layout());
            o.push_str(&svg::over_time(
                &format!("{}: p99 and maximum of each interval, all CPUs", r.label),
                "latency (log scale)",
                &[("max".to_string(), &max[..]), ("p99".to_string(), &p99[..])],
                iv.interval_ns as f64 / 1e9,
            ));
            o.push_str("<p class=\"meta\">Per interval, the upper bound of the bucket holding its p99 (the sample of rank ⌈0.99·n⌉) and of its highest bucket; an interval without samples leaves a gap.</p>\n");
        }
    }
}

/// Per interval of `iv`: the p99 (upper bound of the bucket holding the sample of rank
/// ⌈0.99·n⌉) and the maximum (upper bound of the highest non-empty bucket); None without
/// samples. Buckets beyond the layout (a damaged record) are ignored.
pub fn interval_bands(
    iv: &latlab_core::intervals::IntervalHistograms,
    layout: latlab_core::hist::Layout,
) -> (Vec<Option<u64>>, Vec<Option<u64>>) {
    let nb = layout.len() as u64;
    iv.intervals
        .iter()
        .map(|h| {
            let ok = || h.iter().filter(|b| b[0] < nb && b[1] > 0);
            let n: u64 = ok().map(|b| b[1]).sum();
            if n == 0 {
                return (None, None);
            }
            let rank = n - n / 100; // ⌈0.99·n⌉ = n − ⌊n/100⌋
            let mut cum = 0u64;
            let p99 = ok()
                .find(|b| {
                    cum += b[1];
                    cum >= rank
                })
                .map(|b| layout.upper(b[0] as usize));
            let max = ok().next_back().map(|b| layout.upper(b[0] as usize));
            (p99, max)
        })
        .unzip()
}
