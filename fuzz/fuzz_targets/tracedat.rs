//! Fuzz the trace.dat reader (`latlab analyze` takes files from anywhere): any bytes read to a
//! TraceDat or an error, never a panic; what reads can be written, and that reads back the same
//! and writes the same bytes again (read(write(read(x))) is stable); and what `latlab analyze`
//! does with it next (its layout to a decoder, every CPU decoded and merged by time,
//! analyzed) never panics either.
#![no_main]
use latlab_core::trace::raw::{decode_all, decoder_for};
use latlab_core::trace::tracedat::{read, write};
use latlab_core::trace::{analyze_events, AnalyzeOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dat) = read(data) else {
        return;
    };
    let mut once = Vec::new();
    write(&dat, &mut once).expect("what was read can be written");
    let back = read(&once).expect("a written trace.dat reads");
    assert_eq!(back, dat);
    let mut twice = Vec::new();
    write(&back, &mut twice).expect("written again");
    assert_eq!(twice, once);
    if let Ok((dec, mut comms)) = decoder_for(&dat) {
        if let Ok((events, lost, _)) = decode_all(&dec, &dat, &mut comms) {
            assert!(lost.iter().all(|l| l.0 <= events.len()));
            let _ = analyze_events(&events, &lost, &AnalyzeOptions::default());
        }
    }
});
