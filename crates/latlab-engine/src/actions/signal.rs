//! A signal action's target: who it names now, whether it may be signalled (init and other
//! users' processes only when the action allows them), and the signal sent through a pidfd.

use std::path::Path;

use super::Target;

/// The pid a target names now.
pub(super) fn resolve(t: Target) -> i32 {
    match t {
        Target::Pid(p) => p,
        // SAFETY: getppid has no preconditions.
        Target::Parent => unsafe { libc::getppid() },
    }
}

/// Why a signal to `pid` (what `target` names now) is not to be sent without the action's
/// opt-in, or None: pid 1 (init: SIGINT makes systemd reboot, SIGKILL panics the kernel)
/// without `allow-init`, a process whose real or effective uid is not latlab's real uid
/// without `allow-foreign` (as root, kill(2) reaches every process).
pub(super) fn refusal(
    pid: i32,
    target: Target,
    allow_init: bool,
    allow_foreign: bool,
) -> Option<String> {
    let who = match target {
        Target::Parent => format!("latlab's parent (pid {pid})"),
        Target::Pid(_) => format!("pid {pid}"),
    };
    if pid == 1 && !allow_init {
        let why = if target == Target::Parent {
            " (latlab was orphaned, or runs as a service)"
        } else {
            ""
        };
        return Some(format!(
            "{who} is init{why}, which a signal can stop or make reboot the system; add allow-init to the action to send it anyway"
        ));
    }
    if !allow_foreign {
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        if let Some((real, effective)) = latlab_sys::tasks::uids(Path::new("/"), pid) {
            if real != me || effective != me {
                let uid = if real != me { real } else { effective };
                return Some(format!(
                    "{who} belongs to another user (uid {uid}; latlab runs as uid {me}); add allow-foreign to the action to send it anyway"
                ));
            }
        }
    }
    None
}

/// Send signal `num` to `pid` unless [`refusal`] says no. Through a pidfd where the kernel
/// has them (5.3): the process checked is the process signalled, even if it exits and its
/// pid is reused in between (the signal then fails with ESRCH instead of reaching the pid's
/// new owner).
pub(super) fn send_signal(
    pid: i32,
    target: Target,
    num: i32,
    allow_init: bool,
    allow_foreign: bool,
) -> Result<(), String> {
    use std::os::fd::{FromRawFd, OwnedFd};
    if pid == 1 && !allow_init {
        return Err(format!(
            "not sent: {}",
            refusal(pid, target, allow_init, allow_foreign).unwrap_or_default()
        ));
    }
    // SAFETY: plain syscall; a non-negative result is a new descriptor we own.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    let pidfd = if raw >= 0 {
        // SAFETY: raw is a fresh descriptor.
        Some(unsafe { OwnedFd::from_raw_fd(raw) })
    } else {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOSYS) {
            return Err(e.to_string());
        }
        None
    };
    if let Some(why) = refusal(pid, target, allow_init, allow_foreign) {
        return Err(format!("not sent: {why}"));
    }
    let r = match &pidfd {
        Some(fd) => {
            use std::os::fd::AsRawFd;
            // SAFETY: plain syscall on our pidfd; no siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    num,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            }
        }
        // SAFETY: plain syscall.
        None => (unsafe { libc::kill(pid, num) }) as libc::c_long,
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}
