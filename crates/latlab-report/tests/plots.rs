//! The plots of issue 19 part 5, by their content: the CCDF (exact shares from the bucket
//! counts, per-series maximum in the legend, p99/p99.9/max markers, the `--max-latency` line,
//! an "all CPUs" series, 16 series told apart by colour and dash) in the report and compare.

use std::collections::HashSet;

use latlab_core::hist::{HistParts, Histogram, Layout};
use latlab_core::model::RunModel;
use latlab_core::record::*;
use latlab_core::stats::Stats;
use latlab_core::units::Human;
use latlab_report::compare::{render as compare_render, CompareFormat};
use latlab_report::svg::{ccdf, ccdf_points};
use latlab_report::{render, Format};

fn hist(vals: impl IntoIterator<Item = u64>) -> Histogram {
    let mut h = Histogram::new(Layout::new(1_000, 1_000_000).unwrap());
    for v in vals {
        h.record(v);
    }
    h
}

/// `n` samples on `cpus` CPUs: 10 µs, 1 % at 50 µs, 0.1 % at 200 µs, one at `max + cpu`.
fn record(label: &str, cpus: u32, n: u64, max_ns: u64, max_latency: Option<u64>) -> RunRecord {
    let cpus = (0..cpus)
        .map(|cpu| {
            let h = hist((0..n).map(|i| match i {
                i if i == n / 2 => max_ns + cpu as u64 * 1_000,
                i if i % 1000 == 7 => 200_000,
                i if i % 100 == 3 => 50_000,
                _ => 10_000 + (i % 5) * 1_000,
            }));
            CpuRecord {
                cpu,
                stats: Stats::default(),
                histogram: h.to_record(),
                per_second_max_ns: vec![],
                top_spikes: vec![],
                thread: ThreadInfo::default(),
                mode: None,
            }
        })
        .collect();
    let mut r = RunRecord {
        schema_version: SCHEMA_VERSION,
        run_id: None,
        label: label.into(),
        source: Source::Latlab,
        complete: true,
        tool_version: None,
        command_line: None,
        started_at: None,
        ended_at: None,
        config: RunConfig {
            mode: "timer".into(),
            backend: "sim".into(),
            max_latency_ns: max_latency,
            ..RunConfig::default()
        },
        machine: Machine::default(),
        inventory: None,
        total: Stats::default(),
        cpus,
        spikes: vec![],
        trace: None,
        loads: vec![],
        activity: None,
        scenario: None,
        intervals: None,
        until: None,
        profile: None,
        warnings: vec![],
        notes: vec![],
    };
    r.refresh().unwrap();
    r
}

/// The text of one `<svg>` whose title contains `what`.
fn plot<'a>(html: &'a str, what: &str) -> &'a str {
    html.split("<svg")
        .find(|p| p.split("</title>").next().unwrap_or("").contains(what))
        .unwrap_or_else(|| panic!("no plot titled {what:?}"))
}

#[test]
fn ccdf_points_are_exact_shares_from_the_buckets() {
    let h = hist([3_500, 10_000, 10_400, 10_900, 47_000, 47_000, 900_123]);
    let p = ccdf_points(&h);
    // Starts at the minimum with every sample at or above it; ends at the maximum.
    assert_eq!(p.first().copied(), Some((3_500.0, 1.0)));
    assert_eq!(p.last().unwrap().0, 900_123.0);
    assert_eq!(p.last().unwrap().1, 1.0 / 7.0);
    // At the 10 µs bucket: 6 of 7 samples are ≥ 10 µs; at 47 µs: 3 of 7. Exact, not resampled.
    assert!(p.contains(&(10_000.0, 6.0 / 7.0)));
    assert!(p.contains(&(47_000.0, 3.0 / 7.0)));
    // Monotone: the share never rises with latency.
    assert!(p.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 >= w[1].1));
    assert!(ccdf_points(&hist([])).is_empty());
}

#[test]
fn ccdf_marks_p99_p999_and_max_and_the_limit_line() {
    let h = hist((0..10_000u64).map(|i| {
        if i == 5 {
            700_000
        } else {
            10_000 + i % 90 * 1000
        }
    }));
    let s = ccdf("t", &[("CPU 0".into(), &h)], &[500_000]);
    assert_eq!(s.matches("class=\"m-p99\"").count(), 1);
    assert_eq!(s.matches("class=\"m-p999\"").count(), 1);
    assert_eq!(s.matches("class=\"m-max\"").count(), 1);
    assert!(s.contains(&format!("CPU 0 (max {})", Human(700_000))));
    assert!(s.contains("class=\"limit\"") && s.contains("--max-latency 500 µs"));
    // 50 samples: no sample above p99.9's rank, so no p99.9 marker claims one.
    let few = hist((0..50u64).map(|i| 10_000 + i * 1000));
    let s = ccdf("t", &[("a".into(), &few)], &[]);
    assert_eq!(s.matches("class=\"m-p999\"").count(), 0);
    assert_eq!(s.matches("class=\"m-max\"").count(), 1);
    assert!(!s.contains("class=\"limit\""));
}

#[test]
fn sixteen_series_get_sixteen_distinct_colour_dash_pairs() {
    let hs: Vec<Histogram> = (0..16u64).map(|i| hist([10_000 + i * 1_000])).collect();
    let series: Vec<(String, &Histogram)> = hs
        .iter()
        .enumerate()
        .map(|(i, h)| (format!("CPU {i}"), h))
        .collect();
    let s = ccdf("t", &series, &[]);
    let pairs: Vec<(String, String)> = s
        .split("<polyline ")
        .skip(1)
        .map(|p| {
            let p = p.split('>').next().unwrap();
            let attr = |k: &str| {
                p.split(&format!("{k}=\""))
                    .nth(1)
                    .map(|v| v.split('"').next().unwrap().to_string())
                    .unwrap_or_default()
            };
            (attr("stroke"), attr("stroke-dasharray"))
        })
        .collect();
    assert_eq!(pairs.len(), 16);
    assert_eq!(pairs.iter().collect::<HashSet<_>>().len(), 16);
    // The legend shows each series with its own pair too.
    for (c, d) in &pairs {
        let dash = if d.is_empty() {
            String::new()
        } else {
            format!(" stroke-dasharray=\"{d}\"")
        };
        assert!(s.contains(&format!("stroke=\"{c}\"{dash} stroke-width=\"3\"")));
    }
}

#[test]
fn report_has_a_ccdf_with_every_cpu_all_cpus_and_the_max_latency_line() {
    let m = RunModel::new(record("r", 3, 20_000, 800_000, Some(300_000))).unwrap();
    let html = String::from_utf8(render(&m, Format::Html)).unwrap();
    let p = plot(&html, "CCDF");
    for cpu in 0..3u64 {
        let max = m.cpus[cpu as usize].hist.max().unwrap();
        assert_eq!(max, 800_000 + cpu * 1_000);
        assert!(p.contains(&format!("CPU {cpu} (max {})", Human(max))));
    }
    assert!(p.contains(&format!("all CPUs (max {})", Human(802_000))));
    assert_eq!(p.matches("<polyline").count(), 4);
    assert!(p.contains("--max-latency 300 µs"));
    // The CCDF comes before the raw-count histogram.
    assert!(html.find("CCDF").unwrap() < html.find("samples per bucket").unwrap());
    // Without --max-latency there is no line.
    let m = RunModel::new(record("r", 1, 2_000, 800_000, None)).unwrap();
    let html = String::from_utf8(render(&m, Format::Html)).unwrap();
    let p = plot(&html, "CCDF");
    assert!(!p.contains("max-latency") && !p.contains("all CPUs"));
}

#[test]
fn compare_draws_ccdfs_first_so_runs_of_different_lengths_compare() {
    let runs = vec![
        RunModel::new(record("short", 1, 2_000, 300_000, None)).unwrap(),
        RunModel::new(record("long", 2, 200_000, 900_000, Some(400_000))).unwrap(),
    ];
    let html = String::from_utf8(compare_render(&runs, CompareFormat::Html)).unwrap();
    let p = plot(&html, "CCDF");
    assert!(html.find("CCDF").unwrap() < html.find("samples per bucket").unwrap());
    assert!(p.contains(&format!("short (max {})", Human(300_000))));
    assert!(p.contains(&format!("long (max {})", Human(901_000))));
    assert!(p.contains("--max-latency 400 µs"));
    // Both runs start at share 1 at their minimum: the same y, whatever their length.
    let first_y = |p: &str, i: usize| -> String {
        let pts = p
            .split("points=\"")
            .nth(i)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        pts.split_whitespace()
            .next()
            .unwrap()
            .split(',')
            .nth(1)
            .unwrap()
            .to_string()
    };
    assert_eq!(first_y(p, 1), first_y(p, 2));
}

/// Percentiles resting on too few samples are flagged in the single-run formats by
/// `compare`'s rule (≤ 10 samples at or above the rank): 500 samples are too few for p99.9.
#[test]
fn single_run_reports_flag_percentiles_resting_on_too_few_samples() {
    let few = RunModel::new(record("few", 1, 500, 300_000, None)).unwrap();
    let many = RunModel::new(record("many", 2, 200_000, 300_000, None)).unwrap();
    let p999 = "too short for p99.9: CPU 0 (fewer than 10 samples above it; needs ≥ 10000 samples)";
    for f in [Format::Text, Format::Markdown, Format::Html] {
        let o = String::from_utf8(render(&few, f)).unwrap();
        assert!(o.contains(p999), "{f:?}: no p99.9 flag:\n{o}");
        // p99 rests on 6 samples of 500: flagged and marked in the tables too.
        assert!(o.contains("too short for p99: CPU 0"), "{f:?}");
        assert!(o.contains("TOO FEW"), "{f:?}");
        let o = String::from_utf8(render(&many, f)).unwrap();
        assert!(
            !o.contains("too short for p99.9:"),
            "{f:?}: 200000 samples flagged"
        );
        assert!(!o.contains("too short for p99:"), "{f:?}");
        assert!(
            o.contains("too short for p99.999: CPU 0, CPU 1, all CPUs"),
            "{f:?}: p99.999 of 200000 samples not flagged"
        );
    }
    // The text table marks exactly the flagged cells: p99 (6 samples above) but not the max.
    let t = String::from_utf8(render(&few, Format::Text)).unwrap();
    assert!(
        t.contains("  99% below .................. ≤ 51 µs TOO FEW"),
        "{t}"
    );
}

/// A run that recorded the machine's inventory shows `check`'s findings, and the machine as a
/// formatted table (CPU lists as `0-3`, `check`'s inventory rows), never raw JSON.
#[test]
fn report_shows_check_findings_and_a_formatted_machine_table() {
    use latlab_core::inventory::Inventory;
    let mut inv = Inventory::default();
    inv.memory.thp_enabled = Some("always".into());
    inv.cmdline = Some("quiet <script>x</script>".into());
    let mut r = record("m", 1, 1_000, 300_000, None);
    r.machine.cpus_online = vec![0, 1, 2, 3];
    r.machine.hostname = Some("box".into());
    r.inventory = Some(serde_json::to_value(&inv).unwrap());
    let m = RunModel::new(r).unwrap();
    let f = latlab_core::findings::findings(&inv);
    let thp = f.iter().find(|x| x.title.contains("huge pages")).unwrap();

    let html = String::from_utf8(render(&m, Format::Html)).unwrap();
    // The verdict, before the first plot, names every bad finding and counts the warnings.
    let bad: Vec<_> = f
        .iter()
        .filter(|x| x.severity == latlab_core::findings::Severity::Bad)
        .collect();
    let verdict = &html[html.find("<h2 id=\"verdict\">").expect("no verdict")
        ..html.find("<svg").expect("no plot")];
    assert!(verdict.contains(&format!(
        "<a href=\"#machine-check\">Machine check</a>: {} bad, {} warn",
        bad.len(),
        f.iter()
            .filter(|x| x.severity == latlab_core::findings::Severity::Warn)
            .count()
    )));
    for x in &bad {
        assert!(verdict.contains(&format!("({})</span>", x.id)), "{verdict}");
    }
    let machine = &html[html
        .find("<h2 id=\"machine-check\">Machine check</h2>")
        .expect("no Machine check")..];
    assert!(machine.contains(&format!(
        "{} bad, {} warn",
        f.iter()
            .filter(|x| x.severity == latlab_core::findings::Severity::Bad)
            .count(),
        f.iter()
            .filter(|x| x.severity == latlab_core::findings::Severity::Warn)
            .count()
    )));
    assert!(
        machine.contains(&format!("({})", thp.id))
            && machine.contains("transparent huge pages: always")
    );
    assert!(machine.contains("<th class=\"k\">CPUs online</th><td class=\"k\">0-3</td>"));
    assert!(machine
        .contains("<th class=\"k\">thp / ksm</th><td class=\"k\">enabled always, defrag unknown"));
    assert!(
        !machine.contains("[0,1,2,3]") && !machine.contains("{\""),
        "raw JSON in the machine table"
    );
    assert!(
        machine.contains("quiet &lt;script&gt;x&lt;/script&gt;") && !machine.contains("<script>")
    );

    for f in [Format::Text, Format::Markdown] {
        let o = String::from_utf8(render(&m, f)).unwrap();
        assert!(o.contains("Machine check"), "{f:?}");
        assert!(
            o.contains(&thp.id.replace('_', "\\_")) || o.contains(&thp.id),
            "{f:?}: {o}"
        );
    }
    let t = String::from_utf8(render(&m, Format::Text)).unwrap();
    assert!(
        t.contains(&format!(
            "  [warn] transparent huge pages: always ({})",
            thp.id
        )),
        "{t}"
    );

    // No inventory: no findings section.
    let plain = RunModel::new(record("p", 1, 1_000, 300_000, None)).unwrap();
    for f in [Format::Text, Format::Markdown, Format::Html] {
        let o = String::from_utf8(render(&plain, f)).unwrap();
        assert!(!o.contains("Machine check"), "{f:?}");
    }
}

/// A 6-hour run's per-minute histograms drawn as a heat map with an h:mm time axis; the
/// per-second maximum of such a run is labelled in h:mm too, not in seconds 0–21600.
#[test]
fn long_runs_get_a_heat_map_and_h_mm_time_axes() {
    use latlab_core::intervals::IntervalHistograms;
    use latlab_report::svg::{heatmap, per_second_max};
    let layout = Layout::new(1_000, 1_000_000).unwrap();
    // 360 minutes: 1000 samples at 10 µs each minute; minute 200 also has 5 at 500 µs.
    let mut iv = IntervalHistograms {
        interval_ns: 60_000_000_000,
        intervals: vec![vec![[10, 1000]]; 360],
    };
    iv.intervals[200].push([500, 5]);
    iv.intervals[300] = vec![]; // a minute without samples
    iv.intervals[301] = vec![[u64::MAX, 7]]; // out of the layout: ignored, no panic
    let s = heatmap("t <x>", &iv, layout);
    assert!(s.contains("t &lt;x&gt;"));
    // 360 intervals fit 270 columns: two minutes per column.
    assert!(s.contains("column: 2m"), "{s}");
    for l in ["0:00", "1:00", "2:00", "3:00", "4:00", "5:00", "6:00"] {
        assert!(s.contains(&format!(">{l}</text>")), "no {l} tick");
    }
    let cells: Vec<&str> = s
        .split("<rect ")
        .filter(|r| r.contains("height=\"5.00\"") || r.contains("height=\"5.05\""))
        .collect();
    // Cells in every column but the one of minutes 300–301 (no known samples); the column of
    // minute 200 has cells at two heights (10 µs and 500 µs), the others at one.
    let x = |r: &str| r.split('"').nth(1).unwrap().to_string();
    let y = |r: &str| r.split('"').nth(3).unwrap().to_string();
    let xs: HashSet<String> = cells.iter().map(|r| x(r)).collect();
    assert_eq!(xs.len(), 179);
    let heights = |col: &str| -> HashSet<String> {
        cells.iter().filter(|r| x(r) == col).map(|r| y(r)).collect()
    };
    let col100 = format!("{:.2}", 70.0 + 100.0 * 3.0);
    let col99 = format!("{:.2}", 70.0 + 99.0 * 3.0);
    assert!(heights(&col100).len() > heights(&col99).len(), "{col100}");
    // The largest cell (2000 samples) is the darkest colour; the 5 samples are paler.
    assert!(s.contains("fill=\"#49006a\""));
    let e = heatmap("t", &IntervalHistograms::default(), layout);
    assert!(e.contains("no per-interval data"));

    let secs = vec![Some(10_000u64); 6 * 3600];
    let p = per_second_max("t", &[("CPU 0".into(), &secs)]);
    assert!(
        p.contains(">1:00</text>") && p.contains(">5:00</text>"),
        "{p}"
    );
    assert!(!p.contains(">3600</text>") && !p.contains(">20000</text>"));

    // The p99 and max bands of the same minutes: minute 200's 5 samples at 500 µs are 0.5 %
    // of it, so its max rises and its p99 does not; empty and damaged minutes leave gaps.
    let (p99, max) = latlab_report::html::interval_bands(&iv, layout);
    assert_eq!(p99.len(), 360);
    assert_eq!(
        (p99[0], max[0]),
        (Some(layout.upper(10)), Some(layout.upper(10)))
    );
    assert_eq!(
        (p99[200], max[200]),
        (Some(layout.upper(10)), Some(layout.upper(500)))
    );
    assert_eq!(
        (p99[300], max[300], p99[301], max[301]),
        (None, None, None, None)
    );
    // 1000 samples of which 11 are high: the sample of rank 990 is high, so p99 is.
    let hi = IntervalHistograms {
        interval_ns: 60_000_000_000,
        intervals: vec![vec![[10, 989], [500, 11]]],
    };
    assert_eq!(
        latlab_report::html::interval_bands(&hi, layout).0,
        vec![Some(layout.upper(500))]
    );
    let b = latlab_report::svg::over_time(
        "bands",
        "latency",
        &[("max".into(), &max[..]), ("p99".into(), &p99[..])],
        60.0,
    );
    assert!(
        b.contains(">1:00</text>") && b.contains(">5:00</text>"),
        "{b}"
    );
    assert_eq!(b.matches("<polyline").count(), 2);
}

/// Imported overflows (values unknown, at or above the limit) count in every share and end
/// the curve at the limit: it never rises, and nothing is drawn where shares are unknown.
#[test]
fn ccdf_with_unknown_overflows_ends_at_the_limit_and_never_rises() {
    let layout = Layout::new(1_000, 100_000).unwrap();
    let mut counts = vec![0u64; layout.len()];
    counts[10] = 5; // 10 µs
    counts[50] = 1; // 50 µs
    let h = Histogram::from_parts(HistParts {
        layout,
        counts,
        min: 10_000,
        max: 3_237_000,
        sum: 0,
        sumsq: 0,
        unknown_above: 2,
        exact_moments: false,
    })
    .unwrap();
    let p = ccdf_points(&h);
    assert_eq!(
        p,
        vec![
            (10_000.0, 1.0),
            (50_000.0, 3.0 / 8.0),
            (100_000.0, 2.0 / 8.0)
        ]
    );
    assert!(p.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 >= w[1].1));
}
