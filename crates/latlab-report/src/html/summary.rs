//! The top of the report: the title, what was measured and how, the flags, warnings and
//! notes, the summary table, and the mode's or the scenario's tables.

use std::fmt::Write;

use latlab_core::model::RunModel;
use latlab_core::units::{format_measured, Human};

use crate::figures::{short_flags, stat_rows, summary_cells};
use crate::svg::esc;

/// The title and what was measured and how.
pub(super) fn title(o: &mut String, m: &RunModel) {
    let _ = writeln!(o, "<h1>latlab report: {}</h1>", esc(&m.record.label));
    o.push_str(&heading(m));
}

/// The flags, warnings and notes, the summary table and the mode's and the scenario's tables.
pub(super) fn section(o: &mut String, m: &RunModel) {
    let r = &m.record;
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

    o.push_str("<h2>Summary</h2>\n<table><tr><th>CPU</th><th>samples</th><th>missed</th><th>min</th><th>mean</th><th>p99</th><th>p99.9</th><th>max</th></tr>\n");
    let rows = stat_rows(m, |c| c.to_string(), "all");
    for (name, s) in &rows {
        o.push_str("<tr>");
        for c in std::iter::once(name.clone()).chain(summary_cells(s)) {
            let _ = write!(o, "<td>{}</td>", esc(&c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");

    mode_tables(o, m);
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
