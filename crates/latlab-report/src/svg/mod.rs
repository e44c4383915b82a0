//! Hand-written SVG plots: small, exact, no script. The CCDF (share of samples ≥ latency,
//! log-log, from the exact bucket counts), Williams' log-log histogram (count per bucket
//! against latency, several series overlaid) and the per-second maximum over time. Series
//! differ in colour and dash pattern ([`series_style`]).
//!
//! Every plot has axis labels with units and a legend; labels are escaped with [`esc`]. Long
//! time series are reduced to one point per pixel column keeping the *maximum* of the seconds
//! it covers, so no spike disappears from the picture.
//!
//! One file per kind of plot: `ccdf` (the CCDF and its points), `histogram` (Williams'
//! figure), `time` (values per second or interval over the run), `heatmap` (latency over
//! time), `fit` (the tail fit over the CCDF and its quantile-quantile plot); `frame` (size,
//! frame, legend) and `axes` (log scales, ticks, the time axis) are what they share. The
//! public functions are re-exported here.

pub(crate) mod axes;
mod ccdf;
mod fit;
mod frame;
mod heatmap;
mod histogram;
mod time;

pub use axes::time_label;
pub use ccdf::{ccdf, ccdf_points};
pub use fit::{qq_plot, tail_fit};
pub use heatmap::heatmap;
pub use histogram::{loglog_buckets, loglog_histogram, Buckets};
pub use time::{over_time, per_second_max};

/// Series colours (colour-blind-safe Okabe–Ito order), cycled.
pub const COLORS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// Untrusted text for HTML/SVG: markup characters become entities, control and bidi
/// characters (ANSI escapes, newlines in task names…) are [`crate::escape`]d.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => crate::escape::push_char(&mut o, c),
        }
    }
    o
}

/// Dash patterns cycled with [`COLORS`]: series `i` gets colour `i % 8` and dash `i % 5`, so
/// the first 40 series each have their own (colour, dash) pair and neighbours differ in both.
pub const DASHES: [&str; 5] = ["", "7 3", "2 2", "9 3 2 3", "4 4 1 4"];

/// The (colour, dash pattern) of series `i`.
pub fn series_style(i: usize) -> (&'static str, &'static str) {
    (COLORS[i % COLORS.len()], DASHES[i % DASHES.len()])
}

fn dash_attr(d: &str) -> String {
    if d.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{d}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_and_controls() {
        assert_eq!(
            esc("<script>\"x\"&'\u{1b}[31m\n"),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;\\u{1b}[31m\\u{a}"
        );
    }
}
