//! The traced spikes: each with its largest causes, what delays this machine over all of
//! them, and their timelines ([`crate::lanes`]).

use std::fmt::Write;

use latlab_core::record::SpikeRecord;
use latlab_core::units::Human;

use crate::svg::esc;

/// The spikes' table (500 at most), the causes over all of them and the timelines.
pub(super) fn section(o: &mut String, spikes: &[SpikeRecord]) {
    o.push_str("<h2>Spikes</h2>\n<table><tr><th>spike</th><th>CPU</th><th>at (s)</th><th>latency</th><th class=\"k\">causes (largest first)</th><th class=\"k\">trace</th></tr>\n");
    for (i, s) in spikes.iter().take(500).enumerate() {
        let causes: Vec<String> = s
            .causes
            .iter()
            .take(5)
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
            .collect();
        // The spike's number links to its lanes (drawn for the first ones) and its trace file,
        // a path inside the run directory, to the file.
        let n = if i < crate::lanes::MAX_SPIKES_DRAWN {
            format!("<a href=\"#{}\">{}</a>", crate::lanes::anchor(i), i + 1)
        } else {
            (i + 1).to_string()
        };
        let file = s
            .trace_file
            .as_deref()
            .filter(|f| relative_path(f))
            .map(|f| format!("<a href=\"{}\">{}</a>", esc(f), esc(f)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "<tr><td>{n}</td><td>{}</td><td>{}.{:06}</td><td>{}</td><td class=\"k\">{}</td><td class=\"k\">{file}</td></tr>",
            s.cpu,
            s.at_ns / 1_000_000_000,
            s.at_ns % 1_000_000_000 / 1_000,
            esc(&format!("{}{}", Human(s.latency_ns), crate::figures::spike_facts(s))),
            esc(&causes.join("; "))
        );
    }
    o.push_str("</table>\n");
    if spikes.len() > 500 {
        let _ = writeln!(
            o,
            "<p class=\"meta\">{} more spikes not listed.</p>",
            spikes.len() - 500
        );
    }
    o.push_str(&crate::lanes::section(spikes));
}

/// A path a link may point at: relative, inside the run directory, no scheme.
fn relative_path(f: &str) -> bool {
    !f.is_empty()
        && !f.starts_with('/')
        && !f.contains(':')
        && !f.split('/').any(|c| c == "..")
        && f.chars().all(|c| !c.is_control())
}

/// "What delays this machine": every cause over the traced spikes, the spikes it appeared in,
/// total and worst time, share of the summed spike latency (names escaped).
pub(super) fn delays_table(o: &mut String, spikes: &[latlab_core::record::SpikeRecord]) {
    use latlab_core::trace::attribution::kind_str;
    let rows = latlab_core::trace::summarize(spikes);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<h2>What delays this machine</h2>\n<p class=\"meta\">Causes over {} traced spikes, largest total first (each spike, its causes and its timeline are in <a href=\"#spikes\">Spikes</a>).</p>",
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
