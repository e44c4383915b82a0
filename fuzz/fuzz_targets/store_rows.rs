//! Fuzz what the results database stores of a run.json (`latlab_store::prepare`, which `db
//! push` and every recorded run go through before anything is written): any bytes give the
//! rows of a record or a refusal, never a panic. What is prepared has a UUID run id, rows as
//! wide as their columns, no NUL in any text (PostgreSQL refuses it), and a stored run.json
//! that loads again and holds no secret.
#![no_main]
use latlab_core::record::RunRecord;
use latlab_store::rows::{MACHINE, RUN};
use latlab_store::Val;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = latlab_store::prepare(data) else {
        return;
    };
    assert!(latlab_store::is_run_id(&p.run_id), "{:?}", p.run_id);
    assert_eq!(p.machine.len(), MACHINE.len());
    assert_eq!(p.run.len(), RUN.len());
    assert_eq!(p.run[0], Val::T(Some(p.run_id.clone())));
    let mut all: Vec<&Val> = p.machine.iter().chain(&p.run).collect();
    for (table, cols, rows) in &p.children {
        for r in rows {
            assert_eq!(r.len(), cols.len(), "{table}");
            all.extend(r);
        }
    }
    for v in all {
        if let Some(s) = v.text() {
            assert!(!s.contains('\0'), "a NUL in {s:?}");
        }
    }
    let json = p.run[RUN.len() - 1].text().expect("run_json").as_bytes();
    assert_eq!(&*latlab_core::secrets::mask_json(json), json, "a secret stored");
    RunRecord::from_json(json).expect("the stored run.json loads");
});
