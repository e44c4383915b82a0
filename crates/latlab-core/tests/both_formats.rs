//! A real capture in both of its forms, analyzed: the kernel's text (`trace.txt`) and the
//! binary ring-buffer pages of the same events (`trace.dat`) must give the same analysis,
//! spike by spike. The fixture (tests/fixtures/trace/hackbench/, see its README) is 32 ms
//! cut from a capture under hackbench; `latlab analyze` reads the binary form through
//! [`analyze_dat`] (events decoded where they lie, streamed), checked here against the
//! reference (every event decoded into a vector, then analyzed) and against the text.

use latlab_core::trace::raw::{analyze_dat, decode_all, decoder_for};
use latlab_core::trace::{
    analyze_events, analyze_text, tracedat, Analysis, AnalyzeOptions, Event, SampleMode,
};

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/trace/hackbench/"
);

fn options(threshold_ns: u64) -> impl Fn(SampleMode) -> AnalyzeOptions {
    move |m| AnalyzeOptions {
        threshold_ns,
        mode: Some(m),
        gaps: Vec::new(),
    }
}

/// What a spike is, without its exact times (the text has µs, the pages ns).
fn outline(a: &Analysis) -> Vec<String> {
    a.spikes
        .iter()
        .map(|s| {
            let mut causes: Vec<String> = s
                .causes
                .iter()
                .map(|c| format!("{:?} {} {} {}", c.kind, c.name, c.pid, c.prio))
                .collect();
            causes.sort();
            format!("cpu {} pid {} {}: {causes:?}", s.cpu, s.pid, s.comm)
        })
        .collect()
}

#[test]
fn both_forms_of_a_real_capture_give_the_same_spikes() {
    let bytes = std::fs::read(format!("{DIR}trace.dat")).unwrap();
    let text = std::fs::read_to_string(format!("{DIR}trace.txt")).unwrap();
    let dat = tracedat::read(&bytes).unwrap();
    let (dec, comms) = decoder_for(&dat).unwrap();
    let mut all = comms.clone();
    let (events, lost, bad) = decode_all(&dec, &dat, &mut all).unwrap();
    assert_eq!(bad, (0, 0));
    assert!(events.len() > 4000, "{}", events.len());
    // The kernel's text shows µs (rounded): the pages' events at that resolution.
    let rounded: Vec<Event> = events
        .iter()
        .map(|e| Event {
            ts: (e.ts + 500) / 1000 * 1000,
            ..e.clone()
        })
        .collect();
    for threshold in [0, 5_000, 100_000] {
        let opts = options(threshold);
        let (fast, bad) = analyze_dat(&dec, &dat, comms.clone(), &opts)
            .unwrap()
            .unwrap();
        assert_eq!(bad, (0, 0));
        let reference = analyze_events(&events, &lost, &opts(SampleMode::Wakeups)).unwrap();
        assert_eq!(format!("{fast:?}"), format!("{reference:?}"), "{threshold}");
        let txt = analyze_text(&text, &opts(SampleMode::Wakeups)).unwrap();
        assert_eq!(
            (txt.events, txt.samples, txt.spikes.len()),
            (fast.events, fast.samples, fast.spikes.len()),
            "{threshold}"
        );
        assert!(txt.warnings.is_empty() && fast.warnings.is_empty());
        assert_eq!(outline(&txt), outline(&fast), "{threshold}");
        let at_us = analyze_events(&rounded, &lost, &opts(SampleMode::Wakeups)).unwrap();
        assert_eq!(txt.spikes.len(), at_us.spikes.len());
        for (i, (t, b)) in txt.spikes.iter().zip(&at_us.spikes).enumerate() {
            assert_eq!(
                format!("{t:?}"),
                format!("{b:?}"),
                "spike {i}, threshold {threshold}"
            );
        }
        if threshold == 0 {
            // Every sample is a spike, and some have causes: the comparison compared something.
            assert_eq!(fast.spikes.len() as u64, fast.samples);
            assert!(fast.spikes.iter().filter(|s| !s.causes.is_empty()).count() >= 2);
        }
    }
}
