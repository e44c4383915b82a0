//! A traced spike as lanes per CPU (issue 17, part 4): one inline SVG per spike, a row per lane
//! (IRQ, softirq, NMI, tasks, the measuring thread, stalls) holding the stretches the analyzer
//! charged to the causes (run.json `spikes[].lanes`), from the intended wake-up E to the clock
//! read, on a time axis in µs relative to E. Each segment is coloured by the cause kind it was
//! charged to (the legend), labelled with the cause's name and duration where it fits, and
//! carries both as a tooltip; the timeline's moments (E, timer IRQ, wake-up, switch-in, clock
//! read) are vertical marks. Names come from the trace: escaped ([`esc`]).

use std::fmt::Write;

use latlab_core::record::{CauseKind, Lane, LaneSegment, Moment, SpikeRecord};
use latlab_core::units::Human;

use crate::svg::esc;

/// Spikes drawn in a report (the rest are counted).
pub const MAX_SPIKES_DRAWN: usize = 100;
/// Segments drawn per spike (a record from elsewhere may hold more than the analyzer keeps).
pub const MAX_SEGMENTS_DRAWN: usize = 1024;

const W: f64 = 760.0;
const LW: f64 = 96.0; // lane names
const RM: f64 = 16.0;
const T: f64 = 46.0; // moment labels: three rows, more when they would overlap
/// A zoomed picture of the last stretch is added when the moments after the longest quiet
/// stretch fit in this share of the span (20–50 µs after a 6 ms stall took 5 px).
const ZOOM_SHARE: f64 = 0.02;
const ROW: f64 = 24.0;

/// The colour of a cause kind (Okabe–Ito, as the plots).
pub fn cause_color(k: CauseKind) -> &'static str {
    match k {
        CauseKind::Irq => "#D55E00",
        CauseKind::Softirq => "#E69F00",
        CauseKind::Task => "#009E73",
        CauseKind::Nmi => "#CC79A7",
        CauseKind::PreemptOff => "#0072B2",
        CauseKind::IrqOff => "#56B4E9",
        CauseKind::Hypervisor => "#888888",
        CauseKind::Unknown => "#BBBBBB",
    }
}

fn lane_title(l: Lane) -> &'static str {
    match l {
        Lane::Irq => "IRQ",
        Lane::Softirq => "softirq",
        Lane::Nmi => "NMI",
        Lane::Task => "tasks",
        Lane::Measuring => "measuring",
        Lane::Stall => "stall",
        Lane::Other => "other",
    }
}

/// A step of 1, 2 or 5 × 10^k µs giving about `n` ticks over `span` µs.
fn tick_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(1e-3);
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

fn us(ns: f64) -> String {
    // + 0.0: no "-0".
    let v = ns / 1000.0 + 0.0;
    if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The anchor of the `i`-th spike's (0-based) lanes, which the spikes' table links to.
pub fn anchor(i: usize) -> String {
    format!("spike-{}", i + 1)
}

/// The section's HTML for all spikes: a heading, then per spike a line saying which it is and
/// its SVG, or "no lane data in this record" (an older record, or a spike not traced), or
/// why there are no segments.
pub fn section(spikes: &[SpikeRecord]) -> String {
    let mut o = String::new();
    if spikes.is_empty() {
        return o;
    }
    o.push_str("<h2>Spike timelines</h2>\n<p class=\"meta\">What ran on the spike's CPU from the intended wake-up E to the thread's clock read, lane by lane, each stretch coloured by the cause it was charged to (the causes above add up these stretches); µs from E.</p>\n");
    for (i, s) in spikes.iter().take(MAX_SPIKES_DRAWN).enumerate() {
        let _ = writeln!(
            o,
            "<h3 class=\"meta\" id=\"{}\">Spike {} on CPU {} at {}.{:06} s: {}</h3>",
            anchor(i),
            i + 1,
            s.cpu,
            s.at_ns / 1_000_000_000,
            s.at_ns % 1_000_000_000 / 1_000,
            Human(s.latency_ns)
        );
        match &s.lanes {
            Some(l) if !l.segments.is_empty() => {
                o.push_str(&svg(s));
                o.push('\n');
                if l.dropped > 0 {
                    let _ = writeln!(
                        o,
                        "<p class=\"meta\">{} shorter segment{} not kept in the record.</p>",
                        l.dropped,
                        if l.dropped == 1 { "" } else { "s" }
                    );
                }
            }
            Some(_) => o.push_str("<p class=\"meta nolanes\">no lane segments: the trace covers none of this spike (nothing before its end was traced, or it could not be analyzed)</p>\n"),
            None => o.push_str("<p class=\"meta nolanes\">no lane data in this record</p>\n"),
        }
    }
    if spikes.len() > MAX_SPIKES_DRAWN {
        let _ = writeln!(
            o,
            "<p class=\"meta\">{} more spikes not drawn.</p>",
            spikes.len() - MAX_SPIKES_DRAWN
        );
    }
    o
}

/// Where a spike's picture puts things: its lanes' rows, the time span drawn (ns from E) and
/// the width it is drawn on, the y of the time axis.
struct Geometry {
    rows: Vec<Lane>,
    lo: f64,
    hi: f64,
    pw: f64,
    axis_y: f64,
    /// The top of the lanes (under the moments' labels).
    top: f64,
    /// The row of each moment's label (moments sorted by time).
    label_rows: Vec<usize>,
}

impl Geometry {
    /// The x of `t` ns from E.
    fn x(&self, t: f64) -> f64 {
        LW + (t - self.lo) / (self.hi - self.lo) * self.pw
    }

    /// The row of lane `l`, if drawn.
    fn row(&self, l: Lane) -> Option<usize> {
        self.rows.iter().position(|r| *r == l)
    }

    /// Whether `t` ns from E lies in the span drawn.
    fn shows(&self, t: f64) -> bool {
        (self.lo..=self.hi).contains(&t)
    }
}

/// Each label's row: the first where it clears the label before it by 4 px, else a new row,
/// so labels never overlap; with the rows used (at least three).
fn label_rows(xs: &[(f64, usize)]) -> (Vec<usize>, usize) {
    let mut row_end: Vec<f64> = vec![f64::MIN; 3];
    let rows = xs
        .iter()
        .map(|&(x, chars)| {
            let half = chars as f64 * 3.2;
            let r = match (0..row_end.len()).find(|&r| row_end[r] + 4.0 <= x - half) {
                Some(r) => r,
                None => {
                    row_end.push(f64::MIN);
                    row_end.len() - 1
                }
            };
            row_end[r] = x + half;
            r
        })
        .collect();
    (rows, row_end.len())
}

/// The zoomed picture: the first of the moments that follow the longest stretch between two
/// moments, and the end, when they fit in [`ZOOM_SHARE`] of the span.
fn zoom_span(moments: &[(f64, &str)], lo: f64, hi: f64) -> Option<(f64, f64)> {
    let mut t: Vec<f64> = moments.iter().map(|m| m.0).collect();
    t.sort_by(f64::total_cmp);
    let (i, _) = t
        .windows(2)
        .enumerate()
        .max_by(|a, b| (a.1[1] - a.1[0]).total_cmp(&(b.1[1] - b.1[0])))?;
    let tail = &t[i + 1..];
    let (a, b) = (tail[0], hi);
    if tail.len() < 2 || b - a <= 0.0 || b - a > (hi - lo) * ZOOM_SHARE {
        return None;
    }
    Some((a, b))
}

/// The lanes drawn: IRQ, softirq, tasks, measuring always; NMI, stall, other when present.
fn lane_rows(segs: &[LaneSegment]) -> Vec<Lane> {
    [
        Lane::Irq,
        Lane::Softirq,
        Lane::Nmi,
        Lane::Task,
        Lane::Measuring,
        Lane::Stall,
        Lane::Other,
    ]
    .into_iter()
    .filter(|l| {
        matches!(l, Lane::Irq | Lane::Softirq | Lane::Task | Lane::Measuring)
            || segs.iter().any(|g| g.lane == *l)
    })
    .collect()
}

/// The timeline's moments `(ns from E, name)`, E always among them (E and the end of the
/// sample for a spike without a timeline).
fn moments(s: &SpikeRecord) -> Vec<(f64, &'static str)> {
    let moments: Vec<(f64, &str)> = s
        .timeline_events
        .iter()
        .map(|e| {
            let name = match e.what {
                Moment::TimerDue | Moment::GapStart => "E",
                Moment::TimerIrq => "timer IRQ",
                Moment::Woken => "woken",
                Moment::SwitchedIn => "switch-in",
                Moment::ClockRead => "clock read",
                Moment::Other => "?",
            };
            (e.offset_ns as f64, name)
        })
        .collect();
    let mut moments = if moments.is_empty() {
        vec![(0.0, "E"), (s.latency_ns as f64, "end")]
    } else {
        moments
    };
    if !moments.iter().any(|m| m.1 == "E") {
        moments.insert(0, (0.0, "E"));
    }
    moments
}

/// One spike's lanes as an SVG (`class="plot lanes"`), and a second one (`class="plot lanes
/// zoom"`) on the last stretch when a long one before it squeezes it into a few pixels.
pub fn svg(s: &SpikeRecord) -> String {
    let empty = Vec::new();
    let all: &Vec<LaneSegment> = s.lanes.as_ref().map_or(&empty, |l| &l.segments);
    let segs = &all[..all.len().min(MAX_SEGMENTS_DRAWN)];
    let latency = s.latency_ns as f64;
    let moments = moments(s);
    // The span: E (a little before) to the end of the sample and of what is drawn.
    let lo = segs
        .iter()
        .map(|g| g.start_ns as f64)
        .chain(moments.iter().map(|m| m.0))
        .fold(0.0f64, f64::min);
    let hi = segs
        .iter()
        .map(|g| g.end_ns as f64)
        .chain(moments.iter().map(|m| m.0))
        .fold(latency, f64::max);
    let span = (hi - lo).max(1.0);
    let title = format!(
        "Spike on CPU {} at {} ns: {} — lanes",
        s.cpu,
        s.at_ns,
        Human(s.latency_ns)
    );
    let mut o = picture(
        s,
        segs,
        &moments,
        (lo - span * 0.02, hi + span * 0.02),
        &title,
    );
    if let Some((a, b)) = zoom_span(&moments, lo, hi) {
        let zoomed = format!("{title}: the last {}, zoomed", Human((b - a) as u64));
        let pad = (b - a) * 0.15;
        let span = (a - pad, b + pad / 5.0);
        o.push_str(&picture(s, segs, &moments, span, &zoomed).replacen(
            "class=\"plot lanes\"",
            "class=\"plot lanes zoom\"",
            1,
        ));
    }
    o
}

/// One picture of the spike over `(lo, hi)` ns from E.
fn picture(
    s: &SpikeRecord,
    segs: &[LaneSegment],
    moments: &[(f64, &'static str)],
    (lo, hi): (f64, f64),
    title: &str,
) -> String {
    let rows = lane_rows(segs);
    let pw = W - LW - RM;
    let mut ms: Vec<(f64, &str)> = moments
        .iter()
        .copied()
        .filter(|m| (lo..=hi).contains(&m.0))
        .collect();
    ms.sort_by(|a, b| a.0.total_cmp(&b.0));
    let x = |t: f64| LW + (t - lo) / (hi - lo) * pw;
    let xs: Vec<(f64, usize)> = ms.iter().map(|m| (x(m.0), m.1.len())).collect();
    let (label_rows, n) = label_rows(&xs);
    // The lanes' top: three rows of labels, 12 px more for each row beyond.
    let top = T + 12.0 * n.saturating_sub(3) as f64;
    let axis_y = top + rows.len() as f64 * ROW;
    let h = axis_y + 62.0;
    let g = Geometry {
        rows,
        lo,
        hi,
        pw,
        axis_y,
        top,
        label_rows,
    };
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="plot lanes" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{t}"><title>{t}</title>"##,
        t = esc(title)
    );
    lanes_and_axis(&mut o, &g);
    segments(&mut o, &g, segs);
    waiting(&mut o, &g, s);
    moment_marks(&mut o, &g, &ms);
    legend(&mut o, &g, segs);
    o.push_str("</svg>");
    o
}

/// The lanes' rows with their names, and the time axis with its ticks and label.
fn lanes_and_axis(o: &mut String, g: &Geometry) {
    let (lo, hi, pw, axis_y) = (g.lo, g.hi, g.pw, g.axis_y);
    // Lane rows.
    for (i, l) in g.rows.iter().enumerate() {
        let y = g.top + i as f64 * ROW;
        let _ = write!(
            o,
            r##"<rect x="{LW}" y="{y}" width="{pw}" height="{ROW}" fill="{}"/><text x="{}" y="{}" text-anchor="end" font-size="12">{}</text>"##,
            if i % 2 == 0 { "#f7f7f7" } else { "#ffffff" },
            LW - 6.0,
            y + ROW * 0.65,
            lane_title(*l)
        );
    }
    // Ticks.
    let step = tick_step((hi - lo) / 1000.0, 7.0) * 1000.0;
    let first = (lo / step).ceil();
    for k in 0..64 {
        let t = (first + k as f64) * step;
        if t > hi {
            break;
        }
        let xt = g.x(t);
        let _ = write!(
            o,
            r##"<line x1="{xt:.1}" y1="{}" x2="{xt:.1}" y2="{:.1}" stroke="#ddd"/><text x="{xt:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"##,
            g.top,
            axis_y + 4.0,
            axis_y + 16.0,
            us(t)
        );
    }
    let _ = write!(
        o,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">µs from the intended wake-up E</text>"##,
        LW + pw / 2.0,
        axis_y + 32.0
    );
}

/// Each segment in its lane, coloured by its cause's kind, with its cause and duration as a
/// tooltip and as a label where it fits.
fn segments(o: &mut String, geo: &Geometry, segs: &[LaneSegment]) {
    for g in segs {
        let Some(row) = geo.row(g.lane) else {
            continue;
        };
        let (a, b) = (g.start_ns as f64, (g.end_ns as f64).max(g.start_ns as f64));
        if b < geo.lo || a > geo.hi {
            continue;
        }
        let (xa, xb) = (geo.x(a.max(geo.lo)), geo.x(b.min(geo.hi)));
        let wpx = (xb - xa).max(2.0);
        let y = geo.top + row as f64 * ROW + 3.0;
        let dur = Human((g.end_ns.saturating_sub(g.start_ns)).max(0) as u64).to_string();
        let label = format!("{} {dur}", g.name);
        let tip = format!(
            "{}: {} {}{} — {dur}, {} to {} µs from E",
            lane_title(g.lane),
            g.cause.as_str(),
            g.name,
            if g.pid > 0 {
                format!(" (pid {})", g.pid)
            } else {
                String::new()
            },
            us(a),
            us(b)
        );
        let _ = write!(
            o,
            r##"<rect class="seg" x="{xa:.1}" y="{y:.1}" width="{wpx:.1}" height="{:.1}" fill="{}"><title>{}</title></rect>"##,
            ROW - 6.0,
            cause_color(g.cause),
            esc(&tip)
        );
        // The label where it fits (about 6.2 px a character at 11 px).
        let shown = esc(&label);
        if (shown.chars().count() as f64) * 6.2 + 6.0 <= wpx {
            let _ = write!(
                o,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#fff">{shown}</text>"##,
                xa + 3.0,
                y + ROW * 0.5 + 1.0
            );
        }
    }
}

/// The measuring thread runnable but not running: from its wake-up to its switch-in, an
/// outline in its lane (the stretches above say who had the CPU meanwhile).
fn waiting(o: &mut String, g: &Geometry, s: &SpikeRecord) {
    let at = |m: Moment| {
        s.timeline_events
            .iter()
            .find(|e| e.what == m)
            .map(|e| e.offset_ns)
    };
    if let (Some(w), Some(sw), Some(row)) = (
        at(Moment::Woken),
        at(Moment::SwitchedIn),
        g.row(Lane::Measuring),
    ) {
        if w < sw && g.shows(sw as f64) {
            let (xa, xb) = (g.x((w as f64).max(g.lo)), g.x(sw as f64));
            let y = g.top + row as f64 * ROW + 5.0;
            let dur = Human(sw.abs_diff(w)).to_string();
            let _ = write!(
                o,
                r##"<rect class="wait" x="{xa:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#009E73" stroke-dasharray="3 2"><title>measuring thread runnable, waiting for the CPU: {dur}</title></rect>"##,
                (xb - xa).max(2.0),
                ROW - 10.0
            );
            let label = format!("runnable, waiting {dur}");
            if label.chars().count() as f64 * 6.2 + 6.0 <= xb - xa {
                let _ = write!(
                    o,
                    r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#006b4f">{label}</text>"##,
                    xa + 3.0,
                    y + ROW * 0.5 - 1.0
                );
            }
        }
    }
}

/// Moments (sorted, in the span): vertical marks, each label on its row ([`label_rows`]).
fn moment_marks(o: &mut String, g: &Geometry, ms: &[(f64, &str)]) {
    let axis_y = g.axis_y;
    for ((t, name), row) in ms.iter().zip(&g.label_rows) {
        let xt = g.x(*t);
        let c = if *name == "E" || *name == "clock read" {
            "#c00"
        } else {
            "#444"
        };
        let _ = write!(
            o,
            r##"<line class="moment" x1="{xt:.1}" y1="{:.1}" x2="{xt:.1}" y2="{axis_y}" stroke="{c}" stroke-width="1.2" stroke-dasharray="4 2"><title>{} at {} µs</title></line><text x="{xt:.1}" y="{}" text-anchor="middle" font-size="11" fill="{c}">{}</text>"##,
            g.top - 4.0,
            name,
            us(*t),
            12.0 + 12.0 * *row as f64,
            name
        );
    }
}

/// Legend: the cause kinds drawn.
fn legend(o: &mut String, g: &Geometry, segs: &[LaneSegment]) {
    let mut kinds: Vec<CauseKind> = segs.iter().map(|g| g.cause).collect();
    kinds.sort();
    kinds.dedup();
    let mut lx = LW;
    let ly = g.axis_y + 44.0;
    for k in kinds {
        let _ = write!(
            o,
            r##"<rect x="{lx:.1}" y="{ly:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="12">{}</text>"##,
            cause_color(k),
            lx + 16.0,
            ly + 10.5,
            k.as_str()
        );
        lx += 24.0 + k.as_str().len() as f64 * 7.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_core::record::{SpikeLanes, TimelineEvent};

    fn seg(lane: Lane, cause: CauseKind, name: &str, a: i64, b: i64) -> LaneSegment {
        LaneSegment {
            cpu: 1,
            lane,
            cause,
            name: name.into(),
            pid: 9,
            start_ns: a,
            end_ns: b,
        }
    }

    fn spike(lanes: Option<SpikeLanes>) -> SpikeRecord {
        let at = |offset_ns, what| TimelineEvent {
            offset_ns,
            what,
            task: None,
            cascade: false,
            from_idle: false,
        };
        SpikeRecord {
            cpu: 1,
            at_ns: 5_000_000_000,
            latency_ns: 840_000,
            causes: vec![],
            trace_file: None,
            timeline: vec![],
            timeline_events: vec![
                at(0, Moment::TimerDue),
                at(0, Moment::TimerIrq),
                at(800_000, Moment::SwitchedIn),
                at(840_000, Moment::ClockRead),
            ],
            lanes,
            steal: None,
            others: None,
            timerlat: None,
        }
    }

    /// Names are escaped (markup and newlines), the big segment is labelled with its name and
    /// duration, E and the clock read are marked, the legend names the kinds drawn.
    #[test]
    fn lanes_svg_escapes_labels_and_marks_e_and_the_clock_read() {
        let s = spike(Some(SpikeLanes {
            segments: vec![
                seg(Lane::Irq, CauseKind::Irq, "local_timer", 0, 2_000),
                seg(
                    Lane::Task,
                    CauseKind::PreemptOff,
                    "<script>\nx",
                    2_000,
                    800_000,
                ),
                seg(
                    Lane::Measuring,
                    CauseKind::Task,
                    "switch-to-user (tau)",
                    800_000,
                    840_000,
                ),
            ],
            dropped: 0,
        }));
        let v = svg(&s);
        assert!(!v.contains("<script>"), "{v}");
        assert!(v.contains("&lt;script&gt;\\u{a}x 798 µs"), "{v}");
        assert_eq!(v.matches("<rect class=\"seg\"").count(), 3);
        assert!(!v.contains(">-0<"), "{v}");
        assert!(v.contains(">clock read</text>") && v.contains(">E</text>"));
        assert!(v.contains(">preempt_off</text>") && v.contains(">irq</text>"));
        // τ waited from its wake-up to its switch-in: an outline in its lane.
        assert_eq!(
            v.matches("<rect class=\"wait\"").count(),
            0,
            "no wake-up moment"
        );
        let mut w = s.clone();
        w.timeline_events.insert(
            2,
            TimelineEvent {
                offset_ns: 3_000,
                what: Moment::Woken,
                task: None,
                cascade: false,
                from_idle: false,
            },
        );
        let vw = svg(&w);
        assert!(vw.contains("runnable, waiting 797 µs</text>"), "{vw}");
        assert!(vw.contains("waiting for the CPU: 797 µs</title>"));
        for lane in [
            ">IRQ</text>",
            ">softirq</text>",
            ">tasks</text>",
            ">measuring</text>",
        ] {
            assert!(v.contains(lane), "{lane}");
        }
        // The tasks segment spans from 2 µs to 800 µs of an axis 0..840 µs (2 % padding).
        let x = |t: f64| LW + (t + 16_800.0) / (840_000.0 + 2.0 * 16_800.0) * (W - LW - RM);
        assert!(
            v.contains(&format!(
                "x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\"",
                x(2_000.0),
                T + 2.0 * ROW + 3.0,
                x(800_000.0) - x(2_000.0)
            )),
            "{v}"
        );
    }

    #[test]
    fn a_spike_without_lanes_says_so() {
        let h = section(&[spike(None), spike(Some(SpikeLanes::default()))]);
        assert_eq!(h.matches("no lane data in this record").count(), 1);
        assert_eq!(h.matches("the trace covers none of this spike").count(), 1);
        assert!(!h.contains("<svg"));
        assert_eq!(section(&[]), "");
    }

    /// A hostile record: extreme offsets, reversed segments, far too many of them, lanes this
    /// latlab does not know. No panic, at most MAX_SEGMENTS_DRAWN drawn, ticks bounded.
    #[test]
    fn hostile_lanes_stay_bounded() {
        let mut segs = vec![
            seg(Lane::Task, CauseKind::Task, "a", i64::MIN, i64::MAX),
            seg(Lane::Irq, CauseKind::Irq, "b", i64::MAX, i64::MIN),
            seg(Lane::Other, CauseKind::Unknown, "c", 5, 6),
        ];
        segs.extend((0..5000).map(|i| seg(Lane::Softirq, CauseKind::Softirq, "s", i, i + 1)));
        let mut s = spike(Some(SpikeLanes {
            segments: segs,
            dropped: u64::MAX,
        }));
        s.latency_ns = u64::MAX;
        let v = svg(&s);
        assert_eq!(v.matches("<rect class=\"seg\"").count(), MAX_SEGMENTS_DRAWN);
        assert!(v.matches("stroke=\"#ddd\"").count() <= 64);
        assert!(v.contains(">other</text>"));
        assert!(!v.contains("NaN") && !v.contains("inf"), "{}", &v[..2000]);
        let h = section(&vec![s; MAX_SPIKES_DRAWN + 3]);
        assert_eq!(h.matches("<svg").count(), MAX_SPIKES_DRAWN);
        assert!(h.contains("3 more spikes not drawn."));
    }

    /// Five moments within a few pixels: each label gets a row of its own, none overlaps.
    #[test]
    fn moment_labels_never_overlap() {
        let xs = [(100.0, 1), (101.0, 9), (102.0, 5), (103.0, 9), (104.0, 10)];
        let (rows, n) = label_rows(&xs);
        assert_eq!(n, 5);
        for i in 0..xs.len() {
            for j in 0..i {
                if rows[i] == rows[j] {
                    let gap = xs[i].0 - xs[i].1 as f64 * 3.2 - (xs[j].0 + xs[j].1 as f64 * 3.2);
                    assert!(gap >= 4.0, "{i} and {j} overlap");
                }
            }
        }
        // Far apart: one row.
        assert_eq!(label_rows(&[(100.0, 5), (300.0, 5)]).0, vec![0, 0]);
    }

    /// After a 6 ms stall the last 50 µs get a zoomed picture of their own, where the
    /// measuring thread's stretch is wide; a spike without such a squeeze gets none.
    #[test]
    fn a_long_stall_adds_a_zoom_on_the_last_stretch() {
        let mut s = spike(Some(SpikeLanes {
            segments: vec![
                seg(Lane::Other, CauseKind::Hypervisor, "stall", 0, 6_000_000),
                seg(
                    Lane::Measuring,
                    CauseKind::Task,
                    "switch-to-user (tau)",
                    6_030_000,
                    6_050_000,
                ),
            ],
            dropped: 0,
        }));
        s.latency_ns = 6_050_000;
        let at = |offset_ns, what| TimelineEvent {
            offset_ns,
            what,
            task: None,
            cascade: false,
            from_idle: false,
        };
        s.timeline_events = vec![
            at(0, Moment::TimerDue),
            at(6_000_000, Moment::TimerIrq),
            at(6_010_000, Moment::Woken),
            at(6_030_000, Moment::SwitchedIn),
            at(6_050_000, Moment::ClockRead),
        ];
        let v = svg(&s);
        assert_eq!(v.matches("<svg").count(), 2, "{v}");
        // One picture per spike keeps its class; the zoom has its own.
        assert_eq!(v.matches("class=\"plot lanes\"").count(), 1);
        assert_eq!(v.matches("class=\"plot lanes zoom\"").count(), 1);
        assert!(v.contains("the last 50 µs, zoomed"), "{v}");
        let zoomed = &v[v.rfind("<svg").unwrap()..];
        // In the zoom the stall is cut at its left edge and τ's 20 µs take about a third.
        let w: f64 = zoomed
            .split("<rect class=\"seg\"")
            .nth(2)
            .and_then(|r| r.split("width=\"").nth(1))
            .and_then(|r| r.split('"').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(w > 150.0, "{w}");
        assert!(zoomed.contains(">clock read</text>") && !zoomed.contains(">E</text>"));
        assert_eq!(svg(&spike(None)).matches("<svg").count(), 1);
    }

    #[test]
    fn ticks() {
        assert_eq!(tick_step(840.0, 7.0), 200.0);
        assert_eq!(tick_step(13_000.0, 7.0), 2000.0);
        assert_eq!(tick_step(0.9, 7.0), 0.2);
    }
}
