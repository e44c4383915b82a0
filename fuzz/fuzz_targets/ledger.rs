//! Fuzz the ledger file `latlab cleanup` reads (`/run/latlab/<pid>.json`): any bytes parse to
//! a LedgerFile or an error, never a panic; what parses survives being written back. Parse
//! only: nothing is ever undone here.
#![no_main]
use latlab_sys::ledger::LedgerFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = serde_json::from_slice::<LedgerFile>(data) else {
        return;
    };
    let bytes = serde_json::to_vec_pretty(&f).expect("a ledger file serializes");
    let back: LedgerFile = serde_json::from_slice(&bytes).expect("a written ledger reparses");
    assert_eq!(back.pid, f.pid);
    assert_eq!(back.starttime, f.starttime);
    assert_eq!(back.entries, f.entries);
});
