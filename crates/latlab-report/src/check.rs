//! `latlab check` output: the findings worst first (each with evidence, why and fix), then the
//! inventory, as text; or one JSON document `{"findings": [...], "inventory": {...}}` with the
//! findings' stable ids.
//!
//! Strings read from the machine (command line, IRQ and process names, file contents) can hold
//! anything, so the text output escapes them ([`escape`]) before they reach a terminal.

use std::fmt::Write;

use latlab_core::cpulist::format_cpu_list;
use latlab_core::findings::{Finding, Severity};
use latlab_core::inventory::Inventory;

use crate::escape::escape;

fn o<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map(|v| escape(&v.to_string()))
        .unwrap_or_else(|| "unknown".into())
}

fn yn(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

fn cpus(v: &[u32]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        format_cpu_list(v)
    }
}

/// The text report.
pub fn render_text(inv: &Inventory, findings: &[Finding]) -> Vec<u8> {
    let mut s = String::new();
    let count = |sev| findings.iter().filter(|f| f.severity == sev).count();
    let _ = writeln!(
        s,
        "latlab check: {} on Linux {}",
        o(&inv.kernel.hostname),
        o(&inv.kernel.release)
    );
    let _ = writeln!(
        s,
        "{} bad, {} warn, {} info\n",
        count(Severity::Bad),
        count(Severity::Warn),
        count(Severity::Info)
    );
    for f in findings {
        let _ = writeln!(
            s,
            "[{:<4}] {}  ({})",
            f.severity.as_str(),
            escape(&f.title),
            escape(&f.id)
        );
        let _ = writeln!(s, "       evidence: {}", escape(&f.evidence));
        let _ = writeln!(s, "       why:      {}", escape(&f.why));
        let _ = writeln!(s, "       fix:      {}", escape(&f.fix));
    }
    let _ = writeln!(s, "\nInventory");
    // Escaping each whole value is the same as escaping its parts: escaping is per character.
    for (k, v) in inventory_rows(inv) {
        let _ = writeln!(s, "  {:<16}{}", escape(&k), escape(&v));
    }
    s.into_bytes()
}

/// The machine inventory as `(name, value)` rows, in `check`'s order and words (the text of
/// `latlab check` and the Machine table of the HTML report). Values are untrusted text, not
/// escaped: each renderer escapes them for its format.
pub fn inventory_rows(inv: &Inventory) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    kernel_rows(&mut rows, inv);
    cpu_rows(&mut rows, inv);
    memory_rows(&mut rows, inv);
    sched_rows(&mut rows, inv);
    system_rows(&mut rows, inv);
    rows
}

/// The inventory's `(name, value)` rows as they are built.
type Rows = Vec<(String, String)>;

/// Untrusted text as a value: not escaped here (each renderer escapes).
fn plain(s: &str) -> String {
    s.to_string()
}

/// A value or "unknown", not escaped.
fn ro<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The kernel: release, preemption model, HZ, command line, clock source.
fn kernel_rows(rows: &mut Rows, inv: &Inventory) {
    let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
    let k = &inv.kernel;
    row(
        "kernel",
        format!("{} {} ({})", ro(&k.release), ro(&k.version), ro(&k.arch)),
    );
    let p = &inv.preemption;
    row(
        "preemption",
        format!(
            "{}{} (from {})",
            ro(&p.model),
            if p.dynamic { ", PREEMPT_DYNAMIC" } else { "" },
            ro(&p.source)
        ),
    );
    if let Some(hz) = k.config.get("CONFIG_HZ") {
        row("HZ", plain(hz));
    }
    row("cmdline", ro(&inv.cmdline));
    if !inv.cmdline_params.is_empty() {
        row(
            "  relevant",
            inv.cmdline_params
                .iter()
                .map(|(k, v)| {
                    if v.is_empty() {
                        plain(k)
                    } else {
                        plain(&format!("{k}={v}"))
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    row(
        "clocksource",
        format!(
            "{} (available: {})",
            ro(&inv.clocksource.current),
            plain(&inv.clocksource.available.join(" "))
        ),
    );
}

/// The CPUs: online, isolated, SMT, frequency scaling, boost, idle states.
fn cpu_rows(rows: &mut Rows, inv: &Inventory) {
    let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
    let c = &inv.cpus;
    row(
        "cpus",
        format!(
            "online {}, isolated {}, nohz_full {}, model {}",
            cpus(&c.online),
            cpus(&c.isolated),
            cpus(&c.nohz_full),
            ro(&c.model)
        ),
    );
    row(
        "smt",
        format!(
            "control {}, active {}",
            ro(&c.smt_control),
            yn(c.smt_active)
        ),
    );
    if inv.cpufreq.is_empty() {
        row("cpufreq", "none (no cpufreq driver)".into());
    }
    for (cpu, f) in &inv.cpufreq {
        row(
            &format!("cpufreq cpu{cpu}"),
            format!(
                "{} {}, {}–{} kHz (hw max {}){}",
                ro(&f.driver),
                ro(&f.governor),
                ro(&f.min_khz),
                ro(&f.max_khz),
                ro(&f.hw_max_khz),
                f.epp
                    .as_ref()
                    .map(|e| format!(", epp {}", plain(e)))
                    .unwrap_or_default()
            ),
        );
    }
    row("boost", yn(inv.boost).into());
    row(
        "cpuidle",
        format!(
            "driver {}, governor {}",
            ro(&inv.cpuidle.driver),
            ro(&inv.cpuidle.governor)
        ),
    );
    for (cpu, states) in &inv.cpuidle.states {
        row(
            &format!("  cpu{cpu}"),
            states
                .iter()
                .map(|st| {
                    format!(
                        "{} {}µs{}",
                        plain(&st.name),
                        ro(&st.latency_us),
                        if st.enabled { "" } else { " (disabled)" }
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
}

/// Memory: NUMA nodes, swap, transparent huge pages and KSM.
fn memory_rows(rows: &mut Rows, inv: &Inventory) {
    let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
    let m = &inv.memory;
    row(
        "memory",
        format!(
            "{} kB total, {} kB available, NUMA nodes {}",
            ro(&m.total_kb),
            ro(&m.available_kb),
            if m.numa_nodes.is_empty() {
                "unknown".to_string()
            } else {
                m.numa_nodes
                    .iter()
                    .map(|(n, c)| format!("{n} (CPUs {})", cpus(c)))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
    );
    row(
        "swap",
        format!(
            "{} kB, areas: {}, swappiness {}",
            ro(&m.swap_total_kb),
            if m.swaps.is_empty() {
                "none".into()
            } else {
                plain(&m.swaps.join(" "))
            },
            ro(&m.swappiness)
        ),
    );
    row(
        "thp / ksm",
        format!(
            "enabled {}, defrag {}, ksm run {}",
            ro(&m.thp_enabled),
            ro(&m.thp_defrag),
            ro(&m.ksm_run)
        ),
    );
}

/// The scheduler and interrupts: RT throttling, timers, IRQ affinity, cpu_dma_latency.
fn sched_rows(rows: &mut Rows, inv: &Inventory) {
    let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
    let sc = &inv.sched;
    row(
        "rt throttling",
        format!(
            "sched_rt_runtime_us {} of {}",
            ro(&sc.rt_runtime_us),
            ro(&sc.rt_period_us)
        ),
    );
    row(
        "timers",
        format!(
            "timer_migration {}, nmi_watchdog {}, autogroup {}",
            yn(sc.timer_migration),
            yn(sc.nmi_watchdog),
            yn(sc.autogroup)
        ),
    );
    row(
        "irqs",
        format!(
            "irqbalance running {}, default affinity {}",
            yn(inv.irqs.irqbalance_running),
            ro(&inv.irqs.default_affinity)
        ),
    );
    for i in &inv.irqs.busiest {
        row(
            &format!("  irq {}", i.irq),
            format!(
                "{} {} interrupts, affinity {}, effective {}",
                plain(&i.name),
                i.count,
                ro(&i.affinity),
                ro(&i.effective_affinity)
            ),
        );
    }
    row(
        "cpu_dma_latency",
        if inv.dma_latency_holders.is_empty() {
            "no holder".into()
        } else {
            inv.dma_latency_holders
                .iter()
                .map(|h| format!("{} ({})", plain(&h.comm), h.pid))
                .collect::<Vec<_>>()
                .join(", ")
        },
    );
}

/// The rest: virtualization, cgroup CPU controls, tracing, what could not be read.
fn system_rows(rows: &mut Rows, inv: &Inventory) {
    let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
    let v = &inv.virt;
    let pct = |x: Option<f64>| {
        x.map(|x| format!("{:.2} %", x * 100.0))
            .unwrap_or_else(|| "unknown".into())
    };
    row(
        "virtualization",
        format!(
            "hypervisor flag {}, vendor {}, steal {} since boot{}",
            yn(v.hypervisor),
            ro(&v.vendor),
            pct(v.steal_since_boot),
            v.steal_sample_ms
                .map(|ms| format!(", {} over {ms} ms", pct(v.steal_sampled)))
                .unwrap_or_default()
        ),
    );
    if inv.cgroup.is_empty() {
        row("cgroup", "no CPU controls found".into());
    }
    for cg in &inv.cgroup {
        row(
            "cgroup",
            format!("{} = {}", plain(&cg.path), plain(&cg.value)),
        );
    }
    let t = &inv.tracing;
    row(
        "tracing",
        match &t.tracefs {
            None => format!("tracefs not mounted (supported: {})", yn(t.supported)),
            Some(d) => format!(
                "tracefs at {}, events {}/{}, timerlat {}, osnoise {}",
                plain(d),
                t.events.values().filter(|p| **p).count(),
                t.events.len(),
                yn(t.timerlat),
                yn(t.osnoise)
            ),
        },
    );
    if !inv.unreadable.is_empty() {
        row("not readable", plain(&inv.unreadable.join(", ")));
    }
}

/// `check`'s findings for the inventory a run recorded (`None`: no inventory, or one this
/// version cannot read).
pub fn run_findings(r: &latlab_core::record::RunRecord) -> Option<Vec<Finding>> {
    let inv: Inventory = serde_json::from_value(r.inventory.clone()?).ok()?;
    Some(latlab_core::findings::findings(&inv))
}

/// One line per finding, worst first: `[bad ] title (id)`; untrusted text is not escaped.
pub fn finding_lines(f: &[Finding]) -> Vec<String> {
    f.iter()
        .map(|x| format!("[{:<4}] {} ({})", x.severity.as_str(), x.title, x.id))
        .collect()
}

/// The JSON report: findings (stable ids, worst first) and the whole inventory.
pub fn render_json(inv: &Inventory, findings: &[Finding]) -> Vec<u8> {
    let v = serde_json::json!({ "findings": findings, "inventory": inv });
    let mut b = serde_json::to_vec_pretty(&v).expect("inventory serializes");
    b.push(b'\n');
    b
}

#[cfg(test)]
#[allow(clippy::field_reassign_with_default)] // fixtures are built field by field
mod tests {
    use super::*;
    use latlab_core::findings::findings;

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let mut inv = Inventory::default();
        inv.cmdline = Some("quiet \x1b[31mred\x07 isolcpus=1".into());
        inv.irqs.busiest.push(latlab_core::inventory::IrqInfo {
            irq: 5,
            name: "evil\nname\r".into(),
            count: 3,
            ..Default::default()
        });
        let f = findings(&inv);
        let text = String::from_utf8(render_text(&inv, &f)).unwrap();
        assert!(!text.contains('\x1b') && !text.contains('\x07') && !text.contains('\r'));
        // The one escaping of every text output: visible `\u{..}`, not a lossy space.
        assert!(text.contains(r"evil\u{a}name\u{d}"), "{text}");
        assert!(
            text.contains(r"quiet \u{1b}[31mred\u{7} isolcpus=1"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_slice(&render_json(&inv, &f)).unwrap();
        assert_eq!(json["findings"].as_array().unwrap().len(), f.len());
        assert_eq!(
            json["inventory"]["cmdline"],
            "quiet \x1b[31mred\x07 isolcpus=1"
        );
    }

    #[test]
    fn findings_are_printed_in_the_order_given() {
        let mut inv = Inventory::default();
        inv.memory.thp_enabled = Some("always".into());
        let f = findings(&inv);
        let text = String::from_utf8(render_text(&inv, &f)).unwrap();
        let first = text.find(&format!("({})", f[0].id)).unwrap();
        let last = text.find(&format!("({})", f[f.len() - 1].id)).unwrap();
        assert!(first < last);
        assert!(
            text.contains("[warn] transparent huge pages: always"),
            "{text}"
        );
    }
}
