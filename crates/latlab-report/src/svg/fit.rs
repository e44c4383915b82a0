//! The tail fit's plots: the fitted tail with its band over the CCDF, and the
//! quantile-quantile plot.

use std::fmt::Write;

use latlab_core::hist::Histogram;

use super::axes::{axes, share_label, tick_label, LogScale};
use super::ccdf::ccdf_points;
use super::frame::{empty, frame, legend, B, H, L, R, T, W};
use super::{esc, series_style};

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
    let _ = legend(
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
        empty(&mut out, "no exceedances");
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
    let _ = legend(&mut out, &["exceedances".to_string()]);
    out.push_str("</svg>");
    out
}
