//! One command run once under a watchdog ([`Watched`]), as a load's iteration is: `latlab
//! run`'s shell actions.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::group::{create_cgroup, remaining, signal_group};
use super::spawn::{spawn_watched, Child, Spawn};
use crate::ledger::{EntryId, Ledger};

/// One command run once under a watchdog (`latlab run`'s shell actions), as a load's
/// iteration is: its own session and process group, and its own cgroup where it can have one
/// (`latlab-<pid>-action-<n>` under the cgroup-v2 root), both in the ledger before they
/// exist, so `latlab cleanup` finds them after a SIGKILL, and the watchdog kills them when
/// latlab dies. [`Watched::kill`] reaches every process it started, also one that left the
/// group with `setsid` (the cgroup's `cgroup.kill`). Dropped unfinished, it is killed and
/// waited for.
pub struct Watched {
    child: Child,
    cgroup: Option<(PathBuf, EntryId)>,
    ledger: Arc<Mutex<Ledger>>,
    /// Nothing of it is left and its ledger entries are forgotten (or left on purpose).
    done: bool,
}

/// Numbers the cgroups of [`Watched`] commands within this process.
static WATCHED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Watched {
    /// Start `sh -c command` with `env` set, its stdout and stderr on `out`, named `name` in
    /// the ledger; in a cgroup of its own under `cgroup_parent` when given. The note says why
    /// it has none when it should have had one (then its process group is all there is).
    pub fn start(
        command: &str,
        name: &str,
        env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
        out: std::os::fd::BorrowedFd<'_>,
        cgroup_parent: Option<&Path>,
        ledger: Arc<Mutex<Ledger>>,
    ) -> io::Result<(Watched, Option<String>)> {
        let mut note = None;
        let mut cgroup = None;
        if let Some(parent) = cgroup_parent {
            let n = WATCHED.fetch_add(1, Ordering::Relaxed);
            let path = parent.join(format!("latlab-{}-action-{n}", std::process::id()));
            match create_cgroup(&ledger, &path, name) {
                Ok(id) => cgroup = Some((path, id)),
                Err(e) => note = Some(format!("cannot create cgroup {}: {e}", path.display())),
            }
        }
        let spawned = spawn_watched(
            &Spawn {
                command,
                name: name.to_string(),
                env,
                out: out.as_raw_fd(),
                cgroup: cgroup.as_ref().map(|c: &(PathBuf, EntryId)| c.0.as_path()),
                cpus: None,
            },
            &ledger,
        );
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                if let Some((cg, id)) = cgroup {
                    if std::fs::remove_dir(&cg).is_ok() {
                        if let Ok(mut l) = ledger.lock() {
                            let _ = l.forget(id);
                        }
                    }
                }
                return Err(e);
            }
        };
        if let (Some((cg, _)), false) = (&cgroup, child.in_cgroup) {
            note = Some(format!("cannot move it into cgroup {}", cg.display()));
        }
        Ok((
            Watched {
                child,
                cgroup,
                ledger,
                done: false,
            },
            note,
        ))
    }

    /// Its cgroup, if it has one.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(|c| c.0.as_path())
    }

    fn cgroup_if_in(&self) -> Option<&Path> {
        self.cgroup().filter(|_| self.child.in_cgroup)
    }

    /// The command's wait status once it has ended (the watchdog passes the shell's on).
    /// Never blocks.
    pub fn try_wait(&mut self) -> io::Result<Option<i32>> {
        if let Some(s) = self.child.reaped {
            return Ok(Some(s));
        }
        let mut status = 0;
        // SAFETY: plain syscall on our own child; WNOHANG never blocks.
        match unsafe { libc::waitpid(self.child.pid, &mut status, libc::WNOHANG) } {
            0 => Ok(None),
            r if r == self.child.pid => {
                self.child.reaped = Some(status);
                Ok(Some(status))
            }
            _ => {
                let e = io::Error::last_os_error();
                // Reaped by someone else (should not happen): it is gone.
                self.child.reaped = Some(0);
                Err(e)
            }
        }
    }

    /// Live processes of it: in its process group or its cgroup (what `cmd &` left behind,
    /// also after `setsid`), the watchdog until it is reaped.
    pub fn remaining(&self) -> Vec<i32> {
        remaining(&self.child, self.cgroup_if_in()).0
    }

    /// SIGKILL every process of it: its process group, and its cgroup (`cgroup.kill`).
    pub fn kill(&mut self) {
        signal_group(&self.child, self.cgroup_if_in(), libc::SIGKILL);
    }

    /// Once it has ended and was killed: reap the watchdog, remove the cgroup when nothing is
    /// left and forget the ledger entries. Never blocks; true when nothing of it is left.
    pub fn try_finish(&mut self) -> bool {
        if self.done {
            return true;
        }
        if self.child.reaped.is_none() && !matches!(self.try_wait(), Ok(Some(_)) | Err(_)) {
            return false;
        }
        if !self.remaining().is_empty() {
            return false;
        }
        if let Some((cg, id)) = &self.cgroup {
            match std::fs::remove_dir(cg) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(_) => return false,
            }
            if let Ok(mut l) = self.ledger.lock() {
                let _ = l.forget(*id);
            }
        }
        if let Ok(mut l) = self.ledger.lock() {
            let _ = l.forget(self.child.entry);
        }
        self.done = true;
        true
    }

    /// Kill it and wait until nothing of it is left (up to [`crate::ledger::CGROUP_EMPTY_WAIT`]).
    /// Err says what is left; its ledger entries stay, for `latlab cleanup`.
    pub fn finish(mut self) -> Result<(), String> {
        self.finish_blocking()
    }

    fn finish_blocking(&mut self) -> Result<(), String> {
        self.kill();
        let t0 = Instant::now();
        while !self.try_finish() {
            if t0.elapsed() >= crate::ledger::CGROUP_EMPTY_WAIT {
                self.done = true;
                return Err(self.leftover());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// What is left of it, for a message.
    fn leftover(&self) -> String {
        let left = self.remaining();
        match self.cgroup() {
            Some(cg) => format!(
                "processes {left:?} or cgroup {} still there after {:.0} s (left in the ledger for latlab cleanup)",
                cg.display(),
                crate::ledger::CGROUP_EMPTY_WAIT.as_secs_f64()
            ),
            None => format!(
                "processes {left:?} still there after {:.0} s (left in the ledger for latlab cleanup)",
                crate::ledger::CGROUP_EMPTY_WAIT.as_secs_f64()
            ),
        }
    }

    /// Give up on it without waiting: its ledger entries stay (for `latlab cleanup`), and
    /// what is left is described.
    pub fn abandon(mut self) -> String {
        self.done = true;
        self.leftover()
    }
}

impl Drop for Watched {
    /// An early end (an error, a panic) leaves nothing of it behind.
    fn drop(&mut self) {
        if !self.done {
            let _ = self.finish_blocking();
        }
    }
}
