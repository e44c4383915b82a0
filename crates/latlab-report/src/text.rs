//! The text report: a short summary (the worst latency and where, a per-CPU table), what
//! delays this machine, then Williams' statistics block for all CPUs merged and for each CPU,
//! the largest samples, and what the run could not do.

use std::fmt::Write;

use comfy_table::{presets, CellAlignment, Table};
use latlab_core::model::RunModel;
use latlab_core::stats::{Stats, BELOW};
use latlab_core::units::{format_measured, Human};

use crate::escape::escape;
/// The percentile bounds and flags, shared by every format ([`crate::figures`]).
pub use crate::figures::{bound, pbound, short_flags, too_few};
use crate::figures::{ladder, opt, stat_rows, summary_cells};

/// Williams' statistics block.
pub fn williams_block(out: &mut String, title: &str, s: &Stats) {
    let line = |out: &mut String, k: &str, v: String| {
        let _ = writeln!(out, "  {k:.<28} {v}");
    };
    let _ = writeln!(out, "{title}");
    if s.samples == 0 {
        let _ = writeln!(out, "  no samples");
        return;
    }
    line(
        out,
        "buckets used ",
        format!(
            "{} ({} buckets to {}, log-scaled above)",
            s.buckets_used,
            Human(s.bucket_ns),
            Human(s.limit_ns)
        ),
    );
    line(out, "samples ", s.samples.to_string());
    line(out, "missed periods ", s.missed_periods.to_string());
    line(out, "minimum ", opt(s.min_ns));
    line(out, "maximum ", opt(s.max_ns));
    let est = if s.exact_moments { "" } else { " (estimate)" };
    line(out, "mean ", format!("{}{est}", opt(s.mean_ns)));
    line(out, "median ", pbound("p50", s.median_ns, s));
    if let Some(m) = s.mode_ns {
        line(
            out,
            "mode ",
            format!(
                "{} – {} ({} samples)",
                Human(m),
                Human(m + s.bucket_ns),
                s.mode_count
            ),
        );
    }
    if let Some(v) = s.variance_ns2 {
        line(out, "variance ", format!("{:.1} µs²{est}", v / 1e6));
    }
    line(
        out,
        "standard deviation ",
        format!("{}{est}", opt(s.stddev_ns)),
    );
    for (k, t) in BELOW {
        let f = s.below.get(k).copied().unwrap_or(0.0);
        line(
            out,
            &format!("% of samples < {} ms ", t as f64 / 1e6),
            format!("{:.4}", f * 100.0),
        );
    }
    if let Some(max) = s.max_ns {
        line(
            out,
            "100% of samples < ",
            Human(max.saturating_add(s.bucket_ns)).to_string(),
        );
    }
    for (label, b) in ladder(s) {
        if label == "p50" || label == "p90" {
            continue;
        }
        let pct = &label[1..];
        let name = if label == "p99.999" {
            format!("{pct}% (five nines) below ")
        } else {
            format!("{pct}% below ")
        };
        line(out, &name, b);
    }
    if s.unknown_above > 0 {
        line(
            out,
            "above the limit ",
            format!(
                "{} samples, value unknown (> {})",
                s.unknown_above,
                Human(s.limit_ns)
            ),
        );
    }
}

/// The one-table summary: a row per CPU and one for all CPUs.
pub fn cpu_table(m: &RunModel) -> String {
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    t.set_header(std::iter::once("CPU").chain(crate::figures::SUMMARY_HEADER));
    for (name, s) in stat_rows(m, |c| c.to_string(), "all") {
        t.add_row(std::iter::once(name).chain(summary_cells(s)));
    }
    for i in 1..8 {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string()
}

/// One-paragraph heading: what was measured, how.
pub fn heading(m: &RunModel) -> String {
    let r = &m.record;
    let c = &r.config;
    let mut s = format!("latlab report: {}", escape(&r.label));
    if !r.complete {
        s.push_str(" (INCOMPLETE: last checkpoint of a run that did not finish)");
    }
    s.push('\n');
    let mut parts = vec![format!("source {}", r.source.as_str())];
    if c.backend != "import" {
        parts.push(format!("{} backend", escape(&c.backend)));
    }
    if let Some(k) = &r.machine.kernel_release {
        parts.push(format!("kernel {}", escape(k)));
    }
    if let Some(i) = c.interval_ns {
        parts.push(format!("interval {}", Human(i)));
    }
    if let Some(d) = c.measured_ns.or(c.duration_ns) {
        parts.push(if c.mode == "none" {
            // `latlab profile --no-measure`: the profile alone.
            format!("profiled {}, no latency measured", format_measured(d))
        } else {
            format!("measured {}", format_measured(d))
        });
    }
    if let (Some(p), Some(pr)) = (&c.policy, c.priority) {
        parts.push(format!("{} {pr}", escape(p)));
    }
    if !c.loads.is_empty() {
        parts.push(format!("loads {}", escape(&c.loads.join(", "))));
    }
    if let Some(t) = &r.started_at {
        parts.push(format!("started {}", escape(t)));
    }
    let _ = writeln!(s, "  {}", parts.join(", "));
    if let Some(cl) = &r.command_line {
        let _ = writeln!(s, "  command: {}", escape(cl));
    }
    s
}

/// Spikes shown with their timeline in the text report (the largest).
const TIMELINES: usize = 10;

/// "What delays this machine": every cause over the run's traced spikes (kind + name), the
/// spikes it appeared in, total and worst time, share of the summed spike latency.
fn delays_table(out: &mut String, spikes: &[latlab_core::record::SpikeRecord]) {
    use latlab_core::trace::attribution::kind_str;
    let rows = latlab_core::trace::summarize(spikes);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nWhat delays this machine (causes over {} traced spikes)",
        spikes.len()
    );
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    t.set_header(["kind", "name", "spikes", "total", "worst", "share"]);
    for r in &rows {
        t.add_row([
            kind_str(r.kind).to_string(),
            escape(&r.name),
            r.spikes.to_string(),
            Human(r.total_ns).to_string(),
            Human(r.worst_ns).to_string(),
            format!("{:.1} %", 100.0 * r.share),
        ]);
    }
    for i in 2..6 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{t}");
}

/// The short summary the report opens with: the worst latency and where, the largest traced
/// spike's causes, the per-CPU table (p99.9, not p99.999) and the flags of percentiles resting
/// on too few samples.
fn summary(out: &mut String, m: &RunModel) {
    out.push_str("Summary\n");
    if let Some((cpu, lat, at)) = crate::figures::worst(m) {
        let when = at
            .map(|at| {
                format!(
                    " at CLOCK_MONOTONIC {}.{:09} s",
                    at / 1_000_000_000,
                    at % 1_000_000_000
                )
            })
            .unwrap_or_default();
        let _ = writeln!(out, "  worst latency: {} on CPU {cpu}{when}", Human(lat));
    }
    if let Some((i, s)) = crate::figures::largest_spike(m) {
        let causes = crate::figures::cause_list(s, 3);
        let _ = writeln!(
            out,
            "  largest traced spike: #{:03}, {} on CPU {}: {}",
            i + 1,
            Human(s.latency_ns),
            s.cpu,
            if causes.is_empty() {
                "not attributed".to_string()
            } else {
                escape(&causes.join(", "))
            }
        );
    }
    out.push('\n');
    out.push_str(&cpu_table(m));
    out.push('\n');
    let flags = short_flags(m);
    if !flags.is_empty() {
        out.push_str("\nBefore trusting a percentile:\n");
        for f in &flags {
            let _ = writeln!(out, "  ! {f}");
        }
    }
}

pub fn render(m: &RunModel) -> Vec<u8> {
    let r = &m.record;
    let mut out = heading(m);
    out.push('\n');
    summary(&mut out, m);
    // timerlat's contexts side by side, under the summary they break down.
    table_blocks(&mut out, crate::contexts::tables(m));
    // What delays this machine comes right after the summary, before the statistics.
    delays_table(&mut out, &r.spikes);
    // The scheduler profile (`latlab profile`) is an answer too: before the statistics.
    if let Some(p) = &r.profile {
        table_blocks(
            &mut out,
            crate::profile_tables::tables(p, crate::profile_tables::TEXT_WAITS),
        );
    }
    out.push('\n');
    let title = if m.cpus.len() > 1 {
        "All CPUs".to_string()
    } else {
        m.cpus
            .first()
            .map(|c| format!("CPU {}", c.cpu))
            .unwrap_or_else(|| "No CPU".into())
    };
    williams_block(&mut out, &title, &m.total);
    if m.cpus.len() > 1 {
        for c in &m.cpus {
            out.push('\n');
            williams_block(&mut out, &format!("CPU {}", c.cpu), &c.stats);
        }
    }
    tail_section(&mut out, m);
    mode_blocks(&mut out, m);
    let mut top: Vec<(u32, u64, u64)> = r
        .cpus
        .iter()
        .flat_map(|c| c.top_spikes.iter().map(|s| (c.cpu, s.at_ns, s.latency_ns)))
        .collect();
    top.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
    if !top.is_empty() {
        let _ = writeln!(out, "\nLargest samples");
        for (cpu, at, lat) in top.iter().take(10) {
            let since = r
                .cpus
                .iter()
                .find(|c| c.cpu == *cpu)
                .and(r.config.measured_ns)
                .map(|_| String::new())
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  CPU {cpu}: {} at CLOCK_MONOTONIC {}.{:09} s{since}",
                Human(*lat),
                at / 1_000_000_000,
                at % 1_000_000_000
            );
        }
    }
    if !r.spikes.is_empty() {
        let line = |i: usize, s: &latlab_core::record::SpikeRecord| {
            let causes: Vec<String> = s
                .causes
                .iter()
                .map(|c| {
                    let kind = serde_json::to_value(c.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    format!(
                        "{kind} {} {}{}{}",
                        escape(&c.name),
                        Human(c.ns),
                        crate::figures::cause_context(c),
                        crate::figures::cause_evidence(s, c)
                    )
                })
                .collect();
            format!(
                "  #{:03} CPU {} {}{}: {}",
                i + 1,
                s.cpu,
                Human(s.latency_ns),
                crate::figures::spike_facts(s),
                if causes.is_empty() {
                    "not attributed".into()
                } else {
                    causes.join(", ")
                }
            )
        };
        let _ = writeln!(out, "\nTraced spikes");
        for (i, s) in r.spikes.iter().enumerate() {
            let _ = writeln!(out, "{}", line(i, s));
        }
        // The largest with their timelines (every spike's is in its spikes/NNN/analysis.txt).
        let mut by_lat: Vec<usize> = (0..r.spikes.len())
            .filter(|&i| {
                let s = &r.spikes[i];
                !(s.timeline.is_empty() && s.timeline_events.is_empty())
            })
            .collect();
        by_lat.sort_by_key(|&i| std::cmp::Reverse(r.spikes[i].latency_ns));
        by_lat.truncate(TIMELINES);
        if !by_lat.is_empty() {
            let _ = writeln!(
                out,
                "\nTimelines of the largest traced spikes (µs from the intended wake-up)"
            );
            for i in by_lat {
                let s = &r.spikes[i];
                let _ = writeln!(out, "{}", line(i, s));
                for l in crate::timeline::lines(s) {
                    let _ = writeln!(out, "      {}", escape(&l));
                }
            }
        }
    }
    if !r.loads.is_empty() {
        let _ = writeln!(out, "\nLoads");
        for l in &r.loads {
            let ops = l.ops.map(|o| format!(", {o:.1} ops/s")).unwrap_or_default();
            let _ = writeln!(out, "  {}: {}{ops}", escape(&l.profile), escape(&l.command));
        }
    }
    if let Some(f) = crate::check::run_findings(r) {
        let _ = writeln!(
            out,
            "\nMachine check (latlab check on the run's inventory: {} findings)",
            f.len()
        );
        for l in crate::check::finding_lines(&f) {
            let _ = writeln!(out, "  {}", escape(&l));
        }
    }
    for (title, lines) in [("Warnings", &r.warnings), ("Notes", &r.notes)] {
        if !lines.is_empty() {
            let _ = writeln!(out, "\n{title}");
            for w in lines {
                let _ = writeln!(out, "  {}", escape(w));
            }
        }
    }
    out.into_bytes()
}

/// The tail estimates ([`crate::tail`]): a table, then why an estimate is missing.
fn tail_section(out: &mut String, m: &RunModel) {
    if m.total.samples == 0 {
        return;
    }
    let est = crate::tail::estimates(m);
    let (header, rows, notes) = crate::tail::table(&est);
    let _ = writeln!(out, "\n{}", crate::tail::TITLE);
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    t.set_header(header.clone());
    for r in rows {
        t.add_row(r);
    }
    for i in 1..header.len() {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{t}");
    for n in notes {
        let _ = writeln!(out, "  {}", escape(&n));
    }
}

/// The mode's and the scenario's tables (nothing for a timer run).
fn mode_blocks(out: &mut String, m: &RunModel) {
    // The contexts' table is under the summary already.
    let mut t = crate::modes::tables(m);
    t.extend(crate::scenario::tables(m));
    table_blocks(out, t);
}

/// Tables of plain cells, each under its title, with its note below.
fn table_blocks(out: &mut String, tables: Vec<crate::tables::Table>) {
    for t in tables {
        let _ = writeln!(out, "\n{}", escape(&t.title));
        let mut tab = Table::new();
        tab.load_style(presets::NOTHING);
        tab.set_header(t.header.iter().map(|h| escape(h)));
        for row in &t.rows {
            tab.add_row(row.iter().map(|c| escape(c)));
        }
        for i in 1..t.header.len() {
            if let Some(col) = tab.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
        let _ = writeln!(out, "{tab}");
        if let Some(n) = &t.note {
            let _ = writeln!(out, "  {}", escape(n));
        }
    }
}
