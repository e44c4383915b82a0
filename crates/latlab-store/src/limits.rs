//! Every wait for a database is bounded, and a signal ends it: connecting, each statement and
//! each lock wait gives up after [`Limits::timeout`] (10 s, `LATLAB_DB_TIMEOUT` overrides),
//! or at once when [`Limits::cancel`] is set (`latlab run` sets it from its SIGINT, SIGTERM and
//! SIGHUP handler once the run directory is written). A server that accepts and never answers,
//! a table another session keeps locked, a SQLite file whose trigger never ends: each costs at
//! most the bound, then the caller's usual "the run is kept, push it later".
//!
//! How: PostgreSQL's client runs on a thread of its own that the caller waits for with the
//! bound (the `pg` module), and the session's `statement_timeout` and `lock_timeout` are the
//! bound; SQLite's busy handler and progress handler check the deadline and the flag
//! ([`Watch`]).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_core::units::{format_duration, parse_duration};

use crate::{msg, Result, StoreError};

/// The bound of one wait when `LATLAB_DB_TIMEOUT` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A migration (every row of a large database copied in one statement) is bounded by this
/// many times the bound: 10 minutes by default.
pub const MIGRATION_FACTOR: u32 = 60;

/// The environment variable that sets the bound (a duration: `30s`, `2m`, `500ms`; bare
/// seconds).
pub const TIMEOUT_ENV: &str = "LATLAB_DB_TIMEOUT";

/// How long a database may keep latlab waiting, and what makes it give up early.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The bound of each wait: connecting, one statement, one lock.
    pub timeout: Duration,
    /// When set (by a signal handler), the wait in progress gives up at once.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            timeout: DEFAULT_TIMEOUT,
            cancel: None,
        }
    }
}

impl Limits {
    /// The default bound, or `LATLAB_DB_TIMEOUT`'s; no cancel flag.
    pub fn from_env() -> Result<Limits> {
        let Some(v) = std::env::var_os(TIMEOUT_ENV) else {
            return Ok(Limits::default());
        };
        let v = v.to_string_lossy();
        let ns = parse_duration(&v).map_err(|e| {
            msg(format!(
                "{TIMEOUT_ENV}={}: {e}; give how long to wait for the results database, e.g. 30s",
                crate::escape(&v)
            ))
        })?;
        if ns < 1_000_000 {
            return Err(msg(format!(
                "{TIMEOUT_ENV}={}: at least 1ms; give how long to wait for the results database, e.g. 30s",
                crate::escape(&v)
            )));
        }
        Ok(Limits {
            timeout: Duration::from_nanos(ns),
            cancel: None,
        })
    }

    /// These limits, giving up when `flag` is set.
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> Limits {
        self.cancel = Some(flag);
        self
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    /// The error of a wait that ended early: `what` was waited for, on database `db`.
    pub(crate) fn gave_up(&self, why: GaveUp, db: &str, what: &str) -> StoreError {
        self.gave_up_after(why, db, what, self.timeout)
    }

    /// [`Limits::gave_up`] after waiting `waited` (a multiple of the bound).
    pub(crate) fn gave_up_after(
        &self,
        why: GaveUp,
        db: &str,
        what: &str,
        waited: Duration,
    ) -> StoreError {
        match why {
            GaveUp::Timeout => msg(format!(
                "the results database {db} did not answer within {} ({what}); {TIMEOUT_ENV} sets how long latlab waits",
                format_duration(waited.as_nanos().min(u64::MAX as u128) as u64)
            )),
            GaveUp::Signal => msg(format!(
                "gave up on the results database {db} ({what}): a signal arrived"
            )),
        }
    }
}

/// Why a wait ended before its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GaveUp {
    Timeout,
    Signal,
}

/// Wait for `rx`'s answer within the bound; the flag is looked at every 50 ms. Err(None): the
/// sender is gone without answering.
pub(crate) fn wait<T>(rx: &Receiver<T>, limits: &Limits) -> std::result::Result<T, Option<GaveUp>> {
    let deadline = Instant::now() + limits.timeout;
    loop {
        if limits.cancelled() {
            return Err(Some(GaveUp::Signal));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Some(GaveUp::Timeout));
        }
        match rx.recv_timeout((deadline - now).min(Duration::from_millis(50))) {
            Ok(v) => return Ok(v),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err(None),
        }
    }
}

/// The deadline of the SQLite statement running now, for its busy and progress handlers.
#[derive(Debug)]
pub(crate) struct Watch {
    limits: Limits,
    origin: Instant,
    /// Milliseconds after `origin`; u64::MAX: no statement is running.
    deadline_ms: AtomicU64,
    /// 0, or why the running statement was stopped (1 timeout, 2 signal).
    why: AtomicU8,
}

thread_local! {
    /// The watch of the statement this thread runs (SQLite's busy handler is a plain fn).
    static CURRENT: RefCell<Option<Arc<Watch>>> = const { RefCell::new(None) };
}

impl Watch {
    pub(crate) fn new(limits: Limits) -> Arc<Watch> {
        Arc::new(Watch {
            limits,
            origin: Instant::now(),
            deadline_ms: AtomicU64::new(u64::MAX),
            why: AtomicU8::new(0),
        })
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A statement starts on this thread: its deadline is `times` the bound from now.
    pub(crate) fn arm(self: &Arc<Watch>, times: u32) {
        let ms = (self.origin.elapsed() + self.limits.timeout * times).as_millis();
        self.deadline_ms
            .store(u64::try_from(ms).unwrap_or(u64::MAX - 1), Ordering::Relaxed);
        self.why.store(0, Ordering::Relaxed);
        CURRENT.with(|c| *c.borrow_mut() = Some(self.clone()));
    }

    /// The statement ended.
    pub(crate) fn disarm(&self) {
        self.deadline_ms.store(u64::MAX, Ordering::Relaxed);
        CURRENT.with(|c| *c.borrow_mut() = None);
    }

    /// Must the running statement stop (and note why)?
    pub(crate) fn expired(&self) -> bool {
        let deadline = self.deadline_ms.load(Ordering::Relaxed);
        if deadline == u64::MAX {
            return false;
        }
        let why = if self.limits.cancelled() {
            GaveUp::Signal
        } else if self.origin.elapsed().as_millis() >= u128::from(deadline) {
            GaveUp::Timeout
        } else {
            return false;
        };
        self.why.store(
            if why == GaveUp::Timeout { 1 } else { 2 },
            Ordering::Relaxed,
        );
        true
    }

    /// Why the last statement was stopped, if it was.
    pub(crate) fn why(&self) -> Option<GaveUp> {
        match self.why.load(Ordering::Relaxed) {
            1 => Some(GaveUp::Timeout),
            2 => Some(GaveUp::Signal),
            _ => None,
        }
    }
}

/// SQLite's busy handler: wait a little more for the lock unless the running statement's
/// deadline passed or a signal came.
pub(crate) fn busy(count: i32) -> bool {
    let go_on = CURRENT.with(|c| c.borrow().as_ref().is_some_and(|w| !w.expired()));
    if go_on {
        // 1 ms, growing to 20 ms between tries.
        std::thread::sleep(Duration::from_millis(count.clamp(1, 20) as u64));
    }
    go_on
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_comes_from_the_environment_variable_or_is_refused() {
        // One test touches the variable (the process's environment is shared).
        std::env::remove_var(TIMEOUT_ENV);
        assert_eq!(Limits::from_env().unwrap().timeout, DEFAULT_TIMEOUT);
        std::env::set_var(TIMEOUT_ENV, "2s");
        assert_eq!(Limits::from_env().unwrap().timeout, Duration::from_secs(2));
        std::env::set_var(TIMEOUT_ENV, "750ms");
        assert_eq!(
            Limits::from_env().unwrap().timeout,
            Duration::from_millis(750)
        );
        for bad in ["x", "0", "-1s", "1us"] {
            std::env::set_var(TIMEOUT_ENV, bad);
            let e = Limits::from_env().unwrap_err().to_string();
            assert!(e.starts_with(&format!("{TIMEOUT_ENV}={bad}: ")), "{e}");
        }
        std::env::remove_var(TIMEOUT_ENV);
    }

    #[test]
    fn a_wait_ends_at_the_bound_or_on_the_flag() {
        let (_tx, rx) = std::sync::mpsc::channel::<()>();
        let l = Limits {
            timeout: Duration::from_millis(20),
            cancel: None,
        };
        assert_eq!(wait(&rx, &l), Err(Some(GaveUp::Timeout)));
        let flag = Arc::new(AtomicBool::new(true));
        let l = Limits {
            timeout: Duration::from_secs(3600),
            cancel: None,
        }
        .with_cancel(flag);
        assert_eq!(wait(&rx, &l), Err(Some(GaveUp::Signal)));
        let (tx, rx) = std::sync::mpsc::channel();
        tx.send(7).unwrap();
        assert_eq!(wait(&rx, &l), Err(Some(GaveUp::Signal)), "the flag first");
        drop(tx);
        let l = Limits::default();
        assert_eq!(wait(&rx, &l), Ok(7));
        assert_eq!(wait(&rx, &l), Err(None));
    }
}
