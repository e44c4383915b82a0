//! The CCDF: the share of samples at or above each latency, from the exact bucket counts.

use std::fmt::Write;

use latlab_core::hist::Histogram;

use super::axes::{axes, share_label, tick_label, LogScale};
use super::frame::{empty, frame, legend, B, H, L, R, T, W};
use super::{dash_attr, esc, series_style};

/// The exact CCDF of a histogram: `(x_ns, share of samples ≥ x)` at each non-empty bucket's
/// lower bound (every sample in a bucket is at least its lower bound, so each share is
/// exact, not resampled). The first point is the minimum with share 1; the last is the
/// maximum with the share of samples equal to it when its bucket starts there, else
/// `1 / n` (at least the maximum itself). Samples whose value is unknown (imported overflows
/// at or above the limit) count in every share, and the curve ends at the limit: beyond it
/// the shares are not known. Empty histogram: no points.
pub fn ccdf_points(h: &Histogram) -> Vec<(f64, f64)> {
    let n = h.count();
    let (Some(min), Some(max)) = (h.min(), h.max()) else {
        return Vec::new();
    };
    if n == 0 {
        return Vec::new();
    }
    let mut pts = Vec::new();
    let mut tail = n; // samples at or above the current bucket's lower bound
    let unknown = h.unknown_above();
    let limit = h.layout().limit_ns();
    for (lo, _, c) in h.buckets() {
        if unknown > 0 && lo >= limit {
            break;
        }
        let x = lo.max(min).min(max);
        pts.push((x as f64, tail as f64 / n as f64));
        tail -= c;
    }
    if unknown > 0 {
        // `tail`: the known samples at or above the limit and the unknown ones.
        if pts.last().is_none_or(|p| p.0 < limit as f64) {
            pts.push((limit as f64, tail as f64 / n as f64));
        }
    } else if pts.last().is_some_and(|p| p.0 < max as f64) {
        pts.push((max as f64, 1.0 / n as f64));
    }
    pts
}

/// The CCDF plot: "share of samples ≥ latency" against latency, both logarithmic, one
/// series per histogram (drawn from the exact bucket counts, so runs of different lengths
/// compare). The legend gives each series' maximum; markers show p99 (circle), p99.9
/// (square) and the maximum (diamond) on each curve; `limits` (e.g. `--max-latency`) are
/// vertical red dashed lines.
pub fn ccdf(title: &str, series: &[(String, &Histogram)], limits: &[u64]) -> String {
    use latlab_core::hist::Quantile;
    use latlab_core::units::Human;
    let mut out = String::new();
    frame(
        &mut out,
        title,
        "latency (log scale)",
        "share of samples ≥ latency (log scale)",
    );
    let pts: Vec<Vec<(f64, f64)>> = series.iter().map(|(_, h)| ccdf_points(h)).collect();
    let (mut xmin, mut xmax, mut ymin) = (f64::MAX, 0f64, 1f64);
    for &(x, y) in pts.iter().flatten() {
        xmin = xmin.min(x.max(1.0));
        xmax = xmax.max(x);
        ymin = ymin.min(y);
    }
    if xmax == 0.0 {
        empty(&mut out, "no samples");
        return out;
    }
    for &l in limits {
        xmin = xmin.min(l.max(1) as f64);
        xmax = xmax.max(l as f64);
    }
    // The max markers too (an import's maximum may lie beyond the curve's end at the limit).
    for (_, h) in series {
        xmax = xmax.max(h.max().unwrap_or(0) as f64);
    }
    let xs = LogScale::new(xmin, xmax, L, W - R);
    let ys = LogScale::new(ymin, 1.0, H - B, T);
    axes(&mut out, &xs, &ys, tick_label, share_label);
    for &l in limits {
        let x = xs.at(l as f64);
        let _ = write!(
            out,
            r##"<line class="limit" x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{yb}" stroke="#c00" stroke-width="1.5" stroke-dasharray="5 3"><title>{t}</title></line><text x="{tx:.1}" y="{ty}" font-size="11" fill="#c00">{t}</text>"##,
            yb = H - B,
            tx = x + 3.0,
            ty = T + 12.0,
            t = esc(&format!("--max-latency {}", Human(l))),
        );
    }
    for (i, (p, (name, h))) in pts.iter().zip(series).enumerate() {
        let (c, d) = series_style(i);
        if p.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{c}"{} stroke-width="1.5" points=""#,
            dash_attr(d)
        );
        for &(x, y) in p {
            let _ = write!(out, "{:.1},{:.1} ", xs.at(x.max(1.0)), ys.at(y));
        }
        out.push_str("\"/>");
        // Markers: at (value, share above it) on the curve.
        let n = h.count() as f64;
        for (label, q, share) in [
            ("p99", Quantile::P99, 0.01),
            ("p99.9", Quantile::P999, 0.001),
        ] {
            if n * share < 1.0 {
                continue; // fewer than one sample above: the marker would mean nothing
            }
            if let Some(v) = h.quantile(q) {
                let (x, y) = (xs.at(v.max(1) as f64), ys.at(share));
                let t = esc(&format!("{name}: {label} ≤ {}", Human(v)));
                if label == "p99" {
                    let _ = write!(
                        out,
                        r#"<circle class="m-p99" cx="{x:.1}" cy="{y:.1}" r="3.5" fill="white" stroke="{c}" stroke-width="1.5"><title>{t}</title></circle>"#
                    );
                } else {
                    let _ = write!(
                        out,
                        r#"<rect class="m-p999" x="{:.1}" y="{:.1}" width="7" height="7" fill="white" stroke="{c}" stroke-width="1.5"><title>{t}</title></rect>"#,
                        x - 3.5,
                        y - 3.5
                    );
                }
            }
        }
        if let Some(max) = h.max().filter(|_| h.count() > h.unknown_above()) {
            let y = p
                .iter()
                .rev()
                .find(|q| q.0 == max as f64)
                .map_or(1.0 / n, |q| q.1);
            let (x, y) = (xs.at(max.max(1) as f64), ys.at(y));
            let _ = write!(
                out,
                r#"<path class="m-max" d="M{:.1} {:.1}l4.5 4.5l-4.5 4.5l-4.5 -4.5z" fill="{c}"><title>{}</title></path>"#,
                x,
                y - 4.5,
                esc(&format!("{name}: max {}", Human(max)))
            );
        }
    }
    let names: Vec<String> = series
        .iter()
        .map(|(n, h)| match h.max() {
            Some(m) => format!("{n} (max {})", Human(m)),
            None => format!("{n} (no samples)"),
        })
        .collect();
    // Marker key under the series.
    let ky = legend(&mut out, &names) + 6.0;
    let kx = W - R + 10.0;
    let _ = write!(
        out,
        r##"<circle cx="{:.1}" cy="{ky:.1}" r="3.5" fill="white" stroke="#444"/><text x="{:.1}" y="{:.1}" font-size="11">p99</text><rect x="{:.1}" y="{:.1}" width="7" height="7" fill="white" stroke="#444"/><text x="{:.1}" y="{:.1}" font-size="11">p99.9</text><path d="M{:.1} {:.1}l4.5 4.5l-4.5 4.5l-4.5 -4.5z" fill="#444"/><text x="{:.1}" y="{:.1}" font-size="11">max</text>"##,
        kx + 4.0,
        kx + 10.0,
        ky + 4.0,
        kx + 36.0,
        ky - 3.5,
        kx + 46.0,
        ky + 4.0,
        kx + 86.0,
        ky - 4.5,
        kx + 93.0,
        ky + 4.0,
    );
    out.push_str("</svg>");
    out
}
