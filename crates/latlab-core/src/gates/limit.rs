//! The verdict a finished run's record gives on its own `--max-latency`: what the lab formats
//! (`report --format rt-tests-json|lava`, `export --format kcidb`) report as pass or fail.
//!
//! The record keeps the limit (`config.max_latency_ns`) but not `--max-latency-of`, so the
//! series judged is the default one `latlab run` judges: the thread latency of a timerlat run
//! with user-space threads (`cpus[].mode.thread`), else the CPUs' histograms (`total`).

use crate::record::RunRecord;

/// `--max-latency` judged on a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxLatency {
    /// The limit, ns.
    pub limit_ns: u64,
    /// The largest latency of the judged series, ns (None: no sample).
    pub observed_ns: Option<u64>,
    /// What was judged: `latency` (the CPUs' histograms) or `thread` (timerlat's thread
    /// latency with user-space threads).
    pub series: &'static str,
    /// No sample exceeded the limit (`latlab run`'s exit 0 rather than 2).
    pub passed: bool,
}

/// The record's `--max-latency` verdict, None when the run had none.
pub fn max_latency(r: &RunRecord) -> Option<MaxLatency> {
    let limit_ns = r.config.max_latency_ns?;
    let user = r.cpus.iter().any(|c| {
        c.mode
            .as_ref()
            .is_some_and(|m| m.timerlat_threads.as_deref() == Some("user"))
    });
    let (observed_ns, series) = if user {
        let m = r
            .cpus
            .iter()
            .filter_map(|c| Some(c.mode.as_ref()?.thread.as_ref()?.max_ns))
            .max();
        (m, "thread")
    } else {
        (r.total.max_ns, "latency")
    };
    Some(MaxLatency {
        limit_ns,
        observed_ns,
        series,
        passed: observed_ns.is_none_or(|m| m <= limit_ns),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::{Histogram, Layout};
    use crate::modes::CpuMode;
    use crate::record::{CpuRecord, RunConfig, Source};

    fn record(samples: &[u64], limit: Option<u64>) -> RunRecord {
        let mut h = Histogram::new(Layout::default());
        for &v in samples {
            h.record(v);
        }
        let config = RunConfig {
            max_latency_ns: limit,
            ..RunConfig::default()
        };
        let mut r = RunRecord::new(
            "t",
            Source::Latlab,
            config,
            vec![CpuRecord::new(0, h.to_record())],
        );
        r.refresh().unwrap();
        r
    }

    #[test]
    fn judges_the_maximum_against_the_limit() {
        assert_eq!(max_latency(&record(&[5_000], None)), None);
        let v = max_latency(&record(&[5_000, 9_000], Some(9_000))).unwrap();
        assert!(v.passed, "equal to the limit passes, as `run` judges");
        assert_eq!((v.observed_ns, v.series), (Some(9_000), "latency"));
        assert!(!max_latency(&record(&[9_001], Some(9_000))).unwrap().passed);
        assert!(max_latency(&record(&[], Some(1))).unwrap().passed);
    }

    #[test]
    fn timerlat_user_threads_judge_the_thread_latency() {
        let mut r = record(&[50_000], Some(20_000));
        let mut t = Histogram::new(Layout::default());
        t.record(10_000);
        r.cpus[0].mode = Some(CpuMode {
            thread: Some(t.to_record()),
            timerlat_threads: Some("user".into()),
            ..CpuMode::default()
        });
        let v = max_latency(&r).unwrap();
        assert_eq!(
            (v.observed_ns, v.series, v.passed),
            (Some(10_000), "thread", true)
        );
    }
}
