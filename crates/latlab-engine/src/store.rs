//! The session's last step: the run directory, once written, recorded in the results
//! database (latlab-store). A database failure never loses a run: the directory is written
//! first, and a failure to record it is a warning that says how to push it later.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::anyhow;
use latlab_core::escape::escape;

use crate::rundir;

/// Where a session records its run: nowhere (`--no-db`), the database `url`, or (None) the
/// default one (`LATLAB_DB`, else the user's SQLite file).
#[derive(Debug, Clone, Default)]
pub struct DbTarget {
    pub none: bool,
    pub url: Option<String>,
}

/// Record the run directory `dir` (its run.json as written) unless `db.none`; a failure is a
/// warning on stderr. Every wait is bounded (`LATLAB_DB_TIMEOUT`), and ends at once when
/// `cancel` is set (a signal).
pub fn record_dir(db: &DbTarget, dir: &Path, cancel: Option<Arc<AtomicBool>>) {
    if db.none {
        return;
    }
    let r = (|| -> anyhow::Result<()> {
        let bytes = rundir::read_run_json(&dir.join("run.json"))?;
        let mut limits = latlab_store::Limits::from_env().map_err(|e| anyhow!("{e}"))?;
        limits.cancel = cancel;
        let mut s =
            latlab_store::open_with(db.url.as_deref(), limits).map_err(|e| anyhow!("{e}"))?;
        s.push(&bytes).map_err(|e| anyhow!("{e}"))?;
        Ok(())
    })();
    if let Err(e) = r {
        let d = escape(&dir.display().to_string());
        crate::warn(&format!(
            "the run was not stored in the results database: {e:#}; its directory is complete: store it later with `latlab db push {d}` (or --no-db to not record runs)"
        ));
    }
}
