//! The HTML report: one self-contained file (inline CSS and SVG, no script, no network) that
//! opens offline and prints. Sections: summary, the CCDF of every CPU and of all CPUs, the
//! log-log histogram of every CPU overlaid (Williams' figure), the per-second maximum over time, the percentile ladder, Williams'
//! statistics block per CPU, spikes and their causes, loads, notes and the machine inventory.
//!
//! Every string that came from the system or a file (labels, task names, command lines,
//! inventory values) goes through [`esc`], which also makes control characters visible.

use std::collections::BTreeMap;
use std::fmt::Write;

use latlab_core::model::RunModel;
use latlab_core::units::{format_measured, Human};

/// Williams' statistics as rows, shared by every format ([`crate::figures`]).
pub use crate::figures::williams_rows;
use crate::figures::{ladder_rows, short_flags, stat_rows, summary_cells};
use crate::svg::{self, esc};

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:62em;color:#111;padding:0 1em}\
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0;max-width:100%}td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:right;vertical-align:top}\
th{background:#f4f4f4}td.k,th.k{text-align:left}td.k{overflow-wrap:break-word;max-width:32em}.meta{color:#444}.warn{color:#a00}code,pre{font-family:ui-monospace,monospace;font-size:12px}\
table.fit{table-layout:fixed;width:100%}table.fit td{overflow-wrap:anywhere;max-width:none}\
pre{white-space:pre-wrap;word-break:break-all}svg.plot{max-width:100%;height:auto;display:block;margin:.5em 0}\
details{margin:.5em 0}@media print{body{max-width:none;margin:0}h2{break-after:avoid}svg.plot,table{break-inside:avoid}}";

/// Wrap a body into a complete page.
pub fn page(title: &str, body: &str) -> Vec<u8> {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{CSS}</style></head><body>\n{body}</body></html>\n",
        esc(title)
    )
    .into_bytes()
}

/// A table with one column per `(heading, rows)` set; rows are matched by position.
pub fn columns_table(out: &mut String, first: &str, cols: &[(String, Vec<(String, String)>)]) {
    let _ = write!(out, "<table><tr><th class=\"k\">{}</th>", esc(first));
    for (h, _) in cols {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    let n = cols.iter().map(|c| c.1.len()).max().unwrap_or(0);
    for i in 0..n {
        let name = cols
            .iter()
            .find_map(|c| c.1.get(i).map(|r| r.0.clone()))
            .unwrap_or_default();
        let _ = write!(out, "<tr><td class=\"k\">{}</td>", esc(&name));
        for (_, rows) in cols {
            let v = rows.get(i).map(|r| r.1.as_str()).unwrap_or("");
            let _ = write!(out, "<td>{}</td>", esc(v));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// Flatten a JSON value to `path → value` for the inventory table.
pub(crate) fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, out);
            }
        }
        serde_json::Value::String(s) => {
            out.insert(prefix.into(), s.clone());
        }
        other => {
            out.insert(prefix.into(), other.to_string());
        }
    }
}

fn heading(m: &RunModel) -> String {
    let r = &m.record;
    let c = &r.config;
    let mut parts = vec![format!("source {}", r.source.as_str())];
    parts.push(format!("{} backend", c.backend));
    if let Some(k) = &r.machine.kernel_release {
        parts.push(format!("kernel {k}"));
    }
    if let Some(p) = &r.machine.preemption {
        parts.push(format!("preemption {p}"));
    }
    if let Some(i) = c.interval_ns {
        parts.push(format!("interval {}", Human(i)));
    }
    if let Some(d) = c.measured_ns.or(c.duration_ns) {
        parts.push(if c.mode == "none" {
            // `latlab profile --no-measure`: the profile alone.
            format!("profiled {}, no latency measured", format_measured(d))
        } else {
            format!("measured {}", format_measured(d))
        });
    }
    if let (Some(p), Some(pr)) = (&c.policy, c.priority) {
        parts.push(format!("{p} {pr}"));
    }
    if let Some(t) = &r.started_at {
        parts.push(format!("started {t}"));
    }
    let mut s = format!("<p class=\"meta\">{}</p>\n", esc(&parts.join(" · ")));
    if let Some(cl) = &r.command_line {
        let _ = writeln!(s, "<p class=\"meta\">command: <code>{}</code></p>", esc(cl));
    }
    if !r.complete {
        s.push_str(
            "<p class=\"warn\">INCOMPLETE: the last checkpoint of a run that did not finish.</p>\n",
        );
    }
    s
}

/// The body of the report (without the page around it), reused by nothing else but kept
/// separate so tests can look at it.
pub fn body(m: &RunModel) -> String {
    body_with(m, None)
}

/// [`body`] with a profile run's side file (`profile/series.bin`) for the heat maps: the
/// series, or why there is none (None: the run has no series, or it was not looked for).
pub fn body_with(
    m: &RunModel,
    profile_series: Option<Result<&latlab_core::profile::Series, String>>,
) -> String {
    let r = &m.record;
    let mut o = String::new();
    let _ = writeln!(o, "<h1>latlab report: {}</h1>", esc(&r.label));
    o.push_str(&heading(m));
    let flags = short_flags(m);
    if !r.warnings.is_empty() || !r.notes.is_empty() || !flags.is_empty() {
        o.push_str("<ul>");
        for f in &flags {
            let _ = write!(o, "<li class=\"warn\">{}</li>", esc(f));
        }
        for w in &r.warnings {
            let _ = write!(o, "<li class=\"warn\">{}</li>", esc(w));
        }
        for n in &r.notes {
            let _ = write!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>\n");
    }

    o.push_str("<h2>Summary</h2>\n<table><tr><th>CPU</th><th>samples</th><th>missed</th><th>min</th><th>mean</th><th>p99</th><th>p99.999</th><th>max</th></tr>\n");
    let rows = stat_rows(m, |c| c.to_string(), "all");
    for (name, s) in &rows {
        o.push_str("<tr>");
        for c in std::iter::once(name.clone()).chain(summary_cells(s)) {
            let _ = write!(o, "<td>{}</td>", esc(&c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");

    mode_tables(&mut o, m);
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

    if m.total.samples > 0 {
        tail_section(&mut o, m);
    }

    o.push_str("<h2>Percentile ladder</h2>\n");
    let ladder_cols: Vec<(String, Vec<(String, String)>)> = rows
        .iter()
        .map(|(name, s)| (format!("CPU {name}"), ladder_rows(s)))
        .collect();
    columns_table(&mut o, "percentile", &ladder_cols);
    o.push_str("<p class=\"meta\">Each percentile is the upper bound of its histogram bucket (\"≤\"); \"&gt;\" marks one that falls among samples above the histogram limit.</p>\n");

    o.push_str("<h2>Statistics (Williams)</h2>\n");
    let wcols: Vec<(String, Vec<(String, String)>)> = rows
        .iter()
        .map(|(name, s)| (format!("CPU {name}"), williams_rows(s)))
        .collect();
    columns_table(&mut o, "", &wcols);

    if !r.spikes.is_empty() {
        o.push_str("<h2>Spikes</h2>\n<table><tr><th>CPU</th><th>at (s)</th><th>latency</th><th class=\"k\">causes (largest first)</th></tr>\n");
        for s in r.spikes.iter().take(500) {
            let causes: Vec<String> = s
                .causes
                .iter()
                .take(5)
                .map(|c| {
                    format!(
                        "{} {} ({})",
                        latlab_core::trace::attribution::kind_str(c.kind),
                        c.name,
                        Human(c.ns)
                    )
                })
                .collect();
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}.{:06}</td><td>{}</td><td class=\"k\">{}</td></tr>",
                s.cpu,
                s.at_ns / 1_000_000_000,
                s.at_ns % 1_000_000_000 / 1_000,
                Human(s.latency_ns),
                esc(&causes.join("; "))
            );
        }
        o.push_str("</table>\n");
        if r.spikes.len() > 500 {
            let _ = writeln!(
                o,
                "<p class=\"meta\">{} more spikes not listed.</p>",
                r.spikes.len() - 500
            );
        }
        delays_table(&mut o, &r.spikes);
        o.push_str(&crate::lanes::section(&r.spikes));
    }

    if !r.loads.is_empty() || !r.config.loads.is_empty() {
        o.push_str("<h2>Loads</h2>\n<table><tr><th class=\"k\">profile</th><th class=\"k\">command</th><th>exit</th><th>ops</th></tr>\n");
        for l in &r.loads {
            let _ = writeln!(
                o,
                "<tr><td class=\"k\">{}</td><td class=\"k\"><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&l.profile),
                esc(&l.command),
                l.exit.map_or("-".into(), |e| e.to_string()),
                l.ops.map_or("-".into(), |x| format!("{x:.1}"))
            );
        }
        if r.loads.is_empty() {
            for p in &r.config.loads {
                let _ = writeln!(
                    o,
                    "<tr><td class=\"k\">{}</td><td></td><td>-</td><td>-</td></tr>",
                    esc(p)
                );
            }
        }
        o.push_str("</table>\n");
    }

    if let Some(p) = &r.profile {
        let series = profile_series.unwrap_or_else(|| {
            Err(match &p.series {
                Some(_) => "the series file was not read (a run from the results database, or a report of run.json alone)".into(),
                None => "the run has no series file".into(),
            })
        });
        o.push_str(&crate::profile::section(p, series));
    }

    machine_section(&mut o, r);
    o
}

/// The machine as a formatted table (the record's machine fields, then `check`'s inventory
/// rows), preceded by `check`'s findings when the run carries an inventory. An inventory this
/// version cannot read is shown flattened rather than dropped.
fn machine_section(o: &mut String, r: &latlab_core::record::RunRecord) {
    let inv: Option<latlab_core::inventory::Inventory> = r
        .inventory
        .as_ref()
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    if let Some(inv) = &inv {
        let f = latlab_core::findings::findings(inv);
        let count = |sev| f.iter().filter(|x| x.severity == sev).count();
        use latlab_core::findings::Severity;
        let _ = writeln!(
            o,
            "<h2>Machine check</h2>\n<p class=\"meta\">What <code>latlab check</code> finds in this run's inventory: {} bad, {} warn, {} info.</p>",
            count(Severity::Bad),
            count(Severity::Warn),
            count(Severity::Info)
        );
        if !f.is_empty() {
            o.push_str("<table class=\"fit\"><tr><th class=\"k\" style=\"width:4em\">severity</th><th class=\"k\">finding</th><th class=\"k\">evidence</th><th class=\"k\">fix</th></tr>\n");
            for x in &f {
                let cls = if x.severity == Severity::Bad {
                    "k warn"
                } else {
                    "k"
                };
                let _ = writeln!(
                    o,
                    "<tr><td class=\"{cls}\">{}</td><td class=\"k\">{}<br><span class=\"meta\">{} ({})</span></td><td class=\"k\">{}</td><td class=\"k\">{}</td></tr>",
                    x.severity.as_str(),
                    esc(&x.title),
                    esc(&x.why),
                    esc(&x.id),
                    esc(&x.evidence),
                    esc(&x.fix)
                );
            }
            o.push_str("</table>\n");
        }
    }
    let m = &r.machine;
    let yn = |b: bool| if b { "yes" } else { "no" }.to_string();
    let mut rows: Vec<(&str, Option<String>)> = vec![
        ("hostname", m.hostname.clone()),
        (
            "kernel",
            m.kernel_release.as_ref().map(|k| match &m.kernel_version {
                Some(v) => format!("{k} ({v})"),
                None => k.clone(),
            }),
        ),
        ("arch", m.arch.clone()),
        (
            "CPUs online",
            (!m.cpus_online.is_empty())
                .then(|| latlab_core::cpulist::format_cpu_list(&m.cpus_online)),
        ),
        ("CPU model", m.cpu_model.clone()),
        ("preemption", m.preemption.clone()),
        ("kernel command line", m.cmdline.clone()),
        ("virtualized", m.virtualized.map(yn)),
    ];
    rows.retain(|x| x.1.is_some());
    if rows.is_empty() && r.inventory.is_none() {
        return;
    }
    o.push_str("<h2>Machine</h2>\n<table>");
    for (k, v) in &rows {
        let _ = write!(
            o,
            "<tr><th class=\"k\">{}</th><td class=\"k\">{}</td></tr>",
            esc(k),
            esc(v.as_deref().unwrap_or(""))
        );
    }
    o.push_str("</table>\n");
    if let Some(inv) = &inv {
        let rows = crate::check::inventory_rows(inv);
        let _ = write!(
            o,
            "<details open><summary>Inventory (as <code>latlab check</code> shows it)</summary><table>"
        );
        for (k, v) in &rows {
            let _ = write!(
                o,
                "<tr><th class=\"k\"{}>{}</th><td class=\"k\">{}</td></tr>",
                if k.starts_with(' ') {
                    " style=\"padding-left:2em\""
                } else {
                    ""
                },
                esc(k.trim_start()),
                esc(v)
            );
        }
        o.push_str("</table></details>\n");
    } else if let Some(v) = &r.inventory {
        let mut f = BTreeMap::new();
        flatten("", v, &mut f);
        let _ = write!(
            o,
            "<details><summary>Inventory ({} entries, a shape this version does not know)</summary><table>",
            f.len()
        );
        for (k, v) in &f {
            let _ = write!(
                o,
                "<tr><td class=\"k\">{}</td><td class=\"k\">{}</td></tr>",
                esc(k),
                esc(v)
            );
        }
        o.push_str("</table></details>\n");
    }
}

/// "What delays this machine": every cause over the traced spikes, the spikes it appeared in,
/// total and worst time, share of the summed spike latency (names escaped).
fn delays_table(o: &mut String, spikes: &[latlab_core::record::SpikeRecord]) {
    use latlab_core::trace::attribution::kind_str;
    let rows = latlab_core::trace::summarize(spikes);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<h2>What delays this machine</h2>\n<p class=\"meta\">Causes over {} traced spikes, largest total first.</p>",
        spikes.len()
    );
    o.push_str("<table><tr><th class=\"k\">kind</th><th class=\"k\">name</th><th>spikes</th><th>total</th><th>worst</th><th>share of spike latency</th></tr>\n");
    for r in &rows {
        let _ = writeln!(
            o,
            "<tr><td class=\"k\">{}</td><td class=\"k\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} %</td></tr>",
            kind_str(r.kind),
            esc(&r.name),
            r.spikes,
            Human(r.total_ns),
            Human(r.worst_ns),
            100.0 * r.share
        );
    }
    o.push_str("</table>\n");
}

pub fn render(model: &RunModel) -> Vec<u8> {
    page(&format!("latlab: {}", model.record.label), &body(model))
}

/// [`render`] with the profile's series (see [`body_with`]).
pub fn render_with(
    model: &RunModel,
    series: Option<Result<&latlab_core::profile::Series, String>>,
) -> Vec<u8> {
    page(
        &format!("latlab: {}", model.record.label),
        &body_with(model, series),
    )
}

/// The mode's and the scenario's tables (nothing for a timer run).
fn mode_tables(o: &mut String, m: &RunModel) {
    for t in crate::extra::tables(m) {
        let _ = writeln!(o, "<h2>{}</h2>\n<table><tr>", esc(&t.title));
        for h in &t.header {
            let _ = write!(o, "<th>{}</th>", esc(h));
        }
        o.push_str("</tr>\n");
        for r in &t.rows {
            o.push_str("<tr>");
            for c in r {
                let _ = write!(o, "<td>{}</td>", esc(c));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
        if let Some(n) = &t.note {
            let _ = writeln!(o, "<p class=\"meta\">{}</p>", esc(n));
        }
    }
}

/// The tail estimates: the table, why an estimate is missing, and for the first row (all CPUs,
/// or the one CPU) with a fit the fitted tail over the CCDF with its band, and the
/// quantile-quantile plot of the fit.
fn tail_section(o: &mut String, m: &RunModel) {
    let est = crate::tail::estimates(m);
    let (header, rows, notes) = crate::tail::table(&est);
    o.push_str("<h2>Tail estimates</h2>\n<table><tr>");
    for (i, h) in header.iter().enumerate() {
        let cls = if i == 0 { " class=\"k\"" } else { "" };
        let _ = write!(o, "<th{cls}>{}</th>", esc(h));
    }
    o.push_str("</tr>\n");
    for r in &rows {
        o.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let cls = if i == 0 { " class=\"k\"" } else { "" };
            let _ = write!(o, "<td{cls}>{}</td>", esc(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    if !notes.is_empty() {
        o.push_str("<ul>");
        for n in &notes {
            let _ = write!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>\n");
    }
    let _ = writeln!(o, "<p class=\"meta\">{}</p>", esc(crate::tail::EXPLAIN));
    let hist_of = |name: &str| {
        if name == "all CPUs" {
            m.total_hist.as_ref()
        } else {
            m.cpus
                .iter()
                .find(|c| format!("CPU {}", c.cpu) == name)
                .map(|c| &c.hist)
        }
    };
    let Some((name, e, fit, h)) = est.iter().find_map(|(n, e)| {
        let f = e.fit.as_ref().filter(|_| e.fit_ok)?;
        Some((n, e, f, hist_of(n)?))
    }) else {
        return;
    };
    let band: Vec<(f64, f64, Option<f64>)> = crate::tail::band(e, fit);
    o.push_str(&svg::tail_fit(
        &format!("{}, {name}: fitted tail over the CCDF", m.record.label),
        h,
        fit,
        &band,
    ));
    o.push_str("<p class=\"meta\">The measured share of samples at or above each latency (from the histogram) and, from the threshold on, the fitted tail with its 95 % band, out to the rarest estimate.</p>\n");
    o.push_str(&svg::qq_plot(
        &format!(
            "{}, {name}: quantile-quantile plot of the fit",
            m.record.label
        ),
        &fit.qq_points(h, 400),
    ));
    o.push_str("<p class=\"meta\">Each histogram bucket above the threshold: its latency against the fitted tail's quantile at the same rank. On the diagonal: the fit describes the data; bending away at the top: the largest samples do not follow it.</p>\n");
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
