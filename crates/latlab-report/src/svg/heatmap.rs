//! Latency over time as a heat map of the run's per-interval histograms.

use std::fmt::Write;

use super::axes::{tick_label, time_label, time_step, LogScale};
use super::esc;
use super::frame::{empty, frame, B, H, L, R, T, W};

/// Colour of a heat-map cell: `t` in [0, 1] (log of the count over log of the largest) from
/// pale yellow through orange and red to dark purple.
fn heat_colour(t: f64) -> String {
    const STOPS: [(f64, [f64; 3]); 4] = [
        (0.0, [255.0, 237.0, 160.0]),
        (0.35, [253.0, 141.0, 60.0]),
        (0.7, [215.0, 48.0, 31.0]),
        (1.0, [73.0, 0.0, 106.0]),
    ];
    let t = t.clamp(0.0, 1.0);
    let i = STOPS.iter().rposition(|s| s.0 <= t).unwrap_or(0).min(2);
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let f = (t - a.0) / (b.0 - a.0);
    let c = |k: usize| (a.1[k] + f * (b.1[k] - a.1[k])).round() as u8;
    format!("#{:02x}{:02x}{:02x}", c(0), c(1), c(2))
}

/// Latency over time, OSADL-style: time (the run's per-interval histograms, merged to at
/// most one column per 2 px) × latency (log scale) with the colour for the samples in each
/// cell (log scale, pale: one sample, dark: the most). The time axis is `h:mm` (or `m:ss` for
/// runs under 10 minutes). Buckets outside `layout` (a damaged record) are ignored.
pub fn heatmap(
    title: &str,
    h: &latlab_core::intervals::IntervalHistograms,
    layout: latlab_core::hist::Layout,
) -> String {
    let mut out = String::new();
    frame(&mut out, title, "time since start", "latency (log scale)");
    let n = h.intervals.len();
    let nb = layout.len() as u64;
    // A bucket covers [lower, upper) (lower at least 1 ns for the log scale).
    let edges = |i: u64| {
        let (lo, hi) = (layout.lower(i as usize), layout.upper(i as usize));
        ((lo as f64).max(1.0), (hi as f64).max(2.0))
    };
    let (mut ymin, mut ymax) = (f64::MAX, 0f64);
    for b in h
        .intervals
        .iter()
        .flatten()
        .filter(|b| b[0] < nb && b[1] > 0)
    {
        ymin = ymin.min(edges(b[0]).0);
        ymax = ymax.max(edges(b[0]).1);
    }
    if n == 0 || ymax == 0.0 || h.interval_ns == 0 {
        empty(&mut out, "no per-interval data");
        return out;
    }
    let pw = W - L - R;
    let ph = H - T - B;
    let cols = n.min((pw / 2.0) as usize).max(1);
    let group = n.div_ceil(cols);
    let cols = n.div_ceil(group);
    const ROWS: usize = 58; // 5 px each
    let ys = LogScale::new(ymin, ymax, H - B, T);
    let row_of = |v: f64| (((H - B - ys.at(v)) / ph * ROWS as f64) as usize).min(ROWS - 1);
    // Each cell counts the samples of every bucket that overlaps it: a bucket taller than a
    // row (fine buckets are, low on a log scale) fills all its rows, so no false gaps.
    let mut grid = vec![0u64; cols * ROWS];
    for (k, iv) in h.intervals.iter().enumerate() {
        let c = k / group;
        for b in iv.iter().filter(|b| b[0] < nb) {
            let (lo, hi) = edges(b[0]);
            let (r0, r1) = (row_of(lo), row_of(hi * (1.0 - 1e-9)).max(row_of(lo)));
            for r in r0..=r1 {
                let cell = &mut grid[c * ROWS + r];
                *cell = cell.saturating_add(b[1]);
            }
        }
    }
    let top = grid.iter().copied().max().unwrap_or(1).max(1);
    let (cw, rh) = (pw / cols as f64, ph / ROWS as f64);
    for c in 0..cols {
        for r in 0..ROWS {
            let v = grid[c * ROWS + r];
            if v == 0 {
                continue;
            }
            let t = if top > 1 {
                (v as f64).ln() / (top as f64).ln()
            } else {
                1.0
            };
            let _ = write!(
                out,
                r#"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{}"/>"#,
                L + c as f64 * cw,
                H - B - (r + 1) as f64 * rh,
                cw + 0.05,
                rh + 0.05,
                heat_colour(t)
            );
        }
    }
    // Axes: latency decades; time ticks at round steps, h:mm for long runs.
    for d in ys.decades() {
        let y = ys.at(d);
        let _ = write!(
            out,
            r##"<line x1="{L}" y1="{y:.1}" x2="{xr}" y2="{y:.1}" stroke="#999" stroke-opacity="0.4"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{l}</text>"##,
            xr = W - R,
            tx = L - 4.0,
            ty = y + 4.0,
            l = esc(&tick_label(d)),
        );
    }
    let total = n as f64 * h.interval_ns as f64 / 1e9;
    let long = total >= 600.0;
    let step = time_step(total, 8.0);
    let mut s = 0.0;
    while s <= total {
        let x = L + s / total * pw;
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{yb}" x2="{x:.1}" y2="{yt}" stroke="#888"/><text x="{x:.1}" y="{ty}" text-anchor="middle" font-size="11">{l}</text>"##,
            yb = H - B,
            yt = H - B + 4.0,
            ty = H - B + 15.0,
            l = time_label(s as u64, long),
        );
        s += step;
    }
    // Colour key: the ramp from one sample to the most in a cell.
    let kx = W - R + 14.0;
    for i in 0..20 {
        let _ = write!(
            out,
            r#"<rect x="{kx}" y="{:.1}" width="14" height="7.5" fill="{}"/>"#,
            T + 30.0 + (19 - i) as f64 * 7.5,
            heat_colour(i as f64 / 19.0)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{kx}" y="{}" font-size="12">samples per cell</text><text x="{tx}" y="{}" font-size="11">{top}</text><text x="{tx}" y="{}" font-size="11">1</text><text x="{kx}" y="{}" font-size="11">{}</text>"#,
        T + 20.0,
        T + 38.0,
        T + 30.0 + 150.0,
        T + 200.0,
        esc(&format!(
            "column: {}",
            latlab_core::units::format_duration(h.interval_ns.saturating_mul(group as u64))
        )),
        tx = kx + 18.0,
    );
    out.push_str("</svg>");
    out
}
