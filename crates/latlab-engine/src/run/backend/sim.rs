//! `--backend sim`: the worked example of a back end (docs/design.md, "Adding a back end").
//! The same threads and loop as `real`, but each sample comes from latlab-core's seeded
//! generator (`latlab_core::sim`) instead of the clock, in simulated time (the threads do not
//! sleep) or, with `--sim-realtime`, in real time. Nothing is changed on the machine, so it
//! needs no root: every report, comparison and test of the pipeline runs on it.

use super::{start_sys, Backend, Measurement, Start};

pub struct Sim;

impl Backend for Sim {
    fn name(&self) -> &'static str {
        "sim"
    }
    fn generated(&self) -> bool {
        true
    }
    fn simulated_time(&self, realtime: bool) -> bool {
        !realtime
    }
    fn on_the_machine(&self) -> bool {
        false
    }
    fn start(&self, s: Start) -> crate::Result<Box<dyn Measurement>> {
        let (seed, realtime) = (s.seed, s.realtime);
        start_sys(s, latlab_sys::measure::Backend::Sim { seed, realtime })
    }
}
