//! Fuzz `run.json` loading: any bytes give a record and its model, or a RecordError, never a
//! panic (nor an allocation out of proportion to the input). What loads must survive the
//! round trip: written again, it loads again.
#![no_main]
use latlab_core::model::RunModel;
use latlab_core::record::RunRecord;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = RunRecord::from_json(data) else {
        return;
    };
    let back = RunRecord::from_json(&r.to_json()).expect("a loaded record reloads");
    assert_eq!(back.cpus.len(), r.cpus.len());
    assert_eq!(back.total, r.total);
    let m = RunModel::new(r).expect("a loaded record has a model");
    assert_eq!(
        m.total.samples,
        m.cpus.iter().map(|c| c.stats.samples).sum::<u64>()
    );
});
