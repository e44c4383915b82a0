//! The load supervisor: starts each part of a load in its own session and process group (and
//! its own cgroup-v2 child where the v2 hierarchy exists), restarts it when it exits, and stops
//! it so that nothing is left: SIGTERM to the group, a grace period, then SIGKILL to the group
//! and `cgroup.kill`, and a check by process group and cgroup that everything is gone.
//!
//! Each part's group leader is a small watchdog that runs the load as its child and kills the
//! whole group and cgroup when the pipe to latlab closes, however latlab died; the load process
//! itself has `PR_SET_PDEATHSIG` for the watchdog. The watchdog is latlab's own executable
//! started with `posix_spawn` ([`WATCHDOG_ARG`], [`watchdog_main`]): glibc spawns with
//! `CLONE_VM | CLONE_VFORK`, so nothing of latlab's address space is copied. It used to be a
//! `fork` of latlab, which copied latlab's page tables and its hundreds of MiB of locked
//! mappings with the forking CPU in the kernel for 220–340 µs at every load restart (the
//! recorder named `preempt_off latlab-loads` 84–294 µs on measured CPUs); the watchdog's own
//! fork of the load copies a small process.
//! All spawning happens on one long-lived thread (`latlab-loads`). The watchdog is held on a
//! pipe until the parent has written its process group to the ledger, moved it into its
//! cgroup and set its affinity, so no load code runs unrecorded.
//!
//! Here: the supervisor and its thread; `part` (one part's state and supervision step),
//! `spawn` (an iteration started under its watchdog), `watchdog` (the watchdog itself), `group`
//! (a part's process group and cgroup), `io_counters` (its I/O), `stop` (the end) and
//! `watched` (one command run once under a watchdog: `latlab run`'s actions).

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::ledger::Ledger;

mod group;
mod io_counters;
mod part;
mod spawn;
mod stop;
mod watchdog;
mod watched;

pub use group::{cgroup2_root, cgroup_procs, group_members};
pub use io_counters::{io_of, IoCounters, IoReport, IO_SOURCE};
use part::PartState;
pub use watchdog::{watchdog_main, WATCHDOG_ARG};
pub use watched::Watched;

/// One command to supervise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartSpec {
    /// The profile as the user named it (`stress-kernel`, `cmd:…`).
    pub profile: String,
    /// The part of the profile (`compile`, `stress-ng`, …).
    pub part: String,
    /// The exact `/bin/sh -c` script.
    pub command: String,
    /// stdout and stderr go here (appended across restarts).
    pub log: PathBuf,
    /// Account its I/O from the kernel ([`IoReport`]).
    pub account_io: bool,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// CPU affinity of the loads (None: inherit).
    pub cpus: Option<Vec<u32>>,
    /// Where to create the cgroup-v2 children (None: process groups only).
    pub cgroup_parent: Option<PathBuf>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Prefix of the cgroup names (unique per run).
    pub tag: String,
    /// Consecutive failures after which a part counts as crashing.
    pub crash_after: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cpus: None,
            cgroup_parent: cgroup2_root(),
            grace: Duration::from_secs(10),
            tag: format!("latlab-{}", std::process::id()),
            crash_after: 3,
        }
    }
}

/// What `poll` sees of a part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartStatus {
    pub profile: String,
    pub part: String,
    pub restarts: u32,
    pub failures: u32,
    pub consecutive_failures: u32,
    /// `consecutive_failures` reached the limit.
    pub crashing: bool,
    pub last_exit: Option<String>,
}

/// How the stop went for one part.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StopReport {
    /// From SIGTERM to nothing left (or to the end of the grace period).
    pub term_s: f64,
    /// SIGKILL / cgroup.kill were needed.
    pub killed: bool,
    /// Processes still present after SIGKILL (should be empty).
    pub survivors: Vec<i32>,
    /// Dead processes of the group not yet reaped by their (foreign) parent.
    pub zombies: usize,
}

/// Everything recorded about one part over the session.
#[derive(Debug, Clone, PartialEq)]
pub struct PartReport {
    pub spec: PartSpec,
    pub cgroup: Option<PathBuf>,
    pub started_unix_s: f64,
    pub stopped_unix_s: f64,
    pub starts: u32,
    pub restarts: u32,
    pub failures: u32,
    pub crashing: bool,
    /// Exit statuses of iterations that ended by themselves, counted (`exit 0`, `signal 11`).
    pub exits: BTreeMap<String, u32>,
    /// Last exit code of an iteration that ended by itself.
    pub last_exit_code: Option<i32>,
    /// The status of the iteration latlab stopped.
    pub final_status: Option<String>,
    /// User+system CPU seconds of waited-for processes (wait4 rusage).
    pub rusage_cpu_s: f64,
    /// `usage_usec` of the part's cgroup (includes everything that ran in it).
    pub cgroup_cpu_s: Option<f64>,
    /// Wall time of the iterations that ended by themselves with exit 0.
    pub clean_iterations_s: f64,
    /// The kernel's I/O accounting (parts with `account_io`).
    pub io: Option<IoReport>,
    pub pgids: Vec<i32>,
    pub stop: StopReport,
    pub notes: Vec<String>,
}

/// Running supervisor; [`Supervisor::stop`] returns the reports.
pub struct Supervisor {
    status: Arc<Mutex<Vec<PartStatus>>>,
    stop: Arc<AtomicBool>,
    wake: mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<Vec<PartReport>>>,
}

impl Supervisor {
    /// Start every part (ledger entries are written before each creation). Returns once all
    /// are running, or with the first error after undoing what was started.
    pub fn start(
        specs: Vec<PartSpec>,
        opts: Options,
        ledger: Arc<Mutex<Ledger>>,
    ) -> io::Result<Supervisor> {
        let status = Arc::new(Mutex::new(
            specs
                .iter()
                .map(|s| PartStatus {
                    profile: s.profile.clone(),
                    part: s.part.clone(),
                    ..Default::default()
                })
                .collect(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let (wake_tx, wake_rx) = mpsc::channel::<()>();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let (st, sp) = (status.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("latlab-loads".into())
            .spawn(move || {
                let link = Link {
                    status: st,
                    stop: sp,
                    wake: wake_rx,
                    ready: ready_tx,
                };
                run_thread(specs, opts, ledger, link)
            })?;
        let mut sup = Supervisor {
            status,
            stop,
            wake: wake_tx,
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(sup),
            Ok(Err(e)) => {
                sup.finish();
                Err(e)
            }
            Err(_) => {
                sup.finish();
                Err(io::Error::other("the load supervisor thread died"))
            }
        }
    }

    /// A copy of every part's status.
    pub fn status(&self) -> Vec<PartStatus> {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn finish(&mut self) -> Vec<PartReport> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.wake.send(());
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// Stop every part and wait until nothing of them remains.
    pub fn stop(mut self) -> Vec<PartReport> {
        self.finish()
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.finish();
    }
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The supervisor thread's side of its link to the [`Supervisor`].
struct Link {
    /// Every part's status, published each step.
    status: Arc<Mutex<Vec<PartStatus>>>,
    /// Set when the supervisor is stopped.
    stop: Arc<AtomicBool>,
    /// A message (or a dropped sender) cuts the wait between steps short.
    wake: mpsc::Receiver<()>,
    /// Once, when every part is started (or the first could not be).
    ready: mpsc::Sender<io::Result<()>>,
}

fn run_thread(
    specs: Vec<PartSpec>,
    opts: Options,
    ledger: Arc<Mutex<Ledger>>,
    link: Link,
) -> Vec<PartReport> {
    // Loads are SCHED_OTHER whatever the caller runs at.
    let mut parts: Vec<PartState> = Vec::new();
    let mut first_err = None;
    for (i, spec) in specs.into_iter().enumerate() {
        let mut st = PartState::new(i, spec, &opts, &ledger);
        if first_err.is_none() {
            first_err = st.start(&opts, &ledger).err();
        }
        parts.push(st);
    }
    let failed = first_err.is_some();
    let _ = link.ready.send(match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    });
    if !failed {
        supervise(&mut parts, &opts, &ledger, &link);
    }
    stop::stop_all(&mut parts, &opts, &ledger);
    parts.into_iter().map(|p| p.report).collect()
}

/// Step every part until the supervisor is stopped: sample its I/O when due, notice an exit,
/// restart; publish the status.
fn supervise(parts: &mut [PartState], opts: &Options, ledger: &Arc<Mutex<Ledger>>, link: &Link) {
    while !link.stop.load(Ordering::SeqCst) {
        for p in parts.iter_mut() {
            p.sample_io_when_due();
            part::tick(p, opts, ledger);
        }
        if let Ok(mut s) = link.status.lock() {
            for (p, s) in parts.iter().zip(s.iter_mut()) {
                p.publish(s);
            }
        }
        let _ = link.wake.recv_timeout(Duration::from_millis(50));
    }
}
