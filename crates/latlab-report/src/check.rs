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
    let mut row = |k: &str, v: String| {
        let _ = writeln!(s, "  {k:<16}{v}");
    };
    let k = &inv.kernel;
    row(
        "kernel",
        format!("{} {} ({})", o(&k.release), o(&k.version), o(&k.arch)),
    );
    let p = &inv.preemption;
    row(
        "preemption",
        format!(
            "{}{} (from {})",
            o(&p.model),
            if p.dynamic { ", PREEMPT_DYNAMIC" } else { "" },
            o(&p.source)
        ),
    );
    if let Some(hz) = k.config.get("CONFIG_HZ") {
        row("HZ", escape(hz));
    }
    row("cmdline", o(&inv.cmdline));
    if !inv.cmdline_params.is_empty() {
        row(
            "  relevant",
            inv.cmdline_params
                .iter()
                .map(|(k, v)| {
                    if v.is_empty() {
                        escape(k)
                    } else {
                        escape(&format!("{k}={v}"))
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
            o(&inv.clocksource.current),
            escape(&inv.clocksource.available.join(" "))
        ),
    );
    let c = &inv.cpus;
    row(
        "cpus",
        format!(
            "online {}, isolated {}, nohz_full {}, model {}",
            cpus(&c.online),
            cpus(&c.isolated),
            cpus(&c.nohz_full),
            o(&c.model)
        ),
    );
    row(
        "smt",
        format!("control {}, active {}", o(&c.smt_control), yn(c.smt_active)),
    );
    if inv.cpufreq.is_empty() {
        row("cpufreq", "none (no cpufreq driver)".into());
    }
    for (cpu, f) in &inv.cpufreq {
        row(
            &format!("cpufreq cpu{cpu}"),
            format!(
                "{} {}, {}–{} kHz (hw max {}){}",
                o(&f.driver),
                o(&f.governor),
                o(&f.min_khz),
                o(&f.max_khz),
                o(&f.hw_max_khz),
                f.epp
                    .as_ref()
                    .map(|e| format!(", epp {}", escape(e)))
                    .unwrap_or_default()
            ),
        );
    }
    row("boost", yn(inv.boost).into());
    row(
        "cpuidle",
        format!(
            "driver {}, governor {}",
            o(&inv.cpuidle.driver),
            o(&inv.cpuidle.governor)
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
                        escape(&st.name),
                        o(&st.latency_us),
                        if st.enabled { "" } else { " (disabled)" }
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    let m = &inv.memory;
    row(
        "memory",
        format!(
            "{} kB total, {} kB available, NUMA nodes {}",
            o(&m.total_kb),
            o(&m.available_kb),
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
            o(&m.swap_total_kb),
            if m.swaps.is_empty() {
                "none".into()
            } else {
                escape(&m.swaps.join(" "))
            },
            o(&m.swappiness)
        ),
    );
    row(
        "thp / ksm",
        format!(
            "enabled {}, defrag {}, ksm run {}",
            o(&m.thp_enabled),
            o(&m.thp_defrag),
            o(&m.ksm_run)
        ),
    );
    let sc = &inv.sched;
    row(
        "rt throttling",
        format!(
            "sched_rt_runtime_us {} of {}",
            o(&sc.rt_runtime_us),
            o(&sc.rt_period_us)
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
            o(&inv.irqs.default_affinity)
        ),
    );
    for i in &inv.irqs.busiest {
        row(
            &format!("  irq {}", i.irq),
            format!(
                "{} {} interrupts, affinity {}, effective {}",
                escape(&i.name),
                i.count,
                o(&i.affinity),
                o(&i.effective_affinity)
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
                .map(|h| format!("{} ({})", escape(&h.comm), h.pid))
                .collect::<Vec<_>>()
                .join(", ")
        },
    );
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
            o(&v.vendor),
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
            format!("{} = {}", escape(&cg.path), escape(&cg.value)),
        );
    }
    let t = &inv.tracing;
    row(
        "tracing",
        match &t.tracefs {
            None => format!("tracefs not mounted (supported: {})", yn(t.supported)),
            Some(d) => format!(
                "tracefs at {}, events {}/{}, timerlat {}, osnoise {}",
                escape(d),
                t.events.values().filter(|p| **p).count(),
                t.events.len(),
                yn(t.timerlat),
                yn(t.osnoise)
            ),
        },
    );
    if !inv.unreadable.is_empty() {
        row("not readable", escape(&inv.unreadable.join(", ")));
    }
    s.into_bytes()
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
