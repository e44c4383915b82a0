//! The frame every plot shares: its size and margins, the frame with its title and axis
//! labels, the legend, and what an empty plot says.

use std::fmt::Write;

use super::{dash_attr, esc, series_style};

pub(super) const W: f64 = 760.0;
pub(super) const H: f64 = 360.0;
pub(super) const L: f64 = 70.0; // left margin
pub(super) const R: f64 = 150.0; // right margin (legend)
pub(super) const T: f64 = 20.0;
pub(super) const B: f64 = 50.0;

/// Opens a plot: the SVG element with its title, the plot area's frame and the axis labels.
pub(super) fn frame(out: &mut String, title: &str, xlabel: &str, ylabel: &str) {
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{t}"><title>{t}</title><rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#888"/><text x="{cx}" y="{xl}" text-anchor="middle" font-size="13">{x}</text><text transform="translate(16 {cy}) rotate(-90)" text-anchor="middle" font-size="13">{y}</text>"##,
        t = esc(title),
        pw = W - L - R,
        ph = H - T - B,
        cx = L + (W - L - R) / 2.0,
        xl = H - 8.0,
        cy = T + (H - T - B) / 2.0,
        x = esc(xlabel),
        y = esc(ylabel),
    );
}

/// Lines a legend label wraps to (at most), and the height each adds.
const LEGEND_LINES: usize = 3;
const LEGEND_LINE_H: f64 = 13.0;

/// A label cut into lines of at most `per` characters, at a space, `-`, `_`, `/`, `.` or `(`
/// where one is near, at most [`LEGEND_LINES`] lines (the last ends with `…` when cut short).
fn wrap(label: &str, per: usize) -> Vec<String> {
    let chars: Vec<char> = label.chars().collect();
    let mut lines = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        if lines.len() + 1 == LEGEND_LINES && chars.len() - at > per {
            let mut last: String = chars[at..at + per - 1].iter().collect();
            last.push('…');
            lines.push(last);
            return lines;
        }
        let mut end = (at + per).min(chars.len());
        if end < chars.len() {
            // Break after the last separator of the second half of the line, if any.
            if let Some(b) = (at + per / 2..end)
                .rev()
                .find(|&i| matches!(chars[i], ' ' | '-' | '_' | '/' | '.' | '('))
            {
                end = if chars[b] == '(' { b } else { b + 1 };
            }
        }
        lines.push(chars[at..end].iter().collect::<String>().trim().to_string());
        at = end;
    }
    lines
}

/// The legend: each series' line style and name, right of the plot area (24 at most). A name
/// longer than the legend column wraps onto up to three lines (its whole text in the entry's
/// hover title when cut), never squeezed into illegible glyphs. Returns where the next entry
/// would have gone (for what a plot puts under its legend).
pub(super) fn legend(out: &mut String, names: &[String]) -> f64 {
    // About 7 px per character at 12 px.
    let per = ((R - 40.0) / 7.0) as usize;
    let mut y = T + 10.0;
    for (i, n) in names.iter().enumerate().take(24) {
        let lines = wrap(n, per);
        let _ = write!(
            out,
            r#"<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{c}"{d} stroke-width="3"/>"#,
            x1 = W - R + 10.0,
            x2 = W - R + 30.0,
            c = series_style(i).0,
            d = dash_attr(series_style(i).1),
        );
        let tx = W - R + 35.0;
        if lines.len() <= 1 {
            let _ = write!(
                out,
                r#"<text x="{tx}" y="{ty}" font-size="12">{n}</text>"#,
                ty = y + 4.0,
                n = esc(n),
            );
        } else {
            let _ = write!(
                out,
                r#"<text x="{tx}" y="{ty}" font-size="12"><title>{n}</title>"#,
                ty = y + 4.0,
                n = esc(n),
            );
            for (k, l) in lines.iter().enumerate() {
                let dy = if k == 0 { 0.0 } else { LEGEND_LINE_H };
                let _ = write!(out, r#"<tspan x="{tx}" dy="{dy}">{}</tspan>"#, esc(l));
            }
            out.push_str("</text>");
        }
        y += 16.0 + LEGEND_LINE_H * (lines.len().max(1) - 1) as f64;
    }
    y
}

/// Ends a plot that has nothing to draw with `what` ("no samples") in the middle of its frame.
pub(super) fn empty(out: &mut String, what: &str) {
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{what}</text></svg>"#,
        L + (W - L - R) / 2.0,
        T + (H - T - B) / 2.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_legend_names_wrap_instead_of_being_squeezed() {
        assert_eq!(wrap("CPU 0", 15), ["CPU 0"]);
        assert_eq!(
            wrap("6.18.0-rc1 (2026-11-27T22:29:08Z)", 15),
            ["6.18.0-rc1", "(2026-11-", "27T22:29:08Z)"]
        );
        let cut = wrap(&"x".repeat(100), 15);
        assert_eq!(cut.len(), LEGEND_LINES);
        assert!(cut[2].ends_with('…') && cut[2].chars().count() == 15);
        let mut o = String::new();
        let _ = legend(
            &mut o,
            &["a label far longer than the legend's column".into()],
        );
        assert!(!o.contains("textLength"), "{o}");
        assert_eq!(o.matches("<tspan").count(), 3, "{o}");
        assert!(
            o.contains("<title>a label far longer than the legend"),
            "{o}"
        );
    }
}
