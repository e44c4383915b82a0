//! The HTML report: one self-contained file (inline CSS and SVG, no script, no network) that
//! opens offline and prints. Sections: the verdict (worst latency, top causes, the `check`
//! findings that matter), a table of contents (every section heading gets an anchor), summary,
//! what delays this machine, the CCDF of every CPU and of all CPUs, the
//! log-log histogram of every CPU overlaid (Williams' figure), the per-second maximum over
//! time, the tail estimates, the percentile ladder, Williams' statistics block per CPU, spikes
//! and their causes, loads, the scheduler profile, and the machine check and inventory.
//!
//! One file per part of the page, in its order: `summary`'s title (title, what was measured),
//! `verdict` (the verdict block and the contents), `summary` (warnings, the summary and the
//! mode's tables), `spikes`' causes table, `plots` (the distribution and the run's
//! time), `tail`, `statistics` (ladder and Williams' block), `spikes`, `loads`, `machine`;
//! the profile's section is [`crate::profile`]'s.
//!
//! Every string that came from the system or a file (labels, task names, command lines,
//! inventory values) goes through [`esc`], which also makes control characters visible.

use std::fmt::Write;

use latlab_core::model::RunModel;

/// Williams' statistics as rows, shared by every format ([`crate::figures`]).
pub use crate::figures::williams_rows;
use crate::svg::esc;

mod loads;
mod machine;
mod plots;
mod spikes;
mod statistics;
mod summary;
mod tail;
mod verdict;

pub use plots::interval_bands;

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:62em;color:#111;padding:0 1em}\
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0;max-width:100%}td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:right;vertical-align:top}\
th{background:#f4f4f4}td.k,th.k{text-align:left}td.k{overflow-wrap:break-word;max-width:32em}.meta{color:#444}.warn{color:#a00}code,pre{font-family:ui-monospace,monospace;font-size:12px}\
table.nowrap td{white-space:nowrap;max-width:none}table.fit{table-layout:fixed;width:100%}table.fit td{overflow-wrap:anywhere;max-width:none}\
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
    // The answer first: the title, what was measured, the verdict, the contents, then the
    // summary table, what delays this machine, and the plots.
    let mut o = String::new();
    summary::title(&mut o, m);
    verdict::section(&mut o, m);
    let mut b = String::new();
    summary::section(&mut b, m);
    spikes::delays_table(&mut b, &r.spikes);
    plots::section(&mut b, m);
    if m.total.samples > 0 {
        tail::section(&mut b, m);
    }
    statistics::section(&mut b, m);
    if !r.spikes.is_empty() {
        spikes::section(&mut b, &r.spikes);
    }
    loads::section(&mut b, r);
    if let Some(p) = &r.profile {
        let series = profile_series.unwrap_or_else(|| {
            Err(match &p.series {
                Some(_) => "the series file was not read (a run from the results database, or a report of run.json alone)".into(),
                None => "the run has no series file".into(),
            })
        });
        b.push_str(&crate::profile::section(p, series));
    }
    machine::section(&mut b, r);
    let (b, toc) = verdict::anchor(&b);
    o.push_str(&toc);
    o.push_str(&b);
    o
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
