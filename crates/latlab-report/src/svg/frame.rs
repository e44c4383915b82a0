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

/// The legend: each series' line style and name, right of the plot area (24 at most).
pub(super) fn legend(out: &mut String, names: &[String]) {
    for (i, n) in names.iter().enumerate().take(24) {
        let y = T + 10.0 + i as f64 * 16.0;
        // A label longer than the legend column is squeezed to fit inside the picture
        // (about 7 px per character at 12 px).
        let room = R - 40.0;
        let fit = if n.chars().count() as f64 * 7.0 > room {
            format!(" textLength=\"{room}\" lengthAdjust=\"spacingAndGlyphs\"")
        } else {
            String::new()
        };
        let _ = write!(
            out,
            r#"<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{c}"{d} stroke-width="3"/><text x="{tx}" y="{ty}" font-size="12"{fit}>{n}</text>"#,
            x1 = W - R + 10.0,
            x2 = W - R + 30.0,
            c = series_style(i).0,
            d = dash_attr(series_style(i).1),
            tx = W - R + 35.0,
            ty = y + 4.0,
            n = esc(n),
            fit = fit,
        );
    }
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
