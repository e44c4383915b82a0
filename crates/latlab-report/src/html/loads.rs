//! The loads that ran during the measurement: each profile's command, exit status and
//! operations per second (or only the profiles named, for a record without their results).

use std::fmt::Write;

use latlab_core::record::RunRecord;

use crate::svg::esc;

/// The loads' table (nothing for a run without loads).
pub(super) fn section(o: &mut String, r: &RunRecord) {
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
}
