//! Golden files of `latlab compare` in every format (text, markdown, json, html) on three
//! deterministic runs: the seeded sim source with fixed metadata, different enough that the
//! comparison has something to say (another kernel and preemption model, a load, a shorter run
//! with another interval). Regenerate after an intended change with
//! `INSTA_UPDATE=always cargo test -p latlab-report` and review the diff.

use latlab_core::hist::{Histogram, Layout};
use latlab_core::model::RunModel;
use latlab_core::record::*;
use latlab_core::sim::{SimParams, SimSource};
use latlab_core::stats::Stats;
use latlab_report::compare::{render, CompareFormat};

struct Spec {
    label: &'static str,
    seed: u64,
    seconds: usize,
    per_second: usize,
    interval_ns: u64,
    kernel: &'static str,
    preemption: &'static str,
    loads: &'static [&'static str],
    params: SimParams,
}

fn record(s: &Spec) -> RunRecord {
    let layout = Layout::new(1_000, 10_000_000).unwrap();
    let cpus = (0..2u32)
        .map(|cpu| {
            let mut src = SimSource::new(s.seed, cpu, s.params);
            let mut h = Histogram::new(layout);
            let mut per_second = Vec::new();
            for _ in 0..s.seconds {
                let mut m = 0;
                for _ in 0..s.per_second {
                    let v = src.next_latency();
                    h.record(v);
                    m = m.max(v);
                }
                per_second.push(Some(m));
            }
            CpuRecord {
                cpu,
                stats: Stats::default(),
                histogram: h.to_record(),
                per_second_max_ns: per_second,
                top_spikes: vec![],
                thread: ThreadInfo::default(),
                mode: None,
            }
        })
        .collect();
    let measured = s.seconds as u64 * 1_000_000_000;
    let mut r = RunRecord {
        schema_version: SCHEMA_VERSION,
        run_id: None,
        label: s.label.into(),
        source: Source::Latlab,
        complete: true,
        tool_version: Some("0.0.0".into()),
        command_line: Some(format!("latlab run --backend sim --label {}", s.label)),
        started_at: Some("2026-01-01T00:00:00Z".into()),
        ended_at: Some("2026-01-01T00:01:00Z".into()),
        config: RunConfig {
            mode: "timer".into(),
            backend: "sim".into(),
            interval_ns: Some(s.interval_ns),
            duration_ns: Some(measured),
            cpus: vec![0, 1],
            priority: Some(95),
            policy: Some("fifo".into()),
            measured_ns: Some(measured),
            sim_seed: Some(s.seed),
            loads: s.loads.iter().map(|l| l.to_string()).collect(),
            ..RunConfig::default()
        },
        machine: Machine {
            kernel_release: Some(s.kernel.into()),
            preemption: Some(s.preemption.into()),
            cmdline: Some(format!("BOOT_IMAGE=/vmlinuz-{} ro quiet", s.kernel)),
            ..Machine::default()
        },
        inventory: None,
        total: Stats::default(),
        cpus,
        spikes: vec![],
        trace: None,
        loads: vec![],
        activity: None,
        warnings: vec![],
        notes: vec![],
        scenario: None,
        profile: None,
        intervals: None,
        until: None,
    };
    r.refresh().unwrap();
    r
}

fn runs() -> Vec<RunModel> {
    let specs = [
        Spec {
            label: "stock",
            seed: 1,
            seconds: 20,
            per_second: 1000,
            interval_ns: 1_000_000,
            kernel: "6.1.0-stock",
            preemption: "voluntary",
            loads: &[],
            params: SimParams::default(),
        },
        Spec {
            label: "preempt <full>",
            seed: 2,
            seconds: 20,
            per_second: 1000,
            interval_ns: 1_000_000,
            kernel: "6.1.0-preempt",
            preemption: "full",
            loads: &["hackbench"],
            params: SimParams {
                burst_p: 5e-4,
                spike_p: 2e-5,
                ..SimParams::default()
            },
        },
        Spec {
            label: "short",
            seed: 3,
            seconds: 2,
            per_second: 2000,
            interval_ns: 500_000,
            kernel: "6.1.0-stock",
            preemption: "voluntary",
            loads: &[],
            params: SimParams::default(),
        },
    ];
    let mut records: Vec<RunRecord> = specs.iter().map(record).collect();
    // The first two runs were traced: an RCU softirq dominated the first's spikes and shrank
    // in the second; a serial IRQ only the first had; the third traced nothing.
    records[0].spikes = vec![
        spike(4_000_000, &[(CauseKind::Softirq, "RCU", 3_000_000)]),
        spike(1_000_000, &[(CauseKind::Irq, "ttyS0", 500_000)]),
    ];
    records[1].spikes = vec![spike(1_000_000, &[(CauseKind::Softirq, "RCU", 400_000)])];
    records
        .into_iter()
        .map(|r| RunModel::new(r).unwrap())
        .collect()
}

fn spike(latency_ns: u64, causes: &[(CauseKind, &str, u64)]) -> SpikeRecord {
    SpikeRecord {
        cpu: 0,
        at_ns: 0,
        latency_ns,
        causes: causes
            .iter()
            .map(|(kind, name, ns)| Cause {
                kind: *kind,
                name: (*name).into(),
                pid: 0,
                prio: 0,
                ns: *ns,
                context: None,
            })
            .collect(),
        trace_file: None,
        timeline: vec![],
        timeline_events: vec![],
        lanes: None,
        steal: None,
        others: None,
        timerlat: None,
    }
}

fn out(f: CompareFormat) -> String {
    String::from_utf8(render(&runs(), f)).unwrap()
}

#[test]
fn compare_text_golden() {
    let o = out(CompareFormat::Text);
    // The differences a reader must see before trusting a ratio are flagged.
    assert!(o.contains("Before trusting a difference"), "{o}");
    // Three runs fit a terminal: the ladder is a line per percentile and run (it was 225
    // columns wide with the runs side by side).
    let widest = o
        .lines()
        .map(|l| l.trim_end().chars().count())
        .max()
        .unwrap();
    let ladder = o.split("Percentile ladder").nth(1).unwrap();
    let ladder = ladder.split("\n\n").next().unwrap();
    let ladder_width = ladder
        .lines()
        .skip(1)
        .map(|l| l.trim_end().chars().count())
        .max()
        .unwrap();
    assert!(
        ladder_width <= 100,
        "the ladder is {ladder_width} columns wide:\n{ladder}"
    );
    // The causes of the traced runs side by side, before the ladder.
    let causes = o
        .find("What delayed the traced spikes")
        .expect("causes compared");
    assert!(causes < o.find("Percentile ladder").unwrap());
    let rcu = o.lines().find(|l| l.contains("RCU")).unwrap();
    assert!(
        rcu.contains("softirq")
            && rcu.contains("3000 µs (60.0 %, 1 spike)")
            && rcu.contains("400 µs (40.0 %, 1 spike)"),
        "{rcu}"
    );
    // "What changed" is keyed and short: a list reads as its values.
    assert!(
        o.contains("config.loads: (none) → hackbench → (none)"),
        "{o}"
    );
    eprintln!("widest line: {widest} columns");
    insta::assert_snapshot!("compare_text", o);
}

#[test]
fn compare_markdown_golden() {
    insta::assert_snapshot!("compare_markdown", out(CompareFormat::Markdown));
}

#[test]
fn compare_json_golden() {
    let o = out(CompareFormat::Json);
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(v["runs"].as_array().map(|a| a.len()), Some(3));
    insta::assert_snapshot!("compare_json", o);
}

#[test]
fn compare_html_golden() {
    let o = out(CompareFormat::Html);
    assert!(o.contains("preempt &lt;full&gt;") && !o.contains("preempt <full>"));
    assert!(o.matches("<polyline").count() >= 3);
    assert_eq!(
        o.as_bytes(),
        render(&runs(), CompareFormat::Html).as_slice(),
        "html output is not deterministic"
    );
    insta::assert_snapshot!("compare_html", o);
}
