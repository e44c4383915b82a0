//! `latlab history`: the runs of the results database as a text table, and as an HTML page
//! of OSADL-style long-term plots (the maximum and the p99.9 of each run over time, one colour
//! per kernel, then one per machine) above the table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use latlab_core::escape::escape;
use latlab_core::history::{change_points, HistoryChange, RunRow};
use latlab_core::units::Human;

use crate::svg::{esc, COLORS};

fn ns(v: Option<i64>) -> String {
    v.map(|v| Human(v.max(0) as u64).to_string())
        .unwrap_or_else(|| "-".into())
}

fn started(r: &RunRow) -> String {
    r.started_at.clone().unwrap_or_else(|| {
        jiff::Timestamp::from_second(r.time_unix)
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default()
    })
}

/// The run's loads ("-" alone).
fn load(r: &RunRow) -> String {
    if r.loads.is_empty() {
        "-".into()
    } else {
        r.loads.join("+")
    }
}

/// How long the run measured ("-" unknown).
fn duration(r: &RunRow) -> String {
    r.duration_ns
        .filter(|d| *d > 0)
        .map(|d| latlab_core::units::format_measured(d as u64))
        .unwrap_or_else(|| "-".into())
}

/// What a trend line must not cross: runs under another load, at another period, on another
/// preemption model measure something else.
fn setting(r: &RunRow) -> (Vec<String>, Option<i64>, Option<String>) {
    (r.loads.clone(), r.interval_ns, r.preemption.clone())
}

fn machine(r: &RunRow) -> String {
    r.hostname.clone().unwrap_or_else(|| r.machine_id.clone())
}

pub fn text(rows: &[RunRow]) -> Vec<u8> {
    let head = [
        "started", "run id", "machine", "kernel", "preempt", "label", "load", "duration", "p99",
        "p99.9", "max", "missed",
    ];
    let mut table: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        table.push(vec![
            escape(&started(r)),
            escape(&r.run_id.chars().take(8).collect::<String>()),
            escape(&machine(r)),
            escape(r.kernel_release.as_deref().unwrap_or("-")),
            escape(r.preemption.as_deref().unwrap_or("-")),
            escape(&r.label),
            escape(&load(r)),
            duration(r),
            ns(r.p99_ns),
            ns(r.p999_ns),
            ns(r.max_ns),
            r.missed.to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i >= 7 {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        let _ = writeln!(s, "{}", cells.join("  ").trim_end());
    }
    let _ = writeln!(s, "{} runs", rows.len());
    let cps = change_points(rows);
    if !cps.is_empty() {
        let _ = writeln!(
            s,
            "\nChange points (each machine's p99.9 over its runs; Welch's t at every split, permutation p-value):"
        );
        for c in &cps {
            let _ = writeln!(s, "  {}", change_line(c));
        }
    }
    s.into_bytes()
}

/// One change point in words: "host-a: p99.9 45 µs → 80 µs from run 1234abcd (…)".
fn change_line(c: &HistoryChange) -> String {
    let kernel = |k: &Option<String>| k.clone().unwrap_or_else(|| "-".into());
    let when = c.started_at.clone().unwrap_or_else(|| {
        jiff::Timestamp::from_second(c.time_unix)
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default()
    });
    escape(&format!(
        "{}: {} {} → {} from run {} ({when}, kernel {}; before: {}), {} runs before, {} after, p = {:.3}",
        c.machine,
        c.statistic,
        Human(c.before_ns),
        Human(c.after_ns),
        c.run_id.chars().take(8).collect::<String>(),
        kernel(&c.kernel_after),
        kernel(&c.kernel_before),
        c.runs_before,
        c.runs_after,
        c.p_value
    ))
}

/// The runs as JSON: `{"database": …, "runs": [RunRow…]}`, pretty, with a final newline.
pub fn json(db: &str, rows: &[RunRow]) -> Vec<u8> {
    let v = serde_json::json!({
        "database": db,
        "runs": rows,
        "change_points": change_points(rows),
    });
    let mut b = serde_json::to_vec_pretty(&v).expect("rows serialize");
    b.push(b'\n');
    b
}

const W: f64 = 760.0;
const H: f64 = 360.0;
const L: f64 = 70.0;
const R: f64 = 190.0;
const T: f64 = 20.0;
const B: f64 = 50.0;

/// Per-run values over time: one colour per group, points joined in time order, y log scale.
fn plot(
    title: &str,
    rows: &[RunRow],
    group: impl Fn(&RunRow) -> String,
    val: impl Fn(&RunRow) -> Option<i64>,
) -> String {
    type Setting = (Vec<String>, Option<i64>, Option<String>);
    let mut groups: BTreeMap<String, Vec<(i64, f64, Setting)>> = BTreeMap::new();
    for r in rows {
        if let Some(v) = val(r).filter(|v| *v > 0) {
            groups
                .entry(group(r))
                .or_default()
                .push((r.time_unix, v as f64, setting(r)));
        }
    }
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="12"><title>{t}</title><rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#888"/><text x="{cx}" y="{by}" text-anchor="middle">run start (UTC)</text><text transform="translate(14,{cy}) rotate(-90)" text-anchor="middle">latency (log scale)</text>"##,
        t = esc(title),
        pw = W - L - R,
        ph = H - T - B,
        cx = L + (W - L - R) / 2.0,
        by = H - 8.0,
        cy = T + (H - T - B) / 2.0,
    );
    let pts: Vec<(i64, f64)> = groups.values().flatten().map(|p| (p.0, p.1)).collect();
    if pts.is_empty() {
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" text-anchor="middle">no runs</text></svg>"#,
            L + (W - L - R) / 2.0,
            T + (H - T - B) / 2.0
        );
        return o;
    }
    let (t0, t1) = pts
        .iter()
        .fold((i64::MAX, i64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (lo, hi) = pts
        .iter()
        .fold((f64::MAX, 0f64), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let (dlo, dhi) = (
        lo.log10().floor(),
        hi.log10().ceil().max(lo.log10().floor() + 1.0),
    );
    let x = |t: i64| {
        if t1 == t0 {
            L + (W - L - R) / 2.0
        } else {
            L + (t - t0) as f64 / (t1 - t0) as f64 * (W - L - R)
        }
    };
    let y = |v: f64| (H - B) - (v.log10() - dlo) / (dhi - dlo) * (H - T - B);
    let mut d = dlo;
    while d <= dhi {
        let yy = y(10f64.powf(d));
        let _ = write!(
            o,
            r##"<line x1="{L}" y1="{yy:.1}" x2="{xr}" y2="{yy:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end" font-size="11">{l}</text>"##,
            xr = W - R,
            tx = L - 4.0,
            ty = yy + 4.0,
            l = esc(&Human(10f64.powf(d) as u64).to_string()),
        );
        d += 1.0;
    }
    for (tt, anchor) in [(t0, "start"), (t1, "end")] {
        let label = jiff::Timestamp::from_second(tt)
            .map(|t| t.strftime("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default();
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{}" text-anchor="{anchor}" font-size="11">{}</text>"#,
            x(tt),
            H - B + 15.0,
            esc(&label)
        );
    }
    for (i, (name, ps)) in groups.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        // A line joins consecutive runs of the same load, period and preemption model only:
        // where they change, the line breaks (the runs measured something else).
        for seg in ps.chunk_by(|a, b| a.2 == b.2) {
            if seg.len() < 2 {
                continue;
            }
            let line: Vec<String> = seg
                .iter()
                .map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1)))
                .collect();
            let _ = write!(
                o,
                r#"<polyline fill="none" stroke="{c}" stroke-width="1" points="{}"/>"#,
                line.join(" ")
            );
        }
        for p in ps {
            let load = if p.2 .0.is_empty() {
                "no load".to_string()
            } else {
                p.2 .0.join("+")
            };
            let _ = write!(
                o,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"><title>{}</title></circle>"#,
                x(p.0),
                y(p.1),
                esc(&format!("{name}: {} ({load})", Human(p.1 as u64)))
            );
        }
        let ly = T + 14.0 + i as f64 * 16.0;
        let name: String = name.chars().take(28).collect();
        let _ = write!(
            o,
            r#"<rect x="{lx}" y="{ry:.1}" width="10" height="10" fill="{c}"/><text x="{tx}" y="{ly:.1}">{n}</text>"#,
            lx = W - R + 10.0,
            ry = ly - 9.0,
            tx = W - R + 25.0,
            n = esc(&name),
        );
    }
    o.push_str("</svg>");
    o
}

pub fn html(db: &str, rows: &[RunRow]) -> Vec<u8> {
    let kernel = |r: &RunRow| {
        r.kernel_release
            .clone()
            .unwrap_or_else(|| "unknown kernel".into())
    };
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>latlab history</h1><p class=\"meta\">{} runs from {}</p>",
        rows.len(),
        esc(db)
    );
    b.push_str("<h2>By kernel</h2><p class=\"meta\">A line joins runs of one kernel under the same load, period and preemption model; it breaks where they change.</p><h3>Maximum latency per run</h3>");
    b.push_str(&plot(
        "Maximum latency per run, by kernel",
        rows,
        kernel,
        |r| r.max_ns,
    ));
    b.push_str("<h3>p99.9 per run</h3>");
    b.push_str(&plot("p99.9 per run, by kernel", rows, kernel, |r| {
        r.p999_ns
    }));
    b.push_str("<h2>By machine</h2><h3>Maximum latency per run</h3>");
    b.push_str(&plot(
        "Maximum latency per run, by machine",
        rows,
        machine,
        |r| r.max_ns,
    ));
    b.push_str("<h3>p99.9 per run</h3>");
    b.push_str(&plot("p99.9 per run, by machine", rows, machine, |r| {
        r.p999_ns
    }));
    let cps = change_points(rows);
    if !cps.is_empty() {
        b.push_str("<h2>Change points</h2><p class=\"meta\">Each machine's p99.9 over its runs: the run from which it moved beyond the run-to-run noise (Welch's t at every split, permutation p-value).</p><ul>");
        for c in &cps {
            let _ = write!(b, "<li>{}</li>", esc(&change_line(c)));
        }
        b.push_str("</ul>");
    }
    b.push_str("<h2>Runs</h2><table class=\"nowrap\"><tr><th class=\"k\">started</th><th class=\"k\">run id</th><th class=\"k\">machine</th><th class=\"k\">kernel</th><th class=\"k\">label</th><th class=\"k\">load</th><th>duration</th><th>p99</th><th>p99.9</th><th>max</th><th>missed</th></tr>");
    for r in rows {
        let _ = write!(
            b,
            "<tr><td class=\"k\">{}</td><td class=\"k\"><code title=\"{}\">{}</code></td><td class=\"k\">{}</td><td class=\"k\">{}</td><td class=\"k\">{}</td><td class=\"k\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&started(r)),
            esc(&r.run_id),
            esc(&r.run_id.chars().take(8).collect::<String>()),
            esc(&machine(r)),
            esc(&kernel(r)),
            esc(&r.label),
            esc(&load(r)),
            esc(&duration(r)),
            esc(&ns(r.p99_ns)),
            esc(&ns(r.p999_ns)),
            esc(&ns(r.max_ns)),
            r.missed
        );
    }
    b.push_str("</table>");
    crate::html::page("latlab history", &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, label: &str, kernel: &str, t: i64, max: Option<i64>) -> RunRow {
        RunRow {
            run_id: id.into(),
            label: label.into(),
            machine_id: "0123456789abcdef".into(),
            hostname: Some("box".into()),
            kernel_release: Some(kernel.into()),
            kernel_version: None,
            preemption: Some("full".into()),
            source: "latlab".into(),
            started_at: None,
            time_unix: t,
            duration_ns: Some(1_000_000_000),
            loads: vec![],
            interval_ns: Some(1_000_000),
            complete: true,
            cpus: 2,
            samples: 2000,
            p99_ns: Some(12_000),
            p999_ns: Some(40_000),
            max_ns: max,
            missed: 3,
        }
    }

    #[test]
    fn text_is_a_table_with_escaped_cells_and_aligned_columns() {
        let rows = [
            row(
                "abcdef0123456789",
                "idle",
                "6.12.0",
                1_700_000_000,
                Some(90_000),
            ),
            row("fedcba98", "evil\x1b[2J", "6.1", 1_700_000_600, None),
        ];
        let out = String::from_utf8(text(&rows)).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert!(lines[0].starts_with("started "), "{out}");
        // The start from time_unix when the row has no started_at; the id cut to 8.
        assert!(
            lines[1].starts_with("2023-11-14T22:13:20Z  abcdef01  box"),
            "{out}"
        );
        assert!(!out.contains('\x1b'), "{out}");
        assert!(
            out.contains("evil\\x1b[2J") || out.contains("evil\\u{1b}[2J"),
            "{out}"
        );
        // Numbers right-aligned: each column ends where its header ends.
        let end = |l: &str, w: &str| l[..l.find(w).unwrap() + w.len()].chars().count();
        assert_eq!(end(lines[0], "missed"), lines[1].chars().count(), "{out}");
        assert_eq!(end(lines[1], "90 µs"), end(lines[0], "max"), "{out}");
        assert_eq!(end(lines[2], "      -"), end(lines[0], "max"), "{out}");
        assert_eq!(lines[3], "2 runs");
    }

    #[test]
    fn html_plots_a_line_per_kernel_and_escapes_what_it_shows() {
        let rows = [
            row("a1", "<script>", "6.12.0", 1_700_000_000, Some(90_000)),
            row("a2", "x", "6.12.0", 1_700_000_600, Some(80_000)),
            row("a3", "y", "6.1", 1_700_001_200, Some(70_000)),
        ];
        let page = String::from_utf8(html("/tmp/db&x", &rows)).unwrap();
        assert!(!page.contains("<script>"), "the label is escaped");
        assert!(page.contains("&lt;script&gt;"));
        assert!(page.contains("/tmp/db&amp;x"));
        // Four plots (max and p99.9, by kernel and by machine), each labelled: a line per
        // group of two runs or more (6.1's single run is a point), 1 + 1 + 1 + 1.
        assert_eq!(page.matches("<polyline").count(), 4, "{page}");
        assert_eq!(page.matches("<circle").count(), 12);
        assert_eq!(page.matches("<h3>Maximum latency per run</h3>").count(), 2);
        assert_eq!(page.matches("<h3>p99.9 per run</h3>").count(), 2);
        let empty = String::from_utf8(html("db", &[])).unwrap();
        assert_eq!(empty.matches(">no runs</text>").count(), 4);
    }

    /// Runs under another load or period are not a trend: the line breaks where they change,
    /// and the table (text and HTML) says which load and how long each run measured.
    #[test]
    fn lines_break_where_the_load_or_the_period_changes() {
        let mut rows: Vec<RunRow> = (0..6)
            .map(|i| {
                row(
                    &format!("r{i}"),
                    "l",
                    "6.12.0",
                    1_700_000_000 + i * 600,
                    Some(90_000),
                )
            })
            .collect();
        for r in &mut rows[2..4] {
            r.loads = vec!["hackbench".into()];
        }
        rows[5].interval_ns = Some(500_000);
        let page = String::from_utf8(html("db", &rows)).unwrap();
        // Per plot: r0-r1 alone, r2-r3 under hackbench, r4 alone (a point), r5 at 500 µs (a
        // point): 2 lines in each of the 4 plots.
        assert_eq!(page.matches("<polyline").count(), 8, "{page}");
        assert!(page.contains("<td class=\"k\">hackbench</td>"), "{page}");
        assert!(page.contains("<table class=\"nowrap\">"));
        let out = String::from_utf8(text(&rows)).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].contains(" load ") && lines[0].contains(" duration "),
            "{out}"
        );
        assert!(
            lines[3].contains("hackbench") && lines[3].contains(" 1s "),
            "{out}"
        );
        assert!(
            !lines[1].contains("hackbench") && lines[1].contains(" - "),
            "{out}"
        );
    }

    #[test]
    fn json_holds_the_database_and_every_row() {
        let v: serde_json::Value =
            serde_json::from_slice(&json("db", &[row("a1", "l", "k", 1, None)])).unwrap();
        assert_eq!(v["database"], "db");
        assert_eq!(v["runs"][0]["run_id"], "a1");
        assert!(v["runs"][0]["max_ns"].is_null());
    }
}
