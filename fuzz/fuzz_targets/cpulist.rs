//! Fuzz the CPU-list parser (`--cpus`, sysfs lists): any text gives a sorted, de-duplicated
//! list or an error, never a panic; formatting the list and parsing it again gives it back.
#![no_main]
use latlab_core::cpulist::{format_cpu_list, parse_cpu_list};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(l) = parse_cpu_list(s) else { return };
    assert!(l.windows(2).all(|w| w[0] < w[1]), "not sorted/deduplicated");
    let f = format_cpu_list(&l);
    assert_eq!(parse_cpu_list(&f).as_ref(), Ok(&l), "{f}");
});
