//! The loads' text: `latlab loads list`'s table, a load's record in one line (`loads run`),
//! and `latlab bench loads`'s table.

use latlab_core::bench::LoadRow;
use latlab_core::record::LoadRecord;
use latlab_core::units::Human;

/// `latlab loads list`'s table: profile, installed, tools, models; the last column unpadded.
pub fn profiles_table(rows: &[[String; 4]]) -> String {
    let w: Vec<usize> = (0..3)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        out.push_str(&format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {}\n",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2]
        ));
    }
    out
}

/// A load's record in one line: restarts, failures, CPU time, throughput, how it stopped.
pub fn record_line(r: &LoadRecord) -> String {
    let d = &r.details;
    format!(
        "{} ({}): restarts {}, failures {}, cpu {:.2} s, {}, stopped in {:.2} s{}",
        r.profile,
        d.get("part").and_then(|v| v.as_str()).unwrap_or("-"),
        d.get("restarts").unwrap_or(&serde_json::Value::Null),
        d.get("failures").unwrap_or(&serde_json::Value::Null),
        d.get("cpu_s").and_then(|v| v.as_f64()).unwrap_or(0.0),
        match r.ops {
            Some(o) => format!(
                "{o:.2} {}",
                d.get("ops_unit").and_then(|v| v.as_str()).unwrap_or("")
            ),
            None => "no throughput reported".into(),
        },
        d.get("stop")
            .and_then(|s| s.get("term_s"))
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0),
        if d.get("stop")
            .and_then(|s| s.get("killed"))
            .and_then(|v| v.as_bool())
            == Some(true)
        {
            " (needed SIGKILL)"
        } else {
            ""
        }
    )
}

/// Three significant digits at least: 0.037 iterations/s must not print as 0.0.
fn num(x: f64) -> String {
    if x == 0.0 || x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn lat(v: Option<u64>) -> String {
    v.map_or("-".into(), |ns| Human(ns).to_string())
}

fn throughput(r: &LoadRow) -> String {
    if r.throughput.is_empty() {
        return "-".into();
    }
    r.throughput
        .iter()
        .map(|(part, ops, unit)| {
            if r.throughput.len() > 1 && !part.is_empty() {
                format!("{part}: {} {unit}", num(*ops))
            } else {
                format!("{} {unit}", num(*ops))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `latlab bench loads`'s table: a row per profile, text left-aligned, numbers right-aligned.
pub fn bench_table(rows: &[LoadRow]) -> String {
    let mut cells: Vec<[String; 8]> = vec![[
        "profile".into(),
        "samples".into(),
        "p99".into(),
        "p99.9".into(),
        "max".into(),
        "missed".into(),
        "load throughput".into(),
        "restarts".into(),
    ]];
    for r in rows {
        if let Some(e) = &r.error {
            cells.push([
                r.profile.clone(),
                "failed".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                e.clone(),
                String::new(),
            ]);
            continue;
        }
        cells.push([
            r.profile.clone(),
            r.samples.to_string(),
            lat(r.p99_ns),
            lat(r.p999_ns),
            lat(r.max_ns),
            r.missed.to_string(),
            throughput(r),
            r.restarts.to_string(),
        ]);
    }
    let w: Vec<usize> = (0..8)
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for c in cells {
        let mut line = String::new();
        for (i, cell) in c.iter().enumerate() {
            let pad = w[i] - cell.chars().count();
            // Text columns left-aligned, numbers right-aligned.
            if i == 0 || i == 6 {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
            line.push_str("  ");
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_throughput_and_failures() {
        let rows = vec![
            LoadRow {
                profile: "idle".into(),
                samples: 1000,
                p99_ns: Some(57_000),
                p999_ns: Some(120_000),
                max_ns: Some(2_500_000),
                missed: 3,
                ..LoadRow::default()
            },
            LoadRow {
                profile: "stress-cpu".into(),
                samples: 999,
                throughput: vec![("stress-ng".into(), 1380.5, "bogo-ops/s".into())],
                restarts: 1,
                ..LoadRow::default()
            },
            LoadRow {
                profile: "hackbench".into(),
                error: Some("latlab: error: boom".into()),
                ..LoadRow::default()
            },
        ];
        let t = bench_table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("profile") && lines[0].ends_with("restarts"),
            "{t}"
        );
        assert!(
            lines[1].contains("57 µs") && lines[1].contains("2500 µs"),
            "{t}"
        );
        assert!(
            lines[2].contains("1380.5 bogo-ops/s") && lines[2].ends_with('1'),
            "{t}"
        );
        assert_eq!(num(0.0371), "0.037");
        assert_eq!(num(9.71), "9.71");
        assert!(
            lines[3].contains("failed") && lines[3].contains("boom"),
            "{t}"
        );
    }

    #[test]
    fn the_profiles_table_pads_all_but_the_last_column() {
        let rows = [
            ["profile", "installed", "tools", "models"].map(String::from),
            ["idle", "yes", "-", "nothing"].map(String::from),
        ];
        assert_eq!(
            profiles_table(&rows),
            "profile  installed  tools  models\nidle     yes        -      nothing\n"
        );
    }
}
