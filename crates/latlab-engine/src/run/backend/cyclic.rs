//! `--backend real`: cyclictest's measurement. One SCHED_FIFO thread per measured CPU, pinned,
//! memory locked, sleeping to absolute CLOCK_MONOTONIC times with `clock_nanosleep`; each
//! wake-up's lateness is a sample (latlab-sys's hot loop, on the real clock).

use super::{start_sys, Backend, Measurement, Start};

pub struct Cyclic;

impl Backend for Cyclic {
    fn name(&self) -> &'static str {
        "real"
    }
    fn on_the_machine(&self) -> bool {
        true
    }
    fn start(&self, s: Start) -> crate::Result<Box<dyn Measurement>> {
        start_sys(s, latlab_sys::measure::Backend::Real)
    }
}
