//! Williams' figure: the count per histogram bucket against latency, both axes logarithmic.

use std::fmt::Write;

use latlab_core::hist::Histogram;

use super::axes::{axes, count_label, tick_label, LogScale};
use super::frame::{empty, frame, legend, B, H, L, R, T, W};
use super::{dash_attr, series_style};

/// Williams' figure: count per histogram bucket against latency, both axes logarithmic, one
/// series per histogram. Each bucket is plotted at its midpoint. Returns an empty-plot SVG
/// saying "no samples" when every histogram is empty.
pub fn loglog_histogram(title: &str, series: &[(String, &Histogram)]) -> String {
    let buckets: Vec<(String, Buckets)> = series
        .iter()
        .map(|(n, h)| {
            let v = h
                .buckets()
                .map(|(lo, hi, c)| (lo, hi.min(h.max().unwrap_or(hi).max(lo + 1)), c))
                .collect();
            (n.clone(), v)
        })
        .collect();
    loglog_buckets(
        title,
        "latency (log scale)",
        "samples per bucket (log scale)",
        &buckets,
    )
}

/// Non-empty buckets `(lowest, end, count)`, ascending.
pub type Buckets = Vec<(u64, u64, u64)>;

/// [`loglog_histogram`] of buckets given as `(lowest, end, count)` (ascending; a bucket
/// touches the next when its end is the next one's lowest): count against value, both
/// logarithmic, each bucket at its midpoint.
pub fn loglog_buckets(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Buckets)],
) -> String {
    let mut out = String::new();
    frame(&mut out, title, x_label, y_label);
    // Runs of adjacent non-empty buckets: a line is drawn only where buckets touch, so a
    // line never suggests samples in empty buckets; a lone bucket is a dot.
    let segs: Vec<Vec<Vec<(f64, f64)>>> = series
        .iter()
        .map(|(_, h)| {
            let mut segs: Vec<Vec<(f64, f64)>> = Vec::new();
            let mut prev_hi = None;
            for &(lo, end, c) in h {
                let p = ((lo as f64 + end as f64) / 2.0, c as f64);
                match segs.last_mut() {
                    Some(s) if prev_hi == Some(lo) => s.push(p),
                    _ => segs.push(vec![p]),
                }
                prev_hi = Some(end);
            }
            segs
        })
        .collect();
    let all = segs.iter().flatten().flatten();
    let (mut xmin, mut xmax, mut ymax) = (f64::MAX, 0f64, 1f64);
    for &(x, y) in all {
        xmin = xmin.min(x);
        xmax = xmax.max(x);
        ymax = ymax.max(y);
    }
    if xmax == 0.0 {
        empty(&mut out, "no samples");
        return out;
    }
    let xs = LogScale::new(xmin, xmax, L, W - R);
    // Half a decade of room below 1 sample, so single samples stand clear of the frame.
    let mut ys = LogScale::new(1.0, ymax, H - B, T);
    ys.lo = -0.5;
    axes(&mut out, &xs, &ys, tick_label, count_label);
    for (i, series) in segs.iter().enumerate() {
        let (c, d) = series_style(i);
        let d = dash_attr(d);
        for seg in series {
            if let [(x, y)] = seg[..] {
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{c}"/>"#,
                    xs.at(x),
                    ys.at(y)
                );
                continue;
            }
            let _ = write!(
                out,
                r#"<polyline fill="none" stroke="{c}"{d} stroke-width="1.2" points=""#
            );
            for &(x, y) in seg {
                let _ = write!(out, "{:.1},{:.1} ", xs.at(x), ys.at(y));
            }
            out.push_str("\"/>");
        }
    }
    let _ = legend(
        &mut out,
        &series.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
    );
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_core::hist::Layout;

    #[test]
    fn histogram_plot_has_one_polyline_per_series() {
        let mut h = Histogram::new(Layout::default());
        for v in [1_000u64, 2_500, 2_600, 40_000, 9_000_000] {
            h.record(v);
        }
        let s = loglog_histogram("t <x>", &[("a".into(), &h), ("b<".into(), &h)]);
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("b&lt;") && s.contains("t &lt;x&gt;"));
        // 4 non-empty buckets: 1 µs and 2 µs touch (one line of 2 points); 40 µs and the
        // 9 ms tail bucket stand alone (a dot each, no line through the empty buckets).
        let pts = s
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(pts.split_whitespace().count(), 2);
        assert_eq!(s.matches("<circle").count(), 4);
        let e = loglog_histogram("t", &[("a".into(), &Histogram::new(Layout::default()))]);
        assert!(e.contains("no samples"));
    }
}
