//! Loads: the seeds' workloads as supervised profiles that never leave a process behind.
//!
//! [`profiles`] is the table of what to run (data, scaled to the CPU count), [`gentree`] makes
//! the C tree the compile parts build, [`supervisor`] runs each part in its own process group
//! and cgroup, restarts it when it exits and stops it completely, and [`metrics`] reads the
//! loads' own throughput from their logs.

pub mod gentree;
pub mod metrics;
pub mod profiles;
pub mod supervisor;

pub use profiles::{Profile, Resolved, PROFILES};
pub use supervisor::{PartReport, PartSpec, Supervisor};

/// Free space (bytes available to unprivileged users) and writability of a directory.
pub fn dir_space(dir: &std::path::Path) -> std::io::Result<(u64, bool)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: c is a valid path; st is plain data filled by the kernel.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // access() also reports EROFS for a read-only mount, which root would otherwise pass.
    let writable = unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0;
    Ok((st.f_bavail as u64 * st.f_frsize as u64, writable))
}
