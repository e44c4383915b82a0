//! The answer first: the verdict block the page opens with (the worst latency and where, the
//! top causes with their shares, the `check` findings that matter), and the table of contents
//! built from the page's own section headings, each given an anchor.

use std::fmt::Write;

use latlab_core::findings::Severity;
use latlab_core::model::RunModel;
use latlab_core::units::Human;

use crate::svg::esc;

/// Causes the verdict names (the whole table is in "What delays this machine").
const TOP_CAUSES: usize = 3;

/// The verdict block: nothing but what the run supports.
pub(super) fn section(o: &mut String, m: &RunModel) {
    let r = &m.record;
    o.push_str("<section class=\"verdict\">\n<h2 id=\"verdict\">Verdict</h2>\n<ul>\n");
    match crate::figures::worst(m) {
        Some((cpu, lat, at)) => {
            let when = at
                .map(|at| {
                    format!(
                        " at {}.{:06} s",
                        at / 1_000_000_000,
                        at % 1_000_000_000 / 1_000
                    )
                })
                .unwrap_or_default();
            let p999 = crate::figures::pbound("p99.9", m.total.p999_ns, &m.total);
            let _ = writeln!(
                o,
                "<li><strong>Worst latency: {}</strong> on CPU {cpu}{}; p99.9 of all CPUs {}.</li>",
                Human(lat),
                esc(&when),
                esc(&p999)
            );
        }
        None if m.record.config.mode == "none" => {
            o.push_str("<li>No latency measured: a profile alone.</li>\n")
        }
        None => o.push_str("<li>No samples.</li>\n"),
    }
    let rows = latlab_core::trace::summarize(&r.spikes);
    if !rows.is_empty() {
        let _ = write!(
            o,
            "<li>What delays this machine (over {} traced spikes, <a href=\"#what-delays-this-machine\">all causes</a>):<ol>",
            r.spikes.len()
        );
        for c in rows.iter().take(TOP_CAUSES) {
            let _ = write!(
                o,
                "<li><strong>{:.1} %</strong> {} <code>{}</code> ({} in {} spike{}, worst {})</li>",
                100.0 * c.share,
                latlab_core::trace::attribution::kind_str(c.kind),
                esc(&c.name),
                Human(c.total_ns),
                c.spikes,
                if c.spikes == 1 { "" } else { "s" },
                Human(c.worst_ns)
            );
        }
        o.push_str("</ol></li>\n");
    } else if !r.spikes.is_empty() {
        let _ = writeln!(
            o,
            "<li>{} traced spikes, none attributed to a cause.</li>",
            r.spikes.len()
        );
    }
    if let Some(f) = crate::check::run_findings(r) {
        let bad: Vec<_> = f.iter().filter(|x| x.severity == Severity::Bad).collect();
        let warn = f.iter().filter(|x| x.severity == Severity::Warn).count();
        let _ = write!(
            o,
            "<li><a href=\"#machine-check\">Machine check</a>: {} bad, {warn} warn",
            bad.len()
        );
        if !bad.is_empty() {
            o.push_str("<ul>");
            for x in bad {
                let _ = write!(
                    o,
                    "<li class=\"warn\">{} <span class=\"meta\">({})</span></li>",
                    esc(&x.title),
                    esc(&x.id)
                );
            }
            o.push_str("</ul>");
        }
        o.push_str("</li>\n");
    }
    o.push_str("</ul>\n</section>\n");
}

/// The anchor of a heading's (escaped) text: lower-case letters and digits, runs of anything
/// else one `-`.
fn slug(text: &str) -> String {
    let mut s = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.is_empty() && !s.ends_with('-') {
            s.push('-');
        }
    }
    while s.ends_with('-') {
        s.pop();
    }
    if s.is_empty() {
        s.push_str("section");
    }
    s
}

/// Give every `<h2>` of `body` an anchor (unique, from its text) and return the body with them
/// and the table of contents linking to them.
pub(super) fn anchor(body: &str) -> (String, String) {
    let mut out = String::with_capacity(body.len() + 512);
    let mut toc = String::from("<nav><h2 id=\"contents\">Contents</h2><ol>");
    let mut used: Vec<String> = vec!["verdict".into(), "contents".into()];
    let mut rest = body;
    while let Some(i) = rest.find("<h2>") {
        let Some(j) = rest[i..].find("</h2>") else {
            break;
        };
        let text = &rest[i + 4..i + j];
        let base = slug(text);
        let mut id = base.clone();
        let mut n = 2;
        while used.contains(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        used.push(id.clone());
        // `text` is the heading's HTML as its renderer escaped it.
        let _ = write!(toc, "<li><a href=\"#{id}\">{text}</a></li>");
        out.push_str(&rest[..i]);
        let _ = write!(out, "<h2 id=\"{id}\">{text}</h2>");
        rest = &rest[i + j + 5..];
    }
    out.push_str(rest);
    toc.push_str("</ol></nav>\n");
    (out, toc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_get_unique_anchors_and_a_contents_entry() {
        let (body, toc) =
            anchor("<h2>Spikes</h2>x<h2>What delays this machine</h2><h2>Spikes</h2>");
        assert_eq!(
            body,
            "<h2 id=\"spikes\">Spikes</h2>x<h2 id=\"what-delays-this-machine\">What delays this machine</h2><h2 id=\"spikes-2\">Spikes</h2>"
        );
        assert!(toc.contains("<a href=\"#spikes-2\">Spikes</a>"));
        assert_eq!(slug("&lt;b&gt; (µs)"), "lt-b-gt-s");
    }
}
