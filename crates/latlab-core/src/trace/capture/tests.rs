//! A spike's capture → analysis → record and files, on the matched binary fixture (the 17 pages
//! of `tests/fixtures/trace/binary/` and the kernel's text of them) with hand-built pages after
//! it for what a recorder adds (the spike's marker, a loss, a bad page), and on the kernel's
//! text fixtures. No root, no tracefs.

use std::cell::RefCell;

use super::*;
use crate::record::{CauseKind, Lane, LaneSegment, SpikeLanes, SILENT_GAP};
use crate::trace::parser::{Parser, Record};
use crate::trace::raw::tests::{
    cmdlines_of_text, decoder, print, text_events, Page, FORMATS, HEADER_EVENT, HEADER_PAGE, PAGES,
};
use crate::trace::raw::{decode_all, decoder_for, parse_header_page};

/// The fixture's formats (the first 11; the 12th repeats the print format) by `system/name`.
const EVENTS: [&str; 11] = [
    "ftrace/print",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
    "sched/sched_migrate_task",
    "sched/sched_switch",
    "sched/sched_wakeup",
    "sched/sched_waking",
];

fn names() -> (Vec<String>, Vec<String>) {
    (
        EVENTS.iter().map(|e| e.to_string()).collect(),
        FORMATS[..11].iter().map(|f| f.to_string()).collect(),
    )
}

fn layout<'a>(events: &'a [String], formats: &'a [String]) -> DatLayout<'a> {
    DatLayout {
        header_page: HEADER_PAGE,
        header_event: HEADER_EVENT,
        events,
        formats,
        clock: "mono",
    }
}

/// A spike of bash (18175) on CPU 0: due 300 µs before the fixture's last event, its clock
/// read 2 µs after it, its marker on a page of its own after the fixture's.
fn spike() -> Spike {
    let last = text_events().last().unwrap().ts;
    let (intended_ns, actual_ns) = (last - 300_000, last + 2_000);
    Spike {
        cpu: 0,
        intended_ns,
        actual_ns,
        latency_ns: actual_ns - intended_ns,
    }
}

/// A page at `ts` holding `s`'s marker (written by pid 18175).
fn marker_page(s: Spike, ts: u64) -> Page {
    let mut p = Page::new(ts);
    p.event(0, &print(18175, &format!("{}\n", s.marker())), true);
    p
}

/// A pid no scheduler event of the fixture names (it writes a note before the marker).
const STRANGER: i32 = 424_242;

/// The fixture's pages and the spike's marker page, a stranger's note before the marker.
fn captured(s: Spike) -> Vec<u8> {
    let mut pages = PAGES.to_vec();
    let mut p = Page::new(s.actual_ns + 1_000);
    p.event(0, &print(STRANGER, "a note\n"), true);
    p.event(10, &print(18175, &format!("{}\n", s.marker())), true);
    pages.extend(p.bytes());
    pages
}

fn no_names(_: i64) -> Option<String> {
    None
}

/// The whole path of a traced spike: its pages decoded, analyzed and rendered; its record and
/// `analysis.txt`; its `trace.txt` and a `trace.dat` that trace-cmd's layout reads back with
/// every event. Rendered later from the pages and the names the analysis kept, the files are
/// the same bytes. Pids the scheduler events do not name are asked for, once each, and shown
/// by that name.
#[test]
fn a_spikes_pages_become_its_analysis_record_and_files() {
    let dec = decoder();
    let s = spike();
    let pages = captured(s);
    let (events, formats) = names();
    let asked = RefCell::new(Vec::new());
    let comm_of = |pid: i64| {
        asked.borrow_mut().push(pid);
        Some(format!("named-{pid}\n"))
    };
    let a = analyze_pages(&Pages {
        decoder: &dec,
        pages: &pages,
        spike: s,
        place_marker: Place::No,
        render: Render::Now {
            dat: Some(layout(&events, &formats)),
            text: true,
        },
        comm_of: &comm_of,
    });
    let sample = a.sample.as_ref().expect("the spike's sample");
    assert_eq!(
        (sample.pid, sample.latency_ns, sample.intended_ns),
        (18175, s.latency_ns, s.intended_ns)
    );
    assert_eq!(
        a.counts,
        Counts {
            read_as: "binary",
            bytes: 18 * 4096,
            pages: 18,
            events: 1372,
            lost_events: 0,
            lost_unknown: 0,
        }
    );
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    // The pids only saved_cmdlines named in the kernel's text: asked for, each once.
    let mut bare = Comms::default();
    dec.learn_comms(&pages, &mut bare).unwrap();
    let mut unnamed_pids: Vec<i64> = Vec::new();
    let mut evs = Vec::new();
    dec.decode_cpu(0, &pages, &bare, &mut evs).unwrap();
    for e in evs.iter().filter(|e| e.task_comm == "<...>") {
        if !unnamed_pids.contains(&e.pid) {
            unnamed_pids.push(e.pid);
        }
    }
    unnamed_pids.sort_unstable();
    assert_eq!(unnamed_pids, [i64::from(STRANGER)]);
    assert_eq!(*asked.borrow(), unnamed_pids);
    for &pid in &unnamed_pids {
        assert_eq!(a.comms.get(pid), format!("named-{pid}"));
    }
    // trace.txt: the kernel's layout, every event, the marker, the names.
    let text = a.text.as_deref().expect("trace.txt asked for");
    assert!(
        text.starts_with("# tracer: nop (latlab: CPU 0 decoded from"),
        "{}",
        &text[..200]
    );
    assert!(text.contains(&s.marker()));
    assert!(text.contains(&format!("named-{STRANGER}-{STRANGER} ")));
    assert!(!text.contains("<...>-"));
    let lines = Parser::new(text)
        .filter(|r| matches!(r, Record::Event(_)))
        .count();
    assert_eq!(lines, 1372);
    // trace.dat: the same pages, read back with its own layout and names.
    let dat = a.dat.as_ref().expect("a trace.dat");
    let file = tracedat::read(dat).unwrap();
    assert_eq!(file.clock, "mono");
    assert_eq!(file.cpus.len(), 1);
    assert_eq!(&file.cpus[0].pages[..], &pages[..]);
    let (back, mut comms) = decoder_for(&file).unwrap();
    let (evs, lost, _) = decode_all(&back, &file, &mut comms).unwrap();
    assert_eq!((evs.len(), lost.len()), (1372, 0));
    assert!(evs
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Marker { text } if text.starts_with("LATLAB_STOP"))));
    assert_eq!(
        comms.get(unnamed_pids[0]),
        format!("named-{}", unnamed_pids[0])
    );
    // The record and analysis.txt.
    let rec = spike_record(&a, s);
    assert_eq!(
        (rec.cpu, rec.at_ns, rec.latency_ns),
        (0, s.intended_ns, s.latency_ns)
    );
    assert!(rec.causes.iter().map(|c| c.ns).sum::<u64>() <= rec.latency_ns);
    assert!(rec.lanes.is_some() && !rec.timeline_events.is_empty());
    assert_eq!(rec.timeline, crate::timeline::lines(&rec));
    assert!(rec.trace_file.is_none(), "the recorder's to set");
    let txt = analysis_txt(7, s, &rec, &a.warnings);
    let head = format!(
        "spike 7: CPU 0, intended {} ns, actual {} ns, latency 302.0 us\n",
        s.intended_ns, s.actual_ns
    );
    assert!(txt.starts_with(&head), "{txt}");
    assert_eq!(txt, format!("{head}{}\n", rec.timeline.join("\n")));
    // Rendered later (the files kept as pages until the run ends): the same bytes.
    let later = render(&Rendering {
        decoder: &dec,
        cpu: 0,
        pages: &pages,
        comms: &a.comms,
        dat: Some(layout(&events, &formats)),
        text: true,
        others: &[],
    });
    assert_eq!(later.0, a.text);
    assert_eq!(later.1, a.dat);
    // By default a spike keeps its trace.dat alone: the same file, no text rendered.
    let dat_only = render(&Rendering {
        decoder: &dec,
        cpu: 0,
        pages: &pages,
        comms: &a.comms,
        dat: Some(layout(&events, &formats)),
        text: false,
        others: &[],
    });
    assert_eq!((dat_only.0, dat_only.1), (None, a.dat.clone()));
    // Render::Later renders nothing, and the analysis is the same.
    let b = analyze_pages(&Pages {
        render: Render::Later,
        comm_of: &no_names,
        decoder: &dec,
        pages: &pages,
        spike: s,
        place_marker: Place::No,
    });
    assert!(b.text.is_none() && b.dat.is_none());
    assert_eq!(format!("{:?}", b.sample), format!("{:?}", a.sample));
    // Without a layout, no trace.dat: the text is the spike's trace, asked for or not.
    let c = analyze_pages(&Pages {
        render: Render::Now {
            dat: None,
            text: false,
        },
        ..pages_of(&dec, &pages, s)
    });
    assert!(c.dat.is_none());
    assert!(c.text.is_some_and(|t| t.contains(&s.marker())));
}

fn pages_of<'a>(dec: &'a RawDecoder, pages: &'a [u8], s: Spike) -> Pages<'a> {
    Pages {
        decoder: dec,
        pages,
        spike: s,
        place_marker: Place::No,
        render: Render::Later,
        comm_of: &no_names,
    }
}

/// A spike whose marker is not in its pages (overwritten, lost) or whose pages do not decode
/// gets a record that says why, and nothing else: no causes, no timeline data, no lanes.
#[test]
fn a_spike_without_its_marker_says_why() {
    let dec = decoder();
    let s = spike();
    let pages = captured(s);
    let other = Spike {
        intended_ns: s.intended_ns - 1,
        ..s
    };
    let a = analyze_pages(&pages_of(&dec, &pages, other));
    assert!(a.sample.is_none());
    assert_eq!(
        a.why,
        "the spike's marker is not in the trace (overwritten or lost)"
    );
    let rec = spike_record(&a, other);
    assert_eq!(
        (rec.at_ns, rec.latency_ns, rec.causes.len()),
        (other.intended_ns, other.latency_ns, 0)
    );
    assert_eq!(rec.timeline, std::slice::from_ref(&a.why));
    assert!(rec.lanes.is_none() && rec.timeline_events.is_empty());
    let txt = analysis_txt(2, other, &rec, &a.warnings);
    assert!(txt.ends_with(&format!("{}\n", a.why)), "{txt}");
    // Not whole pages: the decoder's reason, the bytes counted, nothing decoded.
    let a = analyze_pages(&pages_of(&dec, &pages[..pages.len() - 1], s));
    assert!(a.sample.is_none());
    assert!(!a.why.is_empty() && !a.why.contains("marker"), "{}", a.why);
    assert_eq!(
        (a.counts.read_as, a.counts.bytes, a.counts.events),
        ("binary", pages.len() as u64 - 1, 0)
    );
}

/// Events the kernel lost inside the capture (a page flagged "missed events") and pages that
/// do not hold together are warnings in `analysis.txt`, escaped like every text of the trace;
/// a loss before the first event (the ring's overwritten past) is not.
#[test]
fn losses_and_bad_pages_inside_a_capture_are_warnings() {
    let dec = decoder();
    let s = spike();
    let mut lossy = marker_page(s, s.actual_ns + 1_000);
    lossy.missed = Some(Some(7));
    let mut pages = PAGES.to_vec();
    pages.extend(lossy.bytes());
    let a = analyze_pages(&pages_of(&dec, &pages, s));
    assert!(a.sample.is_some());
    assert_eq!((a.counts.lost_events, a.counts.lost_unknown), (7, 0));
    assert_eq!(
        a.warnings,
        ["the kernel lost events at 1 place(s) inside this CPU's trace (7 counted)"]
    );
    // The same loss on the first page: the ring's past, no warning.
    let mut first = Page::new(1_000);
    first.missed = Some(None);
    let mut pages = first.bytes();
    pages.extend_from_slice(PAGES);
    pages.extend(marker_page(s, s.actual_ns + 1_000).bytes());
    let a = analyze_pages(&pages_of(&dec, &pages, s));
    assert_eq!(a.counts.lost_unknown, 1);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    // A page whose commit runs past its end.
    let mut bad = marker_page(s, s.actual_ns + 1_000).bytes();
    bad[8..16].copy_from_slice(&5000u64.to_ne_bytes());
    let mut pages = captured(s);
    pages.extend(bad);
    let a = analyze_pages(&pages_of(&dec, &pages, s));
    assert!(
        a.warnings
            .iter()
            .any(|w| w.starts_with("binary trace: 1 inconsistent page(s)")),
        "{:?}",
        a.warnings
    );
    let rec = spike_record(&a, s);
    let txt = analysis_txt(1, s, &rec, &["name \x1b[31m".to_string()]);
    assert!(txt.ends_with("warning: name \\u{1b}[31m\n"), "{txt}");
}

/// A real capture of CPU 1 with a `sched_switch` missing, and its spike (the marker's times).
const MISSING_SWITCH: &str =
    include_str!("../../../tests/fixtures/trace/trace-missing-switch-cpu1.txt");

fn missing_switch_spike() -> Spike {
    Spike {
        cpu: 1,
        intended_ns: 2208775129678,
        actual_ns: 2208777744920,
        latency_ns: 2615242,
    }
}

/// [`MISSING_SWITCH`]'s events, parsed.
fn missing_switch_events() -> Vec<Event<'static>> {
    Parser::new(MISSING_SWITCH)
        .filter_map(|r| match r {
            Record::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

/// A spike that found the recorder stopped by another CPU's spike has no marker of its own:
/// one is placed after its CPU's last event, from the thread whose timer was due at the
/// intended time, and the analysis of the kernel's text with its real marker taken out finds
/// the same spike. Without that thread's `hrtimer_start` in the capture, no sample.
#[test]
fn a_spike_that_found_the_recorder_stopped_gets_a_placed_marker() {
    let events = missing_switch_events();
    let real = events
        .iter()
        .find(|e| matches!(&e.kind, EventKind::Marker { .. }))
        .expect("the fixture's marker");
    let EventKind::Marker { text: m } = &real.kind else {
        unreachable!()
    };
    let num = |k: &str| -> u64 {
        let v = m.split(&format!("{k}=")).nth(1).unwrap();
        v.split(' ').next().unwrap().trim().parse().unwrap()
    };
    let s = Spike {
        cpu: 1,
        intended_ns: num("intended"),
        actual_ns: num("actual"),
        latency_ns: num("latency"),
    };
    let without: Vec<Event> = events
        .iter()
        .filter(|e| !matches!(&e.kind, EventKind::Marker { .. }))
        .cloned()
        .collect();
    let (placed, same) = end_marker(&without, s).expect("the thread's timer is in the trace");
    assert_eq!(same, s);
    let last = without.iter().filter(|e| e.cpu == 1).map(|e| e.ts).max();
    assert_eq!(Some(placed.ts), last);
    assert_eq!((placed.pid, &*placed.task_comm), (3211, "lat-sleeper"));
    assert_eq!(
        placed.kind,
        EventKind::Marker {
            text: s.marker().into()
        }
    );
    let mut with = without.clone();
    with.push(placed);
    let a = analyze_events(&with, &[], &options()).unwrap();
    let got = a
        .spikes
        .iter()
        .find(|x| x.intended_ns == s.intended_ns)
        .expect("the spike, from the placed marker");
    assert_eq!((got.pid, got.latency_ns), (3211, s.latency_ns));
    // The binary fixture has no hrtimer events: nothing to place the marker from.
    let dec = decoder();
    let pages = captured(spike());
    let a = analyze_pages(&Pages {
        place_marker: Place::Timer,
        ..pages_of(&dec, &pages, spike())
    });
    assert!(a.sample.is_none());
    assert_eq!(a.why, "the thread's timer is not in the capture");
    assert_eq!(a.counts.events, 1372, "counted before the analysis");
}

/// timerlat's spikes (their marker written on another CPU by the reader) get a placed marker
/// from the thread that armed `timerlat_irq`: the sample's intended time (its time less its
/// latency) lies a little after the expiry, and the nearest expiry within the slack becomes
/// the marker's intended time. The same fixture with the sleeper's timer renamed.
#[test]
fn a_timerlat_spike_gets_its_marker_from_the_timerlat_timer() {
    let s = missing_switch_spike();
    let events: Vec<Event> = missing_switch_events()
        .into_iter()
        .filter(|e| !matches!(&e.kind, EventKind::Marker { .. }))
        .map(|mut e| {
            if let EventKind::HrtimerStart { function, .. } = &mut e.kind {
                if function == "hrtimer_wakeup" {
                    *function = "timerlat_irq".into();
                }
            }
            e
        })
        .collect();
    // The sample's view: written 3 µs after the thread's latency was measured.
    let sample = Spike {
        intended_ns: s.intended_ns + 3_000,
        latency_ns: s.latency_ns - 3_000,
        ..s
    };
    let (placed, at_expiry) =
        end_marker(&events, sample).expect("timerlat's timer is in the trace");
    assert_eq!(at_expiry, s);
    assert_eq!((placed.pid, &*placed.task_comm), (3211, "lat-sleeper"));
    assert_eq!(
        placed.kind,
        EventKind::Marker {
            text: s.marker().into()
        },
        "the expiry is the intended time; the latency runs from it"
    );
    // Beyond the slack (or past the wake-up), no timer of this spike: no marker.
    let far = Spike {
        intended_ns: s.intended_ns + TIMERLAT_SLACK_NS + 1,
        ..s
    };
    assert!(end_marker(&events, far).is_none());
}

/// The kernel's text (the recorder's fallback) gets the same analysis as pages: the spike's
/// sample, the counts of a text capture; text without events says why.
#[test]
fn the_kernels_text_is_analyzed_as_a_capture() {
    let text = MISSING_SWITCH;
    let s = missing_switch_spike();
    let a = analyze_kernel_text(text, s);
    let sample = a.sample.as_ref().expect("the spike");
    assert_eq!((sample.pid, sample.latency_ns), (3211, s.latency_ns));
    assert_eq!(
        (a.counts.read_as, a.counts.bytes),
        ("text", text.len() as u64)
    );
    assert!(a.counts.events > 50, "{:?}", a.counts);
    let rec = spike_record(&a, s);
    assert!(!rec.causes.is_empty());
    let a = analyze_kernel_text("# tracer: nop\n", s);
    assert!(a.sample.is_none());
    assert!(
        a.why.starts_with("trace not analyzable: line "),
        "{}",
        a.why
    );
}

/// The recorder that never stops cuts a CPU's pages at a spike's marker: the marker's time
/// (the last one of that spike from a time on), and where its session's pages end and the
/// next session's begin (the page holding the marker is in both).
#[test]
fn a_session_ends_at_its_spikes_marker() {
    let dec = decoder();
    let layout = parse_header_page(HEADER_PAGE).unwrap();
    let s = spike();
    let (t1, t2) = (s.actual_ns + 1_000, s.actual_ns + 50_000);
    let mut pages = PAGES.to_vec();
    pages.extend(marker_page(s, t1).bytes());
    pages.extend(marker_page(s, t2).bytes());
    assert_eq!(marker_time(&dec, 0, &pages, 0, s.intended_ns), Some(t2));
    assert_eq!(marker_time(&dec, 0, &pages, t2 + 1, s.intended_ns), None);
    assert_eq!(marker_time(&dec, 0, &pages, 0, s.intended_ns + 1), None);
    // The prefix names the CPU: the same marker read as another CPU's is not that spike's.
    assert_eq!(marker_time(&dec, 1, &pages, 0, s.intended_ns), None);
    let ps = 4096;
    assert_eq!(split_at(&layout, &pages, t1), (18 * ps, 17 * ps));
    assert_eq!(split_at(&layout, &pages, t2), (19 * ps, 18 * ps));
    assert_eq!(split_at(&layout, &pages, 0), (0, 0));
    assert_eq!(split_at(&layout, &[], t1), (0, 0));
}

/// A trace.dat of several CPUs numbers them by place (a CPU without pages is empty); a layout
/// whose event names are not `system/name`, or no CPU at all, gives none.
#[test]
fn trace_dat_places_cpus_by_number() {
    let dec = decoder();
    let (events, formats) = names();
    let comms = Comms::from_saved_cmdlines(&cmdlines_of_text());
    let cpus: [(u32, &[u8]); 2] = [(0, PAGES), (2, PAGES)];
    let dat = trace_dat(&DatInput {
        decoder: &dec,
        layout: layout(&events, &formats),
        cpus: &cpus,
        comms: &comms,
        events: &[],
    })
    .unwrap();
    let file = tracedat::read(&dat).unwrap();
    let sizes: Vec<(u32, usize)> = file.cpus.iter().map(|c| (c.cpu, c.pages.len())).collect();
    assert_eq!(sizes, [(0, PAGES.len()), (1, 0), (2, PAGES.len())]);
    assert_eq!(file.ftrace_formats.len(), 1);
    assert_eq!(
        file.event_formats
            .iter()
            .map(|(s, f)| (s.as_str(), f.len()))
            .collect::<Vec<_>>(),
        [("irq", 4), ("irq_vectors", 2), ("sched", 4)]
    );
    let mut bad = events.clone();
    bad[3] = "softirq_entry".into();
    let input = |l, cpus| DatInput {
        decoder: &dec,
        layout: l,
        cpus,
        comms: &comms,
        events: &[],
    };
    assert!(trace_dat(&input(layout(&bad, &formats), &cpus)).is_none());
    assert!(trace_dat(&input(layout(&events, &formats), &[])).is_none());
}

/// A stretch of the spike's CPU in its lanes, from `a` to `b` (absolute ns) after `at`.
fn segment(at: u64, lane: Lane, kind: CauseKind, name: &str, a: u64, b: u64) -> LaneSegment {
    LaneSegment {
        cpu: 0,
        lane,
        cause: kind,
        name: name.into(),
        pid: 0,
        start_ns: a as i64 - at as i64,
        end_ns: b as i64 - at as i64,
    }
}

/// The other CPUs' evidence: the fixture's pages read as CPU 1 beside a spike of CPU 0. Its
/// events inside the spike's silent gap and switch-to-user are counted (the oracle: the same
/// events in the kernel's text), its task when the first stretch began named; an IRQ
/// stretch counts nothing, and a spike without a silent stretch or another CPU has none.
#[test]
fn the_other_cpus_events_in_the_silent_stretches_are_counted() {
    let dec = decoder();
    let text = text_events();
    // Stretches between fixture events: the gap holds events i+1..=i+3, the switch-to-user
    // events j+1..=j+2, the IRQ stretch k+1 (not counted). The text rounds to the µs what
    // the pages hold in ns: a stretch starts 1 µs after an event and ends 1 µs before one,
    // where the events around its ends are 2 µs apart or more.
    let apart = |a: usize, n: usize| {
        (a..text.len() - n - 1)
            .find(|&x| {
                text[x + 1].ts - text[x].ts >= 2_000 && text[x + n + 1].ts - text[x + n].ts >= 2_000
            })
            .expect("such a stretch in the fixture")
    };
    let (i, j, k) = (apart(100, 3), apart(400, 2), apart(700, 1));
    let gap = (text[i].ts + 1_000, text[i + 4].ts - 1_000);
    let own = (text[j].ts + 1_000, text[j + 3].ts - 1_000);
    let irq = (text[k].ts + 1_000, text[k + 2].ts - 1_000);
    let at = gap.0;
    let mut rec = SpikeRecord {
        cpu: 0,
        at_ns: at,
        latency_ns: own.1 - at,
        causes: vec![],
        trace_file: None,
        timeline: vec![],
        timeline_events: vec![],
        lanes: Some(SpikeLanes {
            segments: vec![
                segment(
                    at,
                    Lane::Stall,
                    CauseKind::Unknown,
                    SILENT_GAP,
                    gap.0,
                    gap.1,
                ),
                segment(at, Lane::Irq, CauseKind::Irq, "IRQ 4", irq.0, irq.1),
                segment(
                    at,
                    Lane::Measuring,
                    CauseKind::Task,
                    "switch-to-user (x)",
                    own.0,
                    own.1,
                ),
            ],
            dropped: 0,
        }),
        steal: None,
        others: None,
        timerlat: None,
    };
    let inside = |a: u64, b: u64| text.iter().filter(|e| e.ts >= a && e.ts < b).count() as u64;
    let want = inside(gap.0, gap.1) + inside(own.0, own.1);
    assert_eq!(want, 5, "the stretches as chosen");
    let mut comms = Comms::default();
    dec.learn_comms(PAGES, &mut comms).unwrap();
    let others = vec![(1, PAGES.to_vec())];
    let o = others_evidence(&dec, &rec, &others, &comms).expect("evidence");
    let before = &text[i];
    let running = match &before.kind {
        EventKind::SchedSwitch { next, .. } if next.pid == 0 => "idle".to_string(),
        EventKind::SchedSwitch { next, .. } => next.comm.to_string(),
        _ if before.pid == 0 => "idle".to_string(),
        _ => before.task_comm.to_string(),
    };
    assert_eq!(
        o,
        crate::record::SpikeOthers {
            silent_ns: (gap.1 - gap.0) + (own.1 - own.0),
            cpus: vec![crate::record::OtherCpu {
                cpu: 1,
                events: want,
                running: Some(running),
            }],
        }
    );
    assert!(o.others_active());
    // No other CPU, or no silent stretch: no evidence.
    assert_eq!(others_evidence(&dec, &rec, &[], &comms), None);
    rec.lanes
        .as_mut()
        .unwrap()
        .segments
        .retain(|g| g.lane == Lane::Irq);
    assert_eq!(others_evidence(&dec, &rec, &others, &comms), None);
}

/// A spike's files with the other CPUs' pages: trace.dat holds every CPU, each read back
/// whole; the text holds each CPU's section in CPU order.
#[test]
fn the_files_hold_the_other_cpus_pages() {
    let dec = decoder();
    let (events, formats) = names();
    let mut comms = Comms::default();
    dec.learn_comms(PAGES, &mut comms).unwrap();
    let others = vec![(2, PAGES.to_vec())];
    let (text, dat) = render(&Rendering {
        decoder: &dec,
        cpu: 0,
        pages: PAGES,
        comms: &comms,
        dat: Some(layout(&events, &formats)),
        text: true,
        others: &others,
    });
    let file = tracedat::read(dat.as_deref().expect("a trace.dat")).unwrap();
    let with_pages: Vec<u32> = file
        .cpus
        .iter()
        .filter(|c| !c.pages.is_empty())
        .map(|c| c.cpu)
        .collect();
    assert_eq!(with_pages, [0, 2]);
    assert!(file
        .cpus
        .iter()
        .all(|c| c.pages.is_empty() || &c.pages[..] == PAGES));
    let text = text.expect("text asked for");
    let cpu0 = text.find("CPU 0 decoded").expect("CPU 0's section");
    let cpu2 = text.find("CPU 2 decoded").expect("CPU 2's section");
    assert!(cpu0 < cpu2);
    assert_eq!(text.matches("[002]").count(), text.matches("[000]").count());
}

/// The osnoise tracer's noises (their markers written on another CPU by latlab's reader) get a
/// gap's marker placed at the noise's end, from the task on its CPU at its start; the analysis
/// then charges the noise from its start to its end. A capture that begins after the start
/// takes the CPU's first task; a CPU without events places nothing.
#[test]
fn a_noise_of_the_tracer_gets_a_gap_marker_at_its_end() {
    let events: Vec<Event> = missing_switch_events()
        .into_iter()
        .filter(|e| !matches!(&e.kind, EventKind::Marker { .. }))
        .collect();
    let on1: Vec<&Event> = events.iter().filter(|e| e.cpu == 1).collect();
    let (first, last) = (on1[0].ts, on1[on1.len() - 1].ts);
    let start = first + (last - first) / 3;
    let s = Spike {
        cpu: 1,
        intended_ns: start,
        actual_ns: start + 500_000,
        latency_ns: 500_000,
    };
    let (placed, same) = noise_marker(&events, s).expect("CPU 1 has events");
    assert_eq!(same, s);
    assert_eq!(placed.ts, s.actual_ns);
    let at_start = on1.iter().rev().find(|e| e.ts <= start).unwrap();
    assert_eq!(placed.pid, at_start.pid);
    let EventKind::Marker { text } = &placed.kind else {
        panic!("{placed:?}")
    };
    assert_eq!(*text, format!("{} noise", s.marker()));
    let mut with = events.clone();
    with.push(placed);
    with.sort_by_key(|e| e.ts);
    let a = analyze_events(&with, &[], &options()).unwrap();
    let got = a
        .spikes
        .iter()
        .find(|x| x.intended_ns == start)
        .unwrap_or_else(|| panic!("the gap, from the placed marker: {:?}", a.spikes));
    assert!(got.noise);
    assert_eq!(
        (got.pid, got.latency_ns, got.actual_ns),
        (at_start.pid, 500_000, Some(s.actual_ns))
    );
    let charged: u64 = got.causes.iter().map(|c| c.ns).sum();
    assert_eq!(charged + got.unexplained_ns, 500_000, "{:?}", got.causes);
    assert!(charged > 0, "{got:?}");
    // Before the capture: the CPU's first task; another CPU: nothing.
    let early = Spike {
        intended_ns: first - 1_000,
        ..s
    };
    let (p, _) = noise_marker(&events, early).unwrap();
    assert_eq!(p.pid, on1[0].pid);
    assert!(noise_marker(&events, Spike { cpu: 7, ..s }).is_none());
}
