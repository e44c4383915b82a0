//! Values over the run's time: the largest latency of each second, or of each interval.

use std::fmt::Write;

use super::axes::{tick_label, time_label, time_step, y_axis, LogScale};
use super::frame::{empty, frame, legend, B, H, L, R, T, W};
use super::{dash_attr, series_style};

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
        empty(&mut out, "no per-second data");
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
    y_axis(&mut out, &ys, tick_label);
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
    use crate::svg::axes::LogScale;
    use crate::svg::frame::{B, H, T};

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
