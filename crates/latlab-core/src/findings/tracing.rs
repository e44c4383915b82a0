//! Rules on tracing support: tracefs, the events latlab needs, the kernel's RT tracers.

use super::Severity::{Info, Warn};
use super::{f, Finding};
use crate::inventory::Inventory;

/// tracefs, its events and tracers (`trace.not-mounted`, `trace.events-missing`,
/// `trace.rt-tracers`, `trace.no-timerlat`).
pub(super) fn tracing(inv: &Inventory, out: &mut Vec<Finding>) {
    let t = &inv.tracing;
    if t.tracefs.is_none() {
        out.push(f(
            "trace.not-mounted",
            Info,
            "tracefs is not mounted".into(),
            format!(
                "no tracefs at /sys/kernel/tracing or /sys/kernel/debug/tracing (kernel \
                 support: {})",
                match t.supported {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "unknown",
                }
            ),
            "latlab explains spikes from trace events; without tracefs it can only measure.",
            "mount -t tracefs nodev /sys/kernel/tracing (latlab run does this itself as root)",
        ));
    } else {
        let missing: Vec<&str> = t
            .events
            .iter()
            .filter(|(_, p)| !**p)
            .map(|(e, _)| e.as_str())
            .collect();
        if !missing.is_empty() {
            out.push(f(
                "trace.events-missing",
                Warn,
                "trace events latlab needs are missing".into(),
                format!(
                    "not in {}/events: {}",
                    t.tracefs.as_deref().unwrap_or(""),
                    missing.join(", ")
                ),
                "Spike attribution reads these events; without them causes stay unknown.",
                "use a kernel built with CONFIG_FTRACE and the scheduler/IRQ tracepoints",
            ));
        }
        let rt_tracers: Vec<&str> = ["timerlat", "osnoise", "hwlat"]
            .into_iter()
            .filter(|n| t.tracers.iter().any(|x| x == n))
            .collect();
        if !rt_tracers.is_empty() {
            out.push(f(
                "trace.rt-tracers",
                Info,
                format!("the kernel offers the {} tracer{}", rt_tracers.join(", "), if rt_tracers.len() == 1 { "" } else { "s" }),
                format!("available_tracers: {}", t.tracers.join(" ")),
                "In-kernel latency measurements (rtla timerlat/osnoise/hwlat) can run beside or instead of latlab's threads on this kernel.",
                "rtla timerlat top -a … (or latlab's timerlat back end) to cross-check",
            ));
        }
        if t.timerlat == Some(false) || t.osnoise == Some(false) {
            out.push(f(
                "trace.no-timerlat",
                Info,
                "timerlat/osnoise tracers are not built in".into(),
                format!("available_tracers: {}", t.tracers.join(" ")),
                "rtla's in-kernel measurements are not possible here; latlab attributes spikes \
                 from plain events instead.",
                "build the kernel with CONFIG_TIMERLAT_TRACER and CONFIG_OSNOISE_TRACER to \
                 cross-check with rtla",
            ));
        }
    }
}
