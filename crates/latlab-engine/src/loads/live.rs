//! A session's loads while the run goes on: each part's restarts, failures and the
//! throughput its log reports so far.

use std::path::Path;

use latlab_sys::loads::metrics;
use latlab_sys::loads::profiles::Metric;

use super::LoadSession;

/// A part's figures while the run goes on ([`LoadSession::live`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveLoad {
    pub profile: String,
    pub part: String,
    pub restarts: u32,
    pub failures: u32,
    /// The throughput its log reports so far, and its unit.
    pub throughput: Option<(f64, &'static str)>,
}

/// How much of a load's log [`LoadSession::live`] reads (its end: the latest iterations).
const LIVE_LOG_TAIL: u64 = 4 << 20;

/// The last `max` bytes of a file, from a line start; None if it cannot be read.
fn read_tail(path: &Path, max: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(max);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut b = Vec::new();
    f.take(max).read_to_end(&mut b).ok()?;
    let s = String::from_utf8_lossy(&b);
    Some(match (from > 0, s.find('\n')) {
        (true, Some(i)) => s[i + 1..].to_string(),
        _ => s.into_owned(),
    })
}

impl LoadSession {
    /// Every part's restarts and failures, and its throughput so far where its log reports
    /// one per iteration (hackbench's `Time:`, each finished stress-ng or dbench run): for
    /// `--metrics-listen`, from the collector (a log's last [`LIVE_LOG_TAIL`] bytes are read).
    pub fn live(&self) -> Vec<LiveLoad> {
        let status = self.status();
        self.planned
            .iter()
            .map(|p| {
                let st = status
                    .iter()
                    .find(|s| s.profile == p.spec.profile && s.part == p.spec.part);
                let throughput = (p.metric == Metric::Log)
                    .then(|| read_tail(&p.spec.log, LIVE_LOG_TAIL))
                    .flatten()
                    .and_then(|log| metrics::parse(&p.spec.command, &log))
                    .map(|t| (t.value, t.unit));
                LiveLoad {
                    profile: p.spec.profile.clone(),
                    part: p.spec.part.clone(),
                    restarts: st.map_or(0, |s| s.restarts),
                    failures: st.map_or(0, |s| s.failures),
                    throughput,
                }
            })
            .collect()
    }
}
