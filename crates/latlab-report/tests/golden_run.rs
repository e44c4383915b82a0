//! Golden files of the single-run formats (text, json, cyclictest) on a deterministic run:
//! the seeded sim source through the same histograms, with fixed metadata. Regenerate after an
//! intended change with `INSTA_UPDATE=always cargo test -p latlab-report --test golden_run`
//! and review the diff.

use latlab_core::hist::{Histogram, Layout};
use latlab_core::model::RunModel;
use latlab_core::record::*;
use latlab_core::sim::{SimParams, SimSource};
use latlab_core::stats::Stats;
use latlab_report::{render, Format};

fn record() -> RunRecord {
    // 300 µs of 1 µs buckets keeps the cyclictest golden file short; the tail holds the rest.
    let layout = Layout::new(1_000, 300_000).unwrap();
    let cpus = (0..2u32)
        .map(|cpu| {
            let mut src = SimSource::new(42, cpu, SimParams::default());
            let mut h = Histogram::new(layout);
            let mut per_second = Vec::new();
            for _s in 0..3 {
                let mut m = 0;
                for _ in 0..2000 {
                    let v = src.next_latency();
                    h.record(v);
                    m = m.max(v);
                }
                per_second.push(Some(m));
            }
            CpuRecord {
                cpu,
                stats: Stats {
                    missed_periods: cpu as u64,
                    ..Stats::default()
                },
                histogram: h.to_record(),
                per_second_max_ns: per_second,
                top_spikes: vec![SampleSpike {
                    at_ns: 1_000_000_000,
                    latency_ns: h.max().unwrap(),
                }],
                thread: ThreadInfo::default(),
                mode: None,
            }
        })
        .collect();
    let mut r = RunRecord {
        schema_version: SCHEMA_VERSION,
        label: "golden <b>".into(),
        source: Source::Latlab,
        complete: true,
        tool_version: Some("0.0.0".into()),
        command_line: Some("latlab run --backend sim".into()),
        started_at: Some("2026-01-01T00:00:00Z".into()),
        ended_at: Some("2026-01-01T00:00:03Z".into()),
        config: RunConfig {
            mode: "timer".into(),
            backend: "sim".into(),
            interval_ns: Some(500_000),
            duration_ns: Some(3_000_000_000),
            cpus: vec![0, 1],
            priority: Some(95),
            policy: Some("fifo".into()),
            measured_ns: Some(3_000_000_000),
            ..RunConfig::default()
        },
        machine: Machine {
            kernel_release: Some("6.18.0-test".into()),
            ..Machine::default()
        },
        inventory: None,
        total: Stats::default(),
        cpus,
        spikes: vec![SpikeRecord {
            cpu: 1,
            at_ns: 1_000_000_000,
            latency_ns: 420_000,
            causes: vec![
                Cause {
                    kind: CauseKind::PreemptOff,
                    name: "rust-lld\x1b[31m".into(),
                    pid: 15780,
                    prio: 120,
                    ns: 400_000,
                },
                Cause {
                    kind: CauseKind::Irq,
                    name: "local_timer".into(),
                    pid: 0,
                    prio: 0,
                    ns: 12_000,
                },
            ],
            trace_file: Some("spikes/001/trace.txt".into()),
            timeline: vec![],
        }],
        trace: None,
        loads: vec![],
        activity: None,
        scenario: serde_json::Value::Null,
        warnings: vec!["a warning".into()],
        notes: vec![],
    };
    r.refresh().unwrap();
    r
}

fn model() -> RunModel {
    RunModel::new(record()).unwrap()
}

#[test]
fn text_golden() {
    let out = String::from_utf8(render(&model(), Format::Text)).unwrap();
    // ANSI escapes from task names never reach the terminal.
    assert!(!out.contains('\x1b'));
    insta::assert_snapshot!("text", out);
}

#[test]
fn json_golden() {
    let out = String::from_utf8(render(&model(), Format::Json)).unwrap();
    insta::assert_snapshot!("json", out);
}

#[test]
fn cyclictest_golden() {
    let out = String::from_utf8(render(&model(), Format::Cyclictest)).unwrap();
    assert_eq!(out.lines().filter(|l| !l.starts_with('#')).count(), 300);
    insta::assert_snapshot!("cyclictest", out);
}
