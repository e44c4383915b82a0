//! Fuzz the unit parsers (`--duration`, `--interval`, `--max-latency`, …) and the formatters
//! reports use on what they return: any text gives a value or a UnitError, never a panic; a
//! value written as `<v>ns` parses back to itself, and a whole number of ns is taken exactly
//! (no rounding through a float).
#![no_main]
use latlab_core::units::{format_duration, format_measured, parse_duration, parse_latency, Human};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let exact = s
        .trim()
        .strip_suffix("ns")
        .and_then(|d| d.trim().parse::<u64>().ok());
    for v in [parse_latency(s), parse_duration(s)].into_iter().flatten() {
        if let Some(e) = exact {
            assert_eq!(v, e, "{s:?}: a whole number of ns rounded");
        }
        let _ = Human(v).to_string();
        let _ = format_duration(v);
        let _ = format_measured(v);
        assert_eq!(parse_latency(&format!("{v}ns")), Ok(v), "{s:?}");
        assert_eq!(parse_duration(&format!("{v}ns")), Ok(v), "{s:?}");
    }
});
