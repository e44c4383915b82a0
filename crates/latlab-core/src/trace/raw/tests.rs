//! The decoder against the kernel's own text of the same ring buffer (the matched fixture
//! pair in `tests/fixtures/trace/binary/`), and against hand-built pages for what the fixture
//! does not hold (time extends, absolute stamps, discarded events, lost events, bad pages).

use super::*;
use crate::trace::event::EventKind;
use crate::trace::parser::{Parser, Record};
use crate::trace::{analyze_events, analyze_text, AnalyzeOptions, SampleMode};

macro_rules! fx {
    ($f:literal) => {
        include_str!(concat!("../../../tests/fixtures/trace/binary/", $f))
    };
}

pub(crate) const HEADER_PAGE: &str = fx!("header_page");
pub(crate) const HEADER_EVENT: &str = fx!("header_event");
pub(crate) const FORMATS: [&str; 12] = [
    fx!("ftrace_print.format"),
    fx!("irq_irq_handler_entry.format"),
    fx!("irq_irq_handler_exit.format"),
    fx!("irq_softirq_entry.format"),
    fx!("irq_softirq_exit.format"),
    fx!("irq_vectors_local_timer_entry.format"),
    fx!("irq_vectors_local_timer_exit.format"),
    fx!("sched_sched_migrate_task.format"),
    fx!("sched_sched_switch.format"),
    fx!("sched_sched_wakeup.format"),
    fx!("sched_sched_waking.format"),
    fx!("ftrace_print.format"),
];
pub(crate) const TEXT: &str = fx!("cpu0.trace.txt");
pub(crate) const PAGES: &[u8] =
    include_bytes!("../../../tests/fixtures/trace/binary/cpu0.trace_pipe_raw");

pub(crate) fn decoder() -> RawDecoder {
    // The print format twice would be two formats with one ID: once.
    RawDecoder::new(HEADER_PAGE, HEADER_EVENT, &FORMATS[..11]).expect("the fixture layout")
}

/// The pid → comm the kernel's text shows (its TASK column: saved_cmdlines at read time),
/// as a `saved_cmdlines` text.
pub(crate) fn cmdlines_of_text() -> String {
    let mut s = String::new();
    for r in Parser::new(TEXT) {
        if let Record::Event(e) = r {
            if e.pid > 0 {
                s.push_str(&format!("{} {}\n", e.pid, e.task_comm));
            }
        }
    }
    s
}

pub(crate) fn text_events() -> Vec<Event<'static>> {
    Parser::new(TEXT)
        .filter_map(|r| match r {
            Record::Event(e) => Some(e.into_owned()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_fixture_layout_is_read_from_its_files() {
    let p = parse_header_page(HEADER_PAGE).unwrap();
    assert_eq!(
        (
            p.ts_offset,
            p.commit_offset,
            p.commit_size,
            p.data_offset,
            p.data_size
        ),
        (0, 8, 8, 16, 4080)
    );
    assert_eq!(p.page_size(), 4096);
    let h = parse_header_event(HEADER_EVENT).unwrap();
    assert_eq!(
        (h.padding, h.time_extend, h.time_stamp, h.data_max),
        (29, 30, 31, 28)
    );
    let f = parse_format(fx!("sched_sched_switch.format")).unwrap();
    assert_eq!(f.id, 372);
    let pc = f.field("prev_comm").unwrap();
    assert_eq!((pc.offset, pc.size, pc.kind), (8, 16, FieldKind::Chars));
    let ps = f.field("prev_state").unwrap();
    assert_eq!((ps.offset, ps.size, ps.signed), (32, 8, true));
    assert_eq!(f.flags.len(), 8);
    assert_eq!(f.flags[7], (0x80, "I".to_string()));
    let i = parse_format(fx!("irq_irq_handler_entry.format")).unwrap();
    assert_eq!(i.field("name").unwrap().kind, FieldKind::DataLoc);
    let s = parse_format(fx!("irq_softirq_entry.format")).unwrap();
    assert_eq!(s.symbols.len(), 10);
    assert_eq!(s.symbols[9], (9, "RCU".to_string()));
    let p = parse_format(fx!("ftrace_print.format")).unwrap();
    assert_eq!(p.field("buf").unwrap().kind, FieldKind::Tail);
}

/// Layouts the decoder does not know are errors (the recorder then reads text), never a
/// guess: a 32-bit commit, another event header, a sched_switch without its fields or with
/// another state encoding, an event name the text could not carry.
#[test]
fn unknown_layouts_are_errors() {
    let f = &FORMATS[..11];
    let commit32 = HEADER_PAGE.replace(
        "local_t commit;\toffset:8;\tsize:8;",
        "local_t commit;\toffset:8;\tsize:4;",
    );
    assert_ne!(commit32, HEADER_PAGE);
    let e = RawDecoder::new(&commit32, HEADER_EVENT, f).unwrap_err();
    assert!(e.to_string().contains("4-byte commit"), "{e}");
    let other_header = HEADER_EVENT.replace("27 bits", "26 bits");
    assert!(RawDecoder::new(HEADER_PAGE, &other_header, f).is_err());
    let no_data = HEADER_PAGE.replace("char data", "char payload");
    assert!(RawDecoder::new(&no_data, HEADER_EVENT, f).is_err());
    let sw = fx!("sched_sched_switch.format");
    for (from, to) in [
        ("next_pid;", "next_tid;"),
        (
            "char prev_comm[16];\toffset:8;\tsize:16;",
            "int prev_comm;\toffset:8;\tsize:4;",
        ),
        (": \"R\"", ": \"Q\""),
    ] {
        let bad = sw.replace(from, to);
        assert_ne!(bad, sw);
        let mut v: Vec<&str> = f.to_vec();
        v[8] = &bad;
        assert!(
            RawDecoder::new(HEADER_PAGE, HEADER_EVENT, &v).is_err(),
            "{from}"
        );
    }
    let mut v: Vec<&str> = f.to_vec();
    let spaced = fx!("irq_vectors_local_timer_entry.format")
        .replace("name: local_timer_entry", "name: local timer");
    v[5] = &spaced;
    assert!(RawDecoder::new(HEADER_PAGE, HEADER_EVENT, &v).is_err());
    // The same ID twice.
    assert!(RawDecoder::new(HEADER_PAGE, HEADER_EVENT, &FORMATS).is_err());
}

/// The 17 pages hold the same 1370 events as the kernel's text, event by event: time to the
/// µs (the text rounds), CPU, pid, flags, kind with every field — and the TASK column too,
/// given the kernel's pid → comm.
#[test]
fn pages_decode_to_the_kernels_text_event_by_event() {
    let d = decoder();
    let comms = Comms::from_saved_cmdlines(&cmdlines_of_text());
    let mut got = Vec::new();
    let st = d.decode_cpu(0, PAGES, &comms, &mut got).unwrap();
    let want = text_events();
    assert_eq!(want.len(), 1370);
    assert_eq!(got.len(), want.len());
    // cpu0.stats: entries 1370, overrun 0, bytes 67264.
    assert_eq!(st.pages, 17);
    assert_eq!(st.events, 1370);
    assert_eq!((st.lost_pages, st.lost_events, st.lost_unknown), (0, 0, 0));
    assert!(st.lost.is_empty());
    assert_eq!((st.bad_pages, st.unknown_events), (0, 0));
    // cpu0.stats's 67264 bytes also count the padding that ends each full page (a page's
    // commit stops before it): 66916 bytes of events + 348 of padding.
    assert_eq!(st.bytes, 66916);
    let tails: u64 = PAGES
        .chunks(4096)
        .take(16)
        .map(|p| 4080 - (u64::from_ne_bytes(p[8..16].try_into().unwrap()) & 0x7ff_ffff))
        .sum();
    assert_eq!(st.bytes + tails, 67264);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!((g.ts + 500) / 1000, w.ts / 1000, "event {i}: ts");
        assert_eq!(
            (g.cpu, g.pid, g.flags, &g.kind, &g.task_comm),
            (w.cpu, w.pid, w.flags, &w.kind, &w.task_comm),
            "event {i}"
        );
        assert_eq!(g.line, i + 1);
    }
    // Every kind latlab reads is in there.
    let has = |f: &dyn Fn(&EventKind) -> bool| got.iter().any(|e| f(&e.kind));
    assert!(has(&|k| matches!(k, EventKind::SchedSwitch { .. })));
    assert!(has(&|k| matches!(k, EventKind::SchedWaking { .. })));
    assert!(has(&|k| matches!(k, EventKind::SoftirqEntry { .. })));
    assert!(has(
        &|k| matches!(k, EventKind::Marker { text } if text == "fixture marker")
    ));
    assert!(got.windows(2).all(|w| w[0].ts <= w[1].ts));
}

/// Rendered, the pages are the kernel's text line by line (but the timestamps, in ns rather
/// than rounded to µs): the TASK, CPU and flags columns (irqs-off, need-resched, hard/soft
/// IRQ, preempt depth, migrate-disable) and every body.
#[test]
fn the_rendering_is_the_kernels_text_but_for_nanoseconds() {
    let d = decoder();
    let comms = Comms::from_saved_cmdlines(&cmdlines_of_text());
    let mut out = String::new();
    let st = d.render_text(0, PAGES, &comms, &mut out).unwrap();
    assert_eq!(st.events, 1370);
    let mine: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    let kernel: Vec<&str> = TEXT.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(mine.len(), kernel.len());
    for (m, k) in mine.iter().zip(&kernel) {
        // `…] d..2.  3554.705446: body` — cut at the timestamp.
        let (mh, mt) = m.split_at(m.find("] ").unwrap() + 8);
        let (kh, kt) = k.split_at(k.find("] ").unwrap() + 8);
        assert_eq!(mh, kh);
        let (mts, mbody) = mt.trim_start().split_once(": ").unwrap();
        let (kts, kbody) = kt.trim_start().split_once(": ").unwrap();
        assert_eq!(mbody, kbody);
        let ns: u64 = mts.replace('.', "").parse().unwrap();
        let us: u64 = kts.replace('.', "").parse().unwrap();
        assert_eq!((ns + 500) / 1000, us, "{m}\n{k}");
    }
}

/// What is rendered parses back to the decoded events (all fields, ns timestamps), and the
/// analysis of the decoded events is the analysis of the rendered text and of the kernel's
/// text (same spikes, same causes).
#[test]
fn render_parse_and_analysis_agree() {
    let d = decoder();
    let comms = Comms::from_saved_cmdlines(&cmdlines_of_text());
    // The fixture and a page with a latlab marker after it (a spike of bash, 18175, on CPU 0
    // whose intended time lies 300 µs before the marker), so markers mode has a sample too.
    let last = text_events().last().unwrap().ts;
    let (intended, actual) = (last - 300_000, last + 2_000);
    let mut p = Page::new(actual + 1_000);
    p.event(
        0,
        &print(
            18175,
            &format!(
                "LATLAB_STOP cpu=0 intended={intended} actual={actual} latency={}\n",
                actual - intended
            ),
        ),
        true,
    );
    let mut pages = PAGES.to_vec();
    pages.extend(p.bytes());
    let pages = &pages[..];
    let mut events = Vec::new();
    d.decode_cpu(0, pages, &comms, &mut events).unwrap();
    let mut text = String::new();
    d.render_text(0, pages, &comms, &mut text).unwrap();
    let back: Vec<Event> = Parser::new(&text)
        .map(|r| match r {
            Record::Event(e) => e,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(back.len(), events.len());
    for (b, e) in back.iter().zip(&events) {
        let (mut b, mut e) = (b.clone(), e.clone());
        b.line = 0;
        e.line = 0;
        assert_eq!(b, e);
    }
    for mode in [SampleMode::Wakeups, SampleMode::Markers] {
        let opts = AnalyzeOptions {
            threshold_ns: 0,
            mode: Some(mode),
            gaps: Vec::new(),
        };
        let a = analyze_events(&events, &[], &opts).unwrap();
        let r = analyze_text(&text, &opts).unwrap();
        match mode {
            SampleMode::Wakeups => assert!(a.spikes.iter().any(|s| !s.causes.is_empty())),
            SampleMode::Markers => {
                assert_eq!(a.spikes.len(), 1);
                assert_eq!(
                    (a.spikes[0].pid, a.spikes[0].latency_ns),
                    (18175, actual - intended)
                );
            }
        }
        assert_eq!(format!("{:?}", a.spikes), format!("{:?}", r.spikes));
        assert_eq!((a.events, a.samples), (r.events, r.samples));
        // The kernel's text has µs: the same analysis as the events rounded to µs.
        let rounded: Vec<Event> = events[..1370]
            .iter()
            .map(|e| Event {
                ts: (e.ts + 500) / 1000 * 1000,
                ..e.clone()
            })
            .collect();
        let a = analyze_events(&rounded, &[], &opts).unwrap();
        let k = analyze_text(TEXT, &opts).unwrap();
        assert_eq!(format!("{:?}", a.spikes), format!("{:?}", k.spikes));
        assert_eq!(a.samples, k.samples);
        if mode == SampleMode::Wakeups {
            assert!(!k.spikes.is_empty());
        }
    }
    let opts = AnalyzeOptions {
        threshold_ns: 0,
        mode: None,
        gaps: Vec::new(),
    };
    assert!(analyze_events(&events, &[], &opts).unwrap().samples > 0);
    assert!(analyze_events(&[], &[], &opts).is_err());
}

/// saved_cmdlines first, then the comms the scheduler events name; `<idle>` and `<...>`.
#[test]
fn comms_come_from_saved_cmdlines_then_the_sched_events() {
    let d = decoder();
    let mut c = Comms::from_saved_cmdlines("18178 sleep\nnot a line\n");
    d.learn_comms(PAGES, &mut c).unwrap();
    assert_eq!(c.get(18178), "sleep", "saved_cmdlines wins");
    assert_eq!(c.get(18), "migration/0");
    assert_eq!(c.get(0), "<idle>");
    assert_eq!(c.get(999_999), "<...>");
}

#[test]
fn kallsyms_symbols() {
    let s = Symbols::parse_kallsyms(
        "ffffffff8141e4b0 t hrtimer_wakeup\nffffffff81000000 T _stext\n0000000000000000 t zero\nffffffff81000010 D data_sym\nbad\nffffffffc0000000 t modfn\t[kvm]\n",
    );
    assert_eq!(s.len(), 3);
    assert_eq!(s.get(0xffffffff8141e4b0), Some("hrtimer_wakeup"));
    assert_eq!(s.get(0xffffffffc0000000), Some("modfn"));
    assert_eq!(s.get(0xffffffff81000010), None);
    assert_eq!(s.addr_of("_stext"), Some(0xffffffff81000000));
}

/// The kernel's flag bits, by the column it prints.
#[test]
fn flag_columns() {
    assert_eq!(&flag_chars(0x01, 0x02), b"d..2.");
    assert_eq!(&flag_chars(0x05 | 0x20, 0x05), b"dN.5.");
    assert_eq!(&flag_chars(0x09, 0x13), b"d.h31");
    assert_eq!(&flag_chars(0x10, 0), b"..s..");
    assert_eq!(&flag_chars(0x18, 0), b"..H..");
    assert_eq!(&flag_chars(0x48, 0), b"..Z..");
    assert_eq!(&flag_chars(0x81, 0), b"D....");
    assert_eq!(&flag_chars(0x06, 0), b".b...");
    assert_eq!(&flag_chars(0x02, 0xaf), b".l.fa");
    // 6.1-rt's seven columns (bit 5 is need-resched-lazy there, bit 1 IRQS_NOSUPPORT).
    assert_eq!(flag_chars_rt_lazy(0x0d, 0x31, 1), "dn.h113");
    assert_eq!(flag_chars_rt_lazy(0x29, 0, 0), "d.Lh...");
    assert_eq!(flag_chars_rt_lazy(0x10, 0x20, 1), "...s.12");
    assert_eq!(flag_chars_rt_lazy(0x81, 0x03, 0x1f), "D...31f.");
    assert_eq!(flag_chars_rt_lazy(0x02, 0, 0), "X......");
}

// ---- hand-built pages ----

/// Builds one 4096-byte page of the fixture layout.
pub(crate) struct Page {
    ts: u64,
    data: Vec<u8>,
    pub(crate) missed: Option<Option<u64>>,
}

impl Page {
    pub(crate) fn new(ts: u64) -> Page {
        Page {
            ts,
            data: Vec::new(),
            missed: None,
        }
    }
    fn word(&mut self, type_len: u32, delta: u32) {
        self.data
            .extend_from_slice(&(type_len | (delta << 5)).to_ne_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.data.extend_from_slice(&v.to_ne_bytes());
    }
    /// A data event (payload padded to 4 bytes).
    pub(crate) fn event(&mut self, delta: u32, payload: &[u8], big: bool) {
        let len = payload.len().div_ceil(4) * 4;
        if big {
            self.word(0, delta);
            self.u32(len as u32 + 4);
        } else {
            self.word((len / 4) as u32, delta);
        }
        self.data.extend_from_slice(payload);
        self.data.resize(self.data.len() + len - payload.len(), 0);
    }
    pub(crate) fn bytes(&self) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&self.ts.to_ne_bytes());
        let mut commit = self.data.len() as u64;
        p[16..16 + self.data.len()].copy_from_slice(&self.data);
        match self.missed {
            Some(Some(n)) => {
                commit |= (1 << 31) | (1 << 30);
                let at = 16 + self.data.len();
                p[at..at + 8].copy_from_slice(&n.to_ne_bytes());
            }
            Some(None) => commit |= 1 << 31,
            None => {}
        }
        p[8..16].copy_from_slice(&commit.to_ne_bytes());
        p
    }
}

/// A local_timer_entry record (ID 165, vector at 8).
fn timer(pid: i32, vector: i32) -> Vec<u8> {
    let mut r = vec![0u8; 12];
    r[..2].copy_from_slice(&165u16.to_ne_bytes());
    r[2] = 0x01; // irqs off
    r[3] = 0x01;
    r[4..8].copy_from_slice(&pid.to_ne_bytes());
    r[8..12].copy_from_slice(&vector.to_ne_bytes());
    r
}

/// A print (trace_marker) record (ID 5: ip at 8, buf from 16).
pub(crate) fn print(pid: i32, text: &str) -> Vec<u8> {
    let mut r = vec![0u8; 16];
    r[..2].copy_from_slice(&5u16.to_ne_bytes());
    r[3] = 0x01;
    r[4..8].copy_from_slice(&pid.to_ne_bytes());
    r.extend_from_slice(text.as_bytes());
    r.push(0);
    r
}

fn decode(pages: &[u8]) -> (Vec<Event<'static>>, CpuStats) {
    let d = decoder();
    let c = Comms::default();
    let mut v = Vec::new();
    let st = d.decode_cpu(3, pages, &c, &mut v).unwrap();
    (v.into_iter().map(|e| e.into_owned()).collect(), st)
}

#[test]
fn time_deltas_extends_absolute_stamps_and_padding() {
    let mut p = Page::new(1_000_000_000);
    p.event(5, &timer(7, 236), false); // 1 s + 5 ns
                                       // A time extend of 3 << 27 + 9.
    p.word(30, 9);
    p.u32(3);
    p.event(1, &timer(7, 1), true); // big (type_len 0) event
                                    // A discarded event: padding with a delta and its length (array[0], which counts
                                    // itself: the record is 4 + 12 bytes).
    p.word(29, 1);
    p.u32(12);
    p.data.extend_from_slice(&[0xee; 8]);
    p.event(2, &timer(8, 2), false);
    // An absolute stamp: low 59 bits 7 << 27 | 3.
    p.word(31, 3);
    p.u32(7);
    p.event(0, &timer(9, 3), false);
    // The rest of the page is padding (delta 0): nothing after it is read.
    p.word(29, 0);
    p.event(0, &timer(10, 4), false);
    let (ev, st) = decode(&p.bytes());
    let ts: Vec<u64> = ev.iter().map(|e| e.ts).collect();
    let t1 = 1_000_000_005;
    let t2 = t1 + (3 << 27) + 9 + 1;
    let t3 = t2 + 2; // the discarded event's delta is not added (as the kernel reads)
    let t4 = (7 << 27) | 3;
    assert_eq!(ts, vec![t1, t2, t3, t4]);
    assert_eq!(st.events, 4);
    assert!(
        matches!(&ev[1].kind, EventKind::VectorEntry { name, vector: 1 } if name == "local_timer")
    );
    assert_eq!(ev[0].cpu, 3);
    assert!(ev[0].flags.irqs_off && ev[0].flags.preempt_depth == 1);
    assert_eq!(ev[0].task_comm, "<...>");

    // Absolute stamps take their top 5 bits from the time so far.
    let hi = 0x0800_0000_0000_0000u64 | 500;
    let mut p = Page::new(hi);
    p.word(31, 3);
    p.u32(7);
    p.event(0, &timer(9, 3), false);
    let (ev, _) = decode(&p.bytes());
    assert_eq!(ev[0].ts, (hi & (0xf8 << 56)) | (7 << 27) | 3);
}

#[test]
fn lost_events_and_bad_pages_are_counted() {
    let mut a = Page::new(100);
    a.event(1, &timer(1, 1), false);
    a.missed = Some(Some(42));
    let mut b = Page::new(200);
    b.event(1, &timer(1, 2), false);
    b.missed = Some(None);
    // An event running past the page's data: the rest of that page is skipped.
    let mut c = Page::new(300);
    c.event(1, &timer(1, 3), false);
    c.word(20, 1);
    // An unknown event ID.
    let mut d = Page::new(400);
    let mut u = timer(1, 4);
    u[..2].copy_from_slice(&999u16.to_ne_bytes());
    d.event(1, &u, false);
    d.event(1, &timer(1, 5), false);
    let mut pages = a.bytes();
    for p in [&b, &c, &d] {
        pages.extend(p.bytes());
    }
    let (ev, st) = decode(&pages);
    let vectors: Vec<i64> = ev
        .iter()
        .map(|e| match e.kind {
            EventKind::VectorEntry { vector, .. } => vector,
            _ => -1,
        })
        .collect();
    assert_eq!(vectors, vec![1, 2, 3, 5]);
    assert_eq!(st.pages, 4);
    assert_eq!((st.lost_pages, st.lost_events, st.lost_unknown), (2, 42, 1));
    assert_eq!(
        st.lost,
        vec![
            LostMark {
                before: 0,
                events: Some(42)
            },
            LostMark {
                before: 1,
                events: None
            }
        ]
    );
    assert_eq!((st.bad_pages, st.unknown_events), (1, 1));
    // A commit larger than a page's data: the page is bad, the others are read.
    let mut bad = Page::new(1).bytes();
    bad[8..16].copy_from_slice(&5000u64.to_ne_bytes());
    bad.extend(a.bytes());
    let (ev, st) = decode(&bad);
    assert_eq!((ev.len(), st.bad_pages), (1, 1));
    // Not whole pages: an error.
    let d = decoder();
    let c = Comms::default();
    assert!(d.decode_cpu(0, &pages[..100], &c, &mut Vec::new()).is_err());
    // The lost marks render as lines the text parser reads (a known count) or skips.
    let mut t = String::new();
    d.render_text(0, &pages, &c, &mut t).unwrap();
    assert!(t.contains("CPU:0 [LOST 42 EVENTS]\n"), "{t}");
    assert!(t.contains("# CPU:0 [LOST EVENTS]"), "{t}");
    let lost: Vec<u64> = Parser::new(&t)
        .filter_map(|r| match r {
            Record::Lost { events, .. } => Some(events),
            _ => None,
        })
        .collect();
    assert_eq!(lost, vec![42]);
}

/// Truncated or hostile pages never panic (every prefix of every fixture page, and bytes
/// flipped all over them).
#[test]
fn hostile_pages_never_panic() {
    let d = decoder();
    let c = Comms::default();
    let mut page = PAGES[..4096].to_vec();
    for i in 0..4096 {
        let keep = page[i];
        for v in [0u8, 0xff, 0x1d, 0x1e, 0x1f, 0x80] {
            page[i] = v;
            let mut out = Vec::new();
            let _ = d.decode_cpu(0, &page, &c, &mut out);
            let mut s = String::new();
            let _ = d.render_text(0, &page, &c, &mut s);
        }
        page[i] = keep;
    }
}

/// A sched_migrate_task record (ID 371: comm as __data_loc at 8, its text at 28; pid 12,
/// prio 16, orig_cpu 20, dest_cpu 24).
fn migrate(comm: &str, pid: i32, prio: i32, orig: i32, dest: i32) -> Vec<u8> {
    let mut r = vec![0u8; 28];
    r[..2].copy_from_slice(&371u16.to_ne_bytes());
    r[4..8].copy_from_slice(&0i32.to_ne_bytes());
    let loc = 28u32 | ((comm.len() as u32 + 1) << 16);
    r[8..12].copy_from_slice(&loc.to_ne_bytes());
    for (at, v) in [(12, pid), (16, prio), (20, orig), (24, dest)] {
        r[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }
    r.extend_from_slice(comm.as_bytes());
    r.push(0);
    r
}

/// Issue 17 part 5: a window's migrations with their fields, and its lost-event gaps between
/// the events around them (a count, no count, a loss after the last event).
#[test]
fn migrations_and_lost_gaps_of_a_window() {
    use crate::trace::tracedat::{CpuData, TraceDat};
    let mut a = Page::new(100);
    a.event(1, &timer(7, 236), false); // 101
    a.event(1, &migrate("kworker/1:0", 42, 120, 1, 3), false); // 102
    let mut b = Page::new(200);
    b.missed = Some(Some(7));
    b.event(1, &timer(7, 236), false); // 201
    let mut c = Page::new(300);
    c.missed = Some(None);
    c.event(5, &migrate("<x>", 9, 19, 3, 0), false); // 305
    let mut d = Page::new(400);
    d.missed = Some(Some(3));
    let mut pages = a.bytes();
    for p in [&b, &c, &d] {
        pages.extend(p.bytes());
    }
    let b = |s: &'static str| std::borrow::Cow::Borrowed(s.as_bytes());
    let dat = TraceDat {
        big_endian: cfg!(target_endian = "big"),
        long_size: 8,
        page_size: 4096,
        clock: "mono".into(),
        header_page: b(HEADER_PAGE),
        header_event: b(HEADER_EVENT),
        ftrace_formats: vec![b(FORMATS[0])],
        event_formats: vec![
            ("irq_vectors".into(), vec![b(FORMATS[5]), b(FORMATS[6])]),
            ("sched".into(), vec![b(FORMATS[7])]),
        ],
        kallsyms: None,
        printk: None,
        cmdlines: b(""),
        cpus: vec![CpuData {
            cpu: 3,
            pages: pages.into(),
        }],
        cpu_stats: vec![],
    };
    let (m, g) = migrations_and_gaps(&dat).unwrap();
    let mig = |ts, comm: &str, pid, prio, orig_cpu, dest_cpu| Migration {
        cpu: 3,
        ts,
        comm: comm.into(),
        pid,
        prio,
        orig_cpu,
        dest_cpu,
    };
    assert_eq!(
        m,
        [
            mig(102, "kworker/1:0", 42, 120, 1, 3),
            mig(305, "<x>", 9, 19, 3, 0)
        ]
    );
    let gap = |after_ns, before_ns, events| LostGap {
        cpu: 3,
        after_ns,
        before_ns,
        events,
    };
    assert_eq!(
        g,
        [
            gap(Some(102), Some(201), Some(7)),
            gap(Some(201), Some(305), None),
            gap(Some(305), None, Some(3)),
        ]
    );
}

/// Trimming to a time span keeps exactly the events inside it, on the kernel's own pages (any
/// span between two of its events) and on hand-built ones (time extends, absolute stamps,
/// a discarded event, a stored loss count that stays with the page's first event).
#[test]
fn trimmed_pages_hold_the_events_of_their_span_only() {
    let d = decoder();
    let ts_of = |pages: &[u8]| -> Vec<u64> { decode(pages).0.iter().map(|e| e.ts).collect() };
    let all = ts_of(PAGES);
    assert!(all.len() > 100, "{}", all.len());
    let n = all.len();
    for (i, j) in [
        (0, n),
        (1, n),
        (n / 3, 2 * n / 3),
        (n / 2, n / 2 + 1),
        (n - 1, n),
        (5, 5),
    ] {
        let from = all[i];
        let until = all.get(j).copied().unwrap_or(u64::MAX);
        let want: Vec<u64> = all
            .iter()
            .copied()
            .filter(|t| (from..until).contains(t))
            .collect();
        let trimmed = d.trim_pages(PAGES, from..until);
        assert_eq!(trimmed.len() % 4096, 0);
        assert_eq!(ts_of(&trimmed), want, "span {i}..{j}");
        assert_eq!(decode(&trimmed).1.bad_pages, 0);
    }
    // Untouched when every event is inside.
    assert_eq!(d.trim_pages(PAGES, 0..u64::MAX), PAGES);

    let mut p = Page::new(1_000_000_000);
    p.event(5, &timer(7, 236), false);
    p.word(30, 9);
    p.u32(3);
    p.event(1, &timer(7, 1), true);
    p.word(29, 1);
    p.u32(12);
    p.data.extend_from_slice(&[0xee; 8]);
    p.event(2, &timer(8, 2), false);
    p.event(4, &print(8, "last"), false);
    p.missed = Some(Some(42));
    let page = p.bytes();
    let all = ts_of(&page);
    assert_eq!(all.len(), 4);
    for (i, j) in [(0, 1), (0, 3), (1, 3), (2, 4), (3, 4), (1, 2)] {
        let until = all.get(j).copied().unwrap_or(u64::MAX);
        let t = d.trim_pages(&page, all[i]..until);
        let (ev, st) = decode(&t);
        let got: Vec<u64> = ev.iter().map(|e| e.ts).collect();
        assert_eq!(got, all[i..j], "span {i}..{j}");
        // The loss before the page's first event stays with it, with its count.
        let lost = if i == 0 { 42 } else { 0 };
        assert_eq!(st.lost_events, lost, "span {i}..{j}");
        assert_eq!(st.bad_pages, 0);
    }
    // Nothing of the page inside: nothing left.
    assert!(d.trim_pages(&page, 0..1).is_empty());
    assert!(d.trim_pages(&page, all[3] + 1..u64::MAX).is_empty());
}

// ---- another kernel's layout: Debian's 6.1 PREEMPT_RT (the kernel lab's rt-6.1) ----

/// One page of CPU 0 (its first: 92 events) recorded in the kernel lab on Debian's
/// 6.1.0-56-rt-amd64 and the kernel's text of the same events (tests/lab_raw_decode.rs boots
/// it and compares whole buffers on every lab kernel): its events carry
/// `common_preempt_lazy_count`, and its text has seven flag columns.
mod rt61 {
    macro_rules! fx {
        ($f:literal) => {
            include_str!(concat!("../../../tests/fixtures/trace/binary-rt-6.1/", $f))
        };
    }
    pub(super) const HEADER_PAGE: &str = fx!("header_page");
    pub(super) const HEADER_EVENT: &str = fx!("header_event");
    pub(super) const FORMATS: [&str; 15] = [
        fx!("ftrace_print.format"),
        fx!("irq_softirq_entry.format"),
        fx!("irq_softirq_exit.format"),
        fx!("irq_vectors_local_timer_entry.format"),
        fx!("irq_vectors_local_timer_exit.format"),
        fx!("irq_vectors_reschedule_entry.format"),
        fx!("irq_vectors_reschedule_exit.format"),
        fx!("sched_sched_migrate_task.format"),
        fx!("sched_sched_switch.format"),
        fx!("sched_sched_wakeup.format"),
        fx!("sched_sched_wakeup_new.format"),
        fx!("sched_sched_waking.format"),
        fx!("timer_hrtimer_expire_entry.format"),
        fx!("timer_hrtimer_expire_exit.format"),
        fx!("timer_hrtimer_start.format"),
    ];
    pub(super) const KALLSYMS: &str = fx!("kallsyms");
    pub(super) const TEXT: &str = fx!("cpu0.trace.txt");
    pub(super) const PAGE: &[u8] =
        include_bytes!("../../../tests/fixtures/trace/binary-rt-6.1/cpu0.page");
}

fn rt61_decoder() -> RawDecoder {
    RawDecoder::new(rt61::HEADER_PAGE, rt61::HEADER_EVENT, &rt61::FORMATS)
        .expect("6.1-rt's layout")
        .with_symbols(Symbols::parse_kallsyms(rt61::KALLSYMS))
}

fn rt61_text_events() -> Vec<Event<'static>> {
    Parser::new(rt61::TEXT)
        .map(|r| match r {
            Record::Event(e) => e.into_owned(),
            other => panic!("6.1-rt's text: {other:?}"),
        })
        .collect()
}

/// A body with the values the kernel prints its own way blanked: `%p` pointers (hashed by the
/// kernel, mixed with latlab's key) and hrtimer_start's mode (enum names the format file does
/// not resolve; latlab prints the number).
fn unhashed(body: &str) -> String {
    body.split(' ')
        .map(|w| match w.split_once('=') {
            Some((k @ ("hrtimer" | "mode"), _)) => format!("{k}=…"),
            _ => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// 6.1-rt's text parses: seven flag columns (need-resched-lazy `L` and the preempt-lazy depth
/// between the others), every line an event, the flags read as the five columns are.
#[test]
fn the_text_of_6_1_rt_with_seven_flag_columns_parses() {
    let ev = rt61_text_events();
    assert_eq!(ev.len(), 92);
    let line = |needle: &str| {
        ev.iter()
            .find(|e| rt61::TEXT.lines().nth(e.line - 1).unwrap().contains(needle))
            .unwrap_or_else(|| panic!("{needle}"))
    };
    // `dn.h113`: irqs off, need-resched, hardirq, depth 1 (lazy depth 1, migrate-disable 3).
    let f = line("dn.h113").flags;
    assert!(f.irqs_off && f.need_resched && f.hardirq && !f.softirq);
    assert_eq!(
        (f.preempt_depth, f.lazy_depth, f.migrate_disable),
        (1, 1, 3)
    );
    // `d.Lh...`: a lazy need-resched is a need-resched.
    let f = line("d.Lh").flags;
    assert!(f.irqs_off && f.need_resched && f.hardirq);
    assert!(!line("...s.12").flags.need_resched);
}

/// The page decodes to 6.1-rt's text event by event and renders as it line by line: its
/// seven flag columns, hrtimer_start's `was_armed`, every body (but for the hashed pointers
/// and the mode's enum name, see [`unhashed`]).
#[test]
fn a_6_1_rt_page_decodes_and_renders_as_its_text() {
    let d = rt61_decoder();
    let want = rt61_text_events();
    let mut s = String::new();
    for e in &want {
        s.push_str(&format!("{} {}\n", e.pid, e.task_comm));
    }
    let comms = Comms::from_saved_cmdlines(&s);
    let mut got = Vec::new();
    let st = d.decode_cpu(0, rt61::PAGE, &comms, &mut got).unwrap();
    assert_eq!((st.events, st.unknown_events, st.bad_pages), (92, 0, 0));
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((g.ts + 500) / 1000, w.ts / 1000);
        assert_eq!(
            (g.cpu, g.pid, g.flags, &g.task_comm),
            (w.cpu, w.pid, w.flags, &w.task_comm)
        );
        match (&g.kind, &w.kind) {
            (
                EventKind::HrtimerStart {
                    function: gf,
                    expires: ge,
                    ..
                },
                EventKind::HrtimerStart {
                    function: wf,
                    expires: we,
                    ..
                },
            ) => assert_eq!((gf, ge), (wf, we)),
            (
                EventKind::HrtimerExpireEntry { function: gf, .. },
                EventKind::HrtimerExpireEntry { function: wf, .. },
            ) => {
                assert_eq!(gf, wf)
            }
            (EventKind::HrtimerExpireExit { .. }, EventKind::HrtimerExpireExit { .. }) => {}
            (g, w) => assert_eq!(g, w),
        }
    }
    let mut out = String::new();
    d.render_text(0, rt61::PAGE, &comms, &mut out).unwrap();
    let mine: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    let kernel: Vec<&str> = rt61::TEXT.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(mine.len(), kernel.len());
    // The TASK-PID and CPU columns, the flags, the body (the timestamps: ns against µs).
    let cut = |l: &str| -> (String, String) {
        let (head, rest) = l.split_once("] ").unwrap();
        let (flags, rest) = rest.split_once(' ').unwrap();
        let (_, body) = rest.trim_start().split_once(": ").unwrap();
        (
            flags.to_string(),
            format!("{head}] {flags} {}", unhashed(body)),
        )
    };
    let mut armed = 0;
    for (m, k) in mine.iter().zip(&kernel) {
        let ((mf, mb), (kf, kb)) = (cut(m), cut(k));
        assert_eq!(mf.len(), 7, "{m}");
        assert_eq!((mf, mb), (kf, kb), "\n{m}\n{k}");
        armed += usize::from(k.contains(" was_armed="));
    }
    assert!(armed > 0);
}
