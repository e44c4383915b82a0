//! The traced spikes: each with its largest causes, what delays this machine over all of
//! them, and their timelines ([`crate::lanes`]).

use std::fmt::Write;

use latlab_core::record::SpikeRecord;
use latlab_core::units::Human;

use crate::svg::esc;

/// The spikes' table (500 at most), the causes over all of them and the timelines.
pub(super) fn section(o: &mut String, spikes: &[SpikeRecord]) {
    o.push_str("<h2>Spikes</h2>\n<table><tr><th>CPU</th><th>at (s)</th><th>latency</th><th class=\"k\">causes (largest first)</th></tr>\n");
    for s in spikes.iter().take(500) {
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
    if spikes.len() > 500 {
        let _ = writeln!(
            o,
            "<p class=\"meta\">{} more spikes not listed.</p>",
            spikes.len() - 500
        );
    }
    delays_table(o, spikes);
    o.push_str(&crate::lanes::section(spikes));
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
