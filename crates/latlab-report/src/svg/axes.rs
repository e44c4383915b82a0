//! Logarithmic scales and their decade ticks, and the time axis's labels and steps.

use std::fmt::Write;

use super::esc;
use super::frame::{B, H, L, R, T, W};

/// Latency for an axis tick: ns → "1 µs", "10 ms".
pub(super) fn tick_label(ns: f64) -> String {
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

/// A count for an axis tick: "10", "1e4".
pub(super) fn count_label(c: f64) -> String {
    if c >= 1e3 {
        format!("1e{}", c.log10().round())
    } else {
        format!("{c}")
    }
}

/// A log scale from decade `lo` to decade `hi` (powers of ten) onto `[a, b]` pixels.
pub(super) struct LogScale {
    pub(super) lo: f64,
    hi: f64,
    a: f64,
    b: f64,
}

impl LogScale {
    pub(super) fn new(min: f64, max: f64, a: f64, b: f64) -> LogScale {
        let lo = min.max(1e-9).log10().floor();
        let mut hi = max.max(min).log10().ceil();
        if hi <= lo {
            hi = lo + 1.0;
        }
        LogScale { lo, hi, a, b }
    }
    pub(super) fn at(&self, v: f64) -> f64 {
        let t = (v.max(10f64.powf(self.lo)).log10() - self.lo) / (self.hi - self.lo);
        self.a + t * (self.b - self.a)
    }
    pub(super) fn decades(&self) -> impl Iterator<Item = f64> {
        (self.lo.ceil() as i32..=self.hi.floor() as i32).map(|d| 10f64.powi(d))
    }
}

/// A share for an axis tick: "1", "1e-3".
pub(super) fn share_label(s: f64) -> String {
    if s >= 1.0 {
        "1".into()
    } else {
        format!("1e{}", s.log10().round())
    }
}

/// The decade ticks of both axes, with grid lines, labelled by `xl` and `yl`.
pub(super) fn axes(
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
    y_axis(out, ys, yl);
}

/// The decade ticks of the y axis, with grid lines, labelled by `yl`.
pub(super) fn y_axis(out: &mut String, ys: &LogScale, yl: fn(f64) -> String) {
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

/// A time on an axis: `h:mm` for runs of 10 minutes or more, `m:ss` below.
pub fn time_label(sec: u64, long: bool) -> String {
    if long {
        format!("{}:{:02}", sec / 3600, sec / 60 % 60)
    } else {
        format!("{}:{:02}", sec / 60, sec % 60)
    }
}

/// A round tick step (seconds) giving at most about `max_ticks` ticks over `total` seconds.
pub(super) fn time_step(total: f64, max_ticks: f64) -> f64 {
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
