//! Fuzz the tracefs text parser and attribution (`latlab analyze`, saved spike traces): any
//! bytes give an analysis or a ParseError, never a panic. Differential too: the parallel block
//! parser, with blocks small enough to cut the input many times, must give exactly what the
//! one streaming parser gives (same analysis, same first error and line); the bytes path must
//! refuse exactly the inputs that are not UTF-8 and otherwise answer the same, finding the
//! mode (markers or wake-ups) as the whole-text check does.
#![no_main]
use latlab_core::trace::{
    analyze_bytes_parallel, analyze_text, analyze_text_parallel, AnalyzeOptions, Parallel,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let opts = AnalyzeOptions {
        threshold_ns: 0,
        mode: None,
        gaps: Vec::new(),
    };
    let one = format!("{:?}", analyze_text(&text, &opts));
    for block in [1, 64, 300] {
        let on = Parallel { threads: 2, block };
        let par = format!("{:?}", analyze_text_parallel(&text, &opts, on));
        assert_eq!(one, par, "block {block}");
        let bytes = analyze_bytes_parallel(data, on, |m| AnalyzeOptions {
            mode: Some(m),
            ..opts.clone()
        });
        assert_eq!(bytes.is_some(), std::str::from_utf8(data).is_ok());
        if let Some(r) = bytes {
            assert_eq!(one, format!("{r:?}"), "bytes, block {block}");
        }
    }
});
