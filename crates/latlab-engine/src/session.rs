//! The session: the one lifecycle of every command that changes the machine — `run`, `scenario`, `loads
//! run` (and so `bench`, which runs them) — as rtla's tools have it:
//!
//! 1. **plan** (each command's own, before this module is touched): every flag typed and
//!    checked, loads resolved; nothing has changed yet;
//! 2. **begin** ([`Session::begin`]): signals, the ledger (every later change is written there
//!    first), the run directory, the machine inventory;
//! 3. **warm up** ([`Session::start_loads`]): the loads start and run `--warmup` before measuring;
//! 4. **measure**: the command's own, polling [`Session::poll_loads`] and [`Session::stop`];
//! 5. **finish** ([`Session::finish`]): loads stopped, the record written, the machine restored,
//!    the summary printed.
//!
//! Restore runs on every exit path: a normal end, Ctrl-C/SIGTERM/SIGHUP (the `stop` flag), an
//! error and a panic (the session's drop: loads first, then the ledger).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use latlab_core::activity::ActivityRecord;
use latlab_core::model::RunModel;
use latlab_core::record::{CpuRecord, LoadRecord, Machine, RunConfig, RunRecord, Source};
use latlab_core::units::Nanos;
use latlab_sys::ledger::Ledger;
use serde_json::Value;

use crate::loads::LoadSession;
use crate::rundir;
use crate::store::DbTarget;

/// How often [`Session::tick`] looks after the loads and the signals.
const TICK: Duration = Duration::from_millis(100);

/// Restores the machine when dropped: every ledger entry, newest first.
pub struct Restore {
    ledger: Arc<Mutex<Ledger>>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        for line in l.restore_all() {
            if line.starts_with("could not") {
                crate::warn(&line);
            }
        }
        if l.is_empty() {
            let _ = std::fs::remove_file(l.path());
        } else {
            crate::warn(&format!(
                "what could not be undone stays in {}; run `latlab cleanup` to retry",
                l.path().display()
            ));
        }
    }
}

/// The ledger of this process: in `ledger::runtime_dir()` (`/run/latlab` for root,
/// `$TMPDIR/latlab-<uid>` otherwise), refused when someone else owns that directory or others
/// may write it.
pub fn open_ledger() -> crate::Result<Ledger> {
    Ok(Ledger::open().context("cannot write latlab's ledger")?)
}

/// The command line as run, for the record (arguments with spaces quoted), with secrets
/// masked (`--db postgres://user:***@host/db`: latlab_core::secrets).
pub fn command_line() -> String {
    std::env::args_os()
        .map(|a| {
            let a = latlab_core::secrets::mask(&a.to_string_lossy()).into_owned();
            if a.contains(char::is_whitespace) {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reap every child left (orphaned load processes re-parented to latlab as subreaper).
pub fn reap_orphans() {
    loop {
        let mut status = 0;
        // SAFETY: plain syscall; WNOHANG never blocks.
        if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } <= 0 {
            break;
        }
    }
}

/// How [`Session::tick`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticked {
    /// What it waited for came.
    Done,
    /// Its time limit passed.
    Elapsed,
    /// A signal asked the session to end.
    Stopped,
}

/// What [`Session::begin`] sets up.
pub struct Begin<'a> {
    /// Where the run directory goes, its label, and the free space its record needs there
    /// (checked before anything is measured: a full disk loses no run); None for commands
    /// without one.
    pub results: Option<(&'a Path, &'a str, u64)>,
    /// Record the machine inventory (`latlab check`'s) and its summary.
    pub inventory: bool,
    /// Warnings are recorded but not printed.
    pub quiet: bool,
}

/// A command's run, from `begin` to `finish`. Field order is drop order: on an early error or
/// a panic the loads stop (forgetting their ledger entries) before the ledger is restored, so
/// the stopping supervisor never writes the ledger file again after it was removed.
pub struct Session {
    loads: Option<LoadSession>,
    _restore: Restore,
    pub ledger: Arc<Mutex<Ledger>>,
    /// Set by SIGINT, SIGTERM and SIGHUP: the run ends early, its results are still written.
    pub stop: Arc<AtomicBool>,
    /// The run directory (checked writable before anything is measured).
    pub dir: Option<PathBuf>,
    pub machine: Machine,
    pub inventory: Option<Value>,
    /// UTC start of the session, RFC 3339.
    pub started_at: String,
    pub warnings: Vec<String>,
    /// The run's id (run.json `run_id`), made when the session begins.
    pub run_id: String,
    /// Where [`Session::finish`] records the run once its directory is written (None: the
    /// command records nothing).
    pub record_db: Option<DbTarget>,
    quiet: bool,
}

impl Session {
    pub fn begin(b: Begin) -> crate::Result<Session> {
        let dir = match b.results {
            Some((results, label, need)) => Some(rundir::create_run_dir_for(results, label, need)?),
            None => None,
        };
        let (machine, inventory) = if b.inventory {
            // Steal time is not sampled here: it would delay the start by a second.
            let inv = latlab_sys::inventory::collect_with(
                Path::new("/"),
                &latlab_sys::inventory::Options { steal_sample: None },
            );
            (
                latlab_sys::inventory::machine(&inv),
                serde_json::to_value(&inv).ok(),
            )
        } else {
            (Machine::default(), None)
        };
        let stop = Arc::new(AtomicBool::new(false));
        for sig in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::flag::register(sig, stop.clone())
                .context("cannot install signal handlers")?;
        }
        let ledger = Arc::new(Mutex::new(open_ledger()?));
        Ok(Session {
            loads: None,
            _restore: Restore {
                ledger: ledger.clone(),
            },
            ledger,
            stop,
            dir,
            machine,
            inventory,
            started_at: rundir::utc_now().0,
            warnings: Vec::new(),
            run_id: latlab_store::new_run_id(),
            record_db: None,
            quiet: b.quiet,
        })
    }

    /// A warning for the record, printed now unless quiet.
    pub fn warn(&mut self, msg: String) {
        if !self.quiet {
            crate::warn(&msg);
        }
        self.warnings.push(msg);
    }

    /// A signal asked the run to end.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Start the loads (logs under `log_dir`) and let them run `warmup_ns` before measuring.
    /// Ok(false) when a signal came during the warm-up.
    pub fn start_loads(
        &mut self,
        loads: LoadSession,
        log_dir: &Path,
        warmup_ns: Nanos,
    ) -> crate::Result<bool> {
        // Orphans of the loads (children of a killed group leader) are re-parented to latlab,
        // which reaps them, instead of to a PID 1 that may never reap them.
        // SAFETY: plain prctl.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        self.loads
            .insert(loads)
            .start(self.ledger.clone(), log_dir)?;
        if self.tick(Duration::from_nanos(warmup_ns), || false)? == Ticked::Stopped {
            return Ok(false);
        }
        if let Some(l) = self.loads.as_mut() {
            l.measurement_started();
        }
        Ok(true)
    }

    /// The session's tick loop, for a command that waits while the loads run (the warm-up,
    /// `loads run`, a bench's capture): every tick (100 ms) until `done` says so, `limit` has
    /// passed or a signal came, the loads are looked after (an error when a required one
    /// keeps crashing). The measurement's own ticks are its collector's.
    pub fn tick(
        &mut self,
        limit: Duration,
        mut done: impl FnMut() -> bool,
    ) -> crate::Result<Ticked> {
        let t0 = Instant::now();
        loop {
            if t0.elapsed() >= limit {
                return Ok(Ticked::Elapsed);
            }
            if self.stopped() {
                return Ok(Ticked::Stopped);
            }
            if done() {
                return Ok(Ticked::Done);
            }
            self.poll_loads()?;
            std::thread::sleep(TICK);
        }
    }

    /// The loads' live figures (`--metrics-listen`).
    pub fn live_loads(&self) -> Vec<crate::loads::LiveLoad> {
        self.loads.as_ref().map(|l| l.live()).unwrap_or_default()
    }

    /// Look after the loads (restarts; an error when a required one keeps crashing).
    pub fn poll_loads(&mut self) -> crate::Result<()> {
        match self.loads.as_mut() {
            Some(l) => Ok(l.poll()?),
            None => Ok(()),
        }
    }

    /// Stop the loads: their records and the system activity over the measurement.
    pub fn stop_loads(&mut self) -> (Vec<LoadRecord>, Option<ActivityRecord>) {
        match self.loads.take() {
            Some(l) => {
                let (records, activity) = l.stop();
                reap_orphans();
                (records, activity)
            }
            None => (vec![], None),
        }
    }

    /// A record of this session's run: what every command's record shares.
    pub fn record(
        &self,
        label: &str,
        config: RunConfig,
        cpus: Vec<CpuRecord>,
        complete: bool,
    ) -> RunRecord {
        let mut r = RunRecord::new(label, Source::Latlab, config, cpus);
        r.complete = complete;
        r.run_id = Some(self.run_id.clone());
        r.tool_version = Some(env!("CARGO_PKG_VERSION").into());
        r.command_line = Some(command_line());
        r.started_at = Some(self.started_at.clone());
        r.ended_at = complete.then(|| rundir::utc_now().0);
        r.machine = self.machine.clone();
        r.inventory = self.inventory.clone();
        r.warnings = self.warnings.clone();
        r
    }

    /// The run directory (the session was begun with one).
    pub fn dir(&self) -> &Path {
        self.dir.as_deref().expect("a session with a run directory")
    }

    /// End on an error: write the record as it stands (with the loads' records: after a
    /// failed warm-up, or a required load that kept crashing), restore the machine and return
    /// `e` with where the results are.
    pub fn abandon(mut self, mut record: RunRecord, e: impl Into<crate::Error>) -> crate::Error {
        let (loads, activity) = self.stop_loads();
        record.loads = loads;
        record.activity = activity;
        let complete = record.complete;
        if let Err(w) = rundir::write_run(self.dir(), &record, complete) {
            crate::warn(&format!("{w:#}"));
        }
        let dir = self.dir().display().to_string();
        drop(self);
        e.into().context(format!("results so far: {dir}"))
    }

    /// Stop the loads (their records join the record), write the final record, restore the
    /// machine, record the run in the results database; the model, for the caller's summary
    /// and verdict (the run directory is [`Session::dir`], read before this).
    pub fn finish(mut self, mut record: RunRecord) -> crate::Result<RunModel> {
        if self.loads.is_some() {
            let (loads, activity) = self.stop_loads();
            record.loads = loads;
            record.activity = activity;
        }
        let dir = self.dir().to_path_buf();
        let record_db = self.record_db.take();
        rundir::write_run(&dir, &record, true)?;
        // From here a signal no longer ends the run (it is written) but the wait for the
        // database: the flag is cleared, and set again by a signal that comes now.
        let stop = self.stop.clone();
        stop.store(false, Ordering::Relaxed);
        drop(self);
        // The run directory is written and the machine restored: a database that fails now
        // (or does not answer within its bound, or a signal ends the wait) costs a warning,
        // never the run.
        if let Some(db) = record_db {
            crate::store::record_dir(&db, &dir, Some(stop));
        }
        Ok(RunModel::new(record)?)
    }

    /// End without a record (`loads run`): restore, and say what could not be undone.
    pub fn close(mut self) -> Vec<String> {
        let _ = self.stop_loads();
        let leftovers: Vec<String> = self
            .ledger
            .lock()
            .map(|l| l.entries().map(|e| format!("{e:?}")).collect())
            .unwrap_or_default();
        drop(self);
        leftovers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tick loop ends when what it waits for comes, when its time is up (without asking
    /// any more) and on a signal (the stop flag).
    #[test]
    fn the_tick_loop_ends_on_done_on_its_limit_and_on_a_signal() {
        let mut s = Session::begin(Begin {
            results: None,
            inventory: false,
            quiet: true,
        })
        .unwrap();
        let hour = Duration::from_secs(3600);
        let r = s.tick(Duration::ZERO, || panic!("asked after the limit"));
        assert_eq!(r.unwrap(), Ticked::Elapsed);
        let mut asked = 0;
        let r = s.tick(hour, || {
            asked += 1;
            asked == 3
        });
        assert_eq!((r.unwrap(), asked), (Ticked::Done, 3));
        s.stop.store(true, Ordering::Relaxed);
        assert_eq!(s.tick(hour, || false).unwrap(), Ticked::Stopped);
        assert!(s.close().is_empty());
    }
}
