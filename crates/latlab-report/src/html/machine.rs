//! The machine: `latlab check`'s findings on the run's inventory, the record's machine
//! fields, and the inventory as `check` shows it (or flattened, when this version cannot read
//! it).

use std::collections::BTreeMap;
use std::fmt::Write;

use latlab_core::inventory::Inventory;
use latlab_core::record::RunRecord;

use crate::svg::esc;

/// The machine as a formatted table (the record's machine fields, then `check`'s inventory
/// rows), preceded by `check`'s findings when the run carries an inventory. An inventory this
/// version cannot read is shown flattened rather than dropped.
pub(super) fn section(o: &mut String, r: &RunRecord) {
    let inv: Option<Inventory> = r
        .inventory
        .as_ref()
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    if let Some(inv) = &inv {
        check_findings(o, inv);
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

/// What `latlab check` finds in the run's inventory: the count per severity, then each
/// finding with its evidence and fix.
fn check_findings(o: &mut String, inv: &Inventory) {
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

/// Flatten a JSON value to `path → value` for the inventory table.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
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
