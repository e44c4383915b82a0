//! Fuzz the trace.dat reader (`latlab analyze` takes files from anywhere): any bytes read to a
//! TraceDat or an error, never a panic; what reads can be written, and that reads back the same
//! and writes the same bytes again (read(write(read(x))) is stable).
#![no_main]
use latlab_core::trace::tracedat::{read, write};
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
});
