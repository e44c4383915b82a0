//! Fuzz the osnoise tracer's decoder (`latlab_core::trace::raw::OsnoiseDecoder`, what
//! `latlab run --mode noise --backend osnoise` reads while it measures): arbitrary bytes as
//! ring-buffer pages never panic, every record it reports lies in the input, and a second
//! decode gives the same records.
//!
//! Input: the first byte picks the layout. Even: 6.12-rt's (header_page, header_event and the
//! formats of tests/fixtures/osnoise), the rest are pages (cut to whole pages). Odd: the rest
//! is `[pages length: u16 LE] pages header_page \0 header_event \0 format \0 …`: arbitrary
//! layout texts (OsnoiseDecoder::new must refuse or accept them without a panic).
#![no_main]
use latlab_core::trace::raw::{OsnoiseDecoder, OsnoiseItem};
use libfuzzer_sys::fuzz_target;

macro_rules! fx {
    ($f:literal) => {
        include_str!(concat!(
            "../../crates/latlab-core/tests/fixtures/osnoise/",
            $f
        ))
    };
}

const FORMATS: [&str; 6] = [
    fx!("ftrace_osnoise.format"),
    fx!("osnoise_sample_threshold.format"),
    fx!("osnoise_irq_noise.format"),
    fx!("osnoise_softirq_noise.format"),
    fx!("osnoise_thread_noise.format"),
    fx!("osnoise_nmi_noise.format"),
];

fn check(d: &OsnoiseDecoder, pages: &[u8]) {
    let page = d.page_size();
    let pages = &pages[..pages.len() / page * page];
    let mut first = Vec::new();
    let stats = d
        .items(pages, |x| first.push(format!("{x:?}")))
        .expect("whole pages decode");
    assert_eq!(stats.events as usize, first.len());
    assert!(first.len() <= pages.len() / 8 + 1, "more records than the bytes hold");
    let mut names = 0usize;
    let mut again = Vec::new();
    d.items(pages, |x| {
        if let OsnoiseItem::Source { name, .. } = &x {
            names += name.len();
        }
        again.push(format!("{x:?}"));
    })
    .unwrap();
    assert_eq!(first, again);
    assert!(names <= pages.len() + 16 * again.len());
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let d = OsnoiseDecoder::new(fx!("header_page"), fx!("header_event"), &FORMATS)
            .expect("6.12-rt's layout");
        check(&d, rest);
        return;
    }
    if rest.len() < 2 {
        return;
    }
    let n = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
    let (pages, layout) = rest[2..].split_at(n);
    let text = String::from_utf8_lossy(layout);
    let mut parts = text.split('\0');
    let (Some(hp), Some(he)) = (parts.next(), parts.next()) else {
        return;
    };
    let formats: Vec<&str> = parts.collect();
    if let Ok(d) = OsnoiseDecoder::new(hp, he, &formats) {
        check(&d, pages);
    }
});
