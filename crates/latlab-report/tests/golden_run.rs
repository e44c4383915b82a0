//! Golden files of the single-run formats (text, markdown, json, html, cyclictest) on a
//! deterministic run: the seeded sim source through the same histograms, with fixed metadata.
//! Regenerate after an intended change with `INSTA_UPDATE=always cargo test -p latlab-report`
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
        run_id: None,
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
                    context: None,
                },
                Cause {
                    kind: CauseKind::Irq,
                    name: "local_timer".into(),
                    pid: 0,
                    prio: 0,
                    ns: 12_000,
                    context: None,
                },
            ],
            trace_file: Some("spikes/001/trace.txt".into()),
            timeline: vec![],
            timeline_events: vec![],
            lanes: None,
            steal: None,
            others: None,
            timerlat: None,
        }],
        trace: None,
        loads: vec![],
        activity: None,
        scenario: None,
        profile: None,
        intervals: None,
        until: None,
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

#[test]
fn markdown_golden() {
    let out = String::from_utf8(render(&model(), Format::Markdown)).unwrap();
    assert!(!out.contains('\x1b'));
    insta::assert_snapshot!("markdown", out);
}

#[test]
fn html_golden() {
    let out = String::from_utf8(render(&model(), Format::Html)).unwrap();
    // Three plots (CCDF, histogram, per-second maximum), each with a line in each CPU's
    // colour (a histogram line breaks where buckets are empty), then the tail fit of the one
    // CPU whose tail fits (its CCDF, fitted line and band) and its quantile-quantile plot; the
    // label's markup is text, not a tag.
    assert_eq!(out.matches("<svg").count(), 5);
    let plots: Vec<&str> = out.split("<svg").skip(1).collect();
    assert!(plots[3].contains("class=\"tail-fit\"") && plots[3].contains("class=\"tail-band\""));
    assert!(plots[3].contains("CPU 0: fitted tail over the CCDF"));
    assert!(plots[4].matches("class=\"qq\"").count() >= 10);
    for plot in &plots[..3] {
        for c in &latlab_report::svg::COLORS[..2] {
            assert!(plot.contains(&format!("<polyline fill=\"none\" stroke=\"{c}\"")));
        }
    }
    assert!(out.contains("golden &lt;b&gt;") && !out.contains("golden <b>"));
    assert!(!out.contains('\x1b'));
    // Rendering twice gives the same bytes: nothing depends on the clock or on map order.
    assert_eq!(out.as_bytes(), render(&model(), Format::Html).as_slice());
    insta::assert_snapshot!("html", out);
}

/// Strings from the system (labels, task names, command lines, load commands, warnings,
/// inventory values) that carry markup, quotes, ANSI escapes or bytes that were not UTF-8
/// reach the HTML as text: no element, attribute or escape of theirs survives.
#[test]
fn html_renders_hostile_strings_as_text() {
    let evil = format!(
        "<script>alert(\"x\")</script>'\x1b[31m{}",
        String::from_utf8_lossy(b"bad\xff\xfeutf8")
    );
    let mut r = record();
    r.label = evil.clone();
    r.command_line = Some(evil.clone());
    r.warnings = vec![evil.clone()];
    r.notes = vec![evil.clone()];
    r.machine.cmdline = Some(evil.clone());
    r.config.loads = vec![evil.clone()];
    r.inventory =
        Some(serde_json::json!({ "evil": evil.clone(), "nested": { "k": evil.clone() } }));
    for s in &mut r.spikes {
        for c in &mut s.causes {
            c.name = evil.clone();
        }
    }
    let m = RunModel::new(r).unwrap();
    for f in [Format::Html, Format::Markdown, Format::Text] {
        let out = String::from_utf8(render(&m, f)).unwrap();
        assert!(
            !out.contains('\x1b'),
            "{f:?}: an ANSI escape reached the output"
        );
        // Invalid bytes (U+FFFD after a lossy conversion) stay visible, escaped.
        assert!(
            out.contains("\\u{fffd}") && !out.contains('\u{fffd}'),
            "{f:?}: the invalid bytes vanished or are raw"
        );
        if f == Format::Html {
            assert!(!out.contains("<script"), "a <script> tag reached the HTML");
            assert!(!out.contains("alert(\""), "a raw quote reached the HTML");
            assert!(out
                .contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;\\u{1b}[31mbad"));
            // Every occurrence is escaped: label (title, h1, two plot titles), command line,
            // warning, note, cmdline, load, inventory ×2, causes.
            assert!(out.matches("&lt;script&gt;").count() >= 12);
        }
    }
}
