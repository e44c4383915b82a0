//! The model reports are rendered from: derived from a [`RunRecord`] by a pure function, so
//! live runs, stored runs and imports share one path.

use crate::hist::Histogram;
use crate::record::{RecordError, RunRecord};
use crate::stats::Stats;

/// One CPU, derived.
#[derive(Debug, Clone)]
pub struct CpuModel {
    pub cpu: u32,
    pub stats: Stats,
    pub hist: Histogram,
}

/// A run, ready to render.
#[derive(Debug, Clone)]
pub struct RunModel {
    pub record: RunRecord,
    pub cpus: Vec<CpuModel>,
    /// All CPUs merged (None when the run has no CPU).
    pub total_hist: Option<Histogram>,
    pub total: Stats,
}

impl RunModel {
    pub fn new(record: RunRecord) -> Result<RunModel, RecordError> {
        let mut record = record;
        let (hs, total_hist) = record.derive()?;
        let cpus = record
            .cpus
            .iter()
            .zip(hs)
            .map(|(c, hist)| CpuModel {
                cpu: c.cpu,
                stats: c.stats.clone(),
                hist,
            })
            .collect();
        let total = record.total.clone();
        Ok(RunModel {
            record,
            cpus,
            total_hist,
            total,
        })
    }
}
