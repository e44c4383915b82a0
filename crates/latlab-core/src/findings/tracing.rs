//! Rules on tracing support: tracefs, the events latlab needs, the kernel's RT tracers.

use super::Severity::{Info, Warn};
use super::{f, Finding};
use crate::inventory::Inventory;

/// tracefs, its events and tracers (`trace.not-mounted`, `trace.events-missing`,
/// `trace.rt-tracers`, `trace.no-timerlat`), and the back ends `latlab run` has here
/// (`run.backends`).
pub(super) fn tracing(inv: &Inventory, out: &mut Vec<Finding>) {
    backends(inv, out);
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

/// `run.backends`: the `--backend`s this kernel offers (`real` and `sim` everywhere;
/// `timerlat` and `osnoise` with the kernel's tracers in a mounted tracefs) and why one is not.
fn backends(inv: &Inventory, out: &mut Vec<Finding>) {
    let t = &inv.tracing;
    let has = |n: &str| t.tracefs.is_some() && t.tracers.iter().any(|x| x == n);
    let (timerlat, osnoise) = (has("timerlat"), has("osnoise"));
    let hwnoise = osnoise && t.hwnoise == Some(true);
    let why_not = |name: &str, option: &str| {
        if t.tracefs.is_none() {
            format!("not {name}: tracefs is not mounted")
        } else {
            format!(
                "not {name}: no {name} tracer ({option} is not set; available_tracers: {})",
                t.tracers.join(" ")
            )
        }
    };
    let evidence = [
        if timerlat {
            "timerlat: the kernel's timerlat tracer (IRQ, thread and return-to-user latency)".into()
        } else {
            why_not("timerlat", "CONFIG_TIMERLAT_TRACER")
        },
        if osnoise {
            "osnoise (--mode noise): the kernel's osnoise tracer (noise by source, with times)"
                .into()
        } else {
            why_not("osnoise", "CONFIG_OSNOISE_TRACER")
        },
        if hwnoise {
            "hwnoise (--mode noise): osnoise with interrupts disabled (OSNOISE_IRQ_DISABLE: hardware and NMI noise only)".into()
        } else if osnoise {
            "not hwnoise: osnoise/options has no OSNOISE_IRQ_DISABLE (a kernel older than 6.1-rt or 6.3)".into()
        } else {
            "not hwnoise: it needs the osnoise tracer".into()
        },
    ]
    .join("; ");
    let mut names = String::from("real, sim");
    for (on, n) in [
        (timerlat, "timerlat"),
        (osnoise, "osnoise"),
        (hwnoise, "hwnoise"),
    ] {
        if on {
            names.push_str(", ");
            names.push_str(n);
        }
    }
    out.push(f(
        "run.backends",
        Info,
        format!("latlab run's back ends here: {names}"),
        evidence,
        "`latlab run --backend NAME` measures with one of them.",
        if timerlat {
            "latlab run --backend timerlat (root): the kernel's tracer measures, with IRQ and thread latency apart; latlab run --mode noise --backend osnoise: the kernel's noise by source"
        } else {
            "--backend timerlat and osnoise need a kernel built with CONFIG_TIMERLAT_TRACER and CONFIG_OSNOISE_TRACER (Debian's from 6.1 PREEMPT_RT, 6.12)"
        },
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(inv: &Inventory) -> Finding {
        let mut out = Vec::new();
        backends(inv, &mut out);
        out.into_iter().find(|x| x.id == "run.backends").unwrap()
    }

    #[test]
    fn the_back_ends_follow_the_kernels_tracers() {
        let mut inv = Inventory::default();
        let none = of(&inv);
        assert_eq!(none.title, "latlab run's back ends here: real, sim");
        assert!(none.evidence.contains("not mounted"), "{}", none.evidence);
        inv.tracing.tracefs = Some("/sys/kernel/tracing".into());
        inv.tracing.tracers = vec!["function".into(), "nop".into()];
        let stock = of(&inv);
        assert_eq!(stock.title, "latlab run's back ends here: real, sim");
        assert!(
            stock.evidence.contains("CONFIG_TIMERLAT_TRACER"),
            "{}",
            stock.evidence
        );
        assert!(
            stock.evidence.contains("CONFIG_OSNOISE_TRACER"),
            "{}",
            stock.evidence
        );
        inv.tracing.tracers.push("timerlat".into());
        assert_eq!(
            of(&inv).title,
            "latlab run's back ends here: real, sim, timerlat"
        );
        inv.tracing.tracers.push("osnoise".into());
        let rt = of(&inv);
        assert_eq!(
            rt.title,
            "latlab run's back ends here: real, sim, timerlat, osnoise"
        );
        assert!(rt.evidence.contains("noise by source"), "{}", rt.evidence);
        assert!(rt.evidence.contains("not hwnoise"), "{}", rt.evidence);
        inv.tracing.hwnoise = Some(true);
        let hw = of(&inv);
        assert_eq!(
            hw.title,
            "latlab run's back ends here: real, sim, timerlat, osnoise, hwnoise"
        );
        assert!(
            hw.evidence.contains("OSNOISE_IRQ_DISABLE"),
            "{}",
            hw.evidence
        );
    }
}
