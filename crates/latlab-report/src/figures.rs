//! A run's statistics as every format writes them, in plain text cells: a latency or "-", a
//! percentile's bound ("≤ 57 µs", "> 10 ms", marked "TOO FEW" as `compare` marks it), the
//! flags of percentiles resting on too few samples, the summary row, the percentile ladder
//! and Williams' rows. One builder each, so text, markdown and html cannot drift apart; each
//! format escapes the cells for itself.

use latlab_core::model::RunModel;
use latlab_core::stats::{Stats, BELOW};
use latlab_core::units::Human;

/// A latency, or "-" without one.
pub fn opt(v: Option<u64>) -> String {
    v.map(|v| Human(v).to_string())
        .unwrap_or_else(|| "-".into())
}

/// A latency bound as the field writes it: "≤ 57 µs", or "> 10 ms" when unknown.
pub fn bound(v: Option<u64>, s: &Stats) -> String {
    match v {
        Some(v) => format!("≤ {}", Human(v)),
        None if s.samples > 0 => format!("> {}", Human(s.limit_ns)),
        None => "-".into(),
    }
}

/// The quantile a ladder label names (`p99.9` …).
fn quantile_of(label: &str) -> Option<latlab_core::hist::Quantile> {
    latlab_core::stats::LADDER
        .iter()
        .find(|(l, _)| *l == label)
        .map(|(_, q)| *q)
}

/// The percentile `label` rests on too few samples of `s` (compare's rule,
/// [`latlab_core::compare::too_short`]); an empty run is not flagged (it shows "-").
pub fn too_few(label: &str, s: &Stats) -> bool {
    s.samples > 0
        && quantile_of(label).is_some_and(|q| latlab_core::compare::too_short(s.samples, q))
}

/// [`bound`] of the percentile `label`, marked "TOO FEW" (as `compare` marks it) when it
/// rests on too few samples.
pub fn pbound(label: &str, v: Option<u64>, s: &Stats) -> String {
    let b = bound(v, s);
    if too_few(label, s) {
        format!("{b} TOO FEW")
    } else {
        b
    }
}

/// The statistics a run's tables show, named: each CPU's (`cpu` names it), then all CPUs'
/// (named `all`) when there are several.
pub fn stat_rows<'m>(
    m: &'m RunModel,
    cpu: impl Fn(u32) -> String,
    all: &str,
) -> Vec<(String, &'m Stats)> {
    let mut rows: Vec<(String, &Stats)> = m.cpus.iter().map(|c| (cpu(c.cpu), &c.stats)).collect();
    if m.cpus.len() > 1 {
        rows.push((all.into(), &m.total));
    }
    rows
}

/// The flags of a single run, as `compare` writes them: for each percentile, the CPUs (and
/// "all") whose value rests on too few samples.
pub fn short_flags(m: &RunModel) -> Vec<String> {
    let rows = stat_rows(m, |c| format!("CPU {c}"), "all CPUs");
    latlab_core::stats::LADDER
        .iter()
        .filter_map(|(label, _)| {
            let who: Vec<&str> = rows
                .iter()
                .filter(|(_, s)| too_few(label, s))
                .map(|(n, _)| n.as_str())
                .collect();
            (!who.is_empty()).then(|| latlab_core::compare::too_short_flag(label, &who.join(", ")))
        })
        .collect()
}

/// The summary table's cells of one row after its name: samples, missed periods, minimum,
/// mean, p99, p99.9 and maximum (p99.9, not p99.999: a short run has too few samples for
/// five nines, which Williams' block still shows).
pub fn summary_cells(s: &Stats) -> [String; 7] {
    [
        s.samples.to_string(),
        s.missed_periods.to_string(),
        opt(s.min_ns),
        opt(s.mean_ns),
        pbound("p99", s.p99_ns, s),
        pbound("p99.9", s.p999_ns, s),
        opt(s.max_ns),
    ]
}

/// The summary table's column names after "CPU".
pub const SUMMARY_HEADER: [&str; 7] = ["samples", "missed", "min", "avg", "p99", "p99.9", "max"];

/// The worst latency of the run and where: (CPU, latency, CLOCK_MONOTONIC time when the
/// record has it), from the largest samples kept, else from the CPUs' maxima.
pub fn worst(m: &RunModel) -> Option<(u32, u64, Option<u64>)> {
    let kept = m
        .record
        .cpus
        .iter()
        .flat_map(|c| {
            c.top_spikes
                .iter()
                .map(move |s| (c.cpu, s.latency_ns, s.at_ns))
        })
        .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)));
    let by_stats = m
        .cpus
        .iter()
        .filter_map(|c| c.stats.max_ns.map(|v| (c.cpu, v)))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
    match (kept, by_stats) {
        (Some(k), Some(s)) if s.1 > k.1 => Some((s.0, s.1, None)),
        (Some(k), _) => Some((k.0, k.1, Some(k.2))),
        (None, Some(s)) => Some((s.0, s.1, None)),
        (None, None) => None,
    }
}

/// The largest traced spike, with its index in the record (spikes/NNN is index + 1).
pub fn largest_spike(m: &RunModel) -> Option<(usize, &latlab_core::record::SpikeRecord)> {
    m.record
        .spikes
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.latency_ns.cmp(&b.1.latency_ns).then(b.0.cmp(&a.0)))
}

/// What the trace's flags said of a cause's context, as ` [preempt off in 3 of 4 events]`
/// (empty when the record has none): for the spike lists of the reports.
pub fn cause_context(c: &latlab_core::record::Cause) -> String {
    c.context
        .map(|x| format!(" [{}]", x.describe()))
        .unwrap_or_default()
}

/// The facts of a spike's activation after its latency, as rtla timerlat --aa gives them:
/// timerlat's own figures (` [timerlat: IRQ 120 µs, thread 15.30 ms of 15.40 ms]`, timerlat
/// back end only) and, when its trace shows the CPU idle at the intended wake-up, how long the
/// timer's interrupt took to come (` [exit from idle: timer IRQ after 5.7 µs]`); empty
/// without either.
pub fn spike_facts(s: &latlab_core::record::SpikeRecord) -> String {
    use latlab_core::record::Moment;
    let mut parts = Vec::new();
    if let Some(d) = s.timerlat.and_then(|t| t.describe(s.latency_ns)) {
        parts.push(d);
    }
    let at = |m: Moment| s.timeline_events.iter().find(|e| e.what == m);
    if at(Moment::TimerDue).is_some_and(|e| e.from_idle) {
        parts.push(match at(Moment::TimerIrq) {
            Some(irq) => format!(
                "exit from idle: timer IRQ after {}",
                Human(irq.offset_ns.max(0) as u64)
            ),
            None => "exit from idle".into(),
        });
    }
    parts.iter().map(|p| format!(" [{p}]")).collect()
}

/// A `switch-to-user` stretch this long is no path back to user space (2–5 µs as a rule)
/// but a stall, shown with the other CPUs' evidence.
pub const SLOW_SWITCH_TO_USER_NS: u64 = 10_000;

/// The evidence for a silent stretch (a `silent gap`, `hypervisor` when the steal time shows
/// the host took the CPU, else `unknown`; `timer delivery` in older records): the steal time
/// of the spike's CPU around it and what the other CPUs did meanwhile, as ` [steal 10 ms on
/// CPU 1 in the 1.02 s around it; other CPUs in the 5.0 ms: CPU 0 (hackbench) 37 events]`
/// (empty for other causes or a record without either).
pub fn cause_evidence(
    s: &latlab_core::record::SpikeRecord,
    c: &latlab_core::record::Cause,
) -> String {
    // The thread's own way back to user space: a stall only when it took 10 µs or more.
    let own = c.name.starts_with("switch-to-user");
    let slow_own = own && c.ns >= SLOW_SWITCH_TO_USER_NS;
    if !(c.is_silent() || slow_own) {
        return String::new();
    }
    let mut parts = Vec::new();
    if let Some(e) = s.steal.filter(|_| !own) {
        parts.push(e.describe(s.cpu));
    }
    if let Some(o) = &s.others {
        parts.push(o.describe());
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(" [{}]", parts.join("; ")),
    }
}

/// A spike's largest causes as "kind name time", at most `n` of them.
pub fn cause_list(s: &latlab_core::record::SpikeRecord, n: usize) -> Vec<String> {
    s.causes
        .iter()
        .take(n)
        .map(|c| {
            format!(
                "{} {} {}",
                latlab_core::trace::attribution::kind_str(c.kind),
                c.name,
                Human(c.ns)
            )
        })
        .collect()
}

/// The percentile ladder of `s`: each label (`p50` … `p99.999`) with its [`pbound`].
pub fn ladder(s: &Stats) -> Vec<(&'static str, String)> {
    s.ladder()
        .iter()
        .map(|&(l, v)| (l, pbound(l, v, s)))
        .collect()
}

/// The ladder as the rows `(label, bound)` of a table, ending with the maximum.
pub fn ladder_rows(s: &Stats) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = ladder(s)
        .into_iter()
        .map(|(l, b)| (l.to_string(), b))
        .collect();
    v.push(("max".into(), opt(s.max_ns)));
    v
}

/// Williams' statistics as rows `(name, value)`, for tables with one column per CPU or run.
pub fn williams_rows(s: &Stats) -> Vec<(String, String)> {
    let est = if s.exact_moments { "" } else { " (est.)" };
    let mut v = vec![
        ("samples".into(), s.samples.to_string()),
        ("missed periods".into(), s.missed_periods.to_string()),
        (
            "buckets used".into(),
            format!("{} × {}", s.buckets_used, Human(s.bucket_ns)),
        ),
        ("minimum".into(), opt(s.min_ns)),
        ("maximum".into(), opt(s.max_ns)),
        ("mean".into(), format!("{}{est}", opt(s.mean_ns))),
        ("median".into(), pbound("p50", s.median_ns, s)),
        (
            "mode".into(),
            s.mode_ns
                .map(|m| format!("{} ({} samples)", Human(m), s.mode_count))
                .unwrap_or_else(|| "-".into()),
        ),
        (
            "std. deviation".into(),
            format!("{}{est}", opt(s.stddev_ns)),
        ),
    ];
    for (k, t) in BELOW {
        let f = s.below.get(k).copied().unwrap_or(0.0);
        v.push((format!("% < {}", Human(t)), format!("{:.4}", f * 100.0)));
    }
    if let Some(max) = s.max_ns {
        v.push((
            "100 % <".into(),
            Human(max.saturating_add(s.bucket_ns)).to_string(),
        ));
    }
    v.push((
        "99.999 % (five nines) <".into(),
        pbound("p99.999", s.p99999_ns, s),
    ));
    if s.unknown_above > 0 {
        v.push((
            "above the limit".into(),
            format!(
                "{} (value unknown, > {})",
                s.unknown_above,
                Human(s.limit_ns)
            ),
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::{cause_evidence, spike_facts};
    use latlab_core::record::{Cause, CauseKind, OtherCpu, SpikeOthers, SpikeRecord, SpikeSteal};

    fn cause(kind: CauseKind, name: &str) -> Cause {
        Cause {
            kind,
            name: name.into(),
            pid: 0,
            prio: 0,
            ns: 1_000_000,
            context: None,
        }
    }

    /// The steal evidence follows a silent stretch (on a VM or not), never another cause, and
    /// says "no steal" when the host's accounting shows none.
    #[test]
    fn steal_evidence_follows_silent_stretches_only() {
        let mut s = SpikeRecord {
            cpu: 3,
            at_ns: 5_000_000_000,
            latency_ns: 2_000_000,
            causes: vec![],
            trace_file: None,
            timeline: vec![],
            timeline_events: vec![],
            lanes: None,
            steal: Some(SpikeSteal {
                from_ns: 4_500_000_000,
                window_ns: 1_020_000_000,
                steal_ns: 10_000_000,
            }),
            others: None,
            timerlat: None,
        };
        let hv = cause(CauseKind::Hypervisor, "silent gap (idle)");
        let bare = cause(CauseKind::Unknown, "silent gap");
        let older = cause(CauseKind::Hypervisor, "timer delivery");
        let task = cause(CauseKind::Task, "lab-hog");
        let idle = cause(CauseKind::Unknown, "idle while runnable");
        assert_eq!(
            cause_evidence(&s, &hv),
            " [steal 10 ms on CPU 3 in the 1.02 s around it]"
        );
        assert_eq!(cause_evidence(&s, &bare), cause_evidence(&s, &hv));
        assert_eq!(cause_evidence(&s, &older), cause_evidence(&s, &hv));
        assert_eq!(cause_evidence(&s, &task), "");
        assert_eq!(cause_evidence(&s, &idle), "");
        s.steal.as_mut().unwrap().steal_ns = 0;
        assert_eq!(
            cause_evidence(&s, &hv),
            " [no steal on CPU 3 in the 1.02 s around it]"
        );
        s.steal = None;
        assert_eq!(cause_evidence(&s, &hv), "");
        // The other CPUs' evidence: after a silent stretch, and after the thread's own
        // switch-to-user when it took 10 µs or more (steal is for the silent gaps only).
        s.steal = Some(SpikeSteal {
            from_ns: 4_500_000_000,
            window_ns: 1_020_000_000,
            steal_ns: 0,
        });
        s.others = Some(SpikeOthers {
            silent_ns: 1_010_000,
            cpus: vec![OtherCpu {
                cpu: 0,
                events: 60,
                running: Some("hackbench".into()),
            }],
        });
        let others = "other CPUs in its 1010 µs of silent stretches: CPU 0 (hackbench) 60 events";
        assert_eq!(
            cause_evidence(&s, &bare),
            format!(" [no steal on CPU 3 in the 1.02 s around it; {others}]")
        );
        let mut own = cause(CauseKind::Task, "switch-to-user (latlab-cpu3)");
        assert_eq!(cause_evidence(&s, &own), format!(" [{others}]"));
        own.ns = 9_999;
        assert_eq!(cause_evidence(&s, &own), "");
        assert_eq!(cause_evidence(&s, &task), "");
        // timerlat's figures follow the latency of a timerlat spike, nothing for others.
        assert_eq!(spike_facts(&s), "");
        s.timerlat = Some(latlab_core::record::SpikeTimerlat {
            irq_ns: Some(150_000),
            thread_ns: None,
        });
        assert_eq!(spike_facts(&s), " [timerlat: IRQ 150 µs of 2000 µs]");
        // The CPU was idle at E: the timer IRQ's delay is the exit from idle.
        let at = |offset_ns, what, from_idle| latlab_core::record::TimelineEvent {
            offset_ns,
            what,
            task: None,
            cascade: false,
            from_idle,
        };
        use latlab_core::record::Moment::{TimerDue, TimerIrq};
        s.timeline_events = vec![at(0, TimerDue, false), at(5_700, TimerIrq, false)];
        assert_eq!(spike_facts(&s), " [timerlat: IRQ 150 µs of 2000 µs]");
        s.timeline_events[0].from_idle = true;
        assert_eq!(
            spike_facts(&s),
            " [timerlat: IRQ 150 µs of 2000 µs] [exit from idle: timer IRQ after 5.7 µs]"
        );
        s.timerlat = None;
        s.timeline_events.pop();
        assert_eq!(spike_facts(&s), " [exit from idle]");
    }
}
