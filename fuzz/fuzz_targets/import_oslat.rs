//! Fuzz the oslat text (the JSON form, when the input starts with '{', as --from oslat-json) importer: any bytes give a record or an ImportError, never a panic.
#![no_main]
use latlab_core::import::{import, From};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let from = if data.first() == Some(&b'{') { From::OslatJson } else { From::Oslat };
    if let Ok(r) = import(data, from, "fuzz") {
        // What an import returns must survive the run.json round trip.
        let _ = latlab_core::record::RunRecord::from_json(&r.to_json()).expect("valid record");
    }
});
