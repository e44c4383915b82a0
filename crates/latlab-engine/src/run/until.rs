//! `--until STAT:PRECISION` on the collector (latlab_core::until): every second (every ten for
//! a tail estimate; every tick in simulated time, whose seconds pass in milliseconds) it
//! snapshots each measuring thread's histogram and ends the run once every CPU's 95 %
//! interval is within the precision. Never on the measuring threads: they only publish.

use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_core::tail::TailContext;
use latlab_core::units::{format_duration, Nanos};
use latlab_core::until::{Check, Until, UntilRecord};
use latlab_sys::measure::ThreadShared;

/// The watch over a run with `--until`.
pub(super) struct Watch {
    until: Until,
    every: Duration,
    last: Option<Instant>,
    /// Measured time when every CPU was first seen within the precision.
    pub reached_at_ns: Option<Nanos>,
    /// The last check: the widest half-width (None while some CPU has no interval) and the
    /// CPU with its reason.
    widest: Option<f64>,
    why: Option<(u32, String)>,
}

impl Watch {
    pub fn new(until: Until, simulated: bool) -> Watch {
        let every = match (simulated, until.is_tail()) {
            (true, _) => Duration::ZERO,
            (false, false) => Duration::from_secs(1),
            (false, true) => Duration::from_secs(10),
        };
        Watch {
            until,
            every,
            last: None,
            reached_at_ns: None,
            widest: None,
            why: None,
        }
    }

    /// Collector tick: check when due; true when the run should end now (first reached).
    pub fn tick(
        &mut self,
        threads: &[Arc<ThreadShared>],
        seconds: &[Vec<Option<u64>>],
        measured_ns: Nanos,
    ) -> bool {
        if self.reached_at_ns.is_some() || self.last.is_some_and(|t| t.elapsed() < self.every) {
            return false;
        }
        self.last = Some(Instant::now());
        if self.check(threads, seconds, None) {
            self.reached_at_ns = Some(measured_ns);
            return true;
        }
        false
    }

    /// Check every CPU now; true when all are within the precision. `wakeups_per_s`: for a
    /// tail estimate's context (unused by a percentile).
    fn check(
        &mut self,
        threads: &[Arc<ThreadShared>],
        seconds: &[Vec<Option<u64>>],
        wakeups_per_s: Option<f64>,
    ) -> bool {
        let checks: Vec<(u32, Check)> = threads
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let ctx = TailContext {
                    per_second: seconds
                        .get(i)
                        .map(|s| vec![s.as_slice()])
                        .unwrap_or_default(),
                    intervals: None,
                    wakeups_per_s,
                };
                (t.cpu, self.until.check(&t.hist.snapshot(), &ctx))
            })
            .collect();
        // The widest half-width; None while some CPU has no two-sided interval (that CPU's
        // reason is the one to tell).
        let widest = checks
            .iter()
            .try_fold(0.0f64, |m, (_, c)| c.half_width.map(|w| m.max(w)));
        let why = match checks.iter().find(|(_, c)| c.half_width.is_none()) {
            Some((cpu, c)) => Some((*cpu, c.reason.clone().unwrap_or_default())),
            None => checks
                .iter()
                .filter_map(|(cpu, c)| c.half_width.map(|w| (*cpu, w)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(cpu, w)| (cpu, format!("±{:.1} %", w * 100.0))),
        };
        (self.widest, self.why) = (widest, why);
        !threads.is_empty() && self.widest.is_some_and(|w| w <= self.until.precision)
    }

    /// The record while the run goes on (a checkpoint).
    pub fn interim(&self) -> UntilRecord {
        UntilRecord {
            statistic: self.until.name(),
            precision: self.until.precision,
            converged: self.reached_at_ns.is_some(),
            after_ns: self.reached_at_ns,
            half_width: self.widest,
        }
    }

    /// After the threads have ended: a last check (a run that reached the precision in its
    /// last second, or a simulation over before the first tick), the record, and a warning
    /// when the precision was not reached within the duration.
    pub fn finish(
        &mut self,
        threads: &[Arc<ThreadShared>],
        seconds: &[Vec<Option<u64>>],
        measured_ns: Nanos,
        duration_ns: Nanos,
        warnings: &mut Vec<String>,
    ) -> UntilRecord {
        let converged = self.check(threads, seconds, None);
        let (cpu, why) = self.why.clone().unwrap_or((0, String::new()));
        let asked = format!("--until {}", self.until.spec());
        match (converged, self.reached_at_ns) {
            (true, _) => {}
            (false, Some(at)) => warnings.push(format!(
                "{asked}: reached after {}, but the samples taken before the threads stopped widened it again (CPU {cpu}: {why})",
                format_duration(at)
            )),
            (false, None) => warnings.push(format!(
                "{asked}: not reached within --duration {} (CPU {cpu}: {why})",
                format_duration(duration_ns)
            )),
        }
        UntilRecord {
            statistic: self.until.name(),
            precision: self.until.precision,
            converged,
            after_ns: converged.then(|| self.reached_at_ns.unwrap_or(measured_ns)),
            half_width: self.widest,
        }
    }
}
