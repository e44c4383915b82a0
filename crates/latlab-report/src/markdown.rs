//! The markdown report, for a mailing list or a pull request: the summary table, the
//! percentile ladder and Williams' block as tables, spikes, loads and notes. No plots (a
//! mailing list has none); `report --format html` has them.

use std::fmt::Write;

use latlab_core::model::RunModel;
use latlab_core::units::Human;

use crate::figures::{ladder_rows, short_flags, stat_rows, summary_cells, williams_rows};

/// Untrusted text in a markdown table cell: [`crate::escape`]d, pipes and markup
/// characters escaped so a task name cannot break the table or inject HTML.
pub fn cell(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' => {
                o.push('\\');
                o.push(c)
            }
            '&' => o.push_str("&amp;"),
            c => crate::escape::push_char(&mut o, c),
        }
    }
    o
}

/// A markdown table: header then rows (cells already escaped).
pub fn table(out: &mut String, header: &[String], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
            .collect::<String>()
    );
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

/// Columns of `(heading, rows)` as one table, rows matched by position.
pub fn columns(out: &mut String, first: &str, cols: &[(String, Vec<(String, String)>)]) {
    let mut header = vec![cell(first)];
    header.extend(cols.iter().map(|c| cell(&c.0)));
    let n = cols.iter().map(|c| c.1.len()).max().unwrap_or(0);
    let rows: Vec<Vec<String>> = (0..n)
        .map(|i| {
            let mut r = vec![cell(
                &cols
                    .iter()
                    .find_map(|c| c.1.get(i).map(|x| x.0.clone()))
                    .unwrap_or_default(),
            )];
            r.extend(
                cols.iter()
                    .map(|c| cell(c.1.get(i).map(|x| x.1.as_str()).unwrap_or(""))),
            );
            r
        })
        .collect();
    table(out, &header, &rows);
}

/// "What delays this machine" over the traced spikes (see the text report).
fn delays_table(o: &mut String, spikes: &[latlab_core::record::SpikeRecord]) {
    use latlab_core::trace::attribution::kind_str;
    let rows = latlab_core::trace::summarize(spikes);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "### What delays this machine\n\nCauses over {} traced spikes, largest total first.\n",
        spikes.len()
    );
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                kind_str(r.kind).to_string(),
                cell(&r.name),
                r.spikes.to_string(),
                Human(r.total_ns).to_string(),
                Human(r.worst_ns).to_string(),
                format!("{:.1} %", 100.0 * r.share),
            ]
        })
        .collect();
    let h = [
        "kind",
        "name",
        "spikes",
        "total",
        "worst",
        "share of spike latency",
    ];
    table(o, &h.map(String::from), &rows);
}

pub fn render(m: &RunModel) -> Vec<u8> {
    let r = &m.record;
    let mut o = String::new();
    heading(&mut o, m);
    let rows = stat_rows(m, |c| format!("CPU {c}"), "all");
    let header: Vec<String> = [
        "CPU", "samples", "missed", "min", "mean", "p99", "p99.9", "max",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|(n, s)| {
            std::iter::once(n.clone())
                .chain(summary_cells(s).iter().map(|c| cell(c)))
                .collect()
        })
        .collect();
    table(&mut o, &header, &body);
    mode_tables(&mut o, crate::extra::tables(m));
    if let Some(p) = &r.profile {
        mode_tables(
            &mut o,
            crate::profile_tables::tables(p, crate::profile_tables::TEXT_WAITS),
        );
    }
    o.push_str("### Percentile ladder\n\n");
    let ladder: Vec<(String, Vec<(String, String)>)> = rows
        .iter()
        .map(|(n, s)| (n.clone(), ladder_rows(s)))
        .collect();
    columns(&mut o, "percentile", &ladder);
    if m.total.samples > 0 {
        tail_section(&mut o, crate::tail::table(&crate::tail::estimates(m)));
    }
    o.push_str("### Statistics (Williams)\n\n");
    let w: Vec<(String, Vec<(String, String)>)> = rows
        .iter()
        .map(|(n, s)| (n.clone(), williams_rows(s)))
        .collect();
    columns(&mut o, "", &w);
    if !r.spikes.is_empty() {
        spikes_table(&mut o, &r.spikes);
    }
    delays_table(&mut o, &r.spikes);
    if !r.loads.is_empty() {
        loads_table(&mut o, &r.loads);
    }
    if let Some(f) = crate::check::run_findings(r) {
        let _ = writeln!(
            o,
            "### Machine check\n\n`latlab check` on the run's inventory: {} findings.\n",
            f.len()
        );
        for l in crate::check::finding_lines(&f) {
            let _ = writeln!(o, "- {}", cell(&l));
        }
        o.push('\n');
    }
    if !r.warnings.is_empty() || !r.notes.is_empty() {
        o.push_str("### Notes\n\n");
        for w in &r.warnings {
            let _ = writeln!(o, "- **warning:** {}", cell(w));
        }
        for n in &r.notes {
            let _ = writeln!(o, "- {}", cell(n));
        }
        o.push('\n');
    }
    o.into_bytes()
}

/// The title, what was measured and how, the command line and the flags of percentiles
/// resting on too few samples.
fn heading(o: &mut String, m: &RunModel) {
    let r = &m.record;
    let _ = writeln!(o, "## latlab report: {}\n", cell(&r.label));
    let mut meta = vec![format!("source {}", r.source.as_str())];
    if let Some(k) = &r.machine.kernel_release {
        meta.push(format!("kernel {}", cell(k)));
    }
    if let Some(i) = r.config.interval_ns {
        meta.push(format!("interval {}", Human(i)));
    }
    if r.config.mode == "none" {
        // `latlab profile --no-measure`: the profile alone.
        meta.push("no latency measured (profile only)".into());
    }
    if !r.config.loads.is_empty() {
        meta.push(format!("loads {}", cell(&r.config.loads.join(", "))));
    }
    let _ = writeln!(o, "{}\n", meta.join(" · "));
    if let Some(c) = &r.command_line {
        let _ = writeln!(o, "command: {}\n", cell(c));
    }
    let flags = short_flags(m);
    for f in &flags {
        let _ = writeln!(o, "- **{}**", cell(f));
    }
    if !flags.is_empty() {
        o.push('\n');
    }
}

/// The tail estimates from [`crate::tail::table`] (header, rows, why an estimate is missing),
/// for a run and for `compare`: the table, then the notes as a list.
pub(crate) fn tail_section(
    o: &mut String,
    (header, rows, notes): (Vec<String>, Vec<Vec<String>>, Vec<String>),
) {
    let _ = writeln!(o, "### Tail estimates\n\n{}\n", cell(crate::tail::TITLE));
    let header: Vec<String> = header.iter().map(|h| cell(h)).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| cell(c)).collect())
        .collect();
    table(o, &header, &rows);
    for n in &notes {
        let _ = writeln!(o, "- {}", cell(n));
    }
    if !notes.is_empty() {
        o.push('\n');
    }
}

/// The traced spikes (50 at most) with their three largest causes.
fn spikes_table(o: &mut String, spikes: &[latlab_core::record::SpikeRecord]) {
    o.push_str("### Spikes\n\n");
    let rows: Vec<Vec<String>> = spikes
        .iter()
        .take(50)
        .map(|s| {
            vec![
                s.cpu.to_string(),
                format!(
                    "{}.{:06}",
                    s.at_ns / 1_000_000_000,
                    s.at_ns % 1_000_000_000 / 1000
                ),
                cell(&format!(
                    "{}{}",
                    Human(s.latency_ns),
                    crate::figures::spike_facts(s)
                )),
                cell(
                    &s.causes
                        .iter()
                        .take(3)
                        .map(|c| {
                            format!(
                                "{} {} ({}){}{}",
                                latlab_core::trace::attribution::kind_str(c.kind),
                                c.name,
                                Human(c.ns),
                                crate::figures::cause_context(c),
                                crate::figures::cause_evidence(s, c)
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
            ]
        })
        .collect();
    let h = ["CPU", "at (s)", "latency", "causes"];
    table(o, &h.map(String::from), &rows);
}

/// The loads that ran: profile, command, exit status, operations per second.
fn loads_table(o: &mut String, loads: &[latlab_core::record::LoadRecord]) {
    o.push_str("### Loads\n\n");
    let rows: Vec<Vec<String>> = loads
        .iter()
        .map(|l| {
            vec![
                cell(&l.profile),
                cell(&l.command),
                l.exit.map_or("-".into(), |e| e.to_string()),
                l.ops.map_or("-".into(), |x| format!("{x:.1}")),
            ]
        })
        .collect();
    let h = ["profile", "command", "exit", "ops"];
    table(o, &h.map(String::from), &rows);
}

/// Tables of plain cells (the mode's, the scenario's, the profile's), each under its title.
fn mode_tables(o: &mut String, tables: Vec<crate::tables::Table>) {
    for t in tables {
        let _ = writeln!(o, "### {}\n", cell(&t.title));
        let rows: Vec<Vec<String>> = t
            .rows
            .iter()
            .map(|r| r.iter().map(|c| cell(c)).collect())
            .collect();
        table(o, &t.header, &rows);
        if let Some(n) = &t.note {
            let _ = writeln!(o, "{}\n", cell(n));
        }
    }
}
