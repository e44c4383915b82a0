//! `latlab analyze`'s output: an offline analysis of a trace (`latlab_core::trace::Analysis`)
//! as text (each spike's timeline, then what delays the machine) or JSON.

use std::fmt::Write as _;

use latlab_core::escape::escape;
use latlab_core::record::SpikeRecord;
use latlab_core::trace::{kind_str, summarize, Analysis, SampleMode};

fn spikes_for_summary(a: &Analysis) -> Vec<SpikeRecord> {
    a.spikes
        .iter()
        .filter(|s| !s.cascade)
        .map(|s| s.to_spike())
        .collect()
}

pub fn json(a: &Analysis) -> serde_json::Value {
    let spikes: Vec<serde_json::Value> = a
        .spikes
        .iter()
        .map(|s| {
            serde_json::json!({
                "cpu": s.cpu,
                "at_ns": s.intended_ns,
                "latency_ns": s.latency_ns,
                "causes": s.causes,
                "pid": s.pid,
                "comm": s.comm,
                "prio": s.prio,
                "unexplained_ns": s.unexplained_ns,
                "cascade": s.cascade,
                "switch_in_ns": s.switch_in_ns,
                "timeline_events": s.timeline_events(),
                "lanes": s.lanes,
            })
        })
        .collect();
    serde_json::json!({
        "mode": match a.mode { Some(SampleMode::Markers) => "markers", _ => "wakeups" },
        "events": a.events,
        "samples": a.samples,
        "lost_events": a.lost.iter().map(|(c, n)| serde_json::json!({"cpu": c, "events": n})).collect::<Vec<_>>(),
        "skipped_lines": a.skipped_lines,
        "skipped": a.skipped.iter().map(|(l, why)| serde_json::json!({"line": l, "error": why})).collect::<Vec<_>>(),
        "warnings": a.warnings,
        "spikes": spikes,
        "summary": summarize(&spikes_for_summary(a)),
    })
}

pub fn text(a: &Analysis) -> String {
    let mut s = String::new();
    let mode = match a.mode {
        Some(SampleMode::Markers) => "latlab markers",
        _ => "RT task wake-ups (no latlab markers in this trace)",
    };
    let _ = writeln!(
        s,
        "{} events; samples from {mode}: {}; spikes: {}",
        a.events,
        a.samples,
        a.spikes.len()
    );
    for (cpu, n) in &a.lost {
        let _ = writeln!(
            s,
            "warning: CPU {cpu} lost {n} events: history before that point is incomplete"
        );
    }
    // Text from the trace (a skipped line's start) is untrusted: escaped.
    for w in &a.warnings {
        let _ = writeln!(s, "warning: {}", escape(w));
    }
    for (i, sp) in a.spikes.iter().enumerate() {
        let _ = writeln!(
            s,
            "\nspike {}: CPU {}, {} (pid {}), latency {:.1} us",
            i + 1,
            sp.cpu,
            escape(&sp.comm),
            sp.pid,
            sp.latency_ns as f64 / 1000.0
        );
        for l in crate::timeline::lines(&sp.to_spike()) {
            let _ = writeln!(s, "  {l}");
        }
    }
    let rows = summarize(&spikes_for_summary(a));
    if !rows.is_empty() {
        let _ = writeln!(
            s,
            "\nwhat delays this machine (over {} spikes, cascades excluded):",
            spikes_for_summary(a).len()
        );
        let _ = writeln!(
            s,
            "  {:<11} {:<28} {:>6} {:>12} {:>12} {:>7}",
            "kind", "name", "spikes", "total us", "worst us", "share"
        );
        for r in rows {
            let _ = writeln!(
                s,
                "  {:<11} {:<28} {:>6} {:>12.1} {:>12.1} {:>6.1}%",
                kind_str(r.kind),
                escape(&r.name),
                r.spikes,
                r.total_ns as f64 / 1000.0,
                r.worst_ns as f64 / 1000.0,
                100.0 * r.share
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use latlab_core::trace::{analyze_text, AnalyzeOptions, SampleMode};

    /// A wake-up of `tau` (pid 7) switched in 799 µs after its timer was due, `tau` an untrusted name.
    fn analysis(tau: &str) -> latlab_core::trace::Analysis {
        let text = format!(
            "  a-1 [000] d..1.  1.000000: hrtimer_start: hrtimer=h function=hrtimer_wakeup expires=1000100000 softexpires=1000100000 mode=ABS\n\
             {tau}-7 [000] d..2.  1.000001: sched_switch: prev_comm={tau} prev_pid=7 prev_prio=19 prev_state=S ==> next_comm=hog next_pid=8 next_prio=120\n\
             hog-8 [000] d.h..  1.000100: local_timer_entry: vector=236\n\
             hog-8 [000] d.h2.  1.000101: sched_waking: comm={tau} pid=7 prio=19 target_cpu=000\n\
             hog-8 [000] dNh..  1.000102: local_timer_exit: vector=236\n\
             hog-8 [000] d..2.  1.000900: sched_switch: prev_comm=hog prev_pid=8 prev_prio=120 prev_state=R ==> next_comm={tau} next_pid=7 next_prio=19\n"
        );
        let opts = AnalyzeOptions {
            threshold_ns: 100_000,
            mode: Some(SampleMode::Wakeups),
            gaps: Vec::new(),
        };
        analyze_text(&text, &opts).unwrap()
    }

    #[test]
    fn text_has_each_spike_its_timeline_and_the_table_escaped() {
        let s = super::text(&analysis("x\x1b[31mevil"));
        assert!(!s.contains('\x1b'), "{s}");
        assert!(s.starts_with("6 events; samples from RT task wake-ups (no latlab markers in this trace): 1; spikes: 1\n"), "{s}");
        assert!(
            s.contains("\nspike 1: CPU 0, x\\u{1b}[31mevil (pid 7), latency 799.0 us\n"),
            "{s}"
        );
        assert!(s.contains("preempt_off hog (pid 8, prio 120)"), "{s}");
        assert!(
            s.contains("what delays this machine (over 1 spikes, cascades excluded):"),
            "{s}"
        );
    }

    #[test]
    fn json_has_the_spikes_and_the_summary() {
        let v = super::json(&analysis("rt"));
        assert_eq!(v["mode"], "wakeups");
        assert_eq!(v["samples"], 1);
        assert_eq!(v["spikes"][0]["comm"], "rt");
        assert_eq!(v["spikes"][0]["latency_ns"], 799_000);
        assert_eq!(v["summary"][0]["name"], "hog", "{v}");
    }
}
