//! The results of `latlab scenario` (fairness, io-read) as [`Table`]s, from the record's
//! typed `scenario`: every format (text, markdown, html) shows them, json has the record's keys.

use latlab_core::model::RunModel;
use latlab_core::scenario_record::{FairnessRecord, IoReadRecord, ScenarioRecord};
use latlab_core::units::{Human, Nanos};

use crate::tables::Table;

fn ns(v: Option<Nanos>) -> String {
    v.map(|n| Human(n).to_string())
        .unwrap_or_else(|| "-".into())
}

fn ratio(v: Option<f64>) -> String {
    v.map(|r| format!("{r:.2}×")).unwrap_or_else(|| "-".into())
}

fn pct(x: f64) -> String {
    format!("{:.1} %", 100.0 * x)
}

fn opt(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "-".into())
}

/// The scenario's tables (none for a run that is no scenario).
pub fn tables(m: &RunModel) -> Vec<Table> {
    match &m.record.scenario {
        Some(ScenarioRecord::Fairness(f)) => fairness(f),
        Some(ScenarioRecord::IoRead(r)) => io_read(r),
        Some(ScenarioRecord::Unknown) => {
            let mut t = Table::new("Scenario", &["kind"]);
            t.rows
                .push(vec!["a scenario this latlab does not know".into()]);
            vec![t]
        }
        None => vec![],
    }
}

fn fairness(f: &FairnessRecord) -> Vec<Table> {
    let mut summary = Table::new(
        format!(
            "Fairness: {} tasks, policy {} {}, CPUs {}",
            f.tasks, f.policy, f.priority, f.cpus
        ),
        &["figure", "value"],
    );
    let r = f.result.as_ref();
    let four = |x: Option<f64>| x.map(|v| format!("{v:.4}")).unwrap_or_else(|| "-".into());
    summary.rows = vec![
        vec!["elapsed".into(), ns(r.map(|r| r.elapsed_ns))],
        vec![
            "Jain's index (CPU time)".into(),
            four(r.and_then(|r| r.jain_index)),
        ],
        vec![
            "Jain's index (work)".into(),
            four(r.and_then(|r| r.jain_index_work)),
        ],
        vec![
            "max/min CPU share".into(),
            ratio(r.and_then(|r| r.max_min_ratio)),
        ],
        vec![
            "utilisation".into(),
            r.and_then(|r| r.utilisation)
                .map(pct)
                .unwrap_or_else(|| "-".into()),
        ],
    ];
    if let Some(sl) = r.and_then(|r| r.sleeper.as_ref()) {
        summary.rows.push(vec![
            format!("sleeper every {}", Human(sl.interval_ns)),
            format!(
                "{} wake-ups, {} missed, latency p50 {}, p99 {}, max {}",
                sl.wakeups,
                sl.missed,
                ns(sl.p50_ns),
                ns(sl.p99_ns),
                ns(sl.max_ns)
            ),
        ]);
    }
    summary.note = Some(format!(
        "Jain's index: 1 = every task got the same, 1/{} = one task got everything; CPU time from {}, one work unit = {}{}",
        f.tasks,
        f.cpu_time_source,
        f.work_unit,
        if f.interrupted {
            "; interrupted: the figures cover part of the duration"
        } else {
            ""
        }
    ));
    let mut tasks = Table::new(
        "Fairness: each task",
        &["task", "tid", "CPU time", "CPU share", "work", "work share"],
    );
    tasks.rows = f
        .per_task
        .iter()
        .map(|t| {
            vec![
                t.task.to_string(),
                t.tid.to_string(),
                Human(t.cpu_ns).to_string(),
                pct(t.cpu_share),
                t.work.to_string(),
                pct(t.work_share),
            ]
        })
        .collect();
    vec![summary, tasks]
}

fn io_read(r: &IoReadRecord) -> Vec<Table> {
    let d = &r.device;
    let mut setup = Table::new(
        format!(
            "I/O read latency: {} MiB file in {}-byte reads, {} small files; {} repeats",
            r.file_size >> 20,
            r.read_size,
            r.small_files,
            r.repeat
        ),
        &["figure", "value"],
    );
    setup.rows = vec![
        vec![
            "device".into(),
            format!("{} (disk {})", opt(&d.name), opt(&d.disk)),
        ],
        vec![
            "I/O scheduler".into(),
            match &r.iosched.requested {
                Some(_) => format!(
                    "{} (set for the run; was {})",
                    opt(&r.iosched.during),
                    opt(&r.iosched.before)
                ),
                None => opt(&r.iosched.during),
            },
        ],
        vec!["cache dropped by".into(), r.cache_drop.clone()],
    ];
    if let Some(n) = &d.note {
        setup.rows.push(vec!["note".into(), n.clone()]);
    }
    let mut phases = Table::new(
        "I/O read latency: each phase",
        &[
            "phase",
            "reader",
            "series",
            "total (median)",
            "p50",
            "p99",
            "max",
        ],
    );
    for p in &r.phases {
        for (what, s) in [("big file", &p.big), ("small files", &p.small)] {
            let Some(s) = s else { continue };
            phases.rows.push(vec![
                p.name.clone(),
                what.into(),
                s.series.to_string(),
                ns(s.median_total_ns),
                ns(s.p50_ns),
                ns(s.p99_ns),
                ns(s.max_ns),
            ]);
        }
    }
    phases.note = Some(
        "The report's CPU column is the series number: the histograms are per reader and phase (p50/p99/max per read(2) of the big file, per small file)."
            .into(),
    );
    let mut out = vec![setup, phases];
    if !r.ratios.is_empty() {
        let mut ratios = Table::new(
            "I/O read latency: loaded / alone",
            &[
                "phase",
                "big file total",
                "big file p99 read",
                "small files total",
                "small files p99 file",
            ],
        );
        ratios.rows = r
            .ratios
            .iter()
            .map(|x| {
                vec![
                    format!("{} / alone", x.phase),
                    ratio(x.big_total),
                    ratio(x.big_p99),
                    ratio(x.small_total),
                    ratio(x.small_p99),
                ]
            })
            .collect();
        out.push(ratios);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_core::scenario_record::{FairnessResult, RatioRecord, TaskShare};

    fn model(sc: Option<ScenarioRecord>) -> RunModel {
        let mut r = latlab_core::record::RunRecord::new(
            "t",
            latlab_core::record::Source::Latlab,
            Default::default(),
            vec![],
        );
        r.scenario = sc;
        RunModel::new(r).unwrap()
    }

    #[test]
    fn no_scenario_no_tables_and_every_format_shows_one() {
        assert!(tables(&model(None)).is_empty());
        let f = ScenarioRecord::Fairness(FairnessRecord {
            tasks: 2,
            policy: "other\u{1b}[31m".into(),
            priority: 0,
            cpus: "1".into(),
            duration_ns: 1_000_000_000,
            interrupted: false,
            cpu_time_source: "clock".into(),
            work_unit: "unit".into(),
            per_task: vec![TaskShare {
                task: 0,
                tid: 7,
                cpu_ns: 500_000_000,
                work: 10,
                wall_ns: 1_000_000_000,
                cpu_share: 0.5,
                work_share: 0.5,
            }],
            result: Some(FairnessResult {
                jain_index: Some(0.99),
                jain_index_work: Some(0.98),
                max_min_ratio: Some(1.02),
                elapsed_ns: 1_000_000_000,
                utilisation: Some(1.0),
                sleeper: None,
            }),
        });
        let m = model(Some(f));
        for fmt in [
            crate::Format::Text,
            crate::Format::Markdown,
            crate::Format::Html,
        ] {
            let out = String::from_utf8(crate::render(&m, fmt)).unwrap();
            assert!(out.contains("index (CPU time)"), "{fmt:?}: {out}");
            assert!(out.contains("0.9900") && out.contains("50.0 %"), "{fmt:?}");
            assert!(!out.contains('\u{1b}'), "{fmt:?}: the policy is escaped");
        }
        let json: serde_json::Value =
            serde_json::from_slice(&crate::render(&m, crate::Format::Json)).unwrap();
        assert_eq!(json["scenario"]["kind"], "fairness");
        assert_eq!(json["scenario"]["jain_index"], 0.99);
    }

    #[test]
    fn io_read_ratios_are_shown() {
        let r = ScenarioRecord::IoRead(IoReadRecord {
            file_size: 200 << 20,
            small_files: 10,
            small_bytes: None,
            read_size: 131072,
            repeat: 1,
            dir: "/var/tmp".into(),
            scratch: "/var/tmp/x".into(),
            cache_drop: "fadvise".into(),
            walk_order: "find".into(),
            device: Default::default(),
            iosched: Default::default(),
            interrupted: false,
            series: vec![],
            phases: vec![],
            ratios: vec![RatioRecord {
                phase: "io-write".into(),
                big_total: Some(2.5),
                big_p99: None,
                small_total: None,
                small_p99: None,
            }],
        });
        let out = String::from_utf8(crate::render(&model(Some(r)), crate::Format::Text)).unwrap();
        assert!(out.contains("io-write / alone"), "{out}");
        assert!(out.contains("2.50×"), "{out}");
    }
}
