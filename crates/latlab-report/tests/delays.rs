//! "What delays this machine": every renderer shows the run-level table of causes over the
//! traced spikes — aggregated across spikes (appearances, total, worst, share of the summed
//! spike latency), task names escaped for the format — and none shows it without causes.

use latlab_core::hist::{Histogram, Layout};
use latlab_core::model::RunModel;
use latlab_core::record::*;
use latlab_core::stats::Stats;
use latlab_report::{render, Format};

fn cause(kind: CauseKind, name: &str, pid: i64, ns: u64) -> Cause {
    Cause {
        kind,
        name: name.into(),
        pid,
        prio: 120,
        ns,
        context: None,
    }
}

fn spike(latency_ns: u64, causes: Vec<Cause>) -> SpikeRecord {
    SpikeRecord {
        cpu: 0,
        at_ns: 1_000_000_000,
        latency_ns,
        causes,
        trace_file: None,
        timeline: vec![],
        timeline_events: vec![],
        lanes: None,
        steal: None,
        others: None,
        timerlat: None,
    }
}

fn model(spikes: Vec<SpikeRecord>) -> RunModel {
    let layout = Layout::new(1_000, 300_000).unwrap();
    let mut h = Histogram::new(layout);
    for v in [20_000, 30_000, 1_000_000, 3_000_000] {
        h.record(v);
    }
    RunModel::new(RunRecord {
        schema_version: SCHEMA_VERSION,
        run_id: None,
        label: "delays".into(),
        source: Source::Latlab,
        complete: true,
        tool_version: None,
        command_line: None,
        started_at: None,
        ended_at: None,
        config: RunConfig {
            mode: "timer".into(),
            backend: "real".into(),
            cpus: vec![0],
            ..RunConfig::default()
        },
        machine: Machine::default(),
        inventory: None,
        total: Stats::default(),
        cpus: vec![CpuRecord {
            cpu: 0,
            stats: Stats::default(),
            histogram: h.to_record(),
            per_second_max_ns: vec![],
            top_spikes: vec![],
            thread: ThreadInfo::default(),
            mode: None,
        }],
        spikes,
        trace: None,
        loads: vec![],
        activity: None,
        warnings: vec![],
        notes: vec![],
        scenario: None,
        profile: None,
        intervals: None,
        until: None,
    })
    .unwrap()
}

/// Two spikes (1 ms and 3 ms): `<evil>` blocks both (600 + 2400 µs), a timer IRQ is in both
/// (10 + 30 µs), RCU softirq in one (200 µs).
fn two_spikes() -> RunModel {
    model(vec![
        spike(
            1_000_000,
            vec![
                cause(CauseKind::PreemptOff, "<evil>\x1b[31m", 42, 600_000),
                cause(CauseKind::Softirq, "RCU", 0, 200_000),
                cause(CauseKind::Irq, "local_timer", 0, 10_000),
            ],
        ),
        spike(
            3_000_000,
            vec![
                cause(CauseKind::PreemptOff, "<evil>\x1b[31m", 42, 2_400_000),
                cause(CauseKind::Irq, "local_timer", 0, 30_000),
            ],
        ),
    ])
}

#[test]
fn json_has_the_table_with_numbers() {
    let out = render(&two_spikes(), Format::Json);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let d = v["delays"].as_array().expect("delays key");
    assert_eq!(d.len(), 3);
    assert_eq!(d[0]["kind"], "preempt_off");
    assert_eq!(d[0]["name"], "<evil>\x1b[31m");
    assert_eq!(d[0]["spikes"], 2);
    assert_eq!(d[0]["total_ns"], 3_000_000);
    assert_eq!(d[0]["worst_ns"], 2_400_000);
    assert!((d[0]["share"].as_f64().unwrap() - 0.75).abs() < 1e-9);
    assert_eq!(d[1]["name"], "RCU");
    assert_eq!(d[1]["spikes"], 1);
    assert_eq!(
        (
            &d[2]["name"],
            &d[2]["spikes"],
            &d[2]["total_ns"],
            &d[2]["worst_ns"]
        ),
        (
            &serde_json::json!("local_timer"),
            &serde_json::json!(2),
            &serde_json::json!(40_000),
            &serde_json::json!(30_000)
        )
    );
}

#[test]
fn text_markdown_html_show_it_escaped() {
    let m = two_spikes();
    let text = String::from_utf8(render(&m, Format::Text)).unwrap();
    assert!(text.contains("What delays this machine"), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("preempt_off") && l.contains("75.0 %"))
        .unwrap_or_else(|| panic!("no preempt_off row with its share:\n{text}"));
    assert!(row.contains("3000 µs") && row.contains("2400 µs"), "{row}");
    assert!(!text.contains('\x1b'), "terminal escape leaked");

    let md = String::from_utf8(render(&m, Format::Markdown)).unwrap();
    assert!(md.contains("### What delays this machine"), "{md}");
    assert!(md.contains("\\<evil\\>"), "{md}");
    assert!(md.contains("75.0 %"));

    let html = String::from_utf8(render(&m, Format::Html)).unwrap();
    assert!(html.contains("<h2 id=\"what-delays-this-machine\">What delays this machine</h2>"));
    assert!(html.contains("&lt;evil&gt;"));
    assert!(!html.contains("<evil>"));
    assert!(
        html.contains("<td>2</td><td>3000 µs</td><td>2400 µs</td><td>75.0 %</td>"),
        "{html}"
    );
}

#[test]
fn no_table_without_causes() {
    let m = model(vec![spike(1_000_000, vec![])]);
    for f in [Format::Text, Format::Markdown, Format::Html] {
        let s = String::from_utf8(render(&m, f)).unwrap();
        assert!(!s.contains("What delays this machine"), "{s}");
    }
    let v: serde_json::Value = serde_json::from_slice(&render(&m, Format::Json)).unwrap();
    assert!(v.get("delays").is_none());
}

/// The text report answers first: a summary (the worst latency and where, the per-CPU table
/// with p99.9 rather than p99.999, which is "TOO FEW" on every short run), then what delays
/// this machine, and only then the per-CPU statistics.
#[test]
fn text_leads_with_the_summary_then_the_causes() {
    let text = String::from_utf8(render(&two_spikes(), Format::Text)).unwrap();
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"))
    };
    let summary = at("\nSummary\n");
    let worst = at("worst latency: 3000 µs on CPU 0");
    let largest = at("largest traced spike: #002, 3000 µs on CPU 0: preempt_off <evil>");
    let header = text[summary..]
        .lines()
        .find(|l| l.trim_start().starts_with("CPU "))
        .unwrap();
    assert!(
        header.contains("p99.9") && !header.contains("p99.999"),
        "{header}"
    );
    let causes = at("What delays this machine");
    let stats = at("\nCPU 0\n");
    assert!(summary < worst && worst < largest && largest < causes && causes < stats);
    assert!(!text.contains('\x1b'));
}

/// The HTML report of a traced run leads with a verdict (the worst latency, the top causes
/// with their shares) before the first plot, then a table of contents whose every entry is an
/// anchor of the page; the causes table comes before the plots, and each spike's row links to
/// its lanes.
#[test]
fn html_leads_with_the_verdict_and_links_its_parts() {
    let html = String::from_utf8(render(&two_spikes(), Format::Html)).unwrap();
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{html}"))
    };
    let verdict = at("<h2 id=\"verdict\">Verdict</h2>");
    let worst = at("<strong>Worst latency: 3000 µs</strong> on CPU 0");
    let top = at("<strong>75.0 %</strong> preempt_off <code>&lt;evil&gt;");
    let contents = at("<nav><h2 id=\"contents\">");
    let causes = at("<h2 id=\"what-delays-this-machine\">What delays this machine</h2>");
    let plot = at("<svg");
    assert!(verdict < worst && worst < top && top < contents && contents < causes);
    assert!(causes < plot, "the causes table comes before the plots");
    // Every contents entry points at an anchor of the page, and every section has one.
    let nav = &html[contents..html[contents..].find("</nav>").unwrap() + contents];
    let links: Vec<&str> = nav
        .split("href=\"#")
        .skip(1)
        .map(|l| &l[..l.find('"').unwrap()])
        .collect();
    assert!(links.len() >= 6, "{nav}");
    for l in &links {
        assert_eq!(html.matches(&format!(" id=\"{l}\"")).count(), 1, "{l}");
    }
    assert_eq!(
        html.matches("<h2>").count(),
        0,
        "a section without an anchor"
    );
    // Spike rows link to their lanes.
    for n in [1, 2] {
        assert!(html.contains(&format!("<td><a href=\"#spike-{n}\">{n}</a></td>")));
        assert_eq!(html.matches(&format!("id=\"spike-{n}\"")).count(), 1);
    }
}
