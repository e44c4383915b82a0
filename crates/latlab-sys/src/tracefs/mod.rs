//! The tracefs flight recorder: latlab's own instance (`instances/latlab-<pid>`), recording the
//! scheduler, IRQ and timer events in overwrite mode until a spike stops it.
//!
//! Why an instance: events, options, triggers and buffers are per instance, so latlab never
//! touches the top-level buffer other tools may be using. Lifecycle (measured facts in
//! `shared/notes/tracefs.md`):
//!
//! 1. the ledger entry is written *before* the `mkdir` (and before a `mount`), so
//!    `latlab cleanup` can remove what a SIGKILL left behind;
//! 2. a new instance starts with tracing ON: write `0` first, then `trace_clock=mono` (it clears
//!    the buffer, so before anything else), buffer size, overwrite, the events;
//! 3. a `traceoff if buf ~ "*LATLAB_STOP*"` trigger on `ftrace/print` lets one marker write
//!    (~1.6 µs, on a pre-opened fd) stop recording in the kernel with the marker as the last
//!    event; without triggers the collector writes `0` to `tracing_on` after the marker;
//! 4. removal: tracing off, events and trigger off, every fd into the instance closed (rmdir
//!    fails with EBUSY otherwise), `rmdir`.
//!
//! The tracefs root is a parameter, so unit tests run against a fake directory tree.
//!
//! Here: tracefs found or mounted, leftover instances; `events` (what an instance records),
//! `recorder` (an instance's life), `layout` (what the binary decoder needs of it) and
//! `buffers` (its per-CPU buffers, by path).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::ledger::{Entry, EntryId, Ledger};

mod buffers;
mod events;
mod layout;
mod recorder;

pub use buffers::{
    clear_at, cpu_stats_at, cpu_stats_of, open_cpu_raw_at, overruns_at, read_pages, read_pages_into,
};
pub use events::{InstanceSpec, EVENTS, PROFILE_EVENTS, STOP_TRIGGER, TIMER_EVENTS};
pub use layout::RawLayout;
pub use recorder::{Recorder, RecorderConfig};

pub const DEFAULT_ROOT: &str = "/sys/kernel/tracing";

/// Where tracefs may be mounted: its own mount point and the one below debugfs.
pub const MOUNT_POINTS: &[&str] = &[DEFAULT_ROOT, "/sys/kernel/debug/tracing"];

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("tracefs is not available at {path}: {why}")]
    NoTracefs { path: PathBuf, why: String },
    #[error("tracefs at {path} is not writable: {source} (run as root)")]
    ReadOnly { path: PathBuf, source: io::Error },
    #[error("the kernel lacks trace events latlab needs: {}", .0.join(", "))]
    MissingEvents(Vec<String>),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> TraceError + '_ {
    move |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, v: &str) -> Result<(), TraceError> {
    fs::write(path, v).map_err(io_err(path))
}

/// tracefs, found or mounted.
#[derive(Debug)]
pub struct Tracefs {
    pub root: PathBuf,
    /// The ledger entry of our own mount, when latlab mounted it.
    pub mounted: Option<EntryId>,
}

/// Use tracefs at `root`, mounting it there if it is not mounted (ledger entry first).
pub fn ensure_mounted(root: &Path, ledger: &mut Ledger) -> Result<Tracefs, TraceError> {
    if root.join("instances").is_dir() {
        return Ok(Tracefs {
            root: root.to_path_buf(),
            mounted: None,
        });
    }
    if !root.is_dir() {
        return Err(TraceError::NoTracefs {
            path: root.into(),
            why: "no such directory (kernel without CONFIG_TRACING?)".into(),
        });
    }
    let id = ledger
        .add(Entry::TracefsMount { path: root.into() })
        .map_err(io_err(ledger.path()))?;
    let c = std::ffi::CString::new(root.as_os_str().as_encoded_bytes()).map_err(|_| {
        TraceError::NoTracefs {
            path: root.into(),
            why: "path holds a NUL byte".into(),
        }
    })?;
    // SAFETY: valid NUL-terminated strings; a null data pointer is allowed.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 || !root.join("instances").is_dir() {
        let why = io::Error::last_os_error().to_string();
        let _ = ledger.forget(id);
        return Err(TraceError::NoTracefs {
            path: root.into(),
            why: format!("not mounted and mounting failed: {why}"),
        });
    }
    Ok(Tracefs {
        root: root.to_path_buf(),
        mounted: Some(id),
    })
}

/// Instances named `latlab-<pid>` or `latlab-<pid>-<suffix>` whose process is gone (left by a
/// killed run).
pub fn leftover_instances(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(root.join("instances")) else {
        return vec![];
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix("latlab-")?;
            let pid: u32 = rest.split('-').next()?.parse().ok()?;
            let alive = Path::new(&format!("/proc/{pid}")).exists();
            (!alive).then(|| e.path())
        })
        .collect();
    v.sort();
    v
}

/// True when the kernel reports running under a hypervisor (silent gaps are then named so).
pub fn virtualized() -> bool {
    fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
    })
}

#[cfg(test)]
mod tests;
