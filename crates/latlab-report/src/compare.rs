//! Rendering of a comparison of N runs ([`latlab_core::compare`]): text, markdown, json, html.
//!
//! All four show the same things in the same order: the flags a reader must see first
//! (noise, short runs, different intervals or loads), the percentile ladder with ratios to the
//! baseline and the samples each value rests on, Morton's log2-ms bucket table and its µs
//! variant, Williams' blocks in columns, and what changed between the runs. HTML adds the
//! runs' CCDFs (shares, so runs of different lengths compare) and the overlaid log-log
//! histograms.

use std::fmt::Write;

use latlab_core::compare::{compare, BucketTable, Cell, Comparison};
use latlab_core::model::RunModel;
use latlab_core::units::Human;

use crate::escape::escape;
use crate::figures::williams_rows;
use crate::html::{columns_table, page};
use crate::markdown::{
    cell as md, columns as md_columns, table as md_table, tail_section as md_tail,
};
use crate::svg::{self, esc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareFormat {
    Text,
    Markdown,
    Json,
    Html,
    /// `--fail-if`'s checks as LAVA result lines ([`crate::lava::checks`]); nothing without.
    Lava,
}

fn value(c: &Cell, limit: u64) -> String {
    match c.value_ns {
        Some(v) => format!("≤ {}", Human(v)),
        None if c.tail_samples > 0 => format!("> {}", Human(limit)),
        None => "-".into(),
    }
}

fn ratio(c: &Cell, base: bool) -> String {
    if base {
        return "1.00×".into();
    }
    match (c.ratio, c.ratio_lo, c.ratio_hi, c.verdict) {
        (Some(r), Some(lo), Some(hi), Some(v)) => format!("{r:.2}× [{lo:.2}–{hi:.2}] {v}"),
        (Some(r), ..) => format!("{r:.2}×{}", if c.within_noise { " ~" } else { "" }),
        _ => "-".into(),
    }
}

/// The runs' tail estimates (all CPUs merged) as the single-run table, a row per run.
fn tail_rows(c: &Comparison) -> (Vec<String>, Vec<Vec<String>>, Vec<String>) {
    let est: Vec<(String, latlab_core::tail::TailEstimate)> = c
        .runs
        .iter()
        .zip(&c.tails)
        .filter_map(|(r, t)| Some((r.label.clone(), t.clone()?)))
        .collect();
    let (mut h, rows, notes) = crate::tail::table(&est);
    if let Some(first) = h.first_mut() {
        *first = "run".into();
    }
    (h, rows, notes)
}

fn ci(c: &Cell) -> String {
    let e = |v: Option<u64>| v.map_or("?".to_string(), |v| Human(v).to_string());
    format!("{} – {}", e(c.ci_low_ns), e(c.ci_high_ns))
}

/// The ladder as `(heading, rows)` columns: per run value, ratio, interval and tail.
fn ladder_cols(c: &Comparison) -> Vec<(String, Vec<(String, String)>)> {
    c.runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let rows = c
                .ladder
                .iter()
                .map(|row| {
                    let cell = &row.cells[i];
                    let mut v = format!(
                        "{} ({}; n≥ {} {})",
                        value(cell, r.stats.limit_ns),
                        ratio(cell, i == 0),
                        cell.tail_samples,
                        if cell.too_short { "TOO FEW" } else { "" }
                    );
                    if row.label != "max" {
                        v = format!(
                            "{}; 95 % CI {})",
                            v.trim_end_matches(')').trim_end(),
                            ci(cell)
                        );
                    }
                    (row.label.clone(), v.replace(" )", ")"))
                })
                .collect();
            (r.label.clone(), rows)
        })
        .collect()
}

fn bucket_cols(t: &BucketTable, c: &Comparison) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["run".to_string()];
    // Morton's headings: plain numbers in one unit ("0-1", "1-2" … ms).
    let (div, unit) = if t.edges_ns.iter().all(|e| e % 1_000_000 == 0) {
        (1_000_000, "ms")
    } else {
        (1_000, "µs")
    };
    for (i, e) in t.edges_ns.iter().enumerate() {
        header.push(match t.edges_ns.get(i + 1) {
            Some(n) => format!("{}-{} {unit}", e / div, n / div),
            None => format!("≥ {} {unit}", e / div),
        });
    }
    header.push("> limit".into());
    let rows = c
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut v = vec![r.label.clone()];
            v.extend(t.counts[i].iter().map(|n| n.to_string()));
            v.push(t.unknown_above[i].to_string());
            v
        })
        .collect();
    (header, rows)
}

fn williams_cols(c: &Comparison) -> Vec<(String, Vec<(String, String)>)> {
    c.runs
        .iter()
        .map(|r| (r.label.clone(), williams_rows(&r.stats)))
        .collect()
}

/// The percentile ladder for a terminal: a line per percentile and run, so that its width
/// does not grow with the number of runs (the runs side by side took 225 columns for three).
fn text_ladder(o: &mut String, c: &Comparison) {
    o.push_str("Percentile ladder\n  each run's value, its ratio to the baseline with the ratio's 95 % interval and\n  verdict, the samples at or above it, the value's 95 % CI\n");
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING);
    t.set_header([
        "",
        "run",
        "value",
        "ratio [95 %]",
        "verdict",
        "n ≥",
        "95 % CI",
    ]);
    for row in &c.ladder {
        for (i, (cell, r)) in row.cells.iter().zip(&c.runs).enumerate() {
            let ratio = match (i, cell.ratio, cell.ratio_lo, cell.ratio_hi) {
                (0, ..) => "1.00×".to_string(),
                (_, Some(x), Some(lo), Some(hi)) => format!("{x:.2}× [{lo:.2}–{hi:.2}]"),
                (_, Some(x), ..) => format!("{x:.2}×"),
                _ => "-".into(),
            };
            let verdict = match (i, cell.verdict) {
                (0, _) => "baseline",
                (_, Some(v)) => v,
                (_, None) if cell.within_noise && cell.ratio.is_some() => "~ noise",
                _ => "",
            };
            t.add_row([
                if i == 0 {
                    row.label.clone()
                } else {
                    String::new()
                },
                escape(&r.label),
                value(cell, r.stats.limit_ns),
                ratio,
                verdict.to_string(),
                format!(
                    "{}{}",
                    cell.tail_samples,
                    if cell.too_short { " TOO FEW" } else { "" }
                ),
                if row.label == "max" {
                    String::new()
                } else {
                    ci(cell)
                },
            ]);
        }
    }
    let _ = writeln!(o, "{t}\n");
}

/// "What delayed the spikes": each cause's total over a run's traced spikes and its share of
/// their summed latency, run by run (`(total, share, spikes)` per run; `-` where absent).
fn cause_cells(ch: &latlab_core::compare::CauseChange) -> Vec<String> {
    ch.runs
        .iter()
        .map(|x| match x {
            Some(x) => format!(
                "{} ({:.1} %, {} spike{})",
                Human(x.total_ns),
                100.0 * x.share,
                x.spikes,
                if x.spikes == 1 { "" } else { "s" }
            ),
            None => "-".into(),
        })
        .collect()
}

fn traced(c: &Comparison) -> String {
    c.runs
        .iter()
        .zip(&c.traced)
        .map(|(r, n)| format!("{} {n}", r.label))
        .collect::<Vec<_>>()
        .join(", ")
}

fn text_causes(o: &mut String, c: &Comparison) {
    if c.causes.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "What delayed the traced spikes\n  total over each run's traced spikes, share of their summed latency\n  (spikes traced: {})",
        escape(&traced(c))
    );
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING);
    let mut h = vec!["kind".to_string(), "name".to_string()];
    h.extend(c.runs.iter().map(|r| escape(&r.label)));
    t.set_header(h);
    for ch in &c.causes {
        let mut r = vec![ch.kind.to_string(), escape(&ch.name)];
        r.extend(cause_cells(ch));
        t.add_row(r);
    }
    let _ = writeln!(o, "{t}\n");
}

fn text(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "latlab compare: {} (baseline: {})\n",
        c.runs
            .iter()
            .map(|r| escape(&r.label))
            .collect::<Vec<_>>()
            .join(" vs "),
        escape(&c.runs[0].label)
    );
    if !c.flags.is_empty() {
        o.push_str("Before trusting a difference:\n");
        for f in &c.flags {
            let _ = writeln!(o, "  ! {}", escape(f));
        }
        o.push('\n');
    }
    let cols_text = |o: &mut String, title: &str, cols: &[(String, Vec<(String, String)>)]| {
        let _ = writeln!(o, "{title}");
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        let mut h = vec![String::new()];
        h.extend(cols.iter().map(|c| escape(&c.0)));
        t.set_header(h);
        let n = cols.iter().map(|c| c.1.len()).max().unwrap_or(0);
        for i in 0..n {
            let mut r = vec![cols
                .iter()
                .find_map(|c| c.1.get(i).map(|x| x.0.clone()))
                .unwrap_or_default()];
            r.extend(
                cols.iter()
                    .map(|c| c.1.get(i).map(|x| x.1.clone()).unwrap_or_default()),
            );
            t.add_row(r);
        }
        let _ = writeln!(o, "{t}\n");
    };
    text_causes(&mut o, c);
    text_ladder(&mut o, c);
    {
        let (h, rows, notes) = tail_rows(c);
        let _ = writeln!(o, "{}", crate::tail::TITLE);
        let mut tb = comfy_table::Table::new();
        tb.load_style(comfy_table::presets::NOTHING);
        tb.set_header(h);
        for r in rows {
            tb.add_row(r.into_iter().map(|s| escape(&s)).collect::<Vec<_>>());
        }
        let _ = writeln!(o, "{tb}");
        for n in notes {
            let _ = writeln!(o, "  {}", escape(&n));
        }
        o.push('\n');
    }
    for (title, t) in [
        ("Counts per latency range (Morton)", &c.buckets_ms),
        ("Counts per latency range, finer", &c.buckets_us),
    ] {
        let _ = writeln!(o, "{title}");
        let (h, rows) = bucket_cols(t, c);
        let mut tb = comfy_table::Table::new();
        tb.load_style(comfy_table::presets::NOTHING);
        tb.set_header(h);
        for r in rows {
            tb.add_row(r.into_iter().map(|s| escape(&s)).collect::<Vec<_>>());
        }
        let _ = writeln!(o, "{tb}\n");
    }
    cols_text(&mut o, "Statistics (Williams)", &williams_cols(c));
    if !c.changes.is_empty() {
        o.push_str("What changed\n");
        for ch in &c.changes {
            let _ = writeln!(
                o,
                "  {}: {}",
                escape(&ch.key),
                ch.values
                    .iter()
                    .map(|v| v
                        .as_deref()
                        .map(escape)
                        .unwrap_or_else(|| "(absent)".into()))
                    .collect::<Vec<_>>()
                    .join(" → ")
            );
        }
        o.push('\n');
    }
    let _ = writeln!(o, "Method: {}", c.method);
    o
}

fn markdown(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "## latlab compare: {}\n",
        c.runs
            .iter()
            .map(|r| md(&r.label))
            .collect::<Vec<_>>()
            .join(" vs ")
    );
    for f in &c.flags {
        let _ = writeln!(o, "- **{}**", md(f));
    }
    if !c.flags.is_empty() {
        o.push('\n');
    }
    if !c.causes.is_empty() {
        let _ = writeln!(
            o,
            "### What delayed the traced spikes\n\nTotal over each run's traced spikes, share of their summed latency (spikes traced: {}).\n",
            md(&traced(c))
        );
        let mut h = vec!["kind".to_string(), "name".to_string()];
        h.extend(c.runs.iter().map(|r| md(&r.label)));
        let rows: Vec<Vec<String>> = c
            .causes
            .iter()
            .map(|ch| {
                let mut r = vec![ch.kind.to_string(), md(&ch.name)];
                r.extend(cause_cells(ch));
                r
            })
            .collect();
        md_table(&mut o, &h, &rows);
    }
    o.push_str("### Percentile ladder\n\nValue, ratio to the baseline with its 95 % interval and verdict, samples at or above it, 95 % confidence interval.\n\n");
    md_columns(&mut o, "percentile", &ladder_cols(c));
    md_tail(&mut o, tail_rows(c));
    for (title, t) in [
        ("Counts per latency range (Morton)", &c.buckets_ms),
        ("Counts per latency range, finer", &c.buckets_us),
    ] {
        let _ = writeln!(o, "### {title}\n");
        let (h, rows) = bucket_cols(t, c);
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|r| r.into_iter().map(|s| md(&s)).collect())
            .collect();
        md_table(&mut o, &h.iter().map(|s| md(s)).collect::<Vec<_>>(), &rows);
    }
    o.push_str("### Statistics (Williams)\n\n");
    md_columns(&mut o, "", &williams_cols(c));
    if !c.changes.is_empty() {
        o.push_str("### What changed\n\n");
        let mut h = vec!["key".to_string()];
        h.extend(c.runs.iter().map(|r| md(&r.label)));
        let rows: Vec<Vec<String>> = c
            .changes
            .iter()
            .map(|ch| {
                let mut r = vec![md(&ch.key)];
                r.extend(
                    ch.values
                        .iter()
                        .map(|v| v.as_deref().map(md).unwrap_or_default()),
                );
                r
            })
            .collect();
        md_table(&mut o, &h, &rows);
    }
    let _ = writeln!(o, "_Method: {}_", md(&c.method));
    o
}

fn html_causes(o: &mut String, c: &Comparison) {
    if c.causes.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<h2>What delayed the traced spikes</h2>\n<p class=\"meta\">Total over each run's traced spikes, share of their summed latency (spikes traced: {}).</p>\n<table><tr><th>kind</th><th>name</th>",
        esc(&traced(c))
    );
    for r in &c.runs {
        let _ = write!(o, "<th>{}</th>", esc(&r.label));
    }
    o.push_str("</tr>\n");
    for ch in &c.causes {
        let _ = write!(
            o,
            "<tr><td class=\"k\">{}</td><td class=\"k\">{}</td>",
            esc(ch.kind),
            esc(&ch.name)
        );
        for x in cause_cells(ch) {
            let _ = write!(o, "<td>{}</td>", esc(&x));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
}

fn html(c: &Comparison, runs: &[RunModel]) -> Vec<u8> {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<h1>latlab compare</h1><p class=\"meta\">{} (baseline: {})</p>",
        esc(&c
            .runs
            .iter()
            .map(|r| r.label.as_str())
            .collect::<Vec<_>>()
            .join(" vs ")),
        esc(&c.runs[0].label)
    );
    if !c.flags.is_empty() {
        o.push_str("<ul>");
        for f in &c.flags {
            let _ = write!(o, "<li class=\"warn\">{}</li>", esc(f));
        }
        o.push_str("</ul>\n");
    }
    let series: Vec<(String, &latlab_core::hist::Histogram)> = runs
        .iter()
        .zip(&c.runs)
        .filter_map(|(r, s)| r.total_hist.as_ref().map(|h| (s.label.clone(), h)))
        .collect();
    let mut limits: Vec<u64> = runs
        .iter()
        .filter_map(|r| r.record.config.max_latency_ns)
        .collect();
    limits.sort_unstable();
    limits.dedup();
    html_causes(&mut o, c);
    o.push_str("<h2>Share of samples at or above each latency</h2>\n");
    o.push_str(&svg::ccdf(
        "share of samples ≥ latency (CCDF), all CPUs of each run",
        &series,
        &limits,
    ));
    o.push_str("<p class=\"meta\">Shares, not counts: runs of different lengths compare directly. Drawn from the exact bucket counts.</p>\n");
    o.push_str("<h2>Latency histograms</h2>\n<p class=\"meta\">Raw counts per bucket: a longer run sits higher.</p>\n");
    o.push_str(&svg::loglog_histogram(
        "samples per bucket against latency, all CPUs of each run",
        &series,
    ));
    o.push_str("<h2>Percentile ladder</h2>\n<p class=\"meta\">Value, ratio to the baseline with its 95 % interval and verdict, samples at or above it, 95 % confidence interval.</p>\n");
    columns_table(&mut o, "percentile", &ladder_cols(c));
    {
        let (h, rows, notes) = tail_rows(c);
        o.push_str("<h2>Tail estimates</h2>\n<table><tr>");
        for x in &h {
            let _ = write!(o, "<th>{}</th>", esc(x));
        }
        o.push_str("</tr>\n");
        for r in rows {
            o.push_str("<tr>");
            for (i, x) in r.iter().enumerate() {
                let cls = if i == 0 { " class=\"k\"" } else { "" };
                let _ = write!(o, "<td{cls}>{}</td>", esc(x));
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
    }
    for (title, t) in [
        ("Counts per latency range (Morton)", &c.buckets_ms),
        ("Counts per latency range, finer", &c.buckets_us),
    ] {
        let _ = writeln!(o, "<h2>{}</h2><table><tr>", esc(title));
        let (h, rows) = bucket_cols(t, c);
        for x in h {
            let _ = write!(o, "<th>{}</th>", esc(&x));
        }
        o.push_str("</tr>\n");
        for r in rows {
            o.push_str("<tr>");
            for (i, x) in r.iter().enumerate() {
                let cls = if i == 0 { " class=\"k\"" } else { "" };
                let _ = write!(o, "<td{cls}>{}</td>", esc(x));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
    }
    o.push_str("<h2>Statistics (Williams)</h2>\n");
    columns_table(&mut o, "", &williams_cols(c));
    if !c.changes.is_empty() {
        // Several columns of long values (command lines, JSON): share the page width.
        o.push_str("<h2>What changed</h2>\n<table class=\"fit\"><tr><th class=\"k\">key</th>");
        for r in &c.runs {
            let _ = write!(o, "<th class=\"k\">{}</th>", esc(&r.label));
        }
        o.push_str("</tr>\n");
        for ch in &c.changes {
            let _ = write!(o, "<tr><td class=\"k\">{}</td>", esc(&ch.key));
            for v in &ch.values {
                let _ = write!(
                    o,
                    "<td class=\"k\">{}</td>",
                    esc(v.as_deref().unwrap_or(""))
                );
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
    }
    let _ = writeln!(o, "<p class=\"meta\">Method: {}</p>", esc(&c.method));
    page("latlab compare", &o)
}

/// Render the comparison of `runs` (the first is the baseline). Empty input renders nothing.
pub fn render(runs: &[RunModel], format: CompareFormat) -> Vec<u8> {
    if runs.is_empty() {
        return Vec::new();
    }
    let c = compare(runs);
    match format {
        CompareFormat::Text => text(&c).into_bytes(),
        CompareFormat::Markdown => markdown(&c).into_bytes(),
        CompareFormat::Json => {
            let mut v = serde_json::to_vec_pretty(&c).expect("a comparison serializes");
            v.push(b'\n');
            v
        }
        CompareFormat::Html => html(&c, runs),
        CompareFormat::Lava => Vec::new(),
    }
}
