//! A spike's capture, pure: its CPU's binary pages (or the kernel's text) and the spike's times
//! → decoded events → the analysis → the spike's record and the bytes of its `spikes/NNN/`
//! files (`trace.txt`, `trace.dat`, `analysis.txt`). The flight recorder (`latlab-engine`)
//! reads the pages from tracefs, hands them here and writes what comes back; everything in
//! between is tested on the fixtures, without root.
//!
//! - [`analyze_pages`] / [`analyze_kernel_text`]: a capture's analysis ([`Analyzed`]): the
//!   spike's sample (or why there is none), the warnings for its `analysis.txt`, the counts for
//!   run.json's `captures`, and, with [`Render::Now`], its `trace.txt` and `trace.dat`;
//! - [`render`]: those two files later, from the pages and the task names the analysis kept;
//! - [`spike_record`] and [`analysis_txt`]: the spike's record and its `analysis.txt`;
//! - [`trace_dat`]: pages of some CPUs as a trace-cmd file;
//! - [`marker_time`] and [`split_at`]: where a spike's session ends in its CPU's pages (the
//!   recorder that never stops).

use std::borrow::Cow;

use crate::escape::escape;
use crate::record::SpikeRecord;
use crate::trace::analyzer::{Analysis, AnalyzeOptions, Sample, SampleMode};
use crate::trace::event::{Event, EventKind};
use crate::trace::line::Flags;
use crate::trace::parallel::analyze_events;
use crate::trace::parser::ParseError;
use crate::trace::raw::{named_symbols, Comms, PageLayout, RawDecoder, RawItem};
use crate::trace::tracedat::{self, CpuData, TraceDat};
use crate::trace_summary::SpikeCapture;

/// A spike as its measuring thread saw it (times in CLOCK_MONOTONIC ns, the trace clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spike {
    pub cpu: u32,
    pub intended_ns: u64,
    pub actual_ns: u64,
    pub latency_ns: u64,
}

impl Spike {
    /// The marker its measuring thread writes into the trace (without the newline).
    pub fn marker(&self) -> String {
        format!(
            "LATLAB_STOP cpu={} intended={} actual={} latency={}",
            self.cpu, self.intended_ns, self.actual_ns, self.latency_ns
        )
    }
}

/// What a `trace.dat` carries besides the pages: the instance's page and event-header layout,
/// its events (`system/name`) with their `format` files in the same order, and its clock.
#[derive(Debug, Clone, Copy)]
pub struct DatLayout<'a> {
    pub header_page: &'a str,
    pub header_event: &'a str,
    pub events: &'a [String],
    pub formats: &'a [String],
    pub clock: &'a str,
}

/// When a capture's `trace.txt` and `trace.dat` are rendered.
#[derive(Debug, Clone, Copy)]
pub enum Render<'a> {
    /// Later, by [`render`] from the pages and [`Analyzed::comms`] (the files wait in memory
    /// as pages, which are smaller than their text).
    Later,
    /// Now: [`Analyzed::dat`] when the layout is known, and [`Analyzed::text`] when `text`
    /// asks for it or there is no `trace.dat` (`latlab analyze --print-trace` renders a
    /// `trace.dat` as text on demand).
    Now {
        dat: Option<DatLayout<'a>>,
        text: bool,
    },
}

/// A spike's marker not in its CPU's pages (written on another CPU, or not at all: its thread
/// found the recorder stopped by another CPU's spike), placed with its times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The marker is in the pages.
    No,
    /// A timer's sample: after its CPU's last event, from the thread that armed its timer for
    /// the intended time (timerlat's reader writes the marker elsewhere).
    Timer,
    /// A noise gap (the osnoise tracer's reader writes the marker elsewhere): at the gap's
    /// end, from the task on the CPU at its start (the tracer's spinning thread).
    Noise,
}

/// A spike's capture as binary pages.
pub struct Pages<'a> {
    pub decoder: &'a RawDecoder,
    /// The spike's CPU's pages (whole sub-buffer pages, as `trace_pipe_raw` returns them).
    pub pages: &'a [u8],
    pub spike: Spike,
    /// Whether the spike's marker is placed ([`Place`]): it is not in the pages.
    pub place_marker: Place,
    pub render: Render<'a>,
    /// The name of a pid the pages' scheduler events do not name (a task running since before
    /// the buffer's start): the recorder reads `/proc/PID/comm`. None: shown as `<...>`.
    pub comm_of: &'a dyn Fn(i64) -> Option<String>,
}

/// A capture's counts for run.json's `captures` (the rest — spike, CPU, times, overruns — is
/// the recorder's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// `binary` or `text`.
    pub read_as: &'static str,
    pub bytes: u64,
    pub pages: u64,
    pub events: u64,
    pub lost_events: u64,
    pub lost_unknown: u64,
}

impl Counts {
    /// Copy the counts into a capture's record.
    pub fn apply(&self, cap: &mut SpikeCapture) {
        cap.read_as = self.read_as.into();
        cap.bytes = self.bytes;
        cap.pages = self.pages;
        cap.events = self.events;
        cap.lost_events = self.lost_events;
        cap.lost_unknown = self.lost_unknown;
    }
}

/// What a spike's capture gave.
#[derive(Debug, Default)]
pub struct Analyzed {
    /// The spike's sample (the last one of its CPU at its intended time); None: [`Self::why`].
    pub sample: Option<Sample>,
    pub why: String,
    /// For its `analysis.txt`: what the parser skipped, events the kernel lost, bad pages.
    pub warnings: Vec<String>,
    pub counts: Counts,
    /// The task names the pages' events (and [`Pages::comm_of`]) gave, to render them later.
    pub comms: Comms,
    /// `trace.txt` and `trace.dat` ([`Render::Now`] only; see it for when each is rendered).
    pub text: Option<String>,
    pub dat: Option<Vec<u8>>,
}

/// The analysis a spike's capture gets: every sample ends at a latlab marker.
fn options() -> AnalyzeOptions {
    AnalyzeOptions {
        threshold_ns: 0,
        mode: Some(SampleMode::Markers),
        gaps: Vec::new(),
    }
}

/// The spike's sample in an analysis (the last one of its CPU at its intended time).
fn outcome(analysis: Result<Analysis, ParseError>, spike: Spike, mut counts: Counts) -> Analyzed {
    let mut o = Analyzed::default();
    match analysis {
        Ok(a) => {
            if counts.events == 0 {
                counts.events = a.events;
            }
            o.sample = a
                .spikes
                .iter()
                .rev()
                .find(|s| s.cpu == spike.cpu && s.intended_ns == spike.intended_ns)
                .cloned();
            o.why = "the spike's marker is not in the trace (overwritten or lost)".into();
            o.warnings = a.warnings;
        }
        Err(e) => o.why = format!("trace not analyzable: line {}: {}", e.line, e.msg),
    }
    o.counts = counts;
    o
}

/// A spike's capture as the kernel's text (`per_cpu/cpuN/trace`, when the recorder cannot read
/// binary pages), analyzed.
pub fn analyze_kernel_text(text: &str, spike: Spike) -> Analyzed {
    let counts = Counts {
        read_as: "text",
        bytes: text.len() as u64,
        ..Counts::default()
    };
    let analysis = crate::trace::parallel::analyze_text(text, &options());
    outcome(analysis, spike, counts)
}

/// Pids whose events show no name (`<...>`), at most 64.
fn unnamed(events: &[Event]) -> Vec<i64> {
    let mut v: Vec<i64> = events
        .iter()
        .filter(|e| e.task_comm == "<...>")
        .map(|e| e.pid)
        .collect();
    v.sort_unstable();
    v.dedup();
    v.truncate(64);
    v
}

/// Decode a spike's pages, analyze the events (and render them, with [`Render::Now`]).
pub fn analyze_pages(c: &Pages) -> Analyzed {
    let (dec, cpu) = (c.decoder, c.spike.cpu);
    let mut counts = Counts {
        read_as: "binary",
        bytes: c.pages.len() as u64,
        ..Counts::default()
    };
    let mut comms = Comms::default();
    let _ = dec.learn_comms(c.pages, &mut comms);
    let mut events = Vec::new();
    let mut st = dec.decode_cpu(cpu, c.pages, &comms, &mut events);
    // Pids the pages' scheduler events do not name: asked for by name (a few small reads).
    let unknown = unnamed(&events);
    if !unknown.is_empty() {
        drop(events);
        for pid in unknown {
            if let Some(name) = (c.comm_of)(pid) {
                comms.learn(pid, name.trim_end_matches('\n'));
            }
        }
        events = Vec::new();
        st = dec.decode_cpu(cpu, c.pages, &comms, &mut events);
    }
    let st = match st {
        Ok(st) => st,
        Err(e) => {
            return Analyzed {
                why: e.to_string(),
                counts,
                ..Analyzed::default()
            }
        }
    };
    (counts.pages, counts.events) = (st.pages, st.events);
    (counts.lost_events, counts.lost_unknown) = (st.lost_events, st.lost_unknown);
    let lost: Vec<(usize, u32, u64)> = st
        .lost
        .iter()
        .filter_map(|m| Some((m.before, cpu, m.events?)))
        .collect();
    let opts = options();
    // The spike as its marker says it (a placed timerlat marker has the timer's expiry).
    let mut spike = c.spike;
    let analysis = if c.place_marker != Place::No {
        let mut events = events.clone();
        let placed = match c.place_marker {
            Place::Noise => noise_marker(&events, c.spike),
            _ => end_marker(&events, c.spike),
        };
        match placed {
            Some((m, s)) => {
                events.push(m);
                spike = s;
            }
            None => {
                return Analyzed {
                    why: match c.place_marker {
                        Place::Noise => "the gap's CPU has no event in the capture",
                        _ => "the thread's timer is not in the capture",
                    }
                    .into(),
                    counts,
                    ..Analyzed::default()
                }
            }
        }
        analyze_events(&events, &lost, &opts)
    } else {
        analyze_events(&events, &lost, &opts)
    };
    let mut o = outcome(analysis, spike, counts);
    if let Render::Now { dat, text } = c.render {
        let r = Rendering {
            decoder: dec,
            cpu,
            pages: c.pages,
            comms: &comms,
            dat,
            text,
            others: &[],
        };
        (o.text, o.dat) = render_events(&r, &events);
    }
    drop(events);
    o.comms = comms;
    if st.bad_pages > 0 || st.unknown_events > 0 {
        o.warnings.push(format!(
            "binary trace: {} inconsistent page(s) (their rest skipped), {} event(s) of unknown ID",
            st.bad_pages, st.unknown_events
        ));
    }
    // Events lost before the first one are the ring's overwritten past (a flight recorder's
    // normal state); lost inside the copy, history has a hole: said.
    let inside: Vec<Option<u64>> = st
        .lost
        .iter()
        .filter(|m| m.before > 0)
        .map(|m| m.events)
        .collect();
    if !inside.is_empty() {
        let counted: u64 = inside.iter().flatten().sum();
        o.warnings.push(format!(
            "the kernel lost events at {} place(s) inside this CPU's trace ({counted} counted{})",
            inside.len(),
            if inside.iter().any(Option::is_none) {
                ", some uncounted"
            } else {
                ""
            }
        ));
    }
    o
}

/// One CPU's pages to render as its `trace.dat` (with a layout) and `trace.txt`.
pub struct Rendering<'a> {
    pub decoder: &'a RawDecoder,
    pub cpu: u32,
    pub pages: &'a [u8],
    pub comms: &'a Comms,
    pub dat: Option<DatLayout<'a>>,
    /// `trace.txt` too, beside a `trace.dat` (`--trace-text`). Without a `trace.dat` it is
    /// always rendered: a spike keeps one trace file.
    pub text: bool,
    /// The other CPUs' pages of the spike's window ([`others_window`]), in both files.
    pub others: &'a [(u32, Vec<u8>)],
}

/// A CPU's pages as trace-cmd's file (`trace.dat`, when the layout is known) and as the
/// kernel's text layout (`trace.txt`: when [`Rendering::text`] asks, or there is no
/// `trace.dat`). The text is 2–3 times the file's size and most of the time spent writing a
/// spike's files; `latlab analyze --print-trace` renders it from the `trace.dat` on demand.
pub fn render(r: &Rendering) -> (Option<String>, Option<Vec<u8>>) {
    let mut events = Vec::new();
    let _ = r.decoder.decode_cpu(r.cpu, r.pages, r.comms, &mut events);
    for (cpu, pages) in r.others {
        let _ = r.decoder.decode_cpu(*cpu, pages, r.comms, &mut events);
    }
    render_events(r, &events)
}

/// [`render`] of pages whose events are decoded already: every CPU's, in CPU order (the
/// spike's and [`Rendering::others`]).
fn render_events(r: &Rendering, events: &[Event]) -> (Option<String>, Option<Vec<u8>>) {
    let mut cpus: Vec<(u32, &[u8])> = vec![(r.cpu, r.pages)];
    cpus.extend(r.others.iter().map(|(c, p)| (*c, &p[..])));
    cpus.sort_by_key(|c| c.0);
    cpus.dedup_by_key(|c| c.0);
    let dat = r.dat.and_then(|layout| {
        trace_dat(&DatInput {
            decoder: r.decoder,
            layout,
            cpus: &cpus,
            comms: r.comms,
            events,
        })
    });
    let text = (r.text || dat.is_none()).then(|| {
        let bytes: usize = cpus.iter().map(|c| c.1.len()).sum();
        let mut text = String::with_capacity(bytes * 2);
        for (cpu, pages) in cpus.iter().filter(|c| c.0 == r.cpu || !c.1.is_empty()) {
            let _ = r.decoder.render_text(*cpu, pages, r.comms, &mut text);
        }
        text
    });
    (text, dat)
}

/// The marker a spike would have written, placed after the last event of its CPU, from the
/// thread that armed its timer for the intended time (None when that `hrtimer_start` is not
/// among the events). timerlat's timer (`timerlat_irq`, armed by the thread it wakes): its
/// sample gives the intended time as its own time less its latency, a little after the
/// expiry; the nearest expiry within [`TIMERLAT_SLACK_NS`] is the marker's intended time.
fn end_marker<'a>(events: &[Event<'a>], s: Spike) -> Option<(Event<'a>, Spike)> {
    let exact = events.iter().rev().find(|e| {
        e.cpu == s.cpu
            && matches!(&e.kind, EventKind::HrtimerStart { function, expires, .. }
                if function == "hrtimer_wakeup" && *expires == s.intended_ns)
    });
    let (armer, s) = match exact {
        Some(a) => (a, s),
        None => {
            let (a, exp) = events
                .iter()
                .filter(|e| e.cpu == s.cpu)
                .filter_map(|e| match &e.kind {
                    EventKind::HrtimerStart {
                        function, expires, ..
                    } if function == "timerlat_irq" => Some((e, *expires)),
                    _ => None,
                })
                .min_by_key(|(_, x)| x.abs_diff(s.intended_ns))?;
            if exp.abs_diff(s.intended_ns) > TIMERLAT_SLACK_NS || exp > s.actual_ns {
                return None;
            }
            let s = Spike {
                intended_ns: exp,
                latency_ns: s.actual_ns - exp,
                ..s
            };
            (a, s)
        }
    };
    let last = events
        .iter()
        .filter(|e| e.cpu == s.cpu)
        .map(|e| e.ts)
        .max()?;
    let m = Event {
        line: events.iter().map(|e| e.line).max().unwrap_or(0) + 1,
        cpu: s.cpu,
        ts: last,
        task_comm: armer.task_comm.clone(),
        pid: armer.pid,
        flags: Flags::default(),
        kind: EventKind::Marker {
            text: s.marker().into(),
        },
    };
    Some((m, s))
}

/// A noise gap's marker, as the spinning thread would write it: at the gap's end on its CPU,
/// from the task there at its start (the last event at or before it names it; when the
/// capture begins after the start, its CPU's first event: the thread spins with no event,
/// and the time before that event stays unexplained). None without an event of that CPU.
fn noise_marker<'a>(events: &[Event<'a>], s: Spike) -> Option<(Event<'a>, Spike)> {
    let on_cpu = || events.iter().filter(|e| e.cpu == s.cpu);
    let spinner = on_cpu()
        .filter(|e| e.ts <= s.intended_ns)
        .max_by_key(|e| e.ts)
        .or_else(|| on_cpu().min_by_key(|e| e.ts))?;
    let m = Event {
        line: events.iter().map(|e| e.line).max().unwrap_or(0) + 1,
        cpu: s.cpu,
        ts: s.actual_ns,
        task_comm: spinner.task_comm.clone(),
        pid: spinner.pid,
        flags: Flags::default(),
        kind: EventKind::Marker {
            text: format!("{} noise", s.marker()).into(),
        },
    };
    Some((m, s))
}

/// How far a timerlat sample's intended time (its time less its latency) may lie from the
/// expiry of the timer it came from: the kernel writes the sample within microseconds of
/// measuring it (tens under an emulator), far below any period (≥ 100 µs).
const TIMERLAT_SLACK_NS: u64 = 50_000;

/// What [`trace_dat`] writes: pages of some CPUs (ascending), their task names, and the events
/// decoded from them (whose kernel symbols the file names; none: only `hrtimer_wakeup`).
pub struct DatInput<'a> {
    pub decoder: &'a RawDecoder,
    pub layout: DatLayout<'a>,
    pub cpus: &'a [(u32, &'a [u8])],
    pub comms: &'a Comms,
    pub events: &'a [Event<'a>],
}

/// Pages of some CPUs as a trace-cmd file (version 6): the instance's header and format
/// files, the task names and the few kernel symbols its events name. None: a layout the file
/// cannot carry (an event not named `system/name`, no CPU).
pub fn trace_dat(d: &DatInput) -> Option<Vec<u8>> {
    let mut ftrace = Vec::new();
    let mut systems: Vec<(String, Vec<Cow<[u8]>>)> = Vec::new();
    for (e, f) in d.layout.events.iter().zip(d.layout.formats) {
        let (sys, _) = e.split_once('/')?;
        let f = Cow::Borrowed(f.as_bytes());
        if sys == "ftrace" {
            ftrace.push(f);
        } else if let Some(s) = systems.iter_mut().find(|s| s.0 == sys) {
            s.1.push(f);
        } else {
            systems.push((sys.to_string(), vec![f]));
        }
    }
    let syms = named_symbols(d.decoder.symbols(), d.events);
    let dat = TraceDat {
        big_endian: cfg!(target_endian = "big"),
        long_size: std::mem::size_of::<usize>() as u8,
        page_size: u32::try_from(d.decoder.page_size()).ok()?,
        clock: Cow::Borrowed(d.layout.clock),
        header_page: Cow::Borrowed(d.layout.header_page.as_bytes()),
        header_event: Cow::Borrowed(d.layout.header_event.as_bytes()),
        ftrace_formats: ftrace,
        event_formats: systems,
        kallsyms: (!syms.is_empty()).then(|| Cow::Owned(syms.into_bytes())),
        printk: None,
        cmdlines: Cow::Owned(d.comms.to_saved_cmdlines().into_bytes()),
        // CPUs 0..=last: a CPU's number is its place in the file; the others are empty.
        cpus: (0..=d.cpus.last()?.0)
            .map(|c| CpuData {
                cpu: c,
                pages: Cow::Borrowed(d.cpus.iter().find(|x| x.0 == c).map_or(&[][..], |x| x.1)),
            })
            .collect(),
        cpu_stats: vec![],
    };
    let bytes: usize = d.cpus.iter().map(|c| c.1.len()).sum();
    let mut out = Vec::with_capacity(bytes + (64 << 10));
    tracedat::write(&dat, &mut out).ok()?;
    Some(out)
}

/// The spike's record from its capture's analysis: the sample's (causes, timeline, lanes) at
/// the thread's own times, or, when the marker was not found ([`Analyzed::sample`] None), a
/// record whose timeline says why. Its `trace_file` is the recorder's to set.
pub fn spike_record(a: &Analyzed, s: Spike) -> SpikeRecord {
    let mut spike = match &a.sample {
        Some(x) => x.to_spike(),
        None => SpikeRecord {
            cpu: s.cpu,
            at_ns: s.intended_ns,
            latency_ns: s.latency_ns,
            causes: vec![],
            trace_file: None,
            timeline: vec![a.why.clone()],
            timeline_events: vec![],
            lanes: None,
            steal: None,
            others: None,
            timerlat: None,
        },
    };
    spike.latency_ns = s.latency_ns;
    spike.at_ns = s.intended_ns;
    // run.json keeps the timeline as data and, for outside readers, as its text lines.
    spike.timeline = crate::timeline::lines(&spike);
    spike
}

/// A spike's `analysis.txt`: its times, its timeline, then the warnings (what the parser
/// skipped — an odd task name can cost lines, never the analysis —, a cut last line, time
/// going backwards, events the kernel lost), escaped: the trace's text is untrusted.
pub fn analysis_txt(n: u32, s: Spike, spike: &SpikeRecord, warnings: &[String]) -> String {
    let mut txt = format!(
        "spike {n}: CPU {}, intended {} ns, actual {} ns, latency {:.1} us\n",
        s.cpu,
        s.intended_ns,
        s.actual_ns,
        s.latency_ns as f64 / 1000.0
    );
    for l in &spike.timeline {
        txt.push_str(l);
        txt.push('\n');
    }
    for w in warnings {
        txt.push_str(&format!("warning: {}\n", escape(w)));
    }
    txt
}

/// The time of the marker of the spike on `cpu` due at `intended`, among the events of
/// `pages` from `from_ns` on (the last such marker; None when it is not there).
pub fn marker_time(
    dec: &RawDecoder,
    cpu: u32,
    pages: &[u8],
    from_ns: u64,
    intended: u64,
) -> Option<u64> {
    let prefix = format!("LATLAB_STOP cpu={cpu} intended={intended} ");
    let comms = Comms::default();
    let mut at = None;
    let _ = dec.for_each(cpu, pages, &comms, |item| {
        if let RawItem::Event(e, _) = item {
            if e.ts >= from_ns {
                if let EventKind::Marker { text } = &e.kind {
                    if text.starts_with(&prefix) {
                        at = Some(e.ts);
                    }
                }
            }
        }
    });
    at
}

/// Where to split `pages` at a marker's time (byte offsets): the session's pages end with the
/// one holding the marker, the rest start with it (it is in both: its later events are the
/// next session's, and each side is trimmed to its span).
pub fn split_at(layout: &PageLayout, pages: &[u8], at_ns: u64) -> (usize, usize) {
    let ps = layout.page_size();
    let n = pages.len() / ps;
    // The first page that starts after the marker; the one before it holds the marker.
    let after = (0..n)
        .find(|&i| {
            layout
                .time_stamp(&pages[i * ps..(i + 1) * ps])
                .is_none_or(|t| t > at_ns)
        })
        .unwrap_or(n);
    (after * ps, after.saturating_sub(1) * ps)
}

mod others;
#[cfg(test)]
mod tests;

pub use others::{others_evidence, others_window, OTHERS_LOOKBACK_NS};
