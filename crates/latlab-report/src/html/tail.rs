//! The tail estimates: their table, why an estimate is missing, the fitted tail over the CCDF
//! and the quantile-quantile plot of the fit.

use std::fmt::Write;

use latlab_core::model::RunModel;

use crate::svg::{self, esc};

/// The tail estimates: the table, why an estimate is missing, and for the first row (all CPUs,
/// or the one CPU) with a fit the fitted tail over the CCDF with its band, and the
/// quantile-quantile plot of the fit.
pub(super) fn section(o: &mut String, m: &RunModel) {
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
