//! Fuzz the binary flight recorder's decoder (`latlab_core::trace::raw`): arbitrary bytes as
//! ring-buffer pages never panic and allocate in proportion to the input. Differential: where
//! every decoded event is one the kernel's text layout can carry (names and comms of plain
//! printable ASCII, a pid ≥ 0), the rendered text parsed by the text parser gives exactly the
//! decoded events (and the same lost-events counts).
//!
//! Input: the first byte picks the layout. Even: the fixture's (header_page, header_event and
//! the formats of tests/fixtures/trace/binary), the rest are pages (cut to whole pages).
//! Odd: the rest is `[pages length: u16 LE] pages header_page \0 header_event \0 format \0 …`:
//! arbitrary layout texts (RawDecoder::new must refuse or accept them without a panic).
//! `TRACE_RAW_SHOW=1` prints, per input, the layout error and how many events the differential
//! compared (to see that the seeds reach it).
#![no_main]
use latlab_core::trace::event::{Event, EventKind};
use latlab_core::trace::parser::{Parser, Record};
use latlab_core::trace::raw::{Comms, RawDecoder};
use libfuzzer_sys::fuzz_target;

macro_rules! fx {
    ($f:literal) => {
        include_str!(concat!(
            "../../crates/latlab-core/tests/fixtures/trace/binary/",
            $f
        ))
    };
}

const FORMATS: [&str; 11] = [
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
];

/// Text the kernel's line layout carries unchanged: printable ASCII, without the characters
/// the layout itself is made of (`[`, `]`, `=`, `: `), not starting or ending with a blank.
fn plain(s: &str) -> bool {
    s.bytes()
        .all(|c| c == b' ' || (c.is_ascii_graphic() && !b"[]=".contains(&c)))
        && s.trim() == s
        && !s.contains(": ")
}

fn carried(e: &Event) -> bool {
    use EventKind as K;
    let ok = match &e.kind {
        K::SchedSwitch {
            prev,
            next,
            prev_state,
        } => plain(&prev.comm) && plain(&next.comm) && plain(prev_state),
        K::SchedWaking { task, .. } | K::SchedWakeup { task, .. } => plain(&task.comm),
        K::IrqEntry { name, .. } => plain(name) && !name.contains(' ') && !name.is_empty(),
        K::Marker { text } => plain(text),
        _ => true,
    };
    ok && e.pid >= 0 && plain(&e.task_comm)
}

fn check(dec: &RawDecoder, pages: &[u8]) {
    let ps = dec.page_size();
    // At most 32 pages: the work stays in proportion to a small input.
    let n = (pages.len() / ps).min(32);
    let pages = &pages[..n * ps];
    let mut comms = Comms::default();
    let _ = dec.learn_comms(pages, &mut comms);
    let mut events = Vec::new();
    let Ok(st) = dec.decode_cpu(0, pages, &comms, &mut events) else {
        return;
    };
    assert_eq!(st.events as usize, events.len());
    let mut text = String::new();
    let st2 = dec.render_text(0, pages, &comms, &mut text).unwrap();
    assert_eq!(st, st2);
    if !events.iter().all(carried) {
        return;
    }
    let mut back = Vec::new();
    let mut lost = Vec::new();
    for r in Parser::new(&text) {
        match r {
            Record::Event(mut e) => {
                e.line = 0;
                back.push(e.into_owned());
            }
            Record::Lost { events, .. } => lost.push(events),
            other => panic!("{other:?}\n{text}"),
        }
    }
    let mine: Vec<Event> = events
        .into_iter()
        .map(|mut e| {
            e.line = 0;
            e
        })
        .collect();
    assert_eq!(back, mine, "{text}");
    if std::env::var_os("TRACE_RAW_SHOW").is_some() {
        eprintln!("differential: {} events", mine.len());
    }
    let want: Vec<u64> = st.lost.iter().filter_map(|m| m.events).collect();
    assert_eq!(lost, want);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let dec = RawDecoder::new(fx!("header_page"), fx!("header_event"), &FORMATS)
            .expect("the fixture layout");
        let ps = dec.page_size();
        // Pad the last page with zeros (an input need not be a whole number of pages).
        let mut pages = rest.to_vec();
        pages.resize(rest.len().div_ceil(ps) * ps, 0);
        check(&dec, &pages);
    } else {
        // [pages length: u16][pages][header_page, header_event, formats … separated by NULs]
        if rest.len() < 2 {
            return;
        }
        let n = u16::from_le_bytes([rest[0], rest[1]]) as usize;
        let rest = &rest[2..];
        let (pages, texts) = rest.split_at(n.min(rest.len()));
        let mut texts: Vec<&[u8]> = texts.split(|&b| b == 0).collect();
        // NULs separate (several in a row too).
        texts.retain(|t| !t.is_empty());
        if texts.len() < 3 {
            return;
        }
        let pages = pages.to_vec();
        let s: Vec<String> = texts
            .iter()
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .collect();
        let formats: Vec<&str> = s[2..].iter().map(String::as_str).collect();
        let dec = RawDecoder::new(&s[0], &s[1], &formats);
        if std::env::var_os("TRACE_RAW_SHOW").is_some() {
            eprintln!("layout: {:?}", dec.as_ref().err());
        }
        if let Ok(dec) = dec {
            let ps = dec.page_size();
            if ps > 1 << 16 {
                return; // a valid but huge page: padding to it would be the fuzzer's cost
            }
            let mut pages = pages;
            pages.truncate(32 * ps);
            pages.resize(pages.len().div_ceil(ps) * ps, 0);
            check(&dec, &pages);
        }
    }
});
