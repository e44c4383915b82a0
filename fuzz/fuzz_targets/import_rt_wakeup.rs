//! Fuzz the pmqtest/ptsematest/sigwaittest/svsematest (text and JSON; the first byte picks the tool) importer: any bytes give a record or an ImportError, never a panic.
#![no_main]
use latlab_core::import::{import, From};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let from = match data.first().map(|b| b % 4) {
        Some(0) | None => From::Pmqtest,
        Some(1) => From::Ptsematest,
        Some(2) => From::Sigwaittest,
        _ => From::Svsematest,
    };
    let data = data.get(1..).unwrap_or_default();
    if let Ok(r) = import(data, from, "fuzz") {
        // What an import returns must survive the run.json round trip.
        let _ = latlab_core::record::RunRecord::from_json(&r.to_json()).expect("valid record");
    }
});
