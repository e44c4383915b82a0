//! The loads of a session (`latlab run --load`, `latlab loads run`): glue between the plan
//! and the load supervisor of latlab-sys.
//!
//! Life cycle: [`LoadSession::prepare`] resolves every `--load` and checks tools, scratch space
//! and CPUs before anything starts (bad input fails here, with one line naming the fix);
//! [`LoadSession::start`] creates the per-run scratch directory (ledger first), generates the
//! compile tree and starts the supervisor; [`LoadSession::measurement_started`] marks where the
//! activity deltas begin; [`LoadSession::poll`] reports a required load that keeps crashing;
//! [`LoadSession::stop`] stops everything, removes the scratch directory and returns the
//! records. Dropping a session that was not stopped stops it too (panic path).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use latlab_sys::ledger::{EntryId, Ledger};
use latlab_sys::loads::profiles::{self, Metric, Resolved};
use latlab_sys::loads::supervisor::{self, PartSpec, Supervisor};
use latlab_sys::procstat::Snapshot;

mod live;
mod record;
mod start;

pub use live::LiveLoad;

/// How loads run (from the `--load-*` flags).
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Parent of the per-run scratch directory (default: /var/tmp, on the root filesystem).
    pub dir: Option<PathBuf>,
    /// CPU affinity of the loads.
    pub cpus: Option<Vec<u32>>,
    /// A load that keeps crashing ends the run with an error.
    pub required: bool,
    /// A real source tree for the compile parts.
    pub src: Option<PathBuf>,
    /// Length of the measurement (0: unknown); bounds stress-ng's `--timeout` so loads stop
    /// by themselves even if latlab dies.
    pub duration_ns: u64,
}

fn online_cpus() -> Vec<u32> {
    latlab_sys::rt::online_cpus()
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1);
            (0..n as u32).collect()
        })
}

/// One part as started: which profile it belongs to and where its log is.
#[derive(Debug, Clone)]
struct Planned {
    spec: PartSpec,
    scratch: Option<PathBuf>,
    metric: Metric,
}

pub struct LoadSession {
    resolved: Vec<Resolved>,
    opts: LoadOptions,
    scratch_parent: PathBuf,
    free_mb: u64,
    need_scratch: bool,
    n: u32,
    ledger: Option<Arc<Mutex<Ledger>>>,
    scratch: Option<(PathBuf, EntryId)>,
    planned: Vec<Planned>,
    sup: Option<Supervisor>,
    at_start: Option<Snapshot>,
    at_measure: Option<Snapshot>,
}

impl LoadSession {
    /// Resolve profiles before anything starts: unknown profile → error listing the known ones;
    /// missing tool → "stress-ng not found: apt-get install stress-ng"; load dir not writable
    /// or too small → error.
    pub fn prepare(profiles: &[String], opts: &LoadOptions) -> crate::Result<LoadSession> {
        let mut resolved = Vec::new();
        for p in profiles {
            let r = profiles::resolve(p)?;
            profiles::check_tools(&r)?;
            resolved.push(r);
        }
        let online = online_cpus();
        if let Some(cpus) = &opts.cpus {
            if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
                bail!(
                    "--load-cpus: CPU {c} is not online (online: {})",
                    latlab_core::cpulist::format_cpu_list(&online)
                );
            }
        }
        let n = opts.cpus.as_ref().map_or(online.len(), |c| c.len()).max(1) as u32;
        let builtins = || {
            resolved.iter().filter_map(|r| match r {
                Resolved::Builtin(p) => Some(*p),
                Resolved::Command(_) => None,
            })
        };
        let need_mb: u64 = builtins().map(|p| p.scratch_mb).sum();
        let need_scratch = builtins().any(|p| p.needs_scratch());
        let scratch_parent = match &opts.dir {
            // Absolute: the ledger entry must name the same directory for a `latlab cleanup`
            // started from another working directory.
            Some(d) => std::path::absolute(d).unwrap_or_else(|_| d.clone()),
            None if Path::new("/var/tmp").is_dir() => PathBuf::from("/var/tmp"),
            None => std::env::temp_dir(),
        };
        let mut free_mb = 0;
        if need_scratch {
            if !scratch_parent.is_dir() {
                bail!(
                    "--load-dir {}: not a directory; create it or choose another",
                    scratch_parent.display()
                );
            }
            let (free, writable) = latlab_sys::loads::dir_space(&scratch_parent)
                .with_context(|| format!("--load-dir {}", scratch_parent.display()))?;
            if !writable {
                bail!(
                    "--load-dir {}: not writable; choose a writable directory",
                    scratch_parent.display()
                );
            }
            free_mb = free / (1 << 20);
            if free_mb < need_mb {
                bail!(
                    "not enough space for the loads in {}: they need {need_mb} MiB, {free_mb} MiB free; use --load-dir on a larger filesystem",
                    scratch_parent.display()
                );
            }
        }
        if let Some(src) = &opts.src {
            if !src.join("Makefile").is_file() {
                bail!(
                    "--load-src {}: no Makefile there; give a source tree that builds with make",
                    src.display()
                );
            }
            if src.join("Kbuild").exists() && !src.join(".config").exists() {
                bail!(
                    "--load-src {}: a kernel tree without .config; run 'make -C {} tinyconfig' first",
                    src.display(),
                    src.display()
                );
            }
        }
        Ok(LoadSession {
            resolved,
            opts: opts.clone(),
            scratch_parent,
            free_mb,
            need_scratch,
            n,
            ledger: None,
            scratch: None,
            planned: Vec::new(),
            sup: None,
            at_start: None,
            at_measure: None,
        })
    }

    /// Profile names as resolved (for the record's config).
    #[allow(dead_code)] // for `latlab run`
    pub fn names(&self) -> Vec<String> {
        self.resolved.iter().map(|r| r.name()).collect()
    }

    /// Mark the start of measurement (after warm-up): activity deltas are taken from here.
    pub fn measurement_started(&mut self) {
        self.at_measure = Snapshot::read(Path::new("/")).ok();
    }

    /// Called about every 100 ms by the (non-RT) collector. Restarts happen on the supervisor's
    /// own thread; this reports a required load that keeps crashing.
    pub fn poll(&mut self) -> crate::Result<()> {
        let Some(sup) = &self.sup else { return Ok(()) };
        if !self.opts.required {
            return Ok(());
        }
        if let Some(s) = sup.status().into_iter().find(|s| s.crashing) {
            let log = self
                .planned
                .iter()
                .find(|p| p.spec.profile == s.profile && p.spec.part == s.part)
                .map(|p| p.spec.log.display().to_string())
                .unwrap_or_default();
            bail!(
                "load {} ({}) keeps crashing: {} failures in a row, last {}; see {log}",
                s.profile,
                s.part,
                s.consecutive_failures,
                s.last_exit.unwrap_or_else(|| "unknown".into())
            );
        }
        Ok(())
    }

    /// Current status of every part (restarts, failures) for live displays.
    #[allow(dead_code)] // for `latlab run`
    pub fn status(&self) -> Vec<supervisor::PartStatus> {
        self.sup.as_ref().map(|s| s.status()).unwrap_or_default()
    }

    fn remove_scratch(&mut self) -> Option<String> {
        let (dir, id) = self.scratch.take()?;
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Some(format!(
                    "could not remove scratch directory {}: {e}",
                    dir.display()
                ))
            }
        }
        if let Some(l) = &self.ledger {
            if let Ok(mut l) = l.lock() {
                let _ = l.forget(id);
            }
        }
        None
    }
}

impl Drop for LoadSession {
    /// Stops everything if `stop()` was not called (panic or early-error path).
    fn drop(&mut self) {
        if let Some(s) = self.sup.take() {
            let _ = s.stop();
        }
        let _ = self.remove_scratch();
    }
}
