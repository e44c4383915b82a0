//! Fuzz the profile's side file (`profile/series.bin`, versions 1 and 2) and the heat maps
//! drawn from it: any bytes give a series or None, never a panic or an allocation past the
//! format's caps; a series read back re-encodes (as version 2) to one that reads back the
//! same; the HTML section renders, and no name from the file reaches it as markup.
#![no_main]
use latlab_core::profile::{Profiler, Series};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(s) = Series::from_bytes(data) else {
        return;
    };
    let again = Series::from_bytes(&s.to_bytes()).expect("a series re-encoded reads back");
    assert_eq!(
        (&again.cpus, &again.switches, &again.migrations),
        (&s.cpus, &s.switches, &s.migrations)
    );
    assert_eq!(Series::from_bytes(&again.to_bytes()).as_ref(), Some(&again));
    let (record, _) = Profiler::new(&[], 0, 0).finish(0, 1, |_| String::new(), 0, 0);
    let html = latlab_report::profile::section(&record, Ok(&s));
    // The names are the only text from the file: with them all replaced by "x" the page has
    // the same markup, so none of theirs became markup.
    let mut plain = s.clone();
    for n in &mut plain.names {
        n.1 = "x".into();
    }
    let html_plain = latlab_report::profile::section(&record, Ok(&plain));
    for c in ['<', '>', '"', '\''] {
        assert_eq!(
            html.matches(c).count(),
            html_plain.matches(c).count(),
            "a name put {c:?} in the page"
        );
    }
});
