//! A load alone (`latlab loads run`), for use with another tool: its session without a run
//! directory, the loads looked after by the session's tick loop until the duration ends or a
//! signal comes, then stopped completely either way.

use std::path::{Path, PathBuf};

use latlab_core::activity::ActivityRecord;
use latlab_core::record::LoadRecord;
use latlab_core::units::Nanos;

use crate::loads::{LoadOptions, LoadSession};
use crate::session::{Begin, Session};

/// A load started alone ([`start`]).
pub struct Alone {
    s: Session,
    /// Holds the logs; removed at the end unless a log was written.
    tmp: tempfile::TempDir,
    log_dir: PathBuf,
    /// Why the load could not start (it is stopped, and its records kept, all the same).
    failed: Option<crate::Error>,
}

/// How it ended.
pub struct Ended {
    pub records: Vec<LoadRecord>,
    pub activity: Option<ActivityRecord>,
    /// A load that could not start, or a required one that kept crashing.
    pub failed: Option<crate::Error>,
    /// What could not be undone (the ledger's entries left).
    pub leftovers: Vec<String>,
}

/// Start `profile` with `opts` (its logs in a private temporary directory). An error before
/// anything started is returned; a load that fails to start is reported by [`Alone::run`].
pub fn start(profile: &str, opts: &LoadOptions) -> crate::Result<Alone> {
    let session = LoadSession::prepare(&[profile.to_string()], opts)?;
    let mut s = Session::begin(Begin {
        results: None,
        inventory: false,
        quiet: false,
    })?;
    let tmp = crate::rundir::private_temp_dir("latlab-loads-")?;
    let log_dir = tmp.path().join("logs");
    let failed = s.start_loads(session, &log_dir, 0).err();
    Ok(Alone {
        s,
        tmp,
        log_dir,
        failed,
    })
}

impl Alone {
    /// Where the loads' logs go.
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// The load is running ([`start`] did not fail to start it).
    pub fn started(&self) -> bool {
        self.failed.is_none()
    }

    /// Look after the load for `duration_ns` (or until a signal), then stop it and restore.
    pub fn run(mut self, duration_ns: Nanos) -> Ended {
        if self.failed.is_none() {
            self.failed = self
                .s
                .tick(std::time::Duration::from_nanos(duration_ns), || false)
                .err();
        }
        let (records, activity) = self.s.stop_loads();
        // Profiles without parts (idle) leave no log: no empty directory either.
        let _ = std::fs::remove_dir(&self.log_dir);
        // Logs were written: the directory stays for the user (its path was printed).
        if self.log_dir.exists() {
            let _ = self.tmp.keep();
        }
        let leftovers = self.s.close();
        Ended {
            records,
            activity,
            failed: self.failed,
            leftovers,
        }
    }
}
