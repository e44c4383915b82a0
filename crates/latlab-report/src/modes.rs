//! The extra tables of the `wakeup`, `jitter`, `audio` and `noise` modes ([`crate::tables`]), and the
//! keys they add to the JSON report.

use latlab_core::hist::Histogram;
use latlab_core::model::RunModel;
use latlab_core::modes::{AudioRecord, AudioTally, ExecSummary, NoiseRecord};
use latlab_core::units::Human;

use crate::tables::Table;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn exec_summary(h: &latlab_core::hist::HistogramRecord) -> Option<ExecSummary> {
    Histogram::from_record(h)
        .ok()
        .and_then(|h| ExecSummary::of(&h))
}

/// The mode's tables (empty for the timer and imports).
pub fn tables(m: &RunModel) -> Vec<Table> {
    let r = &m.record;
    let mut out = Vec::new();
    let modes: Vec<(u32, &latlab_core::modes::CpuMode)> = r
        .cpus
        .iter()
        .filter_map(|c| c.mode.as_ref().map(|x| (c.cpu, x)))
        .collect();
    if modes.is_empty() {
        return out;
    }
    let pairs: Vec<Vec<String>> = modes
        .iter()
        .filter_map(|(cpu, x)| x.pair.as_ref().map(|p| vec![cpu.to_string(), p.clone()]))
        .collect();
    if !pairs.is_empty() {
        out.push(Table {
            title: "Wake-up pairs (latency = receiver's return − sender's stamp before signalling)"
                .into(),
            header: s(&["CPU", "pair"]),
            rows: pairs,
            note: None,
        });
    }
    let exec: Vec<Vec<String>> = modes
        .iter()
        .filter_map(|(cpu, x)| {
            let e = x.exec.as_ref()?;
            let sm = exec_summary(&e.histogram)?;
            Some(vec![
                cpu.to_string(),
                if e.iterations == 0 {
                    "sim".into()
                } else {
                    e.iterations.to_string()
                },
                sm.samples.to_string(),
                Human(sm.min_ns).to_string(),
                format!("≤ {}", Human(sm.p50_ns)),
                format!("≤ {}", Human(sm.p99_ns)),
                Human(sm.max_ns).to_string(),
                Human(sm.max_dev_ns).to_string(),
                format!("{:.2}", sm.max_ns as f64 / sm.min_ns.max(1) as f64),
            ])
        })
        .collect();
    if !exec.is_empty() {
        let work = r
            .config
            .mode_params
            .as_ref()
            .and_then(|p| p.work_ns)
            .map(|w| format!(", calibrated to {}", Human(w)))
            .unwrap_or_default();
        out.push(Table {
            title: format!("Execution time of the compute kernel{work}"),
            header: s(&[
                "CPU",
                "iterations",
                "runs",
                "min",
                "p50",
                "p99",
                "max",
                "max − min",
                "max / min",
            ]),
            rows: exec,
            note: Some("max − min is the worst deviation from the fastest run: how deterministic the code's execution time is".into()),
        });
    }
    let audio: Vec<(u32, &AudioRecord)> = modes
        .iter()
        .filter_map(|(cpu, x)| x.audio.as_ref().map(|a| (*cpu, a)))
        .collect();
    if let Some(total) = AudioRecord::merged(audio.iter().map(|(_, a)| *a)) {
        let measured = r.config.measured_ns.unwrap_or(0);
        let mut rows: Vec<Vec<String>> = audio
            .iter()
            .map(|(cpu, a)| audio_row(cpu.to_string(), a, measured))
            .collect();
        if audio.len() > 1 {
            rows.push(audio_row("all".into(), &total, measured));
        }
        out.push(Table {
            title: format!(
                "Audio deadlines: {} fragments of {} frames ({}), deadline {} after each fragment's start",
                total.buffers,
                total.frames(),
                Human(total.period_ns),
                Human(AudioTally::deadline(total.period_ns, total.buffers))
            ),
            header: s(&[
                "CPU",
                "fragments",
                "xruns",
                "xruns/min",
                "worst response",
                "worst lateness",
            ]),
            rows,
            note: None,
        });
        let f = total.frames();
        let verdict = total
            .verdict()
            .iter()
            .map(|&(b, n)| {
                vec![
                    format!("{b} × {f} frames"),
                    Human(b as u64 * total.period_ns).to_string(),
                    Human(AudioTally::deadline(total.period_ns, b)).to_string(),
                    n.to_string(),
                    format!("{:.1}", n as f64 * 60e9 / measured.max(1) as f64),
                ]
            })
            .collect();
        out.push(Table {
            title: "Verdict per buffer count (from the same fragments)".into(),
            header: s(&[
                "buffers",
                "buffer latency",
                "deadline",
                "late fragments",
                "per minute",
            ]),
            rows: verdict,
            note: Some(total.verdict_sentence()),
        });
    }
    out.extend(noise_tables(&modes));
    out
}

/// `--mode noise`: rtla osnoise top's figures per CPU, then what the kernel counted there.
fn noise_tables(modes: &[(u32, &latlab_core::modes::CpuMode)]) -> Vec<Table> {
    let noise: Vec<(u32, &NoiseRecord)> = modes
        .iter()
        .filter_map(|(cpu, x)| x.noise.as_ref().map(|n| (*cpu, n)))
        .collect();
    let Some((_, first)) = noise.first() else {
        return Vec::new();
    };
    let rows = noise
        .iter()
        .map(|(cpu, n)| {
            vec![
                cpu.to_string(),
                Human(n.runtime_ns).to_string(),
                Human(n.noise_ns).to_string(),
                n.available_pct()
                    .map_or_else(|| "-".into(), |p| format!("{p:.3} %")),
                worst_second(n),
                n.loops.to_string(),
            ]
        })
        .collect();
    let mut note = "the interferences' count and lengths are the CPU's statistics above (samples, max); the loop's own work after each one is not counted".to_string();
    for (cpu, n) in noise.iter().filter(|(_, n)| n.dropped > 0) {
        note.push_str(&format!(
            "; CPU {cpu}: the tracer's ring dropped {} records (it wrote faster than latlab read): its noises and sources are short of them",
            n.dropped
        ));
    }
    let mut out = vec![Table {
        title: format!(
            "Noise: a thread spinning on the clock; each gap of at least {} between two reads is an interference (the CPU's samples)",
            Human(first.threshold_ns)
        ),
        header: s(&[
            "CPU",
            "runtime",
            "noise",
            "CPU available",
            "worst second",
            "clock reads",
        ]),
        rows,
        note: Some(note),
    }];
    let sources: Vec<Vec<String>> = noise
        .iter()
        .flat_map(|(cpu, n)| {
            n.sources.iter().take(8).map(move |x| {
                vec![
                    cpu.to_string(),
                    x.kind.clone(),
                    x.name.clone(),
                    x.count.to_string(),
                    x.ns.map_or_else(|| "-".into(), |ns| Human(ns).to_string()),
                ]
            })
        })
        .collect();
    if !sources.is_empty() {
        out.push(Table {
            title: "What ran on the noisy CPUs (the kernel's counters over the run, 8 most frequent per CPU)".into(),
            header: s(&["CPU", "kind", "source", "count", "time"]),
            rows: sources,
            note: Some("counts from /proc/interrupts and /proc/softirqs over the run, not timed: what fired on the CPU, not which interference it caused".into()),
        });
    }
    out
}

/// The second with the most noise, as `12 ms at 0:07` (`-` for a record without the series).
fn worst_second(n: &NoiseRecord) -> String {
    let worst = n
        .per_second_ns
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)));
    match worst {
        Some((k, &ns)) => format!(
            "{} at {}",
            Human(ns),
            crate::svg::axes::time_label(k as u64, false)
        ),
        None => "-".into(),
    }
}

fn audio_row(name: String, a: &AudioRecord, measured: u64) -> Vec<String> {
    vec![
        name,
        a.fragments.to_string(),
        a.xruns.to_string(),
        format!("{:.1}", a.xruns_per_minute(measured)),
        Human(a.worst_response_ns).to_string(),
        a.worst_lateness_ns()
            .map(|l| Human(l).to_string())
            .unwrap_or_else(|| "never late".into()),
    ]
}
