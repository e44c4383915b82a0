//! No measuring thread (`latlab profile --no-measure`): the run lasts its duration, or until it
//! is stopped, and measures nothing; the scheduler profile is recorded around it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_sys::measure::{ThreadResult, ThreadShared};

use super::Measurement;

/// A measurement without threads, `duration_ns` long.
pub struct Idle {
    t0_ns: u64,
    stop: AtomicBool,
    until: Instant,
}

impl Idle {
    pub fn start(duration_ns: u64) -> Box<dyn Measurement> {
        Box::new(Idle {
            t0_ns: latlab_sys::rt::now_ns(),
            stop: AtomicBool::new(false),
            until: Instant::now() + Duration::from_nanos(duration_ns),
        })
    }
}

impl Measurement for Idle {
    fn threads(&self) -> &[Arc<ThreadShared>] {
        &[]
    }
    fn t0_ns(&self) -> u64 {
        self.t0_ns
    }
    fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }
    fn all_done(&self) -> bool {
        self.stop.load(Ordering::Acquire) || Instant::now() >= self.until
    }
    fn join(self: Box<Self>, _: &mut Vec<String>) -> Vec<ThreadResult> {
        Vec::new()
    }
}
