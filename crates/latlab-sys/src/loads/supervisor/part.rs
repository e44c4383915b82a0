//! One part of a load over the session: its state, the start of each iteration, and the
//! supervision step that notices an exit, drains the group and restarts when due.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::group::{cgroup_procs, create_cgroup, group_members, remaining, signal_group};
use super::io_counters::{io_of, IoCounters, IO_SAMPLE};
use super::spawn::{spawn_watched, Child, Spawn};
use super::{now_unix, Options, PartReport, PartSpec, PartStatus, StopReport};
use crate::ledger::{EntryId, Ledger};

/// One part over the session: its spec, what is recorded about it, its live iteration.
pub(super) struct PartState {
    pub(super) spec: PartSpec,
    pub(super) report: PartReport,
    pub(super) cgroup_entry: Option<EntryId>,
    pub(super) child: Option<Child>,
    /// Earliest restart time.
    restart_at: Option<Instant>,
    quick_exits: u32,
    /// Failures since the last clean exit.
    consec: u32,
    pub(super) first_start: Instant,
    /// I/O of the finished iterations.
    pub(super) io_done: IoCounters,
    pub(super) io_samples: u64,
    io_last_sample: Option<Instant>,
    /// Time of the last sample before the stop.
    pub(super) io_end: Option<Instant>,
}

impl PartState {
    /// Part `i` of the session, not started yet; in a cgroup of its own under the options'
    /// cgroup parent (its ledger entry written first) where one can be made.
    pub(super) fn new(
        i: usize,
        spec: PartSpec,
        opts: &Options,
        ledger: &Arc<Mutex<Ledger>>,
    ) -> PartState {
        let mut st = PartState {
            report: PartReport {
                spec: spec.clone(),
                cgroup: None,
                started_unix_s: now_unix(),
                stopped_unix_s: 0.0,
                starts: 0,
                restarts: 0,
                failures: 0,
                crashing: false,
                exits: BTreeMap::new(),
                last_exit_code: None,
                final_status: None,
                rusage_cpu_s: 0.0,
                cgroup_cpu_s: None,
                clean_iterations_s: 0.0,
                io: None,
                pgids: Vec::new(),
                stop: StopReport::default(),
                notes: Vec::new(),
            },
            spec,
            cgroup_entry: None,
            child: None,
            restart_at: None,
            quick_exits: 0,
            consec: 0,
            first_start: Instant::now(),
            io_done: IoCounters::default(),
            io_samples: 0,
            io_last_sample: None,
            io_end: None,
        };
        if let Some(parent) = &opts.cgroup_parent {
            let name: String = format!("{}-{i}-{}", opts.tag, st.spec.part)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let path = parent.join(name);
            match create_cgroup(ledger, &path, &st.spec.profile) {
                Ok(id) => {
                    st.cgroup_entry = Some(id);
                    st.report.cgroup = Some(path);
                }
                Err(e) => st
                    .report
                    .notes
                    .push(format!("no cgroup ({}): {e}", path.display())),
            }
        }
        st
    }

    /// Start its first iteration; the error names the part.
    pub(super) fn start(&mut self, opts: &Options, ledger: &Arc<Mutex<Ledger>>) -> io::Result<()> {
        match spawn(self, opts, ledger) {
            Ok(c) => {
                self.report.pgids.push(c.pid);
                self.report.starts = 1;
                self.child = Some(c);
                Ok(())
            }
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "could not start load {} ({}): {e}",
                    self.spec.profile, self.spec.part
                ),
            )),
        }
    }

    /// Sample its I/O when the last sample is old enough.
    pub(super) fn sample_io_when_due(&mut self) {
        // Without a cgroup the members are found by a scan of /proc: less often.
        let every = if self.report.cgroup.is_some() {
            IO_SAMPLE
        } else {
            IO_SAMPLE * 5
        };
        if self.io_last_sample.is_none_or(|t| t.elapsed() >= every) {
            sample_io(self);
        }
    }

    /// Its status, as `poll` sees it, into `s`.
    pub(super) fn publish(&self, s: &mut PartStatus) {
        s.restarts = self.report.restarts;
        s.failures = self.report.failures;
        s.crashing = self.report.crashing;
        s.consecutive_failures = self.consec;
        s.last_exit = last_exit(self);
    }
}

/// Start one iteration of a part: latlab's own executable as its watchdog, spawned with
/// `posix_spawn` (no copy of latlab's address space; see the supervisor's docs) and held on the
/// pipe until it is recorded.
fn spawn(p: &PartState, opts: &Options, ledger: &Arc<Mutex<Ledger>>) -> io::Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p.spec.log)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.spec.log.display())))?;
    spawn_watched(
        &Spawn {
            command: &p.spec.command,
            name: format!("{} ({})", p.spec.profile, p.spec.part),
            env: vec![("LATLAB_LOAD".into(), p.spec.profile.clone().into())],
            out: log.as_raw_fd(),
            cgroup: p.report.cgroup.as_deref(),
            // Without --load-cpus: every CPU latlab could use, not the housekeeping CPUs this
            // thread is confined to (`rt::confine_calling_thread`).
            cpus: Some(opts.cpus.clone().unwrap_or_else(crate::rt::initial_cpus)),
        },
        ledger,
    )
}

fn last_exit(p: &PartState) -> Option<String> {
    p.report
        .final_status
        .clone()
        .or_else(|| p.report.last_exit_code.map(|c| format!("exit {c}")))
}

/// Reap the leader without blocking; adds its rusage. True once reaped.
pub(super) fn reap(c: &mut Child, report: &mut PartReport) -> bool {
    if c.reaped.is_some() {
        return true;
    }
    let mut status = 0;
    // SAFETY: rusage is plain data; pid is our child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(c.pid, &mut status, libc::WNOHANG, &mut ru) };
    if r == c.pid {
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        report.rusage_cpu_s += tv(ru.ru_utime) + tv(ru.ru_stime);
        // The kernel's read_bytes/write_bytes of the iteration and what it reaped, in
        // 512-byte units: a lower bound that misses nothing the samples missed at the end.
        c.io.max(&IoCounters {
            read_bytes: (ru.ru_inblock.max(0) as u64) * 512,
            write_bytes: (ru.ru_oublock.max(0) as u64) * 512,
            ..IoCounters::default()
        });
        c.reaped = Some(status);
        true
    } else if r < 0 {
        // ECHILD: someone else reaped it (should not happen); treat as gone.
        c.reaped = Some(0);
        true
    } else {
        false
    }
}

pub(super) fn describe(status: i32) -> (String, Option<i32>) {
    if libc::WIFEXITED(status) {
        let c = libc::WEXITSTATUS(status);
        (format!("exit {c}"), Some(c))
    } else if libc::WIFSIGNALED(status) {
        (format!("signal {}", libc::WTERMSIG(status)), None)
    } else {
        (format!("status {status}"), None)
    }
}

/// Sample the I/O of a part's live iteration (see [`IoCounters`]): every process of its
/// cgroup, or of its process group without one; zombies too, whose counts are not yet
/// passed to their parent.
pub(super) fn sample_io(p: &mut PartState) {
    if !p.spec.account_io {
        return;
    }
    let Some(c) = &mut p.child else { return };
    if c.reaped.is_some() {
        return;
    }
    let pids: Vec<i32> = match &p.report.cgroup {
        Some(cg) => cgroup_procs(cg),
        None => group_members(c.pid).into_iter().map(|m| m.0).collect(),
    };
    c.io.max(&io_of(&pids));
    p.io_samples += 1;
    p.io_last_sample = Some(Instant::now());
}

/// One supervision step: notice an exit, drain the group, restart when due.
pub(super) fn tick(p: &mut PartState, opts: &Options, ledger: &Arc<Mutex<Ledger>>) {
    if let Some(c) = &mut p.child {
        if c.reaped.is_none() {
            if !reap(c, &mut p.report) {
                return;
            }
            let status = c.reaped.unwrap_or(0);
            let (desc, code) = describe(status);
            *p.report.exits.entry(desc).or_insert(0) += 1;
            p.report.last_exit_code = code;
            let ran = c.started.elapsed();
            if code == Some(0) {
                p.consec = 0;
                p.report.crashing = false;
                p.report.clean_iterations_s += ran.as_secs_f64();
            } else {
                p.report.failures += 1;
                p.consec += 1;
                p.report.crashing = p.consec >= opts.crash_after;
            }
            // Back off from a load that exits at once, so it cannot become a fork storm.
            let delay = if ran < Duration::from_secs(1) {
                p.quick_exits += 1;
                Duration::from_millis(100 << p.quick_exits.min(5).saturating_sub(1))
            } else {
                p.quick_exits = 0;
                Duration::ZERO
            };
            p.restart_at = Some(Instant::now() + delay);
        }
        // The leader is gone: whatever it left behind in its group goes too.
        let (live, _) = remaining(c, p.report.cgroup.as_deref());
        if !live.is_empty() {
            if !c.drained {
                signal_group(c, p.report.cgroup.as_deref(), libc::SIGKILL);
                c.drained = true;
            }
            return;
        }
        if let Ok(mut l) = ledger.lock() {
            let _ = l.forget(c.entry);
        }
        p.io_done.add(&c.io);
        p.child = None;
    }
    if p.restart_at.is_some_and(|t| Instant::now() >= t) {
        p.restart_at = None;
        match spawn(p, opts, ledger) {
            Ok(c) => {
                p.report.restarts += 1;
                p.report.starts += 1;
                if p.report.pgids.len() < 64 {
                    p.report.pgids.push(c.pid);
                }
                p.child = Some(c);
            }
            Err(e) => {
                p.report.failures += 1;
                p.consec += 1;
                p.report.crashing = p.consec >= opts.crash_after;
                p.report.notes.push(format!("restart failed: {e}"));
                p.restart_at = Some(Instant::now() + Duration::from_secs(1));
            }
        }
    }
}
