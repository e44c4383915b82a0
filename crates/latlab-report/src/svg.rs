//! Hand-written SVG plots: small, exact, no script. The CCDF (share of samples ≥ latency,
//! log-log, from the exact bucket counts), Williams' log-log histogram (count per bucket
//! against latency, several series overlaid) and the per-second maximum over time. Series
//! differ in colour and dash pattern ([`series_style`]).
//!
//! Every plot has axis labels with units and a legend; labels are escaped with [`esc`]. Long
//! time series are reduced to one point per pixel column keeping the *maximum* of the seconds
//! it covers, so no spike disappears from the picture.

use std::fmt::Write;

use latlab_core::hist::Histogram;

/// Series colours (colour-blind-safe Okabe–Ito order), cycled.
pub const COLORS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

const W: f64 = 760.0;
const H: f64 = 360.0;
const L: f64 = 70.0; // left margin
const R: f64 = 150.0; // right margin (legend)
const T: f64 = 20.0;
const B: f64 = 50.0;

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

/// Latency for an axis tick: ns → "1 µs", "10 ms".
fn tick_label(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{} µs", ns / 1e3)
    } else {
        format!("{ns} ns")
    }
}

fn count_label(c: f64) -> String {
    if c >= 1e3 {
        format!("1e{}", c.log10().round())
    } else {
        format!("{c}")
    }
}

/// A log scale from decade `lo` to decade `hi` (powers of ten) onto `[a, b]` pixels.
struct LogScale {
    lo: f64,
    hi: f64,
    a: f64,
    b: f64,
}

impl LogScale {
    fn new(min: f64, max: f64, a: f64, b: f64) -> LogScale {
        let lo = min.max(1e-9).log10().floor();
        let mut hi = max.max(min).log10().ceil();
        if hi <= lo {
            hi = lo + 1.0;
        }
        LogScale { lo, hi, a, b }
    }
    fn at(&self, v: f64) -> f64 {
        let t = (v.max(10f64.powf(self.lo)).log10() - self.lo) / (self.hi - self.lo);
        self.a + t * (self.b - self.a)
    }
    fn decades(&self) -> impl Iterator<Item = f64> {
        (self.lo.ceil() as i32..=self.hi.floor() as i32).map(|d| 10f64.powi(d))
    }
}

fn frame(out: &mut String, title: &str, xlabel: &str, ylabel: &str) {
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

fn legend(out: &mut String, names: &[String]) {
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
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">no samples</text></svg>"#,
            L + (W - L - R) / 2.0,
            T + (H - T - B) / 2.0
        );
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
    legend(
        &mut out,
        &series.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
    );
    out.push_str("</svg>");
    out
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
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">no samples</text></svg>"#,
            L + (W - L - R) / 2.0,
            T + (H - T - B) / 2.0
        );
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
    legend(&mut out, &names);
    // Marker key under the series.
    let ky = T + 10.0 + names.len().min(24) as f64 * 16.0 + 6.0;
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

/// The fitted tail over the CCDF: the measured share of samples ≥ latency (from the
/// histogram), the fitted generalized Pareto tail from its threshold on, its 95 % band
/// (`band`: exceedance, lo, hi ns; an open upper end runs to the plot's edge) and the
/// threshold as a dotted line. Log-log.
pub fn tail_fit(
    title: &str,
    h: &Histogram,
    fit: &latlab_core::tail::GpdFit,
    band: &[(f64, f64, Option<f64>)],
) -> String {
    use latlab_core::units::Human;
    let mut out = String::new();
    frame(
        &mut out,
        title,
        "latency (log scale)",
        "share of samples ≥ latency (log scale)",
    );
    let pts = ccdf_points(h);
    if pts.is_empty() {
        out.push_str("</svg>");
        return out;
    }
    let xmin = pts.iter().map(|p| p.0).fold(f64::MAX, f64::min).max(1.0);
    let mut xmax = pts.iter().map(|p| p.0).fold(0.0, f64::max);
    let mut ymin = pts.iter().map(|p| p.1).fold(1.0, f64::min);
    for &(p, lo, hi) in band {
        ymin = ymin.min(p);
        xmax = xmax.max(lo).max(hi.unwrap_or(0.0));
    }
    // An open band or a far extrapolation: at most three decades beyond the data.
    let data_max = h.max().unwrap_or(1) as f64;
    xmax = xmax.min(data_max.max(1.0) * 1e3);
    let xs = LogScale::new(xmin, xmax, L, W - R);
    let ys = LogScale::new(ymin, 1.0, H - B, T);
    axes(&mut out, &xs, &ys, tick_label, share_label);
    let clamp_x = |x: f64| xs.at(x.clamp(xmin, xmax));
    // The band: along the low ends (shares falling), back along the high ends.
    if band.len() >= 2 {
        let _ = write!(
            out,
            r##"<polygon class="tail-band" fill="#D55E00" fill-opacity="0.18" stroke="none" points=""##
        );
        for &(p, lo, _) in band {
            let _ = write!(out, "{:.1},{:.1} ", clamp_x(lo), ys.at(p));
        }
        for &(p, _, hi) in band.iter().rev() {
            let _ = write!(out, "{:.1},{:.1} ", clamp_x(hi.unwrap_or(xmax)), ys.at(p));
        }
        out.push_str("\"/>");
    }
    let (c0, _) = series_style(0);
    let _ = write!(
        out,
        r#"<polyline class="ccdf" fill="none" stroke="{c0}" stroke-width="1.5" points=""#
    );
    for &(x, y) in &pts {
        let _ = write!(out, "{:.1},{:.1} ", xs.at(x.max(1.0)), ys.at(y));
    }
    out.push_str("\"/>");
    // The fitted tail, from the threshold to the band's rarest share.
    let u = fit.u_ns as f64;
    let x_end = band
        .last()
        .map(|b| b.1.max(u * 1.001))
        .unwrap_or(data_max)
        .min(xmax)
        .max(u * 1.001);
    let _ = write!(
        out,
        r##"<polyline class="tail-fit" fill="none" stroke="#D55E00" stroke-width="2" stroke-dasharray="7 3" points=""##
    );
    for i in 0..=80 {
        let x = u * (x_end / u).powf(i as f64 / 80.0);
        let y = fit.exceedance_at(x);
        if y < ymin * 0.5 || y <= 0.0 {
            break;
        }
        let _ = write!(out, "{:.1},{:.1} ", xs.at(x), ys.at(y));
    }
    out.push_str("\"/>");
    let xu = xs.at(u.max(1.0));
    let _ = write!(
        out,
        r##"<line x1="{xu:.1}" y1="{T}" x2="{xu:.1}" y2="{yb}" stroke="#444" stroke-dasharray="2 3"><title>{t}</title></line>"##,
        yb = H - B,
        t = esc(&format!("threshold {}", Human(fit.u_ns)))
    );
    legend(
        &mut out,
        &["measured".to_string(), "fitted, 95 % band".to_string()],
    );
    out.push_str("</svg>");
    out
}

/// The quantile-quantile plot of a tail fit: observed latency against the fitted quantile at
/// the same rank (log-log), with the diagonal.
pub fn qq_plot(title: &str, pts: &[(f64, f64)]) -> String {
    let mut out = String::new();
    frame(
        &mut out,
        title,
        "fitted quantile (log scale)",
        "observed latency (log scale)",
    );
    let pts: Vec<(f64, f64)> = pts
        .iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite() && p.0 > 0.0 && p.1 > 0.0)
        .collect();
    if pts.is_empty() {
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">no exceedances</text></svg>"#,
            L + (W - L - R) / 2.0,
            T + (H - T - B) / 2.0
        );
        return out;
    }
    let lo = pts.iter().map(|p| p.0.min(p.1)).fold(f64::MAX, f64::min);
    let hi = pts.iter().map(|p| p.0.max(p.1)).fold(0.0, f64::max);
    let xs = LogScale::new(lo, hi, L, W - R);
    let ys = LogScale::new(lo, hi, H - B, T);
    axes(&mut out, &xs, &ys, tick_label, tick_label);
    let _ = write!(
        out,
        r##"<line class="diagonal" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888" stroke-dasharray="4 3"/>"##,
        xs.at(lo),
        ys.at(lo),
        xs.at(hi),
        ys.at(hi)
    );
    let (c, _) = series_style(0);
    for &(x, y) in &pts {
        let _ = write!(
            out,
            r#"<circle class="qq" cx="{:.1}" cy="{:.1}" r="2.2" fill="{c}"/>"#,
            xs.at(x),
            ys.at(y)
        );
    }
    legend(&mut out, &["exceedances".to_string()]);
    out.push_str("</svg>");
    out
}

fn share_label(s: f64) -> String {
    if s >= 1.0 {
        "1".into()
    } else {
        format!("1e{}", s.log10().round())
    }
}

fn axes(
    out: &mut String,
    xs: &LogScale,
    ys: &LogScale,
    xl: fn(f64) -> String,
    yl: fn(f64) -> String,
) {
    for d in xs.decades() {
        let x = xs.at(d);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{yb}" stroke="#ddd"/><text x="{x:.1}" y="{ty}" text-anchor="middle" font-size="11">{l}</text>"##,
            yb = H - B,
            ty = H - B + 15.0,
            l = esc(&xl(d)),
        );
    }
    for d in ys.decades() {
        let y = ys.at(d);
        let _ = write!(
            out,
            r##"<line x1="{L}" y1="{y:.1}" x2="{xr}" y2="{y:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{l}</text>"##,
            xr = W - R,
            tx = L - 4.0,
            ty = y + 4.0,
            l = esc(&yl(d)),
        );
    }
}

/// The largest latency of each second, per series, over the run (x linear in seconds, y
/// logarithmic). Reduced to at most one point per pixel column, keeping maxima.
pub fn per_second_max(title: &str, series: &[(String, &[Option<u64>])]) -> String {
    over_time(
        title,
        "largest latency in the second (log scale)",
        series,
        1.0,
    )
}

/// Values per interval of `step_s` seconds, per series, over the run (x linear in time with
/// h:mm or m:ss ticks, y logarithmic); at most one point per pixel column, keeping maxima.
pub fn over_time(
    title: &str,
    y_label: &str,
    series: &[(String, &[Option<u64>])],
    step_s: f64,
) -> String {
    let mut out = String::new();
    frame(&mut out, title, "time since start", y_label);
    let len = series.iter().map(|s| s.1.len()).max().unwrap_or(0);
    let vals = series.iter().flat_map(|s| s.1.iter().flatten().copied());
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for v in vals {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if len == 0 || hi == 0 {
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">no per-second data</text></svg>"#,
            L + (W - L - R) / 2.0,
            T + (H - T - B) / 2.0
        );
        return out;
    }
    let ys = LogScale::new(lo.max(1) as f64, hi as f64, H - B, T);
    let pw = W - L - R;
    let cols = (pw as usize).min(len).max(1);
    // Point k stands at k·step_s seconds.
    let x_at = |k: f64| L + k / (len.max(2) - 1) as f64 * pw;
    // x ticks: round steps of time, h:mm for runs of 10 minutes or more.
    let total = len as f64 * step_s;
    let step = time_step(total, 7.0);
    let long = total >= 600.0;
    let mut s = 0.0;
    while s < total {
        let x = x_at(s / step_s);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{yb}" stroke="#ddd"/><text x="{x:.1}" y="{ty}" text-anchor="middle" font-size="11">{l}</text>"##,
            yb = H - B,
            ty = H - B + 15.0,
            l = time_label(s as u64, long),
        );
        s += step;
    }
    for d in ys.decades() {
        let y = ys.at(d);
        let _ = write!(
            out,
            r##"<line x1="{L}" y1="{y:.1}" x2="{xr}" y2="{y:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{l}</text>"##,
            xr = W - R,
            tx = L - 4.0,
            ty = y + 4.0,
            l = esc(&tick_label(d)),
        );
    }
    for (i, (_, v)) in series.iter().enumerate() {
        let (c, d) = series_style(i);
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{c}"{} stroke-width="1" points=""#,
            dash_attr(d)
        );
        for col in 0..cols {
            let a = col * len / cols;
            let b = ((col + 1) * len / cols).min(v.len());
            if a >= b {
                continue;
            }
            if let Some(m) = v[a..b].iter().flatten().max() {
                let sec = if b - a == 1 {
                    a as f64
                } else {
                    (a + b - 1) as f64 / 2.0
                };
                let _ = write!(out, "{:.1},{:.1} ", x_at(sec), ys.at(*m as f64));
            }
        }
        out.push_str("\"/>");
    }
    legend(
        &mut out,
        &series.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
    );
    out.push_str("</svg>");
    out
}

/// A time on an axis: `h:mm` for runs of 10 minutes or more, `m:ss` below.
pub fn time_label(sec: u64, long: bool) -> String {
    if long {
        format!("{}:{:02}", sec / 3600, sec / 60 % 60)
    } else {
        format!("{}:{:02}", sec / 60, sec % 60)
    }
}

/// A round tick step (seconds) giving at most about `max_ticks` ticks over `total` seconds.
fn time_step(total: f64, max_ticks: f64) -> f64 {
    const STEPS: [f64; 18] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
        10800.0, 21600.0, 43200.0, 86400.0,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| total / s <= max_ticks)
        .unwrap_or_else(|| (total / max_ticks / 86400.0).ceil() * 86400.0)
}

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
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">no per-interval data</text></svg>"#,
            L + (W - L - R) / 2.0,
            T + (H - T - B) / 2.0
        );
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

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_core::hist::Layout;

    #[test]
    fn escapes_markup_quotes_and_controls() {
        assert_eq!(
            esc("<script>\"x\"&'\u{1b}[31m\n"),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;\\u{1b}[31m\\u{a}"
        );
    }

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

    #[test]
    fn time_series_keeps_the_maxima() {
        let mut v = vec![Some(10_000u64); 100_000];
        v[54_321] = Some(7_000_000);
        let s = per_second_max("t", &[("cpu0".into(), &v)]);
        let pts = s
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert!(pts.split_whitespace().count() <= 540);
        // The spike's y is the top of the plot area region for 7 ms (not averaged away).
        let ys = LogScale::new(10_000.0, 7_000_000.0, H - B, T);
        let y = format!("{:.1}", ys.at(7_000_000.0));
        assert!(pts.contains(&format!(",{y}")), "spike lost");
    }
}
